// eval_text.c — the Python string operations lm-eval's templates use, the prompt builders of
// each task and the item constructors (see eval.h).
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// ---- string builder ---------------------------------------------------------------------------

void kda_sb_addn(kda_sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        b->v = kda_realloc(b->v, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
}

void kda_sb_add(kda_sb *b, const char *s) { kda_sb_addn(b, s, strlen(s)); }
void kda_sb_addc(kda_sb *b, char c) { kda_sb_addn(b, &c, 1); }

char *kda_sb_take(kda_sb *b) {
    if (!b->v) kda_sb_addn(b, "", 0);
    char *s = b->v;
    *b = (kda_sb){0};
    return s;
}

// ---- UTF-8 ---------------------------------------------------------------------------------------

// Decode one code point at s[i..n); *cp gets it (U+FFFD for an invalid byte, which counts as one
// character, as Python's errors="replace" decode does for it). Returns the bytes consumed.
static size_t utf8_next(const unsigned char *s, size_t i, size_t n, uint32_t *cp) {
    unsigned char b = s[i];
    size_t need = b < 0x80       ? 1
        : b >= 0xC2 && b <= 0xDF ? 2
        : b >= 0xE0 && b <= 0xEF ? 3
        : b >= 0xF0 && b <= 0xF4 ? 4
                                 : 0;
    if (need == 1) {
        *cp = b;
        return 1;
    }
    if (need == 0 || i + need > n) {
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t c = b & (0x7F >> need);
    for (size_t k = 1; k < need; k++) {
        if ((s[i + k] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        c = c << 6 | (s[i + k] & 0x3F);
    }
    // overlong 3/4-byte forms, surrogates and > U+10FFFF are invalid
    if ((need == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (need == 4 && (c < 0x10000 || c > 0x10FFFF))) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = c;
    return need;
}

size_t kda_eval_py_len(const char *s) {
    size_t n = strlen(s), count = 0;
    uint32_t cp;
    for (size_t i = 0; i < n; count++) i += utf8_next((const unsigned char *)s, i, n, &cp);
    return count;
}

int kda_eval_py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
        (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t kda_eval_py_rstrip_len(const char *s, size_t n) {
    size_t end = 0;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_next((const unsigned char *)s, i, n, &cp);
        i += k;
        if (!kda_eval_py_isspace(cp)) end = i;
    }
    return end;
}

char *kda_eval_py_strip(const char *s) {
    size_t n = strlen(s), start = 0;
    uint32_t cp;
    while (start < n) {
        size_t k = utf8_next((const unsigned char *)s, start, n, &cp);
        if (!kda_eval_py_isspace(cp)) break;
        start += k;
    }
    size_t end = start + kda_eval_py_rstrip_len(s + start, n - start);
    kda_sb b = {0};
    kda_sb_addn(&b, s + start, end - start);
    return kda_sb_take(&b);
}

static char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }

char *kda_eval_py_capitalize(const char *s) {
    char *r = kda_strdup(s);
    for (size_t i = 0; r[i]; i++) r[i] = i == 0 ? ascii_upper(r[i]) : ascii_lower(r[i]);
    return r;
}

// ---- prompt builders -------------------------------------------------------------------------------

char *kda_eval_question_answer(const char *q) {
    kda_sb b = {0};
    kda_sb_add(&b, "Question: ");
    kda_sb_add(&b, q);
    kda_sb_add(&b, "\nAnswer:");
    return kda_sb_take(&b);
}

char *kda_eval_hellaswag_preprocess(const char *text) {
    char *t = kda_eval_py_strip(text);
    kda_sb a = {0}, b = {0}, c = {0};
    // " [title]" -> ". "
    for (const char *p = t; *p;) {
        if (!strncmp(p, " [title]", 8)) {
            kda_sb_add(&a, ". ");
            p += 8;
        } else {
            kda_sb_addc(&a, *p++);
        }
    }
    free(t);
    // re.sub(r"\[.*?\]", "", s): '.' stops at a newline, so a '[' without a ']' before the next
    // newline stays
    const char *s = a.v ? a.v : "";
    for (const char *p = s; *p;) {
        if (*p == '[') {
            const char *q = p + 1;
            while (*q && *q != ']' && *q != '\n') q++;
            if (*q == ']') {
                p = q + 1;
                continue;
            }
        }
        kda_sb_addc(&b, *p++);
    }
    // str.replace("  ", " "): one left-to-right pass over non-overlapping pairs
    s = b.v ? b.v : "";
    for (const char *p = s; *p;) {
        if (p[0] == ' ' && p[1] == ' ') {
            kda_sb_addc(&c, ' ');
            p += 2;
        } else {
            kda_sb_addc(&c, *p++);
        }
    }
    free(a.v);
    free(b.v);
    return kda_sb_take(&c);
}

char *kda_eval_hellaswag_query(const char *activity_label, const char *ctx_a, const char *ctx_b) {
    char *cap = kda_eval_py_capitalize(ctx_b);
    kda_sb b = {0};
    kda_sb_add(&b, activity_label);
    kda_sb_add(&b, ": ");
    kda_sb_add(&b, ctx_a);
    kda_sb_add(&b, " ");
    kda_sb_add(&b, cap);
    free(cap);
    char *raw = kda_sb_take(&b);
    char *q = kda_eval_hellaswag_preprocess(raw);
    free(raw);
    return q;
}

char *kda_eval_hellaswag_query_from_text(const char *line) {
    char *s = kda_strdup(line);
    char *last = NULL;
    for (char *p = strstr(s, ". "); p; p = strstr(p + 1, ". ")) last = p;
    if (last && last[2] >= 'a' && last[2] <= 'z') last[2] = ascii_upper(last[2]);
    char *q = kda_eval_hellaswag_preprocess(s);
    free(s);
    return q;
}

char *kda_eval_mmlu_description(const char *subject) {
    kda_sb b = {0};
    kda_sb_add(&b, "The following are multiple choice questions (with answers) about ");
    for (const char *p = subject; *p; p++) kda_sb_addc(&b, *p == '_' ? ' ' : *p);
    kda_sb_add(&b, ".\n\n");
    return kda_sb_take(&b);
}

char *kda_eval_mmlu_question(const char *q, const char *const c[4]) {
    static const char *const letter[4] = {"\nA. ", "\nB. ", "\nC. ", "\nD. "};
    char *qs = kda_eval_py_strip(q);
    kda_sb b = {0};
    kda_sb_add(&b, qs);
    free(qs);
    for (int i = 0; i < 4; i++) {
        kda_sb_add(&b, letter[i]);
        kda_sb_add(&b, c[i]);
    }
    kda_sb_add(&b, "\nAnswer:");
    return kda_sb_take(&b);
}

char *kda_eval_race_prompt(const char *article, const char *const *questions, const char *const *answers, int n) {
    kda_sb b = {0};
    kda_sb_add(&b, "Article: ");
    kda_sb_add(&b, article);
    kda_sb_add(&b, "\n\n");
    for (int i = 0; i + 1 < n; i++) {
        const char *q = questions[i];
        size_t len = strlen(q);
        if (len >= 6 && !strcmp(q + len - 6, "  _  .")) { // a cloze: the answer fills the blank
            kda_sb_addn(&b, q, len - 5);
            kda_sb_add(&b, answers[i]);
            kda_sb_add(&b, "\n");
        } else {
            kda_sb_add(&b, "Question: ");
            kda_sb_add(&b, q);
            kda_sb_add(&b, "\nAnswer: ");
            kda_sb_add(&b, answers[i]);
            kda_sb_add(&b, "\n");
        }
    }
    if (n > 0) kda_sb_add(&b, questions[n - 1]);
    return kda_sb_take(&b);
}

int kda_eval_winogrande_split(const char *sentence, const char *option1, const char *option2, char **ctx1, char **ctx2,
                              char **cont) {
    const char *u = strchr(sentence, '_');
    if (!u) return 0;
    size_t i = (size_t)(u - sentence);
    kda_sb b = {0};
    kda_sb_addn(&b, sentence, i);
    kda_sb_add(&b, option1);
    *ctx1 = kda_sb_take(&b);
    kda_sb_addn(&b, sentence, i);
    kda_sb_add(&b, option2);
    *ctx2 = kda_sb_take(&b);
    *cont = kda_eval_py_strip(u + 1);
    return 1;
}

// ---- items --------------------------------------------------------------------------------------------

static void item_alloc(kda_eval_item *it, int n, int gold) {
    it->n = n;
    it->gold = gold;
    it->ctx = kda_calloc((size_t)n, sizeof(char *));
    it->cont = kda_calloc((size_t)n, sizeof(char *));
    it->choice_len = kda_calloc((size_t)n, sizeof(double));
    it->ll = kda_calloc((size_t)n, sizeof(double));
    it->greedy = kda_calloc((size_t)n, 1);
}

static char *with_delimiter(const char *s) {
    kda_sb b = {0};
    kda_sb_add(&b, " ");
    kda_sb_add(&b, s);
    return kda_sb_take(&b);
}

void kda_eval_item_choices(kda_eval_item *it, const char *ctx, const char *const *choices, int n, int gold) {
    item_alloc(it, n, gold);
    for (int i = 0; i < n; i++) {
        it->ctx[i] = kda_strdup(ctx);
        it->cont[i] = with_delimiter(choices[i]);
        it->choice_len[i] = (double)kda_eval_py_len(choices[i]);
    }
}

void kda_eval_item_contexts(kda_eval_item *it, const char *const *contexts, int n, const char *cont, int gold) {
    item_alloc(it, n, gold);
    for (int i = 0; i < n; i++) {
        it->ctx[i] = kda_strdup(contexts[i]);
        it->cont[i] = with_delimiter(cont);
        it->choice_len[i] = (double)kda_eval_py_len(contexts[i]);
    }
}

void kda_eval_item_free(kda_eval_item *it) {
    for (int i = 0; i < it->n; i++) {
        free(it->ctx[i]);
        free(it->cont[i]);
    }
    free(it->ctx);
    free(it->cont);
    free(it->choice_len);
    free(it->ll);
    free(it->greedy);
    *it = (kda_eval_item){0};
}

kda_eval_item *kda_eval_task_push(kda_eval_task *t) {
    t->items = kda_realloc(t->items, sizeof(kda_eval_item) * (size_t)(t->n_items + 1));
    kda_eval_item *it = &t->items[t->n_items++];
    *it = (kda_eval_item){0};
    return it;
}
