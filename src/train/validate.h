// validate.h — validation loss during training, with Megatron's meaning: every eval_interval
// iterations and at the end, eval_iters global batches of the valid split (the `split` share of
// train_data_path, or valid_data_path), forward only. Evaluation k reads the k-th run of
// eval_iters x global_batch_size valid samples (wrapping around the split), so a resumed run
// sees what an uninterrupted one would. `kda eval --tasks val_loss` runs the same code on a
// checkpoint (world 1), so it reproduces the validation row training logged at that iteration.
#ifndef KDA_VALIDATE_H
#define KDA_VALIDATE_H

#include <signal.h>
#include <stddef.h>

#include "base/config.h"
#include "model/model.h"

typedef struct kda_validator kda_validator;

// NULL, with the reason in why, when the run has no validation (eval_iters 0, or no valid
// split: split gives it no share and valid_data_path is empty).
kda_validator *kda_validator_open(const kda_config *c, int micro_batch, char *why, size_t why_len);
// This rank's part of evaluation k (world ranks share each global batch): the summed token
// losses into *sum and their count into *count (add them over ranks, then divide). Returns 1, or
// 0 when the stop flag (kda_validator_stop_on) was set before every micro-batch was run.
int kda_validate(kda_validator *v, kda_model *m, long k, int rank, int world, double *sum, double *count);
// Optional: kda_validate stops between micro-batches once *flag is non-zero (a signal's handler
// sets it: a long validation does not hold back a run told to stop).
void kda_validator_stop_on(kda_validator *v, const volatile sig_atomic_t *flag);
// The evaluation training runs after iteration `iteration`: iteration / eval_interval (the
// iteration itself when eval_interval is 0, where only the end of training validates).
long kda_validate_index(const kda_config *c, long iteration);
// Optional: fn(ctx, done, total) after each of the eval_iters global batches of kda_validate.
void kda_validator_on_batch(kda_validator *v, void (*fn)(void *ctx, int done, int total), void *ctx);
void kda_validator_close(kda_validator *v);

#endif
