// norm.cu — RMSNorm and gated RMSNorm (kda-model.md §2.7, §2.3 step 8), forward and backward.
// One warp per row (gated rows of V: V/8 lanes per row, up to 32), 16-byte accesses when the
// width is a multiple of 8 and the pointers aligned (else element by element); statistics in fp32; one bf16 rounding per stored element. The weight
// gradients are reduced deterministically: each warp accumulates its rows (fixed order) in its
// own shared-memory slice, the block sums its warps in order into a partial row, and
// cu_colreduce_add sums the partial rows in order.
// The backward kernels can also write the forward's output y (may be NULL), from the inputs and
// the saved 1/rms they read anyway, with the forward kernel's expression and so its bits:
// selective recompute of the norm fused into its backward (model.c).
#include "backend/cuda/cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

enum { MAX_BLOCKS = 1024, SMEM_FLOATS = 12288 }; // 48 KiB of per-warp dw slices

// rows handled by warp w of block g: g*WPB + w, then + G*WPB ...
struct row_grid {
    int wpb, G;
};

static row_grid grid_for(int rows, int width) {
    row_grid rg;
    rg.wpb = SMEM_FLOATS / width;
    if (rg.wpb > 8) rg.wpb = 8;
    if (rg.wpb < 1) kda_die("norm width %d is larger than the CUDA norm kernels support (%d)", width, SMEM_FLOATS);
    rg.G = (rows + rg.wpb - 1) / rg.wpb;
    if (rg.G > MAX_BLOCKS) rg.G = MAX_BLOCKS;
    if (rg.G < 1) rg.G = 1;
    return rg;
}

// The block's partial dw row: its warps' slices dws[slices][width] summed in slice order into
// part[blockIdx.x] (after the barrier that ends the slices' writes).
__device__ __forceinline__ void store_dw_partial(const float *dws, int slices, int width, float *part) {
    for (int j = threadIdx.x; j < width; j += blockDim.x) {
        float t = 0.0f;
        for (int i = 0; i < slices; i++) t += dws[(size_t)i * width + j];
        part[(size_t)blockIdx.x * width + j] = t;
    }
}

// ---- RMSNorm: y = x·rstd·w ----

__global__ void rmsnorm_fwd_kernel(const bf16 *__restrict__ x, const float *__restrict__ w, bf16 *__restrict__ y,
                                   float *__restrict__ rstd, int N, int d, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *xr = x + (size_t)row * d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
        float v = bf2f(xr[j]);
        ss += v * v;
    }
    ss = warp_sum(ss);
    float r = rsqrtf(ss / d + eps);
    if (lane == 0) rstd[row] = r;
    bf16 *yr = y + (size_t)row * d;
    for (int j = lane; j < d; j += 32) yr[j] = f2bf(bf2f(xr[j]) * r * w[j]);
}

// A 16-byte piece q of a row into the sum of squares, in element order.
__device__ __forceinline__ float rms_sumsq8(uint4 u, float ss) {
    float v[8];
    unpack16(u, v);
#pragma unroll
    for (int t = 0; t < 8; t++) ss += v[t] * v[t];
    return ss;
}
// y's piece q from x's: x·r·w, one rounding.
__device__ __forceinline__ void rms_scale8(uint4 u, float r, const float *__restrict__ w, bf16 *y) {
    float v[8], wv[8];
    unpack16(u, v);
    load8f(w, wv);
#pragma unroll
    for (int t = 0; t < 8; t++) v[t] = v[t] * r * wv[t];
    store16(y, v);
}

// The same with 8 elements per lane and 16-byte accesses (d % 8 == 0, aligned pointers). NQ > 0:
// a lane's pieces q = lane, lane + 32, .. (at most NQ) are all loaded before the sums, so they are
// in flight together (the loop form waits on each; ncu, session 37: 44.8 cycles between a warp's
// instructions, 2.5 TB/s), and kept for y; NQ = 0: any width, a piece at a time. The same sums in
// the same order either way.
template <int NQ>
__global__ void rmsnorm_fwd_vec(const bf16 *__restrict__ x, const float *__restrict__ w, bf16 *__restrict__ y,
                                float *__restrict__ rstd, int N, int d, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const bf16 *xr = x + (size_t)row * d;
    bf16 *yr = y + (size_t)row * d;
    int g8 = d / 8;
    float ss = 0.0f;
    if (NQ > 0) {
        uint4 xv[NQ > 0 ? NQ : 1];
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            int q = lane + 32 * i;
            xv[i] = q < g8 ? *(const uint4 *)(xr + 8 * q) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < NQ; i++)
            if (lane + 32 * i < g8) ss = rms_sumsq8(xv[i], ss);
        ss = warp_sum(ss);
        float r = rsqrtf(ss / d + eps);
        if (lane == 0) rstd[row] = r;
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            int q = lane + 32 * i;
            if (q < g8) rms_scale8(xv[i], r, w + 8 * q, yr + 8 * q);
        }
    } else {
        for (int q = lane; q < g8; q += 32) ss = rms_sumsq8(*(const uint4 *)(xr + 8 * q), ss);
        ss = warp_sum(ss);
        float r = rsqrtf(ss / d + eps);
        if (lane == 0) rstd[row] = r;
        for (int q = lane; q < g8; q += 32) rms_scale8(*(const uint4 *)(xr + 8 * q), r, w + 8 * q, yr + 8 * q);
    }
}

void cu_rmsnorm_fwd(const void *x, const float *w, void *y, float *rstd, int N, int d, float eps) {
    if (N <= 0) return;
    if (d % 8 == 0 && cu_aligned16(x) && cu_aligned16(w) && cu_aligned16(y)) {
        int nq = (d / 8 + 31) / 32; // a lane's 16-byte pieces
        auto k = nq <= 1 ? rmsnorm_fwd_vec<1>
            : nq <= 2    ? rmsnorm_fwd_vec<2>
            : nq <= 4    ? rmsnorm_fwd_vec<4>
            : nq <= 8    ? rmsnorm_fwd_vec<8>
                         : rmsnorm_fwd_vec<0>;
        k<<<(N + 7) / 8, 256, 0, cu_stream>>>((const bf16 *)x, w, (bf16 *)y, rstd, N, d, eps);
        CU_LAUNCHED();
        return;
    }
    rmsnorm_fwd_kernel<<<(N + 7) / 8, 256, 0, cu_stream>>>((const bf16 *)x, w, (bf16 *)y, rstd, N, d, eps);
    CU_LAUNCHED();
}

// dx = r·(dy·w − c·x), c = (Σ dy·w·x)/d·r²;  dw += Σ_rows dy·x·r
__global__ void rmsnorm_bwd_kernel(const bf16 *__restrict__ x, const float *__restrict__ w,
                                   const float *__restrict__ rstd, const bf16 *__restrict__ dy, bf16 *__restrict__ dx,
                                   float *__restrict__ part, bf16 *__restrict__ y, int N, int d, int accumulate) {
    extern __shared__ float dws[]; // [wpb][d]
    int wpb = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *my = dws + (size_t)warp * d;
    for (int j = lane; j < d; j += 32) my[j] = 0.0f;
    for (int row = blockIdx.x * wpb + warp; row < N; row += gridDim.x * wpb) {
        const bf16 *xr = x + (size_t)row * d, *gr = dy + (size_t)row * d;
        float r = rstd[row];
        float dot = 0.0f;
        for (int j = lane; j < d; j += 32) {
            float xv = bf2f(xr[j]), g = bf2f(gr[j]);
            dot += g * w[j] * xv;
            my[j] += g * xv * r;
        }
        dot = warp_sum(dot);
        float c = dot / d * r * r;
        bf16 *o = dx + (size_t)row * d;
        for (int j = lane; j < d; j += 32) {
            float v = r * (bf2f(gr[j]) * w[j] - c * bf2f(xr[j]));
            o[j] = f2bf(accumulate ? bf2f(o[j]) + v : v);
            if (y) y[(size_t)row * d + j] = f2bf(bf2f(xr[j]) * r * w[j]);
        }
    }
    __syncthreads();
    store_dw_partial(dws, wpb, d, part);
}

__device__ __forceinline__ void smem_add8(float *p, const float *v) { // p 16-byte aligned
    float4 *q = (float4 *)p;
    float4 a = q[0], b = q[1];
    a.x += v[0], a.y += v[1], a.z += v[2], a.w += v[3], b.x += v[4], b.y += v[5], b.z += v[6], b.w += v[7];
    q[0] = a, q[1] = b;
}

// rmsnorm_bwd_kernel with 8 elements per lane and 16-byte accesses (d % 8 == 0, aligned pointers)
__global__ void rmsnorm_bwd_vec(const bf16 *__restrict__ x, const float *__restrict__ w, const float *__restrict__ rstd,
                                const bf16 *__restrict__ dy, bf16 *__restrict__ dx, float *__restrict__ part,
                                bf16 *__restrict__ y, int N, int d, int accumulate) {
    extern __shared__ float4 dws4[]; // [wpb][d] floats
    float *dws = (float *)dws4;
    int wpb = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g8 = d / 8;
    float *my = dws + (size_t)warp * d;
    for (int j = lane; j < d; j += 32) my[j] = 0.0f;
    __syncwarp();
    for (int row = blockIdx.x * wpb + warp; row < N; row += gridDim.x * wpb) {
        const bf16 *xr = x + (size_t)row * d, *gr = dy + (size_t)row * d;
        float r = rstd[row];
        float dot = 0.0f;
        for (int q = lane; q < g8; q += 32) {
            float xv[8], g[8], wv[8], a[8];
            load16(xr + 8 * q, xv);
            load16(gr + 8 * q, g);
            load8f(w + 8 * q, wv);
#pragma unroll
            for (int t = 0; t < 8; t++) dot += g[t] * wv[t] * xv[t], a[t] = g[t] * xv[t] * r;
            smem_add8(my + 8 * q, a);
        }
        dot = warp_sum(dot);
        float c = dot / d * r * r;
        bf16 *o = dx + (size_t)row * d;
        for (int q = lane; q < g8; q += 32) {
            float xv[8], g[8], wv[8], v[8], old[8];
            load16(xr + 8 * q, xv);
            load16(gr + 8 * q, g);
            load8f(w + 8 * q, wv);
            if (accumulate) load16(o + 8 * q, old);
#pragma unroll
            for (int t = 0; t < 8; t++) {
                v[t] = r * (g[t] * wv[t] - c * xv[t]);
                if (accumulate) v[t] = old[t] + v[t];
            }
            store16(o + 8 * q, v);
            if (y) {
#pragma unroll
                for (int t = 0; t < 8; t++) v[t] = xv[t] * r * wv[t];
                store16(y + (size_t)row * d + 8 * q, v);
            }
        }
    }
    __syncthreads();
    store_dw_partial(dws, wpb, d, part);
}

// rmsnorm_bwd_vec for d = 256·QPL (QPL 16-byte groups a lane): the warp's weight groups are
// loaded once, and a row's x and dy stay in registers between the dot product and the dx pass
// (one read of each instead of two); the same products and orders of summation as
// rmsnorm_bwd_vec. Two blocks an SM (<= 128 registers a thread).
template <int QPL>
__global__ void __launch_bounds__(256, 2)
    rmsnorm_bwd_regs(const bf16 *__restrict__ x, const float *__restrict__ w, const float *__restrict__ rstd,
                     const bf16 *__restrict__ dy, bf16 *__restrict__ dx, float *__restrict__ part, bf16 *__restrict__ y,
                     int N, int accumulate) {
    extern __shared__ float4 dws4[]; // [wpb][d] floats
    float *dws = (float *)dws4;
    const int d = 256 * QPL;
    int wpb = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *my = dws + (size_t)warp * d;
    for (int j = lane; j < d; j += 32) my[j] = 0.0f;
    __syncwarp();
    float wv[QPL][8];
#pragma unroll
    for (int i = 0; i < QPL; i++) load8f(w + 8 * (lane + 32 * i), wv[i]);
    for (int row = blockIdx.x * wpb + warp; row < N; row += gridDim.x * wpb) {
        const bf16 *xr = x + (size_t)row * d, *gr = dy + (size_t)row * d;
        float r = rstd[row], xv[QPL][8], g[QPL][8], dot = 0.0f;
#pragma unroll
        for (int i = 0; i < QPL; i++) load16(xr + 8 * (lane + 32 * i), xv[i]), load16(gr + 8 * (lane + 32 * i), g[i]);
#pragma unroll
        for (int i = 0; i < QPL; i++) {
            float a[8];
#pragma unroll
            for (int t = 0; t < 8; t++) dot += g[i][t] * wv[i][t] * xv[i][t], a[t] = g[i][t] * xv[i][t] * r;
            smem_add8(my + 8 * (lane + 32 * i), a);
        }
        dot = warp_sum(dot);
        float c = dot / d * r * r;
        bf16 *o = dx + (size_t)row * d;
#pragma unroll
        for (int i = 0; i < QPL; i++) {
            int q = lane + 32 * i;
            float v[8], old[8];
            if (accumulate) load16(o + 8 * q, old);
#pragma unroll
            for (int t = 0; t < 8; t++) {
                v[t] = r * (g[i][t] * wv[i][t] - c * xv[i][t]);
                if (accumulate) v[t] = old[t] + v[t];
            }
            store16(o + 8 * q, v);
            if (y) {
#pragma unroll
                for (int t = 0; t < 8; t++) v[t] = xv[i][t] * r * wv[i][t];
                store16(y + (size_t)row * d + 8 * q, v);
            }
        }
    }
    __syncthreads();
    store_dw_partial(dws, wpb, d, part);
}

// The register kernel for this width, or NULL (other widths; KDA_NORM_GENERIC=1 for A/B runs,
// read at every call so that a test can compare both in one process).
typedef void (*rmsnorm_bwd_fn)(const bf16 *, const float *, const float *, const bf16 *, bf16 *, float *, bf16 *, int,
                               int);
static rmsnorm_bwd_fn rmsnorm_bwd_regs_for(int d) {
    if (cu_env_on("KDA_NORM_GENERIC")) return NULL;
    return d == 256 ? rmsnorm_bwd_regs<1> : d == 512 ? rmsnorm_bwd_regs<2> : d == 1024 ? rmsnorm_bwd_regs<4> : NULL;
}

// partial dw rows: one per block
size_t cu_rmsnorm_bwd_scratch_bytes(int N, int d) { return N > 0 ? (size_t)grid_for(N, d).G * d * sizeof(float) : 0; }

void cu_rmsnorm_bwd(const void *x, const float *w, const float *rstd, const void *dy, void *dx, float *dw, void *y,
                    int N, int d, int accumulate) {
    if (N <= 0) return;
    row_grid rg = grid_for(N, d);
    float *part = (float *)cu_scratch(cu_rmsnorm_bwd_scratch_bytes(N, d));
    bool vec = d % 8 == 0 && cu_aligned16(x) && cu_aligned16(w) && cu_aligned16(dy) && cu_aligned16(dx);
    // the two kernels sum in different orders: an optional output must not pick the kernel
    KDA_CHECK(!vec || !y || cu_aligned16(y), "rmsnorm_bwd: y is not 16-byte aligned while the other operands are");
    rmsnorm_bwd_fn regs = vec ? rmsnorm_bwd_regs_for(d) : NULL;
    if (regs) {
        regs<<<rg.G, rg.wpb * 32, (size_t)rg.wpb * d * sizeof(float), cu_stream>>>(
            (const bf16 *)x, w, rstd, (const bf16 *)dy, (bf16 *)dx, part, (bf16 *)y, N, accumulate);
        CU_LAUNCHED();
        cu_colreduce_add(part, rg.G, d, dw);
        return;
    }
    if (vec) {
        rmsnorm_bwd_vec<<<rg.G, rg.wpb * 32, (size_t)rg.wpb * d * sizeof(float), cu_stream>>>(
            (const bf16 *)x, w, rstd, (const bf16 *)dy, (bf16 *)dx, part, (bf16 *)y, N, d, accumulate);
        CU_LAUNCHED();
        cu_colreduce_add(part, rg.G, d, dw);
        return;
    }
    rmsnorm_bwd_kernel<<<rg.G, rg.wpb * 32, (size_t)rg.wpb * d * sizeof(float), cu_stream>>>(
        (const bf16 *)x, w, rstd, (const bf16 *)dy, (bf16 *)dx, part, (bf16 *)y, N, d, accumulate);
    CU_LAUNCHED();
    cu_colreduce_add(part, rg.G, d, dw);
}

// ---- gated RMSNorm: y = o·rstd·w ⊙ sigmoid(u), rows of width V ----

__global__ void gated_rmsnorm_fwd_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ u,
                                         const float *__restrict__ w, bf16 *__restrict__ y, float *__restrict__ rstd,
                                         int rows, int V, float eps) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    size_t base = (size_t)row * V;
    float ss = 0.0f;
    for (int j = lane; j < V; j += 32) {
        float v = bf2f(o[base + j]);
        ss += v * v;
    }
    ss = warp_sum(ss);
    float r = rsqrtf(ss / V + eps);
    if (lane == 0) rstd[row] = r;
    for (int j = lane; j < V; j += 32) y[base + j] = f2bf(bf2f(o[base + j]) * r * w[j] * sigmoidf_(bf2f(u[base + j])));
}

// Gated norm rows are short (V = 64 for this model): L lanes share a row (L = a power of two,
// L·8 ≤ V), 8 elements per lane and 16-byte accesses, 32/L rows per warp; the row sums reduce
// over the L lanes of a group.
__device__ __forceinline__ float group_sum(float v, int L) {
    for (int o = L >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static int lanes_per_row(int V) {
    int L = 1;
    while (L * 2 <= 32 && L * 2 * 8 <= V) L *= 2;
    return L;
}

__global__ void gated_rmsnorm_fwd_vec(const bf16 *__restrict__ o, const bf16 *__restrict__ u,
                                      const float *__restrict__ w, bf16 *__restrict__ y, float *__restrict__ rstd,
                                      int rows, int V, float eps, int L) {
    int lane = threadIdx.x & 31, sub = lane % L, rpw = 32 / L;
    int row = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * rpw + lane / L;
    bool live = row < rows; // every lane takes part in the shuffles
    size_t base = (size_t)(live ? row : 0) * V;
    int g8 = V / 8;
    float ss = 0.0f;
    if (live)
        for (int q = sub; q < g8; q += L) {
            float v[8];
            load16(o + base + 8 * q, v);
#pragma unroll
            for (int t = 0; t < 8; t++) ss += v[t] * v[t];
        }
    ss = group_sum(ss, L);
    if (!live) return;
    float r = rsqrtf(ss / V + eps);
    if (sub == 0) rstd[row] = r;
    for (int q = sub; q < g8; q += L) {
        float v[8], uv[8], wv[8];
        load16(o + base + 8 * q, v);
        load16(u + base + 8 * q, uv);
        load8f(w + 8 * q, wv);
#pragma unroll
        for (int t = 0; t < 8; t++) v[t] = v[t] * r * wv[t] * sigmoidf_(uv[t]);
        store16(y + base + 8 * q, v);
    }
}

void cu_gated_rmsnorm_fwd(const void *o, const void *u, const float *w, void *y, float *rstd, int rows, int V,
                          float eps) {
    if (rows <= 0) return;
    if (V % 8 == 0 && cu_aligned16(o) && cu_aligned16(u) && cu_aligned16(w) && cu_aligned16(y)) {
        int L = lanes_per_row(V), rows_per_block = 8 * (32 / L);
        gated_rmsnorm_fwd_vec<<<(rows + rows_per_block - 1) / rows_per_block, 256, 0, cu_stream>>>(
            (const bf16 *)o, (const bf16 *)u, w, (bf16 *)y, rstd, rows, V, eps, L);
        CU_LAUNCHED();
        return;
    }
    gated_rmsnorm_fwd_kernel<<<(rows + 7) / 8, 256, 0, cu_stream>>>((const bf16 *)o, (const bf16 *)u, w, (bf16 *)y,
                                                                    rstd, rows, V, eps);
    CU_LAUNCHED();
}

// s = sigmoid(u): d_o = r·(dy·w·s − c·o), c = (Σ dy·w·s·o)/V·r²;  du = dy·o·r·w·s(1−s);
// dw += Σ dy·o·r·s
__global__ void gated_rmsnorm_bwd_kernel(const bf16 *__restrict__ o, const bf16 *__restrict__ u,
                                         const float *__restrict__ w, const float *__restrict__ rstd,
                                         const bf16 *__restrict__ dy, bf16 *__restrict__ d_o, bf16 *__restrict__ du,
                                         float *__restrict__ part, bf16 *__restrict__ y, int rows, int V) {
    extern __shared__ float dws[];
    int wpb = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *my = dws + (size_t)warp * V;
    for (int j = lane; j < V; j += 32) my[j] = 0.0f;
    for (int row = blockIdx.x * wpb + warp; row < rows; row += gridDim.x * wpb) {
        size_t base = (size_t)row * V;
        float r = rstd[row];
        float dot = 0.0f;
        for (int j = lane; j < V; j += 32) {
            float s = sigmoidf_(bf2f(u[base + j])), g = bf2f(dy[base + j]), ov = bf2f(o[base + j]), wj = w[j];
            dot += g * wj * s * ov;
            my[j] += g * ov * r * s;
            du[base + j] = f2bf(g * (ov * r) * wj * s * (1.0f - s));
        }
        dot = warp_sum(dot);
        float c = dot / V * r * r;
        for (int j = lane; j < V; j += 32) {
            float s = sigmoidf_(bf2f(u[base + j]));
            d_o[base + j] = f2bf(r * (bf2f(dy[base + j]) * w[j] * s - c * bf2f(o[base + j])));
            if (y) y[base + j] = f2bf(bf2f(o[base + j]) * r * w[j] * sigmoidf_(bf2f(u[base + j])));
        }
    }
    __syncthreads();
    store_dw_partial(dws, wpb, V, part);
}

// gated_rmsnorm_bwd_kernel with L lanes per row (see gated_rmsnorm_fwd_vec); each row group of a
// warp has its own dw slice (rows of one warp run at once), summed in order at the end.
__global__ void gated_rmsnorm_bwd_vec(const bf16 *__restrict__ o, const bf16 *__restrict__ u,
                                      const float *__restrict__ w, const float *__restrict__ rstd,
                                      const bf16 *__restrict__ dy, bf16 *__restrict__ d_o, bf16 *__restrict__ du,
                                      float *__restrict__ part, bf16 *__restrict__ y, int rows, int V, int L) {
    extern __shared__ float4 dws4[]; // [wpb·rpw][V] floats
    float *dws = (float *)dws4;
    int wpb = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = lane % L, rpw = 32 / L;
    int slot = warp * rpw + lane / L, nslots = wpb * rpw, g8 = V / 8;
    float *my = dws + (size_t)slot * V;
    for (int j = sub; j < V; j += L) my[j] = 0.0f;
    __syncwarp();
    for (int rb = blockIdx.x * nslots; rb < rows; rb += gridDim.x * nslots) {
        int row = rb + slot;
        bool live = row < rows;
        size_t base = (size_t)(live ? row : 0) * V;
        float r = live ? rstd[row] : 0.0f, dot = 0.0f;
        if (live)
            for (int q = sub; q < g8; q += L) {
                float uv[8], g[8], ov[8], wv[8], a[8], dd[8];
                load16(u + base + 8 * q, uv);
                load16(dy + base + 8 * q, g);
                load16(o + base + 8 * q, ov);
                load8f(w + 8 * q, wv);
#pragma unroll
                for (int t = 0; t < 8; t++) {
                    float sg = sigmoidf_(uv[t]);
                    dot += g[t] * wv[t] * sg * ov[t];
                    a[t] = g[t] * ov[t] * r * sg;
                    dd[t] = g[t] * (ov[t] * r) * wv[t] * sg * (1.0f - sg);
                }
                smem_add8(my + 8 * q, a);
                store16(du + base + 8 * q, dd);
            }
        dot = group_sum(dot, L);
        if (!live) continue;
        float c = dot / V * r * r;
        for (int q = sub; q < g8; q += L) {
            float uv[8], g[8], ov[8], wv[8], v[8];
            load16(u + base + 8 * q, uv);
            load16(dy + base + 8 * q, g);
            load16(o + base + 8 * q, ov);
            load8f(w + 8 * q, wv);
#pragma unroll
            for (int t = 0; t < 8; t++) v[t] = r * (g[t] * wv[t] * sigmoidf_(uv[t]) - c * ov[t]);
            store16(d_o + base + 8 * q, v);
            if (y) {
#pragma unroll
                for (int t = 0; t < 8; t++) v[t] = ov[t] * r * wv[t] * sigmoidf_(uv[t]);
                store16(y + base + 8 * q, v);
            }
        }
    }
    __syncthreads();
    store_dw_partial(dws, nslots, V, part);
}

// The vector kernel's row slots per block when V allows it (pointers 16-byte aligned), else 0.
static int gated_bwd_vec_slots(int V) {
    int nslots = 8 * (32 / lanes_per_row(V));
    return V % 8 == 0 && (size_t)nslots * V * sizeof(float) <= 48 * 1024 ? nslots : 0;
}
static int gated_bwd_vec_blocks(int rows, int nslots) {
    int G = (rows + nslots - 1) / nslots;
    return G > MAX_BLOCKS ? MAX_BLOCKS : G;
}

// partial dw rows, one per block, of the kernel that runs on the model's buffers (16-byte
// aligned: the vector kernel wherever V allows it)
size_t cu_gated_rmsnorm_bwd_scratch_bytes(int rows, int V) {
    if (rows <= 0) return 0;
    int ns = gated_bwd_vec_slots(V);
    size_t G = ns ? (size_t)gated_bwd_vec_blocks(rows, ns) : (size_t)grid_for(rows, V).G;
    return G * V * sizeof(float);
}

void cu_gated_rmsnorm_bwd(const void *o, const void *u, const float *w, const float *rstd, const void *dy, void *d_o,
                          void *du, float *dw, void *y, int rows, int V) {
    if (rows <= 0) return;
    int L = lanes_per_row(V), nslots = gated_bwd_vec_slots(V);
    bool vec = nslots && cu_aligned16(o) && cu_aligned16(u) && cu_aligned16(w) && cu_aligned16(dy) &&
        cu_aligned16(d_o) && cu_aligned16(du);
    // the two kernels sum in different orders: an optional output must not pick the kernel
    KDA_CHECK(!vec || !y || cu_aligned16(y),
              "gated_rmsnorm_bwd: y is not 16-byte aligned while the other operands are");
    if (vec) {
        int G = gated_bwd_vec_blocks(rows, nslots);
        float *part = (float *)cu_scratch((size_t)G * V * sizeof(float));
        gated_rmsnorm_bwd_vec<<<G, 256, (size_t)nslots * V * sizeof(float), cu_stream>>>(
            (const bf16 *)o, (const bf16 *)u, w, rstd, (const bf16 *)dy, (bf16 *)d_o, (bf16 *)du, part, (bf16 *)y, rows,
            V, L);
        CU_LAUNCHED();
        cu_colreduce_add(part, G, V, dw);
        return;
    }
    row_grid rg = grid_for(rows, V);
    float *part = (float *)cu_scratch((size_t)rg.G * V * sizeof(float));
    gated_rmsnorm_bwd_kernel<<<rg.G, rg.wpb * 32, (size_t)rg.wpb * V * sizeof(float), cu_stream>>>(
        (const bf16 *)o, (const bf16 *)u, w, rstd, (const bf16 *)dy, (bf16 *)d_o, (bf16 *)du, part, (bf16 *)y, rows, V);
    CU_LAUNCHED();
    cu_colreduce_add(part, rg.G, V, dw);
}
