// cli_bench.c — `kda bench`: training-step throughput and model FLOP utilisation.
// Times full training steps (forward, backward, clip, AdamW) on random token ids, so it needs
// no data; MFU = tokens/s x FLOPs/token (kda-model.md §7) / peak.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "model/mem_plan.h"
#include "model/model.h"
#include "model/optim.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// One line: where a step's device time goes (ops.h kda_phase_times), from one profiled step.
static void print_phases(const kda_phase_times *p) {
    static const char *name[KDA_PHASE_N] = {"GEMM", "KDA core", "cross-entropy", "other"};
    double wall = p->wall_ms > 0 ? p->wall_ms : 1, idle = p->wall_ms - p->busy_ms;
    printf("  one step by phase (%.1f ms on the device, %ld ops):", p->wall_ms, p->n_ops);
    for (int i = 0; i < KDA_PHASE_N; i++) printf(" %s %.1f ms (%.0f%%) |", name[i], p->ms[i], 100 * p->ms[i] / wall);
    printf(" idle %.1f ms (%.0f%%)\n", idle, 100 * idle / wall);
    if (p->ms[KDA_PHASE_GEMM] > 0)
        printf("  GEMMs: %.1f TFLOP in %.1f ms = %.0f TFLOP/s on average\n", p->gemm_flops / 1e12, p->ms[KDA_PHASE_GEMM],
               p->gemm_flops / (p->ms[KDA_PHASE_GEMM] * 1e9));
}

int cmd_bench(int argc, char **argv) {
    kda_config cfg;
    kda_config_defaults(&cfg);
    int steps = 5, warmup = 1;
    double peak_tflops = -1;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kda bench [CONFIG.yaml] [--set key=value]... [--device D] [--steps N] [--warmup N]\n"
                   "                 [--peak-tflops X]\n"
                   "Times training steps of CONFIG's model at micro_batch_size x seq_length on random tokens and\n"
                   "prints ms/step, tokens/s, model FLOPs/token (kda-model.md §7), MFU and planned memory.\n"
                   "--peak-tflops sets the MFU denominator (default: 989.4 on CUDA, none on the CPU).\n");
            return 0;
        }
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--device") || !strcmp(argv[i], "--steps") ||
            !strcmp(argv[i], "--warmup") || !strcmp(argv[i], "--peak-tflops")) {
            kda_cli_value("bench", argc, argv, &i);
            continue;
        }
        if (argv[i][0] == '-') kda_cli_usage_error("bench", "unknown option '%s'", argv[i]);
        path = argv[i];
    }
    if (path) kda_config_load(&cfg, path);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--set")) kda_config_set(&cfg, v);
        else if (!strcmp(a, "--device")) {
            char kv[64];
            snprintf(kv, sizeof kv, "device=%s", v);
            kda_config_set(&cfg, kv);
        } else if (!strcmp(a, "--steps")) steps = (int)kda_cli_long("bench", a, v, 1, 1000000);
        else if (!strcmp(a, "--warmup")) warmup = (int)kda_cli_long("bench", a, v, 0, 1000000);
        else if (!strcmp(a, "--peak-tflops")) peak_tflops = kda_cli_double("bench", a, v);
        else continue;
        i++;
    }
    if (steps < 1 || warmup < 0) kda_die("--steps must be >= 1 and --warmup >= 0");
    kda_config_finalize(&cfg);
    if (cfg.num_threads > 0) omp_set_num_threads(cfg.num_threads);
    const kda_ops *ops = kda_pick_backend(cfg.device);
    if (peak_tflops < 0) peak_tflops = ops->peak_tflops;
    int B = cfg.micro_batch_size, T = cfg.seq_length;
    kda_mem_plan mp; // the memory the steps need, checked before anything large is allocated (mem_plan.h)
    kda_mem_avail avail;
    kda_mem_plan_compute(&mp, &cfg, ops, B, T);
    kda_mem_available(ops, &avail);
    kda_mem_plan_check(&cfg, ops, &mp, &avail);
    kda_model *m = kda_model_create(&cfg, ops, B, T);
    kda_model_init(m, (uint64_t)cfg.seed);
    kda_model_alloc_optim(m);
    size_t N = (size_t)B * T;
    int32_t *ids = kda_malloc(N * sizeof(int32_t)), *tgt = kda_malloc(N * sizeof(int32_t));
    kda_rng rng;
    kda_rng_seed(&rng, (uint64_t)cfg.seed);
    for (size_t i = 0; i < N; i++) {
        ids[i] = (int32_t)kda_rng_below(&rng, cfg.vocab_size);
        tgt[i] = (int32_t)kda_rng_below(&rng, cfg.vocab_size);
    }
    double *ms = kda_malloc(sizeof(double) * steps);
    double loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        ops->sync();
        double t0 = kda_now();
        ops->zero(m->grad, m->n_floats * sizeof(float));
        loss = kda_model_step(m, ids, tgt, B, T, 1, 1.0f, NULL);
        kda_optim_step(m, 1e-5, s + 1);
        ops->sync();
        if (s >= warmup) ms[s - warmup] = (kda_now() - t0) * 1e3;
    }
    kda_phase_times ph;
    if (ops->profile_begin) { // one more step, timed op by op on the device
        ops->zero(m->grad, m->n_floats * sizeof(float));
        ops->profile_begin();
        kda_model_step(m, ids, tgt, B, T, 1, 1.0f, NULL);
        kda_optim_step(m, 1e-5, warmup + steps + 1);
        ops->profile_end(&ph);
    }
    qsort(ms, steps, sizeof(double), cmp_double);
    double med = ms[steps / 2], tps = N / (med / 1e3), fpt = kda_model_train_flops_per_token(&cfg);
    printf("kda bench: backend %s: %s (%s)\n", ops->name, ops->describe(), kda_backend_reason());
    printf("kda bench: %s backend, %d threads | %zu parameters | micro-batch %d x %d tokens | loss %.4f\n", ops->name,
           omp_get_max_threads(), kda_model_num_params(m), B, T, loss);
    printf("  step %.1f ms (median of %d; min %.1f, max %.1f) | %.0f tokens/s | %.4g GFLOP/token (3 x forward, §7)\n",
           med, steps, ms[0], ms[steps - 1], tps, fpt / 1e9);
    if (peak_tflops > 0)
        printf("  %.1f TFLOP/s achieved | MFU %.1f%% of %.1f TFLOP/s\n", tps * fpt / 1e12,
               100 * tps * fpt / (peak_tflops * 1e12), peak_tflops);
    else
        printf("  %.1f GFLOP/s achieved (no peak given: --peak-tflops X for MFU)\n", tps * fpt / 1e9);
    if (ops->profile_begin) print_phases(&ph);
    size_t state = mp.model.params + mp.model.grads + mp.model.optim, before = avail.dev_total - avail.dev_free;
    printf("  memory planned: parameters+grads+Adam %.2f GiB, activations %.2f GiB, scratch %.2f GiB, total %.2f GiB",
           state / 1073741824.0, m->act_bytes_total / 1073741824.0,
           (mp.scratch_held + mp.scratch_transient) / 1073741824.0, kda_mem_plan_backend_need(&mp) / 1073741824.0);
    if (avail.dev_total)
        printf(" (+ %.2f GiB in use before: %.2f GiB expected in use)", before / 1073741824.0,
               (kda_mem_plan_backend_need(&mp) + before) / 1073741824.0);
    printf("\n");
    if (ops->mem_info) {
        // nothing is allocated after the first step (planned buffers, grow-only scratch), so the
        // memory in use now is the peak of the run
        size_t used, total;
        ops->mem_info(&used, &total);
        printf("  GPU memory in use (peak): %.2f GiB of %.2f GiB\n", used / 1073741824.0, total / 1073741824.0);
    }
    free(ms);
    free(ids);
    free(tgt);
    kda_model_free(m);
    return 0;
}
