// eval_loss.c — validation loss / perplexity of a checkpoint (see eval.h): training's own
// validation (train/validate.h) on one rank, so the number is the one training logged.
#include <math.h>
#include <stdio.h>

#include "base/common.h"
#include "infer/eval.h"

typedef struct {
    FILE *f;
    double t0, last;
    long samples_per_batch;
} progress_ctx;

static void on_batch(void *ctx, int done, int total) {
    progress_ctx *p = ctx;
    double now = kda_now();
    if (now - p->last < 1.0 && done < total) return;
    double dt = now - p->t0 > 1e-9 ? now - p->t0 : 1e-9;
    fprintf(p->f, "kda eval: val_loss %d/%d batches, %.1f samples/s\n", done, total, done * p->samples_per_batch / dt);
    fflush(p->f);
    p->last = now;
}

void kda_eval_val_loss(kda_validator *v, const kda_config *cfg, kda_model *m, long iteration, kda_eval_loss *out,
                       FILE *progress) {
    progress_ctx p = {progress, kda_now(), kda_now(), cfg->global_batch_size};
    if (progress) kda_validator_on_batch(v, on_batch, &p);
    long k = kda_validate_index(cfg, iteration);
    double sum = 0, count = 0;
    kda_validate(v, m, k, 0, 1, &sum, &count);
    kda_validator_on_batch(v, NULL, NULL);
    if (!(count > 0)) kda_die("kda eval: val_loss: the valid split gave no token to predict");
    *out = (kda_eval_loss){.loss = sum / count,
                           .tokens = (long)count,
                           .samples = (long)cfg->eval_iters * cfg->global_batch_size,
                           .iteration = iteration,
                           .eval_index = k,
                           .cfg = cfg};
    out->perplexity = exp(out->loss);
}
