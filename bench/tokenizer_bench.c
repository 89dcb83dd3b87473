// tokenizer_bench.c — throughput of kda's tokenizer on a text file, one thread and all cores.
//
//   build/bench/tokenizer_bench [--tokenizer PATH] [--docs-of N] [--repeat R] [--threads T] FILE
//
// The file is cut into documents of N lines (default 100; 0: the whole file is one document).
// Each repeat encodes every document with a fresh context (cold word cache), so repeats do not
// profit from each other; the best repeat is reported. Prints one human line per measurement
// and, last, one JSON line for bench/tokenizer_bench.py.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "text/tokenizer.h"

typedef struct {
    const char *p;
    size_t n;
} doc;

static double run(const kda_tokenizer *t, const doc *docs, size_t n_docs, int threads, size_t *tokens) {
    size_t total = 0;
    double t0 = kda_now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        kda_tok_ctx *c = kda_tok_ctx_new(t);
        kda_tok_ids ids = {0};
#pragma omp for schedule(dynamic, 16)
        for (size_t i = 0; i < n_docs; i++) {
            ids.n = 0;
            kda_tok_encode(c, docs[i].p, docs[i].n, 0, &ids);
            total += ids.n;
        }
        kda_tok_ids_free(&ids);
        kda_tok_ctx_free(c);
    }
    *tokens = total;
    return kda_now() - t0;
}

int main(int argc, char **argv) {
    const char *tok_path = KDA_TOK_DEFAULT_PATH, *file = NULL;
    int per_doc = 100, repeat = 5, threads = omp_get_max_threads();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (!strcmp(argv[i], "--docs-of") && i + 1 < argc) per_doc = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !file) file = argv[i];
        else kda_die("usage: tokenizer_bench [--tokenizer PATH] [--docs-of N] [--repeat R] [--threads T] FILE");
    }
    if (!file || per_doc < 0 || repeat < 1 || threads < 1)
        kda_die("usage: tokenizer_bench [--tokenizer PATH] [--docs-of N] [--repeat R] [--threads T] FILE");
    FILE *f = kda_fopen(file, "rb");
    kda_tok_bytes text = {0};
    char buf[1 << 16];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) kda_tok_bytes_append(&text, buf, r);
    fclose(f);
    doc *docs = kda_malloc(sizeof(doc) * (text.n + 1));
    size_t n_docs = 0;
    for (size_t start = 0, i = 0, lines = 0; i < text.n; i++) {
        if (text.v[i] == '\n') lines++;
        if (i + 1 == text.n || (per_doc && lines == (size_t)per_doc)) {
            docs[n_docs++] = (doc){text.v + start, i + 1 - start};
            start = i + 1;
            lines = 0;
        }
    }
    double t0 = kda_now();
    kda_tokenizer *t = strlen(tok_path) > 6 && !strcmp(tok_path + strlen(tok_path) - 6, ".model")
                           ? kda_tok_load_tiktoken_llama3(tok_path)
                           : kda_tok_load_hf(tok_path);
    double load = kda_now() - t0;
    printf("kda tokenizer: %s loaded in %.3f s; %s: %.2f MB in %zu documents\n", tok_path, load, file, text.n / 1e6,
           n_docs);
    double best1 = 1e30, bestn = 1e30;
    size_t tokens = 0;
    for (int k = 0; k < repeat; k++) {
        double s = run(t, docs, n_docs, 1, &tokens);
        if (s < best1) best1 = s;
    }
    printf("  1 thread : %8.2f MB/s  %zu tokens\n", text.n / 1e6 / best1, tokens);
    if (threads > 1) {
        for (int k = 0; k < repeat; k++) {
            double s = run(t, docs, n_docs, threads, &tokens);
            if (s < bestn) bestn = s;
        }
        printf("  %d threads: %8.2f MB/s\n", threads, text.n / 1e6 / bestn);
    }
    printf("{\"load_s\": %.4f, \"bytes\": %zu, \"docs\": %zu, \"tokens\": %zu, \"mbps_1\": %.3f, \"threads\": %d, "
           "\"mbps_n\": %.3f}\n",
           load, text.n, n_docs, tokens, text.n / 1e6 / best1, threads, threads > 1 ? text.n / 1e6 / bestn : 0.0);
    kda_tok_free(t);
    free(docs);
    kda_tok_bytes_free(&text);
    return 0;
}
