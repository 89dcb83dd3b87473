// generate.c — see generate.h. The recurrent decoder (one block of tokens through every layer
// with the per-layer conv tail and KDA state), the HF-style sampler and the generation loop.
#include "generate.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kda_decoder {
    kda_config cfg;
    int n_params;
    kda_param *params;        // copy of the model's table (offsets into w)
    kda_layer_params *layer;  // copy
    int embed, final_norm;
    const float *w;           // fp32 weights on the host
    float *w_owned;           // the host copy when the model lives on another backend
    int L, d, H, K, Vd, Dk, Dv, Dg, r, F, W, NV, Cc; // Cc = 2·Dk + Dv conv channels (q | k | v)
    // recurrent state
    float *conv; // [L][W−1][Cc], oldest first
    float *S;    // [L][H][K][Vd]
    // scratch for a block of up to KDA_GEN_BLOCK tokens
    float *h, *xn, *pre, *ext, *qkv, *f_low, *f, *b, *g_low, *u, *o, *y, *tmp, *x2, *gate, *up;
    float *h_last, *x_last, *logits; // [d], [d], [NV]
    float *cq, *ck, *cdecay;         // [K] per-head core scratch
    double *ce, *co;                 // [Vd]
    long pos;
    int logits_ready;
    size_t state_bytes, total_bytes;
};

#define WT(d, idx) ((d)->w + (d)->params[idx].offset)

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static float *alloc_f(kda_decoder *d, size_t n) {
    d->total_bytes += n * sizeof(float);
    return kda_calloc(n, sizeof(float));
}

kda_decoder *kda_decoder_create(const kda_model *m) {
    const kda_config *c = &m->cfg;
    KDA_CHECK(c->num_v_heads == c->num_heads, "the decoder needs num_v_heads == num_heads (got %d, %d)",
              c->num_v_heads, c->num_heads);
    kda_decoder *d = kda_calloc(1, sizeof *d);
    d->cfg = *c;
    d->n_params = m->n_params;
    d->params = kda_malloc((size_t)m->n_params * sizeof(kda_param));
    memcpy(d->params, m->params, (size_t)m->n_params * sizeof(kda_param));
    d->layer = kda_malloc((size_t)c->num_hidden_layers * sizeof(kda_layer_params));
    memcpy(d->layer, m->layer, (size_t)c->num_hidden_layers * sizeof(kda_layer_params));
    d->embed = m->embed;
    d->final_norm = m->final_norm;
    if (!strcmp(m->ops->name, "cpu")) {
        d->w = m->master;
    } else { // device memory: one host copy of the fp32 masters
        d->w_owned = alloc_f(d, m->n_floats);
        m->ops->to_host(d->w_owned, m->master, m->n_floats * sizeof(float));
        d->w = d->w_owned;
    }
    d->L = c->num_hidden_layers;
    d->d = c->hidden_size;
    d->H = c->num_heads;
    d->K = c->head_dim;
    d->Vd = c->head_v_dim;
    d->Dk = c->key_dim;
    d->Dv = c->value_dim;
    d->Dg = c->num_heads * c->head_dim;
    d->r = c->head_v_dim;
    d->F = c->intermediate_size;
    d->W = c->conv_size;
    d->NV = c->vocab_size;
    d->Cc = 2 * d->Dk + d->Dv;
    size_t conv_n = (size_t)d->L * (d->W - 1) * d->Cc, S_n = (size_t)d->L * d->H * d->K * d->Vd;
    d->conv = alloc_f(d, conv_n);
    d->S = alloc_f(d, S_n);
    d->state_bytes = (conv_n + S_n) * sizeof(float);
    size_t NB = KDA_GEN_BLOCK;
    d->h = alloc_f(d, NB * d->d);
    d->xn = alloc_f(d, NB * d->d);
    d->pre = alloc_f(d, NB * d->Cc);
    d->ext = alloc_f(d, (NB + d->W - 1) * d->Cc);
    d->qkv = alloc_f(d, NB * d->Cc);
    d->f_low = alloc_f(d, NB * d->r);
    d->f = alloc_f(d, NB * d->Dg);
    d->b = alloc_f(d, NB * d->H);
    d->g_low = alloc_f(d, NB * d->r);
    d->u = alloc_f(d, NB * d->Dv);
    d->o = alloc_f(d, NB * d->Dv);
    d->y = alloc_f(d, NB * d->Dv);
    d->tmp = alloc_f(d, NB * d->d);
    d->x2 = alloc_f(d, NB * d->d);
    d->gate = alloc_f(d, NB * d->F);
    d->up = alloc_f(d, NB * d->F);
    d->h_last = alloc_f(d, d->d);
    d->x_last = alloc_f(d, d->d);
    d->logits = alloc_f(d, d->NV);
    d->cq = alloc_f(d, d->K);
    d->ck = alloc_f(d, d->K);
    d->cdecay = alloc_f(d, d->K);
    d->ce = kda_calloc((size_t)d->Vd, sizeof(double));
    d->co = kda_calloc((size_t)d->Vd, sizeof(double));
    d->total_bytes += 2 * (size_t)d->Vd * sizeof(double);
    return d;
}

void kda_decoder_free(kda_decoder *d) {
    if (!d) return;
    float *bufs[] = {d->w_owned, d->conv, d->S, d->h, d->xn, d->pre, d->ext, d->qkv, d->f_low, d->f, d->b,
                     d->g_low, d->u, d->o, d->y, d->tmp, d->x2, d->gate, d->up, d->h_last, d->x_last, d->logits, d->cq, d->ck, d->cdecay};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(d->ce);
    free(d->co);
    free(d->params);
    free(d->layer);
    free(d);
}

void kda_decoder_reset(kda_decoder *d) {
    memset(d->conv, 0, (size_t)d->L * (d->W - 1) * d->Cc * sizeof(float));
    memset(d->S, 0, (size_t)d->L * d->H * d->K * d->Vd * sizeof(float));
    d->pos = 0;
    d->logits_ready = 0;
}

long kda_decoder_position(const kda_decoder *d) { return d->pos; }
size_t kda_decoder_state_bytes(const kda_decoder *d) { return d->state_bytes; }
size_t kda_decoder_total_bytes(const kda_decoder *d) { return d->total_bytes; }

// ---- the math of one block (kda-model.md §2.3, fp32 as the CPU backend computes it) ---------

// y[n, 0:O) (row stride ldy) = x[n, 0:In]·W[O, In]ᵀ (+ bias)
static void linear(const float *x, const float *Wt, const float *bias, float *y, int n, int In, int O, int ldy) {
    if (n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, O, In, 1.0f, Wt, In, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, O, In, 1.0f, x, In, Wt, In, 0.0f, y, ldy);
    if (bias)
        for (int t = 0; t < n; t++)
            for (int j = 0; j < O; j++) y[(size_t)t * ldy + j] += bias[j];
}

static void rmsnorm(const float *x, const float *w, float *y, int n, int dim, float eps) {
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * dim;
        float *yr = y + (size_t)t * dim;
        double ss = 0;
        for (int j = 0; j < dim; j++) ss += (double)xr[j] * xr[j];
        float rs = (float)(1.0 / sqrt(ss / dim + eps));
        for (int j = 0; j < dim; j++) yr[j] = xr[j] * rs * w[j];
    }
}

// Causal depthwise conv + SiLU over the block, continuing from the layer's tail (§2.3 step 2);
// the tail then holds the block's last W−1 inputs.
static void conv_block(kda_decoder *d, int l, int n) {
    const kda_layer_params *p = &d->layer[l];
    int W = d->W, Cc = d->Cc, Dk = d->Dk;
    float *tail = d->conv + (size_t)l * (W - 1) * Cc;
    memcpy(d->ext, tail, (size_t)(W - 1) * Cc * sizeof(float));
    memcpy(d->ext + (size_t)(W - 1) * Cc, d->pre, (size_t)n * Cc * sizeof(float));
    const float *wq = WT(d, p->q_conv), *wk = WT(d, p->k_conv), *wv = WT(d, p->v_conv);
    for (int t = 0; t < n; t++)
        for (int c = 0; c < Cc; c++) {
            const float *wc = c < Dk ? wq + (size_t)c * W : c < 2 * Dk ? wk + (size_t)(c - Dk) * W
                                                                       : wv + (size_t)(c - 2 * Dk) * W;
            float acc = 0;
            for (int j = 0; j < W; j++) acc += wc[j] * d->ext[(size_t)(t + j) * Cc + c];
            d->qkv[(size_t)t * Cc + c] = acc * sigmoidf(acc);
        }
    memcpy(tail, d->ext + (size_t)n * Cc, (size_t)(W - 1) * Cc * sizeof(float));
}

// The KDA core for the block's tokens in order (§2.4, §2.5, §3.1), state S of layer l.
static void core_block(kda_decoder *d, int l, int n) {
    const kda_layer_params *p = &d->layer[l];
    int H = d->H, K = d->K, Vd = d->Vd, Dk = d->Dk, Cc = d->Cc;
    const float *A_log = WT(d, p->A_log), *dt_bias = WT(d, p->dt_bias);
    float scale = (float)(1.0 / sqrt((double)K));
    float *q = d->cq, *k = d->ck, *decay = d->cdecay;
    double *e = d->ce, *o = d->co;
    for (int t = 0; t < n; t++) {
        const float *row = d->qkv + (size_t)t * Cc;
        for (int h = 0; h < H; h++) {
            float *S = d->S + (((size_t)l * H + h) * K) * Vd;
            const float *qr = row + h * K, *kr = row + Dk + h * K, *v = row + 2 * Dk + h * Vd;
            double sq = 0, sk = 0;
            for (int j = 0; j < K; j++) {
                sq += (double)qr[j] * qr[j];
                sk += (double)kr[j] * kr[j];
            }
            float iq = (float)(1.0 / sqrt(sq + 1e-6)), ik = (float)(1.0 / sqrt(sk + 1e-6));
            double a = exp((double)A_log[h]);
            for (int j = 0; j < K; j++) {
                q[j] = qr[j] * iq * scale;
                k[j] = kr[j] * ik;
                double z = (double)d->f[(size_t)t * d->Dg + h * K + j] + dt_bias[h * K + j];
                double sp = z > 20 ? z : log1p(exp(z));
                decay[j] = (float)exp(-a * sp);
            }
            float beta = sigmoidf(d->b[(size_t)t * H + h]);
            // 1. decay rows, 2. e = v − Sᵀk
            for (int i = 0; i < Vd; i++) e[i] = v[i];
            for (int j = 0; j < K; j++) {
                float *Sj = S + (size_t)j * Vd;
                for (int i = 0; i < Vd; i++) {
                    Sj[i] *= decay[j];
                    e[i] -= (double)Sj[i] * k[j];
                }
            }
            // 3. S += β·k·eᵀ, 4. o = Sᵀ(s·q)
            for (int i = 0; i < Vd; i++) o[i] = 0;
            for (int j = 0; j < K; j++) {
                float *Sj = S + (size_t)j * Vd;
                float bk = beta * k[j];
                for (int i = 0; i < Vd; i++) {
                    Sj[i] += bk * (float)e[i];
                    o[i] += (double)Sj[i] * q[j];
                }
            }
            float *orow = d->o + (size_t)t * d->Dv + h * Vd;
            for (int i = 0; i < Vd; i++) orow[i] = (float)o[i];
        }
    }
}

static void layer_block(kda_decoder *d, int l, int n) {
    const kda_layer_params *p = &d->layer[l];
    int dm = d->d, Dk = d->Dk, Dv = d->Dv, Cc = d->Cc, H = d->H, Vd = d->Vd, F = d->F, r = d->r;
    float eps = (float)d->cfg.norm_eps;
    rmsnorm(d->h, WT(d, p->attn_norm), d->xn, n, dm, eps);
    linear(d->xn, WT(d, p->q_proj), NULL, d->pre, n, dm, Dk, Cc);
    linear(d->xn, WT(d, p->k_proj), NULL, d->pre + Dk, n, dm, Dk, Cc);
    linear(d->xn, WT(d, p->v_proj), NULL, d->pre + 2 * Dk, n, dm, Dv, Cc);
    conv_block(d, l, n);
    linear(d->xn, WT(d, p->f_proj0), NULL, d->f_low, n, dm, r, r);
    linear(d->f_low, WT(d, p->f_proj1), NULL, d->f, n, r, d->Dg, d->Dg);
    linear(d->xn, WT(d, p->b_proj), NULL, d->b, n, dm, H, H);
    linear(d->xn, WT(d, p->g_proj0), NULL, d->g_low, n, dm, r, r);
    linear(d->g_low, WT(d, p->g_proj1), WT(d, p->g_proj1_bias), d->u, n, r, Dv, Dv);
    core_block(d, l, n);
    // gated RMSNorm per (token, head) over Vd
    const float *wo = WT(d, p->o_norm);
    for (int row = 0; row < n * H; row++) {
        const float *orow = d->o + (size_t)row * Vd, *urow = d->u + (size_t)row * Vd;
        float *yr = d->y + (size_t)row * Vd;
        double ss = 0;
        for (int j = 0; j < Vd; j++) ss += (double)orow[j] * orow[j];
        float rs = (float)(1.0 / sqrt(ss / Vd + eps));
        for (int j = 0; j < Vd; j++) yr[j] = orow[j] * rs * wo[j] * sigmoidf(urow[j]);
    }
    linear(d->y, WT(d, p->o_proj), NULL, d->tmp, n, Dv, dm, dm);
    for (size_t i = 0; i < (size_t)n * dm; i++) d->h[i] += d->tmp[i];
    // MLP
    rmsnorm(d->h, WT(d, p->mlp_norm), d->x2, n, dm, eps);
    linear(d->x2, WT(d, p->gate_proj), NULL, d->gate, n, dm, F, F);
    linear(d->x2, WT(d, p->up_proj), NULL, d->up, n, dm, F, F);
    for (size_t i = 0; i < (size_t)n * F; i++) d->gate[i] = d->gate[i] * sigmoidf(d->gate[i]) * d->up[i];
    linear(d->gate, WT(d, p->down_proj), NULL, d->tmp, n, F, dm, dm);
    for (size_t i = 0; i < (size_t)n * dm; i++) d->h[i] += d->tmp[i];
}

void kda_decoder_feed(kda_decoder *d, const int32_t *ids, int n) {
    KDA_CHECK(n >= 0, "negative token count %d", n);
    const float *E = WT(d, d->embed);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->NV)
            kda_die("token id %d is outside the model's vocabulary [0, %d): check the tokenizer against vocab_size",
                    ids[i], d->NV);
    for (int s = 0; s < n; s += KDA_GEN_BLOCK) {
        int nb = n - s < KDA_GEN_BLOCK ? n - s : KDA_GEN_BLOCK;
        for (int t = 0; t < nb; t++)
            memcpy(d->h + (size_t)t * d->d, E + (size_t)ids[s + t] * d->d, (size_t)d->d * sizeof(float));
        for (int l = 0; l < d->L; l++) layer_block(d, l, nb);
        memcpy(d->h_last, d->h + (size_t)(nb - 1) * d->d, (size_t)d->d * sizeof(float));
        d->pos += nb;
        d->logits_ready = 0;
    }
}

const float *kda_decoder_logits(kda_decoder *d) {
    KDA_CHECK(d->pos > 0, "logits requested before any token was fed");
    if (!d->logits_ready) {
        rmsnorm(d->h_last, WT(d, d->final_norm), d->x_last, 1, d->d, (float)d->cfg.norm_eps);
        linear(d->x_last, WT(d, d->embed), NULL, d->logits, 1, d->d, d->NV, d->NV);
        d->logits_ready = 1;
    }
    return d->logits;
}

// ---- sampling ---------------------------------------------------------------------------------

typedef struct {
    float x;    // processed logit
    int32_t id;
} candidate;

struct kda_sampler {
    kda_sampling o;
    int NV;
    kda_rng rng;
    uint8_t *seen;   // [NV]
    candidate *c;    // [NV]
    float *scratch;  // [NV] for the top-k selection
    double *p;       // [NV] unnormalised probabilities of the candidates
};

kda_sampler *kda_sampler_create(int vocab_size, const kda_sampling *o, uint64_t seed) {
    if (!(o->temperature >= 0) || !isfinite(o->temperature))
        kda_die("sampling: temperature must be >= 0 (0 = greedy), got %g", (double)o->temperature);
    if (o->top_k < 0) kda_die("sampling: top-k must be >= 0 (0 = off), got %d", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1)) kda_die("sampling: top-p must be in (0, 1] (1 = off), got %g", (double)o->top_p);
    if (!(o->repetition_penalty > 0) || !isfinite(o->repetition_penalty))
        kda_die("sampling: repetition penalty must be > 0 (1 = off), got %g", (double)o->repetition_penalty);
    KDA_CHECK(vocab_size > 0, "vocab_size %d", vocab_size);
    kda_sampler *s = kda_calloc(1, sizeof *s);
    s->o = *o;
    s->NV = vocab_size;
    kda_rng_seed(&s->rng, seed);
    s->seen = kda_calloc((size_t)vocab_size, 1);
    s->c = kda_malloc((size_t)vocab_size * sizeof(candidate));
    s->scratch = kda_malloc((size_t)vocab_size * sizeof(float));
    s->p = kda_malloc((size_t)vocab_size * sizeof(double));
    return s;
}

void kda_sampler_free(kda_sampler *s) {
    if (!s) return;
    free(s->seen);
    free(s->c);
    free(s->scratch);
    free(s->p);
    free(s);
}

void kda_sampler_reset(kda_sampler *s) { memset(s->seen, 0, (size_t)s->NV); }

void kda_sampler_observe(kda_sampler *s, int32_t id) {
    KDA_CHECK(id >= 0 && id < s->NV, "token id %d outside [0, %d)", id, s->NV);
    s->seen[id] = 1;
}

// Most probable first; equal values by id, so the order is total and runs are reproducible.
static int by_value_desc(const void *pa, const void *pb) {
    const candidate *a = pa, *b = pb;
    if (a->x != b->x) return a->x > b->x ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

// The k-th largest of v[0..n) (1 <= k <= n), by quickselect; v is reordered.
static float kth_largest(float *v, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return v[want];
}

int32_t kda_sampler_pick(kda_sampler *s, const float *logits) {
    int NV = s->NV, n = 0;
    float rp = s->o.repetition_penalty;
    candidate *c = s->c;
    for (int i = 0; i < NV; i++) {
        float x = logits[i];
        if (rp != 1.0f && s->seen[i]) x = x < 0 ? x * rp : x / rp;
        c[i] = (candidate){x, i};
    }
    if (s->o.temperature <= 0) { // greedy: the first maximum
        int best = 0;
        for (int i = 1; i < NV; i++)
            if (c[i].x > c[best].x) best = i;
        return best;
    }
    for (int i = 0; i < NV; i++) {
        float x = c[i].x / s->o.temperature;
        if (x > -INFINITY) c[n++] = (candidate){x, i}; // drops -inf and NaN
    }
    KDA_CHECK(n > 0, "every logit is -inf or NaN");
    if (s->o.top_k > 0 && s->o.top_k < n) { // keep every value >= the k-th largest (ties stay)
        for (int i = 0; i < n; i++) s->scratch[i] = c[i].x;
        float kth = kth_largest(s->scratch, n, s->o.top_k);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (c[i].x >= kth) c[m++] = c[i];
        n = m;
    }
    if (s->o.top_p < 1.0f) qsort(c, (size_t)n, sizeof(candidate), by_value_desc);
    float mx = c[0].x;
    for (int i = 1; i < n; i++) mx = c[i].x > mx ? c[i].x : mx;
    double Z = 0;
    for (int i = 0; i < n; i++) Z += s->p[i] = exp((double)c[i].x - mx);
    if (s->o.top_p < 1.0f) { // keep a token while the mass ranked above it is below top_p
        double above = 0;
        int keep = 0;
        while (keep < n && above < s->o.top_p * Z) above += s->p[keep++];
        n = keep; // >= 1: nothing is ranked above the first
        Z = above;
    }
    double u = kda_rng_uniform(&s->rng) * Z, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s->p[i];
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

// ---- the generation loop ----------------------------------------------------------------------

int kda_generate(kda_decoder *d, kda_sampler *s, const int32_t *prompt, int n_prompt, int max_new, int32_t eos_id,
                 kda_gen_token_fn on_token, void *arg, kda_gen_stats *stats) {
    KDA_CHECK(n_prompt >= 1, "generation needs at least one prompt token");
    kda_gen_stats st = {0};
    st.prompt_tokens = n_prompt;
    double t0 = kda_now();
    kda_decoder_reset(d);
    kda_sampler_reset(s);
    for (int i = 0; i < n_prompt; i++) kda_sampler_observe(s, prompt[i]);
    kda_decoder_feed(d, prompt, n_prompt);
    st.prefill_s = kda_now() - t0;
    double t_first = t0;
    for (int i = 0; i < max_new; i++) {
        int32_t id = kda_sampler_pick(s, kda_decoder_logits(d));
        kda_sampler_observe(s, id);
        st.new_tokens++;
        if (i == 0) {
            t_first = kda_now();
            st.first_token_s = t_first - t0;
        }
        int stop = on_token ? on_token(id, arg) : 0;
        if (eos_id >= 0 && id == eos_id) {
            st.stopped_at_eos = 1;
            break;
        }
        if (stop || i + 1 == max_new) break;
        kda_decoder_feed(d, &id, 1);
    }
    st.decode_s = st.new_tokens ? kda_now() - t_first : 0;
    if (stats) *stats = st;
    return st.new_tokens;
}
