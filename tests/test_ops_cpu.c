// test_ops_cpu.c — every CPU op (ops_cpu.c) against a float64 reference written here:
// forwards by ||out-ref||/||ref||, backwards against central finite differences of the
// float64 reference (loss = Σ dy·f(x) with random dy). Outputs are poisoned with NaN first.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/ops.h"
#include "conv_one.h"
#include "gu_pack.h"
#include "test_util.h"

static kda_rng R;
static const kda_ops *O;

static float *randf(size_t n, double sd) {
    float *x = kda_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * kda_rng_normal(&R));
    return x;
}
static float *nanf_buf(size_t n) {
    float *x = kda_malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}
static double *to_d(const float *x, size_t n) {
    double *y = kda_malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}
static float *zeros(size_t n) { return kda_calloc(n, sizeof(float)); }

// A reference forward: inputs (double arrays) -> output (double array).
typedef void (*ref_fn)(double **in, double *out, const int *dims);

// FD gradient of Σ dy·f w.r.t. input `which` (nin inputs, sizes sz[]), h = 1e-6.
static double *fd_grad(ref_fn f, double **in, int which, const size_t *sz, size_t nout, const double *dy,
                       const int *dims) {
    double *g = kda_malloc(sz[which] * sizeof(double));
    double *o = kda_malloc(nout * sizeof(double));
    for (size_t i = 0; i < sz[which]; i++) {
        double keep = in[which][i], lp = 0, lm = 0, h = 1e-6 * fmax(1.0, fabs(keep));
        in[which][i] = keep + h;
        f(in, o, dims);
        for (size_t j = 0; j < nout; j++) lp += dy[j] * o[j];
        in[which][i] = keep - h;
        f(in, o, dims);
        for (size_t j = 0; j < nout; j++) lm += dy[j] * o[j];
        in[which][i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
    free(o);
    return g;
}

static double sig(double x) { return 1 / (1 + exp(-x)); }

// ---- references ----
static void ref_rmsnorm(double **in, double *out, const int *dm) { // in: x[N,d], w[d]
    int N = dm[0], d = dm[1];
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int j = 0; j < d; j++) ss += in[0][n * d + j] * in[0][n * d + j];
        double r = 1 / sqrt(ss / d + 1e-6);
        for (int j = 0; j < d; j++) out[n * d + j] = in[0][n * d + j] * r * in[1][j];
    }
}
static void ref_gnorm(double **in, double *out, const int *dm) { // o[R,V], u[R,V], w[V]
    int N = dm[0], d = dm[1];
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int j = 0; j < d; j++) ss += in[0][n * d + j] * in[0][n * d + j];
        double r = 1 / sqrt(ss / d + 1e-6);
        for (int j = 0; j < d; j++) out[n * d + j] = in[0][n * d + j] * r * in[2][j] * sig(in[1][n * d + j]);
    }
}
static void ref_linear(double **in, double *out, const int *dm) { // x[N,I], W[O,I], b[O]
    int N = dm[0], I = dm[1], Oo = dm[2];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < Oo; o++) {
            double a = in[2][o];
            for (int i = 0; i < I; i++) a += in[0][n * I + i] * in[1][o * I + i];
            out[n * Oo + o] = a;
        }
}
static void ref_conv(double **in, double *out, const int *dm) { // x[B,T,C], w[C,W]
    int B = dm[0], T = dm[1], C = dm[2], W = dm[3];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double z = 0;
                for (int j = 0; j < W; j++) {
                    int tt = t - W + 1 + j;
                    if (tt >= 0) z += in[1][c * W + j] * in[0][((size_t)b * T + tt) * C + c];
                }
                out[((size_t)b * T + t) * C + c] = z * sig(z);
            }
}
static void ref_swiglu(double **in, double *out, const int *dm) {
    for (int i = 0; i < dm[0]; i++) out[i] = in[0][i] * sig(in[0][i]) * in[1][i];
}
static const int32_t *ce_tgt;
static void ref_ce(double **in, double *out, const int *dm) { // x[N,d], E[NV,d] -> out[0] = Σ loss
    int N = dm[0], d = dm[1], NV = dm[2];
    double tot = 0;
    double *lg = kda_malloc(NV * sizeof(double));
    for (int n = 0; n < N; n++) {
        if (ce_tgt[n] < 0) continue;
        double mx = -1e300;
        for (int v = 0; v < NV; v++) {
            double a = 0;
            for (int j = 0; j < d; j++) a += in[0][n * d + j] * in[1][v * d + j];
            lg[v] = a;
            mx = fmax(mx, a);
        }
        double s = 0;
        for (int v = 0; v < NV; v++) s += exp(lg[v] - mx);
        tot += mx + log(s) - lg[ce_tgt[n]];
    }
    free(lg);
    out[0] = tot;
}

static double rel_d(const float *a, const double *ref, size_t n) { return kda_rel_err_f32(a, ref, n); }

static void test_rmsnorm(void) {
    int N = 7, d = 24, dm[] = {N, d};
    float *x = randf(N * d, 1.5), *w = randf(d, 1), *y = nanf_buf(N * d), *rstd = nanf_buf(N);
    for (int j = 0; j < d; j++) w[j] += 1;
    O->rmsnorm_fwd(x, w, y, rstd, N, d, 1e-6f);
    double *in[] = {to_d(x, N * d), to_d(w, d)}, *ref = kda_malloc(N * d * sizeof(double));
    ref_rmsnorm(in, ref, dm);
    T_REL("rmsnorm fwd", rel_d(y, ref, N * d), 1e-6);
    float *dy = randf(N * d, 1), *dx = nanf_buf(N * d), *dw = zeros(d);
    O->rmsnorm_bwd(x, w, rstd, dy, dx, dw, NULL, N, d, 0);
    size_t sz[] = {N * d, d};
    double *dyd = to_d(dy, N * d);
    double *gx = fd_grad(ref_rmsnorm, in, 0, sz, N * d, dyd, dm), *gw = fd_grad(ref_rmsnorm, in, 1, sz, N * d, dyd, dm);
    T_REL("rmsnorm bwd dx vs finite differences", rel_d(dx, gx, N * d), 1e-5);
    T_REL("rmsnorm bwd dw vs finite differences", rel_d(dw, gw, d), 1e-5);
    // accumulate mode adds
    float *dx2 = kda_malloc(N * d * sizeof(float));
    memcpy(dx2, dx, N * d * sizeof(float));
    float *yb = nanf_buf(N * d); // and writes the forward's output when asked, its bits
    O->rmsnorm_bwd(x, w, rstd, dy, dx2, dw, yb, N, d, 1);
    double *twice = kda_malloc(N * d * sizeof(double));
    for (int i = 0; i < N * d; i++) twice[i] = 2.0 * gx[i];
    T_REL("rmsnorm bwd accumulate", rel_d(dx2, twice, N * d), 1e-5);
    T_CHECK(!memcmp(yb, y, N * d * sizeof(float)), "rmsnorm bwd: its y has the forward's bits");
    free(yb);
    free(x);
    free(w);
    free(y);
    free(rstd);
    free(dy);
    free(dx);
    free(dw);
    free(dx2);
    free(twice);
    free(in[0]);
    free(in[1]);
    free(ref);
    free(dyd);
    free(gx);
    free(gw);
}

static void test_gnorm(void) {
    int Rr = 9, V = 16, dm[] = {Rr, V};
    float *o = randf(Rr * V, 1), *u = randf(Rr * V, 1.5), *w = randf(V, 0.5), *y = nanf_buf(Rr * V), *rs = nanf_buf(Rr);
    for (int j = 0; j < V; j++) w[j] += 1;
    O->gated_rmsnorm_fwd(o, u, w, y, rs, Rr, V, 1e-6f);
    double *in[] = {to_d(o, Rr * V), to_d(u, Rr * V), to_d(w, V)}, *ref = kda_malloc(Rr * V * sizeof(double));
    ref_gnorm(in, ref, dm);
    T_REL("gated rmsnorm fwd", rel_d(y, ref, Rr * V), 1e-6);
    float *dy = randf(Rr * V, 1), *d_o = nanf_buf(Rr * V), *du = nanf_buf(Rr * V), *dw = zeros(V);
    float *yb = nanf_buf(Rr * V);
    O->gated_rmsnorm_bwd(o, u, w, rs, dy, d_o, du, dw, yb, Rr, V);
    T_CHECK(!memcmp(yb, y, Rr * V * sizeof(float)), "gated rmsnorm bwd: its y has the forward's bits");
    free(yb);
    size_t sz[] = {Rr * V, Rr * V, V};
    double *dyd = to_d(dy, Rr * V);
    double *g0 = fd_grad(ref_gnorm, in, 0, sz, Rr * V, dyd, dm), *g1 = fd_grad(ref_gnorm, in, 1, sz, Rr * V, dyd, dm),
           *g2 = fd_grad(ref_gnorm, in, 2, sz, Rr * V, dyd, dm);
    T_REL("gated rmsnorm bwd d_o", rel_d(d_o, g0, Rr * V), 1e-5);
    T_REL("gated rmsnorm bwd d_gate", rel_d(du, g1, Rr * V), 1e-5);
    T_REL("gated rmsnorm bwd d_w", rel_d(dw, g2, V), 1e-5);
    free(o);
    free(u);
    free(w);
    free(y);
    free(rs);
    free(dy);
    free(d_o);
    free(du);
    free(dw);
    for (int i = 0; i < 3; i++) free(in[i]);
    free(ref);
    free(dyd);
    free(g0);
    free(g1);
    free(g2);
}

static void test_linear(void) {
    int N = 11, I = 13, Oo = 9, dm[] = {N, I, Oo};
    float *x = randf(N * I, 1), *W = randf(Oo * I, 0.3), *b = randf(Oo, 1), *y = nanf_buf(N * Oo);
    O->linear_fwd(x, I, W, b, NULL, y, N, I, Oo);
    double *in[] = {to_d(x, N * I), to_d(W, Oo * I), to_d(b, Oo)}, *ref = kda_malloc(N * Oo * sizeof(double));
    ref_linear(in, ref, dm);
    T_REL("linear fwd (with bias)", rel_d(y, ref, N * Oo), 1e-6);
    float *dy = randf(N * Oo, 1), *dx = nanf_buf(N * I), *dW = zeros(Oo * I), *db = zeros(Oo);
    O->linear_bwd(x, I, W, dy, dx, dW, db, N, I, Oo, 0);
    size_t sz[] = {N * I, Oo * I, Oo};
    double *dyd = to_d(dy, N * Oo);
    double *g0 = fd_grad(ref_linear, in, 0, sz, N * Oo, dyd, dm), *g1 = fd_grad(ref_linear, in, 1, sz, N * Oo, dyd, dm),
           *g2 = fd_grad(ref_linear, in, 2, sz, N * Oo, dyd, dm);
    T_REL("linear bwd dx", rel_d(dx, g0, N * I), 1e-5);
    T_REL("linear bwd dW", rel_d(dW, g1, Oo * I), 1e-5);
    T_REL("linear bwd dbias", rel_d(db, g2, Oo), 1e-5);
    // in two calls (dx alone, x not read; then dW and dbias alone): the same bits
    float *dx1 = nanf_buf(N * I), *dW1 = zeros(Oo * I), *db1 = zeros(Oo);
    O->linear_bwd(NULL, I, W, dy, dx1, NULL, NULL, N, I, Oo, 0);
    O->linear_bwd(x, I, W, dy, NULL, dW1, db1, N, I, Oo, 0);
    T_CHECK(!memcmp(dx1, dx, N * I * sizeof(float)) && !memcmp(dW1, dW, Oo * I * sizeof(float)) &&
                !memcmp(db1, db, Oo * sizeof(float)),
            "linear bwd in two calls (dx; dW, dbias): the same bits");
    free(dx1);
    free(dW1);
    free(db1);
    free(x);
    free(W);
    free(b);
    free(y);
    free(dy);
    free(dx);
    free(dW);
    free(db);
    for (int i = 0; i < 3; i++) free(in[i]);
    free(ref);
    free(dyd);
    free(g0);
    free(g1);
    free(g2);
}

// Rows of n columns placed at column c0 of a wider [rows, ld] matrix whose other entries are POISON.
#define POISON 1.0e30f
static float *widen(const float *x, int rows, int n, int ld, int c0) {
    float *w = kda_malloc((size_t)rows * ld * sizeof(float));
    for (size_t i = 0; i < (size_t)rows * ld; i++) w[i] = POISON;
    if (x)
        for (int r = 0; r < rows; r++) memcpy(w + (size_t)r * ld + c0, x + (size_t)r * n, n * sizeof(float));
    return w;
}
// Largest |wide's columns − packed| (relative to packed's largest), and whether every other entry is still POISON.
static double cols_diff(const float *wide, const float *packed, int rows, int n, int ld, int c0, int *poison_ok) {
    double md = 0, mx = 1e-30;
    *poison_ok = 1;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            float v = wide[(size_t)r * ld + j];
            if (j < c0 || j >= c0 + n) {
                if (v != POISON) *poison_ok = 0;
                continue;
            }
            double p = packed[(size_t)r * n + j - c0];
            if (isnan(v) || isnan(p)) return INFINITY; // an unwritten (poisoned) element fails the check
            md = fmax(md, fabs(v - p)), mx = fmax(mx, fabs(p));
        }
    return md / mx;
}

// Inputs given as columns of a wider matrix (ops.h ldx; the model's projection buffer) and a
// residual added by the linear: the same results as packed inputs, nothing written outside
// the columns.
static void test_strided_inputs(void) {
    int N = 7, I = 10, Oo = 6, ld = 17, c0 = 3, ok;
    float *x = randf(N * I, 1), *W = randf(Oo * I, 0.3), *b = randf(Oo, 1), *res = randf(N * Oo, 1);
    float *xw = widen(x, N, I, ld, c0), *y0 = nanf_buf(N * Oo), *y1 = nanf_buf(N * Oo);
    O->linear_fwd(x, I, W, b, NULL, y0, N, I, Oo);
    O->linear_fwd(xw + c0, ld, W, b, res, y1, N, I, Oo);
    for (int i = 0; i < N * Oo; i++) y0[i] += res[i];
    T_REL("linear fwd: strided x + residual", cols_diff(y1, y0, N, Oo, Oo, 0, &ok), 1e-6);
    memcpy(y1, res, N * Oo * sizeof(float)); // the residual in place (res == y)
    O->linear_fwd(xw + c0, ld, W, b, y1, y1, N, I, Oo);
    T_REL("linear fwd: residual in place", cols_diff(y1, y0, N, Oo, Oo, 0, &ok), 1e-6);
    float *dy = randf(N * Oo, 1), *dx0 = nanf_buf(N * I), *dxw = widen(NULL, N, I, ld, c0);
    float *dW0 = zeros(Oo * I), *dW1 = zeros(Oo * I);
    O->linear_bwd(x, I, W, dy, dx0, dW0, NULL, N, I, Oo, 0);
    O->linear_bwd(xw + c0, ld, W, dy, dxw + c0, dW1, NULL, N, I, Oo, 0);
    T_REL("linear bwd: strided dx", cols_diff(dxw, dx0, N, I, ld, c0, &ok), 1e-6);
    T_CHECK(ok, "linear bwd: nothing written outside dx's columns");
    T_REL("linear bwd: dW from strided x", cols_diff(dW1, dW0, Oo, I, I, 0, &ok), 1e-6);

    int B = 2, T = 9, C = 5, Wc = 4, cl = 12, cc = 4;
    size_t n = (size_t)B * T * C;
    float *cx = randf(n, 1), *cw = randf(C * Wc, 0.5), *cxw = widen(cx, B * T, C, cl, cc);
    float *cy0 = nanf_buf(n), *cy1 = nanf_buf(n);
    conv_fwd1(O, cx, C, cw, cy0, B, T, C, Wc);
    conv_fwd1(O, cxw + cc, cl, cw, cy1, B, T, C, Wc);
    T_REL("conv fwd: strided x", cols_diff(cy1, cy0, B * T, C, C, 0, &ok), 1e-6);
    float *cdy = randf(n, 1), *cdx0 = nanf_buf(n), *cdxw = widen(NULL, B * T, C, cl, cc);
    float *cdw0 = zeros(C * Wc), *cdw1 = zeros(C * Wc);
    conv_bwd1(O, cx, C, cw, cdy, cdx0, cdw0, B, T, C, Wc);
    conv_bwd1(O, cxw + cc, cl, cw, cdy, cdxw + cc, cdw1, B, T, C, Wc);
    T_REL("conv bwd: strided dx", cols_diff(cdxw, cdx0, B * T, C, cl, cc, &ok), 1e-6);
    T_CHECK(ok, "conv bwd: nothing written outside dx's columns");
    T_REL("conv bwd: dw from strided x", cols_diff(cdw1, cdw0, C, Wc, Wc, 0, &ok), 1e-6);
    float *tail0 = zeros((size_t)B * (Wc - 1) * C), *tail1 = zeros((size_t)B * (Wc - 1) * C);
    for (size_t i = 0; i < n; i++) cy0[i] = cy1[i] = NAN; // the step writes every output anew
    O->conv_silu_step(tail0, cx, C, cw, cy0, B, T, C, Wc);
    O->conv_silu_step(tail1, cxw + cc, cl, cw, cy1, B, T, C, Wc);
    T_REL("conv step: strided x", cols_diff(cy1, cy0, B * T, C, C, 0, &ok), 1e-6);
    T_CHECK(!memcmp(tail0, tail1, (size_t)B * (Wc - 1) * C * sizeof(float)), "conv step: strided x, same new tail");
    float *bufs[] = {x,  W,  b,   res, xw,  y0,  y1,   dy,   dx0,  dxw,  dW0,   dW1,
                     cx, cw, cxw, cy0, cy1, cdy, cdx0, cdxw, cdw0, cdw1, tail0, tail1};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) free(bufs[k]);
}

// conv_silu_step against the forward (itself checked against float64 above): one sequence in two
// blocks, the second continuing from the tail the first left, gives the forward's outputs over the
// whole sequence, every output written (poisoned before), and the tail its last W−1 inputs.
static void test_conv_step(void) {
    int T = 11, T1 = 4, C = 6, W = 4;
    size_t n = (size_t)T * C;
    float *x = randf(n, 1), *w = randf(C * W, 0.5), *yf = nanf_buf(n), *ys = nanf_buf(n);
    float *tail = zeros((size_t)(W - 1) * C);
    conv_fwd1(O, x, C, w, yf, 1, T, C, W);
    O->conv_silu_step(tail, x, C, w, ys, 1, T1, C, W);
    O->conv_silu_step(tail, x + (size_t)T1 * C, C, w, ys + (size_t)T1 * C, 1, T - T1, C, W);
    int ok;
    T_REL("conv step: two blocks give the forward's outputs", cols_diff(ys, yf, T, C, C, 0, &ok), 1e-6);
    T_CHECK(!memcmp(tail, x + (size_t)(T - W + 1) * C, (size_t)(W - 1) * C * sizeof(float)),
            "conv step: the tail holds the last W-1 inputs");
    free(x);
    free(w);
    free(yf);
    free(ys);
    free(tail);
}

// Two channel groups in one call (ops.h kda_conv_group) against one call a group on the same
// columns: the same outputs, dx only in the groups' columns.
static void test_conv_groups(void) {
    int B = 2, T = 7, W = 4, ld = 13, C[2] = {3, 5}, col[2] = {1, 6};
    size_t nw = (size_t)B * T * ld;
    float *x = randf(nw, 1), *dxa = nanf_buf(nw), *dxb = nanf_buf(nw);
    kda_conv_group ga[2];
    float *ya[2], *yb[2], *w[2], *dy[2], *dwa[2], *dwb[2];
    for (int i = 0; i < 2; i++) {
        size_t n = (size_t)B * T * C[i];
        w[i] = randf((size_t)C[i] * W, 0.5), dy[i] = randf(n, 1), ya[i] = nanf_buf(n), yb[i] = nanf_buf(n);
        dwa[i] = zeros((size_t)C[i] * W), dwb[i] = zeros((size_t)C[i] * W);
        ga[i] = (kda_conv_group){col[i], C[i], w[i], ya[i], dy[i], dwa[i]};
    }
    O->conv_silu_fwd(x, ld, ga, 2, B, T, W);
    O->conv_silu_bwd(x, ld, dxa, ga, 2, B, T, W);
    for (int i = 0; i < 2; i++) {
        conv_fwd1(O, x + col[i], ld, w[i], yb[i], B, T, C[i], W);
        conv_bwd1(O, x + col[i], ld, w[i], dy[i], dxb + col[i], dwb[i], B, T, C[i], W);
    }
    int same = !memcmp(dxa, dxb, nw * sizeof(float)), outside = 1;
    for (int i = 0; i < 2; i++)
        same &= !memcmp(ya[i], yb[i], (size_t)B * T * C[i] * sizeof(float)) &&
            !memcmp(dwa[i], dwb[i], (size_t)C[i] * W * sizeof(float));
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int j = 0; j < ld; j++)
            if (j < col[0] || (j >= col[0] + C[0] && j < col[1]) || j >= col[1] + C[1])
                outside &= isnan(dxa[r * ld + j]);
    T_CHECK(same, "conv: two channel groups in one call give a call a group's outputs");
    T_CHECK(outside, "conv: dx written only in the groups' columns");
    for (int i = 0; i < 2; i++) free(w[i]), free(dy[i]), free(ya[i]), free(yb[i]), free(dwa[i]), free(dwb[i]);
    free(x), free(dxa), free(dxb);
}

// At width W over T time steps; W = the backend's max_conv (its widest) with T > W takes every tap.
static void test_conv(int W, int T) {
    int B = 2, C = 5, dm[] = {B, T, C, W};
    size_t n = (size_t)B * T * C;
    float *x = randf(n, 1), *w = randf(C * W, 0.5), *y = nanf_buf(n);
    conv_fwd1(O, x, C, w, y, B, T, C, W);
    double *in[] = {to_d(x, n), to_d(w, C * W)}, *ref = kda_malloc(n * sizeof(double));
    ref_conv(in, ref, dm);
    T_REL(W == 4 ? "short conv + SiLU fwd" : "short conv + SiLU fwd, the widest window", rel_d(y, ref, n), 1e-6);
    float *dy = randf(n, 1), *dx = nanf_buf(n), *dw = zeros(C * W);
    conv_bwd1(O, x, C, w, dy, dx, dw, B, T, C, W);
    size_t sz[] = {n, (size_t)C * W};
    double *dyd = to_d(dy, n);
    double *g0 = fd_grad(ref_conv, in, 0, sz, n, dyd, dm), *g1 = fd_grad(ref_conv, in, 1, sz, n, dyd, dm);
    T_REL(W == 4 ? "short conv + SiLU bwd dx" : "short conv + SiLU bwd dx, the widest window", rel_d(dx, g0, n), 1e-5);
    T_REL(W == 4 ? "short conv + SiLU bwd dw" : "short conv + SiLU bwd dw, the widest window", rel_d(dw, g1, C * W), 1e-5);
    free(x);
    free(w);
    free(y);
    free(dy);
    free(dx);
    free(dw);
    free(in[0]);
    free(in[1]);
    free(ref);
    free(dyd);
    free(g0);
    free(g1);
}

// half h (0: the first F columns, 1: the next F) of each row of x [N,2F], packed [N,F]
static float *half_of(const float *x, int h, int N, int F) {
    float *o = kda_malloc((size_t)N * F * sizeof(float));
    for (int r = 0; r < N; r++) memcpy(o + (size_t)r * F, x + (size_t)r * 2 * F + h * F, F * sizeof(float));
    return o;
}

static void test_swiglu(void) {
    int N = 5, F = 10, n = N * F, dm[] = {n};
    float *g = randf(n, 2), *u = randf(n, 1), *z = nanf_buf(n), *gu = gu_pack(g, u, N, F);
    O->swiglu_fwd(gu, z, N, F);
    double *in[] = {to_d(g, n), to_d(u, n)}, *ref = kda_malloc(n * sizeof(double));
    ref_swiglu(in, ref, dm);
    T_REL("swiglu fwd", rel_d(z, ref, n), 1e-6);
    // dz as the columns of a wider matrix (rows F + 3 apart)
    int ld = F + 3;
    float *dz = randf(n, 1), *dzw = nanf_buf((size_t)N * ld), *dgu = nanf_buf(2 * n), *zb = nanf_buf(n);
    for (int r = 0; r < N; r++) memcpy(dzw + (size_t)r * ld, dz + (size_t)r * F, F * sizeof(float));
    O->swiglu_bwd(gu, dzw, ld, dgu, zb, N, F);
    T_CHECK(!memcmp(zb, z, n * sizeof(float)), "swiglu bwd: its z has the forward's bits");
    // in place, as the model calls it: dgu over gu, z over dz (rows F apart)
    float *io = gu_pack(g, u, N, F), *io_dz = kda_malloc(n * sizeof(float));
    memcpy(io_dz, dz, n * sizeof(float));
    O->swiglu_bwd(io, io_dz, F, io, io_dz, N, F);
    T_CHECK(!memcmp(io, dgu, 2 * n * sizeof(float)) && !memcmp(io_dz, z, n * sizeof(float)),
            "swiglu bwd in place (dgu over gu, z over dz): the same bits");
    free(io_dz);
    float *dg = half_of(dgu, 0, N, F), *du = half_of(dgu, 1, N, F);
    size_t sz[] = {n, n};
    double *dzd = to_d(dz, n);
    double *g0 = fd_grad(ref_swiglu, in, 0, sz, n, dzd, dm), *g1 = fd_grad(ref_swiglu, in, 1, sz, n, dzd, dm);
    T_REL("swiglu bwd d_gate", rel_d(dg, g0, n), 1e-5);
    T_REL("swiglu bwd d_up", rel_d(du, g1, n), 1e-5);
    float *p[] = {g, u, z, gu, dz, dzw, dgu, zb, io, dg, du};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    double *q[] = {in[0], in[1], ref, dzd, g0, g1};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) free(q[i]);
}

static void test_embed_ce(void) {
    int N = 300, d = 8, NV = 37, dm[] = {N, d, NV}; // N > the 256-token chunk: two chunks
    int32_t ids[300], tgt[300];
    for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)kda_rng_below(&R, NV);
        tgt[i] = i % 7 == 3 ? -100 : (int32_t)kda_rng_below(&R, NV);
    }
    float *E = randf((size_t)NV * d, 0.5), *out = nanf_buf(N * d);
    O->embed_fwd(ids, E, out, N, d, NV);
    int ok = 1;
    for (int n = 0; n < N; n++) ok &= !memcmp(out + n * d, E + ids[n] * d, d * sizeof(float));
    T_CHECK(ok, "embedding fwd gathers the rows");
    float *dout = randf(N * d, 1), *dE = zeros(NV * d);
    double *ref = kda_calloc(NV * d, sizeof(double));
    O->embed_bwd(ids, dout, dE, N, d);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < d; j++) ref[ids[n] * d + j] += dout[n * d + j];
    T_REL("embedding bwd scatter-add", rel_d(dE, ref, NV * d), 1e-6);

    float *x = randf(N * d, 1), *dx = nanf_buf(N * d), *dE2 = zeros(NV * d);
    long nv = 0;
    ce_tgt = tgt;
    double loss = O->lm_head_ce(x, E, tgt, N, d, NV, 1.0f, dx, dE2, &nv);
    double *in[] = {to_d(x, N * d), to_d(E, NV * d)}, lref;
    ref_ce(in, &lref, dm);
    long nvalid = 0;
    for (int i = 0; i < N; i++) nvalid += tgt[i] >= 0;
    T_CHECK(nv == nvalid, "fused head+CE counts %ld valid targets (expected %ld)", nv, nvalid);
    T_REL("fused head+CE loss sum", fabs(loss - lref) / fabs(lref), 1e-6);
    size_t sz[] = {N * d, NV * d};
    double one = 1;
    double *g0 = fd_grad(ref_ce, in, 0, sz, 1, &one, dm), *g1 = fd_grad(ref_ce, in, 1, sz, 1, &one, dm);
    T_REL("fused head+CE dx vs finite differences", rel_d(dx, g0, N * d), 1e-5);
    T_REL("fused head+CE dE vs finite differences", rel_d(dE2, g1, NV * d), 1e-5);
    float *logits = nanf_buf(2 * NV);
    O->lm_head_logits(x, E, logits, 2, d, NV);
    double lr_[2 * 37];
    for (int n = 0; n < 2; n++)
        for (int v = 0; v < NV; v++) {
            double a = 0;
            for (int j = 0; j < d; j++) a += (double)x[n * d + j] * E[v * d + j];
            lr_[n * NV + v] = a;
        }
    T_REL("lm_head logits", rel_d(logits, lr_, 2 * NV), 1e-6);
    free(E);
    free(out);
    free(dout);
    free(dE);
    free(ref);
    free(x);
    free(dx);
    free(dE2);
    free(in[0]);
    free(in[1]);
    free(g0);
    free(g1);
    free(logits);
}

static void test_optim_ops(void) {
    size_t n = 1000;
    float *p = randf(n, 1), *g = randf(n, 1), *m = randf(n, 0.1), *v = randf(n, 0.1);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    double *pr = to_d(p, n), *mr = to_d(m, n), *vr = to_d(v, n);
    double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.01, bc1 = 1 - pow(b1, 3), bc2 = 1 - pow(b2, 3);
    kda_adamw_seg seg = {0, n, (float)wd};
    O->adamw_multi(p, p, g, m, v, &seg, 1, 1.0f, (float)lr, (float)b1, (float)b2, (float)eps, (float)bc1, (float)bc2);
    for (size_t i = 0; i < n; i++) {
        double th = pr[i] * (1 - lr * wd);
        mr[i] = b1 * mr[i] + (1 - b1) * g[i];
        vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
        pr[i] = th - lr * (mr[i] / bc1) / (sqrt(vr[i] / bc2) + eps);
    }
    T_REL("adamw params", rel_d(p, pr, n), 1e-6);
    T_REL("adamw first moment", rel_d(m, mr, n), 1e-6);
    T_REL("adamw second moment", rel_d(v, vr, n), 1e-6);
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
    T_REL("sumsq", fabs(O->sumsq(g, n) - ss) / ss, 1e-12);
    g[n / 2] = INFINITY; // the optimizer step's non-finite check is Σg² itself
    T_CHECK(!isfinite(O->sumsq(g, n)), "sumsq of a gradient with an Inf is not finite");
    free(p);
    free(g);
    free(m);
    free(v);
    free(pr);
    free(mr);
    free(vr);
}

int main(void) {
    kda_rng_seed(&R, t_seed());
    O = kda_ops_cpu();
    test_rmsnorm();
    test_gnorm();
    test_linear();
    test_conv(4, 9);
    test_conv(O->max_conv, O->max_conv + 6);
    test_strided_inputs();
    test_conv_groups();
    test_conv_step();
    test_swiglu();
    test_embed_ce();
    test_optim_ops();
    return t_done("test_ops_cpu");
}
