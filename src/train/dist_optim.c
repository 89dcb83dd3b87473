// dist_optim.c — see dist_optim.h.
#include "train/dist_optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

struct kda_dist_optim {
    kda_model *m;
    kda_comm *c;
    int sharded;
    size_t S, lo;  // this rank's shard: floats [lo, lo + S)
    float *master; // fp32 masters of the shard (CPU: m->master + lo; CUDA: own buffer)
    int own_master;
    float *adam_m, *adam_v; // moments of the shard [S]
    kda_ckpt_shards ckpt;   // how checkpoints reach the shards (sharded only)
};

#define SHARD_ALIGN 16

static void on_grad_ready(void *user, size_t a, size_t b) {
    kda_dist_optim *o = user;
    kda_comm *c = o->c;
    if (c->world == 1 && !o->sharded) return;
    if (!o->sharded) {
        c->allreduce_f32(c, o->m->grad + a, b - a);
        return;
    }
    // reduce each owner's part of [a, b) to its owner
    c->group_start(c);
    for (int r = 0; r < c->world; r++) {
        size_t x0, len = kda_overlap(a, b, (size_t)r * o->S, (size_t)(r + 1) * o->S, &x0);
        if (len) c->reduce_f32(c, o->m->grad + x0, len, r);
    }
    c->group_end(c);
}

// The small parameters' fp32 copy (model.h: kda_model_small_param), where the whole masters are
// gone: each rank's shard of them, summed over the ranks (zeros elsewhere: exact).
static void small_params_current(kda_dist_optim *o) {
    kda_model *m = o->m;
    if (!m->small) return;
    kda_model_small_gather(m, o->master, o->lo, o->S);
    o->c->allreduce_f32(o->c, m->small, m->n_small);
    o->c->wait(o->c);
}

// ---- checkpoints: whole buffers from and to the shards (checkpoint.h) ---------------------

static float *shard_of(kda_dist_optim *o, kda_ckpt_buf which) {
    return which == KDA_CKPT_WEIGHTS ? o->master : which == KDA_CKPT_EXP_AVG ? o->adam_m : o->adam_v;
}

static void ckpt_gather(void *owner, kda_ckpt_buf which, float *host) {
    kda_dist_optim *o = owner;
    memset(host, 0, o->m->n_alloc * sizeof(float));
    // the gradient buffer is dead between steps (zeroed at the start of each) and holds S floats
    o->c->gather_to_root(o->c, shard_of(o, which), o->S * sizeof(float), host, 0, o->m->grad);
}

static void ckpt_scatter(void *owner, kda_ckpt_buf which, const float *host) {
    kda_dist_optim *o = owner;
    kda_model *m = o->m;
    const kda_ops *ops = m->ops;
    ops->to_device(shard_of(o, which), host + o->lo, o->S * sizeof(float));
    if (which == KDA_CKPT_WEIGHTS) { // CUDA: shard masters -> working copy, then all-gather
        ops->master_to_work(o->master, (char *)m->work + o->lo * (size_t)ops->w_bytes, o->S);
        o->c->allgather(o->c, m->work, o->S * (size_t)ops->w_bytes);
        o->c->wait(o->c);
        small_params_current(o);
    }
    ops->sync();
}

kda_dist_optim *kda_dist_optim_create(kda_model *m, kda_comm *c, int sharded) {
    KDA_CHECK(!m->adam_m, "kda_dist_optim_create: the model already has whole optimizer state");
    kda_dist_optim *o = kda_calloc(1, sizeof *o);
    o->m = m;
    o->c = c;
    o->sharded = sharded;
    const kda_ops *ops = m->ops;
    if (!sharded) {
        o->S = m->n_floats;
        o->lo = 0;
        kda_model_alloc_optim(m);
    } else {
        size_t per = (m->n_floats + (size_t)c->world - 1) / (size_t)c->world;
        o->S = (per + SHARD_ALIGN - 1) / SHARD_ALIGN * SHARD_ALIGN;
        o->lo = (size_t)c->rank * o->S;
        if ((size_t)c->world * o->S > m->n_alloc)
            kda_die("%d ranks: shards of %zu floats overrun the parameter buffers (%zu floats); at most %zu ranks",
                    c->world, o->S, m->n_alloc, (size_t)(KDA_SHARD_SLACK / SHARD_ALIGN));
        o->adam_m = ops->alloc(o->S * sizeof(float));
        o->adam_v = ops->alloc(o->S * sizeof(float));
        ops->zero(o->adam_m, o->S * sizeof(float));
        ops->zero(o->adam_v, o->S * sizeof(float));
        if (m->work == (void *)m->master) {
            o->master = m->master + o->lo; // CPU: the fp32 weights are the working copy; keep them whole
        } else {
            // the shard's fp32 masters move to their own buffer; the whole master is freed
            float *host = kda_malloc(o->S * sizeof(float));
            ops->to_host(host, m->master + o->lo, o->S * sizeof(float));
            o->master = ops->alloc(o->S * sizeof(float));
            ops->to_device(o->master, host, o->S * sizeof(float));
            kda_model_small_gather(m, m->master, 0, m->n_floats); // the ops' fp32 small parameters
            ops->sync();
            free(host);
            ops->free(m->master);
            m->master = NULL;
            o->own_master = 1;
        }
    }
    o->ckpt = (kda_ckpt_shards){o, ckpt_gather, ckpt_scatter};
    m->grad_ready = on_grad_ready;
    m->grad_ready_user = o;
    m->grad_ready_on = 0;
    return o;
}

void kda_dist_optim_free(kda_dist_optim *o) {
    if (!o) return;
    const kda_ops *ops = o->m->ops;
    if (o->sharded) {
        ops->free(o->adam_m);
        ops->free(o->adam_v);
        if (o->own_master) ops->free(o->master);
    }
    o->m->grad_ready = NULL;
    free(o);
}

void kda_dist_optim_shard(const kda_dist_optim *o, size_t *lo, size_t *n) {
    *lo = o->lo;
    *n = o->S;
}

void kda_dist_optim_arm(kda_dist_optim *o) { o->m->grad_ready_on = 1; }

kda_step_info kda_dist_optim_step(kda_dist_optim *o, double lr, long step1) {
    kda_model *m = o->m;
    kda_comm *c = o->c;
    m->grad_ready_on = 0;
    c->wait(c);
    if (!o->sharded) return kda_optim_step(m, lr, step1);

    // the plain step's update on the shard (kda_optim_apply), from Σg² over the shard's part of
    // the tensors summed across ranks; one rank gives the plain step's bits
    size_t s0 = o->lo, s1 = o->lo + o->S, g0, glen = kda_overlap(0, m->n_floats, s0, s1, &g0);
    double ss = c->sum_f64(c, glen ? m->ops->sumsq(m->grad + g0, glen) : 0.0);
    kda_step_info info = kda_optim_apply(m, o->master, o->adam_m, o->adam_v, s0, s1, ss, lr, step1);
    if (info.nonfinite) return info;
    c->allgather(c, m->work, o->S * (size_t)m->ops->w_bytes);
    c->wait(c);
    small_params_current(o);
    return info;
}

const kda_ckpt_shards *kda_dist_optim_ckpt_shards(kda_dist_optim *o) { return o->sharded ? &o->ckpt : NULL; }
