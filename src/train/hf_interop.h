// hf_interop.h — FLA / Hugging Face KDAForCausalLM folders (kda-model.md §5).
//
// Export: a kda checkpoint -> config.json (KDAConfig fields, model_type "kda",
// architectures ["KDAForCausalLM"]), model.safetensors (BF16 by default or F32, FLA key names,
// tied head written once as model.embeddings.weight) and the tokenizer files.
// Import: such a folder (one safetensors file or shards with model.safetensors.index.json;
// lm_head.weight present or absent; BF16 or F32) -> a kda checkpoint (weights only) that
// `kda train` loads with finetune / no_load_optim.
#ifndef KDA_HF_INTEROP_H
#define KDA_HF_INTEROP_H

#include "base/config.h"
#include "model/model.h"

// Write config.json for c into dir (atomic).
void kda_hf_write_config(const kda_config *c, const char *dir, const char *torch_dtype);
// Read a KDAConfig config.json into c (model keys only; training keys keep their values). A
// model key the file leaves out takes FLA KDAConfig's default, as FLA would build it
// (intermediate_size null = derived from hidden_ratio); attn / attnres_block_size /
// lower_bound other than null, hidden_act other than "swish" or an untied head are refused.
void kda_hf_read_config(kda_config *c, const char *path);
// Write m's weights as model.safetensors in dir; bf16 != 0 => BF16 tensors.
void kda_hf_write_weights(const kda_model *m, const char *dir, int bf16);
// Load weights from an HF folder (single file or index + shards) into m (fp32 masters). Every
// tensor must be one of m's (a tensor m lacks is refused, not dropped); lm_head.weight, when
// present, must equal the embedding.
void kda_hf_read_weights(kda_model *m, const char *dir);

#endif
