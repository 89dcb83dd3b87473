// cuda_common.cuh — what every file of the CUDA backend shares: error checks that die with
// file:line, the one stream all work runs on, the grow-only scratch arena, bf16 helpers,
// and the internal entry points that ops_cuda.cu puts into the kda_ops table.
//
// Element types follow ops.h: activations (A) and working weights (W) are bf16; gradients,
// masters, optimizer state and statistics are fp32; token ids int32. All arithmetic is fp32
// with one bf16 rounding at each store (kda-model.md §0 "bf16 storage, fp32 math").
#ifndef KDA_CUDA_COMMON_CUH
#define KDA_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <type_traits>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "base/common.h"
#include "model/op_profile.h"
#include "model/ops.h"
}

typedef __nv_bfloat16 bf16;

// The short conv's widest window (conv.cu's and decode.cu's register windows): kda_ops.max_conv.
enum { CU_CONV_MAXW = 8 };

#define CU_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            kda_die_at(__FILE__, __LINE__, "CUDA call %s failed: %s", #call, cudaGetErrorString(e_));                  \
    } while (0)
// After every kernel launch: catches bad launch configurations at the launch site.
#define CU_LAUNCHED() CU_CHECK(cudaGetLastError())

// The stream every op of this backend runs on (created by kda_ops_cuda()).
extern cudaStream_t cu_stream;
// Device int that kernels set when they meet an out-of-range token id (1: embedding id,
// 2: target id); checked (and the run stopped with a message) by cu_check_error_flag().
extern int *cu_err_flag;
void cu_check_error_flag(void);

// Grow-only device scratch shared by all ops (ops run one after another on cu_stream). The
// pointer stays valid until the next cu_scratch call, so an op asks once for all it needs.
void *cu_scratch(size_t bytes);
// Bytes the arena holds after growing for a request of `bytes` (cu_scratch adds headroom).
size_t cu_scratch_reserve(size_t bytes);
// Whether a kernel that needs this much dynamic shared memory per block can run on the current
// GPU (its opt-in limit).
bool cu_smem_fits(size_t smem_bytes);
// The current GPU's SM count.
int cu_sm_count(void);
// What each op asks cu_scratch for (the ops size their requests with these; the memory plan's
// scratch_bytes takes the largest over a training step). Host arithmetic: no device needed.
size_t cu_lm_head_ce_scratch_bytes(int N, int NV);
size_t cu_embed_bwd_scratch_bytes(int N);
size_t cu_linear_bwd_scratch_bytes(int N, int O); // a linear with a bias
size_t cu_rmsnorm_bwd_scratch_bytes(int N, int d);
size_t cu_gated_rmsnorm_bwd_scratch_bytes(int rows, int V);
size_t cu_conv_silu_bwd_scratch_bytes(int B, int T, int C, int W);
// The cross-entropy row kernel this GPU and build use (embed_head.cu), for describe().
const char *cu_ce_rows_kind(void);
size_t cu_kda_bwd_scratch_bytes(const kda_core_dims *d); // the KDA core backward's workspace (kda_bwd.cu)
size_t cu_sumsq_scratch_bytes(void);

// Carves one allocation into 256-byte aligned pieces. Run a layout once with base NULL to
// learn the size, then again on the real base.
struct cu_carve {
    char *base;
    size_t off;
    explicit cu_carve(void *b) : base((char *)b), off(0) {}
    template <class T> T *take(size_t n) {
        off = (off + 255) & ~(size_t)255;
        T *r = base ? (T *)(base + off) : (T *)0;
        off += n * sizeof(T);
        return r;
    }
};

static inline unsigned cu_blocks(size_t n, unsigned threads, unsigned cap = 65535u * 16u) {
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return b > cap ? cap : (unsigned)b;
}

__device__ __forceinline__ float bf2f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 f2bf(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ float round_bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
// σ(x) = 1 / (1 + e^−x) on the special-function unit: 2^(−x·log2 e) and the reciprocal by their
// approximate instructions, subnormals flushed (4 instructions, a few ulp; Triton computes FLA's
// sigmoid by the same approximate exp2 and division) instead of expf and an IEEE division (~30
// with the slow-path branch), which made the conv issue-bound (session 21, H100: conv forward
// 0.192 -> 0.115 ms at 32 x 2048). x → −∞: rcp(∞) = 0; x → +∞: 1. SwiGLU keeps its own
// (elementwise.cu): with this one its backward, memory-bound, measured 22% slower, cause unknown.
__device__ __forceinline__ float sigmoidf_(float x) {
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.4426950408889634f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return r;
}
// softplus with PyTorch's threshold (x above 20: x itself), the KDA gate's (kda-model.md §2.3)
__device__ __forceinline__ float softplus20(float z) { return z > 20.0f ? z : log1pf(expf(z)); }

// 16 bytes from an aligned address into fp32 registers (no local-memory round trip)
__device__ __forceinline__ void load16(const float *p, float *x) {
    float4 u = *(const float4 *)p;
    x[0] = u.x, x[1] = u.y, x[2] = u.z, x[3] = u.w;
}
// 8 bf16 in a 16-byte word to fp32
__device__ __forceinline__ void unpack16(uint4 u, float *x) {
    unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int t = 0; t < 4; t++) {
        x[2 * t] = __uint_as_float(w[t] << 16); // bf16 → fp32: the high half of the word
        x[2 * t + 1] = __uint_as_float(w[t] & 0xffff0000u);
    }
}
__device__ __forceinline__ void load16(const bf16 *p, float *x) { unpack16(*(const uint4 *)p, x); }
// 8 fp32 from a 16-byte aligned address (the fp32 small parameters beside 8 bf16 of a row)
__device__ __forceinline__ void load8f(const float *p, float *x) {
    load16(p, x);
    load16(p + 4, x + 4);
}

// 8 fp32 values rounded to bf16 and stored with one 16-byte store (aligned address)
__device__ __forceinline__ void store16(bf16 *p, const float *x) {
    __align__(16) bf16 o[8];
#pragma unroll
    for (int t = 0; t < 8; t++) o[t] = __float2bfloat16_rn(x[t]);
    *(uint4 *)p = *(const uint4 *)o;
}

static inline bool cu_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// Whether the A/B switch `name` is on: the environment variable set, not empty and not "0". Read
// at every call, so that a test can compare both settings in one process.
static inline bool cu_env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0");
}
// Whether the environment variable `name` is set to exactly `val` (switches that are on unless set
// to "0", or that take a few named values), read at every call as cu_env_on.
static inline bool cu_env_is(const char *name, const char *val) {
    const char *e = getenv(name);
    return e && !strcmp(e, val);
}

// 16 bytes global -> shared without a register round trip (sm_80+); cp_async_wait_all() (this
// thread's copies done) before the barrier that publishes them to the block.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}
// The same, or 16 zeros into smem when !ok (src-size 0: gmem, still a valid address, is not read).
__device__ __forceinline__ void cp_async16_or_zero(void *smem, const void *gmem, bool ok) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Closes this thread's group of cp.async copies issued since the last commit (an empty group if none).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Every group of this thread's copies but the newest N complete.
template <int N> __device__ __forceinline__ void cp_async_wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// out[j] += Σ_g partial[g][j] (g ascending: deterministic); partial is fp32 [G, ncols].
void cu_colreduce_add(const float *partial, int G, size_t ncols, float *out);

// ---- profile.cu: the step profile (ops.h profile_begin / profile_end) ----
// cu_prof_push starts a span of the given kda_phase, named (a string that outlives the profile)
// for the step profile's per-op table (returns -1 when profiling is off); cu_prof_pop ends it.
// Spans nest; each counts once, for its own phase.
int cu_prof_push(int phase, const char *name);
void cu_prof_pop(int span);
void cu_prof_gemm_flops(double flops);
void cu_profile_begin(void);
void cu_profile_end(kda_phase_times *out);

// A span for one scope (a kernel launch inside an op: "kda_bwd: finish").
struct cu_prof_scope {
    int span;
    cu_prof_scope(int phase, const char *name) : span(cu_prof_push(phase, name)) {}
    ~cu_prof_scope() { cu_prof_pop(span); }
};

// CU_PROFILED(phase, fn): fn wrapped in a span of that phase named after fn (less its "cu_"),
// with fn's own signature. The name travels as a local type (NAME::s()): a string literal
// cannot be a template argument.
template <typename F, F f, int PHASE, typename NAME> struct cu_profiled;
template <typename R, typename... A, R (*f)(A...), int PHASE, typename NAME>
struct cu_profiled<R (*)(A...), f, PHASE, NAME> {
    static R call(A... a) {
        int s = cu_prof_push(PHASE, NAME::s());
        if constexpr (std::is_void<R>::value) {
            f(a...);
            cu_prof_pop(s);
        } else {
            R r = f(a...);
            cu_prof_pop(s);
            return r;
        }
    }
};
#define CU_PROFILED(phase, fn)                                                                                         \
    ([] {                                                                                                              \
        struct name_of {                                                                                               \
            static const char *s() { return #fn + 3; }                                                                 \
        };                                                                                                             \
        return &cu_profiled<decltype(&fn), &fn, phase, name_of>::call;                                                 \
    }())

// ---- gemm.cu: cuBLASLt, column-major C[m,n] = alpha·op(A)[m,k]·op(B)[k,n] + beta·C ----
// A and B bf16; C bf16 or fp32 (c_f32); bias (bf16, length m) added when not NULL.
void cu_gemm(int ta, int tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, void *C, int ldc,
             int c_f32, float alpha, float beta, const void *bias);
// The same with the C read from Cin and written to C (D = alpha·op(A)·op(B) + beta·Cin).
void cu_gemm_cd(int ta, int tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, const void *Cin,
                void *C, int ldc, int c_f32, float alpha, float beta, const void *bias);
void cu_gemm_init(void);
// For every GEMM problem used so far: the heuristic's choice against the fastest of its other
// candidates, timed on scratch operands, as a table per step (calls / steps) on out; each
// problem then keeps its fastest algorithm.
void cu_gemm_survey(FILE *out, int steps);

// ---- the ops (one file per family) ----
void cu_linear_fwd(const void *x, int ldx, const void *W, const void *bias, const void *res, void *y, int N, int In,
                   int O);
void cu_linear_bwd(const void *x, int ldx, const void *W, const void *dy, void *dx, float *dW, float *dbias, int N,
                   int In, int O, int accumulate);
void cu_embed_fwd(const int32_t *ids, const void *E, void *out, int N, int d, int NV);
void cu_embed_bwd(const int32_t *ids, const void *dout, float *dE, int N, int d);
double cu_lm_head_ce(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                     void *dx, float *dE, long *n_valid);
void cu_lm_head_ce_acc(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                       void *dx, float *dE, double weight);
double cu_loss_take(void);
void cu_lm_head_logits(const void *x, const void *E, float *logits, int N, int d, int NV);
void cu_rmsnorm_fwd(const void *x, const float *w, void *y, float *rstd, int N, int d, float eps);
void cu_rmsnorm_bwd(const void *x, const float *w, const float *rstd, const void *dy, void *dx, float *dw, void *y,
                    int N, int d, int accumulate);
void cu_gated_rmsnorm_fwd(const void *o, const void *u, const float *w, void *y, float *rstd, int rows, int V,
                          float eps);
void cu_gated_rmsnorm_bwd(const void *o, const void *u, const float *w, const float *rstd, const void *dy, void *d_o,
                          void *du, float *dw, void *y, int rows, int V);
void cu_conv_silu_fwd(const void *x, int ldx, const kda_conv_group *g, int ng, int B, int T, int W);
void cu_conv_silu_bwd(const void *x, int ldx, void *dx, const kda_conv_group *g, int ng, int B, int T, int W);
size_t cu_kda_saved_bytes(const kda_core_dims *d);
size_t cu_kda_fwd_scratch_bytes(const kda_core_dims *d);
void cu_kda_fwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                const float *A_log, const float *dt_bias, void *o, void *saved);
void cu_kda_bwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                const float *A_log, const float *dt_bias, const void *saved, const void *d_o, void *dq, void *dk,
                void *dv, void *df, void *db, float *dA_log, float *ddt_bias);
// generation (decode.cu; the chunked one in kda_fwd.cu)
void cu_conv_silu_step(void *tail, const void *x, int ldx, const float *w, void *y, int B, int T, int C, int W);
void cu_kda_fwd_state(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                      const float *A_log, const float *dt_bias, void *o, void *saved, float *S);
void cu_kda_fwd_chunked_state(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f,
                              const void *b, const float *A_log, const float *dt_bias, void *o, void *saved, float *S);
void cu_swiglu_fwd(const void *gu, void *z, int N, int F);
void cu_swiglu_bwd(const void *gu, const void *dz, int lddz, void *dgu, void *z, int N, int F);
double cu_sumsq(const float *g, size_t n);
void cu_adamw_multi(float *p, void *w, float *g, float *m, float *v, const kda_adamw_seg *segs, int nseg, float gscale,
                    float lr, float beta1, float beta2, float eps, float bc1, float bc2);
void cu_master_to_work(const float *p, void *w, size_t n);

#endif
