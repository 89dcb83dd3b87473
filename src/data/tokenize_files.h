// tokenize_files.h — the pipeline behind `kda tokenize`: documents of text files (plain / JSON
// lines / Parquet, plain or gzip / zstd; doc_source.h) to a Megatron indexed dataset
// <prefix>.bin/.idx (indexed_dataset.h), as Megatron's tools/preprocess_data.py with
// --append-eod makes it from a Hugging Face tokenizer: per document the tokenizer's ids (with
// the post-processor's BOS, which Megatron's HuggingFaceTokenizer.tokenize adds), then the
// end-of-document id; a document that gives no ids at all stays empty (no end-of-document id)
// and has no sequence in the index. Ids are uint16 when the vocabulary (with the end-of-document
// id) is under 65500, else int32.
//
// Promises:
// * The output is byte-identical whatever the thread count: the main thread reads documents
//   into batches; a batch is encoded by all threads (OpenMP, one tokenizer context each,
//   documents handed out dynamically) while one thread reads the next batch; results are
//   written in input order.
// * Existing outputs are overwritten only with force (an input that is an output is named);
//   missing folders of the prefix are made. No <prefix>.bin/.idx appears unless the run
//   completes: SIGINT / SIGTERM (exit 130 / 128+signal) and errors remove the temporary output
//   at once; a SIGKILL leaves <prefix>.{bin,idx}.tmp.<pid>, which the next run on the prefix
//   removes once that process is gone.
// * Progress on stderr (unless quiet) at most 4 times a second on a terminal, else a line every
//   10 s; every message starts "kda tokenize: " and names the command's options where one is
//   the fix (--force, --output-prefix, --bos, --eod); every error ends the program through
//   kda_die (a bad JSON line as file:line).
#ifndef KDA_TOKENIZE_FILES_H
#define KDA_TOKENIZE_FILES_H

#include <stdint.h>

#include "text/doc_source.h"

#define KDA_TOKENIZE_BYTES "bytes" // the tokenizer name for one id per byte

typedef struct {
    const char **inputs; // readable files (checked by the caller)
    int n_inputs;
    const char *prefix;    // output PREFIX.bin / PREFIX.idx
    kda_doc_opts docs;     // json_raw is forced on: JSON lines are decoded by the encoding threads
    const char *tokenizer; // tokenizer.json / tiktoken .model path, or KDA_TOKENIZE_BYTES
    int bos;               // -1: the tokenizer's default (on when it has a post-processor BOS); 0 off; 1 on
    int append_eod;
    long eod;            // -1: the tokenizer's <|end_of_text|> (or <|endoftext|>); 0 for bytes
    int special_as_text; // special-token strings in the text are ordinary text
    int threads;         // 0: all cores
    int quiet;           // no progress lines
    int force;           // overwrite existing outputs
} kda_tokenize_opts;

typedef struct {
    uint64_t docs, tokens; // written to the index
    uint64_t text_bytes;   // document bytes read
    uint64_t skipped;      // empty lines / null values passed over
    int dtype;             // KDA_IDX_UINT16 or KDA_IDX_INT32
    int threads;           // encoding threads used
    double seconds;        // from the first batch to the files in place
} kda_tokenize_stats;

// Tokenize every input into o->prefix.bin/.idx; returns what was written.
void kda_tokenize_files(const kda_tokenize_opts *o, kda_tokenize_stats *out);

#endif
