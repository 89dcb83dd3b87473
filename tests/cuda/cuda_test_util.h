// cuda_test_util.h — helpers shared by the CUDA device tests: the two backends, seeded random
// host data, bf16 upload/download through the op table, NaN-poisoned outputs.
// A device test calls cu_test_start(); without a usable GPU it prints "SKIP: no CUDA device"
// and exits 77, which tests/run.sh counts as skipped, not passed (CI has no GPU).
#ifndef KDA_CUDA_TEST_UTIL_H
#define KDA_CUDA_TEST_UTIL_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "model/ops.h"
#include "test_util.h"

static const kda_ops *CU, *CPU;
static kda_rng RNG;

static inline void cu_test_start(const char *name) {
    if (getenv("KDA_SAN")) { // tests/run.sh's ASan pass: ASan's shadow memory and the CUDA driver clash
        printf("SKIP: no CUDA device under ASan (KDA_SAN set): %s not run\n", name);
        exit(KDA_TEST_SKIP);
    }
    const char *why = NULL;
    CU = kda_ops_cuda(&why);
    if (!CU) {
        printf("SKIP: no CUDA device (%s): %s not run\n", why ? why : "?", name);
        exit(KDA_TEST_SKIP);
    }
    CPU = kda_ops_cpu();
    kda_rng_seed(&RNG, t_seed());
}

// One environment setting for an A/B (env_set), then the value the run itself had put back
// (env_restore): a user's own KDA_* setting outlives the test's comparison.
typedef struct {
    const char *var;
    int had;
    char keep[128];
} env_saved;
static inline env_saved env_set(const char *var, const char *val) {
    env_saved s = {var, 0, ""};
    const char *outer = getenv(var);
    if (outer) s.had = 1, snprintf(s.keep, sizeof s.keep, "%s", outer);
    setenv(var, val, 1);
    return s;
}
static inline void env_restore(const env_saved *s) {
    if (s->had)
        setenv(s->var, s->keep, 1);
    else
        unsetenv(s->var);
}

static inline float *h_randn(size_t n, double sd) {
    float *x = (float *)kda_malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * kda_rng_normal(&RNG));
    return x;
}
static inline float *h_copy(const float *x, size_t n) {
    float *y = (float *)kda_malloc(n * sizeof(float) + 4);
    memcpy(y, x, n * sizeof(float));
    return y;
}
// round every element to the nearest bf16 (what the CUDA side will see)
static inline float *h_bf(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = kda_bf16_to_f32(kda_f32_to_bf16(x[i]));
    return x;
}
static inline float *h_randn_bf(size_t n, double sd) { return h_bf(h_randn(n, sd), n); }

// device bf16 (A/W) tensor from host floats
static inline void *d_bf(const float *x, size_t n) {
    uint16_t *h = (uint16_t *)kda_malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) h[i] = kda_f32_to_bf16(x[i]);
    void *d = CU->alloc(n * 2);
    CU->to_device(d, h, n * 2);
    free(h);
    return d;
}
static inline float *d_f32(const float *x, size_t n) {
    float *d = (float *)CU->alloc(n * 4);
    CU->to_device(d, x, n * 4);
    return d;
}
static inline void *d_bf_nan(size_t n) {
    uint16_t *h = (uint16_t *)kda_malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) h[i] = 0x7fc0;
    void *d = CU->alloc(n * 2);
    CU->to_device(d, h, n * 2);
    free(h);
    return d;
}
static inline float *d_f32_nan(size_t n) {
    float *h = (float *)kda_malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = (float *)CU->alloc(n * 4);
    CU->to_device(d, h, n * 4);
    free(h);
    return d;
}
static inline float *h_of_bf(const void *d, size_t n) {
    uint16_t *h = (uint16_t *)kda_malloc(n * 2 + 2);
    CU->to_host(h, d, n * 2);
    float *x = (float *)kda_malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) x[i] = kda_bf16_to_f32(h[i]);
    free(h);
    return x;
}
static inline float *h_of_f32(const float *d, size_t n) {
    float *x = (float *)kda_malloc(n * 4 + 4);
    CU->to_host(x, d, n * 4);
    return x;
}
static inline size_t n_nonfinite(const float *x, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += !isfinite(x[i]);
    return k;
}
// rel err of a device result against a host fp32 reference; NaN (unwritten) counts as failure
static inline double rel_vs(const float *got, const float *ref, size_t n) {
    if (n_nonfinite(got, n)) return INFINITY;
    return kda_rel_err_f32f32(got, ref, n);
}
#define CHECK_REL(name, got, ref, n, tol) T_REL(name, rel_vs(got, ref, n), tol)
#endif
