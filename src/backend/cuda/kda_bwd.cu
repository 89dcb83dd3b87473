// kda_bwd.cu — chunked KDA backward on the GPU (kda-model.md §3.4, steps B1–B10), from the
// forward's saved buffer (nothing recomputed but, with kda_core_dims.lean, the prep outputs:
// stage 1 of the forward rerun first). Working gradients are fp32 in the backend's scratch;
// results are stored bf16 (dq, dk, dv, df, db) and fp32 (dA_log, ddt_bias, +=).
//   D1 + D2 reverse scan (kda_scan.cu): dh = bf16(dS) per chunk; dVn = Aqkᵀ·dO + kg·dS; dS ← B3
//   D3 chunk GEMMs:    dQg = s·dO·hᵀ, dKd = Vn·dhᵀ, dWm = −dVn·hᵀ, dTinv = dVn·(βv)ᵀ + dWm·(βk⊙e^Γ)ᵀ,
//                      dBV = Tinvᵀ·dVn, G = Tinvᵀ·dWm, dL = −Tinvᵀ·(dTinv·Tinvᵀ) (strict lower),
//                      dAqk = tril(dO·Vnᵀ)
//                      and, in the same pass over dBV, B7: dv = β·dBV, Σ_v dBV·v (dβ's value term);
//                      B6's Σ_v h·dh per key column from the staged h and dh
//   D4 finish (per chunk): B4, B5 and B6's last-row term elementwise, B9 pair sums with exponents
//                      ≤ 0, B10 reverse cumsum, gate / β / l2norm backward, per-chunk partials of
//                      dA_log, ddt_bias
//   D5 fixed-order sums of those partials (deterministic).
#include "backend/cuda/kda_tile.cuh"

struct kda_bwd_scratch {
    float *dVn;          // [R,V]
    bf16 *dh;            // [NC,K,V] dS at the end of each chunk
    float *dQ, *dK;      // [R,K] dQg / dKd, overwritten in place by the final dq̂ / dk̂
    float *dWm, *Gm;     // [R,K]
    float *dT, *dL, *dA; // [R,C] dTinv (then dL), Xc, dAqk
    float *Xc;
    float *dBV;      // [R,V] (the chunk-GEMM path only: the fused D3 keeps it on chip)
    float *dbv;      // [R] Σ_v dBV·v, B7's term of dβ
    float *hdh;      // [NC,K] B6: Σ_v h·dh per chunk and key column (D3, or the chunk-GEMM path's B6-B7 kernel)
    float *pA, *pdt; // [NC], [NC,K] partials
};

// With lean, the prep outputs (kda_saved_layout) follow, carved into sv.
static size_t bwd_layout(const kda_shape &s, int lean, void *base, kda_bwd_scratch *o, kda_saved *sv) {
    cu_carve c(base);
    o->dVn = c.take<float>(s.R * s.V);
    o->dh = c.take<bf16>(s.NC * s.K * s.V);
    o->dQ = c.take<float>(s.R * s.K), o->dK = c.take<float>(s.R * s.K);
    o->dWm = c.take<float>(s.R * s.K), o->Gm = c.take<float>(s.R * s.K);
    o->dT = c.take<float>(s.R * s.C), o->Xc = c.take<float>(s.R * s.C), o->dA = c.take<float>(s.R * s.C);
    o->dL = o->dT;
    o->dBV = c.take<float>(s.R * s.V), o->dbv = c.take<float>(s.R), o->hdh = c.take<float>(s.NC * s.K);
    o->pA = c.take<float>(s.NC), o->pdt = c.take<float>(s.NC * s.K);
    if (lean) kda_carve_prep(s, c, sv);
    return c.off;
}

// What cu_kda_bwd asks cu_scratch for (bwd_layout's size), for the memory plan; no device needed.
size_t cu_kda_bwd_scratch_bytes(const kda_core_dims *d) {
    kda_shape s = kda_shape_of(d);
    kda_bwd_scratch w;
    kda_saved sv;
    return s.R == 0 ? 0 : bwd_layout(s, d->lean, NULL, &w, &sv);
}

// Rows a warp takes at once in the row loops (B7, the l2norm backward): 4 (2 before session 22);
// all 8 of a warp's rows at C = 64 spill the finish kernel's 80 registers.
enum { RW = 4 };

// B6 for a chunk: out[d] = Σ_v h_dv·dh_dv for each key column d < K, warp w's columns w, w + 8, ..;
// a lane's terms v = lane, lane + 32, .. in that order, then the warp's tree. Rows d of h and dh
// at h + d·ld and dh + d·ld (in shared memory in D3, global in the chunk-GEMM path). 8 warps.
__device__ __forceinline__ void b6_cols(const bf16 *h, const bf16 *dh, int ld, int K, int V, float *__restrict__ out) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll 1
    for (int d = warp; d < K; d += 8) {
        float sd = 0.0f;
#pragma unroll 1
        for (int j = lane; j < V; j += 32) sd += bf2f(h[d * ld + j]) * bf2f(dh[d * ld + j]);
        sd = warp_sum(sd);
        if (lane == 0) out[d] = sd;
    }
}

// B7 (value side) for a chunk's rows: dv = β·dBV (bf16), dbv = Σ_v dBV·v (fp32, dβ's value term),
// dBV row r (chunk-local) at g + r·g_rs: in shared memory (the fused D3) or global (the chunk-GEMM
// path, kda_b6_b7_kernel). A warp's rows RW at a time (rows r0, r0 + 8, ..), their loads issued
// together (rows past n read row n − 1 and store nothing); each row's operations and their order
// as one row at a time. 8 warps.
__device__ __forceinline__ void b7_rows(const kda_shape &s, const kda_saved &sv, const float *g, size_t g_rs,
                                        const bf16 *__restrict__ v, bf16 *__restrict__ dv, float *__restrict__ dbv,
                                        int b, int c, int h, int n) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, V = s.V;
    for (int r0 = warp; r0 < n; r0 += 8 * RW) {
        size_t row[RW], gr[RW];
        float be[RW], acc[RW];
#pragma unroll
        for (int q = 0; q < RW; q++) {
            int r = min(r0 + 8 * q, n - 1);
            row[q] = kda_row(s, b, c, h, r), gr[q] = (size_t)r * g_rs, be[q] = sv.beta[row[q]], acc[q] = 0.0f;
        }
        for (int j = lane; j < V; j += 32) {
            float gv[RW], x[RW];
#pragma unroll
            for (int q = 0; q < RW; q++) gv[q] = g[gr[q] + j], x[q] = bf2f(v[row[q] * V + j]);
#pragma unroll
            for (int q = 0; q < RW; q++) {
                acc[q] += gv[q] * x[q];
                if (r0 + 8 * q < n) dv[row[q] * V + j] = f2bf(be[q] * gv[q]);
            }
        }
#pragma unroll
        for (int q = 0; q < RW; q++) {
            float a = warp_sum(acc[q]);
            if (lane == 0 && r0 + 8 * q < n) dbv[row[q]] = a;
        }
    }
}

// The chunk-GEMM path's B6 and B7 (dBV in global memory): grid (NT, H, B), 256 threads.
__global__ void __launch_bounds__(256)
    kda_b6_b7_kernel(kda_shape s, kda_saved sv, const bf16 *__restrict__ v, bf16 *__restrict__ dv, kda_bwd_scratch w) {
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z, n = min(s.C, s.T - c * s.C);
    size_t ch = kda_chunk(s, b, c, h);
    b6_cols(sv.h + ch * s.K * s.V, w.dh + ch * s.K * s.V, s.V, s.K, s.V, w.hdh + ch * s.K);
    b7_rows(s, sv, w.dBV + kda_row(s, b, c, h, 0) * s.V, (size_t)s.H * s.V, v, dv, w.dbv, b, c, h, n);
}

// ---- D3 fused: every chunk GEMM of D3 in one block per chunk, operands staged once in shared
// memory (kda_tile.cuh; the same bf16 hi/lo products as kda_chunk_gemm, so the same bits). One
// product at a time through one fp32 tile F; Tinv is staged after the first phase, in the tail of
// the region whose head holds that phase's operands: 72 KiB at K=32, V=64, C=64, with <= 80
// registers a thread (launch bounds), 3 blocks an SM on Hopper ----
struct d3_layout {
    int CC, KP, VP, pv, pk, pc, pf;      // padded sizes; row pitches (bf16: pv, pk, pc; fp32: pf)
    size_t r1, tinv, dvn, dwm, f, bytes; // byte offsets in dynamic shared memory
};

static constexpr __host__ __device__ size_t d3_take(size_t &off, size_t bytes) {
    size_t o = off;
    off = up128(off + bytes);
    return o;
}

// constexpr: the kernel's specialisation for the recipe's sizes has its layout as constants.
static constexpr __host__ __device__ d3_layout d3_layout_of(int C, int K, int V) {
    d3_layout L{};
    L.CC = pad16(C), L.KP = pad16(K), L.VP = pad16(V);
    L.pv = L.VP + 8, L.pk = L.KP + 8, L.pc = L.CC + 8;
    int wf = L.VP > L.CC ? L.VP : L.CC;
    L.pf = (wf > L.KP ? wf : L.KP) + 4;
    // r1 holds, by phase: dO, Vn, h, dh; then βv, βk⊙e^Γ; then dTinv (hi, lo). Tinv lies after the
    // second and third, from phase 2 on.
    size_t p1 = 2 * (size_t)L.CC * L.pv + 2 * (size_t)L.KP * L.pv, p2 = (size_t)L.CC * (L.pv + L.pk),
           p3 = 2 * (size_t)L.CC * L.pc;
    size_t t0 = up128((p2 > p3 ? p2 : p3) * sizeof(bf16)); // Tinv's offset in r1
    size_t r1 = t0 + (size_t)L.CC * L.pc * sizeof(bf16);
    r1 = r1 > p1 * sizeof(bf16) ? r1 : p1 * sizeof(bf16);
    size_t dv = (size_t)L.CC * (L.pv > L.pc ? L.pv : L.pc);
    size_t off = 0;
    L.r1 = d3_take(off, r1);
    L.tinv = L.r1 + t0;
    L.dvn = d3_take(off, 2 * dv * sizeof(bf16));
    L.dwm = d3_take(off, 2 * (size_t)L.CC * L.pk * sizeof(bf16));
    L.f = d3_take(off, (size_t)L.CC * L.pf * sizeof(float));
    L.bytes = off;
    return L;
}

// F ← Σ terms (one product of D3; the caller's barrier before, this one after so that F can be read).
template <bool TA, bool TB, int NT>
__device__ __forceinline__ void d3_product(float *F, const d3_layout &L, int M, int N, const tterm (&t)[NT], int mask) {
    tile_gemm<TA, TB>(F, L.pf, M, N, t, mask);
    __syncthreads();
}

// C0, K0, V0: 64, 32, 64, the recipe's sizes (kda_fixed: the layout too a constant), or 0, 0, 0,
// any sizes, the layout a parameter (worked out once on the host, read from the constant bank)
// rather than from d3_layout_of in the kernel, whose results took registers at the 80 that 3
// blocks allow.
template <int C0, int K0, int V0>
__global__ void __launch_bounds__(256, 3)
    kda_bwd_d3_kernel(const kda_shape s_any, kda_saved sv, const bf16 *__restrict__ dO, const bf16 *__restrict__ v,
                      bf16 *__restrict__ dv, kda_bwd_scratch w, const d3_layout L_any) {
    extern __shared__ __align__(128) unsigned char smraw[];
    const kda_shape s = kda_fixed<C0, K0, V0>(s_any);
    constexpr d3_layout L_fixed = d3_layout_of(C0, K0, V0);
    const d3_layout L = C0 > 0 ? L_fixed : L_any;
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int n = min(s.C, s.T - c * s.C), K = s.K, V = s.V, C = s.C, CC = L.CC, KP = L.KP, VP = L.VP;
    size_t row0 = kda_row(s, b, c, h, 0), ch = kda_chunk(s, b, c, h);
    size_t rsK = (size_t)s.H * K, rsV = (size_t)s.H * V, rsC = (size_t)s.H * C;
    bf16 *r1 = (bf16 *)(smraw + L.r1), *dvn = (bf16 *)(smraw + L.dvn), *dwm = (bf16 *)(smraw + L.dwm);
    float *F = (float *)(smraw + L.f);
    size_t dvh = (size_t)CC * (L.pv > L.pc ? L.pv : L.pc); // the dVn / Xc region holds hi, then lo
    smat mdO = {r1, NULL, L.pv}, mVn = {r1 + CC * L.pv, NULL, L.pv};
    smat mh = {r1 + 2 * CC * L.pv, NULL, L.pv}, mdh = {r1 + 2 * CC * L.pv + KP * L.pv, NULL, L.pv};
    smat mdVn = {dvn, dvn + dvh, L.pv}, mdWm = {dwm, dwm + CC * L.pk, L.pk};
    // phase 1: dQg = s·dO·hᵀ, dWm = −dVn·hᵀ, dKd = Vn·dhᵀ, dAqk = tril(dO·Vnᵀ)
    tile_copy(mdO, dO + row0 * V, rsV, n, V, CC, VP);
    tile_copy(mVn, sv.Vn + row0 * V, rsV, n, V, CC, VP);
    tile_copy(mh, sv.h + ch * K * V, V, K, V, KP, VP);
    tile_copy(mdh, w.dh + ch * K * V, V, K, V, KP, VP);
    tile_load(mdVn, w.dVn + row0 * V, rsV, n, V, CC, VP); // fp32: hi and lo
    cp_async_wait_all();
    __syncthreads();
    {
        tterm dq[1] = {{mdO, mh, false, true, VP, s.scale}};
        d3_product<false, true>(F, L, CC, KP, dq, KMASK_NONE);
        tile_store(w.dQ + row0 * K, rsK, F, L.pf, n, K);
        __syncthreads();
        tterm dwmt[1] = {{mdVn, mh, false, true, VP, -1.0f}};
        d3_product<false, true>(F, L, CC, KP, dwmt, KMASK_NONE);
        tile_split(mdWm, F, L.pf, CC, KP);
        __syncthreads();
        tterm dkd[1] = {{mVn, mdh, false, true, VP, 1.0f}};
        d3_product<false, true>(F, L, CC, KP, dkd, KMASK_NONE);
        tile_store(w.dK + row0 * K, rsK, F, L.pf, n, K);
        __syncthreads();
        tterm daqk[1] = {{mdO, mVn, false, true, VP, 1.0f}};
        d3_product<false, true>(F, L, CC, CC, daqk, KMASK_LOWER);
        tile_store(w.dA + row0 * C, rsC, F, L.pf, n, C);
    }
    b6_cols(mh.hi, mdh.hi, mh.ld, K, V, w.hdh + ch * K); // B6 from the staged h and dh (their bf16 values)
    __syncthreads(); // dO, Vn, h, dh are no longer read: their region takes βv, βk⊙e^Γ and Tinv
    // phase 2: dBV = Tinvᵀ·dVn, dTinv = dVn·(βv)ᵀ + dWm·(βk⊙e^Γ)ᵀ
    smat mvb = {r1, NULL, L.pv}, mkb = {r1 + CC * L.pv, NULL, L.pk};
    smat mT = {(bf16 *)(smraw + L.tinv), NULL, L.pc};
    tile_copy(mvb, v + row0 * V, rsV, n, V, CC, VP);
    tile_copy(mkb, sv.kb + row0 * K, rsK, n, K, CC, KP);
    tile_copy(mT, sv.Tinv + row0 * C, rsC, n, C, CC, CC);
    cp_async_wait_all();
    tile_scale_rows(mvb, n, VP, CC, sv.beta + row0, (size_t)s.H); // β·v: bf16(β·v)
    __syncthreads();
    {
        tterm dbv[1] = {{mT, mdVn, true, false, CC, 1.0f}};
        d3_product<true, false>(F, L, CC, VP, dbv, KMASK_NONE);
        b7_rows(s, sv, F, L.pf, v, dv, w.dbv, b, c, h, n); // dBV itself is not stored
        __syncthreads();
        tterm dt[2] = {{mdVn, mvb, false, true, VP, 1.0f}, {mdWm, mkb, false, true, KP, 1.0f}};
        d3_product<false, true>(F, L, CC, CC, dt, KMASK_NONE);
    }
    smat mdT = {r1, r1 + CC * L.pc, L.pc}; // βv and βk⊙e^Γ are no longer read
    tile_split(mdT, F, L.pf, CC, CC);
    __syncthreads();
    // phase 3: G = Tinvᵀ·dWm, Xc = dTinv·Tinvᵀ, dL = strictly_lower(−Tinvᵀ·Xc)
    {
        tterm gm[1] = {{mT, mdWm, true, false, CC, 1.0f}};
        d3_product<true, false>(F, L, CC, KP, gm, KMASK_NONE);
        tile_store(w.Gm + row0 * K, rsK, F, L.pf, n, K);
        __syncthreads();
        tterm xc[1] = {{mdT, mT, false, true, CC, 1.0f}};
        d3_product<false, true>(F, L, CC, CC, xc, KMASK_NONE);
    }
    smat mXc = {dvn, dvn + dvh, L.pc}; // dVn is no longer read
    tile_split(mXc, F, L.pf, CC, CC);
    __syncthreads();
    {
        tterm dl[1] = {{mT, mXc, true, false, CC, -1.0f}};
        d3_product<true, false>(F, L, CC, CC, dl, KMASK_STRICT);
    }
    tile_store(w.dL + row0 * C, rsC, F, L.pf, n, C);
}

// The D3 chunk GEMMs, one by one (any head size; the fused kernel needs its operands to fit in
// shared memory).
// Whether D3 runs as the fused kernel: its shared memory fits this GPU and KDA_CORE_UNFUSED is
// not set (=1 forces the chunk-GEMM path below, to measure one against the other).
static bool d3_fused(size_t smem_bytes) { return cu_smem_fits(smem_bytes) && !cu_env_on("KDA_CORE_UNFUSED"); }

static void d3_chunk_gemms(const kda_shape &s, const kda_saved &sv, const bf16 *dO, const bf16 *v,
                           const kda_bwd_scratch &w) {
    int C = s.C, K = s.K, V = s.V;
    kgemm g = {};
    g.nterms = 1, g.M = C, g.out_f32 = 1, g.mask = KMASK_NONE;
    g.N = K, g.out_ld = K, g.t[0].Kd = V;
    g.t[0].A = kv_tok(dO, 0, V, 0), g.t[0].B = kv_state(sv.h, K, V, 1), g.t[0].alpha = s.scale, g.out = w.dQ;
    kda_chunk_gemm(s, g); // dQg = s·dO·hᵀ
    g.t[0].A = kv_tok(sv.Vn, 0, V, 0), g.t[0].B = kv_state(w.dh, K, V, 1), g.t[0].alpha = 1.0f, g.out = w.dK;
    kda_chunk_gemm(s, g); // dKd = Vn·dhᵀ
    g.t[0].A = kv_tok(w.dVn, 1, V, 0), g.t[0].B = kv_state(sv.h, K, V, 1), g.t[0].alpha = -1.0f, g.out = w.dWm;
    kda_chunk_gemm(s, g); // dWm = −dVn·hᵀ
    kgemm g2 = {};
    g2.nterms = 2, g2.M = C, g2.N = C, g2.out = w.dT, g2.out_f32 = 1, g2.out_ld = C, g2.mask = KMASK_NONE;
    g2.t[0].A = kv_tok(w.dVn, 1, V, 0), g2.t[0].B = kv_tok_scaled(v, V, 1, sv.beta), g2.t[0].Kd = V;
    g2.t[0].alpha = 1.0f;
    g2.t[1].A = kv_tok(w.dWm, 1, K, 0), g2.t[1].B = kv_tok(sv.kb, 0, K, 1), g2.t[1].Kd = K, g2.t[1].alpha = 1.0f;
    kda_chunk_gemm(s, g2); // dTinv = dVn·(βv)ᵀ + dWm·(βk⊙e^Γ)ᵀ
    g.t[0].A = kv_tok(sv.Tinv, 0, C, 1), g.t[0].Kd = C, g.t[0].alpha = 1.0f;
    g.t[0].B = kv_tok(w.dVn, 1, V, 0), g.N = V, g.out_ld = V, g.out = w.dBV;
    kda_chunk_gemm(s, g); // dBV = Tinvᵀ·dVn
    g.t[0].B = kv_tok(w.dWm, 1, K, 0), g.N = K, g.out_ld = K, g.out = w.Gm;
    kda_chunk_gemm(s, g); // G = Tinvᵀ·dWm
    g.t[0].A = kv_tok(w.dT, 1, C, 0), g.t[0].B = kv_tok(sv.Tinv, 0, C, 1), g.N = C, g.out_ld = C, g.out = w.Xc;
    kda_chunk_gemm(s, g); // Xc = dTinv·Tinvᵀ
    g.t[0].A = kv_tok(sv.Tinv, 0, C, 1), g.t[0].B = kv_tok(w.Xc, 1, C, 0), g.t[0].alpha = -1.0f;
    g.out = w.dL, g.mask = KMASK_STRICT;
    kda_chunk_gemm(s, g); // dL = strictly_lower(−Tinvᵀ·Xc)   (overwrites dTinv, no longer needed)
    g.t[0].A = kv_tok(dO, 0, V, 0), g.t[0].B = kv_tok(sv.Vn, 0, V, 1), g.t[0].Kd = V, g.t[0].alpha = 1.0f;
    g.out = w.dA, g.mask = KMASK_LOWER;
    kda_chunk_gemm(s, g); // dAqk = tril(dO·Vnᵀ)
}

// ---- D4: finish, grid (NT, H, B), 256 threads ----
// B9's pair sums, per key column d (all exponents ≤ 0):
//   X_r = Σ_{j≤r} dL_rj·k_j·e^{Γ_r−Γ_j},  Y_r = Σ_{j≤r} dAqk_rj·k_j·e^{Γ_r−Γ_j},
//   Z_r = Σ_{j≥r} (dL_jr·β_j·k_j + dAqk_jr·s·q_j)·e^{Γ_j−Γ_r}.
// By 16-row blocks: inside a block, term by term; between blocks, through a reference row ρ
// between r and j (e^{Γ_r−Γ_j} = e^{Γ_r−Γ_ρ}·e^{Γ_ρ−Γ_j}, both factors ≤ 1), which makes them
// products on tensor cores: X,Y of block I (ρ = its first row I0) = [dL|dAqk]_{I,<I0}·(k⊙e^{Γ_I0−Γ})
// and Z of block J (ρ = its last row) = dL_{>ρ,J}ᵀ·(βk⊙e^{Γ−Γ_ρ}) + dAqk_{>ρ,J}ᵀ·(s·q⊙e^{Γ−Γ_ρ}),
// with dL, dAqk and the scaled operands as bf16 hi + lo pairs (kda_tile.cuh).
enum { FT = 16, FTP = FT + 1, FMP = KDA_MAX_C + 8, FOP = FT, FXP = FT + 4, FOR = 96 };
enum { PER = KDA_MAX_C * FT / 256 }; // (row, column) elements of a pass a thread

// 73 KiB: with <= 80 registers a thread (launch bounds), 3 blocks an SM on Hopper.
struct __align__(128) finish_smem {
    bf16 dLh[KDA_MAX_C][FMP], dLl[KDA_MAX_C][FMP], dAh[KDA_MAX_C][FMP], dAl[KDA_MAX_C][FMP];
    union {
        struct {
            bf16 kth[FOR][FOP], ktl[FOR][FOP]; // k⊙e^{Γ_I0−Γ}: block I = 1, 2, 3 at rows 0, 16, 48
            bf16 pkh[FOR][FOP], pkl[FOR][FOP]; // βk⊙e^{Γ−Γ_ρ}: block J = 0, 1, 2 at rows 0, 48, 80
            bf16 pqh[FOR][FOP], pql[FOR][FOP]; // s·q⊙e^{Γ−Γ_ρ}
        };
        struct { // after the between-block products (stored once every warp has read the above)
            float dgs[KDA_MAX_C][FTP], pb[KDA_MAX_C][FTP];
            float Xs[KDA_MAX_C][FXP], Ys[KDA_MAX_C][FXP], Zs[KDA_MAX_C][FXP]; // between-block parts
        };
    };
    float qs[KDA_MAX_C][FTP], ks[KDA_MAX_C][FTP], gs[KDA_MAX_C][FTP];
    float betas[KDA_MAX_C], dbeta[KDA_MAX_C], dApart[FT], gl[FT], hdh[FT];
    float dbp[2][KDA_MAX_C]; // B9 once a pair: a pass's dβ terms of a row, its columns 0-7 and 8-15
};

// 3 blocks an SM on Hopper (228 KiB of shared memory an SM, 1 KiB reserved a block; 2 on A100's 164)
static_assert(3 * (sizeof(finish_smem) + 1024) <= 228 * 1024, "finish_smem outgrew 3 blocks an SM");

__device__ __forceinline__ int kt_row0(int I) { return I == 1 ? 0 : I == 2 ? 16 : 48; } // rows j < 16·I
__device__ __forceinline__ int pz_row0(int J) { return J == 0 ? 0 : J == 1 ? 48 : 80; } // rows j > 16·J + 15
__device__ __forceinline__ void put_split(bf16 *hi, bf16 *lo, float x) {
    bf16 h = f2bf(x);
    *hi = h, *lo = f2bf(x - bf2f(h));
}

// The scaled operands of this pass's between-block products (zeros where a row is past n).
__device__ void finish_stage(finish_smem &m, int n, int dn, float sc) {
    for (int e = threadIdx.x; e < FOR * FT; e += blockDim.x) {
        int t = e / FT, dd = e % FT;
        int I = t < 16 ? 1 : t < 48 ? 2 : 3, j = t - kt_row0(I), I0 = 16 * I;
        float x = I0 < n && dd < dn ? m.ks[j][dd] * decay_exp(m.gs[I0][dd] - m.gs[j][dd]) : 0.0f;
        put_split(&m.kth[t][dd], &m.ktl[t][dd], x);
        int J = t < 48 ? 0 : t < 80 ? 1 : 2, rho = 16 * J + 15, jz = rho + 1 + t - pz_row0(J);
        float pk = 0.0f, pq = 0.0f;
        if (jz < n && dd < dn) {
            float ez = decay_exp(m.gs[jz][dd] - m.gs[rho][dd]);
            pk = m.betas[jz] * m.ks[jz][dd] * ez, pq = sc * m.qs[jz][dd] * ez;
        }
        put_split(&m.pkh[t][dd], &m.pkl[t][dd], pk);
        put_split(&m.pqh[t][dd], &m.pql[t][dd], pq);
    }
}

// Warps 0-2: X and Y of block I = warp + 1; warps 3-5: Z of block J = warp − 3. The products
// are stored after a barrier, since X, Y, Z share their space with the operands. All threads call it.
__device__ void finish_between_blocks(finish_smem &m, int n) {
    using namespace nvcuda;
    int warp = threadIdx.x >> 5;
    tacc p0, p1;
    wmma::fill_fragment(p0, 0.0f), wmma::fill_fragment(p1, 0.0f);
    bool xy = false, z = false;
    int I0 = 16 * (warp + 1), J0 = 16 * (warp - 3);
    if (warp < 3 && I0 < n) {
        int o = kt_row0(warp + 1);
        smat kt = {&m.kth[o][0], &m.ktl[o][0], FOP};
        tterm tx = {{&m.dLh[I0][0], &m.dLl[I0][0], FMP}, kt, false, false, I0, 1.0f};
        tterm ty = {{&m.dAh[I0][0], &m.dAl[I0][0], FMP}, kt, false, false, I0, 1.0f};
        tile_mma<false, false>(p0, tx, 0, 0);
        tile_mma<false, false>(p1, ty, 0, 0);
        xy = true;
    } else if (warp >= 3 && warp < 6 && J0 + 15 < n - 1) {
        int rho = J0 + 15, o = pz_row0(warp - 3);
        tterm tl = {{&m.dLh[rho + 1][J0], &m.dLl[rho + 1][J0], FMP},
                    {&m.pkh[o][0], &m.pkl[o][0], FOP},
                    true,
                    false,
                    KDA_MAX_C - 1 - rho,
                    1.0f};
        tterm ta = {{&m.dAh[rho + 1][J0], &m.dAl[rho + 1][J0], FMP},
                    {&m.pqh[o][0], &m.pql[o][0], FOP},
                    true,
                    false,
                    KDA_MAX_C - 1 - rho,
                    1.0f};
        tile_mma<true, false>(p0, tl, 0, 0);
        tile_mma<true, false>(p0, ta, 0, 0);
        z = true;
    }
    __syncthreads(); // every operand read: X, Y, Z may overwrite them
    if (xy) {
        acc_store(&m.Xs[I0][0], p0, FXP);
        acc_store(&m.Ys[I0][0], p1, FXP);
    } else if (z) {
        acc_store(&m.Zs[J0][0], p0, FXP);
    }
}

// The diagonal 16x16 blocks of dL and dAqk are read only by B9's pair loops (the between-block
// products read the blocks left of and below them), so there they are kept in fp32, as the
// chunk GEMMs wrote them: row r's 16 values of its block in the 64 bytes that the block's hi and
// lo halves of that row held (values 0-7 where hi's 8 were, 8-15 where lo's were). One 4-byte
// read a pair instead of two 2-byte reads, two conversions and an add, and the exact values.
// lo follows hi in finish_smem (dLl after dLh, dAl after dAh): one address, no select.
enum { FLO = KDA_MAX_C * FMP / 2 }; // floats from a hi row's element to the same lo row's
static_assert(offsetof(finish_smem, dLl) - offsetof(finish_smem, dLh) == FLO * sizeof(float) &&
                  offsetof(finish_smem, dAl) - offsetof(finish_smem, dAh) == FLO * sizeof(float),
              "diag_at: lo must follow hi");
__device__ __forceinline__ float *diag_at(bf16 (*hi)[FMP], int r, int j) {
    return (float *)(hi[r] + (j & ~15)) + (j & 7) + ((j >> 3) & 1) * FLO;
}
__device__ __forceinline__ float pair_l(finish_smem &m, int r, int j) { return *diag_at(m.dLh, r, j); }
__device__ __forceinline__ float pair_a(finish_smem &m, int r, int j) { return *diag_at(m.dAh, r, j); }

// After the tile loads of dL and dAqk (and a barrier): their diagonal blocks as fp32 (diag_at),
// a thread's DPT elements of each read before the first is stored.
enum { DPT = KDA_MAX_C * 16 / 256 };
__device__ void finish_diag_blocks(finish_smem &m, const kda_shape &s, const float *__restrict__ dL,
                                   const float *__restrict__ dA, size_t row0, int n) {
    float l[DPT], a[DPT];
#pragma unroll
    for (int x = 0; x < DPT; x++) {
        int e = threadIdx.x + 256 * x, r = e >> 4, j = (r & ~15) + (e & 15);
        size_t i = (row0 + (size_t)r * s.H) * s.C + j;
        bool ok = r < n && j < s.C;
        l[x] = ok ? dL[i] : 0.0f, a[x] = ok ? dA[i] : 0.0f;
    }
#pragma unroll
    for (int x = 0; x < DPT; x++) {
        int e = threadIdx.x + 256 * x, r = e >> 4, j = (r & ~15) + (e & 15);
        *diag_at(m.dLh, r, j) = l[x], *diag_at(m.dAh, r, j) = a[x];
    }
}

// B9's last terms and B4-B6 for element (r, d0 + dd), given its in-block pair sums X, Y (row side)
// and Z (column side) and its dQg, dKd, Gm (finish_fetch, by the caller): dq̂, dk̂ into w.dQ, w.dK;
// dΓ terms into m.dgs, m.pb (zeros where !live); returns its dβ term.
__device__ __forceinline__ float finish_element(finish_smem &m, const kda_shape &s, const kda_bwd_scratch &w,
                                                size_t row0, int d0, int n, float sc, int r, int dd, bool live, float X,
                                                float Y, float Z, float dqg, float dkd, float gm) {
    float pbeta = 0.0f, dg = 0.0f, pbv = 0.0f;
    if (live) {
        float gr = m.gs[r][dd], qr = m.qs[r][dd], kr = m.ks[r][dd];
        int I0 = r & ~15, rho = I0 + 15;
        if (I0 > 0) {
            float e0 = decay_exp(gr - m.gs[I0][dd]);
            X += e0 * m.Xs[r][dd], Y += e0 * m.Ys[r][dd];
        }
        if (rho < n - 1) Z += decay_exp(m.gs[rho][dd] - gr) * m.Zs[r][dd];
        size_t i = (row0 + (size_t)r * s.H) * s.K + d0 + dd;
        float eg = decay_exp(gr), egl = decay_exp(m.gl[dd] - gr), be = m.betas[r];
        w.dQ[i] = dqg * eg + sc * Y;
        w.dK[i] = dkd * egl + be * eg * gm + be * X + Z;
        dg = dqg * qr * eg - dkd * kr * egl + gm * be * kr * eg + be * kr * X + sc * qr * Y - kr * Z;
        pbv = dkd * kr * egl; // B5 term of the last row's dΓ
        pbeta = kr * eg * gm + kr * X;
    }
    m.dgs[r][dd] = dg, m.pb[r][dd] = pbv;
    return pbeta;
}

// finish_element's operands from global memory for element (r, d0 + dd) (zeros where !live).
__device__ __forceinline__ void finish_fetch(const kda_shape &s, const kda_bwd_scratch &w, size_t row0, int d0, int r,
                                             int dd, bool live, float &dqg, float &dkd, float &gm) {
    size_t g = (row0 + (size_t)r * s.H) * s.K + d0 + dd;
    dqg = live ? w.dQ[g] : 0.0f, dkd = live ? w.dK[g] : 0.0f, gm = live ? w.Gm[g] : 0.0f;
}

// B9 inside the 16-row blocks, each pair (a >= b) once: a thread per (block, column, a mod 4)
// takes rows a = I0 + t, + 4, .. and for each pair its e^{Γa−Γb}, dL_ab and dAqk_ab once, for X_a,
// Y_a (complete in the thread) and Z_b (partial; summed over the column's 4 lanes by two xor
// shuffles). A row's dβ terms over the pass's 16 columns: 8 a warp, the two warps' sums in
// m.dbp, added to m.dbeta by the caller after its barrier.
// EARLY (the recipe's kernel, whose 80 registers hold them without spill): finish_element's
// operands read before the pair loops, in flight during them; else (the generic kernel, which
// would spill) read after them.
template <bool EARLY>
__device__ __forceinline__ void finish_pairs_once(finish_smem &m, const kda_shape &s, const kda_bwd_scratch &w,
                                                  size_t row0, int d0, int n, int dn, float sc) {
    int tid = threadIdx.x, t = tid & 3, dd = (tid >> 2) & 15, I0 = 16 * (tid >> 6);
    bool col = dd < dn;
    float dqg[4], dkd[4], gm[4];
    if (EARLY)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = I0 + t + 4 * i;
            finish_fetch(s, w, row0, d0, r, dd, col && r < n, dqg[i], dkd[i], gm[i]);
        }
    float X[4], Y[4], Z[16];
#pragma unroll
    for (int q = 0; q < 16; q++) Z[q] = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int a = I0 + t + 4 * i;
        bool live = col && a < n;
        float ga = m.gs[a][dd], cb = m.betas[a] * m.ks[a][dd], cq = sc * m.qs[a][dd];
        X[i] = 0.0f, Y[i] = 0.0f;
#pragma unroll
        for (int bb = 0; bb < 16; bb++) {
            if (live && bb <= t + 4 * i) {
                int b = I0 + bb;
                float E = decay_exp(ga - m.gs[b][dd]);
                float dl = pair_l(m, a, b), da = pair_a(m, a, b), ek = m.ks[b][dd] * E;
                X[i] += dl * ek, Y[i] += da * ek;
                Z[bb] += (dl * cb + da * cq) * E;
            }
        }
    }
#pragma unroll
    for (int q = 0; q < 16; q++) {
        Z[q] += __shfl_xor_sync(0xffffffffu, Z[q], 1);
        Z[q] += __shfl_xor_sync(0xffffffffu, Z[q], 2);
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int r = I0 + t + 4 * i;
        float Zr = t == 0 ? Z[4 * i] : t == 1 ? Z[4 * i + 1] : t == 2 ? Z[4 * i + 2] : Z[4 * i + 3];
        if (!EARLY) finish_fetch(s, w, row0, d0, r, dd, col && r < n, dqg[i], dkd[i], gm[i]);
        float pbeta =
            finish_element(m, s, w, row0, d0, n, sc, r, dd, col && r < n, X[i], Y[i], Zr, dqg[i], dkd[i], gm[i]);
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) pbeta += __shfl_xor_sync(0xffffffffu, pbeta, o); // the warp's 8 columns
        if ((tid & 31) < 4) m.dbp[(tid >> 5) & 1][r] = pbeta;
    }
}

template <int C0, int K0, int V0> // 64, 32, 64: the recipe's sizes (kda_fixed); 0, 0, 0: any
__global__ void __launch_bounds__(256, 3)
    kda_finish_kernel(const kda_shape s_any, kda_saved sv, const bf16 *__restrict__ f, const float *__restrict__ A_log,
                      const float *__restrict__ dt_bias, kda_bwd_scratch w, bf16 *__restrict__ dq,
                      bf16 *__restrict__ dk, bf16 *__restrict__ df, bf16 *__restrict__ db) {
    extern __shared__ __align__(128) unsigned char fin_raw[];
    const kda_shape s = kda_fixed<C0, K0, V0>(s_any);
    finish_smem &m = *(finish_smem *)fin_raw;
    const int MC = KDA_MAX_C;
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
    int warp = tid >> 5, lane = tid & 31;
    int n = min(s.C, s.T - c * s.C), K = s.K, C = s.C;
    size_t ch = kda_chunk(s, b, c, h), last = kda_row(s, b, c, h, n - 1), row0 = kda_row(s, b, c, h, 0);
    float sc = s.scale, eA = expf(A_log[h]);

    if (tid < MC) m.betas[tid] = tid < n ? sv.beta[kda_row(s, b, c, h, tid)] : 0.0f;
    if (tid < n) m.dbeta[tid] = w.dbv[row0 + (size_t)tid * s.H]; // B7's term (D3)
    tile_load(smat{&m.dLh[0][0], &m.dLl[0][0], FMP}, w.dL + row0 * C, (size_t)s.H * C, n, C, MC, MC);
    tile_load(smat{&m.dAh[0][0], &m.dAl[0][0], FMP}, w.dA + row0 * C, (size_t)s.H * C, n, C, MC, MC);
    __syncthreads(); // the diagonal blocks' hi and lo were written by other threads
    finish_diag_blocks(m, s, w.dL, w.dA, row0, n);
    float dA_total = 0.0f; // thread 0
    for (int d0 = 0; d0 < K; d0 += FT) {
        int dn = min(FT, K - d0);
        __syncthreads();
        load_chunk_rows(s, sv.qn, K, b, c, h, n, MC, d0, FT, K, &m.qs[0][0], FTP);
        load_chunk_rows(s, sv.kn, K, b, c, h, n, MC, d0, FT, K, &m.ks[0][0], FTP);
        load_chunk_rows(s, sv.G, K, b, c, h, n, MC, d0, FT, K, &m.gs[0][0], FTP);
        if (tid < dn) m.gl[tid] = sv.G[last * K + d0 + tid], m.hdh[tid] = w.hdh[ch * K + d0 + tid]; // B6 (D3)
        __syncthreads();
        finish_stage(m, n, dn, sc);
        __syncthreads();
        finish_between_blocks(m, n);
        __syncthreads();
        finish_pairs_once<(C0 > 0)>(m, s, w, row0, d0, n, dn, sc);
        __syncthreads();
        float fz[PER]; // the gate backward's f, read here to be in flight during B10
#pragma unroll
        for (int x = 0; x < PER; x++) {
            int e = tid + 256 * x, r = e / FT, dd = e % FT;
            fz[x] = r < n && dd < dn ? bf2f(f[(row0 + (size_t)r * s.H) * K + d0 + dd]) : 0.0f;
        }
        if (tid < n) m.dbeta[tid] += m.dbp[0][tid] + m.dbp[1][tid];
        for (int dd = warp; dd < dn; dd += 8) { // B5 + B6 land on the last row; B10 reverse cumsum: dgs
            // becomes dα. A lane holds rows lane and lane + 32 (rows past n are zeros).
            float add = warp_sum(m.pb[lane][dd] + m.pb[lane + 32][dd]) + decay_exp(m.gl[dd]) * m.hdh[dd];
            float a0 = m.dgs[lane][dd], a1 = m.dgs[lane + 32][dd];
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                float t0 = __shfl_down_sync(0xffffffffu, a0, o), t1 = __shfl_down_sync(0xffffffffu, a1, o);
                if (lane + o < 32) a0 += t0, a1 += t1;
            }
            a0 += __shfl_sync(0xffffffffu, a1, 0);
            if (lane < n) m.dgs[lane][dd] = a0 + add;
            if (lane + 32 < n) m.dgs[lane + 32][dd] = a1 + add;
        }
        __syncthreads();
#pragma unroll
        for (int x = 0; x < PER; x++) { // gate backward, every (row, column) at once
            int e = tid + 256 * x, r = e / FT, dd = e % FT;
            float dz = 0.0f, dal = 0.0f;
            if (r < n && dd < dn) {
                size_t i = (row0 + (size_t)r * s.H) * K + d0 + dd;
                float z = fz[x] + dt_bias[h * K + d0 + dd];
                float alpha = -eA * softplus20(z), da = m.dgs[r][dd];
                dz = da * -eA * (z > 20.0f ? 1.0f : sigmoidf_(z));
                df[i] = f2bf(dz);
                dal = da * alpha;
            }
            m.pb[r][dd] = dz, m.qs[r][dd] = dal;
        }
        __syncthreads();
        for (int dd = warp; dd < dn; dd += 8) { // per-chunk partials of ddt_bias and dA_log
            float ddt = warp_sum(m.pb[lane][dd] + m.pb[lane + 32][dd]);
            float dAl = warp_sum(m.qs[lane][dd] + m.qs[lane + 32][dd]);
            if (lane == 0) w.pdt[ch * K + d0 + dd] = ddt, m.dApart[dd] = dAl;
        }
        __syncthreads();
        if (tid == 0)
            for (int dd = 0; dd < dn; dd++) dA_total += m.dApart[dd];
    }
    __syncthreads();
    if (tid == 0) w.pA[ch] = dA_total;
    if (tid < n) {
        float be = m.betas[tid];
        db[kda_b_at(s, kda_row(s, b, c, h, tid))] = f2bf(m.dbeta[tid] * be * (1.0f - be));
    }
    // l2norm backward: dx = rstd·(dy − (dy·y)·y), y the bf16 normalised vector; a warp's rows
    // RW at a time as in B7, their loads issued together (the same bits as one at a time). A lane's
    // first column (d = lane) is kept in registers from the dot products to the stores; further
    // columns (K > 32) are read again.
    for (int r0 = warp; r0 < n; r0 += 8 * RW) {
        size_t row[RW];
        float dotq[RW], dotk[RW], rq[RW], rk[RW], gq0[RW], yq0[RW], gk0[RW], yk0[RW];
#pragma unroll
        for (int q = 0; q < RW; q++) {
            row[q] = kda_row(s, b, c, h, min(r0 + 8 * q, n - 1)), dotq[q] = dotk[q] = 0.0f;
            rq[q] = sv.rq[row[q]], rk[q] = sv.rk[row[q]];
            gq0[q] = yq0[q] = gk0[q] = yk0[q] = 0.0f;
        }
        for (int d = lane; d < K; d += 32) {
            float gq[RW], yq[RW], gk[RW], yk[RW];
#pragma unroll
            for (int q = 0; q < RW; q++) {
                size_t i = row[q] * K + d;
                gq[q] = w.dQ[i], yq[q] = bf2f(sv.qn[i]), gk[q] = w.dK[i], yk[q] = bf2f(sv.kn[i]);
            }
#pragma unroll
            for (int q = 0; q < RW; q++) dotq[q] += gq[q] * yq[q], dotk[q] += gk[q] * yk[q];
            if (d == lane)
#pragma unroll
                for (int q = 0; q < RW; q++) gq0[q] = gq[q], yq0[q] = yq[q], gk0[q] = gk[q], yk0[q] = yk[q];
        }
#pragma unroll
        for (int q = 0; q < RW; q++) dotq[q] = warp_sum(dotq[q]), dotk[q] = warp_sum(dotk[q]);
        for (int d = lane; d < K; d += 32) {
#pragma unroll
            for (int q = 0; q < RW; q++) {
                if (r0 + 8 * q >= n) continue;
                size_t i = row[q] * K + d;
                bool first = d == lane;
                float gq = first ? gq0[q] : w.dQ[i], yq = first ? yq0[q] : bf2f(sv.qn[i]);
                float gk = first ? gk0[q] : w.dK[i], yk = first ? yk0[q] : bf2f(sv.kn[i]);
                dq[i] = f2bf(rq[q] * (gq - dotq[q] * yq));
                dk[i] = f2bf(rk[q] * (gk - dotk[q] * yk));
            }
        }
    }
}

// ---- D5: dA_log[h] += Σ pA, ddt_bias[h·K+d] += Σ pdt over (b, chunk): one block per output,
// fixed-order strided partials and a fixed tree (deterministic) ----
__global__ void __launch_bounds__(256)
    kda_param_grad_kernel(kda_shape s, const float *__restrict__ pA, const float *__restrict__ pdt,
                          float *__restrict__ dA_log, float *__restrict__ ddt) {
    __shared__ float red[256];
    int o = blockIdx.x, HK = s.H * s.K, tid = threadIdx.x;
    bool isdt = o < HK;
    int h = isdt ? o / s.K : o - HK, d = isdt ? o % s.K : 0;
    int nch = s.B * s.NT;
    float acc = 0.0f;
    for (int t = tid; t < nch; t += 256) {
        size_t ch = (size_t)t * s.H + h; // t = b·NT + c
        acc += isdt ? pdt[ch * s.K + d] : pA[ch];
    }
    red[tid] = acc;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (tid < w) red[tid] += red[tid + w];
        __syncthreads();
    }
    if (tid == 0) {
        if (isdt)
            ddt[o] += red[0];
        else
            dA_log[h] += red[0];
    }
}

void cu_kda_bwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                const float *A_log, const float *dt_bias, const void *saved, const void *d_o, void *dq, void *dk,
                void *dv, void *df, void *db, float *dA_log, float *ddt_bias) {
    kda_shape s = kda_shape_of(d);
    if (s.R == 0) return;
    kda_saved sv;
    kda_saved_layout(s, d->lean, (void *)saved, &sv);
    kda_bwd_scratch w;
    size_t bytes = bwd_layout(s, d->lean, NULL, &w, &sv);
    bwd_layout(s, d->lean, cu_scratch(bytes), &w, &sv);
    if (d->lean) kda_prep(s, q, k, f, b, A_log, dt_bias, sv); // the forward's stage 1 again: its bits
    int K = s.K;
    const bf16 *dO = (const bf16 *)d_o;

    // D1 + D2: dVn = Aqkᵀ·dO + kg·dS and the reverse scan, in one kernel
    kda_scan_bwd(s, sv, dO, w.dVn, w.dh);
    // D3
    const d3_layout d3L = d3_layout_of(s.C, s.K, s.V);
    size_t d3smem = d3L.bytes;
    if (d3_fused(d3smem)) {
        auto d3 = kda_is_recipe(s) ? kda_bwd_d3_kernel<64, 32, 64> : kda_bwd_d3_kernel<0, 0, 0>;
        kda_smem_attrs(d3, d3smem);
        cu_prof_scope span(KDA_PHASE_KDA, "D3");
        d3<<<dim3(s.NT, s.H, s.B), 256, d3smem, cu_stream>>>(s, sv, dO, (const bf16 *)v, (bf16 *)dv, w, d3L);
        CU_LAUNCHED();
    } else {
        d3_chunk_gemms(s, sv, dO, (const bf16 *)v, w);
        cu_prof_scope span(KDA_PHASE_KDA, "B6 B7");
        kda_b6_b7_kernel<<<dim3(s.NT, s.H, s.B), 256, 0, cu_stream>>>(s, sv, (const bf16 *)v, (bf16 *)dv, w);
        CU_LAUNCHED();
    }
    // D4
    auto finish = kda_is_recipe(s) ? kda_finish_kernel<64, 32, 64> : kda_finish_kernel<0, 0, 0>;
    size_t smem = sizeof(finish_smem);
    kda_smem_attrs(finish, smem); // all of the SM's shared memory, so that 3 blocks fit
    {
        cu_prof_scope span(KDA_PHASE_KDA, "finish");
        finish<<<dim3(s.NT, s.H, s.B), 256, smem, cu_stream>>>(s, sv, (const bf16 *)f, A_log, dt_bias, w, (bf16 *)dq,
                                                               (bf16 *)dk, (bf16 *)df, (bf16 *)db);
        CU_LAUNCHED();
    }
    // D5
    cu_prof_scope span(KDA_PHASE_KDA, "gate parameter gradients");
    kda_param_grad_kernel<<<s.H * K + s.H, 256, 0, cu_stream>>>(s, w.pA, w.pdt, dA_log, ddt_bias);
    CU_LAUNCHED();
}
