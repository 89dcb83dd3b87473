// embed_head.cu — token embedding (gather / deterministic scatter-add) and the tied lm_head:
// fused linear cross-entropy (kda-model.md §2.8) and plain logits.
//
// Embedding backward without float atomics: the token ids are sorted stably (CUB radix sort,
// token order kept within an id), then each run of equal ids is summed by one block per
// column tile in token order and added to its row of dE once. Same input, same bits.
//
// Fused cross-entropy: tokens are processed in chunks so the [tokens × vocab] logits never
// exist whole. Per chunk: logits = x·Eᵀ (bf16 GEMM, fp32 accumulate, bf16 store), per-row
// logsumexp in fp32, loss = lse − logit[target]; for training the chunk is overwritten in place
// by dlogits = (softmax − onehot)·grad_scale (bf16), then dx = dlogits·E (GEMM) and
// dE += dlogitsᵀ·x (fp32 accumulate GEMM). The per-row losses are summed on the device in fp64
// in a fixed order; the host reads back the sum and the count of valid targets (16 bytes).
#include "backend/cuda/cuda_common.cuh"

#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cub/device/device_radix_sort.cuh>
#include <stdlib.h>

// ---- embedding ----

__global__ void embed_fwd_kernel(const int32_t *__restrict__ ids, const bf16 *__restrict__ E, bf16 *__restrict__ out,
                                 int N, int d, int NV, int *err) {
    int n = blockIdx.x;
    int id = ids[n];
    bool ok = id >= 0 && id < NV;
    if (!ok && threadIdx.x == 0) *err = 1;
    for (int j = threadIdx.x; j < d; j += blockDim.x) out[(size_t)n * d + j] = ok ? E[(size_t)id * d + j] : f2bf(0.0f);
}

void cu_embed_fwd(const int32_t *ids, const void *E, void *out, int N, int d, int NV) {
    if (N <= 0) return;
    int threads = d < 256 ? 64 : 256;
    embed_fwd_kernel<<<N, threads, 0, cu_stream>>>(ids, (const bf16 *)E, (bf16 *)out, N, d, NV, cu_err_flag);
    CU_LAUNCHED();
}

__global__ void iota_kernel(int32_t *v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = i;
}

enum { RUN_GROUP = 64, COL_TILE = 256 };

// Block (group of RUN_GROUP sorted positions, column tile): sums every run of equal ids that
// starts inside the group, in token order, and adds it to dE once.
__global__ void embed_bwd_runs(const int32_t *__restrict__ keys, const int32_t *__restrict__ tok,
                               const bf16 *__restrict__ dout, float *__restrict__ dE, int N, int d) {
    int j = blockIdx.y * COL_TILE + threadIdx.x;
    int p0 = blockIdx.x * RUN_GROUP, p1 = min(N, p0 + RUN_GROUP);
    for (int p = p0; p < p1; p++) {
        int id = keys[p];
        if (p > 0 && keys[p - 1] == id) continue; // not the start of a run
        if (j >= d) continue;
        float acc = 0.0f;
        for (int q = p; q < N && keys[q] == id; q++) acc += bf2f(dout[(size_t)tok[q] * d + j]);
        dE[(size_t)id * d + j] += acc;
    }
}

// The sort's temporary storage for N keys (CUB's size query).
static cudaError_t sort_tmp_bytes(int N, size_t *tmp_bytes) {
    *tmp_bytes = 0;
    return cub::DeviceRadixSort::SortPairs(NULL, *tmp_bytes, (const int32_t *)NULL, (int32_t *)NULL,
                                           (const int32_t *)NULL, (int32_t *)NULL, N, 0, 32, cu_stream);
}

// The embedding backward's scratch: sorted ids, token order in and out, the sort's temporary.
struct embed_bwd_scratch {
    int32_t *keys, *tok_in, *tok;
    void *tmp;
};
static size_t embed_bwd_layout(int N, size_t tmp_bytes, void *base, embed_bwd_scratch *o) {
    cu_carve c(base);
    o->keys = c.take<int32_t>(N), o->tok_in = c.take<int32_t>(N), o->tok = c.take<int32_t>(N);
    o->tmp = c.take<char>(tmp_bytes);
    return c.off;
}

size_t cu_embed_bwd_scratch_bytes(int N) {
    if (N <= 0) return 0;
    size_t tmp_bytes;
    if (sort_tmp_bytes(N, &tmp_bytes) != cudaSuccess) { // no device (a plan made elsewhere): the sort's
        (void)cudaGetLastError();                       // temporary, a few MiB at most, is left out
        tmp_bytes = 0;
    }
    embed_bwd_scratch o;
    return embed_bwd_layout(N, tmp_bytes, NULL, &o);
}

void cu_embed_bwd(const int32_t *ids, const void *dout, float *dE, int N, int d) {
    if (N <= 0) return;
    size_t tmp_bytes;
    CU_CHECK(sort_tmp_bytes(N, &tmp_bytes));
    embed_bwd_scratch s;
    embed_bwd_layout(N, tmp_bytes, cu_scratch(embed_bwd_layout(N, tmp_bytes, NULL, &s)), &s);
    int32_t *keys = s.keys, *tok_in = s.tok_in, *tok = s.tok;
    void *tmp = s.tmp;
    iota_kernel<<<(N + 255) / 256, 256, 0, cu_stream>>>(tok_in, N);
    CU_LAUNCHED();
    // ids are non-negative (checked by the forward), so sorting all 32 bits as signed is fine
    CU_CHECK(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, ids, keys, tok_in, tok, N, 0, 32, cu_stream));
    embed_bwd_runs<<<dim3((N + RUN_GROUP - 1) / RUN_GROUP, (d + COL_TILE - 1) / COL_TILE), COL_TILE, 0, cu_stream>>>(
        keys, tok, (const bf16 *)dout, dE, N, d);
    CU_LAUNCHED();
}

// ---- fused linear cross-entropy ----

enum { CE_THREADS = 1024, CE_SCRATCH_BYTES = 1024 << 20, SUM_THREADS = 1024 };

__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) {
        m = m2, s = s2;
        return;
    }
    float mx = fmaxf(m, m2);
    s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
    m = mx;
}

// Adds 8 logits to a running (max, Σ exp(x − max)): one rescale at most per 8.
__device__ __forceinline__ void lse_add8(float &m, float &s, const float *x) {
    float mx = x[0];
#pragma unroll
    for (int t = 1; t < 8; t++) mx = fmaxf(mx, x[t]);
    if (mx > m) {
        s *= __expf(m - mx); // 0 on the first piece (m = −inf)
        m = mx;
    }
#pragma unroll
    for (int t = 0; t < 8; t++) s += __expf(x[t] - m);
}

// A row whose target is ignored (−100) or out of range (*err = 2): loss −1 and, with grad, a zero
// gradient row. Returns whether the row was one.
__device__ __forceinline__ bool ce_skip_row(bf16 *lr, uint4 *lv, int nvec, int NV, int tgt, int grad, float *loss_row,
                                            int *err) {
    if (tgt >= 0 && tgt < NV) return false;
    if (tgt >= NV || (tgt < 0 && tgt != -100)) {
        if (threadIdx.x == 0) *err = 2;
    }
    if (threadIdx.x == 0) *loss_row = -1.0f;
    if (grad) {
        for (int i = threadIdx.x; i < nvec; i += blockDim.x) lv[i] = make_uint4(0, 0, 0, 0);
        for (int v = nvec * 8 + threadIdx.x; v < NV; v += blockDim.x) lr[v] = f2bf(0.0f);
    }
    return true;
}

// The block's (max, Σ exp) from each thread's, in thread 0's m and s (the others' are partial):
// warps by butterflies, then thread 0 over the warps in order.
__device__ __forceinline__ void ce_block_ms(float &m, float &s) {
    __shared__ float sm[CE_THREADS / 32], ss[CE_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(m, s, m2, s2);
    }
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) sm[warp] = m, ss[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        m = sm[0], s = ss[0];
        for (int i = 1; i < (int)(blockDim.x >> 5); i++) lse_merge(m, s, sm[i], ss[i]);
    }
}

// ce_block_ms, then the row's loss (lse − its target's logit, read before any gradient is stored);
// returns lse to every thread.
__device__ __forceinline__ float ce_block_lse(float m, float s, const bf16 *lr, int tgt, float *loss_row) {
    __shared__ float lse_s;
    ce_block_ms(m, s);
    if (threadIdx.x == 0) {
        float lse = m + logf(s);
        lse_s = lse;
        *loss_row = lse - bf2f(lr[tgt]);
    }
    __syncthreads();
    return lse_s;
}

// (softmax − onehot)·grad_scale of the 8 logits of group i, as one 16-byte word of bf16
__device__ __forceinline__ uint4 ce_grad8(const float *x, int i, float lse, int tgt, float grad_scale) {
    __align__(16) bf16 o[8];
#pragma unroll
    for (int t = 0; t < 8; t++) o[t] = f2bf((__expf(x[t] - lse) - (i * 8 + t == tgt ? 1.0f : 0.0f)) * grad_scale);
    return *(const uint4 *)o;
}

// One block (1024 threads) per row of the logits chunk. loss[n] = lse − logit[target] (−1 when
// ignored). With grad the row becomes (softmax − onehot)·grad_scale, bf16 (zeros when ignored).
// Rows are read 16 bytes at a time when NV is a multiple of 8 (rows then stay 16-byte aligned):
// a pass for (max, Σ exp), then a pass that writes the gradient; with one 256 KB row per SM in
// flight (128,256 classes) the second read mostly hits L2. (ce_rows_onchip_kernel reads the row
// once where it can.)
__global__ void __launch_bounds__(CE_THREADS)
    ce_rows_kernel(bf16 *__restrict__ logits, const int32_t *__restrict__ targets, int NV, float grad_scale, int grad,
                   float *__restrict__ loss, int *err) {
    int row = blockIdx.x;
    bf16 *lr = logits + (size_t)row * NV;
    int tgt = targets[row];
    bool vec = NV % 8 == 0 && ((uintptr_t)logits & 15) == 0;
    int nvec = vec ? NV / 8 : 0;
    uint4 *lv = (uint4 *)lr;
    if (ce_skip_row(lr, lv, nvec, NV, tgt, grad, loss + row, err)) return;
    float m = -INFINITY, s = 0.0f;
#pragma unroll 4
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        float x[8];
        load16(lr + (size_t)i * 8, x);
        lse_add8(m, s, x);
    }
    for (int v = nvec * 8 + threadIdx.x; v < NV; v += blockDim.x) { // no vector path, or none
        float l = bf2f(lr[v]);
        if (l > m) {
            s = s * __expf(m - l) + 1.0f;
            m = l;
        } else {
            s += __expf(l - m);
        }
    }
    float lse = ce_block_lse(m, s, lr, tgt, loss + row);
    if (!grad) return;
#pragma unroll 4
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) {
        float x[8];
        load16(lr + (size_t)i * 8, x);
        lv[i] = ce_grad8(x, i, lse, tgt, grad_scale);
    }
    for (int v = nvec * 8 + threadIdx.x; v < NV; v += blockDim.x) {
        float p = __expf(bf2f(lr[v]) - lse);
        lr[v] = f2bf((p - (v == tgt ? 1.0f : 0.0f)) * grad_scale);
    }
}

// ce_rows_kernel with the row kept on chip, so that the logits are read once (the two-pass
// kernel's second read partly missed L2: 12.6 ms a 300M 32 x 2048 step, ~2.7 TB/s): thread t
// keeps its groups t + j·CE_THREADS, the first CE_KEEP_REG in registers, the next CE_KEEP_SMEM
// in shared memory by cp.async (all 16 of its loads in flight at once), and the gradient pass
// reads them there. The same per-thread order of lse_add8, the same block reduction and the same
// gradient expression as ce_rows_kernel: the same bits. For NV % 8 == 0, 16-byte aligned rows of
// at most CE_THREADS·CE_KEEP·8 = 131,072 classes; 128 KiB of dynamic shared memory (one block an
// SM).
enum { CE_KEEP_REG = 8, CE_KEEP_SMEM = 8, CE_KEEP = CE_KEEP_REG + CE_KEEP_SMEM };
static const size_t CE_ONCHIP_SMEM = (size_t)CE_KEEP_SMEM * CE_THREADS * sizeof(uint4);

__global__ void __launch_bounds__(CE_THREADS, 1)
    ce_rows_onchip_kernel(bf16 *__restrict__ logits, const int32_t *__restrict__ targets, int NV, float grad_scale,
                          int grad, float *__restrict__ loss, int *err) {
    extern __shared__ uint4 keep_s[]; // [CE_KEEP_SMEM][CE_THREADS]
    int row = blockIdx.x, t = threadIdx.x;
    bf16 *lr = logits + (size_t)row * NV;
    int tgt = targets[row], nvec = NV / 8;
    uint4 *lv = (uint4 *)lr;
    if (ce_skip_row(lr, lv, nvec, NV, tgt, grad, loss + row, err)) return;
    uint4 r[CE_KEEP_REG];
#pragma unroll
    for (int j = CE_KEEP_REG; j < CE_KEEP; j++)
        if (t + j * CE_THREADS < nvec) cp_async16(&keep_s[(j - CE_KEEP_REG) * CE_THREADS + t], lv + t + j * CE_THREADS);
#pragma unroll
    for (int j = 0; j < CE_KEEP_REG; j++)
        if (t + j * CE_THREADS < nvec) r[j] = lv[t + j * CE_THREADS];
    float m = -INFINITY, s = 0.0f, x[8];
#pragma unroll
    for (int j = 0; j < CE_KEEP_REG; j++)
        if (t + j * CE_THREADS < nvec) unpack16(r[j], x), lse_add8(m, s, x);
    cp_async_wait_all(); // this thread's own copies: no barrier needed to read them
#pragma unroll
    for (int j = CE_KEEP_REG; j < CE_KEEP; j++)
        if (t + j * CE_THREADS < nvec) unpack16(keep_s[(j - CE_KEEP_REG) * CE_THREADS + t], x), lse_add8(m, s, x);
    float lse = ce_block_lse(m, s, lr, tgt, loss + row);
    if (!grad) return;
#pragma unroll
    for (int j = 0; j < CE_KEEP; j++) {
        int i = t + j * CE_THREADS;
        if (i >= nvec) continue;
        unpack16(j < CE_KEEP_REG ? r[j] : keep_s[(j - CE_KEEP_REG) * CE_THREADS + t], x);
        lv[i] = ce_grad8(x, i, lse, tgt, grad_scale);
    }
}

// The row split between the two blocks of a thread-block cluster (Hopper), so that two rows are on
// chip in each SM at once and one block's loads overlap another's exponentials and barrier
// (ce_rows_onchip_kernel holds one 256 KB row an SM: load, lse, gradient in turn, ~13 ms a
// 300M 32 x 2048 step against the ~8 ms the logits' bytes take). Block r of a row's pair keeps the
// groups [r·half, min(NV/8, (r+1)·half)), half = ceil(NV/16): thread t its groups t + j·CEC_THREADS,
// CEC_KEEP_REG in registers and CEC_KEEP_SMEM in shared memory (cp.async). Each block reduces its
// (max, Σ exp) as ce_block_lse does; the pair merge the two through distributed shared memory in
// rank order, so both get the same lse. Deterministic; not the on-chip kernel's bits (another
// order of summation). NV % 8 == 0, 16-byte aligned rows of at most 2·CEC_THREADS·CEC_KEEP·8 =
// 131,072 classes; 64 KiB of dynamic shared memory a block, two blocks an SM.
enum { CEC_THREADS = 512, CEC_KEEP_REG = 8, CEC_KEEP_SMEM = 8, CEC_KEEP = CEC_KEEP_REG + CEC_KEEP_SMEM };
static const size_t CEC_SMEM = (size_t)CEC_KEEP_SMEM * CEC_THREADS * sizeof(uint4);

// One exponential a logit: a thread first takes the max m_t of its own logits, then p = e^{x − m_t}
// once a logit, summed and kept in place of the logit as fp16 (p ≤ 1; 2^-11 relative, below the
// bf16 gradient's 2^-9); the gradient is p·e^{m_t − lse}·grad_scale − onehot·grad_scale, with no
// second exponential (two before session 24: the CE phase of a 300M 32 x 2048 step 12.6 -> 11.8
// ms on an H100; the rows were bound by the SFU). Not the on-chip kernel's bits (another order of
// summation, p rounded).
__device__ __forceinline__ void unpack16h(uint4 u, float *x) {
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int t = 0; t < 4; t++) {
        float2 f = __half22float2(h[t]);
        x[2 * t] = f.x, x[2 * t + 1] = f.y;
    }
}
__device__ __forceinline__ uint4 pack16h(const float *x) {
    uint4 u;
    __half2 *h = (__half2 *)&u;
#pragma unroll
    for (int t = 0; t < 4; t++) h[t] = __floats2half2_rn(x[2 * t], x[2 * t + 1]);
    return u;
}
// The max of a thread's 8-logit groups, then each group's e^{x − m} (summed into s) in place as fp16.
__device__ __forceinline__ void ce_max8(float &m, uint4 u) {
    float x[8];
    unpack16(u, x);
#pragma unroll
    for (int t = 0; t < 8; t++) m = fmaxf(m, x[t]);
}
__device__ __forceinline__ uint4 ce_exp8(float m, float &s, uint4 u) {
    float x[8];
    unpack16(u, x);
#pragma unroll
    for (int t = 0; t < 8; t++) x[t] = __expf(x[t] - m), s += x[t];
    return pack16h(x);
}
__device__ __forceinline__ uint4 ce_grad8_p(uint4 u, int i, float c, int tgt, float grad_scale) {
    float p[8];
    unpack16h(u, p);
    __align__(16) bf16 o[8];
#pragma unroll
    for (int t = 0; t < 8; t++) o[t] = f2bf(p[t] * c - (i * 8 + t == tgt ? grad_scale : 0.0f));
    return *(const uint4 *)o;
}

__global__ void __launch_bounds__(CEC_THREADS, 2)
    ce_rows_cluster_kernel(bf16 *__restrict__ logits, const int32_t *__restrict__ targets, int NV, float grad_scale,
                           int grad, float *__restrict__ loss, int *err) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    extern __shared__ uint4 keep_c[]; // [CEC_KEEP_SMEM][CEC_THREADS]
    __shared__ float pair_ms[2];
    __shared__ float lse_s;
    cg::cluster_group cluster = cg::this_cluster();
    int rank = (int)cluster.block_rank(), row = blockIdx.x / 2, t = threadIdx.x;
    bf16 *lr = logits + (size_t)row * NV;
    int tgt = targets[row], nvec = NV / 8, half = (nvec + 1) / 2;
    int g0 = rank * half, g1 = min(nvec, g0 + half); // this block's groups
    uint4 *lv = (uint4 *)lr;
    if (ce_skip_row(lr, lv, nvec, NV, tgt, grad, loss + row, err)) return; // both blocks of the pair
    float logit_t = 0.0f;
    if (rank == 0 && t == 0) logit_t = bf2f(lr[tgt]); // read before either block stores a gradient
    uint4 r[CEC_KEEP_REG];
#pragma unroll
    for (int j = CEC_KEEP_REG; j < CEC_KEEP; j++)
        if (g0 + t + j * CEC_THREADS < g1)
            cp_async16(&keep_c[(j - CEC_KEEP_REG) * CEC_THREADS + t], lv + g0 + t + j * CEC_THREADS);
#pragma unroll
    for (int j = 0; j < CEC_KEEP_REG; j++)
        if (g0 + t + j * CEC_THREADS < g1) r[j] = lv[g0 + t + j * CEC_THREADS];
    float m = -INFINITY, s = 0.0f;
#pragma unroll
    for (int j = 0; j < CEC_KEEP_REG; j++)
        if (g0 + t + j * CEC_THREADS < g1) ce_max8(m, r[j]);
    cp_async_wait_all(); // this thread's own copies: no barrier needed to read them
#pragma unroll
    for (int j = CEC_KEEP_REG; j < CEC_KEEP; j++)
        if (g0 + t + j * CEC_THREADS < g1) ce_max8(m, keep_c[(j - CEC_KEEP_REG) * CEC_THREADS + t]);
    // m = −inf (no groups, or logits all −inf): p = e^{x − 0} = 0 stored, (−inf, 0) skipped by
    // the merge, and c = 0 below
    float mr = m == -INFINITY ? 0.0f : m;
#pragma unroll
    for (int j = 0; j < CEC_KEEP_REG; j++)
        if (g0 + t + j * CEC_THREADS < g1) r[j] = ce_exp8(mr, s, r[j]);
#pragma unroll
    for (int j = CEC_KEEP_REG; j < CEC_KEEP; j++) {
        uint4 &u = keep_c[(j - CEC_KEEP_REG) * CEC_THREADS + t];
        if (g0 + t + j * CEC_THREADS < g1) u = ce_exp8(mr, s, u);
    }
    float m_t = m;     // this thread's own max: the p's reference
    ce_block_ms(m, s); // the block's (max, Σ exp), as ce_block_lse
    if (t == 0) pair_ms[0] = m, pair_ms[1] = s;
    cluster.sync(); // both blocks' (max, Σ exp) written; no gradient stored yet
    if (t == 0) {
        const float *b0 = cluster.map_shared_rank(pair_ms, 0), *b1 = cluster.map_shared_rank(pair_ms, 1);
        float M = b0[0], S = b0[1];
        lse_merge(M, S, b1[0], b1[1]); // rank order in both blocks: the same lse
        lse_s = M + logf(S);
        if (rank == 0) loss[row] = lse_s - logit_t;
    }
    __syncthreads();
    // done with the partner's shared memory; the wait at the end keeps this block alive until the
    // partner is done with ours, without holding either's gradient pass for the other
    auto done_reading = cluster.barrier_arrive();
    float lse = lse_s;
    if (grad) {
        float c = __expf(m_t - lse) * grad_scale; // p·c is the softmax times grad_scale
#pragma unroll
        for (int j = 0; j < CEC_KEEP; j++) {
            int i = g0 + t + j * CEC_THREADS;
            if (i >= g1) continue;
            uint4 u = j < CEC_KEEP_REG ? r[j] : keep_c[(j - CEC_KEEP_REG) * CEC_THREADS + t];
            lv[i] = ce_grad8_p(u, i, c, tgt, grad_scale);
        }
    }
    cluster.barrier_wait(std::move(done_reading));
#endif
}

// 1 where ce_rows_cluster_kernel was compiled for sm_90+ code (a compute_80 PTX build JIT-compiled on
// a Hopper GPU has an empty body there).
__global__ void ce_cluster_probe(int *out) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    *out = 1;
#else
    *out = 0;
#endif
}

// Whether the cluster row kernel can run here: a Hopper-or-later GPU, the kernel's sm_90+ code in
// this build (ce_cluster_probe) and its shared memory. Once a process.
static bool ce_cluster_supported(void) {
    static int ok = -1;
    if (ok >= 0) return ok;
    int dev, major, *flag, host = 0;
    CU_CHECK(cudaGetDevice(&dev));
    CU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    ok = 0;
    if (major >= 9) {
        CU_CHECK(cudaMalloc(&flag, sizeof(int)));
        ce_cluster_probe<<<1, 1, 0, cu_stream>>>(flag);
        CU_LAUNCHED();
        CU_CHECK(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, cu_stream));
        CU_CHECK(cudaStreamSynchronize(cu_stream));
        CU_CHECK(cudaFree(flag));
        cudaFuncAttributes fa;
        CU_CHECK(cudaFuncGetAttributes(&fa, ce_rows_cluster_kernel));
        ok = host == 1 && cu_smem_fits(CEC_SMEM + fa.sharedSizeBytes);
        if (ok)
            CU_CHECK(cudaFuncSetAttribute(ce_rows_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)CEC_SMEM));
    }
    return ok;
}

// The row kernel the model's rows take (the real vocabulary), for describe().
const char *cu_ce_rows_kind(void) {
    return ce_cluster_supported() ? "a cluster of two blocks a row" : "one block a row";
}

// Whether ce_rows_cluster_kernel takes these rows: supported here, aligned rows that fit, and not
// KDA_CE_CLUSTER=0 or KDA_CE_TWO_PASS (A/B runs; read at every call).
static bool ce_cluster(int NV, const void *logits) {
    bool off = cu_env_is("KDA_CE_CLUSTER", "0") || cu_env_on("KDA_CE_TWO_PASS");
    return !off && NV % 8 == 0 && NV / 8 <= 2 * CEC_THREADS * CEC_KEEP && cu_aligned16(logits) &&
        ce_cluster_supported();
}

// n rows through ce_rows_cluster_kernel: a cluster of two blocks a row
static void ce_rows_cluster(bf16 *logits, const int32_t *targets, int n, int NV, float grad_scale, int grad,
                            float *loss) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(2 * n), cfg.blockDim = dim3(CEC_THREADS), cfg.dynamicSmemBytes = CEC_SMEM;
    cfg.stream = cu_stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    CU_CHECK(
        cudaLaunchKernelEx(&cfg, ce_rows_cluster_kernel, logits, targets, NV, grad_scale, grad, loss, cu_err_flag));
}

// Whether ce_rows_onchip_kernel takes these rows: the GPU has the shared memory, the rows fit
// and are aligned, and KDA_CE_TWO_PASS is not set (A/B runs; read at every call, so a test can
// compare both kernels in one process).
static bool ce_onchip(int NV, const void *logits) {
    static int fits = -1;
    if (fits < 0) { // the dynamic 128 KiB and the kernel's static shared memory (ce_block_lse's)
        cudaFuncAttributes fa;
        CU_CHECK(cudaFuncGetAttributes(&fa, ce_rows_onchip_kernel));
        fits = cu_smem_fits(CE_ONCHIP_SMEM + fa.sharedSizeBytes);
        if (fits)
            CU_CHECK(cudaFuncSetAttribute(ce_rows_onchip_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)CE_ONCHIP_SMEM));
    }
    return fits && !cu_env_on("KDA_CE_TWO_PASS") && NV % 8 == 0 && NV / 8 <= CE_THREADS * CE_KEEP &&
        cu_aligned16(logits);
}

// out[0] = Σ loss[i] over rows with loss ≥ 0, out[1] = their count: one block, a fixed order
// (each thread a strided run, then a tree), in double; with acc, also *acc += weight · out[0].
__global__ void __launch_bounds__(SUM_THREADS)
    ce_loss_sum_kernel(const float *__restrict__ loss, int N, double *__restrict__ out, double *acc, double weight) {
    __shared__ double st[SUM_THREADS], sc[SUM_THREADS];
    double t = 0.0, c = 0.0;
    for (int i = threadIdx.x; i < N; i += SUM_THREADS)
        if (loss[i] >= 0.0f) t += loss[i], c += 1.0;
    st[threadIdx.x] = t, sc[threadIdx.x] = c;
    __syncthreads();
    for (int w = SUM_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) st[threadIdx.x] += st[threadIdx.x + w], sc[threadIdx.x] += sc[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = st[0], out[1] = sc[0];
        if (acc) *acc += weight * st[0];
    }
}

// Rows of the logits chunk for N tokens. KDA_CE_SCRATCH_MB sets the chunk's size (default 1 GiB),
// for measuring its effect (each chunk's dE GEMM reads and writes the fp32 dE once: fewer, larger
// chunks move fewer bytes) or for fitting a run in less memory.
static int ce_chunk_rows(int N, int NV) {
    static size_t scratch_bytes;
    if (!scratch_bytes) {
        const char *e = getenv("KDA_CE_SCRATCH_MB");
        scratch_bytes = e && atol(e) > 0 ? (size_t)atol(e) << 20 : (size_t)CE_SCRATCH_BYTES;
    }
    size_t per_row = (size_t)NV * sizeof(bf16);
    size_t rows = scratch_bytes / per_row;
    if (rows >= 64) rows -= rows % 64;
    if (rows < 1) rows = 1;
    return rows > (size_t)N ? N : (int)rows;
}

// The cross-entropy's scratch: the logits chunk, per-token losses, the loss sum and count.
struct ce_scratch {
    bf16 *logits;
    float *loss;
    double *sum;
};
static size_t ce_layout(int N, int NV, void *base, ce_scratch *o) {
    cu_carve c(base);
    o->logits = c.take<bf16>((size_t)ce_chunk_rows(N, NV) * NV);
    o->loss = c.take<float>(N);
    o->sum = c.take<double>(2);
    return c.off;
}

size_t cu_lm_head_ce_scratch_bytes(int N, int NV) {
    ce_scratch o;
    return N > 0 ? ce_layout(N, NV, NULL, &o) : 0;
}

// Everything of the cross-entropy on the stream, the sum and count left in the scratch's sum (and
// weight · sum added to *acc when acc is set); returns that device pointer.
static double *ce_launch(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                         void *dx, float *dE, double *acc, double weight) {
    int chunk = ce_chunk_rows(N, NV);
    ce_scratch s;
    ce_layout(N, NV, cu_scratch(ce_layout(N, NV, NULL, &s)), &s);
    bf16 *logits = s.logits;
    const bf16 *xb = (const bf16 *)x;
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int n = N - n0 < chunk ? N - n0 : chunk;
        // logitsᵀ[NV,n] = op_T(E[d,NV])·xᵀ[d,n]
        cu_gemm(1, 0, NV, n, d, E, d, xb + (size_t)n0 * d, d, logits, NV, 0, 1.0f, 0.0f, NULL);
        if (ce_cluster(NV, logits))
            ce_rows_cluster(logits, targets + n0, n, NV, grad_scale, dx != NULL, s.loss + n0);
        else if (ce_onchip(NV, logits))
            ce_rows_onchip_kernel<<<n, CE_THREADS, CE_ONCHIP_SMEM, cu_stream>>>(logits, targets + n0, NV, grad_scale,
                                                                                dx != NULL, s.loss + n0, cu_err_flag);
        else
            ce_rows_kernel<<<n, CE_THREADS, 0, cu_stream>>>(logits, targets + n0, NV, grad_scale, dx != NULL,
                                                            s.loss + n0, cu_err_flag);
        CU_LAUNCHED();
        if (dx) {
            // dxᵀ[d,n] = E[d,NV]·dlogitsᵀ[NV,n]
            cu_gemm(0, 0, d, n, NV, E, d, logits, NV, (bf16 *)dx + (size_t)n0 * d, d, 0, 1.0f, 0.0f, NULL);
            // dEᵀ[d,NV] += xᵀ[d,n]·op_T(dlogitsᵀ[NV,n])
            cu_gemm(0, 1, d, NV, n, xb + (size_t)n0 * d, d, logits, NV, dE, d, 1, 1.0f, 1.0f, NULL);
        }
    }
    ce_loss_sum_kernel<<<1, SUM_THREADS, 0, cu_stream>>>(s.loss, N, s.sum, acc, weight);
    CU_LAUNCHED();
    return s.sum;
}

double cu_lm_head_ce(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                     void *dx, float *dE, long *n_valid) {
    if (N <= 0) {
        if (n_valid) *n_valid = 0;
        return 0.0;
    }
    double *sum = ce_launch(x, E, targets, N, d, NV, grad_scale, dx, dE, NULL, 0.0);
    double host[2];
    CU_CHECK(cudaMemcpyAsync(host, sum, sizeof host, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    cu_check_error_flag();
    if (n_valid) *n_valid = (long)host[1];
    return host[0];
}

// The training loss accumulator (ops.h lm_head_ce_acc / loss_take): one double on the device.
static double *loss_acc;

void cu_lm_head_ce_acc(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                       void *dx, float *dE, double weight) {
    if (!loss_acc) {
        CU_CHECK(cudaMalloc(&loss_acc, sizeof *loss_acc));
        CU_CHECK(cudaMemsetAsync(loss_acc, 0, sizeof *loss_acc, cu_stream));
    }
    if (N > 0) ce_launch(x, E, targets, N, d, NV, grad_scale, dx, dE, loss_acc, weight);
}

double cu_loss_take(void) {
    double host = 0.0;
    if (!loss_acc) return host;
    CU_CHECK(cudaMemcpyAsync(&host, loss_acc, sizeof host, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaMemsetAsync(loss_acc, 0, sizeof *loss_acc, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    cu_check_error_flag(); // a target outside the vocabulary in any step since the last take
    return host;
}

void cu_lm_head_logits(const void *x, const void *E, float *logits, int N, int d, int NV) {
    cu_gemm(1, 0, NV, N, d, E, d, x, d, logits, NV, 1, 1.0f, 0.0f, NULL);
}
