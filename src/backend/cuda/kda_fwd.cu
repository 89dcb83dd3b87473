// kda_fwd.cu — chunked KDA forward on the GPU (kda-model.md §3.2, stages as listed there):
//   1. prep   (per chunk): q,k ← l2norm (bf16 + fp32 rstd), β = sigmoid(b), Γ = chunk cumsum (warp scan) of
//             α = −e^{A_log}·softplus(f + dt_bias) (fp32), and the bf16 GEMM operands
//             q⊙e^Γ, k⊙e^{Γ_last−Γ}, β·k⊙e^Γ (β·v is not stored: its readers scale v's rows)
//   2. intra  (per chunk): Aqk (bf16, scaled), L (fp32), Tinv = (I+L)^-1 in fp32 by 16×16
//             blocks (forward substitution on the diagonal blocks; bf16 store), and in the
//   3.        same kernel the WY factors Wm = Tinv·(β·k⊙e^Γ), Um = Tinv·(β·v)   (bf16; β·v staged from v)
//   4. scan   (kda_scan.cu; sequential over chunks): state S in fp32; snapshot h = bf16(S);
//             Vn = bf16(Um − Wm·h); S ← e^{Γ_last}⊙S + kgᵀ·Vn
//   5. output (chunk GEMM): O = bf16(s·qg·h + Aqk·Vn)
// Every exponent is ≤ 0 (§3.5). The saved buffer keeps all of these but Um for the backward (with
// kda_core_dims.lean, not the prep outputs either: the backward reruns stage 1).
// Generation (cu_kda_fwd_chunked_state): the scan may start from a given fp32 state and hand
// back the final one ([B,H,K,V], in place); the backward assumes a zero initial state.
#include <stdlib.h>

#include "backend/cuda/kda_tile.cuh"

size_t cu_kda_saved_bytes(const kda_core_dims *d) {
    kda_shape s = kda_shape_of(d);
    kda_saved sv;
    return kda_saved_layout(s, d->lean, NULL, &sv);
}

// The forward's scratch: Um [R,V] bf16, between the intra kernel and the state scan; with lean,
// the prep outputs too (kda_saved_layout).
static size_t fwd_scratch_layout(const kda_shape &s, int lean, void *base, kda_saved *sv) {
    cu_carve c(base);
    sv->Um = c.take<bf16>(s.R * s.V);
    if (lean) kda_carve_prep(s, c, sv);
    return c.off;
}
size_t cu_kda_fwd_scratch_bytes(const kda_core_dims *d) {
    kda_shape s = kda_shape_of(d);
    kda_saved sv;
    return fwd_scratch_layout(s, d->lean, NULL, &sv);
}

// Column 2i + odd of a pair word i (bf16 bits in the low half for the even column), as fp32.
__device__ __forceinline__ float bf_of_pair(unsigned w, int odd) {
    return __uint_as_float(odd ? w & 0xffff0000u : w << 16);
}

// The l2 norms of a chunk's q and k rows at K = 32 with the warp-per-row form's bits, two threads a
// row: thread t takes matrix t / 128 (q, k), row (t % 128) / 2 and half h = t % 2. The warp form
// sums a lane per column with the butterfly xor 16, 8, 4, 2, 1; xor 16 to 2 combine lanes of one
// parity only, so half h forms the parity-h lanes' tree alone (rounded products, rounded sums, in
// the same pairs) and one xor-1 shuffle adds the two halves, as the butterfly's last step does.
// Half h then scales columns [16h, 16h + 16). 256 threads: all of them take part in the shuffle.
__device__ __forceinline__ void prep_l2norm_k32(bf16 *qs, bf16 *ks, int P, int n, size_t row0, int H,
                                                const kda_saved &sv) {
    int m = threadIdx.x >> 7, r = (threadIdx.x & 127) >> 1, h = threadIdx.x & 1;
    bool live = r < n;
    bf16 *x = (m ? ks : qs) + r * P;
    unsigned wd[16]; // the row's 32 bf16 as pairs (columns 2i, 2i + 1 in word i), in registers
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint4 v = live ? ((const uint4 *)x)[i] : make_uint4(0, 0, 0, 0);
        wd[4 * i] = v.x, wd[4 * i + 1] = v.y, wd[4 * i + 2] = v.z, wd[4 * i + 3] = v.w;
    }
    float t[8]; // lane 2i + h's square plus lane 2i + 16 + h's: the butterfly's xor-16 step
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float a = bf_of_pair(wd[i], h), b = bf_of_pair(wd[i + 8], h);
        t[i] = __fadd_rn(__fmul_rn(a, a), __fmul_rn(b, b));
    }
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) // the xor 8, 4, 2 steps
#pragma unroll
        for (int i = 0; i < o; i++) t[i] = __fadd_rn(t[i], t[i + o]);
    float ss = __fadd_rn(t[0], __shfl_xor_sync(0xffffffffu, t[0], 1)), rs = l2_rstd(ss);
    __syncwarp(); // both halves have read the row before either writes its half (a shuffle does not order memory)
    if (!live) return;
    float y[16];
#pragma unroll
    for (int j = 0; j < 16; j++) y[j] = bf_of_pair(h ? wd[8 + j / 2] : wd[j / 2], j & 1) * rs;
    store16(x + 16 * h, y), store16(x + 16 * h + 8, y + 8);
    if (h == 0) (m ? sv.rk : sv.rq)[row0 + r * (size_t)H] = rs;
}

// ---- 1. prep: grid (NT, H, B), 256 threads, dynamic shared memory ----
// The chunk's rows of q, k, f are staged in shared memory 16 bytes at a time; the norms (two
// threads a row at K = 32, else a warp per row, lane = key column) and Γ (a warp scan per key
// column) read them there, and every output is written along its rows, 16 bytes at a time where
// the row length allows.
struct prep_layout {
    int P;               // bf16 row pitch (a multiple of 8)
    int PG;              // Γ's fp32 row pitch, odd: a warp's 32 rows of one column in 32 banks
    size_t G, bt, bytes; // byte offsets of Γ (fp32, pitch PG) and β; after q, k, f (bf16)
};
static __host__ __device__ inline prep_layout prep_layout_of(const kda_shape &s) {
    prep_layout L;
    L.P = ((s.K + 7) & ~7) + 8;
    L.PG = (s.K + 1) | 1;
    size_t rows = (size_t)KDA_MAX_C * L.P;
    L.G = 3 * rows * sizeof(bf16);
    L.bt = L.G + (size_t)KDA_MAX_C * L.PG * sizeof(float);
    L.bytes = L.bt + KDA_MAX_C * sizeof(float);
    return L;
}

// Pieces of up to 8 consecutive elements of the chunk's rows: row r, columns [q, q + w).
struct row_piece {
    int r, q, w;
    __device__ __forceinline__ void at(int e, int ncols) {
        int np = (ncols + 7) / 8;
        r = e / np, q = (e - r * np) * 8, w = min(8, ncols - q);
    }
};

__device__ __forceinline__ void copy_piece(bf16 *dst, const bf16 *src, int w, bool vec) {
    if (vec && w == 8)
        *(uint4 *)dst = *(const uint4 *)src;
    else
        for (int t = 0; t < w; t++) dst[t] = src[t];
}
__device__ __forceinline__ void put_piece(bf16 *dst, const float *x, int w, bool vec) {
    if (vec && w == 8)
        store16(dst, x);
    else
        for (int t = 0; t < w; t++) dst[t] = f2bf(x[t]);
}

// Bounded for 5 blocks an SM (48 registers on sm_90a; 58 and 4 blocks without the bound): the
// prep is held by each chunk's serial phases (the norms, the gate's warp scans, the outputs), so
// its time follows the warps in flight an SM. Session 25, H100, 32 x 2048 (ncu): 260 us without
// the bound, 231-235 with 5, 236-238 with 6 (40 registers, a 32-byte spill), the same bits; prep
// and intra as one kernel gave nothing (815 us against 260 + 560). Session 26: no longer storing
// β·v, 231 -> 204 us, with a 32-byte stack on sm_90a (8 before). Session 37: the K = 32 norms by
// two threads a row (the warp form's shuffle-add chains were ~15% of the stall samples), an 8-byte
// stack for the recipe's kernel (16 before). sm_80 takes 48 registers with no
// spill; on sm_100 (not measured) the bound would spill 88 bytes, so none.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define KDA_PREP_BOUNDS __launch_bounds__(256)
#else
#define KDA_PREP_BOUNDS __launch_bounds__(256, 5)
#endif
template <int C0, int K0, int V0> // 64, 32, 64: the recipe's sizes (kda_fixed); 0, 0, 0: any
__global__ void KDA_PREP_BOUNDS kda_prep_kernel(const kda_shape s_any, const bf16 *__restrict__ q,
                                                const bf16 *__restrict__ k, const bf16 *__restrict__ f,
                                                const bf16 *__restrict__ bl, const float *__restrict__ A_log,
                                                const float *__restrict__ dt_bias, kda_saved sv) {
    extern __shared__ __align__(16) unsigned char prep_raw[];
    const kda_shape s = kda_fixed<C0, K0, V0>(s_any);
    const prep_layout L = prep_layout_of(s);
    bf16 *qs = (bf16 *)prep_raw, *ks = qs + KDA_MAX_C * L.P, *fs = ks + KDA_MAX_C * L.P;
    float *Gs = (float *)(prep_raw + L.G), *betas = (float *)(prep_raw + L.bt);
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int n = min(s.C, s.T - c * s.C), K = s.K, P = L.P, PG = L.PG;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    size_t row0 = kda_row(s, b, c, h, 0), rsK = (size_t)s.H * K;
    bool vk = K % 8 == 0 && ((uintptr_t)q & 15) == 0 && ((uintptr_t)k & 15) == 0 && ((uintptr_t)f & 15) == 0;
    row_piece pc;
    for (int e = threadIdx.x; e < n * ((K + 7) / 8); e += blockDim.x) {
        pc.at(e, K);
        size_t g = row0 * K + pc.r * rsK + pc.q;
        copy_piece(qs + pc.r * P + pc.q, q + g, pc.w, vk);
        copy_piece(ks + pc.r * P + pc.q, k + g, pc.w, vk);
        copy_piece(fs + pc.r * P + pc.q, f + g, pc.w, vk);
    }
    if ((int)threadIdx.x < n) {
        size_t row = row0 + threadIdx.x * (size_t)s.H;
        betas[threadIdx.x] = sv.beta[row] = sigmoidf_(bf2f(bl[kda_b_at(s, row)]));
    }
    __syncthreads();
    if (K == 32) { // the recipe's heads: qn, kn over q, k by two threads a row (prep_l2norm_k32)
        prep_l2norm_k32(qs, ks, P, n, row0, s.H, sv);
    } else { // l2norm, a warp per row: qn, kn replace q, k in shared memory
        for (int r = warp; r < n; r += 8) {
            float sq = 0.0f, sk = 0.0f;
            for (int d = lane; d < K; d += 32) {
                float a = bf2f(qs[r * P + d]), e = bf2f(ks[r * P + d]);
                sq += a * a, sk += e * e;
            }
            sq = warp_sum(sq), sk = warp_sum(sk);
            float rq = l2_rstd(sq), rk = l2_rstd(sk);
            for (int d = lane; d < K; d += 32) {
                qs[r * P + d] = f2bf(bf2f(qs[r * P + d]) * rq);
                ks[r * P + d] = f2bf(bf2f(ks[r * P + d]) * rk);
            }
            if (lane == 0) {
                size_t row = row0 + r * (size_t)s.H;
                sv.rq[row] = rq, sv.rk[row] = rk;
            }
        }
    }
    // Γ: per key column, an inclusive warp scan of α over the chunk's rows (lane: rows lane and lane+32)
    float eA = expf(A_log[h]);
    for (int d = warp; d < K; d += 8) {
        float dtb = dt_bias[h * K + d], a0 = 0.0f, a1 = 0.0f;
        if (lane < n) a0 = -eA * softplus20(bf2f(fs[lane * P + d]) + dtb);
        if (lane + 32 < n) a1 = -eA * softplus20(bf2f(fs[(lane + 32) * P + d]) + dtb);
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            float t0 = __shfl_up_sync(0xffffffffu, a0, o), t1 = __shfl_up_sync(0xffffffffu, a1, o);
            if (lane >= o) a0 += t0, a1 += t1;
        }
        a1 += __shfl_sync(0xffffffffu, a0, 31);
        if (lane < n) Gs[lane * PG + d] = a0;
        if (lane + 32 < n) Gs[(lane + 32) * PG + d] = a1;
    }
    __syncthreads();
    bool vo = K % 8 == 0; // the saved buffer's parts are 256-byte aligned (cu_carve)
    const float *gl = Gs + (n - 1) * PG;
    for (int e = threadIdx.x; e < n * ((K + 7) / 8); e += blockDim.x) {
        pc.at(e, K);
        size_t g = row0 * K + pc.r * rsK + pc.q;
        const float *gr = Gs + pc.r * PG + pc.q; // scalar reads: a warp's 8 rows x 4 pieces, 32 banks
        if (vo && pc.w == 8) {
            *(float4 *)(sv.G + g) = make_float4(gr[0], gr[1], gr[2], gr[3]);
            *(float4 *)(sv.G + g + 4) = make_float4(gr[4], gr[5], gr[6], gr[7]);
        } else {
            for (int t = 0; t < pc.w; t++) sv.G[g + t] = gr[t];
        }
        float be = betas[pc.r], xq[8], xk[8], xb[8];
        for (int t = 0; t < pc.w; t++) {
            float gv = gr[t], qv = bf2f(qs[pc.r * P + pc.q + t]), kv = bf2f(ks[pc.r * P + pc.q + t]);
            xq[t] = qv * decay_exp(gv); // Γ ≤ 0 and Γ_last ≤ Γ: as the backward's finish kernel
            xk[t] = kv * decay_exp(gl[pc.q + t] - gv);
            xb[t] = be * kv * decay_exp(gv);
        }
        copy_piece(sv.qn + g, qs + pc.r * P + pc.q, pc.w, vo);
        copy_piece(sv.kn + g, ks + pc.r * P + pc.q, pc.w, vo);
        put_piece(sv.qg + g, xq, pc.w, vo);
        put_piece(sv.kg + g, xk, pc.w, vo);
        put_piece(sv.kb + g, xb, pc.w, vo);
    }
}

// ---- 2+3. intra and WY: grid (NT, H, B), 256 threads, dynamic shared memory ----
// Aqk_rj = s·Σ_d q_r k_j e^{Γ_r−Γ_j} and L_rj = β_r·Σ_d k_r k_j e^{Γ_r−Γ_j} (j ≤ r; exponents ≤ 0),
// by 16-row blocks: pairs inside a diagonal block term by term (fp32); a block I below the
// diagonal through its first row I0, e^{Γ_r−Γ_j} = e^{Γ_r−Γ_I0}·e^{Γ_I0−Γ_j} (both ≤ 1), as
// products on tensor cores of (q or k)⊙e^{Γ−Γ_I0} and k⊙e^{Γ_I0−Γ} (bf16 hi + lo pairs,
// kda_tile.cuh), over key slices of DT columns. Then Tinv = (I+L)^-1 in fp32 by 16×16 blocks
// (forward substitution on the diagonal blocks), stored bf16, and the WY factors from the stored
// Tinv: Wm = Tinv·(β·k⊙e^Γ), Um = Tinv·(β·v) (the products kda_chunk_gemm would give).
enum { DT = 32, DTP = DT + 4, DOP = DT + 8, IMP = KDA_MAX_C + 4, IXP = KDA_MAX_C + 4, IOR = 96 };

// p = r(r+1)/2 + j with 0 ≤ j ≤ r: false when p ≥ np
__device__ __forceinline__ bool tri_pair(int p, int np, int *r, int *j) {
    if (p >= np) return false;
    int x = (int)((sqrtf(8.0f * p + 1.0f) - 1.0f) * 0.5f);
    if ((x + 1) * (x + 2) / 2 <= p) x++;
    if (x * (x + 1) / 2 > p) x--;
    *r = x, *j = p - x * (x + 1) / 2;
    return true;
}

struct intra_slice { // one key slice
    float qs[KDA_MAX_C][DTP], ks[KDA_MAX_C][DTP], gs[KDA_MAX_C][DTP];
    bf16 qth[KDA_MAX_C][DOP], qtl[KDA_MAX_C][DOP]; // q⊙e^{Γ−Γ_I0(r)}
    bf16 kth[KDA_MAX_C][DOP], ktl[KDA_MAX_C][DOP]; // k⊙e^{Γ−Γ_I0(r)}
    bf16 krh[IOR][DOP], krl[IOR][DOP];             // k⊙e^{Γ_I0−Γ}: block I = 1, 2, 3 at rows 0, 16, 48
};
struct intra_inv {
    float X[KDA_MAX_C][IXP], Y[3 * 256];
};

// Shared memory by phase (offsets from the start; one region reused): the key slices (pairs and
// between-block products); then Aqk and L in fp32 (AF, LF, over the dead slices); then the
// inversion's X, Y beside LF; then Tinv (bf16), βk⊙e^Γ, βv and the WY products' fp32 tile, over
// the dead AF / LF / X. β lies past all of them. 62 KiB at K=32, V=64: 3 blocks an SM on Hopper.
struct intra_layout {
    int KP, VP, pk, pv, pf;
    size_t af, lf, inv, tinv, kb, vb, F, bt, bytes;
};

// constexpr: the kernel's specialisation for the recipe's sizes has its layout as constants.
static constexpr __host__ __device__ inline intra_layout intra_layout_of(int K, int V) {
    intra_layout L{};
    L.KP = pad16(K), L.VP = pad16(V), L.pk = L.KP + 8, L.pv = L.VP + 8;
    L.pf = (L.KP > L.VP ? L.KP : L.VP) + 4;
    size_t mat = up128((size_t)KDA_MAX_C * IMP * sizeof(float));
    L.af = 0, L.lf = mat, L.inv = 2 * mat;
    L.tinv = 0;
    L.kb = up128((size_t)KDA_MAX_C * (KDA_MAX_C + 8) * sizeof(bf16));
    L.vb = L.kb + up128((size_t)KDA_MAX_C * L.pk * sizeof(bf16));
    L.F = L.vb + up128((size_t)KDA_MAX_C * L.pv * sizeof(bf16));
    size_t end = sizeof(intra_slice), e2 = L.inv + sizeof(intra_inv),
           e3 = L.F + (size_t)KDA_MAX_C * L.pf * sizeof(float);
    end = end > e2 ? end : e2;
    end = end > e3 ? end : e3;
    L.bt = up128(end);
    L.bytes = L.bt + KDA_MAX_C * sizeof(float);
    return L;
}

__device__ __forceinline__ int kr_row0(int I) { return I == 1 ? 0 : I == 2 ? 16 : 48; }

// The slice [d0, d0+DT) of q, k, Γ (fp32) and the scaled operands of the between-block products.
__device__ __forceinline__ void intra_stage(intra_slice &m, const kda_shape &s, const kda_saved &sv, int b, int c,
                                            int h, int n, int d0) {
    int K = s.K;
    static_assert(KDA_MAX_C * DT / 8 == 256, "intra_stage: a thread per 8 columns of a row");
    bool vec = K % 8 == 0 && ((uintptr_t)sv.qn | (uintptr_t)sv.kn | (uintptr_t)sv.G) % 16 == 0;
    if (vec) { // 8 columns a thread: two 16-byte reads of q, k, two of Γ (K % 8 == 0: a group is all in or all out)
        int r = threadIdx.x >> 2, dd = (threadIdx.x & 3) * 8, d = d0 + dd;
        bool ok = r < n && d < K;
        size_t i = ok ? kda_row(s, b, c, h, r) * K + d : 0;
        uint4 qv = make_uint4(0, 0, 0, 0), kv = qv;
        float4 g0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), g1 = g0;
        if (ok) {
            qv = *(const uint4 *)&sv.qn[i], kv = *(const uint4 *)&sv.kn[i];
            g0 = *(const float4 *)&sv.G[i], g1 = *(const float4 *)&sv.G[i + 4];
        }
        const bf16 *q8 = (const bf16 *)&qv, *k8 = (const bf16 *)&kv;
        float4 *qd = (float4 *)&m.qs[r][dd], *kd = (float4 *)&m.ks[r][dd], *gd = (float4 *)&m.gs[r][dd];
        qd[0] = make_float4(bf2f(q8[0]), bf2f(q8[1]), bf2f(q8[2]), bf2f(q8[3]));
        qd[1] = make_float4(bf2f(q8[4]), bf2f(q8[5]), bf2f(q8[6]), bf2f(q8[7]));
        kd[0] = make_float4(bf2f(k8[0]), bf2f(k8[1]), bf2f(k8[2]), bf2f(k8[3]));
        kd[1] = make_float4(bf2f(k8[4]), bf2f(k8[5]), bf2f(k8[6]), bf2f(k8[7]));
        gd[0] = g0, gd[1] = g1;
    } else {
        for (int e = threadIdx.x; e < KDA_MAX_C * DT; e += blockDim.x) {
            int r = e / DT, dd = e % DT, d = d0 + dd;
            bool ok = r < n && d < K;
            size_t i = ok ? kda_row(s, b, c, h, r) * K + d : 0;
            m.qs[r][dd] = ok ? bf2f(sv.qn[i]) : 0.0f;
            m.ks[r][dd] = ok ? bf2f(sv.kn[i]) : 0.0f;
            m.gs[r][dd] = ok ? sv.G[i] : 0.0f;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < KDA_MAX_C * DT; e += blockDim.x) {
        int r = e / DT, dd = e % DT, I0 = r & ~15;
        float ex = r < n ? decay_exp(m.gs[r][dd] - m.gs[I0][dd]) : 0.0f;
        bf16 hq = f2bf(m.qs[r][dd] * ex), hk = f2bf(m.ks[r][dd] * ex);
        m.qth[r][dd] = hq, m.qtl[r][dd] = f2bf(m.qs[r][dd] * ex - bf2f(hq));
        m.kth[r][dd] = hk, m.ktl[r][dd] = f2bf(m.ks[r][dd] * ex - bf2f(hk));
    }
    for (int e = threadIdx.x; e < IOR * DT; e += blockDim.x) {
        int t = e / DT, dd = e % DT, I = t < 16 ? 1 : t < 48 ? 2 : 3, j = t - kr_row0(I), I0 = 16 * I;
        float x = I0 < n ? m.ks[j][dd] * decay_exp(m.gs[I0][dd] - m.gs[j][dd]) : 0.0f;
        bf16 hx = f2bf(x);
        m.krh[t][dd] = hx, m.krl[t][dd] = f2bf(x - bf2f(hx));
    }
}

// Tinv = (I+L)^-1 (unit lower triangular; rows and columns past n are those of I) in 16×16
// blocks: the four diagonal blocks by forward substitution (64 threads, one column each, the
// column in registers), then the off-diagonal blocks one block diagonal at a time,
// X_ij = −X_ii·Σ_{k=j..i−1} L_ik·X_kj (a thread per row and 4 adjacent columns: one broadcast L
// or X_ii read and one 16-byte read for 4 FMAs). Every sum runs over its terms in the order of
// the element-by-element loops (the terms before the diagonal are exact zeros: +0 sums), so the
// same bits. Only the diagonal and lower blocks of X are written: the caller reads j <= r.
__device__ void intra_invert(intra_inv &v, const float (*Ls)[IMP]) {
    int tid = threadIdx.x;
    if (tid < KDA_MAX_C) {
        int j = tid, I0 = j & ~15, jj = j & 15;
        float x[16];
#pragma unroll
        for (int i = 0; i < 16; i++) x[i] = i == jj ? 1.0f : 0.0f;
#pragma unroll
        for (int r = 1; r < 16; r++) {
            const float *lr = &Ls[I0 + r][I0];
            float acc = 0.0f;
#pragma unroll
            for (int m4 = 0; m4 < r; m4 += 4) {
                float4 l = *(const float4 *)&lr[m4];
                const float lv[4] = {l.x, l.y, l.z, l.w};
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (m4 + u < r) acc += lv[u] * x[m4 + u];
            }
            if (r > jj) x[r] = -acc;
        }
#pragma unroll
        for (int i = 0; i < 16; i++) v.X[I0 + i][j] = x[i];
    }
#pragma unroll
    for (int st = 1; st < 4; st++) {
        const int np = 4 - st; // block pairs (i, j) = (p + st, p), p < np
        int p = tid >> 6, rr = (tid >> 2) & 15, c4 = (tid & 3) * 4;
        __syncthreads();
        if (tid < np * 64) {
            int row = (p + st) * 16 + rr, col = p * 16 + c4;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
            for (int mm = 0; mm < 16 * st; mm++) {
                int m = p * 16 + mm;
                float l = Ls[row][m];
                float4 x = *(const float4 *)&v.X[m][col];
                a0 += l * x.x, a1 += l * x.y, a2 += l * x.z, a3 += l * x.w;
            }
            *(float4 *)&v.Y[(p << 8) + rr * 16 + c4] = make_float4(a0, a1, a2, a3);
        }
        __syncthreads();
        if (tid < np * 64) {
            int i0 = (p + st) * 16;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
            for (int m = 0; m < 16; m++) {
                float xm = v.X[i0 + rr][i0 + m];
                float4 y = *(const float4 *)&v.Y[(p << 8) + m * 16 + c4];
                a0 += xm * y.x, a1 += xm * y.y, a2 += xm * y.z, a3 += xm * y.w;
            }
            *(float4 *)&v.X[i0 + rr][p * 16 + c4] = make_float4(-a0, -a1, -a2, -a3);
        }
    }
    __syncthreads();
}

// The launch bounds' minimum of blocks an SM by architecture (CUDA 13.0's ptxas, 256 threads, 62
// KiB of shared memory a block): on sm_90 none, since with 3 ptxas aims at 80 registers and spills
// (52 bytes) while without it needs 79 and no spill, which still gives 3 blocks an SM; on sm_100 3
// (80 registers, no spill; without the bound it takes 128, 2 blocks); below sm_90 none (shared
// memory allows at most 2 blocks there; 101 registers).
// (An explicit minimum of 1 is not the same as none: ptxas then takes 137 registers on sm_90.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define KDA_INTRA_BOUNDS __launch_bounds__(256, 3)
#else
#define KDA_INTRA_BOUNDS __launch_bounds__(256)
#endif
template <int C0, int K0, int V0> // 64, 32, 64: the recipe's sizes (kda_fixed); 0, 0, 0: any
__global__ void KDA_INTRA_BOUNDS kda_intra_kernel(const kda_shape s_any, kda_saved sv, const bf16 *__restrict__ vin) {
    using namespace nvcuda;
    extern __shared__ __align__(128) unsigned char intra_raw[];
    const kda_shape s = kda_fixed<C0, K0, V0>(s_any);
    const intra_layout L = intra_layout_of(s.K, s.V);
    intra_slice &m = *(intra_slice *)intra_raw;
    float(*AF)[IMP] = (float(*)[IMP])(intra_raw + L.af);
    float(*LF)[IMP] = (float(*)[IMP])(intra_raw + L.lf);
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int n = min(s.C, s.T - c * s.C), K = s.K, V = s.V, C = s.C;
    int tid = threadIdx.x, warp = tid >> 5;
    // pairs inside the four diagonal blocks: p = 136·block + r(r+1)/2 + j
    enum { NPAIR = 4 * 136, PPT = (NPAIR + 255) / 256 };
    float aa[PPT], al[PPT];
#pragma unroll
    for (int x = 0; x < PPT; x++) aa[x] = al[x] = 0.0f;
    // between-block tiles: task t < 12 → (Aqk or L, block I, column tile jt < I)
    tacc acc[2];
    wmma::fill_fragment(acc[0], 0.0f), wmma::fill_fragment(acc[1], 0.0f);
    float *betas = (float *)(intra_raw + L.bt);
    if (tid < KDA_MAX_C) betas[tid] = tid < n ? sv.beta[kda_row(s, b, c, h, tid)] : 0.0f;
    for (int d0 = 0; d0 < K; d0 += DT) {
        __syncthreads();
        intra_stage(m, s, sv, b, c, h, n, d0);
        __syncthreads();
#pragma unroll
        for (int x = 0; x < PPT; x++) {
            int p = tid + 256 * x, rr, jj;
            if (p >= NPAIR || !tri_pair(p % 136, 136, &rr, &jj)) continue;
            int r = (p / 136) * 16 + rr, j = (p / 136) * 16 + jj;
            if (r >= n) continue;
            float sa = 0.0f, sl = 0.0f;
#pragma unroll
            for (int d4 = 0; d4 < DT; d4 += 4) { // 16-byte reads of the rows (DTP % 4 == 0); terms in column order
                float4 gr = *(const float4 *)&m.gs[r][d4], gj = *(const float4 *)&m.gs[j][d4];
                float4 kj4 = *(const float4 *)&m.ks[j][d4], qr = *(const float4 *)&m.qs[r][d4];
                float4 kr = *(const float4 *)&m.ks[r][d4];
                const float gra[4] = {gr.x, gr.y, gr.z, gr.w}, gja[4] = {gj.x, gj.y, gj.z, gj.w};
                const float kja[4] = {kj4.x, kj4.y, kj4.z, kj4.w}, qra[4] = {qr.x, qr.y, qr.z, qr.w};
                const float kra[4] = {kr.x, kr.y, kr.z, kr.w};
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    float e = decay_exp(gra[u] - gja[u]); // j ≤ r: exponent ≤ 0
                    float kj = kja[u];
                    sa += qra[u] * kj * e;
                    sl += kra[u] * kj * e;
                }
            }
            aa[x] += sa, al[x] += sl;
        }
#pragma unroll
        for (int x = 0; x < 2; x++) {
            int t = warp + 8 * x;
            if (t >= 12) continue;
            int idx = t % 6, I = idx == 0 ? 1 : idx < 3 ? 2 : 3, jt = idx == 0 ? 0 : idx < 3 ? idx - 1 : idx - 3;
            int I0 = 16 * I;
            if (I0 >= n) continue;
            smat A = t < 6 ? smat{&m.qth[I0][0], &m.qtl[I0][0], DOP} : smat{&m.kth[I0][0], &m.ktl[I0][0], DOP};
            smat B = {&m.krh[kr_row0(I) + 16 * jt][0], &m.krl[kr_row0(I) + 16 * jt][0], DOP};
            tterm tt = {A, B, false, true, DT, 1.0f};
            tile_mma<false, true>(acc[x], tt, 0, 0);
        }
    }
    // The slices are no longer read: AF and LF take their place. Every element the next loop reads
    // (j <= r < n) is written below, by a between-block tile or a pair: nothing to zero first.
    __syncthreads();
#pragma unroll
    for (int x = 0; x < 2; x++) {
        int t = warp + 8 * x;
        if (t >= 12) continue;
        int idx = t % 6, I = idx == 0 ? 1 : idx < 3 ? 2 : 3, jt = idx == 0 ? 0 : idx < 3 ? idx - 1 : idx - 3;
        float(*D)[IMP] = t < 6 ? AF : LF;
        acc_store(&D[16 * I][16 * jt], acc[x], IMP);
    }
#pragma unroll
    for (int x = 0; x < PPT; x++) {
        int p = tid + 256 * x, rr, jj;
        if (p >= NPAIR || !tri_pair(p % 136, 136, &rr, &jj)) continue;
        int r = (p / 136) * 16 + rr, j = (p / 136) * 16 + jj;
        AF[r][j] = aa[x], LF[r][j] = al[x];
    }
    __syncthreads();
    // Aqk (bf16, every column of the row written: zeros above the diagonal); L = β_r·(k k) below it
    for (int e = tid; e < KDA_MAX_C * KDA_MAX_C; e += blockDim.x) {
        int r = e >> 6, j = e & (KDA_MAX_C - 1);
        AF[r][j] = j <= r && r < n ? s.scale * AF[r][j] : 0.0f;
        LF[r][j] = j < r && r < n ? betas[r] * LF[r][j] : 0.0f;
    }
    __syncthreads();
    size_t row0 = kda_row(s, b, c, h, 0), rsK = (size_t)s.H * K, rsV = (size_t)s.H * V;
    // The recipe's kernel reads βk and v for the WY products here, into registers (tile_fetch), so
    // that the reads are in flight through the inverse (6 of the 8 warps idle through its first
    // phase); their shared memory lies over AF / LF / X until the inverse is done. A thread's
    // pieces: the tile's 16-byte pieces over the block's 256 threads (the blockDim test below, which
    // tile_fetch's own cover check would make redundant, lets the compiler fold its walk: 54
    // registers with it, 64 without, sm_90a).
    constexpr int NPK = C0 > 0 ? KDA_MAX_C * pad16(K0) / 8 / 256 : 1,
                  NPV = C0 > 0 ? KDA_MAX_C * pad16(V0) / 8 / 256 : 1;
    static_assert(C0 == 0 || (NPK * 256 * 8 == KDA_MAX_C * pad16(K0) && NPV * 256 * 8 == KDA_MAX_C * pad16(V0)),
                  "intra: βk and v in whole pieces a thread");
    tile_held<NPK> hk;
    tile_held<NPV> hv;
    bool held = C0 > 0 && blockDim.x == 256 && tile_fetch(hk, sv.kb + row0 * K, rsK, n, K, KDA_MAX_C, L.KP) &&
        tile_fetch(hv, vin + row0 * V, rsV, n, V, KDA_MAX_C, L.VP);
    tile_store(sv.Aqk + row0 * C, (size_t)s.H * C, &AF[0][0], IMP, n, C);
    intra_inv &v = *(intra_inv *)(intra_raw + L.inv); // beside LF, which it reads
    intra_invert(v, LF);
    // Tinv: bf16 to the saved buffer and, as stored (rows ≥ n zero), to shared memory for the WY products
    smat mT = {(bf16 *)(intra_raw + L.tinv), NULL, KDA_MAX_C + 8};
    for (int e = tid; e < KDA_MAX_C * KDA_MAX_C; e += blockDim.x) {
        int r = e >> 6, j = e & (KDA_MAX_C - 1);
        mT.hi[r * mT.ld + j] = f2bf(r < n && j <= r ? v.X[r][j] : 0.0f); // X's upper blocks unwritten
    }
    __syncthreads();
    { // the stored Tinv, 16 bytes at a time where the row length allows
        bf16 *dst = sv.Tinv + row0 * C;
        size_t rs = (size_t)s.H * C;
        tile_walk tw;
        if (C % 8 == 0 && tw.init(C / 8))
            for (int r = tw.r0; r < n; r += tw.rstep)
                *(uint4 *)&dst[r * rs + tw.q * 8] = *(const uint4 *)&mT.hi[r * mT.ld + tw.q * 8];
        else if (C % 8 != 0)
            for (int e = tid; e < n * C; e += blockDim.x) dst[(e / C) * rs + e % C] = mT.hi[(e / C) * mT.ld + e % C];
    }
    smat mkb = {(bf16 *)(intra_raw + L.kb), NULL, L.pk}, mvb = {(bf16 *)(intra_raw + L.vb), NULL, L.pv};
    if (held) {
        tile_place(mkb, hk, KDA_MAX_C, L.KP);
        tile_place(mvb, hv, KDA_MAX_C, L.VP);
    } else {
        tile_load(mkb, sv.kb + row0 * K, rsK, n, K, KDA_MAX_C, L.KP);
        tile_load(mvb, vin + row0 * V, rsV, n, V, KDA_MAX_C, L.VP);
    }
    tile_scale_rows(mvb, n, L.VP, KDA_MAX_C, betas, 1); // β·v: bf16(β·v)
    float *F = (float *)(intra_raw + L.F);
    int CC = pad16(C);
    __syncthreads();
    {
        tterm wm[1] = {{mT, mkb, false, false, CC, 1.0f}};
        tile_gemm<false, false, 1, true>(F, L.pf, CC, L.KP, wm, KMASK_NONE);
    }
    __syncthreads();
    tile_store(sv.Wm + row0 * K, rsK, F, L.pf, n, K);
    __syncthreads();
    {
        tterm um[1] = {{mT, mvb, false, false, CC, 1.0f}};
        tile_gemm<false, false, 1, true>(F, L.pf, CC, L.VP, um, KMASK_NONE);
    }
    __syncthreads();
    tile_store(sv.Um + row0 * V, rsV, F, L.pf, n, V);
}

void kda_prep(const kda_shape &s, const void *q, const void *k, const void *f, const void *b, const float *A_log,
              const float *dt_bias, const kda_saved &sv) {
    size_t psmem = prep_layout_of(s).bytes;
    auto prep = kda_is_recipe(s) ? kda_prep_kernel<64, 32, 64> : kda_prep_kernel<0, 0, 0>;
    CU_CHECK(cudaFuncSetAttribute(prep, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)psmem));
    cu_prof_scope span(KDA_PHASE_KDA, "prep");
    prep<<<dim3(s.NT, s.H, s.B), 256, psmem, cu_stream>>>(s, (const bf16 *)q, (const bf16 *)k, (const bf16 *)f,
                                                          (const bf16 *)b, A_log, dt_bias, sv);
    CU_LAUNCHED();
}

void cu_kda_fwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                const float *A_log, const float *dt_bias, void *o, void *saved) {
    cu_kda_fwd_chunked_state(d, q, k, v, f, b, A_log, dt_bias, o, saved, NULL);
}

void cu_kda_fwd_chunked_state(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f,
                              const void *b, const float *A_log, const float *dt_bias, void *o, void *saved, float *S) {
    kda_shape s = kda_shape_of(d);
    if (s.R == 0) return;
    kda_saved sv;
    kda_saved_layout(s, d->lean, saved, &sv);
    fwd_scratch_layout(s, d->lean, cu_scratch(cu_kda_fwd_scratch_bytes(d)), &sv);
    dim3 grid(s.NT, s.H, s.B);
    kda_prep(s, q, k, f, b, A_log, dt_bias, sv);
    size_t ismem = intra_layout_of(s.K, s.V).bytes;
    KDA_CHECK(cu_smem_fits(ismem),
              "KDA heads K=%d V=%d need %zu bytes of shared memory per block in the intra kernel; this GPU "
              "allows less (smaller heads fit: K=32 V=64 needs 62 KiB)",
              s.K, s.V, ismem);
    auto intra = kda_is_recipe(s) ? kda_intra_kernel<64, 32, 64> : kda_intra_kernel<0, 0, 0>;
    kda_smem_attrs(intra, ismem); // all of the SM's shared memory, so that 3 blocks fit
    {
        cu_prof_scope span(KDA_PHASE_KDA, "intra");
        intra<<<grid, 256, ismem, cu_stream>>>(s, sv, (const bf16 *)v); // Aqk, Tinv, Wm, Um
        CU_LAUNCHED();
    }
    kda_scan_fwd(s, sv, S, (bf16 *)o); // h, Vn, O = s·qg·h + Aqk·Vn, and the final state into S when given
}
