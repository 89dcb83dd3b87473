// loader.h — a trained (or freshly initialised) model and its tokenizer, for the commands that use
// one (kda eval, kda generate): the one place that turns "a checkpoint, --set, --device,
// --tokenizer" into a finalized config, the tokenizer it names and the model on its backend.
//
// Promises: the config is the built-in defaults, then the checkpoint's config.yaml (or a config
// file, or nothing more), then the --set overrides in order, then --device, then the caller's
// last changes (adjust), then kda_config_finalize; its num_threads, when set, is applied to
// OpenMP. The model is planned for inputs of up to B x T tokens, holds no gradient buffer (these
// commands never run a backward) and has the checkpoint's weights (or §4's initialisation from a
// seed). Errors name the command.
#ifndef KDA_LOADER_H
#define KDA_LOADER_H

#include <stdint.h>

#include "base/config.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "train/checkpoint.h"

// What to load.
typedef struct {
    const char *who;         // the command, for messages: "kda eval"
    const char *ckpt;        // a checkpoint directory or a save directory with `latest`; NULL: none
    const char *config;      // without ckpt: a config file (NULL: the built-in defaults)
    const char *const *sets; // key=value overrides, applied in order
    int n_sets;              // how many
    const char *device;      // auto | cpu | cuda; NULL: the config's
    const char *tokenizer;   // tokenizer file instead of the config's tokenizer_model; NULL: the config's
    uint64_t init_seed;      // without ckpt: the seed of the model's initialisation
    int empty_data_paths;    // read the config over empty data paths instead of the defaults' demo
                             // path, so that adjust can tell a config that names no data
    void (*adjust)(kda_config *cfg, void *arg); // optional: the caller's changes before finalize
    void *adjust_arg;
} kda_load_spec;

// What was loaded; kda_loaded_close frees it.
typedef struct {
    kda_config cfg;     // finalized
    char *dir;          // the resolved checkpoint directory; NULL without ckpt
    kda_tokenizer *tok; // NULL for tokenizer_type byte (ids are bytes)
    kda_train_state st; // the checkpoint's (iteration, consumed samples); zero without ckpt
    kda_model *m;       // after kda_loaded_model
    uint64_t init_seed; // spec->init_seed
} kda_loaded;

// The config and the tokenizer (kda_tok_load_for_config) of spec; dies (naming spec->who) on a
// missing checkpoint, config or tokenizer.
void kda_loaded_open(kda_loaded *l, const kda_load_spec *spec);
// The model of l->cfg on its backend (kda_pick_backend) for inputs of up to B x T tokens, with the
// checkpoint's weights (or initialised from init_seed), its gradient buffer dropped; also l->m.
kda_model *kda_loaded_model(kda_loaded *l, int B, int T);
void kda_loaded_close(kda_loaded *l);

#endif
