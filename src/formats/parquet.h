// parquet.h — a focused Parquet reader: the values of one top-level string column, in row
// order, across all row groups (what `kda tokenize` needs from FineWeb-Edu's files).
//
// Supported, as pyarrow and other writers produce them: BYTE_ARRAY columns (string / binary),
// required or optional (nulls through definition levels, RLE / bit-packed hybrid), data pages
// v1 and v2, PLAIN and dictionary encodings (PLAIN_DICTIONARY / RLE_DICTIONARY, with the
// fallback to PLAIN within a chunk), pages uncompressed or compressed with SNAPPY, GZIP or
// ZSTD, any number of row groups. The footer (Thrift compact protocol) is decoded by
// parquet_thrift.h. Anything else (nested or repeated columns, other encodings or codecs,
// encryption) is refused with a message naming the file, the column and what is unsupported.
//
// Promises: a damaged or hostile file never makes the reader read out of bounds; it stops
// through kda_die with the file named (and the row group / page where it can tell).
#ifndef KDA_PARQUET_H
#define KDA_PARQUET_H

#include <stddef.h>
#include <stdint.h>

typedef struct kda_parquet kda_parquet;

// Open path and select the column named `column` (a top-level field).
kda_parquet *kda_parquet_open(const char *path, const char *column);
// The next non-null value: *s points into the reader's buffers, valid until the next call.
// Returns 0 after the last row. Null values are skipped (counted by kda_parquet_nulls).
int kda_parquet_next(kda_parquet *p, const char **s, size_t *n);
uint64_t kda_parquet_num_rows(const kda_parquet *p);
uint64_t kda_parquet_nulls(const kda_parquet *p);
uint64_t kda_parquet_file_bytes(const kda_parquet *p);
uint64_t kda_parquet_bytes_done(const kda_parquet *p); // file bytes of the column's pages read so far
uint64_t kda_parquet_rows_done(const kda_parquet *p);  // rows (nulls included) of the pages read so far
// The column names of the file's schema, comma-separated (for error messages).
const char *kda_parquet_columns(const kda_parquet *p);
void kda_parquet_close(kda_parquet *p);

#endif
