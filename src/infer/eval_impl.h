// eval_impl.h — helpers shared by the eval*.c files (not part of eval.h's promise).
#ifndef KDA_EVAL_IMPL_H
#define KDA_EVAL_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"

// A growable NUL-terminated string.
typedef struct {
    char *v;
    size_t n, cap;
} kda_sb;

void kda_sb_addn(kda_sb *b, const char *s, size_t n);
void kda_sb_add(kda_sb *b, const char *s);
void kda_sb_addc(kda_sb *b, char c);
// The string (never NULL); the builder is left empty.
char *kda_sb_take(kda_sb *b);

// Append a new item to t->items (zeroed) and return it.
kda_eval_item *kda_eval_task_push(kda_eval_task *t);

// Whole file into memory (NUL-terminated); .bz2 files are decompressed through `bzip2 -dc`.
char *kda_eval_read_file(const char *path, size_t *len);
// Next line of buf (from *pos): returns its start and length without the line break (\n or
// \r\n), NULL at the end. *line_no counts lines from 1.
const char *kda_eval_next_line(const char *buf, size_t len, size_t *pos, size_t *line_no, size_t *line_len);
// Parse one JSON line; dies naming path:line when it is not a JSON object.
json_t *kda_eval_json_line(const char *path, size_t line_no, const char *s, size_t n);
// The documents of a JSON-lines file, one a non-blank line: kda_eval_docs_next returns the next
// one's object (the caller json_decref's it; r->line_no is its line) and counts it in t->n_docs,
// until t holds `limit` items (limit > 0): the documents after that are counted, not parsed. NULL
// at the end of the file. kda_eval_docs_open sets t->n_docs to 0.
typedef struct {
    kda_eval_task *t;
    const char *path;
    long limit;
    char *buf;
    size_t len, pos, line_no;
} kda_eval_docs;
void kda_eval_docs_open(kda_eval_docs *r, kda_eval_task *t, const char *path, long limit);
json_t *kda_eval_docs_next(kda_eval_docs *r);
void kda_eval_docs_close(kda_eval_docs *r);
// Member `key` as a string; dies naming path:line when it is missing or not a string.
const char *kda_eval_json_str(json_t *o, const char *key, const char *path, size_t line_no);
int kda_eval_file_exists(const char *path);
int kda_eval_dir_exists(const char *path);

#endif
