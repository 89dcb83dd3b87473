// test_safetensors — round trips through the writer and reader, and hostile files that the
// reader must reject with the right message (never reading out of bounds: run under SAN=1).
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"
#include "formats/safetensors.h"
#include "test_util.h"

static char dir[64];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static size_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

// Files in dir whose name starts with prefix (a leftover temporary shows up here).
static int count_prefix(const char *prefix) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '^%s' || true", dir, prefix);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (!p || fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = kda_fopen(path, "wb");
    KDA_CHECK(fwrite(b, 1, n, f) == n && fclose(f) == 0, "cannot write '%s'", path);
}

// A file with header length hlen (as stored), header text h, then ndata zero bytes.
static void write_file(const char *path, uint64_t hlen, const char *h, size_t hbytes, size_t ndata) {
    size_t n = 8 + hbytes + ndata;
    unsigned char *b = kda_calloc(n, 1);
    memcpy(b, &hlen, 8);
    memcpy(b + 8, h, hbytes);
    write_bytes(path, b, n);
    free(b);
}

// Header h (its exact length stored) followed by ndata bytes.
static void write_hdr(const char *path, const char *h, size_t ndata) {
    write_file(path, strlen(h), h, strlen(h), ndata);
}

static void expect_reject(const char *label, const char *path, const char *want) {
    char err[1024] = "";
    kda_st_file *f = kda_st_open_err(path, err, sizeof err);
    int ok = !f && strstr(err, want) && strstr(err, path);
    T_CHECK(ok, "reject %-34s -> %s", label, f ? "(opened!)" : err);
    kda_st_close(f);
}

static void expect_reject_hdr(const char *label, const char *h, size_t ndata, const char *want) {
    char path[128];
    path_in(path, sizeof path, "bad.safetensors");
    write_hdr(path, h, ndata);
    expect_reject(label, path, want);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static void test_round_trip(kda_rng *rng) {
    char path[128];
    path_in(path, sizeof path, "rt.safetensors");
    enum { NF = 15, NB = 24, NI = 7 };
    float f32[NF], bf[NB], i32f[NI], scalar = 3.25f;
    int32_t i32raw[5] = {0, -1, 2147483647, -2147483647 - 1, 12345};
    for (int i = 0; i < NF; i++) f32[i] = (float)kda_rng_normal(rng) * 100.0f;
    for (int i = 0; i < NB; i++) bf[i] = (float)kda_rng_normal(rng);
    // values that exercise RNE: ties to even (down and up), inf, nan, -0, a huge value
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0x7fc00001u, 0x80000000u, 0x7f7fffffu};
    for (int i = 0; i < 6; i++) memcpy(&bf[i], &special[i], 4);
    for (int i = 0; i < NI; i++) i32f[i] = (float)((int)kda_rng_below(rng, 2001) - 1000);
    uint16_t bfraw[3] = {0x3f80, 0xc000, 0x7f80};
    kda_st_tensor t[] = {
        {.name = "z.f32", .dtype = KDA_ST_F32, .ndim = 2, .shape = {3, 5}, .data = f32},
        {.name = "a.bf16", .dtype = KDA_ST_BF16, .ndim = 4, .shape = {2, 3, 2, 2}, .data = bf},
        {.name = "i32", .dtype = KDA_ST_I32, .ndim = 1, .shape = {NI}, .data = i32f},
        {.name = "i32raw", .dtype = KDA_ST_I32, .ndim = 1, .shape = {5}, .raw = i32raw},
        {.name = "bf16raw", .dtype = KDA_ST_BF16, .ndim = 1, .shape = {3}, .raw = bfraw},
        {.name = "scalar", .dtype = KDA_ST_F32, .ndim = 0, .data = &scalar},
        {.name = "empty", .dtype = KDA_ST_F32, .ndim = 2, .shape = {0, 4}},
        {.name = "model.layers.0.attn.q_proj.weight", .dtype = KDA_ST_F32, .ndim = 1, .shape = {1}, .data = f32},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    kda_st_write(path, t, n);
    T_CHECK(count_prefix("rt.safetensors.tmp") == 0, "no temporary left after a write");

    // the raw layout: 8-byte length, multiple of 8, space padded, metadata first
    FILE *fp = kda_fopen(path, "rb");
    uint64_t hlen = 0;
    KDA_CHECK(fread(&hlen, 8, 1, fp) == 1, "short read");
    char *h = kda_calloc(hlen + 1, 1);
    KDA_CHECK(fread(h, 1, hlen, fp) == hlen, "short read");
    fclose(fp);
    T_CHECK(hlen % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hlen);
    T_CHECK(!strncmp(h, "{\"__metadata__\":{\"format\":\"pt\"}", 31), "header starts with __metadata__ {format: pt}");
    size_t hl = strlen(h);
    while (hl > 0 && h[hl - 1] == ' ') hl--;
    T_CHECK(hl > 0 && h[hl - 1] == '}' && hlen - hl < 8, "header padded with %zu spaces", (size_t)hlen - hl);
    free(h);
    size_t want_size = 8 + hlen + NF * 4 + NB * 2 + NI * 4 + 5 * 4 + 3 * 2 + 4 + 0 + 4;
    T_CHECK(file_size(path) == want_size, "file size %zu == 8 + header + data (%zu)", file_size(path), want_size);

    kda_st_file *f = kda_st_open(path);
    T_CHECK(f->n == n, "reader sees %d tensors (%d written)", f->n, n);
    int order = 1;
    for (int i = 0; i < f->n && i < n; i++) order &= !strcmp(f->entries[i].name, t[i].name);
    const unsigned char *base = (const unsigned char *)f->map + 8 + hlen;
    for (int i = 1; i < f->n; i++)
        order &= f->entries[i].data == (const unsigned char *)f->entries[i - 1].data + f->entries[i - 1].nbytes;
    T_CHECK(order && f->entries[0].data == base, "tensors in the order given, contiguous from offset 0");
    T_CHECK(kda_st_meta(f, "format") && !strcmp(kda_st_meta(f, "format"), "pt"), "metadata format = pt");

    const kda_st_entry *e = kda_st_find(f, "z.f32");
    float out[64];
    int ok = e && e->dtype == KDA_ST_F32 && e->ndim == 2 && e->shape[0] == 3 && e->shape[1] == 5 && e->numel == NF;
    if (ok) kda_st_to_f32(f, e, out);
    for (int i = 0; ok && i < NF; i++) ok = same_bits(out[i], f32[i]);
    T_CHECK(ok, "F32 [3,5] round trip is bit exact");

    e = kda_st_find(f, "a.bf16");
    ok = e && e->dtype == KDA_ST_BF16 && e->ndim == 4 && e->shape[3] == 2 && e->nbytes == NB * 2;
    for (int i = 0; ok && i < NB; i++) {
        uint16_t stored;
        memcpy(&stored, (const unsigned char *)e->data + 2 * i, 2);
        ok = stored == kda_f32_to_bf16(bf[i]);
    }
    if (ok) kda_st_to_f32(f, e, out);
    for (int i = 0; ok && i < NB; i++) ok = same_bits(out[i], kda_bf16_to_f32(kda_f32_to_bf16(bf[i])));
    T_CHECK(ok, "BF16 [2,3,2,2] stored as common.h's RNE bf16 (ties, inf, nan, -0) and read back");
    uint16_t b0, b1;
    memcpy(&b0, (const unsigned char *)e->data, 2);
    memcpy(&b1, (const unsigned char *)e->data + 2, 2);
    T_CHECK(b0 == 0x3f80 && b1 == 0x3f82, "RNE ties: 0x3f808000 -> 0x3f80, 0x3f818000 -> 0x3f82 (got %04x %04x)", b0,
            b1);

    e = kda_st_find(f, "i32");
    ok = e && e->dtype == KDA_ST_I32 && e->numel == NI;
    for (int i = 0; ok && i < NI; i++) {
        int32_t v;
        memcpy(&v, (const unsigned char *)e->data + 4 * i, 4);
        ok = v == (int32_t)i32f[i];
    }
    T_CHECK(ok, "I32 from fp32 integers round trip");
    e = kda_st_find(f, "i32raw");
    ok = e && e->nbytes == sizeof i32raw && !memcmp(e->data, i32raw, sizeof i32raw);
    if (ok) kda_st_to_f32(f, e, out);
    T_CHECK(ok && out[1] == -1.0f && out[4] == 12345.0f, "I32 raw bytes round trip, to_f32 converts");
    e = kda_st_find(f, "bf16raw");
    ok = e && !memcmp(e->data, bfraw, sizeof bfraw);
    if (ok) kda_st_to_f32(f, e, out);
    T_CHECK(ok && out[0] == 1.0f && out[1] == -2.0f && out[2] == INFINITY, "BF16 raw bytes round trip");
    e = kda_st_find(f, "scalar");
    ok = e && e->ndim == 0 && e->numel == 1;
    if (ok) kda_st_to_f32(f, e, out);
    T_CHECK(ok && out[0] == 3.25f, "scalar (ndim 0) round trip");
    e = kda_st_find(f, "empty");
    T_CHECK(e && e->ndim == 2 && e->shape[0] == 0 && e->numel == 0 && e->nbytes == 0, "empty [0,4] tensor round trip");
    T_CHECK(kda_st_find(f, "nope") == NULL, "find of an absent name gives NULL");
    kda_st_close(f);

    // overwrite in place: the old file is replaced atomically
    kda_st_write(path, t, 1);
    f = kda_st_open(path);
    T_CHECK(f->n == 1, "rewriting replaces the file (%d tensor)", f->n);
    kda_st_close(f);
}

static void test_write_errors(void) {
    char path[128], err[1024];
    float x[2] = {1.5f, 2.0f};
    path_in(path, sizeof path, "w.safetensors");
    kda_st_tensor dup[] = {{.name = "a", .dtype = KDA_ST_F32, .ndim = 1, .shape = {2}, .data = x},
                           {.name = "a", .dtype = KDA_ST_F32, .ndim = 1, .shape = {2}, .data = x}};
    int rc = kda_st_write_err(path, dup, 2, err, sizeof err);
    T_CHECK(rc != 0 && strstr(err, "appears twice") && !exists(path), "write rejects duplicate names: %s", err);
    kda_st_tensor nonint = {.name = "ids", .dtype = KDA_ST_I32, .ndim = 1, .shape = {2}, .data = x};
    rc = kda_st_write_err(path, &nonint, 1, err, sizeof err);
    T_CHECK(rc != 0 && strstr(err, "not an int32") && !exists(path) && count_prefix("w.safetensors") == 0,
            "write rejects non-integer I32 data, leaves no file: %s", err);
    kda_st_tensor neg = {.name = "n", .dtype = KDA_ST_F32, .ndim = 1, .shape = {-1}, .data = x};
    rc = kda_st_write_err(path, &neg, 1, err, sizeof err);
    T_CHECK(rc != 0 && strstr(err, "bad shape"), "write rejects a negative shape: %s", err);
    kda_st_tensor five = {.name = "n", .dtype = KDA_ST_F32, .ndim = 5, .shape = {1, 1, 1, 1}, .data = x};
    rc = kda_st_write_err(path, &five, 1, err, sizeof err);
    T_CHECK(rc != 0 && strstr(err, "bad shape"), "write rejects ndim 5: %s", err);
    kda_st_tensor ok1 = {.name = "a", .dtype = KDA_ST_F32, .ndim = 1, .shape = {2}, .data = x};
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", dir);
    rc = kda_st_write_err(nodir, &ok1, 1, err, sizeof err);
    T_CHECK(rc != 0 && strstr(err, "cannot create") && strstr(err, nodir), "write into a missing directory: %s", err);
    // a full disk: the temporary is a link to /dev/full, so the flush fails with ENOSPC
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (symlink("/dev/full", tmp) == 0) {
        rc = kda_st_write_err(path, &ok1, 1, err, sizeof err);
        T_CHECK(rc != 0 && strstr(err, "disk full") && !exists(path) && !exists(tmp),
                "full disk: error, temporary removed, no file: %s", err);
        unlink(tmp);
    }
}

static void test_hostile(void) {
    char path[128], p2[160];
    path_in(path, sizeof path, "bad.safetensors");
    const unsigned char five[5] = {1, 2, 3, 4, 5};
    write_bytes(path, five, 5);
    expect_reject("5-byte file", path, "fewer than the 8-byte");
    write_bytes(path, five, 0);
    expect_reject("empty file", path, "fewer than the 8-byte");
    write_file(path, 1000, "{}", 2, 40);
    expect_reject("header length past the end", path, "runs past the end of the file");
    write_file(path, 200u * 1000 * 1000, "{}", 2, 0);
    expect_reject("header length > 100 MB", path, "over the 100000000-byte limit");
    write_file(path, UINT64_MAX, "{}", 2, 0);
    expect_reject("header length 2^64-1", path, "over the");
    expect_reject_hdr("invalid UTF-8", "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
                      "not valid UTF-8");
    expect_reject_hdr("overlong UTF-8", "{\"\xc0\xaf\":1}", 0, "not valid UTF-8");
    expect_reject_hdr("truncated JSON", "{\"a\":{\"dtype\":\"F32\"", 0, "not valid JSON");
    expect_reject_hdr("not JSON", "hello world", 0, "not valid JSON");
    expect_reject_hdr("NUL in a name", "{\"a\\u0000b\":{}}", 0, "not valid JSON");
    expect_reject_hdr("JSON array", "[1, 2]", 0, "not a JSON object");
    expect_reject_hdr("duplicate names",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      8, "duplicate");
    expect_reject_hdr("entry not an object", "{\"a\":5}", 0, "entry is not a JSON object");
    expect_reject_hdr("no dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "has no \"dtype\"");
    expect_reject_hdr("no shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "has no \"shape\"");
    expect_reject_hdr("no data_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "has no \"data_offsets\"");
    expect_reject_hdr("dtype a number", "{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "\"dtype\" is not a string");
    expect_reject_hdr("shape a number", "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4,
                      "\"shape\" is not an array");
    expect_reject_hdr("shape of strings", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
                      "shape[0] is not an integer");
    expect_reject_hdr("fractional shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                      "shape[0] is not an integer");
    expect_reject_hdr("offsets a string", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0,4\"}}", 4,
                      "array of two integers");
    expect_reject_hdr("three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                      "array of two integers");
    expect_reject_hdr("unknown dtype", "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                      "unknown or unsupported dtype 'Q7'");
    expect_reject_hdr("negative shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,0]}}", 0,
                      "shape[1] is negative");
    expect_reject_hdr("overflowing shape",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,8],\"data_offsets\":[0,0]}}", 0,
                      "overflows");
    expect_reject_hdr("overflowing bytes",
                      "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
                      "byte count overflows");
    expect_reject_hdr("5 dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                      "5 dimensions");
    expect_reject_hdr("bytes != numel*size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                      "data_offsets give 4 bytes, but shape x F32 needs 8");
    expect_reject_hdr("offsets past the data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
                      "run past the end of the data section (8 bytes)");
    expect_reject_hdr(
        "huge offsets",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,9223372036854775804]}}", 4,
        "run past the end");
    expect_reject_hdr("decreasing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
                      "negative or decreasing");
    expect_reject_hdr("negative offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
                      "negative or decreasing");
    expect_reject_hdr("overlapping tensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                      12, "overlap");
    expect_reject_hdr("same offsets twice",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                      4, "overlap");
    expect_reject_hdr("gap between tensors",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                      12, "4 unused bytes before tensor 'b'");
    expect_reject_hdr("data not covered", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
                      "cover only 4");
    expect_reject_hdr("metadata not an object", "{\"__metadata__\":[1]}", 0, "\"__metadata__\" is not a JSON object");
    expect_reject_hdr("metadata value a number", "{\"__metadata__\":{\"format\":1}}", 0,
                      "value of 'format' is not a string");
    path_in(p2, sizeof p2, "missing.safetensors");
    expect_reject("missing file", p2, "cannot open");
    expect_reject("a directory", dir, "not a regular file");

    // positive controls written by hand: spaces, header of odd length, offsets not in header
    // order, null metadata, a zero-size tensor between two others
    const char *good = "{\"__metadata__\":null, \"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}   ";
    write_hdr(path, good, 8);
    char err[1024] = "";
    kda_st_file *f = kda_st_open_err(path, err, sizeof err);
    int ok = f && f->n == 3 && kda_st_find(f, "a") && kda_st_find(f, "b")->dtype == KDA_ST_F16;
    T_CHECK(ok, "accept a valid hand-written file (odd header length, offsets out of header order) %s", err);
    kda_st_close(f);
}

// Every truncation of a valid file, and random byte flips in its header, must be rejected
// (or accepted) cleanly: under SAN=1 any out-of-bounds read fails the test.
static void test_fuzz(kda_rng *rng) {
    char src[128], path[128];
    path_in(src, sizeof src, "rt.safetensors");
    path_in(path, sizeof path, "fuzz.safetensors");
    float x[6] = {1, 2, 3, 4, 5, 6};
    kda_st_tensor t[] = {{.name = "x", .dtype = KDA_ST_F32, .ndim = 2, .shape = {2, 3}, .data = x},
                         {.name = "y", .dtype = KDA_ST_BF16, .ndim = 1, .shape = {6}, .data = x}};
    kda_st_write(src, t, 2);
    size_t n = file_size(src);
    unsigned char *b = kda_malloc(n);
    FILE *fp = kda_fopen(src, "rb");
    KDA_CHECK(fread(b, 1, n, fp) == n, "short read");
    fclose(fp);
    int rejected = 0;
    for (size_t len = 0; len < n; len++) {
        write_bytes(path, b, len);
        char err[1024];
        kda_st_file *f = kda_st_open_err(path, err, sizeof err);
        rejected += f == NULL;
        kda_st_close(f);
    }
    T_CHECK(rejected == (int)n, "all %zu truncations rejected (%d)", n, rejected);
    uint64_t hlen;
    memcpy(&hlen, b, 8);
    unsigned char *m = kda_malloc(n);
    int opened = 0, consistent = 1;
    for (int it = 0; it < 600; it++) {
        memcpy(m, b, n);
        int flips = 1 + (int)kda_rng_below(rng, 3);
        for (int k = 0; k < flips; k++) m[8 + kda_rng_below(rng, hlen)] ^= (unsigned char)(1 + kda_rng_below(rng, 255));
        write_bytes(path, m, n);
        char err[1024];
        kda_st_file *f = kda_st_open_err(path, err, sizeof err);
        if (f) { // still valid: its tensors must tile the data section exactly
            const unsigned char *lo = (const unsigned char *)f->map, *hi = lo + f->map_size;
            size_t total = 0;
            float out[16];
            for (int i = 0; i < f->n; i++) {
                const kda_st_entry *e = &f->entries[i];
                const unsigned char *d = e->data;
                consistent &= d >= lo && d + e->nbytes <= hi && e->nbytes == e->numel * kda_st_dtype_size(e->dtype);
                total += e->nbytes;
                if (e->numel <= 16) kda_st_to_f32(f, e, out);
            }
            uint64_t hl;
            memcpy(&hl, lo, 8);
            consistent &= total == f->map_size - 8 - hl;
            opened++;
        }
        kda_st_close(f);
    }
    T_CHECK(consistent, "600 random header corruptions: rejected, or (%d) still a consistent file", opened);
    free(m);
    free(b);
}

// The dying wrappers: exit status 1 and one "kda: error:" line naming the file.
static void test_die(void) {
    char path[128], log[128];
    path_in(path, sizeof path, "bad.safetensors");
    path_in(log, sizeof log, "stderr.txt");
    write_hdr(path, "[]", 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr)) _exit(3);
        kda_st_open(path);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char msg[1024] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        size_t r = fread(msg, 1, sizeof msg - 1, f);
        msg[r] = 0;
        fclose(f);
    }
    char *nl = strchr(msg, '\n');
    int one_line = nl && nl[1] == 0;
    if (nl) *nl = 0;
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && one_line && strstr(msg, "kda: error: '") && strstr(msg, path) &&
                strstr(msg, "not a JSON object"),
            "kda_st_open dies with one line: %s", msg);
}

int main(void) {
    unsigned long seed = t_seed();
    kda_rng rng;
    kda_rng_seed(&rng, seed);
    snprintf(dir, sizeof dir, "/tmp/kda_test_st_XXXXXX");
    KDA_CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    test_round_trip(&rng);
    test_write_errors();
    test_hostile();
    test_fuzz(&rng);
    test_die();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    return t_done("test_safetensors");
}
