// test_cuda_step.c — one whole training step on the CUDA backend (bf16) against the CPU backend
// (fp32 reference), from the same initial weights and batch (issue #6: loss, grad norm, updated
// weights), and the NCCL path's bookkeeping on one GPU (sharded optimizer = plain optimizer).
//
// What is compared, and why that way:
//  - loss, gradient global norm, every parameter's gradient: bf16 tolerances (kda-model.md §0);
//  - the updated fp32 master weights: (a) against the CPU optimizer applied to the CUDA step's own
//    gradients from the same weights (checks the fused AdamW + clipping exactly, 1e-6), and (b)
//    against the CPU path's updated weights (the whole step: ||w_cuda − w_cpu|| / ||w_cpu||), with
//    the share of elements whose update has the CPU update's sign printed (Adam's first step is
//    ≈ lr·sign(g), so elements whose gradient is within bf16 noise of 0 may flip).
// Without a GPU it prints SKIP and exits 77 (skipped).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "cuda_test_util.h"
#include "model/mem_plan.h"
#include "model/model.h"
#include "model/optim.h"

static float *host_of(const kda_model *m, const float *dev) {
    float *h = kda_calloc(m->n_alloc, sizeof(float));
    m->ops->to_host(h, dev, m->n_floats * sizeof(float));
    return h;
}

int main(void) {
    cu_test_start("test_cuda_step");
    kda_config c;
    kda_config_defaults(&c);
    // a scaled-down 300M block: key head 32, value head 64, short conv 4, SwiGLU
    const char *sets[] = {"hidden_size=256",    "num_hidden_layers=2",   "num_heads=4",      "head_dim=32",
                          "expand_v=2.0",       "intermediate_size=768", "vocab_size=4096",  "seq_length=256",
                          "micro_batch_size=2", "global_batch_size=2",   "lr=1e-3",          "lr_warmup_iters=0",
                          "clip_grad=1.0",      "tokenizer_type=byte",   "data_format=text", NULL};
    for (int i = 0; sets[i]; i++) kda_config_set(&c, sets[i]);
    kda_config_finalize(&c);
    int B = c.micro_batch_size, T = c.seq_length, N = B * T;
    int32_t *ids = kda_malloc(sizeof(int32_t) * N), *tgt = kda_malloc(sizeof(int32_t) * N);
    // token stream with structure (a random walk over the vocabulary) so gradients are not noise
    int32_t cur = (int32_t)(kda_rng_below(&RNG, (uint64_t)c.vocab_size));
    for (int i = 0; i < N + 1; i++) {
        int32_t next = (int32_t)((cur + 1 + (int)kda_rng_below(&RNG, 7)) % c.vocab_size);
        if (i < N) ids[i] = cur;
        if (i > 0) tgt[i - 1] = cur;
        cur = next;
    }
    tgt[N - 1] = -100; // an ignored target
    uint64_t seed = kda_rng_u64(&RNG);

    kda_model *mc = kda_model_create(&c, CPU, B, T), *mg = kda_model_create(&c, CU, B, T);
    kda_model_init(mc, seed);
    kda_model_init(mg, seed);
    kda_model_alloc_optim(mc);
    kda_model_alloc_optim(mg);
    float *w0 = host_of(mc, mc->master), *w0g = host_of(mg, mg->master);
    T_CHECK(kda_rel_err_f32f32(w0g, w0, mc->n_floats) == 0, "same initial fp32 masters on both backends (seed %llu)",
            (unsigned long long)seed);

    double lc = kda_model_step(mc, ids, tgt, B, T, 1, 1.0f, NULL);
    double lg = kda_model_step(mg, ids, tgt, B, T, 1, 1.0f, NULL);
    T_REL("loss", fabs(lg - lc) / fabs(lc), 5e-3);
    printf("        loss cpu %.6f cuda %.6f\n", lc, lg);
    float *gc = host_of(mc, mc->grad), *gg = host_of(mg, mg->grad);
    // worst tensor, apart for the per-head scalars (A_log: H values per layer, each a sum over all
    // B·T tokens of terms with both signs): on 4 numbers a sum with cancellation has no bf16
    // averaging, so its relative error is larger than any large tensor's (see below)
    double worst = 0, worst_small = 0;
    const char *worst_name = "", *worst_small_name = "";
    for (int i = 0; i < mc->n_params; i++) {
        const kda_param *p = &mc->params[i];
        double e = kda_rel_err_f32f32(gg + p->offset, gc + p->offset, p->numel);
        int small = p->numel < 64;
        if (e > (small ? worst_small : worst)) {
            if (small) {
                worst_small = e;
                worst_small_name = p->name;
            } else {
                worst = e;
                worst_name = p->name;
            }
        }
    }
    // per-op bounds (kda-model.md "bit-compatible" (b)): outputs 0.005, d(gate) and dβ 0.02; over
    // two layers of bf16 rounding points the whole gradient lands near the gate bound (H200,
    // 2026-12-03: 2.2e-2 overall, worst tensor 3.0e-2 (o_norm.weight))
    T_REL("gradients, all parameters together", kda_rel_err_f32f32(gg, gc, mc->n_floats), 3e-2);
    T_CHECK(worst <= 6e-2, "%-48s rel err %.3e (<= 6.0e-02) [%s]", "gradients, worst tensor of >= 64 values", worst,
            worst_name);
    // H200, 2026-12-03, 13 seeds: 2.0e-2 .. 9.3e-2 (bench/RESULTS.md, bench/logs/device/step_seeds_2026-12-03.txt)
    T_CHECK(worst_small <= 1.5e-1, "%-48s rel err %.3e (<= 1.5e-01) [%s]", "gradients, worst per-head scalar tensor",
            worst_small, worst_small_name);

    double lr = 1e-3;
    kda_step_info ic = kda_optim_step(mc, lr, 1), ig = kda_optim_step(mg, lr, 1);
    T_REL("gradient global norm (before clipping)", fabs(ig.grad_norm - ic.grad_norm) / ic.grad_norm, 1e-2);
    printf("        grad norm cpu %.6f cuda %.6f, clip coef cpu %.4f cuda %.4f\n", ic.grad_norm, ig.grad_norm,
           ic.clip_coef, ig.clip_coef);
    float *wc = host_of(mc, mc->master), *wg = host_of(mg, mg->master);
    // the memory plan's CUDA scratch (src/model/mem_plan.h): after the first step the arena holds
    // the largest request plus at most its 1/8 headroom, and the plan is the largest request
    // planned (the KDA backward's workspace among them) plus 1/8
    kda_mem_plan mp;
    kda_mem_plan_compute(&mp, &c, CU, B, T);
    size_t held = CU->scratch_held();
    T_CHECK(held <= mp.scratch_held && held * 9 >= mp.scratch_held * 8,
            "CUDA scratch after a step: %zu bytes held, %zu planned (the largest request + 1/8)", held,
            mp.scratch_held);

    // (a) the CPU optimizer on the CUDA step's own gradients, from the same weights
    kda_model *mr = kda_model_create(&c, CPU, 1, 1);
    kda_model_alloc_optim(mr);
    memcpy(mr->master, w0, mr->n_floats * sizeof(float));
    memcpy(mr->grad, gg, mr->n_floats * sizeof(float));
    kda_step_info ir = kda_optim_step(mr, lr, 1);
    T_REL("grad norm: CUDA sumsq vs CPU on the same gradients", fabs(ir.grad_norm - ig.grad_norm) / ir.grad_norm, 1e-6);
    double du_num = 0, du_den = 0;
    for (size_t i = 0; i < mr->n_floats; i++) {
        double a = (double)wg[i] - w0[i], r = (double)mr->master[i] - w0[i];
        du_num += (a - r) * (a - r);
        du_den += r * r;
    }
    T_REL("updated weights: fused AdamW vs CPU AdamW (update)", sqrt(du_num / du_den), 1e-5);

    // (b) the whole step against the CPU path
    // lr 1e-3 moves the weights by ~5% of their norm; Adam's first update is ≈ lr·sign(g), so the
    // gradients that bf16 noise flips around 0 (0.6% measured) give full-size differences:
    // measured 2.6e-3 of the weight norm on the H200 (2026-12-03)
    T_REL("updated weights vs the CPU step", kda_rel_err_f32f32(wg, wc, mc->n_floats), 5e-3);
    size_t agree = 0, moved = 0;
    double un = 0, ud = 0;
    for (size_t i = 0; i < mc->n_floats; i++) {
        double a = (double)wg[i] - w0[i], r = (double)wc[i] - w0[i];
        un += (a - r) * (a - r);
        ud += r * r;
        if (r != 0) {
            moved++;
            agree += (a > 0) == (r > 0);
        }
    }
    double share = moved ? (double)agree / moved : 0;
    T_CHECK(share >= 0.9,
            "update sign agrees with the CPU step on %.2f%% of %zu weights (>= 90%%); update rel diff %.3f",
            100 * share, moved, sqrt(un / ud));

    // the step profile (kda bench's phase line): every phase present, spans inside the wall time,
    // and the profiled step's loss equal to an unprofiled one (profiling changes no numbers)
    T_CHECK(CU->profile_begin && CU->profile_end, "the CUDA backend has the step profile");
    CU->zero(mg->grad, mg->n_floats * sizeof(float));
    double lp0 = kda_model_step(mg, ids, tgt, B, T, 1, 1.0f, NULL);
    CU->zero(mg->grad, mg->n_floats * sizeof(float));
    kda_phase_times ph;
    CU->profile_begin();
    double lp1 = kda_model_step(mg, ids, tgt, B, T, 1, 1.0f, NULL);
    CU->profile_end(&ph);
    T_CHECK(lp0 == lp1, "profiled step gives the same loss (%.9g vs %.9g)", lp1, lp0);
    double sum = 0;
    for (int i = 0; i < KDA_PHASE_N; i++) {
        T_CHECK(ph.ms[i] > 0, "phase %d has device time (%.4f ms)", i, ph.ms[i]);
        sum += ph.ms[i];
    }
    T_CHECK(ph.n_ops > 20 && ph.gemm_flops > 0, "%ld ops and %.3g GEMM FLOPs timed", ph.n_ops, ph.gemm_flops);
    T_CHECK(fabs(sum - ph.busy_ms) <= 1e-3 * ph.busy_ms + 1e-3, "phases sum to the busy time (%.4f vs %.4f ms)", sum,
            ph.busy_ms);
    T_CHECK(ph.busy_ms <= ph.wall_ms * 1.001 + 1e-3, "busy %.4f ms within wall %.4f ms", ph.busy_ms, ph.wall_ms);
    printf("        profile: gemm %.3f kda %.3f ce %.3f other %.3f idle %.3f ms\n", ph.ms[0], ph.ms[1], ph.ms[2],
           ph.ms[3], ph.wall_ms - ph.busy_ms);
    // ... and by op: the entries add up to each phase, come largest first, and name the ops
    // (a GEMM by its op and shape)
    double by_phase[KDA_PHASE_N] = {0};
    long op_calls = 0;
    double op_flops = 0;
    int sorted = 1, fwd = 0, ce = 0, gemm = 0, core = 0;
    for (int i = 0; i < ph.n_op; i++) {
        by_phase[ph.op[i].phase] += ph.op[i].ms;
        op_calls += ph.op[i].calls;
        op_flops += ph.op[i].flops;
        if (i) sorted &= ph.op[i - 1].ms >= ph.op[i].ms;
        fwd |= !strcmp(ph.op[i].name, "kda_fwd");
        ce |= !strncmp(ph.op[i].name, "lm_head_ce", 10);
        gemm |= !strncmp(ph.op[i].name, "linear_bwd: GEMM ", 17);
        core += !strcmp(ph.op[i].name, "kda_fwd: prep") + !strcmp(ph.op[i].name, "kda_bwd: finish");
    }
    for (int i = 0; i < KDA_PHASE_N; i++)
        T_CHECK(fabs(by_phase[i] - ph.ms[i]) <= 1e-3 * ph.ms[i] + 1e-4, "phase %d by op %.4f ms = %.4f ms", i,
                by_phase[i], ph.ms[i]);
    T_CHECK(sorted && fwd && ce && gemm && core == 2 && op_calls == ph.n_ops,
            "%d op entries, largest first (%s %.3f ms), with kda_fwd, its prep and kda_bwd's finish, lm_head_ce and "
            "linear_bwd's GEMMs; %ld calls",
            ph.n_op, ph.op[0].name, ph.op[0].ms, op_calls);
    T_CHECK(fabs(op_flops - ph.gemm_flops) <= 1e-9 * ph.gemm_flops, "the GEMM entries' FLOPs add up (%.6g of %.6g)",
            op_flops, ph.gemm_flops);

    // recompute_granularity selective (default, then every module) / full, then selective with
    // core_prep alone (the KDA core's lean saved buffer in every layer) on the GPU: the same loss
    // and gradient bits as none
    {
        static const char *const modes[5] = {"", "selective", "selective", "full", "selective core_prep"};
        double lr3[5];
        float *g3[5];
        size_t act3[5];
        for (int a = 0; a < 5; a++) {
            kda_config cr = c;
            snprintf(cr.recompute_granularity, sizeof cr.recompute_granularity, "%s", a == 4 ? "selective" : modes[a]);
            if (a == 2) { // every module (config.h kda_recompute_modules)
                for (int i = 0; i < KDA_N_RECOMPUTE_MODULES; i++)
                    snprintf(cr.recompute_modules[i], sizeof cr.recompute_modules[i], "%s", kda_recompute_modules[i]);
                cr.n_recompute_modules = KDA_N_RECOMPUTE_MODULES;
            }
            if (a == 4) {
                snprintf(cr.recompute_modules[0], sizeof cr.recompute_modules[0], "core_prep");
                cr.n_recompute_modules = 1;
            }
            kda_model *mm = kda_model_create(&cr, CU, B, T);
            kda_model_init(mm, seed);
            CU->zero(mm->grad, mm->n_floats * sizeof(float));
            lr3[a] = kda_model_step(mm, ids, tgt, B, T, 1, 1.0f, NULL);
            g3[a] = host_of(mm, mm->grad);
            act3[a] = mm->act_bytes_total;
            kda_model_free(mm);
        }
        for (int a = 1; a < 5; a++) {
            T_CHECK(lr3[a] == lr3[0], "GPU recompute %s: loss %.9g = %.9g", modes[a], lr3[a], lr3[0]);
            T_CHECK(!memcmp(g3[a], g3[0], mc->n_floats * sizeof(float)), "GPU recompute %s: the same gradient bits",
                    modes[a]);
            int prev = a == 4 ? 0 : a - 1; // core_prep alone against none
            T_CHECK(act3[a] < act3[prev], "GPU recompute %s: less activation memory (%zu < %zu)", modes[a], act3[a],
                    act3[prev]);
        }
        for (int a = 0; a < 5; a++) free(g3[a]);
    }

    kda_model_free(mr);
    kda_model_free(mc);
    kda_model_free(mg);
    free(w0);
    free(w0g);
    free(gc);
    free(gg);
    free(wc);
    free(wg);
    free(ids);
    free(tgt);
    return t_done("test_cuda_step");
}
