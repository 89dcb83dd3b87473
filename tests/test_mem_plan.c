// test_mem_plan.c — the memory plan is what the run allocates:
//  1. kda_model_mem_of (the plan's model part) equals, byte for byte, what kda_model_create and
//     kda_model_alloc_optim ask the backend for, counted by wrapping the CPU table's alloc/free,
//     for several shapes and every recomputation setting; a training step allocates nothing more
//     through the table; freeing gives every byte back (buffers shared by recomputation once);
//  2. the CPU backend's grow-only scratch after a step is the plan's scratch_held, and the most
//     workspace the KDA core (forward and backward: per-thread slices, the backward's partial
//     sums; allocated by the core, not through the table) held at once is its scratch_transient;
//  3. fits / check against given amounts of memory;
//  4. with CUDA built (no GPU needed: the table's sizes): the plans of the 300M and 1B configs
//     reproduce what the device runs logged as planned, and land just under the peaks measured on
//     an H200 (bench/logs: the difference is the CUDA context and cuBLASLt workspace, in use
//     before the run and so not part of the plan).
#include <math.h>
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

static size_t held_max; // the CPU's cross-entropy chunk only grows: the largest planned so far

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
        kda_core_workspace_peak(); // counts from here
        double loss = kda_model_step(m, ids, tgt, B, T, 1, 1.0f, NULL);
        T_CHECK(n_allocs == a0 && live_bytes - before == plan.total + plan.optim,
                "%-34s a training step (loss %.3f) allocates nothing through the table", what, loss);
        kda_mem_plan mp;
        kda_mem_plan_compute(&mp, &c, cpu, B, T);
        held_max = mp.scratch_held > held_max ? mp.scratch_held : held_max;
        T_CHECK(cpu->scratch_held() == held_max && mp.scratch_transient > 0,
                "%-34s backend scratch held after the step %zu bytes = plan %zu (transient %zu)", what,
                cpu->scratch_held(), held_max, mp.scratch_transient);
        size_t ws = kda_core_workspace_peak(); // the step's
        T_CHECK(ws == mp.scratch_transient, "%-34s the KDA core's workspace held at most %zu bytes at once = plan %zu",
                what, ws, mp.scratch_transient);
        T_CHECK(!memcmp(&mp.model, &plan, sizeof plan) &&
                    mp.backend == plan.total + plan.optim + mp.scratch_held + mp.scratch_transient &&
                    kda_mem_plan_backend_need(&mp) == mp.backend + plan.n_alloc * sizeof(float),
                "%-34s the plan: model %zu + AdamW %zu + scratch + staging = %zu bytes", what, plan.total, plan.optim,
                kda_mem_plan_backend_need(&mp));
        free(ids);
        free(tgt);
    }
    kda_model_free(m);
    T_CHECK(live_bytes == before, "%-34s free gives every byte back (%zu left)", what, live_bytes - before);
}

// The CUDA plans of the shipped configs against an H100's log (2026-12-06, session 26):
// planned = what `kda bench` printed as planned (kda_model_create's own count then), peak =
// `GPU memory in use (peak)` after the steps (cudaMemGetInfo: includes the CUDA context).
static void cuda_estimates(void) {
    const kda_ops *cu = kda_ops_cuda_sizing();
    if (!cu) {
        printf("  (built without CUDA: the CUDA estimates are not checked)\n");
        return;
    }
    static const struct {
        const char *config, *granularity, *modules; // modules: NULL = the default set
        int B;
        double state, acts, peak; // GiB, as logged
        const char *log;
    } runs[] = {
        {"configs/kda-300M.yaml", "", NULL, 16, 5.09, 18.64, 25.44, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-300M.yaml", "", NULL, 32, 5.09, 37.28, 44.06, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-300M.yaml", "selective", NULL, 32, 5.09, 22.75, 29.68, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-300M.yaml", "selective", "[layernorm,conv,swiglu,gated_norm,core_prep,kda_gates,o_proj]", 32,
         5.09, 21.37, 28.31, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-300M.yaml", "selective", "[layernorm,conv,swiglu,gated_norm,core_prep]", 32, 5.09, 23.78, 30.71,
         "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-300M.yaml", "full", NULL, 32, 5.09, 6.07, 12.84, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-1B.yaml", "", NULL, 16, 19.70, 49.00, 70.40, "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-1B.yaml", "selective", "[layernorm,conv,swiglu,gated_norm]", 16, 19.70, 34.43, 55.83,
         "device/2026-12-07_s35_m1_session.txt"},
        {"configs/kda-1B.yaml", "selective", NULL, 16, 19.70, 29.43, 50.99, "device/2026-12-07_s36_c2_session_b1.txt"},
        {"configs/kda-1B.yaml", "selective", "[swiglu,layernorm]", 16, 19.70, 37.25, 58.65,
         "device/2026-12-07_s36_c2_session_b1.txt"},
        {"configs/kda-1B.yaml", "selective", "[swiglu]", 16, 19.70, 41.00, 62.40, "device/2026-12-07_s36_c2_session_b1.txt"},
    };
    const double G = 1073741824.0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        kda_config c;
        kda_config_defaults(&c);
        kda_config_load(&c, runs[i].config);
        snprintf(c.recompute_granularity, sizeof c.recompute_granularity, "%s", runs[i].granularity);
        c.n_recompute_modules = 0;
        if (runs[i].modules) {
            char kv[128];
            snprintf(kv, sizeof kv, "recompute_modules=%s", runs[i].modules);
            kda_config_set(&c, kv);
        }
        c.micro_batch_size = runs[i].B;
        kda_config_finalize(&c);
        kda_mem_plan p;
        kda_mem_plan_compute(&p, &c, cu, runs[i].B, c.seq_length);
        double state = (p.model.params + p.model.grads + p.model.optim) / G;
        double acts = (p.model.acts_layers + p.model.acts_head + p.model.grad_scratch) / G;
        double need = kda_mem_plan_backend_need(&p) / G, peak = runs[i].peak;
        T_CHECK(fabs(state - runs[i].state) < 0.006 && fabs(acts - runs[i].acts) < 0.006,
                "CUDA %s %s x %d: state %.2f GiB, activations %.2f GiB, as the device run planned (%.2f, %.2f)",
                runs[i].config + 8, runs[i].granularity[0] ? runs[i].granularity : "none", runs[i].B, state, acts,
                runs[i].state, runs[i].acts);
        T_CHECK(need <= peak && peak - need < 0.6,
                "  plan %.2f GiB, measured peak %.2f GiB (%+.1f%%; %.2f GiB in use before the run), bench/logs/%s",
                need, peak, 100 * (need - peak) / peak, peak - need, runs[i].log);
    }
}

int main(void) {
    cpu = kda_ops_cpu();
    const char *const tiny[] = {"vocab_size=256", NULL};
    const char *const odd[] = {"vocab_size=300", "hidden_size=40",       "num_hidden_layers=3", "num_heads=3",
                               "head_dim=8",     "intermediate_size=72", "kda_chunk_size=16",   NULL};
    const char *const sel[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=selective", NULL};
    const char *const sel_core[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=selective",
                                    "recompute_modules=[conv, core_attn]", NULL};
    const char *const sel_proj[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=selective",
                                    "recompute_modules=[in_proj, kda_gates, o_proj]", NULL};
    const char *const full[] = {"vocab_size=256", "num_hidden_layers=3", "recompute_granularity=full", NULL};
    const char *const rec[] = {"vocab_size=256", "kda_algo=recurrent", "expand_v=2", "conv_size=3", NULL};
    one("defaults (tiny)", tiny, 2, 24, 0, 1);
    one("3 layers, odd sizes, T % chunk != 0", odd, 3, 37, 0, 1);
    one("selective (default modules)", sel, 2, 16, 0, 1);
    one("selective conv + core_attn", sel_core, 2, 16, 0, 1);
    one("selective in_proj + kda_gates + o_proj", sel_proj, 2, 16, 0, 1);
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

    // fits: host backend against MemAvailable; device backend against free memory, host staging
    // against MemAvailable; an unknown amount is not checked
    kda_mem_plan mp;
    kda_mem_plan_compute(&mp, &cn, cpu, 2, 16);
    size_t need = kda_mem_plan_backend_need(&mp);
    kda_mem_avail av = {0, 0, need};
    T_CHECK(kda_mem_plan_fits(&mp, &av), "host plan of %zu bytes fits in as many", need);
    av.host = need - 1;
    T_CHECK(!kda_mem_plan_fits(&mp, &av), "and not in one byte less");
    av.host = 0;
    T_CHECK(kda_mem_plan_fits(&mp, &av), "unknown MemAvailable: not checked");
    kda_mem_plan dev = mp;
    dev.host_memory = 0;
    kda_mem_avail dv = {dev.backend, dev.backend * 4, dev.host_staging};
    T_CHECK(kda_mem_plan_backend_need(&dev) == dev.backend && kda_mem_plan_host_need(&dev) == dev.host_staging &&
                kda_mem_plan_fits(&dev, &dv),
            "device plan: %zu bytes on the device (staging %zu on the host) fit", dev.backend, dev.host_staging);
    dv.dev_free--;
    T_CHECK(!kda_mem_plan_fits(&dev, &dv), "not with one byte less free on the device");
    dv.dev_free++, dv.host--;
    T_CHECK(!kda_mem_plan_fits(&dev, &dv), "nor with one byte less on the host for the staging copy");
    av.host = need;
    kda_mem_plan_check(&cn, cpu, &mp, &av); // returns when it fits
    T_CHECK(1, "kda_mem_plan_check returns when the plan fits");

    cuda_estimates();
    return t_done("test_mem_plan");
}
