// dist_optim.h — the optimizer of data-parallel training (several ranks, one model replica each).
//
// Gradients are reduced across ranks as the backward pass produces them: model.c calls the
// grad_ready hook per layer on the last micro-batch, and the reduction of that layer starts
// there (on NCCL's own stream, so it overlaps the backward of the layers below).
//   use_distributed_optimizer: false  every layer is all-reduced, every rank runs the whole AdamW.
//   use_distributed_optimizer: true   ZeRO-1: the flat parameter space is cut into `world` equal
//       shards of S floats; rank r keeps the fp32 master weights (on CUDA; on the CPU backend the
//       fp32 weights are the working copy and stay whole) and both Adam moments of its shard only,
//       receives the reduced gradients of its shard (reduce to owner), clips with the global norm,
//       updates its shard and all-gathers the working weights.
// Results equal one process with the same global batch to fp32 rounding (the sum order of the
// reduction differs); with one rank they are bit-identical to the plain path.
//
// Checkpoints stay independent of the rank count: checkpoint.c writes whole buffers, and the
// sharded optimizer only gathers and scatters its shards for it (kda_dist_optim_ckpt_shards), so a
// run can resume on another number of ranks.
#ifndef KDA_DIST_OPTIM_H
#define KDA_DIST_OPTIM_H

#include "comm/dist.h"
#include "model/model.h"
#include "model/optim.h"
#include "train/checkpoint.h"

typedef struct kda_dist_optim kda_dist_optim;

// Takes over m's optimizer state (call after kda_model_init, before loading a checkpoint).
kda_dist_optim *kda_dist_optim_create(kda_model *m, kda_comm *c, int sharded);
void kda_dist_optim_free(kda_dist_optim *o);
// Before the last micro-batch of an iteration: arm the per-layer reductions for its backward.
void kda_dist_optim_arm(kda_dist_optim *o);
// After the last micro-batch: wait for the reductions, clip, AdamW (sharded or whole), all-gather.
kda_step_info kda_dist_optim_step(kda_dist_optim *o, double lr, long step1);
// The shard of this rank: floats [*lo, *lo + *n) of the parameter buffers (whole buffer if not sharded).
void kda_dist_optim_shard(const kda_dist_optim *o, size_t *lo, size_t *n);

// Its shards for checkpoints (checkpoint.h kda_ckpt_save_sharded / kda_ckpt_load_sharded): the
// AdamW moments, and the fp32 masters on CUDA. NULL when not sharded: the model then holds every
// buffer whole (replicated AdamW) and checkpoints read it directly.
const kda_ckpt_shards *kda_dist_optim_ckpt_shards(kda_dist_optim *o);

#endif
