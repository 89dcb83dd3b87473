// test_tokenizer.c — the Llama 3 tokenizer against golden ids from Hugging Face tokenizers
// (tests/data/tokenizer/golden.jsonl), round trips, the tiktoken .model form, the BPE merge
// loop against a naive reference, invalid UTF-8 repair, and random bytes (no crash, no loop).
// Exhaustive parity with HF tokenizers and tiktoken is in tests/python/test_tokenizer_parity.py.
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"

#define TOK_JSON "data/tokenizer/llama3/tokenizer.json"
#define GOLDEN "tests/data/tokenizer/golden.jsonl"

static int same_ids(const kda_tok_ids *a, const int32_t *b, size_t n) {
    return a->n == n && (n == 0 || !memcmp(a->v, b, n * sizeof(int32_t)));
}

static void encode(kda_tok_ctx *c, const char *s, size_t n, unsigned flags, kda_tok_ids *out) {
    out->n = 0;
    kda_tok_encode(c, s, n, flags, out);
}

// decode(encode(x)) == x, for specials-as-ids and specials-as-text.
static int round_trips(const kda_tokenizer *t, kda_tok_ctx *c, const char *s, size_t n) {
    kda_tok_ids ids = {0};
    kda_tok_bytes b = {0};
    int ok = 1;
    for (unsigned flags = 0; flags <= KDA_TOK_SPECIAL_AS_TEXT; flags += KDA_TOK_SPECIAL_AS_TEXT) {
        encode(c, s, n, flags, &ids);
        b.n = 0;
        kda_tok_decode(t, ids.v, ids.n, 0, &b);
        ok &= b.n == n && (n == 0 || !memcmp(b.v, s, n));
    }
    kda_tok_ids_free(&ids);
    kda_tok_bytes_free(&b);
    return ok;
}

static void test_golden(const kda_tokenizer *t, kda_tok_ctx *c) {
    FILE *f = kda_fopen(GOLDEN, "r");
    char *line = NULL;
    size_t cap = 0;
    int n[2] = {0, 0}, bad[2] = {0, 0}, trip_bad = 0;
    kda_tok_ids ids = {0};
    kda_tok_bytes dec = {0};
    while (getline(&line, &cap, f) > 0) {
        json_error_t e;
        json_t *o = json_loads(line, JSON_ALLOW_NUL, &e);
        KDA_CHECK(o, "%s: %s", GOLDEN, e.text);
        const json_t *text = json_object_get(o, "text"), *want = json_object_get(o, "ids");
        int bos = json_is_true(json_object_get(o, "bos"));
        const char *s = json_string_value(text);
        size_t len = json_string_length(text);
        encode(c, s, len, bos ? KDA_TOK_ADD_SPECIAL : 0, &ids);
        int ok = ids.n == json_array_size(want);
        for (size_t i = 0; ok && i < ids.n; i++) ok = ids.v[i] == json_integer_value(json_array_get(want, i));
        n[bos]++;
        if (!ok && bad[0] + bad[1] < 5) printf("  golden mismatch (bos %d): %.60s\n", bos, s);
        bad[bos] += !ok;
        // decode gives the text back (BOS lines: "<|begin_of_text|>" + text)
        dec.n = 0;
        kda_tok_decode(t, ids.v + bos, ids.n - (size_t)bos, 0, &dec);
        int trip = dec.n == len && !memcmp(dec.v, s, len) && round_trips(t, c, s, len);
        if (bos) {
            dec.n = 0;
            kda_tok_decode_text(t, ids.v, ids.n, 0, &dec);
            trip &= dec.n == len + 17 && !memcmp(dec.v, "<|begin_of_text|>", 17) && !memcmp(dec.v + 17, s, len);
        }
        if (!trip) printf("  round trip fails: %.60s\n", s);
        trip_bad += !trip;
        json_decref(o);
    }
    free(line);
    fclose(f);
    kda_tok_ids_free(&ids);
    kda_tok_bytes_free(&dec);
    T_CHECK(n[0] == 341 && bad[0] == 0, "golden.jsonl bos=false: %d of %d lines exact", n[0] - bad[0], n[0]);
    T_CHECK(n[1] == 8 && bad[1] == 0, "golden.jsonl bos=true: %d of %d lines exact", n[1] - bad[1], n[1]);
    T_CHECK(trip_bad == 0, "golden.jsonl: decode(encode(x)) == x on every line (%d failures)", trip_bad);
}

static void test_basics(const kda_tokenizer *t, kda_tok_ctx *c) {
    kda_tok_ids ids = {0};
    const int32_t hello[] = {9906, 11, 1917, 0};
    encode(c, "Hello, world!", 13, 0, &ids);
    T_CHECK(same_ids(&ids, hello, 4), "\"Hello, world!\" -> [9906, 11, 1917, 0]");
    const int32_t hello_bos[] = {128000, 9906, 11, 1917, 0};
    encode(c, "Hello, world!", 13, KDA_TOK_ADD_SPECIAL, &ids);
    T_CHECK(same_ids(&ids, hello_bos, 5), "with add_special: BOS 128000 first");
    encode(c, "", 0, 0, &ids);
    T_CHECK(ids.n == 0, "empty text -> no ids");
    encode(c, NULL, 0, KDA_TOK_ADD_SPECIAL, &ids);
    T_CHECK(ids.n == 1 && ids.v[0] == 128000, "empty text with add_special -> [128000]");
    encode(c, "a<|eot_id|>b", 12, 0, &ids);
    T_CHECK(ids.n == 3 && ids.v[1] == 128009, "special string in text -> its id (128009)");
    encode(c, "a<|eot_id|>b", 12, KDA_TOK_SPECIAL_AS_TEXT, &ids);
    int none = 1;
    for (size_t i = 0; i < ids.n; i++) none &= ids.v[i] < 128000;
    T_CHECK(ids.n > 3 && none, "specials as text: <|eot_id|> is %zu ordinary tokens", ids.n);
    encode(c, "<|begin_of_text|><|end_of_text|>", 32, 0, &ids);
    T_CHECK(ids.n == 2 && ids.v[0] == 128000 && ids.v[1] == 128001, "adjacent specials");
    encode(c, "<|eot_id|", 9, 0, &ids);
    T_CHECK(ids.n > 1 && ids.v[0] < 128000, "a truncated special is text");
    // Regex semantics, ids from HF tokenizers: U+180E is not whitespace (PCRE2's UCP \s says it
    // is), \s+(?!\S) leaves the last space to the next word, digits go in threes.
    static const struct {
        const char *text;
        int32_t ids[8];
        int n;
    } hf[] = {
        {"a \xE1\xA0\x8E b", {64, 87189, 254, 236, 293}, 5},
        {"x\xE3\x80\x80\xE3\x80\x80y", {87, 23249, 23249, 88}, 4},
        {"a  \n\n  b", {64, 19124, 220, 293}, 4},
        {"12345678", {4513, 10961, 2495}, 3},
    };
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
        encode(c, hf[i].text, strlen(hf[i].text), 0, &ids);
        T_CHECK(same_ids(&ids, hf[i].ids, (size_t)hf[i].n), "regex semantics as HF: case %zu", i);
    }
    T_CHECK(kda_tok_vocab_size(t) == 128256 && kda_tok_bos_id(t) == 128000, "vocab 128256, BOS 128000");
    char buf[64];
    T_CHECK(kda_tok_id_to_token(t, 1917, buf, sizeof buf) == 7 && !strcmp(buf, "\xC4\xA0world"),
            "id_to_token(1917) == \"Ġworld\"");
    T_CHECK(kda_tok_id_to_token(t, 128001, buf, sizeof buf) > 0 && !strcmp(buf, "<|end_of_text|>"),
            "id_to_token(128001) == \"<|end_of_text|>\"");
    T_CHECK(kda_tok_token_to_id(t, "<|end_of_text|>") == 128001 && kda_tok_token_to_id(t, "\xC4\xA0world") == 1917 &&
                kda_tok_token_to_id(t, "no-such-token-xyz") == -1,
            "token_to_id: specials, byte-level strings, unknown -> -1");
    size_t len;
    const char *p = kda_tok_piece(t, 1917, &len);
    T_CHECK(p && len == 6 && !memcmp(p, " world", 6) && !kda_tok_piece(t, 128256, &len) &&
                kda_tok_is_special(t, 128009) && !kda_tok_is_special(t, 1917),
            "piece(1917) == \" world\"; out-of-range id has no piece; is_special");
    int32_t bad_ids[] = {9906, -1, 128256, 0};
    kda_tok_bytes b = {0};
    size_t unknown = kda_tok_decode(t, bad_ids, 4, 0, &b);
    T_CHECK(unknown == 2 && b.n == 6 && !memcmp(b.v, "Hello!", 6), "decode skips and counts ids that are not tokens");
    kda_tok_bytes_free(&b);
    kda_tok_ids_free(&ids);
}

// The bytes Python's bytes.decode("utf-8", errors="replace") gives, re-encoded.
static void test_invalid_utf8(kda_tok_ctx *c) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\xff", "\xEF\xBF\xBD"},
        {"a\xE2\x82"
         "b",
         "a\xEF\xBF\xBD"
         "b"},                                                                    // truncated 3-byte: one U+FFFD
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},                 // surrogate: three
        {"\xF0\x9F\x98", "\xEF\xBF\xBD"},                                         // truncated emoji: one
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                                 // overlong: two
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, // > U+10FFFF: four
        {"\xE0\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"x\x80\x80y\xF0\x9F\x98\x80", "x\xEF\xBF\xBD\xEF\xBF\xBDy\xF0\x9F\x98\x80"},
    };
    int ok = 1;
    kda_tok_ids a = {0}, b = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kda_tok_bytes s = {0};
        kda_utf8_sanitize(cases[i].in, strlen(cases[i].in), &s);
        int same = s.n == strlen(cases[i].want) && !memcmp(s.v, cases[i].want, s.n);
        encode(c, cases[i].in, strlen(cases[i].in), 0, &a);
        encode(c, cases[i].want, strlen(cases[i].want), 0, &b);
        same &= a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof(int32_t));
        if (!same) printf("  invalid UTF-8 case %zu differs from Python's errors='replace'\n", i);
        ok &= same;
        kda_tok_bytes_free(&s);
    }
    T_CHECK(ok, "invalid UTF-8: maximal subparts -> U+FFFD, as Python/Rust; ids as for the repaired text");
    kda_tok_ids_free(&a);
    kda_tok_ids_free(&b);
}

// Naive BPE: merge the lowest-rank adjacent pair (leftmost on ties) until none is left.
static size_t naive_bpe(const kda_tokenizer *t, const char *p, size_t n, int32_t *sym) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) sym[m++] = t->byte_id[(uint8_t)p[i]];
    for (;;) {
        size_t best = m;
        uint32_t br = TOK_NO_RANK;
        int32_t bid = -1;
        for (size_t i = 0; i + 1 < m; i++) {
            const tok_merge_slot *s = tok_merge_find(t, sym[i], sym[i + 1]);
            if (s && s->rank < br) br = s->rank, bid = s->id, best = i;
        }
        if (best == m) return m;
        sym[best] = bid;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof *sym);
        m--;
    }
}

// Long words take the heap path, short ones the scan; both must equal the naive loop.
static void test_bpe_paths(const kda_tokenizer *t, kda_tok_ctx *c, kda_rng *rng) {
    static const char *alpha[] = {"a", "e", "i", "o", "u", "n", "s", "t", "r", "l", "q", "z", "\xC3\xA9", "\xD0\xB4"};
    int bad = 0, n_long = 0;
    kda_tok_ids ids = {0};
    int32_t *ref = kda_malloc(sizeof(int32_t) * 4096);
    char word[2048];
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 0, target = 2 + kda_rng_below(rng, trial % 3 ? 40 : 1500);
        while (n < target) {
            const char *a = alpha[kda_rng_below(rng, 14)];
            memcpy(word + n, a, strlen(a));
            n += strlen(a);
        }
        encode(c, word, n, 0, &ids); // one \p{L}+ pre-token
        size_t m = naive_bpe(t, word, n, ref);
        if (t->ignore_merges) { // a word in the vocab is one id
            int32_t whole = tok_vocab_find(t, word, n, tok_hash(word, n));
            if (whole >= 0) ref[0] = whole, m = 1;
        }
        bad += !(ids.n == m && !memcmp(ids.v, ref, m * sizeof(int32_t)));
        n_long += n > 48;
    }
    T_CHECK(bad == 0, "BPE scan and heap paths == naive merge loop (300 words, %d long; %d differ)", n_long, bad);
    free(ref);
    kda_tok_ids_free(&ids);
}

// Random bytes: never a crash; decode(encode(x)) == x with invalid UTF-8 repaired.
static void test_random_bytes(const kda_tokenizer *t, kda_tok_ctx *c, kda_rng *rng, int rounds) {
    static const char *frag[] = {"<|eot_id|>",
                                 "<|begin_of_text|>",
                                 "<|",
                                 "|>",
                                 "'s",
                                 "'LL",
                                 " ",
                                 "\n",
                                 "\r\n",
                                 "  ",
                                 "\t",
                                 "123456",
                                 "\xF0\x9F\x98\x80",
                                 "\xE2\x80\xAF",
                                 "\xC2\x85",
                                 "\xE1\xA0\x8E"};
    int bad = 0;
    kda_tok_bytes s = {0}, want = {0}, got = {0};
    kda_tok_ids ids = {0};
    for (int r = 0; r < rounds; r++) {
        s.n = 0;
        size_t len = kda_rng_below(rng, 300);
        while (s.n < len) {
            uint64_t k = kda_rng_below(rng, 10);
            if (k < 3) {
                const char *f = frag[kda_rng_below(rng, sizeof frag / sizeof frag[0])];
                kda_tok_bytes_append(&s, f, strlen(f));
            } else {
                char b = (char)(k < 6       ? kda_rng_below(rng, 256)
                                    : k < 8 ? 0x80 + kda_rng_below(rng, 0x80)
                                            : 0x20 + kda_rng_below(rng, 0x5f));
                kda_tok_bytes_append(&s, &b, 1);
            }
        }
        encode(c, s.v, s.n, r & 1 ? KDA_TOK_SPECIAL_AS_TEXT : 0, &ids);
        want.n = got.n = 0;
        kda_utf8_sanitize(s.v, s.n, &want);
        kda_tok_decode(t, ids.v, ids.n, 0, &got);
        int ok = got.n == want.n && (!got.n || !memcmp(got.v, want.v, got.n));
        for (size_t i = 0; i < ids.n; i++) ok &= ids.v[i] >= 0 && ids.v[i] < kda_tok_vocab_size(t);
        bad += !ok;
    }
    T_CHECK(bad == 0, "random bytes (%d strings): decode(encode(x)) == x with U+FFFD repairs (%d differ)", rounds, bad);
    kda_tok_bytes_free(&s);
    kda_tok_bytes_free(&want);
    kda_tok_bytes_free(&got);
    kda_tok_ids_free(&ids);
}

// Very long runs: the JIT stack overflows and the interpreter takes over; BPE on huge words.
static void test_long_runs(const kda_tokenizer *t, kda_tok_ctx *c) {
    size_t n = 1 << 18;
    char *s = kda_malloc(n + 1);
    int ok = 1;
    const char fill[] = {' ', 'a', '7', '\n', '!'};
    kda_tok_ids ids = {0};
    kda_tok_bytes b = {0};
    double t0 = kda_now();
    for (int k = 0; k < 5; k++) {
        memset(s, fill[k], n);
        s[n - 1] = 'x';
        encode(c, s, n, 0, &ids);
        b.n = 0;
        kda_tok_decode(t, ids.v, ids.n, 0, &b);
        ok &= b.n == n && !memcmp(b.v, s, n);
        printf("    fill '%c': %zu ids, %.2f s\n", fill[k] == '\n' ? 'n' : fill[k], ids.n, kda_now() - t0);
    }
    T_CHECK(ok, "256 KiB runs of ' ', 'a', '7', '\\n', '!' round-trip (%.2f s)", kda_now() - t0);
    free(s);
    kda_tok_ids_free(&ids);
    kda_tok_bytes_free(&b);
}

// A .model file written from the HF vocab must load and encode identically (Llama 3's merges
// are consistent with its ranks). Meta's own tokenizer.model (not in this repository) holds the
// same 128000 ranks for the same bytes: compared rank by rank in session 42, so this file stands
// for it.
static void test_tiktoken(const kda_tokenizer *hf, kda_tok_ctx *hc, kda_rng *rng) {
    char path[] = "/tmp/kda_test_tok_XXXXXX";
    int fd = mkstemp(path);
    KDA_CHECK(fd >= 0, "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int32_t id = 0; id < 128000; id++) {
        size_t n;
        const uint8_t *p = (const uint8_t *)kda_tok_piece(hf, id, &n);
        for (size_t i = 0; i < n; i += 3) {
            uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
            fputc(b64[v >> 18], f);
            fputc(b64[(v >> 12) & 63], f);
            fputc(i + 1 < n ? b64[(v >> 6) & 63] : '=', f);
            fputc(i + 2 < n ? b64[v & 63] : '=', f);
        }
        fprintf(f, " %d\n", id);
    }
    fclose(f);
    {
        kda_tokenizer *t = kda_tok_load_tiktoken_llama3(path);
        kda_tok_ctx *c = kda_tok_ctx_new(t);
        kda_tok_ids a = {0}, b = {0};
        int bad = 0;
        FILE *g = kda_fopen(GOLDEN, "r");
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, g) > 0) {
            json_t *o = json_loads(line, JSON_ALLOW_NUL, NULL);
            const json_t *text = json_object_get(o, "text");
            unsigned flags = json_is_true(json_object_get(o, "bos")) ? KDA_TOK_ADD_SPECIAL : 0;
            encode(c, json_string_value(text), json_string_length(text), flags, &a);
            encode(hc, json_string_value(text), json_string_length(text), flags, &b);
            bad += !(a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof(int32_t)));
            json_decref(o);
        }
        free(line);
        fclose(g);
        for (int r = 0; r < 200; r++) { // random words: merges derived from ranks == HF merges
            char w[64];
            size_t n = 1 + kda_rng_below(rng, 30);
            w[0] = ' ';
            for (size_t i = 1; i < n; i++) w[i] = (char)('a' + kda_rng_below(rng, 26));
            encode(c, w, n, 0, &a);
            encode(hc, w, n, 0, &b);
            bad += !(a.n == b.n && !memcmp(a.v, b.v, a.n * sizeof(int32_t)));
        }
        T_CHECK(bad == 0 && kda_tok_vocab_size(t) == 128256 && kda_tok_token_to_id(t, "<|eot_id|>") == 128009,
                "tiktoken .model written from tokenizer.json: golden + 200 random words == tokenizer.json (%d differ)",
                bad);
        kda_tok_ids_free(&a);
        kda_tok_ids_free(&b);
        kda_tok_ctx_free(c);
        kda_tok_free(t);
    }
    unlink(path);
}

int main(void) {
    kda_rng rng;
    kda_rng_seed(&rng, t_seed());
    int san = getenv("KDA_SAN") != NULL;
    double t0 = kda_now();
    kda_tokenizer *t = kda_tok_load_hf(TOK_JSON);
    printf("loaded %s in %.2f s\n", TOK_JSON, kda_now() - t0);
    kda_tok_ctx *c = kda_tok_ctx_new(t);
    test_basics(t, c);
    test_golden(t, c);
    test_invalid_utf8(c);
    test_bpe_paths(t, c, &rng);
    test_random_bytes(t, c, &rng, san ? 3000 : 20000);
    test_long_runs(t, c);
    test_tiktoken(t, c, &rng);
    kda_tok_ctx_free(c);
    kda_tok_free(t);
    return t_done("test_tokenizer");
}
