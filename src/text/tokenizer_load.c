// tokenizer_load.c — reading a Hugging Face tokenizer.json (jansson) or a tiktoken .model file
// into a kda_tokenizer (see tokenizer.h for the subset accepted and tokenizer_impl.h for the
// tables built).
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "text/tokenizer_impl.h"

// GPT-2's split regex, used by a ByteLevel pre-tokenizer with use_regex true.
#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static kda_tokenizer *tok_new(const char *path) {
    kda_tokenizer *t = kda_calloc(1, sizeof *t);
    t->path = kda_strdup(path);
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    return t;
}

// Pieces arrive in any id order; they are laid out by id once all are known.
typedef struct {
    kda_tok_bytes data;
    uint64_t *start; // [n_vocab] offset in data
    uint32_t *len;
} piece_builder;

static void pieces_init(piece_builder *pb, kda_tokenizer *t, int32_t n_vocab) {
    t->n_vocab = n_vocab;
    t->kind = kda_calloc((size_t)n_vocab, 1);
    pb->data = (kda_tok_bytes){0};
    pb->start = kda_calloc((size_t)n_vocab, sizeof(uint64_t));
    pb->len = kda_calloc((size_t)n_vocab, sizeof(uint32_t));
}

static void pieces_set(piece_builder *pb, int32_t id, const char *p, size_t n) {
    KDA_CHECK(n < UINT32_MAX, "token %d is %zu bytes long", id, n);
    pb->start[id] = pb->data.n;
    pb->len[id] = (uint32_t)n;
    kda_tok_bytes_append(&pb->data, p, n);
}

static void pieces_finish(piece_builder *pb, kda_tokenizer *t) {
    t->piece_off = kda_malloc(sizeof(uint64_t) * ((size_t)t->n_vocab + 1));
    uint64_t total = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->piece_off[id] = total;
        total += pb->len[id];
    }
    t->piece_off[t->n_vocab] = total;
    t->piece_data = kda_malloc(total ? total : 1);
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (pb->len[id]) memcpy(t->piece_data + t->piece_off[id], pb->data.v + pb->start[id], pb->len[id]);
    kda_tok_bytes_free(&pb->data);
    free(pb->start);
    free(pb->len);
}

// An HF token string -> the bytes HF's ByteLevel decoder gives for it: each character through
// the byte-level map, or, if one character is outside the map, the string's own UTF-8.
// out has room for n bytes. Returns the byte count; *raw tells which case it was.
static size_t hf_string_bytes(const char *s, size_t n, char *out, int *raw) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad, len = tok_utf8_next((const uint8_t *)s + i, n - i, &cp, &bad);
        int b = len ? tok_cp_to_byte(cp) : -1;
        if (b < 0) {
            memcpy(out, s, n);
            *raw = 1;
            return n;
        }
        out[k++] = (char)b;
        i += (size_t)len;
    }
    *raw = 0;
    return k;
}

// ---- tokenizer.json ----

static char *read_file(const char *path, size_t *len) {
    char *buf = kda_read_file(path, len);
    if (!buf)
        kda_die("cannot open tokenizer %s: %s (pass a tokenizer.json or tiktoken .model path)", path, strerror(errno));
    return buf;
}

static const char *hf_type(const json_t *o) { return json_string_value(json_object_get(o, "type")); }

static int hf_true(const json_t *o, const char *key) { return json_is_true(json_object_get(o, key)); }

static int32_t hf_id(const json_t *v, const char *path, const char *what) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
        kda_die("tokenizer %s: %s has an id that is not an integer in [0, 2^31-1)", path, what);
    return (int32_t)json_integer_value(v);
}

static void hf_pre_tokenizer(kda_tokenizer *t, const json_t *pt) {
    const char *type = hf_type(pt);
    const char *path = t->path;
    if (type && !strcmp(type, "ByteLevel")) {
        if (!hf_true(pt, "use_regex"))
            kda_die("tokenizer %s: pre_tokenizer ByteLevel without use_regex and without a Split before it "
                    "is not supported",
                    path);
        t->prefix_space = hf_true(pt, "add_prefix_space") ? TOK_PREFIX_SEGMENT : TOK_PREFIX_NONE;
        tok_compile_pattern(t, GPT2_PATTERN, path);
        return;
    }
    const json_t *list = json_object_get(pt, "pretokenizers");
    if (!type || strcmp(type, "Sequence") || json_array_size(list) != 2)
        kda_die("tokenizer %s: pre_tokenizer must be ByteLevel or Sequence[Split, ByteLevel] (byte-level BPE); "
                "found %s",
                path, type ? type : "none");
    const json_t *split = json_array_get(list, 0), *bl = json_array_get(list, 1);
    const char *st = hf_type(split), *bt = hf_type(bl);
    if (!st || strcmp(st, "Split") || !bt || strcmp(bt, "ByteLevel"))
        kda_die("tokenizer %s: pre_tokenizer Sequence must be [Split, ByteLevel]; found [%s, %s]", path, st ? st : "?",
                bt ? bt : "?");
    const char *behavior = json_string_value(json_object_get(split, "behavior"));
    if (!behavior || strcmp(behavior, "Isolated") || hf_true(split, "invert"))
        kda_die("tokenizer %s: pre_tokenizer Split must have behavior Isolated and invert false (found %s)", path,
                behavior ? behavior : "none");
    const char *re = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
    if (!re)
        kda_die("tokenizer %s: pre_tokenizer Split needs pattern {\"Regex\": ...} (String is not supported)", path);
    if (hf_true(bl, "use_regex"))
        kda_die("tokenizer %s: ByteLevel after a Split must have use_regex false (two regex splits are not "
                "supported)",
                path);
    t->prefix_space = hf_true(bl, "add_prefix_space") ? TOK_PREFIX_PRETOKEN : TOK_PREFIX_NONE;
    tok_compile_pattern(t, re, path);
}

static void push_ids(int32_t **ids, int *n, const json_t *arr, const char *path) {
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        *ids = kda_realloc(*ids, sizeof(int32_t) * (size_t)(*n + 1));
        (*ids)[(*n)++] = hf_id(v, path, "post_processor special token");
    }
}

static void hf_template(kda_tokenizer *t, const json_t *tp) {
    const json_t *single = json_object_get(tp, "single"), *specials = json_object_get(tp, "special_tokens");
    if (!json_is_array(single)) kda_die("tokenizer %s: TemplateProcessing has no 'single' template", t->path);
    int seen_a = 0;
    size_t i;
    const json_t *item;
    json_array_foreach(single, i, item) {
        const json_t *sp = json_object_get(item, "SpecialToken");
        if (sp) {
            const char *name = json_string_value(json_object_get(sp, "id"));
            const json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
            if (!json_is_array(ids))
                kda_die("tokenizer %s: TemplateProcessing names special token '%s' without ids in special_tokens",
                        t->path, name ? name : "?");
            if (seen_a)
                push_ids(&t->suffix_ids, &t->n_suffix, ids, t->path);
            else
                push_ids(&t->prefix_ids, &t->n_prefix, ids, t->path);
        } else if (json_object_get(item, "Sequence")) {
            seen_a = 1;
        } else {
            kda_die("tokenizer %s: TemplateProcessing item %zu is neither SpecialToken nor Sequence", t->path, i);
        }
    }
}

static void hf_post_processor(kda_tokenizer *t, const json_t *pp) {
    if (json_is_null(pp) || !pp) return;
    const char *type = hf_type(pp);
    if (type && !strcmp(type, "ByteLevel")) return; // only moves offsets
    if (type && !strcmp(type, "TemplateProcessing")) {
        hf_template(t, pp);
        return;
    }
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        const json_t *p;
        json_array_foreach(json_object_get(pp, "processors"), i, p) hf_post_processor(t, p);
        return;
    }
    kda_die("tokenizer %s: post_processor %s is not supported (ByteLevel, TemplateProcessing or a Sequence of them)",
            t->path, type ? type : "?");
}

// One merge as its two token strings: "a b" or ["a", "b"].
static void merge_strings(const kda_tokenizer *t, const json_t *m, size_t r, const char **a, size_t *na, const char **b,
                          size_t *nb) {
    if (json_is_string(m)) {
        *a = json_string_value(m);
        size_t len = json_string_length(m);
        const char *sp = memchr(*a, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - *a)))
            kda_die("tokenizer %s: merge %zu ('%s') is not two tokens separated by one space", t->path, r, *a);
        *na = (size_t)(sp - *a);
        *b = sp + 1;
        *nb = len - *na - 1;
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *na = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *nb = json_string_length(json_array_get(m, 1));
    } else {
        kda_die("tokenizer %s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", t->path, r);
    }
}

// Merge strings -> ids; the result must be in the vocab, as HF requires. Merges go in blocks
// whose table slots are prefetched first: the lookups are random reads of a few MB, and
// overlapping their cache misses halves the loading time.
#define MERGE_BLOCK 64
static void hf_merges(kda_tokenizer *t, const json_t *merges) {
    size_t n = json_array_size(merges);
    tok_merges_alloc(t, n);
    struct {
        const char *a, *b;
        size_t na, nb, ka, kb, off;
        int raw;
        uint64_t ha, hb, hc;
        int32_t ia, ib, ic;
    } q[MERGE_BLOCK];
    char *buf = NULL;
    size_t cap = 0;
    for (size_t r0 = 0; r0 < n; r0 += MERGE_BLOCK) {
        size_t nq = n - r0 < MERGE_BLOCK ? n - r0 : MERGE_BLOCK, used = 0;
        for (size_t k = 0; k < nq; k++) { // strings -> bytes -> hashes; fetch the vocab slots
            merge_strings(t, json_array_get(merges, r0 + k), r0 + k, &q[k].a, &q[k].na, &q[k].b, &q[k].nb);
            if (cap < used + q[k].na + q[k].nb) buf = kda_realloc(buf, cap = 2 * (used + q[k].na + q[k].nb));
            int raw_a, raw_b;
            q[k].off = used;
            q[k].ka = hf_string_bytes(q[k].a, q[k].na, buf + used, &raw_a);
            q[k].kb = hf_string_bytes(q[k].b, q[k].nb, buf + used + q[k].ka, &raw_b);
            q[k].raw = raw_a ? 1 : raw_b ? 2 : 0;
            used += q[k].ka + q[k].kb;
            const char *p = buf + q[k].off;
            q[k].ha = tok_hash(p, q[k].ka);
            q[k].hb = tok_hash(p + q[k].ka, q[k].kb);
            q[k].hc = tok_hash(p, q[k].ka + q[k].kb);
            __builtin_prefetch(&t->vocab[q[k].ha & t->vocab_mask]);
            __builtin_prefetch(&t->vocab[q[k].hb & t->vocab_mask]);
            __builtin_prefetch(&t->vocab[q[k].hc & t->vocab_mask]);
        }
        for (size_t k = 0; k < nq; k++) { // look up; fetch the merge slots
            const char *p = buf + q[k].off;
            q[k].ia = q[k].raw ? -1 : tok_vocab_find(t, p, q[k].ka, q[k].ha);
            q[k].ib = q[k].raw ? -1 : tok_vocab_find(t, p + q[k].ka, q[k].kb, q[k].hb);
            q[k].ic = (q[k].ia < 0 || q[k].ib < 0) ? -1 : tok_vocab_find(t, p, q[k].ka + q[k].kb, q[k].hc);
            if (q[k].ic < 0)
                kda_die("tokenizer %s: merge %zu ('%.*s' + '%.*s'): %s is not a byte-level token of the vocab", t->path,
                        r0 + k, (int)q[k].na, q[k].a, (int)q[k].nb, q[k].b,
                        q[k].ia < 0       ? "the left part"
                            : q[k].ib < 0 ? "the right part"
                                          : "the result");
            __builtin_prefetch(&t->merges[tok_mix64(tok_pair_key(q[k].ia, q[k].ib)) & t->merge_mask]);
        }
        for (size_t k = 0; k < nq; k++) tok_merge_put(t, q[k].ia, q[k].ib, (uint32_t)(r0 + k), q[k].ic);
    }
    free(buf);
}

kda_tokenizer *kda_tok_load_hf(const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    json_error_t e;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, &e);
    free(text);
    if (!root) kda_die("tokenizer %s: invalid JSON at line %d, column %d: %s", path, e.line, e.column, e.text);
    kda_tokenizer *t = tok_new(path);
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    const char *mtype = hf_type(model);
    if (!json_is_object(vocab) || !json_is_array(merges) || (mtype && strcmp(mtype, "BPE")))
        kda_die("tokenizer %s: model must be BPE with a vocab object and a merges list (found %s)", path,
                mtype ? mtype : "no model type");
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout)) kda_die("tokenizer %s: model.dropout must be null", path);
    if (hf_true(model, "byte_fallback")) kda_die("tokenizer %s: model.byte_fallback is not supported", path);
    const char *affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(model, affixes[i]));
        if (s && *s) kda_die("tokenizer %s: model.%s is not supported", path, affixes[i]);
    }
    const json_t *norm = json_object_get(root, "normalizer");
    if (norm && !json_is_null(norm)) kda_die("tokenizer %s: a normalizer is not supported (byte-level BPE only)", path);
    const char *trunc[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, trunc[i]);
        if (v && !json_is_null(v)) kda_die("tokenizer %s: %s must be null (kda does not %s)", path, trunc[i], trunc[i]);
    }
    const json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec) && (!hf_type(dec) || strcmp(hf_type(dec), "ByteLevel")))
        kda_die("tokenizer %s: decoder must be ByteLevel or null (found %s)", path, hf_type(dec) ? hf_type(dec) : "?");
    t->ignore_merges = hf_true(model, "ignore_merges");

    // Sizes first: the largest id of the vocab and of the added tokens.
    const json_t *added = json_object_get(root, "added_tokens");
    int32_t n_vocab = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        int32_t id = hf_id(v, path, "a vocab entry");
        if (id >= n_vocab) n_vocab = id + 1;
    }
    size_t i;
    json_array_foreach(added, i, v) {
        int32_t id = hf_id(json_object_get(v, "id"), path, "an added token");
        if (id >= n_vocab) n_vocab = id + 1;
    }
    piece_builder pb;
    pieces_init(&pb, t, n_vocab);
    char *buf = NULL;
    size_t cap = 0;
    json_object_foreach((json_t *)vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        size_t n = json_object_iter_key_len(json_object_key_to_iter(key)); // keys may hold U+0000
        if (t->kind[id]) kda_die("tokenizer %s: vocab id %d is given twice", path, id);
        if (cap < n + 1) buf = kda_realloc(buf, cap = 2 * n + 1);
        int raw;
        size_t k = hf_string_bytes(key, n, buf, &raw);
        t->kind[id] = TOK_IN_MODEL | (raw ? TOK_RAW_UTF8 : 0);
        pieces_set(&pb, id, buf, k);
    }
    json_array_foreach(added, i, v) {
        int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
        const json_t *content = json_object_get(v, "content");
        if (!json_is_string(content)) kda_die("tokenizer %s: added token %d has no content string", path, id);
        const char *lr[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (hf_true(v, lr[k]))
                kda_die("tokenizer %s: added token %d ('%s') has %s true, which kda does not support", path, id,
                        json_string_value(content), lr[k]);
        const char *s = json_string_value(content);
        size_t n = json_string_length(content);
        if (cap < n + 1) buf = kda_realloc(buf, cap = 2 * n + 1);
        int raw;
        size_t k = hf_string_bytes(s, n, buf, &raw);
        if (t->kind[id] & TOK_ADDED) kda_die("tokenizer %s: added token id %d is given twice", path, id);
        if (t->kind[id] & TOK_IN_MODEL) { // must be the same token as the vocab's, else decode is ambiguous
            if (pb.len[id] != k || memcmp(pb.data.v + pb.start[id], buf, k) || !!(t->kind[id] & TOK_RAW_UTF8) != raw)
                kda_die("tokenizer %s: added token %d ('%s') differs from vocab entry %d", path, id, s, id);
        } else {
            pieces_set(&pb, id, buf, k);
            t->kind[id] |= raw ? TOK_RAW_UTF8 : 0;
        }
        t->kind[id] |= TOK_ADDED | (hf_true(v, "special") ? TOK_SPECIAL : 0);
        tok_trie_add(t, s, n, id);
        t->n_added++;
    }
    free(buf);
    pieces_finish(&pb, t);
    tok_build_vocab_index(t);
    hf_merges(t, merges);
    const json_t *pt = json_object_get(root, "pre_tokenizer");
    if (!pt || json_is_null(pt)) kda_die("tokenizer %s: pre_tokenizer is null; byte-level BPE needs one", path);
    hf_pre_tokenizer(t, pt);
    hf_post_processor(t, json_object_get(root, "post_processor"));
    json_decref(root);
    return t;
}

// ---- tiktoken .model ----

static int b64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard base64 with optional '=' padding; returns the byte count or -1 if malformed.
static long b64_decode(const char *s, size_t n, char *out) {
    while (n && s[n - 1] == '=') n--;
    if (n % 4 == 1) return -1;
    long k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (char)((acc >> bits) & 0xFF);
        }
    }
    return k;
}

// The "base64 rank" lines of a tiktoken file: token bytes back to back, where each starts, its
// length and its rank.
typedef struct {
    kda_tok_bytes data;
    uint64_t *start;
    uint32_t *blen;
    int32_t *rank;
    size_t n, cap;
    int32_t n_vocab; // highest rank + 1
} tiktoken_ranks;

// One non-empty line (\r dropped): its bytes and rank appended to rk; dies naming path:line_no.
static void tiktoken_line(tiktoken_ranks *rk, const char *line, size_t n, const char *path, size_t line_no) {
    const char *sp = memchr(line, ' ', n);
    if (!sp) kda_die("tokenizer %s:%zu: expected 'base64 rank'", path, line_no);
    char tmp[64];
    size_t rn = n - (size_t)(sp + 1 - line);
    if (rn == 0 || rn >= sizeof tmp) kda_die("tokenizer %s:%zu: bad rank", path, line_no);
    memcpy(tmp, sp + 1, rn);
    tmp[rn] = 0;
    char *end;
    errno = 0;
    long r = strtol(tmp, &end, 10);
    if (*end || errno || r < 0 || r >= INT32_MAX) kda_die("tokenizer %s:%zu: bad rank '%s'", path, line_no, tmp);
    if (rk->n == rk->cap) {
        rk->cap = rk->cap ? 2 * rk->cap : 1024;
        rk->start = kda_realloc(rk->start, rk->cap * sizeof *rk->start);
        rk->blen = kda_realloc(rk->blen, rk->cap * sizeof *rk->blen);
        rk->rank = kda_realloc(rk->rank, rk->cap * sizeof *rk->rank);
    }
    char bytes[1024];
    size_t bn = (size_t)(sp - line);
    if (bn / 4 * 3 + 3 > sizeof bytes) kda_die("tokenizer %s:%zu: token longer than 768 bytes", path, line_no);
    long k = b64_decode(line, bn, bytes);
    if (k <= 0) kda_die("tokenizer %s:%zu: '%.*s' is not base64 of a non-empty token", path, line_no, (int)bn, line);
    rk->start[rk->n] = rk->data.n;
    rk->blen[rk->n] = (uint32_t)k;
    rk->rank[rk->n] = (int32_t)r;
    kda_tok_bytes_append(&rk->data, bytes, (size_t)k);
    rk->n++;
    if ((int32_t)r >= rk->n_vocab) rk->n_vocab = (int32_t)r + 1;
}

// Every line of the file (blank ones skipped); dies when there is none.
static void tiktoken_read(tiktoken_ranks *rk, const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    memset(rk, 0, sizeof *rk);
    size_t line_no = 0;
    for (size_t p = 0; p < len;) {
        const char *line = text + p, *nl = memchr(line, '\n', len - p);
        size_t n = nl ? (size_t)(nl - line) : len - p;
        p += n + 1;
        line_no++;
        if (n && line[n - 1] == '\r') n--;
        if (!n) continue;
        tiktoken_line(rk, line, n, path, line_no);
    }
    free(text);
    if (!rk->n) kda_die("tokenizer %s: no 'base64 rank' lines", path);
}

static void tiktoken_ranks_free(tiktoken_ranks *rk) {
    kda_tok_bytes_free(&rk->data);
    free(rk->start);
    free(rk->blen);
    free(rk->rank);
}

// The pieces: every rank (a model token) and the specials (added, special; ids after the ranks
// unless o->special_ids names them).
static void tiktoken_pieces(kda_tokenizer *t, const tiktoken_ranks *rk, const kda_tiktoken_opts *o, const char *path) {
    int32_t n_vocab = rk->n_vocab, n_ranks = rk->n_vocab; // specials without explicit ids follow the ranks
    for (int s = 0; s < o->n_special; s++) {
        int32_t id = o->special_ids ? o->special_ids[s] : n_ranks + s;
        KDA_CHECK(id >= 0, "special token %s has a negative id", o->special[s]);
        if (id >= n_vocab) n_vocab = id + 1;
    }
    piece_builder pb;
    pieces_init(&pb, t, n_vocab);
    for (size_t i = 0; i < rk->n; i++) {
        if (t->kind[rk->rank[i]]) kda_die("tokenizer %s: rank %d appears twice", path, rk->rank[i]);
        t->kind[rk->rank[i]] = TOK_IN_MODEL;
        pieces_set(&pb, rk->rank[i], rk->data.v + rk->start[i], rk->blen[i]);
    }
    for (int s = 0; s < o->n_special; s++) {
        int32_t id = o->special_ids ? o->special_ids[s] : n_ranks + s;
        if (t->kind[id]) kda_die("tokenizer %s: special token %s has id %d, which is taken", path, o->special[s], id);
        t->kind[id] = TOK_ADDED | TOK_SPECIAL;
        pieces_set(&pb, id, o->special[s], strlen(o->special[s]));
        tok_trie_add(t, o->special[s], strlen(o->special[s]), id);
        t->n_added++;
    }
    pieces_finish(&pb, t);
}

// tiktoken merges any two adjacent parts whose concatenation is a token, lowest rank first:
// that is a merge (left, right) -> token for every way to cut every token in two. Counted in
// the first pass, stored in the second.
static void tiktoken_merges(kda_tokenizer *t) {
    for (int pass = 0; pass < 2; pass++) {
        size_t count = 0;
        for (int32_t id = 0; id < t->n_vocab; id++) {
            if (t->kind[id] != TOK_IN_MODEL) continue;
            const char *p = t->piece_data + t->piece_off[id];
            size_t n = t->piece_off[id + 1] - t->piece_off[id];
            for (size_t k = 1; k < n; k++) {
                int32_t l = tok_vocab_find(t, p, k, tok_hash(p, k));
                int32_t r = l < 0 ? -1 : tok_vocab_find(t, p + k, n - k, tok_hash(p + k, n - k));
                if (r < 0) continue;
                if (pass) tok_merge_put(t, l, r, (uint32_t)id, id);
                count++;
            }
        }
        if (!pass) tok_merges_alloc(t, count);
    }
}

kda_tokenizer *kda_tok_load_tiktoken(const char *path, const kda_tiktoken_opts *o) {
    tiktoken_ranks rk;
    tiktoken_read(&rk, path);
    kda_tokenizer *t = tok_new(path);
    tiktoken_pieces(t, &rk, o, path);
    tiktoken_ranks_free(&rk);
    tok_build_vocab_index(t);
    tiktoken_merges(t);
    t->ignore_merges = 1; // tiktoken emits a piece found in the ranks directly
    tok_compile_pattern(t, o->pattern ? o->pattern : KDA_TOK_LLAMA3_PATTERN, path);
    if (o->bos_id >= 0) {
        t->prefix_ids = kda_malloc(sizeof(int32_t));
        t->prefix_ids[0] = o->bos_id;
        t->n_prefix = 1;
    }
    return t;
}

kda_tokenizer *kda_tok_load_tiktoken_llama3(const char *path) {
    // Names as in the Llama 3 tokenizer.json: 128000..128255, with reserved ones numbered in order.
    enum { N = 256 };
    char names[N][40];
    const char *ptrs[N];
    int reserved = 0;
    for (int i = 0; i < N; i++) {
        int id = 128000 + i;
        const char *fixed = id == 128000 ? "<|begin_of_text|>"
            : id == 128001               ? "<|end_of_text|>"
            : id == 128006               ? "<|start_header_id|>"
            : id == 128007               ? "<|end_header_id|>"
            : id == 128009               ? "<|eot_id|>"
                                         : NULL;
        if (fixed)
            snprintf(names[i], sizeof names[i], "%s", fixed);
        else
            snprintf(names[i], sizeof names[i], "<|reserved_special_token_%d|>", reserved++);
        ptrs[i] = names[i];
    }
    kda_tiktoken_opts o = {KDA_TOK_LLAMA3_PATTERN, ptrs, NULL, N, 128000};
    kda_tokenizer *t = kda_tok_load_tiktoken(path, &o);
    if (t->n_vocab != 128256) kda_die("tokenizer %s: expected Llama 3's 128000 ranks, found %d", path, t->n_vocab - N);
    return t;
}

kda_tokenizer *kda_tok_load_path(const char *path) {
    size_t n = strlen(path);
    if (n > 6 && !strcmp(path + n - 6, ".model")) return kda_tok_load_tiktoken_llama3(path);
    return kda_tok_load_hf(path);
}

kda_tokenizer *kda_tok_load_for_config(const kda_config *cfg, const char *override, const char *who) {
    int bytes = override && !strcmp(override, "bytes"); // as kda tokenize --tokenizer bytes names it
    if (!strcmp(cfg->tokenizer_type, "byte")) {
        if (override && !bytes)
            kda_die("%s: --tokenizer '%s': the model is byte-level (tokenizer_type byte) and takes no tokenizer file",
                    who, override);
        return NULL;
    }
    if (bytes)
        kda_die("%s: --tokenizer bytes: the model's tokenizer_type is %s, not byte; name its tokenizer file", who,
                cfg->tokenizer_type);
    if (strcmp(cfg->tokenizer_type, "HuggingFaceTokenizer"))
        kda_die("%s: tokenizer_type '%s' is not supported (byte | HuggingFaceTokenizer)", who, cfg->tokenizer_type);
    const char *path = override ? override : cfg->tokenizer_model;
    if (!path[0])
        kda_die("%s: tokenizer_type HuggingFaceTokenizer but tokenizer_model is empty; pass --tokenizer PATH", who);
    kda_tokenizer *tok = kda_tok_load_path(path);
    if (kda_tok_vocab_size(tok) > cfg->vocab_size)
        fprintf(stderr, "%s: warning: tokenizer '%s' has %d ids, the model only %d; larger ids are refused\n", who,
                path, kda_tok_vocab_size(tok), cfg->vocab_size);
    return tok;
}

void kda_tok_free(kda_tokenizer *t) {
    if (!t) return;
    free(t->path);
    free(t->kind);
    free(t->piece_data);
    free(t->piece_off);
    free(t->vocab);
    free(t->merges);
    free(t->trie);
    free(t->pattern);
    pcre2_code_free(t->re);
    free(t->prefix_ids);
    free(t->suffix_ids);
    free(t);
}
