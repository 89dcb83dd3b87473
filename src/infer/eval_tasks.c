// eval_tasks.c — the task names and where each task's files are looked for under --data-dir
// (the first name that exists wins; docs/eval.md has the table).
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

const char *const kda_eval_task_names[] = {"arc_easy",   "arc_challenge", "hellaswag",      "openbookqa", "piqa",
                                           "winogrande", "mmlu",          "mmlu_<subject>", "race",       NULL};

#define MAX_CANDIDATES 6

typedef struct {
    const char *name;
    double version;
    int has_acc_norm;
    const char *files[MAX_CANDIDATES]; // relative to <data-dir>/<name>/
} task_spec;

static const task_spec specs[] = {
    {"arc_easy", 1.0, 1, {"arc_easy.jsonl", "test.jsonl", "ARC-Easy-Test.jsonl", NULL}},
    {"arc_challenge", 1.0, 1, {"arc_challenge.jsonl", "test.jsonl", "ARC-Challenge-Test.jsonl", NULL}},
    {"hellaswag",
     1.0,
     1,
     {"hellaswag_val.jsonl", "validation.jsonl", "hellaswag_val_full.txt.bz2", "hellaswag_val_full.txt", NULL}},
    {"openbookqa", 1.0, 1, {"openbook_qa.jsonl", "test.jsonl", NULL}},
    {"piqa", 1.0, 1, {"valid.jsonl", "validation.jsonl", NULL}},
    {"winogrande", 1.0, 0, {"winogrande.jsonl", "dev.jsonl", "validation.jsonl", NULL}},
    {"race", 3.0, 0, {"test.jsonl", "high_test.jsonl", "test/high", NULL}},
};
#define N_SPECS (int)(sizeof(specs) / sizeof(specs[0]))

// First candidate that exists (file, or directory for race); dies listing what was looked for.
static void find_file(const task_spec *s, const char *dir, char *out, size_t cap) {
    char tried[2048] = "";
    for (int i = 0; s->files[i]; i++) {
        kda_path(out, cap, "%s/%s/%s", dir, s->name, s->files[i]);
        if (kda_eval_file_exists(out) || (!strcmp(s->name, "race") && kda_eval_dir_exists(out))) return;
        size_t k = strlen(tried);
        snprintf(tried + k, sizeof tried - k, "%s%s", i ? ", " : "", s->files[i]);
    }
    if (!strcmp(s->name, "race"))
        kda_die("race: no task files in %s/race (looked for %s). kda ships no RACE data: get the 'high' test set "
                "(EleutherAI/race as JSON lines, or the release's RACE/test/high directory) and put it there; "
                "docs/eval.md describes the forms",
                dir, tried);
    kda_die("%s: no task files in %s/%s (looked for %s); point --data-dir at a folder laid out as docs/eval.md "
            "describes",
            s->name, dir, s->name, tried);
}

static kda_eval_task *new_task(kda_eval_task **all, int *n, const char *name, double version, int has_acc_norm) {
    *all = kda_realloc(*all, sizeof(kda_eval_task) * (size_t)(*n + 1));
    kda_eval_task *t = &(*all)[(*n)++];
    *t = (kda_eval_task){.version = version, .has_acc_norm = has_acc_norm};
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->alias, sizeof t->alias, "%s", name);
    return t;
}

static int load_mmlu_subject(kda_eval_task **all, int *n, const char *subject, const kda_eval_load_opts *o,
                             int as_group, int must_exist) {
    char test[4096], dev[4096];
    kda_path(test, sizeof test, "%s/mmlu/test/%s_test.csv", o->data_dir, subject);
    kda_path(dev, sizeof dev, "%s/mmlu/dev/%s_dev.csv", o->data_dir, subject);
    if (!kda_eval_file_exists(test)) {
        if (must_exist)
            kda_die(
                "mmlu_%s: %s not found; MMLU's original CSVs go in <data-dir>/mmlu/{dev,test}/<subject>_{dev,test}.csv",
                subject, test);
        return 0;
    }
    if (o->num_fewshot > 0 && !kda_eval_file_exists(dev))
        kda_die("mmlu_%s: --num-fewshot %d takes its examples from %s, which is missing", subject, o->num_fewshot, dev);
    char name[96];
    snprintf(name, sizeof name, "mmlu_%s", subject);
    kda_eval_task *t = new_task(all, n, name, 1.0, 0);
    snprintf(t->alias, sizeof t->alias, "%s", subject);
    if (as_group) snprintf(t->group, sizeof t->group, "mmlu_%s", kda_eval_mmlu_category(subject));
    t->num_fewshot = o->num_fewshot;
    kda_path(t->source, sizeof t->source, "%s", test);
    kda_eval_read_mmlu(t, subject, test, dev, o->num_fewshot, o->limit);
    return 1;
}

static void load_one(kda_eval_task **all, int *n, const char *name, const kda_eval_load_opts *o) {
    for (int i = 0; i < *n; i++) {
        if ((*all)[i].group[0] && !strncmp(name, "mmlu", 4))
            kda_die("--tasks names both mmlu and %s; mmlu already holds every subject", name);
        if (!strcmp((*all)[i].name, name)) kda_die("--tasks names '%s' twice", name);
    }
    if (!strcmp(name, "mmlu")) {
        for (int i = 0; i < *n; i++)
            if (!strncmp((*all)[i].name, "mmlu_", 5))
                kda_die("--tasks names both mmlu and %s; mmlu already holds every subject", (*all)[i].name);
        int found = 0, total = kda_eval_mmlu_n_subjects();
        kda_sb missing = {0};
        for (int i = 0; i < total; i++) {
            const char *s = kda_eval_mmlu_subject(i);
            if (load_mmlu_subject(all, n, s, o, 1, 0)) {
                found++;
            } else if (i - found < 4) { // i - found subjects are missing before this one: name the first 4
                if (missing.n) kda_sb_add(&missing, ", ");
                kda_sb_add(&missing, s);
            }
        }
        if (!found)
            kda_die("mmlu: no subject files in %s/mmlu/test (<subject>_test.csv, MMLU's original CSVs); point "
                    "--data-dir at a folder laid out as docs/eval.md describes",
                    o->data_dir);
        if (missing.n)
            fprintf(stderr,
                    "kda eval: note: mmlu: %d of %d subjects have no test file in %s/mmlu/test and are left "
                    "out of the mmlu scores (%s%s)\n",
                    total - found, total, o->data_dir, missing.v, total - found > 4 ? ", ..." : "");
        free(missing.v);
        return;
    }
    if (!strncmp(name, "mmlu_", 5)) {
        if (!kda_eval_mmlu_category(name + 5))
            kda_die("--tasks: '%s' is not an MMLU subject (mmlu_abstract_algebra ... mmlu_world_religions)", name);
        load_mmlu_subject(all, n, name + 5, o, 0, 1);
        return;
    }
    const task_spec *s = NULL;
    for (int i = 0; i < N_SPECS; i++)
        if (!strcmp(specs[i].name, name)) s = &specs[i];
    if (!s)
        kda_die("--tasks: unknown task '%s'; known: arc_easy, arc_challenge, hellaswag, openbookqa, piqa, winogrande, "
                "mmlu, mmlu_<subject>, race (and val_loss with --data-path)",
                name);
    char path[4096];
    find_file(s, o->data_dir, path, sizeof path);
    kda_eval_task *t = new_task(all, n, name, s->version, s->has_acc_norm);
    kda_path(t->source, sizeof t->source, "%s", path);
    if (!strcmp(name, "arc_easy") || !strcmp(name, "arc_challenge"))
        kda_eval_read_multiple_choice(t, path, 1, o->limit);
    else if (!strcmp(name, "openbookqa"))
        kda_eval_read_multiple_choice(t, path, 0, o->limit);
    else if (!strcmp(name, "hellaswag"))
        kda_eval_read_hellaswag(t, path, o->limit);
    else if (!strcmp(name, "winogrande"))
        kda_eval_read_winogrande(t, path, o->limit);
    else if (!strcmp(name, "race"))
        kda_eval_read_race(t, path, o->limit);
    else { // piqa: labels in valid-labels.lst unless the rows carry them
        char labels[4096];
        kda_path(labels, sizeof labels, "%s/piqa/valid-labels.lst", o->data_dir);
        kda_eval_read_piqa(t, path, kda_eval_file_exists(labels) ? labels : NULL, o->limit);
    }
    if (t->n_items == 0) kda_die("%s: %s holds no examples", name, path);
}

int kda_eval_load_tasks(const char *list, const kda_eval_load_opts *o, kda_eval_task **out) {
    kda_eval_task *all = NULL;
    int n = 0;
    char *copy = kda_strdup(list);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        size_t k = strlen(tok);
        while (k && tok[k - 1] == ' ') tok[--k] = 0;
        if (k) load_one(&all, &n, tok, o);
    }
    free(copy);
    *out = all;
    return n;
}

void kda_eval_tasks_free(kda_eval_task *t, int n) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < t[i].n_items; j++) kda_eval_item_free(&t[i].items[j]);
        free(t[i].items);
    }
    free(t);
}
