// conv_one.h — the short-conv ops (ops.h: a call takes channel groups) for one group of C
// channels at x's first column (x and dx may point into a wider matrix): the tests' plain form.
#ifndef KDA_TEST_CONV_ONE_H
#define KDA_TEST_CONV_ONE_H

#include "model/ops.h"

static inline void conv_fwd1(const kda_ops *o, const void *x, int ldx, const float *w, void *y, int B, int T, int C,
                             int W) {
    kda_conv_group g = {0, C, w, y, NULL, NULL};
    o->conv_silu_fwd(x, ldx, &g, 1, B, T, W);
}

static inline void conv_bwd1(const kda_ops *o, const void *x, int ldx, const float *w, const void *dy, void *dx,
                             float *dw, int B, int T, int C, int W) {
    kda_conv_group g = {0, C, w, NULL, dy, dw};
    o->conv_silu_bwd(x, ldx, dx, &g, 1, B, T, W);
}

#endif
