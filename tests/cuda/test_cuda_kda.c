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
// and b / db as the columns of a wider matrix (kda_core_dims.ldb). Without a GPU it prints "SKIP: no CUDA device" and exits 77 (skipped).
#include "cuda/kda_inputs.h"

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
    void *q_ = d_bf(x.q, x.nk), *k_ = d_bf(x.k, x.nk), *v_ = d_bf(x.v, x.nv), *f_ = d_bf(x.f, x.nk);
    void *b_ = d_bf(x.b, x.nb), *A_ = d_f32(x.A_log, H), *dt_ = d_f32(x.dt_bias, (size_t)H * K);
    void *dO_ = d_bf(x.dO, x.nv), *o_ = d_bf_nan(x.nv);
    void *saved = CU->alloc(CU->kda_saved_bytes(&dg));
    CU->kda_fwd(&dg, q_, k_, v_, f_, b_, A_, dt_, o_, saved);
    float *o = h_of_bf(o_, x.nv);
    snprintf(nm, sizeof nm, "kda_fwd o (B=%d T=%d H=%d K=%d V=%d C=%d)", B, T, H, K, V, chunk);
    CHECK_REL(nm, o, o_ref, x.nv, 6e-3);
    float *res[2][8];
    for (int rep = 0; rep < 2; rep++) {
        void *dq_ = d_bf_nan(x.nk), *dk_ = d_bf_nan(x.nk), *dv_ = d_bf_nan(x.nv), *df_ = d_bf_nan(x.nk);
        void *db_ = d_bf_nan(x.nb);
        float *dA_ = d_f32(dA0, H), *ddt_ = d_f32(ddt0, (size_t)H * K);
        CU->kda_bwd(&dg, q_, k_, v_, f_, b_, A_, dt_, saved, dO_, dq_, dk_, dv_, df_, db_, dA_, ddt_);
        res[rep][0] = h_of_bf(dq_, x.nk), res[rep][1] = h_of_bf(dk_, x.nk), res[rep][2] = h_of_bf(dv_, x.nv);
        res[rep][3] = h_of_bf(df_, x.nk), res[rep][4] = h_of_bf(db_, x.nb);
        res[rep][5] = h_of_f32(dA_, H), res[rep][6] = h_of_f32(ddt_, (size_t)H * K);
        CU->free(dq_), CU->free(dk_), CU->free(dv_), CU->free(df_), CU->free(db_), CU->free(dA_), CU->free(ddt_);
    }
    CHECK_REL("kda_bwd dq", res[0][0], dq_ref, x.nk, 8e-3);
    CHECK_REL("kda_bwd dk", res[0][1], dk_ref, x.nk, 8e-3);
    CHECK_REL("kda_bwd dv", res[0][2], dv_ref, x.nv, 8e-3);
    CHECK_REL("kda_bwd df (gate logits)", res[0][3], df_ref, x.nk, 2e-2);
    CHECK_REL("kda_bwd db (beta logits)", res[0][4], db_ref, x.nb, 2e-2);
    for (int h = 0; h < H; h++) res[0][5][h] -= dA0[h], dA_ref[h] -= dA0[h];
    for (int i = 0; i < H * K; i++) res[0][6][i] -= ddt0[i], ddt_ref[i] -= ddt0[i];
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
        double e = fabs((double)res[0][5][h] - dA_ref[h]) / (allowed > 0.0 ? allowed : 1.0);
        if (e > worst) worst = e;
    }
    T_CHECK(worst <= 1.0, "%-48s error / allowed %.3f (<= 1); rel err %.3e", "kda_bwd dA_log (the += part)", worst,
            (double)rel_vs(res[0][5], dA_ref, H));
    CHECK_REL("kda_bwd ddt_bias (the += part)", res[0][6], ddt_ref, (size_t)H * K, 8e-3);
    size_t sz[7] = {x.nk, x.nk, x.nv, x.nk, x.nb, (size_t)H, (size_t)H * K};
    int same = 1;
    for (int i = 0; i < 7; i++) {
        if (i == 5 || i == 6) continue; // already shifted above
        same &= !memcmp(res[0][i], res[1][i], sz[i] * 4);
    }
    T_CHECK(same, "kda_bwd twice: bitwise identical gradients");
    { // lean (recompute_modules core_prep): less saved, the prep rerun in the backward, the same bits
        kda_core_dims dl = dg;
        dl.lean = 1;
        size_t bl = CU->kda_saved_bytes(&dl), bf = CU->kda_saved_bytes(&dg);
        T_CHECK(bl < bf, "lean: a smaller saved buffer (%zu < %zu bytes)", bl, bf);
        void *sl = CU->alloc(bl), *ol_ = d_bf_nan(x.nv);
        CU->kda_fwd(&dl, q_, k_, v_, f_, b_, A_, dt_, ol_, sl);
        void *dq_ = d_bf_nan(x.nk), *dk_ = d_bf_nan(x.nk), *dv_ = d_bf_nan(x.nv), *df_ = d_bf_nan(x.nk);
        void *db_ = d_bf_nan(x.nb);
        float *dA_ = d_f32(dA0, H), *ddt_ = d_f32(ddt0, (size_t)H * K);
        CU->kda_bwd(&dl, q_, k_, v_, f_, b_, A_, dt_, sl, dO_, dq_, dk_, dv_, df_, db_, dA_, ddt_);
        float *got[8] = {h_of_bf(dq_, x.nk),
                         h_of_bf(dk_, x.nk),
                         h_of_bf(dv_, x.nv),
                         h_of_bf(df_, x.nk),
                         h_of_bf(db_, x.nb),
                         h_of_f32(dA_, H),
                         h_of_f32(ddt_, (size_t)H * K),
                         h_of_bf(ol_, x.nv)};
        int eq = !memcmp(got[7], o, x.nv * 4);
        for (int i = 0; i < 7; i++) eq &= !memcmp(got[i], res[1][i], sz[i] * 4);
        T_CHECK(eq, "lean: the same output and gradient bits");
        for (int i = 0; i < 8; i++) free(got[i]);
        CU->free(dq_), CU->free(dk_), CU->free(dv_), CU->free(df_), CU->free(db_), CU->free(dA_), CU->free(ddt_);
        CU->free(sl), CU->free(ol_);
    }
    { // b and db as columns of a wider matrix (kda_core_dims.ldb, as the model passes them): the same
        // bits, the columns between b's rows untouched
        kda_core_dims ds = dg;
        ds.ldb = H + 5;
        size_t rows = (size_t)B * T, wide = rows * ds.ldb;
        float *bw = h_randn(wide, 1);
        for (size_t t = 0; t < rows; t++) memcpy(bw + t * ds.ldb, x.b + t * H, (size_t)H * 4);
        void *bw_ = d_bf(bw, wide), *dbw_ = d_bf_nan(wide), *os_ = d_bf_nan(x.nv),
             *ss = CU->alloc(CU->kda_saved_bytes(&ds));
        CU->kda_fwd(&ds, q_, k_, v_, f_, bw_, A_, dt_, os_, ss);
        void *dq_ = d_bf_nan(x.nk), *dk_ = d_bf_nan(x.nk), *dv_ = d_bf_nan(x.nv), *df_ = d_bf_nan(x.nk);
        float *dA_ = d_f32(dA0, H), *ddt_ = d_f32(ddt0, (size_t)H * K);
        CU->kda_bwd(&ds, q_, k_, v_, f_, bw_, A_, dt_, ss, dO_, dq_, dk_, dv_, df_, dbw_, dA_, ddt_);
        float *got[8] = {h_of_bf(dq_, x.nk),
                         h_of_bf(dk_, x.nk),
                         h_of_bf(dv_, x.nv),
                         h_of_bf(df_, x.nk),
                         h_of_bf(dbw_, wide),
                         h_of_f32(dA_, H),
                         h_of_f32(ddt_, (size_t)H * K),
                         h_of_bf(os_, x.nv)};
        int eq = !memcmp(got[7], o, x.nv * 4), gaps = 1;
        for (int i = 0; i < 7; i++)
            if (i != 4) eq &= !memcmp(got[i], res[1][i], sz[i] * 4);
        for (size_t t = 0; t < rows; t++) {
            eq &= !memcmp(got[4] + t * ds.ldb, res[1][4] + t * H, (size_t)H * 4);
            for (int j = H; j < ds.ldb; j++) gaps &= isnan(got[4][t * ds.ldb + j]);
        }
        T_CHECK(eq, "b and db with rows %d apart: the packed call's output and gradient bits", ds.ldb);
        T_CHECK(gaps, "db with rows %d apart: the columns between its rows untouched", ds.ldb);
        for (int i = 0; i < 8; i++) free(got[i]);
        CU->free(dq_), CU->free(dk_), CU->free(dv_), CU->free(df_), CU->free(dbw_), CU->free(dA_), CU->free(ddt_);
        CU->free(bw_), CU->free(os_), CU->free(ss), free(bw);
    }
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 7; i++) free(res[r][i]);
    CU->free(q_), CU->free(k_), CU->free(v_), CU->free(f_), CU->free(b_), CU->free(A_), CU->free(dt_);
    CU->free(dO_), CU->free(o_), CU->free(saved), CPU->free(cs);
    free(o_ref), free(dq_ref), free(dk_ref), free(dv_ref), free(df_ref), free(db_ref), free(dA0), free(ddt0);
    free(dA_ref), free(ddt_ref), free(o);
    kda_inputs_free(&x);
}

int main(void) {
    cu_test_start("test_cuda_kda");
    if (getenv("KDA_CUDA_SMALL")) { // one small case, for compute-sanitizer
        run_case(1, 100, 2, 32, 64, 64);
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
