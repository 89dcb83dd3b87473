// ops_cpu.c — the CPU backend of ops.h: fp32 everywhere, OpenMP threads, OpenBLAS GEMMs.
// This is the reference every other backend is tested against. Reductions that produce
// parameter gradients run in a fixed order (parallel over output elements), so results do
// not depend on the thread count.
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/ops.h"

static void *cpu_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64))
        kda_die("out of host memory: could not allocate %.2f GiB; lower micro_batch_size or seq_length",
                bytes / 1073741824.0);
    return p;
}
static void cpu_free(void *p) { free(p); }
static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_sync(void) {}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// ---- embedding / head -------------------------------------------------------------------

static void cpu_embed_fwd(const int32_t *ids, const void *E_, void *out_, int N, int d, int NV) {
    const float *E = E_;
    float *out = out_;
    for (int n = 0; n < N; n++) {
        KDA_CHECK(ids[n] >= 0 && ids[n] < NV, "token id %d out of range [0, %d)", ids[n], NV);
        memcpy(out + (size_t)n * d, E + (size_t)ids[n] * d, sizeof(float) * d);
    }
}

static void cpu_embed_bwd(const int32_t *ids, const void *dout_, float *dE, int N, int d) {
    const float *dout = dout_;
    // parallel over columns: each thread owns a slice of d, rows added in token order
#pragma omp parallel for schedule(static)
    for (int j0 = 0; j0 < d; j0 += 16) {
        int j1 = j0 + 16 < d ? j0 + 16 : d;
        for (int n = 0; n < N; n++) {
            float *dst = dE + (size_t)ids[n] * d;
            const float *src = dout + (size_t)n * d;
            for (int j = j0; j < j1; j++) dst[j] += src[j];
        }
    }
}

#define CE_CHUNK 256
static float *ce_buf;
static size_t ce_buf_n;

// floats of the logits chunk (grow-only, kept between calls): CE_CHUNK rows of the vocabulary
static size_t ce_scratch_floats(int NV) { return (size_t)CE_CHUNK * NV; }

static float *ce_scratch(size_t n) {
    if (n > ce_buf_n) {
        free(ce_buf);
        ce_buf = cpu_alloc(n * sizeof(float));
        ce_buf_n = n;
    }
    return ce_buf;
}

static double cpu_lm_head_ce(const void *x_, const void *E_, const int32_t *targets, int N, int d, int NV,
                             float grad_scale, void *dx_, float *dE, long *n_valid) {
    const float *x = x_, *E = E_;
    float *dx = dx_;
    float *logits = ce_scratch(ce_scratch_floats(NV));
    double loss = 0;
    long valid = 0;
    for (int n0 = 0; n0 < N; n0 += CE_CHUNK) {
        int n = N - n0 < CE_CHUNK ? N - n0 : CE_CHUNK;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, NV, d, 1.0f, x + (size_t)n0 * d, d, E, d, 0.0f, logits,
                    NV);
        double chunk_loss = 0;
        long chunk_valid = 0;
#pragma omp parallel for schedule(static) reduction(+ : chunk_loss, chunk_valid)
        for (int i = 0; i < n; i++) {
            float *row = logits + (size_t)i * NV;
            int tgt = targets[n0 + i];
            if (tgt < 0) { // ignored position: no loss, no gradient
                memset(row, 0, sizeof(float) * NV);
                continue;
            }
            KDA_CHECK(tgt < NV, "target id %d out of range [0, %d)", tgt, NV);
            float mx = row[0];
            for (int v = 1; v < NV; v++) mx = row[v] > mx ? row[v] : mx;
            double sum = 0;
            for (int v = 0; v < NV; v++) sum += expf(row[v] - mx);
            double lse = mx + log(sum);
            chunk_loss += lse - row[tgt];
            chunk_valid++;
            if (dx) {
                float inv = (float)(1.0 / sum);
                for (int v = 0; v < NV; v++) row[v] = expf(row[v] - mx) * inv * grad_scale;
                row[tgt] -= grad_scale;
            }
        }
        loss += chunk_loss;
        valid += chunk_valid;
        if (dx) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, NV, 1.0f, logits, NV, E, d, 0.0f,
                        dx + (size_t)n0 * d, d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NV, d, n, 1.0f, logits, NV, x + (size_t)n0 * d, d,
                        1.0f, dE, d);
        }
    }
    if (n_valid) *n_valid = valid;
    return loss;
}

static double cpu_loss_acc; // lm_head_ce_acc's accumulator

static void cpu_lm_head_ce_acc(const void *x, const void *E, const int32_t *targets, int N, int d, int NV,
                               float grad_scale, void *dx, float *dE, double weight) {
    cpu_loss_acc += weight * cpu_lm_head_ce(x, E, targets, N, d, NV, grad_scale, dx, dE, NULL);
}

static double cpu_loss_take(void) {
    double s = cpu_loss_acc;
    cpu_loss_acc = 0;
    return s;
}

static void cpu_lm_head_logits(const void *x, const void *E, float *logits, int N, int d, int NV) {
    if (N == 1) // one row (a decode step): GEMV reads E once; sgemm would first copy (pack) all of it
        cblas_sgemv(CblasRowMajor, CblasNoTrans, NV, d, 1.0f, E, d, x, 1, 0.0f, logits, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, NV, d, 1.0f, x, d, E, d, 0.0f, logits, NV);
}

// ---- norms ------------------------------------------------------------------------------

// The forward's per-element outputs, shared with the backward's optional recompute (same bits).
static inline float rms_out(float x, float r, float w) { return x * r * w; }
static inline float gated_out(float o, float r, float w, float u) { return o * r * w * sigmoidf(u); }
static inline float swiglu_out(float g, float u) { return g * sigmoidf(g) * u; }

static void cpu_rmsnorm_fwd(const void *x_, const float *w, void *y_, float *rstd, int N, int d, float eps) {
    const float *x = x_;
    float *y = y_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d;
        float *yr = y + (size_t)n * d;
        double ss = 0;
        for (int j = 0; j < d; j++) ss += (double)xr[j] * xr[j];
        float r = (float)(1.0 / sqrt(ss / d + eps));
        rstd[n] = r;
        for (int j = 0; j < d; j++) yr[j] = rms_out(xr[j], r, w[j]);
    }
}

// dw[j] += Σ_n a[n,j]·b[n,j]·(scale_row ? s[n] : 1), column-parallel, fixed order
static void colsum_prod(const float *a, const float *b, const float *srow, float *dw, int N, int d) {
#pragma omp parallel for schedule(static)
    for (int j0 = 0; j0 < d; j0 += 16) {
        int j1 = j0 + 16 < d ? j0 + 16 : d;
        double acc[16] = {0};
        for (int n = 0; n < N; n++) {
            float s = srow ? srow[n] : 1.0f;
            for (int j = j0; j < j1; j++) acc[j - j0] += (double)a[(size_t)n * d + j] * b[(size_t)n * d + j] * s;
        }
        for (int j = j0; j < j1; j++) dw[j] += (float)acc[j - j0];
    }
}

static void cpu_rmsnorm_bwd(const void *x_, const float *w, const float *rstd, const void *dy_, void *dx_, float *dw,
                            void *y_, int N, int d, int accumulate) {
    const float *x = x_, *dy = dy_;
    float *dx = dx_, *y = y_;
    // dw[j] += Σ_n dy·x·rstd
    colsum_prod(dy, x, rstd, dw, N, d);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * d, *g = dy + (size_t)n * d;
        float *o = dx + (size_t)n * d;
        float r = rstd[n];
        double dot = 0;
        for (int j = 0; j < d; j++) dot += (double)g[j] * w[j] * xr[j];
        float c = (float)(dot / d) * r * r;
        for (int j = 0; j < d; j++) {
            float v = r * (g[j] * w[j] - c * xr[j]);
            o[j] = accumulate ? o[j] + v : v;
        }
        if (y)
            for (int j = 0; j < d; j++) y[(size_t)n * d + j] = rms_out(xr[j], r, w[j]);
    }
}

static void cpu_gated_rmsnorm_fwd(const void *o_, const void *u_, const float *w, void *y_, float *rstd, int rows,
                                  int V, float eps) {
    const float *o = o_, *u = u_;
    float *y = y_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < rows; n++) {
        const float *orow = o + (size_t)n * V, *urow = u + (size_t)n * V;
        float *yr = y + (size_t)n * V;
        double ss = 0;
        for (int j = 0; j < V; j++) ss += (double)orow[j] * orow[j];
        float r = (float)(1.0 / sqrt(ss / V + eps));
        rstd[n] = r;
        for (int j = 0; j < V; j++) yr[j] = gated_out(orow[j], r, w[j], urow[j]);
    }
}

static void cpu_gated_rmsnorm_bwd(const void *o_, const void *u_, const float *w, const float *rstd, const void *dy_,
                                  void *do_, void *du_, float *dw, void *y_, int rows, int V) {
    const float *o = o_, *u = u_, *dy = dy_;
    float *d_o = do_, *du = du_, *y = y_;
    // dw[j] += Σ dy·n·sig(u): parallel over j with a fixed row order
#pragma omp parallel for schedule(static)
    for (int j = 0; j < V; j++) {
        double acc = 0;
        for (int n = 0; n < rows; n++) {
            size_t i = (size_t)n * V + j;
            acc += (double)dy[i] * o[i] * rstd[n] * sigmoidf(u[i]);
        }
        dw[j] += (float)acc;
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < rows; n++) {
        size_t base = (size_t)n * V;
        float r = rstd[n];
        double dot = 0;
        for (int j = 0; j < V; j++) {
            float s = sigmoidf(u[base + j]);
            float g = dy[base + j] * w[j] * s; // d(normalised)
            dot += (double)g * o[base + j];
            float nn = o[base + j] * r;
            du[base + j] = dy[base + j] * nn * w[j] * s * (1.0f - s);
        }
        float c = (float)(dot / V) * r * r;
        for (int j = 0; j < V; j++) {
            float s = sigmoidf(u[base + j]);
            d_o[base + j] = r * (dy[base + j] * w[j] * s - c * o[base + j]);
        }
        if (y)
            for (int j = 0; j < V; j++) y[base + j] = gated_out(o[base + j], r, w[j], u[base + j]);
    }
}

// ---- linear -----------------------------------------------------------------------------

static void cpu_linear_fwd(const void *x, int ldx, const void *W, const void *bias_, const void *res_, void *y_, int N,
                           int In, int O) {
    float *y = y_;
    const float *bias = bias_, *res = res_;
    if (res && res != y) memcpy(y, res, (size_t)N * O * sizeof(float));
    float beta = res ? 1.0f : 0.0f;
    if (N == 1) // a decode step: GEMV, no packing of W
        cblas_sgemv(CblasRowMajor, CblasNoTrans, O, In, 1.0f, W, In, x, 1, beta, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, O, In, 1.0f, x, ldx, W, In, beta, y, O);
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) y[(size_t)n * O + o] += bias[o];
    }
}

static void cpu_linear_bwd(const void *x, int ldx, const void *W, const void *dy_, void *dx, float *dW, float *dbias,
                           int N, int In, int O, int accumulate) {
    const float *dy = dy_;
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, In, O, 1.0f, dy, O, W, In, accumulate ? 1.0f : 0.0f,
                    dx, ldx);
    if (dW) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, In, N, 1.0f, dy, O, x, ldx, 1.0f, dW, In);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < O; o++) {
            double acc = 0;
            for (int n = 0; n < N; n++) acc += dy[(size_t)n * O + o];
            dbias[o] += (float)acc;
        }
    }
}

// ---- short conv + SiLU -------------------------------------------------------------------

static void conv_silu_fwd1(const void *x_, int ldx, const float *w, void *y_, int B, int T, int C, int W) {
    const float *x = x_;
    float *y = y_;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *xb = x + (size_t)b * T * ldx;
            float *yr = y + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) {
                float acc = 0;
                for (int j = 0; j < W; j++) {
                    int tt = t - W + 1 + j;
                    if (tt >= 0) acc += w[c * W + j] * xb[(size_t)tt * ldx + c];
                }
                yr[c] = acc * sigmoidf(acc);
            }
        }
}

static void cpu_conv_silu_fwd(const void *x, int ldx, const kda_conv_group *g, int ng, int B, int T, int W) {
    for (int i = 0; i < ng; i++)
        conv_silu_fwd1((const float *)x + g[i].col, ldx, g[i].w, g[i].y, B, T, g[i].C, W);
}

static void cpu_conv_silu_step(void *tail_, const void *x_, int ldx, const float *w, void *y_, int B, int T, int C,
                               int W) {
    float *tail = tail_, *y = y_;
    const float *x = x_;
    int P = W - 1; // tail rows
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        float *tb = tail + (size_t)b * P * C;
        const float *xb = x + (size_t)b * T * ldx;
        for (int t = 0; t < T; t++) {
            float *yr = y + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) {
                float acc = 0;
                for (int j = 0; j < W; j++) { // X[t + j]: the tail for t + j < P, else x[t + j − P]
                    int i = t + j;
                    acc += w[c * W + j] * (i < P ? tb[(size_t)i * C + c] : xb[(size_t)(i - P) * ldx + c]);
                }
                yr[c] = acc * sigmoidf(acc);
            }
        }
        // new tail row i = X[T + i]; ascending i reads rows at or after the one it writes
        for (int i = 0; i < P; i++) {
            int src = T + i;
            const float *from = src < P ? tb + (size_t)src * C : xb + (size_t)(src - P) * ldx;
            memmove(tb + (size_t)i * C, from, sizeof(float) * C);
        }
    }
}

enum { CPU_CONV_MAXW = 64 }; // conv_silu_bwd1's per-channel sums: the config's largest conv_size

static void conv_silu_bwd1(const void *x_, int ldx, const float *w, const void *dy_, void *dx_, float *dw, int B,
                           int T, int C, int W) {
    const float *x = x_, *dy = dy_;
    float *dx = dx_;
    // per channel: recompute the pre-activation, then dx and dw; channels are independent
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double dwc[CPU_CONV_MAXW] = {0};
        for (int b = 0; b < B; b++) {
            const float *xb = x + (size_t)b * T * ldx, *dyb = dy + (size_t)b * T * C;
            float *dxb = dx + (size_t)b * T * ldx;
            for (int t = 0; t < T; t++) dxb[(size_t)t * ldx + c] = 0;
            for (int t = 0; t < T; t++) {
                float z = 0;
                for (int j = 0; j < W; j++) {
                    int tt = t - W + 1 + j;
                    if (tt >= 0) z += w[c * W + j] * xb[(size_t)tt * ldx + c];
                }
                float s = sigmoidf(z);
                float dz = dyb[(size_t)t * C + c] * s * (1.0f + z * (1.0f - s));
                for (int j = 0; j < W; j++) {
                    int tt = t - W + 1 + j;
                    if (tt < 0) continue;
                    dxb[(size_t)tt * ldx + c] += w[c * W + j] * dz;
                    dwc[j] += (double)dz * xb[(size_t)tt * ldx + c];
                }
            }
        }
        for (int j = 0; j < W; j++) dw[c * W + j] += (float)dwc[j];
    }
}

static void cpu_conv_silu_bwd(const void *x, int ldx, void *dx, const kda_conv_group *g, int ng, int B, int T, int W) {
    for (int i = 0; i < ng; i++)
        conv_silu_bwd1((const float *)x + g[i].col, ldx, g[i].w, g[i].dy, (float *)dx + g[i].col, g[i].dw, B, T, g[i].C,
                       W);
}

// ---- KDA core -----------------------------------------------------------------------------

static size_t cpu_kda_saved_bytes(const kda_core_dims *d) { return kda_core_saved_floats(d) * sizeof(float); }

static void cpu_kda_fwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f,
                        const void *b, const float *A_log, const float *dt_bias, void *o, void *saved) {
    kda_core_fwd(d, q, k, v, f, b, A_log, dt_bias, o, saved);
}

static void cpu_kda_fwd_state(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f,
                              const void *b, const float *A_log, const float *dt_bias, void *o, void *saved, float *S) {
    (void)saved; // nothing is kept for a backward
    kda_core_fwd_state(d, q, k, v, f, b, A_log, dt_bias, o, NULL, S);
}

static void cpu_kda_bwd(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f,
                        const void *b, const float *A_log, const float *dt_bias, const void *saved, const void *d_o,
                        void *dq, void *dk, void *dv, void *df, void *db, float *dA_log, float *ddt_bias) {
    kda_core_bwd(d, q, k, v, f, b, A_log, dt_bias, saved, d_o, dq, dk, dv, df, db, dA_log, ddt_bias);
}

// ---- MLP / residual ---------------------------------------------------------------------------

static void cpu_swiglu_fwd(const void *gu_, void *z_, int N, int F) {
    const float *gu = gu_;
    float *z = z_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        for (int j = 0; j < F; j++) z[(size_t)n * F + j] = swiglu_out(g[j], u[j]);
    }
}

static void cpu_swiglu_bwd(const void *gu_, const void *dz_, int lddz, void *dgu_, void *z_, int N, int F) {
    const float *gu = gu_, *dzs = dz_;
    float *dgu = dgu_, *z = z_;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *dz = dzs + (size_t)n * lddz;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int j = 0; j < F; j++) { // read before written: dg may be g, z may be dz (ops.h)
            float gj = g[j], uj = u[j], gz = dz[j], s = sigmoidf(gj);
            dg[j] = gz * uj * s * (1.0f + gj * (1.0f - s));
            du[j] = gz * gj * s;
            if (z) z[(size_t)n * F + j] = swiglu_out(gj, uj);
        }
    }
}

// ---- optimizer ----------------------------------------------------------------------------------

static double cpu_sumsq(const float *g, size_t n) {
    // fixed blocking so the sum does not depend on the thread count
    enum { BLK = 4096 };
    size_t nb = (n + BLK - 1) / BLK;
    double *part = kda_malloc(nb * sizeof(double) + 1);
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t i1 = (b + 1) * BLK < n ? (b + 1) * BLK : n;
        double acc = 0;
        for (size_t i = b * BLK; i < i1; i++) acc += (double)g[i] * g[i];
        part[b] = acc;
    }
    double s = 0;
    for (size_t b = 0; b < nb; b++) s += part[b];
    free(part);
    return s;
}

static void cpu_scale(float *g, float s, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

static void cpu_adamw(float *p, void *w_, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float wd, float bc1, float bc2) {
    float *w = w_;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float th = p[i] * (1.0f - lr * wd);
        float mi = beta1 * m[i] + (1.0f - beta1) * g[i];
        float vi = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        th -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        p[i] = th;
        if (w != p) w[i] = th;
    }
}

// The reference of the multi-tensor update: the per-tensor ops, one segment after another.
static void cpu_adamw_multi(float *p, void *w_, float *g, float *m, float *v, const kda_adamw_seg *segs, int nseg,
                            float gscale, float lr, float beta1, float beta2, float eps, float bc1, float bc2) {
    float *w = w_;
    for (int i = 0; i < nseg; i++) {
        size_t o = segs[i].offset, n = segs[i].n;
        if (gscale != 1.0f) cpu_scale(g + o, gscale, n);
        cpu_adamw(p + o, w + o, g + o, m + o, v + o, n, lr, beta1, beta2, eps, segs[i].wd, bc1, bc2);
    }
}

static void cpu_master_to_work(const float *p, void *w, size_t n) {
    if ((const void *)p != w) memcpy(w, p, n * sizeof(float));
}

// ---- memory planning (mem_plan.h) ----------------------------------------------------------

static void cpu_scratch_bytes(const kda_step_shape *s, size_t *held, size_t *transient) {
    *held = ce_scratch_floats(s->NV) * sizeof(float);
    *transient = kda_core_workspace_bytes(&s->core, omp_get_max_threads());
}

static size_t cpu_scratch_held(void) { return ce_buf_n * sizeof(float); }

static const char *cpu_describe(void) {
    static char buf[96];
    snprintf(buf, sizeof buf, "fp32 on the CPU, %d OpenMP threads, OpenBLAS", omp_get_max_threads());
    return buf;
}

static const kda_ops cpu_ops = {
    .name = "cpu",
    .describe = cpu_describe,
    .act_bytes = 4,
    .w_bytes = 4,
    .work_is_master = 1,
    .host_memory = 1,
    .max_conv = CPU_CONV_MAXW,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .embed_fwd = cpu_embed_fwd,
    .embed_bwd = cpu_embed_bwd,
    .lm_head_ce = cpu_lm_head_ce,
    .lm_head_ce_acc = cpu_lm_head_ce_acc,
    .loss_take = cpu_loss_take,
    .lm_head_logits = cpu_lm_head_logits,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .gated_rmsnorm_fwd = cpu_gated_rmsnorm_fwd,
    .gated_rmsnorm_bwd = cpu_gated_rmsnorm_bwd,
    .linear_fwd = cpu_linear_fwd,
    .linear_bwd = cpu_linear_bwd,
    .conv_silu_fwd = cpu_conv_silu_fwd,
    .conv_silu_bwd = cpu_conv_silu_bwd,
    .kda_saved_bytes = cpu_kda_saved_bytes,
    .kda_fwd = cpu_kda_fwd,
    .kda_bwd = cpu_kda_bwd,
    .conv_silu_step = cpu_conv_silu_step,
    .kda_fwd_state = cpu_kda_fwd_state,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .sumsq = cpu_sumsq,
    .adamw_multi = cpu_adamw_multi,
    .master_to_work = cpu_master_to_work,
    .scratch_bytes = cpu_scratch_bytes,
    .scratch_held = cpu_scratch_held,
};

const kda_ops *kda_ops_cpu(void) { return &cpu_ops; }
