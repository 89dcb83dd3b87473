// data.h — training batches. One interface over the data sources the config can name:
//   data_format "text":     a raw text file, tokenized at open (bytes as ids for tokenizer_type
//                           "byte", else the configured tokenizer), treated as one document
//   data_format "megatron": Megatron-LM indexed datasets (.bin/.idx) with GPT-dataset
//                           semantics (samples of seq_length+1 tokens across documents,
//                           seeded shuffles, split string, blending) — see gpt_dataset.h
// Promises: deterministic for a seed; position is the count of consumed samples, so a run
// resumes exactly by seeking to it; every id is checked < vocab_size (error names the file).
#ifndef KDA_DATA_H
#define KDA_DATA_H

#include <stdint.h>

#include "base/config.h"

typedef enum { KDA_SPLIT_TRAIN = 0, KDA_SPLIT_VALID = 1, KDA_SPLIT_TEST = 2 } kda_split;

typedef struct kda_data kda_data;

kda_data *kda_data_open(const kda_config *c, kda_split split);
// Next n samples, each seq_length+1 tokens: out[n][seq_length+1].
void kda_data_next(kda_data *d, int32_t *out, int n);
uint64_t kda_data_consumed(const kda_data *d);
void kda_data_seek(kda_data *d, uint64_t consumed_samples);
// Samples before the order repeats: megatron, the samples built for the requested count (whole
// epochs, Megatron's GPTDataset length); text, one epoch of non-overlapping windows.
uint64_t kda_data_num_samples(const kda_data *d);
void kda_data_close(kda_data *d);

#endif
