// doc_source.c — see doc_source.h.
#include "text/doc_source.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include "base/common.h"
#include "formats/parquet.h"
#include "text/tokenizer.h"

#define CHUNK (1u << 20)

enum { RAW_PLAIN, RAW_GZIP, RAW_ZSTD };

struct kda_doc_source {
    char *path;
    kda_doc_format format;
    kda_text_docs text_docs;
    const char *key;
    int json_raw;
    kda_parquet *pq;
    // compressed input
    FILE *f;
    int raw;
    z_stream z;
    ZSTD_DCtx *zd;
    unsigned char *in;
    size_t in_len, in_pos;
    int in_eof, out_eof, mid_stream;
    uint64_t file_size, file_read;
    // decompressed text, lines are cut from [pos, len)
    char *buf;
    size_t len, pos, cap;
    uint64_t line_no;
    // the current document when it is not a slice of buf
    kda_tok_bytes doc, clean;
    uint64_t skipped;
    int file_done;
};

kda_doc_format kda_doc_format_of(const char *path) {
    size_t n = strlen(path);
    static const char *comp[] = {".gz", ".zst", ".zstd"};
    for (int i = 0; i < 3; i++) {
        size_t k = strlen(comp[i]);
        if (n > k && !strcmp(path + n - k, comp[i])) {
            n -= k;
            break;
        }
    }
    static const struct {
        const char *ext;
        kda_doc_format f;
    } ext[] = {
        {".jsonl", KDA_FMT_JSONL}, {".json", KDA_FMT_JSONL}, {".ndjson", KDA_FMT_JSONL}, {".parquet", KDA_FMT_PARQUET}};
    for (int i = 0; i < 4; i++) {
        size_t k = strlen(ext[i].ext);
        if (n > k && !strncmp(path + n - k, ext[i].ext, k)) return ext[i].f;
    }
    return KDA_FMT_TEXT;
}

// Fill the compressed-input buffer when it is used up.
static void refill(kda_doc_source *s) {
    if (s->in_pos < s->in_len || s->in_eof) return;
    s->in_len = fread(s->in, 1, CHUNK, s->f);
    s->in_pos = 0;
    s->file_read += s->in_len;
    if (s->in_len < CHUNK) {
        if (ferror(s->f)) kda_die("cannot read '%s': %s", s->path, strerror(errno));
        s->in_eof = 1;
    }
}

// Up to cap decompressed bytes into dst; 0 at the end of the data.
static size_t raw_read(kda_doc_source *s, char *dst, size_t cap) {
    size_t got = 0;
    while (got == 0 && !s->out_eof) {
        refill(s);
        size_t avail = s->in_len - s->in_pos;
        if (s->raw == RAW_PLAIN) {
            size_t k = avail < cap ? avail : cap;
            memcpy(dst, s->in + s->in_pos, k);
            s->in_pos += k;
            got = k;
            if (!k && s->in_eof) s->out_eof = 1;
        } else if (s->raw == RAW_GZIP) {
            s->z.next_in = s->in + s->in_pos;
            s->z.avail_in = (uInt)avail;
            s->z.next_out = (Bytef *)dst;
            s->z.avail_out = (uInt)cap;
            int rc = inflate(&s->z, Z_NO_FLUSH);
            s->in_pos = (size_t)(s->z.next_in - s->in);
            got = cap - s->z.avail_out;
            if (rc == Z_STREAM_END) {
                inflateReset(&s->z); // a following gzip member continues the text
                s->mid_stream = 0;
            } else if (rc == Z_OK) {
                s->mid_stream = 1;
            } else if (rc != Z_BUF_ERROR) {
                kda_die("'%s' is not valid gzip data (zlib: %s)", s->path, s->z.msg ? s->z.msg : "error");
            }
        } else {
            ZSTD_inBuffer zi = {s->in + s->in_pos, avail, 0};
            ZSTD_outBuffer zo = {dst, cap, 0};
            size_t rc = ZSTD_decompressStream(s->zd, &zo, &zi);
            if (ZSTD_isError(rc)) kda_die("'%s' is not valid zstd data: %s", s->path, ZSTD_getErrorName(rc));
            s->in_pos += zi.pos;
            got = zo.pos;
            if (zi.pos || zo.pos) s->mid_stream = rc != 0; // 0: a frame ended and is flushed
        }
        if (s->raw != RAW_PLAIN && got == 0 && s->in_pos == s->in_len && s->in_eof) {
            if (s->mid_stream)
                kda_die("'%s' is truncated: the %s stream ends early (an interrupted download?)", s->path,
                        s->raw == RAW_GZIP ? "gzip" : "zstd");
            s->out_eof = 1;
        }
    }
    return got;
}

kda_doc_source *kda_doc_open(const char *path, const kda_doc_opts *o) {
    kda_doc_source *s = kda_calloc(1, sizeof *s);
    s->path = kda_strdup(path);
    s->format = o->format == KDA_FMT_AUTO ? kda_doc_format_of(path) : o->format;
    s->text_docs = o->text_docs;
    s->key = o->json_key ? o->json_key : "text";
    s->json_raw = o->json_raw;
    if (s->format == KDA_FMT_PARQUET) {
        s->pq = kda_parquet_open(path, o->column ? o->column : s->key);
        return s;
    }
    s->f = fopen(path, "rb");
    if (!s->f) kda_die("cannot open input '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(s->f), &st) == 0) s->file_size = (uint64_t)st.st_size;
    s->in = kda_malloc(CHUNK);
    refill(s);
    s->raw = RAW_PLAIN;
    if (s->in_len >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
        s->raw = RAW_GZIP;
        if (inflateInit2(&s->z, 15 + 16) != Z_OK) kda_die("zlib: cannot start a gzip stream for '%s'", path);
    } else if (s->in_len >= 4 && s->in[0] == 0x28 && s->in[1] == 0xb5 && s->in[2] == 0x2f && s->in[3] == 0xfd) {
        s->raw = RAW_ZSTD;
        s->zd = ZSTD_createDCtx();
        if (!s->zd) kda_die("zstd: cannot start a stream for '%s'", path);
    }
    s->cap = 2 * CHUNK;
    s->buf = kda_malloc(s->cap);
    return s;
}

void kda_doc_close(kda_doc_source *s) {
    if (!s) return;
    if (s->pq) kda_parquet_close(s->pq);
    if (s->f) fclose(s->f);
    if (s->raw == RAW_GZIP) inflateEnd(&s->z);
    if (s->zd) ZSTD_freeDCtx(s->zd);
    free(s->in);
    free(s->buf);
    kda_tok_bytes_free(&s->doc);
    kda_tok_bytes_free(&s->clean);
    free(s->path);
    free(s);
}

// The next line of the decompressed text (without \n, and without a \r before it); 0 at the end.
static int next_line(kda_doc_source *s, const char **line, size_t *n) {
    for (;;) {
        char *nl = memchr(s->buf + s->pos, '\n', s->len - s->pos);
        if (nl || s->out_eof) {
            if (!nl && s->pos == s->len) return 0;
            size_t end = nl ? (size_t)(nl - s->buf) : s->len;
            *line = s->buf + s->pos;
            *n = end - s->pos;
            s->pos = nl ? end + 1 : end;
            if (*n && (*line)[*n - 1] == '\r') (*n)--;
            s->line_no++;
            return 1;
        }
        // no full line in the buffer: keep the partial line, read more
        if (s->pos > 0) {
            memmove(s->buf, s->buf + s->pos, s->len - s->pos);
            s->len -= s->pos;
            s->pos = 0;
        }
        if (s->cap - s->len < CHUNK) s->buf = kda_realloc(s->buf, s->cap *= 2);
        s->len += raw_read(s, s->buf + s->len, s->cap - s->len);
    }
}

static int json_doc(kda_doc_source *s, const char **text, size_t *len) {
    const char *line;
    size_t n;
    for (;;) {
        if (!next_line(s, &line, &n)) return 0;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k < n) break;
        s->skipped++;
    }
    if (s->json_raw) {
        *text = line;
        *len = n;
        return 1;
    }
    char err[256];
    if (kda_doc_json_text(line, n, s->key, &s->clean, &s->doc, err, sizeof err))
        kda_die("%s:%llu: %s", s->path, (unsigned long long)s->line_no, err);
    *text = s->doc.v ? s->doc.v : "";
    *len = s->doc.n;
    return 1;
}

int kda_doc_json_text(const char *line, size_t n, const char *key, kda_tok_bytes *clean, kda_tok_bytes *out, char *err,
                      size_t err_cap) {
    clean->n = 0;
    kda_utf8_sanitize(line, n, clean);
    json_error_t e;
    json_t *obj = json_loadb(clean->v ? clean->v : "", clean->n, JSON_ALLOW_NUL, &e);
    if (!obj) {
        snprintf(err, err_cap, "not JSON (%s at column %d)", e.text, e.column);
        return -1;
    }
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    int bad = !v || !json_is_string(v);
    out->n = 0;
    if (!json_is_object(obj))
        snprintf(err, err_cap, "the line is not a JSON object");
    else if (!v)
        snprintf(err, err_cap, "no key '%s' in this object; pick the text field with --json-key", key);
    else if (bad)
        snprintf(err, err_cap, "the value under '%s' is not a string; pick the text field with --json-key", key);
    else
        kda_tok_bytes_append(out, json_string_value(v), json_string_length(v));
    json_decref(obj);
    return bad ? -1 : 0;
}

int kda_doc_is_raw_json(const kda_doc_source *s) { return s->json_raw && s->format == KDA_FMT_JSONL; }
uint64_t kda_doc_line(const kda_doc_source *s) { return s->line_no; }

static int text_doc(kda_doc_source *s, const char **text, size_t *len) {
    const char *line;
    size_t n;
    if (s->text_docs == KDA_DOCS_LINE) {
        for (;;) {
            if (!next_line(s, &line, &n)) return 0;
            if (n) break;
            s->skipped++;
        }
        *text = line;
        *len = n;
        return 1;
    }
    if (s->text_docs == KDA_DOCS_FILE) {
        if (s->file_done) return 0;
        s->file_done = 1;
        s->doc.n = 0;
        char *chunk = kda_malloc(CHUNK);
        size_t k;
        while ((k = raw_read(s, chunk, CHUNK)) > 0) kda_tok_bytes_append(&s->doc, chunk, k);
        free(chunk);
        *text = s->doc.v ? s->doc.v : "";
        *len = s->doc.n;
        return 1;
    }
    // blocks: lines up to a blank line
    s->doc.n = 0;
    int have = 0;
    while (next_line(s, &line, &n)) {
        if (n == 0) {
            if (have) break;
            continue;
        }
        if (have) kda_tok_bytes_append(&s->doc, "\n", 1);
        kda_tok_bytes_append(&s->doc, line, n);
        have = 1;
    }
    if (!have) return 0;
    *text = s->doc.v;
    *len = s->doc.n;
    return 1;
}

int kda_doc_next(kda_doc_source *s, const char **text, size_t *len) {
    if (s->pq) return kda_parquet_next(s->pq, text, len);
    return s->format == KDA_FMT_JSONL ? json_doc(s, text, len) : text_doc(s, text, len);
}

double kda_doc_fraction_done(const kda_doc_source *s) {
    if (s->pq) {
        uint64_t rows = kda_parquet_num_rows(s->pq);
        return rows ? (double)kda_parquet_rows_done(s->pq) / (double)rows : 1.0;
    }
    if (!s->file_size) return 1.0;
    // the compressed input read so far, less what waits in its buffer
    double done = (double)(s->file_read - (s->in_len - s->in_pos)) / (double)s->file_size;
    return done > 1.0 ? 1.0 : done;
}

uint64_t kda_doc_skipped(const kda_doc_source *s) { return s->pq ? kda_parquet_nulls(s->pq) : s->skipped; }
