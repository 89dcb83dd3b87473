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
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            rm_rf(sub);
        else
            unlink(sub);
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
    if (fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0)
        kda_die("cannot write '%s': %s", tmp, strerror(errno));
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
    char(*names)[KDA_NAME_MAX + 16] = kda_calloc(m->n_params, sizeof *names);
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

// ---- checksums, the list of checkpoints ---------------------------------------------------

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
            fprintf(stderr,
                    "kda: warning: checkpoint '%s' has no checksums (written by an older kda); its files are "
                    "not verified\n",
                    dir);
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

// ---- the buffers: the model's own, or an optimizer's shards -------------------------------

// The three tensor files, in the order they are written and read (and gathered across ranks).
static const struct {
    kda_ckpt_buf which;
    const char *file;
} tensor_files[] = {{KDA_CKPT_WEIGHTS, "model.safetensors"},
                    {KDA_CKPT_EXP_AVG, "optim.exp_avg.safetensors"},
                    {KDA_CKPT_EXP_AVG_SQ, "optim.exp_avg_sq.safetensors"}};

// The model's allocation of a buffer, or NULL when it holds none (an optimizer's shards do).
static float *model_buffer(const kda_model *m, kda_ckpt_buf which) {
    return which == KDA_CKPT_WEIGHTS ? m->master : which == KDA_CKPT_EXP_AVG ? m->adam_m : m->adam_v;
}

// The shards hold the moments whenever they are given (checkpoint.h).
static int has_optimizer_state(const kda_model *m, const kda_ckpt_shards *sh) { return m->adam_m != NULL || sh; }

// host[m->n_alloc] <- the whole buffer (zeros past n_floats); a collective when sharded.
static void get_buffer(kda_model *m, const kda_ckpt_shards *sh, kda_ckpt_buf which, float *host) {
    const float *src = model_buffer(m, which);
    if (!src) {
        KDA_CHECK(sh, "checkpoint: buffer %d is held neither by the model nor by an optimizer", (int)which);
        sh->gather(sh->owner, which, host);
        return;
    }
    memset(host, 0, m->n_alloc * sizeof(float));
    m->ops->to_host(host, src, m->n_floats * sizeof(float));
}

// The whole buffer host[m->n_alloc] -> the model when it holds the buffer (the weights refresh
// the working copy too), else the shards; moments are allocated in a model that has none and no
// shards to hold them.
static void put_buffer(kda_model *m, const kda_ckpt_shards *sh, kda_ckpt_buf which, const float *host) {
    float *dst = model_buffer(m, which);
    if (!dst && sh) {
        sh->scatter(sh->owner, which, host);
        return;
    }
    if (!dst) {
        KDA_CHECK(which != KDA_CKPT_WEIGHTS,
                  "checkpoint: the weights are held neither by the model nor by an optimizer");
        kda_model_alloc_optim(m);
        dst = model_buffer(m, which);
    }
    m->ops->to_device(dst, host, m->n_floats * sizeof(float));
    if (which == KDA_CKPT_WEIGHTS) m->ops->master_to_work(m->master, m->work, m->n_floats);
}

// ---- save ---------------------------------------------------------------------------------

// The tensor files (the moments only with has_optim) into dir, their CRC-32s into sums; every
// rank takes part in the gathers, only the writer (write) writes. Returns whether the weights
// are all finite.
static int write_tensor_files(kda_model *m, const kda_ckpt_shards *sh, int has_optim, int write, const char *dir,
                              json_t *sums) {
    float *host = kda_malloc(m->n_alloc * sizeof(float));
    char path[KDA_PATH_MAX * 3];
    int finite = 1;
    for (int k = 0; k < (has_optim ? 3 : 1); k++) {
        get_buffer(m, sh, tensor_files[k].which, host);
        if (!write) continue;
        if (tensor_files[k].which == KDA_CKPT_WEIGHTS)
            for (size_t i = 0; i < m->n_alloc && finite; i++) finite = isfinite(host[i]);
        snprintf(path, sizeof path, "%s/%s", dir, tensor_files[k].file);
        write_params(m, host, path, "");
        record_crc(sums, path);
    }
    free(host);
    return finite;
}

// state.json: the train state, which kda wrote it, and the files' checksums (sums is taken over).
static void write_state(const char *dir, const kda_train_state *st, int has_optim, int finite, json_t *sums) {
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
    write_text_atomic(dir, "state.json", text);
    free(text);
}

// config.yaml: the run's configuration. A relative tokenizer_model is made absolute, so that
// generate / export / eval find the tokenizer from any folder, not only from the one training ran in.
static void write_config(const char *dir, const kda_config *cfg) {
    char path[KDA_PATH_MAX * 3];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    FILE *f = kda_fopen(path, "w");
    kda_config *cc = kda_malloc(sizeof *cc);
    *cc = *cfg;
    char absolute[PATH_MAX];
    if (cc->tokenizer_model[0] && cc->tokenizer_model[0] != '/' && realpath(cc->tokenizer_model, absolute) &&
        strlen(absolute) < sizeof cc->tokenizer_model)
        memcpy(cc->tokenizer_model, absolute, strlen(absolute) + 1); // fits: checked above
    kda_config_write_yaml(cc, f);
    free(cc);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) kda_die("cannot write '%s': %s", path, strerror(errno));
    fclose(f);
}

// The complete directory tmp becomes fin (replacing an older checkpoint of the same iteration),
// the parent is synced, then `latest` names it.
static void publish(const char *tmp, const char *fin, const char *save_dir, const char *name) {
    if (access(fin, F_OK) == 0) {
        char old[KDA_PATH_MAX * 3];
        snprintf(old, sizeof old, "%s.old-%d", fin, (int)getpid());
        if (rename(fin, old) != 0) kda_die("cannot move aside '%s': %s", fin, strerror(errno));
        if (rename(tmp, fin) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, fin, strerror(errno));
        rm_rf(old);
    } else if (rename(tmp, fin) != 0) {
        kda_die("cannot rename '%s' to '%s': %s", tmp, fin, strerror(errno));
    }
    kda_on_die_remove(rm_rf_hook, (void *)tmp);
    fsync_path(save_dir, 1);
    char latest[80];
    snprintf(latest, sizeof latest, "%s\n", name);
    write_text_atomic(save_dir, "latest", latest);
}

// keep_last_n: only the newest `keep` checkpoints stay (never the one just written, `name`).
static void remove_old_checkpoints(const char *save_dir, const char *name, int keep) {
    if (keep <= 0) return;
    char **v;
    int n = list_ckpts(save_dir, &v);
    for (int i = 0; i < n; i++) {
        if (i < n - keep && strcmp(v[i], name)) {
            // rename first (atomic), so a kill mid-delete never leaves a half checkpoint
            // under a checkpoint's name; the .del-PID leftover is swept by list_ckpts
            char path[KDA_PATH_MAX * 3], del[KDA_PATH_MAX * 3 + 32];
            snprintf(path, sizeof path, "%s/%s", save_dir, v[i]);
            snprintf(del, sizeof del, "%s.del-%d", path, (int)getpid());
            if (rename(path, del) == 0) rm_rf(del);
        }
        free(v[i]);
    }
    free(v);
}

void kda_ckpt_save_sharded(kda_model *m, const kda_ckpt_shards *sh, const kda_train_state *st, const char *save_dir) {
    // Whole buffers whatever the rank count (shards are gathered: every rank takes part); rank 0 writes.
    int lead = kda_dist_init()->rank == 0, has_optim = has_optimizer_state(m, sh);
    if (!lead) {
        if (sh) write_tensor_files(m, sh, has_optim, 0, NULL, NULL);
        return;
    }
    mkdir_p(save_dir);
    char name[64], tmp[KDA_PATH_MAX * 2], fin[KDA_PATH_MAX * 2];
    snprintf(name, sizeof name, "iter_%07ld", st->iteration);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp-%d", save_dir, name, (int)getpid());
    snprintf(fin, sizeof fin, "%s/%s", save_dir, name);
    rm_rf(tmp);
    mkdir_p(tmp);
    kda_on_die(rm_rf_hook, tmp);
    json_t *sums = json_object();
    int finite = write_tensor_files(m, sh, has_optim, 1, tmp, sums);
    write_state(tmp, st, has_optim, finite, sums);
    write_config(tmp, &m->cfg);
    fsync_path(tmp, 1);
    publish(tmp, fin, save_dir, name);
    remove_old_checkpoints(save_dir, name, m->cfg.keep_last_n);
}

void kda_ckpt_save(kda_model *m, const kda_train_state *st, const char *save_dir) {
    kda_ckpt_save_sharded(m, NULL, st, save_dir);
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

// The tensor files (the moments only with load_optim) -> the model or the shards, each file's
// checksum verified first; every rank reads the whole files (rank-count independent).
// The weights a checkpoint hands to training, generation or export are finite: one that is not
// (a run that diverged as it saved, or an edited file without checksums) stops here, naming it.
static void check_finite_weights(const float *w, size_t n, const char *path) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            kda_die("checkpoint weights '%s' hold a non-finite value (element %zu: %g); use an earlier checkpoint",
                    path, i, (double)w[i]);
}

static void read_tensor_files(kda_model *m, const kda_ckpt_shards *sh, const char *dir, int load_optim, int has_optim,
                              const json_t *sums) {
    float *host = kda_calloc(m->n_alloc, sizeof(float));
    char path[KDA_PATH_MAX * 2];
    for (int k = 0; k < (load_optim ? 3 : 1); k++) {
        if (k == 1 && !has_optim) kda_die("checkpoint '%s' has no optimizer state; set no_load_optim: true", dir);
        snprintf(path, sizeof path, "%s/%s", dir, tensor_files[k].file);
        verify_crc(sums, dir, path);
        read_params(m, host, path, "");
        if (k == 0) check_finite_weights(host, m->n_alloc, path);
        put_buffer(m, sh, tensor_files[k].which, host);
    }
    free(host);
}

// The train state from state.json (path names it in errors); optim_steps only with load_optim.
static void read_train_state(const json_t *js, const char *path, int load_optim, int load_rng, kda_train_state *st) {
    st->iteration = (long)json_integer_value(json_object_get(js, "iteration"));
    st->consumed_samples = (uint64_t)json_integer_value(json_object_get(js, "consumed_samples"));
    json_t *os = json_object_get(js, "optim_steps");
    st->optim_steps = load_optim && json_is_integer(os) ? (long)json_integer_value(os) : 0;
    if (!load_rng) return;
    const json_t *rng = json_object_get(js, "rng");
    for (int i = 0; i < 4; i++) {
        const char *hex = json_string_value(json_array_get(rng, i));
        if (!hex) kda_die("checkpoint state '%s': rng entry %d is not a string", path, i);
        st->rng.s[i] = strtoull(hex, NULL, 16);
    }
}

void kda_ckpt_load_sharded(kda_model *m, const kda_ckpt_shards *sh, const char *dir, int load_optim,
                           kda_train_state *st, int load_rng) {
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
    if (json_integer_value(itv) < 0 || json_integer_value(cs) < 0)
        kda_die("checkpoint state '%s': iteration %lld and consumed_samples %lld must not be negative", path,
                (long long)json_integer_value(itv), (long long)json_integer_value(cs));
    int has_optim = json_is_true(json_object_get(js, "has_optimizer"));
    read_tensor_files(m, sh, dir, load_optim, has_optim, json_object_get(js, "crc32"));
    if (st) read_train_state(js, path, load_optim, load_rng, st);
    json_decref(js);
}

void kda_ckpt_load(kda_model *m, const char *dir, int load_optim, kda_train_state *st, int load_rng) {
    kda_ckpt_load_sharded(m, NULL, dir, load_optim, st, load_rng);
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
