// trainer.h — the training loop of `kda train` as a library call: config -> model -> data ->
// gradient accumulation -> AdamW -> logs, validation, checkpoints.
//
// Promises of kda_train:
//   - Each iteration consumes one global batch (global_batch_size samples of seq_length + 1
//     tokens): global_batch_size / micro_batch_size micro-batches, split evenly across the
//     data-parallel ranks (rank r reads samples [base + r * n_local * B, ...) of each global
//     batch), gradients accumulated with weight 1 / n_micro, then one optimizer step (clipping,
//     AdamW; across ranks through dist_optim.h, ZeRO-1 when use_distributed_optimizer is set). The
//     data position after an iteration is base + global_batch_size whatever the rank count.
//   - Outputs are checked before anything large is allocated (run_guard.h: the save folder, its
//     lock, metrics_file); the run's memory plan (mem_plan.h) must fit the backend's memory.
//   - `load` resumes exactly (weights, AdamW moments, optimizer step, data position, RNG;
//     finetune / no_load_optim / no_load_rng as their keys say); every rank must have loaded the
//     same checkpoint, else the run stops naming `load`.
//   - Only rank 0 prints (the other ranks' stdout goes to /dev/null) and writes shared files.
//   - A non-finite gradient stops the run (kda_die) at its iteration, a non-finite loss at the
//     next log line (the loss is read back only there: log_interval), both naming the last
//     checkpoint and whether its weights are finite. (A non-finite loss with finite gradients,
//     which could let a checkpoint be saved in between, would need non-finite logits, whose
//     gradients are not finite either.)
//   - SIGINT / SIGTERM (handlers installed by kda_train) finish the iteration under way on every
//     rank (a validation under way stops between micro-batches, unlogged; none is run after),
//     save when `save` is set, and kda_train returns normally without the at_end hook; during the
//     hook (the sample after training) they have their default action.
//   - Checkpoints every save_interval iterations and at the end (checkpoint.h); validation every
//     eval_interval iterations and at the end (validate.h); log lines, metrics file, TensorBoard
//     and the closing summary through run_log.h.
// Its start lines ("kda train: ..." : config, backend, batch plan, loaded checkpoint) go to stdout.
#ifndef KDA_TRAINER_H
#define KDA_TRAINER_H

#include "base/config.h"
#include "model/model.h"

typedef struct {
    const char *config_path; // named in the start line and the metrics header; NULL: the built-in config
    int dry_run;             // build the model, load the checkpoint, print the plan, stop
    int plan_only;           // print the memory plan and stop, allocating nothing (mem_plan.h)
    // Called on every rank after a (not dry) run, before anything is freed, with the trained model
    // and the run's config (on ranks other than 0, sample_tokens is 0 and stdout is /dev/null).
    void (*at_end)(kda_model *m, const kda_config *run_cfg, void *user);
    void *user;
} kda_train_opts;

// Trains as cfg (finalized) says; dies with one clear line on any error. Sets the OpenMP thread
// count from num_threads, initialises and finalizes the process layout (comm/dist.h).
void kda_train(const kda_config *cfg, const kda_train_opts *opts);

#endif
