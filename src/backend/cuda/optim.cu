// optim.cu — optimizer-side ops on fp32 tensors: Σg² (deterministic, fp64 partials), scale,
// non-finite check, AdamW on the fp32 master with the bf16 working copy (kda-model.md §6.3),
// and master → working copy.
#include "backend/cuda/cuda_common.cuh"

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

enum { SUMSQ_BLOCKS = 1024, SUMSQ_THREADS = 256 };

// Block b sums float4 groups b, b+G, ... (16-byte loads) and the scalar tail; the last block to
// finish (an integer counter, not a float atomic) adds the G partials in block order, so the
// result does not depend on which block finished when. One launch; 8 bytes come back.
__device__ unsigned sumsq_done;

__global__ void __launch_bounds__(SUMSQ_THREADS)
    sumsq_kernel(const float *__restrict__ g, size_t n, int vec, double *__restrict__ part, double *__restrict__ out) {
    __shared__ double s[SUMSQ_THREADS];
    __shared__ bool last;
    double acc = 0.0;
    size_t n4 = vec ? n / 4 : 0;
    const float4 *g4 = (const float4 *)g;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 x = __ldg(g4 + i);
        acc += (double)x.x * x.x;
        acc += (double)x.y * x.y;
        acc += (double)x.z * x.z;
        acc += (double)x.w * x.w;
    }
    for (size_t i = n4 * 4 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (double)g[i] * g[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int h = SUMSQ_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[blockIdx.x] = s[0];
        __threadfence();
        last = atomicAdd(&sumsq_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // fixed order: thread t sums partials t, t+256, ...; then the same tree as above
    double a = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) a += ((volatile double *)part)[b];
    s[threadIdx.x] = a;
    __syncthreads();
    for (int h = SUMSQ_THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *out = s[0];
        sumsq_done = 0; // ready for the next launch (launches on one stream do not overlap)
    }
}

size_t cu_sumsq_scratch_bytes(void) { return (SUMSQ_BLOCKS + 1) * sizeof(double); } // partials and the sum

double cu_sumsq(const float *g, size_t n) {
    if (!n) return 0.0;
    int vec = cu_aligned16(g);
    unsigned G = cu_blocks(vec ? (n + 3) / 4 : n, SUMSQ_THREADS, SUMSQ_BLOCKS);
    double *part = (double *)cu_scratch(cu_sumsq_scratch_bytes());
    sumsq_kernel<<<G, SUMSQ_THREADS, 0, cu_stream>>>(g, n, vec, part, part + SUMSQ_BLOCKS);
    CU_LAUNCHED();
    double s = 0.0;
    CU_CHECK(cudaMemcpyAsync(&s, part + SUMSQ_BLOCKS, sizeof s, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    return s;
}

// ---- AdamW over many tensors in one launch ----
// The segments are cut into work items of at most ADAMW_ITEM elements; block b takes item b
// (a table in device memory, rebuilt only when the segments change: the model's are fixed).
// Items whose offset is a multiple of 4 (the model keeps every tensor 16-float aligned) on
// 16-byte aligned buffers go 4 elements a thread: 16-byte loads/stores of p, g, m, v and an
// 8-byte store of w; the rest of an item element by element. Per element: 4+4 (p) + 4 (g) +
// 4+4 (m) + 4+4 (v) + 2 (w) = 30 bytes.
enum { ADAMW_THREADS = 256, ADAMW_ITEM = ADAMW_THREADS * 4 * 4 };

struct adamw_item {
    size_t off;
    unsigned n;
    float wd;
};

struct adamw_elem_args {
    float gscale, lr, beta1, beta2, eps, bc1, bc2;
};

__device__ __forceinline__ float adamw_one(float &p, float &m, float &v, float g, float wd, const adamw_elem_args &a) {
    // the expression order of the CPU reference (ops_cpu.c)
    float gi = __fmul_rn(g, a.gscale);
    float th = p * (1.0f - a.lr * wd);
    float mi = a.beta1 * m + (1.0f - a.beta1) * gi;
    float vi = a.beta2 * v + (1.0f - a.beta2) * gi * gi;
    m = mi;
    v = vi;
    th -= a.lr * (mi / a.bc1) / (sqrtf(vi / a.bc2) + a.eps);
    p = th;
    return th;
}

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_multi_kernel(float *__restrict__ p, bf16 *__restrict__ w, const float *__restrict__ g, float *__restrict__ m,
                       float *__restrict__ v, const adamw_item *__restrict__ items, int base_vec, adamw_elem_args a) {
    adamw_item it = items[blockIdx.x];
    size_t off = it.off;
    unsigned n = it.n, n4 = (base_vec && !(off & 3)) ? n / 4 : 0;
    for (unsigned j = threadIdx.x; j < n4; j += ADAMW_THREADS) {
        size_t i = off + 4 * (size_t)j;
        float4 pp = *(const float4 *)(p + i), gg = __ldg((const float4 *)(g + i));
        float4 mm = *(const float4 *)(m + i), vv = *(const float4 *)(v + i);
        float t0 = adamw_one(pp.x, mm.x, vv.x, gg.x, it.wd, a);
        float t1 = adamw_one(pp.y, mm.y, vv.y, gg.y, it.wd, a);
        float t2 = adamw_one(pp.z, mm.z, vv.z, gg.z, it.wd, a);
        float t3 = adamw_one(pp.w, mm.w, vv.w, gg.w, it.wd, a);
        *(float4 *)(p + i) = pp, *(float4 *)(m + i) = mm, *(float4 *)(v + i) = vv;
        __nv_bfloat162 lo = __floats2bfloat162_rn(t0, t1), hi = __floats2bfloat162_rn(t2, t3);
        uint2 u;
        u.x = *(unsigned *)&lo, u.y = *(unsigned *)&hi;
        *(uint2 *)(w + i) = u;
    }
    for (unsigned j = 4 * n4 + threadIdx.x; j < n; j += ADAMW_THREADS) {
        size_t i = off + j;
        float pi = p[i], mi = m[i], vi = v[i];
        float th = adamw_one(pi, mi, vi, g[i], it.wd, a);
        p[i] = pi, m[i] = mi, v[i] = vi;
        w[i] = f2bf(th);
    }
}

static struct {
    kda_adamw_seg *segs; // host copy of the segments the table was built for
    int nseg;
    adamw_item *items; // device
    unsigned nitems;
} am;

void cu_adamw_multi(float *p, void *w, float *g, float *m, float *v, const kda_adamw_seg *segs, int nseg, float gscale,
                    float lr, float beta1, float beta2, float eps, float bc1, float bc2) {
    if (nseg <= 0) return;
    KDA_CHECK((void *)p != w, "adamw_multi: the CUDA backend keeps a separate bf16 working copy; w must not alias p");
    bool same = nseg == am.nseg;
    for (int i = 0; same && i < nseg; i++) // field by field: the struct's padding is unspecified
        same = segs[i].offset == am.segs[i].offset && segs[i].n == am.segs[i].n && segs[i].wd == am.segs[i].wd;
    if (!same) {
        size_t cnt = 0;
        for (int i = 0; i < nseg; i++) cnt += (segs[i].n + ADAMW_ITEM - 1) / (size_t)ADAMW_ITEM;
        KDA_CHECK(cnt < (1u << 31), "adamw_multi: %zu work items exceed one grid", cnt);
        adamw_item *h = (adamw_item *)kda_malloc(cnt * sizeof *h + 1);
        size_t k = 0;
        for (int i = 0; i < nseg; i++)
            for (size_t o = 0; o < segs[i].n; o += (size_t)ADAMW_ITEM) {
                size_t len = segs[i].n - o < (size_t)ADAMW_ITEM ? segs[i].n - o : (size_t)ADAMW_ITEM;
                h[k++] = adamw_item{segs[i].offset + o, (unsigned)len, segs[i].wd};
            }
        CU_CHECK(cudaStreamSynchronize(cu_stream)); // the old table may still be in use
        if (am.items) CU_CHECK(cudaFree(am.items));
        am.items = NULL;
        if (cnt) {
            CU_CHECK(cudaMalloc((void **)&am.items, cnt * sizeof *h));
            CU_CHECK(cudaMemcpy(am.items, h, cnt * sizeof *h, cudaMemcpyHostToDevice));
        }
        free(h);
        free(am.segs);
        am.segs = (kda_adamw_seg *)kda_malloc((size_t)nseg * sizeof *segs);
        memcpy(am.segs, segs, (size_t)nseg * sizeof *segs);
        am.nseg = nseg, am.nitems = (unsigned)cnt;
    }
    if (!am.nitems) return;
    adamw_elem_args a = {gscale, lr, beta1, beta2, eps, bc1, bc2};
    int base_vec = cu_aligned16(p) && cu_aligned16(g) && cu_aligned16(m) && cu_aligned16(v) && !((uintptr_t)w & 7);
    adamw_multi_kernel<<<am.nitems, ADAMW_THREADS, 0, cu_stream>>>(p, (bf16 *)w, g, m, v, am.items, base_vec, a);
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
