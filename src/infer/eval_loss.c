// eval_loss.c — validation loss / perplexity over a token stream (see eval.h): a Megatron
// dataset's documents in order (as GPTDataset concatenates them: whatever separators the
// documents carry are part of the stream), or a text file tokenized whole.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"
#include "data/indexed_dataset.h"

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

int32_t *kda_eval_read_token_stream(const char *path, kda_eval_codec *codec, int vocab, size_t *n) {
    char prefix[4096], idx[4200], bin[4200];
    snprintf(prefix, sizeof prefix, "%s", path);
    if (has_suffix(prefix, ".bin") || has_suffix(prefix, ".idx")) prefix[strlen(prefix) - 4] = 0;
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    if (kda_eval_file_exists(idx) && kda_eval_file_exists(bin)) {
        kda_indexed *d = kda_indexed_open(prefix);
        kda_indexed_set_vocab(d, vocab);
        uint64_t total = kda_indexed_num_tokens(d), S = kda_indexed_num_sequences(d);
        const int32_t *lens = kda_indexed_seq_lengths(d);
        int32_t *out = kda_malloc(sizeof(int32_t) * (size_t)(total ? total : 1));
        uint64_t at = 0;
        for (uint64_t s = 0; s < S; s++) {
            kda_indexed_read(d, s, 0, (uint64_t)lens[s], out + at);
            at += (uint64_t)lens[s];
        }
        kda_indexed_close(d);
        *n = (size_t)at;
        return out;
    }
    if (!kda_eval_file_exists(path))
        kda_die("--data-path '%s': neither a Megatron dataset (%s.bin + %s.idx) nor a text file", path, prefix, prefix);
    size_t len;
    char *text = kda_eval_read_file(path, &len);
    kda_tok_ids ids = {0};
    kda_eval_encode_text(codec, text, len, &ids);
    free(text);
    for (size_t i = 0; i < ids.n; i++)
        if (ids.v[i] < 0 || ids.v[i] >= vocab)
            kda_die("'%s': token id %d (position %zu) is outside the model's vocabulary of %d; the tokenizer does not "
                    "match the model",
                    path, ids.v[i], i, vocab);
    *n = ids.n;
    return ids.v ? ids.v : kda_malloc(sizeof(int32_t));
}

void kda_eval_val_loss(const int32_t *tokens, size_t n, int T, long limit, const kda_eval_lm *lm, int rows,
                       kda_eval_loss *out, FILE *progress) {
    if (T < 1) kda_die("validation loss: the window length must be >= 1 (got %d)", T);
    if (n < 2) kda_die("validation loss: the token stream has %zu tokens; at least 2 are needed", n);
    long windows = (long)((n - 1 + (size_t)T - 1) / (size_t)T);
    if (limit > 0 && limit < windows) windows = limit;
    if (rows < 1) rows = 1;
    int32_t *ids = kda_malloc(sizeof(int32_t) * (size_t)rows * T), *tgt = kda_malloc(sizeof(int32_t) * (size_t)rows * T);
    double sum = 0, t0 = kda_now(), last = t0;
    long count = 0;
    for (long w0 = 0; w0 < windows; w0 += rows) {
        int B = (int)(windows - w0 < rows ? windows - w0 : rows);
        for (int b = 0; b < B; b++) {
            size_t start = (size_t)(w0 + b) * (size_t)T;
            for (int t = 0; t < T; t++) {
                size_t i = start + (size_t)t;
                ids[(size_t)b * T + t] = i < n ? tokens[i] : 0;
                tgt[(size_t)b * T + t] = i + 1 < n ? tokens[i + 1] : -100;
            }
        }
        long valid = 0;
        sum += lm->nll(lm->self, ids, tgt, B, T, &valid);
        count += valid;
        double now = kda_now();
        if (progress && (now - last >= 1.0 || w0 + B >= windows)) {
            fprintf(progress, "kda eval: val_loss %ld/%ld windows, %.0f tokens/s\n", w0 + B, windows,
                    count / (now - t0 > 1e-9 ? now - t0 : 1e-9));
            fflush(progress);
            last = now;
        }
    }
    free(ids);
    free(tgt);
    out->tokens = count;
    out->windows = windows;
    out->stream_tokens = (long)n;
    out->loss = sum / (double)count;
    out->perplexity = exp(out->loss);
}
