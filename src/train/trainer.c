// trainer.c — see trainer.h.
#include "train/trainer.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/run_guard.h"
#include "comm/dist.h"
#include "data/data.h"
#include "model/mem_plan.h"
#include "model/optim.h"
#include "train/checkpoint.h"
#include "train/dist_optim.h"
#include "train/run_log.h"
#include "train/validate.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }
static void (*prev_int)(int), (*prev_term)(int); // the dispositions before kda_train's, put back after

typedef struct {
    kda_config cfg; // the run's config (ranks > 0: no metrics file, no sample)
    const kda_train_opts *opts;
    const kda_dist *dist;
    const kda_ops *ops;
    int B, T;             // micro-batch: B sequences of T tokens
    int n_micro, n_local; // micro-batches per iteration: in all, on this rank
    int lead;             // rank 0: prints and writes shared files
    kda_model *m;
    kda_comm *comm;                // NULL on the one-process plain path
    kda_dist_optim *dopt;          // NULL on the one-process plain path
    const kda_ckpt_shards *shards; // the optimizer's shards for checkpoints; NULL: the model holds every buffer
    kda_train_state st;
    // the loop
    kda_data *data;
    kda_run_log *rl;
    kda_validator *val;          // NULL: no validation
    int32_t *sample, *ids, *tgt; // a micro-batch: B samples of T + 1 tokens, then inputs and targets
    double peak_tflops, flops_per_token;
    double t_log;                      // the last log line's time
    int n_acc;                         // iterations since then
    long last_saved;                   // iteration of the last checkpoint written or loaded
    char last_ckpt[KDA_PATH_MAX + 32]; // the last checkpoint this run wrote ("" none)
    kda_mem_plan mp;                   // the memory the run needs (mem_plan.h), computed before anything large
    kda_mem_avail avail;
} trainer;

// ---- setting up ---------------------------------------------------------------------------

// The global batch in micro-batches of t->B sequences (set by kda_train), this rank's share of them.
static void split_batch_across_ranks(trainer *t) {
    const kda_config *c = &t->cfg;
    int world = t->dist->world;
    t->n_micro = c->global_batch_size / t->B;
    if (t->n_micro % world)
        kda_die("global_batch_size %d / micro_batch_size %d = %d micro-batches cannot be split across %d ranks; "
                "make global_batch_size a multiple of micro_batch_size x %d",
                c->global_batch_size, t->B, t->n_micro, world, world);
    t->n_local = t->n_micro / world;
}

// Only rank 0 logs and writes shared files; its outputs are checked before anything large (run_guard.h).
static void claim_outputs(trainer *t) {
    kda_config *c = &t->cfg;
    t->lead = t->dist->rank == 0;
    if (!t->lead) {
        if (!freopen("/dev/null", "w", stdout)) kda_die("cannot silence stdout on rank %d", t->dist->rank);
        c->metrics_file[0] = 0;
        c->sample_tokens = 0;
        return;
    }
    if (c->save[0]) kda_guard_dir("save", c->save);
    if (c->save[0] && !t->opts->dry_run) kda_guard_lock("save", c->save);
    if (c->metrics_file[0]) kda_guard_file("metrics_file", c->metrics_file);
}

static void create_model_and_optimizer(trainer *t) {
    const kda_config *c = &t->cfg;
    kda_mem_plan_check(c, t->ops, &t->mp, &t->avail); // before anything large is allocated
    t->m = kda_model_create(c, t->ops, t->B, t->T);
    kda_model_init(t->m, (uint64_t)c->seed);
    // several ranks (or a sharded optimizer asked for on one): gradients reduced per layer
    // through MPI (CPU) or NCCL (CUDA), ZeRO-1 when use_distributed_optimizer is set
    if (t->dist->world > 1 || c->use_distributed_optimizer) {
        t->comm = kda_comm_create(t->ops);
        t->dopt = kda_dist_optim_create(t->m, t->comm, c->use_distributed_optimizer);
        t->shards = kda_dist_optim_ckpt_shards(t->dopt);
    } else {
        kda_model_alloc_optim(t->m);
    }
}

static void print_data_parallel_plan(const trainer *t) {
    const kda_config *c = &t->cfg;
    size_t lo, n;
    kda_dist_optim_shard(t->dopt, &lo, &n);
    printf("kda train: data parallel over %s (%s launch), gradients reduced per layer; %s\n", t->comm->name,
           t->dist->launcher,
           c->use_distributed_optimizer ? "ZeRO-1: fp32 masters and AdamW moments sharded across ranks"
                                        : "AdamW replicated on every rank");
    if (c->use_distributed_optimizer)
        printf("kda train: shard of rank 0: %zu floats (%.1f MiB of fp32 state per buffer) of %zu\n", n,
               n * 4.0 / 1048576.0, t->m->n_floats);
}

static void print_plan(const trainer *t) {
    const kda_config *c = &t->cfg;
    const kda_ops *ops = t->ops;
    int world = t->dist->world;
    size_t n_params = kda_model_num_params(t->m);
    printf("kda train: %s | %zu parameters (%.2fM) | %d layers, hidden %d, heads %d x (k %d, v %d) | vocab %d\n",
           t->opts->config_path ? t->opts->config_path : "(built-in tiny config)", n_params, n_params / 1e6,
           c->num_hidden_layers, c->hidden_size, c->num_heads, c->head_dim, c->head_v_dim, c->vocab_size);
    printf("kda train: backend %s: %s (%s)\n", ops->name, ops->describe(), kda_backend_reason());
    if (c->bf16 && ops->act_bytes == 4)
        fprintf(stderr,
                "kda: warning: bf16: true has no effect on the %s backend (fp32 throughout); it applies on CUDA\n",
                ops->name);
    printf("kda train: backend %s, %d threads, %d rank%s | batch %d x %d tokens (%d micro-batches of %d) | "
           "%ld iterations | activations %.1f MiB\n",
           ops->name, omp_get_max_threads(), world, world > 1 ? "s" : "", c->global_batch_size, t->T, t->n_micro, t->B,
           c->train_iters, t->m->act_bytes_total / 1048576.0);
    char mem_line[256];
    printf("kda train: memory planned: %s\n", kda_mem_plan_summary(mem_line, sizeof mem_line, &t->mp, &t->avail));
    if (t->dopt) print_data_parallel_plan(t);
}

// `load`: resume (weights, moments, data position, RNG) or, with finetune, start from its weights.
static void load_checkpoint(trainer *t) {
    const kda_config *c = &t->cfg;
    kda_train_state *st = &t->st;
    char *dir = kda_ckpt_resolve(c->load);
    if (dir) {
        int fine = c->finetune;
        kda_ckpt_load_sharded(t->m, t->shards, dir, !fine && !c->no_load_optim, fine ? NULL : st, !c->no_load_rng);
        printf("kda train: loaded %s%s (iteration %ld, %llu samples consumed)\n", dir,
               fine ? " as a fine-tuning start (weights only)" : "", st->iteration,
               (unsigned long long)st->consumed_samples);
        free(dir);
    } else if (!strcmp(c->load, c->save)) {
        printf("kda train: no checkpoint in %s yet; starting from scratch\n", c->load);
    } else {
        kda_die("load: '%s' holds no checkpoint (no state.json and no 'latest'); check the path", c->load);
    }
}

// Every rank must start from the same checkpoint (a 'latest' rewritten between two ranks' reads,
// or a path that only some ranks see, would split the run silently).
static void check_every_rank_loaded_the_same(const trainer *t) {
    const kda_train_state *st = &t->st;
    int world = t->dist->world;
    double x[2] = {(double)st->iteration, (double)st->consumed_samples};
    for (int k = 0; k < 2; k++) {
        double s = t->comm->sum_f64(t->comm, x[k]), s2 = t->comm->sum_f64(t->comm, x[k] * x[k]);
        if (s * s != s2 * world)
            kda_die("the ranks loaded different checkpoints (rank %d: iteration %ld, %llu samples consumed); "
                    "make '%s' visible to every rank and do not write to it while the run starts",
                    t->dist->rank, st->iteration, (unsigned long long)st->consumed_samples, t->cfg.load);
    }
}

static void start_from_checkpoint(trainer *t) {
    const kda_config *c = &t->cfg;
    kda_rng_seed(&t->st.rng, (uint64_t)c->seed);
    if (c->load[0]) load_checkpoint(t);
    if (t->dist->world > 1) check_every_rank_loaded_the_same(t);
    if (t->st.iteration >= c->train_iters)
        printf("kda train: nothing to do: the checkpoint is at iteration %ld and train_iters is %ld; raise train_iters "
               "to train further\n",
               t->st.iteration, c->train_iters);
    t->last_saved = t->st.iteration;
}

// Data at the checkpoint's position, the run log, validation, signal handlers, batch buffers.
static void open_run(trainer *t) {
    const kda_config *c = &t->cfg;
    const kda_ops *ops = t->ops;
    t->data = kda_data_open(c, KDA_SPLIT_TRAIN);
    kda_data_seek(t->data, t->st.consumed_samples);
    char backend_line[1024];
    snprintf(backend_line, sizeof backend_line, "%s: %s", ops->name, ops->describe());
    t->rl = kda_run_log_open(c, t->opts->config_path, backend_line, t->st.iteration, t->lead);
    t->peak_tflops = ops->peak_tflops;
    t->flops_per_token = kda_model_train_flops_per_token(c);
    char no_valid[256];
    t->val = kda_validator_open(c, t->B, no_valid, sizeof no_valid);
    if (t->val) {
        if (c->eval_interval > 0)
            printf("kda train: validation every %d iterations and at the end: %d batches of the valid split\n",
                   c->eval_interval, c->eval_iters);
        else
            printf("kda train: validation at the end: %d batches of the valid split\n", c->eval_iters);
        kda_validator_stop_on(t->val, &stop_requested);
    }
    else
        printf("kda train: no validation loss: %s\n", no_valid);
    prev_int = signal(SIGINT, on_signal);
    prev_term = signal(SIGTERM, on_signal);
    size_t B = (size_t)t->B, T = (size_t)t->T;
    t->sample = kda_malloc(sizeof(int32_t) * B * (T + 1));
    t->ids = kda_malloc(sizeof(int32_t) * B * T);
    t->tgt = kda_malloc(sizeof(int32_t) * B * T);
    kda_model_loss_take(t->m); // the accumulator starts at zero (an earlier run in this process may have left some)
    t->t_log = kda_now();
}

// ---- one iteration ------------------------------------------------------------------------

// The next micro-batch of this rank: B samples of T + 1 tokens -> inputs (first T) and targets (last T).
static void next_micro_batch(trainer *t) {
    size_t T = (size_t)t->T;
    kda_data_next(t->data, t->sample, t->B);
    for (int b = 0; b < t->B; b++) {
        memcpy(t->ids + b * T, t->sample + b * (T + 1), sizeof(int32_t) * T);
        memcpy(t->tgt + b * T, t->sample + b * (T + 1) + 1, sizeof(int32_t) * T);
    }
}

// Forward + backward of this rank's micro-batches of the global batch (samples [base + rank *
// n_local * B, ...)), gradients accumulated in m->grad; leaves the data at base + global_batch_size.
// This rank's part of the global batch's mean loss is added to the backend's loss accumulator
// (read at log_interval: the step does not wait for it).
static void accumulate_gradients(trainer *t) {
    kda_model *m = t->m;
    uint64_t base = kda_data_consumed(t->data);
    kda_data_seek(t->data, base + (uint64_t)t->dist->rank * t->n_local * t->B);
    for (int mb = 0; mb < t->n_local; mb++) {
        next_micro_batch(t);
        if (t->dopt && mb == t->n_local - 1) kda_dist_optim_arm(t->dopt); // reduce as the backward goes
        kda_model_train_step(m, t->ids, t->tgt, t->B, t->T, t->n_micro);
    }
    kda_data_seek(t->data, base + (uint64_t)t->cfg.global_batch_size);
}

// One optimizer update at learning rate lr.
static kda_step_info train_iteration(trainer *t, double lr) {
    kda_model *m = t->m;
    t->ops->zero(m->grad, m->n_alloc * sizeof(float));
    accumulate_gradients(t);
    if (t->dopt) return kda_dist_optim_step(t->dopt, lr, t->st.optim_steps + 1);
    return kda_optim_step(m, lr, t->st.optim_steps + 1);
}

// What to tell about the newest checkpoint when the run stops on a non-finite value.
static void describe_last_checkpoint(const kda_config *c, char *out, size_t len) {
    snprintf(out, len, "no checkpoint was saved or loaded by this run");
    char *dir = c->save[0] ? kda_ckpt_resolve(c->save) : NULL;
    if (!dir && c->load[0]) dir = kda_ckpt_resolve(c->load);
    if (!dir) return;
    int fin = kda_ckpt_weights_finite(dir);
    snprintf(out, len, "the last checkpoint is %s, %s", dir,
             fin == 1       ? "its weights are finite"
                 : fin == 0 ? "its weights are NOT finite: use an earlier one"
                            : "not known to be finite (older format)");
    free(dir);
}

static void die_not_finite(const trainer *t, const char *what, double lr) {
    char last[KDA_PATH_MAX * 2 + 160];
    describe_last_checkpoint(&t->cfg, last, sizeof last);
    kda_die("%s is not finite; stopping. Lower lr (now %g) or check the data; %s", what, lr, last);
}

// A signal seen by any rank stops every rank after the same iteration.
static int stop_agreed(const trainer *t) {
    if (t->dist->world > 1) return t->comm->sum_f64(t->comm, stop_requested ? 1.0 : 0.0) > 0;
    return stop_requested != 0;
}

// Every log_interval iterations, the last and the first: the mean loss since the last line (the
// one read back of the loss accumulator, summed over the ranks).
static void log_if_due(trainer *t, long it, double lr, const kda_step_info *info) {
    const kda_config *c = &t->cfg;
    t->n_acc++;
    if (!((it + 1) % c->log_interval == 0 || it + 1 == c->train_iters || it == 0)) return;
    double loss = kda_model_loss_take(t->m);
    if (t->dist->world > 1) loss = t->comm->sum_f64(t->comm, loss);
    if (!isfinite(loss)) {
        char what[96];
        snprintf(what, sizeof what, "the loss of iterations %ld-%ld", it + 2 - t->n_acc, it + 1);
        die_not_finite(t, what, lr);
    }
    double now = kda_now(), dt = (now - t->t_log) / t->n_acc;
    double tps = (double)c->global_batch_size * t->T / dt;
    double mem = -1;
    if (t->ops->mem_info) {
        size_t used = 0, total = 0;
        t->ops->mem_info(&used, &total);
        if (total) mem = used / 1073741824.0;
    }
    double mfu = t->peak_tflops > 0 ? tps * t->flops_per_token / (t->peak_tflops * 1e12) : -1;
    kda_log_row row = {it + 1, kda_data_consumed(t->data), loss / t->n_acc, lr, info->grad_norm, dt * 1e3, tps, mfu,
                       mem};
    kda_run_log_train(t->rl, &row);
    t->t_log = now;
    t->n_acc = 0;
}

// Every eval_interval iterations and at the end (validate.h); the ranks' sums are added. A signal
// during it stops it between micro-batches (on any rank: all agree), logs nothing and returns 1.
static int validate_if_due(trainer *t, int at_end) {
    const kda_config *c = &t->cfg;
    long iter = t->st.iteration;
    if (!t->val || !((c->eval_interval > 0 && iter % c->eval_interval == 0) || at_end)) return 0;
    double vs, vc;
    int cut = !kda_validate(t->val, t->m, kda_validate_index(c, iter), t->dist->rank, t->dist->world, &vs, &vc);
    if (t->dist->world > 1) {
        vs = t->comm->sum_f64(t->comm, vs), vc = t->comm->sum_f64(t->comm, vc);
        cut = t->comm->sum_f64(t->comm, cut) > 0;
    }
    if (cut) {
        printf("kda train: validation at iteration %ld cut short by a signal; not logged\n", iter);
        return 1;
    }
    if (vc > 0) kda_run_log_valid(t->rl, iter, vs / vc);
    return 0;
}

static void save_checkpoint(trainer *t) {
    kda_ckpt_save_sharded(t->m, t->shards, &t->st, t->cfg.save); // every rank: shards are gathered; rank 0 writes
    t->last_saved = t->st.iteration;
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s/iter_%07ld", t->cfg.save, t->st.iteration);
    printf("kda train: saved %s\n", t->last_ckpt);
}

// ---- the run ------------------------------------------------------------------------------

// Iterations from the checkpoint's to train_iters, or until a signal; returns whether a signal stopped it.
static int train_iterations(trainer *t) {
    const kda_config *c = &t->cfg;
    kda_train_state *st = &t->st;
    int stop = 0;
    for (long it = st->iteration; it < c->train_iters && !stop; it++) {
        double lr = kda_lr_at(c, it);
        kda_step_info info = train_iteration(t, lr);
        if (info.nonfinite) {
            char what[64];
            snprintf(what, sizeof what, "iteration %ld: a gradient", it + 1);
            die_not_finite(t, what, lr);
        }
        stop = stop_agreed(t);
        st->optim_steps++;
        st->iteration = it + 1;
        st->consumed_samples = kda_data_consumed(t->data);
        log_if_due(t, it, lr, &info);
        if (!stop) stop = validate_if_due(t, st->iteration == c->train_iters); // a signal skips it
        if (c->save[0] && c->save_interval > 0 && st->iteration % c->save_interval == 0) save_checkpoint(t);
    }
    return stop;
}

// The last checkpoint (unless this iteration is saved), the summary, why it stopped; then, when no
// signal stopped the run, the caller's hook (the sample) with the signals' dispositions from before
// kda_train (by default: end the process) back: the checkpoint is written, so a signal ends it at once.
static void finish_run(trainer *t, int stopped) {
    const kda_config *c = &t->cfg;
    if (c->save[0] && t->st.iteration != t->last_saved) save_checkpoint(t);
    kda_run_log_summary(t->rl, t->st.iteration, t->last_ckpt[0] ? t->last_ckpt : NULL);
    if (stopped)
        printf("kda train: stopped by signal %d after iteration %ld%s\n",
               stop_requested ? (int)stop_requested : SIGTERM, t->st.iteration,
               c->save[0] ? "" : "; no checkpoint written (save is not set)");
    fflush(stdout);
    signal(SIGINT, prev_int == SIG_ERR ? SIG_DFL : prev_int);
    signal(SIGTERM, prev_term == SIG_ERR ? SIG_DFL : prev_term);
    if (stopped) return;
    if (t->opts->at_end) t->opts->at_end(t->m, c, t->opts->user);
}

static void close_trainer(trainer *t) {
    kda_run_log_close(t->rl);
    kda_validator_close(t->val);
    free(t->sample);
    free(t->ids);
    free(t->tgt);
    kda_data_close(t->data);
    kda_dist_optim_free(t->dopt);
    kda_comm_free(t->comm);
    kda_model_free(t->m);
    kda_dist_finalize();
    free(t);
}

// The memory the run needs, before anything large is allocated (mem_plan.h); printed for
// --dry-run and --mem-plan. Returns 1 (everything released) when only the plan was asked for.
static int plan_memory(trainer *t) {
    const kda_config *c = &t->cfg;
    kda_mem_plan_compute(&t->mp, c, t->ops, t->B, t->T);
    kda_mem_available(t->ops, &t->avail);
    if (t->opts->dry_run || t->opts->plan_only) {
        printf("kda train: memory plan: backend %s (%s), micro-batch %d x %d, recompute_granularity %s\n", t->ops->name,
               kda_backend_reason(), t->B, t->T, c->recompute_granularity[0] ? c->recompute_granularity : "none");
        kda_mem_plan_print(stdout, "kda train:", &t->mp, &t->avail);
        fflush(stdout);
    }
    if (!t->opts->plan_only) return 0;
    kda_dist_finalize();
    free(t);
    return 1;
}

void kda_train(const kda_config *cfg, const kda_train_opts *opts) {
    trainer *t = kda_calloc(1, sizeof *t);
    t->cfg = *cfg;
    t->opts = opts;
    if (cfg->num_threads > 0) omp_set_num_threads(cfg->num_threads);
    t->dist = kda_dist_init();
    t->ops = opts->plan_only ? kda_pick_backend_for_plan(cfg->device) : kda_pick_backend(cfg->device);
    t->B = cfg->micro_batch_size, t->T = cfg->seq_length; // the micro-batch, for the plan and the run
    if (plan_memory(t)) return;
    split_batch_across_ranks(t);
    claim_outputs(t);
    create_model_and_optimizer(t);
    print_plan(t);
    start_from_checkpoint(t);
    if (!opts->dry_run) {
        open_run(t);
        finish_run(t, train_iterations(t));
    }
    close_trainer(t);
}
