// model_params.c — the model's parameters (model.h): the table of FLA's names, shapes and order
// (kda-model.md §5.3) with each tensor's place in the flat fp32 buffers (16-float aligned, in
// registration order: the embedding, then layer by layer, then the final norm; except that a
// layer's q_proj, k_proj, v_proj, f_proj.0, g_proj.0 and b_proj follow each other unpadded, as one
// projection weight for model.c, and so do its gate_proj and up_proj), the queries on it
// (find by name, count, a layer's float range) and the §4 initialisation from a seed.
// Promises: the layout depends on the config only (checkpoints, the memory plan and data-parallel
// shards rely on it); the same seed gives the same weights on every backend (drawn on the host in
// fp32, then copied to the backend's masters and working copy).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/model.h"
#include "model/model_impl.h"

// ---- the table --------------------------------------------------------------------------------

static int add_param(kda_model *m, int cap, const char *name, int ndim, const int *shape, float wd) {
    KDA_CHECK(m->n_params < cap, "parameter table overflow");
    kda_param *p = &m->params[m->n_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->weight_decay = wd;
    return m->n_params++; // its offset: place_params
}

// The parameters of a layer that one GEMM reads as one weight: each group's tensors follow each
// other unpadded (model.c: the attention input projection; gate and up). Returns the count (<= 6).
static int weight_group(const kda_layer_params *lp, int first, int *members) {
    if (first == lp->q_proj) {
        const int g[] = {lp->q_proj, lp->k_proj, lp->v_proj, lp->f_proj0, lp->g_proj0, lp->b_proj};
        memcpy(members, g, sizeof g);
        return 6;
    }
    if (first == lp->gate_proj) {
        members[0] = lp->gate_proj, members[1] = lp->up_proj;
        return 2;
    }
    return 0;
}

// Offsets in registration order (the order the initialisation draws in), each tensor 16-float
// aligned, except the members of a weight group (weight_group), placed at their first member's
// turn one after another (only the group's start is aligned).
static void place_params(kda_model *m) {
    char *placed = kda_calloc(m->n_params, 1);
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (placed[i]) continue;
        int group[6], n = 0;
        for (int l = 0; l < m->cfg.num_hidden_layers && !n; l++) n = weight_group(&m->layer[l], i, group);
        if (!n) group[0] = i, n = 1;
        for (int g = 0; g < n; g++)
            m->params[group[g]].offset = off, off += m->params[group[g]].numel, placed[group[g]] = 1;
        off = kda_param_span(off);
    }
    m->n_floats = off;
    free(placed);
}

// The small parameters (ops.h role S) and their places in m->small.
static void mark_small_params(kda_model *m) {
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        const kda_layer_params *lp = &m->layer[l];
        const int mine[] = {lp->attn_norm, lp->q_conv,  lp->k_conv, lp->v_conv,
                            lp->A_log,     lp->dt_bias, lp->o_norm, lp->mlp_norm};
        for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) m->params[mine[i]].small = 1;
    }
    m->params[m->final_norm].small = 1;
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].small) m->params[i].small_off = off, off += kda_param_span(m->params[i].numel);
    m->n_small = off;
}

const float *kda_model_small_param(const kda_model *m, int idx) {
    const kda_param *p = &m->params[idx];
    KDA_CHECK(p->small, "%s is not a small parameter (ops.h role S)", p->name);
    KDA_CHECK(m->master || m->small, "%s: no fp32 masters and no gathered copy of the small parameters", p->name);
    return m->master ? m->master + p->offset : m->small + p->small_off;
}

void kda_model_small_gather(kda_model *m, const float *master, size_t lo, size_t n) {
    const kda_ops *o = m->ops;
    if (!m->small) m->small = o->alloc(m->n_small * sizeof(float));
    o->zero(m->small, m->n_small * sizeof(float));
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        size_t a, len = kda_overlap(p->offset, p->offset + p->numel, lo, lo + n, &a);
        if (!p->small || !len) continue;
        o->copy(m->small + p->small_off + (a - p->offset), master + (a - lo), len * sizeof(float));
    }
}

#define P1(a) ((int[]){a})
#define P2(a, b) ((int[]){a, b})
#define P3(a, b, c) ((int[]){a, b, c})

void kda_model_register_params(kda_model *m) {
    const kda_config *c = &m->cfg;
    int d = c->hidden_size, H = c->num_heads, K = c->head_dim, Vd = c->head_v_dim;
    int Dk = c->key_dim, Dv = c->value_dim, Dg = H * K, r = Vd, F = c->intermediate_size, W = c->conv_size;
    float wd = (float)c->weight_decay;
    int cap = 2 + 21 * c->num_hidden_layers;
    m->params = kda_calloc(cap, sizeof(kda_param));
    m->layer = kda_calloc(c->num_hidden_layers, sizeof(kda_layer_params));
    m->embed = add_param(m, cap, "model.embeddings.weight", 2, P2(c->vocab_size, d), wd);
    char nm[KDA_NAME_MAX];
#define LP(field, suffix, nd, shp, decay)                                                                              \
    do {                                                                                                               \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                                      \
        lp->field = add_param(m, cap, nm, nd, shp, decay);                                                             \
    } while (0)
    for (int l = 0; l < c->num_hidden_layers; l++) {
        kda_layer_params *lp = &m->layer[l];
        LP(attn_norm, "attn_norm.weight", 1, P1(d), 0);
        LP(q_proj, "attn.q_proj.weight", 2, P2(Dk, d), wd);
        LP(k_proj, "attn.k_proj.weight", 2, P2(Dk, d), wd);
        LP(v_proj, "attn.v_proj.weight", 2, P2(Dv, d), wd);
        LP(q_conv, "attn.q_conv1d.weight", 3, P3(Dk, 1, W), wd);
        LP(k_conv, "attn.k_conv1d.weight", 3, P3(Dk, 1, W), wd);
        LP(v_conv, "attn.v_conv1d.weight", 3, P3(Dv, 1, W), wd);
        LP(f_proj0, "attn.f_proj.0.weight", 2, P2(r, d), wd);
        LP(f_proj1, "attn.f_proj.1.weight", 2, P2(Dg, r), wd);
        LP(b_proj, "attn.b_proj.weight", 2, P2(H, d), wd);
        LP(A_log, "attn.A_log", 1, P1(H), wd); // decayed: §6.3
        LP(dt_bias, "attn.dt_bias", 1, P1(Dg), 0);
        LP(g_proj0, "attn.g_proj.0.weight", 2, P2(r, d), wd);
        LP(g_proj1, "attn.g_proj.1.weight", 2, P2(Dv, r), wd);
        LP(g_proj1_bias, "attn.g_proj.1.bias", 1, P1(Dv), 0);
        LP(o_norm, "attn.o_norm.weight", 1, P1(Vd), 0);
        LP(o_proj, "attn.o_proj.weight", 2, P2(d, Dv), wd);
        LP(mlp_norm, "mlp_norm.weight", 1, P1(d), 0);
        LP(gate_proj, "mlp.gate_proj.weight", 2, P2(F, d), wd);
        LP(up_proj, "mlp.up_proj.weight", 2, P2(F, d), wd);
        LP(down_proj, "mlp.down_proj.weight", 2, P2(d, F), wd);
    }
#undef LP
    m->final_norm = add_param(m, cap, "model.norm.weight", 1, P1(d), 0);
    place_params(m);
    mark_small_params(m);
}

int kda_model_find_param(const kda_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return i;
    return -1;
}

size_t kda_model_num_params(const kda_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].numel;
    return n;
}

// ---- queries ---------------------------------------------------------------------------------

void kda_model_layer_range(const kda_model *m, int l, size_t *lo, size_t *hi) {
    const int *ix = (const int *)&m->layer[l];
    size_t a = (size_t)-1, b = 0;
    for (size_t i = 0; i < sizeof(kda_layer_params) / sizeof(int); i++) {
        const kda_param *p = &m->params[ix[i]];
        if (p->offset < a) a = p->offset;
        size_t e = kda_param_end(p);
        if (e > b) b = e;
    }
    *lo = a;
    *hi = b;
}

// ---- initialisation (§4) ------------------------------------------------------------------

void kda_model_init(kda_model *m, uint64_t seed) {
    kda_rng rng;
    kda_rng_seed(&rng, seed);
    float *host = kda_malloc(m->n_floats * sizeof(float));
    memset(host, 0, m->n_floats * sizeof(float));
    double std = m->cfg.initializer_range;
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        float *x = host + p->offset;
        const char *nm = p->name;
        size_t len = strlen(nm);
        int is_norm = strstr(nm, "norm.weight") != NULL;
        if (is_norm) {
            for (size_t j = 0; j < p->numel; j++) x[j] = 1.0f;
        } else if (len >= 5 && !strcmp(nm + len - 5, "A_log")) {
            for (size_t j = 0; j < p->numel; j++) x[j] = (float)log(1.0 + 15.0 * kda_rng_uniform(&rng));
        } else if (len >= 7 && !strcmp(nm + len - 7, "dt_bias")) {
            const double lo = log(0.001), hi = log(0.1);
            for (size_t j = 0; j < p->numel; j++) {
                double dt = exp(kda_rng_uniform(&rng) * (hi - lo) + lo);
                if (dt < 1e-4) dt = 1e-4;
                x[j] = (float)(dt + log(-expm1(-dt))); // softplus^-1(dt)
            }
        } else if (len >= 4 && !strcmp(nm + len - 4, "bias")) {
            // zero
        } else {
            for (size_t j = 0; j < p->numel; j++) x[j] = (float)(std * kda_rng_normal(&rng));
        }
    }
    m->ops->to_device(m->master, host, m->n_floats * sizeof(float));
    m->ops->master_to_work(m->master, m->work, m->n_floats);
    free(host);
}
