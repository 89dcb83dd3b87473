// cli_eval.c — `kda eval`: lm-eval-harness-compatible multiple-choice scoring of a checkpoint on
// local task files, and the validation loss / perplexity training computes (eval.h does the work;
// this file parses options, loads the model on the chosen backend and wires it in as the scorer).
// stdout: the results table; stderr: what runs and progress.
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/run_guard.h"
#include "base/common.h"
#include "base/config.h"
#include "infer/eval.h"
#include "infer/loader.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "train/validate.h"

#define MAX_SETS 64
#define LOGITS_BYTES (1ull << 30) // most logits one forward may return (host memory)

typedef struct {
    const char *ckpt, *tasks, *data_dir, *output, *samples, *data_path, *split, *tokenizer, *device;
    const char *sets[MAX_SETS];
    int n_sets;
    long limit;
    int num_fewshot, batch_size, max_length, seq_length, eval_iters, progress;
} eval_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda eval CHECKPOINT --tasks LIST [--data-dir DIR] [options]\n"
            "\n"
            "       kda eval CHECKPOINT --tasks val_loss [--data-path PREFIX] [--split S] [--eval-iters N]\n"
            "\n"
            "Scores a checkpoint the way lm-evaluation-harness scores a Hugging Face model (prompt templates,\n"
            "context/continuation tokenization, acc and acc_norm, stderr, MMLU groups), reading the tasks from\n"
            "local files, and/or computes the validation loss and perplexity the way kda train does. The results\n"
            "table goes to stdout, progress to stderr.\n"
            "  CHECKPOINT            a checkpoint directory (<save>/iter_NNNNNNN) or a save directory with 'latest'\n"
            "  --tasks LIST          comma-separated: arc_easy, arc_challenge, hellaswag, openbookqa, piqa,\n"
            "                        winogrande, mmlu (57 subjects and their groups), mmlu_<subject>, race, val_loss\n"
            "  --data-dir DIR        the task files: DIR/<task>/... (docs/eval.md lists the names looked for)\n"
            "  --limit N             only the first N documents of each task (of each MMLU subject)\n"
            "  --num-fewshot K       MMLU: the first K dev questions as examples (default 0); the other tasks are\n"
            "                        0-shot\n"
            "  --batch-size N        model inputs per forward (default 8)\n"
            "  --max-length N        longest model input in tokens, longer ones lose tokens on the left (default:\n"
            "                        max_position_embeddings of the config, as lm-eval's HF model)\n"
            "  --output PATH         results as JSON in lm-eval's layout\n"
            "  --log-samples PATH    one JSON line per document: the requests and the log-likelihood of each\n"
            "  --device D            auto | cpu | cuda (default: the config's device)\n"
            "  --set key=value       configuration override (e.g. num_threads=1, bf16=false)\n"
            "  --tokenizer PATH      tokenizer.json instead of the config's tokenizer_model ('bytes' for a\n"
            "                        byte-level model, which takes no file)\n"
            "  --no-progress         no progress lines on stderr\n"
            "val_loss: kda train's validation (eval_iters global batches of the valid split, the samples training\n"
            "read after the checkpoint's iteration), so the same number training logged for the same settings;\n"
            "micro_batch_size, global_batch_size, seed and the rest come from the checkpoint (--set changes them):\n"
            "  --data-path PATH      a Megatron dataset prefix (PATH.bin + PATH.idx) or a text file, read as\n"
            "                        train_data_path: [PATH] (default: the checkpoint's train_data_path and\n"
            "                        valid_data_path)\n"
            "  --split S             train,valid,test shares, as the config key (default: the checkpoint's; 0,1,0\n"
            "                        scores all of --data-path)\n"
            "  --eval-iters N        global batches scored (default: the checkpoint's eval_iters)\n"
            "  --seq-length N        tokens per sample (default: the checkpoint's seq_length)\n");
}

static void parse_args(int argc, char **argv, eval_opts *o) {
    *o = (eval_opts){.batch_size = 8, .progress = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--no-progress")) {
            kda_cli_flag("eval", a);
            o->progress = 0;
            continue;
        }
        if (a[0] != '-') {
            if (o->ckpt) kda_cli_usage_error("eval", "two checkpoints given ('%s', '%s'); give one", o->ckpt, a);
            o->ckpt = a;
            continue;
        }
        static const char *const with_value[] = {"--tasks",      "--data-dir",    "--output",     "--log-samples",
                                                 "--data-path",  "--split",       "--tokenizer",  "--device",
                                                 "--limit",      "--num-fewshot", "--batch-size", "--max-length",
                                                 "--seq-length", "--eval-iters",  "--set",        NULL};
        if (!kda_cli_one_of(a, with_value)) kda_cli_usage_error("eval", "unknown option '%s'", a);
        const char *v = kda_cli_value("eval", argc, argv, &i);
        if (!strcmp(a, "--tasks"))
            o->tasks = v;
        else if (!strcmp(a, "--data-dir"))
            o->data_dir = v;
        else if (!strcmp(a, "--output"))
            o->output = v;
        else if (!strcmp(a, "--log-samples"))
            o->samples = v;
        else if (!strcmp(a, "--data-path"))
            o->data_path = v;
        else if (!strcmp(a, "--split"))
            o->split = v;
        else if (!strcmp(a, "--tokenizer"))
            o->tokenizer = v;
        else if (!strcmp(a, "--device"))
            o->device = kda_cli_device("eval", v);
        else if (!strcmp(a, "--limit"))
            o->limit = kda_cli_long("eval", a, v, 1, 1L << 40);
        else if (!strcmp(a, "--num-fewshot"))
            o->num_fewshot = (int)kda_cli_long("eval", a, v, 0, 1000);
        else if (!strcmp(a, "--batch-size"))
            o->batch_size = (int)kda_cli_long("eval", a, v, 1, 1 << 16);
        else if (!strcmp(a, "--max-length"))
            o->max_length = (int)kda_cli_long("eval", a, v, 2, 1 << 24);
        else if (!strcmp(a, "--seq-length"))
            o->seq_length = (int)kda_cli_long("eval", a, v, 2, 1 << 24);
        else if (!strcmp(a, "--eval-iters"))
            o->eval_iters = (int)kda_cli_long("eval", a, v, 1, 1 << 24);
        else if (!strcmp(a, "--set")) {
            kda_cli_set_value("eval", v);
            if (o->n_sets == MAX_SETS) kda_cli_usage_error("eval", "more than %d --set options", MAX_SETS);
            o->sets[o->n_sets++] = v;
        }
    }
    if (!o->ckpt)
        kda_cli_usage_error("eval", "no checkpoint: give a checkpoint directory (or a save directory with 'latest')");
    if (!o->tasks) kda_cli_usage_error("eval", "no tasks: give --tasks, e.g. --tasks arc_easy,hellaswag,mmlu");
}

// --tasks without val_loss (malloc'ed); *val gets whether val_loss was named.
static char *split_val_loss(const char *list, int *val) {
    char *rest = kda_calloc(strlen(list) + 1, 1), *copy = kda_strdup(list);
    *val = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!strcmp(tok, "val_loss")) {
            *val = 1;
            continue;
        }
        if (*rest) strcat(rest, ",");
        strcat(rest, tok);
    }
    free(copy);
    return rest;
}

// ---- the model as the scorer -------------------------------------------------------------------------

static void model_logits(void *self, const int32_t *ids, int B, int T, float *out) {
    kda_model_logits(self, ids, B, T, out);
}

static void model_logits_rows(void *self, const int32_t *ids, int B, int T, const int32_t *rows, int n_rows,
                              float *out) {
    kda_model_logits_rows(self, ids, B, T, rows, n_rows, out);
}

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// --data-path as training's train_data_path: [PATH] (the valid split is its `split` share): a
// Megatron prefix (the .bin/.idx suffix may be given) or else a text file.
static void set_data_path(kda_config *cfg, const char *path) {
    char prefix[KDA_PATH_MAX], bin[KDA_PATH_MAX + 8], idx[KDA_PATH_MAX + 8];
    if (strlen(path) >= sizeof prefix) kda_die("kda eval: --data-path '%s' is too long", path);
    snprintf(prefix, sizeof prefix, "%s", path);
    if (has_suffix(prefix, ".bin") || has_suffix(prefix, ".idx")) prefix[strlen(prefix) - 4] = 0;
    snprintf(bin, sizeof bin, "%s.bin", prefix);
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    int megatron = is_file(bin) && is_file(idx);
    if (!megatron && !is_file(path))
        kda_die("kda eval: --data-path '%s': neither a Megatron dataset (%s.bin + %s.idx) nor a text file", path,
                prefix, prefix);
    snprintf(cfg->data_format, sizeof cfg->data_format, "%s", megatron ? "megatron" : "text");
    snprintf(cfg->train_data_path[0], sizeof cfg->train_data_path[0], "%s", megatron ? prefix : path);
    cfg->n_train_data_path = 1;
    cfg->n_valid_data_path = 0;
}

// The val_loss options over the checkpoint's config (loader.h's adjust: after --set and
// --device). The data paths were read over empty ones, so that a config naming none is told from
// the defaults' demo path; want_val without data then is a usage error.
typedef struct {
    const eval_opts *o;
    int want_val;
} val_settings;

static void set_val_options(kda_config *cfg, void *arg) {
    const val_settings *v = arg;
    const eval_opts *o = v->o;
    if (o->data_path) set_data_path(cfg, o->data_path);
    if (v->want_val && !cfg->n_train_data_path && !cfg->n_valid_data_path)
        kda_cli_usage_error("eval",
                            "val_loss: the checkpoint's config names no data (no train_data_path or "
                            "valid_data_path); give --data-path PREFIX");
    if (!cfg->n_train_data_path) { // unused (no val_loss), but finalize wants one
        kda_config def;
        kda_config_defaults(&def);
        memcpy(cfg->train_data_path, def.train_data_path, sizeof def.train_data_path);
        cfg->n_train_data_path = def.n_train_data_path;
    }
    if (o->split) {
        char kv[128];
        snprintf(kv, sizeof kv, "split=%s", o->split);
        kda_config_set(cfg, kv);
    }
    if (o->eval_iters) cfg->eval_iters = o->eval_iters;
    if (o->seq_length) cfg->seq_length = o->seq_length;
    if (o->tokenizer && !strcmp(cfg->tokenizer_type, "HuggingFaceTokenizer")) // text data is tokenized with it too
        snprintf(cfg->tokenizer_model, sizeof cfg->tokenizer_model, "%s", o->tokenizer);
}

// ---- one evaluation ------------------------------------------------------------------------------

typedef struct {
    eval_opts o;
    char *task_list; // --tasks without val_loss
    int want_val;    // val_loss was named
    kda_loaded ld;   // config, tokenizer, checkpoint, model
    kda_eval_codec *codec;
    kda_eval_task *tasks;
    int n_tasks;
    kda_eval_plan *plan; // NULL without multiple-choice tasks
    int max_length;
    kda_validator *validator; // NULL without val_loss
    kda_eval_loss val;
} eval_run;

// The options that belong to one kind of task only, against what --tasks names.
static void check_task_options(const eval_run *r) {
    const eval_opts *o = &r->o;
    const char *val_opt = o->data_path ? "--data-path"
        : o->split                     ? "--split"
        : o->eval_iters                ? "--eval-iters"
        : o->seq_length                ? "--seq-length"
                                       : NULL;
    if (!r->want_val && val_opt)
        kda_cli_usage_error("eval", "%s is for --tasks val_loss; add val_loss to --tasks", val_opt);
    if (r->task_list[0] && !o->data_dir)
        kda_cli_usage_error("eval", "--tasks %s needs --data-dir (a folder with the task files; docs/eval.md)",
                            r->task_list);
    if (!r->task_list[0] && !r->want_val) kda_cli_usage_error("eval", "--tasks names no task");
    const char *task_opt = o->limit ? "--limit" : o->num_fewshot ? "--num-fewshot" : o->data_dir ? "--data-dir" : NULL;
    if (!r->task_list[0] && task_opt)
        kda_cli_usage_error("eval", "%s is for the multiple-choice tasks; val_loss scores --eval-iters global batches",
                            task_opt);
}

// The multiple-choice tasks -> the token plan (its longest input sizes the model's activations).
static void plan_tasks(eval_run *r) {
    const eval_opts *o = &r->o;
    kda_eval_load_opts lo = {.data_dir = o->data_dir, .limit = o->limit, .num_fewshot = o->num_fewshot};
    r->n_tasks = kda_eval_load_tasks(r->task_list, &lo, &r->tasks);
    int mmlu = 0;
    for (int i = 0; i < r->n_tasks; i++) mmlu |= !strncmp(r->tasks[i].name, "mmlu_", 5);
    if (o->num_fewshot > 0 && !mmlu)
        kda_cli_usage_error("eval",
                            "--num-fewshot applies to MMLU only (the other tasks' examples would come from "
                            "training splits not read here); drop it or add mmlu");
    if (o->num_fewshot > 0 && mmlu && r->n_tasks > 1)
        for (int i = 0; i < r->n_tasks; i++)
            if (strncmp(r->tasks[i].name, "mmlu_", 5)) {
                fprintf(stderr, "kda eval: note: --num-fewshot %d applies to MMLU; the other tasks stay 0-shot\n",
                        o->num_fewshot);
                break;
            }
    r->plan = kda_eval_plan_new(r->tasks, r->n_tasks, r->codec, r->max_length);
}

// The model, holding the longest task input and training's micro-batch of seq_length tokens.
static kda_model *load_model(eval_run *r) {
    const kda_config *cfg = &r->ld.cfg;
    int B = r->plan ? r->o.batch_size : 1, T = r->plan ? kda_eval_plan_max_len(r->plan) : 1;
    if (r->want_val && cfg->micro_batch_size > B) B = cfg->micro_batch_size;
    if (r->want_val && cfg->seq_length > T) T = cfg->seq_length;
    kda_model *m = kda_loaded_model(&r->ld, B, T);
    fprintf(
        stderr, "kda eval: %s | %zu parameters | backend %s, %d threads | batch %d x %d tokens, activations %.1f MiB\n",
        r->ld.dir, kda_model_num_params(m), m->ops->name, omp_get_max_threads(), B, T, m->act_bytes_total / 1048576.0);
    return m;
}

static void run_tasks(eval_run *r, kda_model *m, FILE *progress) {
    kda_eval_plan *plan = r->plan;
    // the head runs over the continuation positions only (kda_model_logits_rows)
    kda_eval_lm lm = {
        .self = m, .vocab = r->ld.cfg.vocab_size, .logits = model_logits, .logits_rows = model_logits_rows};
    long docs = 0;
    for (int i = 0; i < r->n_tasks; i++) docs += r->tasks[i].n_items;
    fprintf(stderr, "kda eval: %d task%s, %ld documents, %ld requests, %ld distinct inputs (longest %d tokens)\n",
            r->n_tasks, r->n_tasks == 1 ? "" : "s", docs, kda_eval_plan_requests(plan), kda_eval_plan_inputs(plan),
            kda_eval_plan_max_len(plan));
    if (kda_eval_plan_truncated(plan))
        fprintf(stderr,
                "kda eval: note: %ld requests are longer than max_length %d + 1 tokens and lose tokens on "
                "the left\n",
                kda_eval_plan_truncated(plan), r->max_length);
    kda_eval_plan_run(plan, &lm, r->o.batch_size, LOGITS_BYTES / sizeof(float), progress);
}

static void run_val_loss(eval_run *r, kda_model *m, FILE *progress) {
    const kda_config *cfg = &r->ld.cfg;
    long it = r->ld.st.iteration;
    const int own = cfg->n_valid_data_path > 0;
    fprintf(stderr,
            "kda eval: val_loss: %d global batches of %d samples x %d tokens from the valid split of %s%s%s "
            "(%s), evaluation %ld as training ran it after iteration %ld\n",
            cfg->eval_iters, cfg->global_batch_size, cfg->seq_length,
            own ? cfg->valid_data_path[0] : cfg->train_data_path[0], own ? "" : ", split ", own ? "" : cfg->split,
            cfg->data_format, kda_validate_index(cfg, it), it);
    kda_eval_val_loss(r->validator, cfg, m, it, &r->val, progress);
}

// The results table on stdout, then --output and --log-samples.
static void report(eval_run *r, double seconds) {
    kda_eval_run_info info = {.model = r->ld.dir,
                              .device = r->ld.m->ops->name,
                              .batch_size = r->o.batch_size,
                              .max_length = r->plan ? r->max_length : 0,
                              .limit = r->o.limit,
                              .seconds = seconds,
                              .val_loss = r->want_val ? &r->val : NULL};
    kda_eval_print_table(stdout, r->tasks, r->n_tasks, &info);
    fflush(stdout);
    if (r->o.output) {
        kda_eval_write_json(r->o.output, r->tasks, r->n_tasks, &info);
        fprintf(stderr, "kda eval: results written to %s\n", r->o.output);
    }
    if (r->o.samples) {
        kda_eval_write_samples(r->o.samples, r->tasks, r->n_tasks);
        fprintf(stderr, "kda eval: samples written to %s\n", r->o.samples);
    }
}

int cmd_eval(int argc, char **argv) {
    eval_run r = {0};
    eval_opts *o = &r.o;
    parse_args(argc, argv, o);
    if (o->output) kda_guard_file("--output", o->output); // checked now, not after the evaluation (run_guard.h)
    if (o->samples) kda_guard_file("--log-samples", o->samples);
    double t_start = kda_now();
    r.task_list = split_val_loss(o->tasks, &r.want_val);
    check_task_options(&r);

    val_settings vs = {o, r.want_val};
    kda_load_spec spec = {.who = "kda eval",
                          .ckpt = o->ckpt,
                          .sets = o->sets,
                          .n_sets = o->n_sets,
                          .device = o->device,
                          .tokenizer = o->tokenizer,
                          .empty_data_paths = 1,
                          .adjust = set_val_options,
                          .adjust_arg = &vs};
    kda_loaded_open(&r.ld, &spec);
    const kda_config *cfg = &r.ld.cfg;
    r.codec = kda_eval_codec_new(r.ld.tok, cfg->bos_token_id, cfg->eos_token_id);
    r.max_length = o->max_length ? o->max_length : cfg->max_position_embeddings;
    if (r.task_list[0]) plan_tasks(&r);
    if (r.want_val) { // opened now: the data settings are checked before the model is built
        char why[512];
        r.validator = kda_validator_open(cfg, cfg->micro_batch_size, why, sizeof why);
        if (!r.validator)
            kda_die("kda eval: val_loss: the settings give no validation: %s; set --eval-iters or --split", why);
    }
    kda_model *m = load_model(&r);
    FILE *progress = o->progress ? stderr : NULL;
    if (r.plan) run_tasks(&r, m, progress);
    if (r.want_val) run_val_loss(&r, m, progress);
    report(&r, kda_now() - t_start);

    kda_validator_close(r.validator);
    kda_eval_plan_free(r.plan);
    kda_eval_tasks_free(r.tasks, r.n_tasks);
    kda_eval_codec_free(r.codec);
    kda_loaded_close(&r.ld);
    free(r.task_list);
    return 0;
}
