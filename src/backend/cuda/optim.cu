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

// ---- AdamW over every tensor in one launch (ops.h adamw_flat) ----
// The host cuts the segments into pieces of at most PIECE elements (a block each) and uploads
// that table when it changes (once per model). A thread moves 4 elements with 16-byte accesses
// of p, g, m, v (segments start at multiples of 16 floats), 8 bytes of the bf16 copy.
enum { PIECE = 8192, ADAM_THREADS = 256 };

struct adam_piece {
    size_t start; // element offset
    int n;
    float wd;
};

__device__ __forceinline__ float adam1(float pi, float gi, float &mi, float &vi, float lr, float b1, float b2, float eps,
                                       float wd, float bc1, float bc2) {
    float th = pi * (1.0f - lr * wd);
    mi = b1 * mi + (1.0f - b1) * gi;
    vi = b2 * vi + (1.0f - b2) * gi * gi;
    return th - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
}

__global__ void __launch_bounds__(ADAM_THREADS)
adamw_flat_kernel(float *__restrict__ p, bf16 *__restrict__ w, const float *__restrict__ g, float *__restrict__ m,
                  float *__restrict__ v, const adam_piece *__restrict__ pieces, float lr, float b1, float b2, float eps,
                  float bc1, float bc2) {
    adam_piece pc = pieces[blockIdx.x];
    bool vec = (pc.start & 3) == 0;
    int n4 = vec ? pc.n / 4 : 0;
    for (int q = threadIdx.x; q < n4; q += ADAM_THREADS) {
        size_t i = pc.start + 4 * (size_t)q;
        float4 P = *(float4 *)(p + i), G = *(const float4 *)(g + i), M = *(float4 *)(m + i), V = *(float4 *)(v + i);
        P.x = adam1(P.x, G.x, M.x, V.x, lr, b1, b2, eps, pc.wd, bc1, bc2);
        P.y = adam1(P.y, G.y, M.y, V.y, lr, b1, b2, eps, pc.wd, bc1, bc2);
        P.z = adam1(P.z, G.z, M.z, V.z, lr, b1, b2, eps, pc.wd, bc1, bc2);
        P.w = adam1(P.w, G.w, M.w, V.w, lr, b1, b2, eps, pc.wd, bc1, bc2);
        *(float4 *)(p + i) = P, *(float4 *)(m + i) = M, *(float4 *)(v + i) = V;
        __nv_bfloat162 lo = __floats2bfloat162_rn(P.x, P.y), hi = __floats2bfloat162_rn(P.z, P.w);
        uint2 pk = make_uint2(*(unsigned *)&lo, *(unsigned *)&hi);
        *(uint2 *)(w + i) = pk;
    }
    for (int k = 4 * n4 + threadIdx.x; k < pc.n; k += ADAM_THREADS) {
        size_t i = pc.start + k;
        float mi = m[i], vi = v[i];
        float th = adam1(p[i], g[i], mi, vi, lr, b1, b2, eps, pc.wd, bc1, bc2);
        m[i] = mi, v[i] = vi, p[i] = th;
        w[i] = f2bf(th);
    }
}

static adam_piece *pieces_host, *pieces_dev;
static int n_pieces, cap_pieces;

void cu_adamw_flat(float *p, void *w, const float *g, float *m, float *v, const kda_adamw_seg *segs, int nseg,
                   float lr, float beta1, float beta2, float eps, float bc1, float bc2) {
    KDA_CHECK((void *)p != w, "adamw_flat: the CUDA backend keeps a separate bf16 working copy; w must not alias p");
    KDA_CHECK(((uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v) % 16 == 0 && (uintptr_t)w % 8 == 0,
              "adamw_flat: buffers must be 16-byte aligned");
    int want = 0;
    for (int i = 0; i < nseg; i++) want += (int)((segs[i].n + PIECE - 1) / PIECE);
    adam_piece *t = (adam_piece *)kda_malloc(sizeof *t * (size_t)(want ? want : 1));
    int k = 0;
    for (int i = 0; i < nseg; i++)
        for (size_t o = 0; o < segs[i].n; o += PIECE) {
            size_t left = segs[i].n - o;
            t[k++] = adam_piece{segs[i].offset + o, (int)(left < (size_t)PIECE ? left : (size_t)PIECE), segs[i].wd};
        }
    if (k != n_pieces || memcmp(t, pieces_host, sizeof *t * (size_t)k)) { // a new table: upload it
        if (k > cap_pieces) {
            if (pieces_dev) CU_CHECK(cudaFree(pieces_dev));
            CU_CHECK(cudaMalloc(&pieces_dev, sizeof *t * (size_t)k));
            cap_pieces = k;
        }
        CU_CHECK(cudaMemcpyAsync(pieces_dev, t, sizeof *t * (size_t)k, cudaMemcpyHostToDevice, cu_stream));
        CU_CHECK(cudaStreamSynchronize(cu_stream)); // t is freed below
        free(pieces_host);
        pieces_host = t, n_pieces = k;
    } else {
        free(t);
    }
    if (!n_pieces) return;
    adamw_flat_kernel<<<n_pieces, ADAM_THREADS, 0, cu_stream>>>(p, (bf16 *)w, g, m, v, pieces_dev, lr, beta1, beta2,
                                                               eps, bc1, bc2);
    CU_LAUNCHED();
}
