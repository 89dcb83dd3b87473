// mem_plan.c — parameter-state memory from the config and the host check (mem_plan.h).
#include "model/mem_plan.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; } // model.c's add_param padding

kda_mem_plan kda_mem_plan_compute(const kda_config *c, int w_bytes) {
    size_t d = (size_t)c->hidden_size, H = (size_t)c->num_heads, K = (size_t)c->head_dim, Vd = (size_t)c->head_v_dim;
    size_t Dk = (size_t)c->key_dim, Dv = (size_t)c->value_dim, Dg = H * K, r = Vd, F = (size_t)c->intermediate_size;
    size_t W = (size_t)c->conv_size;
    size_t layer = pad16(d) + 2 * pad16(Dk * d) + pad16(Dv * d) + 2 * pad16(Dk * W) + pad16(Dv * W) + pad16(r * d) +
                   pad16(Dg * r) + pad16(H * d) + pad16(H) + pad16(Dg) + pad16(r * d) + pad16(Dv * r) + pad16(Dv) +
                   pad16(Vd) + pad16(d * Dv) + pad16(d) + 2 * pad16(F * d) + pad16(d * F);
    kda_mem_plan p;
    p.embed_floats = pad16((size_t)c->vocab_size * d);
    p.layers_floats = layer * (size_t)c->num_hidden_layers;
    p.n_floats = p.embed_floats + p.layers_floats + pad16(d);
    double per = 4.0 * 2 + (double)w_bytes + 4.0 * 2; // master, grad, work, adam m and v
    p.state_bytes = (size_t)((double)p.n_floats * per);
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
