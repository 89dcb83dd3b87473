// elementwise.cu — SwiGLU (kda-model.md §2.6): fp32 math, one rounding. (The residual adds are
// in the GEMMs that produce them: linear_fwd's res.)
// Memory-bound: each thread moves 8 elements with 16-byte loads and stores when every pointer is
// 16-byte aligned and the widths are multiples of 8 (the model's are), other calls element by element.
#include "backend/cuda/cuda_common.cuh"

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Not cuda_common's sigmoidf_ (approximate reciprocal): with it this memory-bound backward ran 22%
// slower on an H100 (session 21, 1.146 vs 0.940 ms at [65536 x 4096]; the cause is not known).
__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + __expf(-x)); }

__device__ __forceinline__ float swiglu1(float g, float u) { return g * sigm(g) * u; }
__device__ __forceinline__ void swiglu1_bwd(float g, float u, float d, float *dg, float *du) {
    float s = sigm(g);
    *dg = d * u * s * (1.0f + g * (1.0f - s));
    *du = d * g * s;
}

// The gate and up halves of the fused projection gu [N,2F] (ops.h): element e = n·F + j of z is
// gate gu[n·2F + j], up gu[n·2F + F + j]. vec: F % 8 == 0 and every pointer 16-byte aligned, each
// thread moves 8 elements (e a multiple of 8, one row); else one element a thread.

// z = silu(gate)·up, z [N,F]
__global__ void swiglu_fwd_kernel(const bf16 *__restrict__ gu, bf16 *__restrict__ z, size_t n, int F, bool vec) {
    if (vec) {
        GRID_STRIDE(i, n / 8) {
            size_t e = 8 * i, row = e / F, col = e - row * F;
            const bf16 *g = gu + row * 2 * F + col;
            float gv[8], uv[8], o[8];
            load16(g, gv);
            load16(g + F, uv);
#pragma unroll
            for (int t = 0; t < 8; t++) o[t] = swiglu1(gv[t], uv[t]);
            store16(z + e, o);
        }
        return;
    }
    GRID_STRIDE(e, n) {
        size_t row = e / F, col = e - row * F;
        const bf16 *g = gu + row * 2 * F + col;
        z[e] = f2bf(swiglu1(bf2f(g[0]), bf2f(g[F])));
    }
}

// dgu = (dgate | dup) [N,2F]; dz [N,F] rows lddz apart. z (may be NULL): the forward's product,
// rewritten from the gate and up read here anyway (selective recompute of swiglu fused into its
// backward), the bits swiglu_fwd_kernel writes. In place (ops.h): dgu may be gu and z may be dz,
// so none is __restrict__; each thread reads its elements before it writes them.
__global__ void swiglu_bwd_kernel(const bf16 *gu, const bf16 *dz, int lddz, bf16 *dgu, bf16 *z, size_t n, int F,
                                  bool vec) {
    if (vec) {
        GRID_STRIDE(i, n / 8) {
            size_t e = 8 * i, row = e / F, col = e - row * F, at = row * 2 * F + col;
            float gv[8], uv[8], dv[8], og[8], ou[8];
            load16(gu + at, gv);
            load16(gu + at + F, uv);
            load16(dz + row * lddz + col, dv);
#pragma unroll
            for (int t = 0; t < 8; t++) swiglu1_bwd(gv[t], uv[t], dv[t], &og[t], &ou[t]);
            store16(dgu + at, og);
            store16(dgu + at + F, ou);
            if (z) {
#pragma unroll
                for (int t = 0; t < 8; t++) og[t] = swiglu1(gv[t], uv[t]);
                store16(z + e, og);
            }
        }
        return;
    }
    GRID_STRIDE(e, n) {
        size_t row = e / F, col = e - row * F, at = row * 2 * F + col;
        float a, b, gi = bf2f(gu[at]), ui = bf2f(gu[at + F]);
        swiglu1_bwd(gi, ui, bf2f(dz[row * lddz + col]), &a, &b);
        dgu[at] = f2bf(a);
        dgu[at + F] = f2bf(b);
        if (z) z[e] = f2bf(swiglu1(gi, ui));
    }
}

// enough blocks to fill the GPU a few times over, each thread a few 16-byte groups
static unsigned ew_blocks(size_t n, bool vec) { return cu_blocks(vec ? n / 8 : n, 256, 132 * 16); }

void cu_swiglu_fwd(const void *gu, void *z, int N, int F) {
    size_t n = (size_t)N * F;
    if (!n) return;
    bool vec = F % 8 == 0 && cu_aligned16(gu) && cu_aligned16(z);
    swiglu_fwd_kernel<<<ew_blocks(n, vec), 256, 0, cu_stream>>>((const bf16 *)gu, (bf16 *)z, n, F, vec);
    CU_LAUNCHED();
}

void cu_swiglu_bwd(const void *gu, const void *dz, int lddz, void *dgu, void *z, int N, int F) {
    size_t n = (size_t)N * F;
    if (!n) return;
    bool vec = F % 8 == 0 && lddz % 8 == 0 && cu_aligned16(gu) && cu_aligned16(dz) && cu_aligned16(dgu) &&
        (!z || cu_aligned16(z));
    swiglu_bwd_kernel<<<ew_blocks(n, vec), 256, 0, cu_stream>>>((const bf16 *)gu, (const bf16 *)dz, lddz, (bf16 *)dgu,
                                                                (bf16 *)z, n, F, vec);
    CU_LAUNCHED();
}
