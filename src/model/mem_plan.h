// mem_plan.h — the memory a training run needs, computed from the config before anything large
// is allocated and compared with what the machine has, so that a run too big fails in a second
// with both numbers and the settings that would make it fit, instead of growing until it is
// killed (or failing deep inside a step).
//
// Every number comes from the functions that size the real allocations, never from a second
// formula: the model's buffers from model.c's kda_model_mem_of (parameters, gradients, AdamW,
// every layer's activations with recompute_granularity / recompute_modules sharing one buffer
// across layers, the KDA core's saved buffer from the backend's kda_saved_bytes), the backend's
// own scratch from ops->scratch_bytes (the cross-entropy logits chunk, reduction partials, the KDA
// core backward's workspace: in the CUDA arena, or the CPU core's per-thread slices). Backend memory is compared with the device's free memory
// (ops->mem_info) or, when it is host memory (ops->host_memory), with MemAvailable; the host's
// share of a device run (one fp32 copy of the parameters, for init and checkpoints) with
// MemAvailable.
//
// Not counted: one replica's state is planned whole (ZeRO-1 shards it: the plan is an upper
// bound), the data-parallel communicator's buffers, the host's batches, and what a backend does
// not report yet (ops.h scratch_bytes says what, per backend).
#ifndef KDA_MEM_PLAN_H
#define KDA_MEM_PLAN_H
#include <stddef.h>
#include <stdio.h>

#include "base/config.h"
#include "model/model.h"
#include "model/ops.h"

typedef struct {
    int B, T;                 // micro-batch planned for
    int host_memory;          // the backend's memory is host memory (ops->host_memory)
    kda_model_mem model;      // the model's buffers and AdamW (model.h)
    size_t scratch_held;      // the backend's grow-only scratch (ops->scratch_bytes)
    size_t scratch_transient; // workspaces that live while one op runs
    size_t backend;           // all of the above: model.total + model.optim + scratch
    size_t host_staging;      // on the host: one fp32 copy of the parameter buffers
} kda_mem_plan;

// What the plan is compared with; 0 where unknown (then that side is not checked).
typedef struct {
    size_t dev_free, dev_total; // device memory free now (total − used) and the card's total
    size_t host;                // MemAvailable
} kda_mem_avail;

// The plan of a training run of c (finalized) on ops at micro-batch B x T. Dies, naming the
// settings, when B x T x num_heads exceeds what the kernels index (model.h).
void kda_mem_plan_compute(kda_mem_plan *p, const kda_config *c, const kda_ops *ops, int B, int T);
// Bytes the plan needs on the backend's memory (host backend: the staging copy included) and,
// for a device backend, on the host.
size_t kda_mem_plan_backend_need(const kda_mem_plan *p);
size_t kda_mem_plan_host_need(const kda_mem_plan *p);
// Free device memory (ops->mem_info) and MemAvailable.
void kda_mem_available(const kda_ops *ops, kda_mem_avail *a);
// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
size_t kda_mem_host_available(void);
// 1 when the plan fits what is available (an unknown side counts as fitting).
int kda_mem_plan_fits(const kda_mem_plan *p, const kda_mem_avail *a);
// One line: the total, where, its three parts and what is available, e.g. "46.37 GiB on the GPU
// (parameter state 5.09 GiB, activations 40.16 GiB, scratch 1.12 GiB) of 139.24 GiB free".
const char *kda_mem_plan_summary(char *buf, size_t n, const kda_mem_plan *p, const kda_mem_avail *a);
// The plan broken down, one part a line, each line starting with `prefix`, and what is available.
void kda_mem_plan_print(FILE *f, const char *prefix, const kda_mem_plan *p, const kda_mem_avail *a);
// When the plan does not fit: dies with one line naming the need and what is available, the
// parts by size and, for the largest, the settings that make the run fit (computed by planning
// with them: a smaller micro_batch_size that divides global_batch_size, recompute_granularity
// selective or full, a shorter seq_length, or a smaller model when its state alone is too big).
void kda_mem_plan_check(const kda_config *c, const kda_ops *ops, const kda_mem_plan *p, const kda_mem_avail *a);
#endif
