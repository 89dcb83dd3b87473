// checkpoint.h — training checkpoints: exact resume, crash safety (issue 4).
//
// Layout of a save directory (config key `save`):
//   <save>/iter_0000100/model.safetensors   fp32 master weights under FLA's names (§5.3)
//   <save>/iter_0000100/optim.safetensors   AdamW moments: "<name>.exp_avg", "<name>.exp_avg_sq"
//   <save>/iter_0000100/state.json          iteration, optimizer step, consumed samples, RNG, format version,
//                                          CRC-32 of each tensor file (verified at load), weights_finite
//   <save>/iter_0000100/config.yaml         the run's configuration
//   <save>/latest                           the name of the newest complete checkpoint
// Promises: a checkpoint directory appears under its final name only when complete (it is
// written as iter_XXXXXXX.tmp-<pid>, every file fsync'ed, renamed, the parent fsync'ed);
// `latest` is replaced atomically afterwards; only the newest keep_last_n are kept.
// Loading validates names, shapes and dtypes and names the file on any mismatch.
#ifndef KDA_CHECKPOINT_H
#define KDA_CHECKPOINT_H

#include <stdint.h>

#include "base/common.h"
#include "base/config.h"
#include "model/model.h"

typedef struct {
    long iteration;            // optimizer updates applied (drives the lr schedule)
    long optim_steps;          // AdamW steps behind the saved moments (bias correction)
    uint64_t consumed_samples; // training samples consumed (data loader position)
    kda_rng rng;               // trainer RNG
} kda_train_state;

// The fp32 buffers a checkpoint holds, m->n_alloc floats each, in the parameter layout.
typedef enum { KDA_CKPT_WEIGHTS, KDA_CKPT_EXP_AVG, KDA_CKPT_EXP_AVG_SQ } kda_ckpt_buf;

// Checkpoints read and write the model's own buffers (m->master, m->adam_m, m->adam_v). An
// optimizer that keeps some of them in shards across ranks (ZeRO-1, dist_optim.h) lends those
// through this narrow interface: it holds the AdamW moments, and the weights when m->master is
// NULL (CUDA). A buffer the model holds never goes through it.
typedef struct {
    void *owner;
    // Collective (every rank calls, in the same order): rank 0's host[m->n_alloc] receives the
    // whole buffer (zeros past m->n_floats); on the other ranks host is scratch.
    void (*gather)(void *owner, kda_ckpt_buf which, float *host);
    // Every rank passes the whole buffer host[m->n_alloc] and keeps its shard; for the weights,
    // every rank's working copy is refreshed too (collective).
    void (*scatter)(void *owner, kda_ckpt_buf which, const float *host);
} kda_ckpt_shards;

// Save a checkpoint for st->iteration under save_dir from the model's weights and, when
// allocated, its AdamW moments; dies on I/O error (leaving earlier checkpoints untouched).
// Rank 0 writes; on other ranks it returns at once.
void kda_ckpt_save(kda_model *m, const kda_train_state *st, const char *save_dir);
// The same with an optimizer's shards (sh may be NULL: kda_ckpt_save): every rank calls it (the
// shards are gathered), rank 0 writes. The files hold whole tensors whatever the number of ranks.
void kda_ckpt_save_sharded(kda_model *m, const kda_ckpt_shards *sh, const kda_train_state *st, const char *save_dir);

// Resolve a load path: a checkpoint directory, or a save directory holding `latest`.
// Returns a malloc'ed path, or NULL when `path` holds no checkpoint yet (missing or empty).
char *kda_ckpt_resolve(const char *path);

// The config.yaml of checkpoint (or save directory) `ckpt` read over *cfg (set the defaults
// first) for command `who` ("kda eval"); returns the resolved checkpoint directory (free it).
// A missing directory, an empty save directory or a missing config.yaml dies naming who.
char *kda_ckpt_load_config(const char *ckpt, kda_config *cfg, const char *who);

// Load weights (always), optimizer moments (if load_optim; allocated in the model when it has
// none) and train state (if st != NULL; its rng only if load_rng). Every rank reads the whole files.
void kda_ckpt_load(kda_model *m, const char *ckpt_dir, int load_optim, kda_train_state *st, int load_rng);
// The same with an optimizer's shards (sh may be NULL: kda_ckpt_load): each rank keeps its shards.
void kda_ckpt_load_sharded(kda_model *m, const kda_ckpt_shards *sh, const char *ckpt_dir, int load_optim,
                           kda_train_state *st, int load_rng);
// Whether checkpoint DIR's weights were all finite when saved (state.json "weights_finite"):
// 1 yes, 0 no, -1 unknown (older checkpoint or unreadable state).
int kda_ckpt_weights_finite(const char *dir);

#endif
