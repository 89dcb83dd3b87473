// model_io — dump one forward + backward of the model for whole-model parity tests.
//
//   model_io [--config f.yaml] [--set key=value]... [--seed N] [--perturb P] [--load CKPT]
//            --ids ids.bin --batch B --seq T --out DIR
//
// Builds the model (CPU backend, fp32), initialises it (kda-model.md §4) from the seed, or
// with --load takes the weights of a kda checkpoint (a checkpoint directory or a save
// directory with `latest`; pass its config.yaml with --config so the shapes match),
// optionally moves every parameter off its init (--perturb P: x += P·s·N(0,1) with s the
// tensor's RMS at init, or 1 for an all-zero tensor; deterministic from the seed), runs
// forward + backward on ids (B x T int32, row-major, raw little-endian) with the targets
// FLA's labels=input_ids computes (ids shifted left by one per row, last position -100),
// and writes into DIR:
//   weights.safetensors  every parameter, FLA key names and shapes, F32 (tied head once)
//   grads.safetensors    the gradient of the mean loss, same names and shapes
//   logits.safetensors   "logits" [B, T, vocab_size] F32
//   loss.json            {"loss": <mean cross-entropy, %.17g>, "n_valid": <targets counted>}
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/checkpoint.h"
#include "base/common.h"
#include "base/config.h"
#include "model/model.h"
#include "model/ops.h"
#include "formats/safetensors.h"

static void usage(void) {
    fprintf(stderr,
            "usage: model_io [--config f.yaml] [--set key=value]... [--seed N] [--perturb P] [--load CKPT]\n"
            "                --ids ids.bin --batch B --seq T --out DIR\n");
    exit(2);
}

static long parse_long(const char *opt, const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s) kda_die("%s: '%s' is not an integer", opt, s);
    return v;
}

static double parse_double(const char *opt, const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s) kda_die("%s: '%s' is not a number", opt, s);
    return v;
}

static int32_t *read_ids(const char *path, int B, int T) {
    FILE *f = kda_fopen(path, "rb");
    KDA_CHECK(fseek(f, 0, SEEK_END) == 0, "cannot seek in '%s'", path);
    long size = ftell(f);
    KDA_CHECK(size >= 0, "cannot size '%s'", path);
    if (size != (long)B * T * 4)
        kda_die("'%s' has %ld bytes, but --batch %d --seq %d needs %ld (B*T int32)", path, size, B, T, (long)B * T * 4);
    rewind(f);
    int32_t *ids = kda_malloc((size_t)B * T * sizeof(int32_t));
    KDA_CHECK(fread(ids, sizeof(int32_t), (size_t)B * T, f) == (size_t)B * T, "short read from '%s'", path);
    fclose(f);
    return ids;
}

// Move every parameter off its init: x += p * s * N(0,1), s = RMS of the tensor (1 if zero).
static void perturb(kda_model *m, double p, uint64_t seed) {
    kda_rng rng;
    kda_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ull); // a stream separate from the init's
    float *host = kda_malloc(m->n_floats * sizeof(float));
    m->ops->to_host(host, m->master, m->n_floats * sizeof(float));
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *par = &m->params[i];
        float *x = host + par->offset;
        double ss = 0;
        for (size_t j = 0; j < par->numel; j++) ss += (double)x[j] * x[j];
        double s = ss > 0 ? sqrt(ss / (double)par->numel) : 1.0;
        for (size_t j = 0; j < par->numel; j++) x[j] += (float)(p * s * kda_rng_normal(&rng));
    }
    m->ops->to_device(m->master, host, m->n_floats * sizeof(float));
    m->ops->master_to_work(m->master, m->work, m->n_floats);
    free(host);
}

// Write every parameter-shaped tensor of buffer dev (master or grad) under FLA's names.
static void write_params(const kda_model *m, const float *dev, const char *path) {
    float *host = kda_malloc(m->n_floats * sizeof(float));
    m->ops->to_host(host, dev, m->n_floats * sizeof(float));
    kda_st_tensor *t = kda_calloc(m->n_params, sizeof *t);
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        t[i].name = p->name;
        t[i].dtype = KDA_ST_F32;
        t[i].ndim = p->ndim;
        for (int k = 0; k < p->ndim; k++) t[i].shape[k] = p->shape[k];
        t[i].data = host + p->offset;
    }
    kda_st_write(path, t, m->n_params);
    free(t);
    free(host);
}

int main(int argc, char **argv) {
    kda_config cfg;
    kda_config_defaults(&cfg);
    const char *ids_path = NULL, *out = NULL, *load = NULL;
    long seed = 1, B = 0, T = 0;
    double pert = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--config"))
            kda_config_load(&cfg, v);
        else if (!strcmp(a, "--set"))
            kda_config_set(&cfg, v);
        else if (!strcmp(a, "--seed"))
            seed = parse_long(a, v);
        else if (!strcmp(a, "--perturb"))
            pert = parse_double(a, v);
        else if (!strcmp(a, "--ids"))
            ids_path = v;
        else if (!strcmp(a, "--batch"))
            B = parse_long(a, v);
        else if (!strcmp(a, "--seq"))
            T = parse_long(a, v);
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--load"))
            load = v;
        else
            usage();
    }
    if (!ids_path || !out || B <= 0 || T <= 1) usage();
    kda_config_finalize(&cfg);
    if (!cfg.tie_word_embeddings) kda_die("model_io: only tie_word_embeddings=true models are supported");
    if (cfg.num_threads > 0) omp_set_num_threads(cfg.num_threads);
    if (mkdir(out, 0777) != 0 && errno != EEXIST) kda_die("cannot create directory '%s': %s", out, strerror(errno));

    int32_t *ids = read_ids(ids_path, (int)B, (int)T);
    int32_t *tgt = kda_malloc((size_t)B * T * sizeof(int32_t));
    for (long b = 0; b < B; b++)
        for (long t = 0; t < T; t++) tgt[b * T + t] = t + 1 < T ? ids[b * T + t + 1] : -100;

    kda_model *m = kda_model_create(&cfg, kda_ops_cpu(), (int)B, (int)T);
    kda_model_init(m, (uint64_t)seed);
    if (load) {
        char *ck = kda_ckpt_resolve(load);
        if (!ck) kda_die("--load '%s' holds no checkpoint", load);
        kda_ckpt_load(m, ck, 0, NULL, 0);
        free(ck);
    }
    if (pert != 0) perturb(m, pert, (uint64_t)seed);
    m->ops->zero(m->grad, m->n_floats * sizeof(float));
    long n_valid = 0;
    double loss = kda_model_step(m, ids, tgt, (int)B, (int)T, 1, 1.0f, &n_valid);
    size_t nl = (size_t)B * T * cfg.vocab_size;
    float *logits = kda_malloc(nl * sizeof(float));
    kda_model_logits(m, ids, (int)B, (int)T, logits); // forward only: leaves m->grad alone

    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", out);
    write_params(m, m->master, path);
    snprintf(path, sizeof path, "%s/grads.safetensors", out);
    write_params(m, m->grad, path);
    kda_st_tensor lt = {.name = "logits", .dtype = KDA_ST_F32, .ndim = 3, .data = logits};
    lt.shape[0] = (int)B;
    lt.shape[1] = (int)T;
    lt.shape[2] = cfg.vocab_size;
    snprintf(path, sizeof path, "%s/logits.safetensors", out);
    kda_st_write(path, &lt, 1);
    snprintf(path, sizeof path, "%s/loss.json", out);
    FILE *f = kda_fopen(path, "w");
    fprintf(f, "{\"loss\": %.17g, \"n_valid\": %ld, \"kda_algo\": \"%s\", \"n_params\": %zu}\n", loss, n_valid,
            cfg.kda_algo, kda_model_num_params(m));
    KDA_CHECK(fclose(f) == 0, "cannot write '%s'", path);
    printf("model_io: %ld x %ld tokens, %s core, loss %.9f over %ld targets -> %s\n", B, T, cfg.kda_algo, loss, n_valid,
           out);

    kda_model_free(m);
    free(logits);
    free(tgt);
    free(ids);
    return 0;
}
