// bench.c — see bench.h.
#include "train/bench.h"

#include <omp.h>
#include <stdlib.h>

#include "base/common.h"
#include "model/model.h"
#include "model/optim.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// One training step as the trainer runs it (gradients zeroed by the caller; the loss left on the
// backend) at a fixed lr: its value does not change the time.
static void train_step(kda_model *m, const int32_t *ids, const int32_t *tgt, long step1) {
    kda_model_train_step(m, ids, tgt, m->B, m->T, 1);
    kda_optim_step(m, 1e-5, step1);
}

// warmup + steps steps; the timed ones' milliseconds into ms[steps]; returns the last step's loss.
static double time_steps(kda_model *m, const int32_t *ids, const int32_t *tgt, int steps, int warmup, double *ms,
                         kda_clock_stats *clocks) {
    const kda_ops *ops = m->ops;
    double loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        ops->sync();
        if (s == warmup && clocks && ops->clock_watch) ops->clock_watch(1, NULL); // after the warm-up's set-up
        double t0 = kda_now();
        ops->zero(m->grad, m->n_floats * sizeof(float));
        train_step(m, ids, tgt, s + 1);
        ops->sync();
        if (s >= warmup) ms[s - warmup] = (kda_now() - t0) * 1e3;
        loss = kda_model_loss_take(m); // outside the timed span
    }
    if (clocks && ops->clock_watch) ops->clock_watch(0, clocks);
    return loss;
}

// ids and targets uniform over the vocabulary, from the config's seed.
static void random_tokens(const kda_config *cfg, size_t n, int32_t *ids, int32_t *tgt) {
    kda_rng rng;
    kda_rng_seed(&rng, (uint64_t)cfg->seed);
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)kda_rng_below(&rng, cfg->vocab_size);
        tgt[i] = (int32_t)kda_rng_below(&rng, cfg->vocab_size);
    }
}

kda_bench_result kda_bench_train_steps(const kda_config *cfg, int steps, int warmup, int gemm_survey) {
    KDA_CHECK(steps >= 1 && warmup >= 0, "kda_bench_train_steps: steps %d, warmup %d", steps, warmup);
    if (cfg->num_threads > 0) omp_set_num_threads(cfg->num_threads);
    kda_bench_result r = {0};
    const kda_ops *ops = r.ops = kda_pick_backend(cfg->device);
    int B = r.B = cfg->micro_batch_size, T = r.T = cfg->seq_length;
    kda_mem_plan_compute(&r.plan, cfg, ops, B, T); // before anything large is allocated
    kda_mem_available(ops, &r.avail);
    kda_mem_plan_check(cfg, ops, &r.plan, &r.avail);
    kda_model *m = kda_model_create(cfg, ops, B, T);
    kda_model_init(m, (uint64_t)cfg->seed);
    kda_model_alloc_optim(m);
    size_t N = (size_t)B * T;
    int32_t *ids = kda_malloc(N * sizeof(int32_t)), *tgt = kda_malloc(N * sizeof(int32_t));
    random_tokens(cfg, N, ids, tgt);
    double *ms = kda_malloc(sizeof(double) * steps);
    r.loss = time_steps(m, ids, tgt, steps, warmup, ms, &r.clocks);
    if (ops->profile_begin) { // one more step, timed op by op on the device
        ops->zero(m->grad, m->n_floats * sizeof(float));
        ops->profile_begin();
        train_step(m, ids, tgt, warmup + steps + 1);
        ops->profile_end(&r.phases);
        r.has_phases = 1;
    }
    if (gemm_survey && ops->gemm_survey) { // after the steps above: every GEMM problem has its plan
        ops->gemm_survey(stdout, warmup + steps + r.has_phases);
        double *ms2 = kda_malloc(sizeof(double) * steps);
        time_steps(m, ids, tgt, steps, 0, ms2, NULL);
        qsort(ms2, steps, sizeof(double), cmp_double);
        r.ms_median_surveyed = ms2[steps / 2];
        free(ms2);
    } else if (gemm_survey) {
        printf("  GEMM survey: the %s backend has none\n", ops->name);
    }
    qsort(ms, steps, sizeof(double), cmp_double);
    r.ms_median = ms[steps / 2];
    r.ms_min = ms[0];
    r.ms_max = ms[steps - 1];
    r.tokens_per_s = N / (r.ms_median / 1e3);
    r.flops_per_token = kda_model_train_flops_per_token(cfg);
    r.act_bytes = (double)m->act_bytes_total;
    r.n_params = kda_model_num_params(m);
    if (ops->mem_info) {
        ops->mem_info(&r.mem_used, &r.mem_total);
        r.has_mem = 1;
    }
    free(ms);
    free(ids);
    free(tgt);
    kda_model_free(m);
    return r;
}
