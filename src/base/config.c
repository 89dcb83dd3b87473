// config.c — see config.h. The key table, and reading values into it: the YAML file is read
// with libyaml's document API (which gives every node its line and column), --set overrides
// with the same rules. Defaults and kda_config_finalize are in config_finalize.c, writing in
// config_write.c.
//
// Value rules (YAML 1.2 core schema, plain scalars only; a quoted scalar is always a string):
//   integer  [-+]?[0-9]+            number  integer or decimal/exponent float, finite
//   boolean  true|True|TRUE|false|False|FALSE
//   null     null|Null|NULL|~|(empty)  — only where a key says it can be null
//   string   any scalar (plain null => "")
//   path list  a sequence of scalars, or one scalar (one path), or null (no paths)
#include "base/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/common.h"
#include "base/config_impl.h"

// ---------------------------------------------------------------------------------------------
// The key table (config_impl.h): every field of kda_config, in the order kda_config_write_yaml
// writes them.

// clang-format off
#define OFF(f) offsetof(kda_config, f)
#define KI(f, sec) {#f, K_INT, OFF(f), 0, 0, 0, 0, sec}
#define KN(f, nullv, sec) {#f, K_INT, OFF(f), 0, 0, 1, nullv, sec}
#define KL(f, sec) {#f, K_LONG, OFF(f), 0, 0, 0, 0, sec}
#define KD(f, sec) {#f, K_DOUBLE, OFF(f), 0, 0, 0, 0, sec}
#define KB(f, sec) {#f, K_BOOL, OFF(f), 0, 0, 0, 0, sec}
#define KS(f, sec) {#f, K_STR, OFF(f), sizeof(((kda_config *)0)->f), 0, 0, 0, sec}
#define KP(f, n, sec) {#f, K_PATHS, OFF(f), sizeof(((kda_config *)0)->f[0]), OFF(n), 0, 0, sec}
// clang-format on

static const char SEC_MODEL[] = "model (FLA KDAConfig field names; kda-model.md §1)";
static const char SEC_DERIVED[] = "derived from the keys above (informational: kda_config_finalize recomputes them)";
static const char SEC_TRAIN[] = "training (Megatron / Primus names; kda-model.md §6)";
static const char SEC_CKPT[] = "checkpoints";
static const char SEC_DATA[] = "data";
static const char SEC_KDA[] = "kda-specific";

const key_def cfg_keys[] = {
    KI(hidden_size, SEC_MODEL),
    KI(num_hidden_layers, SEC_MODEL),
    KI(num_heads, SEC_MODEL),
    KN(num_v_heads, 0, SEC_MODEL),
    KI(head_dim, SEC_MODEL),
    KD(expand_v, SEC_MODEL),
    KB(use_short_conv, SEC_MODEL),
    KI(conv_size, SEC_MODEL),
    KI(intermediate_size, SEC_MODEL),
    KD(hidden_ratio, SEC_MODEL),
    KI(vocab_size, SEC_MODEL),
    KD(norm_eps, SEC_MODEL),
    KB(tie_word_embeddings, SEC_MODEL),
    KD(initializer_range, SEC_MODEL),
    KI(max_position_embeddings, SEC_MODEL),
    KB(allow_neg_eigval, SEC_MODEL),
    KB(safe_gate, SEC_MODEL),
    KN(bos_token_id, -1, SEC_MODEL),
    KN(eos_token_id, -1, SEC_MODEL),
    KN(pad_token_id, -1, SEC_MODEL),
    KS(attn_mode, SEC_MODEL),
    KI(head_v_dim, SEC_DERIVED),
    KI(key_dim, SEC_DERIVED),
    KI(value_dim, SEC_DERIVED),
    KL(train_iters, SEC_TRAIN),
    KI(micro_batch_size, SEC_TRAIN),
    KI(global_batch_size, SEC_TRAIN),
    KI(seq_length, SEC_TRAIN),
    KD(lr, SEC_TRAIN),
    KD(min_lr, SEC_TRAIN),
    KL(lr_warmup_iters, SEC_TRAIN),
    KL(lr_decay_iters, SEC_TRAIN),
    KS(lr_decay_style, SEC_TRAIN),
    KD(adam_beta1, SEC_TRAIN),
    KD(adam_beta2, SEC_TRAIN),
    KD(adam_eps, SEC_TRAIN),
    KD(weight_decay, SEC_TRAIN),
    KD(clip_grad, SEC_TRAIN),
    KL(seed, SEC_TRAIN),
    KB(bf16, SEC_TRAIN),
    KB(use_distributed_optimizer, SEC_TRAIN),
    KI(log_interval, SEC_TRAIN),
    KI(eval_interval, SEC_TRAIN),
    KI(eval_iters, SEC_TRAIN),
    KS(save, SEC_CKPT),
    KI(save_interval, SEC_CKPT),
    KS(load, SEC_CKPT),
    KB(finetune, SEC_CKPT),
    KB(no_load_optim, SEC_CKPT),
    KB(no_load_rng, SEC_CKPT),
    KI(keep_last_n, SEC_CKPT),
    KP(train_data_path, n_train_data_path, SEC_DATA),
    KP(valid_data_path, n_valid_data_path, SEC_DATA),
    KS(split, SEC_DATA),
    KS(data_format, SEC_DATA),
    KS(tokenizer_type, SEC_DATA),
    KS(tokenizer_model, SEC_DATA),
    KS(device, SEC_KDA),
    KS(kda_algo, SEC_KDA),
    KS(recompute_granularity, SEC_TRAIN),
    KP(recompute_modules, n_recompute_modules, SEC_TRAIN),
    KI(kda_chunk_size, SEC_KDA),
    KS(metrics_file, SEC_KDA),
    KS(tensorboard_dir, SEC_KDA),
    KI(num_threads, SEC_KDA),
    KI(sample_tokens, SEC_KDA),
    KS(sample_prompt, SEC_KDA),
};
const size_t cfg_n_keys = sizeof cfg_keys / sizeof cfg_keys[0];

// FLA KDAConfig keys accepted so that an FLA config.json (JSON is YAML) or a Primus-style file
// loads unchanged, but which have no effect here: they select kernels (fuse_*, use_cache),
// are informational (model_type, architectures, torch_dtype, transformers_version), or name
// the only behaviour this implementation has (hidden_act swish, lower_bound null, attn null:
// pure KDA, attnres_block_size null, use_l2warp false). A value that would change the model
// is refused rather than ignored.
typedef enum { IG_ANY, IG_BOOL, IG_NULL, IG_FALSE, IG_STRING_IS } ignore_rule;
typedef struct {
    const char *name;
    ignore_rule rule;
    const char *must_be; // IG_STRING_IS
    const char *why;     // shown when the value is refused
} ignored_key;

static const ignored_key IGNORED[] = {
    {"model_type", IG_STRING_IS, "kda", "this trainer only builds KDA models"},
    {"architectures", IG_ANY, NULL, NULL},
    {"attn", IG_NULL, NULL, "hybrid models with softmax-attention layers are not supported (pure KDA only)"},
    {"attnres_block_size", IG_NULL, NULL, "attention-residual mixing is not supported"},
    {"fuse_norm", IG_BOOL, NULL, NULL},
    {"fuse_swiglu", IG_BOOL, NULL, NULL},
    {"fuse_cross_entropy", IG_BOOL, NULL, NULL},
    {"use_l2warp", IG_FALSE, NULL, "L2-warp changes the gradients and is not implemented"},
    {"use_cache", IG_BOOL, NULL, NULL},
    {"lower_bound", IG_NULL, NULL, "a lower-bounded decay gate is not implemented (kda-model.md §2.4)"},
    {"torch_dtype", IG_ANY, NULL, NULL},
    {"transformers_version", IG_ANY, NULL, NULL},
    {"hidden_act", IG_STRING_IS, "swish", "the MLP is SwiGLU (kda-model.md §2.6)"},
};
#define N_IGNORED (sizeof IGNORED / sizeof IGNORED[0])

// ---------------------------------------------------------------------------------------------
// Where a value came from, for error messages: a file position or a --set argument.

typedef struct {
    const char *file; // NULL for --set
    const char *arg;  // the whole --set argument
} origin;

KDA_PRINTF(4, 5)
KDA_NORETURN static void bad(const origin *o, size_t line, size_t col, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o->file) kda_die("%s:%zu:%zu: %s", o->file, line + 1, col + 1, msg);
    kda_die("--set %s: %s", o->arg, msg);
}

// A scalar as read: its text and whether it was quoted (quoted => always a string).
typedef struct {
    const char *text;
    int quoted;
    size_t line, col;
} scalar;

static int is_null(const scalar *s) {
    if (s->quoted) return 0;
    const char *t = s->text;
    return !t[0] || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

// 1 true, 0 false, -1 not a boolean
static int as_bool(const scalar *s) {
    if (s->quoted) return -1;
    const char *t = s->text;
    if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) return 1;
    if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) return 0;
    return -1;
}

static int as_integer(const scalar *s, long long *out) {
    if (s->quoted) return 0;
    const char *t = s->text;
    size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
    if (!t[i]) return 0;
    for (; t[i]; i++)
        if (t[i] < '0' || t[i] > '9') return 0;
    errno = 0;
    *out = strtoll(s->text, NULL, 10);
    return errno == 0;
}

static int as_number(const scalar *s, double *out) {
    if (s->quoted || !s->text[0]) return 0;
    const char *t = s->text;
    // only decimal notation: strtod would also take "inf", "nan" and hex floats
    for (size_t i = 0; t[i]; i++)
        if (!strchr("0123456789+-.eE", t[i])) return 0;
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (*end || errno == ERANGE || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static void set_string(const origin *o, const key_def *k, const scalar *s, char *dst, size_t cap) {
    const char *t = is_null(s) ? "" : s->text;
    size_t n = strlen(t);
    if (n >= cap)
        bad(o, s->line, s->col, "key '%s': value is %zu characters long, at most %zu fit", k->name, n, cap - 1);
    memset(dst, 0, cap);
    memcpy(dst, t, n);
}

#define QUOTED_HINT(s) ((s)->quoted ? " (quoted, so a string: remove the quotes)" : "")

static void apply_scalar(kda_config *c, const key_def *k, const scalar *s, const origin *o) {
    char *field = (char *)c + k->off;
    switch (k->type) {
    case K_INT:
    case K_LONG: {
        long long v;
        if (k->nullable && is_null(s)) {
            *(int *)field = k->null_value;
            return;
        }
        if (!as_integer(s, &v))
            bad(o, s->line, s->col, "key '%s': expected an integer%s, got '%s'%s", k->name,
                k->nullable ? " or null" : "", s->text, QUOTED_HINT(s));
        long long lo = k->type == K_INT ? -2147483647LL - 1 : -9223372036854775807LL - 1;
        long long hi = k->type == K_INT ? 2147483647LL : 9223372036854775807LL;
        if (v < lo || v > hi) bad(o, s->line, s->col, "key '%s': %s is out of range", k->name, s->text);
        if (k->type == K_INT)
            *(int *)field = (int)v;
        else
            *(long *)field = (long)v;
        return;
    }
    case K_DOUBLE: {
        double v;
        if (!as_number(s, &v))
            bad(o, s->line, s->col, "key '%s': expected a number, got '%s'%s", k->name, s->text, QUOTED_HINT(s));
        *(double *)field = v;
        return;
    }
    case K_BOOL: {
        int v = as_bool(s);
        if (v < 0)
            bad(o, s->line, s->col, "key '%s': expected true or false, got '%s'%s", k->name, s->text, QUOTED_HINT(s));
        *(int *)field = v;
        return;
    }
    case K_STR: set_string(o, k, s, field, k->size); return;
    case K_PATHS: {
        int *count = (int *)((char *)c + k->count_off);
        memset(field, 0, k->size * KDA_MAX_PATHS);
        *count = 0;
        if (is_null(s)) return;
        set_string(o, k, s, field, k->size);
        *count = 1;
        return;
    }
    }
}

// ---------------------------------------------------------------------------------------------
// Key lookup and the "did you mean" suggestion.

static const key_def *find_key(const char *name) {
    for (size_t i = 0; i < cfg_n_keys; i++)
        if (!strcmp(cfg_keys[i].name, name)) return &cfg_keys[i];
    return NULL;
}

static const ignored_key *find_ignored(const char *name) {
    for (size_t i = 0; i < N_IGNORED; i++)
        if (!strcmp(IGNORED[i].name, name)) return &IGNORED[i];
    return NULL;
}

// Levenshtein distance, capped: names longer than 63 characters never match.
static int edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

KDA_NORETURN static void unknown_key(const origin *o, const char *name, size_t line, size_t col) {
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < cfg_n_keys + N_IGNORED; i++) {
        const char *cand = i < cfg_n_keys ? cfg_keys[i].name : IGNORED[i - cfg_n_keys].name;
        int d = edit_distance(name, cand);
        if (d < best_d) best_d = d, best = cand;
    }
    if (best) bad(o, line, col, "unknown key '%s' (did you mean '%s'?)", name, best);
    bad(o, line, col, "unknown key '%s' (the keys are the fields of src/base/config.h; see configs/*.yaml)", name);
}

// ---------------------------------------------------------------------------------------------
// Applying libyaml nodes.

static scalar node_scalar(const yaml_node_t *n, const char *key, const origin *o) {
    scalar s = {(const char *)n->data.scalar.value, n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE, n->start_mark.line,
                n->start_mark.column};
    if (strlen(s.text) != n->data.scalar.length) bad(o, s.line, s.col, "key '%s': value contains a NUL character", key);
    return s;
}

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a sequence" : "a scalar";
}

static void apply_ignored(const ignored_key *ig, yaml_node_t *v, const origin *o) {
    if (ig->rule == IG_ANY) return;
    size_t line = v->start_mark.line, col = v->start_mark.column;
    if (v->type != YAML_SCALAR_NODE) {
        if (ig->rule == IG_BOOL) bad(o, line, col, "key '%s': expected true or false, got %s", ig->name, node_kind(v));
        bad(o, line, col, "key '%s' must be %s, got %s: %s", ig->name,
            ig->rule == IG_NULL        ? "null"
                : ig->rule == IG_FALSE ? "false"
                                       : ig->must_be,
            node_kind(v), ig->why);
    }
    scalar s = node_scalar(v, ig->name, o);
    switch (ig->rule) {
    case IG_ANY: return;
    case IG_BOOL:
        if (as_bool(&s) < 0) bad(o, line, col, "key '%s': expected true or false, got '%s'", ig->name, s.text);
        return;
    case IG_NULL:
        if (!is_null(&s)) bad(o, line, col, "key '%s' must be null, got '%s': %s", ig->name, s.text, ig->why);
        return;
    case IG_FALSE:
        if (as_bool(&s) != 0) bad(o, line, col, "key '%s' must be false, got '%s': %s", ig->name, s.text, ig->why);
        return;
    case IG_STRING_IS:
        if (strcmp(s.text, ig->must_be))
            bad(o, line, col, "key '%s' must be '%s', got '%s': %s", ig->name, ig->must_be, s.text, ig->why);
        return;
    }
}

static void apply_node(kda_config *c, const key_def *k, yaml_document_t *doc, yaml_node_t *v, const origin *o) {
    size_t line = v->start_mark.line, col = v->start_mark.column;
    if (v->type == YAML_SCALAR_NODE) {
        scalar s = node_scalar(v, k->name, o);
        apply_scalar(c, k, &s, o);
        return;
    }
    if (k->type != K_PATHS || v->type != YAML_SEQUENCE_NODE)
        bad(o, line, col, "key '%s': expected %s, got %s", k->name,
            k->type == K_PATHS ? "a path or a list of paths" : "a single value", node_kind(v));
    yaml_node_item_t *it = v->data.sequence.items.start, *end = v->data.sequence.items.top;
    if (end - it > KDA_MAX_PATHS)
        bad(o, line, col, "key '%s': %d entries, at most %d are supported", k->name, (int)(end - it), KDA_MAX_PATHS);
    char *field = (char *)c + k->off;
    int *count = (int *)((char *)c + k->count_off);
    memset(field, 0, k->size * KDA_MAX_PATHS);
    *count = 0;
    for (int i = 0; it < end; it++, i++) {
        yaml_node_t *e = yaml_document_get_node(doc, *it);
        if (e->type != YAML_SCALAR_NODE)
            bad(o, e->start_mark.line, e->start_mark.column, "key '%s': entry %d is %s; expected a path or a weight",
                k->name, i + 1, node_kind(e));
        scalar s = node_scalar(e, k->name, o);
        if (is_null(&s)) bad(o, s.line, s.col, "key '%s': entry %d is empty", k->name, i + 1);
        set_string(o, k, &s, field + (size_t)i * k->size, k->size);
    }
    *count = (int)(end - v->data.sequence.items.start);
}

KDA_NORETURN static void yaml_failure(const yaml_parser_t *p, const origin *o) {
    size_t line = p->problem_mark.line, col = p->problem_mark.column;
    const char *problem = p->problem ? p->problem : "unknown libyaml error";
    if (p->error == YAML_READER_ERROR) {
        // reader errors carry a byte offset, not a line
        int input = !strcmp(problem, "input error"); // fread failed (e.g. the path is a directory)
        if (o->file && input) kda_die("%s: cannot read the config file: %s", o->file, strerror(errno));
        if (o->file)
            kda_die("%s: cannot read the file as UTF-8 YAML: %s (at byte %zu)", o->file, problem, p->problem_offset);
        kda_die("--set %s: the value is not valid UTF-8: %s", o->arg, problem);
    }
    if (p->context)
        bad(o, line, col, "malformed YAML: %s (%s at line %zu, column %zu)", problem, p->context,
            p->context_mark.line + 1, p->context_mark.column + 1);
    bad(o, line, col, "malformed YAML: %s", problem);
}

static void apply_document(kda_config *c, yaml_document_t *doc, const origin *o) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root) return; // an empty file (or only comments): nothing to change
    if (root->type != YAML_MAPPING_NODE)
        bad(o, root->start_mark.line, root->start_mark.column,
            "the file must be a mapping of 'key: value' lines, got %s at the top level", node_kind(root));
    yaml_node_pair_t *first = root->data.mapping.pairs.start, *end = root->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = first; p < end; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key), *vn = yaml_document_get_node(doc, p->value);
        size_t line = kn->start_mark.line, col = kn->start_mark.column;
        if (kn->type != YAML_SCALAR_NODE) bad(o, line, col, "keys must be plain names, got %s", node_kind(kn));
        const char *name = (const char *)kn->data.scalar.value;
        for (yaml_node_pair_t *q = first; q < p; q++) {
            yaml_node_t *prev = yaml_document_get_node(doc, q->key);
            if (prev->type == YAML_SCALAR_NODE && !strcmp((const char *)prev->data.scalar.value, name))
                bad(o, line, col, "duplicate key '%s' (first given at line %zu); keep one of them", name,
                    prev->start_mark.line + 1);
        }
        const key_def *k = find_key(name);
        if (k) {
            apply_node(c, k, doc, vn, o);
            continue;
        }
        const ignored_key *ig = find_ignored(name);
        if (ig) {
            apply_ignored(ig, vn, o);
            continue;
        }
        unknown_key(o, name, line, col);
    }
}

void kda_config_load(kda_config *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) kda_die("cannot open config file '%s': %s", path, strerror(errno));
    origin o = {path, NULL};
    yaml_parser_t parser;
    KDA_CHECK(yaml_parser_initialize(&parser), "libyaml: cannot initialise a parser (out of memory?)");
    yaml_parser_set_input_file(&parser, f);
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) yaml_failure(&parser, &o);
    apply_document(c, &doc, &o);
    yaml_document_delete(&doc);
    // a second document ("---") would be silently dropped by a one-document reader: refuse it
    yaml_document_t extra;
    if (!yaml_parser_load(&parser, &extra)) yaml_failure(&parser, &o);
    yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
    if (extra_root)
        bad(&o, extra_root->start_mark.line, extra_root->start_mark.column,
            "a second YAML document; put every key in one mapping");
    yaml_document_delete(&extra);
    yaml_parser_delete(&parser);
    fclose(f);
}

void kda_config_set(kda_config *c, const char *key_eq_value) {
    origin o = {NULL, key_eq_value};
    const char *eq = strchr(key_eq_value, '=');
    if (!eq || eq == key_eq_value) kda_die("--set %s: expected key=value (e.g. --set lr=3e-4)", key_eq_value);
    char name[128];
    size_t n = (size_t)(eq - key_eq_value);
    if (n >= sizeof name) kda_die("--set %s: the key is too long", key_eq_value);
    memcpy(name, key_eq_value, n);
    name[n] = 0;
    const char *value = eq + 1;
    const key_def *k = find_key(name);
    const ignored_key *ig = k ? NULL : find_ignored(name);
    if (!k && !ig) unknown_key(&o, name, 0, 0);
    // Plain text is taken as it is (so --set sample_prompt=ROMEO: works); quoted values and
    // [a, b] lists go through libyaml.
    if (value[0] != '"' && value[0] != '\'' && value[0] != '[') {
        scalar s = {value, 0, 0, 0};
        if (k) {
            apply_scalar(c, k, &s, &o);
        } else {
            yaml_node_t fake = {0};
            fake.type = YAML_SCALAR_NODE;
            fake.data.scalar.value = (yaml_char_t *)value;
            fake.data.scalar.length = strlen(value);
            fake.data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
            apply_ignored(ig, &fake, &o);
        }
        return;
    }
    yaml_parser_t parser;
    KDA_CHECK(yaml_parser_initialize(&parser), "libyaml: cannot initialise a parser (out of memory?)");
    yaml_parser_set_input_string(&parser, (const unsigned char *)value, strlen(value));
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) yaml_failure(&parser, &o);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    KDA_CHECK(root, "libyaml returned no node for a non-empty --set value");
    if (k)
        apply_node(c, k, &doc, root, &o);
    else
        apply_ignored(ig, root, &o);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
}
