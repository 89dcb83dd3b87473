// eval_score.c — requests to token pairs (lm-eval's _encode_pair), distinct model inputs, and
// their log-likelihoods from batched forwards (see eval.h).
//
// A request (ctx, cont) becomes full = ctx_ids + cont_ids cut to its last max_length+1 tokens;
// the model input is full[:-1] and cont token j is scored by the logits at input position
// len(input) - len(cont) + j. Requests with the same input share it (and one batch row).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// ---- codec ------------------------------------------------------------------------------------------

struct kda_eval_codec {
    const kda_tokenizer *tok; // NULL: bytes
    kda_tok_ctx *ctx;
    int32_t bos, eos;     // bos: the id encode adds (tokenizer: its post-processor's)
    const char *bos_text; // BOS as text: strings starting with it get no special tokens
    size_t bos_len;
};

kda_eval_codec *kda_eval_codec_new(const kda_tokenizer *tok, int32_t bos, int32_t eos) {
    kda_eval_codec *c = kda_calloc(1, sizeof *c);
    c->tok = tok;
    c->bos = bos;
    c->eos = eos;
    if (tok) {
        c->ctx = kda_tok_ctx_new(tok);
        c->bos = kda_tok_bos_id(tok);
        if (c->bos >= 0) c->bos_text = kda_tok_piece(tok, c->bos, &c->bos_len);
    }
    return c;
}

void kda_eval_codec_free(kda_eval_codec *c) {
    if (!c) return;
    if (c->ctx) kda_tok_ctx_free(c->ctx);
    free(c);
}

// HF tokenizer.encode(text) with lm-eval's rule: no special tokens when text starts with BOS's text.
static void encode(kda_eval_codec *c, const char *text, size_t n, int add_special, kda_tok_ids *out) {
    out->n = 0;
    if (add_special && c->bos_text && n >= c->bos_len && !memcmp(text, c->bos_text, c->bos_len)) add_special = 0;
    if (c->tok) {
        kda_tok_encode(c->ctx, text, n, add_special ? KDA_TOK_ADD_SPECIAL : 0, out);
        return;
    }
    if (add_special && c->bos >= 0) kda_tok_ids_push(out, c->bos);
    for (size_t i = 0; i < n; i++) kda_tok_ids_push(out, (unsigned char)text[i]);
}

void kda_eval_encode_pair(kda_eval_codec *c, const char *ctx, const char *cont, kda_tok_ids *ctx_ids,
                          kda_tok_ids *cont_ids) {
    if (!*ctx) { // lm-eval: the prefix token (BOS, else EOS) is the context
        encode(c, cont, strlen(cont), 0, cont_ids);
        int32_t prefix = c->bos >= 0 ? c->bos : c->eos;
        if (prefix < 0)
            kda_die("an empty context needs a BOS or EOS token to condition on; set bos_token_id (or eos_token_id)");
        ctx_ids->n = 0;
        if (cont_ids->n && cont_ids->v[0] == prefix) {
            kda_tok_ids_push(ctx_ids, prefix);
            memmove(cont_ids->v, cont_ids->v + 1, sizeof(int32_t) * (cont_ids->n - 1));
            cont_ids->n--;
        } else {
            kda_tok_ids_push(ctx_ids, prefix);
        }
        return;
    }
    // trailing whitespace of the context belongs to the continuation
    size_t n = strlen(ctx), keep = kda_eval_py_rstrip_len(ctx, n);
    kda_sb whole = {0};
    kda_sb_add(&whole, ctx);
    kda_sb_add(&whole, cont);
    kda_tok_ids w = {0};
    encode(c, whole.v, whole.n, 1, &w);
    encode(c, ctx, keep, 1, ctx_ids);
    cont_ids->n = 0;
    for (size_t i = ctx_ids->n; i < w.n; i++) kda_tok_ids_push(cont_ids, w.v[i]);
    kda_tok_ids_free(&w);
    free(whole.v);
}

// ---- plan ----------------------------------------------------------------------------------------------

typedef struct {
    int task, item, choice;
    int contlen;
    int32_t last; // the last continuation token (not part of the input)
    long input;   // index into plan->inputs
    long next;    // next request with the same input (-1: none)
} request;

typedef struct {
    int32_t *ids;
    int len;
    long first;   // first request using this input
    int max_cont; // longest continuation among its requests
} model_input;

struct kda_eval_plan {
    kda_eval_task *tasks;
    int n_tasks;
    request *req;
    long n_req;
    model_input *in;
    long n_in;
    long truncated;
    int max_len;
};

static uint64_t hash_ids(const int32_t *v, int n) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)v[i]) * 1099511628211ull;
    return h;
}

kda_eval_plan *kda_eval_plan_new(kda_eval_task *tasks, int n_tasks, kda_eval_codec *codec, int max_length) {
    if (max_length < 1) kda_die("max_length %d: the model needs at least one input token", max_length);
    kda_eval_plan *p = kda_calloc(1, sizeof *p);
    p->tasks = tasks;
    p->n_tasks = n_tasks;
    for (int t = 0; t < n_tasks; t++)
        for (int i = 0; i < tasks[t].n_items; i++) p->n_req += tasks[t].items[i].n;
    p->req = kda_calloc((size_t)p->n_req + 1, sizeof(request));
    p->in = kda_calloc((size_t)p->n_req + 1, sizeof(model_input));
    size_t cap = 16;
    while (cap < 2 * (size_t)p->n_req) cap *= 2;
    long *table = kda_malloc(sizeof(long) * cap);
    for (size_t i = 0; i < cap; i++) table[i] = -1;
    kda_tok_ids ctx_ids = {0}, cont_ids = {0}, full = {0};
    long r = 0;
    for (int t = 0; t < n_tasks; t++) {
        for (int i = 0; i < tasks[t].n_items; i++) {
            kda_eval_item *it = &tasks[t].items[i];
            for (int c = 0; c < it->n; c++, r++) {
                kda_eval_encode_pair(codec, it->ctx[c], it->cont[c], &ctx_ids, &cont_ids);
                if (cont_ids.n == 0)
                    kda_die("%s, document %d, choice %d: the continuation '%s' gives no tokens after its context",
                            tasks[t].name, i, c, it->cont[c]);
                if (cont_ids.n > (size_t)max_length)
                    kda_die("%s, document %d, choice %d: the continuation has %zu tokens, more than max_length %d; "
                            "raise --max-length",
                            tasks[t].name, i, c, cont_ids.n, max_length);
                full.n = 0;
                for (size_t k = 0; k < ctx_ids.n; k++) kda_tok_ids_push(&full, ctx_ids.v[k]);
                for (size_t k = 0; k < cont_ids.n; k++) kda_tok_ids_push(&full, cont_ids.v[k]);
                size_t start = 0;
                if (full.n > (size_t)max_length + 1) {
                    start = full.n - ((size_t)max_length + 1);
                    p->truncated++;
                }
                const int32_t *ids = full.v + start;
                int len = (int)(full.n - start) - 1; // the input: full[:-1]
                request *q = &p->req[r];
                *q = (request){
                    .task = t, .item = i, .choice = c, .contlen = (int)cont_ids.n, .last = ids[len], .next = -1};
                size_t h = hash_ids(ids, len) & (cap - 1);
                while (
                    table[h] >= 0 &&
                    !(p->in[table[h]].len == len && !memcmp(p->in[table[h]].ids, ids, sizeof(int32_t) * (size_t)len)))
                    h = (h + 1) & (cap - 1);
                if (table[h] < 0) {
                    model_input *m = &p->in[p->n_in];
                    m->ids = kda_malloc(sizeof(int32_t) * (size_t)(len > 0 ? len : 1));
                    memcpy(m->ids, ids, sizeof(int32_t) * (size_t)len);
                    m->len = len;
                    m->first = -1;
                    table[h] = p->n_in++;
                    if (len > p->max_len) p->max_len = len;
                }
                model_input *m = &p->in[table[h]];
                q->input = table[h];
                q->next = m->first;
                m->first = r;
                if (q->contlen > m->max_cont) m->max_cont = q->contlen;
            }
        }
    }
    kda_tok_ids_free(&ctx_ids);
    kda_tok_ids_free(&cont_ids);
    kda_tok_ids_free(&full);
    free(table);
    return p;
}

int kda_eval_plan_max_len(const kda_eval_plan *p) { return p->max_len; }
long kda_eval_plan_requests(const kda_eval_plan *p) { return p->n_req; }
long kda_eval_plan_inputs(const kda_eval_plan *p) { return p->n_in; }
long kda_eval_plan_truncated(const kda_eval_plan *p) { return p->truncated; }

void kda_eval_plan_free(kda_eval_plan *p) {
    if (!p) return;
    for (long i = 0; i < p->n_in; i++) free(p->in[i].ids);
    free(p->in);
    free(p->req);
    free(p);
}

// ---- run ------------------------------------------------------------------------------------------------

static const model_input *sort_base;
static int by_length_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    int lx = sort_base[x].len, ly = sort_base[y].len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

// log-sum-exp and the first argmax of one row of logits, in double
static void row_stats(const float *x, int V, double *lse, int *argmax) {
    float mx = x[0];
    int am = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > mx) mx = x[v], am = v;
    double s = 0;
    for (int v = 0; v < V; v++) s += exp((double)x[v] - mx);
    *lse = mx + log(s);
    *argmax = am;
}

// logits holds the rows of positions first_pos .. m->len−1 of this input (row j − first_pos for
// position j); lse / am hold the statistics of positions len − max_cont .. len−1 (index j −
// (len − max_cont)), computed beforehand for the whole batch.
static void score_input(kda_eval_plan *p, const model_input *m, const float *logits, int first_pos, int V,
                        const double *lse, const int *am) {
    int P = m->len, s0 = P - m->max_cont; // positions of this row that hold real tokens; first scored one
    for (long r = m->first; r >= 0; r = p->req[r].next) {
        const request *q = &p->req[r];
        double ll = 0;
        int greedy = 1;
        for (int j = 0; j < q->contlen; j++) {
            int pos = P - q->contlen + j;
            int32_t tok = j + 1 < q->contlen ? m->ids[pos + 1] : q->last;
            if (tok < 0 || tok >= V) kda_die("token id %d is outside the model's vocabulary of %d", tok, V);
            ll += (double)logits[(size_t)(pos - first_pos) * V + tok] - lse[pos - s0];
            greedy &= am[pos - s0] == tok;
        }
        kda_eval_item *it = &p->tasks[q->task].items[q->item];
        it->ll[q->choice] = ll;
        it->greedy[q->choice] = (unsigned char)greedy;
    }
}

void kda_eval_plan_run(kda_eval_plan *p, const kda_eval_lm *lm, int max_rows, size_t max_logits, FILE *progress) {
    if (p->n_in == 0) return;
    int V = lm->vocab;
    long *order = kda_malloc(sizeof(long) * (size_t)p->n_in);
    for (long i = 0; i < p->n_in; i++) order[i] = i;
    sort_base = p->in;
    qsort(order, (size_t)p->n_in, sizeof(long), by_length_desc);
    int Tmax = p->in[order[0]].len;
    int rows_cap = max_rows < 1 ? 1 : max_rows;
    int32_t *ids = kda_malloc(sizeof(int32_t) * (size_t)rows_cap * (size_t)Tmax);
    // chosen rows (continuation positions only) when the model offers them
    int32_t *pick = lm->logits_rows ? kda_malloc(sizeof(int32_t) * (size_t)rows_cap * (size_t)Tmax) : NULL;
    float *logits = NULL;
    size_t logits_cap = 0;
    // log-sum-exp and argmax of every scored row of a batch (in parallel: the 128K-wide rows cost)
    size_t stats_cap = (size_t)rows_cap * (size_t)Tmax;
    double *lse = kda_malloc(sizeof(double) * stats_cap);
    int *am = kda_malloc(sizeof(int) * stats_cap);
    size_t *stat_row = kda_malloc(sizeof(size_t) * stats_cap); // logits row of each statistic
    long *stat_off = kda_malloc(sizeof(long) * (size_t)rows_cap);
    double t0 = kda_now(), last = t0;
    long done = 0;
    while (done < p->n_in) {
        int T = p->in[order[done]].len;
        size_t per_row = (size_t)T * (size_t)V, need = 0; // need: logits floats of the batch
        long B = 0;
        if (pick) { // as many inputs as fit the logits budget by their continuation rows (at least one)
            while (B < rows_cap && done + B < p->n_in) {
                size_t add = (size_t)p->in[order[done + B]].max_cont * (size_t)V;
                if (B > 0 && need + add > max_logits) break;
                need += add;
                B++;
            }
        } else {
            B = max_logits / per_row;
            if (B < 1) B = 1;
            if (B > rows_cap) B = rows_cap;
            if (B > p->n_in - done) B = p->n_in - done;
            need = (size_t)B * per_row;
        }
        int n_pick = 0;
        for (long b = 0; b < B; b++) {
            const model_input *m = &p->in[order[done + b]];
            int32_t *row = ids + b * T;
            memcpy(row, m->ids, sizeof(int32_t) * (size_t)m->len);
            // right padding: any valid id; a causal model's earlier positions do not see it
            for (int t = m->len; t < T; t++) row[t] = 0;
            if (pick)
                for (int j = m->len - m->max_cont; j < m->len; j++) pick[n_pick++] = (int32_t)(b * T + j);
        }
        if (need > logits_cap) {
            free(logits);
            logits_cap = need;
            logits = kda_malloc(sizeof(float) * logits_cap);
        }
        if (pick)
            lm->logits_rows(lm->self, ids, (int)B, T, pick, n_pick, logits);
        else
            lm->logits(lm->self, ids, (int)B, T, logits);
        long n_stat = 0;
        for (long b = 0; b < B; b++) {
            const model_input *m = &p->in[order[done + b]];
            stat_off[b] = n_stat;
            for (int j = m->len - m->max_cont; j < m->len; j++, n_stat++)
                stat_row[n_stat] = pick ? (size_t)n_stat : (size_t)b * T + (size_t)j;
        }
#pragma omp parallel for schedule(dynamic, 4)
        for (long k = 0; k < n_stat; k++) row_stats(logits + stat_row[k] * (size_t)V, V, &lse[k], &am[k]);
        for (long b = 0; b < B; b++) {
            const model_input *m = &p->in[order[done + b]];
            const float *base = pick ? logits + (size_t)stat_off[b] * V : logits + (size_t)b * per_row;
            score_input(p, m, base, pick ? m->len - m->max_cont : 0, V, lse + stat_off[b], am + stat_off[b]);
        }
        done += B;
        double now = kda_now();
        if (progress && (now - last >= 1.0 || done == p->n_in)) {
            double rate = done / (now - t0 > 1e-9 ? now - t0 : 1e-9);
            fprintf(progress, "kda eval: %ld/%ld inputs (%.0f%%), %.1f inputs/s, %.0f s left\n", done, p->n_in,
                    100.0 * done / p->n_in, rate, (p->n_in - done) / rate);
            fflush(progress);
            last = now;
        }
    }
    free(order);
    free(ids);
    free(pick);
    free(logits);
    free(lse);
    free(am);
    free(stat_row);
    free(stat_off);
}
