// ops.h — the op interface: one model definition (model.c) drives every backend through it.
//
// A backend fills a kda_ops table. Pointers are backend memory ("device" pointers). Element
// types by role, fixed per backend:
//   A  activations          CPU fp32, CUDA bf16
//   W  working weights      CPU fp32 (= master), CUDA bf16 copy of the fp32 master
//   S  small parameters     fp32 everywhere: the norm and conv weights, A_log, dt_bias, read
//      (const float *)      from the fp32 masters as FLA's kernels read them under bf16 autocast
//                           (model.h: kda_model_small_param)
//   G  gradients, masters,  fp32 everywhere
//      optimizer state, statistics (rstd)
//   I  token ids / targets  int32 (target -100 = ignored)
// N is a token count (B*T). Shapes are row-major; Linear weights are [out, in] and compute
// y = x·Wᵀ (+ bias). "acc" arguments are accumulated into (+=), everything else is written.
// Math: ../docs (kda-model.md §2–§3); each op's CPU version in ops_cpu.c is the reference.
#ifndef KDA_OPS_H
#define KDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/kda_core.h"

// Phases a training step's device time is split into (kda bench): GEMMs (cuBLASLt), the KDA
// core, the cross-entropy kernel, everything else; idle = wall time - the ops' spans.
typedef enum { KDA_PHASE_GEMM, KDA_PHASE_KDA, KDA_PHASE_CE, KDA_PHASE_OTHER, KDA_PHASE_N } kda_phase;
enum { KDA_PROF_MAX_OPS = 64, KDA_PROF_NAME = 48 };
typedef struct {
    char name[KDA_PROF_NAME]; // the op ("rmsnorm_fwd"), or a span inside one ("lm_head_ce: GEMM")
    int phase;                // its kda_phase
    double ms;                // its device time, less the spans inside it
    double flops;             // a GEMM's 2·m·n·k over its calls (0 for other ops)
    long calls;
} kda_op_time;
typedef struct {
    double ms[KDA_PHASE_N]; // device time per phase (spans of ops; nested spans counted once)
    double busy_ms;         // sum of the top-level op spans
    double wall_ms;         // from the first op's start to the last op's end
    double gemm_flops;      // 2·m·n·k over the GEMMs timed
    long n_ops;             // op calls timed
    // the same time by op, largest first (model/op_profile.h; past KDA_PROF_MAX_OPS - 1 kinds,
    // the rest in a last entry, "(other ops)")
    kda_op_time op[KDA_PROF_MAX_OPS];
    int n_op;
} kda_phase_times;

// The GPU's clocks and power while kda bench timed its steps (ops.h clock_watch), from samples
// every 10 ms, and the energy the board used meanwhile; samples == 0: none taken.
typedef struct {
    int samples;
    double sm_mhz_median, sm_mhz_min, sm_mhz_max; // max: the card's highest SM clock
    double power_w_median, power_w_max, power_limit_w;
    double power_capped;  // fraction of samples with the clock held down by the power cap
    double thermal_or_hw; // fraction with a thermal or hardware slowdown
    double energy_j;      // the board's energy counter from start to stop (0: no counter)
    double watch_s;       // seconds from start to stop
} kda_clock_stats;

// The shapes of one training step of the model (model.c's kda_model_step_shape), for the
// backend's scratch plan (scratch_bytes below; mem_plan.h). With N = B·T and H = core.H, a step
// calls: lm_head_ce (N, d, NV), embed_bwd (N, d), linear_bwd (N rows; the one with a bias,
// g_proj.1, of width Dv), rmsnorm_bwd (N, d), gated_rmsnorm_bwd (N·H rows of core.V),
// conv_silu_bwd (B, T, the groups Dk, Dk, Dv in one call, W), kda_fwd and kda_bwd (core), and sumsq,
// adamw_multi.
typedef struct {
    int B, T;           // micro-batch: N = B*T tokens
    int d, NV, F, W;    // hidden size, vocabulary, intermediate size, conv width
    int Dk, Dv, r;      // key and value widths (all heads), low-rank width of f_proj / g_proj
    kda_core_dims core; // the KDA core as the model calls it
} kda_step_shape;

// One tensor of the flat parameter buffers, for adamw_multi.
typedef struct {
    size_t offset, n; // in elements
    float wd;         // weight decay
} kda_adamw_seg;

// One channel group of a short-conv call: columns [col, col + C) of the input x (and of its
// gradient dx), weights w [C, W] (S); forward output y [B,T,C] packed; backward: the output's
// gradient dy [B,T,C] packed, dw [C, W] accumulated (+=). The model's call has three: q, k, v.
enum { KDA_CONV_MAX_GROUPS = 4 };
typedef struct {
    int col, C;
    const float *w;
    void *y;        // forward
    const void *dy; // backward
    float *dw;      // backward
} kda_conv_group;

typedef struct kda_ops {
    const char *name; // "cpu" | "cuda"
    int act_bytes;    // bytes per A element
    int w_bytes;      // bytes per W element

    // ---- capabilities: what differs between backends (zero where a backend lacks it) ----
    int work_is_master; // 1: W is the fp32 master itself (the model keeps no working copy)
    int host_memory;    // 1: backend memory is host memory (collectives over MPI; else NCCL)
    double peak_tflops; // the device's dense bf16 peak for MFU in kda bench; 0: none assumed
    int max_conv;       // the largest conv_size its conv kernels take
    int max_chunk;      // the largest kda_chunk_size its KDA core takes; 0: any

    // ---- memory ----
    void *(*alloc)(size_t bytes); // dies with the numbers on failure
    void (*free)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*to_device)(void *dst, const void *host_src, size_t bytes);
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); // within backend memory
    void (*sync)(void);

    // ---- embedding / head ----
    // out[N,d] = E[ids[n]]
    void (*embed_fwd)(const int32_t *ids, const void *E, void *out, int N, int d, int NV);
    // dE[ids[n]] += dout[n]   (G acc)
    void (*embed_bwd)(const int32_t *ids, const void *dout, float *dE, int N, int d);
    // Fused tied head + mean cross-entropy over the non-ignored targets, forward and backward:
    // returns sum of per-token losses (host double) and the count of valid targets via *n_valid;
    // dx[N,d] = dlogits·E (written), dE += dlogitsᵀ·x, with dlogits = (softmax − onehot)·grad_scale.
    // dx == NULL => forward only (no gradients).
    double (*lm_head_ce)(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                         void *dx, float *dE, long *n_valid);
    // As lm_head_ce with dx (training), but the loss is not handed back: weight · Σ losses is added
    // to the backend's loss accumulator without waiting for the device. loss_take waits, returns
    // the accumulator and zeroes it (the trainer reads it at log_interval: no wait per step).
    void (*lm_head_ce_acc)(const void *x, const void *E, const int32_t *targets, int N, int d, int NV, float grad_scale,
                           void *dx, float *dE, double weight);
    double (*loss_take)(void);
    // logits[N,NV] (fp32, backend memory) = x·Eᵀ (generation / evaluation)
    void (*lm_head_logits)(const void *x, const void *E, float *logits, int N, int d, int NV);

    // ---- norms ----
    // y = x·rstd·w, rstd[n] = (mean x² + eps)^-½
    void (*rmsnorm_fwd)(const void *x, const float *w, void *y, float *rstd, int N, int d, float eps);
    // dx written (or acc if accumulate), dw acc; y (may be NULL) written with the forward's output,
    // the bits rmsnorm_fwd writes (the norm's recompute fused into its backward; a backend may
    // require y aligned as the other operands are, so that it never changes how dx is summed)
    void (*rmsnorm_bwd)(const void *x, const float *w, const float *rstd, const void *dy, void *dx, float *dw, void *y,
                        int N, int d, int accumulate);
    // y = rmsnorm(o)·w ⊙ sigmoid(u), per row of width V (rows = N*H)
    void (*gated_rmsnorm_fwd)(const void *o, const void *u, const float *w, void *y, float *rstd, int rows, int V,
                              float eps);
    // y (may be NULL): the forward's output, the bits gated_rmsnorm_fwd writes
    void (*gated_rmsnorm_bwd)(const void *o, const void *u, const float *w, const float *rstd, const void *dy,
                              void *d_o, void *du, float *dw, void *y, int rows, int V);

    // ---- linear ----
    // The input x (and its gradient dx) may be columns of a wider matrix: row n at x + n·ldx
    // (ldx >= In); y, res and dy are packed [N,O].
    // y[N,O] = x[N,In]·W[O,In]ᵀ + bias[O] + res[N,O] (bias and res may be NULL; res may be y)
    void (*linear_fwd)(const void *x, int ldx, const void *W, const void *bias, const void *res, void *y, int N, int In,
                       int O);
    // dx[N,In] = dy·W (written, or acc if accumulate; dx may be NULL), dW += dyᵀ·x (dW may be NULL:
    // x is not read then), dbias += Σ dy (may be NULL)
    void (*linear_bwd)(const void *x, int ldx, const void *W, const void *dy, void *dx, float *dW, float *dbias, int N,
                       int In, int O, int accumulate);

    // ---- short conv ----
    // Per group (kda_conv_group, 1..KDA_CONV_MAX_GROUPS, columns not overlapping): y[b,t,c] =
    // silu(Σ_j w[c,j]·x[b,t−W+1+j,col+c]), zero history; x and dx have rows ldx elements apart
    // (columns of a wider matrix). One call for all groups: one pass over the input's columns.
    void (*conv_silu_fwd)(const void *x, int ldx, const kda_conv_group *g, int ng, int B, int T, int W);
    // dx written in the groups' columns only; each group's dw +=
    void (*conv_silu_bwd)(const void *x, int ldx, void *dx, const kda_conv_group *g, int ng, int B, int T, int W);

    // ---- KDA core (see kda_core.h for the math and layouts; 'saved' is backend memory) ----
    size_t (*kda_saved_bytes)(const kda_core_dims *dims);
    void (*kda_fwd)(const kda_core_dims *dims, const void *q, const void *k, const void *v, const void *f,
                    const void *b, const float *A_log, const float *dt_bias, void *o, void *saved);
    void (*kda_bwd)(const kda_core_dims *dims, const void *q, const void *k, const void *v, const void *f,
                    const void *b, const float *A_log, const float *dt_bias, const void *saved, const void *d_o,
                    void *dq, void *dk, void *dv, void *df, void *db, float *dA_log, float *ddt_bias);

    // ---- generation: forwards that continue from a recurrent state (no backward) ----
    // Short conv over [tail | x] along time: tail [B,W−1,C] (A) holds the W−1 inputs before
    // x[:,0]; y[b,t,c] = silu(Σ_j w[c,j]·X[b,t+j,c]) with X = [tail | x], then tail ← the last
    // W−1 rows of X (in place). x [B,T,C] with rows ldx apart, y [B,T,C]; a zero tail gives
    // conv_silu_fwd.
    void (*conv_silu_step)(void *tail, const void *x, int ldx, const float *w, void *y, int B, int T, int C, int W);
    // KDA core from the fp32 state S [B,H,K,V] (the state before token 0 on entry, after token
    // T−1 on exit). dims->algo picks the form: KDA_RECURRENT token by token (saved unused, may
    // be NULL); KDA_CHUNKED the chunked form (saved: kda_saved_bytes(dims) bytes of scratch;
    // the CPU backend keeps nothing there and accepts NULL). Inputs and o as for kda_fwd.
    void (*kda_fwd_state)(const kda_core_dims *dims, const void *q, const void *k, const void *v, const void *f,
                          const void *b, const float *A_log, const float *dt_bias, void *o, void *saved, float *S);

    // ---- MLP / residual ----
    // gu [N,2F]: gate in columns [0,F) of each row, up in [F,2F) (one GEMM writes both: model.c);
    // z [N,F] = silu(gate)·up
    void (*swiglu_fwd)(const void *gu, void *z, int N, int F);
    // dgu [N,2F] = (dgate | dup) written; dz [N,F] with rows lddz apart (lddz >= F). In place: dgu
    // may be gu, and z may be dz where lddz = F (each element is read before it is written). z (may
    // be NULL): the forward's product, the bits swiglu_fwd writes
    void (*swiglu_bwd)(const void *gu, const void *dz, int lddz, void *dgu, void *z, int N, int F);

    // ---- optimizer ----
    double (*sumsq)(const float *g, size_t n); // Σ g² (host double)
    // AdamW (§6.3) on many tensors of one flat buffer in one call, the only AdamW (optim.c's
    // kda_optim_apply, for the plain and the sharded step): master fp32 p, working copy w (W type;
    // may equal p on CPU); segment i is [segs[i].offset, + segs[i].n) of p, g, m, v (floats) and
    // of w (W elements), with its own weight decay. g is read as g·gscale (the global-norm clip;
    // 1 = none); g's contents afterwards are unspecified (the CPU scales it in place, CUDA leaves it).
    void (*adamw_multi)(float *p, void *w, float *g, float *m, float *v, const kda_adamw_seg *segs, int nseg,
                        float gscale, float lr, float beta1, float beta2, float eps, float bc1, float bc2);
    // copy fp32 master into the working copy (after load / init)
    void (*master_to_work)(const float *p, void *w, size_t n);

    // One line for start-up logs: the device, and for a GPU which code path runs and why.
    const char *(*describe)(void);

    // ---- step profile (a capability: NULL where the backend has none) ----
    // Between profile_begin and profile_end every op call is timed on the device by phase and op;
    // profile_end waits for the device and fills *out. Costs a few µs per op while on.
    void (*profile_begin)(void);
    void (*profile_end)(kda_phase_times *out);
    // GEMM algorithm survey (kda bench --gemm-survey; NULL where the backend has none): for every
    // GEMM problem the steps so far used, the library's chosen algorithm against the fastest of
    // its other candidates, printed per step (calls / steps); the fastest is used from then on.
    void (*gemm_survey)(FILE *out, int steps);

    // Bytes of device memory in use by this process's GPU and the card's total (kda bench; the
    // memory plan's free memory is total − used); NULL where the backend has no device memory.
    void (*mem_info)(size_t *used, size_t *total);
    // Samples the device's clock and power in the background from clock_watch(1, NULL) until
    // clock_watch(0, out), which fills *out (kda bench; out->samples = 0 where the device cannot
    // say); NULL where the backend has no such device.
    void (*clock_watch)(int start, kda_clock_stats *out);

    // ---- memory planning (mem_plan.h; NULL: the backend keeps no scratch of its own) ----
    // Scratch memory a training step of shape s takes beyond the model's buffers, computed by the
    // functions that size it inside the ops: *held, grow-only buffers kept from step to step (the
    // cross-entropy logits chunk, the CUDA scratch arena); *transient, workspaces an op allocates
    // and frees again (the CPU KDA core's per-thread slices). The KDA core backward's workspace is
    // in it on every backend (CUDA: a request to the arena; CPU: transient slices and partial
    // sums). Answers without a device.
    void (*scratch_bytes)(const kda_step_shape *s, size_t *held, size_t *transient);
    // Bytes of grow-only scratch held now (a test compares it with scratch_bytes' *held).
    size_t (*scratch_held)(void);
} kda_ops;

// The CPU backend (fp32; OpenMP threads; OpenBLAS GEMMs). The KDA core algorithm is taken
// from dims->algo.
const kda_ops *kda_ops_cpu(void);
// The CUDA backend, or NULL (with *why set) when not built or no GPU is usable.
const kda_ops *kda_ops_cuda(const char **why);
// The CUDA table for memory plans on any machine, GPU or not (NULL when built without CUDA):
// only its sizes may be used (act_bytes, w_bytes, work_is_master, kda_saved_bytes, scratch_bytes).
const kda_ops *kda_ops_cuda_sizing(void);
// Backend selection (src/backend/backend.c).
// device "cpu" | "cuda" | "auto" (CUDA when usable, else CPU); dies when "cuda" is unusable,
// naming the reason.
const kda_ops *kda_pick_backend(const char *device);
// For a memory plan only: as kda_pick_backend, except that "cuda" without a usable GPU gives the
// CUDA table's sizes (kda_ops_cuda_sizing) where the build has them, saying so in the reason.
const kda_ops *kda_pick_backend_for_plan(const char *device);
// Why the last kda_pick_backend chose what it chose, for the start line ("device auto: no
// usable GPU: ..." when auto fell back to the CPU).
const char *kda_backend_reason(void);

#endif
