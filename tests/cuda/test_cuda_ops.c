// test_cuda_ops.c — every CUDA op (except the KDA core: test_cuda_kda.c) against the CPU
// backend (fp32, the reference) on fresh seeded random inputs. The CPU side gets the same
// bf16-rounded inputs the GPU sees; GPU outputs are poisoned with NaN before each op, so an
// unwritten element fails. Tolerances: bf16 outputs 5e-3..1e-2 (one rounding, ~2^-9);
// fp32 gradients computed from bf16 operands with fp32 accumulation 1e-4.
// Without a GPU it prints "SKIP: no CUDA device" and exits 77 (skipped).
#include <dlfcn.h>
#include <unistd.h>

#include "cuda/cuda_test_util.h"
#include "conv_one.h"
#include "gu_pack.h"
#include "test_die.h"

// ---- inputs as columns of a wider matrix (ops.h ldx) ----

// rows of n values at columns [c0, c0 + n) of a [rows, ld] matrix filled with fill elsewhere
static float *h_widen(const float *x, int rows, int n, int ld, int c0, float fill) {
    float *w = kda_malloc((size_t)rows * ld * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * ld; i++) w[i] = fill;
    if (x)
        for (int r = 0; r < rows; r++) memcpy(w + (size_t)r * ld + c0, x + (size_t)r * n, n * sizeof(float));
    return w;
}
// columns [c0, c0 + n) of a [rows, ld] matrix, packed; *others_nan: every other entry is NaN
static float *h_cols(const float *w, int rows, int n, int ld, int c0, int *others_nan) {
    float *x = kda_malloc((size_t)rows * n * sizeof(float));
    *others_nan = 1;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            float v = w[(size_t)r * ld + j];
            if (j >= c0 && j < c0 + n)
                x[(size_t)r * n + j - c0] = v;
            else if (!isnan(v))
                *others_nan = 0;
        }
    return x;
}
#define BF_AT(p, i) ((void *)((char *)(p) + (size_t)(i)*2))

// ---- linear ----
// x (and dx) as the last In columns of [N, ld] rows (ld = In: packed); with_res adds a residual.
static void test_linear(int N, int In, int O, int with_bias, int ld, int with_res) {
    char nm[128];
    int c0 = ld - In, ok;
    float *x = h_randn_bf((size_t)N * In, 1.0), *W = h_randn_bf((size_t)O * In, 0.05);
    float *bias = with_bias ? h_randn_bf(O, 0.5) : NULL, *res = with_res ? h_randn_bf((size_t)N * O, 1.0) : NULL;
    float *y_ref = h_randn((size_t)N * O, 1), *xw = h_widen(x, N, In, ld, c0, NAN);
    CPU->linear_fwd(x, In, W, bias, res, y_ref, N, In, O);
    void *dxw_ = d_bf(xw, (size_t)N * ld), *dW_ = d_bf(W, (size_t)O * In), *db_ = bias ? d_bf(bias, O) : NULL;
    void *dx_ = BF_AT(dxw_, c0), *dy_ = d_bf_nan((size_t)N * O), *dres_ = res ? d_bf(res, (size_t)N * O) : NULL;
    CU->linear_fwd(dx_, ld, dW_, db_, dres_, dy_, N, In, O);
    float *y = h_of_bf(dy_, (size_t)N * O);
    snprintf(nm, sizeof nm, "linear_fwd N=%d In=%d O=%d ldx=%d%s%s", N, In, O, ld, with_bias ? " +bias" : "",
             with_res ? " +residual" : "");
    CHECK_REL(nm, y, y_ref, (size_t)N * O, 5e-3);

    // backward: dx written then accumulated, dW/dbias accumulated onto random values
    float *gy = h_randn_bf((size_t)N * O, 1.0);
    float *dW0 = h_randn((size_t)O * In, 1.0), *dB0 = h_randn(O, 1.0), *dx0 = h_randn_bf((size_t)N * In, 1.0);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx_ref = h_copy(dx0, (size_t)N * In), *dW_ref = h_copy(dW0, (size_t)O * In), *dB_ref = h_copy(dB0, O);
        CPU->linear_bwd(x, In, W, gy, dx_ref, dW_ref, with_bias ? dB_ref : NULL, N, In, O, acc);
        void *gy_ = d_bf(gy, (size_t)N * O);
        float *gxw0 = h_widen(acc ? dx0 : NULL, N, In, ld, c0, NAN);
        void *gxw_ = d_bf(gxw0, (size_t)N * ld);
        float *gW_ = d_f32(dW0, (size_t)O * In), *gB_ = d_f32(dB0, O);
        CU->linear_bwd(dx_, ld, dW_, gy_, BF_AT(gxw_, c0), gW_, with_bias ? gB_ : NULL, N, In, O, acc);
        float *gxw = h_of_bf(gxw_, (size_t)N * ld), *gx = h_cols(gxw, N, In, ld, c0, &ok);
        float *gW = h_of_f32(gW_, (size_t)O * In), *gB = h_of_f32(gB_, O);
        snprintf(nm, sizeof nm, "linear_bwd dx (accumulate=%d, ldx=%d)", acc, ld);
        CHECK_REL(nm, gx, dx_ref, (size_t)N * In, 5e-3);
        T_CHECK(ok, "linear_bwd (ldx=%d): nothing written outside dx's columns", ld);
        CHECK_REL("linear_bwd dW (+=)", gW, dW_ref, (size_t)O * In, 1e-4);
        if (with_bias) CHECK_REL("linear_bwd dbias (+=)", gB, dB_ref, O, 1e-4);
        CU->free(gy_), CU->free(gxw_), CU->free(gW_), CU->free(gB_);
        free(dx_ref), free(dW_ref), free(dB_ref), free(gxw0), free(gxw), free(gx), free(gW), free(gB);
    }
    // dx == NULL is allowed
    float *gW_ = d_f32(dW0, (size_t)O * In);
    void *gy_ = d_bf(gy, (size_t)N * O);
    CU->linear_bwd(dx_, ld, dW_, gy_, NULL, gW_, NULL, N, In, O, 0);
    float *gW = h_of_f32(gW_, (size_t)O * In), *dW_ref = h_copy(dW0, (size_t)O * In);
    CPU->linear_bwd(x, In, W, gy, NULL, dW_ref, NULL, N, In, O, 0);
    CHECK_REL("linear_bwd dx=NULL: dW", gW, dW_ref, (size_t)O * In, 1e-4);
    { // dW == NULL: x is not read (NULL here), dx has the bits of the call with dW
        void *ga_ = d_bf_nan((size_t)N * ld), *gb_ = d_bf_nan((size_t)N * ld);
        float *gW2_ = d_f32(dW0, (size_t)O * In);
        CU->linear_bwd(dx_, ld, dW_, gy_, BF_AT(ga_, c0), gW2_, NULL, N, In, O, 0);
        CU->linear_bwd(NULL, ld, dW_, gy_, BF_AT(gb_, c0), NULL, NULL, N, In, O, 0);
        float *ga = h_of_bf(ga_, (size_t)N * ld), *gb = h_of_bf(gb_, (size_t)N * ld);
        T_CHECK(!memcmp(ga, gb, (size_t)N * ld * 4), "linear_bwd dW=NULL (ldx=%d): dx has the bits of the full call",
                ld);
        CU->free(ga_), CU->free(gb_), CU->free(gW2_), free(ga), free(gb);
    }
    CU->free(gW_), CU->free(gy_), CU->free(dxw_), CU->free(dW_), CU->free(db_), CU->free(dy_), CU->free(dres_);
    free(x), free(W), free(bias), free(res), free(xw), free(y_ref), free(y), free(gy), free(dW0), free(dB0), free(dx0);
    free(gW), free(dW_ref);
}

// ---- embedding ----
static void test_embed(int N, int d, int NV) {
    int32_t *ids = kda_malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; i++) // skewed: a few very frequent ids, like real text
        ids[i] = kda_rng_uniform(&RNG) < 0.3 ? (int)kda_rng_below(&RNG, 3) : (int)kda_rng_below(&RNG, NV);
    float *E = h_randn_bf((size_t)NV * d, 0.02), *out_ref = h_randn((size_t)N * d, 1);
    CPU->embed_fwd(ids, E, out_ref, N, d, NV);
    int32_t *ids_ = CU->alloc(N * sizeof(int32_t));
    CU->to_device(ids_, ids, N * sizeof(int32_t));
    void *E_ = d_bf(E, (size_t)NV * d), *out_ = d_bf_nan((size_t)N * d);
    CU->embed_fwd(ids_, E_, out_, N, d, NV);
    float *out = h_of_bf(out_, (size_t)N * d);
    T_CHECK(rel_vs(out, out_ref, (size_t)N * d) == 0.0, "embed_fwd N=%d d=%d NV=%d exact", N, d, NV);

    float *g = h_randn_bf((size_t)N * d, 1.0), *dE0 = h_randn((size_t)NV * d, 1.0);
    float *dE_ref = h_copy(dE0, (size_t)NV * d);
    CPU->embed_bwd(ids, g, dE_ref, N, d);
    void *g_ = d_bf(g, (size_t)N * d);
    float *dE_ = d_f32(dE0, (size_t)NV * d), *dE2_ = d_f32(dE0, (size_t)NV * d);
    CU->embed_bwd(ids_, g_, dE_, N, d);
    CU->embed_bwd(ids_, g_, dE2_, N, d);
    float *dE = h_of_f32(dE_, (size_t)NV * d), *dE2 = h_of_f32(dE2_, (size_t)NV * d);
    CHECK_REL("embed_bwd dE (+=)", dE, dE_ref, (size_t)NV * d, 1e-5);
    T_CHECK(!memcmp(dE, dE2, (size_t)NV * d * 4), "embed_bwd twice on the same input: bitwise identical");
    CU->free(ids_), CU->free(E_), CU->free(out_), CU->free(g_), CU->free(dE_), CU->free(dE2_);
    free(ids), free(E), free(out_ref), free(out), free(g), free(dE0), free(dE_ref), free(dE), free(dE2);
}

// ---- fused linear cross-entropy and logits ----
static void test_lm_head(int N, int d, int NV) {
    char nm[96];
    float *x = h_randn_bf((size_t)N * d, 1.0), *E = h_randn_bf((size_t)NV * d, 0.1);
    int32_t *tg = kda_malloc(N * sizeof(int32_t));
    for (int i = 0; i < N; i++) tg[i] = (i % 17 == 5) ? -100 : (int)kda_rng_below(&RNG, NV);
    float gs = 1.0f / N;
    float *dx_ref = h_randn((size_t)N * d, 1), *dE0 = h_randn((size_t)NV * d, 0.01);
    float *dE_ref = h_copy(dE0, (size_t)NV * d);
    long nv_ref = 0, nv = 0, nv2 = 0;
    double loss_ref = CPU->lm_head_ce(x, E, tg, N, d, NV, gs, dx_ref, dE_ref, &nv_ref);
    int32_t *tg_ = CU->alloc(N * sizeof(int32_t));
    CU->to_device(tg_, tg, N * sizeof(int32_t));
    void *x_ = d_bf(x, (size_t)N * d), *E_ = d_bf(E, (size_t)NV * d), *dx_ = d_bf_nan((size_t)N * d);
    float *dE_ = d_f32(dE0, (size_t)NV * d);
    double loss = CU->lm_head_ce(x_, E_, tg_, N, d, NV, gs, dx_, dE_, &nv);
    double loss_fwd = CU->lm_head_ce(x_, E_, tg_, N, d, NV, gs, NULL, NULL, &nv2);
    float *dx = h_of_bf(dx_, (size_t)N * d), *dE = h_of_f32(dE_, (size_t)NV * d);
    snprintf(nm, sizeof nm, "lm_head_ce N=%d d=%d NV=%d: loss", N, d, NV);
    T_REL(nm, fabs(loss - loss_ref) / loss_ref, 2e-3);
    T_CHECK(nv == nv_ref && nv2 == nv_ref, "lm_head_ce n_valid %ld (fwd-only %ld) == CPU %ld", nv, nv2, nv_ref);
    T_CHECK(loss_fwd == loss, "lm_head_ce forward-only loss equals the training loss (%.9g vs %.9g)", loss_fwd, loss);
    CHECK_REL("lm_head_ce dx", dx, dx_ref, (size_t)N * d, 1e-2);
    for (size_t i = 0; i < (size_t)NV * d; i++) dE[i] -= dE0[i], dE_ref[i] -= dE0[i];
    CHECK_REL("lm_head_ce dE (the += part)", dE, dE_ref, (size_t)NV * d, 1e-2);
    // which row kernel is the default: on a native Hopper-or-later build, the cluster of two
    const char *ds = CU->describe();
    int native_hopper = strstr(ds, "native sm_9") || strstr(ds, "native sm_10") || strstr(ds, "native sm_12");
    T_CHECK(!native_hopper || strstr(ds, "cross-entropy rows: a cluster of two"),
            "lm_head_ce: the row kernel on this GPU and build (%s)", strstr(ds, "cross-entropy rows"));
    { // the row kernels: the default (on Hopper a cluster of two blocks a row, one exponential a
        // logit with p kept as fp16), the on-chip one (KDA_CE_CLUSTER=0) and the two-pass one
        // (KDA_CE_TWO_PASS=1). The last two sum in the same order: the same bits; the default
        // again: its own bits (deterministic); the default against the on-chip kernel: within
        // rounding (another order of summation, p rounded)
        // (both variables set for each, whatever the run's own environment says)
        const char *cluster[3] = {"1", "0", "1"}, *two_pass[3] = {"0", "0", "1"};
        double lk[3];
        float *dxk[3], *dEk[3];
        for (int k = 0; k < 3; k++) {
            float *dEb_ = d_f32(dE0, (size_t)NV * d);
            void *dxb_ = d_bf_nan((size_t)N * d);
            env_saved ec = env_set("KDA_CE_CLUSTER", cluster[k]), et = env_set("KDA_CE_TWO_PASS", two_pass[k]);
            lk[k] = CU->lm_head_ce(x_, E_, tg_, N, d, NV, gs, dxb_, dEb_, NULL);
            env_restore(&et), env_restore(&ec);
            dxk[k] = h_of_bf(dxb_, (size_t)N * d), dEk[k] = h_of_f32(dEb_, (size_t)NV * d);
            for (size_t e = 0; e < (size_t)NV * d; e++) dEk[k][e] -= dE0[e];
            CU->free(dEb_), CU->free(dxb_);
        }
        T_CHECK(
            lk[1] == lk[2] && !memcmp(dxk[1], dxk[2], (size_t)N * d * 4) && !memcmp(dEk[1], dEk[2], (size_t)NV * d * 4),
            "lm_head_ce N=%d NV=%d: the on-chip and two-pass row kernels give the same loss, dx and dE bits", N, NV);
        T_CHECK(lk[0] == loss && !memcmp(dxk[0], dx, (size_t)N * d * 4) && !memcmp(dEk[0], dE, (size_t)NV * d * 4),
                "lm_head_ce N=%d NV=%d: the default row kernel twice: the same loss, dx and dE bits", N, NV);
        T_REL("  default vs on-chip row kernel: loss", fabs(lk[0] - lk[1]) / fabs(lk[1]), 1e-6);
        CHECK_REL("  default vs on-chip row kernel: dx", dxk[0], dxk[1], (size_t)N * d, 2e-3);
        CHECK_REL("  default vs on-chip row kernel: dE", dEk[0], dEk[1], (size_t)NV * d, 2e-3);
        for (int k = 0; k < 3; k++) free(dxk[k]), free(dEk[k]);
    }

    float *lg_ref = h_randn((size_t)N * NV, 1);
    CPU->lm_head_logits(x, E, lg_ref, N, d, NV);
    float *lg_ = d_f32_nan((size_t)N * NV);
    CU->lm_head_logits(x_, E_, lg_, N, d, NV);
    float *lg = h_of_f32(lg_, (size_t)N * NV);
    CHECK_REL("lm_head_logits (fp32 out)", lg, lg_ref, (size_t)N * NV, 1e-4);
    CU->free(tg_), CU->free(x_), CU->free(E_), CU->free(dx_), CU->free(dE_), CU->free(lg_);
    free(x), free(E), free(tg), free(dx_ref), free(dE0), free(dE_ref), free(dx), free(dE), free(lg_ref), free(lg);
}

// ---- norms ----
static void test_rmsnorm(int N, int d) {
    char nm[96];
    float *x = h_randn_bf((size_t)N * d, 2.0), *w = h_randn(d, 1.0); // fp32: ops.h role S
    float *y_ref = h_randn((size_t)N * d, 1), *r_ref = h_randn(N, 1);
    CPU->rmsnorm_fwd(x, w, y_ref, r_ref, N, d, 1e-6f);
    void *x_ = d_bf(x, (size_t)N * d), *w_ = d_f32(w, d), *y_ = d_bf_nan((size_t)N * d);
    float *r_ = d_f32_nan(N);
    CU->rmsnorm_fwd(x_, w_, y_, r_, N, d, 1e-6f);
    float *y = h_of_bf(y_, (size_t)N * d), *r = h_of_f32(r_, N);
    snprintf(nm, sizeof nm, "rmsnorm_fwd N=%d d=%d: y", N, d);
    CHECK_REL(nm, y, y_ref, (size_t)N * d, 5e-3);
    CHECK_REL("rmsnorm_fwd rstd", r, r_ref, N, 1e-5);
    float *g = h_randn_bf((size_t)N * d, 1.0), *dx0 = h_randn_bf((size_t)N * d, 1.0), *dw0 = h_randn(d, 1.0);
    for (int acc = 0; acc <= 1; acc++) {
        float *dx_ref = h_copy(dx0, (size_t)N * d), *dw_ref = h_copy(dw0, d);
        CPU->rmsnorm_bwd(x, w, r_ref, g, dx_ref, dw_ref, NULL, N, d, acc);
        void *g_ = d_bf(g, (size_t)N * d), *dx_ = acc ? d_bf(dx0, (size_t)N * d) : d_bf_nan((size_t)N * d);
        float *dw_ = d_f32(dw0, d);
        void *yb_ = acc ? d_bf_nan((size_t)N * d) : NULL; // with accumulate, the forward's y rewritten too
        CU->rmsnorm_bwd(x_, w_, r_, g_, dx_, dw_, yb_, N, d, acc);
        float *dx = h_of_bf(dx_, (size_t)N * d), *dw = h_of_f32(dw_, d);
        snprintf(nm, sizeof nm, "rmsnorm_bwd dx (accumulate=%d)", acc);
        CHECK_REL(nm, dx, dx_ref, (size_t)N * d, 1e-2);
        CHECK_REL("rmsnorm_bwd dw (+=)", dw, dw_ref, d, 1e-4);
        if (yb_) {
            float *yb = h_of_bf(yb_, (size_t)N * d);
            T_CHECK(!memcmp(yb, y, (size_t)N * d * 4), "rmsnorm_bwd N=%d d=%d: its y has rmsnorm_fwd's bits", N, d);
            CU->free(yb_), free(yb);
        }
        CU->free(g_), CU->free(dx_), CU->free(dw_);
        free(dx_ref), free(dw_ref), free(dx), free(dw);
    }
    CU->free(x_), CU->free(w_), CU->free(y_), CU->free(r_);
    free(x), free(w), free(y_ref), free(r_ref), free(y), free(r), free(g), free(dx0), free(dw0);
}

// The register kernels of rmsnorm_bwd (d = 256, 512, 1024) against the general 16-byte kernel
// (KDA_NORM_GENERIC=1) on the same inputs: the same products in the same orders, so equal up to
// the compiler's choice of fused multiply-adds (printed: whether the bits are equal too).
static void test_rmsnorm_bwd_kernels_agree(int N, int d) {
    size_t n = (size_t)N * d;
    float *x = h_randn_bf(n, 2.0), *w = h_randn(d, 1.0), *g = h_randn_bf(n, 1.0), *r = h_randn(N, 0.2);
    for (int i = 0; i < N; i++) r[i] = 1.0f + fabsf(r[i]);
    void *x_ = d_bf(x, n), *g_ = d_bf(g, n), *w_ = d_f32(w, d), *r_ = d_f32(r, N);
    float *dx[2], *dw[2], *y[2];
    for (int k = 0; k < 2; k++) {
        env_saved e = env_set("KDA_NORM_GENERIC", k ? "1" : "0");
        void *dx_ = d_bf_nan(n), *y_ = d_bf_nan(n);
        float *dw_ = d_f32_nan(d);
        CU->zero(dw_, (size_t)d * 4);
        CU->rmsnorm_bwd(x_, w_, r_, g_, dx_, dw_, y_, N, d, 0);
        dx[k] = h_of_bf(dx_, n), dw[k] = h_of_f32(dw_, d), y[k] = h_of_bf(y_, n);
        CU->free(dx_), CU->free(y_), CU->free(dw_);
        env_restore(&e);
    }
    char nm[96];
    snprintf(nm, sizeof nm, "rmsnorm_bwd %dx%d registers vs generic: dx", N, d);
    CHECK_REL(nm, dx[0], dx[1], n, 4e-3);
    CHECK_REL("  dw", dw[0], dw[1], d, 1e-6);
    T_CHECK(!memcmp(y[0], y[1], n * 4), "  y: the same bits");
    printf("  (dx %s, dw %s to the bit)\n", memcmp(dx[0], dx[1], n * 4) ? "differs" : "equal",
           memcmp(dw[0], dw[1], (size_t)d * 4) ? "differs" : "equal");
    for (int k = 0; k < 2; k++) free(dx[k]), free(dw[k]), free(y[k]);
    CU->free(x_), CU->free(g_), CU->free(w_), CU->free(r_), free(x), free(w), free(g), free(r);
}

static void test_gated_rmsnorm(int rows, int V) {
    char nm[96];
    size_t n = (size_t)rows * V;
    float *o = h_randn_bf(n, 1.5), *u = h_randn_bf(n, 2.0), *w = h_randn(V, 1.0); // fp32: ops.h role S
    float *y_ref = h_randn(n, 1), *r_ref = h_randn(rows, 1);
    CPU->gated_rmsnorm_fwd(o, u, w, y_ref, r_ref, rows, V, 1e-6f);
    void *o_ = d_bf(o, n), *u_ = d_bf(u, n), *w_ = d_f32(w, V), *y_ = d_bf_nan(n);
    float *r_ = d_f32_nan(rows);
    CU->gated_rmsnorm_fwd(o_, u_, w_, y_, r_, rows, V, 1e-6f);
    float *y = h_of_bf(y_, n), *r = h_of_f32(r_, rows);
    snprintf(nm, sizeof nm, "gated_rmsnorm_fwd rows=%d V=%d: y", rows, V);
    CHECK_REL(nm, y, y_ref, n, 5e-3);
    CHECK_REL("gated_rmsnorm_fwd rstd", r, r_ref, rows, 1e-5);
    float *g = h_randn_bf(n, 1.0), *dw0 = h_randn(V, 1.0);
    float *do_ref = h_randn(n, 1), *du_ref = h_randn(n, 1), *dw_ref = h_copy(dw0, V);
    CPU->gated_rmsnorm_bwd(o, u, w, r_ref, g, do_ref, du_ref, dw_ref, NULL, rows, V);
    void *g_ = d_bf(g, n), *do_ = d_bf_nan(n), *du_ = d_bf_nan(n), *yb_ = d_bf_nan(n);
    float *dw_ = d_f32(dw0, V), *rr_ = d_f32(r_ref, rows);
    CU->gated_rmsnorm_bwd(o_, u_, w_, r_, g_, do_, du_, dw_, yb_, rows, V);
    float *d_o = h_of_bf(do_, n), *du = h_of_bf(du_, n), *dw = h_of_f32(dw_, V), *yb = h_of_bf(yb_, n);
    CHECK_REL("gated_rmsnorm_bwd d_o", d_o, do_ref, n, 1e-2);
    CHECK_REL("gated_rmsnorm_bwd du", du, du_ref, n, 1e-2);
    CHECK_REL("gated_rmsnorm_bwd dw (+=)", dw, dw_ref, V, 1e-4);
    T_CHECK(!memcmp(yb, y, n * 4), "gated_rmsnorm_bwd rows=%d V=%d: its y has gated_rmsnorm_fwd's bits", rows, V);
    // without y, from the CPU's rstd: the same gradients to rounding
    float *dw2_ = d_f32(dw0, V);
    CU->gated_rmsnorm_bwd(o_, u_, w_, rr_, g_, do_, du_, dw2_, NULL, rows, V);
    float *d_o2 = h_of_bf(do_, n);
    CHECK_REL("gated_rmsnorm_bwd d_o (y NULL)", d_o2, do_ref, n, 1e-2);
    CU->free(yb_), CU->free(dw2_), free(yb), free(d_o2);
    CU->free(o_), CU->free(u_), CU->free(w_), CU->free(y_), CU->free(r_), CU->free(g_), CU->free(do_);
    CU->free(du_), CU->free(dw_), CU->free(rr_);
    free(o), free(u), free(w), free(y_ref), free(r_ref), free(y), free(r), free(g), free(dw0), free(do_ref);
    free(du_ref), free(dw_ref), free(d_o), free(du), free(dw);
}

// ---- short conv ----
// x (and dx) as the last C columns of [B·T, ld] rows (ld = C: packed)
static void test_conv(int B, int T, int C, int W, int ld) {
    char nm[112];
    int c0 = ld - C, ok;
    size_t n = (size_t)B * T * C, nw = (size_t)B * T * ld;
    float *x = h_randn_bf(n, 1.0), *w = h_randn((size_t)C * W, 0.5) /* fp32: ops.h role S */, *y_ref = h_randn(n, 1);
    float *xw = h_widen(x, B * T, C, ld, c0, NAN);
    conv_fwd1(CPU, x, C, w, y_ref, B, T, C, W);
    void *xw_ = d_bf(xw, nw), *x_ = BF_AT(xw_, c0), *w_ = d_f32(w, (size_t)C * W), *y_ = d_bf_nan(n);
    conv_fwd1(CU, x_, ld, w_, y_, B, T, C, W);
    float *y = h_of_bf(y_, n);
    snprintf(nm, sizeof nm, "conv_silu_fwd B=%d T=%d C=%d W=%d ldx=%d", B, T, C, W, ld);
    CHECK_REL(nm, y, y_ref, n, 5e-3);
    float *g = h_randn_bf(n, 1.0), *dx_ref = h_randn(n, 1), *dw0 = h_randn((size_t)C * W, 1.0);
    float *dw_ref = h_copy(dw0, (size_t)C * W);
    conv_bwd1(CPU, x, C, w, g, dx_ref, dw_ref, B, T, C, W);
    void *g_ = d_bf(g, n), *dxw_ = d_bf_nan(nw);
    float *dw_ = d_f32(dw0, (size_t)C * W);
    conv_bwd1(CU, x_, ld, w_, g_, BF_AT(dxw_, c0), dw_, B, T, C, W);
    float *dxw = h_of_bf(dxw_, nw), *dx = h_cols(dxw, B * T, C, ld, c0, &ok), *dw = h_of_f32(dw_, (size_t)C * W);
    CHECK_REL("conv_silu_bwd dx", dx, dx_ref, n, 1e-2);
    T_CHECK(ok, "conv_silu_bwd (ldx=%d): nothing written outside dx's columns", ld);
    CHECK_REL("conv_silu_bwd dw (+=)", dw, dw_ref, (size_t)C * W, 1e-4);
    // again from the same dw: the same bits (fixed-order dw partials)
    float *dw2_ = d_f32(dw0, (size_t)C * W);
    void *dx2_ = d_bf_nan(nw);
    conv_bwd1(CU, x_, ld, w_, g_, BF_AT(dx2_, c0), dw2_, B, T, C, W);
    float *dx2 = h_of_bf(dx2_, nw), *dw2 = h_of_f32(dw2_, (size_t)C * W);
    T_CHECK(!memcmp(dx2, dxw, nw * 4) && !memcmp(dw2, dw, (size_t)C * W * 4),
            "conv_silu_bwd C=%d W=%d: bitwise repeatable", C, W);
    CU->free(dw2_), CU->free(dx2_), free(dx2), free(dw2);
    CU->free(xw_), CU->free(w_), CU->free(y_), CU->free(g_), CU->free(dxw_), CU->free(dw_);
    free(x), free(xw), free(w), free(y_ref), free(y), free(g), free(dx_ref), free(dw0), free(dw_ref), free(dxw);
    free(dx), free(dw);
}

// The W = 4 forward's kernels by shape, bit for bit: three groups at columns c[0..2] of a buffer
// of pitch ld (aligned 16-byte rows: the stream kernel) against the same values at pitch ld + 1
// (odd: the element kernel, a launch a group); y NaN-poisoned, so every element must be written.
static void test_conv_fwd_bits(int B, int T, const int C[3], int ld) {
    enum { W = 4 };
    int col[3] = {0, C[0], C[0] + C[1]}, same = 1, lds[2] = {ld, ld + 1};
    size_t rows = (size_t)B * T;
    float *xv = h_randn_bf(rows * ld, 1.0), *xo = h_widen(xv, (int)rows, ld, ld + 1, 0, 0.0f);
    void *x_[2] = {d_bf(xv, rows * ld), d_bf(xo, rows * (ld + 1))}, *y_[2][3], *w_[3];
    for (int i = 0; i < 3; i++) {
        float *w = h_randn((size_t)C[i] * W, 0.5);
        w_[i] = d_f32(w, (size_t)C[i] * W);
        for (int v = 0; v < 2; v++) y_[v][i] = d_bf_nan(rows * C[i]);
        free(w);
    }
    for (int v = 0; v < 2; v++) {
        kda_conv_group g[3];
        for (int i = 0; i < 3; i++) g[i] = (kda_conv_group){col[i], C[i], w_[i], y_[v][i], NULL, NULL};
        CU->conv_silu_fwd(x_[v], lds[v], g, 3, B, T, W);
    }
    for (int i = 0; i < 3; i++) {
        size_t n = rows * C[i];
        float *ya = h_of_bf(y_[0][i], n), *yb = h_of_bf(y_[1][i], n);
        int written = 1;
        for (size_t e = 0; e < n; e++) written &= !isnan(ya[e]);
        same &= written && !memcmp(ya, yb, n * 4);
        free(ya), free(yb);
        for (int v = 0; v < 2; v++) CU->free(y_[v][i]);
        CU->free(w_[i]);
    }
    T_CHECK(same, "conv_silu_fwd W=4 B=%d T=%d C=%d,%d,%d: the stream kernel (pitch %d) has the element kernel's bits",
            B, T, C[0], C[1], C[2], ld);
    CU->free(x_[0]), CU->free(x_[1]);
    free(xv), free(xo);
}

// Three channel groups in one call (the model's q, k, v: columns c[0..2] of an input of pitch ld,
// widths C[0..2]) against one call a group: the same bits (forward y, backward dx and dw), and
// nothing written outside the groups' columns of dx.
static void test_conv_groups(int B, int T, const int C[3], int W, int ld) {
    int col[3] = {0, C[0], C[0] + C[1]}, ok = 1;
    size_t nw = (size_t)B * T * ld;
    float *xw = h_randn_bf(nw, 1.0);
    void *x_ = d_bf(xw, nw), *dxa_ = d_bf_nan(nw), *dxb_ = d_bf_nan(nw);
    kda_conv_group ga[3], gb[3];
    void *w_[3], *ya_[3], *yb_[3], *dy_[3];
    float *dwa_[3], *dwb_[3], *dwc0_[3];
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)B * T * C[i];
        float *w = h_randn((size_t)C[i] * W, 0.5), *dy = h_randn_bf(n, 1.0), *dw0 = h_randn((size_t)C[i] * W, 1.0);
        w_[i] = d_f32(w, (size_t)C[i] * W), dy_[i] = d_bf(dy, n), ya_[i] = d_bf_nan(n), yb_[i] = d_bf_nan(n);
        dwa_[i] = d_f32(dw0, (size_t)C[i] * W), dwb_[i] = d_f32(dw0, (size_t)C[i] * W);
        dwc0_[i] = d_f32(dw0, (size_t)C[i] * W); // the starting dw, kept
        ga[i] = (kda_conv_group){col[i], C[i], w_[i], ya_[i], dy_[i], dwa_[i]};
        gb[i] = (kda_conv_group){col[i], C[i], w_[i], yb_[i], dy_[i], dwb_[i]};
        free(w), free(dy), free(dw0);
    }
    CU->conv_silu_fwd(x_, ld, ga, 3, B, T, W);
    CU->conv_silu_bwd(x_, ld, dxa_, ga, 3, B, T, W);
    for (int i = 0; i < 3; i++) {
        CU->conv_silu_fwd(x_, ld, &gb[i], 1, B, T, W);
        CU->conv_silu_bwd(x_, ld, dxb_, &gb[i], 1, B, T, W);
    }
    float *dxa = h_of_bf(dxa_, nw), *dxb = h_of_bf(dxb_, nw);
    int same = !memcmp(dxa, dxb, nw * 4), end = col[2] + C[2];
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = end; j < ld; j++) ok &= isnan(dxa[r * ld + j]);
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)B * T * C[i], nwc = (size_t)C[i] * W;
        float *ya = h_of_bf(ya_[i], n), *yb = h_of_bf(yb_[i], n);
        float *dwa = h_of_f32(dwa_[i], nwc), *dwb = h_of_f32(dwb_[i], nwc);
        same &= !memcmp(ya, yb, n * 4) && !memcmp(dwa, dwb, nwc * 4);
        // against the CPU on the group's columns (the same bf16 inputs)
        float *w = h_of_f32(w_[i], nwc), *dy = h_of_bf(dy_[i], n), *y_ref = h_randn(n, 1);
        // dx has x's row pitch ld: the CPU writes the group's columns of a full-width buffer
        float *dxw_ref = h_randn(nw, 1), *dw_ref = h_of_f32(dwb_[i], nwc);
        float *dx = kda_malloc(n * 4), *dx_ref = kda_malloc(n * 4);
        for (size_t e = 0; e < nwc; e++) dw_ref[e] = 0.0f;
        conv_fwd1(CPU, xw + col[i], ld, w, y_ref, B, T, C[i], W);
        conv_bwd1(CPU, xw + col[i], ld, w, dy, dxw_ref + col[i], dw_ref, B, T, C[i], W);
        for (size_t r = 0; r < (size_t)B * T; r++) {
            memcpy(dx + r * C[i], dxa + r * ld + col[i], (size_t)C[i] * 4);
            memcpy(dx_ref + r * C[i], dxw_ref + r * ld + col[i], (size_t)C[i] * 4);
        }
        float *dw0 = h_of_f32(dwc0_[i], nwc);
        for (size_t e = 0; e < nwc; e++) dwa[e] -= dw0[e];
        char nm[96];
        snprintf(nm, sizeof nm, "conv groups: group %d (col %d, C %d) y vs CPU", i, col[i], C[i]);
        CHECK_REL(nm, ya, y_ref, n, 5e-3);
        CHECK_REL("  dx vs CPU", dx, dx_ref, n, 1e-2);
        CHECK_REL("  dw (the += part) vs CPU", dwa, dw_ref, nwc, 1e-4);
        free(w), free(dy), free(y_ref), free(dx_ref), free(dxw_ref), free(dw_ref), free(dx), free(dw0);
        CU->free(dwc0_[i]);
        free(ya), free(yb), free(dwa), free(dwb);
        CU->free(w_[i]), CU->free(ya_[i]), CU->free(yb_[i]), CU->free(dy_[i]), CU->free(dwa_[i]), CU->free(dwb_[i]);
    }
    T_CHECK(same, "conv groups %d,%d,%d (ldx=%d, W=%d) in one call: a call a group's bits", C[0], C[1], C[2], ld, W);
    T_CHECK(ok, "conv groups in one call: nothing written outside the groups' columns of dx");
    CU->free(x_), CU->free(dxa_), CU->free(dxb_), free(xw), free(dxa), free(dxb);
}

// ---- SwiGLU ----
// F % 8 == 0: the 16-byte path on aligned buffers; then every call again one element off alignment
// (the element-by-element path): the same bits.
static void test_swiglu(int N, int F) {
    size_t n = (size_t)N * F, n2 = 2 * n, ld = (size_t)F + 8;
    float *g = h_randn_bf(n, 2.0), *u = h_randn_bf(n, 1.0), *gu = gu_pack(g, u, N, F), *z_ref = h_randn(n, 1);
    CPU->swiglu_fwd(gu, z_ref, N, F);
    void *gu_ = d_bf(gu, n2), *z_ = d_bf_nan(n);
    CU->swiglu_fwd(gu_, z_, N, F);
    float *z = h_of_bf(z_, n);
    CHECK_REL("swiglu_fwd", z, z_ref, n, 5e-3);
    // dz as the columns of a wider matrix (rows ld apart)
    float *dz = h_randn_bf(n, 1.0), *dzw = h_randn(N * ld, 1), *dgu_ref = h_randn(n2, 1);
    for (int r = 0; r < N; r++) memcpy(dzw + (size_t)r * ld, dz + (size_t)r * F, (size_t)F * 4);
    CPU->swiglu_bwd(gu, dzw, (int)ld, dgu_ref, NULL, N, F);
    void *dzw_ = d_bf(dzw, N * ld), *dgu_ = d_bf_nan(n2), *zb_ = d_bf_nan(n);
    CU->swiglu_bwd(gu_, dzw_, (int)ld, dgu_, NULL, N, F);
    float *dgu = h_of_bf(dgu_, n2);
    CHECK_REL("swiglu_bwd (dgate | dup)", dgu, dgu_ref, n2, 1e-2);
    // with z: the forward's bits, and the gradients unchanged
    CU->swiglu_bwd(gu_, dzw_, (int)ld, dgu_, zb_, N, F);
    float *zb = h_of_bf(zb_, n), *dgu2 = h_of_bf(dgu_, n2);
    T_CHECK(!memcmp(zb, z, n * 4) && !memcmp(dgu2, dgu, n2 * 4), "swiglu_bwd %dx%d: its z has swiglu_fwd's bits", N, F);
    { // in place, as the model calls it: dgu over gu, z over dz (rows F apart): the same bits
        void *io_ = d_bf(gu, n2), *iz_ = d_bf(dz, n);
        CU->swiglu_bwd(io_, iz_, F, io_, iz_, N, F);
        float *got = h_of_bf(io_, n2), *gz = h_of_bf(iz_, n);
        T_CHECK(!memcmp(got, dgu, n2 * 4) && !memcmp(gz, z, n * 4),
                "swiglu_bwd %dx%d in place (dgu over gu, z over dz): the same bits", N, F);
        CU->free(io_), CU->free(iz_), free(got), free(gz);
    }
    { // every buffer one element off 16-byte alignment: the element-by-element path
        void *gu1_ = d_bf_nan(n2 + 1), *dz1_ = d_bf_nan(N * ld + 1), *z1_ = d_bf_nan(n + 1), *dgu1_ = d_bf_nan(n2 + 1);
        void *zb1_ = d_bf_nan(n + 1);
        CU->copy(BF_AT(gu1_, 1), gu_, n2 * 2);
        CU->copy(BF_AT(dz1_, 1), dzw_, N * ld * 2);
        CU->swiglu_fwd(BF_AT(gu1_, 1), BF_AT(z1_, 1), N, F);
        CU->swiglu_bwd(BF_AT(gu1_, 1), BF_AT(dz1_, 1), (int)ld, BF_AT(dgu1_, 1), BF_AT(zb1_, 1), N, F);
        float *z1 = h_of_bf(z1_, n + 1), *zb1 = h_of_bf(zb1_, n + 1), *dgu1 = h_of_bf(dgu1_, n2 + 1);
        T_CHECK(!memcmp(z1 + 1, z, n * 4) && !memcmp(zb1 + 1, z, n * 4) && !memcmp(dgu1 + 1, dgu, n2 * 4),
                "swiglu %dx%d on unaligned pointers: the aligned path's bits", N, F);
        CU->free(gu1_), CU->free(dz1_), CU->free(z1_), CU->free(dgu1_), CU->free(zb1_), free(z1), free(zb1), free(dgu1);
    }
    CU->free(gu_), CU->free(z_), CU->free(dzw_), CU->free(dgu_), CU->free(zb_);
    free(g), free(u), free(gu), free(z_ref), free(z), free(dz), free(dzw), free(dgu_ref), free(dgu), free(zb),
        free(dgu2);
}

// ---- optimizer ----
static void test_optimizer(size_t n) {
    float *g = h_randn(n, 0.3);
    float *g_ = d_f32(g, n);
    double s_ref = CPU->sumsq(g, n), s = CU->sumsq(g_, n);
    T_REL("sumsq", fabs(s - s_ref) / s_ref, 1e-9);
    T_CHECK(CU->sumsq(g_, n) == s, "sumsq twice: identical");
    float bad[2] = {INFINITY, NAN};
    for (int i = 0; i < 2; i++) { // the optimizer step's non-finite check is Σg² itself
        size_t at = kda_rng_below(&RNG, n);
        float keep = g[at];
        CU->to_device(g_ + at, &bad[i], 4);
        T_CHECK(!isfinite(CU->sumsq(g_, n)), "sumsq with %s at %zu of %zu: not finite", i ? "NaN" : "inf", at, n);
        CU->to_device(g_ + at, &keep, 4);
    }
    // AdamW: master p, bf16 working copy, moments
    float *p = h_randn(n, 0.05), *m = h_randn(n, 0.01), *v = h_randn(n, 0.01);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *p_ = d_f32(p, n), *m_ = d_f32(m, n), *v_ = d_f32(v, n);
    void *w_ = d_bf_nan(n);
    float *wr = h_randn(n, 1);
    kda_adamw_seg seg = {0, n, 0.01f}; // one tensor: gscale 0.37 exercises the clip
    CU->adamw_multi(p_, w_, g_, m_, v_, &seg, 1, 0.37f, 2e-4f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.0975f);
    CPU->adamw_multi(p, wr, g, m, v, &seg, 1, 0.37f, 2e-4f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.0975f);
    float *pp = h_of_f32(p_, n), *mm = h_of_f32(m_, n), *vv = h_of_f32(v_, n), *ww = h_of_bf(w_, n);
    CHECK_REL("adamw master p", pp, p, n, 1e-6);
    CHECK_REL("adamw m", mm, m, n, 1e-6);
    CHECK_REL("adamw v", vv, v, n, 1e-6);
    CHECK_REL("adamw bf16 working copy", ww, h_bf(wr, n), n, 5e-3);
    void *w2_ = d_bf_nan(n);
    CU->master_to_work(p_, w2_, n);
    float *w2 = h_of_bf(w2_, n);
    T_CHECK(!memcmp(w2, ww, n * 4), "master_to_work equals the working copy adamw_multi wrote");
    CU->free(g_), CU->free(p_), CU->free(m_), CU->free(v_), CU->free(w_), CU->free(w2_);
    free(g), free(p), free(m), free(v), free(wr), free(pp), free(mm), free(vv), free(ww), free(w2);
}

// ---- AdamW over many tensors in one call (the model's flat buffers), sumsq's alignments
static void test_adamw_multi(void) {
    // segments: model-like (16-float aligned offsets, sizes with and without a 4-tail, one larger
    // than a work item), an offset not a multiple of 4 (the element-by-element path), gaps that
    // must stay untouched, a zero-length one
    size_t lens[] = {1024 * 1024 + 16, 5, 4096, 4097, 33, 0, 70001, 1, 8192 + 3};
    int nseg = (int)(sizeof lens / sizeof lens[0]);
    kda_adamw_seg segs[16];
    size_t N = 0;
    for (int i = 0; i < nseg; i++) {
        N += i == 4 ? 3 : 16; // a gap; segment 4 starts at an offset ≡ 3 (mod 4)
        if (i != 4) N = (N + 15) & ~(size_t)15;
        segs[i] = (kda_adamw_seg){N, lens[i], i % 3 == 1 ? 0.0f : 0.1f};
        N += lens[i];
    }
    N += 20;
    float *g = h_randn(N, 0.3), *p = h_randn(N, 0.05), *m = h_randn(N, 0.01), *v = h_randn(N, 0.01);
    for (size_t i = 0; i < N; i++) v[i] = fabsf(v[i]);
    for (int rep = 0; rep < 2; rep++) {
        float gscale = rep ? 0.37f : 1.0f;
        float *g_ = d_f32(g, N), *p_ = d_f32(p, N), *m_ = d_f32(m, N), *v_ = d_f32(v, N);
        void *w_ = d_bf_nan(N);
        float *gr = h_copy(g, N), *pr = h_copy(p, N), *mr = h_copy(m, N), *vr = h_copy(v, N);
        CU->adamw_multi(p_, w_, g_, m_, v_, segs, nseg, gscale, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.0975f);
        CPU->adamw_multi(pr, pr, gr, mr, vr, segs, nseg, gscale, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.0975f);
        float *pp = h_of_f32(p_, N), *mm = h_of_f32(m_, N), *vv = h_of_f32(v_, N), *ww = h_of_bf(w_, N);
        char name[64];
        snprintf(name, sizeof name, "adamw_multi p (gscale %.2f)", gscale);
        CHECK_REL(name, pp, pr, N, 1e-6);
        snprintf(name, sizeof name, "adamw_multi m (gscale %.2f)", gscale);
        CHECK_REL(name, mm, mr, N, 1e-6);
        snprintf(name, sizeof name, "adamw_multi v (gscale %.2f)", gscale);
        CHECK_REL(name, vv, vr, N, 1e-6);
        // w: written exactly on the segments (= bf16 of p), NaN elsewhere
        size_t bad = 0, seg_el = 0;
        for (int i = 0; i < nseg; i++) {
            for (size_t j = segs[i].offset; j < segs[i].offset + segs[i].n; j++) {
                float want = pp[j];
                h_bf(&want, 1);
                bad += !(ww[j] == want), seg_el++;
                ww[j] = NAN;
            }
        }
        T_CHECK(!bad, "adamw_multi: w = bf16(p) on all %zu segment elements (%zu differ)", seg_el, bad);
        T_CHECK(n_nonfinite(ww, N) == N, "adamw_multi: nothing written outside the segments (%zu written)",
                N - n_nonfinite(ww, N));
        size_t moved = 0;
        for (size_t i = 0; i < N; i++) moved += pp[i] != p[i] && pr[i] == p[i]; // gaps: untouched on both
        T_CHECK(!moved, "adamw_multi: gap elements of p unchanged (%zu changed)", moved);
        // the same call again from the same state: the same bits
        float *p2_ = d_f32(p, N), *m2_ = d_f32(m, N), *v2_ = d_f32(v, N), *g2_ = d_f32(g, N);
        void *w2_ = d_bf_nan(N);
        CU->adamw_multi(p2_, w2_, g2_, m2_, v2_, segs, nseg, gscale, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.271f, 0.0975f);
        float *p2 = h_of_f32(p2_, N);
        T_CHECK(!memcmp(p2, pp, N * 4), "adamw_multi: bitwise repeatable");
        CU->free(g_), CU->free(p_), CU->free(m_), CU->free(v_), CU->free(w_);
        CU->free(g2_), CU->free(p2_), CU->free(m2_), CU->free(v2_), CU->free(w2_);
        free(gr), free(pr), free(mr), free(vr), free(pp), free(mm), free(vv), free(ww), free(p2);
    }
    // sumsq: misaligned start (element path), short lengths, a 4-tail; inf -> non-finite sum
    float *g_ = d_f32(g, N);
    size_t cases[][2] = {{1, 100001}, {0, 3}, {2, 7}, {0, 4 * 1000 + 2}, {3, N - 3}};
    for (int c = 0; c < 5; c++) {
        size_t o = cases[c][0], n = cases[c][1];
        double s = CU->sumsq(g_ + o, n), r = CPU->sumsq(g + o, n);
        char name[64];
        snprintf(name, sizeof name, "sumsq at +%zu, n %zu", o, n);
        T_REL(name, fabs(s - r) / r, 1e-9);
    }
    float inf = INFINITY;
    CU->to_device(g_ + N / 2, &inf, 4);
    T_CHECK(!isfinite(CU->sumsq(g_, N)), "sumsq with an inf is not finite (the step's non-finite check)");
    CU->free(g_);
    free(g), free(p), free(m), free(v);
}

// ---- out of memory: message with the numbers and what to lower (fresh process: CUDA and fork do not mix)
static char self_path[4096];
static void oom_child(void *arg) {
    (void)arg;
    execl(self_path, self_path, "--oom", (char *)NULL);
}
static void run_oom(void) {
    const kda_ops *cu = kda_ops_cuda(NULL);
    if (cu) cu->alloc((size_t)1 << 50);
}

// The clock watch (ops.h clock_watch; NVML): over ~200 ms, either nothing (no NVML here) or
// samples with clocks and power a GPU can have.
static void test_clock_watch(void) {
    if (!CU->clock_watch) {
        T_CHECK(0, "clock_watch: the CUDA backend has one");
        return;
    }
    kda_clock_stats st;
    CU->clock_watch(1, NULL);
    usleep(200 * 1000);
    CU->clock_watch(0, &st);
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml) {
        T_CHECK(st.samples == 0, "clock_watch: no NVML here, no samples (%d)", st.samples);
        return;
    }
    dlclose(nvml);
    T_CHECK(st.samples >= 5 && st.sm_mhz_min > 0 && st.sm_mhz_min <= st.sm_mhz_median &&
                st.sm_mhz_median <= st.sm_mhz_max && st.sm_mhz_max < 5000,
            "clock_watch: %d samples, SM clock median %.0f MHz (min %.0f, max %.0f)", st.samples, st.sm_mhz_median,
            st.sm_mhz_min, st.sm_mhz_max);
    T_CHECK(st.power_w_median > 0 && st.power_w_median <= st.power_w_max && st.power_limit_w > 0 &&
                st.power_capped >= 0 && st.power_capped <= 1,
            "clock_watch: power median %.0f W (max %.0f, limit %.0f), power-capped %.0f%%", st.power_w_median,
            st.power_w_max, st.power_limit_w, 100 * st.power_capped);
    CU->clock_watch(0, &st); // stopping twice: nothing to report
    T_CHECK(st.samples == 0, "clock_watch: a second stop reports no samples");
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--oom")) {
        run_oom();
        return 0;
    }
    cu_test_start("test_cuda_ops");
    T_CHECK(!strcmp(CU->name, "cuda") && CU->act_bytes == 2 && CU->w_bytes == 2, "table: name cuda, bf16 A and W");
    test_linear(300, 256, 192, 1, 256, 0);
    test_linear(257, 96, 40, 0, 96, 0);
    test_linear(300, 256, 192, 0, 256, 1); // + a residual (o_proj, down_proj)
    test_linear(257, 64, 72, 1, 1160, 0);  // x = columns of the projection buffer (g_proj.1)
    test_linear(130, 64, 40, 0, 77, 1);    // an odd row pitch
    test_embed(3000, 256, 50);
    test_embed(700, 100, 5000);
    test_lm_head(300, 64, 1000);
    test_lm_head(777, 48, 50257);
    test_lm_head(70, 32, 128256); // the real vocabulary: rows kept on chip, 15 or 16 groups a thread
    test_lm_head(40, 32, 131072); // the most the on-chip and cluster kernels keep (16 groups every thread)
    test_lm_head(20, 16, 131080); // one group more: the two-pass kernel
    test_lm_head(33, 16, 50264);  // the cluster kernel's halves of unequal use (NV/8 odd: 6283 groups)
    if (getenv("KDA_CUDA_BIG")) test_lm_head(4500, 32, 128256); // several CE chunks at the real vocab
    test_rmsnorm(333, 1024);                                    // the register kernels (d = 1024, 512, 256)
    test_rmsnorm(77, 512);
    test_rmsnorm(2100, 256);
    test_rmsnorm_bwd_kernels_agree(4099, 1024);
    test_rmsnorm_bwd_kernels_agree(301, 256);
    test_rmsnorm(100, 200);
    test_rmsnorm(50, 100); // not a multiple of 8: the element-by-element kernels
    test_gated_rmsnorm(500, 64);
    test_gated_rmsnorm(77, 48);
    test_gated_rmsnorm(3001, 64); // rows not a multiple of the rows per block
    test_gated_rmsnorm(60, 36);   // not a multiple of 8
    test_conv(3, 100, 96, 4, 96);
    test_conv(2, 150, 300, 3, 300);
    test_conv(2, 70, 64, 3, 64);    // 16-byte path with the general window
    test_conv(2, 37, 258, 4, 258);  // C % 8 != 0: element forward; bf16-pair backward, T not a multiple of 16
    test_conv(2, 37, 260, 4, 260);  // 130 channel pairs (not a multiple of the backward block's 32)
    test_conv(1, 50, 33, 4, 33);    // odd C: element forward and backward
    test_conv(2, 70, 256, 4, 1152); // columns of the projection buffer: 16-byte and pair paths
    test_conv(2, 37, 64, 4, 98);    // even pitch, not a multiple of 8: element forward, pair backward
    test_conv(2, 37, 64, 4, 97);    // odd pitch: element forward and backward
    test_conv_groups(2, 70, (const int[]){256, 256, 512}, 4, 1160); // the 300M model's q, k, v columns
    test_conv_groups(2, 37, (const int[]){24, 40, 16}, 4, 88);      // 16-byte forward, pair backward
    test_conv_groups(1, 50, (const int[]){6, 10, 4}, 4, 26);        // element forward, pair backward
    test_conv_groups(1, 40, (const int[]){16, 8, 24}, 3, 48);       // the general window, 16-byte forward
    // the W = 4 stream forward against the element kernel (bits): whole and partial 64-step
    // blocks, T < 64, one step, the 300M columns
    test_conv_fwd_bits(2, 200, (const int[]){256, 256, 512}, 1160);
    test_conv_fwd_bits(3, 64, (const int[]){64, 64, 128}, 264);
    test_conv_fwd_bits(2, 37, (const int[]){24, 40, 16}, 88);
    test_conv_fwd_bits(2, 1, (const int[]){8, 16, 8}, 40);
    test_conv_fwd_bits(1, 65, (const int[]){8, 8, 16}, 32);
    test_swiglu(97, 1032); // the 16-byte path, and the element-by-element one on the same data
    test_swiglu(61, 37);   // F % 8 != 0: element by element only
    test_optimizer(1000003);
    test_adamw_multi();
    test_clock_watch();
    ssize_t k = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (k > 0) {
        self_path[k] = 0;
        t_child ch = t_run_child(oom_child, NULL);
        const char *words[] = {"out of GPU memory", "GiB", "free", "micro_batch_size", "seq_length", NULL};
        T_CHECK(t_died_saying(&ch, words), "alloc of 1 PiB dies with the numbers and what to lower: %.200s", ch.err);
    }
    return t_done("test_cuda_ops");
}
