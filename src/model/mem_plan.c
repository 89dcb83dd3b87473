// mem_plan.c — parameter-state memory from the config and the host check (mem_plan.h).
#include "model/mem_plan.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "model/model.h"

kda_mem_plan kda_mem_plan_compute(const kda_config *c, const kda_ops *ops) {
    kda_model_mem mm;
    kda_model_mem_of(c, ops, 1, 1, &mm); // the parameter part does not depend on the batch
    kda_mem_plan p;
    p.embed_floats = mm.embed_floats;
    p.n_floats = mm.n_floats;
    p.layers_floats = mm.n_floats - mm.embed_floats;
    p.state_bytes = mm.params + mm.grads + mm.optim;
    return p;
}

size_t kda_mem_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

void kda_mem_plan_check_host(const kda_config *c, const kda_mem_plan *p) {
    size_t avail = kda_mem_host_available();
    if (!avail || p->state_bytes <= avail) return;
    const double G = 1073741824.0;
    int embed_big = p->embed_floats >= p->layers_floats;
    kda_die("the model needs %.1f GiB for its parameters, gradients and optimizer state (%zu parameters: embedding "
            "%.1f%%, layers %.1f%%), but the host has %.1f GiB available (MemAvailable); lower %s",
            p->state_bytes / G, p->n_floats, 100.0 * p->embed_floats / p->n_floats,
            100.0 * p->layers_floats / p->n_floats, avail / G,
            embed_big ? (c->vocab_size > c->hidden_size ? "vocab_size or hidden_size" : "hidden_size or vocab_size")
                      : "hidden_size, num_hidden_layers or intermediate_size");
}
