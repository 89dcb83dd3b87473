// test_cuda_kda.c — the CUDA KDA core (chunked, bf16 storage) against the CPU core
// (src/backend/cpu/kda_core_cpu.c, fp32) on the same bf16-rounded inputs: output and every gradient by
// ||gpu − cpu|| / ||cpu|| within the bf16 tolerances of kda-model.md §0 (dq/dk/dv ≤ 0.008,
// d(gate)/dβ ≤ 0.02, ddt_bias ≤ 0.008), except two, measured against FLA on the same GPU and
// inputs (tests/cuda/fla_kda_compare.py, first device run): o ≤ 0.006, because FLA's own chunk
// kernel is at 5.1e-3 from a float64 recurrence on these input distributions (ours 5.05e-3,
// both set by the same bf16 rounding points, §3.5); dA_log, a sum over B·T·K terms with
// cancellation and only H elements, per head within 2e-2 of its value or 4e-3 of Σ|dα·α|. Shapes cover this model's
// heads (K=32, V=64), partial last chunks, K=V=128 and odd sizes (16-byte and element-wise
// operand loads), chunks 32 and 40. Outputs are
// NaN-poisoned; dA_log/ddt_bias accumulate onto random values; a second backward must give
// the same bits, and so must the lean form (kda_core_dims.lean: the prep rerun in the backward)
// and b / db as the columns of a wider matrix (kda_core_dims.ldb), the state scans at each
// width (KDA_SCAN_VT = 16, 32, 64) and, at the recipe's sizes, the generic fused kernels
// (KDA_CORE_GENERIC=1) in place of the ones compiled for those sizes (a check that cannot hold
// vacuously only when the run itself sets neither KDA_CORE_GENERIC nor KDA_CORE_UNFUSED). Without
// a GPU it prints "SKIP: no CUDA device" and exits 77 (skipped).
#include "cuda/kda_inputs.h"

// The device copies of a case's inputs (b may be a wider matrix: kda_core_dims.ldb).
typedef struct {
    void *q, *k, *v, *f, *b, *A, *dt, *dO;
} kda_dev;

enum { G_DQ, G_DK, G_DV, G_DF, G_DB, G_DA, G_DDT, G_O, G_N };

// The backward of d on `saved` (after a forward into it, with o into got[G_O], when fwd is set),
// every output NaN-poisoned and dA_log / ddt_bias accumulating onto dA0 / ddt0, read back into
// got[] (nb: db's elements; got[G_O] NULL without the forward).
static void gpu_run(const kda_core_dims *d, const kda_dev *in, void *saved, int fwd, size_t nb, const float *dA0,
                    const float *ddt0, float *got[G_N]) {
    size_t nk = (size_t)d->B * d->T * d->H * d->K, nv = (size_t)d->B * d->T * d->H * d->V;
    size_t nh = (size_t)d->H, nhk = (size_t)d->H * d->K;
    got[G_O] = NULL;
    if (fwd) {
        void *o_ = d_bf_nan(nv);
        CU->kda_fwd(d, in->q, in->k, in->v, in->f, in->b, in->A, in->dt, o_, saved);
        got[G_O] = h_of_bf(o_, nv);
        CU->free(o_);
    }
    void *dq_ = d_bf_nan(nk), *dk_ = d_bf_nan(nk), *dv_ = d_bf_nan(nv), *df_ = d_bf_nan(nk), *db_ = d_bf_nan(nb);
    float *dA_ = d_f32(dA0, nh), *ddt_ = d_f32(ddt0, nhk);
    CU->kda_bwd(d, in->q, in->k, in->v, in->f, in->b, in->A, in->dt, saved, in->dO, dq_, dk_, dv_, df_, db_, dA_, ddt_);
    got[G_DQ] = h_of_bf(dq_, nk), got[G_DK] = h_of_bf(dk_, nk), got[G_DV] = h_of_bf(dv_, nv);
    got[G_DF] = h_of_bf(df_, nk), got[G_DB] = h_of_bf(db_, nb);
    got[G_DA] = h_of_f32(dA_, nh), got[G_DDT] = h_of_f32(ddt_, nhk);
    CU->free(dq_), CU->free(dk_), CU->free(dv_), CU->free(df_), CU->free(db_), CU->free(dA_), CU->free(ddt_);
}

static void gpu_free(float *got[G_N]) {
    for (int i = 0; i < G_N; i++) free(got[i]);
}

// Whether got's output and gradients are bitwise o and want[] (sz[]: their elements).
static int same_bits(float *const got[G_N], const float *o, float *const want[G_N], const size_t sz[G_N]) {
    int eq = !memcmp(got[G_O], o, sz[G_O] * 4);
    for (int j = 0; j < G_O; j++) eq &= !memcmp(got[j], want[j], sz[j] * 4);
    return eq;
}

// Forward and backward of d with var=val set (then restored, as the run had it): whether the output
// and every gradient are bitwise o and want[] (sz[]: their elements).
static int same_bits_with(const char *var, const char *val, const kda_core_dims *d, const kda_dev *in, size_t nb,
                          const float *dA0, const float *ddt0, const float *o, float *const want[G_N],
                          const size_t sz[G_N]) {
    void *sv = CU->alloc(CU->kda_saved_bytes(d));
    float *got[G_N];
    env_saved e = env_set(var, val);
    gpu_run(d, in, sv, 1, nb, dA0, ddt0, got);
    env_restore(&e);
    int eq = same_bits(got, o, want, sz);
    gpu_free(got), CU->free(sv);
    return eq;
}

static void run_case(int B, int T, int H, int K, int V, int chunk) {
    char nm[128];
    kda_inputs x = kda_inputs_make(B, T, H, K, V, chunk);
    printf("case B=%d T=%d H=%d K=%d V=%d chunk=%d\n", B, T, H, K, V, chunk);
    // CPU reference (fp32, chunked)
    const kda_core_dims *d = &x.d;
    float *cs = CPU->alloc(CPU->kda_saved_bytes(d));
    float *o_ref = h_randn(x.nv, 1), *dq_ref = h_randn(x.nk, 1), *dk_ref = h_randn(x.nk, 1);
    float *dv_ref = h_randn(x.nv, 1), *df_ref = h_randn(x.nk, 1), *db_ref = h_randn(x.nb, 1);
    float *dA0 = h_randn(H, 1.0), *ddt0 = h_randn((size_t)H * K, 1.0);
    float *dA_ref = h_copy(dA0, H), *ddt_ref = h_copy(ddt0, (size_t)H * K);
    CPU->kda_fwd(d, x.q, x.k, x.v, x.f, x.b, x.A_log, x.dt_bias, o_ref, cs);
    CPU->kda_bwd(d, x.q, x.k, x.v, x.f, x.b, x.A_log, x.dt_bias, cs, x.dO, dq_ref, dk_ref, dv_ref, df_ref, db_ref,
                 dA_ref, ddt_ref);
    // GPU
    kda_core_dims dg = *d;
    dg.algo = KDA_RECURRENT; // the CUDA core is always chunked; algo must not matter
    kda_dev in = {d_bf(x.q, x.nk), d_bf(x.k, x.nk), d_bf(x.v, x.nv), d_bf(x.f, x.nk),
                  d_bf(x.b, x.nb), d_f32(x.A_log, H), d_f32(x.dt_bias, (size_t)H * K), d_bf(x.dO, x.nv)};
    void *saved = CU->alloc(CU->kda_saved_bytes(&dg));
    float *res[2][G_N];
    gpu_run(&dg, &in, saved, 1, x.nb, dA0, ddt0, res[0]); // forward and backward
    gpu_run(&dg, &in, saved, 0, x.nb, dA0, ddt0, res[1]); // the backward again
    float *o = res[0][G_O];
    snprintf(nm, sizeof nm, "kda_fwd o (B=%d T=%d H=%d K=%d V=%d C=%d)", B, T, H, K, V, chunk);
    CHECK_REL(nm, o, o_ref, x.nv, 6e-3);
    CHECK_REL("kda_bwd dq", res[0][G_DQ], dq_ref, x.nk, 8e-3);
    CHECK_REL("kda_bwd dk", res[0][G_DK], dk_ref, x.nk, 8e-3);
    CHECK_REL("kda_bwd dv", res[0][G_DV], dv_ref, x.nv, 8e-3);
    CHECK_REL("kda_bwd df (gate logits)", res[0][G_DF], df_ref, x.nk, 2e-2);
    CHECK_REL("kda_bwd db (beta logits)", res[0][G_DB], db_ref, x.nb, 2e-2);
    for (int h = 0; h < H; h++) res[0][G_DA][h] -= dA0[h], dA_ref[h] -= dA0[h];
    for (int i = 0; i < H * K; i++) res[0][G_DDT][i] -= ddt0[i], ddt_ref[i] -= ddt0[i];
    // dA_log[h] = Σ dα·α over B·T·K terms of both signs: some heads' sums nearly cancel, and
    // their relative error is then bf16 noise over a small result (seen at 6.4e-2 with H = 1,
    // T = 5, one seed of nine). A head passes when its error is within 2e-2 of its value or
    // within 4e-3 of its terms' magnitude Σ|dα·α| = Σ|dz|·softplus(z)/σ(z) (dz: the CPU core's
    // gate-logit gradient; 4e-3 is the per-element bf16 level of dz itself). study_dalog_bound.c
    // measures both metrics under perturbations stronger than the GPU's rounding.
    double worst = 0.0;
    for (int h = 0; h < H; h++) {
        double mag = 0.0;
        for (size_t t = 0; t < (size_t)B * T; t++)
            for (int kk = 0; kk < K; kk++) {
                size_t i = (t * H + h) * K + kk;
                double z = (double)x.f[i] + x.dt_bias[h * K + kk];
                double sp = z > 20.0 ? z : log1p(exp(z)), sg = 1.0 / (1.0 + exp(-z));
                mag += fabs((double)df_ref[i]) * sp / sg;
            }
        double allowed = fmax(2e-2 * fabs((double)dA_ref[h]), 4e-3 * mag);
        double e = fabs((double)res[0][G_DA][h] - dA_ref[h]) / (allowed > 0.0 ? allowed : 1.0);
        if (e > worst) worst = e;
    }
    T_CHECK(worst <= 1.0, "%-48s error / allowed %.3f (<= 1); rel err %.3e", "kda_bwd dA_log (the += part)", worst,
            (double)rel_vs(res[0][G_DA], dA_ref, H));
    CHECK_REL("kda_bwd ddt_bias (the += part)", res[0][G_DDT], ddt_ref, (size_t)H * K, 8e-3);
    size_t sz[G_N] = {x.nk, x.nk, x.nv, x.nk, x.nb, (size_t)H, (size_t)H * K, x.nv};
    int same = 1;
    for (int i = 0; i < G_O; i++) {
        if (i == G_DA || i == G_DDT) continue; // already shifted above
        same &= !memcmp(res[0][i], res[1][i], sz[i] * 4);
    }
    T_CHECK(same, "kda_bwd twice: bitwise identical gradients");
    { // lean (recompute_modules core_prep): less saved, the prep rerun in the backward, the same bits
        kda_core_dims dl = dg;
        dl.lean = 1;
        size_t bl = CU->kda_saved_bytes(&dl), bf = CU->kda_saved_bytes(&dg);
        T_CHECK(bl < bf, "lean: a smaller saved buffer (%zu < %zu bytes)", bl, bf);
        void *sl = CU->alloc(bl);
        float *got[G_N];
        gpu_run(&dl, &in, sl, 1, x.nb, dA0, ddt0, got);
        int eq = same_bits(got, o, res[1], sz);
        T_CHECK(eq, "lean: the same output and gradient bits");
        gpu_free(got), CU->free(sl);
    }
    { // the state scans at each width (KDA_SCAN_VT=16, 32, 64 value columns a block, both scans):
        // the same output and gradient bits as the default widths (for these shapes 32 forward, 16 backward)
        static const char *vts[] = {"16", "32", "64"};
        for (int i = 0; i < 3; i++) { // (T_CHECK evaluates its condition twice: the run goes first)
            int eq = same_bits_with("KDA_SCAN_VT", vts[i], &dg, &in, x.nb, dA0, ddt0, o, res[1], sz);
            T_CHECK(eq, "scans with KDA_SCAN_VT=%s: the same output and gradient bits", vts[i]);
        }
    }
    if (K == 32 && V == 64 && chunk == 64) { // the recipe's sizes: its specialised kernels against the generic ones
        int eq = same_bits_with("KDA_CORE_GENERIC", "1", &dg, &in, x.nb, dA0, ddt0, o, res[1], sz);
        T_CHECK(eq, "the generic fused kernels (KDA_CORE_GENERIC=1): the recipe kernels' output and gradient bits");
    }
    { // b and db as columns of a wider matrix (kda_core_dims.ldb, as the model passes them): the same
        // bits, the columns between b's rows untouched
        kda_core_dims ds = dg;
        ds.ldb = H + 5;
        size_t rows = (size_t)B * T, wide = rows * ds.ldb;
        float *bw = h_randn(wide, 1);
        for (size_t t = 0; t < rows; t++) memcpy(bw + t * ds.ldb, x.b + t * H, (size_t)H * 4);
        kda_dev inw = in;
        inw.b = d_bf(bw, wide);
        void *ss = CU->alloc(CU->kda_saved_bytes(&ds));
        float *got[G_N];
        gpu_run(&ds, &inw, ss, 1, wide, dA0, ddt0, got);
        int eq = !memcmp(got[G_O], o, x.nv * 4), gaps = 1;
        for (int i = 0; i < G_O; i++)
            if (i != G_DB) eq &= !memcmp(got[i], res[1][i], sz[i] * 4);
        for (size_t t = 0; t < rows; t++) {
            eq &= !memcmp(got[G_DB] + t * ds.ldb, res[1][G_DB] + t * H, (size_t)H * 4);
            for (int j = H; j < ds.ldb; j++) gaps &= isnan(got[G_DB][t * ds.ldb + j]);
        }
        T_CHECK(eq, "b and db with rows %d apart: the packed call's output and gradient bits", ds.ldb);
        T_CHECK(gaps, "db with rows %d apart: the columns between its rows untouched", ds.ldb);
        gpu_free(got), CU->free(inw.b), CU->free(ss), free(bw);
    }
    gpu_free(res[0]), gpu_free(res[1]); // res[0][G_O] is o
    CU->free(in.q), CU->free(in.k), CU->free(in.v), CU->free(in.f), CU->free(in.b), CU->free(in.A), CU->free(in.dt);
    CU->free(in.dO), CU->free(saved), CPU->free(cs);
    free(o_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(df_ref), free(db_ref), free(dA0), free(ddt0);
    free(dA_ref), free(ddt_ref);
    kda_inputs_free(&x);
}

int main(void) {
    cu_test_start("test_cuda_kda");
    if (getenv("KDA_CUDA_SMALL")) { // one small case, for compute-sanitizer: 4 chunks, a partial last one,
        // so that the scans' double buffers are each rewritten after being read
        run_case(1, 200, 2, 32, 64, 64);
        return t_done("test_cuda_kda");
    }
    run_case(2, 200, 3, 32, 64, 64);   // this model's heads, partial last chunk
    run_case(1, 256, 2, 32, 64, 64);   // whole chunks only
    run_case(2, 70, 2, 48, 80, 64);    // odd head sizes
    run_case(1, 130, 2, 128, 128, 64); // largest supported heads
    run_case(1, 100, 2, 16, 24, 32);   // chunk 32
    run_case(3, 5, 1, 32, 64, 64);     // shorter than one chunk
    run_case(2, 90, 2, 18, 30, 64);    // head sizes not multiples of 4: element-wise loads everywhere
    run_case(1, 77, 3, 12, 20,
             40); // multiples of 4, not 8 (16-byte loads of fp32 only); chunk 40 ends inside a 16-row block
    return t_done("test_cuda_kda");
}
