// data.c — see data.h. Two sources behind one cursor (the count of consumed samples):
//   "megatron": gpt_dataset.h over the indexed datasets named by train_data_path, either
//     [prefix, ...] or [weight1, prefix1, weight2, prefix2, ...] (Megatron's --data-path);
//     requested sizes as Megatron's pretrain_gpt computes them: train_iters * global_batch_size
//     for train, (train_iters / eval_interval + 1) * eval_iters * global_batch_size for valid,
//     eval_iters * global_batch_size for test. valid_data_path, when set, gives the valid split
//     whole files instead of a share of train_data_path (Megatron's --valid-data-path).
//   "text": one text file tokenized at open (one id per byte for tokenizer_type "byte", else
//     the tokenizer of tokenizer_model), cut by the split string into train / valid / test
//     ranges of the token stream; sample i is the seq_length+1 tokens at an offset drawn by a
//     counter-based hash of (seed, split, i), so any sample is reached in O(1).
// Past the end of the samples built (Megatron would stop there) the order repeats: sample i is
// sample i mod num_samples. As in Megatron, the megatron order depends on the requested sample
// count: resuming with another train_iters or global_batch_size gives another order.
#include "data/data.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "text/tokenizer.h"

#define ID_CHECK_AT_OPEN_BYTES (256ull << 20) // smaller files have every id checked at open

struct kda_data {
    int seq_length;
    uint64_t pos, n_samples;
    // megatron
    kda_indexed *ds[KDA_MAX_PATHS];
    int n_ds;
    kda_gpt_source *src;
    // text
    char *path;
    int32_t *tokens; // the split's range of the stream
    uint64_t n_tokens;
    uint64_t key; // hash of seed and split
};

static const char *split_name[3] = {"train", "valid", "test"};

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// ---- text ----

static kda_tokenizer *load_tokenizer(const char *path) {
    size_t n = strlen(path);
    if (!n) kda_die("tokenizer_type HuggingFaceTokenizer needs tokenizer_model (a tokenizer.json path)");
    return kda_tok_load_path(path);
}

static void open_text(kda_data *d, const kda_config *c, kda_split split) {
    int own_valid = split == KDA_SPLIT_VALID && c->n_valid_data_path > 0;
    const char *path = own_valid ? c->valid_data_path[0] : c->train_data_path[0];
    if (!own_valid && c->n_train_data_path != 1)
        kda_die("data_format text reads one file; train_data_path names %d (use data_format megatron for several)",
                c->n_train_data_path);
    d->path = kda_strdup(path);
    size_t n_bytes = 0;
    char *text = kda_read_file(path, &n_bytes);
    if (!text) kda_die("cannot open training text '%s': %s (train_data_path names it)", path, strerror(errno));
    int32_t *ids;
    size_t n;
    if (!strcmp(c->tokenizer_type, "byte")) {
        if (c->vocab_size < 256)
            kda_die("tokenizer_type byte gives ids 0..255 but vocab_size is %d; set vocab_size: 256", c->vocab_size);
        ids = kda_malloc(sizeof(int32_t) * (n_bytes ? n_bytes : 1));
        for (size_t i = 0; i < n_bytes; i++) ids[i] = (unsigned char)text[i];
        n = n_bytes;
    } else if (!strcmp(c->tokenizer_type, "HuggingFaceTokenizer")) {
        kda_tokenizer *tok = load_tokenizer(c->tokenizer_model);
        kda_tok_ctx *ctx = kda_tok_ctx_new(tok);
        kda_tok_ids out = {0};
        kda_tok_encode(ctx, text, n_bytes, 0, &out);
        kda_tok_ctx_free(ctx);
        kda_tok_free(tok);
        ids = out.v;
        n = out.n;
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= c->vocab_size)
                kda_die("'%s': token id %d (position %zu) from tokenizer '%s' is outside vocab_size %d; set vocab_size "
                        "to the tokenizer's size",
                        path, ids[i], i, c->tokenizer_model, c->vocab_size);
    } else {
        kda_die("tokenizer_type '%s' is not known; use byte or HuggingFaceTokenizer", c->tokenizer_type);
    }
    free(text);
    uint64_t b = 0, e = n;
    if (!own_valid) {
        double fr[3];
        kda_split_parse(c->split, fr);
        if (!kda_split_range(fr, (int)split, n, &b, &e))
            kda_die("split '%s' gives the %s split none of '%s'; give it a non-zero share", c->split, split_name[split],
                    path);
    }
    if (e - b < (uint64_t)c->seq_length + 1)
        kda_die("the %s split of '%s' has %" PRIu64 " tokens, fewer than one sample of seq_length+1 = %d; use a longer "
                "text, a smaller seq_length or another split",
                split_name[split], path, e - b, c->seq_length + 1);
    d->n_tokens = e - b;
    d->tokens = kda_malloc(sizeof(int32_t) * d->n_tokens);
    memcpy(d->tokens, ids + b, sizeof(int32_t) * d->n_tokens);
    free(ids);
    d->n_samples = (d->n_tokens - 1) / (uint64_t)c->seq_length;
    d->key = mix64(mix64((uint64_t)c->seed) ^ (0x9e3779b97f4a7c15ull * (uint64_t)(split + 1)));
}

static void text_sample(const kda_data *d, uint64_t i, int32_t *out) {
    kda_rng r;
    kda_rng_seed(&r, d->key ^ mix64(i + 0x632be59bd9b4e019ull));
    uint64_t start = kda_rng_below(&r, d->n_tokens - (uint64_t)d->seq_length);
    memcpy(out, d->tokens + start, sizeof(int32_t) * ((size_t)d->seq_length + 1));
}

// ---- megatron ----

// A blend weight: a whole number string that strtod accepts entirely.
static int parse_weight(const char *s, double *w) {
    char *end = NULL;
    errno = 0;
    *w = strtod(s, &end);
    return end != s && *end == 0 && errno == 0;
}

static void open_megatron(kda_data *d, const kda_config *c, kda_split split) {
    int own_valid = split == KDA_SPLIT_VALID && c->n_valid_data_path > 0;
    int n_paths = own_valid ? c->n_valid_data_path : c->n_train_data_path;
    const char(*paths)[KDA_PATH_MAX] = own_valid ? c->valid_data_path : c->train_data_path;
    if (n_paths < 1) kda_die("data_format megatron needs train_data_path: [prefix] or [weight1, prefix1, ...]");
    // Megatron's get_blend_from_list: an even-length list of (number, prefix) pairs is weighted
    double weights[KDA_MAX_PATHS];
    const char *prefixes[KDA_MAX_PATHS];
    int n = 0, weighted = n_paths % 2 == 0;
    for (int i = 0; weighted && i < n_paths; i += 2) weighted = parse_weight(paths[i], &weights[i / 2]);
    for (int i = weighted; i < n_paths; i += 1 + weighted) prefixes[n++] = paths[i];
    if (c->seed < 0 || c->seed > (long)UINT32_MAX)
        kda_die("seed %ld: Megatron's data order needs a seed in [0, 2^32-1]", c->seed);
    for (int i = 0; i < n; i++) {
        d->ds[i] = kda_indexed_open(prefixes[i]);
        uint64_t bytes =
            kda_indexed_num_tokens(d->ds[i]) * (uint64_t)kda_indexed_dtype_size(kda_indexed_dtype(d->ds[i]));
        if (bytes <= ID_CHECK_AT_OPEN_BYTES) kda_indexed_check_ids(d->ds[i], c->vocab_size);
        kda_indexed_set_vocab(d->ds[i], c->vocab_size);
    }
    d->n_ds = n;
    uint64_t gbs = (uint64_t)c->global_batch_size, size;
    if (split == KDA_SPLIT_TRAIN)
        size = (uint64_t)c->train_iters * gbs;
    else if (split == KDA_SPLIT_VALID)
        size = (uint64_t)((c->eval_interval > 0 ? c->train_iters / c->eval_interval : 0) + 1) *
            (uint64_t)c->eval_iters * gbs;
    else
        size = (uint64_t)c->eval_iters * gbs;
    if (size == 0 && (weighted || n > 1))
        kda_die("the %s split of a blend needs a sample count; set eval_iters > 0 (and eval_interval)",
                split_name[split]);
    double fr[3];
    if (!own_valid) kda_split_parse(c->split, fr);
    d->src = kda_gpt_source_new(d->ds, weighted ? weights : NULL, n, own_valid ? NULL : fr, (int)split, size,
                                c->seq_length, (uint32_t)c->seed);
    d->n_samples = kda_gpt_source_len(d->src);
    if (d->n_samples == 0) kda_die("the %s split of %s holds no sample", split_name[split], prefixes[0]);
}

// ---- interface ----

kda_data *kda_data_open(const kda_config *c, kda_split split) {
    KDA_CHECK(split >= KDA_SPLIT_TRAIN && split <= KDA_SPLIT_TEST, "split %d", (int)split);
    if (c->seq_length < 2) kda_die("seq_length %d: samples need seq_length >= 2", c->seq_length);
    kda_data *d = kda_calloc(1, sizeof *d);
    d->seq_length = c->seq_length;
    if (!strcmp(c->data_format, "text")) {
        if (c->n_train_data_path < 1) kda_die("data_format text needs train_data_path: [a text file]");
        open_text(d, c, split);
    } else if (!strcmp(c->data_format, "megatron")) {
        open_megatron(d, c, split);
    } else {
        kda_die("data_format '%s' is not known; use text or megatron", c->data_format);
    }
    return d;
}

void kda_data_next(kda_data *d, int32_t *out, int n) {
    size_t row = (size_t)d->seq_length + 1;
    for (int j = 0; j < n; j++, d->pos++) {
        uint64_t i = d->pos % d->n_samples;
        if (d->src)
            kda_gpt_source_get(d->src, i, out + (size_t)j * row);
        else
            text_sample(d, i, out + (size_t)j * row);
    }
}

uint64_t kda_data_consumed(const kda_data *d) { return d->pos; }
void kda_data_seek(kda_data *d, uint64_t consumed_samples) { d->pos = consumed_samples; }
uint64_t kda_data_num_samples(const kda_data *d) { return d->n_samples; }

void kda_data_close(kda_data *d) {
    if (!d) return;
    kda_gpt_source_free(d->src);
    for (int i = 0; i < d->n_ds; i++) kda_indexed_close(d->ds[i]);
    free(d->tokens);
    free(d->path);
    free(d);
}
