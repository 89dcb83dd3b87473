// tokenizer_decode.c — ids -> bytes / text, and lookups between ids and token strings.
#include <string.h>

#include "base/common.h"
#include "text/tokenizer_impl.h"

int32_t kda_tok_vocab_size(const kda_tokenizer *t) { return t->n_vocab; }

int32_t kda_tok_bos_id(const kda_tokenizer *t) { return t->n_prefix ? t->prefix_ids[0] : -1; }

int kda_tok_is_special(const kda_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->kind[id] & TOK_SPECIAL);
}

const char *kda_tok_piece(const kda_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab || !t->kind[id]) return NULL;
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece_data + t->piece_off[id];
}

int kda_tok_id_to_token(const kda_tokenizer *t, int32_t id, char *out, size_t cap) {
    size_t n;
    const char *p = kda_tok_piece(t, id, &n);
    if (!p) return -1;
    size_t k = 0;
    if (t->kind[id] & TOK_RAW_UTF8) { // the token's own text
        if (n + 1 > cap) return -1;
        memcpy(out, p, n);
        k = n;
    } else { // bytes back through the byte-level map, as UTF-8
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = tok_byte_to_cp((uint8_t)p[i]);
            if (k + 3 > cap) return -1;
            if (cp < 0x80)
                out[k++] = (char)cp;
            else {
                out[k++] = (char)(0xC0 | (cp >> 6));
                out[k++] = (char)(0x80 | (cp & 0x3F));
            }
        }
    }
    out[k] = 0;
    return (int)k;
}

int32_t kda_tok_token_to_id(const kda_tokenizer *t, const char *s) {
    size_t n = strlen(s);
    if (t->n_trie) { // added tokens first, as HF does
        int32_t node = 0;
        for (size_t i = 0; i < n && node >= 0; i++) {
            int32_t ch = t->trie[node].child;
            while (ch >= 0 && t->trie[ch].byte != (uint8_t)s[i]) ch = t->trie[ch].sibling;
            node = ch;
        }
        if (n && node >= 0 && t->trie[node].id >= 0) return t->trie[node].id;
    }
    kda_tok_bytes b = {0};
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int bad, k = tok_utf8_next((const uint8_t *)s + i, n - i, &cp, &bad);
        int byte = k ? tok_cp_to_byte(cp) : -1;
        if (byte < 0) {
            kda_tok_bytes_free(&b);
            return -1;
        }
        char c = (char)byte;
        kda_tok_bytes_append(&b, &c, 1);
        i += (size_t)k;
    }
    int32_t id = b.n ? tok_vocab_find(t, b.v, b.n, tok_hash(b.v, b.n)) : -1;
    kda_tok_bytes_free(&b);
    return id;
}

size_t kda_tok_decode(const kda_tokenizer *t, const int32_t *ids, size_t n, int skip_special, kda_tok_bytes *out) {
    size_t unknown = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab || !t->kind[id]) {
            unknown++;
            continue;
        }
        if (skip_special && (t->kind[id] & TOK_SPECIAL)) continue;
        kda_tok_bytes_append(out, t->piece_data + t->piece_off[id], t->piece_off[id + 1] - t->piece_off[id]);
    }
    return unknown;
}

size_t kda_tok_decode_text(const kda_tokenizer *t, const int32_t *ids, size_t n, int skip_special, kda_tok_bytes *out) {
    size_t n0 = out->n;
    size_t unknown = kda_tok_decode(t, ids, n, skip_special, out);
    if (out->n == n0) return unknown;
    size_t valid = kda_utf8_valid_prefix(out->v + n0, out->n - n0);
    if (n0 + valid < out->n) { // repair the tail after the first invalid byte
        kda_tok_bytes tail = {0};
        kda_tok_bytes_append(&tail, out->v + n0 + valid, out->n - n0 - valid);
        out->n = n0 + valid;
        kda_utf8_sanitize(tail.v, tail.n, out);
        kda_tok_bytes_free(&tail);
    }
    return unknown;
}
