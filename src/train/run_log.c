// run_log.c — see run_log.h.
#include "train/run_log.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/version.h"
#include "train/tensorboard.h"

struct kda_run_log {
    const kda_config *cfg;
    FILE *metrics;
    char metrics_path[KDA_PATH_MAX + 32];
    kda_tb *tb;
    long start_iteration, last_iteration;
    double t_start;
    double tokens; // trained by this run
    double last_loss, last_val;
};

static double unix_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

// Keeps the rows of an existing metrics file up to 'keep' (header rows too), drops the rest.
static void truncate_after(const char *path, long keep) {
    FILE *f = fopen(path, "r");
    if (!f) return; // nothing yet
    char tmp[KDA_PATH_MAX + 48];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *o = kda_fopen(tmp, "w");
    char *line = NULL;
    size_t cap = 0;
    long dropped = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *it = j ? json_object_get(j, "iteration") : NULL;
        int keep_line = !it || !json_is_integer(it) || json_integer_value(it) <= keep;
        json_decref(j);
        if (keep_line)
            fputs(line, o);
        else
            dropped++;
    }
    free(line);
    fclose(f);
    if (fclose(o) != 0 || rename(tmp, path) != 0)
        kda_die("cannot rewrite metrics file '%s': %s", path, strerror(errno));
    if (dropped)
        printf("kda train: %s: dropped %ld rows past iteration %ld (a run that stopped after its last checkpoint)\n",
               path, dropped, keep);
}

static void write_header(kda_run_log *rl, const char *config_path, const char *backend) {
    char *yaml = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&yaml, &n);
    KDA_CHECK(mem != NULL, "out of memory");
    kda_config_write_yaml(rl->cfg, mem);
    fclose(mem);
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    json_t *h = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:f}", "kda_version", kda_version_string(), "host", host,
                          "backend", backend, "config_file", config_path ? config_path : "(built-in)", "config", yaml,
                          "start_iteration", (json_int_t)rl->start_iteration, "wall_time", unix_now());
    char *s = json_dumps(h, JSON_COMPACT);
    fprintf(rl->metrics, "%s\n", s);
    fflush(rl->metrics);
    free(s);
    json_decref(h);
    free(yaml);
}

kda_run_log *kda_run_log_open(const kda_config *cfg, const char *config_path, const char *backend, long start_iteration,
                              int files) {
    kda_run_log *rl = kda_calloc(1, sizeof *rl);
    rl->cfg = cfg;
    rl->start_iteration = rl->last_iteration = start_iteration;
    rl->t_start = kda_now();
    if (!files) return rl;
    if (cfg->metrics_file[0])
        snprintf(rl->metrics_path, sizeof rl->metrics_path, "%s", cfg->metrics_file);
    else if (cfg->save[0])
        snprintf(rl->metrics_path, sizeof rl->metrics_path, "%s/metrics.jsonl", cfg->save);
    if (rl->metrics_path[0]) {
        if (start_iteration > 0) truncate_after(rl->metrics_path, start_iteration);
        rl->metrics = kda_fopen(rl->metrics_path, start_iteration > 0 ? "a" : "w");
        write_header(rl, config_path, backend);
    }
    if (cfg->tensorboard_dir[0]) {
        rl->tb = kda_tb_open(cfg->tensorboard_dir);
        printf("kda train: TensorBoard events in %s\n", kda_tb_path(rl->tb));
    }
    return rl;
}

static void fmt_duration(char *b, size_t n, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(b, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(b, n, "%lds", t);
}

void kda_run_log_train(kda_run_log *rl, const kda_log_row *r) {
    const kda_config *c = rl->cfg;
    double tokens = (double)(r->iteration - rl->last_iteration) * c->global_batch_size * c->seq_length;
    rl->tokens += tokens;
    rl->last_iteration = r->iteration;
    rl->last_loss = r->loss;
    double elapsed = kda_now() - rl->t_start, left = (double)(c->train_iters - r->iteration) * r->ms_per_iter / 1e3;
    char el[32], eta[32];
    fmt_duration(el, sizeof el, elapsed);
    fmt_duration(eta, sizeof eta, left);
    printf(
        "iter %6ld/%ld | loss %.4f | lr %.3e | grad norm %.3f | %.1f ms/iter | %.0f tokens/s | %s elapsed, %s left\n",
        r->iteration, c->train_iters, r->loss, r->lr, r->grad_norm, r->ms_per_iter, r->tokens_per_s, el, eta);
    fflush(stdout);
    if (rl->metrics) {
        fprintf(rl->metrics,
                "{\"iteration\": %ld, \"loss\": %.6f, \"lr\": %.6e, \"grad_norm\": %.6f, \"ms_per_iter\": %.3f, "
                "\"tokens_per_s\": %.1f, \"consumed_samples\": %llu, \"consumed_tokens\": %llu",
                r->iteration, r->loss, r->lr, r->grad_norm, r->ms_per_iter, r->tokens_per_s,
                (unsigned long long)r->consumed_samples, (unsigned long long)r->consumed_samples * c->seq_length);
        if (r->mfu >= 0) fprintf(rl->metrics, ", \"mfu\": %.4f", r->mfu);
        if (r->mem_gib >= 0) fprintf(rl->metrics, ", \"device_mem_gib\": %.3f", r->mem_gib);
        fprintf(rl->metrics, ", \"wall_time\": %.3f}\n", unix_now());
        if (fflush(rl->metrics) != 0) kda_die("cannot write metrics file '%s': %s", rl->metrics_path, strerror(errno));
    }
    if (rl->tb) {
        kda_tb_scalar(rl->tb, "lm loss", r->iteration, r->loss);
        kda_tb_scalar(rl->tb, "learning-rate", r->iteration, r->lr);
        kda_tb_scalar(rl->tb, "grad-norm", r->iteration, r->grad_norm);
        kda_tb_scalar(rl->tb, "iteration-time", r->iteration, r->ms_per_iter / 1e3);
        kda_tb_scalar(rl->tb, "throughput", r->iteration, r->tokens_per_s);
        kda_tb_flush(rl->tb);
    }
}

void kda_run_log_valid(kda_run_log *rl, long iteration, double loss) {
    rl->last_val = loss;
    printf("validation at iter %ld | loss %.4f | ppl %.3f\n", iteration, loss, exp(loss));
    fflush(stdout);
    if (rl->metrics) {
        fprintf(rl->metrics, "{\"iteration\": %ld, \"val_loss\": %.6f, \"val_ppl\": %.6g, \"wall_time\": %.3f}\n",
                iteration, loss, exp(loss), unix_now());
        if (fflush(rl->metrics) != 0) kda_die("cannot write metrics file '%s': %s", rl->metrics_path, strerror(errno));
    }
    if (rl->tb) {
        kda_tb_scalar(rl->tb, "lm loss validation", iteration, loss);
        kda_tb_scalar(rl->tb, "lm loss validation ppl", iteration, exp(loss));
        kda_tb_flush(rl->tb);
    }
}

void kda_run_log_summary(kda_run_log *rl, long iteration, const char *checkpoint) {
    double t = kda_now() - rl->t_start;
    char el[32];
    fmt_duration(el, sizeof el, t);
    char val[48] = "";
    if (rl->last_val == rl->last_val && rl->last_val != 0)
        snprintf(val, sizeof val, ", validation loss %.4f", rl->last_val);
    printf("kda train: done: iterations %ld -> %ld, %.3g tokens in %s (%.0f tokens/s on average); last logged loss "
           "%.4f%s; %s%s%s%s\n",
           rl->start_iteration, iteration, rl->tokens, el, t > 0 ? rl->tokens / t : 0.0, rl->last_loss, val,
           checkpoint ? "checkpoint " : "no checkpoint (save is not set)", checkpoint ? checkpoint : "",
           rl->metrics ? "; metrics " : "", rl->metrics ? rl->metrics_path : "");
}

void kda_run_log_close(kda_run_log *rl) {
    if (!rl) return;
    if (rl->metrics && fclose(rl->metrics) != 0)
        kda_die("cannot write metrics file '%s': %s", rl->metrics_path, strerror(errno));
    kda_tb_close(rl->tb);
    free(rl);
}
