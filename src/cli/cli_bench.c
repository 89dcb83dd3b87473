// cli_bench.c — `kda bench`: training-step throughput and model FLOP utilisation.
// Parses the arguments, times training steps (train/bench.h), prints ms/step, tokens/s and
// MFU = tokens/s x FLOPs/token (kda-model.md §7) / peak.
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "train/bench.h"

static const char *const phase_name[KDA_PHASE_N] = {"GEMM", "KDA core", "cross-entropy", "other"};

// One line: where a step's device time goes (ops.h kda_phase_times), from one profiled step.
static void print_phases(const kda_phase_times *p) {
    double wall = p->wall_ms > 0 ? p->wall_ms : 1, idle = p->wall_ms - p->busy_ms;
    printf("  one step by phase (%.1f ms on the device, %ld ops):", p->wall_ms, p->n_ops);
    for (int i = 0; i < KDA_PHASE_N; i++)
        printf(" %s %.1f ms (%.0f%%) |", phase_name[i], p->ms[i], 100 * p->ms[i] / wall);
    printf(" idle %.1f ms (%.0f%%)\n", idle, 100 * idle / wall);
    if (p->ms[KDA_PHASE_GEMM] > 0)
        printf("  GEMMs: %.1f TFLOP in %.1f ms = %.0f TFLOP/s on average\n", p->gemm_flops / 1e12,
               p->ms[KDA_PHASE_GEMM], p->gemm_flops / (p->ms[KDA_PHASE_GEMM] * 1e9));
}

// The same step by op (largest first), down to min_share of the step; the rest on one line.
static void print_ops(const kda_phase_times *p, double min_share) {
    double wall = p->wall_ms > 0 ? p->wall_ms : 1, rest = 0;
    int more = 0;
    printf("  one step by op (device ms, share of the step, calls, phase; a GEMM's TFLOP/s):\n");
    for (int i = 0; i < p->n_op; i++) {
        const kda_op_time *o = &p->op[i];
        if (o->ms < min_share * wall) {
            rest += o->ms, more++;
            continue;
        }
        const char *ph = phase_name[o->phase];
        printf("    %-44s %8.2f ms %5.1f%% %6ld  %s", o->name, o->ms, 100 * o->ms / wall, o->calls, ph);
        if (o->flops > 0) printf("%*s %5.0f", 13 - (int)strlen(ph), "", o->flops / (o->ms * 1e9));
        putchar('\n');
    }
    if (more)
        printf("    %d more ops, each under %.1f%%: %.2f ms (%.1f%%)\n", more, 100 * min_share, rest,
               100 * rest / wall);
}

static void print_result(const kda_bench_result *r, int steps, double peak_tflops, int all_ops) {
    const kda_ops *ops = r->ops;
    double tps = r->tokens_per_s, fpt = r->flops_per_token;
    printf("kda bench: backend %s: %s (%s)\n", ops->name, ops->describe(), kda_backend_reason());
    printf("kda bench: %s backend, %d threads | %zu parameters | micro-batch %d x %d tokens | loss %.4f\n", ops->name,
           omp_get_max_threads(), r->n_params, r->B, r->T, r->loss);
    printf("  step %.1f ms (median of %d; min %.1f, max %.1f) | %.0f tokens/s | %.4g GFLOP/token (3 x forward, §7)\n",
           r->ms_median, steps, r->ms_min, r->ms_max, tps, fpt / 1e9);
    if (peak_tflops > 0)
        printf("  %.1f TFLOP/s achieved | MFU %.1f%% of %.1f TFLOP/s\n", tps * fpt / 1e12,
               100 * tps * fpt / (peak_tflops * 1e12), peak_tflops);
    else
        printf("  %.1f GFLOP/s achieved (no peak given: --peak-tflops X for MFU)\n", tps * fpt / 1e9);
    if (r->has_phases) print_phases(&r->phases), print_ops(&r->phases, all_ops ? 0 : 0.005);
    const kda_clock_stats *ck = &r->clocks;
    if (ck->samples)
        printf("  GPU clock through the steps: SM median %.0f MHz (min %.0f, card's max %.0f) | power median %.0f W "
               "(max %.0f, limit %.0f) | held by the power cap in %.0f%% of %d samples, thermal / hardware "
               "slowdown in %.0f%%\n",
               ck->sm_mhz_median, ck->sm_mhz_min, ck->sm_mhz_max, ck->power_w_median, ck->power_w_max,
               ck->power_limit_w, 100 * ck->power_capped, ck->samples, 100 * ck->thermal_or_hw);
    if (ck->energy_j > 0 && ck->watch_s > 0)
        printf("  energy through the timed steps: %.1f J a step (%.0f W on average) | %.0f tokens per joule\n",
               ck->energy_j / steps, ck->energy_j / ck->watch_s, r->B * (double)r->T * steps / ck->energy_j);
    if (r->ms_median_surveyed > 0)
        printf("  step with the surveyed GEMM algorithms %.1f ms (median of %d) | %.0f tokens/s (%+.1f%%)\n",
               r->ms_median_surveyed, steps, r->B * (double)r->T / (r->ms_median_surveyed / 1e3),
               100.0 * (r->ms_median / r->ms_median_surveyed - 1.0));
    const kda_mem_plan *mp = &r->plan;
    size_t state = mp->model.params + mp->model.grads + mp->model.optim;
    size_t before = r->avail.dev_total - r->avail.dev_free, need = kda_mem_plan_backend_need(mp);
    printf("  memory planned: parameters+grads+Adam %.2f GiB, activations %.2f GiB, scratch %.2f GiB, total %.2f GiB",
           state / 1073741824.0, r->act_bytes / 1073741824.0, (mp->scratch_held + mp->scratch_transient) / 1073741824.0,
           need / 1073741824.0);
    if (r->avail.dev_total)
        printf(" (+ %.2f GiB in use before: %.2f GiB expected in use)", before / 1073741824.0,
               (need + before) / 1073741824.0);
    printf("\n");
    if (r->has_mem)
        printf("  GPU memory in use (peak): %.2f GiB of %.2f GiB\n", r->mem_used / 1073741824.0,
               r->mem_total / 1073741824.0);
}

int cmd_bench(int argc, char **argv) {
    kda_config cfg;
    kda_config_defaults(&cfg);
    int steps = 5, warmup = 1, gemm_survey = 0, all_ops = 0;
    double peak_tflops = -1;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kda bench [CONFIG.yaml] [--set key=value]... [--device D] [--steps N] [--warmup N]\n"
                   "                 [--peak-tflops X] [--gemm-survey] [--all-ops]\n"
                   "Times training steps of CONFIG's model at micro_batch_size x seq_length on random tokens and\n"
                   "prints ms/step, tokens/s, model FLOPs/token (kda-model.md §7), MFU and planned memory.\n"
                   "  --set key=value   override one key of CONFIG (repeatable)\n"
                   "  --device D        auto | cpu | cuda (shorthand for --set device=D)\n"
                   "  --steps N         timed steps (default 5)\n"
                   "  --warmup N        untimed steps first (default 1)\n"
                   "  --peak-tflops X   the MFU denominator (default: 989.4 on CUDA, none on the CPU)\n"
                   "  --gemm-survey     afterwards, time the GEMM library's other algorithms for every GEMM of\n"
                   "                    the step (a table per problem), then the steps again with the fastest\n"
                   "  --all-ops         list every op of the profiled step (default: those of 0.5%% or more)\n");
            return 0;
        }
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--device") || !strcmp(argv[i], "--steps") ||
            !strcmp(argv[i], "--warmup") || !strcmp(argv[i], "--peak-tflops")) {
            const char *opt = argv[i], *v = kda_cli_value("bench", argc, argv, &i);
            if (!strcmp(opt, "--set"))
                kda_cli_set_value("bench", v);
            else if (!strcmp(opt, "--device"))
                kda_cli_device("bench", v);
            continue;
        }
        if (!strcmp(argv[i], "--gemm-survey") || !strcmp(argv[i], "--all-ops")) {
            kda_cli_flag("bench", argv[i]);
            if (!strcmp(argv[i], "--all-ops"))
                all_ops = 1;
            else
                gemm_survey = 1;
            continue;
        }
        if (argv[i][0] == '-') kda_cli_usage_error("bench", "unknown option '%s'", argv[i]);
        if (path) kda_cli_usage_error("bench", "takes one config file; got '%s' and '%s'", path, argv[i]);
        path = argv[i];
    }
    if (path) kda_config_load(&cfg, path);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--set"))
            kda_config_set(&cfg, v);
        else if (!strcmp(a, "--device")) {
            char kv[64];
            snprintf(kv, sizeof kv, "device=%s", v);
            kda_config_set(&cfg, kv);
        } else if (!strcmp(a, "--steps")) {
            steps = (int)kda_cli_long("bench", a, v, 1, 1000000);
        } else if (!strcmp(a, "--warmup")) {
            warmup = (int)kda_cli_long("bench", a, v, 0, 1000000);
        } else if (!strcmp(a, "--peak-tflops")) {
            peak_tflops = kda_cli_double("bench", a, v);
            if (peak_tflops <= 0) kda_cli_usage_error("bench", "--peak-tflops '%s' must be above 0 (TFLOP/s)", v);
        } else {
            continue;
        }
        i++;
    }
    kda_config_finalize(&cfg);
    kda_bench_result r = kda_bench_train_steps(&cfg, steps, warmup, gemm_survey);
    print_result(&r, steps, peak_tflops < 0 ? r.ops->peak_tflops : peak_tflops, all_ops);
    return 0;
}
