// run_log.h — what a training run reports, in one place: the log line (with elapsed time and
// the estimated time left), the metrics file, TensorBoard scalars, and the closing summary.
//
// Metrics file: metrics_file, or <save>/metrics.jsonl when only save is set (none when neither).
// A run that starts at iteration 0 writes it anew; a resumed run keeps the rows up to the
// iteration it resumes from and drops later ones (left by a run that crashed after its last
// checkpoint), so the file never holds two histories. Each open writes a header row
// {"kda_version", "host", "backend", "config" (the YAML), "start_iteration", ...}; training rows
// carry iteration, consumed samples and tokens, loss, lr, grad_norm, ms_per_iter, tokens_per_s,
// MFU (when the backend has a peak), device memory in use, wall time (unix seconds).
// TensorBoard (tensorboard_dir): Megatron's tags "lm loss", "learning-rate", "grad-norm",
// "iteration-time" (seconds), "throughput" (tokens/s) at each logged iteration, "lm loss
// validation" and "lm loss validation ppl" at each validation.
#ifndef KDA_RUN_LOG_H
#define KDA_RUN_LOG_H

#include <stdint.h>

#include "base/config.h"

typedef struct kda_run_log kda_run_log;

typedef struct {
    long iteration; // 1-based, after the step
    uint64_t consumed_samples;
    double loss, lr, grad_norm, ms_per_iter, tokens_per_s;
    double mfu;     // < 0: unknown
    double mem_gib; // device memory in use, < 0: unknown
} kda_log_row;

// config_path may be NULL (built-in config); backend: one line naming the device; files: 0 on
// all but one rank of a data-parallel run (they print nothing and write no file).
kda_run_log *kda_run_log_open(const kda_config *cfg, const char *config_path, const char *backend, long start_iteration,
                              int files);
// Prints the log line (stdout) and writes the metrics row and TensorBoard scalars.
void kda_run_log_train(kda_run_log *rl, const kda_log_row *r);
// A validation loss at an iteration: a log line, a metrics row {"iteration", "val_loss",
// "val_ppl"} and TensorBoard's "lm loss validation" / "lm loss validation ppl".
void kda_run_log_valid(kda_run_log *rl, long iteration, double loss);
// The closing summary (stdout); checkpoint: the last one written, or NULL.
void kda_run_log_summary(kda_run_log *rl, long iteration, const char *checkpoint);
void kda_run_log_close(kda_run_log *rl);

#endif
