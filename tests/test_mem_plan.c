// test_mem_plan.c — the memory plan is what the model allocates: kda_model_mem_of (the plan's
// model part) equals, byte for byte, what kda_model_create and kda_model_alloc_optim ask the
// backend for, counted by wrapping the CPU table's alloc/free, for several shapes and every
// recomputation setting; a training step allocates nothing more through the table; freeing
// gives every byte back (buffers shared by recomputation once).
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "model/mem_plan.h"
#include "model/model.h"
#include "model/ops.h"
#include "test_util.h"

// ---- the CPU table with counting alloc/free ----
enum { MAX_LIVE = 4096 };
static struct {
    void *p;
    size_t n;
} live[MAX_LIVE];
static size_t live_bytes, n_allocs;
static const kda_ops *cpu;

static void *count_alloc(size_t bytes) {
    void *p = cpu->alloc(bytes);
    for (int i = 0; i < MAX_LIVE; i++)
        if (!live[i].p) {
            live[i].p = p, live[i].n = bytes;
            live_bytes += bytes;
            n_allocs++;
            return p;
        }
    kda_die("test_mem_plan: more than %d live buffers", MAX_LIVE);
}

static void count_free(void *p) {
    if (!p) return;
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i].p == p) {
            live_bytes -= live[i].n;
            live[i].p = NULL;
            cpu->free(p);
            return;
        }
    kda_die("test_mem_plan: free of a pointer the table did not allocate (or a double free)");
}

static kda_ops counting(int bf16_like) {
    kda_ops o = *cpu;
    o.alloc = count_alloc;
    o.free = count_free;
    if (bf16_like) { // sizes as the CUDA backend's (bf16 activations and a bf16 working copy); allocation only
        o.act_bytes = 2, o.w_bytes = 2, o.work_is_master = 0;
    }
    return o;
}

static kda_config cfg_of(const char *const *sets) {
    kda_config c;
    kda_config_defaults(&c);
    for (; *sets; sets++) kda_config_set(&c, *sets);
    kda_config_finalize(&c);
    return c;
}

// Plan vs allocation for one config; with run, also a training step (CPU sizes only).
static void one(const char *what, const char *const *sets, int B, int T, int bf16_like, int run) {
    kda_config c = cfg_of(sets);
    kda_ops o = counting(bf16_like);
    kda_model_mem plan;
    kda_model_mem_of(&c, &o, B, T, &plan);
    size_t before = live_bytes, allocs0 = n_allocs;
    kda_model *m = kda_model_create(&c, &o, B, T);
    T_CHECK(live_bytes - before == plan.total, "%-34s create allocates %zu bytes = plan %zu (%zu buffers)", what,
            live_bytes - before, plan.total, n_allocs - allocs0);
    T_CHECK(!memcmp(&plan, &m->mem, sizeof plan), "%-34s the model's own account equals the plan, part by part", what);
    T_CHECK(plan.n_floats == m->n_floats && plan.n_alloc == m->n_alloc, "%-34s parameter floats %zu = model %zu", what,
            plan.n_floats, m->n_floats);
    T_CHECK(plan.embed_floats == ((m->params[m->embed].numel + 15) & ~(size_t)15), "%-34s embedding floats %zu", what,
            plan.embed_floats);
    T_CHECK(plan.acts_layers + plan.acts_head + plan.grad_scratch == m->act_bytes_total,
            "%-34s activations %zu bytes = act_bytes_total", what, m->act_bytes_total);
    size_t p0 = live_bytes;
    kda_model_alloc_optim(m);
    T_CHECK(live_bytes - p0 == plan.optim, "%-34s AdamW moments %zu bytes = plan %zu", what, live_bytes - p0,
            plan.optim);
    if (run) {
        size_t N = (size_t)B * T, a0 = n_allocs;
        int32_t *ids = kda_malloc(N * sizeof(int32_t)), *tgt = kda_malloc(N * sizeof(int32_t));
        for (size_t i = 0; i < N; i++) ids[i] = (int32_t)(i * 7 % (size_t)c.vocab_size), tgt[i] = (int32_t)(i % 5);
        kda_model_init(m, 1);
        double loss = kda_model_step(m, ids, tgt, B, T, 1, 1.0f, NULL);
        T_CHECK(n_allocs == a0 && live_bytes - before == plan.total + plan.optim,
                "%-34s a training step (loss %.3f) allocates nothing through the table", what, loss);
        free(ids);
        free(tgt);
    }
    kda_model_free(m);
    T_CHECK(live_bytes == before, "%-34s free gives every byte back (%zu left)", what, live_bytes - before);
}

int main(void) {
    cpu = kda_ops_cpu();
    const char *const tiny[] = {"vocab_size=256", NULL};
    const char *const odd[] = {"vocab_size=300", "hidden_size=40",       "num_hidden_layers=3", "num_heads=3",
                               "head_dim=8",     "intermediate_size=72", "kda_chunk_size=16",   NULL};
    const char *const sel[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=selective", NULL};
    const char *const sel_core[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=selective",
                                    "recompute_modules=[conv, core_attn]", NULL};
    const char *const full[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=full", NULL};
    const char *const rec[] = {"vocab_size=256", "kda_algo=recurrent", "expand_v=2", "conv_size=3", NULL};
    one("defaults (tiny)", tiny, 2, 24, 0, 1);
    one("3 layers, odd sizes, T % chunk != 0", odd, 3, 37, 0, 1);
    one("selective (default modules)", sel, 2, 16, 0, 1);
    one("selective conv + core_attn", sel_core, 2, 16, 0, 1);
    one("full", full, 2, 16, 0, 1);
    one("recurrent core, expand_v 2, conv 3", rec, 2, 10, 0, 1);
    one("bf16-like sizes, work copy", odd, 2, 24, 1, 0);
    one("bf16-like sizes, full", full, 4, 8, 1, 0);

    // recomputation plans less memory, and the shared part is counted once
    kda_model_mem none, s, f;
    kda_config cn = cfg_of((const char *const[]){"vocab_size=256", "num_hidden_layers=3", NULL});
    kda_config cs = cfg_of(sel), cf = cfg_of(full);
    kda_model_mem_of(&cn, cpu, 2, 16, &none);
    kda_model_mem_of(&cs, cpu, 2, 16, &s);
    kda_model_mem_of(&cf, cpu, 2, 16, &f);
    T_CHECK(none.acts_shared == 0 && s.acts_shared > 0 && f.acts_shared > s.acts_shared,
            "recomputed (shared) activations: none 0, selective %zu, full %zu bytes", s.acts_shared, f.acts_shared);
    T_CHECK(f.acts_layers < s.acts_layers && s.acts_layers < none.acts_layers,
            "layer activations: full %zu < selective %zu < none %zu bytes", f.acts_layers, s.acts_layers,
            none.acts_layers);
    T_CHECK(none.acts_core > 0 && none.acts_core < none.acts_layers,
            "the KDA core's saved buffers are a part: %zu of %zu", none.acts_core, none.acts_layers);
    T_CHECK(kda_mem_host_available() > 0, "MemAvailable read from /proc/meminfo: %zu bytes", kda_mem_host_available());
    return t_done("test_mem_plan");
}
