// tokenizer.h — byte-level BPE tokenizer (Llama 3 and the GPT-2 family): text <-> token ids.
//
// Promises:
// * Loads a Hugging Face tokenizer.json (model BPE with vocab, merges in the "a b" or [a, b]
//   form, ignore_merges; pre-tokenizer Split(regex, Isolated) + ByteLevel(use_regex false),
//   or ByteLevel(use_regex true) alone; added tokens; TemplateProcessing post-processor) and a
//   tiktoken .model file (base64 bytes + rank per line) with a list of special tokens.
//   Anything outside that subset is refused with a message naming the file and the field.
// * Encoding gives exactly the ids of Hugging Face `tokenizers` (Tokenizer.encode) and of
//   tiktoken for the .model form: added tokens found first (leftmost, then longest match;
//   the text between them is pre-tokenized separately), the split regex runs through PCRE2
//   (JIT, UTF + UCP; \s and \S are rewritten to the Unicode White_Space set that Rust and
//   Oniguruma use), each pre-token is byte-level BPE encoded with lowest merge rank first,
//   leftmost on ties; with ignore_merges a pre-token that is itself in the vocab is one id.
// * Invalid UTF-8 in the input never fails: every maximal invalid subsequence is replaced by
//   U+FFFD before encoding (Unicode's "maximal subpart" rule), which is what Python's
//   bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy do; so the
//   ids equal HF's ids for the Python string that such a decode gives.
// * Decoding concatenates the tokens' bytes; kda_tok_decode_text also replaces invalid UTF-8
//   by U+FFFD like HF's ByteLevel decoder. decode(encode(x)) == x for valid UTF-8 x.
// * A loaded kda_tokenizer is read-only and may be shared by threads; each thread encodes
//   through its own kda_tok_ctx (regex match state, scratch buffers, a cache of recent words).
// * Load errors and out-of-memory end the program through kda_die with a clear message.
#ifndef KDA_TOKENIZER_H
#define KDA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config.h"

typedef struct kda_tokenizer kda_tokenizer;
typedef struct kda_tok_ctx kda_tok_ctx;

// A growable array of token ids; encode appends to it. Zero-initialise, free with kda_tok_ids_free.
typedef struct {
    int32_t *v;
    size_t n, cap;
} kda_tok_ids;

// A growable byte buffer; decode appends to it (not NUL-terminated; see kda_tok_bytes_cstr).
typedef struct {
    char *v;
    size_t n, cap;
} kda_tok_bytes;

// The Llama 3 pre-split regex (the same in tokenizer.json and Meta's tiktoken code).
#define KDA_TOK_LLAMA3_PATTERN                                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"           \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define KDA_TOK_DEFAULT_PATH "data/tokenizer/llama3/tokenizer.json"

// Hugging Face tokenizer.json.
kda_tokenizer *kda_tok_load_hf(const char *path);

// tiktoken .model: "base64(token bytes) rank" per line; ranks are the ids and the merge
// priorities. special[i] gets id special_ids[i] (or n_ranks + i when special_ids is NULL);
// pattern NULL means KDA_TOK_LLAMA3_PATTERN; bos_id < 0 means encode never adds a BOS.
typedef struct {
    const char *pattern;
    const char *const *special;
    const int32_t *special_ids;
    int n_special;
    int32_t bos_id;
} kda_tiktoken_opts;
kda_tokenizer *kda_tok_load_tiktoken(const char *path, const kda_tiktoken_opts *opts);
// The Llama 3 special tokens (the 256 names of tokenizer.json, ids 128000..128255) and BOS 128000.
kda_tokenizer *kda_tok_load_tiktoken_llama3(const char *path);

// A tokenizer file by its name, the one place that decides the type: a ".model" suffix is a
// tiktoken file with the Llama 3 specials (kda_tok_load_tiktoken_llama3), anything else a
// tokenizer.json (kda_tok_load_hf).
kda_tokenizer *kda_tok_load_path(const char *path);

// The tokenizer a model config names, for a command `who` ("kda eval"): NULL for tokenizer_type
// byte (an override other than "bytes" dies: a byte-level model takes no tokenizer file); for
// HuggingFaceTokenizer the file `override` (when not NULL; "bytes" dies) or tokenizer_model; any
// other type, or an empty path, dies naming who. Warns on stderr when the tokenizer has more
// ids than the model's vocab_size.
kda_tokenizer *kda_tok_load_for_config(const kda_config *cfg, const char *override, const char *who);

void kda_tok_free(kda_tokenizer *tok);

int32_t kda_tok_vocab_size(const kda_tokenizer *tok); // max id + 1 (128256 for Llama 3)
int32_t kda_tok_bos_id(const kda_tokenizer *tok);     // first id the post-processor adds, or -1
// Id of a token written as HF writes it (added-token content, or the byte-level string such as
// "Ġworld"); -1 when there is none. E.g. kda_tok_token_to_id(t, "<|end_of_text|>") == 128001.
int32_t kda_tok_token_to_id(const kda_tokenizer *tok, const char *token);
// The raw bytes of a token (for added tokens their content); NULL for an unused id.
const char *kda_tok_piece(const kda_tokenizer *tok, int32_t id, size_t *len);
// The token as HF's id_to_token writes it (byte-level string, e.g. "Ġworld"), NUL-terminated,
// written to out (at most cap bytes); returns its length, or -1 for an unused id or if too long.
int kda_tok_id_to_token(const kda_tokenizer *tok, int32_t id, char *out, size_t cap);
int kda_tok_is_special(const kda_tokenizer *tok, int32_t id); // an added token marked special

kda_tok_ctx *kda_tok_ctx_new(const kda_tokenizer *tok);
void kda_tok_ctx_free(kda_tok_ctx *ctx);

enum {
    KDA_TOK_ADD_SPECIAL = 1,     // HF add_special_tokens: the post-processor's BOS (Llama 3: 128000)
    KDA_TOK_SPECIAL_AS_TEXT = 2, // special-token strings in the text are ordinary text
};
// Appends the ids of text[0..len) to out. Any bytes are accepted (see invalid UTF-8 above).
void kda_tok_encode(kda_tok_ctx *ctx, const char *text, size_t len, unsigned flags, kda_tok_ids *out);

// Appends the bytes of ids to out (special tokens as their content unless skip_special).
// Returns the number of ids that are not tokens (they are skipped, as HF does).
size_t kda_tok_decode(const kda_tokenizer *tok, const int32_t *ids, size_t n, int skip_special, kda_tok_bytes *out);
// Same, then invalid UTF-8 replaced by U+FFFD: always valid UTF-8.
size_t kda_tok_decode_text(const kda_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                           kda_tok_bytes *out);

void kda_tok_ids_push(kda_tok_ids *a, int32_t id);
void kda_tok_ids_free(kda_tok_ids *a);
void kda_tok_bytes_append(kda_tok_bytes *b, const void *p, size_t n);
const char *kda_tok_bytes_cstr(kda_tok_bytes *b); // NUL-terminates (the NUL is not counted in n)
void kda_tok_bytes_free(kda_tok_bytes *b);

// UTF-8 helpers used by the tokenizer and its command-line tools.
// Length of the longest valid UTF-8 prefix of s[0..n).
size_t kda_utf8_valid_prefix(const char *s, size_t n);
// Appends s[0..n) to out with each maximal invalid subsequence replaced by U+FFFD (EF BF BD).
void kda_utf8_sanitize(const char *s, size_t n, kda_tok_bytes *out);

// Streaming decoded text (generated ids, one token at a time): a token may end inside a
// multi-byte character. The caller appends each token's bytes to pend (e.g. kda_tok_decode);
// kda_utf8_stream_flush writes pend to f with invalid UTF-8 replaced by U+FFFD (as
// kda_utf8_sanitize), except, unless final, a trailing incomplete character (a lead byte and
// fewer continuation bytes than it announces), which stays in pend for the next token; then
// fflush(f). So the stream equals the sanitized decode of all the ids. Zero-initialise.
typedef struct {
    kda_tok_bytes pend, clean; // clean: scratch
} kda_utf8_stream;
// Returns 0, or -1 when writing to f failed. Nothing pending: writes nothing.
int kda_utf8_stream_flush(kda_utf8_stream *s, FILE *f, int final);
void kda_utf8_stream_free(kda_utf8_stream *s);

#endif
