// conv.cu — causal depthwise short convolution + SiLU (kda-model.md §2.3 step 2).
// y[b,t,c] = silu(z), z = Σ_j w[c,j]·x[b,t−W+1+j,c] (zero history). fp32 math, bf16 out.
// Backward: a thread takes a few channels over a block of time steps with sliding windows of x
// and dz (registers), writing dx (no atomics) and a dw partial per R time steps; the partials are
// summed in a fixed order, so results are deterministic. Written here, not taken from a library:
// cuDNN has no causal depthwise conv fused with SiLU, and the q, k, v columns of the projection
// buffer are read in place.
#include "backend/cuda/cuda_common.cuh"

enum { MAXW = CU_CONV_MAXW, R = 64, CT = 128 };

__global__ void conv_silu_fwd_kernel(const bf16 *__restrict__ x, int ldx, const float *__restrict__ w,
                                     bf16 *__restrict__ y, int B, int T, int C, int W) {
    size_t n = (size_t)B * T * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % C);
        size_t bt = i / C;
        int t = (int)(bt % T);
        float z = 0.0f;
        for (int j = 0; j < W; j++) {
            int tt = t - W + 1 + j;
            if (tt >= 0) z += w[c * W + j] * bf2f(x[(bt - (size_t)(W - 1 - j)) * ldx + c]);
        }
        y[i] = f2bf(z * sigmoidf_(z));
    }
}

// The call's channel groups (kda_conv_group) for the kernels: group i covers the kernel's channel
// units [end[i−1], end[i]) (units of 8 channels in the forward, of 2 in the backward), input
// columns from col[i], output rows of C[i]; its dw partials start at part_off[i] floats.
struct conv_groups {
    int n, end[KDA_CONV_MAX_GROUPS], col[KDA_CONV_MAX_GROUPS], C[KDA_CONV_MAX_GROUPS];
    const float *w[KDA_CONV_MAX_GROUPS];
    bf16 *y[KDA_CONV_MAX_GROUPS];
    const bf16 *dy[KDA_CONV_MAX_GROUPS];
    size_t part_off[KDA_CONV_MAX_GROUPS];
};

static conv_groups conv_groups_of(const kda_conv_group *g, int ng, int unit) {
    KDA_CHECK(ng >= 1 && ng <= KDA_CONV_MAX_GROUPS, "short conv: %d channel groups (1..%d)", ng, KDA_CONV_MAX_GROUPS);
    conv_groups G = {};
    G.n = ng;
    for (int i = 0, e = 0; i < ng; i++) {
        e += g[i].C / unit;
        G.end[i] = e, G.col[i] = g[i].col, G.C[i] = g[i].C, G.w[i] = g[i].w;
        G.y[i] = (bf16 *)g[i].y, G.dy[i] = (const bf16 *)g[i].dy;
    }
    return G;
}

// The group of channel unit u, and u's first channel inside it.
__device__ __forceinline__ int conv_group_at(const conv_groups &G, int u, int unit, int *c0) {
    int i = 0;
    while (i < G.n - 1 && u >= G.end[i]) i++;
    *c0 = unit * (u - (i ? G.end[i - 1] : 0));
    return i;
}

// The per-step arithmetic, one definition for every kernel (the stream forward below gives the
// same bits as the others because it runs these same expressions in the same order).
// Forward: z = Σ_i w·x oldest first (wr[i] multiplies x[t−i]), y = silu(z).
template <int WT, int NCH>
__device__ __forceinline__ void conv_fwd_step(const float (&wr)[WT][NCH], const float (&xw)[WT][NCH], float (&o)[NCH]) {
#pragma unroll
    for (int k = 0; k < NCH; k++) {
        float z = 0.0f;
#pragma unroll
        for (int i = WT - 1; i >= 0; i--) z += wr[i][k] * xw[i][k]; // oldest first, as the scalar kernel
        o[k] = z * sigmoidf_(z);
    }
}
// Backward: z recomputed newest first (wf[i] multiplies x[t−W+1+i], xw[i] = x[t−i]) and
// dz = dy·σ(z)·(1 + z·(1 − σ(z))).
template <int WT, int NCH>
__device__ __forceinline__ void conv_dz_step(const float (&wf)[WT][NCH], const float (&xw)[WT][NCH],
                                             const float (&dv)[NCH], float (&dz)[NCH]) {
#pragma unroll
    for (int k = 0; k < NCH; k++) {
        float z = 0.0f;
#pragma unroll
        for (int i = 0; i < WT; i++) z += wf[WT - 1 - i][k] * xw[i][k];
        float sg = sigmoidf_(z);
        dz[k] = dv[k] * sg * (1.0f + z * (1.0f - sg));
    }
}
// dx[τ] = Σ_j wf[j]·dz[τ+W−1−j] = Σ_j wf[j]·dzb[j] (dzb[j] = dz[t−j], t = τ + W − 1)
template <int WT, int NCH>
__device__ __forceinline__ void conv_dx_step(const float (&wf)[WT][NCH], const float (&dzb)[WT][NCH],
                                             float (&acc)[NCH]) {
#pragma unroll
    for (int k = 0; k < NCH; k++) {
        acc[k] = 0.0f;
#pragma unroll
        for (int j = 0; j < WT; j++) acc[k] += wf[j][k] * dzb[j][k];
    }
}
// The window one step on: w[i] ← w[i − 1] (w[0] is then overwritten by the caller)
template <int WT, int NCH> __device__ __forceinline__ void conv_shift(float (&w)[WT][NCH]) {
#pragma unroll
    for (int i = WT - 1; i > 0; i--)
#pragma unroll
        for (int k = 0; k < NCH; k++) w[i][k] = w[i - 1][k];
}

// The forward with 8 channels per thread for W other than 4 (16-byte loads and stores; every
// group's C and column a multiple of 8, aligned pointers; W = 4 takes the stream kernel below),
// walking RF time steps with the last W inputs kept in registers: x is read once. Every row the
// thread needs (its RF steps and the W − 1 before) is loaded up front, so that RF + W − 1 loads
// are in flight at once; a block is up to 128 channel groups of 8 (of any of the call's groups) x
// the time blocks (128 threads). WT: the registers' window (MAXW).
enum { RF = 16 };
template <int WT>
__global__ void __launch_bounds__(128)
    conv_silu_fwd_vec(const bf16 *__restrict__ x, int ldx, conv_groups G, int T, int W) {
    int u = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.z, t0 = (blockIdx.y * blockDim.y + threadIdx.y) * RF;
    if (u >= G.end[G.n - 1] || t0 >= T) return;
    int c0, gi = conv_group_at(G, u, 8, &c0), C = G.C[gi];
    const float *__restrict__ w = G.w[gi];
    int t1 = min(T, t0 + RF);
    const bf16 *xb = x + (size_t)b * T * ldx + G.col[gi] + c0;
    bf16 *yb = G.y[gi] + (size_t)b * T * C + c0;
    uint4 raw[RF + WT - 1]; // raw[WT − 1 + s] = x[t0 + s]; raw[WT − 1 − i] = x[t0 − i] (history)
#pragma unroll
    for (int s = 0; s < RF + WT - 1; s++) {
        int t = t0 - (WT - 1) + s, back = WT - 1 - s; // back: how far before t0 (history rows)
        bool ok = t < t1 && t >= 0 && (back <= 0 || back < W);
        raw[s] = ok ? *(const uint4 *)(xb + (size_t)t * ldx) : make_uint4(0, 0, 0, 0);
    }
    float wr[WT][8], xw[WT][8]; // wr[i]: the weight of x[t−i]; xw[i] = x[t−i]
#pragma unroll
    for (int i = 0; i < WT; i++)
#pragma unroll
        for (int k = 0; k < 8; k++) wr[i][k] = i < W ? w[(c0 + k) * W + W - 1 - i] : 0.0f;
#pragma unroll
    for (int i = 1; i < WT; i++) unpack16(raw[WT - 1 - i], xw[i - 1]); // shifted into place below
#pragma unroll
    for (int s = 0; s < RF; s++) {
        if (t0 + s >= t1) break;
        conv_shift(xw);
        unpack16(raw[WT - 1 + s], xw[0]);
        float o[8];
        conv_fwd_step(wr, xw, o);
        store16(yb + (size_t)(t0 + s) * C, o);
    }
}

// ---- The stream forward (W = 4, 16-byte rows): a thread walks a block of S = 64 time steps of
// its 8 channels, its rows coming through a ring in shared memory by cp.async, D rows ahead of
// the one it computes, so that loads stay in flight while it computes without holding registers
// (96 registers, 10 blocks of 2 warps an SM; conv_silu_fwd_vec at W = 4 took 162 and 3 blocks of
// 4 warps, the SM alternating between waiting and computing: q, k, v at 32 x 2048 in 0.115 ms,
// 77% of a copy, against 0.110 ms, 80%, on an H100, session 24; a stream backward on the same
// plan was slower than the pair kernel, 0.183 vs 0.178 ms, and was dropped). A thread reads back
// only what its own copies wrote, so there is no barrier: cp.async.wait_group alone orders it.
// Same bits as the other forward kernels (conv_fwd_step, oldest input first). ----
enum { ST_S = 64, ST_D = 8, ST_RING = 16, STF_X = 64 };
static_assert((int)ST_D < (int)ST_RING, "the ring holds the row being read and the D rows in flight");

// A thread's stream of rows r = 0 .. end − 1: row r at byte address a0 + r·step, loaded for
// low <= r < lim (zeros otherwise; then base is passed, not read); copy() asks for the next row
// into ring slot `slot` (the caller's compile-time r % ST_RING) and past the end asks for nothing,
// so that no copy is left in flight when the thread ends; the caller commits the group (one a
// step, empty past the end). Addresses as integers: a0 may lie before the tensor (rows before
// t = 0, never read).
struct row_stream {
    unsigned long long a, step, base;
    int next, low, span, end; // span = lim − low
    __device__ __forceinline__ row_stream(const bf16 *p, long long row0, long long ld, int low_, int lim, int end_)
        : a((unsigned long long)p + (unsigned long long)(row0 * ld) * sizeof(bf16)), step(ld * sizeof(bf16)),
          base((unsigned long long)p), next(0), low(low_), span(lim - low_), end(end_) {}
    __device__ __forceinline__ void copy(void *slot) {
        bool ok = (unsigned)(next - low) < (unsigned)span;
        if (next < end) cp_async16_or_zero(slot, (const void *)(ok ? a : base), ok);
        next++, a += step;
    }
};

// Forward: a thread = 8 channels (16-byte rows) x the S steps [ts, ts + S) of blockIdx.y; its
// stream is rows r = 0 .. S + WT − 2 at t = ts − (WT − 1) + r (the WT − 1 history rows first),
// zeros outside [0, T). Row r + D is requested (one cp.async group a row, empty past the stream)
// before row r is read, after which every group up to row r is complete. Steps by ST_RING at a time, so that every ring slot is a constant. W = WT only.
template <int WT>
__global__ void __launch_bounds__(STF_X, 10)
    conv_silu_fwd_stream(const bf16 *__restrict__ x, int ldx, conv_groups G, int T) {
    static_assert(ST_S % ST_RING == 0, "whole ring turns");
    __shared__ uint4 ring[ST_RING][STF_X];
    enum { H = WT - 1, NR = ST_S + H };
    int u = blockIdx.x * STF_X + threadIdx.x, b = blockIdx.z, ts = blockIdx.y * ST_S, tid = threadIdx.x;
    if (u >= G.end[G.n - 1]) return; // no barrier in this kernel
    int c0, gi = conv_group_at(G, u, 8, &c0), C = G.C[gi];
    const float *__restrict__ w = G.w[gi];
    const bf16 *xb = x + (size_t)b * T * ldx + G.col[gi] + c0;
    bf16 *yb = G.y[gi] + (size_t)b * T * C + c0 + (size_t)ts * C;
    row_stream in(xb, (long long)ts - H, ldx, max(0, H - ts), min((int)NR, T - ts + H), NR);
#pragma unroll
    for (int r = 0; r < ST_D; r++) in.copy(&ring[r][tid]), cp_async_commit();
    float wr[WT][8], xw[WT][8]; // wr[i]: the weight of x[t−i]; xw[i] = x[t−i]
#pragma unroll
    for (int i = 0; i < WT; i++)
#pragma unroll
        for (int k = 0; k < 8; k++) wr[i][k] = w[(c0 + k) * WT + WT - 1 - i], xw[i][k] = 0.0f;
#pragma unroll
    for (int r = 0; r < H; r++) { // history
        in.copy(&ring[(r + ST_D) % ST_RING][tid]), cp_async_commit();
        cp_async_wait_group<ST_D>();
        conv_shift(xw);
        unpack16(ring[r][tid], xw[0]);
    }
#pragma unroll 1
    for (int s0 = 0; s0 < ST_S; s0 += ST_RING) {
#pragma unroll
        for (int j = 0; j < ST_RING; j++) { // step t = ts + s0 + j, stream row s0 + j + H
            in.copy(&ring[(j + H + ST_D) % ST_RING][tid]), cp_async_commit();
            cp_async_wait_group<ST_D>();
            conv_shift(xw);
            unpack16(ring[(j + H) % ST_RING][tid], xw[0]);
            float o[8];
            conv_fwd_step(wr, xw, o);
            if (ts + s0 + j < T) store16(yb + (size_t)(s0 + j) * C, o);
        }
    }
}

// Whether every group takes the 16-byte path (its channels and column multiples of 8, aligned).
static bool conv_fwd_vec_ok(const void *x, int ldx, const kda_conv_group *g, int ng) {
    bool ok = ldx % 8 == 0 && cu_aligned16(x);
    for (int i = 0; i < ng; i++) ok = ok && g[i].C % 8 == 0 && g[i].col % 8 == 0 && cu_aligned16(g[i].y);
    return ok;
}

void cu_conv_silu_fwd(const void *x, int ldx, const kda_conv_group *g, int ng, int B, int T, int W) {
    KDA_CHECK(W >= 1 && W <= MAXW, "conv_size %d not supported by the CUDA backend (1..%d)", W, MAXW);
    if (B <= 0 || T <= 0) return;
    if (conv_fwd_vec_ok(x, ldx, g, ng)) { // all groups in one launch
        conv_groups G = conv_groups_of(g, ng, 8);
        int units = G.end[ng - 1];
        if (!units) return;
        if (W == 4) {
            dim3 grid((units + STF_X - 1) / STF_X, (T + ST_S - 1) / ST_S, B);
            conv_silu_fwd_stream<4><<<grid, STF_X, 0, cu_stream>>>((const bf16 *)x, ldx, G, T);
        } else {
            int gx = units < 128 ? units : 128, gy = 128 / gx, tblocks = (T + RF - 1) / RF;
            if (gy > tblocks) gy = tblocks;
            dim3 block(gx, gy), grid((units + gx - 1) / gx, (tblocks + gy - 1) / gy, B);
            conv_silu_fwd_vec<MAXW><<<grid, block, 0, cu_stream>>>((const bf16 *)x, ldx, G, T, W);
        }
        CU_LAUNCHED();
        return;
    }
    for (int i = 0; i < ng; i++) { // element by element, a launch a group
        size_t n = (size_t)B * T * g[i].C;
        if (!n) continue;
        conv_silu_fwd_kernel<<<cu_blocks(n, 256), 256, 0, cu_stream>>>((const bf16 *)x + g[i].col, ldx, g[i].w,
                                                                       (bf16 *)g[i].y, B, T, g[i].C, W);
        CU_LAUNCHED();
    }
}

// grid (ceil(C/CT), ceil(T/R), B); thread = channel. part[(b*nblk + blk)][c*W + j].
__global__ void conv_silu_bwd_kernel(const bf16 *__restrict__ x, int ldx, const float *__restrict__ w,
                                     const bf16 *__restrict__ dy, bf16 *__restrict__ dx, float *__restrict__ part,
                                     int T, int C, int W) {
    int c = blockIdx.x * CT + threadIdx.x;
    if (c >= C) return;
    int b = blockIdx.z, t0 = blockIdx.y * R, t1 = min(T, t0 + R);
    const bf16 *xb = x + (size_t)b * T * ldx + c, *dyb = dy + (size_t)b * T * C + c;
    bf16 *dxb = dx + (size_t)b * T * ldx + c;
    float wf[MAXW], wr[MAXW], xw[MAXW], dzb[MAXW], dwr[MAXW];
#pragma unroll
    for (int i = 0; i < MAXW; i++) {
        wf[i] = i < W ? w[c * W + i] : 0.0f;         // multiplies x[t−W+1+i]
        wr[i] = i < W ? w[c * W + W - 1 - i] : 0.0f; // multiplies x[t−i]
        xw[i] = 0.0f;                                // x[t−i]
        dzb[i] = 0.0f;                               // dz[t−i]
        dwr[i] = 0.0f;                               // dw[c, W−1−i]
    }
#pragma unroll
    for (int i = 1; i < MAXW; i++) // history before t0 (shifted into place by the first step)
        if (i < W && t0 - i >= 0) xw[i - 1] = bf2f(xb[(size_t)(t0 - i) * ldx]);
    for (int t = t0; t < t1 + W - 1; t++) {
#pragma unroll
        for (int i = MAXW - 1; i > 0; i--) xw[i] = xw[i - 1], dzb[i] = dzb[i - 1];
        float dz = 0.0f;
        if (t < T) {
            xw[0] = bf2f(xb[(size_t)t * ldx]);
            float z = 0.0f;
#pragma unroll
            for (int i = 0; i < MAXW; i++) z += wr[i] * xw[i];
            float s = sigmoidf_(z);
            dz = bf2f(dyb[(size_t)t * C]) * s * (1.0f + z * (1.0f - s));
            if (t < t1) {
#pragma unroll
                for (int i = 0; i < MAXW; i++) dwr[i] += dz * xw[i];
            }
        } else {
            xw[0] = 0.0f;
        }
        dzb[0] = dz;
        int tau = t - (W - 1); // dx[τ] = Σ_j w[j]·dz[τ+W−1−j] = Σ_j wf[j]·dzb[j]
        if (tau >= t0) {
            float acc = 0.0f;
#pragma unroll
            for (int j = 0; j < MAXW; j++) acc += wf[j] * dzb[j];
            dxb[(size_t)tau * ldx] = f2bf(acc);
        }
    }
    float *p = part + ((size_t)b * gridDim.y + blockIdx.y) * C * W + (size_t)c * W;
#pragma unroll
    for (int i = 0; i < MAXW; i++)
        if (i < W) p[W - 1 - i] = dwr[i];
}

// The backward with 2 channels a thread (4-byte bf16 pairs: a warp reads 128 contiguous bytes of a
// row), each thread RB = 16 time steps with every row of x and dy it needs loaded up front
// (RB + 2(W − 1) and RB + W − 1 loads in flight); a block is UX = 32 channel pairs x GY = 4 threads
// of consecutive time blocks, R = RB·GY = 64 steps. Per channel the same operations in the same
// order as conv_silu_bwd_kernel, so the same dx; dw: each thread's RB steps in order, then the GY
// threads of a block column in order (shared memory), one partial row per block of R steps as
// conv_silu_bwd_kernel's. All of a call's groups in one launch: grid (ceil(pairs/UX), ceil(T/R),
// B), pairs of all groups; group i's partials at part + part_off[i], [(b*nblk + blk)][c*W + j].
// (Session 21, H100: 4 channels a thread, 8-byte loads, took 251 registers and was slower, 0.237
// against 0.195 ms for q, k, v at 32 x 2048.)
enum { RB = 16, GY = 4, UX = 32 };
static_assert(RB * GY == R, "the backward kernels' partial rows cover the same time steps");

// a bf16 pair by one 4-byte load (zeros where !ok), unpacked to fp32
__device__ __forceinline__ unsigned ld_pair(const bf16 *p, bool ok) { return ok ? *(const unsigned *)p : 0u; }
__device__ __forceinline__ void unpack_pair(unsigned w, float *x) {
    x[0] = __uint_as_float(w << 16), x[1] = __uint_as_float(w & 0xffff0000u);
}

// Branch-free in time: rows outside [0, T) load as zeros, so past T dy = 0 gives dz = 0 (no dw or
// dx term); dw takes the thread's first RB steps (a compile-time bound) and dx rows τ < t1 only.
template <int WT>
__global__ void __launch_bounds__(UX *GY) conv_silu_bwd_pair(const bf16 *__restrict__ x, int ldx, conv_groups G,
                                                             bf16 *__restrict__ dx, float *__restrict__ part, int T) {
    __shared__ float red[GY][UX][2 * WT];
    int u = blockIdx.x * UX + threadIdx.x, b = blockIdx.z;
    int t0 = (blockIdx.y * GY + threadIdx.y) * RB, t1 = min(T, t0 + RB);
    bool have = u < G.end[G.n - 1], live = have && t0 < T; // have: a pair; live: and time steps
    int c0 = 0, gi = have ? conv_group_at(G, u, 2, &c0) : 0, C = G.C[gi];
    float dwr[WT][2]; // dw[c0 + k, W − 1 − i]
#pragma unroll
    for (int i = 0; i < WT; i++) dwr[i][0] = dwr[i][1] = 0.0f;
    if (live) {
        const float *__restrict__ w = G.w[gi];
        const bf16 *xb = x + (size_t)b * T * ldx + G.col[gi] + c0, *dyb = G.dy[gi] + (size_t)b * T * C + c0;
        bf16 *dxb = dx + (size_t)b * T * ldx + G.col[gi] + c0;
        // xr[WT − 1 + s] = x[t0 + s] for s in [−(WT − 1), NS); dr[s] = dy[t0 + s], s < NS (bf16 pairs)
        enum { NS = RB + WT - 1 };
        unsigned xr[NS + WT - 1], dr[NS];
#pragma unroll
        for (int i = 0; i < NS + WT - 1; i++) {
            int t = t0 - (WT - 1) + i;
            xr[i] = ld_pair(xb + (ptrdiff_t)t * ldx, t >= 0 && t < T);
        }
#pragma unroll
        for (int s = 0; s < NS; s++) dr[s] = ld_pair(dyb + (size_t)(t0 + s) * C, t0 + s < T);
        float wf[WT][2], xw[WT][2], dzb[WT][2]; // wf[i]: multiplies x[t−W+1+i]; xw[i] = x[t−i]; dzb[i] = dz[t−i]
#pragma unroll
        for (int i = 0; i < WT; i++)
#pragma unroll
            for (int k = 0; k < 2; k++) wf[i][k] = w[(c0 + k) * WT + i], xw[i][k] = dzb[i][k] = 0.0f;
#pragma unroll
        for (int i = 1; i < WT; i++) unpack_pair(xr[WT - 1 - i], xw[i - 1]);
#pragma unroll
        for (int s = 0; s < NS; s++) {
            conv_shift(xw), conv_shift(dzb);
            float dv[2], dz[2];
            unpack_pair(xr[WT - 1 + s], xw[0]);
            unpack_pair(dr[s], dv);
            conv_dz_step(wf, xw, dv, dz);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                if (s < RB) {
#pragma unroll
                    for (int i = 0; i < WT; i++) dwr[i][k] += dz[k] * xw[i][k];
                }
                dzb[0][k] = dz[k];
            }
            int tau = t0 + s - (WT - 1);
            if (s >= WT - 1 && tau < t1) {
                float acc[2];
                conv_dx_step(wf, dzb, acc);
                *(__nv_bfloat162 *)(dxb + (size_t)tau * ldx) = __floats2bfloat162_rn(acc[0], acc[1]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < 2; k++)
#pragma unroll
        for (int i = 0; i < WT; i++) red[threadIdx.y][threadIdx.x][k * WT + WT - 1 - i] = dwr[i][k];
    __syncthreads();
    // the block column's GY sums in order; thread y takes entries y, y + GY, ... of its pair
    if (!have) return;
    float *p = part + G.part_off[gi] + ((size_t)b * gridDim.y + blockIdx.y) * C * WT + (size_t)c0 * WT;
#pragma unroll
    for (int e = threadIdx.y; e < 2 * WT; e += GY) {
        float acc = red[0][threadIdx.x][e];
#pragma unroll
        for (int g = 1; g < GY; g++) acc += red[g][threadIdx.x][e];
        p[e] = acc;
    }
}

// The backward's kernels: channel pairs (W = 4, even C and columns, 4-byte aligned pointers), all
// groups in one launch; else single channels, a launch a group. Each block writes a partial dw
// [C, W] of its group per R time steps; the partials of a group are summed in a fixed order
// (cu_colreduce_add): deterministic, and the same bits either way the groups are launched.
static int conv_bwd_time_blocks(int T) { return (T + R - 1) / R; }
static size_t conv_bwd_part_floats(int B, int nblk, int C, int W) { return (size_t)B * nblk * C * W; }

// the partials of a call of C channels in all (either kernel)
size_t cu_conv_silu_bwd_scratch_bytes(int B, int T, int C, int W) {
    if ((size_t)B * T * C == 0) return 0;
    return conv_bwd_part_floats(B, conv_bwd_time_blocks(T), C, W) * sizeof(float);
}

static bool conv_bwd_paired(const void *x, int ldx, const void *dx, const kda_conv_group *g, int ng, int W) {
    bool ok = W == 4 && ldx % 2 == 0 && !((uintptr_t)x & 3) && !((uintptr_t)dx & 3);
    for (int i = 0; i < ng; i++) ok = ok && g[i].C % 2 == 0 && g[i].col % 2 == 0 && !((uintptr_t)g[i].dy & 3);
    return ok;
}

void cu_conv_silu_bwd(const void *x, int ldx, void *dx, const kda_conv_group *g, int ng, int B, int T, int W) {
    KDA_CHECK(W >= 1 && W <= MAXW, "conv_size %d not supported by the CUDA backend (1..%d)", W, MAXW);
    if (B <= 0 || T <= 0) return;
    int nblk = conv_bwd_time_blocks(T);
    if (conv_bwd_paired(x, ldx, dx, g, ng, W)) {
        conv_groups G = conv_groups_of(g, ng, 2);
        int pairs = G.end[ng - 1], Ctot = 0;
        if (!pairs) return;
        for (int i = 0; i < ng; i++) G.part_off[i] = conv_bwd_part_floats(B, nblk, Ctot, W), Ctot += g[i].C;
        float *part = (float *)cu_scratch(conv_bwd_part_floats(B, nblk, Ctot, W) * sizeof(float));
        conv_silu_bwd_pair<4><<<dim3((pairs + UX - 1) / UX, nblk, B), dim3(UX, GY), 0, cu_stream>>>(
            (const bf16 *)x, ldx, G, (bf16 *)dx, part, T);
        CU_LAUNCHED();
        for (int i = 0; i < ng; i++)
            if (g[i].C) cu_colreduce_add(part + G.part_off[i], B * nblk, (size_t)g[i].C * W, g[i].dw);
        return;
    }
    for (int i = 0; i < ng; i++) {
        int C = g[i].C;
        if (!C) continue;
        float *part = (float *)cu_scratch(conv_bwd_part_floats(B, nblk, C, W) * sizeof(float));
        conv_silu_bwd_kernel<<<dim3((C + CT - 1) / CT, nblk, B), CT, 0, cu_stream>>>(
            (const bf16 *)x + g[i].col, ldx, g[i].w, (const bf16 *)g[i].dy, (bf16 *)dx + g[i].col, part, T, C, W);
        CU_LAUNCHED();
        cu_colreduce_add(part, B * nblk, (size_t)C * W, g[i].dw);
    }
}
