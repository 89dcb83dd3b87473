// tokenize_files.c — see tokenize_files.h.
#include "data/tokenize_files.h"

#include <errno.h>
#include <glob.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/run_guard.h"
#include "data/indexed_dataset.h"
#include "text/tokenizer.h"

// Outputs exist: refused without --force, naming the file (an input given as output included).
static void check_outputs(const kda_tokenize_opts *o) {
    static const char *const ext[] = {".bin", ".idx"};
    size_t n = strlen(o->prefix);
    if (!n || o->prefix[n - 1] == '/')
        kda_die("kda tokenize: --output-prefix '%s' names no file (PREFIX.bin and PREFIX.idx are written); give "
                "FOLDER/NAME",
                o->prefix);
    char bin[4200];
    snprintf(bin, sizeof bin, "%s.bin", o->prefix);
    kda_guard_file("--output-prefix", bin); // its folder exists or is made, and is writable (run_guard.h)
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s", o->prefix, ext[k]);
        struct stat st;
        if (stat(path, &st) != 0 || o->force) continue;
        for (int i = 0; i < o->n_inputs; i++) {
            struct stat si;
            if (stat(o->inputs[i], &si) == 0 && si.st_dev == st.st_dev && si.st_ino == st.st_ino)
                kda_die("kda tokenize: the output '%s' is also an input; choose another --output-prefix", path);
        }
        kda_die("kda tokenize: '%s' exists; pass --force to overwrite it, or choose another --output-prefix", path);
    }
}

// Temporary outputs of a killed run (PREFIX.{bin,idx}.tmp.PID whose process is gone) are removed.
static void remove_stale_tmp(const char *prefix, int quiet) {
    static const char *const ext[] = {".bin.tmp.", ".idx.tmp."};
    for (int k = 0; k < 2; k++) {
        char pat[4200];
        snprintf(pat, sizeof pat, "%s%s*", prefix, ext[k]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            const char *pid_s = g.gl_pathv[i] + strlen(prefix) + strlen(ext[k]);
            char *end;
            long pid = strtol(pid_s, &end, 10);
            if (end == pid_s || *end || pid <= 0) continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; // its process still runs
            if (unlink(g.gl_pathv[i]) == 0 && !quiet)
                fprintf(stderr, "kda tokenize: removed '%s', left by a run that was killed\n", g.gl_pathv[i]);
        }
        globfree(&g);
    }
}

// ---- batches ----

typedef struct {
    char *text; // the documents back to back
    size_t text_len, text_cap;
    size_t *off, *len;
    uint64_t *line; // JSON line number of a raw JSON-lines document, else 0
    int *input;     // which input it came from
    char **err;     // what was wrong with a JSON line (set by the encoders)
    size_t n, cap;
    kda_tok_ids *ids; // [cap] encodings, reused between batches
} batch;

static void batch_add(batch *b, const char *s, size_t n, uint64_t line, int input) {
    if (b->n == b->cap) {
        size_t old = b->cap;
        b->cap = b->cap ? 2 * b->cap : 1024;
        b->off = kda_realloc(b->off, sizeof(size_t) * b->cap);
        b->len = kda_realloc(b->len, sizeof(size_t) * b->cap);
        b->line = kda_realloc(b->line, sizeof(uint64_t) * b->cap);
        b->input = kda_realloc(b->input, sizeof(int) * b->cap);
        b->err = kda_realloc(b->err, sizeof(char *) * b->cap);
        memset(b->err + old, 0, sizeof(char *) * (b->cap - old));
        b->ids = kda_realloc(b->ids, sizeof(kda_tok_ids) * b->cap);
        memset(b->ids + b->n, 0, sizeof(kda_tok_ids) * (b->cap - b->n));
    }
    if (b->text_cap - b->text_len < n + 1) {
        b->text_cap = 2 * (b->text_len + n + 1);
        b->text = kda_realloc(b->text, b->text_cap);
    }
    memcpy(b->text + b->text_len, s, n);
    b->off[b->n] = b->text_len;
    b->len[b->n] = n;
    b->line[b->n] = line;
    b->input[b->n] = input;
    b->text_len += n;
    b->n++;
}

static void batch_free(batch *b) {
    for (size_t i = 0; i < b->cap; i++) {
        kda_tok_ids_free(&b->ids[i]);
        free(b->err[i]);
    }
    free(b->err);
    free(b->line);
    free(b->input);
    free(b->ids);
    free(b->text);
    free(b->off);
    free(b->len);
}

// The inputs, one after the other.
typedef struct {
    const kda_tokenize_opts *o;
    int next_input;
    kda_doc_source *cur;
    double done_bytes; // input bytes of the files finished
    uint64_t *sizes;
    uint64_t total_bytes, skipped;
} reader;

// The next document; *line is its line number when it is a raw JSON line (else 0), *input
// the index of its input file.
static int reader_next(reader *r, const char **s, size_t *n, uint64_t *line, int *input) {
    for (;;) {
        if (!r->cur) {
            if (r->next_input >= r->o->n_inputs) return 0;
            r->cur = kda_doc_open(r->o->inputs[r->next_input++], &r->o->docs);
        }
        if (kda_doc_next(r->cur, s, n)) {
            *line = kda_doc_is_raw_json(r->cur) ? kda_doc_line(r->cur) : 0;
            *input = r->next_input - 1;
            return 1;
        }
        r->skipped += kda_doc_skipped(r->cur);
        r->done_bytes += (double)r->sizes[r->next_input - 1];
        kda_doc_close(r->cur);
        r->cur = NULL;
    }
}

static double reader_fraction(const reader *r) {
    double done = r->done_bytes;
    if (r->cur) done += kda_doc_fraction_done(r->cur) * (double)r->sizes[r->next_input - 1];
    return r->total_bytes ? done / (double)r->total_bytes : 1.0;
}

// Read documents until the batch holds about max_bytes; returns 0 when nothing was left.
static int fill_batch(reader *r, batch *b, size_t max_bytes) {
    b->n = 0;
    b->text_len = 0;
    const char *s;
    size_t n;
    uint64_t line;
    int input;
    while (b->text_len < max_bytes && b->n < 200000 && reader_next(r, &s, &n, &line, &input))
        batch_add(b, s, n, line, input);
    return b->n > 0;
}

// ---- encoding ----

typedef struct {
    const kda_tokenizer *tok; // NULL: bytes
    unsigned flags;
    int append_eod;
    int32_t eod;
} encoder;

static void encode_doc(const encoder *e, kda_tok_ctx *ctx, const char *s, size_t n, kda_tok_ids *out);

// Per-thread buffers for JSON lines decoded by the encoders.
typedef struct {
    kda_tok_bytes clean, text;
} json_scratch;

// Document i of the batch: decode a raw JSON line first (an error is kept for the main thread,
// which reports the first one in input order), then encode.
static void encode_item(const encoder *e, kda_tok_ctx *ctx, json_scratch *js, const char *key, batch *b, size_t i) {
    const char *s = b->text + b->off[i];
    size_t n = b->len[i];
    if (b->line[i]) {
        char err[256];
        if (kda_doc_json_text(s, n, key, &js->clean, &js->text, err, sizeof err)) {
            b->err[i] = kda_strdup(err);
            b->ids[i].n = 0;
            return;
        }
        s = js->text.v ? js->text.v : "";
        n = js->text.n;
    }
    encode_doc(e, ctx, s, n, &b->ids[i]);
}

static void encode_doc(const encoder *e, kda_tok_ctx *ctx, const char *s, size_t n, kda_tok_ids *out) {
    out->n = 0;
    if (!e->tok) {
        for (size_t i = 0; i < n; i++) kda_tok_ids_push(out, (unsigned char)s[i]);
    } else {
        kda_tok_encode(ctx, s, n, e->flags, out);
    }
    if (e->append_eod && out->n > 0) kda_tok_ids_push(out, e->eod);
}

// ---- progress and signals ----

// On SIGINT / SIGTERM the temporary output is removed at once (unlink and _exit are safe in a
// signal handler) and the program ends with status 130, even when it waits on a slow input.
static char tmp_bin[4096], tmp_idx[4096];
static void on_signal(int sig) {
    if (tmp_bin[0]) unlink(tmp_bin);
    if (tmp_idx[0]) unlink(tmp_idx);
    static const char msg[] = "\nkda tokenize: stopped by a signal; nothing written (no PREFIX.bin/.idx made)\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    _exit(sig == SIGINT ? 130 : 128 + sig);
}

static void set_signals(int block) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

static void human_time(double s, char *out, size_t cap) {
    if (s < 0 || s > 1e7)
        snprintf(out, cap, "?");
    else if (s < 60)
        snprintf(out, cap, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, cap, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(out, cap, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

typedef struct {
    double t0, last;
    int tty, quiet;
    uint64_t docs, tokens, text_bytes;
} progress;

static void show(progress *p, const reader *r, int final) {
    double now = kda_now();
    if (p->quiet || (final && !p->tty) || (!final && now - p->last < (p->tty ? 0.25 : 10.0))) return;
    p->last = now;
    double el = now - p->t0, frac = reader_fraction(r);
    double mbs = el > 0 ? (double)p->text_bytes / 1e6 / el : 0;
    char eta[32];
    human_time(frac > 0 && !final ? el * (1 - frac) / frac : 0, eta, sizeof eta);
    fprintf(stderr, "%skda tokenize: %llu docs | %.1f MB in | %.2f M tokens | %.1f MB/s | %3.0f%% | ETA %s%s",
            p->tty ? "\r" : "", (unsigned long long)p->docs, (double)p->text_bytes / 1e6, (double)p->tokens / 1e6, mbs,
            100 * frac, eta, p->tty ? "   " : "\n");
    if (final && p->tty) fputc('\n', stderr);
    fflush(stderr);
}

// mkdir -p of the folder that will hold PREFIX.bin/.idx.
static void make_parent_dirs(const char *prefix) {
    char *d = kda_strdup(prefix);
    for (char *q = d + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(d, 0777) != 0 && errno != EEXIST)
            kda_die("kda tokenize: cannot create the output folder '%s': %s", d, strerror(errno));
        *q = '/';
    }
    free(d);
}

// ---- the run ----

// The tokenizer (NULL for bytes), the encoder settings and the vocabulary the ids need.
static kda_tokenizer *open_encoder(const kda_tokenize_opts *o, encoder *e, int64_t *vocab) {
    memset(e, 0, sizeof *e);
    kda_tokenizer *tok = NULL;
    if (!strcmp(o->tokenizer, KDA_TOKENIZE_BYTES)) {
        e->eod = o->eod >= 0 ? (int32_t)o->eod : 0;
        *vocab = e->eod + 1 > 256 ? e->eod + 1 : 256;
        if (o->bos == 1) kda_die("kda tokenize: the bytes tokenizer has no BOS; drop --bos");
    } else {
        tok = kda_tok_load_path(o->tokenizer);
        *vocab = kda_tok_vocab_size(tok);
        if (o->eod >= 0) {
            e->eod = (int32_t)o->eod;
        } else {
            e->eod = kda_tok_token_to_id(tok, "<|end_of_text|>");
            if (e->eod < 0) e->eod = kda_tok_token_to_id(tok, "<|endoftext|>");
            if (e->eod < 0 && o->append_eod)
                kda_die("kda tokenize: tokenizer '%s' has no <|end_of_text|> or <|endoftext|> token; name the "
                        "end-of-document id with --eod",
                        o->tokenizer);
        }
        if (e->eod >= *vocab) *vocab = e->eod + 1;
        if (o->bos == 1 && kda_tok_bos_id(tok) < 0)
            kda_die("kda tokenize: tokenizer '%s' adds no BOS; drop --bos", o->tokenizer);
        e->flags = (o->bos != 0 ? KDA_TOK_ADD_SPECIAL : 0) | (o->special_as_text ? KDA_TOK_SPECIAL_AS_TEXT : 0);
    }
    e->tok = tok;
    e->append_eod = o->append_eod;
    return tok;
}

// The temporary outputs are removed by SIGINT / SIGTERM from now until finish_output.
static void watch_signals(const kda_indexed_writer *w) {
    snprintf(tmp_bin, sizeof tmp_bin, "%s", kda_indexed_writer_tmp_path(w, 0));
    snprintf(tmp_idx, sizeof tmp_idx, "%s", kda_indexed_writer_tmp_path(w, 1));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void finish_output(kda_indexed_writer *w) {
    set_signals(1); // the renames are not interrupted
    kda_indexed_writer_finish(w);
    tmp_bin[0] = tmp_idx[0] = 0;
    set_signals(0);
}

// Per-thread encoding state.
typedef struct {
    int threads;
    kda_tok_ctx **ctx;
    json_scratch *js;
} workers;

static void workers_open(workers *wk, int threads, const kda_tokenizer *tok) {
    wk->threads = threads;
    wk->ctx = kda_calloc((size_t)threads, sizeof *wk->ctx);
    for (int t = 0; t < threads && tok; t++) wk->ctx[t] = kda_tok_ctx_new(tok);
    wk->js = kda_calloc((size_t)threads, sizeof *wk->js);
}

static void workers_close(workers *wk) {
    for (int t = 0; t < wk->threads; t++) {
        if (wk->ctx[t]) kda_tok_ctx_free(wk->ctx[t]);
        kda_tok_bytes_free(&wk->js[t].clean);
        kda_tok_bytes_free(&wk->js[t].text);
    }
    free(wk->js);
    free(wk->ctx);
}

// Every batch: encoded by all threads while one of them reads the next, then written in order.
static void encode_all(const kda_tokenize_opts *o, const encoder *e, workers *wk, reader *r, kda_indexed_writer *w,
                       progress *p) {
    int threads = wk->threads;
    batch bufs[2];
    memset(bufs, 0, sizeof bufs);
    batch *cur = &bufs[0], *next = &bufs[1];
    size_t max_bytes = (size_t)threads * (2u << 20);
    int have = fill_batch(r, cur, max_bytes), have_next = 0;
    while (have) {
#pragma omp parallel num_threads(threads)
        {
#pragma omp single nowait
            have_next = fill_batch(r, next, max_bytes);
            int me = omp_get_thread_num();
#pragma omp for schedule(dynamic, 4) nowait
            for (size_t i = 0; i < cur->n; i++) encode_item(e, wk->ctx[me], &wk->js[me], o->docs.json_key, cur, i);
        }
        for (size_t i = 0; i < cur->n; i++) {
            if (cur->err[i])
                kda_die("%s:%llu: %s", o->inputs[cur->input[i]], (unsigned long long)cur->line[i], cur->err[i]);
            kda_indexed_writer_add_doc(w, cur->ids[i].v, cur->ids[i].n);
            p->tokens += cur->ids[i].n;
        }
        p->docs += cur->n;
        p->text_bytes += cur->text_len;
        show(p, r, 0);
        batch *t = cur;
        cur = next;
        next = t;
        have = have_next;
    }
    batch_free(&bufs[0]);
    batch_free(&bufs[1]);
}

void kda_tokenize_files(const kda_tokenize_opts *opts, kda_tokenize_stats *out) {
    kda_tokenize_opts o = *opts;
    o.docs.json_raw = 1; // JSON lines are decoded by the encoding threads
    if (!o.docs.json_key) o.docs.json_key = "text";
    check_outputs(&o);
    make_parent_dirs(o.prefix);
    encoder e;
    int64_t vocab;
    kda_tokenizer *tok = open_encoder(&o, &e, &vocab);
    int dtype = kda_indexed_dtype_for_vocab(vocab);
    int threads = o.threads ? o.threads : omp_get_max_threads();

    reader r = {&o, 0, NULL, 0, kda_calloc((size_t)o.n_inputs, sizeof(uint64_t)), 0, 0};
    for (int i = 0; i < o.n_inputs; i++) { // (pipes and FIFOs count 0: no ETA for them)
        struct stat st;
        r.sizes[i] = stat(o.inputs[i], &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
        r.total_bytes += r.sizes[i];
    }
    workers wk;
    workers_open(&wk, threads, tok);

    remove_stale_tmp(o.prefix, o.quiet);
    kda_indexed_writer *w = kda_indexed_writer_open(o.prefix, dtype);
    watch_signals(w);
    progress p = {kda_now(), 0, isatty(2), o.quiet, 0, 0, 0};
    p.last = p.t0;
    encode_all(&o, &e, &wk, &r, w, &p);
    uint64_t docs = kda_indexed_writer_docs(w), tokens = kda_indexed_writer_tokens(w);
    finish_output(w);
    show(&p, &r, 1);
    *out = (kda_tokenize_stats){.docs = docs,
                                .tokens = tokens,
                                .text_bytes = p.text_bytes,
                                .skipped = r.skipped,
                                .dtype = dtype,
                                .threads = threads,
                                .seconds = kda_now() - p.t0};
    workers_close(&wk);
    free(r.sizes);
    if (tok) kda_tok_free(tok);
}
