// bench.h — the timing behind `kda bench`: full training steps (forward, backward, clip, AdamW)
// of the config's model on random token ids, so it needs no data.
//
// Promises: the run's memory plan (mem_plan.h) is checked before anything large is allocated;
// the model is built and initialised from the config (seed), its AdamW state allocated; ids and targets are drawn from the seed's stream (uniform over vocab_size); each
// step is timed between two backend syncs; `warmup` untimed steps come first; with a backend
// that profiles (ops.h profile_begin), one more step is timed op by op. Device memory is read
// after the last step: nothing is allocated after the first step, so it is the run's peak.
// MFU is left to the caller: tokens_per_s x flops_per_token (kda-model.md §7) / peak.
#ifndef KDA_BENCH_H
#define KDA_BENCH_H

#include <stddef.h>

#include "base/config.h"
#include "model/mem_plan.h"
#include "model/ops.h"

typedef struct {
    const kda_ops *ops; // the backend that ran
    size_t n_params;
    int B, T;                         // micro-batch: B sequences of T tokens
    double loss;                      // of the last timed step
    double ms_median, ms_min, ms_max; // step time over the timed steps
    double tokens_per_s;              // B x T / median step time
    double flops_per_token;           // model FLOPs per trained token (§7)
    kda_mem_plan plan;                // the memory plan, checked before the model was built (mem_plan.h)
    kda_mem_avail avail;              // what the backend had when the plan was made
    double act_bytes;                 // planned activation memory
    int has_phases;                   // phases holds one profiled step
    kda_phase_times phases;
    int has_mem; // the backend reports device memory: mem_used / mem_total bytes
    size_t mem_used, mem_total;
    kda_clock_stats clocks;   // the device's clocks and power through the timed steps (samples 0: none)
    double ms_median_surveyed; // with gemm_survey: the median step with the fastest GEMM algorithms (0: none)
} kda_bench_result;

// Times `steps` (>= 1) training steps after `warmup` (>= 0) of cfg's (finalized) model at
// micro_batch_size x seq_length; sets the OpenMP thread count from num_threads, picks the
// backend from device. gemm_survey: afterwards, the backend's GEMM algorithm survey (ops.h) on
// stdout, then the steps timed again with the fastest algorithms.
kda_bench_result kda_bench_train_steps(const kda_config *cfg, int steps, int warmup, int gemm_survey);

#endif
