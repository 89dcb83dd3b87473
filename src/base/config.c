// config.c — see config.h. The YAML file is read with libyaml's document API (which gives
// every node its line and column); one key table drives loading, --set overrides and writing.
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

// ---------------------------------------------------------------------------------------------
// The key table: every field of kda_config, in the order kda_config_write_yaml writes them.

typedef enum { K_INT, K_LONG, K_DOUBLE, K_BOOL, K_STR, K_PATHS } key_type;

typedef struct {
    const char *name;
    key_type type;
    size_t off;       // offset of the field
    size_t size;      // K_STR: buffer size; K_PATHS: size of one path buffer
    size_t count_off; // K_PATHS: offset of the count field
    int nullable;     // K_INT: YAML null is accepted and stored as null_value
    int null_value;
    const char *section; // comment written before the first key of each section
} key_def;

#define OFF(f) offsetof(kda_config, f)
#define KI(f, sec) {#f, K_INT, OFF(f), 0, 0, 0, 0, sec}
#define KN(f, nullv, sec) {#f, K_INT, OFF(f), 0, 0, 1, nullv, sec}
#define KL(f, sec) {#f, K_LONG, OFF(f), 0, 0, 0, 0, sec}
#define KD(f, sec) {#f, K_DOUBLE, OFF(f), 0, 0, 0, 0, sec}
#define KB(f, sec) {#f, K_BOOL, OFF(f), 0, 0, 0, 0, sec}
#define KS(f, sec) {#f, K_STR, OFF(f), sizeof(((kda_config *)0)->f), 0, 0, 0, sec}
#define KP(f, n, sec) {#f, K_PATHS, OFF(f), sizeof(((kda_config *)0)->f[0]), OFF(n), 0, 0, sec}

static const char SEC_MODEL[] = "model (FLA KDAConfig field names; kda-model.md §1)";
static const char SEC_DERIVED[] = "derived from the keys above (informational: kda_config_finalize recomputes them)";
static const char SEC_TRAIN[] = "training (Megatron / Primus names; kda-model.md §6)";
static const char SEC_CKPT[] = "checkpoints";
static const char SEC_DATA[] = "data";
static const char SEC_KDA[] = "kda-specific";

static const key_def KEYS[] = {
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
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

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
    if (n >= cap) bad(o, s->line, s->col, "key '%s': value is %zu characters long, at most %zu fit", k->name, n, cap - 1);
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
            bad(o, s->line, s->col, "key '%s': expected an integer%s, got '%s'%s", k->name, k->nullable ? " or null" : "",
                s->text, QUOTED_HINT(s));
        long long lo = k->type == K_INT ? -2147483647LL - 1 : -9223372036854775807LL - 1;
        long long hi = k->type == K_INT ? 2147483647LL : 9223372036854775807LL;
        if (v < lo || v > hi) bad(o, s->line, s->col, "key '%s': %s is out of range", k->name, s->text);
        if (k->type == K_INT) *(int *)field = (int)v;
        else *(long *)field = (long)v;
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
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(KEYS[i].name, name)) return &KEYS[i];
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
    for (size_t i = 0; i < N_KEYS + N_IGNORED; i++) {
        const char *cand = i < N_KEYS ? KEYS[i].name : IGNORED[i - N_KEYS].name;
        int d = edit_distance(name, cand);
        if (d < best_d) best_d = d, best = cand;
    }
    if (best) bad(o, line, col, "unknown key '%s' (did you mean '%s'?)", name, best);
    bad(o, line, col, "unknown key '%s' (the keys are the fields of src/base/config.h; see configs/*.yaml)", name);
}

// ---------------------------------------------------------------------------------------------
// Applying libyaml nodes.

static scalar node_scalar(const yaml_node_t *n, const char *key, const origin *o) {
    scalar s = {(const char *)n->data.scalar.value, n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE,
                n->start_mark.line, n->start_mark.column};
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
            ig->rule == IG_NULL ? "null" : ig->rule == IG_FALSE ? "false" : ig->must_be, node_kind(v), ig->why);
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
        if (o->file) kda_die("%s: cannot read the file as UTF-8 YAML: %s (at byte %zu)", o->file, problem, p->problem_offset);
        kda_die("--set %s: the value is not valid UTF-8: %s", o->arg, problem);
    }
    if (p->context)
        bad(o, line, col, "malformed YAML: %s (%s at line %zu, column %zu)", problem, p->context, p->context_mark.line + 1,
            p->context_mark.column + 1);
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
    if (k) apply_node(c, k, &doc, root, &o);
    else apply_ignored(ig, root, &o);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
}

// ---------------------------------------------------------------------------------------------
// Defaults: the tiny demo model (configs/tiny.yaml holds the same values; test_config checks).

static void copy_str(char *dst, size_t cap, const char *src) {
    memset(dst, 0, cap);
    size_t n = strlen(src);
    KDA_CHECK(n < cap, "default string '%s' does not fit", src);
    memcpy(dst, src, n);
}
#define SET_STR(field, value) copy_str(c->field, sizeof c->field, value)

void kda_config_defaults(kda_config *c) {
    memset(c, 0, sizeof *c);
    // model: the demo (configs/tiny.yaml, `make demo`): the Llama 3 vocabulary on token files that
    // `kda tokenize` makes from data/tinyshakespeare.txt; hidden 64 because the 128,256-way output
    // layer dominates the cost: about 2 minutes of training on 2 CPU cores
    c->hidden_size = 64;
    c->num_hidden_layers = 2;
    c->num_heads = 4;
    c->num_v_heads = 0; // null => num_heads
    c->head_dim = 16;
    c->expand_v = 2.0;
    c->use_short_conv = 1;
    c->conv_size = 4;
    c->intermediate_size = 192;
    c->hidden_ratio = 4.0;
    c->vocab_size = 128256; // Llama 3
    c->norm_eps = 1e-6;
    c->tie_word_embeddings = 1;
    c->initializer_range = 0.02;
    c->max_position_embeddings = 2048;
    c->allow_neg_eigval = 0;
    c->safe_gate = 0;
    c->bos_token_id = c->eos_token_id = c->pad_token_id = -1;
    SET_STR(attn_mode, "chunk");
    // training: the reference recipe's optimizer settings (kda-model.md §6.1), a short schedule
    // at a high learning rate
    c->train_iters = 150;
    c->micro_batch_size = 4;
    c->global_batch_size = 4;
    c->seq_length = 64;
    c->lr = 1e-2;
    c->min_lr = 1e-3;
    c->lr_warmup_iters = 10;
    c->lr_decay_iters = 0; // => train_iters
    SET_STR(lr_decay_style, "cosine");
    c->adam_beta1 = 0.9;
    c->adam_beta2 = 0.95;
    c->adam_eps = 1e-8;
    c->weight_decay = 0.01;
    c->clip_grad = 1.0;
    c->seed = 42;
    c->bf16 = 0;
    c->log_interval = 10;
    c->eval_interval = 100;
    c->eval_iters = 10;
    SET_STR(save, "");
    c->save_interval = 100;
    SET_STR(load, "");
    c->keep_last_n = 3;
    SET_STR(train_data_path[0], "build/data/tinyshakespeare-llama3"); // `make demo` makes it
    c->n_train_data_path = 1;
    c->n_valid_data_path = 0;
    SET_STR(split, "969,30,1");
    SET_STR(data_format, "megatron");
    SET_STR(tokenizer_type, "HuggingFaceTokenizer");
    SET_STR(tokenizer_model, "data/tokenizer/llama3/tokenizer.json");
    SET_STR(device, "auto");
    SET_STR(kda_algo, "chunk");
    SET_STR(recompute_granularity, "");
    c->kda_chunk_size = 64;
    SET_STR(metrics_file, "");
    c->num_threads = 0;
    c->sample_tokens = 100;
    SET_STR(sample_prompt, "ROMEO:");
}

// ---------------------------------------------------------------------------------------------
// Finalize: derive and validate. Messages name the keys and say what to change.

static int one_of(const char *v, const char *const *allowed) {
    for (; *allowed; allowed++)
        if (!strcmp(v, *allowed)) return 1;
    return 0;
}

static void check_choice(const char *key, const char *v, const char *const *allowed, const char *list) {
    if (!one_of(v, allowed)) kda_die("config: %s '%s' is not one of %s", key, v, list);
}

#define NEED_POS(field)                                                                                  \
    do {                                                                                                 \
        if (!(c->field > 0)) kda_die("config: " #field " must be positive, got %g", (double)c->field); \
    } while (0)
#define NEED_NONNEG(field)                                                                                   \
    do {                                                                                                     \
        if (!(c->field >= 0)) kda_die("config: " #field " must be >= 0, got %g", (double)c->field); \
    } while (0)

// Upper bounds on every count and size: a value past them cannot be meant and would hang, crash or
// overflow somewhere deep (num_threads 100000 crashed inside libgomp). Message: key, value, range.
#define NEED_RANGE(field, lo, hi, why)                                                                   \
    do {                                                                                                 \
        if (!(c->field >= (lo) && c->field <= (hi)))                                                     \
            kda_die("config: " #field " %.17g is outside the allowed range [%ld, %ld]%s", (double)c->field, \
                    (long)(lo), (long)(hi), why);                                                        \
    } while (0)

static void check_token_id(const char *key, int id, int vocab) {
    if (id < -1 || id >= vocab)
        kda_die("config: %s %d is outside the vocabulary [0, vocab_size %d) (use null for none)", key, id, vocab);
}

// Megatron split: up to three non-negative weights separated by ',' or '/', positive sum.
static void check_split(const char *s) {
    double sum = 0;
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        double w = strtod(p, &end);
        if (end == p || !(w >= 0) || !isfinite(w) || ++n > 3) goto fail;
        sum += w;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',' || *p == '/') {
            p++;
            if (!*p) goto fail;
        } else if (*p) {
            goto fail;
        }
    }
    if (n >= 1 && sum > 0) return;
fail:
    kda_die("config: split '%s' must be up to three non-negative weights like \"969,30,1\" (train,valid,test)", s);
}

void kda_config_finalize(kda_config *c) {
    // positive sizes
    NEED_POS(head_dim);
    NEED_POS(expand_v);
    NEED_POS(hidden_ratio);
    NEED_POS(norm_eps);
    NEED_NONNEG(initializer_range);
    NEED_POS(max_position_embeddings);
    NEED_POS(log_interval);
    NEED_NONNEG(eval_interval);
    NEED_NONNEG(eval_iters);
    NEED_NONNEG(save_interval);
    NEED_NONNEG(keep_last_n);
    NEED_NONNEG(seed);
    NEED_NONNEG(lr);
    NEED_NONNEG(min_lr);
    NEED_NONNEG(lr_warmup_iters);
    NEED_NONNEG(lr_decay_iters);
    NEED_NONNEG(weight_decay);
    NEED_NONNEG(clip_grad);
    NEED_POS(adam_eps);
    NEED_RANGE(hidden_size, 1, 1L << 16, "");
    NEED_RANGE(num_hidden_layers, 1, 4096, "");
    NEED_RANGE(num_heads, 1, 4096, "");
    NEED_RANGE(conv_size, 1, 64, "");
    NEED_RANGE(intermediate_size, 0, 1L << 20, " (0 = derived from hidden_ratio)");
    NEED_RANGE(vocab_size, 1, 1L << 24, "");
    NEED_RANGE(micro_batch_size, 1, 1L << 16, "");
    NEED_RANGE(global_batch_size, 1, 1L << 24, "");
    NEED_RANGE(seq_length, 1, 1L << 24, "");
    NEED_RANGE(kda_chunk_size, 1, 1L << 16, "");
    NEED_RANGE(num_threads, 0, 1024, " (0 = all cores)");
    NEED_RANGE(sample_tokens, 0, 1L << 20, "");
    NEED_RANGE(train_iters, 1, 1L << 40, "");
    if (!(c->adam_beta1 >= 0 && c->adam_beta1 < 1)) kda_die("config: adam_beta1 must be in [0, 1), got %g", c->adam_beta1);
    if (!(c->adam_beta2 >= 0 && c->adam_beta2 < 1)) kda_die("config: adam_beta2 must be in [0, 1), got %g", c->adam_beta2);

    // model structure this implementation supports
    double vd = c->head_dim * c->expand_v;
    if (fabs(vd - nearbyint(vd)) > 1e-9 || vd < 1)
        kda_die("config: head_dim %d x expand_v %g = %g is not a whole number; the value head size must be an integer",
                c->head_dim, c->expand_v, vd);
    c->head_v_dim = (int)nearbyint(vd);
    if (c->head_dim > 128) kda_die("config: head_dim %d > 128: the KDA kernels support key heads up to 128", c->head_dim);
    if (c->head_v_dim > 128)
        kda_die("config: head_v_dim = head_dim %d x expand_v %g = %d > 128: the KDA kernels support value heads up to 128",
                c->head_dim, c->expand_v, c->head_v_dim);
    if (c->num_v_heads < 0) kda_die("config: num_v_heads %d must be positive or null (= num_heads)", c->num_v_heads);
    if (c->num_v_heads == 0) c->num_v_heads = c->num_heads;
    if (c->num_v_heads != c->num_heads)
        kda_die("config: num_v_heads %d != num_heads %d: grouped value attention (GVA) is not supported; set num_v_heads "
                "to null",
                c->num_v_heads, c->num_heads);
    c->key_dim = c->num_heads * c->head_dim;
    c->value_dim = c->num_v_heads * c->head_v_dim;
    if (c->intermediate_size == 0) {
        // FLA's fallback: 256 * ceil(int(hidden_size * hidden_ratio * 2 / 3) / 256)
        long f = (long)(c->hidden_size * c->hidden_ratio * 2 / 3);
        c->intermediate_size = (int)(256 * ((f + 255) / 256));
    }
    if (!c->use_short_conv) kda_die("config: use_short_conv must be true: the model always has the short convolution");
    if (!c->tie_word_embeddings)
        kda_die("config: tie_word_embeddings must be true: untied input/output embeddings are not supported yet");
    if (c->allow_neg_eigval) kda_die("config: allow_neg_eigval must be false: beta in (0, 2) is not implemented");
    if (c->safe_gate) kda_die("config: safe_gate must be false: the safe-gate variant is not implemented");
    static const char *const attn_modes[] = {"chunk", "fused_recurrent", NULL};
    check_choice("attn_mode", c->attn_mode, attn_modes, "chunk, fused_recurrent");
    check_token_id("bos_token_id", c->bos_token_id, c->vocab_size);
    check_token_id("eos_token_id", c->eos_token_id, c->vocab_size);
    check_token_id("pad_token_id", c->pad_token_id, c->vocab_size);

    // schedule
    if (c->global_batch_size % c->micro_batch_size)
        kda_die("config: global_batch_size %d is not a multiple of micro_batch_size %d", c->global_batch_size,
                c->micro_batch_size);
    if (c->lr_decay_iters == 0) c->lr_decay_iters = c->train_iters;
    if (c->min_lr > c->lr) kda_die("config: min_lr %g is larger than lr %g", c->min_lr, c->lr);
    if (c->lr_warmup_iters > c->lr_decay_iters)
        kda_die("config: lr_warmup_iters %ld is larger than lr_decay_iters %ld", c->lr_warmup_iters, c->lr_decay_iters);
    static const char *const styles[] = {"cosine", "linear", "constant", NULL};
    check_choice("lr_decay_style", c->lr_decay_style, styles, "cosine, linear, constant");

    // data and runtime
    if (c->n_train_data_path < 1) kda_die("config: train_data_path is empty; name at least one data file");
    static const char *const formats[] = {"text", "megatron", NULL};
    check_choice("data_format", c->data_format, formats, "text, megatron");
    check_split(c->split);
    if (!strcmp(c->tokenizer_type, "byte") && c->vocab_size < 256)
        kda_die("config: tokenizer_type byte needs vocab_size >= 256, got %d", c->vocab_size);
    static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
    check_choice("device", c->device, devices, "auto, cpu, cuda");
    static const char *const algos[] = {"chunk", "recurrent", NULL};
    check_choice("kda_algo", c->kda_algo, algos, "chunk, recurrent");
    static const char *const recompute[] = {"", "selective", "full", NULL};
    check_choice("recompute_granularity", c->recompute_granularity, recompute, "null, selective, full");
    static const char *const modules[] = {"layernorm", "conv", "swiglu", "gated_norm", "core_attn", NULL};
    for (int i = 0; i < c->n_recompute_modules; i++)
        check_choice("recompute_modules entry", c->recompute_modules[i], modules,
                     "layernorm, conv, swiglu, gated_norm, core_attn");
    if (c->n_recompute_modules > 0 && strcmp(c->recompute_granularity, "selective"))
        kda_die("config: recompute_modules is set but recompute_granularity is '%s'; the modules apply only to "
                "recompute_granularity selective",
                c->recompute_granularity);
}

// ---------------------------------------------------------------------------------------------
// Writing: every key, strings double-quoted, numbers in the shortest form that reads back equal.

static void write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void write_double(FILE *f, double v) {
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    // "2" -> "2.0", "1e-06" -> "1.0e-06": reads as a float in YAML 1.1 readers (PyYAML) too
    char *e = strchr(buf, 'e');
    if (!strchr(buf, '.')) {
        size_t at = e ? (size_t)(e - buf) : strlen(buf);
        memmove(buf + at + 2, buf + at, strlen(buf + at) + 1);
        memcpy(buf + at, ".0", 2);
    }
    fputs(buf, f);
}

void kda_config_write_yaml(const kda_config *c, FILE *f) {
    fputs("# kda configuration (kda_config_write_yaml); `kda train FILE` reads it back unchanged\n", f);
    const char *section = NULL;
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_def *k = &KEYS[i];
        const char *field = (const char *)c + k->off;
        if (k->section != section) {
            fprintf(f, "%s# ---- %s ----\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf(f, "%s: ", k->name);
        switch (k->type) {
        case K_INT: {
            int v = *(const int *)field;
            if (k->nullable && v == k->null_value) fputs("null", f);
            else fprintf(f, "%d", v);
            break;
        }
        case K_LONG: fprintf(f, "%ld", *(const long *)field); break;
        case K_DOUBLE: write_double(f, *(const double *)field); break;
        case K_BOOL: fputs(*(const int *)field ? "true" : "false", f); break;
        case K_STR: write_string(f, field); break;
        case K_PATHS: {
            int n = *(const int *)((const char *)c + k->count_off);
            fputc('[', f);
            for (int j = 0; j < n; j++) {
                if (j) fputs(", ", f);
                write_string(f, field + (size_t)j * k->size);
            }
            fputc(']', f);
            break;
        }
        }
        fputc('\n', f);
    }
    if (ferror(f)) kda_die("writing the configuration as YAML failed: %s", strerror(errno));
}
