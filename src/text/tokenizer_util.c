// tokenizer_util.c — building blocks of the tokenizer: the byte-level map, hashing, UTF-8
// validation and repair (also of streamed text), growable buffers, the regex rewrite + compile,
// and the lookup tables.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "text/tokenizer_impl.h"

// ---- byte-level map (GPT-2 bytes_to_unicode) ----

static int printable_byte(uint32_t b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t tok_byte_to_cp(uint8_t b) {
    if (printable_byte(b)) return b;
    if (b <= 32) return 256u + b;                 // 0..32   -> U+0100..U+0120 (space is 'Ġ')
    if (b <= 160) return 256u + 33u + (b - 127u); // 127..160 -> U+0121..U+0142
    return 323;                                   // 173 (soft hyphen) -> U+0143
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return printable_byte(cp) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

// ---- hashing ----

uint64_t tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return tok_mix64(h ^ w);
}

// ---- UTF-8 ----

int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, int *bad_len) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int need;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF; // allowed range of the second byte (Unicode Table 3-7)
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0Fu;
        if (c == 0xE0)
            lo = 0xA0; // no overlong forms
        else if (c == 0xED)
            hi = 0x9F; // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07u;
        if (c == 0xF0)
            lo = 0x90; // no overlong forms
        else if (c == 0xF4)
            hi = 0x8F; // nothing above U+10FFFF
    } else {
        *bad_len = 1;
        return 0;
    }
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n || s[k] < lo || s[k] > hi) {
            *bad_len = k; // the valid start of a sequence so far is one maximal subpart
            return 0;
        }
        v = (v << 6) | (s[k] & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = v;
    return need + 1;
}

size_t kda_utf8_valid_prefix(const char *str, size_t n) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) { // ASCII runs 8 bytes at a time
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int bad, k = tok_utf8_next(s + i, n - i, &cp, &bad);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

void kda_utf8_sanitize(const char *str, size_t n, kda_tok_bytes *out) {
    size_t i = 0;
    while (i < n) {
        size_t v = kda_utf8_valid_prefix(str + i, n - i);
        kda_tok_bytes_append(out, str + i, v);
        i += v;
        if (i == n) break;
        uint32_t cp;
        int bad = 1;
        tok_utf8_next((const uint8_t *)str + i, n - i, &cp, &bad);
        kda_tok_bytes_append(out, "\xEF\xBF\xBD", 3);
        i += (size_t)bad;
    }
}

// Trailing bytes of s[0..n) that could still become one character with more bytes: a lead
// byte and fewer continuation bytes than it announces.
static size_t incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char b = s[n - back];
        if ((b & 0xC0) == 0x80) continue; // continuation byte: look further back for the lead
        size_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        return need > back ? back : 0;
    }
    return 0;
}

int kda_utf8_stream_flush(kda_utf8_stream *s, FILE *f, int final) {
    if (s->pend.n == 0) return 0;
    size_t keep = final ? 0 : incomplete_tail((const unsigned char *)s->pend.v, s->pend.n);
    size_t out = s->pend.n - keep;
    s->clean.n = 0;
    kda_utf8_sanitize(s->pend.v, out, &s->clean);
    int rc = s->clean.n && fwrite(s->clean.v, 1, s->clean.n, f) != s->clean.n ? -1 : 0;
    memmove(s->pend.v, s->pend.v + out, keep);
    s->pend.n = keep;
    fflush(f);
    return rc;
}

void kda_utf8_stream_free(kda_utf8_stream *s) {
    kda_tok_bytes_free(&s->pend);
    kda_tok_bytes_free(&s->clean);
}

// ---- buffers ----

void kda_tok_ids_push(kda_tok_ids *a, int32_t id) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->v = kda_realloc(a->v, a->cap * sizeof(int32_t));
    }
    a->v[a->n++] = id;
}

void kda_tok_ids_free(kda_tok_ids *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

static void bytes_reserve(kda_tok_bytes *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    b->v = kda_realloc(b->v, cap);
    b->cap = cap;
}

void kda_tok_bytes_append(kda_tok_bytes *b, const void *p, size_t n) {
    bytes_reserve(b, n);
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
}

const char *kda_tok_bytes_cstr(kda_tok_bytes *b) {
    bytes_reserve(b, 0);
    b->v[b->n] = 0;
    return b->v;
}

void kda_tok_bytes_free(kda_tok_bytes *b) {
    free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

// ---- regex ----

// White_Space as Rust's regex crate and Oniguruma define \s: U+0009..U+000D, U+0085 and the
// separators Zs, Zl, Zp. PCRE2's \s under UCP adds U+180E, which HF and tiktoken do not split on.
#define WS_SET "\\t-\\r\\x{85}\\p{Z}"

char *tok_rewrite_pattern(const char *p, const char *where) {
    kda_tok_bytes out = {0};
    int in_class = 0;
    for (size_t i = 0; p[i];) {
        char c = p[i];
        if (c == '\\') {
            char d = p[i + 1];
            if (!d) kda_die("%s: the pre-tokenizer regex ends in a lone backslash", where);
            if (d == 's') {
                const char *r = in_class ? WS_SET : "[" WS_SET "]";
                kda_tok_bytes_append(&out, r, strlen(r));
            } else if (d == 'S') {
                if (in_class)
                    kda_die("%s: the pre-tokenizer regex has \\S inside a [...] class, which kda cannot "
                            "translate to Unicode White_Space; write it as a negated class",
                            where);
                kda_tok_bytes_append(&out, "[^" WS_SET "]", strlen("[^" WS_SET "]"));
            } else if (d == 'Q') {
                kda_die("%s: the pre-tokenizer regex uses \\Q...\\E quoting, which kda does not support", where);
            } else {
                kda_tok_bytes_append(&out, p + i, 2);
            }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            kda_tok_bytes_append(&out, p + i, 1);
            i++;
            if (p[i] == '^') kda_tok_bytes_append(&out, p + i++, 1);
            if (p[i] == ']') kda_tok_bytes_append(&out, p + i++, 1); // a literal ']' first in a class
            continue;
        }
        if (in_class && c == '[' && p[i + 1] == ':') { // POSIX [:name:] inside a class
            const char *e = strstr(p + i + 2, ":]");
            size_t k = e ? (size_t)(e - (p + i)) + 2 : 1;
            kda_tok_bytes_append(&out, p + i, k);
            i += k;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        kda_tok_bytes_append(&out, p + i, 1);
        i++;
    }
    kda_tok_bytes_cstr(&out);
    return out.v;
}

void tok_compile_pattern(kda_tokenizer *t, const char *pattern, const char *where) {
    t->pattern = tok_rewrite_pattern(pattern, where);
    int err;
    PCRE2_SIZE off;
    t->re = pcre2_compile((PCRE2_SPTR)t->pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        kda_die("%s: the pre-tokenizer regex does not compile with PCRE2 (%s at offset %zu of '%s')", where,
                (const char *)msg, (size_t)off, t->pattern);
    }
    // Without JIT (a platform PCRE2 lacks it for) the interpreter gives the same matches, slower.
    t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
}

// ---- tables ----

static uint64_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c *= 2;
    return c;
}

void tok_trie_add(kda_tokenizer *t, const char *content, size_t len, int32_t id) {
    if (!len) return; // HF never matches an empty added token
    if (!t->n_trie) {
        t->trie = kda_malloc(sizeof(tok_trie_node) * 64);
        t->trie[0] = (tok_trie_node){-1, -1, -1, 0};
        t->n_trie = 1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)content[i];
        int32_t c = t->trie[node].child;
        while (c >= 0 && t->trie[c].byte != b) c = t->trie[c].sibling;
        if (c < 0) {
            if ((t->n_trie & (t->n_trie - 1)) == 0 && t->n_trie >= 64) // grow at powers of two
                t->trie = kda_realloc(t->trie, sizeof(tok_trie_node) * (size_t)t->n_trie * 2);
            c = t->n_trie++;
            t->trie[c] = (tok_trie_node){-1, t->trie[node].child, -1, b};
            t->trie[node].child = c;
        }
        node = c;
    }
    t->trie[node].id = id;
    t->first_byte[(uint8_t)content[0]] = 1;
}

void tok_merges_alloc(kda_tokenizer *t, size_t n) {
    uint64_t cap = pow2_at_least(n + n / 2 + 1);
    t->merges = kda_malloc(sizeof(tok_merge_slot) * cap);
    for (uint64_t i = 0; i < cap; i++) t->merges[i].key = TOK_NO_KEY;
    t->merge_mask = cap - 1;
    t->n_merges = 0;
}

void tok_merge_put(kda_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    uint64_t key = tok_pair_key(a, b);
    for (uint64_t i = tok_mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        tok_merge_slot *s = &t->merges[i];
        if (s->key == key || s->key == TOK_NO_KEY) {
            if (s->key == TOK_NO_KEY) {
                KDA_CHECK(t->n_merges < t->merge_mask, "merge table full (%zu merges)", t->n_merges);
                t->n_merges++;
            }
            *s = (tok_merge_slot){key, rank, id};
            return;
        }
    }
}

void tok_build_vocab_index(kda_tokenizer *t) {
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) n += (t->kind[id] & TOK_IN_MODEL) && !(t->kind[id] & TOK_RAW_UTF8);
    uint64_t cap = pow2_at_least(2 * n + 1);
    t->vocab = kda_malloc(sizeof(tok_vocab_slot) * cap);
    for (uint64_t i = 0; i < cap; i++) t->vocab[i] = (tok_vocab_slot){0, 0, -1};
    t->vocab_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!(t->kind[id] & TOK_IN_MODEL) || (t->kind[id] & TOK_RAW_UTF8)) continue;
        const char *p = t->piece_data + t->piece_off[id];
        size_t len = t->piece_off[id + 1] - t->piece_off[id];
        uint64_t h = tok_hash(p, len);
        if (tok_vocab_find(t, p, len, h) >= 0)
            kda_die("tokenizer %s: two vocab entries have the same bytes (the second is id %d)", t->path, id);
        uint64_t i = h & t->vocab_mask;
        while (t->vocab[i].id >= 0) i = (i + 1) & t->vocab_mask;
        t->vocab[i] = (tok_vocab_slot){tok_head8(p, len), tok_vocab_tag(h, len), id};
        if (len == 1) t->byte_id[(uint8_t)p[0]] = id;
    }
}
