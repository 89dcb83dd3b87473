// cli_tokenize.c — `kda tokenize`: parses the options, runs the pipeline of tokenize_files.h
// (text files to a Megatron indexed dataset <prefix>.bin/.idx) and prints what it wrote.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "data/indexed_dataset.h"
#include "data/tokenize_files.h"
#include "text/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda tokenize --input FILE [--input FILE ...] --output-prefix PREFIX [options]\n"
            "       (inputs may also be given as plain arguments; -o is --output-prefix)\n"
            "\n"
            "Tokenizes documents into a Megatron-LM indexed dataset PREFIX.bin + PREFIX.idx (MMIDIDX v1;\n"
            "uint16 ids when the vocabulary is under 65500, else int32), as Megatron's preprocess_data.py\n"
            "--append-eod does: each document's ids, then the end-of-document id. Missing folders of\n"
            "PREFIX are created; the files appear only when the run completes.\n"
            "\n"
            "inputs (gzip or zstd compressed too, recognised by content):\n"
            "  --format auto|text|jsonl|parquet  default auto: by extension (.jsonl/.json/.ndjson, .parquet,\n"
            "                      anything else is text; .gz/.zst/.zstd are looked through)\n"
            "  --text-docs line|block|file  plain text: a document per line (default; empty lines skipped),\n"
            "                      per block of lines between blank lines, or per file\n"
            "  --json-key KEY      the JSON lines field holding the text (default text)\n"
            "  --column NAME       the Parquet string column (default: the --json-key value, text);\n"
            "                      null values are skipped\n"
            "tokens:\n"
            "  --tokenizer PATH    a Hugging Face tokenizer.json or a tiktoken .model with the Llama 3\n"
            "                      specials (default " KDA_TOK_DEFAULT_PATH "), or 'bytes':\n"
            "                      one id per byte (for tests and byte-level models)\n"
            "  --no-bos            leave out the BOS the tokenizer's post-processor adds (Llama 3:\n"
            "                      128000; Megatron's HuggingFaceTokenizer adds it, so it is on by default)\n"
            "  --bos               add it (the default)\n"
            "  --no-append-eod     no end-of-document id\n"
            "  --append-eod        end each document with it (the default)\n"
            "  --eod ID            the end-of-document id (default: the tokenizer's <|end_of_text|>,\n"
            "                      128001 for Llama 3; 0 for bytes)\n"
            "  --special-as-text   special-token strings inside the text are ordinary text (default: they\n"
            "                      become their ids, as in Hugging Face tokenizers)\n"
            "run:\n"
            "  --threads N         encoding threads (default: all cores); the output does not depend on it\n"
            "  --quiet             no progress lines\n"
            "  --force             overwrite an existing PREFIX.bin / PREFIX.idx (refused without it, also\n"
            "                      when an input is one of them)\n"
            "Temporary files of a killed run (PREFIX.bin.tmp.PID, PREFIX.idx.tmp.PID) are removed by the next\n"
            "run on the same PREFIX once their process is gone.\n");
}

static const char *need(int argc, char **argv, int *i) { return kda_cli_value("tokenize", argc, argv, i); }

static void parse_args(int argc, char **argv, kda_tokenize_opts *o) {
    memset(o, 0, sizeof *o);
    o->inputs = kda_calloc((size_t)argc, sizeof(char *));
    o->tokenizer = KDA_TOK_DEFAULT_PATH;
    o->bos = -1;
    o->append_eod = 1;
    o->eod = -1;
    o->docs.json_key = "text";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--input")) {
            o->inputs[o->n_inputs++] = need(argc, argv, &i);
        } else if (!strcmp(a, "--output-prefix") || !strcmp(a, "-o")) {
            o->prefix = need(argc, argv, &i);
        } else if (!strcmp(a, "--format")) {
            const char *v = need(argc, argv, &i);
            o->docs.format = !strcmp(v, "auto") ? KDA_FMT_AUTO
                : !strcmp(v, "text")            ? KDA_FMT_TEXT
                : !strcmp(v, "jsonl")           ? KDA_FMT_JSONL
                : !strcmp(v, "parquet")         ? KDA_FMT_PARQUET
                                                : -1;
            if ((int)o->docs.format < 0)
                kda_cli_usage_error("tokenize", "--format '%s': use auto, text, jsonl or parquet", v);
        } else if (!strcmp(a, "--text-docs")) {
            const char *v = need(argc, argv, &i);
            o->docs.text_docs = !strcmp(v, "line") ? KDA_DOCS_LINE
                : !strcmp(v, "block")              ? KDA_DOCS_BLOCK
                : !strcmp(v, "file")               ? KDA_DOCS_FILE
                                                   : -1;
            if ((int)o->docs.text_docs < 0)
                kda_cli_usage_error("tokenize", "--text-docs '%s': use line, block or file", v);
        } else if (!strcmp(a, "--json-key")) {
            o->docs.json_key = need(argc, argv, &i);
        } else if (!strcmp(a, "--column")) {
            o->docs.column = need(argc, argv, &i);
        } else if (!strcmp(a, "--tokenizer")) {
            o->tokenizer = need(argc, argv, &i);
        } else if (!strcmp(a, "--bos")) {
            kda_cli_flag("tokenize", a);
            o->bos = 1;
        } else if (!strcmp(a, "--no-bos")) {
            kda_cli_flag("tokenize", a);
            o->bos = 0;
        } else if (!strcmp(a, "--append-eod")) {
            kda_cli_flag("tokenize", a);
            o->append_eod = 1;
        } else if (!strcmp(a, "--no-append-eod")) {
            kda_cli_flag("tokenize", a);
            o->append_eod = 0;
        } else if (!strcmp(a, "--eod")) {
            o->eod = kda_cli_long("tokenize", "--eod", need(argc, argv, &i), 0, 0x7fffffffL);
        } else if (!strcmp(a, "--special-as-text")) {
            kda_cli_flag("tokenize", a);
            o->special_as_text = 1;
        } else if (!strcmp(a, "--threads")) {
            o->threads = (int)kda_cli_long("tokenize", "--threads", need(argc, argv, &i), 1, 1024);
        } else if (!strcmp(a, "--quiet")) {
            kda_cli_flag("tokenize", a);
            o->quiet = 1;
        } else if (!strcmp(a, "--force")) {
            kda_cli_flag("tokenize", a);
            o->force = 1;
        } else if (a[0] == '-' && a[1]) {
            kda_cli_usage_error("tokenize", "unknown option '%s'", a);
        } else {
            o->inputs[o->n_inputs++] = a;
        }
    }
    if (!o->n_inputs) kda_cli_usage_error("tokenize", "no input; name files with --input");
    if (!o->prefix) kda_cli_usage_error("tokenize", "no --output-prefix; the output is PREFIX.bin and PREFIX.idx");
    for (int i = 0; i < o->n_inputs; i++)
        if (access(o->inputs[i], R_OK) != 0)
            kda_die("kda tokenize: cannot read input '%s': %s", o->inputs[i], strerror(errno));
    if (!strcmp(o->tokenizer, KDA_TOKENIZE_BYTES) && o->bos == 1)
        kda_cli_usage_error("tokenize", "the bytes tokenizer has no BOS; drop --bos");
}

int cmd_tokenize(int argc, char **argv) {
    kda_tokenize_opts o;
    parse_args(argc, argv, &o);
    kda_tokenize_stats s;
    kda_tokenize_files(&o, &s);
    double el = s.seconds;
    fprintf(stderr,
            "kda tokenize: wrote %s.bin/.idx: %llu documents, %llu tokens (%s), %.1f MB of input in %.1fs (%.1f MB/s, "
            "%d threads)%s",
            o.prefix, (unsigned long long)s.docs, (unsigned long long)s.tokens, kda_indexed_dtype_name(s.dtype),
            (double)s.text_bytes / 1e6, el, el > 0 ? (double)s.text_bytes / 1e6 / el : 0.0, s.threads,
            s.skipped ? "" : "\n");
    if (s.skipped) fprintf(stderr, "; skipped %llu empty lines or null values\n", (unsigned long long)s.skipped);
    free(o.inputs);
    return 0;
}
