// indexed_dataset.h — Megatron-LM token files: a .bin of token ids and its .idx index
// (megatron-core IndexedDataset, "MMIDIDX" version 1), read through mmap and written atomically.
//
// The .idx layout (little-endian, no padding):
//   9 bytes  magic "MMIDIDX\0\0"
//   u64      version = 1
//   u8       dtype code of the .bin ids: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//            6 float64, 7 float32, 8 uint16 (megatron-core's DType enum)
//   u64      S = number of sequences
//   u64      D = number of document-index entries (documents + 1)
//   i32[S]   sequence lengths in tokens
//   i64[S]   byte offset of each sequence in the .bin
//   i64[D]   document index: entry d is the first sequence of document d; entry 0 is 0 and
//            the last is S (a document of zero sequences repeats the previous entry)
// The .bin is the sequences' ids back to back in that dtype.
//
// Promises:
// * kda_indexed_open checks everything before use: magic, version, dtype (integer types only),
//   the .idx length against S and D, non-negative lengths, the document index (starts at 0,
//   never decreases, ends at S), every sequence inside the .bin, and the .bin length equal to
//   the sum of the lengths times the dtype size (what every Megatron writer produces; a
//   truncated .bin or one written with another dtype fails here). Each failure is one error
//   line naming the file, what is wrong and what to do (kda_die).
// * Reads copy ids out as int32; with a vocabulary bound set (kda_indexed_set_vocab) every id
//   read is checked and an id >= vocab_size (or < 0) stops with the file, document and
//   sequence named. kda_indexed_check_ids scans a whole file the same way.
// * The writer makes one sequence per document (what Megatron's preprocess_data.py writes when
//   sentences are not split). It writes <prefix>.bin/.idx under temporary names, fsyncs them and
//   renames them into place only in kda_indexed_writer_finish; on kda_die or abort the
//   temporary files are removed, so an interrupted run leaves no complete-looking pair.
#ifndef KDA_INDEXED_DATASET_H
#define KDA_INDEXED_DATASET_H

#include <stddef.h>
#include <stdint.h>

enum {
    KDA_IDX_UINT8 = 1,
    KDA_IDX_INT8 = 2,
    KDA_IDX_INT16 = 3,
    KDA_IDX_INT32 = 4,
    KDA_IDX_INT64 = 5,
    KDA_IDX_FLOAT64 = 6,
    KDA_IDX_FLOAT32 = 7,
    KDA_IDX_UINT16 = 8,
};

// Megatron's choice of token dtype for a vocabulary: uint16 when vocab_size < 65500, else int32.
int kda_indexed_dtype_for_vocab(int64_t vocab_size);
const char *kda_indexed_dtype_name(int code); // "uint16"...; "unknown" for a bad code
int kda_indexed_dtype_size(int code);         // bytes per id; 0 for a bad code

typedef struct kda_indexed kda_indexed;

// Open <prefix>.idx and <prefix>.bin (prefix without extension, as Megatron names datasets).
kda_indexed *kda_indexed_open(const char *prefix);
void kda_indexed_close(kda_indexed *d);

const char *kda_indexed_prefix(const kda_indexed *d);
int kda_indexed_dtype(const kda_indexed *d);
uint64_t kda_indexed_num_sequences(const kda_indexed *d);
uint64_t kda_indexed_num_documents(const kda_indexed *d); // D - 1
uint64_t kda_indexed_num_tokens(const kda_indexed *d);
// The sequence lengths (S entries) and the document index (D entries), copied to aligned memory.
const int32_t *kda_indexed_seq_lengths(const kda_indexed *d);
const int64_t *kda_indexed_doc_index(const kda_indexed *d);

// Check every id read from now on against [0, vocab_size); 0 turns the check off.
void kda_indexed_set_vocab(kda_indexed *d, int64_t vocab_size);
// Copy ids [offset, offset+len) of sequence seq into out (range-checked; ids checked as above).
void kda_indexed_read(const kda_indexed *d, uint64_t seq, uint64_t offset, uint64_t len, int32_t *out);
// Scan all ids against [0, vocab_size); dies naming the first bad one.
void kda_indexed_check_ids(const kda_indexed *d, int64_t vocab_size);

// ---- writer ----
typedef struct kda_indexed_writer kda_indexed_writer;

// dtype: KDA_IDX_UINT16 or KDA_IDX_INT32 (or any integer code). Creates the temporary files.
kda_indexed_writer *kda_indexed_writer_open(const char *prefix, int dtype);
// Append one document of n ids as one sequence (n == 0: a document with no sequence, as
// Megatron writes for a text that tokenizes to nothing). Ids must fit the dtype.
void kda_indexed_writer_add_doc(kda_indexed_writer *w, const int32_t *ids, size_t n);
uint64_t kda_indexed_writer_tokens(const kda_indexed_writer *w);
uint64_t kda_indexed_writer_docs(const kda_indexed_writer *w);
// Write the .idx, fsync both files, rename them to <prefix>.bin/.idx, free the writer.
void kda_indexed_writer_finish(kda_indexed_writer *w);
// Remove the temporary files and free the writer.
void kda_indexed_writer_abort(kda_indexed_writer *w);
// The temporary paths (for a signal handler that removes them before _exit).
const char *kda_indexed_writer_tmp_path(const kda_indexed_writer *w, int idx);

#endif
