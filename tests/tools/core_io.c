// core_io — run the CPU KDA core (src/model/kda_core.h) forward + backward on tensors from a
// safetensors file, with both algorithms, for the parity test against FLA
// (tests/python/test_fla_core.py).
//
//   core_io in.safetensors out.safetensors
//
// in.safetensors (any float dtype; converted to fp32):
//   q_raw, k_raw, f [B,T,H,K]   v, d_o [B,T,H,V]   b_logit [B,T,H]   A_log [H]   dt_bias [H*K]
//   optional scalars (any shape with one element): chunk (default 64), scale (default K^-1/2)
// out.safetensors, F32, for algo in {recurrent, chunked}:
//   <algo>.o [B,T,H,V], and the gradients of sum(o * d_o):
//   <algo>.d_q_raw, <algo>.d_k_raw, <algo>.d_f, <algo>.d_v, <algo>.d_b_logit, <algo>.d_A_log,
//   <algo>.d_dt_bias (shapes of the inputs)
// Prints one line per algorithm with the forward and backward times.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/kda_core.h"
#include "formats/safetensors.h"

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[4];
    float *x;
} tensor;

// Read tensor `name`, checking that its shape is `want` (ndim dims).
static float *read_checked(const kda_st_file *f, const char *name, int ndim, const int64_t *want) {
    const kda_st_entry *e = kda_st_require(f, name);
    int same = e->ndim == ndim;
    for (int k = 0; same && k < ndim; k++) same = e->shape[k] == want[k];
    if (!same) {
        char got[96] = "", exp[96] = "";
        for (int k = 0; k < e->ndim; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? "," : "", (long long)e->shape[k]);
        for (int k = 0; k < ndim; k++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%lld", k ? "," : "", (long long)want[k]);
        kda_die("core_io: '%s': tensor '%s' has shape [%s], expected [%s] (from q_raw and v)", f->path, name, got, exp);
    }
    float *x = kda_malloc(e->numel * sizeof(float));
    kda_st_to_f32(f, e, x);
    return x;
}

// An optional one-element tensor, or def when absent.
static double read_scalar(const kda_st_file *f, const char *name, double def) {
    const kda_st_entry *e = kda_st_find(f, name);
    if (!e) return def;
    if (e->numel != 1) kda_die("core_io: '%s': '%s' must have one element, it has %zu", f->path, name, e->numel);
    float v;
    kda_st_to_f32(f, e, &v);
    return v;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: core_io in.safetensors out.safetensors\n");
        return 2;
    }
    kda_st_file *in = kda_st_open(argv[1]);
    const kda_st_entry *eq = kda_st_require(in, "q_raw"), *ev = kda_st_require(in, "v");
    if (eq->ndim != 4 || ev->ndim != 4)
        kda_die("core_io: '%s': q_raw and v must be 4-D [B,T,H,K] / [B,T,H,V]", argv[1]);
    kda_core_dims d = {.B = (int)eq->shape[0],
                       .T = (int)eq->shape[1],
                       .H = (int)eq->shape[2],
                       .K = (int)eq->shape[3],
                       .V = (int)ev->shape[3]};
    if (d.B <= 0 || d.T <= 0 || d.H <= 0 || d.K <= 0 || d.V <= 0) kda_die("core_io: '%s': empty q_raw or v", argv[1]);
    double chunk = read_scalar(in, "chunk", 64);
    if (chunk != floor(chunk) || chunk < 1 || chunk > 4096)
        kda_die("core_io: chunk %g is not an integer in [1, 4096]", chunk);
    d.chunk = (int)chunk;
    d.scale = (float)read_scalar(in, "scale", 1.0 / sqrt((double)d.K));

    const int64_t sk[4] = {d.B, d.T, d.H, d.K}, sv[4] = {d.B, d.T, d.H, d.V}, sb[3] = {d.B, d.T, d.H}, sh[1] = {d.H},
                  shk[1] = {(int64_t)d.H * d.K};
    tensor x[] = {{"q_raw", 4, {0}, NULL},   {"k_raw", 4, {0}, NULL}, {"v", 4, {0}, NULL},      {"f", 4, {0}, NULL},
                  {"b_logit", 3, {0}, NULL}, {"A_log", 1, {0}, NULL}, {"dt_bias", 1, {0}, NULL}};
    enum { Q, KR, V, F, BL, AL, DT, NX };
    const int64_t *shapes[NX] = {sk, sk, sv, sk, sb, sh, shk};
    for (int i = 0; i < NX; i++) {
        memcpy(x[i].shape, shapes[i], (size_t)x[i].ndim * sizeof(int64_t));
        x[i].x = read_checked(in, x[i].name, x[i].ndim, x[i].shape);
    }
    float *d_o = read_checked(in, "d_o", 4, sv);
    kda_st_close(in);

    size_t nv = (size_t)d.B * d.T * d.H * d.V;
    const char *algo_names[2] = {"recurrent", "chunked"};
    const kda_core_algo algos[2] = {KDA_RECURRENT, KDA_CHUNKED};
    enum { PER_ALGO = 1 + NX };
    kda_st_tensor out[2 * PER_ALGO];
    memset(out, 0, sizeof out);
    char names[2 * PER_ALGO][64];
    float *bufs[2 * PER_ALGO];
    int n_out = 0;
    printf("core_io: B=%d T=%d H=%d K=%d V=%d chunk=%d scale=%.9g\n", d.B, d.T, d.H, d.K, d.V, d.chunk,
           (double)d.scale);
    for (int a = 0; a < 2; a++) {
        d.algo = algos[a];
        float *saved = kda_malloc(kda_core_saved_floats(&d) * sizeof(float) + 1);
        float *o = kda_calloc(nv, sizeof(float));
        float *g[NX];
        for (int i = 0; i < NX; i++) {
            size_t n = 1;
            for (int k = 0; k < x[i].ndim; k++) n *= (size_t)x[i].shape[k];
            g[i] = kda_calloc(n, sizeof(float)); // zero: d_A_log and d_dt_bias are accumulated
        }
        double t0 = kda_now();
        kda_core_fwd(&d, x[Q].x, x[KR].x, x[V].x, x[F].x, x[BL].x, x[AL].x, x[DT].x, o, saved);
        double t1 = kda_now();
        kda_core_bwd(&d, x[Q].x, x[KR].x, x[V].x, x[F].x, x[BL].x, x[AL].x, x[DT].x, saved, d_o, g[Q], g[KR], g[V],
                     g[F], g[BL], g[AL], g[DT]);
        double t2 = kda_now();
        printf("core_io: %-9s fwd %.1f ms, bwd %.1f ms\n", algo_names[a], 1e3 * (t1 - t0), 1e3 * (t2 - t1));
        free(saved);
        for (int i = -1; i < NX; i++) {
            kda_st_tensor *t = &out[n_out];
            snprintf(names[n_out], sizeof names[n_out], "%s.%s%s", algo_names[a], i < 0 ? "" : "d_",
                     i < 0 ? "o" : x[i].name);
            t->name = names[n_out];
            t->dtype = KDA_ST_F32;
            t->ndim = i < 0 ? 4 : x[i].ndim;
            memcpy(t->shape, i < 0 ? sv : x[i].shape, (size_t)t->ndim * sizeof(int64_t));
            t->data = bufs[n_out] = i < 0 ? o : g[i];
            n_out++;
        }
    }
    kda_st_write(argv[2], out, n_out);
    for (int i = 0; i < n_out; i++) free(bufs[i]);
    for (int i = 0; i < NX; i++) free(x[i].x);
    free(d_o);
    return 0;
}
