// test_parquet.c — the Parquet string-column reader on files pyarrow wrote with each supported
// setting (tests/data/parquet, made by tests/python/make_parquet_fixtures.py): every value in
// row order equals pyarrow's, nulls skipped and counted; other columns of the same file; clear
// errors for missing / non-string / nested columns, unsupported encodings and codecs, files
// that are truncated or not Parquet; and randomly damaged files never crash the reader (each
// is read in a child process that must exit normally, through kda_die at worst).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "formats/parquet.h"
#include "test_die.h"
#include "test_util.h"

#define DATA "tests/data/parquet/"

// NAME.expect: "<length>\n<bytes>\n" per non-null value.
static void check_fixture(const char *name, uint64_t rows) {
    char pq[256], ex[256];
    snprintf(pq, sizeof pq, DATA "%s.parquet", name);
    snprintf(ex, sizeof ex, DATA "%s.expect", name);
    size_t n_ex;
    unsigned char *e = t_slurp(ex, &n_ex), *q = e, *end = e + n_ex;
    kda_parquet *p = kda_parquet_open(pq, "text");
    const char *s;
    size_t n;
    uint64_t count = 0, bytes = 0;
    int same = 1;
    while (kda_parquet_next(p, &s, &n)) {
        char *nl = memchr(q, '\n', (size_t)(end - q));
        size_t want = nl ? strtoul((char *)q, NULL, 10) : (size_t)-1;
        if (!nl || want != n || (size_t)(end - (unsigned char *)nl) < n + 2 || memcmp(nl + 1, s, n)) {
            if (same)
                printf("    first difference at value %llu (length %zu, expected %zu)\n", (unsigned long long)count, n,
                       want);
            same = 0;
            break;
        }
        q = (unsigned char *)nl + 1 + n + 1;
        count++;
        bytes += n;
    }
    same &= q == end;
    T_CHECK(same, "%-26s %4llu values (%6llu bytes) equal pyarrow's, in row order", name, (unsigned long long)count,
            (unsigned long long)bytes);
    T_CHECK(kda_parquet_num_rows(p) == rows && kda_parquet_nulls(p) + count == rows && kda_parquet_bytes_done(p) > 0 &&
                kda_parquet_bytes_done(p) < kda_parquet_file_bytes(p),
            "%-26s %llu rows = values + %llu nulls; progress %llu of %llu bytes", name,
            (unsigned long long)kda_parquet_num_rows(p), (unsigned long long)kda_parquet_nulls(p),
            (unsigned long long)kda_parquet_bytes_done(p), (unsigned long long)kda_parquet_file_bytes(p));
    kda_parquet_close(p);
    free(e);
}

typedef struct {
    const char *path, *column;
} read_args;

static void read_all(void *arg) {
    const read_args *a = arg;
    kda_parquet *p = kda_parquet_open(a->path, a->column);
    const char *s;
    size_t n, total = 0;
    while (kda_parquet_next(p, &s, &n))
        for (size_t i = 0; i < n; i++) total += (unsigned char)s[i]; // touch every byte
    kda_parquet_close(p);
    if (total == 1) printf("!"); // keep the loop
}

static void expect_error(const char *what, const char *path, const char *column, const char *w1, const char *w2) {
    read_args a = {path, column};
    t_child c = t_run_child(read_all, &a);
    const char *words[] = {w1, w2, NULL};
    T_CHECK(t_died_saying(&c, words), "%-30s -> %.*s", what, (int)strcspn(c.err, "\n"), c.err);
}

int main(void) {
    unsigned long seed = t_seed();
    kda_rng r;
    kda_rng_seed(&r, seed);
    check_fixture("plain_none_v1", 80);
    check_fixture("dict_snappy_v1_nulls", 200);
    check_fixture("plain_dictionary_format1", 100);
    check_fixture("dict_zstd_v2_rowgroups", 300);
    check_fixture("plain_gzip_v2_nulls", 150);
    check_fixture("plain_snappy_pages", 250);
    check_fixture("dict_fallback_zstd", 300);
    check_fixture("dict_none_v2_pages", 120);
    check_fixture("required_snappy", 90);

    // another column of the same file (after a nested one and the text column)
    kda_parquet *p = kda_parquet_open(DATA "dict_zstd_v2_rowgroups.parquet", "id");
    const char *s;
    size_t n;
    int ok = 1;
    uint64_t i = 0;
    char want[64];
    while (kda_parquet_next(p, &s, &n)) {
        snprintf(want, sizeof want, "<urn:uuid:%08llu>", (unsigned long long)i++);
        ok &= n == strlen(want) && !memcmp(s, want, n);
    }
    T_CHECK(ok && i == 300, "column 'id' of the same file: %llu values in order", (unsigned long long)i);
    kda_parquet_close(p);

    expect_error("missing column", DATA "plain_none_v1.parquet", "texts", "no column 'texts'", "text, id, dump");
    expect_error("integer column", DATA "plain_none_v1.parquet", "token_count", "token_count", "INT64");
    expect_error("nested list column", DATA "plain_none_v1.parquet", "tags", "tags", "nested");
    expect_error("DELTA_BYTE_ARRAY encoding", DATA "unsupported_delta.parquet", "text", "unsupported_delta.parquet",
                 "DELTA_BYTE_ARRAY");
    expect_error("LZ4 compression", DATA "unsupported_lz4.parquet", "text", "unsupported_lz4.parquet", "LZ4");
    expect_error("missing file", DATA "no_such.parquet", "text", "no_such.parquet", "No such file");

    char dir[] = "/tmp/kda_test_parquet_XXXXXX";
    if (!mkdtemp(dir)) kda_die("mkdtemp: %s", strerror(errno));
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/damaged.parquet", dir);
    size_t size;
    unsigned char *orig = t_slurp(DATA "dict_zstd_v2_rowgroups.parquet", &size);
    t_spill(tmp, orig, size / 2);
    expect_error("truncated file", tmp, "text", "damaged.parquet", "truncated");
    t_spill(tmp, (const unsigned char *)"hello, this is not parquet at all\n", 34);
    expect_error("not a Parquet file", tmp, "text", "damaged.parquet", "not a Parquet file");

    // random damage: byte flips anywhere, and in the footer; the reader must never crash
    const char *victims[] = {"dict_zstd_v2_rowgroups", "plain_gzip_v2_nulls", "dict_snappy_v1_nulls", "plain_none_v1",
                             "dict_none_v2_pages"};
    int crashes = 0, died = 0, runs = 0;
    unsigned char *buf = NULL;
    for (int v = 0; v < 5; v++) {
        char path[256];
        snprintf(path, sizeof path, DATA "%s.parquet", victims[v]);
        free(orig);
        orig = t_slurp(path, &size);
        buf = kda_realloc(buf, size);
        for (int k = 0; k < 40; k++) {
            memcpy(buf, orig, size);
            int flips = 1 + (int)kda_rng_below(&r, 4);
            for (int f = 0; f < flips; f++) {
                // half the time in the last 600 bytes (the footer and the last pages)
                size_t at = k % 2 ? size - 1 - (size_t)kda_rng_below(&r, size < 600 ? size : 600)
                                  : (size_t)kda_rng_below(&r, size);
                buf[at] ^= (unsigned char)(1 + kda_rng_below(&r, 255));
            }
            t_spill(tmp, buf, size);
            read_args a = {tmp, "text"};
            t_child c = t_run_child(read_all, &a);
            runs++;
            if ((c.status != 0 && c.status != 1) || strstr(c.err, "Sanitizer") || strstr(c.err, "runtime error")) {
                crashes++;
                printf("    crash (status %d) on damaged %s, replay with KDA_TEST_SEED=%lu\n", c.status, victims[v],
                       seed);
            }
            died += c.status == 1;
        }
    }
    T_CHECK(crashes == 0, "%d randomly damaged files: no crash (%d stopped with an error, the rest read through)", runs,
            died);
    free(buf);
    free(orig);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("(could not remove %s)\n", dir);
    return t_done("test_parquet");
}
