// test_gpt_dataset.c — Megatron GPT-dataset semantics: numpy's MT19937 and shuffle bit for
// bit, the split string, the structure of the document / sample / shuffle indices (every
// sample is seq_length+1 consecutive tokens of the shuffled document stream, consecutive
// samples overlap by one token, coverage of every document once per epoch, the separate last
// epoch), blends, determinism, and kda_data resuming: seek(k) then read == read k then go on.
// (tests/python/test_megatron_compat.py compares the orders with megatron-core itself.)
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "data/data.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "base/mt19937.h"
#include "test_die.h"
#include "test_util.h"
#include "text/tokenizer.h"

static char dir[256];

// Documents whose every token says where it came from: doc * 1000 + position.
static void write_docs(const char *prefix, kda_rng *r, int n_docs, int max_len, int *lens) {
    kda_indexed_writer *w = kda_indexed_writer_open(prefix, KDA_IDX_INT32);
    int32_t *ids = kda_malloc(sizeof(int32_t) * (size_t)(max_len + 1));
    for (int d = 0; d < n_docs; d++) {
        int len = 1 + (int)kda_rng_below(r, (uint64_t)max_len);
        for (int j = 0; j < len; j++) ids[j] = d * 1000 + j;
        kda_indexed_writer_add_doc(w, ids, (size_t)len);
        if (lens) lens[d] = len;
    }
    kda_indexed_writer_finish(w);
    free(ids);
}

static void check_mt(void) {
    kda_mt19937 mt;
    kda_mt_seed(&mt, 5489);
    uint32_t a = kda_mt_next32(&mt), b = kda_mt_next32(&mt), c = kda_mt_next32(&mt);
    T_CHECK(a == 3499211612u && b == 581869302u && c == 3890346734u,
            "MT19937(5489) first draws are the reference ones");
    int32_t p[10];
    for (int i = 0; i < 10; i++) p[i] = i;
    kda_mt_seed(&mt, 42);
    kda_mt_shuffle(&mt, p, 10, sizeof p[0]);
    const int32_t np42[10] = {8, 1, 5, 0, 7, 2, 9, 4, 3, 6}; // numpy.random.RandomState(42).permutation(10)
    T_CHECK(!memcmp(p, np42, sizeof p), "shuffle == numpy RandomState(42).permutation(10)");
    // two shuffles in a row continue the stream (int32 then uint32, as numpy)
    int32_t q[20];
    uint32_t u[7];
    for (int i = 0; i < 20; i++) q[i] = i;
    for (int i = 0; i < 7; i++) u[i] = (uint32_t)i;
    kda_mt_seed(&mt, 1234);
    kda_mt_shuffle(&mt, q, 20, sizeof q[0]);
    kda_mt_shuffle(&mt, u, 7, sizeof u[0]);
    const int32_t npq[20] = {3, 13, 2, 16, 14, 5, 4, 0, 8, 18, 17, 11, 10, 9, 7, 1, 19, 12, 6, 15};
    const uint32_t npu[7] = {6, 4, 1, 5, 3, 0, 2};
    T_CHECK(!memcmp(q, npq, sizeof q) && !memcmp(u, npu, sizeof u), "two shuffles in a row == numpy RandomState(1234)");
}

static void bad_split(void *s) {
    double f[3];
    kda_split_parse((const char *)s, f);
}

static void check_split(void) {
    double f[3];
    uint64_t b, e;
    kda_split_parse("969,30,1", f);
    T_CHECK(fabs(f[0] - 0.969) < 1e-15 && fabs(f[1] - 0.030) < 1e-15 && fabs(f[2] - 0.001) < 1e-15,
            "split 969,30,1 -> %.3f %.3f %.3f", f[0], f[1], f[2]);
    int ok = kda_split_range(f, 0, 1000, &b, &e) && b == 0 && e == 969;
    ok &= kda_split_range(f, 1, 1000, &b, &e) && b == 969 && e == 999;
    ok &= kda_split_range(f, 2, 1000, &b, &e) && b == 999 && e == 1000;
    T_CHECK(ok, "ranges of 1000 sequences: [0,969) [969,999) [999,1000)");
    kda_split_parse("99,1", f);
    T_CHECK(!kda_split_range(f, 2, 1000, &b, &e) && kda_split_range(f, 1, 1000, &b, &e) && b == 990 && e == 1000,
            "split 99,1: no test split, valid [990,1000)");
    kda_split_parse("1,1,2", f); // 0.25 * 10 = 2.5 rounds to even: 2
    T_CHECK(kda_split_range(f, 1, 10, &b, &e) && b == 2 && e == 5, "round half to even as Python: [2,5) of 10");
    const char *bad[] = {"0,0,0", "1,2,3,4", "1..2,3", ""};
    for (int i = 0; i < 4; i++) {
        t_child c = t_run_child(bad_split, (void *)bad[i]);
        const char *words[] = {"split", NULL};
        T_CHECK(t_died_saying(&c, words), "bad split '%s' -> %.*s", bad[i], (int)strcspn(c.err, "\n"), c.err);
    }
}

// Structure of one GPT dataset against a direct construction from its document index.
static void check_structure(kda_indexed *x, const int *lens, uint64_t b, uint64_t e, int64_t want, int L, uint32_t seed,
                            const char *what) {
    kda_gpt_dataset *g = kda_gpt_dataset_new(x, b, e, want, L, seed);
    uint64_t n_doc, n = kda_gpt_dataset_len(g);
    const int32_t *di = kda_gpt_dataset_doc_index(g, &n_doc);
    const int64_t *sh = kda_gpt_dataset_shuffle_index(g);
    int epochs = kda_gpt_dataset_epochs(g);
    uint64_t tpe = 0;
    for (uint64_t d = b; d < e; d++) tpe += (uint64_t)lens[d];
    // each document of the range exactly once per epoch
    int *count = kda_calloc(e + 1, sizeof(int));
    int cover = n_doc == (uint64_t)epochs * (e - b);
    for (uint64_t i = 0; i < n_doc; i++) {
        if ((uint64_t)di[i] < b || (uint64_t)di[i] >= e)
            cover = 0;
        else
            count[di[i]]++;
    }
    for (uint64_t d = b; d < e; d++) cover &= count[d] == epochs;
    T_CHECK(cover, "%s: %d epochs, each document of [%llu,%llu) %d times", what, epochs, (unsigned long long)b,
            (unsigned long long)e, epochs);
    int64_t need = want < 0 ? 0 : want;
    T_CHECK(n == ((uint64_t)epochs * tpe - 1) / (uint64_t)L && n >= (uint64_t)need &&
                (epochs == 1 || (uint64_t)(epochs - 1) * tpe < (uint64_t)need * L + 1),
            "%s: %llu samples = (epochs*tokens-1)/seq_length, >= %lld requested, fewest epochs", what,
            (unsigned long long)n, (long long)need);
    // the stream of tokens in document-index order
    uint64_t n_stream = (uint64_t)epochs * tpe, k = 0;
    int32_t *stream = kda_malloc(sizeof(int32_t) * n_stream);
    for (uint64_t i = 0; i < n_doc; i++)
        for (int j = 0; j < lens[di[i]]; j++) stream[k++] = di[i] * 1000 + j;
    // shuffle is a permutation; sample i = stream[s*L .. s*L+L] with s = shuffle[i]
    char *seen = kda_calloc(n + 1, 1);
    int perm = 1, samples_ok = 1;
    int32_t *buf = kda_malloc(sizeof(int32_t) * (size_t)(L + 1));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t s = (uint64_t)sh[i];
        if (s >= n || seen[s])
            perm = 0;
        else
            seen[s] = 1;
        kda_gpt_dataset_get(g, i, buf);
        if (memcmp(buf, stream + s * (uint64_t)L, sizeof(int32_t) * (size_t)(L + 1))) samples_ok = 0;
    }
    T_CHECK(perm, "%s: shuffle index is a permutation of the %llu samples", what, (unsigned long long)n);
    T_CHECK(samples_ok, "%s: every sample is seq_length+1 consecutive stream tokens, overlapping the next by one",
            what);
    // a separate last epoch keeps the first epochs' samples in front
    if (epochs > 1) {
        uint64_t sans = ((uint64_t)(epochs - 1) * tpe - 1) / (uint64_t)L, per = (tpe - 1) / (uint64_t)L;
        int separate = (double)(need - (int64_t)sans) < (double)(int64_t)(0.8 * (double)per);
        int front = 1;
        for (uint64_t i = 0; i < sans && separate; i++) front &= (uint64_t)sh[i] < sans;
        T_CHECK(front, "%s: last epoch %s (its samples %s)", what,
                separate ? "shuffled apart" : "shuffled with the rest",
                separate ? "all come after the others" : "mixed in");
    }
    // determinism, and the seed matters
    kda_gpt_dataset *g2 = kda_gpt_dataset_new(x, b, e, want, L, seed),
                    *g3 = kda_gpt_dataset_new(x, b, e, want, L, seed + 1);
    T_CHECK(!memcmp(sh, kda_gpt_dataset_shuffle_index(g2), sizeof(int64_t) * n) &&
                memcmp(sh, kda_gpt_dataset_shuffle_index(g3), sizeof(int64_t) * n),
            "%s: same seed, same order; seed+1, another order", what);
    kda_gpt_dataset_free(g2);
    kda_gpt_dataset_free(g3);
    free(buf);
    free(seen);
    free(stream);
    free(count);
    kda_gpt_dataset_free(g);
}

static void check_blend(kda_indexed *x, kda_indexed *y, int L, uint32_t seed) {
    kda_indexed *xs[2] = {x, y};
    double w[2] = {3, 7}, fr[3];
    kda_split_parse("90,10,0", fr);
    uint64_t size = 500;
    kda_gpt_source *s = kda_gpt_source_new(xs, w, 2, fr, 0, size, L, seed);
    uint64_t cnt[2] = {0, 0}, next[2] = {0, 0};
    int in_order = 1, same = 1;
    int32_t *a = kda_malloc(sizeof(int32_t) * (size_t)(L + 1)), *b = kda_malloc(sizeof(int32_t) * (size_t)(L + 1));
    // the parts as Megatron builds them: ceil(ceil(size * w) * 1.005) samples each
    kda_gpt_dataset *part[2];
    for (int i = 0; i < 2; i++) {
        uint64_t n = kda_indexed_num_sequences(xs[i]), pb, pe;
        kda_split_range(fr, 0, n, &pb, &pe);
        double target = ceil((double)size * (w[i] / 10.0));
        part[i] = kda_gpt_dataset_new(xs[i], pb, pe, (int64_t)ceil(target * 1.005), L, seed);
    }
    for (uint64_t k = 0; k < kda_gpt_source_len(s); k++) {
        int d;
        uint64_t j;
        kda_gpt_source_locate(s, k, &d, &j);
        in_order &= j == next[d];
        next[d]++;
        cnt[d]++;
        kda_gpt_source_get(s, k, a);
        kda_gpt_dataset_get(part[d], j, b);
        same &= !memcmp(a, b, sizeof(int32_t) * (size_t)(L + 1));
        // every prefix of the blend stays within one sample of the weights
        double e0 = 0.3 * (double)(k + 1) - (double)cnt[0];
        if (fabs(e0) > 1.0) in_order = 0;
    }
    T_CHECK(kda_gpt_source_len(s) == 150 + 350 && cnt[0] == 150 && cnt[1] == 350,
            "blend 3:7 of 500: %llu + %llu samples", (unsigned long long)cnt[0], (unsigned long long)cnt[1]);
    T_CHECK(in_order, "blend takes each dataset's samples in order, every prefix within 1 of the weights");
    T_CHECK(same, "blend sample k is sample j of its dataset (built with the 0.5%% surplus)");
    kda_gpt_source *u = kda_gpt_source_new(xs, NULL, 2, fr, 0, 1u << 30, L, seed);
    uint64_t one_x, one_y, pb, pe;
    kda_split_range(fr, 0, kda_indexed_num_sequences(x), &pb, &pe);
    kda_gpt_dataset *ox = kda_gpt_dataset_new(x, pb, pe, -1, L, seed);
    kda_split_range(fr, 0, kda_indexed_num_sequences(y), &pb, &pe);
    kda_gpt_dataset *oy = kda_gpt_dataset_new(y, pb, pe, -1, L, seed);
    one_x = kda_gpt_dataset_len(ox);
    one_y = kda_gpt_dataset_len(oy);
    T_CHECK(kda_gpt_source_len(u) == one_x + one_y, "unweighted blend: one epoch of each (%llu + %llu samples)",
            (unsigned long long)one_x, (unsigned long long)one_y);
    kda_gpt_dataset_free(ox);
    kda_gpt_dataset_free(oy);
    kda_gpt_source_free(u);
    for (int i = 0; i < 2; i++) kda_gpt_dataset_free(part[i]);
    kda_gpt_source_free(s);
    free(a);
    free(b);
}

static void set_paths(kda_config *c, const char *const *paths, int n) {
    c->n_train_data_path = n;
    for (int i = 0; i < n; i++) snprintf(c->train_data_path[i], KDA_PATH_MAX, "%s", paths[i]);
}

// seek(k) then read m == read k, then read m; and the same after reopening.
static void check_resume(const kda_config *c, const char *what) {
    int L = c->seq_length, k = 37, m = 23;
    size_t row = (size_t)L + 1;
    int32_t *first = kda_malloc(sizeof(int32_t) * row * (size_t)(k + m)),
            *again = kda_malloc(sizeof(int32_t) * row * (size_t)m);
    kda_data *d = kda_data_open(c, KDA_SPLIT_TRAIN);
    for (int i = 0; i < k + m; i += 5) kda_data_next(d, first + (size_t)i * row, i + 5 <= k + m ? 5 : k + m - i);
    uint64_t consumed = kda_data_consumed(d);
    kda_data_close(d);
    d = kda_data_open(c, KDA_SPLIT_TRAIN);
    kda_data_seek(d, (uint64_t)k);
    kda_data_next(d, again, m);
    T_CHECK(consumed == (uint64_t)(k + m) && !memcmp(again, first + (size_t)k * row, sizeof(int32_t) * row * (size_t)m),
            "%s: reopen, seek(%d), read %d == read %d then %d", what, k, m, k, m);
    // past the end the order repeats
    uint64_t n = kda_data_num_samples(d);
    kda_data_seek(d, n + 3);
    kda_data_next(d, again, 1);
    kda_data_seek(d, 3);
    kda_data_next(d, again + row, 1);
    T_CHECK(!memcmp(again, again + row, sizeof(int32_t) * row), "%s: sample num_samples+3 == sample 3 (%llu samples)",
            what, (unsigned long long)n);
    kda_data_close(d);
    free(first);
    free(again);
}

static void open_train(void *c) { kda_data_close(kda_data_open((const kda_config *)c, KDA_SPLIT_TRAIN)); }

int main(void) {
    unsigned long seed = t_seed();
    kda_rng r;
    kda_rng_seed(&r, seed);
    snprintf(dir, sizeof dir, "/tmp/kda_test_gpt_XXXXXX");
    if (!mkdtemp(dir)) kda_die("mkdtemp: %s", strerror(errno));
    check_mt();
    check_split();

    char pa[300], pb[300], text[300];
    snprintf(pa, sizeof pa, "%s/a", dir);
    snprintf(pb, sizeof pb, "%s/b", dir);
    int lens_a[300], lens_b[120];
    write_docs(pa, &r, 300, 60, lens_a);
    write_docs(pb, &r, 120, 90, lens_b);
    kda_indexed *xa = kda_indexed_open(pa), *xb = kda_indexed_open(pb);
    uint32_t s32 = (uint32_t)(seed % 100000);
    int L = 16 + (int)kda_rng_below(&r, 32);
    printf("seq_length %d, numpy seed %u\n", L, s32);
    uint64_t tpe = 0;
    for (int i = 0; i < 290; i++) tpe += (uint64_t)lens_a[i];
    check_structure(xa, lens_a, 0, 290, -1, L, s32, "one epoch");
    check_structure(xa, lens_a, 0, 290, (int64_t)(tpe * 2 / (uint64_t)L), L, s32, "3 epochs, full last one");
    check_structure(xa, lens_a, 0, 290, (int64_t)((tpe * 2 + tpe / 4) / (uint64_t)L), L, s32,
                    "3 epochs, short last one");
    check_structure(xa, lens_a, 290, 300, 50, L, s32, "a 10-document range");
    check_blend(xa, xb, L, s32);

    kda_config c;
    kda_config_defaults(&c);
    snprintf(c.data_format, sizeof c.data_format, "megatron");
    snprintf(c.split, sizeof c.split, "90,8,2");
    c.seq_length = L;
    c.seed = s32;
    c.vocab_size = 300000;
    c.train_iters = 40;
    c.global_batch_size = 8;
    const char *one[] = {pa};
    set_paths(&c, one, 1);
    check_resume(&c, "megatron, one file");
    const char *blend[] = {"0.25", pa, "0.75", pb};
    set_paths(&c, blend, 4);
    check_resume(&c, "megatron, weighted blend");

    // errors through kda_data_open name the file or setting
    c.vocab_size = 1000; // ids reach 299059
    set_paths(&c, one, 1);
    t_child ch = t_run_child(open_train, &c);
    const char *w_vocab[] = {"a.bin", "vocabulary", NULL};
    T_CHECK(t_died_saying(&ch, w_vocab), "ids >= vocab_size at open -> %.*s", (int)strcspn(ch.err, "\n"), ch.err);
    c.vocab_size = 300000;
    snprintf(c.split, sizeof c.split, "100,0,0");
    const char *missing[] = {"/nonexistent/corpus"};
    set_paths(&c, missing, 1);
    ch = t_run_child(open_train, &c);
    const char *w_missing[] = {"/nonexistent/corpus.idx", NULL};
    T_CHECK(t_died_saying(&ch, w_missing), "missing prefix -> %.*s", (int)strcspn(ch.err, "\n"), ch.err);

    // text format: windows of the file's bytes inside the split's range
    snprintf(text, sizeof text, "%s/t.txt", dir);
    FILE *f = kda_fopen(text, "wb");
    size_t n_text = 5000;
    unsigned char *bytes = kda_malloc(n_text);
    for (size_t i = 0; i < n_text; i++) bytes[i] = (unsigned char)kda_rng_below(&r, 256);
    if (fwrite(bytes, 1, n_text, f) != n_text) kda_die("write %s", text);
    fclose(f);
    kda_config t;
    kda_config_defaults(&t);
    snprintf(t.data_format, sizeof t.data_format, "text");
    snprintf(t.tokenizer_type, sizeof t.tokenizer_type, "byte");
    snprintf(t.split, sizeof t.split, "90,10,0");
    t.seq_length = L;
    t.seed = (long)seed;
    t.vocab_size = 256;
    const char *tp[] = {text};
    set_paths(&t, tp, 1);
    check_resume(&t, "text");
    int inside = 1;
    int32_t *buf = kda_malloc(sizeof(int32_t) * (size_t)(L + 1));
    for (kda_split sp = KDA_SPLIT_TRAIN; sp <= KDA_SPLIT_VALID; sp++) {
        kda_data *d = kda_data_open(&t, sp);
        size_t lo = sp == KDA_SPLIT_TRAIN ? 0 : 4500, hi = sp == KDA_SPLIT_TRAIN ? 4500 : 5000;
        for (int i = 0; i < 200; i++) {
            kda_data_next(d, buf, 1);
            int found = 0;
            for (size_t o = lo; o + (size_t)L + 1 <= hi && !found; o++) {
                int eq = 1;
                for (int j = 0; j <= L && eq; j++) eq = buf[j] == bytes[o + (size_t)j];
                found = eq;
            }
            inside &= found;
        }
        kda_data_close(d);
    }
    T_CHECK(inside, "text: every sample is seq_length+1 bytes of its split's range of the file");
    t.vocab_size = 100;
    ch = t_run_child(open_train, &t);
    const char *w_small[] = {"vocab_size", NULL};
    T_CHECK(t_died_saying(&ch, w_small), "text with vocab_size < 256 -> %.*s", (int)strcspn(ch.err, "\n"), ch.err);

    // text format through the Hugging Face tokenizer: windows of the file's ids
    const char *tj = "data/tokenizer/llama3/tokenizer.json";
    FILE *probe = fopen(tj, "rb");
    if (probe) {
        fclose(probe);
        const char *words = "The quick brown fox jumps over the lazy dog. Photosynthesis! 12345 \u00e9t\u00e9 ";
        f = kda_fopen(text, "wb");
        for (int k = 0; k < 60; k++) fputs(words, f);
        fclose(f);
        snprintf(t.tokenizer_type, sizeof t.tokenizer_type, "HuggingFaceTokenizer");
        snprintf(t.tokenizer_model, sizeof t.tokenizer_model, "%s", tj);
        snprintf(t.split, sizeof t.split, "1");
        t.vocab_size = 128256;
        kda_tokenizer *tok = kda_tok_load_hf(tj);
        kda_tok_ctx *ctx = kda_tok_ctx_new(tok);
        kda_tok_ids all = {0};
        size_t n_file;
        unsigned char *file = NULL;
        {
            FILE *g = kda_fopen(text, "rb");
            file = kda_malloc(1 << 16);
            n_file = fread(file, 1, 1 << 16, g);
            fclose(g);
        }
        kda_tok_encode(ctx, (const char *)file, n_file, 0, &all);
        kda_data *d = kda_data_open(&t, KDA_SPLIT_TRAIN);
        int found_all = 1;
        for (int k = 0; k < 50; k++) {
            kda_data_next(d, buf, 1);
            int found = 0;
            for (size_t o = 0; o + (size_t)L + 1 <= all.n && !found; o++)
                found = !memcmp(buf, all.v + o, sizeof(int32_t) * (size_t)(L + 1));
            found_all &= found;
        }
        T_CHECK(found_all && kda_data_num_samples(d) == (all.n - 1) / (size_t)L,
                "text with the Llama 3 tokenizer: samples are windows of the file's %zu ids", all.n);
        kda_data_close(d);
        kda_tok_ids_free(&all);
        kda_tok_ctx_free(ctx);
        kda_tok_free(tok);
        free(file);
    } else {
        printf("  (no %s: text with a Hugging Face tokenizer not checked)\n", tj);
    }

    free(buf);
    free(bytes);
    kda_indexed_close(xa);
    kda_indexed_close(xb);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("(could not remove %s)\n", dir);
    return t_done("test_gpt_dataset");
}
