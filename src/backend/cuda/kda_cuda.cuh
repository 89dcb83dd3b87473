// kda_cuda.cuh — the KDA core on the GPU (kda-model.md §3): shapes, the layout of the saved
// buffer, and the chunk-batched small GEMM that the forward and backward are built from.
//
// Tensors are token-major as in ops.h: a per-token tensor of width X is [B,T,H,X], so chunk c
// of (b,h) is the C×X matrix of rows t = c·C .. c·C+n−1 (n = min(C, T−c·C); rows past n belong
// to the next sequence and are never read or written). Per-chunk C×C matrices (Aqk, Tinv,
// their gradients) use the same layout with X = C ("row t holds its chunk row"); per-chunk
// state snapshots are [B, NT, H, K, V].
#ifndef KDA_CUDA_CUH
#define KDA_CUDA_CUH

#include "backend/cuda/cuda_common.cuh"

enum { KDA_MAX_C = 64, KDA_MAX_KV = 128 };

struct kda_shape {
    int B, T, H, K, V, C, NT;
    float scale;
    size_t R;  // B·T·H token rows
    int ldb;   // b and db: token rows ldb elements apart (kda_core.h)
    size_t NC; // B·NT·H chunks
};

// The recipe's sizes (chunk 64, key 32, value 64): the per-chunk kernels (prep, intra, D3, finish) are also
// compiled for them alone, a shape whose C, K and V are compile-time constants (kda_fixed) so that
// their layouts, pitches, loop bounds and fragment strides fold into immediates (fewer
// registers, a third fewer instructions). The same arithmetic in the same order: the same bits.
// KDA_CORE_GENERIC=1 takes the generic kernels at the recipe's sizes too (tests/cuda/test_cuda_kda.c
// checks that both give the same bits).
static inline bool kda_is_recipe(const kda_shape &s) {
    return s.C == 64 && s.K == 32 && s.V == 64 && !cu_env_on("KDA_CORE_GENERIC");
}
template <int C0, int K0, int V0> __device__ __forceinline__ kda_shape kda_fixed(const kda_shape &s) {
    kda_shape f = s;
    if (C0 > 0) f.C = C0, f.K = K0, f.V = V0;
    return f;
}

static inline kda_shape kda_shape_of(const kda_core_dims *d) {
    KDA_CHECK(d->chunk >= 1 && d->chunk <= KDA_MAX_C, "KDA chunk size %d: the CUDA core supports 1..%d", d->chunk,
              KDA_MAX_C);
    KDA_CHECK(d->K >= 1 && d->K <= KDA_MAX_KV && d->V >= 1 && d->V <= KDA_MAX_KV,
              "KDA head sizes K=%d V=%d: the CUDA core supports 1..%d", d->K, d->V, KDA_MAX_KV);
    kda_shape s;
    s.B = d->B, s.T = d->T, s.H = d->H, s.K = d->K, s.V = d->V, s.C = d->chunk;
    s.NT = (d->T + d->chunk - 1) / d->chunk;
    s.scale = d->scale;
    s.R = (size_t)d->B * d->T * d->H;
    s.NC = (size_t)d->B * s.NT * d->H;
    s.ldb = kda_core_ldb(d);
    KDA_CHECK(s.ldb >= s.H, "KDA core: b's rows %d elements apart, fewer than its %d heads", s.ldb, s.H);
    return s;
}

// Forward results kept for the backward (all inside the caller's 'saved' buffer, except Um: the
// forward's own, in the backend's scratch, since only its state scan reads it).
struct kda_saved {
    bf16 *qn, *kn;      // l2-normalised q, k                      [R,K]
    float *rq, *rk;     // their 1/norm                             [R]
    float *G;           // Γ: chunk-local cumulative log-decay      [R,K]
    float *beta;        // sigmoid(b)                               [R]
    bf16 *qg, *kg, *kb; // q⊙e^Γ, k⊙e^{Γ_last−Γ}, β·k⊙e^Γ            [R,K]
                        // (β·v is not kept: its readers scale v's rows by β as they load them)
    bf16 *Aqk, *Tinv;   // intra-chunk attention, (I+L)^-1          [R,C]
    bf16 *Wm, *Um, *Vn; // WY factors and the new values δ          [R,K], [R,V], [R,V]  (Um: scratch)
    bf16 *h;            // state at the start of each chunk         [NC,K,V]
};

// The saved buffer: the prep outputs (qn .. kb, elementwise in the inputs: 460 bytes a token and
// head at K=32, V=64), then the chunk products (Aqk .. h: 512 bytes). With lean (kda_core_dims.lean)
// the prep outputs are not kept: the forward writes them into its scratch, the backward reruns
// the prep kernel into its own (the same kernel on the same inputs: the same bits).
static inline void kda_carve_prep(const kda_shape &s, cu_carve &c, kda_saved *o) {
    o->qn = c.take<bf16>(s.R * s.K), o->kn = c.take<bf16>(s.R * s.K);
    o->rq = c.take<float>(s.R), o->rk = c.take<float>(s.R);
    o->G = c.take<float>(s.R * s.K), o->beta = c.take<float>(s.R);
    o->qg = c.take<bf16>(s.R * s.K), o->kg = c.take<bf16>(s.R * s.K), o->kb = c.take<bf16>(s.R * s.K);
}
static inline void kda_carve_chunk(const kda_shape &s, cu_carve &c, kda_saved *o) {
    o->Aqk = c.take<bf16>(s.R * s.C), o->Tinv = c.take<bf16>(s.R * s.C);
    o->Wm = c.take<bf16>(s.R * s.K), o->Vn = c.take<bf16>(s.R * s.V);
    o->h = c.take<bf16>(s.NC * s.K * s.V);
}
static inline size_t kda_saved_layout(const kda_shape &s, int lean, void *base, kda_saved *o) {
    kda_saved none = {};
    *o = none;
    cu_carve c(base);
    if (!lean) kda_carve_prep(s, c, o);
    kda_carve_chunk(s, c, o);
    return c.off;
}

__device__ __forceinline__ size_t kda_row(const kda_shape &s, int b, int c, int h, int r) {
    return ((size_t)b * s.T + (size_t)c * s.C + r) * s.H + h;
}
// b's element of token row 'row' (kda_row's numbering: token·H + head) with b's rows ldb apart
__device__ __forceinline__ size_t kda_b_at(const kda_shape &s, size_t row) {
    return s.ldb == s.H ? row : row / s.H * s.ldb + row % s.H;
}
__device__ __forceinline__ size_t kda_chunk(const kda_shape &s, int b, int c, int h) {
    return ((size_t)b * s.NT + c) * s.H + h;
}

__device__ __forceinline__ float tof(bf16 x) { return bf2f(x); }
__device__ __forceinline__ float tof(float x) { return x; }

// Copies columns [q0, q0+QL) of the chunk's token rows (a token-major tensor of row length ld)
// into dst[r·pitch + q−q0] as fp32 for r < rows: rows r ≥ n and columns ≥ qmax become 0. Reads 16
// bytes at a time where the row length, q0 and the pointer allow. All threads of the block call it.
template <typename T>
__device__ __forceinline__ void load_chunk_rows(const kda_shape &s, const T *p, int ld, int b, int c, int h, int n,
                                                int rows, int q0, int QL, int qmax, float *dst, int pitch) {
    constexpr int W = 16 / sizeof(T);
    size_t base = kda_row(s, b, c, h, 0) * ld, rs = (size_t)s.H * ld;
    bool vec = ld % W == 0 && q0 % W == 0 && ((uintptr_t)p & 15) == 0;
    int nv = (QL + W - 1) / W;
    for (int e = threadIdx.x; e < rows * nv; e += blockDim.x) {
        int r = e / nv, qq = (e - r * nv) * W, q = q0 + qq;
        const T *src = p + base + (size_t)r * rs + q;
        float x[W];
        if (vec && r < n && q + W <= qmax && qq + W <= QL) {
            load16(src, x);
        } else {
#pragma unroll
            for (int t = 0; t < W; t++) x[t] = (r < n && q + t < qmax && qq + t < QL) ? tof(src[t]) : 0.0f;
        }
#pragma unroll
        for (int t = 0; t < W; t++)
            if (qq + t < QL) dst[r * pitch + qq + t] = x[t];
    }
}

// e^x for the decays of the fused kernels (x <= 0, each factor meeting bf16 operands): the
// hardware exponential of x·log2 e (~2 + 1.2|x| ulp), in pair loops that are most of those
// kernels' instructions. __expf (session 19: the finish kernel 1.52 -> 1.48 ms on an H100 against
// expf's 9 instructions; parity against FLA 1.6e-3) compiles to 5: its ex2 keeps subnormal results
// by a compare and two predicated multiplies. Here ex2.approx.ftz: 2 instructions, the same bits
// as __expf wherever e^x >= 2^-126 (the subnormal decays, e^x < 1.2e-38 from Γ differences below
// -87.3, become 0). 98 such exponentials in the intra kernel's SASS, 60 in the finish kernel's.
__device__ __forceinline__ float decay_exp(float x) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * 1.4426950408889634f));
    return e;
}

// 1 / sqrt(Σx² + 1e-6), the l2norm of q and k (kda_core.h) in the prep kernel and the decoder:
// the hardware reciprocal square root (1 instruction plus a range fix; FLA's Triton l2norm uses
// an approximate sqrt and division too) instead of an IEEE sqrt and division, which the prep
// kernel computed twice a row in every lane (~60 instructions a row).
__device__ __forceinline__ float l2_rstd(float ss) { return rsqrtf(ss + 1e-6f); }

// ---- chunk-batched GEMM: for every chunk, out = Σ_terms alpha·op(A)·op(B) ----

enum { KV_TOK = 0, KV_STATE = 1 };
enum { KMASK_NONE = 0, KMASK_LOWER = 1, KMASK_STRICT = 2 };

struct kview {
    const void *p;
    int f32;   // element type: fp32 (1) or bf16 (0)
    int kind;  // KV_TOK: [B,T,H,ld] rows masked past n;  KV_STATE: [NC, srows, ld]
    int ld;    // row length of the stored matrix
    int srows; // rows per chunk for KV_STATE
    int trans; // use the stored matrix transposed
    const float *rscale; // KV_TOK only, or NULL: token row i scaled by rscale[i] before rounding ([R])
};

static inline kview kv_tok(const void *p, int f32, int ld, int trans) {
    kview v = {p, f32, KV_TOK, ld, 0, trans, NULL};
    return v;
}
// A bf16 token-row view whose rows are scaled by a per-row fp32 factor (β·v from v and β).
static inline kview kv_tok_scaled(const void *p, int ld, int trans, const float *rscale) {
    kview v = {p, 0, KV_TOK, ld, 0, trans, rscale};
    return v;
}
static inline kview kv_state(const void *p, int rows, int ld, int trans) {
    kview v = {p, 0, KV_STATE, ld, rows, trans, NULL};
    return v;
}

struct kgemm_term {
    kview A, B;
    int Kd; // inner size
    float alpha;
};

struct kgemm {
    int M, N, nterms;
    kgemm_term t[2];
    void *out; // token-major [B,T,H,out_ld]
    int out_f32, out_ld, mask;
};

// out (M×N per chunk, rows < n only) = Σ alpha·op(A)·op(B), masked entries written as 0.
void kda_chunk_gemm(const kda_shape &s, const kgemm &g);

// A fused KDA kernel's dynamic shared memory, with all of the SM's shared memory asked for (the
// default carveout may hold fewer blocks an SM than the kernels are written for).
template <typename Kern> static inline void kda_smem_attrs(Kern kern, size_t smem) {
    CU_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CU_CHECK(
        cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
}

// Stage 1 of the forward (kda_fwd.cu): the prep outputs of sv from the core's inputs.
void kda_prep(const kda_shape &s, const void *q, const void *k, const void *f, const void *b, const float *A_log,
              const float *dt_bias, const kda_saved &sv);
// The state scans (kda_scan.cu): forward, h, Vn and the output O (Sio as in
// cu_kda_fwd_chunked_state); backward, dVn = all of B1 (out) and dh the per-chunk snapshots of dS.
void kda_scan_fwd(const kda_shape &s, const kda_saved &sv, float *Sio, bf16 *O);
void kda_scan_bwd(const kda_shape &s, const kda_saved &sv, const bf16 *dO, float *dVn, bf16 *dh);

#endif
