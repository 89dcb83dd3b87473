// cuda_bench.h — what the CUDA benchmark programs share (bench_ops_cuda, bench_kda_cuda): a
// CUDA runtime call's check, the median time of a function by CUDA events, seeded random device
// data. A benchmark prints numbers; it tests nothing.
#ifndef KDA_CUDA_BENCH_H
#define KDA_CUDA_BENCH_H
#include <errno.h>

#include "cuda/cuda_test_util.h"

#include <cuda_runtime_api.h>

enum { WARM = 3, REPS = 10, ROUNDS = 7 };

// The CUDA backend (CU) and the seeded generator; without a GPU "SKIP: no CUDA device" and exit 0
// (a benchmark has nothing to print there, and fails nothing).
static inline void bench_start(uint64_t seed) {
    const char *why = NULL;
    CU = kda_ops_cuda(&why);
    if (!CU) {
        printf("SKIP: no CUDA device (%s)\n", why);
        exit(0);
    }
    kda_rng_seed(&RNG, seed);
}

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, cudaGetErrorString(e));
        exit(1);
    }
}

typedef void (*bench_fn)(void *ctx);

// median over ROUNDS of the mean time of REPS calls of f(ctx), in ms (after WARM calls); the ops
// run on the backend's stream, a blocking stream, so events on the legacy default stream order
// with them
static inline double time_ms(bench_fn f, void *ctx) {
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event"), ck(cudaEventCreate(&e1), "event");
    for (int i = 0; i < WARM; i++) f(ctx);
    CU->sync();
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ck(cudaEventRecord(e0, 0), "record");
        for (int i = 0; i < REPS; i++) f(ctx);
        ck(cudaEventRecord(e1, 0), "record");
        ck(cudaEventSynchronize(e1), "sync");
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        t[r] = ms / REPS;
    }
    CU->sync();
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    qsort(t, ROUNDS, sizeof(double), cmp_d);
    return t[ROUNDS / 2];
}

static inline void *d_rand_bf(size_t n, double sd) {
    float *h = h_randn(n, sd);
    void *d = d_bf(h, n);
    free(h);
    return d;
}
static inline float *d_rand_f32(size_t n, double sd, int positive) {
    float *h = h_randn(n, sd);
    if (positive)
        for (size_t i = 0; i < n; i++) h[i] = fabsf(h[i]);
    float *d = d_f32(h, n);
    free(h);
    return d;
}
#endif
