// mem_plan.h — the memory a training run's parameter state needs, computed from the config alone
// before anything large is allocated, and checked against what the host has (MemAvailable), so
// that a model too big for the machine fails in a second with the numbers instead of growing
// until the kernel kills it. Counted: fp32 master weights, gradients, the compute copy (work,
// w_bytes per weight) and AdamW's two moments, each parameter padded as model.c pads it.
// Not counted yet: activations (model.c sizes them while it allocates; they are printed then).
#ifndef KDA_MEM_PLAN_H
#define KDA_MEM_PLAN_H
#include <stddef.h>

#include "base/config.h"
#include "model/ops.h"

typedef struct {
    size_t embed_floats;  // model.embeddings.weight (padded)
    size_t layers_floats; // all layers (padded)
    size_t n_floats;      // everything: equals kda_model's n_floats
    size_t state_bytes;   // master + grad + work + two AdamW moments
} kda_mem_plan;

// c must be finalized; the sizes come from model.c's kda_model_mem_of for this backend.
kda_mem_plan kda_mem_plan_compute(const kda_config *c, const kda_ops *ops);
// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
size_t kda_mem_host_available(void);
// Dies, naming both numbers and the settings that dominate, when the plan exceeds the host's
// available memory. No-op when it fits or the available memory is unknown.
void kda_mem_plan_check_host(const kda_config *c, const kda_mem_plan *p);
#endif
