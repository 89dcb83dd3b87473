// config_finalize.c — kda_config_defaults and kda_config_finalize (config.h): the built-in
// configuration, then the derived sizes and every check of a configuration's values.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"

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

const char *const kda_recompute_modules[KDA_N_RECOMPUTE_MODULES + 1] = {
    "layernorm", "conv", "swiglu", "gated_norm", "core_attn", "in_proj", "kda_gates", "o_proj", "core_prep", NULL};

static int one_of(const char *v, const char *const *allowed) {
    for (; *allowed; allowed++)
        if (!strcmp(v, *allowed)) return 1;
    return 0;
}

static void check_choice(const char *key, const char *v, const char *const *allowed, const char *list) {
    if (!one_of(v, allowed)) kda_die("config: %s '%s' is not one of %s", key, v, list);
}

#define NEED_POS(field)                                                                                                \
    do {                                                                                                               \
        if (!(c->field > 0)) kda_die("config: " #field " must be positive, got %g", (double)c->field);                 \
    } while (0)
#define NEED_NONNEG(field)                                                                                             \
    do {                                                                                                               \
        if (!(c->field >= 0)) kda_die("config: " #field " must be >= 0, got %g", (double)c->field);                    \
    } while (0)

// Upper bounds on every count and size: a value past them cannot be meant and would hang, crash or
// overflow somewhere deep (num_threads 100000 crashed inside libgomp). Message: key, value, range.
#define NEED_RANGE(field, lo, hi, why)                                                                                 \
    do {                                                                                                               \
        if (!(c->field >= (lo) && c->field <= (hi)))                                                                   \
            kda_die("config: " #field " %.17g is outside the allowed range [%ld, %ld]%s", (double)c->field,            \
                    (long)(lo), (long)(hi), why);                                                                      \
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

// Every number in its range.
static void check_ranges(const kda_config *c) {
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
    if (!(c->adam_beta1 >= 0 && c->adam_beta1 < 1))
        kda_die("config: adam_beta1 must be in [0, 1), got %g", c->adam_beta1);
    if (!(c->adam_beta2 >= 0 && c->adam_beta2 < 1))
        kda_die("config: adam_beta2 must be in [0, 1), got %g", c->adam_beta2);
}

// The model structure this implementation supports; derives head_v_dim, num_v_heads (null),
// key_dim, value_dim and intermediate_size (0).
static void finalize_model(kda_config *c) {
    double vd = c->head_dim * c->expand_v;
    if (fabs(vd - nearbyint(vd)) > 1e-9 || vd < 1)
        kda_die("config: head_dim %d x expand_v %g = %g is not a whole number; the value head size must be an integer",
                c->head_dim, c->expand_v, vd);
    c->head_v_dim = (int)nearbyint(vd);
    if (c->head_dim > 128)
        kda_die("config: head_dim %d > 128: the KDA kernels support key heads up to 128", c->head_dim);
    if (c->head_v_dim > 128)
        kda_die(
            "config: head_v_dim = head_dim %d x expand_v %g = %d > 128: the KDA kernels support value heads up to 128",
            c->head_dim, c->expand_v, c->head_v_dim);
    if (c->num_v_heads < 0) kda_die("config: num_v_heads %d must be positive or null (= num_heads)", c->num_v_heads);
    if (c->num_v_heads == 0) c->num_v_heads = c->num_heads;
    if (c->num_v_heads != c->num_heads)
        kda_die(
            "config: num_v_heads %d != num_heads %d: grouped value attention (GVA) is not supported; set num_v_heads "
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
}

// The batch and the lr schedule; derives lr_decay_iters (0).
static void finalize_schedule(kda_config *c) {
    if (c->global_batch_size % c->micro_batch_size)
        kda_die("config: global_batch_size %d is not a multiple of micro_batch_size %d", c->global_batch_size,
                c->micro_batch_size);
    int decay_is_train = c->lr_decay_iters == 0;
    if (decay_is_train) c->lr_decay_iters = c->train_iters;
    if (c->min_lr > c->lr) kda_die("config: min_lr %g is larger than lr %g", c->min_lr, c->lr);
    if (c->lr_warmup_iters > c->lr_decay_iters)
        kda_die("config: lr_warmup_iters %ld is larger than lr_decay_iters %ld%s; lower lr_warmup_iters", c->lr_warmup_iters,
                c->lr_decay_iters, decay_is_train ? " (0: train_iters)" : "");
    static const char *const styles[] = {"cosine", "linear", "constant", NULL};
    check_choice("lr_decay_style", c->lr_decay_style, styles, "cosine, linear, constant");
}

// Data and runtime choices.
static void check_data_runtime(const kda_config *c) {
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
    char modules[256] = "";
    for (int i = 0; i < KDA_N_RECOMPUTE_MODULES; i++)
        snprintf(modules + strlen(modules), sizeof modules - strlen(modules), "%s%s", i ? ", " : "",
                 kda_recompute_modules[i]);
    for (int i = 0; i < c->n_recompute_modules; i++)
        check_choice("recompute_modules entry", c->recompute_modules[i], kda_recompute_modules, modules);
    if (c->n_recompute_modules > 0 && strcmp(c->recompute_granularity, "selective"))
        kda_die("config: recompute_modules is set but recompute_granularity is '%s'; the modules apply only to "
                "recompute_granularity selective",
                c->recompute_granularity);
}

// The checks run in this order, so the first problem reported does not depend on the split.
void kda_config_finalize(kda_config *c) {
    check_ranges(c);
    finalize_model(c);
    finalize_schedule(c);
    check_data_runtime(c);
}
