// tokenizer_encode.c — text -> ids: added-token split, regex pre-split (PCRE2 JIT), then
// byte-level BPE per pre-token with a cache of recent words.
//
// BPE: the pre-token's bytes start as one-byte tokens; repeatedly the adjacent pair with the
// lowest merge rank (leftmost among equal ranks) is replaced by its merged token, until no
// adjacent pair has a merge. Short words use a linear scan over a pair-rank array; long words
// a binary heap over a linked list (same result, O(n log n)).
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "text/tokenizer_impl.h"

#define CACHE_SLOTS 16384 // direct-mapped word cache, per context (one 64-byte line per slot)
#define CACHE_KEY 22      // longest word cached, bytes
#define CACHE_IDS 8       // most ids of a cached word
#define HEAP_FROM 48      // words with more symbols than this use the heap

typedef struct {
    uint64_t hash;
    uint8_t len, n_ids;
    char key[CACHE_KEY];
    int32_t ids[CACHE_IDS];
} cache_slot;

typedef struct {
    uint32_t rank, pos;
    int32_t id;
} heap_item;

struct kda_tok_ctx {
    const kda_tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    kda_tok_bytes clean;  // the input with invalid UTF-8 replaced
    kda_tok_bytes spaced; // a segment or pre-token with its prefix space
    size_t cap;           // capacity of the BPE arrays below
    int32_t *sym, *nid, *prev, *next;
    uint32_t *rank;
    heap_item *heap;
    cache_slot *cache;
};

kda_tok_ctx *kda_tok_ctx_new(const kda_tokenizer *t) {
    kda_tok_ctx *c = kda_calloc(1, sizeof *c);
    c->t = t;
    c->md = pcre2_match_data_create(1, NULL);
    c->mctx = pcre2_match_context_create(NULL);
    KDA_CHECK(c->md && c->mctx, "out of memory creating PCRE2 match data");
    // Long whitespace runs need backtracking room; past this the interpreter takes over.
    if (t->jit) {
        c->jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, NULL);
        KDA_CHECK(c->jit_stack, "out of memory creating the PCRE2 JIT stack");
        pcre2_jit_stack_assign(c->mctx, NULL, c->jit_stack);
    }
    pcre2_set_match_limit(c->mctx, UINT32_MAX); // a long input must not fail to split
    c->cache = kda_calloc(CACHE_SLOTS, sizeof(cache_slot));
    return c;
}

void kda_tok_ctx_free(kda_tok_ctx *c) {
    if (!c) return;
    pcre2_match_data_free(c->md);
    pcre2_match_context_free(c->mctx);
    pcre2_jit_stack_free(c->jit_stack);
    kda_tok_bytes_free(&c->clean);
    kda_tok_bytes_free(&c->spaced);
    free(c->sym);
    free(c->nid);
    free(c->prev);
    free(c->next);
    free(c->rank);
    free(c->heap);
    free(c->cache);
    free(c);
}

static void reserve(kda_tok_ctx *c, size_t n) {
    if (n <= c->cap) return;
    size_t cap = c->cap ? c->cap : 64;
    while (cap < n) cap *= 2;
    c->sym = kda_realloc(c->sym, cap * sizeof(int32_t));
    c->nid = kda_realloc(c->nid, cap * sizeof(int32_t));
    c->prev = kda_realloc(c->prev, cap * sizeof(int32_t));
    c->next = kda_realloc(c->next, cap * sizeof(int32_t));
    c->rank = kda_realloc(c->rank, cap * sizeof(uint32_t));
    c->heap = kda_realloc(c->heap, 2 * cap * sizeof(heap_item)); // at most 2 pushes per merge + initial
    c->cap = cap;
}

// ---- BPE ----

static inline void pair_rank(const kda_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
    const tok_merge_slot *m = tok_merge_find(t, a, b);
    *rank = m ? m->rank : TOK_NO_RANK;
    *id = m ? m->id : -1;
}

// Linear scan: rank[i] / nid[i] describe the pair (sym[i], sym[i+1]). Returns the symbol count.
static size_t bpe_scan(const kda_tokenizer *t, int32_t *sym, uint32_t *rank, int32_t *nid, size_t m) {
    for (size_t i = 0; i + 1 < m; i++) pair_rank(t, sym[i], sym[i + 1], &rank[i], &nid[i]);
    while (m > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < m; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == TOK_NO_RANK) break;
        sym[best] = nid[best];
        size_t tail = m - best - 2; // symbols after the removed one
        memmove(sym + best + 1, sym + best + 2, tail * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (tail ? tail - 1 : 0) * sizeof *rank);
        memmove(nid + best + 1, nid + best + 2, (tail ? tail - 1 : 0) * sizeof *nid);
        m--;
        if (best > 0) pair_rank(t, sym[best - 1], sym[best], &rank[best - 1], &nid[best - 1]);
        if (best + 1 < m) pair_rank(t, sym[best], sym[best + 1], &rank[best], &nid[best]);
    }
    return m;
}

static inline int heap_less(const heap_item *a, const heap_item *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(heap_item *h, size_t *n, heap_item x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, size_t *n) {
    heap_item top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        const heap_item *best = &x;
        if (l < *n && heap_less(&h[l], best)) s = l, best = &h[l];
        if (r < *n && heap_less(&h[r], best)) s = r;
        if (s == i) break;
        h[i] = h[s];
        i = s;
    }
    if (*n) h[i] = x;
    return top;
}

static void heap_push_pair(kda_tok_ctx *c, size_t *n, int32_t pos) {
    int32_t nx = c->next[pos];
    if (nx < 0) return;
    uint32_t r;
    int32_t id;
    pair_rank(c->t, c->sym[pos], c->sym[nx], &r, &id);
    if (r != TOK_NO_RANK) heap_push(c->heap, n, (heap_item){r, (uint32_t)pos, id});
}

// Heap over a linked list; entries whose pair has changed since they were pushed are skipped.
// Compacts the surviving symbols to the front of c->sym and returns their count.
static size_t bpe_heap(kda_tok_ctx *c, size_t m) {
    int32_t *sym = c->sym, *prev = c->prev, *next = c->next;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++) heap_push_pair(c, &hn, (int32_t)i);
    while (hn) {
        heap_item top = heap_pop(c->heap, &hn);
        int32_t pos = (int32_t)top.pos, nx = next[pos];
        if (sym[pos] < 0 || nx < 0) continue; // merged away, or no right neighbour any more
        const tok_merge_slot *cur = tok_merge_find(c->t, sym[pos], sym[nx]);
        if (!cur || cur->id != top.id) continue; // stale: the pair changed
        sym[pos] = top.id;
        sym[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = pos;
        if (prev[pos] >= 0) heap_push_pair(c, &hn, prev[pos]);
        heap_push_pair(c, &hn, pos);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[k++] = sym[i];
    return k;
}

// One pre-token -> ids.
static void encode_word(kda_tok_ctx *c, const char *p, size_t n, kda_tok_ids *out) {
    const kda_tokenizer *t = c->t;
    if (n == 1) {
        int32_t id = t->byte_id[(uint8_t)p[0]];
        if (id >= 0) kda_tok_ids_push(out, id);
        return;
    }
    // The cache first: frequent words then cost one L2 access instead of several misses in
    // the 2 MB vocab index.
    uint64_t h = tok_hash(p, n);
    cache_slot *cs = &c->cache[h & (CACHE_SLOTS - 1)];
    if (n <= CACHE_KEY && cs->hash == h && cs->len == n && !memcmp(cs->key, p, n)) {
        for (int i = 0; i < cs->n_ids; i++) kda_tok_ids_push(out, cs->ids[i]);
        return;
    }
    int32_t whole = t->ignore_merges ? tok_vocab_find(t, p, n, h) : -1;
    if (whole >= 0) {
        kda_tok_ids_push(out, whole);
        if (n <= CACHE_KEY) {
            cs->hash = h;
            cs->len = (uint8_t)n;
            cs->n_ids = 1;
            memcpy(cs->key, p, n);
            cs->ids[0] = whole;
        }
        return;
    }
    reserve(c, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(uint8_t)p[i]];
        if (id >= 0) c->sym[m++] = id; // a byte without a token is dropped, as HF does without unk
    }
    m = m > HEAP_FROM ? bpe_heap(c, m) : bpe_scan(t, c->sym, c->rank, c->nid, m);
    for (size_t i = 0; i < m; i++) kda_tok_ids_push(out, c->sym[i]);
    if (n <= CACHE_KEY && m <= CACHE_IDS) {
        cs->hash = h;
        cs->len = (uint8_t)n;
        cs->n_ids = (uint8_t)m;
        memcpy(cs->key, p, n);
        memcpy(cs->ids, c->sym, m * sizeof(int32_t));
    }
}

static void encode_pretoken(kda_tok_ctx *c, const char *p, size_t n, kda_tok_ids *out) {
    if (c->t->prefix_space == TOK_PREFIX_PRETOKEN && p[0] != ' ') {
        c->spaced.n = 0;
        kda_tok_bytes_append(&c->spaced, " ", 1);
        kda_tok_bytes_append(&c->spaced, p, n);
        encode_word(c, c->spaced.v, c->spaced.n, out);
    } else {
        encode_word(c, p, n, out);
    }
}

// ---- regex pre-split ----

static int find_next(kda_tok_ctx *c, const char *s, size_t n, size_t from) {
    const kda_tokenizer *t = c->t;
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    if (t->jit) rc = pcre2_jit_match(t->re, (PCRE2_SPTR)s, n, from, 0, c->md, c->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) // no JIT, or a match too deep for its stack
        rc = pcre2_match(t->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, c->mctx);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        kda_die("tokenizer %s: the pre-tokenizer regex failed at byte %zu of a %zu-byte text: %s", t->path, from, n,
                (const char *)msg);
    }
    return rc > 0;
}

// Text between added tokens: split by the regex (Isolated: matches and the gaps between
// them are pre-tokens), each pre-token BPE-encoded.
static void encode_segment(kda_tok_ctx *c, const char *s, size_t n, kda_tok_ids *out) {
    if (!n) return;
    if (c->t->prefix_space == TOK_PREFIX_SEGMENT && s[0] != ' ') {
        c->spaced.n = 0;
        kda_tok_bytes_append(&c->spaced, " ", 1);
        kda_tok_bytes_append(&c->spaced, s, n);
        s = c->spaced.v;
        n = c->spaced.n;
    }
    size_t pos = 0, from = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    while (from < n && find_next(c, s, n, from)) {
        size_t a = ov[0], b = ov[1];
        if (b == a) { // an empty match splits nothing; step over one character
            uint32_t cp;
            int bad, k = a < n ? tok_utf8_next((const uint8_t *)s + a, n - a, &cp, &bad) : 1;
            from = a + (size_t)(k ? k : 1);
            continue;
        }
        if (a > pos) encode_pretoken(c, s + pos, a - pos, out);
        encode_pretoken(c, s + a, b - a, out);
        pos = from = b;
    }
    if (pos < n) encode_pretoken(c, s + pos, n - pos, out);
}

// ---- added tokens ----

// Longest added token starting at s[0..n), skipping specials when they are text; id or -1.
static int32_t match_added(const kda_tokenizer *t, const char *s, size_t n, int specials_as_text, size_t *len) {
    int32_t node = 0, found = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t ch = t->trie[node].child;
        while (ch >= 0 && t->trie[ch].byte != (uint8_t)s[i]) ch = t->trie[ch].sibling;
        if (ch < 0) break;
        node = ch;
        int32_t id = t->trie[node].id;
        if (id >= 0 && !(specials_as_text && (t->kind[id] & TOK_SPECIAL))) {
            found = id;
            *len = i + 1;
        }
    }
    return found;
}

void kda_tok_encode(kda_tok_ctx *c, const char *text, size_t len, unsigned flags, kda_tok_ids *out) {
    const kda_tokenizer *t = c->t;
    if (!len) text = "";
    if (flags & KDA_TOK_ADD_SPECIAL)
        for (int i = 0; i < t->n_prefix; i++) kda_tok_ids_push(out, t->prefix_ids[i]);
    if (kda_utf8_valid_prefix(text, len) < len) {
        c->clean.n = 0;
        kda_utf8_sanitize(text, len, &c->clean);
        text = c->clean.v;
        len = c->clean.n;
    }
    size_t pos = 0;
    if (t->n_trie) {
        int single = -1; // the one first byte of all added tokens, if there is just one
        for (int b = 0; b < 256; b++)
            if (t->first_byte[b]) single = single == -1 ? b : -2;
        for (size_t i = 0; i < len;) {
            if (single >= 0) {
                const char *q = memchr(text + i, single, len - i);
                if (!q) break;
                i = (size_t)(q - text);
            } else if (!t->first_byte[(uint8_t)text[i]]) {
                i++;
                continue;
            }
            size_t mlen = 0;
            int32_t id = match_added(t, text + i, len - i, (flags & KDA_TOK_SPECIAL_AS_TEXT) != 0, &mlen);
            if (id < 0) {
                i++;
                continue;
            }
            encode_segment(c, text + pos, i - pos, out);
            kda_tok_ids_push(out, id);
            i += mlen;
            pos = i;
        }
    }
    encode_segment(c, text + pos, len - pos, out);
    if (flags & KDA_TOK_ADD_SPECIAL)
        for (int i = 0; i < t->n_suffix; i++) kda_tok_ids_push(out, t->suffix_ids[i]);
}
