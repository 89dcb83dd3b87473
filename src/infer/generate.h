// generate.h — text generation with the recurrent state of the model (kda-model.md §2, §3.1, §2.9).
//
// The decoder keeps, per layer, a fixed state (kda_decode_state, model.h): the conv tail (the
// last W−1 pre-conv inputs of the q, k and v channels) and the KDA state S [H, K, Vd] in fp32,
// in the model's backend memory. Feeding tokens runs the model's own layer math through its op
// table (kda_model_decode: one model definition, CPU or CUDA), continuing the conv from the tails
// and the KDA core from S, and leaves the final hidden state; logits are computed from it on
// request. Memory is fixed at creation: it does not grow with the number of tokens fed or
// generated (kda_decoder_state_bytes and kda_decoder_total_bytes are constant).
//
// A prompt is fed in blocks of up to `block` tokens (at most the model's planned T): a block goes
// through the chunked form of the core (prefill) starting from the state the previous block left;
// single tokens (decode steps) through the recurrent form.
//
// Sampling follows Hugging Face generate: the repetition penalty (every id already in the
// prompt or generated: a positive logit divided by the penalty, a negative one multiplied),
// then — when sampling (temperature > 0) — temperature, top-k (ties with the k-th value kept),
// top-p (smallest set, from the most probable down, whose mass reaches top_p; at least one
// token), then one draw from the renormalised distribution. Temperature 0 is greedy (argmax
// of the penalised logits; the first index on ties).
#ifndef KDA_GENERATE_H
#define KDA_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "model/model.h"

#define KDA_GEN_BLOCK 512 // default prompt block (the model's T when `kda generate` plans it)

typedef struct kda_decoder kda_decoder;

// A decoder for m (its weights as they are at each call), state zeroed; prompt blocks of up to
// `block` tokens (0 or more than m->T: m->T). The model must outlive it; its activation buffers
// are the decoder's scratch.
kda_decoder *kda_decoder_create(kda_model *m, int block);
void kda_decoder_free(kda_decoder *d);
// Zero the state (a new sequence starts).
void kda_decoder_reset(kda_decoder *d);
// Advance the state by n tokens (any n >= 0; ids checked against the vocabulary).
void kda_decoder_feed(kda_decoder *d, const int32_t *ids, int n);
// Logits [vocab_size] after the last fed token (dies if nothing was fed since the reset).
// The pointer stays valid until the next call on d.
const float *kda_decoder_logits(kda_decoder *d);
// Tokens fed since the reset.
long kda_decoder_position(const kda_decoder *d);
// Bytes of recurrent state (conv tails + KDA states of all layers); constant.
size_t kda_decoder_state_bytes(const kda_decoder *d);
// Bytes of everything the decoder allocated (state, last hidden, logits); constant. The model's
// activation buffers (planned for m->B x m->T) come on top.
size_t kda_decoder_total_bytes(const kda_decoder *d);

// ---- sampling -------------------------------------------------------------------------------

typedef struct {
    float temperature;        // 0 => greedy
    int top_k;                // 0 => off
    float top_p;              // 1 => off; in (0, 1]
    float repetition_penalty; // 1 => off; > 0
} kda_sampling;

typedef struct kda_sampler kda_sampler;

// Dies naming the bad field when s is out of range.
kda_sampler *kda_sampler_create(int vocab_size, const kda_sampling *s, uint64_t seed);
void kda_sampler_free(kda_sampler *s);
// Forget the seen ids (a new sequence); the RNG continues.
void kda_sampler_reset(kda_sampler *s);
// Mark an id as seen (prompt ids and generated ids; used by the repetition penalty).
void kda_sampler_observe(kda_sampler *s, int32_t id);
// Choose the next id from logits [vocab_size] (not modified). Does not observe it.
int32_t kda_sampler_pick(kda_sampler *s, const float *logits);

// ---- the generation loop ----------------------------------------------------------------------

typedef struct {
    double prefill_s;     // feeding the prompt
    double first_token_s; // from the start to the first generated id (prefill + logits + pick)
    double decode_s;      // from the first generated id to the last
    int prompt_tokens, new_tokens;
    int stopped_at_eos;
} kda_gen_stats;

// Called with each generated id (eos included when it ends the run); return non-zero to stop.
typedef int (*kda_gen_token_fn)(int32_t id, void *arg);

// Reset d and s, feed the prompt (n_prompt >= 1 ids, observed by s), then generate up to
// max_new ids, stopping after eos_id (when >= 0). Returns the number of ids generated.
int kda_generate(kda_decoder *d, kda_sampler *s, const int32_t *prompt, int n_prompt, int max_new, int32_t eos_id,
                 kda_gen_token_fn on_token, void *arg, kda_gen_stats *stats);

#endif
