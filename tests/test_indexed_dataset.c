// test_indexed_dataset.c — Megatron .bin/.idx: writer/reader round trip on random documents
// (uint16 and int32, empty documents), the exact header bytes, atomic writing, and one clear
// error naming the file for every kind of damage.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "data/indexed_dataset.h"
#include "test_die.h"
#include "test_util.h"

static char dir[256];

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void path_of(char *out, const char *name, const char *ext) { sprintf(out, "%s/%s%s", dir, name, ext); }

// Random documents: lengths 0..max_len, ids below vocab.
typedef struct {
    int n;
    int32_t **ids;
    size_t *len;
} docs;

static docs make_docs(kda_rng *r, int n, int max_len, int64_t vocab) {
    docs d = {n, kda_calloc((size_t)n, sizeof(int32_t *)), kda_calloc((size_t)n, sizeof(size_t))};
    for (int i = 0; i < n; i++) {
        d.len[i] = i % 7 == 3 ? 0 : (size_t)kda_rng_below(r, (uint64_t)max_len + 1);
        d.ids[i] = kda_malloc(sizeof(int32_t) * (d.len[i] + 1));
        for (size_t j = 0; j < d.len[i]; j++) d.ids[i][j] = (int32_t)kda_rng_below(r, (uint64_t)vocab);
        if (d.len[i]) d.ids[i][0] = (int32_t)(vocab - 1); // the largest id appears
    }
    return d;
}

static void write_docs(const char *prefix, const docs *d, int dtype) {
    kda_indexed_writer *w = kda_indexed_writer_open(prefix, dtype);
    for (int i = 0; i < d->n; i++) kda_indexed_writer_add_doc(w, d->ids[i], d->len[i]);
    kda_indexed_writer_finish(w);
}

static void round_trip(kda_rng *r, int dtype, int64_t vocab) {
    char prefix[300], idx_path[320];
    sprintf(prefix, "%s/rt_%s", dir, kda_indexed_dtype_name(dtype));
    docs d = make_docs(r, 200, 300, vocab);
    write_docs(prefix, &d, dtype);
    kda_indexed *x = kda_indexed_open(prefix);
    kda_indexed_set_vocab(x, vocab);
    uint64_t n_seq = 0, n_tok = 0;
    for (int i = 0; i < d.n; i++) n_seq += d.len[i] > 0, n_tok += d.len[i];
    T_CHECK(kda_indexed_dtype(x) == dtype, "%s: dtype code %d read back", kda_indexed_dtype_name(dtype),
            kda_indexed_dtype(x));
    T_CHECK(kda_indexed_num_documents(x) == 200 && kda_indexed_num_sequences(x) == n_seq &&
                kda_indexed_num_tokens(x) == n_tok,
            "%s: %llu documents, %llu sequences (empty documents have none), %llu tokens",
            kda_indexed_dtype_name(dtype), (unsigned long long)kda_indexed_num_documents(x),
            (unsigned long long)kda_indexed_num_sequences(x), (unsigned long long)kda_indexed_num_tokens(x));
    // every document's ids, through its document-index entry
    const int64_t *di = kda_indexed_doc_index(x);
    const int32_t *sl = kda_indexed_seq_lengths(x);
    int same = 1;
    int32_t *buf = kda_malloc(sizeof(int32_t) * 400);
    for (int i = 0; i < d.n && same; i++) {
        int64_t s0 = di[i], s1 = di[i + 1];
        if ((s1 - s0) != (d.len[i] > 0)) same = 0;
        if (s1 > s0) {
            same &= (size_t)sl[s0] == d.len[i];
            kda_indexed_read(x, (uint64_t)s0, 0, d.len[i], buf);
            same &= !memcmp(buf, d.ids[i], sizeof(int32_t) * d.len[i]);
            if (d.len[i] > 5) { // a slice from the middle
                kda_indexed_read(x, (uint64_t)s0, 2, 3, buf);
                same &= !memcmp(buf, d.ids[i] + 2, sizeof(int32_t) * 3);
            }
        }
    }
    T_CHECK(same, "%s: every document's ids and boundaries read back", kda_indexed_dtype_name(dtype));
    kda_indexed_check_ids(x, vocab); // passes: the largest id is vocab-1

    // header bytes exactly as megatron-core writes them
    sprintf(idx_path, "%s.idx", prefix);
    size_t n = 0;
    unsigned char *b = t_slurp(idx_path, &n);
    uint64_t version, S, D;
    memcpy(&version, b + 9, 8);
    memcpy(&S, b + 18, 8);
    memcpy(&D, b + 26, 8);
    int64_t ptr1;
    memcpy(&ptr1, b + 34 + 4 * S + 8, 8);
    T_CHECK(!memcmp(b, "MMIDIDX\0\0", 9) && version == 1 && b[17] == dtype && S == n_seq && D == 201 &&
                n == 34 + 12 * S + 8 * D && ptr1 == (int64_t)sl[0] * kda_indexed_dtype_size(dtype),
            "%s: .idx header (magic, version 1, dtype, counts), length and pointers", kda_indexed_dtype_name(dtype));
    free(b);
    free(buf);
    kda_indexed_close(x);
    for (int i = 0; i < d.n; i++) free(d.ids[i]);
    free(d.ids);
    free(d.len);
}

// ---- damage: each case stops with one line naming the file ----

static const char *g_prefix;
static int64_t g_vocab;
static void open_it(void *arg) {
    (void)arg;
    kda_indexed *x = kda_indexed_open(g_prefix);
    if (g_vocab) kda_indexed_check_ids(x, g_vocab);
    kda_indexed_close(x);
}
static void read_it(void *arg) {
    (void)arg;
    kda_indexed *x = kda_indexed_open(g_prefix);
    kda_indexed_set_vocab(x, g_vocab);
    int32_t buf[64];
    for (uint64_t s = 0; s < kda_indexed_num_sequences(x); s++)
        kda_indexed_read(
            x, s, 0, (uint64_t)kda_indexed_seq_lengths(x)[s] < 64 ? (uint64_t)kda_indexed_seq_lengths(x)[s] : 64, buf);
    kda_indexed_close(x);
}

typedef void (*damage_fn)(unsigned char *idx, size_t *n_idx, unsigned char *bin, size_t *n_bin);
static void cut_bin(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)i, (void)ni, (void)b, *nb -= 2;
}
static void grow_bin(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)i, (void)ni, (void)b, *nb += 2;
}
static void cut_idx(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)i, (void)b, (void)nb, *ni -= 5;
}
static void cut_idx_header(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)i, (void)b, (void)nb, *ni = 20;
}
static void bad_magic(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb, i[0] = 'X';
}
static void bad_version(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb, i[9] = 2;
}
static void dtype_int32(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb, i[17] = 4;
}
static void dtype_float(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb, i[17] = 7;
}
static void dtype_bogus(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb, i[17] = 42;
}
static void huge_count(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb;
    uint64_t S = UINT64_MAX / 3;
    memcpy(i + 18, &S, 8);
}
static uint64_t seq_count(const unsigned char *i) {
    uint64_t S;
    memcpy(&S, i + 18, 8);
    return S;
}
static void ptr_out(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b;
    int64_t p = (int64_t)*nb; // the last sequence starts at the end of the file
    memcpy(i + 34 + 4 * seq_count(i) + 8 * (seq_count(i) - 1), &p, 8);
}
static void ptr_negative(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb;
    int64_t p = -2;
    memcpy(i + 34 + 4 * seq_count(i) + 8, &p, 8);
}
static void len_negative(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb;
    int32_t l = -1;
    memcpy(i + 34 + 4, &l, 4);
}
static void doc_index_decreasing(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)ni, (void)b, (void)nb;
    int64_t v = 1000;
    memcpy(i + 34 + 12 * seq_count(i) + 8 * 3, &v, 8);
}
static void doc_index_short(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)b, (void)nb;
    uint64_t D;
    memcpy(&D, i + 26, 8);
    D -= 1; // drop the last entry: the index no longer ends at S
    memcpy(i + 26, &D, 8);
    *ni -= 8;
}
static void id_too_big(unsigned char *i, size_t *ni, unsigned char *b, size_t *nb) {
    (void)i, (void)ni;
    uint16_t v = 1000; // vocab is 1000 in these cases
    memcpy(b + *nb - 2, &v, 2);
}

static void damage_case(const char *what, damage_fn fn, void (*runner)(void *), int64_t vocab,
                        const char *const *words) {
    char src[300], prefix[300], p[320];
    sprintf(src, "%s/clean", dir);
    sprintf(prefix, "%s/damaged", dir);
    size_t ni, nb;
    sprintf(p, "%s.idx", src);
    unsigned char *idx = t_slurp(p, &ni);
    sprintf(p, "%s.bin", src);
    unsigned char *bin = t_slurp(p, &nb);
    idx = kda_realloc(idx, ni + 64);
    bin = kda_realloc(bin, nb + 64);
    memset(bin + nb, 0, 64);
    fn(idx, &ni, bin, &nb);
    sprintf(p, "%s.idx", prefix);
    t_spill(p, idx, ni);
    sprintf(p, "%s.bin", prefix);
    t_spill(p, bin, nb);
    g_prefix = prefix;
    g_vocab = vocab;
    t_child c = t_run_child(runner, NULL);
    const char *nl = strchr(c.err, '\n');
    int len = nl ? (int)(nl - c.err) : (int)strlen(c.err);
    T_CHECK(t_died_saying(&c, words), "%-34s -> exit %d: %.*s", what, c.status, len > 150 ? 150 : len, c.err);
    free(idx);
    free(bin);
}

static void writer_dies_on_wide_id(void *arg) {
    (void)arg;
    char prefix[300];
    sprintf(prefix, "%s/wide", dir);
    kda_indexed_writer *w = kda_indexed_writer_open(prefix, KDA_IDX_UINT16);
    int32_t ids[2] = {5, 70000};
    kda_indexed_writer_add_doc(w, ids, 2);
    kda_indexed_writer_finish(w);
}

int main(void) {
    unsigned long seed = t_seed();
    kda_rng r;
    kda_rng_seed(&r, seed);
    snprintf(dir, sizeof dir, "/tmp/kda_test_idx_XXXXXX");
    if (!mkdtemp(dir)) kda_die("mkdtemp: %s", strerror(errno));

    T_CHECK(
        kda_indexed_dtype_for_vocab(256) == KDA_IDX_UINT16 && kda_indexed_dtype_for_vocab(65499) == KDA_IDX_UINT16 &&
            kda_indexed_dtype_for_vocab(65500) == KDA_IDX_INT32 && kda_indexed_dtype_for_vocab(128256) == KDA_IDX_INT32,
        "dtype by vocabulary as Megatron: uint16 below 65500, else int32");
    round_trip(&r, KDA_IDX_UINT16, 65499);
    round_trip(&r, KDA_IDX_INT32, 128256);
    round_trip(&r, KDA_IDX_UINT8, 256);

    // atomic writing: nothing under the final names until finish; abort leaves nothing
    {
        char prefix[300], bin[320], idx[320], tmp[340];
        sprintf(prefix, "%s/atomic", dir);
        path_of(bin, "atomic", ".bin");
        path_of(idx, "atomic", ".idx");
        sprintf(tmp, "%s.bin.tmp.%ld", prefix, (long)getpid());
        kda_indexed_writer *w = kda_indexed_writer_open(prefix, KDA_IDX_UINT16);
        int32_t ids[3] = {1, 2, 3};
        kda_indexed_writer_add_doc(w, ids, 3);
        T_CHECK(!exists(bin) && !exists(idx) && exists(tmp), "while writing: only the temporary file exists");
        kda_indexed_writer_abort(w);
        T_CHECK(!exists(bin) && !exists(idx) && !exists(tmp), "abort removes the temporary files");
        w = kda_indexed_writer_open(prefix, KDA_IDX_UINT16);
        kda_indexed_writer_add_doc(w, ids, 3);
        kda_indexed_writer_finish(w);
        T_CHECK(exists(bin) && exists(idx) && !exists(tmp), "finish renames both into place");
        t_child c = t_run_child(writer_dies_on_wide_id, NULL);
        char wbin[320], cmd[400];
        path_of(wbin, "wide", ".bin");
        int leftovers = -1; // the child's pid named its temporary files: count every wide* file
        sprintf(cmd, "ls %s | grep -c '^wide' || true", dir);
        FILE *ls = popen(cmd, "r");
        if (ls && fscanf(ls, "%d", &leftovers) != 1) leftovers = -1;
        if (ls) pclose(ls);
        const char *words[] = {"70000", "uint16", NULL};
        T_CHECK(t_died_saying(&c, words) && !exists(wbin) && leftovers == 0,
                "an id too wide for uint16 stops the writer and leaves no file (%d left)", leftovers);
    }

    // damage cases on a small clean uint16 file (ids < 1000)
    {
        char prefix[300];
        sprintf(prefix, "%s/clean", dir);
        docs d = make_docs(&r, 12, 40, 1000);
        d.len[11] = 5; // the last document is not empty (id_too_big writes its last id)
        d.ids[11] = kda_realloc(d.ids[11], sizeof(int32_t) * 5);
        for (int j = 0; j < 5; j++) d.ids[11][j] = j;
        write_docs(prefix, &d, KDA_IDX_UINT16);
        for (int i = 0; i < d.n; i++) free(d.ids[i]);
        free(d.ids);
        free(d.len);
        const char *w_bin_trunc[] = {"damaged.bin", "truncated", NULL};
        const char *w_idx_trunc[] = {"damaged.idx", "truncated", NULL};
        const char *w_magic[] = {"damaged.idx", "magic", NULL};
        const char *w_version[] = {"damaged.idx", "version 2", NULL};
        const char *w_dtype[] = {"damaged.bin", "int32", "dtype", NULL};
        const char *w_float[] = {"damaged.idx", "float32", NULL};
        const char *w_bogus[] = {"damaged.idx", "code 42", NULL};
        const char *w_ptr[] = {"damaged.idx", "outside", "damaged.bin", NULL};
        const char *w_len[] = {"damaged.idx", "length -1", NULL};
        const char *w_doc[] = {"damaged.idx", "document index", NULL};
        const char *w_vocab[] = {"damaged.bin", "1000", "document 11", "vocabulary", NULL};
        damage_case("truncated .bin", cut_bin, open_it, 0, w_bin_trunc);
        damage_case(".bin with extra bytes", grow_bin, open_it, 0, w_bin_trunc);
        damage_case("truncated .idx", cut_idx, open_it, 0, w_idx_trunc);
        damage_case(".idx shorter than its header", cut_idx_header, open_it, 0, w_idx_trunc);
        damage_case("bad magic", bad_magic, open_it, 0, w_magic);
        damage_case("bad version", bad_version, open_it, 0, w_version);
        damage_case("dtype mismatch (idx int32, bin uint16)", dtype_int32, open_it, 0, w_dtype);
        damage_case("float dtype", dtype_float, open_it, 0, w_float);
        damage_case("unknown dtype code", dtype_bogus, open_it, 0, w_bogus);
        damage_case("sequence count beyond the file", huge_count, open_it, 0, w_idx_trunc);
        damage_case("pointer past the end of .bin", ptr_out, open_it, 0, w_ptr);
        damage_case("negative pointer", ptr_negative, open_it, 0, w_ptr);
        damage_case("negative length", len_negative, open_it, 0, w_len);
        damage_case("document index decreasing", doc_index_decreasing, open_it, 0, w_doc);
        damage_case("document index not ending at S", doc_index_short, open_it, 0, w_doc);
        damage_case("id >= vocab_size (scan)", id_too_big, open_it, 1000, w_vocab);
        damage_case("id >= vocab_size (read)", id_too_big, read_it, 1000, w_vocab);
        // missing files
        char missing[300];
        sprintf(missing, "%s/nothing_here", dir);
        g_prefix = missing;
        g_vocab = 0;
        t_child c = t_run_child(open_it, NULL);
        const char *w_missing[] = {"nothing_here.idx", "kda tokenize", NULL};
        T_CHECK(t_died_saying(&c, w_missing), "missing files -> %.*s", (int)strcspn(c.err, "\n"), c.err);
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("(could not remove %s)\n", dir);
    return t_done("test_indexed_dataset");
}
