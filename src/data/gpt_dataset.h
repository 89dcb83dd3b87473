// gpt_dataset.h — Megatron-LM's GPT training samples over indexed datasets (megatron-core
// GPTDataset, BlendedDataset and the split / blend rules of BlendedMegatronDatasetBuilder).
//
// One GPT dataset exposes the sequences [begin, end) of an indexed dataset ("documents" below;
// kda tokenize writes one sequence per document) and is built from a seed as megatron-core
// builds it:
//   epochs          the fewest passes over the documents whose tokens cover the requested
//                   samples: num_samples * seq_length + 1 tokens (one epoch if none requested)
//   document index  the document ids repeated once per epoch, shuffled by
//                   numpy.random.RandomState(seed); when the last epoch would contribute fewer
//                   than 80% of an epoch's samples it is shuffled separately and appended
//   sample index    the concatenation of the documents in that order cut into samples of
//                   seq_length + 1 tokens; consecutive samples overlap by one token (the last
//                   target of one is the first input of the next); a sample runs across
//                   document boundaries; the partial sample at the end is dropped
//   shuffle index   the sample numbers shuffled by the same RandomState (continuing its
//                   stream); with a separate last epoch its samples are shuffled apart
// The random stream is numpy's MT19937 reproduced bit for bit (mt19937.h), so the sample order
// equals megatron-core's for the same files, split, seed, seq_length and sample count
// (tests/python/test_megatron_compat.py compares them).
//
// A blend draws sample k from dataset argmax_i(w_i * max(k, 1) - taken_i) (first on ties),
// Megatron's build_blending_indices; each dataset is asked for ceil(ceil(size * w_i) * 1.005)
// samples and the blend holds sum_i ceil(size * w_i).
//
// Promises: everything is deterministic for (files, split, seed, seq_length, sizes); a sample
// is reached in O(1) from its number (so a run resumes at any consumed-sample count); builds
// and reads die with a message naming the file or setting that is wrong.
#ifndef KDA_GPT_DATASET_H
#define KDA_GPT_DATASET_H

#include <stdint.h>

#include "data/indexed_dataset.h"

typedef struct kda_gpt_dataset kda_gpt_dataset;

// num_samples < 0: one epoch (Megatron's None).
kda_gpt_dataset *kda_gpt_dataset_new(const kda_indexed *ds, uint64_t begin, uint64_t end, int64_t num_samples,
                                     int seq_length, uint32_t seed);
void kda_gpt_dataset_free(kda_gpt_dataset *g);
uint64_t kda_gpt_dataset_len(const kda_gpt_dataset *g); // samples built (>= num_samples)
int kda_gpt_dataset_epochs(const kda_gpt_dataset *g);
// Sample idx (< len) as seq_length + 1 ids.
void kda_gpt_dataset_get(const kda_gpt_dataset *g, uint64_t idx, int32_t *out);
// The three indices, for tests: doc [n_doc], sample [2 * (len + 1)] (document-index position,
// offset), shuffle [len].
const int32_t *kda_gpt_dataset_doc_index(const kda_gpt_dataset *g, uint64_t *n_doc);
const int64_t *kda_gpt_dataset_sample_index(const kda_gpt_dataset *g);
const int64_t *kda_gpt_dataset_shuffle_index(const kda_gpt_dataset *g);

// Megatron's split string ("969,30,1", "99,1", "1"): up to three non-negative numbers,
// missing ones 0, normalised to sum 1. Dies naming the string when it is not of that form.
void kda_split_parse(const char *split, double fractions[3]);
// The sequence range [*begin, *end) of `which` split (0 train, 1 valid, 2 test) among n
// sequences: round(start * n) .. round(stop * n) with the cumulative bookends. Returns 0 when
// the split is empty (fraction 0), as Megatron leaves that split out.
int kda_split_range(const double fractions[3], int which, uint64_t n, uint64_t *begin, uint64_t *end);

// A split of one or several indexed datasets: a plain GPT dataset (one prefix, no weights) or a
// blend. weights: NULL (unweighted; several prefixes are blended by their sizes) or n raw
// weights. fractions: NULL means the whole of every file (a per-split data path).
// size: the samples requested for this split (Megatron's train_iters * global_batch_size etc.).
typedef struct kda_gpt_source kda_gpt_source;
kda_gpt_source *kda_gpt_source_new(kda_indexed *const *ds, const double *weights, int n, const double *fractions,
                                   int which, uint64_t size, int seq_length, uint32_t seed);
void kda_gpt_source_free(kda_gpt_source *s);
uint64_t kda_gpt_source_len(const kda_gpt_source *s);
void kda_gpt_source_get(const kda_gpt_source *s, uint64_t idx, int32_t *out);
// Which dataset and which of its samples blend sample idx comes from (tests).
void kda_gpt_source_locate(const kda_gpt_source *s, uint64_t idx, int *dataset, uint64_t *sample);

#endif
