// checkpoint.c — see checkpoint.h.
#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "base/version.h"
#include "comm/dist.h"
#include "train/dist_optim.h"
#include "formats/safetensors.h"

#define CKPT_FORMAT 1

// ---- filesystem helpers -------------------------------------------------------------------

static void fsync_path(const char *path, int is_dir) {
    int fd = open(path, is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) kda_die("cannot open '%s' to sync it: %s", path, strerror(errno));
    if (fsync(fd) != 0 && errno != EINVAL) kda_die("fsync of '%s' failed: %s", path, strerror(errno));
    close(fd);
}

static void mkdir_p(const char *path) {
    char buf[KDA_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) kda_die("cannot create directory '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) kda_die("cannot create directory '%s': %s", buf, strerror(errno));
}

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char sub[KDA_PATH_MAX * 2];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) rm_rf(sub);
        else unlink(sub);
    }
    closedir(d);
    rmdir(path);
}

static void rm_rf_hook(void *arg) { rm_rf((const char *)arg); }

// write a small text file atomically: tmp, fsync, rename, fsync the directory
static void write_text_atomic(const char *dir, const char *name, const char *text) {
    char tmp[KDA_PATH_MAX * 2], dst[KDA_PATH_MAX * 2];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%d", dir, name, (int)getpid());
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    FILE *f = kda_fopen(tmp, "w");
    if (fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) kda_die("cannot write '%s': %s", tmp, strerror(errno));
    fclose(f);
    if (rename(tmp, dst) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, dst, strerror(errno));
    fsync_path(dir, 1);
}

static char *read_small_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = kda_malloc(65536);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

// ---- tensors ------------------------------------------------------------------------------

static void write_params(const kda_model *m, const float *host, const char *path, const char *suffix) {
    kda_st_tensor *t = kda_calloc(m->n_params, sizeof *t);
    char (*names)[KDA_NAME_MAX + 16] = kda_calloc(m->n_params, sizeof *names);
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        snprintf(names[i], sizeof names[i], "%s%s", p->name, suffix);
        t[i].name = names[i];
        t[i].dtype = KDA_ST_F32;
        t[i].ndim = p->ndim;
        for (int k = 0; k < p->ndim; k++) t[i].shape[k] = p->shape[k];
        t[i].data = host + p->offset;
    }
    kda_st_write(path, t, m->n_params);
    free(names);
    free(t);
}

// read every parameter (name + suffix) from a safetensors file into host (fp32), checking shapes
static void read_params(const kda_model *m, float *host, const char *path, const char *suffix) {
    kda_st_file *f = kda_st_open(path);
    char name[KDA_NAME_MAX + 16];
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", p->name, suffix);
        const kda_st_entry *e = kda_st_find(f, name);
        if (!e) kda_die("checkpoint '%s' has no tensor '%s': it was saved by a different model config", path, name);
        int same = e->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = e->shape[k] == p->shape[k];
        if (!same)
            kda_die("checkpoint '%s': tensor '%s' has a different shape than this config's model (check hidden_size, "
                    "num_heads, head_dim, vocab_size, ...)",
                    path, name);
        kda_st_to_f32(f, e, host + p->offset);
    }
    kda_st_close(f);
}

// ---- save ---------------------------------------------------------------------------------

// CRC-32 (zlib) of a whole file: written to state.json at save, compared at load, so that a
// flipped byte in the weights or moments is an error naming the file, not a silently wrong model.
static unsigned long file_crc32(const char *path) {
    FILE *f = kda_fopen(path, "rb");
    unsigned char *buf = kda_malloc(1 << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t n;
    while ((n = fread(buf, 1, 1 << 20, f)) > 0) crc = crc32(crc, buf, (uInt)n);
    if (ferror(f)) kda_die("cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    free(buf);
    return (unsigned long)crc;
}

static void record_crc(json_t *sums, const char *path) {
    char hex[16];
    snprintf(hex, sizeof hex, "%08lx", file_crc32(path));
    const char *base = strrchr(path, '/');
    json_object_set_new(sums, base ? base + 1 : path, json_string(hex));
}

// Verifies FILE of checkpoint DIR against state.json's "crc32" (absent in checkpoints written
// before it: a warning, once per process, that nothing is verified).
static void verify_crc(const json_t *sums, const char *dir, const char *path) {
    static int warned;
    if (!sums) {
        if (!warned++)
            fprintf(stderr, "kda: warning: checkpoint '%s' has no checksums (written by an older kda); its files are "
                            "not verified\n", dir);
        return;
    }
    const char *base = strrchr(path, '/');
    const char *want = json_string_value(json_object_get(sums, base ? base + 1 : path));
    if (!want) kda_die("checkpoint '%s': state.json has no checksum for '%s'; the checkpoint is incomplete", dir, path);
    char got[16];
    snprintf(got, sizeof got, "%08lx", file_crc32(path));
    if (strcmp(got, want))
        kda_die("checkpoint file '%s' is corrupt: its CRC-32 is %s, state.json recorded %s when it was saved; use an "
                "earlier checkpoint",
                path, got, want);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// list "iter_XXXXXXX" entries (complete checkpoints), sorted ascending; stale temporaries removed
static int list_ckpts(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    char **v = kda_malloc(cap * sizeof(char *));
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "iter_", 5)) continue;
            if (strchr(e->d_name, '.')) { // iter_XXXXXXX.tmp-PID / .old-PID left by a crashed save
                char p[KDA_PATH_MAX * 2];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                int pid = 0;
                const char *dash = strrchr(e->d_name, '-');
                if (dash) pid = atoi(dash + 1);
                if (pid != (int)getpid() && (pid <= 0 || kill(pid, 0) != 0)) rm_rf(p);
                continue;
            }
            if (n == cap) v = kda_realloc(v, (cap *= 2) * sizeof(char *));
            v[n++] = kda_strdup(e->d_name);
        }
        closedir(d);
    }
    qsort(v, n, sizeof(char *), cmp_str);
    *out = v;
    return n;
}

void kda_ckpt_save(kda_model *m, const kda_train_state *st, const char *save_dir) {
    // Whole buffers whatever the rank count (a sharded optimizer gathers its shards: every rank
    // takes part); rank 0 writes.
    int lead = kda_dist_init()->rank == 0, has_optim = kda_model_has_optim_state(m);
    float *host = kda_malloc(m->n_alloc * sizeof(float));
    if (!lead) {
        kda_pbuf_get(m, KDA_PBUF_MASTER, host);
        if (has_optim) {
            kda_pbuf_get(m, KDA_PBUF_EXP_AVG, host);
            kda_pbuf_get(m, KDA_PBUF_EXP_AVG_SQ, host);
        }
        free(host);
        return;
    }
    mkdir_p(save_dir);
    char name[64], tmp[KDA_PATH_MAX * 2], fin[KDA_PATH_MAX * 2], path[KDA_PATH_MAX * 3];
    snprintf(name, sizeof name, "iter_%07ld", st->iteration);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp-%d", save_dir, name, (int)getpid());
    snprintf(fin, sizeof fin, "%s/%s", save_dir, name);
    rm_rf(tmp);
    mkdir_p(tmp);
    kda_on_die(rm_rf_hook, tmp);

    json_t *sums = json_object();
    kda_pbuf_get(m, KDA_PBUF_MASTER, host);
    int finite = 1;
    for (size_t i = 0; i < m->n_alloc && finite; i++) finite = isfinite(host[i]);
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    write_params(m, host, path, "");
    record_crc(sums, path);
    if (has_optim) {
        snprintf(path, sizeof path, "%s/optim.exp_avg.safetensors", tmp);
        kda_pbuf_get(m, KDA_PBUF_EXP_AVG, host);
        write_params(m, host, path, "");
        record_crc(sums, path);
        snprintf(path, sizeof path, "%s/optim.exp_avg_sq.safetensors", tmp);
        kda_pbuf_get(m, KDA_PBUF_EXP_AVG_SQ, host);
        write_params(m, host, path, "");
        record_crc(sums, path);
    }
    free(host);

    json_t *js = json_object();
    json_object_set_new(js, "format", json_integer(CKPT_FORMAT));
    json_object_set_new(js, "kda_version", json_string(kda_version_string())); // which kda wrote it
    json_object_set_new(js, "iteration", json_integer(st->iteration));
    json_object_set_new(js, "optim_steps", json_integer(st->optim_steps));
    json_object_set_new(js, "consumed_samples", json_integer((json_int_t)st->consumed_samples));
    json_t *rng = json_array();
    for (int i = 0; i < 4; i++) {
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)st->rng.s[i]);
        json_array_append_new(rng, json_string(hex));
    }
    json_object_set_new(js, "rng", rng);
    json_object_set_new(js, "has_optimizer", json_boolean(has_optim));
    json_object_set_new(js, "weights_finite", json_boolean(finite));
    json_object_set_new(js, "crc32", sums);
    char *text = json_dumps(js, JSON_INDENT(2));
    json_decref(js);
    write_text_atomic(tmp, "state.json", text);
    free(text);

    snprintf(path, sizeof path, "%s/config.yaml", tmp);
    FILE *f = kda_fopen(path, "w");
    // a relative tokenizer_model is made absolute, so that generate / export / eval find the
    // tokenizer from any folder, not only from the one training ran in
    kda_config *cc = kda_malloc(sizeof *cc);
    *cc = m->cfg;
    char absolute[PATH_MAX];
    if (cc->tokenizer_model[0] && cc->tokenizer_model[0] != '/' && realpath(cc->tokenizer_model, absolute) &&
        strlen(absolute) < sizeof cc->tokenizer_model)
        memcpy(cc->tokenizer_model, absolute, strlen(absolute) + 1); // fits: checked above
    kda_config_write_yaml(cc, f);
    free(cc);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) kda_die("cannot write '%s': %s", path, strerror(errno));
    fclose(f);
    fsync_path(tmp, 1);

    // publish: replace an older checkpoint of the same iteration, rename, sync the parent
    if (access(fin, F_OK) == 0) {
        char old[KDA_PATH_MAX * 3];
        snprintf(old, sizeof old, "%s.old-%d", fin, (int)getpid());
        if (rename(fin, old) != 0) kda_die("cannot move aside '%s': %s", fin, strerror(errno));
        if (rename(tmp, fin) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, fin, strerror(errno));
        rm_rf(old);
    } else if (rename(tmp, fin) != 0) {
        kda_die("cannot rename '%s' to '%s': %s", tmp, fin, strerror(errno));
    }
    kda_on_die_remove(rm_rf_hook, tmp);
    fsync_path(save_dir, 1);
    char latest[80];
    snprintf(latest, sizeof latest, "%s\n", name);
    write_text_atomic(save_dir, "latest", latest);

    int keep = m->cfg.keep_last_n;
    if (keep > 0) {
        char **v;
        int n = list_ckpts(save_dir, &v);
        for (int i = 0; i < n; i++) {
            if (i < n - keep && strcmp(v[i], name)) {
                // rename first (atomic), so a kill mid-delete never leaves a half checkpoint
                // under a checkpoint's name; the .del-PID leftover is swept by list_ckpts
                char del[KDA_PATH_MAX * 3 + 32];
                snprintf(path, sizeof path, "%s/%s", save_dir, v[i]);
                snprintf(del, sizeof del, "%s.del-%d", path, (int)getpid());
                if (rename(path, del) == 0) rm_rf(del);
            }
            free(v[i]);
        }
        free(v);
    }
}

// ---- load ---------------------------------------------------------------------------------

char *kda_ckpt_resolve(const char *path) {
    char buf[KDA_PATH_MAX * 2];
    snprintf(buf, sizeof buf, "%s/state.json", path);
    if (access(buf, F_OK) == 0) return kda_strdup(path);
    snprintf(buf, sizeof buf, "%s/latest", path);
    char *name = read_small_file(buf);
    if (!name) {
        struct stat st;
        if (stat(path, &st) != 0) return NULL; // a save directory not created yet
        if (!S_ISDIR(st.st_mode)) kda_die("checkpoint path '%s' is not a directory", path);
        return NULL; // a save directory with nothing in it yet
    }
    name[strcspn(name, "\r\n")] = 0;
    if (!name[0] || strchr(name, '/'))
        kda_die("'%s/latest' is corrupt (\"%s\"); point load at a checkpoint directory instead", path, name);
    char *out = kda_malloc(strlen(path) + strlen(name) + 2);
    sprintf(out, "%s/%s", path, name);
    free(name);
    snprintf(buf, sizeof buf, "%s/state.json", out);
    if (access(buf, F_OK) != 0) kda_die("'%s/latest' names '%s', which is missing or incomplete", path, out);
    return out;
}

char *kda_ckpt_load_config(const char *ckpt, kda_config *cfg, const char *who) {
    struct stat st;
    if (stat(ckpt, &st) != 0 || !S_ISDIR(st.st_mode))
        kda_die("%s: checkpoint '%s' not found: give a checkpoint directory (<save>/iter_NNNNNNN) or a save "
                "directory with a 'latest' file",
                who, ckpt);
    char *dir = kda_ckpt_resolve(ckpt);
    if (!dir) kda_die("%s: '%s' holds no checkpoint yet (no 'latest'); train with --set save=DIR first", who, ckpt);
    char path[KDA_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    if (stat(path, &st) != 0) kda_die("%s: '%s' is not a checkpoint: it has no config.yaml", who, dir);
    kda_config_load(cfg, path);
    return dir;
}

void kda_ckpt_load(kda_model *m, const char *dir, int load_optim, kda_train_state *st, int load_rng) {
    char path[KDA_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_error_t err;
    json_t *js = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!js) kda_die("cannot read checkpoint state '%s': %s (line %d)", path, err.text, err.line);
    json_t *fmt = json_object_get(js, "format"), *itv = json_object_get(js, "iteration"),
           *cs = json_object_get(js, "consumed_samples"), *rng = json_object_get(js, "rng");
    if (!json_is_integer(fmt) || json_integer_value(fmt) != CKPT_FORMAT || !json_is_integer(itv) ||
        !json_is_integer(cs) || !json_is_array(rng) || json_array_size(rng) != 4)
        kda_die("checkpoint state '%s' is malformed or of an unknown format version", path);
    int has_optim = json_is_true(json_object_get(js, "has_optimizer"));
    const json_t *sums = json_object_get(js, "crc32");

    // every rank reads the whole files (rank-count independent) and keeps what it holds
    float *host = kda_calloc(m->n_alloc, sizeof(float));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    verify_crc(sums, dir, path);
    read_params(m, host, path, "");
    kda_pbuf_put(m, KDA_PBUF_MASTER, host);
    if (load_optim) {
        if (!has_optim) kda_die("checkpoint '%s' has no optimizer state; set no_load_optim: true", dir);
        snprintf(path, sizeof path, "%s/optim.exp_avg.safetensors", dir);
        verify_crc(sums, dir, path);
        read_params(m, host, path, "");
        kda_pbuf_put(m, KDA_PBUF_EXP_AVG, host);
        snprintf(path, sizeof path, "%s/optim.exp_avg_sq.safetensors", dir);
        verify_crc(sums, dir, path);
        read_params(m, host, path, "");
        kda_pbuf_put(m, KDA_PBUF_EXP_AVG_SQ, host);
    }
    free(host);
    if (st) {
        st->iteration = (long)json_integer_value(itv);
        st->consumed_samples = (uint64_t)json_integer_value(cs);
        json_t *os = json_object_get(js, "optim_steps");
        st->optim_steps = load_optim && json_is_integer(os) ? (long)json_integer_value(os) : 0;
        if (load_rng)
            for (int i = 0; i < 4; i++) {
                const char *hex = json_string_value(json_array_get(rng, i));
                if (!hex) kda_die("checkpoint state '%s': rng entry %d is not a string", path, i);
                st->rng.s[i] = strtoull(hex, NULL, 16);
            }
    }
    json_decref(js);
}

int kda_ckpt_weights_finite(const char *dir) {
    char path[KDA_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_t *js = json_load_file(path, 0, NULL);
    if (!js) return -1;
    json_t *v = json_object_get(js, "weights_finite");
    int r = json_is_boolean(v) ? json_is_true(v) : -1;
    json_decref(js);
    return r;
}
