// eval_read_race.c — RACE documents (one per article; lm-eval scores the last question and puts
// the earlier ones, answered, in the prompt). Accepted forms (no RACE data ships with kda):
//   JSON lines as in EleutherAI/race: {"article": ..., "problems": P} where P is a list of
//     {"question", "options" [4], "answer" "A"-"D"}, or that list as a Python literal string
//     (the dataset stores str(list), read by lm-eval with ast.literal_eval);
//   JSON lines or files in the original release's form: {"article", "questions" [n],
//     "options" [n][4], "answers" [n]};
//   a directory of such files (the release's RACE/test/high/*.txt), read in natural name order.
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// ---- Python literals (str, list, tuple, dict, int, True/False/None) to JSON ----------------------------

typedef struct {
    const char *s, *path;
    size_t i, n, line;
} pylit;

KDA_NORETURN static void pylit_fail(const pylit *p, const char *what) {
    kda_die("%s:%zu: 'problems' is not a Python literal list (%s at character %zu)", p->path, p->line, what, p->i);
}

static void skip_ws(pylit *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) p->i++;
}

static void put_utf8(kda_sb *b, uint32_t c) {
    char u[4];
    size_t k;
    if (c < 0x80)
        u[0] = (char)c, k = 1;
    else if (c < 0x800)
        u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), k = 2;
    else if (c < 0x10000)
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 0x3F)), u[2] = (char)(0x80 | (c & 0x3F)), k = 3;
    else
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((c >> 6) & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F)), k = 4;
    kda_sb_addn(b, u, k);
}

static uint32_t hex_digits(pylit *p, int k) {
    uint32_t v = 0;
    for (int j = 0; j < k; j++) {
        if (p->i >= p->n) pylit_fail(p, "short escape");
        char c = p->s[p->i++];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) pylit_fail(p, "bad hex escape");
        v = v * 16 + (uint32_t)d;
    }
    return v;
}

static json_t *pylit_string(pylit *p) {
    char q = p->s[p->i++];
    kda_sb b = {0};
    for (;;) {
        if (p->i >= p->n) pylit_fail(p, "unterminated string");
        char c = p->s[p->i++];
        if (c == q) break;
        if (c != '\\') {
            kda_sb_addc(&b, c);
            continue;
        }
        if (p->i >= p->n) pylit_fail(p, "unterminated string");
        c = p->s[p->i++];
        switch (c) {
        case '\n': break; // line continuation
        case '\\':
        case '\'':
        case '"': kda_sb_addc(&b, c); break;
        case 'n': kda_sb_addc(&b, '\n'); break;
        case 't': kda_sb_addc(&b, '\t'); break;
        case 'r': kda_sb_addc(&b, '\r'); break;
        case 'a': kda_sb_addc(&b, '\a'); break;
        case 'b': kda_sb_addc(&b, '\b'); break;
        case 'f': kda_sb_addc(&b, '\f'); break;
        case 'v': kda_sb_addc(&b, '\v'); break;
        case 'x': put_utf8(&b, hex_digits(p, 2)); break;
        case 'u': put_utf8(&b, hex_digits(p, 4)); break;
        case 'U': {
            uint32_t v = hex_digits(p, 8);
            if (v > 0x10FFFF) pylit_fail(p, "code point out of range");
            put_utf8(&b, v);
            break;
        }
        default:
            if (c >= '0' && c <= '7') { // octal, up to 3 digits
                uint32_t v = (uint32_t)(c - '0');
                for (int j = 0; j < 2 && p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '7'; j++)
                    v = v * 8 + (uint32_t)(p->s[p->i++] - '0');
                put_utf8(&b, v);
            } else { // Python keeps an unknown escape as written
                kda_sb_addc(&b, '\\');
                kda_sb_addc(&b, c);
            }
        }
    }
    json_t *s = json_stringn(b.v ? b.v : "", b.n);
    free(b.v);
    if (!s) pylit_fail(p, "string is not valid UTF-8");
    return s;
}

static json_t *pylit_value(pylit *p, int depth) {
    if (depth > 32) pylit_fail(p, "nested too deeply");
    skip_ws(p);
    if (p->i >= p->n) pylit_fail(p, "unexpected end");
    char c = p->s[p->i];
    if (c == '\'' || c == '"') return pylit_string(p);
    if (c == '[' || c == '(') {
        char close = c == '[' ? ']' : ')';
        p->i++;
        json_t *a = json_array();
        for (;;) {
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == close) {
                p->i++;
                return a;
            }
            json_array_append_new(a, pylit_value(p, depth + 1));
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',')
                p->i++;
            else if (!(p->i < p->n && p->s[p->i] == close))
                pylit_fail(p, "',' or a closing bracket expected");
        }
    }
    if (c == '{') {
        p->i++;
        json_t *o = json_object();
        for (;;) {
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                return o;
            }
            json_t *k = pylit_value(p, depth + 1);
            if (!json_is_string(k)) pylit_fail(p, "a dict key that is not a string");
            skip_ws(p);
            if (!(p->i < p->n && p->s[p->i] == ':')) pylit_fail(p, "':' expected");
            p->i++;
            json_object_set_new(o, json_string_value(k), pylit_value(p, depth + 1));
            json_decref(k);
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',')
                p->i++;
            else if (!(p->i < p->n && p->s[p->i] == '}'))
                pylit_fail(p, "',' or '}' expected");
        }
    }
    static const char *const words[3] = {"True", "False", "None"};
    for (int w = 0; w < 3; w++) {
        size_t k = strlen(words[w]);
        if (p->n - p->i >= k && !strncmp(p->s + p->i, words[w], k)) {
            p->i += k;
            return w == 0 ? json_true() : w == 1 ? json_false() : json_null();
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        long long v = strtoll(p->s + p->i, &end, 10);
        p->i = (size_t)(end - p->s);
        return json_integer(v);
    }
    pylit_fail(p, "unsupported value");
}

static json_t *parse_pylit(const char *s, const char *path, size_t line) {
    pylit p = {.s = s, .path = path, .n = strlen(s), .line = line};
    json_t *v = pylit_value(&p, 0);
    skip_ws(&p);
    if (p.i != p.n) pylit_fail(&p, "text after the value");
    return v;
}

// ---- documents -------------------------------------------------------------------------------------------

static int answer_index(const char *a, const char *path, size_t line) {
    if (strlen(a) == 1 && a[0] >= 'A' && a[0] <= 'D') return a[0] - 'A';
    kda_die("%s:%zu: an answer must be a letter A-D, got '%s'", path, line, a);
}

static const char *option_of(json_t *options, int k, const char *path, size_t line) {
    if (!json_is_array(options) || json_array_size(options) != 4)
        kda_die("%s:%zu: each problem needs 4 options", path, line);
    json_t *v = json_array_get(options, (size_t)k);
    if (!json_is_string(v)) kda_die("%s:%zu: an option is not a string", path, line);
    return json_string_value(v);
}

static void race_doc(kda_eval_task *t, json_t *o, const char *path, size_t line) {
    const char *article = kda_eval_json_str(o, "article", path, line);
    json_t *problems = json_object_get(o, "problems"), *owned = NULL;
    if (json_is_string(problems)) problems = owned = parse_pylit(json_string_value(problems), path, line);
    int n;
    json_t *qs = NULL, *opts = NULL, *ans = NULL;
    if (problems) {
        if (!json_is_array(problems) || json_array_size(problems) == 0)
            kda_die("%s:%zu: 'problems' must be a non-empty list", path, line);
        n = (int)json_array_size(problems);
    } else {
        qs = json_object_get(o, "questions");
        opts = json_object_get(o, "options");
        ans = json_object_get(o, "answers");
        if (!json_is_array(qs) || !json_is_array(opts) || !json_is_array(ans) || json_array_size(qs) == 0 ||
            json_array_size(opts) != json_array_size(qs) || json_array_size(ans) != json_array_size(qs))
            kda_die("%s:%zu: a RACE document needs 'problems', or 'questions', 'options' and 'answers' lists of one "
                    "length",
                    path, line);
        n = (int)json_array_size(qs);
    }
    const char **q = kda_calloc((size_t)n, sizeof(char *)), **a = kda_calloc((size_t)n, sizeof(char *));
    json_t *last_opts = NULL;
    int gold = 0;
    for (int i = 0; i < n; i++) {
        json_t *qv, *ov, *av;
        if (problems) {
            json_t *pr = json_array_get(problems, (size_t)i);
            qv = json_object_get(pr, "question");
            ov = json_object_get(pr, "options");
            av = json_object_get(pr, "answer");
        } else {
            qv = json_array_get(qs, (size_t)i);
            ov = json_array_get(opts, (size_t)i);
            av = json_array_get(ans, (size_t)i);
        }
        if (!json_is_string(qv) || !json_is_string(av))
            kda_die("%s:%zu: problem %d needs a question and an answer (strings)", path, line, i + 1);
        int k = answer_index(json_string_value(av), path, line);
        q[i] = json_string_value(qv);
        a[i] = option_of(ov, k, path, line);
        last_opts = ov;
        gold = k;
    }
    const char *choices[4];
    for (int k = 0; k < 4; k++) choices[k] = option_of(last_opts, k, path, line);
    char *prompt = kda_eval_race_prompt(article, q, a, n);
    kda_eval_item_choices(kda_eval_task_push(t), prompt, choices, 4, gold);
    free(prompt);
    free(q);
    free(a);
    json_decref(owned);
}

// natural order: digit runs compare as numbers (high2.txt before high10.txt)
static int natural_cmp(const void *pa, const void *pb) {
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}

void kda_eval_read_race(kda_eval_task *t, const char *path, long limit) {
    t->n_docs = 0;
    if (kda_eval_dir_exists(path)) {
        DIR *d = opendir(path);
        if (!d) kda_die("cannot open the directory '%s'", path);
        char **names = NULL;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t k = strlen(e->d_name);
            if (k > 4 && (!strcmp(e->d_name + k - 4, ".txt") || (k > 5 && !strcmp(e->d_name + k - 5, ".json")))) {
                names = kda_realloc(names, sizeof(char *) * (n + 1));
                names[n++] = kda_strdup(e->d_name);
            }
        }
        closedir(d);
        if (n == 0) kda_die("'%s' holds no RACE files (*.txt or *.json, one article each)", path);
        qsort(names, n, sizeof(char *), natural_cmp);
        for (size_t i = 0; i < n; i++) {
            t->n_docs++;
            if (limit <= 0 || t->n_items < limit) {
                char file[4096];
                kda_path(file, sizeof file, "%s/%s", path, names[i]);
                size_t len;
                char *buf = kda_eval_read_file(file, &len);
                json_t *o = kda_eval_json_line(file, 1, buf, len);
                race_doc(t, o, file, 1);
                json_decref(o);
                free(buf);
            }
            free(names[i]);
        }
        free(names);
        return;
    }
    kda_eval_docs r;
    kda_eval_docs_open(&r, t, path, limit);
    json_t *o;
    while ((o = kda_eval_docs_next(&r))) {
        race_doc(t, o, path, r.line_no);
        json_decref(o);
    }
    kda_eval_docs_close(&r);
}
