// optim.c — see optim.h.
#include "model/optim.h"
#include "base/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double kda_lr_at(const kda_config *c, long k) {
    double peak = c->lr, lo = c->min_lr;
    long warm = c->lr_warmup_iters, decay = c->lr_decay_iters;
    if (warm > 0 && k < warm) return peak * (double)k / (double)warm;
    if (!strcmp(c->lr_decay_style, "constant")) return peak;
    if (k >= decay) return lo;
    double frac = decay > warm ? (double)(k - warm) / (double)(decay - warm) : 1.0;
    if (!strcmp(c->lr_decay_style, "linear")) return lo + (peak - lo) * (1.0 - frac);
    return lo + (peak - lo) * 0.5 * (1.0 + cos(M_PI * frac)); // cosine
}

kda_step_info kda_optim_step(kda_model *m, double lr, long step1) {
    kda_model_alloc_optim(m);
    // padding between tensors is always zero, so one pass over the buffer is the global norm;
    // a non-finite gradient makes Σg² non-finite (finite squares cannot overflow a double)
    double ss = m->ops->sumsq(m->grad, m->n_floats);
    return kda_optim_apply(m, m->master, m->adam_m, m->adam_v, 0, m->n_floats, ss, lr, step1);
}

kda_step_info kda_optim_apply(kda_model *m, float *master, float *adam_m, float *adam_v, size_t s0, size_t s1,
                              double ss, double lr, long step1) {
    kda_step_info info = {0, 1, 0};
    if (!isfinite(ss)) {
        info.nonfinite = 1;
        info.grad_norm = NAN;
        return info;
    }
    info.grad_norm = sqrt(ss);
    float gscale = 1.0f;
    double clip = m->cfg.clip_grad;
    if (clip > 0) {
        double coef = clip / (info.grad_norm + 1e-6);
        if (coef < 1) {
            info.clip_coef = coef;
            gscale = (float)coef;
        }
    }
    float b1 = (float)m->cfg.adam_beta1, b2 = (float)m->cfg.adam_beta2;
    float bc1 = (float)(1.0 - pow(m->cfg.adam_beta1, (double)step1));
    float bc2 = (float)(1.0 - pow(m->cfg.adam_beta2, (double)step1));
    // clip and AdamW over every tensor piece in the range in one call (one launch on the GPU);
    // offsets from s0 in every buffer
    const kda_ops *o = m->ops;
    kda_adamw_seg *segs = kda_malloc((size_t)m->n_params * sizeof *segs + 1);
    int nseg = 0;
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        size_t a, len = kda_overlap(p->offset, p->offset + p->numel, s0, s1, &a);
        if (len) segs[nseg++] = (kda_adamw_seg){a - s0, len, p->weight_decay};
    }
    o->adamw_multi(master, (char *)m->work + s0 * (size_t)o->w_bytes, m->grad + s0, adam_m, adam_v, segs, nseg, gscale,
                   (float)lr, b1, b2, (float)m->cfg.adam_eps, bc1, bc2);
    free(segs);
    return info;
}
