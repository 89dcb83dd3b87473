// parquet.c — see parquet.h. Layout and field numbers from the Apache Parquet format
// specification (parquet.thrift): "PAR1", column chunks, footer = FileMetaData, 4-byte footer
// length, "PAR1".
#include "formats/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "base/common.h"
#include "formats/parquet_thrift.h"

enum { PQ_BYTE_ARRAY = 6 };
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };
enum { PQ_UNCOMPRESSED = 0, PQ_SNAPPY = 1, PQ_GZIP = 2, PQ_ZSTD = 6 };
enum { PQ_PLAIN = 0, PQ_PLAIN_DICTIONARY = 2, PQ_RLE = 3, PQ_RLE_DICTIONARY = 8 };
enum { PQ_DATA_PAGE = 0, PQ_INDEX_PAGE = 1, PQ_DICTIONARY_PAGE = 2, PQ_DATA_PAGE_V2 = 3 };

static const char *type_names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                   "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
static const char *codec_names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
static const char *encoding_names[] = {
    "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
    "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
    "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
#define NAME_OF(tab, i) ((i) >= 0 && (size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : "unknown")

typedef struct {
    const uint8_t *p;
    uint32_t n;
} str_ref;

typedef struct {
    uint64_t start, size, num_values;
    int codec;
} chunk_info;

typedef struct {
    uint8_t *v;
    size_t cap;
} buffer;

struct kda_parquet {
    char *path, *column, *columns;
    const uint8_t *map;
    size_t size;
    int optional;
    int n_rg;
    chunk_info *rg;
    uint64_t num_rows;
    // cursor
    int rg_i; // row group of the chunk being read (n_rg: done)
    const uint8_t *page, *chunk_end;
    uint64_t values_left; // values (nulls included) still to come in this chunk
    buffer dict_buf, page_buf, val_buf;
    str_ref *dict;
    uint32_t n_dict;
    int has_dict;
    size_t dict_cap;
    str_ref *vals;
    size_t n_vals, val_i, vals_cap;
    uint32_t *levels;
    size_t levels_cap;
    uint64_t nulls, bytes_done, rows_done;
};

KDA_NORETURN KDA_PRINTF(2, 3) static void bad(const kda_parquet *p, const char *fmt, ...);
static void bad(const kda_parquet *p, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->rg && p->rg_i >= 0 && p->rg_i < p->n_rg)
        kda_die("parquet file '%s', column '%s', row group %d: %s", p->path, p->column, p->rg_i, msg);
    kda_die("parquet file '%s': %s", p->path, msg);
}

static void *grow(buffer *b, size_t n) {
    if (b->cap < n) {
        b->cap = n + n / 2 + 64;
        b->v = kda_realloc(b->v, b->cap);
    }
    return b->v;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// ---- footer ----

typedef struct {
    int leaf; // leaf index of the column (-1: not found)
    int type, repetition;
    int nested; // the name is a group, not a leaf
} col_pick;

static void parse_schema(kda_parquet *p, kda_thrift *t, col_pick *pick) {
    int et;
    uint32_t n = kda_thrift_list(t, &et);
    if (et != KDA_TT_STRUCT) t->err = 1;
    int stack[64], depth = 0, leaves = 0;
    size_t names_len = 0, names_cap = 256;
    p->columns = kda_malloc(names_cap);
    p->columns[0] = 0;
    for (uint32_t i = 0; i < n && !t->err; i++) {
        int16_t last = 0, id;
        int ft, type = -1, rep = PQ_REQUIRED;
        int64_t children = 0;
        const uint8_t *name = NULL;
        size_t name_len = 0;
        kda_thrift_enter(t);
        while (kda_thrift_field(t, &last, &id, &ft)) {
            if (id == 1 && ft == KDA_TT_I32)
                type = (int)kda_thrift_int(t);
            else if (id == 3 && ft == KDA_TT_I32)
                rep = (int)kda_thrift_int(t);
            else if (id == 4 && ft == KDA_TT_BINARY)
                name = kda_thrift_binary(t, &name_len);
            else if (id == 5 && ft == KDA_TT_I32)
                children = kda_thrift_int(t);
            else
                kda_thrift_skip(t, ft);
        }
        kda_thrift_leave(t);
        if (t->err) break;
        if (i == 0) { // the root
            if (children < 0 || children > 1000000) t->err = 1;
            stack[depth++] = (int)children;
            continue;
        }
        if (depth == 0 || children < 0 || children > 1000000) {
            t->err = 1;
            break;
        }
        int top = depth == 1;
        stack[depth - 1]--;
        if (top && name) {
            if (names_len + name_len + 3 > names_cap) {
                names_cap = 2 * (names_len + name_len + 3);
                p->columns = kda_realloc(p->columns, names_cap);
            }
            if (names_len) {
                memcpy(p->columns + names_len, ", ", 2);
                names_len += 2;
            }
            memcpy(p->columns + names_len, name, name_len);
            names_len += name_len;
            p->columns[names_len] = 0;
        }
        int match = top && name && name_len == strlen(p->column) && !memcmp(name, p->column, name_len);
        if (children > 0) {
            if (match) pick->nested = 1;
            if (depth == 64) {
                t->err = 1;
                break;
            }
            stack[depth++] = (int)children;
        } else {
            if (match) {
                pick->leaf = leaves;
                pick->type = type;
                pick->repetition = rep;
            }
            leaves++;
        }
        while (depth > 0 && stack[depth - 1] == 0) depth--;
    }
}

static void parse_column_meta(kda_thrift *t, chunk_info *c, int *type, int64_t *data_off, int64_t *dict_off) {
    int16_t last = 0, id;
    int ft;
    kda_thrift_enter(t);
    while (kda_thrift_field(t, &last, &id, &ft)) {
        if (id == 1 && ft == KDA_TT_I32)
            *type = (int)kda_thrift_int(t);
        else if (id == 4 && ft == KDA_TT_I32)
            c->codec = (int)kda_thrift_int(t);
        else if (id == 5 && ft == KDA_TT_I64)
            c->num_values = (uint64_t)kda_thrift_int(t);
        else if (id == 7 && ft == KDA_TT_I64)
            c->size = (uint64_t)kda_thrift_int(t);
        else if (id == 9 && ft == KDA_TT_I64)
            *data_off = kda_thrift_int(t);
        else if (id == 11 && ft == KDA_TT_I64)
            *dict_off = kda_thrift_int(t);
        else
            kda_thrift_skip(t, ft);
    }
    kda_thrift_leave(t);
}

static void parse_row_groups(kda_parquet *p, kda_thrift *t, const col_pick *pick, size_t data_end) {
    int et;
    uint32_t n = kda_thrift_list(t, &et);
    if (et != KDA_TT_STRUCT) t->err = 1;
    p->rg = kda_calloc(n ? n : 1, sizeof(chunk_info));
    for (uint32_t r = 0; r < n && !t->err; r++) {
        chunk_info *c = &p->rg[r];
        int have = 0, type = -1, external = 0;
        int64_t data_off = -1, dict_off = -1;
        int16_t last = 0, id;
        int ft;
        kda_thrift_enter(t);
        while (kda_thrift_field(t, &last, &id, &ft)) {
            if (id != 1 || ft != KDA_TT_LIST) {
                kda_thrift_skip(t, ft);
                continue;
            }
            int ct;
            uint32_t nc = kda_thrift_list(t, &ct);
            if (ct != KDA_TT_STRUCT) t->err = 1;
            for (uint32_t j = 0; j < nc && !t->err; j++) {
                if ((int)j != pick->leaf) {
                    kda_thrift_skip(t, KDA_TT_STRUCT);
                    continue;
                }
                int16_t l2 = 0, id2;
                int ft2;
                kda_thrift_enter(t);
                while (kda_thrift_field(t, &l2, &id2, &ft2)) {
                    if (id2 == 1 && ft2 == KDA_TT_BINARY) {
                        kda_thrift_skip(t, ft2);
                        external = 1;
                    } else if (id2 == 3 && ft2 == KDA_TT_STRUCT) {
                        parse_column_meta(t, c, &type, &data_off, &dict_off);
                        have = 1;
                    } else {
                        kda_thrift_skip(t, ft2);
                    }
                }
                kda_thrift_leave(t);
            }
        }
        kda_thrift_leave(t);
        if (t->err) break;
        p->n_rg = (int)r + 1;
        p->rg_i = (int)r;
        if (external) bad(p, "the column's data is in another file (ColumnChunk.file_path); not supported");
        if (!have) bad(p, "the footer has no metadata for the column");
        if (type != PQ_BYTE_ARRAY)
            bad(p, "the column is %s, not a string column (BYTE_ARRAY)", NAME_OF(type_names, type));
        if (c->codec != PQ_UNCOMPRESSED && c->codec != PQ_SNAPPY && c->codec != PQ_GZIP && c->codec != PQ_ZSTD)
            bad(p,
                "compression %s is not supported (UNCOMPRESSED, SNAPPY, GZIP and ZSTD are); rewrite the file with "
                "one of those",
                NAME_OF(codec_names, c->codec));
        int64_t start = dict_off > 0 && dict_off < data_off ? dict_off : data_off;
        if (start < 4 || (uint64_t)start > data_end || c->size > data_end - (uint64_t)start)
            bad(p, "column chunk at byte %" PRId64 " (+%" PRIu64 " bytes) lies outside the file's data", start,
                c->size);
        c->start = (uint64_t)start;
    }
    p->rg_i = 0;
}

static void parse_footer(kda_parquet *p) {
    if (p->size < 12 || memcmp(p->map, "PAR1", 4) != 0) bad(p, "not a Parquet file (no PAR1 magic at the start)");
    if (!memcmp(p->map + p->size - 4, "PARE", 4)) bad(p, "the file is encrypted; not supported");
    if (memcmp(p->map + p->size - 4, "PAR1", 4) != 0)
        bad(p, "no PAR1 magic at the end: the file is truncated (an interrupted download?)");
    uint32_t footer_len = le32(p->map + p->size - 8);
    if (footer_len > p->size - 12) bad(p, "footer length %u is larger than the file: truncated or corrupt", footer_len);
    size_t data_end = p->size - 8 - footer_len;
    const uint8_t *footer = p->map + data_end;
    col_pick pick = {-1, -1, 0, 0};
    // pass 1: the schema (field 2), to find the column's leaf index
    kda_thrift t = {footer, footer + footer_len, 0, 0};
    int16_t last = 0, id;
    int ft, have_schema = 0;
    while (kda_thrift_field(&t, &last, &id, &ft)) {
        if (id == 2 && ft == KDA_TT_LIST) {
            parse_schema(p, &t, &pick);
            have_schema = 1;
        } else if (id == 8) {
            bad(p, "the file is encrypted; not supported");
        } else {
            kda_thrift_skip(&t, ft);
        }
    }
    if (t.err || !have_schema) bad(p, "the footer (file metadata) is corrupt");
    if (pick.nested) bad(p, "column '%s' is a nested group; only top-level string columns can be read", p->column);
    if (pick.leaf < 0) bad(p, "no column '%s'; the file's columns are: %s", p->column, p->columns);
    if (pick.repetition == PQ_REPEATED)
        bad(p, "column '%s' is repeated (a list); only single string values per row can be read", p->column);
    if (pick.type != PQ_BYTE_ARRAY)
        bad(p, "column '%s' is %s, not a string column (BYTE_ARRAY)", p->column, NAME_OF(type_names, pick.type));
    p->optional = pick.repetition == PQ_OPTIONAL;
    // pass 2: number of rows (3) and row groups (4)
    t = (kda_thrift){footer, footer + footer_len, 0, 0};
    last = 0;
    while (kda_thrift_field(&t, &last, &id, &ft)) {
        if (id == 3 && ft == KDA_TT_I64)
            p->num_rows = (uint64_t)kda_thrift_int(&t);
        else if (id == 4 && ft == KDA_TT_LIST)
            parse_row_groups(p, &t, &pick, data_end);
        else
            kda_thrift_skip(&t, ft);
    }
    if (t.err) bad(p, "the footer (file metadata) is corrupt");
}

kda_parquet *kda_parquet_open(const char *path, const char *column) {
    kda_parquet *p = kda_calloc(1, sizeof *p);
    p->path = kda_strdup(path);
    p->column = kda_strdup(column);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) kda_die("cannot open parquet file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) kda_die("cannot stat '%s': %s", path, strerror(errno));
    p->size = (size_t)st.st_size;
    if (p->size < 12) bad(p, "%zu bytes: too short for a Parquet file (truncated?)", p->size);
    void *m = mmap(NULL, p->size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) kda_die("cannot map '%s': %s", path, strerror(errno));
    close(fd);
    p->map = m;
    parse_footer(p);
    p->rg_i = -1; // no chunk started
    return p;
}

void kda_parquet_close(kda_parquet *p) {
    if (!p) return;
    munmap((void *)p->map, p->size);
    free(p->path);
    free(p->column);
    free(p->columns);
    free(p->rg);
    free(p->dict_buf.v);
    free(p->page_buf.v);
    free(p->val_buf.v);
    free(p->dict);
    free(p->vals);
    free(p->levels);
    free(p);
}

uint64_t kda_parquet_num_rows(const kda_parquet *p) { return p->num_rows; }
uint64_t kda_parquet_nulls(const kda_parquet *p) { return p->nulls; }
uint64_t kda_parquet_file_bytes(const kda_parquet *p) { return p->size; }
uint64_t kda_parquet_bytes_done(const kda_parquet *p) { return p->bytes_done; }
uint64_t kda_parquet_rows_done(const kda_parquet *p) { return p->rows_done; }
const char *kda_parquet_columns(const kda_parquet *p) { return p->columns; }

// ---- pages ----

typedef struct {
    int type;
    int32_t uncompressed, compressed;
    int32_t num_values, num_nulls, encoding, def_encoding;
    int32_t def_len, rep_len;
    int is_compressed;
    int have_data, have_v2, have_dict;
} page_header;

static void parse_page_header(kda_parquet *p, kda_thrift *t, page_header *h) {
    memset(h, 0, sizeof *h);
    h->type = -1;
    h->is_compressed = 1;
    int16_t last = 0, id;
    int ft;
    while (kda_thrift_field(t, &last, &id, &ft)) {
        if (id == 1 && ft == KDA_TT_I32)
            h->type = (int)kda_thrift_int(t);
        else if (id == 2 && ft == KDA_TT_I32)
            h->uncompressed = (int32_t)kda_thrift_int(t);
        else if (id == 3 && ft == KDA_TT_I32)
            h->compressed = (int32_t)kda_thrift_int(t);
        else if ((id == 5 || id == 7 || id == 8) && ft == KDA_TT_STRUCT) {
            int16_t l2 = 0, id2;
            int f2;
            kda_thrift_enter(t);
            while (kda_thrift_field(t, &l2, &id2, &f2)) {
                int is_int = f2 == KDA_TT_I32;
                if (id2 == 1 && is_int)
                    h->num_values = (int32_t)kda_thrift_int(t);
                else if (id == 5 && id2 == 2 && is_int)
                    h->encoding = (int32_t)kda_thrift_int(t);
                else if (id == 5 && id2 == 3 && is_int)
                    h->def_encoding = (int32_t)kda_thrift_int(t);
                else if (id == 7 && id2 == 2 && is_int)
                    h->encoding = (int32_t)kda_thrift_int(t);
                else if (id == 8 && id2 == 2 && is_int)
                    h->num_nulls = (int32_t)kda_thrift_int(t);
                else if (id == 8 && id2 == 4 && is_int)
                    h->encoding = (int32_t)kda_thrift_int(t);
                else if (id == 8 && id2 == 5 && is_int)
                    h->def_len = (int32_t)kda_thrift_int(t);
                else if (id == 8 && id2 == 6 && is_int)
                    h->rep_len = (int32_t)kda_thrift_int(t);
                else if (id == 8 && id2 == 7 && (f2 == KDA_TT_TRUE || f2 == KDA_TT_FALSE))
                    h->is_compressed = kda_thrift_bool(t, f2);
                else
                    kda_thrift_skip(t, f2);
            }
            kda_thrift_leave(t);
            h->have_data |= id == 5;
            h->have_dict |= id == 7;
            h->have_v2 |= id == 8;
        } else {
            kda_thrift_skip(t, ft);
        }
    }
    if (t->err) bad(p, "corrupt page header");
    if (h->uncompressed < 0 || h->compressed < 0 || h->num_values < 0 || h->num_nulls < 0 || h->def_len < 0 ||
        h->rep_len < 0)
        bad(p, "page header with negative sizes");
}

// Decompress n bytes at src into exactly want bytes; returns the bytes (src itself when stored).
static const uint8_t *decompress(kda_parquet *p, int codec, const uint8_t *src, size_t n, size_t want, buffer *out) {
    if (codec == PQ_UNCOMPRESSED) {
        if (n != want) bad(p, "uncompressed page of %zu bytes announces %zu", n, want);
        return src;
    }
    uint8_t *dst = grow(out, want ? want : 1);
    size_t got = 0;
    if (codec == PQ_SNAPPY) {
        size_t len = 0;
        if (snappy_uncompressed_length((const char *)src, n, &len) != SNAPPY_OK || len != want)
            bad(p, "corrupt snappy page");
        got = want;
        if (snappy_uncompress((const char *)src, n, (char *)dst, &got) != SNAPPY_OK) bad(p, "corrupt snappy page");
    } else if (codec == PQ_ZSTD) {
        got = ZSTD_decompress(dst, want, src, n);
        if (ZSTD_isError(got)) bad(p, "corrupt zstd page: %s", ZSTD_getErrorName(got));
    } else { // GZIP
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 15 + 32) != Z_OK) bad(p, "zlib init failed");
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)want;
        int rc = inflate(&z, Z_FINISH);
        got = want - z.avail_out;
        inflateEnd(&z);
        if (rc != Z_STREAM_END) bad(p, "corrupt gzip page (zlib: %s)", z.msg ? z.msg : "incomplete data");
    }
    if (got != want) bad(p, "page decompresses to %zu bytes, its header says %zu", got, want);
    return dst;
}

// RLE / bit-packed hybrid: n values of bw bits from [s, e). Returns 0 on malformed input.
static int rle_hybrid(const uint8_t *s, const uint8_t *e, int bw, uint32_t *out, size_t n) {
    if (bw < 0 || bw > 32) return 0;
    size_t k = 0;
    while (k < n) {
        uint64_t h = 0;
        int shift = 0;
        for (;;) {
            if (s >= e || shift > 63) return 0;
            uint8_t b = *s++;
            h |= (uint64_t)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) break;
        }
        if (h & 1) { // bit-packed groups of 8 values
            uint64_t values = (h >> 1) * 8;
            if ((h >> 1) > (uint64_t)1 << 40) return 0;
            size_t take = values < n - k ? (size_t)values : n - k;
            size_t need = (take * (size_t)bw + 7) / 8;
            if (need > (size_t)(e - s)) return 0;
            uint64_t acc = 0;
            int bits = 0;
            const uint8_t *q = s;
            for (size_t i = 0; i < take; i++) {
                while (bits < bw) {
                    acc |= (uint64_t)(*q++) << bits;
                    bits += 8;
                }
                out[k++] = (uint32_t)(acc & (bw == 32 ? 0xffffffffu : ((1u << bw) - 1)));
                acc >>= bw;
                bits -= bw;
            }
            size_t full = (size_t)(h >> 1) * (size_t)bw;
            s = full > (size_t)(e - s) ? e : s + full;
        } else { // a run of one value
            uint64_t run = h >> 1;
            int nb = (bw + 7) / 8;
            if (nb > e - s) return 0;
            uint32_t v = 0;
            for (int i = 0; i < nb; i++) v |= (uint32_t)s[i] << (8 * i);
            s += nb;
            if (run == 0) return 0;
            size_t take = run < n - k ? (size_t)run : n - k;
            for (size_t i = 0; i < take; i++) out[k++] = v;
        }
    }
    return 1;
}

// PLAIN byte arrays: n values of (u32 length, bytes).
static void plain_strings(kda_parquet *p, const uint8_t *s, const uint8_t *e, size_t n, str_ref *out) {
    for (size_t i = 0; i < n; i++) {
        if (e - s < 4) bad(p, "PLAIN values run past the end of their page");
        uint32_t len = le32(s);
        s += 4;
        if (len > (size_t)(e - s)) bad(p, "PLAIN value of %u bytes runs past the end of its page", len);
        out[i] = (str_ref){s, len};
        s += len;
    }
}

static void read_dictionary(kda_parquet *p, const page_header *h, const uint8_t *body) {
    const chunk_info *c = &p->rg[p->rg_i];
    if (h->encoding != PQ_PLAIN && h->encoding != PQ_PLAIN_DICTIONARY)
        bad(p, "dictionary page encoded %s; only PLAIN is supported", NAME_OF(encoding_names, h->encoding));
    const uint8_t *d = decompress(p, c->codec, body, (size_t)h->compressed, (size_t)h->uncompressed, &p->dict_buf);
    // (stored uncompressed, d points into the mapped file, which outlives the chunk)
    if ((size_t)h->num_values > (size_t)h->uncompressed / 4 + 1)
        bad(p, "dictionary of %d values in %d bytes", h->num_values, h->uncompressed);
    if (p->dict_cap < (size_t)h->num_values + 1) {
        p->dict_cap = (size_t)h->num_values + 1;
        p->dict = kda_realloc(p->dict, sizeof(str_ref) * p->dict_cap);
    }
    plain_strings(p, d, d + h->uncompressed, (size_t)h->num_values, p->dict);
    p->n_dict = (uint32_t)h->num_values;
    p->has_dict = 1;
}

static void read_data_page(kda_parquet *p, const page_header *h, const uint8_t *body) {
    const chunk_info *c = &p->rg[p->rg_i];
    size_t n = (size_t)h->num_values;
    if (n > p->values_left) bad(p, "data page of %zu values where %" PRIu64 " remain in the chunk", n, p->values_left);
    const uint8_t *levels = NULL, *levels_end = NULL, *values, *values_end;
    if (h->type == PQ_DATA_PAGE) {
        const uint8_t *d = decompress(p, c->codec, body, (size_t)h->compressed, (size_t)h->uncompressed, &p->page_buf);
        const uint8_t *e = d + h->uncompressed;
        if (p->optional) {
            if (h->def_encoding != PQ_RLE)
                bad(p, "definition levels encoded %s; only RLE is supported", NAME_OF(encoding_names, h->def_encoding));
            if (e - d < 4 || le32(d) > (size_t)(e - d - 4)) bad(p, "definition levels run past the end of their page");
            levels = d + 4;
            levels_end = levels + le32(d);
            d = levels_end;
        }
        values = d;
        values_end = e;
    } else { // v2: levels stored uncompressed in front, then the (maybe compressed) values
        size_t lv = (size_t)h->def_len + (size_t)h->rep_len;
        if (h->rep_len != 0) bad(p, "repetition levels in a top-level column");
        if (lv > (size_t)h->compressed || lv > (size_t)h->uncompressed) bad(p, "page v2 levels larger than the page");
        levels = body;
        levels_end = body + h->def_len;
        int codec = h->is_compressed ? c->codec : PQ_UNCOMPRESSED;
        values =
            decompress(p, codec, body + lv, (size_t)h->compressed - lv, (size_t)h->uncompressed - lv, &p->page_buf);
        values_end = values + ((size_t)h->uncompressed - lv);
        if (!p->optional) levels = NULL;
    }
    // which rows hold a value
    if (p->levels_cap < n + 1) {
        p->levels_cap = n + 1;
        p->levels = kda_realloc(p->levels, sizeof(uint32_t) * p->levels_cap);
    }
    size_t present = n;
    if (levels) {
        if (!rle_hybrid(levels, levels_end, 1, p->levels, n)) bad(p, "corrupt definition levels");
        present = 0;
        for (size_t i = 0; i < n; i++) present += p->levels[i] == 1;
    }
    p->nulls += n - present;
    if (p->vals_cap < present + 1) {
        p->vals_cap = present + 1;
        p->vals = kda_realloc(p->vals, sizeof(str_ref) * p->vals_cap);
    }
    if (h->encoding == PQ_PLAIN) {
        plain_strings(p, values, values_end, present, p->vals);
    } else if (h->encoding == PQ_PLAIN_DICTIONARY || h->encoding == PQ_RLE_DICTIONARY) {
        if (!p->has_dict) bad(p, "dictionary-encoded page without a dictionary page");
        if (values >= values_end && present) bad(p, "empty dictionary-encoded page");
        uint32_t *idx = grow(&p->val_buf, sizeof(uint32_t) * (present + 1));
        if (present && !rle_hybrid(values + 1, values_end, values[0], idx, present))
            bad(p, "corrupt dictionary indices");
        for (size_t i = 0; i < present; i++) {
            if (idx[i] >= p->n_dict) bad(p, "dictionary index %u of a %u-entry dictionary", idx[i], p->n_dict);
            p->vals[i] = p->dict[idx[i]];
        }
    } else {
        bad(p,
            "data page encoded %s; only PLAIN and dictionary encodings are supported (write the file with "
            "pyarrow's defaults, or use_dictionary / column_encoding PLAIN)",
            NAME_OF(encoding_names, h->encoding));
    }
    p->n_vals = present;
    p->val_i = 0;
    p->values_left -= n;
    p->rows_done += n;
}

// Load pages until one with values; returns 0 when the column is exhausted.
static int next_page(kda_parquet *p) {
    for (;;) {
        if (p->rg_i < 0 || (p->values_left == 0 && p->rg_i < p->n_rg)) {
            p->rg_i++;
            if (p->rg_i >= p->n_rg) return 0;
            const chunk_info *c = &p->rg[p->rg_i];
            p->page = p->map + c->start;
            p->chunk_end = p->page + c->size;
            p->values_left = c->num_values;
            p->n_dict = 0;
            p->has_dict = 0;
            continue;
        }
        if (p->rg_i >= p->n_rg) return 0;
        if (p->page >= p->chunk_end) bad(p, "the column chunk ends %" PRIu64 " values early", p->values_left);
        const uint8_t *start = p->page;
        kda_thrift t = {start, p->chunk_end, 0, 0};
        page_header h;
        parse_page_header(p, &t, &h);
        const uint8_t *body = t.p;
        if ((size_t)h.compressed > (size_t)(p->chunk_end - body)) bad(p, "page runs past the end of its column chunk");
        p->page = body + h.compressed;
        p->bytes_done += (uint64_t)(p->page - start);
        if (h.type == PQ_DICTIONARY_PAGE) {
            if (!h.have_dict) bad(p, "dictionary page without its header");
            read_dictionary(p, &h, body);
        } else if (h.type == PQ_DATA_PAGE || h.type == PQ_DATA_PAGE_V2) {
            if (!(h.type == PQ_DATA_PAGE ? h.have_data : h.have_v2)) bad(p, "data page without its header");
            read_data_page(p, &h, body);
            if (p->n_vals) return 1;
        } else if (h.type != PQ_INDEX_PAGE) {
            bad(p, "unknown page type %d", h.type);
        }
    }
}

int kda_parquet_next(kda_parquet *p, const char **s, size_t *n) {
    while (p->val_i >= p->n_vals)
        if (!next_page(p)) return 0;
    str_ref v = p->vals[p->val_i++];
    *s = (const char *)v.p;
    *n = v.n;
    return 1;
}
