// sample.c — see sample.h.
#include "infer/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "text/tokenizer.h"

int kda_sample_token(const float *logits, int NV, float temperature, kda_rng *rng) {
    int best = 0;
    for (int i = 1; i < NV; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    double sum = 0;
    for (int i = 0; i < NV; i++) sum += exp((logits[i] - logits[best]) / temperature);
    double u = kda_rng_uniform(rng) * sum, acc = 0;
    for (int i = 0; i < NV; i++) {
        acc += exp((logits[i] - logits[best]) / temperature);
        if (acc >= u) return i;
    }
    return best;
}

// How many trailing bytes of s[0..n) could still become one character with more bytes: a lead
// byte and fewer continuation bytes than it announces.
static size_t unfinished_tail(const unsigned char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char b = s[n - back];
        if ((b & 0xC0) == 0x80) continue;
        size_t len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 1;
        return len > back ? back : 0;
    }
    return 0;
}

// Writes pend to stdout, invalid UTF-8 replaced by U+FFFD as the tokenizer's decode_text does,
// except (unless final) an unfinished character at its end: a token may end inside one.
static void flush_text(kda_tok_bytes *pend, kda_tok_bytes *clean, int final) {
    size_t keep = final ? 0 : unfinished_tail((const unsigned char *)pend->v, pend->n);
    size_t out = pend->n - keep;
    clean->n = 0;
    kda_utf8_sanitize(pend->v, out, clean);
    fwrite(clean->v, 1, clean->n, stdout);
    memmove(pend->v, pend->v + out, keep);
    pend->n = keep;
    fflush(stdout);
}

void kda_sample_print(kda_model *m, const kda_config *c, const char *prompt, int n, uint64_t seed) {
    int byte = !strcmp(c->tokenizer_type, "byte");
    if (!byte && strcmp(c->tokenizer_type, "HuggingFaceTokenizer")) {
        printf("(sample skipped: tokenizer_type %s is not known; use `kda generate`)\n", c->tokenizer_type);
        return;
    }
    int T = m->T, NV = c->vocab_size;
    kda_tok_ids ctx = {0};
    kda_tokenizer *tok = NULL;
    if (byte) {
        if (c->bos_token_id >= 0) kda_tok_ids_push(&ctx, c->bos_token_id);
        for (const char *p = prompt; *p; p++) kda_tok_ids_push(&ctx, (unsigned char)*p);
    } else {
        // as `kda tokenize` encodes a document: the post-processor's BOS (Llama 3: 128000), then the text
        tok = kda_tok_load_path(c->tokenizer_model);
        kda_tok_ctx *tc = kda_tok_ctx_new(tok);
        kda_tok_encode(tc, prompt, strlen(prompt), KDA_TOK_ADD_SPECIAL, &ctx);
        kda_tok_ctx_free(tc);
    }
    if (ctx.n == 0) kda_tok_ids_push(&ctx, byte ? '\n' : kda_tok_bos_id(tok) >= 0 ? kda_tok_bos_id(tok) : 0);
    for (size_t i = 0; i < ctx.n; i++)
        if (ctx.v[i] < 0 || ctx.v[i] >= NV) {
            printf("(sample skipped: prompt token %d is outside vocab_size %d)\n", ctx.v[i], NV);
            kda_tok_ids_free(&ctx);
            if (tok) kda_tok_free(tok);
            return;
        }
    float *logits = kda_malloc(sizeof(float) * NV);
    kda_rng rng;
    kda_rng_seed(&rng, seed ^ 0x5eed);
    kda_tok_bytes pend = {0}, clean = {0};
    printf("---- sample (temperature 0.8) ----\n%s", prompt);
    for (int i = 0; i < n; i++) {
        size_t start = ctx.n > (size_t)T ? ctx.n - (size_t)T : 0;
        kda_model_last_logits(m, ctx.v + start, 1, (int)(ctx.n - start), logits);
        int32_t id = kda_sample_token(logits, NV, 0.8f, &rng);
        kda_tok_ids_push(&ctx, id);
        if (byte) {
            putchar(id < 256 ? id : '?');
            fflush(stdout);
        } else {
            kda_tok_decode(tok, &id, 1, 0, &pend); // special tokens as their text, e.g. <|end_of_text|>
            flush_text(&pend, &clean, 0);
        }
    }
    if (!byte) flush_text(&pend, &clean, 1);
    printf("\n----------------------------------\n");
    kda_tok_bytes_free(&pend);
    kda_tok_bytes_free(&clean);
    free(logits);
    kda_tok_ids_free(&ctx);
    if (tok) kda_tok_free(tok);
}
