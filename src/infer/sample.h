// sample.h — the short text sample that training prints at its end.
//
// The ids come from the generator of `kda generate` (generate.h): the prompt through the chunked
// form, then one token at a time through the recurrent state, drawn by its sampler at
// temperature 0.8 (no top-k / top-p / repetition penalty) from the seed ^ 0x5eed stream; the
// run does not stop at an end-of-text id. Printed to stdout:
//   ---- sample (temperature 0.8) ----
//   <prompt><n generated tokens as text>
//   ----------------------------------
#ifndef KDA_SAMPLE_H
#define KDA_SAMPLE_H
#include <stdint.h>
#include "base/config.h"
#include "model/model.h"
#include "text/tokenizer.h"
// Print prompt + n generated tokens to stdout as text. The context starts as a document does in
// training: without a tokenizer (tok NULL: tokenizer_type byte), bos_token_id (when set) and the
// prompt's bytes; with one (the run's tokenizer_model, loaded by the caller), the prompt encoded
// with its BOS, as `kda tokenize` encodes documents. Sampled ids are printed as they come: bytes
// (an id past 255 as '?'), or the tokenizer's pieces (special tokens as their text, invalid UTF-8
// as U+FFFD, an unfinished character held back until the next token). A prompt id outside the
// vocabulary prints one "(sample skipped: ...)" line instead. The model's activation buffers are
// used as scratch.
void kda_sample_print(kda_model *m, const kda_config *c, const kda_tokenizer *tok, const char *prompt, int n,
                      uint64_t seed);
#endif
