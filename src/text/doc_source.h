// doc_source.h — documents (byte strings) read from one input file of `kda tokenize`, in
// file order:
//   text     one document per line (a trailing \r is dropped; empty lines are skipped), per
//            block of lines separated by blank lines (the block's lines joined with \n), or
//            the whole file
//   jsonl    one JSON object per line, the document is the string under a key ("text");
//            blank lines are skipped; bytes that are not UTF-8 inside the line count as
//            U+FFFD (as Python's errors="replace"); a line that is not an object with a
//            string there stops the run with file:line
//   parquet  the non-null values of a string column (parquet.h); nulls are skipped
// Text and JSON lines may be compressed with gzip (several members too) or zstd (several
// frames too), recognised by their magic bytes.
//
// Promises: every failure ends the program through kda_die naming the file (and line).
#ifndef KDA_DOC_SOURCE_H
#define KDA_DOC_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

typedef enum { KDA_DOCS_LINE, KDA_DOCS_BLOCK, KDA_DOCS_FILE } kda_text_docs;
typedef enum { KDA_FMT_AUTO, KDA_FMT_TEXT, KDA_FMT_JSONL, KDA_FMT_PARQUET } kda_doc_format;

typedef struct {
    kda_doc_format format; // AUTO: by extension (after .gz/.zst): .jsonl/.json/.ndjson, .parquet, else text
    kda_text_docs text_docs;
    const char *json_key; // JSON lines key
    const char *column;   // parquet column
    int json_raw;         // JSON lines: hand over whole lines, the caller extracts the text
} kda_doc_opts;

typedef struct kda_doc_source kda_doc_source;

kda_doc_format kda_doc_format_of(const char *path); // what AUTO picks for path
kda_doc_source *kda_doc_open(const char *path, const kda_doc_opts *o);
// Next document; *text stays valid until the next call. Returns 0 at the end of the file.
int kda_doc_next(kda_doc_source *s, const char **text, size_t *len);
double kda_doc_fraction_done(const kda_doc_source *s); // of the file's bytes (or parquet rows)
// With json_raw, documents of a JSON-lines file are whole lines (blank ones skipped) to be
// decoded by kda_doc_json_text, which may run on any thread (clean and out are per thread).
int kda_doc_is_raw_json(const kda_doc_source *s);
uint64_t kda_doc_line(const kda_doc_source *s); // line number of the last line read
// The string under key in the JSON object on line[0..n) into out (invalid UTF-8 read as
// U+FFFD). Returns 0, or -1 with what is wrong with the line in err.
int kda_doc_json_text(const char *line, size_t n, const char *key, kda_tok_bytes *clean, kda_tok_bytes *out, char *err,
                      size_t err_cap);
uint64_t kda_doc_skipped(const kda_doc_source *s); // blank lines / nulls passed over
void kda_doc_close(kda_doc_source *s);

#endif
