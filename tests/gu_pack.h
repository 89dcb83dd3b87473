// gu_pack.h — the fused gate/up layout of ops.h's swiglu (gu [N,2F]: gate in each row's first F
// columns, up in the next F) built from separate g and u [N,F], for the CPU and CUDA op tests.
#ifndef KDA_TEST_GU_PACK_H
#define KDA_TEST_GU_PACK_H

#include <string.h>

#include "base/common.h"

static inline float *gu_pack(const float *g, const float *u, int N, int F) {
    float *gu = kda_malloc((size_t)N * 2 * F * sizeof(float));
    for (int r = 0; r < N; r++) {
        memcpy(gu + (size_t)r * 2 * F, g + (size_t)r * F, (size_t)F * sizeof(float));
        memcpy(gu + (size_t)r * 2 * F + F, u + (size_t)r * F, (size_t)F * sizeof(float));
    }
    return gu;
}

#endif
