// hf_interop.c — see hf_interop.h.
#include "train/hf_interop.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "formats/safetensors.h"

static void json_set_id(json_t *o, const char *key, int id) {
    json_object_set_new(o, key, id >= 0 ? json_integer(id) : json_null());
}

void kda_hf_write_config(const kda_config *c, const char *dir, const char *torch_dtype) {
    json_t *o = json_object();
    json_object_set_new(o, "model_type", json_string("kda"));
    json_t *arch = json_array();
    json_array_append_new(arch, json_string("KDAForCausalLM"));
    json_object_set_new(o, "architectures", arch);
    json_object_set_new(o, "attn_mode", json_string("chunk"));
    json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->num_hidden_layers));
    json_object_set_new(o, "num_heads", json_integer(c->num_heads));
    json_object_set_new(o, "num_v_heads", json_null());
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "expand_v", json_real(c->expand_v));
    json_object_set_new(o, "use_short_conv", json_true());
    json_object_set_new(o, "conv_size", json_integer(c->conv_size));
    json_object_set_new(o, "allow_neg_eigval", json_false());
    json_object_set_new(o, "safe_gate", json_false());
    json_object_set_new(o, "lower_bound", json_null());
    json_object_set_new(o, "hidden_ratio", json_real(c->hidden_ratio));
    json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(o, "hidden_act", json_string("swish"));
    json_object_set_new(o, "norm_eps", json_real(c->norm_eps));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
    json_object_set_new(o, "tie_word_embeddings", json_true());
    json_object_set_new(o, "initializer_range", json_real(c->initializer_range));
    // kernel choices only; false keeps the export loadable where FLA's fused kernels are not
    json_object_set_new(o, "fuse_norm", json_false());
    json_object_set_new(o, "fuse_swiglu", json_false());
    json_object_set_new(o, "fuse_cross_entropy", json_false());
    json_object_set_new(o, "use_l2warp", json_false());
    json_object_set_new(o, "attn", json_null());
    json_object_set_new(o, "use_cache", json_true());
    json_set_id(o, "pad_token_id", c->pad_token_id);
    json_set_id(o, "bos_token_id", c->bos_token_id);
    json_set_id(o, "eos_token_id", c->eos_token_id);
    json_object_set_new(o, "torch_dtype", json_string(torch_dtype));
    char path[KDA_PATH_MAX * 2], tmp[KDA_PATH_MAX * 2 + 32];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
    if (json_dump_file(o, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) kda_die("cannot write '%s'", tmp);
    json_decref(o);
    if (rename(tmp, path) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
}

// one KDAConfig key -> kda_config_set("key=value")
static void set_from_json(kda_config *c, const char *path, const char *key, json_t *v) {
    char kv[256];
    if (json_is_null(v))
        snprintf(kv, sizeof kv, "%s=null", key);
    else if (json_is_true(v))
        snprintf(kv, sizeof kv, "%s=true", key);
    else if (json_is_false(v))
        snprintf(kv, sizeof kv, "%s=false", key);
    else if (json_is_integer(v))
        snprintf(kv, sizeof kv, "%s=%lld", key, (long long)json_integer_value(v));
    else if (json_is_real(v)) {
        double x = json_real_value(v);
        // integral reals (e.g. expand_v 2.0) keep a decimal point so integer keys reject them
        snprintf(kv, sizeof kv, "%s=%.17g%s", key, x, x == floor(x) && fabs(x) < 1e15 ? ".0" : "");
    } else if (json_is_string(v))
        snprintf(kv, sizeof kv, "%s=%s", key, json_string_value(v));
    else
        kda_die("%s: key '%s' has an unsupported JSON type", path, key);
    kda_config_set(c, kv);
}

// kda_die hook while config.json values go through kda_config_set (whose messages say --set)
static void note_config_origin(void *path) {
    fprintf(stderr, "kda: (that value comes from '%s')\n", (const char *)path);
}

// FLA KDAConfig's constructor defaults: what FLA builds for a key that config.json leaves out
static const char *const fla_model_defaults[] = {"hidden_size=2048",
                                                 "num_hidden_layers=24",
                                                 "num_heads=16",
                                                 "num_v_heads=null",
                                                 "head_dim=128",
                                                 "expand_v=1.0",
                                                 "use_short_conv=true",
                                                 "conv_size=4",
                                                 "intermediate_size=0",
                                                 "hidden_ratio=4.0",
                                                 "vocab_size=32000",
                                                 "norm_eps=1e-6",
                                                 "tie_word_embeddings=false",
                                                 "initializer_range=0.02",
                                                 "max_position_embeddings=2048",
                                                 "allow_neg_eigval=false",
                                                 "safe_gate=false",
                                                 "bos_token_id=1",
                                                 "eos_token_id=2",
                                                 "pad_token_id=null",
                                                 NULL};

void kda_hf_read_config(kda_config *c, const char *path) {
    if (access(path, F_OK) != 0) kda_die("'%s' is missing: an HF model folder has a config.json", path);
    json_error_t err;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!o) kda_die("cannot read '%s': %s (line %d, column %d)", path, err.text, err.line, err.column);
    if (!json_is_object(o)) kda_die("'%s' is not a JSON object", path);
    const char *mt = json_string_value(json_object_get(o, "model_type"));
    if (!mt || strcmp(mt, "kda"))
        kda_die("'%s' has model_type '%s'; kda imports KDA models (model_type \"kda\") only", path, mt ? mt : "(none)");
    // keys that would change the architecture into one kda does not build
    static const struct {
        const char *key, *why;
    } must_be_null[] = {
        {"attn", "hybrid models with softmax-attention layers are not supported (pure KDA only)"},
        {"attnres_block_size", "attention-residual mixing is not supported"},
        {"lower_bound", "a lower-bounded decay gate (safe gate) is not supported"},
    };
    for (size_t i = 0; i < sizeof must_be_null / sizeof must_be_null[0]; i++) {
        json_t *v = json_object_get(o, must_be_null[i].key);
        if (v && !json_is_null(v)) kda_die("'%s': %s must be null: %s", path, must_be_null[i].key, must_be_null[i].why);
    }
    json_t *act = json_object_get(o, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "swish")))
        kda_die("'%s': hidden_act must be \"swish\" (the MLP is SwiGLU, kda-model.md §2.6)", path);
    json_t *tie = json_object_get(o, "tie_word_embeddings");
    if (!json_is_true(tie))
        kda_die("'%s': untied embeddings (tie_word_embeddings %s) are not supported", path,
                tie ? "false" : "absent, which FLA reads as false");

    static const char *const model_keys[] = {"hidden_size",         "num_hidden_layers", "num_heads",
                                             "num_v_heads",         "head_dim",          "expand_v",
                                             "use_short_conv",      "conv_size",         "intermediate_size",
                                             "hidden_ratio",        "vocab_size",        "norm_eps",
                                             "tie_word_embeddings", "initializer_range", "max_position_embeddings",
                                             "allow_neg_eigval",    "safe_gate",         "bos_token_id",
                                             "eos_token_id",        "pad_token_id",      NULL};
    kda_on_die(note_config_origin, (void *)path);
    for (int i = 0; fla_model_defaults[i]; i++) kda_config_set(c, fla_model_defaults[i]);
    for (int i = 0; model_keys[i]; i++) {
        json_t *v = json_object_get(o, model_keys[i]);
        if (!v) continue;
        // FLA's nulls with a meaning: intermediate_size derived from hidden_ratio (0 here), hidden_ratio 4
        if (json_is_null(v) && !strcmp(model_keys[i], "intermediate_size"))
            kda_config_set(c, "intermediate_size=0");
        else if (json_is_null(v) && !strcmp(model_keys[i], "hidden_ratio"))
            kda_config_set(c, "hidden_ratio=4.0");
        else
            set_from_json(c, path, model_keys[i], v);
    }
    kda_on_die_remove(note_config_origin, (void *)path);
    json_decref(o);
}

void kda_hf_write_weights(const kda_model *m, const char *dir, int bf16) {
    float *host = kda_malloc(m->n_floats * sizeof(float));
    m->ops->to_host(host, m->master, m->n_floats * sizeof(float));
    kda_st_tensor *t = kda_calloc(m->n_params, sizeof *t);
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        t[i].name = p->name;
        t[i].dtype = bf16 ? KDA_ST_BF16 : KDA_ST_F32;
        t[i].ndim = p->ndim;
        for (int k = 0; k < p->ndim; k++) t[i].shape[k] = p->shape[k];
        t[i].data = host + p->offset;
    }
    char path[KDA_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    kda_st_write(path, t, m->n_params);
    free(t);
    free(host);
}

// The safetensors file holding `name`: the single model.safetensors, or the index's shard.
typedef struct {
    json_t *weight_map; // NULL for a single file
    int n_files;
    char **names;
    kda_st_file **files;
} weight_source;

static kda_st_file *source_file(weight_source *s, const char *dir, const char *fname) {
    for (int i = 0; i < s->n_files; i++)
        if (!strcmp(s->names[i], fname)) return s->files[i];
    if (strchr(fname, '/') || !strcmp(fname, "..")) kda_die("%s: shard name '%s' is not a plain file name", dir, fname);
    char path[KDA_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    if (s->weight_map && access(path, F_OK) != 0)
        kda_die("%s/model.safetensors.index.json names shard '%s', which is missing: %s", dir, fname, strerror(errno));
    s->names = kda_realloc(s->names, (s->n_files + 1) * sizeof(char *));
    s->files = kda_realloc(s->files, (s->n_files + 1) * sizeof(kda_st_file *));
    s->names[s->n_files] = kda_strdup(fname);
    s->files[s->n_files] = kda_st_open(path);
    return s->files[s->n_files++];
}

static const kda_st_entry *find_tensor(weight_source *s, const char *dir, const char *name, kda_st_file **f) {
    const char *fname = "model.safetensors";
    if (s->weight_map) {
        fname = json_string_value(json_object_get(s->weight_map, name));
        if (!fname) return NULL;
    }
    *f = source_file(s, dir, fname);
    return kda_st_find(*f, name);
}

static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < ndim && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

// Every tensor the folder holds must be one of m's parameters or the tied lm_head.weight: an
// unknown tensor means a model kda does not build, whose weights would otherwise be dropped.
static void check_no_extra_tensors(const kda_model *m, const char *where, const char *name) {
    if (kda_model_find_param(m, name) < 0 && strcmp(name, "lm_head.weight"))
        kda_die("%s holds tensor '%s', which a KDAForCausalLM of this config.json does not have "
                "(a model variant kda does not build?)",
                where, name);
}

void kda_hf_read_weights(kda_model *m, const char *dir) {
    weight_source s = {0};
    char path[KDA_PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_t *index = NULL;
    if (access(path, F_OK) == 0) {
        json_error_t err;
        index = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
        if (!index) kda_die("cannot read '%s': %s (line %d)", path, err.text, err.line);
        s.weight_map = json_object_get(index, "weight_map");
        if (!json_is_object(s.weight_map)) kda_die("'%s' has no weight_map object", path);
        const char *name;
        json_t *v;
        json_object_foreach(s.weight_map, name, v) {
            if (!json_is_string(v)) kda_die("'%s': weight_map entry '%s' is not a file name string", path, name);
            check_no_extra_tensors(m, path, name);
        }
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (access(path, F_OK) != 0)
            kda_die("'%s' has neither model.safetensors nor model.safetensors.index.json", dir);
    }
    float *host = kda_calloc(m->n_floats, sizeof(float));
    if (!index) {
        kda_st_file *single = source_file(&s, dir, "model.safetensors");
        for (int i = 0; i < single->n; i++) check_no_extra_tensors(m, single->path, single->entries[i].name);
    }
    for (int i = 0; i < m->n_params; i++) {
        const kda_param *p = &m->params[i];
        kda_st_file *f = NULL;
        const kda_st_entry *e = find_tensor(&s, dir, p->name, &f);
        if (!e) kda_die("'%s' has no tensor '%s' (is it a KDAForCausalLM of this config?)", dir, p->name);
        int same = e->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = e->shape[k] == p->shape[k];
        if (!same) {
            char have[96], want[96];
            format_shape(have, sizeof have, e->ndim, e->shape);
            int64_t ps[KDA_ST_MAX_DIMS] = {0};
            for (int k = 0; k < p->ndim; k++) ps[k] = p->shape[k];
            format_shape(want, sizeof want, p->ndim, ps);
            kda_die("%s: tensor '%s' has shape %s, but config.json describes %s", f->path, p->name, have, want);
        }
        if (e->dtype != KDA_ST_F32 && e->dtype != KDA_ST_BF16 && e->dtype != KDA_ST_F16)
            kda_die("%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", f->path, p->name,
                    kda_st_dtype_name(e->dtype));
        kda_st_to_f32(f, e, host + p->offset);
    }
    // a tied head may be stored explicitly (Primus's exporter does): it must equal the embedding
    kda_st_file *f = NULL;
    const kda_st_entry *lm = find_tensor(&s, dir, "lm_head.weight", &f);
    if (lm) {
        const kda_param *E = &m->params[m->embed];
        if (lm->numel != E->numel) kda_die("%s: lm_head.weight does not have the embedding's shape", f->path);
        float *tmp = kda_malloc(lm->numel * sizeof(float));
        kda_st_to_f32(f, lm, tmp);
        if (memcmp(tmp, host + E->offset, lm->numel * sizeof(float)))
            kda_die("%s: lm_head.weight differs from model.embeddings.weight; untied heads are not supported", f->path);
        free(tmp);
    }
    m->ops->to_device(m->master, host, m->n_floats * sizeof(float));
    m->ops->master_to_work(m->master, m->work, m->n_floats);
    free(host);
    for (int i = 0; i < s.n_files; i++) {
        kda_st_close(s.files[i]);
        free(s.names[i]);
    }
    free(s.files);
    free(s.names);
    json_decref(index);
}
