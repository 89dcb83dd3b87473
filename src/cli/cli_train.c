// cli_train.c — `kda train`: the training loop (config -> model -> data -> AdamW -> logs).
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "base/run_guard.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "data/data.h"
#include "comm/dist.h"
#include "train/dist_optim.h"
#include "model/model.h"
#include "model/mem_plan.h"
#include "model/optim.h"
#include "infer/sample.h"
#include "train/run_log.h"
#include "train/validate.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda train [CONFIG.yaml] [--set key=value]... [--device auto|cpu|cuda]\n"
            "\n"
            "Trains the model that CONFIG describes (default: the built-in tiny demo config).\n"
            "Keys use the reference recipe's names (train_iters, micro_batch_size, lr, ...) and FLA's\n"
            "KDAConfig names for the model (hidden_size, num_hidden_layers, ...); see configs/.\n"
            "  --set key=value   override one key (repeatable)\n"
            "  --device D        shorthand for --set device=D\n"
            "  --dry-run         check the memory plan, build the model, load the checkpoint named by `load` if\n"
            "                    any, print the plan (memory broken down), stop\n"
            "  --mem-plan        print the memory plan and stop, allocating nothing; with --device cuda on a\n"
            "                    machine without a GPU: the plan of the CUDA backend (free memory not checked)\n");
}

// The built-in demo trains on token files made by `kda tokenize` (`make demo` makes them);
// when they are missing, name the command that makes them.
static void demo_data_check(const kda_config *c) {
    static kda_config def;
    kda_config_defaults(&def);
    const char *p = def.train_data_path[0];
    if (strcmp(c->data_format, "megatron") || c->n_train_data_path != 1 || strcmp(c->train_data_path[0], p)) return;
    char bin[KDA_PATH_MAX + 8], idx[KDA_PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s.bin", p);
    snprintf(idx, sizeof idx, "%s.idx", p);
    if (!access(bin, R_OK) && !access(idx, R_OK)) return;
    kda_die("the demo's token files %s.bin/.idx (train_data_path) do not exist yet; make them with: ./kda tokenize "
            "--input data/tinyshakespeare.txt --text-docs block --output-prefix %s   (`make demo` runs it)",
            p, p);
}

int cmd_train(int argc, char **argv) {
    kda_config cfg;
    kda_config_defaults(&cfg);
    const char *path = NULL;
    int dry = 0, plan_only = 0;
    // first pass: the config file (so --set applies on top of it regardless of order)
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--device")) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--dry-run")) {
            dry = 1;
            continue;
        }
        if (!strcmp(argv[i], "--mem-plan")) {
            plan_only = 1;
            continue;
        }
        if (argv[i][0] == '-') {
            kda_cli_usage_error("train", "unknown option '%s'", argv[i]);
        }
        if (path) kda_die("kda train takes one config file; got '%s' and '%s'", path, argv[i]);
        path = argv[i];
    }
    if (path) kda_config_load(&cfg, path);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--device")) {
            if (i + 1 >= argc) kda_cli_usage_error("train", "%s needs a value", argv[i]);
            if (!strcmp(argv[i], "--set")) {
                kda_config_set(&cfg, argv[i + 1]);
            } else {
                char kv[64];
                snprintf(kv, sizeof kv, "device=%s", argv[i + 1]);
                kda_config_set(&cfg, kv);
            }
            i++;
        }
    }
    kda_config_finalize(&cfg);
    if (!dry && !plan_only) demo_data_check(&cfg);
    if (cfg.num_threads > 0) omp_set_num_threads(cfg.num_threads);

    const kda_dist *dist = kda_dist_init();
    const kda_ops *ops = plan_only ? kda_pick_backend_for_plan(cfg.device) : kda_pick_backend(cfg.device);
    int B = cfg.micro_batch_size, T = cfg.seq_length;
    // the memory the run needs, before anything large is allocated (mem_plan.h)
    kda_mem_plan mp;
    kda_mem_avail avail;
    kda_mem_plan_compute(&mp, &cfg, ops, B, T);
    kda_mem_available(ops, &avail);
    if (dry || plan_only) {
        printf("kda train: memory plan: backend %s (%s), micro-batch %d x %d, recompute_granularity %s\n", ops->name,
               kda_backend_reason(), B, T, cfg.recompute_granularity[0] ? cfg.recompute_granularity : "none");
        kda_mem_plan_print(stdout, "kda train:", &mp, &avail);
        fflush(stdout);
    }
    if (plan_only) {
        kda_dist_finalize();
        return 0;
    }
    int n_micro = cfg.global_batch_size / cfg.micro_batch_size;
    if (n_micro % dist->world)
        kda_die("global_batch_size %d / micro_batch_size %d = %d micro-batches cannot be split across %d ranks; "
                "make global_batch_size a multiple of micro_batch_size x %d",
                cfg.global_batch_size, cfg.micro_batch_size, n_micro, dist->world, dist->world);
    int n_local = n_micro / dist->world;
    int lead = dist->rank == 0;
    if (!lead) {
        // only rank 0 logs and writes shared files
        if (!freopen("/dev/null", "w", stdout)) kda_die("cannot silence stdout on rank %d", dist->rank);
        cfg.metrics_file[0] = 0;
        cfg.sample_tokens = 0;
    }
    if (lead && cfg.save[0]) kda_guard_dir("save", cfg.save); // outputs checked before anything large (run_guard.h)
    if (lead && cfg.save[0] && !dry) kda_guard_lock("save", cfg.save);
    if (lead && cfg.metrics_file[0]) kda_guard_file("metrics_file", cfg.metrics_file);
    kda_mem_plan_check(&cfg, ops, &mp, &avail);
    kda_model *m = kda_model_create(&cfg, ops, B, T);
    kda_model_init(m, (uint64_t)cfg.seed);
    // several ranks (or a sharded optimizer asked for on one): gradients reduced per layer
    // through MPI (CPU) or NCCL (CUDA), ZeRO-1 when use_distributed_optimizer is set
    kda_comm *comm = NULL;
    kda_dist_optim *dopt = NULL;
    if (dist->world > 1 || cfg.use_distributed_optimizer) {
        comm = kda_comm_create(ops);
        dopt = kda_dist_optim_create(m, comm, cfg.use_distributed_optimizer);
    } else {
        kda_model_alloc_optim(m);
    }
    size_t n_params = kda_model_num_params(m);
    printf("kda train: %s | %zu parameters (%.2fM) | %d layers, hidden %d, heads %d x (k %d, v %d) | vocab %d\n",
           path ? path : "(built-in tiny config)", n_params, n_params / 1e6, cfg.num_hidden_layers, cfg.hidden_size,
           cfg.num_heads, cfg.head_dim, cfg.head_v_dim, cfg.vocab_size);
    printf("kda train: backend %s: %s (%s)\n", ops->name, ops->describe(), kda_backend_reason());
    if (cfg.bf16 && ops->act_bytes == 4)
        fprintf(stderr, "kda: warning: bf16: true has no effect on the %s backend (fp32 throughout); it applies on CUDA\n",
                ops->name);
    printf("kda train: backend %s, %d threads, %d rank%s | batch %d x %d tokens (%d micro-batches of %d) | "
           "%ld iterations | activations %.1f MiB\n",
           ops->name, omp_get_max_threads(), dist->world, dist->world > 1 ? "s" : "", cfg.global_batch_size, T,
           n_micro, B, cfg.train_iters, m->act_bytes_total / 1048576.0);
    char mem_line[256];
    printf("kda train: memory planned: %s\n", kda_mem_plan_summary(mem_line, sizeof mem_line, &mp, &avail));
    if (dopt) {
        size_t lo, n;
        kda_dist_optim_shard(dopt, &lo, &n);
        printf("kda train: data parallel over %s (%s launch), gradients reduced per layer; %s\n", comm->name,
               dist->launcher,
               cfg.use_distributed_optimizer ? "ZeRO-1: fp32 masters and AdamW moments sharded across ranks"
                                             : "AdamW replicated on every rank");
        if (cfg.use_distributed_optimizer)
            printf("kda train: shard of rank 0: %zu floats (%.1f MiB of fp32 state per buffer) of %zu\n", n,
                   n * 4.0 / 1048576.0, m->n_floats);
    }

    kda_train_state st = {0};
    kda_rng_seed(&st.rng, (uint64_t)cfg.seed);
    if (cfg.load[0]) {
        char *dir = kda_ckpt_resolve(cfg.load);
        if (dir) {
            int fine = cfg.finetune;
            kda_ckpt_load(m, dir, !fine && !cfg.no_load_optim, fine ? NULL : &st, !cfg.no_load_rng);
            printf("kda train: loaded %s%s (iteration %ld, %llu samples consumed)\n", dir,
                   fine ? " as a fine-tuning start (weights only)" : "", st.iteration,
                   (unsigned long long)st.consumed_samples);
            free(dir);
        } else if (!strcmp(cfg.load, cfg.save)) {
            printf("kda train: no checkpoint in %s yet; starting from scratch\n", cfg.load);
        } else {
            kda_die("load: '%s' holds no checkpoint (no state.json and no 'latest'); check the path", cfg.load);
        }
    }
    if (dist->world > 1) {
        // every rank must start from the same checkpoint (a 'latest' rewritten between two ranks'
        // reads, or a path that only some ranks see, would split the run silently)
        double x[2] = {(double)st.iteration, (double)st.consumed_samples};
        for (int k = 0; k < 2; k++) {
            double s = comm->sum_f64(comm, x[k]), s2 = comm->sum_f64(comm, x[k] * x[k]);
            if (s * s != s2 * dist->world)
                kda_die("the ranks loaded different checkpoints (rank %d: iteration %ld, %llu samples consumed); "
                        "make '%s' visible to every rank and do not write to it while the run starts",
                        dist->rank, st.iteration, (unsigned long long)st.consumed_samples, cfg.load);
        }
    }
    if (st.iteration >= cfg.train_iters)
        printf("kda train: nothing to do: the checkpoint is at iteration %ld and train_iters is %ld; raise train_iters "
               "to train further\n",
               st.iteration, cfg.train_iters);
    if (dry) {
        kda_dist_optim_free(dopt);
        kda_comm_free(comm);
        kda_model_free(m);
        kda_dist_finalize();
        return 0;
    }
    kda_data *data = kda_data_open(&cfg, KDA_SPLIT_TRAIN);
    kda_data_seek(data, st.consumed_samples);
    char backend_line[1024];
    snprintf(backend_line, sizeof backend_line, "%s: %s", ops->name, ops->describe());
    kda_run_log *rl = kda_run_log_open(&cfg, path, backend_line, st.iteration, lead);
    double peak = ops->peak_tflops, fpt = kda_model_train_flops_per_token(&cfg);
    char no_valid[256];
    kda_validator *val = kda_validator_open(&cfg, B, no_valid, sizeof no_valid);
    if (val) printf("kda train: validation every %d iterations and at the end: %d batches of the valid split\n",
                    cfg.eval_interval, cfg.eval_iters);
    else printf("kda train: no validation loss: %s\n", no_valid);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    int32_t *sample = kda_malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    int32_t *ids = kda_malloc(sizeof(int32_t) * (size_t)B * T);
    int32_t *tgt = kda_malloc(sizeof(int32_t) * (size_t)B * T);
    double t_log = kda_now(), loss_acc = 0;
    int n_acc = 0;
    long it;
    long last_saved = st.iteration;
    char last_ckpt[KDA_PATH_MAX + 32] = "";
    int stop = 0; // a signal seen by any rank stops every rank after the same iteration
    for (it = st.iteration; it < cfg.train_iters && !stop; it++) {
        ops->zero(m->grad, m->n_alloc * sizeof(float));
        double loss = 0;
        uint64_t base = kda_data_consumed(data);
        // this rank's share of the global batch: samples [base + rank*n_local*B, ...)
        kda_data_seek(data, base + (uint64_t)dist->rank * n_local * B);
        for (int mb = 0; mb < n_local; mb++) {
            kda_data_next(data, sample, B);
            for (int b = 0; b < B; b++) {
                memcpy(ids + (size_t)b * T, sample + (size_t)b * (T + 1), sizeof(int32_t) * T);
                memcpy(tgt + (size_t)b * T, sample + (size_t)b * (T + 1) + 1, sizeof(int32_t) * T);
            }
            if (dopt && mb == n_local - 1) kda_dist_optim_arm(dopt); // reduce as the backward goes
            loss += kda_model_step(m, ids, tgt, B, T, 1, 1.0f / n_micro, NULL) / n_micro;
        }
        kda_data_seek(data, base + (uint64_t)cfg.global_batch_size);
        double lr = kda_lr_at(&cfg, it);
        kda_step_info info;
        if (dopt) {
            loss = comm->sum_f64(comm, loss);
            info = kda_dist_optim_step(dopt, lr, st.optim_steps + 1);
        } else {
            info = kda_optim_step(m, lr, st.optim_steps + 1);
        }
        if (!isfinite(loss) || info.nonfinite) {
            char last[KDA_PATH_MAX * 2 + 160] = "no checkpoint was saved or loaded by this run";
            {
                char *dir = cfg.save[0] ? kda_ckpt_resolve(cfg.save) : NULL;
                if (!dir && cfg.load[0]) dir = kda_ckpt_resolve(cfg.load);
                if (dir) {
                    int fin = kda_ckpt_weights_finite(dir);
                    snprintf(last, sizeof last, "the last checkpoint is %s, %s", dir,
                             fin == 1 ? "its weights are finite" : fin == 0 ? "its weights are NOT finite: use an earlier one"
                                                                            : "not known to be finite (older format)");
                    free(dir);
                }
            }
            kda_die("iteration %ld: %s is not finite (loss %g); stopping. Lower lr (now %g) or check the data; %s",
                    it + 1, info.nonfinite ? "a gradient" : "the loss", loss, lr, last);
        }
        stop = dist->world > 1 ? comm->sum_f64(comm, stop_requested ? 1.0 : 0.0) > 0 : stop_requested != 0;
        st.optim_steps++;
        st.iteration = it + 1;
        st.consumed_samples = kda_data_consumed(data);
        loss_acc += loss;
        n_acc++;
        if ((it + 1) % cfg.log_interval == 0 || it + 1 == cfg.train_iters || it == 0) {
            double now = kda_now(), dt = (now - t_log) / n_acc;
            double tps = (double)cfg.global_batch_size * T / dt;
            double mem = -1;
            if (ops->mem_info) {
                size_t used = 0, total = 0;
                ops->mem_info(&used, &total);
                if (total) mem = used / 1073741824.0;
            }
            kda_log_row row = {it + 1, kda_data_consumed(data), loss_acc / n_acc, lr, info.grad_norm, dt * 1e3, tps,
                               peak > 0 ? tps * fpt / (peak * 1e12) : -1, mem};
            kda_run_log_train(rl, &row);
            t_log = now;
            loss_acc = 0;
            n_acc = 0;
        }
        int at_end = st.iteration == cfg.train_iters || stop;
        if (val && ((cfg.eval_interval > 0 && st.iteration % cfg.eval_interval == 0) || at_end)) {
            double vs, vc;
            kda_validate(val, m, st.iteration / (cfg.eval_interval > 0 ? cfg.eval_interval : 1), dist->rank, dist->world,
                         &vs, &vc);
            if (dist->world > 1) vs = comm->sum_f64(comm, vs), vc = comm->sum_f64(comm, vc);
            if (vc > 0) kda_run_log_valid(rl, st.iteration, vs / vc);
        }
        if (cfg.save[0] && cfg.save_interval > 0 && st.iteration % cfg.save_interval == 0) {
            kda_ckpt_save(m, &st, cfg.save); // every rank: a sharded optimizer gathers; rank 0 writes
            last_saved = st.iteration;
            snprintf(last_ckpt, sizeof last_ckpt, "%s/iter_%07ld", cfg.save, st.iteration);
            printf("kda train: saved %s\n", last_ckpt);
        }
    }
    if (cfg.save[0] && st.iteration != last_saved) {
        kda_ckpt_save(m, &st, cfg.save);
        snprintf(last_ckpt, sizeof last_ckpt, "%s/iter_%07ld", cfg.save, st.iteration);
        printf("kda train: saved %s\n", last_ckpt);
    }
    kda_run_log_summary(rl, st.iteration, last_ckpt[0] ? last_ckpt : NULL);
    if (stop)
        printf("kda train: stopped by signal %d after iteration %ld%s\n", stop_requested ? (int)stop_requested : SIGTERM, it,
               cfg.save[0] ? "" : "; no checkpoint written (save is not set)");
    if (cfg.sample_tokens > 0) kda_sample_print(m, &cfg, cfg.sample_prompt, cfg.sample_tokens, (uint64_t)cfg.seed);
    kda_run_log_close(rl);
    kda_validator_close(val);
    free(sample);
    free(ids);
    free(tgt);
    kda_data_close(data);
    kda_dist_optim_free(dopt);
    kda_comm_free(comm);
    kda_model_free(m);
    kda_dist_finalize();
    return 0;
}
