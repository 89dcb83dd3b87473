// cli_encode.c — `kda encode` and `kda decode`: JSON lines through the tokenizer (tokenizer.h),
// one output line per input line, for people debugging tokenization and for scripts.
//   encode: {"text": "..."}  ->  {"ids": [...]}
//   decode: {"ids": [...]}   ->  {"text": "..."}
// Input bytes that are not UTF-8 inside a JSON string are read as U+FFFD (as Python's
// errors="replace" does), so broken text can still be fed through; bad JSON stops the run
// with the line number.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "text/tokenizer.h"

typedef struct {
    const char *tokenizer;
    int bos, no_special, skip_special;
} opts;

static void usage(FILE *f, int decode) {
    if (!decode)
        fprintf(f,
                "usage: kda encode [--tokenizer PATH] [--bos] [--no-special] < in.jsonl > out.jsonl\n"
                "\n"
                "Reads JSON lines {\"text\": \"...\"} on stdin and writes {\"ids\": [...]} per line.\n"
                "  --tokenizer PATH  a Hugging Face tokenizer.json, or a tiktoken .model file with the Llama 3\n"
                "                    special tokens (default " KDA_TOK_DEFAULT_PATH ")\n"
                "  --bos             add the special tokens of the post-processor (Llama 3: BOS 128000 first)\n"
                "  --no-special      special-token strings in the text (e.g. <|eot_id|>) are plain text; by\n"
                "                    default they become their ids, as in Hugging Face tokenizers\n"
                "Bytes that are not valid UTF-8 inside a string count as U+FFFD.\n");
    else
        fprintf(f,
                "usage: kda decode [--tokenizer PATH] [--skip-special] < in.jsonl > out.jsonl\n"
                "\n"
                "Reads JSON lines {\"ids\": [...]} on stdin and writes {\"text\": \"...\"} per line.\n"
                "  --tokenizer PATH  as for kda encode (default " KDA_TOK_DEFAULT_PATH ")\n"
                "  --skip-special    leave special tokens out of the text\n"
                "Byte sequences that do not form UTF-8 come out as U+FFFD.\n");
}

static void parse_args(int argc, char **argv, int decode, opts *o) {
    const char *cmd = decode ? "kda decode" : "kda encode";
    *o = (opts){KDA_TOK_DEFAULT_PATH, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, decode);
            exit(0);
        } else if (!strcmp(a, "--tokenizer")) {
            o->tokenizer = kda_cli_value(cmd + 4, argc, argv, &i);
        } else if (!decode && !strcmp(a, "--bos")) {
            kda_cli_flag(cmd + 4, a);
            o->bos = 1;
        } else if (!decode && !strcmp(a, "--no-special")) {
            kda_cli_flag(cmd + 4, a);
            o->no_special = 1;
        } else if (decode && !strcmp(a, "--skip-special")) {
            kda_cli_flag(cmd + 4, a);
            o->skip_special = 1;
        } else if (a[0] == '-') {
            kda_cli_usage_error(cmd + 4, "unknown option '%s'", a);
        } else {
            kda_cli_usage_error(cmd + 4, "takes no arguments (the JSON lines come on stdin); unexpected '%s'", a);
        }
    }
}

// A command's JSON lines: objects from stdin, one per line; lines to stdout.
typedef struct {
    const char *cmd; // "kda encode", for messages
    char *line;      // the line read last (getline's buffer)
    size_t cap, line_no;
    kda_tok_bytes clean, out; // the line with its UTF-8 repaired; the output line being built
} json_lines;

// The next line of stdin as a JSON object (invalid UTF-8 repaired first); NULL at end of input.
static json_t *read_object(json_lines *io) {
    ssize_t r = getline(&io->line, &io->cap, stdin);
    if (r < 0) return NULL;
    io->line_no++;
    size_t n = (size_t)r;
    while (n && (io->line[n - 1] == '\n' || io->line[n - 1] == '\r')) n--;
    io->clean.n = 0;
    kda_utf8_sanitize(io->line, n, &io->clean);
    json_error_t e;
    json_t *obj = json_loadb(io->clean.v ? io->clean.v : "", io->clean.n, JSON_ALLOW_NUL, &e);
    if (!obj) kda_die("%s: stdin line %zu: invalid JSON (column %d): %s", io->cmd, io->line_no, e.column, e.text);
    if (!json_is_object(obj)) {
        json_decref(obj);
        kda_die("%s: stdin line %zu: expected a JSON object", io->cmd, io->line_no);
    }
    return obj;
}

// Ends the output (stdout flushed: a failed write dies) and frees the buffers.
static void json_lines_close(json_lines *io) {
    if (fflush(stdout)) kda_die("writing to stdout failed");
    free(io->line);
    kda_tok_bytes_free(&io->clean);
    kda_tok_bytes_free(&io->out);
}

static void put_int(kda_tok_bytes *b, long v) {
    char s[24];
    int k = snprintf(s, sizeof s, "%ld", v);
    kda_tok_bytes_append(b, s, (size_t)k);
}

// A JSON string literal of valid UTF-8 text.
static void put_json_string(kda_tok_bytes *b, const char *s, size_t n) {
    kda_tok_bytes_append(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        kda_tok_bytes_append(b, s + run, i - run);
        run = i + 1;
        char esc[8];
        const char *e = c == '"' ? "\\\""
            : c == '\\'          ? "\\\\"
            : c == '\n'          ? "\\n"
            : c == '\t'          ? "\\t"
            : c == '\r'          ? "\\r"
                                 : NULL;
        if (!e) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            e = esc;
        }
        kda_tok_bytes_append(b, e, strlen(e));
    }
    kda_tok_bytes_append(b, s + run, n - run);
    kda_tok_bytes_append(b, "\"", 1);
}

static void flush_line(kda_tok_bytes *b) {
    kda_tok_bytes_append(b, "\n", 1);
    if (fwrite(b->v, 1, b->n, stdout) != b->n) kda_die("writing to stdout failed");
    b->n = 0;
}

int cmd_encode(int argc, char **argv) {
    opts o;
    parse_args(argc, argv, 0, &o);
    kda_tokenizer *tok = kda_tok_load_path(o.tokenizer);
    kda_tok_ctx *ctx = kda_tok_ctx_new(tok);
    unsigned flags = (o.bos ? KDA_TOK_ADD_SPECIAL : 0) | (o.no_special ? KDA_TOK_SPECIAL_AS_TEXT : 0);
    json_lines io = {.cmd = "kda encode"};
    kda_tok_bytes *out = &io.out;
    kda_tok_ids ids = {0};
    json_t *obj;
    while ((obj = read_object(&io))) {
        const json_t *text = json_object_get(obj, "text");
        if (!json_is_string(text))
            kda_die("kda encode: stdin line %zu: expected {\"text\": \"...\"} (no string field \"text\")", io.line_no);
        ids.n = 0;
        kda_tok_encode(ctx, json_string_value(text), json_string_length(text), flags, &ids);
        kda_tok_bytes_append(out, "{\"ids\": [", 9);
        for (size_t i = 0; i < ids.n; i++) {
            if (i) kda_tok_bytes_append(out, ", ", 2);
            put_int(out, ids.v[i]);
        }
        kda_tok_bytes_append(out, "]}", 2);
        flush_line(out);
        json_decref(obj);
    }
    json_lines_close(&io);
    kda_tok_ids_free(&ids);
    kda_tok_ctx_free(ctx);
    kda_tok_free(tok);
    return 0;
}

int cmd_decode(int argc, char **argv) {
    opts o;
    parse_args(argc, argv, 1, &o);
    kda_tokenizer *tok = kda_tok_load_path(o.tokenizer);
    json_lines io = {.cmd = "kda decode"};
    kda_tok_bytes *out = &io.out, text = {0};
    kda_tok_ids ids = {0};
    json_t *obj;
    int32_t V = kda_tok_vocab_size(tok);
    while ((obj = read_object(&io))) {
        size_t line_no = io.line_no;
        const json_t *arr = json_object_get(obj, "ids");
        if (!json_is_array(arr))
            kda_die("kda decode: stdin line %zu: expected {\"ids\": [...]} (no array field \"ids\")", line_no);
        ids.n = 0;
        size_t i;
        const json_t *v;
        json_array_foreach(arr, i, v) {
            json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
            size_t len;
            if (!json_is_integer(v) || id < 0 || id >= V || !kda_tok_piece(tok, (int32_t)id, &len))
                kda_die("kda decode: stdin line %zu: ids[%zu] is not a token id of %s (0..%d)", line_no, i, o.tokenizer,
                        V - 1);
            kda_tok_ids_push(&ids, (int32_t)id);
        }
        text.n = 0;
        kda_tok_decode_text(tok, ids.v, ids.n, o.skip_special, &text);
        kda_tok_bytes_append(out, "{\"text\": ", 9);
        put_json_string(out, text.v ? text.v : "", text.n);
        kda_tok_bytes_append(out, "}", 1);
        flush_line(out);
        json_decref(obj);
    }
    json_lines_close(&io);
    kda_tok_bytes_free(&text);
    kda_tok_ids_free(&ids);
    kda_tok_free(tok);
    return 0;
}
