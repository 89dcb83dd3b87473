// sample.c — see sample.h.
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

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

void kda_sample_print(kda_model *m, const kda_config *c, const char *prompt, int n, uint64_t seed) {
    if (strcmp(c->tokenizer_type, "byte")) {
        printf("(sample skipped: needs the byte tokenizer; use `kda generate` for %s)\n", c->tokenizer_type);
        return;
    }
    int T = m->T, NV = c->vocab_size;
    int32_t *ctx = kda_malloc(sizeof(int32_t) * (size_t)(strlen(prompt) + n + 1));
    int len = 0;
    for (const char *p = prompt; *p; p++) ctx[len++] = (unsigned char)*p;
    if (len == 0) ctx[len++] = '\n';
    float *logits = kda_malloc(sizeof(float) * NV);
    kda_rng rng;
    kda_rng_seed(&rng, seed ^ 0x5eed);
    printf("---- sample (temperature 0.8) ----\n%s", prompt);
    for (int i = 0; i < n; i++) {
        int start = len > T ? len - T : 0;
        kda_model_last_logits(m, ctx + start, 1, len - start, logits);
        int tok = kda_sample_token(logits, NV, 0.8f, &rng);
        ctx[len++] = tok;
        putchar(tok < 256 ? tok : '?');
        fflush(stdout);
    }
    printf("\n----------------------------------\n");
    free(logits);
    free(ctx);
}
