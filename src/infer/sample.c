// sample.c — see sample.h. The ids come from the generator of `kda generate` (generate.h); only
// the context and the printing are the sample's own.
#include "infer/sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/generate.h"
#include "text/tokenizer.h"

#define SAMPLE_TEMPERATURE 0.8f
#define SAMPLE_SEED_SALT 0x5eed

typedef struct {
    const kda_tokenizer *tok; // NULL: byte ids
    kda_utf8_stream out;
} printer;

static int print_token(int32_t id, void *arg) {
    printer *p = arg;
    if (!p->tok) {
        putchar(id < 256 ? id : '?');
        fflush(stdout);
    } else {
        kda_tok_decode(p->tok, &id, 1, 0, &p->out.pend); // special tokens as their text, e.g. <|end_of_text|>
        kda_utf8_stream_flush(&p->out, stdout, 0);       // an unfinished UTF-8 character waits
    }
    return 0;
}

// The context a document starts with in training (see sample.h); 0 when a prompt id is outside
// the vocabulary (the sample is skipped, saying so).
static int prompt_ids(const kda_config *c, const kda_tokenizer *tok, const char *prompt, kda_tok_ids *ctx) {
    if (!tok) {
        if (c->bos_token_id >= 0) kda_tok_ids_push(ctx, c->bos_token_id);
        for (const char *p = prompt; *p; p++) kda_tok_ids_push(ctx, (unsigned char)*p);
    } else {
        // as `kda tokenize` encodes a document: the post-processor's BOS (Llama 3: 128000), then the text
        kda_tok_ctx *tc = kda_tok_ctx_new(tok);
        kda_tok_encode(tc, prompt, strlen(prompt), KDA_TOK_ADD_SPECIAL, ctx);
        kda_tok_ctx_free(tc);
    }
    if (ctx->n == 0) kda_tok_ids_push(ctx, !tok ? '\n' : kda_tok_bos_id(tok) >= 0 ? kda_tok_bos_id(tok) : 0);
    for (size_t i = 0; i < ctx->n; i++)
        if (ctx->v[i] < 0 || ctx->v[i] >= c->vocab_size) {
            printf("(sample skipped: prompt token %d is outside vocab_size %d)\n", ctx->v[i], c->vocab_size);
            return 0;
        }
    return 1;
}

void kda_sample_print(kda_model *m, const kda_config *c, const kda_tokenizer *tok, const char *prompt, int n,
                      uint64_t seed) {
    kda_tok_ids ctx = {0};
    if (prompt_ids(c, tok, prompt, &ctx)) {
        kda_sampling how = {.temperature = SAMPLE_TEMPERATURE, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
        kda_sampler *s = kda_sampler_create(c->vocab_size, &how, seed ^ SAMPLE_SEED_SALT);
        kda_decoder *d = kda_decoder_create(m, 0);
        printer p = {.tok = tok};
        // the header names SAMPLE_TEMPERATURE
        printf("---- sample (temperature 0.8) ----\n%s", prompt);
        kda_generate(d, s, ctx.v, (int)ctx.n, n, -1, print_token, &p, NULL); // no stop at an end of text
        if (tok) kda_utf8_stream_flush(&p.out, stdout, 1);
        printf("\n----------------------------------\n");
        kda_utf8_stream_free(&p.out);
        kda_decoder_free(d);
        kda_sampler_free(s);
    }
    kda_tok_ids_free(&ctx);
}
