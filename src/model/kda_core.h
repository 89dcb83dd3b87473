// kda_core.h — the KDA core operator on the CPU, fp32 (kda-model.md §3).
//
// Takes the raw per-token inputs that the layer produces and returns the core output:
//   q = l2norm(q_raw), k = l2norm(k_raw)      (y = x / sqrt(sum x^2 + 1e-6), per (b,t,h))
//   alpha = -exp(A_log[h]) * softplus(f + dt_bias[h*K + j])   (softplus(z) = z if z > 20)
//   beta  = sigmoid(b_logit)
//   o     = KDA(q, k, v, alpha, beta; scale, S0 = 0)          (§3.1 recurrence / §3.2 chunks)
// Layouts (row-major, head-major features):
//   q_raw, k_raw, f : [B, T, H, K]    v, o : [B, T, H, V]    b_logit : [B, T, H] with rows (tokens)
//   kda_core_ldb(d) elements apart (the model's are columns of its projection buffer)
//   A_log : [H]    dt_bias : [H*K]
// Two algorithms compute the same function: KDA_RECURRENT (token by token) and KDA_CHUNKED
// (WY/UT transform, chunk 64, partial last chunk masked). Backward of either gives the
// gradients of all inputs; dA_log and ddt_bias are ACCUMULATED (+=), the rest overwritten.
#ifndef KDA_CORE_H
#define KDA_CORE_H

#include <stddef.h>

typedef enum { KDA_CHUNKED = 0, KDA_RECURRENT = 1 } kda_core_algo;

typedef struct {
    int B, T, H, K, V; // batch, time, heads (H == HV), key head dim, value head dim
    int chunk;         // chunk size for KDA_CHUNKED (64)
    float scale;       // usually K^-1/2
    kda_core_algo algo;
    int lean; // training: the backend may rerun the core's cheap elementwise prep in the backward
              // instead of keeping its outputs (recompute_modules core_prep); the CPU core keeps only
              // the chunk states either way
    int ldb;  // b_logit and d_b_logit: token rows ldb elements apart (ldb >= H); 0: H (packed)
} kda_core_dims;

static inline int kda_core_ldb(const kda_core_dims *d) { return d->ldb ? d->ldb : d->H; }

// Floats of saved state the forward writes for the backward (depends on dims and algo).
size_t kda_core_saved_floats(const kda_core_dims *d);
// Bytes of host workspace kda_core_fwd or kda_core_bwd allocates while it runs on `threads`
// OpenMP threads (a slice per thread, the backward's partial sums), the larger of the two.
size_t kda_core_workspace_bytes(const kda_core_dims *d, int threads);
// The most workspace bytes kda_core_fwd, kda_core_fwd_state and kda_core_bwd have held at once
// since the last call of this function (or the start), counted where they allocate and free it
// (tests compare it with the plan's kda_core_workspace_bytes).
size_t kda_core_workspace_peak(void);

void kda_core_fwd(const kda_core_dims *d, const float *q_raw, const float *k_raw, const float *v, const float *f,
                  const float *b_logit, const float *A_log, const float *dt_bias, float *o, float *saved);

// The forward continuing from a state (generation: chunked prefill, recurrent decode). S is
// fp32 [B, H, K, V] (row j of S[b,h] multiplies k_j): the state before token 0 on entry, the
// state after token T−1 on exit (in place; NULL: zero initial state, final state not kept).
// saved may be NULL (nothing kept for a backward). kda_core_bwd assumes a zero initial state,
// so there is no backward through a forward that started from a non-zero S.
void kda_core_fwd_state(const kda_core_dims *d, const float *q_raw, const float *k_raw, const float *v, const float *f,
                        const float *b_logit, const float *A_log, const float *dt_bias, float *o, float *saved,
                        float *S);

void kda_core_bwd(const kda_core_dims *d, const float *q_raw, const float *k_raw, const float *v, const float *f,
                  const float *b_logit, const float *A_log, const float *dt_bias, const float *saved, const float *d_o,
                  float *d_q_raw, float *d_k_raw, float *d_v, float *d_f, float *d_b_logit, float *d_A_log,
                  float *d_dt_bias);

#endif
