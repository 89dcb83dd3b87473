// model.c — see model.h. The model's backend buffers (sized in one function, for create and for
// the memory plan), forward/backward of kda-model.md §2 and decoding, through the op table. The
// parameter table and its initialisation are model_params.c's.
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/model_impl.h"

struct kda_layer_acts {
    void *h_in;       // [N,d] layer input (residual stream)
    float *rstd1;     // [N]
    void *xn;         // [N,d] attn_norm output
    void *proj;       // [N,P] the six projections of xn side by side (proj_cols_of)
    void *q, *k, *v;  // conv+SiLU outputs (core inputs)
    void *f;          // [N,Dg]
    void *u;          // [N,Dv]
    void *core_saved; // backend-defined
    void *o;          // [N,Dv] core output
    float *rstd_o;    // [N*H]
    void *y;          // [N,Dv] gated norm output
    void *h_mid;      // [N,d] after the attention residual
    float *rstd2;     // [N]
    void *x2;         // [N,d] mlp_norm output
    void *gu;         // [N,2F] gate_proj and up_proj outputs side by side (one GEMM)
    void *z;          // [N,F] SwiGLU output
};

// gradient scratch shared by all layers of one model
struct kda_grad_scratch {
    // dz [N,F]: the down_proj's input gradient; swiglu_bwd writes (dgate | dup) over the layer's gu
    // in place, and where the backward rewrites z (bwd_rewrites.z) z over dz; with that, the
    // forward's z lives here too (the scratch is free until the backward)
    void *dz, *dx2, *dy, *d_o, *du, *dxn, *dq, *dk, *dv, *df, *tmp;
    void *dproj; // [N,P] the gradient of acts' proj
};

// The six projections of the attention input xn (q, k, v, f_proj.0, g_proj.0, b_proj) are one
// GEMM: their weights follow each other in the parameter buffers (model_params.c), so together
// they are one [P, d] weight, and their outputs are the columns of one [N, P] activation.
static int proj_width(const kda_config *c) { return 2 * c->key_dim + c->value_dim + 2 * c->head_v_dim + c->num_heads; }

// The columns of a [N, P] projection buffer (rows P = proj_width apart): q, k, v before the conv
// (Dk, Dk, Dv wide), the low-rank gate inputs f_low, g_low (r wide each) and the beta logits b
// (H wide; the KDA core reads them in place: kda_core_dims.ldb = P).
typedef struct {
    void *q, *k, *v, *f_low, *g_low, *b;
} proj_cols;

static proj_cols proj_cols_of(const kda_model *m, void *proj) {
    const kda_config *c = &m->cfg;
    size_t e = (size_t)m->ops->act_bytes;
    int Dk = c->key_dim, Dv = c->value_dim, r = c->head_v_dim;
    char *p = proj;
    return (proj_cols){
        p, p + e * Dk, p + e * 2 * Dk, p + e * (2 * Dk + Dv), p + e * (2 * Dk + Dv + r), p + e * (2 * Dk + Dv + 2 * r)};
}

// ---- the model's backend buffers: sized in one place ---------------------------------------
// model_buffers sizes every backend buffer kda_model_create allocates. With a model it allocates
// them into it; without one it only adds their sizes up. kda_model_mem_of (the memory plan,
// mem_plan.h) is that second call, so the plan and the allocation cannot disagree.

// Bit i is config.h's kda_recompute_modules[i]; RC_FULL is recompute_granularity full.
enum {
    RC_LAYERNORM = 1,
    RC_CONV = 2,
    RC_SWIGLU = 4,
    RC_GATED_NORM = 8,
    RC_CORE = 16,
    RC_IN_PROJ = 32,
    RC_GATES = 64,
    RC_O_PROJ = 128,
    RC_CORE_PREP = 256,
    RC_FULL = 512,
    // recompute_modules' default: the cheapest set that fits 300M x 32 x 2048 in 30 GiB (29.11 GiB
    // planned + ~0.55 in use before); o_proj (1.37 GiB, a GEMM a layer) left out since session 35's
    // dgu over gu and z over dz saved 1 GiB (bench/RESULTS.md)
    KDA_RC_DEFAULT = RC_LAYERNORM | RC_CONV | RC_SWIGLU | RC_GATED_NORM | RC_CORE_PREP | RC_GATES
};
_Static_assert(RC_FULL == 1 << KDA_N_RECOMPUTE_MODULES, "one RC_ bit per entry of kda_recompute_modules");
static int recompute_mask(const kda_config *c);

static kda_core_dims core_dims_of(const kda_config *c, kda_core_algo algo, int B, int T) {
    kda_core_dims d = {.B = B,
                       .T = T,
                       .H = c->num_heads,
                       .K = c->head_dim,
                       .V = c->head_v_dim,
                       .chunk = c->kda_chunk_size,
                       .scale = (float)(1.0 / sqrt((double)c->head_dim)),
                       .algo = algo,
                       .lean = (recompute_mask(c) & RC_CORE_PREP) != 0,
                       .ldb = proj_width(c)}; // b: columns of the projection buffer
    return d;
}

static kda_core_algo algo_of(const kda_config *c) {
    return strcmp(c->kda_algo, "recurrent") ? KDA_CHUNKED : KDA_RECURRENT;
}

static kda_core_dims core_dims(const kda_model *m, int B, int T) { return core_dims_of(&m->cfg, m->algo, B, T); }

// ---- activation recomputation (config recompute_granularity) ----
// A recomputed field of kda_layer_acts is one buffer shared by every layer: the forward of each
// layer overwrites it, and the backward rewrites it (recompute_for_bwd) before reading it, with
// the same ops on the same inputs, so the numbers are unchanged.

static int recompute_mask(const kda_config *c) {
    if (!strcmp(c->recompute_granularity, "full")) return RC_FULL;
    if (strcmp(c->recompute_granularity, "selective")) return 0;
    if (c->n_recompute_modules == 0) return KDA_RC_DEFAULT;
    int mask = 0;
    for (int i = 0; i < c->n_recompute_modules; i++)
        for (int j = 0; j < KDA_N_RECOMPUTE_MODULES; j++)
            if (!strcmp(c->recompute_modules[i], kda_recompute_modules[j])) mask |= 1 << j;
    return mask;
}

// Recomputed activations that the backward ops rewrite themselves instead of a forward op before
// them (ops.h: the y / z outputs of rmsnorm_bwd, gated_rmsnorm_bwd, swiglu_bwd), from inputs those
// ops read anyway, before the weight-gradient GEMM that reads them; each saves a pass over the
// rerun's inputs. Not with full (layer_fwd reruns everything), nor where a rerun up front needs
// them: xn feeds in_proj's GEMM, y feeds o_proj's.
typedef struct {
    int z, x2, y, xn;
} bwd_rewrites;

static bwd_rewrites rewrites_in_bwd(int rc) {
    bwd_rewrites w = {0, 0, 0, 0};
    if (rc & RC_FULL) return w;
    w.z = rc & RC_SWIGLU;
    w.x2 = rc & RC_LAYERNORM;
    w.xn = (rc & RC_LAYERNORM) && !(rc & RC_IN_PROJ);
    w.y = (rc & RC_GATED_NORM) && !(rc & RC_O_PROJ);
    return w;
}

static int act_recomputed(int rc, size_t field) {
    if (rc & RC_FULL) return field != offsetof(kda_layer_acts, h_in);
    if (field == offsetof(kda_layer_acts, xn) || field == offsetof(kda_layer_acts, x2)) return rc & RC_LAYERNORM;
    if (field == offsetof(kda_layer_acts, q) || field == offsetof(kda_layer_acts, k) ||
        field == offsetof(kda_layer_acts, v))
        return rc & RC_CONV;
    if (field == offsetof(kda_layer_acts, z)) return rc & RC_SWIGLU;
    if (field == offsetof(kda_layer_acts, y)) return rc & RC_GATED_NORM;
    if (field == offsetof(kda_layer_acts, core_saved)) return rc & RC_CORE;
    if (field == offsetof(kda_layer_acts, proj)) return rc & RC_IN_PROJ;
    if (field == offsetof(kda_layer_acts, f) || field == offsetof(kda_layer_acts, u)) return rc & RC_GATES;
    if (field == offsetof(kda_layer_acts, h_mid)) return rc & RC_O_PROJ;
    return 0;
}

// Allocates into m (NULL: counts only) through ops; every byte is added to mem->total and to one part.
typedef struct {
    kda_model *m;
    const kda_ops *ops;
    kda_model_mem *mem;
} sizer;

static void *buf(sizer *z, size_t *part, size_t bytes) {
    *part += bytes;
    z->mem->total += bytes;
    return z->m ? z->ops->alloc(bytes) : NULL;
}
#define ACTS(z, part, elems) buf(z, part, (size_t)(elems) * (size_t)(z)->ops->act_bytes)
#define F32S(z, part, elems) buf(z, part, (size_t)(elems) * sizeof(float))

// One layer's buffers; with 'first' (layer 0's), recomputed fields share its buffers (and are
// counted once, as acts_shared). dz: the gradient scratch's, z's place where the backward rewrites
// z (bwd_rewrites.z).
static void layer_buffers(sizer *z, const kda_config *c, kda_core_algo algo, int B, int T, kda_layer_acts *a,
                          const kda_layer_acts *first, void *dz) {
    size_t N = (size_t)B * T;
    int d = c->hidden_size, H = c->num_heads, Dk = c->key_dim, Dv = c->value_dim, Dg = H * c->head_dim;
    int F = c->intermediate_size, rc = recompute_mask(c);
    kda_core_dims cd = core_dims_of(c, algo, B, T);
    kda_model_mem *mm = z->mem;
#define ACT(field, expr)                                                                                               \
    do {                                                                                                               \
        int sh_ = act_recomputed(rc, offsetof(kda_layer_acts, field));                                                 \
        if (first && sh_)                                                                                              \
            a->field = first->field;                                                                                   \
        else {                                                                                                         \
            size_t b0_ = mm->acts_layers;                                                                              \
            a->field = (expr);                                                                                         \
            if (sh_) mm->acts_shared += mm->acts_layers - b0_;                                                         \
        }                                                                                                              \
    } while (0)
    ACT(h_in, ACTS(z, &mm->acts_layers, N * d));
    ACT(rstd1, F32S(z, &mm->acts_layers, N));
    ACT(xn, ACTS(z, &mm->acts_layers, N * d));
    ACT(proj, ACTS(z, &mm->acts_layers, N * proj_width(c)));
    ACT(q, ACTS(z, &mm->acts_layers, N * Dk));
    ACT(k, ACTS(z, &mm->acts_layers, N * Dk));
    ACT(v, ACTS(z, &mm->acts_layers, N * Dv));
    ACT(f, ACTS(z, &mm->acts_layers, N * Dg));
    ACT(u, ACTS(z, &mm->acts_layers, N * Dv));
    {
        size_t c0 = mm->acts_layers;
        ACT(core_saved, buf(z, &mm->acts_layers, z->ops->kda_saved_bytes(&cd)));
        mm->acts_core += mm->acts_layers - c0;
    }
    ACT(o, ACTS(z, &mm->acts_layers, N * Dv));
    ACT(rstd_o, F32S(z, &mm->acts_layers, N * H));
    ACT(y, ACTS(z, &mm->acts_layers, N * Dv));
    ACT(h_mid, ACTS(z, &mm->acts_layers, N * d));
    ACT(rstd2, F32S(z, &mm->acts_layers, N));
    ACT(x2, ACTS(z, &mm->acts_layers, N * d));
    ACT(gu, ACTS(z, &mm->acts_layers, N * 2 * F));
    if (rewrites_in_bwd(rc).z)
        a->z = dz;
    else
        ACT(z, ACTS(z, &mm->acts_layers, N * F));
#undef ACT
}

static size_t optim_bytes(size_t n_floats) { return 2 * n_floats * sizeof(float); } // AdamW m and v

// Every buffer of kda_model_create, from the registered parameter table of reg (== z->m when allocating).
static void model_buffers(sizer *z, const kda_model *reg, int B, int T) {
    kda_model *m = z->m;
    const kda_ops *ops = z->ops;
    const kda_config *c = &reg->cfg;
    kda_core_algo algo = algo_of(c);
    kda_model_mem *mm = z->mem;
    size_t n_floats = reg->n_floats, na = n_floats + KDA_SHARD_SLACK;
    mm->n_floats = n_floats;
    mm->embed_floats = kda_param_span(reg->params[reg->embed].numel);
    mm->n_alloc = na;
    void *master = buf(z, &mm->params, na * sizeof(float));
    void *grad = buf(z, &mm->grads, na * sizeof(float));
    void *work = ops->work_is_master ? master : buf(z, &mm->params, na * (size_t)ops->w_bytes);
    mm->optim = optim_bytes(n_floats); // allocated by kda_model_alloc_optim, not here
    if (m) {
        m->master = master, m->grad = grad, m->work = work;
        ops->zero(m->master, na * sizeof(float));
        ops->zero(m->grad, na * sizeof(float));
        if (work != master) ops->zero(m->work, na * (size_t)ops->w_bytes);
    }

    size_t N = (size_t)B * T;
    int d = c->hidden_size, H = c->num_heads, Dk = c->key_dim, Dv = c->value_dim, Dg = H * c->head_dim;
    int F = c->intermediate_size, L = c->num_hidden_layers;
    // gradient scratch (one set, reused by every layer), first: a layer's z may live in its dz
    kda_grad_scratch gs_count = {0}, *g = m ? m->gs : &gs_count;
    size_t *p = &mm->grad_scratch;
    g->dz = ACTS(z, p, N * F);
    g->dx2 = ACTS(z, p, N * d);
    g->dy = ACTS(z, p, N * Dv);
    g->d_o = ACTS(z, p, N * Dv);
    g->du = ACTS(z, p, N * Dv);
    g->dxn = ACTS(z, p, N * d);
    g->dq = ACTS(z, p, N * Dk);
    g->dk = ACTS(z, p, N * Dk);
    g->dv = ACTS(z, p, N * Dv);
    g->df = ACTS(z, p, N * Dg);
    g->dproj = ACTS(z, p, N * proj_width(c));
    g->tmp = ACTS(z, p, N * d); // the head's input gradient

    kda_layer_acts count_only[2]; // the buffers of a plan (NULL pointers, layer 0 and the others)
    memset(count_only, 0, sizeof count_only);
    for (int l = 0; l < L; l++) {
        kda_layer_acts *a = m ? &m->acts[l] : &count_only[l > 0];
        layer_buffers(z, c, algo, B, T, a, l > 0 ? (m ? &m->acts[0] : &count_only[0]) : NULL, g->dz);
    }
    void *h_final = ACTS(z, &mm->acts_head, N * d);
    void *x_final = ACTS(z, &mm->acts_head, N * d);
    float *rstd_final = F32S(z, &mm->acts_head, N);
    void *dh = ACTS(z, &mm->acts_head, N * d);
    int32_t *ids_dev = buf(z, &mm->tokens, N * sizeof(int32_t));
    int32_t *tgt_dev = buf(z, &mm->tokens, N * sizeof(int32_t));
    if (m) {
        m->h_final = h_final, m->x_final = x_final, m->rstd_final = rstd_final, m->dh = dh;
        m->ids_dev = ids_dev, m->tgt_dev = tgt_dev;
    }
}
#undef ACTS
#undef F32S

// The kernels index a micro-batch's rows (tokens x heads) with int.
static void check_batch_size(const kda_config *c, int B, int T) {
    double rows = (double)B * T * c->num_heads;
    if (B < 1 || T < 1 || rows > 2147483647.0)
        kda_die("a micro-batch of %d x %d tokens (x %d heads = %.0f rows) is more than the kernels index (2^31 - 1 "
                "rows); lower micro_batch_size or seq_length",
                B, T, c->num_heads, rows);
}

// The sizes the backend's kernels take (its capabilities), checked before anything is allocated.
static void check_backend_sizes(const kda_config *c, const kda_ops *ops) {
    if (c->conv_size > ops->max_conv)
        kda_die("conv_size %d: the %s backend's short conv takes 1..%d; set conv_size <= %d or use another device",
                c->conv_size, ops->name, ops->max_conv, ops->max_conv);
    if (ops->max_chunk && algo_of(c) == KDA_CHUNKED && c->kda_chunk_size > ops->max_chunk)
        kda_die("kda_chunk_size %d: the %s backend's KDA core takes 1..%d; set kda_chunk_size <= %d", c->kda_chunk_size,
                ops->name, ops->max_chunk, ops->max_chunk);
}

kda_model *kda_model_create(const kda_config *cfg, const kda_ops *ops, int B, int T) {
    check_batch_size(cfg, B, T);
    check_backend_sizes(cfg, ops);
    kda_model *m = kda_calloc(1, sizeof *m);
    m->cfg = *cfg;
    m->ops = ops;
    m->algo = algo_of(cfg);
    m->B = B;
    m->T = T;
    kda_model_register_params(m);
    m->acts = kda_calloc(cfg->num_hidden_layers, sizeof(kda_layer_acts));
    m->gs = kda_calloc(1, sizeof *m->gs);
    sizer z = {m, ops, &m->mem};
    model_buffers(&z, m, B, T);
    m->n_alloc = m->mem.n_alloc;
    m->act_bytes_total = m->mem.acts_layers + m->mem.acts_head + m->mem.grad_scratch;
    return m;
}

void kda_model_mem_of(const kda_config *c, const kda_ops *ops, int B, int T, kda_model_mem *out) {
    check_batch_size(c, B, T);
    check_backend_sizes(c, ops);
    kda_model reg = {.cfg = *c}; // the parameter table only
    kda_model_register_params(&reg);
    memset(out, 0, sizeof *out);
    sizer z = {NULL, ops, out};
    model_buffers(&z, &reg, B, T);
    free(reg.params);
    free(reg.layer);
}

kda_step_shape kda_model_step_shape(const kda_config *c, int B, int T) {
    kda_step_shape s = {.B = B,
                        .T = T,
                        .d = c->hidden_size,
                        .NV = c->vocab_size,
                        .F = c->intermediate_size,
                        .W = c->conv_size,
                        .Dk = c->key_dim,
                        .Dv = c->value_dim,
                        .r = c->head_v_dim,
                        .core = core_dims_of(c, algo_of(c), B, T)};
    return s;
}

void kda_model_alloc_optim(kda_model *m) {
    if (m->adam_m) return;
    size_t each = optim_bytes(m->n_floats) / 2;
    m->adam_m = m->ops->alloc(each);
    m->adam_v = m->ops->alloc(each);
    m->ops->zero(m->adam_m, m->n_floats * sizeof(float));
    m->ops->zero(m->adam_v, m->n_floats * sizeof(float));
}

void kda_model_drop_grad(kda_model *m) {
    m->ops->free(m->grad);
    m->grad = NULL;
}

void kda_model_free(kda_model *m) {
    if (!m) return;
    const kda_ops *o = m->ops;
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        void **p = (void **)&m->acts[l], **first = (void **)&m->acts[0];
        for (size_t i = 0; i < sizeof(kda_layer_acts) / sizeof(void *); i++)
            if ((l == 0 || p[i] != first[i]) && p[i] != m->gs->dz) o->free(p[i]); // shared buffers once
    }
    void **g = (void **)m->gs;
    for (size_t i = 0; i < sizeof(*m->gs) / sizeof(void *); i++) o->free(g[i]);
    free(m->gs);
    o->free(m->h_final);
    o->free(m->x_final);
    o->free(m->rstd_final);
    o->free(m->dh);
    o->free(m->ids_dev);
    o->free(m->tgt_dev);
    if (m->work != (void *)m->master) o->free(m->work);
    o->free(m->master);
    o->free(m->grad);
    o->free(m->adam_m);
    o->free(m->adam_v);
    o->free(m->small);
    free(m->acts);
    free(m->params);
    free(m->layer);
    free(m);
}

// ---- forward / backward -------------------------------------------------------------------

#define WP(idx) ((const void *)((const char *)m->work + m->params[idx].offset * (size_t)m->ops->w_bytes))
#define GP(idx) (m->grad + m->params[idx].offset)
// The small parameters (norm weights, conv weights, A_log, dt_bias) are read in fp32 (ops.h, role
// S): from the fp32 masters, or from the model's copy of them where the masters are sharded.
#define SP(idx) kda_model_small_param(m, idx)
#define AOFF(ptr, elems) ((void *)((char *)(ptr) + (size_t)(elems) * (size_t)m->ops->act_bytes))

// The recurrent state one layer continues from in decoding (kda_model_decode): the conv tails of
// q, k, v and the KDA state S. NULL in training: the sequence starts from zero.
typedef struct {
    void *tail[3];
    float *S;
} layer_state;

// The short conv's channel groups q, k, v of layer l: columns 0, Dk, 2Dk of the projection
// buffer; outputs a->q, a->k, a->v; with dq, dk, dv (the backward) their gradients and the
// weights' gradients.
static void conv_groups(const kda_model *m, int l, void *dq, void *dk, void *dv, kda_conv_group g[3]) {
    const kda_config *c = &m->cfg;
    const kda_layer_params *p = &m->layer[l];
    const kda_layer_acts *a = &m->acts[l];
    int Dk = c->key_dim, Dv = c->value_dim;
    g[0] = (kda_conv_group){0, Dk, SP(p->q_conv), a->q, dq, dq ? GP(p->q_conv) : NULL};
    g[1] = (kda_conv_group){Dk, Dk, SP(p->k_conv), a->k, dk, dk ? GP(p->k_conv) : NULL};
    g[2] = (kda_conv_group){2 * Dk, Dv, SP(p->v_conv), a->v, dv, dv ? GP(p->v_conv) : NULL};
}

// conv + SiLU of q, k, v from the projection buffer (rows P apart): in training one call for the
// three; in decoding each group continues from its tail.
static void conv_silu_qkv(const kda_model *m, int l, const layer_state *st, int B, int T) {
    const kda_config *c = &m->cfg;
    int P = proj_width(c), W = c->conv_size;
    kda_conv_group g[3];
    conv_groups(m, l, NULL, NULL, NULL, g);
    const char *x = m->acts[l].proj;
    if (!st) {
        m->ops->conv_silu_fwd(x, P, g, 3, B, T, W);
        return;
    }
    for (int i = 0; i < 3; i++)
        m->ops->conv_silu_step(st->tail[i], x + (size_t)g[i].col * m->ops->act_bytes, P, g[i].w, g[i].y, B, T, g[i].C,
                               W);
}

// Input is m->acts[l].h_in (written by the previous layer or the embedding). With st (decoding)
// the conv continues from its tails and the core from S, recurrent for one token, chunked for
// more (test_generate checks every decoded position against the full forward).
static void layer_fwd(kda_model *m, int l, void *h_out, int B, int T, const layer_state *st) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    const kda_layer_params *p = &m->layer[l];
    kda_layer_acts *a = &m->acts[l];
    int N = B * T, d = c->hidden_size, H = c->num_heads, Dv = c->value_dim;
    int Dg = H * c->head_dim, r = c->head_v_dim, F = c->intermediate_size, P = proj_width(c);
    float eps = (float)c->norm_eps;
    kda_core_dims cd = core_dims(m, B, T);
    if (st) cd.algo = T > 1 ? KDA_CHUNKED : KDA_RECURRENT;

    o->rmsnorm_fwd(a->h_in, SP(p->attn_norm), a->xn, a->rstd1, N, d, eps);
    o->linear_fwd(a->xn, d, WP(p->q_proj), NULL, NULL, a->proj, N, d, P); // q, k, v, f_proj.0, g_proj.0, b
    proj_cols x = proj_cols_of(m, a->proj);
    conv_silu_qkv(m, l, st, B, T);
    o->linear_fwd(x.f_low, P, WP(p->f_proj1), NULL, NULL, a->f, N, r, Dg);
    o->linear_fwd(x.g_low, P, WP(p->g_proj1), WP(p->g_proj1_bias), NULL, a->u, N, r, Dv);
    if (st)
        o->kda_fwd_state(&cd, a->q, a->k, a->v, a->f, x.b, SP(p->A_log), SP(p->dt_bias), a->o, a->core_saved, st->S);
    else
        o->kda_fwd(&cd, a->q, a->k, a->v, a->f, x.b, SP(p->A_log), SP(p->dt_bias), a->o, a->core_saved);
    o->gated_rmsnorm_fwd(a->o, a->u, SP(p->o_norm), a->y, a->rstd_o, N * H, c->head_v_dim, eps);
    o->linear_fwd(a->y, Dv, WP(p->o_proj), NULL, a->h_in, a->h_mid, N, Dv, d); // + the residual
    o->rmsnorm_fwd(a->h_mid, SP(p->mlp_norm), a->x2, a->rstd2, N, d, eps);
    o->linear_fwd(a->x2, d, WP(p->gate_proj), NULL, NULL, a->gu, N, d, 2 * F); // gate_proj and up_proj
    o->swiglu_fwd(a->gu, a->z, N, F);
    o->linear_fwd(a->z, F, WP(p->down_proj), NULL, a->h_mid, h_out, N, F, d);
}

// Rewrites the shared (recomputed) activations of layer l before its backward reads them.
static void recompute_for_bwd(kda_model *m, int l, int B, int T) {
    int rc = recompute_mask(&m->cfg);
    if (!rc) return;
    int L = m->cfg.num_hidden_layers;
    if (rc & RC_FULL) { // the output buffer is free again: the layers above are done
        layer_fwd(m, l, l + 1 < L ? m->acts[l + 1].h_in : m->h_final, B, T, NULL);
        return;
    }
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    const kda_layer_params *p = &m->layer[l];
    kda_layer_acts *a = &m->acts[l];
    int N = B * T, d = c->hidden_size, H = c->num_heads, Dv = c->value_dim;
    float eps = (float)c->norm_eps;
    kda_core_dims cd = core_dims(m, B, T);
    // in the forward's order: each module's inputs are saved or rewritten above it
    int P = proj_width(c), Dg = H * c->head_dim, r = c->head_v_dim;
    bwd_rewrites w = rewrites_in_bwd(rc);
    if ((rc & RC_LAYERNORM) && !w.xn) o->rmsnorm_fwd(a->h_in, SP(p->attn_norm), a->xn, a->rstd1, N, d, eps);
    if (rc & RC_IN_PROJ) o->linear_fwd(a->xn, d, WP(p->q_proj), NULL, NULL, a->proj, N, d, P);
    proj_cols x = proj_cols_of(m, a->proj);
    if (rc & RC_CONV) conv_silu_qkv(m, l, NULL, B, T);
    if (rc & RC_GATES) {
        o->linear_fwd(x.f_low, P, WP(p->f_proj1), NULL, NULL, a->f, N, r, Dg);
        o->linear_fwd(x.g_low, P, WP(p->g_proj1), WP(p->g_proj1_bias), NULL, a->u, N, r, Dv);
    }
    if (rc & RC_CORE) // rewrites o with the same bits
        o->kda_fwd(&cd, a->q, a->k, a->v, a->f, x.b, SP(p->A_log), SP(p->dt_bias), a->o, a->core_saved);
    if ((rc & RC_GATED_NORM) && !w.y)
        o->gated_rmsnorm_fwd(a->o, a->u, SP(p->o_norm), a->y, a->rstd_o, N * H, c->head_v_dim, eps);
    if (rc & RC_O_PROJ) o->linear_fwd(a->y, Dv, WP(p->o_proj), NULL, a->h_in, a->h_mid, N, Dv, d);
    // the others (w): in layer_bwd's rmsnorm_bwd, gated_rmsnorm_bwd and swiglu_bwd
}

// dh: gradient w.r.t. the layer output on entry, w.r.t. the layer input on exit.
static void layer_bwd(kda_model *m, int l, void *dh, int B, int T) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    const kda_layer_params *p = &m->layer[l];
    kda_layer_acts *a = &m->acts[l];
    int N = B * T, d = c->hidden_size, H = c->num_heads, Dv = c->value_dim;
    int Dg = H * c->head_dim, r = c->head_v_dim, F = c->intermediate_size, W = c->conv_size, P = proj_width(c);
    kda_core_dims cd = core_dims(m, B, T);
    recompute_for_bwd(m, l, B, T);
    proj_cols x = proj_cols_of(m, a->proj), dx = proj_cols_of(m, m->gs->dproj); // dx: written below, then one GEMM

    // Each GEMM's input gradient first, its weight gradient after the op that rewrites its input
    // when that is recomputed in the backward (rewrites_in_bwd; NULL: kept from the forward).
    bwd_rewrites w = rewrites_in_bwd(recompute_mask(c));
    void *z_out = w.z ? a->z : NULL, *x2_out = w.x2 ? a->x2 : NULL, *y_out = w.y ? a->y : NULL;
    void *xn_out = w.xn ? a->xn : NULL;
    kda_grad_scratch *g = m->gs;

    // MLP sublayer: h_out = h_mid + down(swiglu(gate(x2), up(x2))), x2 = rmsnorm(h_mid); gate and
    // up are one GEMM of width 2F each way (their weights and gradients follow each other); their
    // gradient dgu overwrites gu, which nothing reads after swiglu_bwd
    void *dgu = a->gu;
    o->linear_bwd(NULL, F, WP(p->down_proj), dh, g->dz, NULL, NULL, N, F, d, 0); // dz
    o->swiglu_bwd(a->gu, g->dz, F, dgu, z_out, N, F); // z_out: a->z == g->dz, z over dz in place
    o->linear_bwd(a->z, F, WP(p->down_proj), dh, NULL, GP(p->down_proj), NULL, N, F, d, 0);
    o->linear_bwd(NULL, d, WP(p->gate_proj), dgu, g->dx2, NULL, NULL, N, d, 2 * F, 0);
    o->rmsnorm_bwd(a->h_mid, SP(p->mlp_norm), a->rstd2, g->dx2, dh, GP(p->mlp_norm), x2_out, N, d, 1);
    o->linear_bwd(a->x2, d, WP(p->gate_proj), dgu, NULL, GP(p->gate_proj), NULL, N, d, 2 * F, 0);

    // attention sublayer: h_mid = h_in + o_proj(gated_norm(core(...), u))
    o->linear_bwd(NULL, Dv, WP(p->o_proj), dh, g->dy, NULL, NULL, N, Dv, d, 0);
    o->gated_rmsnorm_bwd(a->o, a->u, SP(p->o_norm), a->rstd_o, g->dy, g->d_o, g->du, GP(p->o_norm), y_out, N * H,
                         c->head_v_dim);
    o->linear_bwd(a->y, Dv, WP(p->o_proj), dh, NULL, GP(p->o_proj), NULL, N, Dv, d, 0);
    o->linear_bwd(x.g_low, P, WP(p->g_proj1), g->du, dx.g_low, GP(p->g_proj1), GP(p->g_proj1_bias), N, r, Dv, 0);
    o->kda_bwd(&cd, a->q, a->k, a->v, a->f, x.b, SP(p->A_log), SP(p->dt_bias), a->core_saved, g->d_o, g->dq, g->dk,
               g->dv, g->df, dx.b, GP(p->A_log), GP(p->dt_bias));
    o->linear_bwd(x.f_low, P, WP(p->f_proj1), g->df, dx.f_low, GP(p->f_proj1), NULL, N, r, Dg, 0);
    kda_conv_group cg[3];
    conv_groups(m, l, g->dq, g->dk, g->dv, cg);
    o->conv_silu_bwd(a->proj, P, g->dproj, cg, 3, B, T, W);
    // q, k, v, f_proj.0, g_proj.0, b_proj at once: their gradients are the columns of dproj
    o->linear_bwd(NULL, d, WP(p->q_proj), g->dproj, g->dxn, NULL, NULL, N, d, P, 0);
    o->rmsnorm_bwd(a->h_in, SP(p->attn_norm), a->rstd1, g->dxn, dh, GP(p->attn_norm), xn_out, N, d, 1);
    o->linear_bwd(a->xn, d, WP(p->q_proj), g->dproj, NULL, GP(p->q_proj), NULL, N, d, P, 0);
}

static void param_ready(kda_model *m, int idx) {
    const kda_param *p = &m->params[idx];
    m->grad_ready(m->grad_ready_user, p->offset, kda_param_end(p));
}

static void forward_body(kda_model *m, const int32_t *ids, int B, int T) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    int N = B * T, L = c->num_hidden_layers;
    KDA_CHECK(B <= m->B && T <= m->T && (size_t)B * T <= (size_t)m->B * m->T, "batch %dx%d exceeds the planned %dx%d",
              B, T, m->B, m->T);
    for (int i = 0; i < N; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            kda_die("token id %d at position %d is outside the vocabulary [0, %d): check vocab_size and the data",
                    ids[i], i, c->vocab_size);
    o->to_device(m->ids_dev, ids, (size_t)N * sizeof(int32_t));
    o->embed_fwd(m->ids_dev, WP(m->embed), m->acts[0].h_in, N, c->hidden_size, c->vocab_size);
    for (int l = 0; l < L; l++) {
        void *out = l + 1 < L ? m->acts[l + 1].h_in : m->h_final;
        layer_fwd(m, l, out, B, T, NULL);
    }
    o->rmsnorm_fwd(m->h_final, SP(m->final_norm), m->x_final, m->rstd_final, N, c->hidden_size, (float)c->norm_eps);
}

// kda_model_step, or with defer_micro > 0 kda_model_train_step, one of defer_micro micro-batches
// (the loss left on the backend: returns 0).
static double model_step(kda_model *m, const int32_t *ids, const int32_t *targets, int B, int T, int backward,
                         float grad_scale_extra, long *n_valid, int defer_micro) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    int N = B * T, d = c->hidden_size, L = c->num_hidden_layers;
    forward_body(m, ids, B, T);
    long valid = 0;
    for (int i = 0; i < N; i++) {
        if (targets[i] >= c->vocab_size)
            kda_die("target id %d at position %d is outside the vocabulary [0, %d)", targets[i], i, c->vocab_size);
        valid += targets[i] >= 0;
    }
    if (n_valid) *n_valid = valid;
    if (valid == 0 && defer_micro)
        kda_die("a training micro-batch has no valid target (all %d are ignored, -100): its loss is undefined; "
                "check the data",
                N);
    if (valid == 0) {
        // nothing to learn from here, but the other ranks wait for this rank's (zero) share of
        // every reduction: announce each range in the order the backward pass would
        if (backward && m->grad_ready && m->grad_ready_on) {
            param_ready(m, m->final_norm);
            for (int l = L - 1; l >= 0; l--) {
                size_t lo, hi;
                kda_model_layer_range(m, l, &lo, &hi);
                m->grad_ready(m->grad_ready_user, lo, hi);
            }
            param_ready(m, m->embed);
        }
        return NAN;
    }
    o->to_device(m->tgt_dev, targets, (size_t)N * sizeof(int32_t));
    float gs = grad_scale_extra / (float)valid;
    double loss_sum = 0;
    if (defer_micro)
        o->lm_head_ce_acc(m->x_final, WP(m->embed), m->tgt_dev, N, d, c->vocab_size, gs, m->gs->tmp, GP(m->embed),
                          1.0 / ((double)valid * defer_micro));
    else
        loss_sum = o->lm_head_ce(m->x_final, WP(m->embed), m->tgt_dev, N, d, c->vocab_size, gs,
                                 backward ? m->gs->tmp : NULL, backward ? GP(m->embed) : NULL, NULL);
    if (backward) {
        int hook = m->grad_ready && m->grad_ready_on;
        o->rmsnorm_bwd(m->h_final, SP(m->final_norm), m->rstd_final, m->gs->tmp, m->dh, GP(m->final_norm), NULL, N, d,
                       0);
        if (hook) param_ready(m, m->final_norm);
        for (int l = L - 1; l >= 0; l--) {
            layer_bwd(m, l, m->dh, B, T);
            if (hook) {
                size_t lo, hi;
                kda_model_layer_range(m, l, &lo, &hi);
                m->grad_ready(m->grad_ready_user, lo, hi);
            }
        }
        o->embed_bwd(m->ids_dev, m->dh, GP(m->embed), N, d);
        if (hook) param_ready(m, m->embed);
    }
    return loss_sum / (double)valid;
}

double kda_model_step(kda_model *m, const int32_t *ids, const int32_t *targets, int B, int T, int backward,
                      float grad_scale_extra, long *n_valid) {
    return model_step(m, ids, targets, B, T, backward, grad_scale_extra, n_valid, 0);
}

void kda_model_train_step(kda_model *m, const int32_t *ids, const int32_t *targets, int B, int T, int n_micro) {
    model_step(m, ids, targets, B, T, 1, 1.0f / (float)n_micro, NULL, n_micro);
}

double kda_model_loss_take(kda_model *m) { return m->ops->loss_take(); }

void kda_model_logits(kda_model *m, const int32_t *ids, int B, int T, float *logits) {
    const kda_ops *o = m->ops;
    int d = m->cfg.hidden_size, NV = m->cfg.vocab_size, N = B * T;
    forward_body(m, ids, B, T);
    float *dev = o->alloc((size_t)NV * sizeof(float) * 64);
    for (int n0 = 0; n0 < N; n0 += 64) {
        int n = N - n0 < 64 ? N - n0 : 64;
        o->lm_head_logits(AOFF(m->x_final, (size_t)n0 * d), WP(m->embed), dev, n, d, NV);
        o->to_host(logits + (size_t)n0 * NV, dev, (size_t)n * NV * sizeof(float));
    }
    o->free(dev);
}

void kda_model_logits_rows(kda_model *m, const int32_t *ids, int B, int T, const int32_t *rows, int n_rows,
                           float *logits) {
    const kda_ops *o = m->ops;
    int d = m->cfg.hidden_size, NV = m->cfg.vocab_size, N = B * T;
    KDA_CHECK(o->act_bytes == o->w_bytes,
              "backend %s: the row gather (embed_fwd over the hidden states) needs "
              "activations and weights of one element size",
              o->name);
    for (int i = 0; i < n_rows; i++)
        KDA_CHECK(rows[i] >= 0 && rows[i] < N, "logits row %d (entry %d) outside the %d x %d batch", rows[i], i, B, T);
    forward_body(m, ids, B, T);
    if (n_rows <= 0) return;
    enum { CH = 64 }; // rows per head GEMM, as kda_model_logits
    int32_t *rows_dev = o->alloc((size_t)n_rows * sizeof(int32_t));
    void *xr = o->alloc((size_t)n_rows * d * (size_t)o->act_bytes);
    float *dev = o->alloc((size_t)NV * sizeof(float) * CH);
    o->to_device(rows_dev, rows, (size_t)n_rows * sizeof(int32_t));
    o->embed_fwd(rows_dev, m->x_final, xr, n_rows, d, N); // xr[i] = x_final[rows[i]]
    for (int n0 = 0; n0 < n_rows; n0 += CH) {
        int n = n_rows - n0 < CH ? n_rows - n0 : CH;
        o->lm_head_logits(AOFF(xr, (size_t)n0 * d), WP(m->embed), dev, n, d, NV);
        o->to_host(logits + (size_t)n0 * NV, dev, (size_t)n * NV * sizeof(float));
    }
    o->free(dev);
    o->free(xr);
    o->free(rows_dev);
}

// ---- generation ------------------------------------------------------------------------------------

// conv tail elements per layer (q, k, v tails of every sequence)
static size_t tail_elems(const kda_model *m, int B) {
    const kda_config *c = &m->cfg;
    return (size_t)B * (c->conv_size - 1) * (2 * (size_t)c->key_dim + c->value_dim);
}
static size_t S_floats(const kda_model *m, int B) {
    const kda_config *c = &m->cfg;
    return (size_t)B * c->num_heads * c->head_dim * c->head_v_dim;
}

kda_decode_state *kda_decode_state_create(const kda_model *m, int B) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    KDA_CHECK(B >= 1 && B <= m->B, "decode state for %d sequences: the model is planned for 1..%d", B, m->B);
    KDA_CHECK(c->num_v_heads == c->num_heads, "generation needs num_v_heads == num_heads (got %d, %d)", c->num_v_heads,
              c->num_heads);
    kda_decode_state *s = kda_calloc(1, sizeof *s);
    s->B = B;
    int L = c->num_hidden_layers;
    size_t conv_b = (size_t)L * tail_elems(m, B) * (size_t)o->act_bytes,
           S_b = (size_t)L * S_floats(m, B) * sizeof(float);
    size_t x_b = (size_t)B * c->hidden_size * (size_t)o->act_bytes, r_b = (size_t)B * sizeof(float);
    size_t l_b = (size_t)B * c->vocab_size * sizeof(float);
    s->conv = o->alloc(conv_b);
    s->S = o->alloc(S_b);
    s->x_last = o->alloc(x_b);
    s->rstd = o->alloc(r_b);
    s->logits = o->alloc(l_b);
    s->state_bytes = conv_b + S_b;
    s->total_bytes = conv_b + S_b + x_b + r_b + l_b;
    kda_decode_state_reset(m, s);
    return s;
}

void kda_decode_state_free(const kda_model *m, kda_decode_state *s) {
    if (!s) return;
    const kda_ops *o = m->ops;
    o->free(s->conv);
    o->free(s->S);
    o->free(s->x_last);
    o->free(s->rstd);
    o->free(s->logits);
    free(s);
}

void kda_decode_state_reset(const kda_model *m, kda_decode_state *s) {
    int L = m->cfg.num_hidden_layers;
    m->ops->zero(s->conv, (size_t)L * tail_elems(m, s->B) * (size_t)m->ops->act_bytes);
    m->ops->zero(s->S, (size_t)L * S_floats(m, s->B) * sizeof(float));
    s->pos = 0;
}

// The decode state of layer l inside s.
static layer_state decode_layer_state(const kda_model *m, const kda_decode_state *s, int l) {
    int B = s->B, W = m->cfg.conv_size, Dk = m->cfg.key_dim;
    void *tq = (char *)s->conv + (size_t)l * tail_elems(m, B) * (size_t)m->ops->act_bytes;
    void *tk = AOFF(tq, (size_t)B * (W - 1) * Dk), *tv = AOFF(tk, (size_t)B * (W - 1) * Dk);
    return (layer_state){{tq, tk, tv}, s->S + (size_t)l * S_floats(m, B)};
}

void kda_model_decode(kda_model *m, kda_decode_state *s, const int32_t *ids, int n) {
    const kda_ops *o = m->ops;
    const kda_config *c = &m->cfg;
    int B = s->B, N = B * n, d = c->hidden_size, L = c->num_hidden_layers;
    KDA_CHECK(n >= 1 && n <= m->T && B <= m->B, "decode of %d x %d tokens: the model is planned for %d x %d", B, n,
              m->B, m->T);
    for (int i = 0; i < N; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            kda_die("token id %d is outside the model's vocabulary [0, %d): check the tokenizer against vocab_size",
                    ids[i], c->vocab_size);
    o->to_device(m->ids_dev, ids, (size_t)N * sizeof(int32_t));
    o->embed_fwd(m->ids_dev, WP(m->embed), m->acts[0].h_in, N, d, c->vocab_size);
    for (int l = 0; l < L; l++) {
        layer_state st = decode_layer_state(m, s, l);
        layer_fwd(m, l, l + 1 < L ? m->acts[l + 1].h_in : m->h_final, B, n, &st);
    }
    for (int b = 0; b < B; b++) // final norm of each sequence's last token only
        o->rmsnorm_fwd(AOFF(m->h_final, ((size_t)b * n + n - 1) * d), SP(m->final_norm), AOFF(s->x_last, (size_t)b * d),
                       s->rstd + b, 1, d, (float)c->norm_eps);
    s->pos += n;
}

void kda_model_decode_logits(kda_model *m, kda_decode_state *s, float *logits) {
    KDA_CHECK(s->pos > 0, "logits requested before any token was fed");
    const kda_ops *o = m->ops;
    int NV = m->cfg.vocab_size;
    o->lm_head_logits(s->x_last, WP(m->embed), s->logits, s->B, m->cfg.hidden_size, NV);
    o->to_host(logits, s->logits, (size_t)s->B * NV * sizeof(float));
}

double kda_model_train_flops_per_token(const kda_config *c) {
    double d = c->hidden_size, Dk = c->key_dim, Dv = c->value_dim, HV = c->num_heads, K = c->head_dim;
    double Vd = c->head_v_dim, r = c->head_v_dim, Dg = c->num_heads * c->head_dim, F = c->intermediate_size;
    double C = c->kda_chunk_size, NV = c->vocab_size, L = c->num_hidden_layers;
    double f_proj = 2 * (d * (2 * Dk + Dv) + d * r + r * Dg + d * HV + d * r + r * Dv + Dv * d);
    double f_mlp = 2 * 3 * d * F;
    double f_kda = 2 * HV * (2 * C * K + 2 * C * Vd + C * C / 4 + 3 * K * Vd);
    double f_head = 2 * d * NV;
    return 3 * (L * (f_proj + f_mlp + f_kda) + f_head);
}
