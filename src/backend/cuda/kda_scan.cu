// kda_scan.cu — the KDA core's two sequential passes over the chunks (kda-model.md §3.2 stage 4,
// §3.4 B1–B3), on tensor cores, with the next chunk's operands copied in while the current one
// computes.
//
// A block owns one (b, h) and VT value columns of the state and walks the chunks in order
// (forward) or in reverse (backward); the chain of chunks is what bounds these kernels, so each
// chunk's work is a few 16×16×16 MMAs per warp between three barriers, and the operands of the
// next chunk are staged by cp.async into the second of two buffers meanwhile (kda_tile.cuh's
// layout: bf16 rows padded to multiples of 16 with zeros, so padded rows and columns of every
// product are zero).
//   forward:  h_c = bf16(S) (saved), Vn = bf16(Um − Wm·h_c), O = s·qg·h_c + Aqk·Vn,
//             S ← e^{Γ_last}⊙S + kgᵀ·Vn
//   backward: dh_c = bf16(dS) (saved), dVn = Aqkᵀ·dO + kg·dS, dS ← e^{Γ_last}⊙dS + s·qgᵀ·dO − Wmᵀ·dVn
// The output O and dVn's first term Aqkᵀ·dO are chunk-local products; they are taken here, from
// the operands the scans hold anyway (h_c, Vn; dO), instead of by two chunk-GEMM launches that
// read them back from global memory (the forward's output kernel and the backward's D1: 0.14 and
// 0.11 ms at 32 x 2048 on an H100). Their sums are kda_chunk_gemm's, term by term in its order
// (acc = 0 + alpha·part per term), so the bits are those of the chunk GEMMs they replace.
// aqk_tri: Aqk is stored lower triangular (zeros above the diagonal), so the 16-deep steps of its
// products that meet only those zeros are skipped (a quarter to a half of them). A skipped step
// would add products that are all ±0: a nonzero sum is unchanged by it, and a zero one differs
// at most in its sign, which the sums into acc do not keep (acc is never −0: its first term
// enters as 0 + alpha·part). For finite operands: an Inf or NaN in Vn or dO no longer reaches the
// rows whose Aqk entries are those zeros (0·Inf was NaN there).
// Operands that are bf16 values (Wm, kg, qg, Um, dO, the snapshot h_c, Vn) enter the MMAs as they
// are; the fp32 ones (dS, dVn) as bf16 hi + lo pairs (kda_tile.cuh). State and accumulators are fp32.
#include <stdlib.h>

#include "backend/cuda/kda_tile.cuh"

// Threads a block: 4 warps at 16 or 32 value columns, 8 at 64 (the same tiles a warp). Registers
// bounded at 128 a thread (2 blocks of 256 threads an SM, 4 of 128): at 64 columns Hopper's
// shared memory holds 2 blocks (K = 32, V = 64: 105 / 110 KiB), and without the bound one register
// more would halve the blocks in flight (the staging's pieces took these kernels to 126).
template <int VT> __host__ __device__ constexpr int scan_threads() { return VT == 64 ? 256 : 128; }
template <int VT> __host__ __device__ constexpr int scan_min_blocks() { return VT == 64 ? 2 : 4; }
// Thread d < K takes key column d's decay (chunk_glast): every block has at least K threads.
static_assert(KDA_MAX_KV <= scan_threads<16>(), "the scans need a thread per key column");

// Stages rows [0, rows_pad) × columns [0, cols_pad) of a chunk's token-major rows (row r at
// src + r·rstride; only r < nrows and columns < ncols are read) into dst (row pitch ld), zeros
// elsewhere: 16-byte pieces that are whole and aligned by cp.async (the caller waits for them
// before the barrier that publishes the chunk), the rest by plain loads and stores. Piece e of
// the row-major order goes to thread e mod NTH. Where a row's pieces divide NTH (K, V and C
// multiples of 16 up to 128), each thread keeps one column piece and walks its rows by pointer
// steps (pp, worked out once a kernel): no division or 64-bit multiply a piece (the scans were
// issue-bound on such integer work; session 26's first try divided once a call, which cost more).
struct stage_piece {
    int r0, q, step; // rows r0, r0 + step, .. of column piece q; r0 < 0: the pieces do not divide NTH
};
struct scan_pieces {
    stage_piece k, v, c; // rows of K, VT and C columns (bf16: KP / 8, VT / 8, CC / 8 pieces)
};
template <int NTH> __device__ __forceinline__ stage_piece piece_of(int np) {
    stage_piece p = {-1, 0, 0};
    if (NTH % np == 0) p.r0 = threadIdx.x / np, p.q = threadIdx.x - p.r0 * np, p.step = NTH / np;
    return p;
}
template <int NTH, typename T>
__device__ __forceinline__ void stage_rows(T *dst, int ld, const T *src, size_t rstride, int nrows, int ncols,
                                           int rows_pad, int cols_pad, const stage_piece &pp) {
    constexpr int W = 16 / sizeof(T);
    bool vec = rstride % W == 0 && ((uintptr_t)src & 15) == 0 && ld % W == 0;
    int np = cols_pad / W; // cols_pad is a multiple of 16
    if (pp.r0 >= 0) {
        int step = pp.step, r = pp.r0, q = pp.q * W;
        bool whole = vec && q + W <= ncols;
        T *d = dst + r * ld + q;
        const T *p = src + (size_t)r * rstride + q;
        int dstep = step * ld;
        size_t pstep = (size_t)step * rstride;
        for (; r < rows_pad; r += step, d += dstep, p += pstep) {
            if (whole && r < nrows) {
                cp_async16(d, p);
            } else {
#pragma unroll
                for (int t = 0; t < W; t++) put_elem(d + t, r < nrows && q + t < ncols ? tof(p[t]) : 0.0f);
            }
        }
        return;
    }
    for (int e = threadIdx.x; e < rows_pad * np; e += NTH) {
        int r = e / np, q = (e - r * np) * W;
        T *d = dst + r * ld + q;
        const T *p = src + (size_t)r * rstride + q;
        if (vec && r < nrows && q + W <= ncols) {
            cp_async16(d, p);
        } else {
#pragma unroll
            for (int t = 0; t < W; t++) put_elem(d + t, r < nrows && q + t < ncols ? tof(p[t]) : 0.0f);
        }
    }
}

// Shared-memory layout of a scan block: element offsets inside one region, every part 128-byte
// aligned; two copies (buffers 0, 1) of what is staged per chunk.
struct scan_layout {
    int KP, CC, pk, pv, pf; // padded K and C; bf16 row pitches (K rows, VT columns); fp32 pitch (VT columns)
    int S, Sh, Sl, st0, st1, F, Vh, Vl, bytes; // byte offsets (shared memory is < 2^31 bytes)
    int eg;                                    // e^{Γ_last} of the chunk, two copies (fp32 [2][KP])
    int dv;                                    // the backward's B1 tiles (fp32, each warp its own tiles)
    int aqb;                                   // the backward's Aqk rows (one copy: see kda_scan_bwd_kernel)
    int pc;                                    // bf16 row pitch of Aqk rows (CC columns)
    int kg, qg, wm, um, dO, aq;                // byte offsets inside a staging buffer (aq: forward)
    int stage;                                 // bytes of one staging buffer
};

template <int VT> static __host__ __device__ inline scan_layout scan_layout_of(const kda_shape &s, bool bwd) {
    scan_layout L;
    L.KP = pad16(s.K), L.CC = pad16(s.C), L.pk = L.KP + 8, L.pv = VT + 8, L.pf = VT + 4, L.pc = L.CC + 8;
    int off = 0;
    auto take = [&](size_t bytes) {
        int o = off;
        off = (int)((off + bytes + 127) & ~(size_t)127);
        return o;
    };
    size_t rows_k = (size_t)L.CC * L.pk * sizeof(bf16);
    L.kg = take(rows_k);
    L.wm = take(rows_k);
    L.qg = take(rows_k);
    L.um = bwd ? 0 : take((size_t)L.CC * L.pv * sizeof(bf16));
    L.dO = bwd ? take((size_t)L.CC * L.pv * sizeof(bf16)) : 0;
    size_t rows_c = (size_t)L.CC * L.pc * sizeof(bf16);
    L.aq = bwd ? 0 : take(rows_c);
    L.stage = off;
    off = 0;
    L.st0 = take(L.stage), L.st1 = take(L.stage);
    L.S = take((size_t)L.KP * L.pf * sizeof(float));
    L.dv = bwd ? take((size_t)L.CC * L.pf * sizeof(float)) : 0;
    L.aqb = bwd ? take(rows_c) : 0;
    L.Sh = take((size_t)L.KP * L.pv * sizeof(bf16));
    L.Sl = bwd ? take((size_t)L.KP * L.pv * sizeof(bf16)) : 0;
    L.F = bwd ? 0 : take((size_t)L.CC * L.pf * sizeof(float));
    L.Vh = take((size_t)L.CC * L.pv * sizeof(bf16));
    L.Vl = bwd ? take((size_t)L.CC * L.pv * sizeof(bf16)) : 0;
    L.eg = take(2 * (size_t)L.KP * sizeof(float));
    L.bytes = off;
    return L;
}

template <typename T> __device__ __forceinline__ T *at(unsigned char *base, int off) { return (T *)(base + off); }
// Staging buffer i & 1.
__device__ __forceinline__ unsigned char *stage_buf(unsigned char *base, const scan_layout &L, int i) {
    return base + ((i & 1) ? L.st1 : L.st0);
}

// Tile t of a block's 16×16 output tiles, VT / 16 of them a row: its first row and column.
template <int VT> __device__ __forceinline__ int tile_row(int t) { return (t / (VT / 16)) * 16; }
template <int VT> __device__ __forceinline__ int tile_col(int t) { return (t % (VT / 16)) * 16; }

// The per-element loops below take 8 consecutive value columns a thread (every row pitch here is
// a multiple of 16 bytes): 16-byte shared and global accesses instead of 2- and 4-byte ones, the
// same arithmetic per element. Global rows end at V: a piece past it is written element-wise.
__device__ __forceinline__ void st8f(float *p, const float *x) {
    *(float4 *)p = make_float4(x[0], x[1], x[2], x[3]), *(float4 *)(p + 4) = make_float4(x[4], x[5], x[6], x[7]);
}
__device__ __forceinline__ uint4 pack8(const bf16 *h) { return *(const uint4 *)h; }
// The first min(8, w) of 8 values to global memory (16 bytes at once when all 8 fit and vec).
template <typename T> __device__ __forceinline__ void put8(T *p, const T *x, int w, bool vec) {
    if (vec && w >= 8) {
        if (sizeof(T) == 2) {
            *(uint4 *)p = *(const uint4 *)x;
        } else {
            *(float4 *)p = *(const float4 *)x, *(float4 *)(p + 4) = *(const float4 *)(x + 4);
        }
    } else {
        for (int t = 0; t < 8 && t < w; t++) p[t] = x[t];
    }
}

// ---- forward: grid (ceil(V/VT), H, B) ----
// Sio (may be NULL): fp32 [B,H,K,V], the initial state on entry, the final one on exit; each
// block reads and writes only its own VT value columns, of O ([B,T,H,V] bf16) too.
template <int VT>
__device__ __forceinline__ void scan_fwd_stage(unsigned char *buf, const scan_layout &L, const scan_pieces &P,
                                               const kda_shape &s, const kda_saved &sv, int b, int c, int h, int v0) {
    constexpr int NTH = scan_threads<VT>();
    int n = min(s.C, s.T - c * s.C);
    size_t row0 = kda_row(s, b, c, h, 0), rsK = (size_t)s.H * s.K, rsV = (size_t)s.H * s.V;
    stage_rows<NTH>(at<bf16>(buf, L.wm), L.pk, sv.Wm + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.kg), L.pk, sv.kg + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.um), L.pv, sv.Um + row0 * s.V + v0, rsV, n, min(VT, s.V - v0), L.CC, VT, P.v);
    stage_rows<NTH>(at<bf16>(buf, L.qg), L.pk, sv.qg + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.aq), L.pc, sv.Aqk + row0 * s.C, (size_t)s.H * s.C, n, s.C, L.CC, L.CC, P.c);
}

// The decay of chunk c's state, e^{Γ_last}, key column d: read by thread d (< K) an iteration
// ahead (its load's latency hidden by that iteration's work), written to eg[c & 1] at the end of
// it and published by the next iteration's first barrier; one expf a column, not one an element.
__device__ __forceinline__ float chunk_glast(const kda_shape &s, const kda_saved &sv, int b, int c, int h, int d) {
    int n = min(s.C, s.T - c * s.C);
    return sv.G[kda_row(s, b, c, h, n - 1) * s.K + d];
}

template <int VT>
__global__ void __launch_bounds__(scan_threads<VT>(), scan_min_blocks<VT>())
    kda_scan_fwd_kernel(kda_shape s, kda_saved sv, float *Sio, bf16 *__restrict__ O) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char scan_raw[];
    constexpr int NTH = scan_threads<VT>();
    const scan_layout L = scan_layout_of<VT>(s, false);
    const scan_pieces P = {piece_of<NTH>(L.KP / 8), piece_of<NTH>(VT / 8), piece_of<NTH>(L.CC / 8)};
    int K = s.K, V = s.V, KP = L.KP, CC = L.CC;
    float *eg = at<float>(scan_raw, L.eg);
    int v0 = blockIdx.x * VT, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    bool vecV = V % 8 == 0; // global rows of h and Vn 16-byte aligned (the saved buffer's parts are)
    bool vecO = vecV && ((uintptr_t)O & 15) == 0;
    float *S = at<float>(scan_raw, L.S), *F = at<float>(scan_raw, L.F);
    bf16 *Sh = at<bf16>(scan_raw, L.Sh), *Vh = at<bf16>(scan_raw, L.Vh);
    float *Sg = Sio ? Sio + ((size_t)b * s.H + h) * K * V : NULL;
    for (int e = tid; e < KP * VT; e += NTH) {
        int d = e / VT, v = e % VT;
        S[d * L.pf + v] = Sg && d < K && v0 + v < V ? Sg[(size_t)d * V + v0 + v] : 0.0f;
    }
    scan_fwd_stage<VT>(stage_buf(scan_raw, L, 0), L, P, s, sv, b, 0, h, v0);
    if (tid < K) eg[tid] = expf(chunk_glast(s, sv, b, 0, h, tid));
    for (int c = 0; c < s.NT; c++) {
        unsigned char *cur = stage_buf(scan_raw, L, c);
        int n = min(s.C, s.T - c * s.C);
        size_t ch = kda_chunk(s, b, c, h), row0 = kda_row(s, b, c, h, 0);
        cp_async_wait_all();
        __syncthreads(); // chunk c staged; the previous chunk's update of S done; the other buffer free
        if (c + 1 < s.NT) scan_fwd_stage<VT>(stage_buf(scan_raw, L, c + 1), L, P, s, sv, b, c + 1, h, v0);
        float gnext = c + 1 < s.NT && tid < K ? chunk_glast(s, sv, b, c + 1, h, tid) : 0.0f;
        const float *ec = eg + (c & 1) * KP;
        for (int e = tid; e < KP * (VT / 8); e += NTH) { // the snapshot h_c, then S ← e^{Γ_last}⊙S
            int d = e / (VT / 8), v = (e % (VT / 8)) * 8;
            float x[8];
            load8f(S + d * L.pf + v, x);
            __align__(16) bf16 hb[8];
#pragma unroll
            for (int t = 0; t < 8; t++) hb[t] = f2bf(x[t]);
            *(uint4 *)&Sh[d * L.pv + v] = pack8(hb);
            if (d < K) put8(sv.h + (ch * K + d) * V + v0 + v, hb, V - v0 - v, vecV);
            float g = d < K ? ec[d] : 0.0f;
#pragma unroll
            for (int t = 0; t < 8; t++) x[t] = d < K ? g * x[t] : 0.0f;
            st8f(S + d * L.pf + v, x);
        }
        __syncthreads();
        const bf16 *wm = at<bf16>(cur, L.wm), *kg = at<bf16>(cur, L.kg), *um = at<bf16>(cur, L.um);
        for (int t = warp; t < (CC / 16) * (VT / 16); t += NTH / 32) { // Vn = bf16(Um − Wm·h_c)
            int i0 = tile_row<VT>(t), j0 = tile_col<VT>(t);
            tacc acc;
            wmma::fill_fragment(acc, 0.0f);
            tterm p = {{(bf16 *)wm, NULL, L.pk}, {Sh, NULL, L.pv}, false, false, KP, 1.0f};
            tile_mma<false, false>(acc, p, i0, j0);
            acc_store(F + i0 * L.pf + j0, acc, L.pf);
            __syncwarp();
            { // a lane per row half: 8 columns
                int r = i0 + (lane >> 1), v = j0 + (lane & 1) * 8;
                float u[8], f[8];
                load16(um + r * L.pv + v, u), load8f(F + r * L.pf + v, f);
                __align__(16) bf16 xb[8];
#pragma unroll
                for (int t = 0; t < 8; t++) xb[t] = f2bf(r < n ? u[t] - f[t] : 0.0f);
                if (r < n) put8(sv.Vn + (row0 + (size_t)r * s.H) * V + v0 + v, xb, V - v0 - v, vecV);
                *(uint4 *)&Vh[r * L.pv + v] = pack8(xb);
            }
        }
        __syncthreads();
        for (int t = warp; t < (KP / 16) * (VT / 16); t += NTH / 32) { // S += kgᵀ·Vn
            int i0 = tile_row<VT>(t), j0 = tile_col<VT>(t);
            tacc acc;
            acc_load(acc, S + i0 * L.pf + j0, L.pf);
            tterm p = {{(bf16 *)kg, NULL, L.pk}, {Vh, NULL, L.pv}, true, false, CC, 1.0f};
            tile_mma<true, false>(acc, p, i0, j0);
            acc_store(S + i0 * L.pf + j0, acc, L.pf);
        }
        const bf16 *qg = at<bf16>(cur, L.qg), *aq = at<bf16>(cur, L.aq);
        for (int t = warp; t < (CC / 16) * (VT / 16); t += NTH / 32) { // O = s·qg·h_c + Aqk·Vn
            int i0 = tile_row<VT>(t), j0 = tile_col<VT>(t);
            tacc acc, part;
            tterm p0 = {{(bf16 *)qg, NULL, L.pk}, {Sh, NULL, L.pv}, false, false, KP, s.scale};
            // Aqk is lower triangular: rows i0.. have no term past column i0 + 15 (aqk_tri)
            tterm p1 = {{(bf16 *)aq, NULL, L.pc}, {Vh, NULL, L.pv}, false, false, min(CC, i0 + 16), 1.0f};
            wmma::fill_fragment(part, 0.0f);
            tile_mma<false, false>(part, p0, i0, j0);
            acc_term(acc, part, p0.alpha, true);
            wmma::fill_fragment(part, 0.0f);
            tile_mma<false, false>(part, p1, i0, j0);
            acc_term(acc, part, p1.alpha, false);
            acc_store(F + i0 * L.pf + j0, acc, L.pf); // F: free since the Vn tiles' barrier
            __syncwarp();
            int r = i0 + (lane >> 1), v = j0 + (lane & 1) * 8; // a lane per row half: 8 columns
            float x[8];
            load8f(F + r * L.pf + v, x);
            __align__(16) bf16 ob[8];
#pragma unroll
            for (int e = 0; e < 8; e++) ob[e] = f2bf(x[e]);
            if (r < n) put8(O + (row0 + (size_t)r * s.H) * V + v0 + v, ob, V - v0 - v, vecO);
        }
        if (c + 1 < s.NT && tid < K) eg[((c + 1) & 1) * KP + tid] = expf(gnext);
    }
    if (Sg) {
        __syncthreads();
        for (int e = tid; e < K * VT; e += NTH) {
            int d = e / VT, v = e % VT;
            if (v0 + v < V) Sg[(size_t)d * V + v0 + v] = S[d * L.pf + v];
        }
    }
}

// ---- backward: grid (ceil(V/VT), H, B) ----
template <int VT>
__device__ __forceinline__ void scan_bwd_stage(unsigned char *buf, const scan_layout &L, const scan_pieces &P,
                                               const kda_shape &s, const kda_saved &sv, const bf16 *dO, int b, int c,
                                               int h, int v0) {
    constexpr int NTH = scan_threads<VT>();
    int n = min(s.C, s.T - c * s.C), vn = min(VT, s.V - v0);
    size_t row0 = kda_row(s, b, c, h, 0), rsK = (size_t)s.H * s.K, rsV = (size_t)s.H * s.V;
    stage_rows<NTH>(at<bf16>(buf, L.kg), L.pk, sv.kg + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.qg), L.pk, sv.qg + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.wm), L.pk, sv.Wm + row0 * s.K, rsK, n, s.K, L.CC, L.KP, P.k);
    stage_rows<NTH>(at<bf16>(buf, L.dO), L.pv, dO + row0 * s.V + v0, rsV, n, vn, L.CC, VT, P.v);
}
// Chunk c's rows of Aqk into the backward's one copy.
template <int VT>
__device__ __forceinline__ void scan_bwd_stage_aq(bf16 *aq, const scan_layout &L, const scan_pieces &P,
                                                  const kda_shape &s, const kda_saved &sv, int b, int c, int h) {
    constexpr int NTH = scan_threads<VT>();
    int n = min(s.C, s.T - c * s.C);
    stage_rows<NTH>(aq, L.pc, sv.Aqk + kda_row(s, b, c, h, 0) * s.C, (size_t)s.H * s.C, n, s.C, L.CC, L.CC, P.c);
}

// dVn: B1 (out); dh: the snapshots dS_c.
template <int VT>
__global__ void __launch_bounds__(scan_threads<VT>(), scan_min_blocks<VT>())
    kda_scan_bwd_kernel(kda_shape s, kda_saved sv, const bf16 *__restrict__ dO, float *__restrict__ dVn, bf16 *dh) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char scan_raw[];
    constexpr int NTH = scan_threads<VT>();
    const scan_layout L = scan_layout_of<VT>(s, true);
    const scan_pieces P = {piece_of<NTH>(L.KP / 8), piece_of<NTH>(VT / 8), piece_of<NTH>(L.CC / 8)};
    int K = s.K, V = s.V, KP = L.KP, CC = L.CC;
    float *eg = at<float>(scan_raw, L.eg);
    int v0 = blockIdx.x * VT, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    bool vecV = V % 8 == 0; // global rows of dh and dVn 16-byte aligned (the scratch's parts are)
    int rsV = s.H * V;      // elements between token rows of dVn
    float *dS = at<float>(scan_raw, L.S);
    bf16 *dSh = at<bf16>(scan_raw, L.Sh), *dSl = at<bf16>(scan_raw, L.Sl);
    bf16 *Vh = at<bf16>(scan_raw, L.Vh), *Vl = at<bf16>(scan_raw, L.Vl);
    for (int e = tid; e < KP * VT; e += NTH) dS[(e / VT) * L.pf + e % VT] = 0.0f; // dS_final = 0
    float *dv = at<float>(scan_raw, L.dv);
    bf16 *aq = at<bf16>(scan_raw, L.aqb);
    scan_bwd_stage<VT>(stage_buf(scan_raw, L, s.NT - 1), L, P, s, sv, dO, b, s.NT - 1, h, v0);
    scan_bwd_stage_aq<VT>(aq, L, P, s, sv, b, s.NT - 1, h);
    if (tid < K) eg[((s.NT - 1) & 1) * KP + tid] = expf(chunk_glast(s, sv, b, s.NT - 1, h, tid));
    for (int c = s.NT - 1; c >= 0; c--) {
        unsigned char *cur = stage_buf(scan_raw, L, c);
        int n = min(s.C, s.T - c * s.C);
        size_t ch = kda_chunk(s, b, c, h), row0 = kda_row(s, b, c, h, 0);
        bf16 *dhc = dh + ch * K * V + v0; // this chunk's global rows, once: 32-bit offsets below
        float *dVnc = dVn + row0 * V + v0;
        cp_async_wait_all();
        __syncthreads(); // chunk c staged; the previous chunk's update of dS done; the other buffer free
        if (c > 0) scan_bwd_stage<VT>(stage_buf(scan_raw, L, c - 1), L, P, s, sv, dO, b, c - 1, h, v0);
        float gnext = c > 0 && tid < K ? chunk_glast(s, sv, b, c - 1, h, tid) : 0.0f;
        const float *ec = eg + (c & 1) * KP;
        for (int e = tid; e < KP * (VT / 8); e += NTH) { // the snapshot dh_c, dS as hi + lo, then decay
            int d = e / (VT / 8), v = (e % (VT / 8)) * 8;
            float x[8];
            load8f(dS + d * L.pf + v, x);
            __align__(16) bf16 hb[8], lb[8];
#pragma unroll
            for (int t = 0; t < 8; t++) hb[t] = f2bf(x[t]), lb[t] = f2bf(x[t] - bf2f(hb[t]));
            *(uint4 *)&dSh[d * L.pv + v] = pack8(hb), *(uint4 *)&dSl[d * L.pv + v] = pack8(lb);
            if (d < K) put8(dhc + d * V + v, hb, V - v0 - v, vecV);
            float g = d < K ? ec[d] : 0.0f;
#pragma unroll
            for (int t = 0; t < 8; t++) x[t] = d < K ? g * x[t] : 0.0f;
            st8f(dS + d * L.pf + v, x);
        }
        __syncthreads();
        const bf16 *kg = at<bf16>(cur, L.kg), *qg = at<bf16>(cur, L.qg), *wm = at<bf16>(cur, L.wm);
        const bf16 *dOs = at<bf16>(cur, L.dO);
        for (int t = warp; t < (CC / 16) * (VT / 16); t += NTH / 32) { // B1: dVn = Aqkᵀ·dO + kg·dS
            int i0 = tile_row<VT>(t), j0 = tile_col<VT>(t);
            tacc acc, part;
            // Aqkᵀ's rows i0.. have no term before column i0 (aqk_tri): the products from k = i0 on
            tterm pa = {
                {aq + i0 * L.pc, NULL, L.pc}, {(bf16 *)dOs + i0 * L.pv, NULL, L.pv}, true, false, CC - i0, 1.0f};
            wmma::fill_fragment(part, 0.0f);
            tile_mma<true, false>(part, pa, i0, j0);
            acc_term(acc, part, pa.alpha, true); // D1's fp32 sum
            tterm p = {{(bf16 *)kg, NULL, L.pk}, {dSh, dSl, L.pv}, false, false, KP, 1.0f};
            tile_mma<false, false>(acc, p, i0, j0);
            acc_store(dv + i0 * L.pf + j0, acc, L.pf);
            __syncwarp();
            { // a lane per row half: 8 columns
                int r = i0 + (lane >> 1), v = j0 + (lane & 1) * 8;
                __align__(16) float x[8];
                load8f(dv + r * L.pf + v, x);
#pragma unroll
                for (int t = 0; t < 8; t++) x[t] = r < n ? x[t] : 0.0f;
                if (r < n) put8(dVnc + r * rsV + v, x, V - v0 - v, vecV);
                __align__(16) bf16 hb[8], lb[8];
#pragma unroll
                for (int t = 0; t < 8; t++) hb[t] = f2bf(x[t]), lb[t] = f2bf(x[t] - bf2f(hb[t]));
                *(uint4 *)&Vh[r * L.pv + v] = pack8(hb), *(uint4 *)&Vl[r * L.pv + v] = pack8(lb);
            }
        }
        __syncthreads();
        // aq is free until the next chunk's B1: its rows load meanwhile (B3, the next snapshot), so
        // it needs one buffer, not two (2 blocks an SM at 64 value columns, K = 32)
        if (c > 0) scan_bwd_stage_aq<VT>(aq, L, P, s, sv, b, c - 1, h);
        for (int t = warp; t < (KP / 16) * (VT / 16); t += NTH / 32) { // B3
            int i0 = tile_row<VT>(t), j0 = tile_col<VT>(t);
            tacc acc, a, bq;
            acc_load(acc, dS + i0 * L.pf + j0, L.pf);
            wmma::fill_fragment(a, 0.0f), wmma::fill_fragment(bq, 0.0f);
            tterm pa = {{(bf16 *)qg, NULL, L.pk}, {(bf16 *)dOs, NULL, L.pv}, true, false, CC, 1.0f};
            tterm pb = {{(bf16 *)wm, NULL, L.pk}, {Vh, Vl, L.pv}, true, false, CC, 1.0f};
            tile_mma<true, false>(a, pa, i0, j0);
            tile_mma<true, false>(bq, pb, i0, j0);
            for (int x = 0; x < acc.num_elements; x++) acc.x[x] += s.scale * a.x[x] - bq.x[x];
            acc_store(dS + i0 * L.pf + j0, acc, L.pf);
        }
        if (c > 0 && tid < K) eg[((c - 1) & 1) * KP + tid] = expf(gnext);
    }
}

// ---- launches ----
// Value columns per block: 64 where the (b, h) blocks at 64 columns fill the SMs as many as fit an
// SM (scan_blocks_per_sm: 2 on Hopper, so at least half as many pairs as SMs; 1 on an A100, whose
// 164 KiB hold one), so that each block reads a (b, h)'s kg, qg, Wm, Aqk once; else 32 for the
// forward and 16 for the backward, more blocks for fewer pairs. Measured on an H100 (132 SMs), the
// core fwd + bwd: at 32 x 2048 (256 pairs) 64 columns 3.10 ms against 3.19 (session 25); with O
// and D1 inside the scans (session 26), at 16 x 2048 (128 pairs) 1.56 ms against 1.66 at 32 / 16
// and 1.57 at 32 / 32, and at 8 x 2048 (64 pairs) 0.97 against 0.93-0.94 at 32 / 16: the boundary
// lies between 64 and 128 pairs. Not measured on an A100.
// KDA_SCAN_VT=16, 32 or 64 sets both (tests and measurements). Narrower where a block would not
// fit the GPU. The width changes no sum: every element's products run over the same terms in the
// same order (the same bits; test_cuda_kda compares them).
// Blocks of the 64-column kernel an SM holds at this shape (0: it does not fit), once a shape
// (the forward's and the backward's kernels differ in type: each instantiation keeps its own).
template <typename Kern> static int scan_blocks_per_sm(Kern k64, const kda_shape &s, bool bwd) {
    static size_t last_smem;
    static int last_blocks;
    size_t smem = scan_layout_of<64>(s, bwd).bytes;
    if (smem != last_smem) {
        int n = 0;
        if (cu_smem_fits(smem)) {
            kda_smem_attrs(k64, smem);
            CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k64, scan_threads<64>(), smem));
        }
        last_smem = smem, last_blocks = n;
    }
    return last_blocks;
}
template <typename Kern> static int scan_vt(const kda_shape &s, int narrow, Kern k64, bool bwd) {
    const char *e = getenv("KDA_SCAN_VT");
    if (e && *e) {
        int v = atoi(e);
        return v == 16 || v == 64 ? v : 32;
    }
    return (long)scan_blocks_per_sm(k64, s, bwd) * s.B * s.H >= cu_sm_count() ? 64 : narrow;
}

template <int VT, typename Kern, typename... Args>
static void launch_scan(Kern kern, const kda_shape &s, bool bwd, Args... args) {
    size_t smem = scan_layout_of<VT>(s, bwd).bytes;
    KDA_CHECK(cu_smem_fits(smem),
              "KDA heads K=%d V=%d need %zu bytes of shared memory per block in the state scan; this GPU allows less",
              s.K, s.V, smem);
    kda_smem_attrs(kern, smem);
    cu_prof_scope span(KDA_PHASE_KDA, bwd ? "state scan backward" : "state scan");
    kern<<<dim3((s.V + VT - 1) / VT, s.H, s.B), scan_threads<VT>(), smem, cu_stream>>>(args...);
    CU_LAUNCHED();
}

// The widest of vt, 32, 16 whose block fits this GPU's shared memory (at K = V = 128: the forward
// at 64 takes 217 KiB, a Hopper SM once, not measured; the backward at 64 235 KiB, more than a
// block may have, so 32; an A100 takes 16 both ways there).
static int scan_fit_vt(const kda_shape &s, bool bwd, int vt) {
    if (vt == 64 && !cu_smem_fits(scan_layout_of<64>(s, bwd).bytes)) vt = 32;
    if (vt == 32 && !cu_smem_fits(scan_layout_of<32>(s, bwd).bytes)) vt = 16;
    return vt;
}

// The scan of width vt (16, 32 or 64), given the kernel's three instantiations.
template <typename Kern, typename... Args>
static void launch_scan_at(int vt, Kern k16, Kern k32, Kern k64, const kda_shape &s, bool bwd, Args... args) {
    if (vt == 16)
        launch_scan<16>(k16, s, bwd, args...);
    else if (vt == 64)
        launch_scan<64>(k64, s, bwd, args...);
    else
        launch_scan<32>(k32, s, bwd, args...);
}

void kda_scan_fwd(const kda_shape &s, const kda_saved &sv, float *Sio, bf16 *O) {
    int vt = scan_fit_vt(s, false, scan_vt(s, 32, kda_scan_fwd_kernel<64>, false));
    launch_scan_at(vt, kda_scan_fwd_kernel<16>, kda_scan_fwd_kernel<32>, kda_scan_fwd_kernel<64>, s, false, s, sv, Sio,
                   O);
}

void kda_scan_bwd(const kda_shape &s, const kda_saved &sv, const bf16 *dO, float *dVn, bf16 *dh) {
    int vt = scan_fit_vt(s, true, scan_vt(s, 16, kda_scan_bwd_kernel<64>, true));
    launch_scan_at(vt, kda_scan_bwd_kernel<16>, kda_scan_bwd_kernel<32>, kda_scan_bwd_kernel<64>, s, true, s, sv, dO,
                   dVn, dh);
}
