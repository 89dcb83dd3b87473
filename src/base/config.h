// config.h — run configuration: model (FLA KDAConfig names) + training (Megatron/Primus names).
//
// Promises: kda_config_defaults() gives a complete, valid configuration (the tiny demo model);
// kda_config_load() applies a YAML file (libyaml) on top, then kda_config_set() applies
// "key=value" overrides; kda_config_finalize() derives dependent sizes and validates.
// Every error names the key and, for files, file:line, and exits non-zero through kda_die.
// Keys are the field names below (the derived ones are accepted and recomputed by finalize),
// plus FLA KDAConfig keys that only pick kernels or are informational (model_type, fuse_*,
// torch_dtype, ...: accepted, no effect; see config.c), so an FLA config.json loads as is.
// kda_config_write_yaml output loads back into an identical struct.
#ifndef KDA_CONFIG_H
#define KDA_CONFIG_H

#include <stdio.h>

#define KDA_MAX_PATHS 16
#define KDA_PATH_MAX 1024

typedef struct {
    // ---- model (FLA KDAConfig field names) ----
    int hidden_size;       // d
    int num_hidden_layers; // L
    int num_heads;         // H
    int num_v_heads;       // HV; 0 in YAML 'null' => H
    int head_dim;          // K
    double expand_v;       // Vd = K * expand_v
    int use_short_conv;    // must be true (the model always has the conv)
    int conv_size;         // W
    int intermediate_size; // F; 0 => derived from hidden_ratio as FLA does
    double hidden_ratio;
    int vocab_size;
    double norm_eps;
    int tie_word_embeddings; // must be true for now
    double initializer_range;
    int max_position_embeddings;
    int allow_neg_eigval;                         // must be false
    int safe_gate;                                // must be false
    int bos_token_id, eos_token_id, pad_token_id; // -1 = null
    char attn_mode[16];                           // "chunk" | "fused_recurrent" (FLA names) — training uses kda_algo
    // derived (kda_config_finalize)
    int head_v_dim;         // Vd
    int key_dim, value_dim; // H*K, HV*Vd

    // ---- training (Megatron / Primus names) ----
    long train_iters;
    int micro_batch_size;
    int global_batch_size;
    int seq_length;
    double lr, min_lr;
    long lr_warmup_iters, lr_decay_iters; // lr_decay_iters 0 => train_iters
    char lr_decay_style[16];              // cosine | linear | constant
    double adam_beta1, adam_beta2, adam_eps;
    double weight_decay;
    double clip_grad; // 0 => no clipping
    long seed;
    int use_distributed_optimizer; // ZeRO-1: AdamW state + fp32 masters sharded across ranks
    int log_interval;
    int eval_interval, eval_iters;
    char save[KDA_PATH_MAX]; // checkpoint dir ("" = none)
    int save_interval;
    char load[KDA_PATH_MAX];
    int finetune, no_load_optim, no_load_rng;
    int keep_last_n;                                   // checkpoints kept (0 = all)
    char train_data_path[KDA_MAX_PATHS][KDA_PATH_MAX]; // Megatron style: [w1, p1, w2, p2] or [p1]
    int n_train_data_path;
    char valid_data_path[KDA_MAX_PATHS][KDA_PATH_MAX];
    int n_valid_data_path;
    char split[64];                     // "969,30,1"
    char data_format[16];               // "megatron" (.bin/.idx) | "text" (raw bytes of a text file)
    char tokenizer_type[32];            // "byte" | "HuggingFaceTokenizer"
    char tokenizer_model[KDA_PATH_MAX]; // tokenizer.json path
    int bf16;                           // mixed precision on CUDA
    // ---- kda-specific ----
    char device[16];    // auto | cpu | cuda
    char kda_algo[16];  // chunk | recurrent (CPU core algorithm)
    int kda_chunk_size; // 64
    // Megatron's keys: recompute_granularity "" (none) | "selective" (recompute recompute_modules
    // in the backward) | "full" (keep each layer's input only; rerun the layer's forward before
    // its backward). Same numbers, less activation memory. Modules: kda_recompute_modules below;
    // default for selective: layernorm, conv, swiglu, gated_norm, core_prep, kda_gates.
    char recompute_granularity[16];
    char recompute_modules[KDA_MAX_PATHS][16];
    int n_recompute_modules;
    char metrics_file[KDA_PATH_MAX];    // JSON lines ("" = <save>/metrics.jsonl or none)
    char tensorboard_dir[KDA_PATH_MAX]; // Megatron's key: TensorBoard event files there ("" = none)
    int num_threads;                    // 0 = all cores (OpenMP)
    int sample_tokens;                  // tokens generated at the end of training (0 = none)
    char sample_prompt[256];
} kda_config;

// What recompute_modules may name, in this order (bit i of the model's recompute mask is entry i),
// NULL-terminated:
//   layernorm   the two RMSNorm outputs (rerun from the saved input and 1/rms)
//   conv        the short-conv + SiLU outputs q, k, v (rerun from the projection)
//   swiglu      the SwiGLU product (rerun from gate and up)
//   gated_norm  the output gate's norm (rerun from the core output, the gate and the saved 1/rms)
//   core_attn   the KDA core's saved tensors (its forward rerun)
//   in_proj     the fused q, k, v, f_proj.0, g_proj.0 projection (its GEMM rerun from the norm)
//   kda_gates   the gates f and u (f_proj.1 and g_proj.1 rerun from their low-rank inputs)
//   o_proj      the residual stream after attention (o_proj rerun from the gated norm, + the input)
//   core_prep   the KDA core's elementwise prep outputs (normalised q, k, gates, decay-scaled
//               operands), rerun at the start of its backward (a backend capability: the CUDA
//               core; the CPU core keeps only chunk states anyway)
enum { KDA_N_RECOMPUTE_MODULES = 9 };
extern const char *const kda_recompute_modules[KDA_N_RECOMPUTE_MODULES + 1];

void kda_config_defaults(kda_config *c);
// Apply a YAML mapping file on top of c. Unknown keys, wrong types: error with file:line.
void kda_config_load(kda_config *c, const char *path);
// Apply one "key=value" override (value parsed with YAML scalar rules).
void kda_config_set(kda_config *c, const char *key_eq_value);
// Derive sizes and validate consistency; errors name the keys involved.
void kda_config_finalize(kda_config *c);
// Write the configuration as YAML (used in checkpoints and logs).
void kda_config_write_yaml(const kda_config *c, FILE *f);

#endif
