// optim.h — learning-rate schedule, global-norm clipping and AdamW (kda-model.md §6.2–§6.4).
#ifndef KDA_OPTIM_H
#define KDA_OPTIM_H

#include "base/config.h"
#include "model/model.h"

// lr for the update with k updates already applied (k = 0 is the first: lr 0 under warm-up).
double kda_lr_at(const kda_config *c, long k);

typedef struct {
    double grad_norm; // before clipping
    double clip_coef; // 1 when not clipped
    int nonfinite;    // a NaN/Inf was found in the gradients (no update applied)
} kda_step_info;

// Clip the accumulated gradients to cfg.clip_grad (coef = clip/(norm+1e-6) if < 1), then one
// AdamW update of every parameter (decoupled decay per parameter group) with step number
// step1 (1-based) and learning rate lr; gradients are left as they are (caller zeroes).
kda_step_info kda_optim_step(kda_model *m, double lr, long step1);

// The update on the parameter range [s0, s1) of the flat buffers, given the global Σg² ss of
// every gradient (non-finite: no update): the clip factor from it, then one adamw_multi over the
// tensors' pieces inside the range; master, adam_m, adam_v hold the range from s0 (the whole
// buffers with s0 = 0, or a ZeRO-1 shard). kda_optim_step is this on [0, n_floats), so one rank
// of the sharded step gives the plain step's bits.
kda_step_info kda_optim_apply(kda_model *m, float *master, float *adam_m, float *adam_v, size_t s0, size_t s1,
                              double ss, double lr, long step1);

#endif
