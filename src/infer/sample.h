// sample.h — text samples from a model (temperature sampling over the full context window).
// The recurrent constant-memory decoder comes with `kda generate`; this is the short sample
// that training prints at its end.
#ifndef KDA_SAMPLE_H
#define KDA_SAMPLE_H
#include <stdint.h>
#include "base/common.h"
#include "base/config.h"
#include "model/model.h"
// Print prompt + n generated tokens to stdout as text. The context starts as a document does in
// training: tokenizer_type byte, bos_token_id (when set) and the prompt's bytes;
// HuggingFaceTokenizer, the prompt encoded by the tokenizer named by tokenizer_model with its
// BOS, as `kda tokenize` encodes documents. Sampled ids are decoded as they come (bytes, or the
// tokenizer's pieces: special tokens as their text, invalid UTF-8 as U+FFFD).
void kda_sample_print(kda_model *m, const kda_config *c, const char *prompt, int n, uint64_t seed);
// Draw one token from logits with temperature (0 => argmax).
int kda_sample_token(const float *logits, int NV, float temperature, kda_rng *rng);
#endif
