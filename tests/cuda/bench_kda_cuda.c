// bench_kda_cuda.c — time the CUDA KDA core: forward, and forward + backward, at this
// model's head sizes (H=8, K=32, V=64, T=2048) for each micro-batch given (default 16 32).
// Random bf16 inputs (never zeros), 3 warm-up rounds, then the median over 9 repeats of
// 10 back-to-back calls, host clock around a device sync (launch gaps included).
//   bench_kda_cuda [B ...]
// KDA_BENCH_ONCE=1: one warm-up forward + backward, then one of each, untimed (for a profiler).
#include "cuda/cuda_bench.h"
#include "cuda/kda_inputs.h"

int main(int argc, char **argv) {
    bench_start(1234);
    int nb = argc > 1 ? argc - 1 : 2;
    for (int ib = 0; ib < nb; ib++) {
        int B = argc > 1 ? atoi(argv[ib + 1]) : (ib ? 32 : 16);
        int T = 2048, H = 8, K = 32, V = 64;
        kda_inputs x = kda_inputs_make(B, T, H, K, V, 64);
        kda_core_dims *d = &x.d;
        void *q = d_bf(x.q, x.nk), *k = d_bf(x.k, x.nk), *v = d_bf(x.v, x.nv), *f = d_bf(x.f, x.nk);
        void *b = d_bf(x.b, x.nb), *A = d_f32(x.A_log, H), *dt = d_f32(x.dt_bias, (size_t)H * K),
             *dO = d_bf(x.dO, x.nv);
        void *o = CU->alloc(x.nv * 2), *dq = CU->alloc(x.nk * 2), *dk = CU->alloc(x.nk * 2);
        void *dv = CU->alloc(x.nv * 2), *df = CU->alloc(x.nk * 2), *db = CU->alloc(x.nb * 2);
        float *dA = CU->alloc(H * 4), *ddt = CU->alloc((size_t)H * K * 4);
        size_t sb = CU->kda_saved_bytes(d);
        void *saved = CU->alloc(sb);
        double tf[9], tb[9];
        if (getenv("KDA_BENCH_ONCE")) {
            for (int w = 0; w < 2; w++) {
                CU->kda_fwd(d, q, k, v, f, b, A, dt, o, saved);
                CU->kda_bwd(d, q, k, v, f, b, A, dt, saved, dO, dq, dk, dv, df, db, dA, ddt);
            }
            CU->sync();
            printf("ours  chunk KDA B=%d T=%d: one forward + backward run (profiling mode)\n", B, T);
            goto done;
        }
        for (int w = 0; w < 3; w++) {
            CU->kda_fwd(d, q, k, v, f, b, A, dt, o, saved);
            CU->kda_bwd(d, q, k, v, f, b, A, dt, saved, dO, dq, dk, dv, df, db, dA, ddt);
        }
        for (int rep = 0; rep < 9; rep++) {
            CU->sync();
            double t0 = kda_now();
            for (int i = 0; i < 10; i++) CU->kda_fwd(d, q, k, v, f, b, A, dt, o, saved);
            CU->sync();
            double t1 = kda_now();
            for (int i = 0; i < 10; i++) {
                CU->kda_fwd(d, q, k, v, f, b, A, dt, o, saved);
                CU->kda_bwd(d, q, k, v, f, b, A, dt, saved, dO, dq, dk, dv, df, db, dA, ddt);
            }
            CU->sync();
            double t2 = kda_now();
            tf[rep] = (t1 - t0) / 10 * 1e3, tb[rep] = (t2 - t1) / 10 * 1e3;
        }
        qsort(tf, 9, sizeof(double), cmp_d), qsort(tb, 9, sizeof(double), cmp_d);
        printf("ours  chunk KDA B=%d T=%d H=%d K=%d V=%d: fwd %.3f ms  fwd+bwd %.3f ms  (saved %.1f MiB; "
               "fwd range %.3f..%.3f, fwd+bwd range %.3f..%.3f)\n",
               B, T, H, K, V, tf[4], tb[4], sb / 1048576.0, tf[0], tf[8], tb[0], tb[8]);
    done:
        CU->free(q), CU->free(k), CU->free(v), CU->free(f), CU->free(b), CU->free(A), CU->free(dt), CU->free(dO);
        CU->free(o), CU->free(dq), CU->free(dk), CU->free(dv), CU->free(df), CU->free(db), CU->free(dA);
        CU->free(ddt), CU->free(saved);
        kda_inputs_free(&x);
    }
    return 0;
}
