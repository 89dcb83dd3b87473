// validate.c — see validate.h.
#include "train/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/data.h"
#include "data/gpt_dataset.h"

struct kda_validator {
    const kda_config *c;
    kda_data *d;
    int B, T;
    int32_t *sample, *ids, *tgt;
    void (*on_batch)(void *ctx, int done, int total);
    void *on_batch_ctx;
    const volatile sig_atomic_t *stop; // kda_validator_stop_on
};

kda_validator *kda_validator_open(const kda_config *c, int micro_batch, char *why, size_t why_len) {
    if (c->eval_iters <= 0) {
        snprintf(why, why_len, "eval_iters is 0");
        return NULL;
    }
    double fr[3];
    kda_split_parse(c->split, fr);
    if (c->n_valid_data_path == 0 && !(fr[1] > 0)) {
        snprintf(why, why_len, "split '%s' gives the valid split no share and valid_data_path is empty", c->split);
        return NULL;
    }
    kda_validator *v = kda_calloc(1, sizeof *v);
    v->c = c, v->B = micro_batch, v->T = c->seq_length;
    v->d = kda_data_open(c, KDA_SPLIT_VALID);
    v->sample = kda_malloc(sizeof(int32_t) * (size_t)v->B * (v->T + 1));
    v->ids = kda_malloc(sizeof(int32_t) * (size_t)v->B * v->T);
    v->tgt = kda_malloc(sizeof(int32_t) * (size_t)v->B * v->T);
    return v;
}

int kda_validate(kda_validator *v, kda_model *m, long k, int rank, int world, double *sum, double *count) {
    const kda_config *c = v->c;
    int B = v->B, T = v->T, n_local = c->global_batch_size / B / world;
    uint64_t per_eval = (uint64_t)c->eval_iters * c->global_batch_size, n = kda_data_num_samples(v->d);
    *sum = 0, *count = 0;
    for (int e = 0; e < c->eval_iters; e++) {
        uint64_t base = (uint64_t)k * per_eval + (uint64_t)e * c->global_batch_size + (uint64_t)rank * n_local * B;
        for (int mb = 0; mb < n_local; mb++) {
            if (v->stop && *v->stop) return 0;
            for (int b = 0; b < B; b++) { // one sample at a time: the split may be shorter than a batch
                kda_data_seek(v->d, n ? (base + (uint64_t)mb * B + b) % n : 0);
                kda_data_next(v->d, v->sample + (size_t)b * (T + 1), 1);
            }
            for (int b = 0; b < B; b++) {
                memcpy(v->ids + (size_t)b * T, v->sample + (size_t)b * (T + 1), sizeof(int32_t) * T);
                memcpy(v->tgt + (size_t)b * T, v->sample + (size_t)b * (T + 1) + 1, sizeof(int32_t) * T);
            }
            long nv = 0;
            double loss = kda_model_step(m, v->ids, v->tgt, B, T, 0, 1.0f, &nv);
            if (nv > 0) *sum += loss * nv, *count += nv;
        }
        if (v->on_batch) v->on_batch(v->on_batch_ctx, e + 1, c->eval_iters);
    }
    return 1;
}

void kda_validator_stop_on(kda_validator *v, const volatile sig_atomic_t *flag) { v->stop = flag; }

long kda_validate_index(const kda_config *c, long iteration) {
    return iteration / (c->eval_interval > 0 ? c->eval_interval : 1);
}

void kda_validator_on_batch(kda_validator *v, void (*fn)(void *ctx, int done, int total), void *ctx) {
    v->on_batch = fn, v->on_batch_ctx = ctx;
}

void kda_validator_close(kda_validator *v) {
    if (!v) return;
    kda_data_close(v->d);
    free(v->sample), free(v->ids), free(v->tgt);
    free(v);
}
