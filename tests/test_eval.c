// test_eval.c — eval.h without a model: Python string semantics, the prompt builders (expected
// strings written from lm-eval's templates, a few checked against Python), every task reader on
// hand-made files (all accepted shapes give the same items; --limit; bad input names file:line),
// lm-eval's context/continuation split (byte codec and the Llama 3 tokenizer), the batched
// scorer against a direct computation with a fake language model (any batch size, a tight
// logits budget, shared inputs, left truncation), the metrics and stderr on hand-made
// log-likelihoods, and the JSON / table output; on a small random model, the head on chosen rows
// (kda_model_logits_rows) against the rows of the full head. (Validation loss, which is
// training's own code: tests/cli/test_eval_val_loss.sh.)
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/config.h"
#include "infer/eval.h"
#include "model/model.h"
#include "test_util.h"
#include "text/tokenizer.h"

static char tmpdir[256];

static const char *write_file(const char *name, const char *text) {
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", p);
    for (char *s = strchr(dir + strlen(tmpdir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(dir, 0755);
        *s = '/';
    }
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(text, 1, strlen(text), f) != strlen(text) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
    return p;
}

static int streq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

// ---- 1. Python string semantics ---------------------------------------------------------------------

static void test_py(void) {
    printf("Python string semantics\n");
    T_CHECK(kda_eval_py_len("caf\xc3\xa9") == 4 &&
                kda_eval_py_len("\xf0\x9f\x98\x80"
                                "a") == 2 &&
                kda_eval_py_len("") == 0,
            "len counts code points (café 4, emoji+a 2)");
    T_CHECK(kda_eval_py_len("a\xff"
                            "b") == 3,
            "an invalid byte counts as one character");
    char *s = kda_eval_py_strip(" \xe3\x80\x80 x y\xc2\xa0\xe2\x80\x89");
    T_CHECK(streq(s, "x y"), "strip removes Unicode whitespace (U+3000, U+00A0, U+2009): '%s'", s);
    free(s);
    s = kda_eval_py_strip("\x1c\tq\n\x1f");
    T_CHECK(streq(s, "q"), "strip removes \\x1c-\\x1f too (Python's isspace)");
    free(s);
    T_CHECK(kda_eval_py_rstrip_len("ab \n", 4) == 2 && kda_eval_py_rstrip_len("ab", 2) == 2 &&
                kda_eval_py_rstrip_len("  ", 2) == 0,
            "rstrip length");
    T_CHECK(kda_eval_py_isspace(0x85) && kda_eval_py_isspace(0x2028) && !kda_eval_py_isspace(0x200B) &&
                !kda_eval_py_isspace('x'),
            "isspace: U+0085, U+2028 yes; U+200B, x no");
    s = kda_eval_py_capitalize("he IS Here");
    T_CHECK(streq(s, "He is here"), "capitalize lower-cases the rest ('%s')", s);
    free(s);
}

// ---- 2. prompt builders -----------------------------------------------------------------------------------

static void test_prompts(void) {
    printf("prompt builders\n");
    char *s = kda_eval_question_answer("Which gas?");
    T_CHECK(streq(s, "Question: Which gas?\nAnswer:"), "arc / piqa template");
    free(s);
    struct {
        const char *in, *out;
    } hs[] = {
        {"  How to x [title] Do it. [step] Then  go.   ", "How to x. Do it. Then go."},
        {"a [b\nc] d", "a [b\nc] d"},  // '.' of \[.*?\] does not cross a newline
        {"x   y [header]z", "x  y z"}, // one pass of "  " -> " "
        {"[open no close", "[open no close"},
        {"Tab\t[x]y\xc2\xa0 ", "Tab\ty"},
    };
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        s = kda_eval_hellaswag_preprocess(hs[i].in);
        T_CHECK(streq(s, hs[i].out), "hellaswag preprocess case %zu (as Python's re.sub gives)", i);
        free(s);
    }
    s = kda_eval_hellaswag_query("Roof shingle removal", "A man is sitting on a roof.", "he IS");
    T_CHECK(streq(s, "Roof shingle removal: A man is sitting on a roof. He is"),
            "hellaswag query capitalizes ctx_b: '%s'", s);
    free(s);
    s = kda_eval_hellaswag_query("Waxing", "A woman sits.", "");
    T_CHECK(streq(s, "Waxing: A woman sits."), "hellaswag query with an empty ctx_b (trailing space stripped)");
    free(s);
    s = kda_eval_hellaswag_query_from_text("Clean and jerk: A lady walks. She bends. the lady");
    T_CHECK(streq(s, "Clean and jerk: A lady walks. She bends. The lady"), "text form: last '. ' sentence capitalized");
    free(s);
    s = kda_eval_mmlu_description("high_school_us_history");
    T_CHECK(streq(s, "The following are multiple choice questions (with answers) about high school us history.\n\n"),
            "mmlu description");
    free(s);
    const char *c[4] = {"0", "4", " 2", "6"};
    s = kda_eval_mmlu_question("  Find x. \n", c);
    T_CHECK(streq(s, "Find x.\nA. 0\nB. 4\nC.  2\nD. 6\nAnswer:"),
            "mmlu question: stripped question, choices as given");
    free(s);
    const char *q[3] = {"The boy went to the  _  .", "Why?", "What did he do?"};
    const char *a[3] = {"park", "Because.", "(unused)"};
    s = kda_eval_race_prompt("Art.", q, a, 3);
    T_CHECK(streq(s, "Article: Art.\n\nThe boy went to the park\nQuestion: Why?\nAnswer: Because.\nWhat did he do?"),
            "race prompt: cloze filled, question answered, last question bare");
    free(s);
    char *c1, *c2, *cont;
    int split = kda_eval_winogrande_split("Sarah was better than Maria so _ got  easy cases. ", "Sarah", "Maria", &c1,
                                          &c2, &cont);
    T_CHECK(split && streq(c1, "Sarah was better than Maria so Sarah") &&
                streq(c2, "Sarah was better than Maria so Maria") && streq(cont, "got  easy cases."),
            "winogrande: option fills the blank, the rest stripped is the continuation");
    free(c1);
    free(c2);
    free(cont);
    split = kda_eval_winogrande_split("no blank", "a", "b", &c1, &c2, &cont);
    T_CHECK(!split, "winogrande: no '_' is refused");
}

// ---- 3. readers ---------------------------------------------------------------------------------------------

static int same_items(const kda_eval_task *a, const kda_eval_task *b) {
    if (a->n_items != b->n_items) return 0;
    for (int i = 0; i < a->n_items; i++) {
        const kda_eval_item *x = &a->items[i], *y = &b->items[i];
        if (x->n != y->n || x->gold != y->gold) return 0;
        for (int c = 0; c < x->n; c++)
            if (strcmp(x->ctx[c], y->ctx[c]) || strcmp(x->cont[c], y->cont[c]) || x->choice_len[c] != y->choice_len[c])
                return 0;
    }
    return 1;
}

static void free_task(kda_eval_task *t) {
    for (int i = 0; i < t->n_items; i++) kda_eval_item_free(&t->items[i]);
    free(t->items);
    memset(t, 0, sizeof *t);
}

static void test_readers(void) {
    printf("task readers\n");
    kda_eval_task a = {0}, b = {0}, c = {0};
    // ARC: llm-foundry, Hugging Face and AI2 shapes of the same two questions
    kda_eval_read_multiple_choice(
        &a,
        write_file(
            "arc/f.jsonl",
            "{\"query\": \"Question: Which is a gas?\", \"choices\": [\"ice\", \"steam\", \"caf\\u00e9\"], \"gold\": 1}\n\n"
            "{\"query\": \"Question: 2+2?\", \"choices\": [\"4\", \"5\"], \"gold\": 0}\n"),
        1, 0);
    kda_eval_read_multiple_choice(
        &b,
        write_file(
            "arc/hf.jsonl",
            "{\"question\": \"Which is a gas?\", \"choices\": {\"text\": [\"ice\", \"steam\", \"caf\\u00e9\"], \"label\": [\"A\", \"B\", \"C\"]}, \"answerKey\": \"B\"}\n"
            "{\"question\": \"2+2?\", \"choices\": {\"text\": [\"4\", \"5\"], \"label\": [\"1\", \"2\"]}, \"answerKey\": \"1\"}\n"),
        1, 0);
    kda_eval_read_multiple_choice(
        &c,
        write_file(
            "arc/ai2.jsonl",
            "{\"question\": {\"stem\": \"Which is a gas?\", \"choices\": [{\"text\": \"ice\", \"label\": \"A\"}, {\"text\": \"steam\", \"label\": \"B\"}, {\"text\": \"caf\\u00e9\", \"label\": \"C\"}]}, \"answerKey\": \"B\"}\n"
            "{\"question\": {\"stem\": \"2+2?\", \"choices\": [{\"text\": \"4\", \"label\": \"1\"}, {\"text\": \"5\", \"label\": \"2\"}]}, \"answerKey\": \"1\"}\n"),
        1, 0);
    const kda_eval_item *it = &a.items[0];
    T_CHECK(a.n_items == 2 && a.n_docs == 2 && it->n == 3 && it->gold == 1 &&
                streq(it->ctx[1], "Question: Which is a gas?\nAnswer:") && streq(it->cont[2], " caf\xc3\xa9") &&
                it->choice_len[2] == 4,
            "arc (llm-foundry): prompt, continuation ' ' + choice, choice length in characters");
    T_CHECK(same_items(&a, &b) && same_items(&a, &c), "arc: the Hugging Face and AI2 shapes give the same items");
    free_task(&b);
    kda_eval_read_multiple_choice(
        &b,
        write_file("arc/lim.jsonl",
                   "{\"query\": \"Question: A?\", \"choices\": [\"x\", \"y\"], \"gold\": 0}\n"
                   "{\"query\": \"Question: B?\", \"choices\": [\"x\", \"y\"], \"gold\": 5}\n"),
        1, 1);
    T_CHECK(b.n_items == 1 && b.n_docs == 2,
            "--limit 1: one item read, both documents counted (a bad later row unread)");
    free_task(&a);
    free_task(&b);
    free_task(&c);
    // OpenBookQA: the bare stem
    kda_eval_read_multiple_choice(
        &a,
        write_file(
            "obqa/hf.jsonl",
            "{\"question_stem\": \"Predators eat\", \"choices\": {\"text\": [\"lions\", \"bunnies\"], \"label\": [\"A\", \"B\"]}, \"answerKey\": \" B\"}\n"),
        0, 0);
    T_CHECK(a.n_items == 1 && streq(a.items[0].ctx[0], "Predators eat") && a.items[0].gold == 1,
            "openbookqa: question_stem as it is, answerKey lstripped");
    free_task(&a);
    // PIQA: labels file, or a label field
    kda_eval_read_piqa(&a,
                       write_file("piqa/valid.jsonl",
                                  "{\"goal\": \"Open a jar\", \"sol1\": \"twist \", \"sol2\": \"push\"}\n"
                                  "{\"goal\": \"Dry hair\", \"sol1\": \"towel\", \"sol2\": \"water\"}\n"),
                       write_file("piqa/labels.lst", "1\n0\n"), 0);
    kda_eval_read_piqa(&b,
                       write_file("piqa/hf.jsonl",
                                  "{\"goal\": \"Open a jar\", \"sol1\": \"twist \", \"sol2\": \"push\", \"label\": 1}\n"
                                  "{\"goal\": \"Dry hair\", \"sol1\": \"towel\", \"sol2\": \"water\", \"label\": 0}\n"),
                       NULL, 0);
    T_CHECK(a.n_items == 2 && a.items[0].gold == 1 && streq(a.items[0].ctx[0], "Question: Open a jar\nAnswer:") &&
                streq(a.items[0].cont[0], " twist ") && same_items(&a, &b),
            "piqa: labels file and label field agree; solutions kept as written");
    free_task(&a);
    free_task(&b);
    // Winogrande: llm-foundry and the release
    kda_eval_read_winogrande(
        &a,
        write_file(
            "wino/f.jsonl",
            "{\"context_options\": [\"Sarah was better than Maria so Sarah\", \"Sarah was better than Maria so Maria\"], "
            "\"continuation\": \"got the easy cases.\", \"gold\": 1}\n"),
        0);
    kda_eval_read_winogrande(
        &b,
        write_file(
            "wino/dev.jsonl",
            "{\"sentence\": \"Sarah was better than Maria so _ got the easy cases.\", \"option1\": \"Sarah\", \"option2\": \"Maria\", \"answer\": \"2\"}\n"),
        0);
    T_CHECK(a.n_items == 1 && a.items[0].gold == 1 && streq(a.items[0].cont[0], " got the easy cases.") &&
                streq(a.items[0].ctx[1], "Sarah was better than Maria so Maria") && same_items(&a, &b),
            "winogrande: partial scoring, both file forms agree");
    free_task(&a);
    free_task(&b);
    // HellaSwag: the release jsonl and the text form of the same example
    kda_eval_read_hellaswag(
        &a,
        write_file(
            "hs/val.jsonl",
            "{\"activity_label\": \"Roof shingle removal\", \"ctx_a\": \"A man is sitting on a roof.\", \"ctx_b\": \"he\", "
            "\"endings\": [\"is using wrap.\", \"is ripping  tiles [step] off.\", \"holds a cube.\", \"starts pulling.\"], \"label\": \"3\"}\n"),
        0);
    kda_eval_read_hellaswag(
        &b,
        write_file(
            "hs/val.txt",
            "Roof shingle removal: A man is sitting on a roof. he\n3\nis using wrap.\nis ripping  tiles [step] off.\nholds a cube.\nstarts pulling.\n"),
        0);
    it = &a.items[0];
    T_CHECK(a.n_items == 1 && it->gold == 3 &&
                streq(it->ctx[0], "Roof shingle removal: A man is sitting on a roof. He") &&
                streq(it->cont[1], " is ripping tiles off.") && it->choice_len[1] == 21 && same_items(&a, &b),
            "hellaswag: preprocessed query and endings; jsonl and text forms agree here");
    free_task(&a);
    free_task(&b);
    // MMLU: quoted fields with commas, doubled quotes and a newline; k-shot prefix from dev
    const char *test = write_file("mmlu/test.csv", "\"Is \"\"x\"\", y\nok?\",0,1,\"2,3\",4,C\nPlain q,a,b,c,d,A\n");
    const char *dev = write_file("mmlu/dev.csv", "D1,a,b,c,d,B\nD2,e,f,g,h,D\n");
    kda_eval_read_mmlu(&a, "abstract_algebra", test, dev, 0, 0);
    kda_eval_read_mmlu(&b, "abstract_algebra", test, dev, 2, 1);
    const char *want0 = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                        "Is \"x\", y\nok?\nA. 0\nB. 1\nC. 2,3\nD. 4\nAnswer:";
    const char *want2 = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                        "D1\nA. a\nB. b\nC. c\nD. d\nAnswer: B\n\nD2\nA. e\nB. f\nC. g\nD. h\nAnswer: D\n\n"
                        "Is \"x\", y\nok?\nA. 0\nB. 1\nC. 2,3\nD. 4\nAnswer:";
    T_CHECK(a.n_items == 2 && a.items[0].gold == 2 && streq(a.items[0].ctx[0], want0) &&
                streq(a.items[0].cont[3], " D") && a.items[1].gold == 0,
            "mmlu 0-shot: description + question block, letters as choices, CSV quoting");
    T_CHECK(b.n_items == 1 && b.n_docs == 2 && streq(b.items[0].ctx[0], want2),
            "mmlu 2-shot: first dev rows with answers, \\n\\n between");
    free_task(&a);
    free_task(&b);
    // RACE: problems as a Python literal, as a JSON list, and the release's form (directory)
    kda_eval_read_race(
        &a,
        write_file(
            "race/a.jsonl",
            "{\"article\": \"Tom's \\\"day\\\".\", \"problems\": \"[{'answer': 'A', 'options': ['park', 'zoo', 'home', 'school'], "
            "'question': 'Tom went to the  _  .'}, {'answer': 'C', 'options': [\\\"Tom's\\\", 'b\\\\'s', 'caf\\\\xe9', 'd'], "
            "'question': 'Whose?'}]\"}\n"),
        0);
    kda_eval_read_race(
        &b,
        write_file(
            "race/b.jsonl",
            "{\"article\": \"Tom's \\\"day\\\".\", \"problems\": [{\"answer\": \"A\", \"options\": [\"park\", \"zoo\", \"home\", \"school\"], "
            "\"question\": \"Tom went to the  _  .\"}, {\"answer\": \"C\", \"options\": [\"Tom's\", \"b's\", \"caf\\u00e9\", \"d\"], \"question\": \"Whose?\"}]}\n"),
        0);
    write_file(
        "race/high/high10.txt",
        "{\"article\": \"Second.\", \"questions\": [\"Q?\"], \"options\": [[\"a\", \"b\", \"c\", \"d\"]], \"answers\": [\"D\"]}");
    write_file(
        "race/high/high2.txt",
        "{\"article\": \"Tom's \\\"day\\\".\", \"questions\": [\"Tom went to the  _  .\", \"Whose?\"], \"options\": [[\"park\", \"zoo\", \"home\", \"school\"], "
        "[\"Tom's\", \"b's\", \"caf\\u00e9\", \"d\"]], \"answers\": [\"A\", \"C\"]}");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/race/high", tmpdir);
    kda_eval_read_race(&c, dir, 0);
    it = &a.items[0];
    T_CHECK(a.n_items == 1 && it->gold == 2 &&
                streq(it->ctx[0], "Article: Tom's \"day\".\n\nTom went to the park\nWhose?") &&
                streq(it->cont[2], " caf\xc3\xa9") && streq(it->cont[1], " b's"),
            "race: Python-literal problems parsed (quotes, \\' and \\x escapes), last question scored");
    T_CHECK(same_items(&a, &b) && c.n_items == 2 && c.items[0].gold == 2 && streq(c.items[0].ctx[0], it->ctx[0]) &&
                c.items[1].gold == 3,
            "race: JSON list and release files (natural order: high2 before high10) agree");
    free_task(&a);
    free_task(&b);
    free_task(&c);
}

// ---- 4. context / continuation split ------------------------------------------------------------------------

static int ids_eq(const kda_tok_ids *a, const int32_t *v, size_t n) {
    if (a->n != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (a->v[i] != v[i]) return 0;
    return 1;
}

static void test_encode_pair(void) {
    printf("context / continuation tokenization\n");
    kda_tok_ids ci = {0}, co = {0};
    kda_eval_codec *bytes = kda_eval_codec_new(NULL, 256, -1);
    kda_eval_encode_pair(bytes, "ab \n", "c", &ci, &co);
    int32_t want_c[] = {256, 'a', 'b'}, want_o[] = {' ', '\n', 'c'};
    T_CHECK(ids_eq(&ci, want_c, 3) && ids_eq(&co, want_o, 3),
            "bytes: BOS, trailing whitespace moves to the continuation");
    kda_eval_encode_pair(bytes, "", "hi", &ci, &co);
    int32_t want_e[] = {256}, want_hi[] = {'h', 'i'};
    T_CHECK(ids_eq(&ci, want_e, 1) && ids_eq(&co, want_hi, 2), "empty context: [BOS] conditions the continuation");
    kda_eval_codec_free(bytes);
    bytes = kda_eval_codec_new(NULL, -1, -1);
    kda_eval_encode_pair(bytes, "ab", " c", &ci, &co);
    int32_t want_nb[] = {'a', 'b'}, want_sc[] = {' ', 'c'};
    T_CHECK(ids_eq(&ci, want_nb, 2) && ids_eq(&co, want_sc, 2), "bytes without BOS");
    kda_eval_codec_free(bytes);

    T_CHECK(access(KDA_TOK_DEFAULT_PATH, R_OK) == 0, "the Llama 3 tokenizer is at %s (tracked in git)", KDA_TOK_DEFAULT_PATH);
    if (access(KDA_TOK_DEFAULT_PATH, R_OK) == 0) {
        kda_tokenizer *tok = kda_tok_load_hf(KDA_TOK_DEFAULT_PATH);
        kda_eval_codec *c = kda_eval_codec_new(tok, -1, -1);
        // ids from Hugging Face's tokenizer: encode(ctx) and encode(ctx + cont)[len(encode(ctx)):]
        kda_eval_encode_pair(c, "The answer is 12", "34", &ci, &co);
        int32_t c1[] = {128000, 791, 4320, 374, 220, 717}, o1[] = {19};
        T_CHECK(ids_eq(&ci, c1, 6) && ids_eq(&co, o1, 1),
                "llama3: the continuation is the tail of the whole encoding ('1234' -> 123|4: cont [4])");
        kda_eval_encode_pair(c, "Question: Who?\nAnswer:", " Paris", &ci, &co);
        int32_t c2[] = {128000, 14924, 25, 10699, 5380, 16533, 25}, o2[] = {12366};
        T_CHECK(ids_eq(&ci, c2, 7) && ids_eq(&co, o2, 1), "llama3: BOS + prompt, ' Paris' one token");
        kda_eval_encode_pair(c, "<|begin_of_text|>Hi", " there", &ci, &co);
        int32_t c3[] = {128000, 13347}, o3[] = {1070};
        T_CHECK(ids_eq(&ci, c3, 2) && ids_eq(&co, o3, 1),
                "llama3: text starting with BOS gets no second BOS (lm-eval)");
        kda_eval_encode_pair(c, "Hello ", "world", &ci, &co);
        int32_t c4[] = {128000, 9906}, o4[] = {1917};
        T_CHECK(ids_eq(&ci, c4, 2) && ids_eq(&co, o4, 1), "llama3: 'Hello ' + 'world' -> 'Hello' + ' world'");
        kda_eval_codec_free(c);
        kda_tok_free(tok);
    }
    kda_tok_ids_free(&ci);
    kda_tok_ids_free(&co);
}

// ---- 5. scoring with a fake language model ------------------------------------------------------------------

#define FV 300 // vocabulary of the fake model (bytes, BOS 256)

typedef struct {
    long calls, rows, max_rows_seen, rows_asked;
    int bad_pad;
} fake_lm;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// logits after the prefix whose running hash is h: a fixed pseudo-random function of the prefix
static void fake_row(uint64_t h, float *out) {
    for (int v = 0; v < FV; v++)
        out[v] = (float)((double)(mix(h * 31 + (uint64_t)v) >> 11) / 9007199254740992.0 * 6.0 - 3.0);
}

static uint64_t hash_step(uint64_t h, int32_t id) { return mix(h ^ (uint64_t)(id + 1)); }

static void fake_logits(void *self, const int32_t *ids, int B, int T, float *out) {
    fake_lm *f = self;
    f->calls++;
    f->rows += B;
    if (B > f->max_rows_seen) f->max_rows_seen = B;
    for (int b = 0; b < B; b++) {
        uint64_t h = 7;
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * T + t];
            if (id < 0 || id >= FV) f->bad_pad = 1;
            h = hash_step(h, id);
            fake_row(h, out + ((size_t)b * T + t) * FV);
        }
    }
}

// the same model asked for chosen rows only (what kda_model_logits_rows offers)
static void fake_logits_rows(void *self, const int32_t *ids, int B, int T, const int32_t *rows, int n_rows,
                             float *out) {
    fake_lm *f = self;
    float *all = kda_malloc(sizeof(float) * (size_t)B * T * FV);
    fake_logits(self, ids, B, T, all);
    for (int i = 0; i < n_rows; i++) {
        if (rows[i] < 0 || rows[i] >= B * T)
            f->bad_pad = 1;
        else
            memcpy(out + (size_t)i * FV, all + (size_t)rows[i] * FV, sizeof(float) * FV);
    }
    f->rows_asked += n_rows;
    free(all);
}

// log p(full[k] | full[:k]) summed over the last n tokens, full cut to its last max_len+1 tokens
static double direct_ll(const int32_t *full, int len, int n, int max_len, int *greedy) {
    int start = len > max_len + 1 ? len - (max_len + 1) : 0;
    uint64_t h = 7;
    double ll = 0;
    float row[FV];
    *greedy = 1;
    for (int k = start; k < len - 1; k++) {
        h = hash_step(h, full[k]);
        if (k + 1 < len - n) continue;
        fake_row(h, row);
        double m = row[0], z = 0;
        int am = 0;
        for (int v = 1; v < FV; v++)
            if (row[v] > row[am]) am = v;
        m = row[am];
        for (int v = 0; v < FV; v++) z += exp(row[v] - m);
        ll += row[full[k + 1]] - (m + log(z));
        *greedy &= am == full[k + 1];
    }
    return ll;
}

static void make_items(kda_eval_task *t) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "fake");
    const char *ch[4] = {"A", "B", "C", "D"};
    const char *long_ch[3] = {"a walk in the park", "x", "something quite different and long"};
    for (int i = 0; i < 6; i++) { // MMLU-like: 4 one-token answers share one input
        char ctx[64];
        snprintf(ctx, sizeof ctx, "Q%d: what is it?\nAnswer:", i);
        t->items = kda_realloc(t->items, sizeof(kda_eval_item) * (size_t)(t->n_items + 1));
        kda_eval_item_choices(&t->items[t->n_items++], ctx, ch, 4, i % 4);
    }
    const char *ctxs[2] = {"The cat sat on the mat so the cat", "The cat sat on the mat so the mat"};
    t->items = kda_realloc(t->items, sizeof(kda_eval_item) * (size_t)(t->n_items + 3));
    kda_eval_item_contexts(&t->items[t->n_items++], ctxs, 2, "was warm.", 0);
    kda_eval_item_choices(&t->items[t->n_items++], "Trailing spaces  ", long_ch, 3, 2);
    kda_eval_item_choices(&t->items[t->n_items++], "", long_ch, 3, 1); // empty context: BOS
    t->n_docs = t->n_items;
}

// Σ over distinct model inputs of the longest continuation scored on it: the head rows a
// scorer needs at the least (computed here from the requests, independently of the plan)
static long rows_needed(kda_eval_task *t, kda_eval_codec *codec, int max_len) {
    enum { MAXI = 64 };
    int32_t in[MAXI][512];
    int len[MAXI], cont[MAXI], n = 0;
    kda_tok_ids ci = {0}, co = {0};
    for (int i = 0; i < t->n_items; i++)
        for (int c = 0; c < t->items[i].n; c++) {
            kda_eval_encode_pair(codec, t->items[i].ctx[c], t->items[i].cont[c], &ci, &co);
            int32_t full[512];
            int fl = 0;
            for (size_t j = 0; j < ci.n; j++) full[fl++] = ci.v[j];
            for (size_t j = 0; j < co.n; j++) full[fl++] = co.v[j];
            int start = fl > max_len + 1 ? fl - (max_len + 1) : 0, l = fl - start - 1, k = 0;
            while (k < n && !(len[k] == l && !memcmp(in[k], full + start, sizeof(int32_t) * (size_t)l))) k++;
            if (k == n) {
                KDA_CHECK(n < MAXI, "too many inputs for the test");
                memcpy(in[n], full + start, sizeof(int32_t) * (size_t)l);
                len[n] = l, cont[n] = 0, n++;
            }
            if ((int)co.n > cont[k]) cont[k] = (int)co.n;
        }
    long sum = 0;
    for (int k = 0; k < n; k++) sum += cont[k];
    kda_tok_ids_free(&ci);
    kda_tok_ids_free(&co);
    return sum;
}

static void test_scoring(void) {
    printf("batched scoring vs a direct computation (fake model)\n");
    kda_eval_codec *codec = kda_eval_codec_new(NULL, 256, -1);
    struct {
        int rows;
        size_t logits;
        int max_len;
    } cfgs[] = {{1, (size_t)1 << 30, 2048},
                {3, (size_t)1 << 30, 2048},
                {64, (size_t)1 << 30, 2048},
                {64, 1, 2048},
                {5, (size_t)1 << 30, 40}};
    kda_tok_ids ci = {0}, co = {0};
    for (size_t k = 0; k < 2 * sizeof cfgs / sizeof cfgs[0]; k++) {
        int with_rows = k >= sizeof cfgs / sizeof cfgs[0]; // second pass: the head on chosen rows only
        size_t kc = k % (sizeof cfgs / sizeof cfgs[0]);
        kda_eval_task t;
        make_items(&t);
        kda_eval_plan *p = kda_eval_plan_new(&t, 1, codec, cfgs[kc].max_len);
        fake_lm f = {0};
        kda_eval_lm lm = {
            .self = &f, .vocab = FV, .logits = fake_logits, .logits_rows = with_rows ? fake_logits_rows : NULL};
        kda_eval_plan_run(p, &lm, cfgs[kc].rows, cfgs[kc].logits, NULL);
        double worst = 0;
        int greedy_ok = 1;
        long n_req = 0;
        for (int i = 0; i < t.n_items; i++) {
            kda_eval_item *it = &t.items[i];
            for (int c = 0; c < it->n; c++, n_req++) {
                kda_eval_encode_pair(codec, it->ctx[c], it->cont[c], &ci, &co);
                int32_t full[512];
                int len = 0;
                for (size_t j = 0; j < ci.n; j++) full[len++] = ci.v[j];
                for (size_t j = 0; j < co.n; j++) full[len++] = co.v[j];
                int g;
                double want = direct_ll(full, len, (int)co.n, cfgs[kc].max_len, &g);
                double e = fabs(it->ll[c] - want);
                if (e > worst) worst = e;
                greedy_ok &= it->greedy[c] == g;
            }
        }
        T_CHECK(
            worst < 1e-9 && greedy_ok && !f.bad_pad && f.max_rows_seen <= cfgs[kc].rows,
            "%s rows %3d, logits budget %-10zu max_length %4d: %ld requests, %ld inputs, %ld forwards; worst |dll| %.1e",
            with_rows ? "chosen rows," : "all rows,   ", cfgs[kc].rows, cfgs[kc].logits, cfgs[kc].max_len, n_req,
            kda_eval_plan_inputs(p), f.calls, worst);
        if (with_rows) { // exactly the continuation positions were asked for: one per token of the longest one per input
            long want = rows_needed(&t, codec, cfgs[kc].max_len);
            T_CHECK(f.rows_asked == want,
                    "chosen rows: %ld head rows asked = the %ld continuation positions of the inputs", f.rows_asked,
                    want);
            if (kc == 3)
                T_CHECK(f.max_rows_seen == 1, "chosen rows: a logits budget below one input still runs one input");
        }
        if (with_rows) {
            kda_eval_plan_free(p);
            free_task(&t);
            continue;
        }
        if (kc == 0)
            T_CHECK(kda_eval_plan_inputs(p) == n_req - 6 * 3 && f.rows == kda_eval_plan_inputs(p),
                    "the 4 one-letter answers of a question share one input (%ld inputs for %ld requests)",
                    kda_eval_plan_inputs(p), n_req);
        if (kc == 3) T_CHECK(f.max_rows_seen == 1, "a logits budget below one row still runs one row per forward");
        if (kc == 4)
            T_CHECK(kda_eval_plan_truncated(p) > 0 && kda_eval_plan_max_len(p) == 40,
                    "max_length 40: %ld requests cut on the left, inputs <= 40 tokens", kda_eval_plan_truncated(p));
        kda_eval_plan_free(p);
        free_task(&t);
    }
    kda_tok_ids_free(&ci);
    kda_tok_ids_free(&co);
    kda_eval_codec_free(codec);
}

// ---- 5b. a real (small, random) model: the head on chosen rows only ----------------------------------------

static void model_logits_cb(void *self, const int32_t *ids, int B, int T, float *out) {
    kda_model_logits(self, ids, B, T, out);
}
static void model_rows_cb(void *self, const int32_t *ids, int B, int T, const int32_t *rows, int n, float *out) {
    kda_model_logits_rows(self, ids, B, T, rows, n, out);
}

static void test_model_rows(void) {
    printf("a small random model: logits of chosen rows (kda_model_logits_rows)\n");
    kda_config c;
    kda_config_defaults(&c);
    c.hidden_size = 32, c.num_hidden_layers = 2, c.num_heads = 2, c.head_dim = 8, c.expand_v = 2;
    c.intermediate_size = 64, c.vocab_size = FV, c.kda_chunk_size = 16, c.seq_length = 64;
    c.micro_batch_size = 1, c.global_batch_size = 1;
    kda_config_finalize(&c);
    enum { B = 3, T = 37 };
    kda_model *m = kda_model_create(&c, kda_ops_cpu(), 4, 64);
    unsigned long seed = t_seed();
    kda_model_init(m, seed);
    kda_rng r;
    kda_rng_seed(&r, seed);
    for (size_t i = 0; i < m->n_floats; i++) m->master[i] += (float)(0.1 * kda_rng_normal(&r)); // off init
    int32_t ids[B * T], rows[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int32_t)kda_rng_below(&r, FV);
    float *full = kda_malloc(sizeof(float) * B * T * FV), *got = kda_malloc(sizeof(float) * B * T * FV);
    kda_model_logits(m, ids, B, T, full);
    // every row in order: the head GEMMs see the same rows in the same groups -> bitwise equal
    for (int i = 0; i < B * T; i++) rows[i] = i;
    for (int i = 0; i < B * T * FV; i++) got[i] = NAN;
    kda_model_logits_rows(m, ids, B, T, rows, B * T, got);
    T_CHECK(!memcmp(got, full, sizeof(float) * B * T * FV), "all %d rows in order: bitwise kda_model_logits", B * T);
    // a subset (repeats, any order): OpenBLAS rounds an element differently with the number of rows
    // in the GEMM call, so each row equals the full head's to fp32 rounding (a wrong row: ~1)
    for (int i = 0; i < 40; i++) rows[i] = i < 3 ? 5 : (int32_t)kda_rng_below(&r, B * T);
    rows[39] = B * T - 1;
    for (int i = 0; i < 40 * FV; i++) got[i] = NAN;
    kda_model_logits_rows(m, ids, B, T, rows, 40, got);
    double worst = 0;
    for (int i = 0; i < 40; i++) {
        double e = kda_rel_err_f32f32(got + (size_t)i * FV, full + (size_t)rows[i] * FV, FV);
        worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
    }
    T_REL("40 chosen rows (repeats, any order), worst row", worst, 1e-6);
    free(full), free(got);

    // eval on this model: all rows vs chosen rows give the same log-likelihoods (same batches)
    kda_eval_codec *codec = kda_eval_codec_new(NULL, 256, -1);
    kda_eval_task ta, tb;
    make_items(&ta);
    make_items(&tb);
    kda_eval_plan *pa = kda_eval_plan_new(&ta, 1, codec, 64), *pb = kda_eval_plan_new(&tb, 1, codec, 64);
    kda_eval_lm la = {.self = m, .vocab = FV, .logits = model_logits_cb};
    kda_eval_lm lb = {.self = m, .vocab = FV, .logits = model_logits_cb, .logits_rows = model_rows_cb};
    kda_eval_plan_run(pa, &la, 4, (size_t)1 << 30, NULL);
    kda_eval_plan_run(pb, &lb, 4, (size_t)1 << 30, NULL);
    int n = 0, greedy_same = 1;
    double worst_ll = 0;
    for (int i = 0; i < ta.n_items; i++)
        for (int k = 0; k < ta.items[i].n; k++, n++) {
            double a = ta.items[i].ll[k], b = tb.items[i].ll[k], e = fabs(a - b) / fabs(a);
            worst_ll = !isfinite(a) || !isfinite(b) || e > worst_ll ? (isfinite(e) ? e : INFINITY) : worst_ll;
            greedy_same &= ta.items[i].greedy[k] == tb.items[i].greedy[k];
        }
    T_REL("eval: per-request ll, head on continuation rows vs every row", worst_ll, 1e-6);
    T_CHECK(greedy_same, "eval: the greedy flags of all %d requests agree", n);
    kda_eval_plan_free(pa), kda_eval_plan_free(pb);
    free_task(&ta), free_task(&tb);
    kda_eval_codec_free(codec);
    kda_model_free(m);
}

// ---- 6. metrics ------------------------------------------------------------------------------------------------

static void set_item(kda_eval_item *it, int n, const double *ll, const double *len, int gold) {
    const char *dummy[4] = {"a", "b", "c", "d"};
    kda_eval_item_choices(it, "x", dummy, n, gold);
    for (int c = 0; c < n; c++) {
        it->ll[c] = ll[c];
        it->choice_len[c] = len[c];
    }
}

static void test_metrics(void) {
    printf("metrics and stderr\n");
    double t1[3] = {-1, -1, -2};
    T_CHECK(kda_eval_argmax(t1, 3) == 0, "argmax: ties go to the first");
    double t2[3] = {-1, NAN, 0};
    T_CHECK(kda_eval_argmax(t2, 3) == 1, "argmax: a NaN wins (numpy)");
    kda_eval_task t = {0};
    t.has_acc_norm = 1;
    t.items = kda_calloc(4, sizeof(kda_eval_item));
    t.n_items = 4;
    // acc picks the short choice (-2 > -4); acc_norm the long one (-4/4 = -1 > -2/1)
    double ll0[2] = {-2, -4}, len0[2] = {1, 4};
    set_item(&t.items[0], 2, ll0, len0, 1);
    double ll1[2] = {-1, -5}, len1[2] = {3, 3};
    set_item(&t.items[1], 2, ll1, len1, 0);
    double ll2[3] = {-3, -3, -9}, len2[3] = {2, 1, 1};
    set_item(&t.items[2], 3, ll2, len2, 0);
    double ll3[2] = {-7, -6}, len3[2] = {4, 1};
    set_item(&t.items[3], 2, ll3, len3, 1);
    kda_eval_metrics m;
    kda_eval_task_metrics(&t, &m);
    // acc = [0, 1, 1, 1] -> 0.75, stderr sqrt(0.25/3)/2; acc_norm = [1, 1, 1, 0] (item 3: -7/4 > -6/1)
    double se = sqrt((3 * 0.0625 + 0.5625) / 3.0) / 2.0;
    T_CHECK(m.n == 4 && m.acc == 0.75 && fabs(m.acc_stderr - se) < 1e-15 && m.acc_norm == 0.75 &&
                fabs(m.acc_norm_stderr - se) < 1e-15,
            "acc 0.75 (the tie goes to choice 0), acc_norm 0.75, stderr %.6f = sample sd / sqrt(n)", m.acc_stderr);
    free_task(&t);
    double one[1] = {1};
    T_CHECK(isnan(kda_eval_mean_stderr(one, 1)), "stderr of one value is N/A");
    double ses[2] = {0.1, 0.2};
    int sizes[2] = {10, 30};
    double pooled = sqrt((9 * 0.01 * 10 + 29 * 0.04 * 30) / 38.0 / 40.0);
    T_CHECK(fabs(kda_eval_pooled_stderr(ses, sizes, 2) - pooled) < 1e-15, "pooled stderr (lm-eval's formula) %.6f",
            pooled);
    int ones[2] = {1, 1};
    T_CHECK(isnan(kda_eval_pooled_stderr(ses, ones, 2)), "pooled stderr of one-document tasks is N/A");
}

// ---- 7. results ---------------------------------------------------------------------------------------------------

static void test_report(void) {
    printf("results JSON and table\n");
    kda_eval_task t[3];
    memset(t, 0, sizeof t);
    const char *names[3] = {"mmlu_anatomy", "mmlu_abstract_algebra", "arc_easy"};
    const char *groups[3] = {"mmlu_stem", "mmlu_stem", ""};
    for (int k = 0; k < 3; k++) {
        snprintf(t[k].name, sizeof t[k].name, "%s", names[k]);
        snprintf(t[k].alias, sizeof t[k].alias, "%s", k < 2 ? names[k] + 5 : names[k]);
        snprintf(t[k].group, sizeof t[k].group, "%s", groups[k]);
        t[k].version = 1.0;
        t[k].has_acc_norm = k == 2;
        int n = k == 0 ? 1 : 3;
        t[k].items = kda_calloc((size_t)n, sizeof(kda_eval_item));
        t[k].n_items = n;
        t[k].n_docs = 10;
        for (int i = 0; i < n; i++) {
            double ll[2] = {-1, -2 + i}, len[2] = {1, 1};
            set_item(&t[k].items[i], 2, ll, len, 0);
        }
    }
    char path[600];
    snprintf(path, sizeof path, "%s/results.json", tmpdir);
    kda_eval_loss vl = {
        .loss = 2.0, .perplexity = exp(2.0), .tokens = 10, .samples = 2, .iteration = 20, .eval_index = 2};
    kda_eval_run_info info = {.model = "ck", .device = "cpu", .batch_size = 8, .limit = 3, .val_loss = &vl};
    kda_eval_write_json(path, t, 3, &info);
    size_t len;
    FILE *f = fopen(path, "rb");
    char buf[1 << 16];
    len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[len] = 0;
    // acc: anatomy [1] (n=1: stderr N/A), abstract_algebra [1, 0?...]: ll {-1,-2},{-1,-1},{-1,0} -> [1, 1, 0]
    T_CHECK(strstr(buf, "\"mmlu_anatomy\": {\n      \"name\": \"mmlu_anatomy\",\n      \"alias\": \"anatomy\"") &&
                strstr(buf, "\"acc_stderr,none\": \"N/A\"") && strstr(buf, "\"groups\"") &&
                strstr(buf, "\"mmlu_stem\": [\n      \"mmlu_abstract_algebra\",\n      \"mmlu_anatomy\"\n    ]") &&
                strstr(buf, "\"loss,none\": 2.0") && strstr(buf, "\"n-samples\"") && strstr(buf, "\"original\": 10"),
            "JSON: results with alias, N/A stderr for n=1, groups, group_subtasks (sorted), val_loss, n-samples");
    // group acc = size-weighted: (1*1 + 2/3*3) / 4 = 0.75
    T_CHECK(
        strstr(
            buf,
            "\"mmlu\": {\n      \"name\": \"mmlu\",\n      \"alias\": \"mmlu\",\n      \"sample_len\": 4,\n      \"acc,none\": 0.75"),
        "mmlu group acc is the size-weighted mean (0.75 over 4 documents)");
    snprintf(path, sizeof path, "%s/table.txt", tmpdir);
    f = fopen(path, "w+b");
    kda_eval_print_table(f, t, 3, &info);
    rewind(f);
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    T_CHECK(strstr(buf,
                   "|       Tasks        |Version|Filter|n-shot|  Metric  |   |Value |   |Stderr|\n"
                   "|--------------------|------:|------|-----:|----------|---|-----:|---|-----:|\n") != NULL,
            "table header (centred as Python's str.center) and alignment row");
    T_CHECK(
        strstr(buf, "|mmlu                |      2|none  |      |acc       |\xe2\x86\x91  |0.7500|\xc2\xb1  |") &&
            strstr(buf,
                   "|  - anatomy         |      1|none  |     0|acc       |\xe2\x86\x91  |1.0000|\xc2\xb1  |   N/A|") &&
            strstr(buf, "|val_loss            |    N/A|none  |      |loss      |\xe2\x86\x93  |2.0000|   |      |") &&
            strstr(buf, "| Groups|Version|"),
        "table rows: group tree first, N/A stderr, val_loss lower-is-better, a Groups table");
    printf("%s", buf);
    for (int k = 0; k < 3; k++) free_task(&t[k]);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kda_test_eval_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_py();
    test_prompts();
    test_readers();
    test_encode_pair();
    test_scoring();
    test_model_rows();
    test_metrics();
    test_report();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return t_done("test_eval");
}
