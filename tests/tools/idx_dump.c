// idx_dump.c — our side of tests/python/test_megatron_compat.py, as JSON on stdout:
//   idx_dump dump PREFIX
//       {"dtype": code, "sequence_lengths": [...], "document_index": [...], "sequences": [[ids]...]}
//   idx_dump write PREFIX VOCAB_SIZE  < JSON lines {"ids": [...]}
//       one document per line through the writer (dtype chosen for VOCAB_SIZE as Megatron does)
//   idx_dump gpt SPLIT_STRING SEED SEQ_LENGTH TRAIN_SAMPLES EVAL_SAMPLES WHICH PATH...
//       every sample of split WHICH (train | valid | test) of the Megatron data path PATH...
//       ([prefix...] or [weight prefix ...]) through kda_data, one JSON array per line, after a
//       first line {"num_samples": n}; sizes as Megatron's: TRAIN_SAMPLES for train,
//       EVAL_SAMPLES for valid and test.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "data/data.h"
#include "data/indexed_dataset.h"

static void print_ids(const int32_t *v, uint64_t n) {
    putchar('[');
    for (uint64_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
    putchar(']');
}

static int dump(const char *prefix) {
    kda_indexed *x = kda_indexed_open(prefix);
    uint64_t S = kda_indexed_num_sequences(x), D = kda_indexed_num_documents(x) + 1;
    const int32_t *len = kda_indexed_seq_lengths(x);
    const int64_t *di = kda_indexed_doc_index(x);
    printf("{\"dtype\": %d, \"sequence_lengths\": ", kda_indexed_dtype(x));
    print_ids(len, S);
    printf(", \"document_index\": [");
    for (uint64_t i = 0; i < D; i++) printf(i ? ",%lld" : "%lld", (long long)di[i]);
    printf("], \"sequences\": [");
    int32_t *buf = NULL;
    for (uint64_t s = 0; s < S; s++) {
        buf = kda_realloc(buf, sizeof(int32_t) * ((size_t)len[s] + 1));
        kda_indexed_read(x, s, 0, (uint64_t)len[s], buf);
        if (s) putchar(',');
        print_ids(buf, (uint64_t)len[s]);
    }
    printf("]}\n");
    free(buf);
    kda_indexed_close(x);
    return 0;
}

static int write_docs(const char *prefix, long vocab) {
    kda_indexed_writer *w = kda_indexed_writer_open(prefix, kda_indexed_dtype_for_vocab(vocab));
    char *line = NULL;
    size_t cap = 0;
    int32_t *ids = NULL;
    long no = 0;
    while (getline(&line, &cap, stdin) >= 0) {
        no++;
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        json_t *a = o ? json_object_get(o, "ids") : NULL;
        if (!json_is_array(a)) kda_die("stdin line %ld: want {\"ids\": [...]}", no);
        size_t n = json_array_size(a);
        ids = kda_realloc(ids, sizeof(int32_t) * (n + 1));
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
        kda_indexed_writer_add_doc(w, ids, n);
        json_decref(o);
    }
    kda_indexed_writer_finish(w);
    free(line);
    free(ids);
    return 0;
}

static int gpt(int argc, char **argv) {
    if (argc < 7) kda_die("usage: idx_dump gpt SPLIT SEED SEQ_LENGTH TRAIN_SAMPLES EVAL_SAMPLES WHICH PATH...");
    kda_config c;
    kda_config_defaults(&c);
    snprintf(c.data_format, sizeof c.data_format, "megatron");
    snprintf(c.split, sizeof c.split, "%s", argv[0]);
    c.seed = atol(argv[1]);
    c.seq_length = atoi(argv[2]);
    c.global_batch_size = 1;
    c.train_iters = atol(argv[3]);
    c.eval_iters = atoi(argv[4]);
    c.eval_interval = (int)c.train_iters + 1; // valid size = (train_iters / eval_interval + 1) * eval_iters
    c.vocab_size = 1 << 30;
    kda_split which = !strcmp(argv[5], "train") ? KDA_SPLIT_TRAIN
        : !strcmp(argv[5], "valid")             ? KDA_SPLIT_VALID
                                                : KDA_SPLIT_TEST;
    c.n_train_data_path = argc - 6;
    for (int i = 6; i < argc; i++) snprintf(c.train_data_path[i - 6], KDA_PATH_MAX, "%s", argv[i]);
    kda_data *d = kda_data_open(&c, which);
    uint64_t n = kda_data_num_samples(d);
    printf("{\"num_samples\": %llu}\n", (unsigned long long)n);
    int32_t *buf = kda_malloc(sizeof(int32_t) * ((size_t)c.seq_length + 1));
    for (uint64_t i = 0; i < n; i++) {
        kda_data_next(d, buf, 1);
        print_ids(buf, (uint64_t)c.seq_length + 1);
        putchar('\n');
    }
    free(buf);
    kda_data_close(d);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "dump")) return dump(argv[2]);
    if (argc >= 4 && !strcmp(argv[1], "write")) return write_docs(argv[2], atol(argv[3]));
    if (argc >= 2 && !strcmp(argv[1], "gpt")) return gpt(argc - 2, argv + 2);
    fprintf(stderr,
            "usage: idx_dump dump PREFIX | write PREFIX VOCAB < jsonl | gpt SPLIT SEED SEQ TRAIN EVAL WHICH PATH...\n");
    return 2;
}
