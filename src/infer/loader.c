// loader.c — see loader.h.
#include "infer/loader.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

static void read_config(const kda_load_spec *s, kda_config *cfg, char **dir) {
    kda_config_defaults(cfg);
    if (s->empty_data_paths) cfg->n_train_data_path = cfg->n_valid_data_path = 0;
    *dir = NULL;
    if (s->ckpt)
        *dir = kda_ckpt_load_config(s->ckpt, cfg, s->who);
    else if (s->config)
        kda_config_load(cfg, s->config);
    for (int i = 0; i < s->n_sets; i++) kda_config_set(cfg, s->sets[i]);
    if (s->device) {
        char kv[64];
        snprintf(kv, sizeof kv, "device=%s", s->device);
        kda_config_set(cfg, kv);
    }
    if (s->adjust) s->adjust(cfg, s->adjust_arg);
    kda_config_finalize(cfg);
    if (cfg->num_threads > 0) omp_set_num_threads(cfg->num_threads);
}

void kda_loaded_open(kda_loaded *l, const kda_load_spec *spec) {
    memset(l, 0, sizeof *l);
    l->init_seed = spec->init_seed;
    read_config(spec, &l->cfg, &l->dir);
    l->tok = kda_tok_load_for_config(&l->cfg, spec->tokenizer, spec->who);
}

kda_model *kda_loaded_model(kda_loaded *l, int B, int T) {
    kda_model *m = kda_model_create(&l->cfg, kda_pick_backend(l->cfg.device), B, T);
    if (l->dir)
        kda_ckpt_load(m, l->dir, 0, &l->st, 0);
    else
        kda_model_init(m, l->init_seed);
    kda_model_drop_grad(m); // scoring and generation never compute gradients
    l->m = m;
    return m;
}

void kda_loaded_close(kda_loaded *l) {
    kda_model_free(l->m);
    if (l->tok) kda_tok_free(l->tok);
    free(l->dir);
    memset(l, 0, sizeof *l);
}
