// tokenizer_impl.h — the inside of kda_tokenizer, shared by tokenizer_*.c (not for other modules).
// tokenizer_load.c fills it (HF json, tiktoken), tokenizer_encode.c reads it (added-token split,
// regex pre-split, BPE), tokenizer_util.c has the byte-level map, hashing, UTF-8 and buffers.
#ifndef KDA_TOKENIZER_IMPL_H
#define KDA_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <string.h>

#include "text/tokenizer.h"

// kind[id] bits; 0 marks an unused id.
enum { TOK_IN_MODEL = 1, TOK_ADDED = 2, TOK_SPECIAL = 4, TOK_RAW_UTF8 = 8 };

// Model vocab index: raw bytes -> id (open addressing; id < 0 marks an empty slot). A slot holds
// the first 8 bytes and the length, so a lookup of a word of <= 8 bytes touches one cache line.
typedef struct {
    uint64_t head; // first 8 bytes, zero padded
    uint32_t tag;  // hash bits 40..63 << 8 | min(length, 255)
    int32_t id;
} tok_vocab_slot;

static inline uint64_t tok_head8(const char *p, size_t n) {
    uint64_t w = 0;
    memcpy(&w, p, n < 8 ? n : 8);
    return w;
}
static inline uint32_t tok_vocab_tag(uint64_t h, size_t n) {
    return (uint32_t)(h >> 40) << 8 | (uint32_t)(n < 255 ? n : 255);
}

// Merge table: (left id, right id) -> (rank, merged id). key == TOK_NO_KEY marks an empty slot.
typedef struct {
    uint64_t key;
    uint32_t rank;
    int32_t id;
} tok_merge_slot;
#define TOK_NO_KEY UINT64_MAX
#define TOK_NO_RANK UINT32_MAX
enum { TOK_PREFIX_NONE = 0, TOK_PREFIX_SEGMENT = 1, TOK_PREFIX_PRETOKEN = 2 };

// Trie of added-token contents, for the leftmost-longest split (first-child / next-sibling).
typedef struct {
    int32_t child, sibling;
    int32_t id; // token ending here, or -1
    uint8_t byte;
} tok_trie_node;

struct kda_tokenizer {
    char *path;
    int32_t n_vocab;       // max id + 1
    uint8_t *kind;         // [n_vocab] TOK_* bits. TOK_RAW_UTF8: the token's string has a
                           // character outside the byte-level map, so its piece is that UTF-8
                           // text (what HF's ByteLevel decoder emits) and BPE never makes it.
    char *piece_data;      // bytes of every id, concatenated
    uint64_t *piece_off;   // [n_vocab + 1]
    tok_vocab_slot *vocab; // model tokens by bytes
    uint64_t vocab_mask;
    int32_t byte_id[256]; // the one-byte model token of each byte, or -1
    tok_merge_slot *merges;
    uint64_t merge_mask;
    size_t n_merges;
    int ignore_merges;
    tok_trie_node *trie; // node 0 is the root; empty when n_added == 0
    int32_t n_trie, n_added;
    uint8_t first_byte[256]; // 1: some added token starts with this byte
    char *pattern;           // the regex as compiled (after the \s rewrite)
    pcre2_code *re;
    int jit;                          // 1: JIT compiled
    int prefix_space;                 // ByteLevel add_prefix_space: TOK_PREFIX_* (a space before each
                                      // text segment, or before each pre-token)
    int32_t *prefix_ids, *suffix_ids; // what add_special_tokens puts around a sequence
    int n_prefix, n_suffix;
};

// The GPT-2 byte <-> unicode map (bytes_to_unicode): printable bytes map to themselves,
// the other 68 to U+0100.. in order.
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp); // -1 when cp is not in the map

uint64_t tok_hash(const void *p, size_t n);
static inline uint64_t tok_pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
static inline uint64_t tok_mix64(uint64_t x) { // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Model-token lookup by raw bytes with a precomputed tok_hash; -1 when absent.
static inline int32_t tok_vocab_find(const kda_tokenizer *t, const char *p, size_t n, uint64_t h) {
    uint32_t tag = tok_vocab_tag(h, n);
    uint64_t head = tok_head8(p, n);
    for (uint64_t i = h & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const tok_vocab_slot *s = &t->vocab[i];
        if (s->id < 0) return -1;
        if (s->tag == tag && s->head == head) {
            if (n <= 8) return s->id; // length and all bytes compared
            uint64_t o = t->piece_off[s->id];
            if (t->piece_off[s->id + 1] - o == n && !memcmp(t->piece_data + o + 8, p + 8, n - 8)) return s->id;
        }
    }
}

static inline const tok_merge_slot *tok_merge_find(const kda_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = tok_pair_key(a, b);
    for (uint64_t i = tok_mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const tok_merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (s->key == TOK_NO_KEY) return NULL;
    }
}

// Decodes one UTF-8 sequence at s[0..n) (n >= 1): returns its length (1..4) and the code
// point, or 0 when s does not start with a well-formed sequence; *bad_len is then the length
// of the maximal invalid subpart (>= 1) that one U+FFFD replaces.
int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, int *bad_len);

// Rewrites \s and \S to the White_Space set of Rust regex and Oniguruma (PCRE2's UCP \s also
// matches U+180E). Dies naming `where` for patterns this rewrite cannot handle. Caller frees.
char *tok_rewrite_pattern(const char *pattern, const char *where);
// Compiles the (rewritten) pattern into t->re with JIT; dies naming `where` on errors.
void tok_compile_pattern(kda_tokenizer *t, const char *pattern, const char *where);
// Adds an added token's content (its text as matched in the input) to the trie.
void tok_trie_add(kda_tokenizer *t, const char *content, size_t len, int32_t id);
// Allocates the merge table for n merges.
void tok_merges_alloc(kda_tokenizer *t, size_t n);
// Inserts or overwrites (a, b) -> (rank, id) (a later duplicate wins, as in HF).
void tok_merge_put(kda_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t id);
// Builds the vocab index over every TOK_IN_MODEL id without TOK_RAW_UTF8.
void tok_build_vocab_index(kda_tokenizer *t);

#endif
