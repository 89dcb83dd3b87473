// eval_read_mmlu.c — MMLU: the 57 subjects with lm-eval's categories, the original CSV files
// (no header: question, A, B, C, D, answer letter; RFC 4180 quoting) and the k-shot prompt.
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// lm-eval's mmlu/default/*.yaml: each subject's tag mmlu_<category>_tasks
static const struct {
    const char *subject, *category;
} subjects[] = {
    {"abstract_algebra", "stem"},
    {"anatomy", "stem"},
    {"astronomy", "stem"},
    {"business_ethics", "other"},
    {"clinical_knowledge", "other"},
    {"college_biology", "stem"},
    {"college_chemistry", "stem"},
    {"college_computer_science", "stem"},
    {"college_mathematics", "stem"},
    {"college_medicine", "other"},
    {"college_physics", "stem"},
    {"computer_security", "stem"},
    {"conceptual_physics", "stem"},
    {"econometrics", "social_sciences"},
    {"electrical_engineering", "stem"},
    {"elementary_mathematics", "stem"},
    {"formal_logic", "humanities"},
    {"global_facts", "other"},
    {"high_school_biology", "stem"},
    {"high_school_chemistry", "stem"},
    {"high_school_computer_science", "stem"},
    {"high_school_european_history", "humanities"},
    {"high_school_geography", "social_sciences"},
    {"high_school_government_and_politics", "social_sciences"},
    {"high_school_macroeconomics", "social_sciences"},
    {"high_school_mathematics", "stem"},
    {"high_school_microeconomics", "social_sciences"},
    {"high_school_physics", "stem"},
    {"high_school_psychology", "social_sciences"},
    {"high_school_statistics", "stem"},
    {"high_school_us_history", "humanities"},
    {"high_school_world_history", "humanities"},
    {"human_aging", "other"},
    {"human_sexuality", "social_sciences"},
    {"international_law", "humanities"},
    {"jurisprudence", "humanities"},
    {"logical_fallacies", "humanities"},
    {"machine_learning", "stem"},
    {"management", "other"},
    {"marketing", "other"},
    {"medical_genetics", "other"},
    {"miscellaneous", "other"},
    {"moral_disputes", "humanities"},
    {"moral_scenarios", "humanities"},
    {"nutrition", "other"},
    {"philosophy", "humanities"},
    {"prehistory", "humanities"},
    {"professional_accounting", "other"},
    {"professional_law", "humanities"},
    {"professional_medicine", "other"},
    {"professional_psychology", "social_sciences"},
    {"public_relations", "social_sciences"},
    {"security_studies", "social_sciences"},
    {"sociology", "social_sciences"},
    {"us_foreign_policy", "social_sciences"},
    {"virology", "other"},
    {"world_religions", "humanities"},
};
#define N_SUBJECTS (int)(sizeof(subjects) / sizeof(subjects[0]))

int kda_eval_mmlu_n_subjects(void) { return N_SUBJECTS; }
const char *kda_eval_mmlu_subject(int i) { return i >= 0 && i < N_SUBJECTS ? subjects[i].subject : NULL; }
const char *kda_eval_mmlu_category(const char *subject) {
    for (int i = 0; i < N_SUBJECTS; i++)
        if (!strcmp(subjects[i].subject, subject)) return subjects[i].category;
    return NULL;
}

// ---- CSV ------------------------------------------------------------------------------------------

typedef struct {
    char *f[6];
    size_t line; // where the record starts
} mmlu_row;

// One record from buf at *pos into r (6 fields); 0 at the end of the buffer.
static int csv_record(const char *path, const char *buf, size_t len, size_t *pos, size_t *line, mmlu_row *r) {
    while (*pos < len && (buf[*pos] == '\n' || buf[*pos] == '\r')) { // blank lines between records
        if (buf[*pos] == '\n') (*line)++;
        (*pos)++;
    }
    if (*pos >= len) return 0;
    r->line = *line;
    int nf = 0;
    kda_sb b = {0};
    for (;;) {
        int quoted = *pos < len && buf[*pos] == '"';
        if (quoted) {
            (*pos)++;
            for (;;) {
                if (*pos >= len) kda_die("%s:%zu: a quoted field is not closed", path, r->line);
                char c = buf[(*pos)++];
                if (c == '"') {
                    if (*pos < len && buf[*pos] == '"') {
                        kda_sb_addc(&b, '"');
                        (*pos)++;
                        continue;
                    }
                    break;
                }
                if (c == '\n') (*line)++;
                kda_sb_addc(&b, c);
            }
        }
        while (*pos < len && buf[*pos] != ',' && buf[*pos] != '\n' && buf[*pos] != '\r') {
            if (quoted) kda_die("%s:%zu: text after a closing quote", path, *line);
            kda_sb_addc(&b, buf[(*pos)++]);
        }
        if (nf == 6) kda_die("%s:%zu: more than 6 fields; MMLU rows are question,A,B,C,D,answer", path, r->line);
        r->f[nf++] = kda_sb_take(&b);
        if (*pos < len && buf[*pos] == ',') {
            (*pos)++;
            continue;
        }
        if (*pos < len && buf[*pos] == '\r') (*pos)++;
        if (*pos < len && buf[*pos] == '\n') {
            (*pos)++;
            (*line)++;
        }
        break;
    }
    if (nf != 6) kda_die("%s:%zu: %d fields; MMLU rows are question,A,B,C,D,answer", path, r->line, nf);
    return 1;
}

static int letter_index(const char *path, const mmlu_row *r) {
    const char *a = r->f[5];
    if (strlen(a) == 1 && a[0] >= 'A' && a[0] <= 'D') return a[0] - 'A';
    kda_die("%s:%zu: the answer must be a letter A-D, got '%s'", path, r->line, a);
}

static void row_free(mmlu_row *r) {
    for (int i = 0; i < 6; i++) free(r->f[i]);
}

void kda_eval_read_mmlu(kda_eval_task *t, const char *subject, const char *test_csv, const char *dev_csv, int k,
                        long limit) {
    static const char *const letters[4] = {"A", "B", "C", "D"};
    size_t len, pos = 0, line = 1;
    // few-shot prefix: the description, then the first k dev rows with their answers
    kda_sb pre = {0};
    char *desc = kda_eval_mmlu_description(subject);
    kda_sb_add(&pre, desc);
    free(desc);
    if (k > 0) {
        char *dev = kda_eval_read_file(dev_csv, &len);
        mmlu_row r;
        for (int i = 0; i < k; i++) {
            if (!csv_record(dev_csv, dev, len, &pos, &line, &r))
                kda_die("%s has %d rows; --num-fewshot %d needs %d", dev_csv, i, k, k);
            char *q = kda_eval_mmlu_question(r.f[0], (const char *const *)r.f + 1);
            kda_sb_add(&pre, q);
            kda_sb_add(&pre, " ");
            kda_sb_add(&pre, letters[letter_index(dev_csv, &r)]);
            kda_sb_add(&pre, "\n\n");
            free(q);
            row_free(&r);
        }
        free(dev);
    }
    char *buf = kda_eval_read_file(test_csv, &len);
    pos = 0;
    line = 1;
    t->n_docs = 0;
    mmlu_row r;
    while (csv_record(test_csv, buf, len, &pos, &line, &r)) {
        t->n_docs++;
        if (limit <= 0 || t->n_items < limit) {
            char *q = kda_eval_mmlu_question(r.f[0], (const char *const *)r.f + 1);
            kda_sb ctx = {0};
            kda_sb_add(&ctx, pre.v);
            kda_sb_add(&ctx, q);
            kda_eval_item_choices(kda_eval_task_push(t), ctx.v, letters, 4, letter_index(test_csv, &r));
            free(q);
            free(ctx.v);
        }
        row_free(&r);
    }
    free(buf);
    free(pre.v);
}
