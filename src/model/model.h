// model.h — the KDA language model (kda-model.md §2), one definition for every backend.
//
// Promises: parameters are registered in FLA's order under FLA's names and shapes (§5.3)
// in one contiguous fp32 master buffer (plus a working copy when the backend computes in
// bf16) and one fp32 gradient buffer of the same layout; activations for a micro-batch of
// B x T tokens are planned once at creation (no allocation in the training step);
// forward + backward go through the backend's op table only (ops.h).
#ifndef KDA_MODEL_H
#define KDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "model/ops.h"

#define KDA_NAME_MAX 64

typedef struct {
    char name[KDA_NAME_MAX]; // FLA state-dict key, e.g. "model.layers.0.attn.q_proj.weight"
    int ndim;
    int shape[4];
    size_t offset, numel; // in floats, within the parameter buffers
    float weight_decay;   // §6.3 grouping: 0 or cfg.weight_decay
    int small;            // read in fp32 by its ops (ops.h role S): norm and conv weights, A_log, dt_bias
    size_t small_off;     // its floats in m->small (small parameters only)
} kda_param;

// Per-layer parameter indices into model->params.
typedef struct {
    int attn_norm, q_proj, k_proj, v_proj, q_conv, k_conv, v_conv, f_proj0, f_proj1, b_proj, A_log, dt_bias, g_proj0,
        g_proj1, g_proj1_bias, o_norm, o_proj, mlp_norm, gate_proj, up_proj, down_proj;
} kda_layer_params;

typedef struct kda_layer_acts kda_layer_acts; // activation buffers of one layer (model.c)

// Bytes of backend memory a model holds for micro-batch B x T, by part. One function of model.c
// sizes kda_model_create's buffers and computes this (kda_model_mem_of), so the two agree exactly.
typedef struct {
    size_t n_floats;     // parameter floats (each tensor padded to 16 floats)
    size_t n_alloc;      // floats per parameter buffer: n_floats + KDA_SHARD_SLACK
    size_t embed_floats; // of n_floats: the (tied) embedding
    size_t params;       // fp32 masters, and the working copy when the backend keeps one
    size_t grads;        // fp32 gradients
    size_t optim;        // AdamW's two moments (allocated by kda_model_alloc_optim, not by create)
    size_t acts_layers;  // what the layers keep for the backward, every layer (shared buffers once)
    size_t acts_core;    //   of which the KDA core's saved buffers (the backend's kda_saved_bytes)
    size_t acts_shared;  //   of which recomputed activations: one buffer for all layers
    size_t acts_head;    // final hidden state, its norm and rstd, the residual stream's gradient
    size_t grad_scratch; // backward scratch shared by the layers
    size_t tokens;       // token ids and targets on the backend
    size_t total;        // what kda_model_create allocates: all of the above but optim
} kda_model_mem;
typedef struct kda_grad_scratch kda_grad_scratch; // backward scratch (model.c)

typedef struct kda_model {
    kda_config cfg;
    const kda_ops *ops;
    kda_core_algo algo;
    // parameters
    int n_params;
    kda_param *params;
    size_t n_floats;        // total parameter floats
    size_t n_alloc;         // floats allocated for master / work / grad: n_floats + KDA_SHARD_SLACK
                            // zeroed floats, so data-parallel shards of equal size fit (dist_optim.c)
    float *master;          // fp32 masters (backend memory)
    void *work;             // working copy (== master when the backend computes in fp32)
    float *grad;            // fp32 gradients, same layout
    float *adam_m, *adam_v; // AdamW moments (allocated by kda_model_alloc_optim)
    float *small;           // the small parameters' fp32 values where the masters are sharded, else
    size_t n_small;         // NULL (kda_model_small_param); n_small floats, each tensor 16-aligned
    int embed, final_norm;  // parameter indices
    kda_layer_params *layer;
    // activations, planned for B x T
    int B, T;
    kda_layer_acts *acts;
    void *h_final, *x_final; // [N,d]
    float *rstd_final;       // [N]
    void *dh;                // gradient of the residual stream [N,d]
    kda_grad_scratch *gs;
    int32_t *ids_dev, *tgt_dev;
    size_t act_bytes_total; // bytes of activation memory: mem.acts_layers + acts_head + grad_scratch
    kda_model_mem mem;      // what create allocated, by part (kda_model_mem_of)
    // Optional: called during the backward pass of kda_model_step (when the step's
    // grad_ready_on is set) as soon as the gradients in floats [lo, hi) of m->grad are final for
    // that micro-batch: final norm, then layers L-1 .. 0, then the embedding (tied: its gradient
    // completes last). Data parallelism starts its reductions here, overlapped with the rest.
    void (*grad_ready)(void *user, size_t lo, size_t hi);
    void *grad_ready_user;
    int grad_ready_on;
} kda_model;

#define KDA_SHARD_SLACK ((size_t)16 * 1024)

// Float range [*lo, *hi) of layer l's parameters in the parameter buffers (contiguous).
void kda_model_layer_range(const kda_model *m, int l, size_t *lo, size_t *hi);

// The fp32 values of small parameter idx (ops.h role S): from the masters, or from m->small
// where the masters are sharded across ranks (m->master == NULL; dist_optim.c keeps it current).
const float *kda_model_small_param(const kda_model *m, int idx);
// Write m->small (allocated on first call): the small parameters' floats that lie in [lo, lo + n)
// of the parameter buffers, from master (master[i - lo] is float i), the others zeroed; summed
// over the ranks that hold the shards, it holds every small parameter.
void kda_model_small_gather(kda_model *m, const float *master, size_t lo, size_t n);

// Build the model for a backend; activations for micro-batch B and sequence length T. Dies when
// B x T x num_heads rows exceed what the kernels index (int).
kda_model *kda_model_create(const kda_config *cfg, const kda_ops *ops, int B, int T);
// What kda_model_create(c, ops, B, T) allocates (and kda_model_alloc_optim adds: out->optim),
// computed without allocating: the same sizing function (model.c). ops is only asked for sizes
// (act_bytes, w_bytes, work_is_master, kda_saved_bytes). Dies as create does on a batch too big to index.
void kda_model_mem_of(const kda_config *c, const kda_ops *ops, int B, int T, kda_model_mem *out);
// The shapes the training step of a B x T micro-batch passes to the ops (for ops->scratch_bytes).
kda_step_shape kda_model_step_shape(const kda_config *c, int B, int T);
void kda_model_free(kda_model *m);

// For a model that will never run a backward (scoring, generation): gives the gradient buffer
// (as large as the weights) back; m->grad is NULL afterwards.
void kda_model_drop_grad(kda_model *m);
// §4 initialisation from the seed (deterministic).
void kda_model_init(kda_model *m, uint64_t seed);
void kda_model_alloc_optim(kda_model *m);
int kda_model_find_param(const kda_model *m, const char *name); // -1 if absent
size_t kda_model_num_params(const kda_model *m);

// Forward pass of B x T tokens; if targets is non-NULL the mean cross-entropy (over
// non-ignored targets) is returned and, when backward is set, gradients are ACCUMULATED
// into m->grad with the loss scaled by grad_scale_extra (1/num_micro_batches).
// ids, targets are host arrays of B*T int32 (target -100 = ignored).
// Returns the mean loss (NaN when there are no targets); *n_valid gets the valid count.
double kda_model_step(kda_model *m, const int32_t *ids, const int32_t *targets, int B, int T, int backward,
                      float grad_scale_extra, long *n_valid);
// Training without waiting for the device: kda_model_step's forward and backward of one of n_micro
// micro-batches (gradients scaled by 1/n_micro), with its mean loss / n_micro added to the
// backend's loss accumulator instead of returned; dies when no target is valid (the loss would be
// undefined). kda_model_loss_take waits for the device and returns the accumulator's sum since
// the last take (zeroing it).
void kda_model_train_step(kda_model *m, const int32_t *ids, const int32_t *targets, int B, int T, int n_micro);
double kda_model_loss_take(kda_model *m);
// Logits of every position into host logits[B*T][vocab] (forward only).
void kda_model_logits(kda_model *m, const int32_t *ids, int B, int T, float *logits);

// Logits of chosen positions only (evaluation scores the continuation positions): the forward
// runs over all B x T tokens, then the final hidden rows rows[i] = b*T + t (flat, any order,
// repeats allowed, each in [0, B*T)) are gathered on the backend and only they go through the
// head. Host logits[n_rows][vocab]: each row is that row of kda_model_logits up to the GEMM's
// rounding (OpenBLAS rounds an element differently with the number of rows per call; all rows
// in order give the same bits). Needs act_bytes == w_bytes (the gather is embed_fwd).
void kda_model_logits_rows(kda_model *m, const int32_t *ids, int B, int T, const int32_t *rows, int n_rows,
                           float *logits);

// ---- generation: the forward continuing from a recurrent state (kda-model.md §2, §3) ----------
// Per sequence and layer the state is what the next token needs from the past: the short-conv
// tails (the last W−1 pre-conv inputs of the q, k and v channels, A type) and the KDA state S
// (fp32 [H, K, Vd]); plus the final-normed hidden of the last token fed, for the logits. All in
// backend memory, sized at creation: feeding tokens allocates nothing and memory does not grow.
typedef struct kda_decode_state {
    int B;              // sequences
    long pos;           // tokens fed to each sequence since the reset
    void *conv;         // [L][tails q | k | v], each [B, W−1, channels] (A)
    float *S;           // [L][B, H, K, Vd] fp32
    void *x_last;       // [B, d] (A): final norm of the last fed token's hidden state
    float *rstd;        // [B]
    float *logits;      // [B, vocab] fp32 (backend)
    size_t state_bytes; // conv tails + KDA states
    size_t total_bytes; // everything this struct allocated on the backend
} kda_decode_state;

kda_decode_state *kda_decode_state_create(const kda_model *m, int B);
void kda_decode_state_free(const kda_model *m, kda_decode_state *s);
void kda_decode_state_reset(const kda_model *m, kda_decode_state *s); // zero state, pos 0
// Feed n tokens to each of the s->B sequences: host ids[B][n], 1 <= n <= m->T, B <= m->B. Each
// layer is the full forward's (layer_fwd) except that the conv continues from the tails
// (conv_silu_step) and the KDA core from S (kda_fwd_state): in its chunked form when n > 1
// (prefill), recurrent when n == 1 (a decode step). Uses the model's activation buffers as
// scratch (any other forward may run between two calls).
void kda_model_decode(kda_model *m, kda_decode_state *s, const int32_t *ids, int n);
// Host logits[B][vocab] after the last token fed (dies if nothing was fed since the reset).
void kda_model_decode_logits(kda_model *m, kda_decode_state *s, float *logits);

// Model FLOPs per trained token (kda-model.md §7): 3 x forward (matmuls + chunked KDA core;
// elementwise work excluded). The MFU numerator.
double kda_model_train_flops_per_token(const kda_config *c);
#endif
