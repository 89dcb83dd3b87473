// test_kda_core.c — the CPU KDA core (kda_core_cpu.c) against a float64 reference written
// here (l2norm + gate + β + the §3.1 recurrence, all in double):
//   1. forward of both algorithms vs the reference (partial chunks, chunk > T, chunk 1,
//      odd K, strong decay with softplus past its z > 20 branch);
//   2. recurrent vs chunked: output and every gradient; the forward from / to a state
//      (kda_core_fwd_state): final state vs the reference, a sequence split in two parts
//      (either form for either part) equals the whole;
//   3. gradients of both algorithms vs central finite differences of the reference
//      (realistic and strongly decaying gates);
//   4. every output written (NaN-poisoned first), dA_log / ddt_bias accumulate;
//   5. bit-identical results for 1, 2 and 3 OpenMP threads;
// then prints the chunked forward+backward time at the 300M layer shape.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/kda_core.h"
#include "test_util.h"

static kda_rng R;

typedef struct {
    float *q, *k, *v, *f, *b, *A_log, *dt_bias;
} core_in;
typedef struct {
    float *o, *saved, *dq, *dk, *dv, *df, *db, *dA_log, *ddt;
} core_out;

static size_t n_qk(const kda_core_dims *d) { return (size_t)d->B * d->T * d->H * d->K; }
static size_t n_v(const kda_core_dims *d) { return (size_t)d->B * d->T * d->H * d->V; }
static size_t n_b(const kda_core_dims *d) { return (size_t)d->B * d->T * d->H; }

static kda_core_dims dims(int B, int T, int H, int K, int V, int C, kda_core_algo algo) {
    kda_core_dims d = {
        .B = B, .T = T, .H = H, .K = K, .V = V, .chunk = C, .scale = (float)(1.0 / sqrt(K)), .algo = algo};
    return d;
}

static float *randn(size_t n, double mean, double sd) {
    float *x = kda_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(mean + sd * kda_rng_normal(&R));
    return x;
}
static float *poisoned(size_t n) {
    float *x = kda_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}
static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

// Realistic inputs: q/k/v/b ~ N(0,1), f ~ N(f_mean, f_sd), A_log = log U[1,16], dt_bias from
// the kda-model.md §4 init (softplus⁻¹ of dt log-uniform in [1e-3, 0.1]).
static core_in make_inputs(const kda_core_dims *d, double f_mean, double f_sd) {
    core_in in;
    in.q = randn(n_qk(d), 0, 1);
    in.k = randn(n_qk(d), 0, 1);
    in.v = randn(n_v(d), 0, 1);
    in.f = randn(n_qk(d), f_mean, f_sd);
    in.b = randn(n_b(d), 0, 1);
    in.A_log = kda_malloc(sizeof(float) * d->H);
    in.dt_bias = kda_malloc(sizeof(float) * d->H * d->K);
    for (int h = 0; h < d->H; h++) in.A_log[h] = (float)log(1 + 15 * kda_rng_uniform(&R));
    for (int i = 0; i < d->H * d->K; i++) {
        double u = kda_rng_uniform(&R), dt = exp(u * (log(0.1) - log(0.001)) + log(0.001));
        if (dt < 1e-4) dt = 1e-4;
        in.dt_bias[i] = (float)(dt + log(-expm1(-dt)));
    }
    return in;
}
static void free_inputs(core_in *in) {
    free(in->q), free(in->k), free(in->v), free(in->f), free(in->b), free(in->A_log), free(in->dt_bias);
}

// Forward (+ backward when dO != NULL) with every output NaN-poisoned first; dA_log / ddt
// start at zero (they accumulate).
static core_out run(const kda_core_dims *d, const core_in *in, const float *dO) {
    core_out r = {0};
    r.o = poisoned(n_v(d));
    r.saved = poisoned(kda_core_saved_floats(d));
    kda_core_fwd(d, in->q, in->k, in->v, in->f, in->b, in->A_log, in->dt_bias, r.o, r.saved);
    if (!dO) return r;
    r.dq = poisoned(n_qk(d)), r.dk = poisoned(n_qk(d)), r.dv = poisoned(n_v(d));
    r.df = poisoned(n_qk(d)), r.db = poisoned(n_b(d));
    r.dA_log = kda_calloc(d->H, sizeof(float));
    r.ddt = kda_calloc((size_t)d->H * d->K, sizeof(float));
    kda_core_bwd(d, in->q, in->k, in->v, in->f, in->b, in->A_log, in->dt_bias, r.saved, dO, r.dq, r.dk, r.dv, r.df,
                 r.db, r.dA_log, r.ddt);
    return r;
}
static void free_out(core_out *r) {
    free(r->o), free(r->saved), free(r->dq), free(r->dk), free(r->dv), free(r->df), free(r->db);
    free(r->dA_log), free(r->ddt);
}

// ---- float64 reference of the whole operator ------------------------------------------------

enum { IN_Q, IN_K, IN_V, IN_F, IN_B, IN_A, IN_DT, N_IN };
static const char *in_name[N_IN] = {"q_raw", "k_raw", "v", "f", "b_logit", "A_log", "dt_bias"};

static size_t in_size(const kda_core_dims *d, int i) {
    switch (i) {
    case IN_Q:
    case IN_K:
    case IN_F: return n_qk(d);
    case IN_V: return n_v(d);
    case IN_B: return n_b(d);
    case IN_A: return (size_t)d->H;
    default: return (size_t)d->H * d->K;
    }
}

// o [B,T,H,V] from double inputs x[N_IN]: l2norm, gate, β and the token recurrence in double.
// S_final (may be NULL): the state after the last token, [B,H,K,V].
static void ref_core_state(const kda_core_dims *d, double *const *x, double *o, double *S_final) {
    int T = d->T, H = d->H, K = d->K, V = d->V;
    double *S = kda_malloc(sizeof(double) * K * V), *q = kda_malloc(sizeof(double) * K);
    double *k = kda_malloc(sizeof(double) * K), *e = kda_malloc(sizeof(double) * V);
    for (int b = 0; b < d->B; b++)
        for (int h = 0; h < H; h++) {
            memset(S, 0, sizeof(double) * K * V);
            for (int t = 0; t < T; t++) {
                size_t rk = ((size_t)(b * T + t) * H + h) * K, rv = ((size_t)(b * T + t) * H + h) * V;
                double sq = 0, sk = 0;
                for (int j = 0; j < K; j++)
                    sq += x[IN_Q][rk + j] * x[IN_Q][rk + j], sk += x[IN_K][rk + j] * x[IN_K][rk + j];
                for (int j = 0; j < K; j++)
                    q[j] = x[IN_Q][rk + j] / sqrt(sq + 1e-6), k[j] = x[IN_K][rk + j] / sqrt(sk + 1e-6);
                double beta = 1 / (1 + exp(-x[IN_B][(size_t)(b * T + t) * H + h]));
                for (int j = 0; j < K; j++) {
                    double z = x[IN_F][rk + j] + x[IN_DT][h * K + j];
                    double alpha = -exp(x[IN_A][h]) * (z > 20 ? z : log1p(exp(z)));
                    for (int c = 0; c < V; c++) S[j * V + c] *= exp(alpha);
                }
                for (int c = 0; c < V; c++) {
                    e[c] = x[IN_V][rv + c];
                    for (int j = 0; j < K; j++) e[c] -= S[j * V + c] * k[j];
                }
                for (int j = 0; j < K; j++)
                    for (int c = 0; c < V; c++) S[j * V + c] += beta * k[j] * e[c];
                for (int c = 0; c < V; c++) {
                    double acc = 0;
                    for (int j = 0; j < K; j++) acc += S[j * V + c] * q[j];
                    o[rv + c] = d->scale * acc;
                }
            }
            if (S_final) memcpy(S_final + (size_t)(b * H + h) * K * V, S, sizeof(double) * K * V);
        }
    free(S), free(q), free(k), free(e);
}
static void ref_core(const kda_core_dims *d, double *const *x, double *o) { ref_core_state(d, x, o, NULL); }

static double **to_double(const kda_core_dims *d, const core_in *in) {
    const float *src[N_IN] = {in->q, in->k, in->v, in->f, in->b, in->A_log, in->dt_bias};
    double **x = kda_malloc(sizeof(double *) * N_IN);
    for (int i = 0; i < N_IN; i++) {
        size_t n = in_size(d, i);
        x[i] = kda_malloc(sizeof(double) * n);
        for (size_t j = 0; j < n; j++) x[i][j] = src[i][j];
    }
    return x;
}
static void free_double(double **x) {
    for (int i = 0; i < N_IN; i++) free(x[i]);
    free(x);
}

static const char *algo_name(kda_core_algo a) { return a == KDA_CHUNKED ? "chunked" : "recurrent"; }

// Central finite difference of Σ o·dO w.r.t. input `which` of the float64 reference.
static double *fd_grad(const kda_core_dims *d, double **x, int which, const float *dO) {
    size_t n = in_size(d, which), no = n_v(d);
    double *g = kda_malloc(sizeof(double) * n), *o = kda_malloc(sizeof(double) * no);
    for (size_t j = 0; j < n; j++) {
        double keep = x[which][j], h = 1e-5 * fmax(1.0, fabs(keep)), lp = 0, lm = 0;
        x[which][j] = keep + h;
        ref_core(d, x, o);
        for (size_t m = 0; m < no; m++) lp += o[m] * dO[m];
        x[which][j] = keep - h;
        ref_core(d, x, o);
        for (size_t m = 0; m < no; m++) lm += o[m] * dO[m];
        x[which][j] = keep;
        g[j] = (lp - lm) / (2 * h);
    }
    free(o);
    return g;
}

// dA_log[h] and ddt_bias[h,j] are sums of B·T·K and B·T terms of both signs whose total can
// be 100x smaller than the terms, so a relative error of the total measures the cancellation,
// not the code. Their errors are measured against the sums of |terms| instead, computed from
// df (float dff or double dfd): terms dα·α = df·softplus(z)/sigmoid(z) and df. fp32 rounding
// is ~2e-7 on that scale.
static void param_grad_scales(const kda_core_dims *d, const core_in *in, const float *dff, const double *dfd,
                              double *scA, double *scDt) {
    memset(scA, 0, sizeof(double) * d->H);
    memset(scDt, 0, sizeof(double) * d->H * d->K);
    for (size_t i = 0; i < n_qk(d); i++) {
        int h = (int)(i / d->K % d->H), j = (int)(i % d->K);
        double df = dff ? dff[i] : dfd[i];
        double z = (double)in->f[i] + in->dt_bias[h * d->K + j], sp = z > 20 ? z : log1p(exp(z));
        scA[h] += fabs(df * sp * (1 + exp(-z)));
        scDt[h * d->K + j] += fabs(df);
    }
}

// ||a − ref|| / ||scale||, ref given in double (dref) or float (fref).
static double scaled_err(const float *a, const double *dref, const float *fref, const double *scale, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = a[i] - (dref ? dref[i] : fref[i]);
        num += e * e, den += scale[i] * scale[i];
    }
    return sqrt(num / den);
}

// ---- 1 & 2: forward vs float64, recurrent vs chunked ------------------------------------------

typedef struct {
    int B, T, H, K, V, C;
    double f_mean, f_sd;
    const char *what;
} case_t;

static const case_t cases[] = {
    {2, 100, 3, 32, 64, 64, 0, 1, "T=100 C=64 (partial last chunk)"},
    {2, 37, 3, 24, 16, 16, 0, 1, "T=37 C=16 K=24 V=16"},
    {1, 128, 2, 8, 64, 64, 0, 1, "T=128 C=64 K=8 (whole chunks)"},
    {2, 20, 2, 32, 16, 64, 0, 1, "T=20 C=64 (chunk longer than T)"},
    {1, 9, 2, 5, 3, 1, 0, 1, "T=9 C=1 K=5 V=3"},
    {1, 80, 2, 32, 64, 32, 6, 8, "strong decay, softplus z>20 branch"},
};

static void test_case(const case_t *c) {
    printf("-- %s: B=%d T=%d H=%d K=%d V=%d chunk=%d\n", c->what, c->B, c->T, c->H, c->K, c->V, c->C);
    kda_core_dims dc = dims(c->B, c->T, c->H, c->K, c->V, c->C, KDA_CHUNKED), dr = dc;
    dr.algo = KDA_RECURRENT;
    core_in in = make_inputs(&dc, c->f_mean, c->f_sd);
    float *dO = randn(n_v(&dc), 0, 1);
    double **x = to_double(&dc, &in), *ref = kda_malloc(sizeof(double) * n_v(&dc));
    ref_core(&dc, x, ref);
    core_out rc = run(&dc, &in, dO), rr = run(&dr, &in, dO);
    char name[96];
    snprintf(name, sizeof name, "fwd chunked vs float64");
    T_REL(name, kda_rel_err_f32(rc.o, ref, n_v(&dc)), 1e-5);
    snprintf(name, sizeof name, "fwd recurrent vs float64");
    T_REL(name, kda_rel_err_f32(rr.o, ref, n_v(&dc)), 1e-5);
    struct {
        const char *n;
        const float *a, *b;
        size_t len;
    } g[] = {
        {"o", rc.o, rr.o, n_v(&dc)},     {"d q_raw", rc.dq, rr.dq, n_qk(&dc)}, {"d k_raw", rc.dk, rr.dk, n_qk(&dc)},
        {"d v", rc.dv, rr.dv, n_v(&dc)}, {"d f", rc.df, rr.df, n_qk(&dc)},     {"d b_logit", rc.db, rr.db, n_b(&dc)},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        snprintf(name, sizeof name, "chunked vs recurrent %s", g[i].n);
        T_REL(name, kda_rel_err_f32f32(g[i].a, g[i].b, g[i].len), 1e-5);
    }
    // the parameter gradients, and a float64 truth for dA_log by finite differences (2H runs)
    double *scA = kda_malloc(sizeof(double) * c->H), *scDt = kda_malloc(sizeof(double) * c->H * c->K);
    param_grad_scales(&dc, &in, rr.df, NULL, scA, scDt);
    double *fdA = fd_grad(&dc, x, IN_A, dO);
    T_REL("chunked vs recurrent d A_log (/ sum|terms|)", scaled_err(rc.dA_log, NULL, rr.dA_log, scA, c->H), 2e-6);
    T_REL("chunked vs recurrent d dt_bias (/ sum|terms|)", scaled_err(rc.ddt, NULL, rr.ddt, scDt, (size_t)c->H * c->K),
          2e-6);
    T_REL("chunked d A_log vs FD (/ sum|terms|)", scaled_err(rc.dA_log, fdA, NULL, scA, c->H), 2e-6);
    T_REL("recurrent d A_log vs FD (/ sum|terms|)", scaled_err(rr.dA_log, fdA, NULL, scA, c->H), 2e-6);
    free(fdA), free(scA), free(scDt);
    free_out(&rc), free_out(&rr), free_double(x), free(ref), free(dO), free_inputs(&in);
}

// ---- 2b: the forward that carries a state (generation: chunked prefill, recurrent decode) ---

// tokens t0 .. t0+n−1 of every sequence of a [B,T,H,w] tensor
static float *time_slice(const float *x, const kda_core_dims *d, int t0, int n, int w) {
    size_t row = (size_t)d->H * w;
    float *y = kda_malloc(sizeof(float) * d->B * n * row + 4);
    for (int b = 0; b < d->B; b++)
        memcpy(y + (size_t)b * n * row, x + ((size_t)b * d->T + t0) * row, sizeof(float) * n * row);
    return y;
}

static void test_state(const case_t *c, int T1) {
    kda_core_dims d = dims(c->B, c->T, c->H, c->K, c->V, c->C, KDA_CHUNKED);
    printf("-- state in / out (%s), split after %d of %d tokens\n", c->what, T1, c->T);
    core_in in = make_inputs(&d, c->f_mean, c->f_sd);
    double **x = to_double(&d, &in), *ref = kda_malloc(sizeof(double) * n_v(&d));
    size_t nS = (size_t)d.B * d.H * d.K * d.V;
    double *Sref = kda_malloc(sizeof(double) * nS);
    ref_core_state(&d, x, ref, Sref);
    char name[128];
    // whole sequence from the zero state: the output is kda_core_fwd's, the final state the reference's
    for (int a = 0; a < 2; a++) {
        d.algo = a ? KDA_RECURRENT : KDA_CHUNKED;
        core_out plain = run(&d, &in, NULL);
        float *o = poisoned(n_v(&d)), *S = kda_calloc(nS, sizeof(float));
        kda_core_fwd_state(&d, in.q, in.k, in.v, in.f, in.b, in.A_log, in.dt_bias, o, NULL, S);
        snprintf(name, sizeof name, "%s from S=0: o == kda_core_fwd's", algo_name(d.algo));
        T_CHECK(!memcmp(o, plain.o, sizeof(float) * n_v(&d)), "%s", name);
        snprintf(name, sizeof name, "%s final state vs float64", algo_name(d.algo));
        T_REL(name, kda_rel_err_f32(S, Sref, nS), 1e-5);
        free(o), free(S), free_out(&plain);
    }
    // T1 tokens, then the rest from the state they left: every (first, second) form pairing
    kda_core_dims d1 = d, d2 = d;
    d1.T = T1, d2.T = c->T - T1;
    float *in1[5], *in2[5];
    const float *src[5] = {in.q, in.k, in.v, in.f, in.b};
    int width[5] = {d.K, d.K, d.V, d.K, 1};
    for (int i = 0; i < 5; i++)
        in1[i] = time_slice(src[i], &d, 0, T1, width[i]), in2[i] = time_slice(src[i], &d, T1, d2.T, width[i]);
    double *ref2 = kda_malloc(sizeof(double) * d.B * d2.T * d.H * d.V); // the reference rows of part 2
    for (int b = 0; b < d.B; b++)
        memcpy(ref2 + (size_t)b * d2.T * d.H * d.V, ref + ((size_t)b * d.T + T1) * d.H * d.V,
               sizeof(double) * d2.T * d.H * d.V);
    for (int a1 = 0; a1 < 2; a1++)
        for (int a2 = 0; a2 < 2; a2++) {
            d1.algo = a1 ? KDA_RECURRENT : KDA_CHUNKED;
            d2.algo = a2 ? KDA_RECURRENT : KDA_CHUNKED;
            float *o1 = poisoned(n_v(&d1)), *o2 = poisoned(n_v(&d2)), *S = kda_calloc(nS, sizeof(float));
            kda_core_fwd_state(&d1, in1[0], in1[1], in1[2], in1[3], in1[4], in.A_log, in.dt_bias, o1, NULL, S);
            kda_core_fwd_state(&d2, in2[0], in2[1], in2[2], in2[3], in2[4], in.A_log, in.dt_bias, o2, NULL, S);
            snprintf(name, sizeof name, "%s then %s: o of the second part", algo_name(d1.algo), algo_name(d2.algo));
            T_REL(name, kda_rel_err_f32(o2, ref2, n_v(&d2)), 1e-5);
            snprintf(name, sizeof name, "%s then %s: final state", algo_name(d1.algo), algo_name(d2.algo));
            T_REL(name, kda_rel_err_f32(S, Sref, nS), 1e-5);
            free(o1), free(o2), free(S);
        }
    for (int i = 0; i < 5; i++) free(in1[i]), free(in2[i]);
    free(ref2), free(Sref), free_double(x), free(ref), free_inputs(&in);
}

// ---- 3: finite differences of the float64 reference -----------------------------------------

// Tolerance 1e-5: the fp32 gradients are ~2e-7 off (rounding), the FD ones ~1e-9 (h = 1e-5,
// O(h²) truncation, double round-off); a wrong term gives O(1e-2..1). The parameter sums
// dA_log / ddt_bias get 2e-5 plain (cancellation, see param_grad_scales) and 2e-6 scaled.
static void test_fd(double f_mean, double f_sd, const char *what) {
    printf("-- gradients vs central finite differences of the float64 reference, %s\n", what);
    kda_core_dims d = dims(2, 20, 2, 4, 3, 8, KDA_CHUNKED);
    core_in in = make_inputs(&d, f_mean, f_sd);
    float *dO = randn(n_v(&d), 0, 1);
    double **x = to_double(&d, &in), *fd[N_IN];
    for (int i = 0; i < N_IN; i++) fd[i] = fd_grad(&d, x, i, dO);
    double *scA = kda_malloc(sizeof(double) * d.H), *scDt = kda_malloc(sizeof(double) * d.H * d.K);
    param_grad_scales(&d, &in, NULL, fd[IN_F], scA, scDt);
    for (int a = 0; a < 2; a++) {
        d.algo = a ? KDA_RECURRENT : KDA_CHUNKED;
        core_out r = run(&d, &in, dO);
        const float *g[N_IN] = {r.dq, r.dk, r.dv, r.df, r.db, r.dA_log, r.ddt};
        char name[96];
        for (int i = 0; i < N_IN; i++) {
            snprintf(name, sizeof name, "%s d %s vs FD", algo_name(d.algo), in_name[i]);
            T_REL(name, kda_rel_err_f32(g[i], fd[i], in_size(&d, i)), i < IN_A ? 1e-5 : 2e-5);
        }
        snprintf(name, sizeof name, "%s d A_log vs FD (/ sum|terms|)", algo_name(d.algo));
        T_REL(name, scaled_err(r.dA_log, fd[IN_A], NULL, scA, d.H), 2e-6);
        snprintf(name, sizeof name, "%s d dt_bias vs FD (/ sum|terms|)", algo_name(d.algo));
        T_REL(name, scaled_err(r.ddt, fd[IN_DT], NULL, scDt, (size_t)d.H * d.K), 2e-6);
        free_out(&r);
    }
    for (int i = 0; i < N_IN; i++) free(fd[i]);
    free(scA), free(scDt), free_double(x), free(dO), free_inputs(&in);
}

// ---- 4: every element written, parameter gradients accumulate ------------------------------

static void test_written_and_accumulate(kda_core_algo algo) {
    kda_core_dims d = dims(2, 45, 3, 16, 8, 16, algo);
    core_in in = make_inputs(&d, 0, 1);
    float *dO = randn(n_v(&d), 0, 1);
    core_out r = run(&d, &in, dO);
    int ok = all_finite(r.o, n_v(&d)) && all_finite(r.saved, kda_core_saved_floats(&d)) && all_finite(r.dq, n_qk(&d)) &&
        all_finite(r.dk, n_qk(&d)) && all_finite(r.dv, n_v(&d)) && all_finite(r.df, n_qk(&d)) &&
        all_finite(r.db, n_b(&d)) && all_finite(r.dA_log, d.H) && all_finite(r.ddt, (size_t)d.H * d.K);
    T_CHECK(ok, "%s: every output and saved element written (NaN poison gone)", algo_name(algo));
    float *A1 = kda_malloc(sizeof(float) * d.H), *dt1 = kda_malloc(sizeof(float) * d.H * d.K);
    memcpy(A1, r.dA_log, sizeof(float) * d.H);
    memcpy(dt1, r.ddt, sizeof(float) * d.H * d.K);
    kda_core_bwd(&d, in.q, in.k, in.v, in.f, in.b, in.A_log, in.dt_bias, r.saved, dO, r.dq, r.dk, r.dv, r.df, r.db,
                 r.dA_log, r.ddt);
    int doubled = 1, nonzero = 0;
    for (int i = 0; i < d.H; i++) doubled &= r.dA_log[i] == 2 * A1[i], nonzero |= A1[i] != 0;
    for (int i = 0; i < d.H * d.K; i++) doubled &= r.ddt[i] == 2 * dt1[i], nonzero |= dt1[i] != 0;
    T_CHECK(doubled && nonzero, "%s: dA_log and ddt_bias accumulate (second call doubles them)", algo_name(algo));
    free(A1), free(dt1), free_out(&r), free(dO), free_inputs(&in);
}

// ---- 5: thread-count independence ---------------------------------------------------------------

static int same_bits(const core_out *a, const core_out *b, const kda_core_dims *d) {
    return !memcmp(a->o, b->o, n_v(d) * 4) && !memcmp(a->dq, b->dq, n_qk(d) * 4) &&
        !memcmp(a->dk, b->dk, n_qk(d) * 4) && !memcmp(a->dv, b->dv, n_v(d) * 4) && !memcmp(a->df, b->df, n_qk(d) * 4) &&
        !memcmp(a->db, b->db, n_b(d) * 4) && !memcmp(a->dA_log, b->dA_log, (size_t)d->H * 4) &&
        !memcmp(a->ddt, b->ddt, (size_t)d->H * d->K * 4);
}

static void test_threads(kda_core_algo algo) {
    kda_core_dims d = dims(3, 70, 3, 16, 32, 32, algo);
    core_in in = make_inputs(&d, 0, 1);
    float *dO = randn(n_v(&d), 0, 1);
    int keep = omp_get_max_threads();
    omp_set_num_threads(1);
    core_out r1 = run(&d, &in, dO);
    omp_set_num_threads(2);
    core_out r2 = run(&d, &in, dO);
    omp_set_num_threads(3);
    core_out r3 = run(&d, &in, dO);
    omp_set_num_threads(keep);
    T_CHECK(same_bits(&r1, &r2, &d) && same_bits(&r1, &r3, &d), "%s: outputs bit-identical with 1, 2 and 3 threads",
            algo_name(algo));
    free_out(&r1), free_out(&r2), free_out(&r3), free(dO), free_inputs(&in);
}

// ---- 6: b_logit as columns of a wider matrix (kda_core_dims.ldb) -------------------------------

// The model passes b_logit and d_b_logit as columns of its projection buffer: with rows ldb apart
// the outputs are the packed call's to the bit, and the columns between the rows stay untouched.
static void test_strided_b(kda_core_algo algo) {
    kda_core_dims d = dims(2, 37, 3, 16, 8, 16, algo), ds = d;
    ds.ldb = d.H + 5;
    core_in in = make_inputs(&d, 0, 1), ins = in;
    float *dO = randn(n_v(&d), 0, 1);
    size_t rows = (size_t)d.B * d.T, wide = rows * ds.ldb;
    ins.b = poisoned(wide);
    for (size_t t = 0; t < rows; t++) memcpy(ins.b + t * ds.ldb, in.b + t * d.H, d.H * sizeof(float));
    core_out r = run(&d, &in, dO), rs = {0};
    rs.o = poisoned(n_v(&d)), rs.saved = poisoned(kda_core_saved_floats(&d));
    kda_core_fwd(&ds, ins.q, ins.k, ins.v, ins.f, ins.b, ins.A_log, ins.dt_bias, rs.o, rs.saved);
    rs.dq = poisoned(n_qk(&d)), rs.dk = poisoned(n_qk(&d)), rs.dv = poisoned(n_v(&d)), rs.df = poisoned(n_qk(&d));
    rs.db = poisoned(wide);
    rs.dA_log = kda_calloc(d.H, sizeof(float)), rs.ddt = kda_calloc((size_t)d.H * d.K, sizeof(float));
    kda_core_bwd(&ds, ins.q, ins.k, ins.v, ins.f, ins.b, ins.A_log, ins.dt_bias, rs.saved, dO, rs.dq, rs.dk, rs.dv,
                 rs.df, rs.db, rs.dA_log, rs.ddt);
    int same = !memcmp(r.o, rs.o, n_v(&d) * 4) && !memcmp(r.dq, rs.dq, n_qk(&d) * 4) &&
               !memcmp(r.dk, rs.dk, n_qk(&d) * 4) &&
        !memcmp(r.dv, rs.dv, n_v(&d) * 4) && !memcmp(r.df, rs.df, n_qk(&d) * 4) &&
        !memcmp(r.dA_log, rs.dA_log, d.H * 4) && !memcmp(r.ddt, rs.ddt, (size_t)d.H * d.K * 4);
    int db_same = 1, gaps_untouched = 1;
    for (size_t t = 0; t < rows; t++) {
        db_same &= !memcmp(r.db + t * d.H, rs.db + t * ds.ldb, d.H * sizeof(float));
        for (int j = d.H; j < ds.ldb; j++) gaps_untouched &= isnan(rs.db[t * ds.ldb + j]);
    }
    T_CHECK(same && db_same, "%s: b_logit and d_b_logit with rows %d apart give the packed call's bits",
            algo_name(algo), ds.ldb);
    T_CHECK(gaps_untouched, "%s: d_b_logit's rows strided: the columns between them untouched", algo_name(algo));
    free(ins.b);
    free_out(&r), free_out(&rs), free(dO), free_inputs(&in);
}

// ---- timing at the 300M layer shape (printed, not asserted) ---------------------------------

static double cpu_seconds(void) { // CPU time of all threads: wall time lies on a loaded machine
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void time_300m(kda_core_algo algo) {
    int T = getenv("KDA_SAN") ? 256 : 2048; // sanitizer builds are ~10x slower
    kda_core_dims d = dims(1, T, 8, 32, 64, 64, algo);
    core_in in = make_inputs(&d, 0, 1);
    float *dO = randn(n_v(&d), 0, 1);
    double t0 = kda_now(), c0 = cpu_seconds();
    core_out r = run(&d, &in, NULL);
    double t1 = kda_now(), c1 = cpu_seconds();
    float *dq = kda_malloc(n_qk(&d) * 4), *dk = kda_malloc(n_qk(&d) * 4), *df = kda_malloc(n_qk(&d) * 4);
    float *dv = kda_malloc(n_v(&d) * 4), *db = kda_malloc(n_b(&d) * 4);
    float *dA = kda_calloc(d.H, 4), *ddt = kda_calloc((size_t)d.H * d.K, 4);
    kda_core_bwd(&d, in.q, in.k, in.v, in.f, in.b, in.A_log, in.dt_bias, r.saved, dO, dq, dk, dv, df, db, dA, ddt);
    double t2 = kda_now(), c2 = cpu_seconds();
    printf("  time  %-9s B=1 T=%d H=8 K=32 V=64: fwd %.0f ms, bwd %.0f ms wall on %d threads; "
           "fwd %.0f ms, bwd %.0f ms CPU; saved %.1f MB\n",
           algo_name(algo), T, 1e3 * (t1 - t0), 1e3 * (t2 - t1), omp_get_max_threads(), 1e3 * (c1 - c0),
           1e3 * (c2 - c1), kda_core_saved_floats(&d) * 4 / 1e6);
    free(dq), free(dk), free(df), free(dv), free(db), free(dA), free(ddt), free_out(&r), free(dO), free_inputs(&in);
}

int main(void) {
    kda_rng_seed(&R, t_seed());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
    test_state(&cases[0], 70); // split inside a chunk
    test_state(&cases[1], 32); // at a chunk boundary (C=16)
    test_state(&cases[5], 1);  // one token, then the rest; strong decay
    test_fd(0, 1, "realistic gates");
    test_fd(6, 8, "strong decay");
    printf("-- poison, accumulation, threads\n");
    test_written_and_accumulate(KDA_CHUNKED);
    test_written_and_accumulate(KDA_RECURRENT);
    test_threads(KDA_CHUNKED);
    test_threads(KDA_RECURRENT);
    test_strided_b(KDA_CHUNKED);
    test_strided_b(KDA_RECURRENT);
    time_300m(KDA_CHUNKED);
    time_300m(KDA_RECURRENT);
    return t_done("test_kda_core");
}
