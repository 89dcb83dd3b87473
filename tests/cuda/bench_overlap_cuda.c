// bench_overlap_cuda.c — does a weight-gradient GEMM on a second stream overlap the backward's
// memory- and latency-bound ops? (issue 17: in a 300M 32 x 2048 step the backward's non-GEMM
// kernels take ~54 ms and its weight-gradient GEMMs ~26 ms, serialised; the GEMMs leave HBM mostly
// idle, those kernels the tensor cores.) The answer decides whether the model's backward should
// move its weight gradients to a second stream (cuda_streams.h; gate and up's already go there
// with KDA_WGRAD_STREAM=1, ops.h side_begin, an A/B).
//
// For each pair of one layer's backward at the 300M shapes (B x 2048 tokens, d 1024, F 4096), a
// GEMM (dW of gate + up, or of down) on the second stream and an op (swiglu_bwd with z, the
// RMSNorm backward with y, the KDA core's backward) on the backend's stream, it times: the GEMM
// alone (all SMs, and with cuBLASLt told to target fewer: CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET),
// the op alone, and both forked from one point and joined after (median of ROUNDS rounds of REPS
// fork-join pairs, CUDA events). "saved" = 1 - both / (GEMM on all SMs + op), the share of the
// serialised time the overlap takes off; negative when running them together is slower.
//   bench_overlap_cuda [tokens]   (default 65536; a multiple of 2048)
#include "backend/cuda/cuda_streams.h"
#include "cuda/cuda_bench.h"
#include "cuda/kda_inputs.h"

typedef void (*step_fn)(void);
typedef struct {
    step_fn gemm, op; // either may be NULL (alone)
} pair;

// One rep: the GEMM (on the second stream when there is an op) and the op, forked and joined.
static void rep(void *ctx) {
    const pair *p = ctx;
    if (p->gemm && p->op) {
        kda_cuda_stream_fork();
        kda_cuda_stream_select(1);
        p->gemm();
        kda_cuda_stream_select(0);
        p->op();
        kda_cuda_stream_join();
    } else {
        (p->gemm ? p->gemm : p->op)();
    }
}

static double pair_ms(step_fn gemm, step_fn op) { return time_ms(rep, &(pair){gemm, op}); }

// ---- one layer's backward at the 300M shapes ----
static int N, D = 1024, F = 4096;
static void *x2_, *w_gu_, *dgu_g_, *z_g_, *w_d_, *dh_g_; // the GEMMs' operands
static float *dw_gu_, *dw_d_;                            // and their fp32 gradients
static void *gu_, *dz_, *dgu_, *z_;                      // swiglu_bwd's
static void *nx_, *ndy_, *ndx_, *ny_;                    // rmsnorm_bwd's
static float *nw_, *nrstd_, *ndw_;
static kda_core_dims cd_; // the KDA core's
static void *q_, *k_, *v_, *f_, *b_, *A_, *dt_, *saved_, *dO_, *dq_, *dk_, *dv_, *df_, *db_;
static float *dA_, *ddt_;

static void g_dw_gate_up(void) { CU->linear_bwd(x2_, D, w_gu_, dgu_g_, NULL, dw_gu_, NULL, N, D, 2 * F, 0); }
static void g_dw_down(void) { CU->linear_bwd(z_g_, F, w_d_, dh_g_, NULL, dw_d_, NULL, N, F, D, 0); }
static void op_swiglu_bwd(void) { CU->swiglu_bwd(gu_, dz_, F, dgu_, z_, N, F); }
static void op_rmsnorm_bwd(void) { CU->rmsnorm_bwd(nx_, nw_, nrstd_, ndy_, ndx_, ndw_, ny_, N, D, 1); }
static void op_kda_bwd(void) {
    CU->kda_bwd(&cd_, q_, k_, v_, f_, b_, A_, dt_, saved_, dO_, dq_, dk_, dv_, df_, db_, dA_, ddt_);
}

static void setup(int B, int T) {
    size_t Nd = (size_t)N * D, NF = (size_t)N * F;
    x2_ = d_rand_bf(Nd, 1), w_gu_ = d_rand_bf((size_t)2 * F * D, 0.02), dgu_g_ = d_rand_bf(2 * NF, 1e-3);
    z_g_ = d_rand_bf(NF, 1), w_d_ = d_rand_bf((size_t)D * F, 0.02), dh_g_ = d_rand_bf(Nd, 1e-3);
    dw_gu_ = CU->alloc((size_t)2 * F * D * 4), dw_d_ = CU->alloc((size_t)D * F * 4);
    CU->zero(dw_gu_, (size_t)2 * F * D * 4), CU->zero(dw_d_, (size_t)D * F * 4);
    gu_ = d_rand_bf(2 * NF, 1), dz_ = d_rand_bf(NF, 1e-3), dgu_ = CU->alloc(2 * NF * 2), z_ = CU->alloc(NF * 2);
    nx_ = d_rand_bf(Nd, 1), ndy_ = d_rand_bf(Nd, 1e-3), ndx_ = d_rand_bf(Nd, 1e-3), ny_ = CU->alloc(Nd * 2);
    nw_ = d_rand_f32(D, 1, 0), nrstd_ = d_rand_f32(N, 1, 1), ndw_ = CU->alloc(D * 4);
    CU->zero(ndw_, D * 4);
    kda_inputs x = kda_inputs_make(B, T, 8, 32, 64, 64);
    cd_ = x.d;
    q_ = d_bf(x.q, x.nk), k_ = d_bf(x.k, x.nk), v_ = d_bf(x.v, x.nv), f_ = d_bf(x.f, x.nk), b_ = d_bf(x.b, x.nb);
    A_ = d_f32(x.A_log, 8), dt_ = d_f32(x.dt_bias, 8 * 32), dO_ = d_bf(x.dO, x.nv);
    void *o = CU->alloc(x.nv * 2);
    saved_ = CU->alloc(CU->kda_saved_bytes(&cd_));
    CU->kda_fwd(&cd_, q_, k_, v_, f_, b_, A_, dt_, o, saved_);
    dq_ = CU->alloc(x.nk * 2), dk_ = CU->alloc(x.nk * 2), dv_ = CU->alloc(x.nv * 2), df_ = CU->alloc(x.nk * 2);
    db_ = CU->alloc(x.nb * 2), dA_ = CU->alloc(8 * 4), ddt_ = CU->alloc(8 * 32 * 4);
    kda_inputs_free(&x);
    CU->sync();
}

int main(int argc, char **argv) {
    bench_start(2468);
    int T = 2048;
    N = argc > 1 ? atoi(argv[1]) : 32 * T;
    if (N < T || N % T) {
        fprintf(stderr, "usage: bench_overlap_cuda [tokens, a multiple of %d]\n", T);
        return 2;
    }
    int sms = 0;
    ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
    printf("bench_overlap_cuda: %s; %d tokens, d=%d F=%d, KDA core 8 heads K 32 V 64; %d SMs; median of %d rounds "
           "of %d fork-join reps (CUDA events)\n",
           CU->describe(), N, D, F, sms, ROUNDS, REPS);
    setup(N / T, T);
    const struct {
        const char *name;
        step_fn f;
    } gemms[] = {{"dW gate+up", g_dw_gate_up}, {"dW down", g_dw_down}},
      ops[] = {{"swiglu_bwd + z", op_swiglu_bwd}, {"rmsnorm_bwd + y", op_rmsnorm_bwd}, {"kda_bwd", op_kda_bwd}};
    const int targets[] = {0, sms - 16, sms - 32, sms - 48};
    printf("%-12s %-16s %8s %9s %8s %8s %8s %8s\n", "GEMM", "op", "SMs", "GEMM ms", "all-SM", "op ms", "both ms",
           "saved");
    for (size_t gi = 0; gi < sizeof gemms / sizeof gemms[0]; gi++) {
        kda_cuda_gemm_sm_target(0);
        double g_all = pair_ms(gemms[gi].f, NULL);
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            double t_op = pair_ms(NULL, ops[oi].f);
            for (size_t ti = 0; ti < sizeof targets / sizeof targets[0]; ti++) {
                kda_cuda_gemm_sm_target(targets[ti]);
                double g = ti ? pair_ms(gemms[gi].f, NULL) : g_all, both = pair_ms(gemms[gi].f, ops[oi].f);
                printf("%-12s %-16s %8d %9.3f %8.3f %8.3f %8.3f %7.1f%%\n", gemms[gi].name, ops[oi].name,
                       targets[ti] ? targets[ti] : sms, g, g_all, t_op, both, 100.0 * (1.0 - both / (g_all + t_op)));
                fflush(stdout);
            }
        }
    }
    return 0;
}
