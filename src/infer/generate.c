// generate.c — see generate.h. The decoder (blocks of tokens through the model's state-carrying
// forward, model.c), the HF-style sampler and the generation loop.
#include "infer/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kda_decoder {
    kda_model *m;
    kda_decode_state *st; // one sequence
    int block;            // most tokens per kda_model_decode call
    int NV;
    float *logits; // host [NV]
    int logits_ready;
};

kda_decoder *kda_decoder_create(kda_model *m, int block) {
    KDA_CHECK(block >= 0, "decoder block %d", block);
    kda_decoder *d = kda_calloc(1, sizeof *d);
    d->m = m;
    d->st = kda_decode_state_create(m, 1);
    d->block = block == 0 || block > m->T ? m->T : block;
    d->NV = m->cfg.vocab_size;
    d->logits = kda_malloc(sizeof(float) * (size_t)d->NV);
    return d;
}

void kda_decoder_free(kda_decoder *d) {
    if (!d) return;
    kda_decode_state_free(d->m, d->st);
    free(d->logits);
    free(d);
}

void kda_decoder_reset(kda_decoder *d) {
    kda_decode_state_reset(d->m, d->st);
    d->logits_ready = 0;
}

long kda_decoder_position(const kda_decoder *d) { return d->st->pos; }
size_t kda_decoder_state_bytes(const kda_decoder *d) { return d->st->state_bytes; }
size_t kda_decoder_total_bytes(const kda_decoder *d) { return d->st->total_bytes + sizeof(float) * (size_t)d->NV; }

void kda_decoder_feed(kda_decoder *d, const int32_t *ids, int n) {
    KDA_CHECK(n >= 0, "negative token count %d", n);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->NV)
            kda_die("token id %d is outside the model's vocabulary [0, %d): check the tokenizer against vocab_size",
                    ids[i], d->NV);
    for (int s = 0; s < n; s += d->block) {
        int nb = n - s < d->block ? n - s : d->block;
        kda_model_decode(d->m, d->st, ids + s, nb);
        d->logits_ready = 0;
    }
    d->m->ops->sync(); // the work is done when this returns (CUDA queues it): honest prefill times
}

const float *kda_decoder_logits(kda_decoder *d) {
    KDA_CHECK(d->st->pos > 0, "logits requested before any token was fed");
    if (!d->logits_ready) {
        kda_model_decode_logits(d->m, d->st, d->logits);
        d->logits_ready = 1;
    }
    return d->logits;
}

// ---- sampling ---------------------------------------------------------------------------------

typedef struct {
    float x; // processed logit
    int32_t id;
} candidate;

struct kda_sampler {
    kda_sampling o;
    int NV;
    kda_rng rng;
    uint8_t *seen;  // [NV]
    candidate *c;   // [NV]
    float *scratch; // [NV] for the top-k selection
    double *p;      // [NV] unnormalised probabilities of the candidates
};

kda_sampler *kda_sampler_create(int vocab_size, const kda_sampling *o, uint64_t seed) {
    if (!(o->temperature >= 0) || !isfinite(o->temperature))
        kda_die("sampling: temperature must be >= 0 (0 = greedy), got %g", (double)o->temperature);
    if (o->top_k < 0) kda_die("sampling: top-k must be >= 0 (0 = off), got %d", o->top_k);
    if (!(o->top_p > 0 && o->top_p <= 1))
        kda_die("sampling: top-p must be in (0, 1] (1 = off), got %g", (double)o->top_p);
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
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
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
