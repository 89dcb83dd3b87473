// eval_report.c — results as lm-eval writes them: the JSON results layout and the markdown
// table(s) of its make_table (see eval.h). MMLU's groups (mmlu and its four categories) exist
// when the tasks were loaded through "mmlu"; their acc is the size-weighted mean of the
// subjects below them and their stderr the pooled one.
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "infer/eval.h"
#include "infer/eval_impl.h"

// MMLU's categories by group name (lm-eval's table lists children sorted by name) and their aliases
static const char *const categories[4] = {"humanities", "other", "social_sciences", "stem"};
static const char *const category_alias[4] = {"humanities", "other", "social sciences", "stem"};

typedef struct {
    char name[96], alias[96];
    int depth, is_group, is_loss;
    double version;
    int n_shot; // -1: none (groups)
    int has_norm;
    kda_eval_metrics m; // for groups: acc and acc_stderr only
    const kda_eval_task *task;
    const char *children[64];
    int n_children;
} entry;

static entry *push(entry **e, int *n) {
    *e = kda_realloc(*e, sizeof(entry) * (size_t)(*n + 1));
    entry *x = &(*e)[(*n)++];
    memset(x, 0, sizeof *x);
    x->n_shot = -1;
    return x;
}

static void task_entry(entry *x, const kda_eval_task *t, int depth) {
    snprintf(x->name, sizeof x->name, "%s", t->name);
    snprintf(x->alias, sizeof x->alias, "%s", t->alias);
    x->depth = depth;
    x->version = t->version;
    x->n_shot = t->num_fewshot;
    x->has_norm = t->has_acc_norm;
    x->task = t;
    kda_eval_task_metrics(t, &x->m);
}

// Size-weighted acc and pooled stderr over the tasks of `group` (all groups when NULL).
static void group_metrics(const kda_eval_task *tasks, int n, const char *group, kda_eval_metrics *m) {
    double sum = 0, *se = kda_malloc(sizeof(double) * (size_t)n);
    int *sizes = kda_malloc(sizeof(int) * (size_t)n), k = 0, total = 0;
    for (int i = 0; i < n; i++) {
        if (!tasks[i].group[0] || (group && strcmp(tasks[i].group, group))) continue;
        kda_eval_metrics tm;
        kda_eval_task_metrics(&tasks[i], &tm);
        sum += tm.acc * tm.n;
        total += tm.n;
        se[k] = tm.acc_stderr;
        sizes[k++] = tm.n;
    }
    *m = (kda_eval_metrics){.n = total, .acc = total ? sum / total : NAN, .acc_norm = NAN, .acc_norm_stderr = NAN};
    m->acc_stderr = kda_eval_pooled_stderr(se, sizes, k);
    free(se);
    free(sizes);
}

static const kda_eval_task *sort_tasks;
static int by_name(const void *a, const void *b) {
    return strcmp(sort_tasks[*(const int *)a].name, sort_tasks[*(const int *)b].name);
}

// Entries in the order of lm-eval's make_table: the group tree first (mmlu, then each category
// with subjects, each followed by its subjects; siblings sorted by name), then the tasks outside
// any group sorted by name (val_loss among them).
static int build_entries(const kda_eval_task *tasks, int n, const kda_eval_run_info *info, entry **out) {
    entry *e = NULL;
    int ne = 0, grouped = 0;
    int *idx = kda_malloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        idx[i] = i;
        grouped |= tasks[i].group[0] != 0;
    }
    sort_tasks = tasks;
    qsort(idx, (size_t)n, sizeof(int), by_name);
    if (grouped) {
        int top = ne;
        entry *g = push(&e, &ne);
        snprintf(g->name, sizeof g->name, "mmlu");
        snprintf(g->alias, sizeof g->alias, "mmlu");
        g->is_group = 1;
        g->version = 2;
        group_metrics(tasks, n, NULL, &g->m);
        for (int c = 0; c < 4; c++) {
            char gname[64];
            snprintf(gname, sizeof gname, "mmlu_%s", categories[c]);
            int any = 0;
            for (int j = 0; j < n; j++) any |= !strcmp(tasks[j].group, gname);
            if (!any) continue;
            int cg_at = ne;
            entry *cg = push(&e, &ne);
            snprintf(cg->name, sizeof cg->name, "%s", gname);
            snprintf(cg->alias, sizeof cg->alias, "%s", category_alias[c]);
            cg->is_group = 1;
            cg->depth = 1;
            cg->version = 2;
            group_metrics(tasks, n, gname, &cg->m);
            if (e[top].n_children < 64) e[top].children[e[top].n_children++] = categories[c];
            for (int k = 0; k < n; k++) {
                const kda_eval_task *t = &tasks[idx[k]];
                if (strcmp(t->group, gname)) continue;
                task_entry(push(&e, &ne), t, 2);
                if (e[cg_at].n_children < 64) e[cg_at].children[e[cg_at].n_children++] = t->name;
            }
        }
    }
    int loss_done = !(info && info->val_loss);
    for (int k = 0; k <= n; k++) {
        const kda_eval_task *t = k < n ? &tasks[idx[k]] : NULL;
        if (t && t->group[0]) continue;
        if (!loss_done && (!t || strcmp(t->name, "val_loss") > 0)) {
            entry *x = push(&e, &ne);
            snprintf(x->name, sizeof x->name, "val_loss");
            snprintf(x->alias, sizeof x->alias, "val_loss");
            x->is_loss = 1;
            x->version = NAN;
            loss_done = 1;
        }
        if (t) task_entry(push(&e, &ne), t, 0);
    }
    free(idx);
    *out = e;
    return ne;
}

// ---- table ------------------------------------------------------------------------------------------

#define NCOL 9
typedef struct {
    char *cell[NCOL];
} trow;

static size_t width(const char *s) { return kda_eval_py_len(s); }

static char *fmt(const char *f, double x) {
    char buf[64];
    if (isnan(x))
        snprintf(buf, sizeof buf, "   N/A");
    else
        snprintf(buf, sizeof buf, f, x);
    return kda_strdup(buf);
}

static void add_row(trow **rows, int *n, const char *task, const char *version, const char *nshot, const char *metric,
                    const char *hib, char *value, const char *pm, char *se) {
    *rows = kda_realloc(*rows, sizeof(trow) * (size_t)(*n + 1));
    trow *r = &(*rows)[(*n)++];
    const char *c[NCOL] = {task, version, "none", nshot, metric, hib, value, pm, se};
    for (int i = 0; i < NCOL; i++) r->cell[i] = kda_strdup(c[i]);
    free(value);
    free(se);
}

static void entry_rows(const entry *x, trow **rows, int *n, const kda_eval_run_info *info) {
    char name[128], version[32], nshot[16];
    snprintf(name, sizeof name, "%*s%s%s", x->depth, "", x->depth ? "- " : "", x->alias);
    if (isnan(x->version))
        snprintf(version, sizeof version, "    N/A");
    else
        snprintf(version, sizeof version, "%g", x->version);
    if (x->n_shot >= 0)
        snprintf(nshot, sizeof nshot, "%d", x->n_shot);
    else
        snprintf(nshot, sizeof nshot, " ");
    if (x->is_loss) {
        add_row(rows, n, name, version, nshot, "loss", "↓", fmt("%.4f", info->val_loss->loss), "", kda_strdup(""));
        add_row(rows, n, "", "", nshot, "perplexity", "↓", fmt("%.4f", info->val_loss->perplexity), "", kda_strdup(""));
        return;
    }
    add_row(rows, n, name, version, nshot, "acc", "↑", fmt("%.4f", x->m.acc), "±", fmt("%.4f", x->m.acc_stderr));
    if (x->has_norm)
        add_row(rows, n, "", "", nshot, "acc_norm", "↑", fmt("%.4f", x->m.acc_norm), "±",
                fmt("%.4f", x->m.acc_norm_stderr));
}

static void pad(FILE *f, size_t k) {
    for (size_t i = 0; i < k; i++) fputc(' ', f);
}

static void print_rows(FILE *f, const char *first_header, const trow *rows, int n) {
    static const char *head[NCOL] = {NULL, "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"};
    static const int right[NCOL] = {0, 1, 0, 1, 0, 0, 1, 0, 1};
    const char *h[NCOL];
    size_t w[NCOL];
    for (int c = 0; c < NCOL; c++) {
        h[c] = c ? head[c] : first_header;
        w[c] = width(h[c]) < 3 ? 3 : width(h[c]);
        for (int r = 0; r < n; r++)
            if (width(rows[r].cell[c]) > w[c]) w[c] = width(rows[r].cell[c]);
    }
    fputc('|', f);
    for (int c = 0; c < NCOL; c++) { // Python's str.center
        size_t marg = w[c] - width(h[c]), left = marg / 2 + (marg & w[c] & 1);
        pad(f, left);
        fputs(h[c], f);
        pad(f, marg - left);
        fputc('|', f);
    }
    fputs("\n|", f);
    for (int c = 0; c < NCOL; c++) {
        for (size_t i = 0; i + (right[c] ? 1 : 0) < w[c]; i++) fputc('-', f);
        fputs(right[c] ? ":|" : "|", f);
    }
    fputc('\n', f);
    for (int r = 0; r < n; r++) {
        fputc('|', f);
        for (int c = 0; c < NCOL; c++) {
            size_t k = w[c] - width(rows[r].cell[c]);
            if (right[c]) pad(f, k);
            fputs(rows[r].cell[c], f);
            if (!right[c]) pad(f, k);
            fputc('|', f);
        }
        fputc('\n', f);
    }
}

static void free_rows(trow *rows, int n) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < NCOL; c++) free(rows[r].cell[c]);
    free(rows);
}

void kda_eval_print_table(FILE *f, const kda_eval_task *tasks, int n_tasks, const kda_eval_run_info *info) {
    entry *e;
    int ne = build_entries(tasks, n_tasks, info, &e);
    trow *rows = NULL, *grows = NULL;
    int nr = 0, ng = 0;
    for (int i = 0; i < ne; i++) entry_rows(&e[i], &rows, &nr, info);
    for (int i = 0; i < ne; i++)
        if (e[i].is_group) entry_rows(&e[i], &grows, &ng, info);
    print_rows(f, "Tasks", rows, nr);
    if (ng) {
        fputc('\n', f);
        print_rows(f, "Groups", grows, ng);
    }
    free_rows(rows, nr);
    free_rows(grows, ng);
    free(e);
}

// ---- JSON ----------------------------------------------------------------------------------------------

static json_t *num_or_na(double x) { return isnan(x) ? json_string("N/A") : json_real(x); }

static json_t *entry_json(const entry *x, const kda_eval_run_info *info) {
    json_t *o = json_object();
    char alias[128];
    snprintf(alias, sizeof alias, "%s", x->alias);
    json_object_set_new(o, "name", json_string(x->name));
    json_object_set_new(o, "alias", json_string(alias));
    if (x->is_loss) {
        json_object_set_new(o, "loss,none", json_real(info->val_loss->loss));
        json_object_set_new(o, "loss_stderr,none", json_string("N/A"));
        json_object_set_new(o, "perplexity,none", json_real(info->val_loss->perplexity));
        json_object_set_new(o, "perplexity_stderr,none", json_string("N/A"));
        json_object_set_new(o, "tokens", json_integer(info->val_loss->tokens));
        json_object_set_new(o, "samples", json_integer(info->val_loss->samples));
        json_object_set_new(o, "iteration", json_integer(info->val_loss->iteration));
        return o;
    }
    json_object_set_new(o, "sample_len", json_integer(x->m.n));
    json_object_set_new(o, "acc,none", num_or_na(x->m.acc));
    json_object_set_new(o, "acc_stderr,none", num_or_na(x->m.acc_stderr));
    if (x->has_norm) {
        json_object_set_new(o, "acc_norm,none", num_or_na(x->m.acc_norm));
        json_object_set_new(o, "acc_norm_stderr,none", num_or_na(x->m.acc_norm_stderr));
    }
    return o;
}

// task configs give versions as floats (1.0), group configs as integers (2)
static json_t *version_json(const entry *x) {
    if (isnan(x->version)) return json_string("N/A");
    return x->is_group ? json_integer((json_int_t)x->version) : json_real(x->version);
}

static json_t *task_config(const kda_eval_task *t) {
    json_t *c = json_object();
    json_object_set_new(c, "task", json_string(t->name));
    if (strcmp(t->alias, t->name)) json_object_set_new(c, "task_alias", json_string(t->alias));
    json_object_set_new(c, "dataset_path", json_string(t->source));
    json_object_set_new(c, "output_type", json_string("multiple_choice"));
    json_object_set_new(c, "num_fewshot", json_integer(t->num_fewshot));
    json_object_set_new(c, "target_delimiter", json_string(" "));
    json_object_set_new(c, "fewshot_delimiter", json_string("\n\n"));
    json_t *metrics = json_array();
    for (int k = 0; k < 1 + t->has_acc_norm; k++) {
        json_t *m = json_object();
        json_object_set_new(m, "metric", json_string(k ? "acc_norm" : "acc"));
        json_object_set_new(m, "aggregation", json_string("mean"));
        json_object_set_new(m, "higher_is_better", json_true());
        json_array_append_new(metrics, m);
    }
    json_object_set_new(c, "metric_list", metrics);
    json_t *meta = json_object();
    json_object_set_new(meta, "version", json_real(t->version));
    json_object_set_new(c, "metadata", meta);
    return c;
}

static json_t *paths_json(const char (*p)[KDA_PATH_MAX], int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(p[i]));
    return a;
}

// The data settings of the validation loss, under the config keys training reads.
static json_t *val_loss_config(const kda_eval_loss *v) {
    const kda_config *c = v->cfg;
    json_t *o = json_object();
    json_object_set_new(o, "task", json_string("val_loss"));
    if (c) {
        json_object_set_new(o, "data_format", json_string(c->data_format));
        json_object_set_new(o, "train_data_path", paths_json(c->train_data_path, c->n_train_data_path));
        json_object_set_new(o, "valid_data_path", paths_json(c->valid_data_path, c->n_valid_data_path));
        json_object_set_new(o, "split", json_string(c->split));
        json_object_set_new(o, "seq_length", json_integer(c->seq_length));
        json_object_set_new(o, "eval_iters", json_integer(c->eval_iters));
        json_object_set_new(o, "eval_interval", json_integer(c->eval_interval));
        json_object_set_new(o, "global_batch_size", json_integer(c->global_batch_size));
        json_object_set_new(o, "micro_batch_size", json_integer(c->micro_batch_size));
        json_object_set_new(o, "seed", json_integer(c->seed));
    }
    json_object_set_new(o, "iteration", json_integer(v->iteration));
    json_object_set_new(o, "eval_index", json_integer(v->eval_index));
    return o;
}

void kda_eval_write_json(const char *path, const kda_eval_task *tasks, int n_tasks, const kda_eval_run_info *info) {
    entry *e;
    int ne = build_entries(tasks, n_tasks, info, &e);
    json_t *root = json_object(), *results = json_object(), *groups = json_object(), *subtasks = json_object(),
           *configs = json_object(), *versions = json_object(), *nshot = json_object(), *hib = json_object(),
           *nsamples = json_object();
    for (int i = 0; i < ne; i++) {
        const entry *x = &e[i];
        json_object_set_new(results, x->name, entry_json(x, info));
        json_object_set_new(versions, x->name, version_json(x));
        json_t *h = json_object();
        if (x->is_loss) {
            json_object_set_new(h, "loss", json_false());
            json_object_set_new(h, "perplexity", json_false());
        } else {
            json_object_set_new(h, "acc", json_true());
            if (x->has_norm) json_object_set_new(h, "acc_norm", json_true());
        }
        json_object_set_new(hib, x->name, h);
        if (x->is_group) {
            json_object_set_new(groups, x->name, entry_json(x, info));
            json_t *kids = json_array();
            for (int k = 0; k < x->n_children; k++) {
                char name[96];
                if (x->depth == 0)
                    snprintf(name, sizeof name, "mmlu_%s", x->children[k]);
                else
                    snprintf(name, sizeof name, "%s", x->children[k]);
                json_array_append_new(kids, json_string(name));
            }
            json_object_set_new(subtasks, x->name, kids);
        } else if (x->task) {
            json_object_set_new(configs, x->name, task_config(x->task));
            json_object_set_new(nshot, x->name, json_integer(x->n_shot));
            json_t *ns = json_object();
            json_object_set_new(ns, "original", json_integer(x->task->n_docs));
            json_object_set_new(ns, "effective", json_integer(x->task->n_items));
            json_object_set_new(nsamples, x->name, ns);
        } else if (x->is_loss) {
            json_object_set_new(configs, x->name, val_loss_config(info->val_loss));
        }
    }
    json_object_set_new(root, "results", results);
    if (json_object_size(groups))
        json_object_set_new(root, "groups", groups);
    else
        json_decref(groups);
    json_object_set_new(root, "group_subtasks", subtasks);
    json_object_set_new(root, "configs", configs);
    json_object_set_new(root, "versions", versions);
    json_object_set_new(root, "n-shot", nshot);
    json_object_set_new(root, "higher_is_better", hib);
    json_object_set_new(root, "n-samples", nsamples);
    json_t *cfg = json_object();
    json_object_set_new(cfg, "model", json_string("kda"));
    char args[2048];
    snprintf(args, sizeof args, "checkpoint=%s", info->model ? info->model : "");
    json_object_set_new(cfg, "model_args", json_string(args));
    json_object_set_new(cfg, "batch_size", json_integer(info->batch_size));
    json_object_set_new(cfg, "device", json_string(info->device ? info->device : ""));
    json_object_set_new(cfg, "limit", info->limit > 0 ? json_integer(info->limit) : json_null());
    // the stderr is lm-eval's closed form for a mean, which it reports under its default bootstrap_iters
    json_object_set_new(cfg, "bootstrap_iters", json_integer(100000));
    json_object_set_new(root, "config", cfg);
    json_object_set_new(root, "date", json_real((double)time(NULL)));
    if (info->max_length > 0) json_object_set_new(root, "max_length", json_integer(info->max_length));
    char secs[64];
    snprintf(secs, sizeof secs, "%.3f", info->seconds);
    json_object_set_new(root, "total_evaluation_time_seconds", json_string(secs));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0)
        kda_die("cannot write the results to '%s' (check that its directory exists and is writable)", tmp);
    if (rename(tmp, path) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    json_decref(root);
    free(e);
}

void kda_eval_write_samples(const char *path, const kda_eval_task *tasks, int n_tasks) {
    FILE *f = kda_fopen(path, "w");
    for (int t = 0; t < n_tasks; t++) {
        for (int i = 0; i < tasks[t].n_items; i++) {
            const kda_eval_item *it = &tasks[t].items[i];
            json_t *o = json_object(), *args = json_array(), *lls = json_array(), *greedy = json_array();
            json_object_set_new(o, "task", json_string(tasks[t].name));
            json_object_set_new(o, "doc_id", json_integer(i));
            json_object_set_new(o, "target", json_integer(it->gold));
            double *scaled = kda_malloc(sizeof(double) * (size_t)it->n);
            for (int c = 0; c < it->n; c++) {
                json_t *pair = json_array();
                json_array_append_new(pair, json_string(it->ctx[c]));
                json_array_append_new(pair, json_string(it->cont[c]));
                json_array_append_new(args, pair);
                json_array_append_new(lls, json_real(it->ll[c]));
                json_array_append_new(greedy, json_boolean(it->greedy[c]));
                scaled[c] = it->ll[c] / it->choice_len[c];
            }
            json_object_set_new(o, "arguments", args);
            json_object_set_new(o, "lls", lls);
            json_object_set_new(o, "is_greedy", greedy);
            json_object_set_new(o, "acc", json_real(kda_eval_argmax(it->ll, it->n) == it->gold));
            if (tasks[t].has_acc_norm)
                json_object_set_new(o, "acc_norm", json_real(kda_eval_argmax(scaled, it->n) == it->gold));
            free(scaled);
            char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
            if (!line) kda_die("cannot encode a sample of %s as JSON (text not valid UTF-8?)", tasks[t].name);
            if (fprintf(f, "%s\n", line) < 0) kda_die("cannot write '%s': %s", path, strerror(errno));
            free(line);
            json_decref(o);
        }
    }
    if (fclose(f) != 0) kda_die("cannot write '%s': %s", path, strerror(errno));
}
