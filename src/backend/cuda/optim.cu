// optim.cu — optimizer-side ops on fp32 tensors: Σg² (deterministic, fp64 partials), scale,
// non-finite check, AdamW on the fp32 master with the bf16 working copy (kda-model.md §6.3),
// and master → working copy.
#include "backend/cuda/cuda_common.cuh"

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

enum { SUMSQ_BLOCKS = 1024, SUMSQ_THREADS = 256 };

__global__ void sumsq_partial(const float *__restrict__ g, size_t n, double *__restrict__ part) {
    __shared__ double s[SUMSQ_THREADS];
    double acc = 0.0;
    GRID_STRIDE(i, n) acc += (double)g[i] * g[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int h = SUMSQ_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

double cu_sumsq(const float *g, size_t n) {
    if (!n) return 0.0;
    unsigned G = cu_blocks(n, SUMSQ_THREADS, SUMSQ_BLOCKS);
    double *part = (double *)cu_scratch(SUMSQ_BLOCKS * sizeof(double));
    sumsq_partial<<<G, SUMSQ_THREADS, 0, cu_stream>>>(g, n, part);
    CU_LAUNCHED();
    double host[SUMSQ_BLOCKS];
    CU_CHECK(cudaMemcpyAsync(host, part, G * sizeof(double), cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    double s = 0.0;
    for (unsigned b = 0; b < G; b++) s += host[b];
    return s;
}

__global__ void scale_kernel(float *g, float s, size_t n) {
    GRID_STRIDE(i, n) g[i] *= s;
}

void cu_scale(float *g, float s, size_t n) {
    if (!n) return;
    scale_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>(g, s, n);
    CU_LAUNCHED();
}

__global__ void nonfinite_kernel(const float *__restrict__ g, size_t n, int *flag) {
    int bad = 0;
    GRID_STRIDE(i, n) bad |= !isfinite(g[i]);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

int cu_has_nonfinite(const float *g, size_t n) {
    if (!n) return 0;
    int *flag = (int *)cu_scratch(sizeof(int));
    CU_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), cu_stream));
    nonfinite_kernel<<<cu_blocks(n, 256, 4096), 256, 0, cu_stream>>>(g, n, flag);
    CU_LAUNCHED();
    int h = 0;
    CU_CHECK(cudaMemcpyAsync(&h, flag, sizeof h, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    return h;
}

// Same expression order as the CPU reference (ops_cpu.c), so the two agree to an ulp or so.
__global__ void adamw_kernel(float *__restrict__ p, bf16 *__restrict__ w, const float *__restrict__ g,
                             float *__restrict__ m, float *__restrict__ v, size_t n, float lr, float beta1, float beta2,
                             float eps, float wd, float bc1, float bc2) {
    GRID_STRIDE(i, n) {
        float gi = g[i];
        float th = p[i] * (1.0f - lr * wd);
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        th -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        p[i] = th;
        if (w) w[i] = f2bf(th);
    }
}

void cu_adamw(float *p, void *w, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
              float eps, float wd, float bc1, float bc2) {
    if (!n) return;
    KDA_CHECK((void *)p != w, "adamw: the CUDA backend keeps a separate bf16 working copy; w must not alias p");
    adamw_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>(p, (bf16 *)w, g, m, v, n, lr, beta1, beta2, eps, wd, bc1,
                                                         bc2);
    CU_LAUNCHED();
}

__global__ void master_to_work_kernel(const float *__restrict__ p, bf16 *__restrict__ w, size_t n) {
    GRID_STRIDE(i, n) w[i] = f2bf(p[i]);
}

void cu_master_to_work(const float *p, void *w, size_t n) {
    if (!n) return;
    master_to_work_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>(p, (bf16 *)w, n);
    CU_LAUNCHED();
}
