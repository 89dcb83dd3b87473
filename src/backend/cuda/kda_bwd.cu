// kda_bwd.cu — chunked KDA backward on the GPU (kda-model.md §3.4, steps B1–B10), from the
// forward's saved buffer (nothing recomputed). Working gradients are fp32 in the backend's
// scratch; results are stored bf16 (dq, dk, dv, df, db) and fp32 (dA_log, ddt_bias, +=).
//   D1 chunk GEMM:     dVn = Aqkᵀ·dO                                   (first term of B1)
//   D2 reverse scan:   dh = bf16(dS) per chunk; dVn += kg·dS; dS ← B3
//   D3 chunk GEMMs:    dQg = s·dO·hᵀ, dKd = Vn·dhᵀ, dWm = −dVn·hᵀ, dTinv = dVn·(βv)ᵀ + dWm·(βk⊙e^Γ)ᵀ,
//                      dBV = Tinvᵀ·dVn, G = Tinvᵀ·dWm, dL = −Tinvᵀ·(dTinv·Tinvᵀ) (strict lower),
//                      dAqk = tril(dO·Vnᵀ)
//   D4 finish (per chunk): B4–B7 elementwise terms, B9 pair sums with exponents ≤ 0, B10 reverse
//                      cumsum, gate / β / l2norm backward, per-chunk partials of dA_log, ddt_bias
//   D5 fixed-order sums of those partials (deterministic).
#include "backend/cuda/kda_cuda.cuh"

struct kda_bwd_scratch {
    float *dVn;          // [R,V]
    bf16 *dh;            // [NC,K,V] dS at the end of each chunk
    float *dQ, *dK;      // [R,K] dQg / dKd, overwritten in place by the final dq̂ / dk̂
    float *dWm, *Gm;     // [R,K]
    float *dT, *dL, *dA; // [R,C] dTinv (then dL), Xc, dAqk
    float *Xc;
    float *dBV;          // [R,V]
    float *pA, *pdt;     // [NC], [NC,K] partials
};

static size_t bwd_layout(const kda_shape &s, void *base, kda_bwd_scratch *o) {
    cu_carve c(base);
    o->dVn = c.take<float>(s.R * s.V);
    o->dh = c.take<bf16>(s.NC * s.K * s.V);
    o->dQ = c.take<float>(s.R * s.K), o->dK = c.take<float>(s.R * s.K);
    o->dWm = c.take<float>(s.R * s.K), o->Gm = c.take<float>(s.R * s.K);
    o->dT = c.take<float>(s.R * s.C), o->Xc = c.take<float>(s.R * s.C), o->dA = c.take<float>(s.R * s.C);
    o->dL = o->dT;
    o->dBV = c.take<float>(s.R * s.V);
    o->pA = c.take<float>(s.NC), o->pdt = c.take<float>(s.NC * s.K);
    return c.off;
}

// ---- D2: reverse state-gradient scan, grid (ceil(V/VT), H, B) ----
static size_t scan_bwd_smem(int K, int C) {
    return sizeof(float) * ((size_t)K * KDA_VT + 3 * (size_t)C * (K + 1) + 2 * (size_t)C * KDA_VT + K);
}

template <int KU> // key rows per thread: K ≤ 16·KU
__global__ void __launch_bounds__(256)
kda_scan_bwd_kernel(kda_shape s, kda_saved sv, const bf16 *__restrict__ dO, kda_bwd_scratch w) {
    extern __shared__ float sm[];
    int K = s.K, V = s.V, C = s.C, KP = K + 1;
    float *dS = sm, *kgs = dS + K * KDA_VT, *qgs = kgs + C * KP, *wms = qgs + C * KP, *dos = wms + C * KP,
          *dvn = dos + C * KDA_VT, *decay = dvn + C * KDA_VT;
    int v0 = blockIdx.x * KDA_VT, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
    for (int e = tid; e < K * KDA_VT; e += 256) dS[e] = 0.0f; // dS_final = 0 in training
    for (int c = s.NT - 1; c >= 0; c--) {
        int n = min(C, s.T - c * C);
        size_t ch = kda_chunk(s, b, c, h), last = kda_row(s, b, c, h, n - 1);
        for (int e = tid; e < K * KDA_VT; e += 256) {
            int d = e / KDA_VT, v = e % KDA_VT;
            if (v0 + v < V) w.dh[(ch * K + d) * V + v0 + v] = f2bf(dS[e]);
        }
        load_chunk_rows(s, sv.kg, K, b, c, h, n, C, 0, K, K, kgs, KP);
        load_chunk_rows(s, sv.qg, K, b, c, h, n, C, 0, K, K, qgs, KP);
        load_chunk_rows(s, sv.Wm, K, b, c, h, n, C, 0, K, K, wms, KP);
        load_chunk_rows(s, dO, V, b, c, h, n, C, v0, KDA_VT, V, dos, KDA_VT);
        load_chunk_rows(s, (const float *)w.dVn, V, b, c, h, n, C, v0, KDA_VT, V, dvn, KDA_VT);
        for (int d = tid; d < K; d += 256) decay[d] = expf(sv.G[last * K + d]);
        __syncthreads();
        // a thread: value column v, rows r0 + 16u (u < 4) and key rows r0 + 16u (u < KU)
        int v = tid % KDA_VT, r0 = tid / KDA_VT;
        { // B1: dVn = Aqkᵀ·dO + kg·dS
            float acc[4];
#pragma unroll
            for (int u = 0; u < 4; u++) acc[u] = r0 + 16 * u < C ? dvn[(r0 + 16 * u) * KDA_VT + v] : 0.0f;
            for (int d = 0; d < K; d++) {
                float x = dS[d * KDA_VT + v];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (r0 + 16 * u < C) acc[u] += kgs[(r0 + 16 * u) * KP + d] * x;
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int r = r0 + 16 * u;
                if (r >= n) continue;
                dvn[r * KDA_VT + v] = acc[u];
                if (v0 + v < V) w.dVn[kda_row(s, b, c, h, r) * V + v0 + v] = acc[u];
            }
        }
        __syncthreads();
        { // B3
            float a[KU], bq[KU];
#pragma unroll
            for (int u = 0; u < KU; u++) a[u] = bq[u] = 0.0f;
            for (int r = 0; r < n; r++) {
                float x = dos[r * KDA_VT + v], y = dvn[r * KDA_VT + v];
#pragma unroll
                for (int u = 0; u < KU; u++)
                    if (r0 + 16 * u < K) {
                        a[u] += qgs[r * KP + r0 + 16 * u] * x;
                        bq[u] += wms[r * KP + r0 + 16 * u] * y;
                    }
            }
#pragma unroll
            for (int u = 0; u < KU; u++) {
                int d = r0 + 16 * u;
                if (d < K) dS[d * KDA_VT + v] = s.scale * a[u] - bq[u] + decay[d] * dS[d * KDA_VT + v];
            }
        }
        __syncthreads();
    }
}

// ---- D4: finish, grid (NT, H, B), 256 threads ----
enum { FT = 32 }; // key columns per pass

static size_t finish_smem(void) {
    return sizeof(float) * (2 * (size_t)KDA_MAX_C * (KDA_MAX_C + 1) + 5 * (size_t)KDA_MAX_C * (FT + 1) +
                            3 * KDA_MAX_C + 2 * FT);
}

__device__ __forceinline__ float softplus20(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

__global__ void __launch_bounds__(256)
kda_finish_kernel(kda_shape s, kda_saved sv, const bf16 *__restrict__ v, const bf16 *__restrict__ f,
                  const bf16 *__restrict__ A_log, const bf16 *__restrict__ dt_bias, kda_bwd_scratch w,
                  bf16 *__restrict__ dq, bf16 *__restrict__ dk, bf16 *__restrict__ dv, bf16 *__restrict__ df,
                  bf16 *__restrict__ db) {
    extern __shared__ float sm[];
    const int MC = KDA_MAX_C, CP = KDA_MAX_C + 1, TP = FT + 1;
    float(*dLs)[CP] = (float(*)[CP])sm;
    float(*dAs)[CP] = (float(*)[CP])(sm + MC * CP);
    float(*qs)[TP] = (float(*)[TP])(sm + 2 * MC * CP);
    float(*ks)[TP] = qs + MC;
    float(*gs)[TP] = ks + MC;
    float(*dgs)[TP] = gs + MC;
    float(*pb)[TP] = dgs + MC;
    float *betas = (float *)(pb + MC), *dbeta = betas + MC, *dApart = dbeta + MC, *gl = dApart + MC,
          *hdh = gl + FT;
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
    int warp = tid >> 5, lane = tid & 31;
    int n = min(s.C, s.T - c * s.C), K = s.K, V = s.V, C = s.C;
    size_t ch = kda_chunk(s, b, c, h), last = kda_row(s, b, c, h, n - 1);
    float sc = s.scale, eA = expf(bf2f(A_log[h]));

    if (tid < MC) betas[tid] = tid < n ? sv.beta[kda_row(s, b, c, h, tid)] : 0.0f;
    // B7 (value side): dv = β·dBV, dβ = Σ_v dBV·v
    for (int r = warp; r < n; r += 8) {
        size_t row = kda_row(s, b, c, h, r);
        float be = sv.beta[row], acc = 0.0f;
        for (int j = lane; j < V; j += 32) {
            float g = w.dBV[row * V + j];
            acc += g * bf2f(v[row * V + j]);
            dv[row * V + j] = f2bf(be * g);
        }
        acc = warp_sum(acc);
        if (lane == 0) dbeta[r] = acc;
    }
    for (int e = tid; e < MC * MC; e += 256) {
        int r = e / MC, j = e % MC;
        bool ok = r < n && j < C;
        size_t i = ok ? kda_row(s, b, c, h, r) * C + j : 0;
        dLs[r][j] = ok ? w.dL[i] : 0.0f;
        dAs[r][j] = ok ? w.dA[i] : 0.0f;
    }
    float dA_total = 0.0f; // thread 0
    for (int d0 = 0; d0 < K; d0 += FT) {
        int dn = min(FT, K - d0);
        __syncthreads();
        for (int e = tid; e < MC * FT; e += 256) {
            int r = e / FT, dd = e % FT;
            bool ok = r < n && dd < dn;
            size_t i = ok ? kda_row(s, b, c, h, r) * K + d0 + dd : 0;
            qs[r][dd] = ok ? bf2f(sv.qn[i]) : 0.0f;
            ks[r][dd] = ok ? bf2f(sv.kn[i]) : 0.0f;
            gs[r][dd] = ok ? sv.G[i] : 0.0f;
        }
        if (tid < dn) gl[tid] = sv.G[last * K + d0 + tid];
        for (int dd = warp; dd < dn; dd += 8) { // B6: Σ_v h·dh of this chunk, per key column
            const bf16 *hs = sv.h + (ch * K + d0 + dd) * V, *dhs = w.dh + (ch * K + d0 + dd) * V;
            float sd = 0.0f;
            for (int j = lane; j < V; j += 32) sd += bf2f(hs[j]) * bf2f(dhs[j]);
            sd = warp_sum(sd);
            if (lane == 0) hdh[dd] = sd;
        }
        __syncthreads();
        for (int e = tid; e < MC * FT; e += 256) {
            int r = e / FT, dd = e % FT; // a warp: one row r, consecutive key columns
            if (r >= n) { // the whole warp
                dgs[r][dd] = 0.0f, pb[r][dd] = 0.0f;
                continue;
            }
            float pbeta = 0.0f;
            if (dd < dn) {
                float gr = gs[r][dd], qr = qs[r][dd], kr = ks[r][dd];
                float X = 0.0f, Y = 0.0f, Z = 0.0f;
                for (int j = 0; j <= r; j++) { // B9, row side: exponents Γ_r − Γ_j ≤ 0
                    float ek = ks[j][dd] * expf(gr - gs[j][dd]);
                    X += dLs[r][j] * ek;
                    Y += dAs[r][j] * ek;
                }
                for (int j = r; j < n; j++) // B9, column side: exponents Γ_j − Γ_r ≤ 0
                    Z += (dLs[j][r] * betas[j] * ks[j][dd] + dAs[j][r] * sc * qs[j][dd]) * expf(gs[j][dd] - gr);
                size_t i = kda_row(s, b, c, h, r) * K + d0 + dd;
                float eg = expf(gr), egl = expf(gl[dd] - gr), be = betas[r];
                float dqg = w.dQ[i], dkd = w.dK[i], gm = w.Gm[i];
                w.dQ[i] = dqg * eg + sc * Y;
                w.dK[i] = dkd * egl + be * eg * gm + be * X + Z;
                dgs[r][dd] = dqg * qr * eg - dkd * kr * egl + gm * be * kr * eg + be * kr * X + sc * qr * Y - kr * Z;
                pb[r][dd] = dkd * kr * egl; // B5 term of the last row's dΓ
                pbeta = kr * eg * gm + kr * X;
            } else {
                dgs[r][dd] = 0.0f, pb[r][dd] = 0.0f;
            }
            pbeta = warp_sum(pbeta);
            if (lane == 0) dbeta[r] += pbeta;
        }
        __syncthreads();
        if (tid < dn) { // B5 + B6 land on the last row; B10 reverse cumsum: dgs becomes dα
            float add = 0.0f;
            for (int r = 0; r < n; r++) add += pb[r][tid];
            add += expf(gl[tid]) * hdh[tid];
            float acc = 0.0f;
            for (int r = n - 1; r >= 0; r--) {
                acc += r == n - 1 ? dgs[r][tid] + add : dgs[r][tid];
                dgs[r][tid] = acc;
            }
        }
        __syncthreads();
        for (int e = tid; e < MC * FT; e += 256) { // gate backward, every (row, column) at once
            int r = e / FT, dd = e % FT;
            float dz = 0.0f, dal = 0.0f;
            if (r < n && dd < dn) {
                size_t i = kda_row(s, b, c, h, r) * K + d0 + dd;
                float z = bf2f(f[i]) + bf2f(dt_bias[h * K + d0 + dd]);
                float alpha = -eA * softplus20(z), da = dgs[r][dd];
                dz = da * -eA * (z > 20.0f ? 1.0f : sigmoidf_(z));
                df[i] = f2bf(dz);
                dal = da * alpha;
            }
            pb[r][dd] = dz, qs[r][dd] = dal;
        }
        __syncthreads();
        if (tid < dn) { // per-chunk partials of ddt_bias and dA_log, rows in reverse order
            float ddt = 0.0f, dAl = 0.0f;
            for (int r = n - 1; r >= 0; r--) ddt += pb[r][tid], dAl += qs[r][tid];
            w.pdt[ch * K + d0 + tid] = ddt;
            dApart[tid] = dAl;
        }
        __syncthreads();
        if (tid == 0)
            for (int dd = 0; dd < dn; dd++) dA_total += dApart[dd];
    }
    __syncthreads();
    if (tid == 0) w.pA[ch] = dA_total;
    if (tid < n) {
        float be = betas[tid];
        db[kda_row(s, b, c, h, tid)] = f2bf(dbeta[tid] * be * (1.0f - be));
    }
    // l2norm backward: dx = rstd·(dy − (dy·y)·y), y the bf16 normalised vector
    for (int r = warp; r < n; r += 8) {
        size_t row = kda_row(s, b, c, h, r);
        float dotq = 0.0f, dotk = 0.0f;
        for (int d = lane; d < K; d += 32) {
            dotq += w.dQ[row * K + d] * bf2f(sv.qn[row * K + d]);
            dotk += w.dK[row * K + d] * bf2f(sv.kn[row * K + d]);
        }
        dotq = warp_sum(dotq), dotk = warp_sum(dotk);
        float rq = sv.rq[row], rk = sv.rk[row];
        for (int d = lane; d < K; d += 32) {
            size_t i = row * K + d;
            dq[i] = f2bf(rq * (w.dQ[i] - dotq * bf2f(sv.qn[i])));
            dk[i] = f2bf(rk * (w.dK[i] - dotk * bf2f(sv.kn[i])));
        }
    }
}

// ---- D5: dA_log[h] += Σ pA, ddt_bias[h·K+d] += Σ pdt over (b, chunk): one block per output,
// fixed-order strided partials and a fixed tree (deterministic) ----
__global__ void __launch_bounds__(256) kda_param_grad_kernel(kda_shape s, const float *__restrict__ pA,
                                                             const float *__restrict__ pdt,
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
        if (isdt) ddt[o] += red[0];
        else dA_log[h] += red[0];
    }
}

void cu_kda_bwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                const void *A_log, const void *dt_bias, const void *saved, const void *d_o, void *dq, void *dk,
                void *dv, void *df, void *db, float *dA_log, float *ddt_bias) {
    (void)q, (void)k, (void)b; // everything needed was saved by the forward
    kda_shape s = kda_shape_of(d);
    if (s.R == 0) return;
    kda_saved sv;
    kda_saved_layout(s, (void *)saved, &sv);
    kda_bwd_scratch w;
    size_t bytes = bwd_layout(s, NULL, &w);
    bwd_layout(s, cu_scratch(bytes), &w);
    int C = s.C, K = s.K, V = s.V;
    const bf16 *dO = (const bf16 *)d_o;

    kgemm g = {};
    g.nterms = 1, g.M = C, g.out_f32 = 1, g.mask = KMASK_NONE;
    g.t[0].alpha = 1.0f;
    // D1: dVn = Aqkᵀ·dO
    g.t[0].A = kv_tok(sv.Aqk, 0, C, 1), g.t[0].B = kv_tok(dO, 0, V, 0), g.t[0].Kd = C;
    g.N = V, g.out = w.dVn, g.out_ld = V;
    kda_chunk_gemm(s, g);
    // D2
    size_t smem = scan_bwd_smem(K, C);
    int ku = (s.K + 15) / 16;
    if (ku <= 1) launch_scan<1>(kda_scan_bwd_kernel<1>, dim3((s.V + KDA_VT - 1) / KDA_VT, s.H, s.B), smem, s, sv, dO, w);
    else if (ku <= 2) launch_scan<2>(kda_scan_bwd_kernel<2>, dim3((s.V + KDA_VT - 1) / KDA_VT, s.H, s.B), smem, s, sv, dO, w);
    else if (ku <= 4) launch_scan<4>(kda_scan_bwd_kernel<4>, dim3((s.V + KDA_VT - 1) / KDA_VT, s.H, s.B), smem, s, sv, dO, w);
    else launch_scan<8>(kda_scan_bwd_kernel<8>, dim3((s.V + KDA_VT - 1) / KDA_VT, s.H, s.B), smem, s, sv, dO, w);
    CU_LAUNCHED();
    // D3
    g.N = K, g.out_ld = K, g.t[0].Kd = V;
    g.t[0].A = kv_tok(dO, 0, V, 0), g.t[0].B = kv_state(sv.h, K, V, 1), g.t[0].alpha = s.scale, g.out = w.dQ;
    kda_chunk_gemm(s, g); // dQg = s·dO·hᵀ
    g.t[0].A = kv_tok(sv.Vn, 0, V, 0), g.t[0].B = kv_state(w.dh, K, V, 1), g.t[0].alpha = 1.0f, g.out = w.dK;
    kda_chunk_gemm(s, g); // dKd = Vn·dhᵀ
    g.t[0].A = kv_tok(w.dVn, 1, V, 0), g.t[0].B = kv_state(sv.h, K, V, 1), g.t[0].alpha = -1.0f, g.out = w.dWm;
    kda_chunk_gemm(s, g); // dWm = −dVn·hᵀ
    kgemm g2 = {};
    g2.nterms = 2, g2.M = C, g2.N = C, g2.out = w.dT, g2.out_f32 = 1, g2.out_ld = C, g2.mask = KMASK_NONE;
    g2.t[0].A = kv_tok(w.dVn, 1, V, 0), g2.t[0].B = kv_tok(sv.vb, 0, V, 1), g2.t[0].Kd = V, g2.t[0].alpha = 1.0f;
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
    // D4
    smem = finish_smem();
    CU_CHECK(cudaFuncSetAttribute(kda_finish_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kda_finish_kernel<<<dim3(s.NT, s.H, s.B), 256, smem, cu_stream>>>(
        s, sv, (const bf16 *)v, (const bf16 *)f, (const bf16 *)A_log, (const bf16 *)dt_bias, w, (bf16 *)dq,
        (bf16 *)dk, (bf16 *)dv, (bf16 *)df, (bf16 *)db);
    CU_LAUNCHED();
    // D5
    kda_param_grad_kernel<<<s.H * K + s.H, 256, 0, cu_stream>>>(s, w.pA, w.pdt, dA_log, ddt_bias);
    CU_LAUNCHED();
}
