// elementwise.cu — SwiGLU (kda-model.md §2.6) and the residual add: fp32 math, one rounding.
#include "backend/cuda/cuda_common.cuh"

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void swiglu_fwd_kernel(const bf16 *__restrict__ g, const bf16 *__restrict__ u, bf16 *__restrict__ z,
                                  size_t n) {
    GRID_STRIDE(i, n) {
        float gv = bf2f(g[i]);
        z[i] = f2bf(gv * sigmoidf_(gv) * bf2f(u[i]));
    }
}

__global__ void swiglu_bwd_kernel(const bf16 *__restrict__ g, const bf16 *__restrict__ u, const bf16 *__restrict__ dz,
                                  bf16 *__restrict__ dg, bf16 *__restrict__ du, size_t n) {
    GRID_STRIDE(i, n) {
        float gv = bf2f(g[i]), uv = bf2f(u[i]), d = bf2f(dz[i]);
        float s = sigmoidf_(gv);
        dg[i] = f2bf(d * uv * s * (1.0f + gv * (1.0f - s)));
        du[i] = f2bf(d * gv * s);
    }
}

// y may alias a or b: each element is read before it is written by the same thread
__global__ void add_kernel(const bf16 *a, const bf16 *b, bf16 *y, size_t n) {
    GRID_STRIDE(i, n) y[i] = f2bf(bf2f(a[i]) + bf2f(b[i]));
}

void cu_swiglu_fwd(const void *gate, const void *up, void *z, size_t n) {
    if (!n) return;
    swiglu_fwd_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>((const bf16 *)gate, (const bf16 *)up, (bf16 *)z, n);
    CU_LAUNCHED();
}

void cu_swiglu_bwd(const void *gate, const void *up, const void *dz, void *dgate, void *dup, size_t n) {
    if (!n) return;
    swiglu_bwd_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>((const bf16 *)gate, (const bf16 *)up,
                                                               (const bf16 *)dz, (bf16 *)dgate, (bf16 *)dup, n);
    CU_LAUNCHED();
}

void cu_add(const void *a, const void *b, void *y, size_t n) {
    if (!n) return;
    add_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>((const bf16 *)a, (const bf16 *)b, (bf16 *)y, n);
    CU_LAUNCHED();
}
