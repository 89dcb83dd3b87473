// cli_eval.c — `kda eval`: lm-eval-harness-compatible multiple-choice scoring of a checkpoint on
// local task files, and validation loss / perplexity on token files (eval.h does the work; this
// file parses options, loads the model on the chosen backend and wires it in as the scorer).
// stdout: the results table; stderr: what runs and progress.
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/checkpoint.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/run_guard.h"
#include "base/common.h"
#include "base/config.h"
#include "infer/eval.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define MAX_SETS 64
#define LOGITS_BYTES (1ull << 30) // most logits one forward may return (host memory)

typedef struct {
    const char *ckpt, *tasks, *data_dir, *output, *samples, *data_path, *tokenizer, *device;
    const char *sets[MAX_SETS];
    int n_sets;
    long limit;
    int num_fewshot, batch_size, max_length, seq_length, progress;
} eval_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda eval CHECKPOINT --tasks LIST [--data-dir DIR] [options]\n"
            "\n"
            "Scores a checkpoint the way lm-evaluation-harness scores a Hugging Face model (prompt templates,\n"
            "context/continuation tokenization, acc and acc_norm, stderr, MMLU groups), reading the tasks from\n"
            "local files, and/or measures validation loss and perplexity on token files. The results table goes\n"
            "to stdout, progress to stderr.\n"
            "  CHECKPOINT            a checkpoint directory (<save>/iter_NNNNNNN) or a save directory with 'latest'\n"
            "  --tasks LIST          comma-separated: arc_easy, arc_challenge, hellaswag, openbookqa, piqa,\n"
            "                        winogrande, mmlu (57 subjects and their groups), mmlu_<subject>, race, val_loss\n"
            "  --data-dir DIR        the task files: DIR/<task>/... (docs/eval.md lists the names looked for)\n"
            "  --limit N             only the first N documents of each task (of each MMLU subject); for val_loss\n"
            "                        the first N windows\n"
            "  --num-fewshot K       MMLU: the first K dev questions as examples (default 0); the other tasks are\n"
            "                        0-shot\n"
            "  --batch-size N        model inputs per forward (default 8)\n"
            "  --max-length N        longest model input in tokens, longer ones lose tokens on the left (default:\n"
            "                        max_position_embeddings of the config, as lm-eval's HF model)\n"
            "  --output PATH         results as JSON in lm-eval's layout\n"
            "  --log-samples PATH    one JSON line per document: the requests and the log-likelihood of each\n"
            "  --data-path PATH      val_loss: a Megatron dataset prefix (PATH.bin + PATH.idx) or a text file\n"
            "  --seq-length N        val_loss: tokens per window (default: the config's seq_length)\n"
            "  --device D            auto | cpu | cuda (default: the config's device)\n"
            "  --set key=value       configuration override (e.g. num_threads=1, bf16=false)\n"
            "  --tokenizer PATH      tokenizer.json instead of the config's tokenizer_model\n"
            "  --no-progress         no progress lines on stderr\n");
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
            o->progress = 0;
            continue;
        }
        if (a[0] != '-') {
            if (o->ckpt) kda_die("kda eval: two checkpoints given ('%s', '%s'); give one", o->ckpt, a);
            o->ckpt = a;
            continue;
        }
        static const char *const with_value[] = {"--tasks", "--data-dir", "--output", "--log-samples", "--data-path",
                                                 "--tokenizer", "--device", "--limit", "--num-fewshot", "--batch-size",
                                                 "--max-length", "--seq-length", "--set", NULL};
        if (!kda_cli_one_of(a, with_value)) kda_cli_usage_error("eval", "unknown option '%s'", a);
        const char *v = kda_cli_value("eval", argc, argv, &i);
        if (!strcmp(a, "--tasks")) o->tasks = v;
        else if (!strcmp(a, "--data-dir")) o->data_dir = v;
        else if (!strcmp(a, "--output")) o->output = v;
        else if (!strcmp(a, "--log-samples")) o->samples = v;
        else if (!strcmp(a, "--data-path")) o->data_path = v;
        else if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--limit")) o->limit = kda_cli_long("eval", a, v, 1, 1L << 40);
        else if (!strcmp(a, "--num-fewshot")) o->num_fewshot = (int)kda_cli_long("eval", a, v, 0, 1000);
        else if (!strcmp(a, "--batch-size")) o->batch_size = (int)kda_cli_long("eval", a, v, 1, 1 << 16);
        else if (!strcmp(a, "--max-length")) o->max_length = (int)kda_cli_long("eval", a, v, 2, 1 << 24);
        else if (!strcmp(a, "--seq-length")) o->seq_length = (int)kda_cli_long("eval", a, v, 1, 1 << 24);
        else if (!strcmp(a, "--set")) {
            if (o->n_sets == MAX_SETS) kda_die("kda eval: more than %d --set options", MAX_SETS);
            o->sets[o->n_sets++] = v;
        }
    }
    if (!o->ckpt) kda_die("kda eval: no checkpoint: give a checkpoint directory (or a save directory with 'latest')");
    if (!o->tasks) kda_die("kda eval: no tasks: give --tasks, e.g. --tasks arc_easy,hellaswag,mmlu (see kda eval --help)");
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

static double model_nll(void *self, const int32_t *ids, const int32_t *targets, int B, int T, long *n_valid) {
    double mean = kda_model_step(self, ids, targets, B, T, 0, 1.0f, n_valid);
    return *n_valid ? mean * (double)*n_valid : 0;
}

static void load_config(const eval_opts *o, kda_config *cfg, char **dir) {
    kda_config_defaults(cfg);
    *dir = kda_ckpt_load_config(o->ckpt, cfg, "kda eval");
    for (int i = 0; i < o->n_sets; i++) kda_config_set(cfg, o->sets[i]);
    if (o->device) {
        char kv[64];
        snprintf(kv, sizeof kv, "device=%s", o->device);
        kda_config_set(cfg, kv);
    }
    kda_config_finalize(cfg);
    if (cfg->num_threads > 0) omp_set_num_threads(cfg->num_threads);
}

int cmd_eval(int argc, char **argv) {
    eval_opts o;
    parse_args(argc, argv, &o);
    if (o.output) kda_guard_file("--output", o.output); // checked now, not after the evaluation (run_guard.h)
    if (o.samples) kda_guard_file("--log-samples", o.samples);
    double t_start = kda_now();
    int want_val;
    char *task_list = split_val_loss(o.tasks, &want_val);
    if (want_val && !o.data_path) kda_die("kda eval: val_loss needs --data-path (a Megatron prefix or a text file)");
    if (!want_val && o.data_path) kda_die("kda eval: --data-path is for --tasks val_loss; add val_loss to --tasks");
    if (task_list[0] && !o.data_dir)
        kda_die("kda eval: --tasks %s needs --data-dir (a folder with the task files; docs/eval.md)", task_list);
    if (!task_list[0] && !want_val) kda_die("kda eval: --tasks names no task");

    kda_config cfg;
    char *dir;
    load_config(&o, &cfg, &dir);
    kda_tokenizer *tok = kda_tok_load_for_config(&cfg, o.tokenizer, "kda eval");
    kda_eval_codec *codec = kda_eval_codec_new(tok, cfg.bos_token_id, cfg.eos_token_id);

    // tasks -> token plan (its longest input sizes the model's activations)
    kda_eval_task *tasks = NULL;
    int n_tasks = 0;
    kda_eval_plan *plan = NULL;
    int max_length = o.max_length ? o.max_length : cfg.max_position_embeddings;
    if (task_list[0]) {
        kda_eval_load_opts lo = {.data_dir = o.data_dir, .limit = o.limit, .num_fewshot = o.num_fewshot};
        n_tasks = kda_eval_load_tasks(task_list, &lo, &tasks);
        int mmlu = 0;
        for (int i = 0; i < n_tasks; i++) mmlu |= !strncmp(tasks[i].name, "mmlu_", 5);
        if (o.num_fewshot > 0 && !mmlu)
            kda_die("kda eval: --num-fewshot applies to MMLU only (the other tasks' examples would come from training "
                    "splits not read here); drop it or add mmlu");
        if (o.num_fewshot > 0 && mmlu && n_tasks > 1)
            for (int i = 0; i < n_tasks; i++)
                if (strncmp(tasks[i].name, "mmlu_", 5)) {
                    fprintf(stderr, "kda eval: note: --num-fewshot %d applies to MMLU; the other tasks stay 0-shot\n",
                            o.num_fewshot);
                    break;
                }
        plan = kda_eval_plan_new(tasks, n_tasks, codec, max_length);
    }
    int32_t *stream = NULL;
    size_t stream_n = 0;
    int val_T = o.seq_length ? o.seq_length : cfg.seq_length;
    if (want_val) stream = kda_eval_read_token_stream(o.data_path, codec, cfg.vocab_size, &stream_n);

    int T = plan ? kda_eval_plan_max_len(plan) : 1;
    if (want_val && val_T > T) T = val_T;
    const kda_ops *ops = kda_pick_backend(cfg.device);
    kda_model *m = kda_model_create(&cfg, ops, o.batch_size, T);
    kda_ckpt_load(m, dir, 0, NULL, 0);
    kda_model_drop_grad(m); // scoring never computes gradients
    fprintf(stderr, "kda eval: %s | %zu parameters | backend %s, %d threads | batch %d x %d tokens, activations %.1f MiB\n",
            dir, kda_model_num_params(m), ops->name, omp_get_max_threads(), o.batch_size, T,
            m->act_bytes_total / 1048576.0);
    // the head runs over the continuation positions only (kda_model_logits_rows)
    kda_eval_lm lm = {.self = m, .vocab = cfg.vocab_size, .logits = model_logits, .logits_rows = model_logits_rows,
                      .nll = model_nll};
    FILE *progress = o.progress ? stderr : NULL;
    if (plan) {
        long docs = 0;
        for (int i = 0; i < n_tasks; i++) docs += tasks[i].n_items;
        fprintf(stderr, "kda eval: %d task%s, %ld documents, %ld requests, %ld distinct inputs (longest %d tokens)\n",
                n_tasks, n_tasks == 1 ? "" : "s", docs, kda_eval_plan_requests(plan), kda_eval_plan_inputs(plan),
                kda_eval_plan_max_len(plan));
        if (kda_eval_plan_truncated(plan))
            fprintf(stderr, "kda eval: note: %ld requests are longer than max_length %d + 1 tokens and lose tokens on "
                    "the left\n", kda_eval_plan_truncated(plan), max_length);
        kda_eval_plan_run(plan, &lm, o.batch_size, LOGITS_BYTES / sizeof(float), progress);
    }
    kda_eval_loss val = {0};
    if (want_val) {
        fprintf(stderr, "kda eval: val_loss on %s: %zu tokens, windows of %d\n", o.data_path, stream_n, val_T);
        kda_eval_val_loss(stream, stream_n, val_T, o.limit, &lm, o.batch_size, &val, progress);
    }

    kda_eval_run_info info = {.model = dir, .device = ops->name, .batch_size = o.batch_size,
                              .max_length = plan ? max_length : 0, .limit = o.limit,
                              .seconds = kda_now() - t_start, .val_loss = want_val ? &val : NULL,
                              .val_loss_path = o.data_path, .val_loss_seq = val_T};
    kda_eval_print_table(stdout, tasks, n_tasks, &info);
    fflush(stdout);
    if (o.output) {
        kda_eval_write_json(o.output, tasks, n_tasks, &info);
        fprintf(stderr, "kda eval: results written to %s\n", o.output);
    }
    if (o.samples) {
        kda_eval_write_samples(o.samples, tasks, n_tasks);
        fprintf(stderr, "kda eval: samples written to %s\n", o.samples);
    }
    kda_eval_plan_free(plan);
    kda_eval_tasks_free(tasks, n_tasks);
    free(stream);
    kda_model_free(m);
    kda_eval_codec_free(codec);
    if (tok) kda_tok_free(tok);
    free(task_list);
    free(dir);
    return 0;
}
