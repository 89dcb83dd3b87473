// elementwise.cu — SwiGLU (kda-model.md §2.6): fp32 math, one rounding. (The residual adds are
// in the GEMMs that produce them: linear_fwd's res.)
// Memory-bound: each thread moves 8 elements with 16-byte loads and stores when every pointer is
// 16-byte aligned (the planned buffers are), the n % 8 tail and unaligned calls element by element.
#include "backend/cuda/cuda_common.cuh"

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + __expf(-x)); }

__device__ __forceinline__ float swiglu1(float g, float u) { return g * sigm(g) * u; }
__device__ __forceinline__ void swiglu1_bwd(float g, float u, float d, float *dg, float *du) {
    float s = sigm(g);
    *dg = d * u * s * (1.0f + g * (1.0f - s));
    *du = d * g * s;
}

// n8: the count of 8-element groups done with vectors (0 when not aligned); the rest one by one
__global__ void swiglu_fwd_kernel(const bf16 *__restrict__ g, const bf16 *__restrict__ u, bf16 *__restrict__ z,
                                  size_t n, size_t n8) {
    GRID_STRIDE(i, n8) {
        float gv[8], uv[8], o[8];
        load16(g + 8 * i, gv);
        load16(u + 8 * i, uv);
#pragma unroll
        for (int t = 0; t < 8; t++) o[t] = swiglu1(gv[t], uv[t]);
        store16(z + 8 * i, o);
    }
    GRID_STRIDE(j, n - 8 * n8) {
        size_t i = 8 * n8 + j;
        z[i] = f2bf(swiglu1(bf2f(g[i]), bf2f(u[i])));
    }
}

// z (may be NULL): the forward's product, rewritten from the gate and up read here anyway
// (selective recompute of swiglu fused into its backward), the bits swiglu_fwd_kernel writes.
// dg may be dz (in place: each thread reads its elements of dz before it writes them to dg), so
// neither is __restrict__.
__global__ void swiglu_bwd_kernel(const bf16 *__restrict__ g, const bf16 *__restrict__ u, const bf16 *dz, bf16 *dg,
                                  bf16 *__restrict__ du, bf16 *__restrict__ z, size_t n, size_t n8) {
    GRID_STRIDE(i, n8) {
        float gv[8], uv[8], dv[8], og[8], ou[8];
        load16(g + 8 * i, gv);
        load16(u + 8 * i, uv);
        load16(dz + 8 * i, dv);
#pragma unroll
        for (int t = 0; t < 8; t++) swiglu1_bwd(gv[t], uv[t], dv[t], &og[t], &ou[t]);
        store16(dg + 8 * i, og);
        store16(du + 8 * i, ou);
        if (z) {
#pragma unroll
            for (int t = 0; t < 8; t++) og[t] = swiglu1(gv[t], uv[t]);
            store16(z + 8 * i, og);
        }
    }
    GRID_STRIDE(j, n - 8 * n8) {
        size_t i = 8 * n8 + j;
        float a, b, gi = bf2f(g[i]), ui = bf2f(u[i]);
        swiglu1_bwd(gi, ui, bf2f(dz[i]), &a, &b);
        dg[i] = f2bf(a);
        du[i] = f2bf(b);
        if (z) z[i] = f2bf(swiglu1(gi, ui));
    }
}

static size_t groups8(size_t n, bool aligned) { return aligned ? n / 8 : 0; }

// enough blocks to fill the GPU a few times over, each thread a few 16-byte groups
static unsigned ew_blocks(size_t n8, size_t n) { return cu_blocks(n8 ? n8 : n, 256, 132 * 16); }

void cu_swiglu_fwd(const void *gate, const void *up, void *z, size_t n) {
    if (!n) return;
    size_t n8 = groups8(n, cu_aligned16(gate) && cu_aligned16(up) && cu_aligned16(z));
    swiglu_fwd_kernel<<<ew_blocks(n8, n), 256, 0, cu_stream>>>((const bf16 *)gate, (const bf16 *)up, (bf16 *)z, n, n8);
    CU_LAUNCHED();
}

void cu_swiglu_bwd(const void *gate, const void *up, const void *dz, void *dgate, void *dup, void *z, size_t n) {
    if (!n) return;
    size_t n8 = groups8(n,
                        cu_aligned16(gate) && cu_aligned16(up) && cu_aligned16(dz) && cu_aligned16(dgate) &&
                            cu_aligned16(dup) && (!z || cu_aligned16(z)));
    swiglu_bwd_kernel<<<ew_blocks(n8, n), 256, 0, cu_stream>>>((const bf16 *)gate, (const bf16 *)up, (const bf16 *)dz,
                                                               (bf16 *)dgate, (bf16 *)dup, (bf16 *)z, n, n8);
    CU_LAUNCHED();
}
