// sample.h — text samples from a model (temperature sampling over the full context window).
// The recurrent constant-memory decoder comes with `kda generate` (issue 5); this is the
// short sample that training prints at its end.
#ifndef KDA_SAMPLE_H
#define KDA_SAMPLE_H
#include <stdint.h>
#include "common.h"
#include "config.h"
#include "model.h"
// Print prompt + n generated tokens to stdout (byte vocabulary: bytes as text).
void kda_sample_print(kda_model *m, const kda_config *c, const char *prompt, int n, uint64_t seed);
// Draw one token from logits with temperature (0 => argmax).
int kda_sample_token(const float *logits, int NV, float temperature, kda_rng *rng);
#endif
