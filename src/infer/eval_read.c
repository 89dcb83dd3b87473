// eval_read.c — file helpers and the readers of the JSON-lines tasks: ARC / OpenBookQA (three
// shapes), PIQA, Winogrande (two shapes) and HellaSwag (the original jsonl or the text form).
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// ---- files ----------------------------------------------------------------------------------------

int kda_eval_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int kda_eval_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

char *kda_eval_read_file(const char *path, size_t *len) {
    if (!ends_with(path, ".bz2")) {
        FILE *f = kda_fopen(path, "rb");
        char *buf = kda_read_stream(f, path, len);
        fclose(f);
        return buf;
    }
    if (!kda_eval_file_exists(path)) kda_die("cannot open '%s': no such file", path);
    // bzip2 through the bzip2 program (tools/deps.sh installs it); the path is single-quoted
    kda_sb cmd = {0};
    kda_sb_add(&cmd, "bzip2 -dc -- '");
    for (const char *p = path; *p; p++) {
        if (*p == '\'')
            kda_sb_add(&cmd, "'\\''");
        else
            kda_sb_addc(&cmd, *p);
    }
    kda_sb_add(&cmd, "'");
    FILE *f = popen(cmd.v, "r");
    if (!f) kda_die("cannot run '%s': %s", cmd.v, strerror(errno));
    char *buf = kda_read_stream(f, path, len);
    int st = pclose(f);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        kda_die("'%s' could not be decompressed (%s failed): is it a bzip2 file, and is bzip2 installed?", path, cmd.v);
    free(cmd.v);
    return buf;
}

const char *kda_eval_next_line(const char *buf, size_t len, size_t *pos, size_t *line_no, size_t *line_len) {
    if (*pos >= len) return NULL;
    const char *s = buf + *pos;
    const char *nl = memchr(s, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - s) : len - *pos;
    *pos += n + (nl ? 1 : 0);
    (*line_no)++;
    if (n && s[n - 1] == '\r') n--;
    *line_len = n;
    return s;
}

json_t *kda_eval_json_line(const char *path, size_t line_no, const char *s, size_t n) {
    json_error_t err;
    json_t *o = json_loadb(s, n, 0, &err);
    if (!o)
        kda_die("%s:%zu: not valid JSON (%s); the file must hold one JSON object per line", path, line_no, err.text);
    if (!json_is_object(o)) kda_die("%s:%zu: a JSON object was expected on each line", path, line_no);
    return o;
}

const char *kda_eval_json_str(json_t *o, const char *key, const char *path, size_t line_no) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) kda_die("%s:%zu: '%s' is missing or not a string", path, line_no, key);
    return json_string_value(v);
}

static int blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t') return 0;
    return 1;
}

void kda_eval_docs_open(kda_eval_docs *r, kda_eval_task *t, const char *path, long limit) {
    *r = (kda_eval_docs){.t = t, .path = path, .limit = limit};
    r->buf = kda_eval_read_file(path, &r->len);
    t->n_docs = 0;
}

json_t *kda_eval_docs_next(kda_eval_docs *r) {
    const char *s;
    size_t n;
    while ((s = kda_eval_next_line(r->buf, r->len, &r->pos, &r->line_no, &n))) {
        if (blank(s, n)) continue;
        r->t->n_docs++;
        if (r->limit > 0 && r->t->n_items >= r->limit) continue;
        return kda_eval_json_line(r->path, r->line_no, s, n);
    }
    return NULL;
}

void kda_eval_docs_close(kda_eval_docs *r) { free(r->buf); }

// Strings of a JSON array (dies naming the line when it is not one); returns the count.
static int json_strings(json_t *a, const char **out, int cap, const char *what, const char *path, size_t line_no) {
    if (!json_is_array(a)) kda_die("%s:%zu: '%s' is missing or not a list", path, line_no, what);
    int n = (int)json_array_size(a);
    if (n < 1 || n > cap) kda_die("%s:%zu: '%s' has %d entries; 1 to %d were expected", path, line_no, what, n, cap);
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_string(v)) kda_die("%s:%zu: entry %d of '%s' is not a string", path, line_no, i, what);
        out[i] = json_string_value(v);
    }
    return n;
}

static int json_int(json_t *o, const char *key, const char *path, size_t line_no) {
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) return (int)json_integer_value(v);
    if (json_is_string(v)) { // HF datasets keep some labels as strings ("3")
        char *end;
        long x = strtol(json_string_value(v), &end, 10);
        if (end != json_string_value(v) && *end == 0) return (int)x;
    }
    kda_die("%s:%zu: '%s' is missing or not an integer", path, line_no, key);
}

static void check_gold(int gold, int n, const char *path, size_t line_no) {
    if (gold < 0 || gold >= n)
        kda_die("%s:%zu: the gold answer %d is not one of the %d choices", path, line_no, gold, n);
}

#define MAX_CHOICES 16

// ---- ARC / OpenBookQA -------------------------------------------------------------------------------

// Index of answerKey (leading whitespace dropped) among the labels.
static int gold_of_key(json_t *labels, const char *key, const char *path, size_t line_no) {
    while (*key == ' ' || *key == '\t') key++;
    for (size_t i = 0; i < json_array_size(labels); i++) {
        json_t *l = json_array_get(labels, i);
        if (json_is_string(l) && !strcmp(json_string_value(l), key)) return (int)i;
    }
    kda_die("%s:%zu: answerKey '%s' is not among the choice labels", path, line_no, key);
}

void kda_eval_read_multiple_choice(kda_eval_task *t, const char *path, int arc_template, long limit) {
    kda_eval_docs r;
    kda_eval_docs_open(&r, t, path, limit);
    json_t *o;
    while ((o = kda_eval_docs_next(&r))) {
        size_t line_no = r.line_no;
        const char *choices[MAX_CHOICES];
        int nc, gold;
        char *ctx;
        json_t *q = json_object_get(o, "question"), *ch = json_object_get(o, "choices");
        if (json_object_get(o, "query")) { // llm-foundry: query, choices, gold (ARC's query has "Question: ")
            const char *query = kda_eval_json_str(o, "query", path, line_no);
            nc = json_strings(ch, choices, MAX_CHOICES, "choices", path, line_no);
            gold = json_int(o, "gold", path, line_no);
            kda_sb b = {0};
            kda_sb_add(&b, query);
            if (arc_template) kda_sb_add(&b, "\nAnswer:");
            ctx = kda_sb_take(&b);
        } else {
            const char *text;
            json_t *texts, *labels;
            if (json_is_object(q)) { // AI2's release: question {stem, choices [{text, label}]}
                text = kda_eval_json_str(q, "stem", path, line_no);
                json_t *list = json_object_get(q, "choices");
                if (!json_is_array(list)) kda_die("%s:%zu: question.choices is missing or not a list", path, line_no);
                texts = json_array();
                labels = json_array();
                for (size_t i = 0; i < json_array_size(list); i++) {
                    json_t *c = json_array_get(list, i);
                    json_array_append(texts, json_object_get(c, "text"));
                    json_array_append(labels, json_object_get(c, "label"));
                }
                json_object_set_new(o, "_texts", texts);
                json_object_set_new(o, "_labels", labels);
            } else { // Hugging Face: question | question_stem, choices {text, label}
                text = json_is_string(q) ? json_string_value(q) : kda_eval_json_str(o, "question_stem", path, line_no);
                if (!json_is_object(ch))
                    kda_die("%s:%zu: 'choices' must be a list (with query/gold) or {text, label}", path, line_no);
                texts = json_object_get(ch, "text");
                labels = json_object_get(ch, "label");
            }
            nc = json_strings(texts, choices, MAX_CHOICES, "choices text", path, line_no);
            if (!json_is_array(labels) || json_array_size(labels) != (size_t)nc)
                kda_die("%s:%zu: choice labels are missing or not one per choice", path, line_no);
            gold = gold_of_key(labels, kda_eval_json_str(o, "answerKey", path, line_no), path, line_no);
            ctx = arc_template ? kda_eval_question_answer(text) : kda_strdup(text);
        }
        check_gold(gold, nc, path, line_no);
        kda_eval_item_choices(kda_eval_task_push(t), ctx, choices, nc, gold);
        free(ctx);
        json_decref(o);
    }
    kda_eval_docs_close(&r);
}

// ---- PIQA ---------------------------------------------------------------------------------------------

// The labels file has a line per document; the documents past --limit need none.
void kda_eval_read_piqa(kda_eval_task *t, const char *jsonl, const char *labels_path, long limit) {
    kda_eval_docs r;
    kda_eval_docs_open(&r, t, jsonl, limit);
    size_t llen = 0, lpos = 0, lline = 0, ln;
    char *lbuf = labels_path ? kda_eval_read_file(labels_path, &llen) : NULL;
    json_t *o;
    while ((o = kda_eval_docs_next(&r))) {
        size_t line_no = r.line_no;
        const char *l = lbuf ? kda_eval_next_line(lbuf, llen, &lpos, &lline, &ln) : NULL;
        int gold;
        if (json_object_get(o, "label")) {
            gold = json_int(o, "label", jsonl, line_no);
        } else {
            if (!lbuf) kda_die("%s:%zu: no 'label' and no labels file (valid-labels.lst) next to it", jsonl, line_no);
            if (!l) kda_die("%s has fewer lines than %s has examples (line %zu)", labels_path, jsonl, line_no);
            char tmp[16];
            snprintf(tmp, sizeof tmp, "%.*s", (int)(ln < 15 ? ln : 15), l);
            if (strcmp(tmp, "0") && strcmp(tmp, "1"))
                kda_die("%s:%zu: a label 0 or 1 was expected, got '%s'", labels_path, lline, tmp);
            gold = tmp[0] - '0';
        }
        const char *choices[2] = {kda_eval_json_str(o, "sol1", jsonl, line_no),
                                  kda_eval_json_str(o, "sol2", jsonl, line_no)};
        check_gold(gold, 2, jsonl, line_no);
        char *ctx = kda_eval_question_answer(kda_eval_json_str(o, "goal", jsonl, line_no));
        kda_eval_item_choices(kda_eval_task_push(t), ctx, choices, 2, gold);
        free(ctx);
        json_decref(o);
    }
    kda_eval_docs_close(&r);
    free(lbuf);
}

// ---- Winogrande ------------------------------------------------------------------------------------------

void kda_eval_read_winogrande(kda_eval_task *t, const char *path, long limit) {
    kda_eval_docs r;
    kda_eval_docs_open(&r, t, path, limit);
    json_t *o;
    while ((o = kda_eval_docs_next(&r))) {
        size_t line_no = r.line_no;
        kda_eval_item *it = kda_eval_task_push(t);
        if (json_object_get(o, "context_options")) { // llm-foundry: context_options, continuation, gold
            const char *ctxs[2];
            int nc = json_strings(json_object_get(o, "context_options"), ctxs, 2, "context_options", path, line_no);
            int gold = json_int(o, "gold", path, line_no);
            check_gold(gold, nc, path, line_no);
            kda_eval_item_contexts(it, ctxs, nc, kda_eval_json_str(o, "continuation", path, line_no), gold);
        } else { // the release: sentence with "_", option1, option2, answer "1" | "2"
            char *c1, *c2, *cont;
            const char *sentence = kda_eval_json_str(o, "sentence", path, line_no);
            if (!kda_eval_winogrande_split(sentence, kda_eval_json_str(o, "option1", path, line_no),
                                           kda_eval_json_str(o, "option2", path, line_no), &c1, &c2, &cont))
                kda_die("%s:%zu: the sentence has no '_' blank", path, line_no);
            const char *ans = kda_eval_json_str(o, "answer", path, line_no);
            if (strcmp(ans, "1") && strcmp(ans, "2"))
                kda_die("%s:%zu: answer must be \"1\" or \"2\", got '%s'", path, line_no, ans);
            const char *ctxs[2] = {c1, c2};
            kda_eval_item_contexts(it, ctxs, 2, cont, ans[0] - '1');
            free(c1);
            free(c2);
            free(cont);
        }
        json_decref(o);
    }
    kda_eval_docs_close(&r);
}

// ---- HellaSwag -------------------------------------------------------------------------------------------

static void hellaswag_item(kda_eval_task *t, char *query, const char *const endings[4], int gold) {
    char *pre[4];
    for (int i = 0; i < 4; i++) pre[i] = kda_eval_hellaswag_preprocess(endings[i]);
    kda_eval_item_choices(kda_eval_task_push(t), query, (const char *const *)pre, 4, gold);
    for (int i = 0; i < 4; i++) free(pre[i]);
    free(query);
}

// The release: activity_label, ctx_a, ctx_b, endings, label.
static void hellaswag_jsonl(kda_eval_task *t, const char *path, long limit) {
    kda_eval_docs r;
    kda_eval_docs_open(&r, t, path, limit);
    json_t *o;
    while ((o = kda_eval_docs_next(&r))) {
        size_t line_no = r.line_no;
        const char *endings[4];
        if (json_strings(json_object_get(o, "endings"), endings, 4, "endings", path, line_no) != 4)
            kda_die("%s:%zu: 'endings' must hold 4 endings", path, line_no);
        int gold = json_int(o, "label", path, line_no);
        check_gold(gold, 4, path, line_no);
        char *q = kda_eval_hellaswag_query(kda_eval_json_str(o, "activity_label", path, line_no),
                                           kda_eval_json_str(o, "ctx_a", path, line_no),
                                           kda_eval_json_str(o, "ctx_b", path, line_no));
        hellaswag_item(t, q, endings, gold);
        json_decref(o);
    }
    kda_eval_docs_close(&r);
}

// Text: 6 lines per example ("activity_label: ctx", gold 0-3, 4 endings).
static void hellaswag_text(kda_eval_task *t, const char *path, long limit) {
    size_t len, pos = 0, line_no = 0, n;
    char *buf = kda_eval_read_file(path, &len);
    const char *s;
    t->n_docs = 0;
    const char *lines[6];
    size_t lens[6], first = 0;
    int k = 0;
    while ((s = kda_eval_next_line(buf, len, &pos, &line_no, &n))) {
        if (k == 0) first = line_no;
        lines[k] = s;
        lens[k++] = n;
        if (k < 6) continue;
        k = 0;
        t->n_docs++;
        if (limit > 0 && t->n_items >= limit) continue;
        char *f[6];
        for (int i = 0; i < 6; i++) {
            kda_sb b = {0};
            kda_sb_addn(&b, lines[i], lens[i]);
            f[i] = kda_sb_take(&b);
        }
        if (strlen(f[1]) != 1 || f[1][0] < '0' || f[1][0] > '3')
            kda_die("%s:%zu: the gold label (0-3) was expected here, got '%s'; the text form has 6 lines per "
                    "example (context, label, 4 endings)",
                    path, first + 1, f[1]);
        hellaswag_item(t, kda_eval_hellaswag_query_from_text(f[0]), (const char *const *)f + 2, f[1][0] - '0');
        for (int i = 0; i < 6; i++) free(f[i]);
    }
    if (k != 0 && !(k == 1 && lens[0] == 0))
        kda_die("%s: ends in the middle of an example (%d lines after line %zu); the text form has 6 lines per "
                "example",
                path, k, first - 1);
    free(buf);
}

void kda_eval_read_hellaswag(kda_eval_task *t, const char *path, long limit) {
    if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.bz2"))
        hellaswag_jsonl(t, path, limit);
    else
        hellaswag_text(t, path, limit);
}
