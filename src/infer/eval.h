// eval.h — multiple-choice scoring with lm-evaluation-harness semantics (issue 5), and
// validation loss / perplexity of a checkpoint as training computes it (train/validate.h).
//
// The path of one task: its local files -> items (one prompt, its choices, the gold index:
// eval_tasks.c and the readers eval_read_*.c) -> (context, continuation) requests -> token
// pairs split as lm-eval's Hugging Face model does (eval_score.c) -> log-likelihoods from a
// batched language model -> acc / acc_norm with their standard errors, MMLU groups
// (eval_metrics.c) -> lm-eval's results JSON and its table (eval_report.c).
//
// Promises (each the way lm-eval 0.4 computes it; docs/eval.md lists the sources):
// * Prompts: the task templates of lm-eval's task configs, target delimiter " " (the
//   continuation of choice c is " " + c), few-shot examples joined by "\n\n" (MMLU only,
//   first k rows of dev). Winogrande scores partially: the option fills the context and the
//   common rest of the sentence is the continuation.
// * Tokenization of a pair: trailing whitespace of the context moves to the continuation;
//   whole = encode(ctx + cont), ctx_ids = encode(ctx), cont_ids = whole[len(ctx_ids):];
//   encode adds the tokenizer's own special tokens (Llama 3: BOS) unless the text already
//   starts with the BOS text; an empty context becomes [BOS] (else [EOS]). Inputs longer than
//   max_length + 1 tokens lose tokens on the left; the continuation is always kept.
// * ll = sum over the continuation tokens of log softmax(logits) (computed in double);
//   acc: argmax of ll is the gold index; acc_norm: argmax of ll / len(choice) where len counts
//   the choice's Unicode code points (Python len), the delimiter not included; ties go to the
//   lowest index (numpy argmax). stderr: sample standard deviation / sqrt(n) ("N/A", NAN here,
//   for n < 2); MMLU's groups: size-weighted mean of the subjects and their pooled stderr.
// * Scoring batches several distinct inputs per forward, right-padded to the longest (the
//   model is causal: padding after a row's end cannot change its earlier positions); requests
//   with the same input (context + continuation minus its last token) share one row, so MMLU's
//   four one-letter answers cost one row per question.
// * Every reader failure names the file (and line) and what to do, through kda_die.
#ifndef KDA_EVAL_H
#define KDA_EVAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/config.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "train/validate.h"

// ---- items ------------------------------------------------------------------------------------

typedef struct {
    int n;                 // number of choices (requests)
    char **ctx;            // [n] contexts (the same text n times, except for partial scoring)
    char **cont;           // [n] continuations, target delimiter included
    double *choice_len;    // [n] len() of the choice text lm-eval divides by for acc_norm
    int gold;              // index of the right choice
    double *ll;            // [n] results: log-likelihood of cont[i] after ctx[i]
    unsigned char *greedy; // [n] results: cont[i] is the greedy continuation of ctx[i]
} kda_eval_item;

// ctx + (" " + choices[i]) for each choice; choice_len[i] = len(choices[i]).
void kda_eval_item_choices(kda_eval_item *it, const char *ctx, const char *const *choices, int n, int gold);
// Partial scoring (winogrande): contexts[i] + (" " + cont); choice_len[i] = len(contexts[i]).
void kda_eval_item_contexts(kda_eval_item *it, const char *const *contexts, int n, const char *cont, int gold);
void kda_eval_item_free(kda_eval_item *it);

// ---- Python string semantics the templates rely on ----------------------------------------------

size_t kda_eval_py_len(const char *s);                  // Unicode code points (invalid bytes count one each)
int kda_eval_py_isspace(uint32_t cp);                   // str.isspace of one code point
char *kda_eval_py_strip(const char *s);                 // str.strip() (malloc'ed)
size_t kda_eval_py_rstrip_len(const char *s, size_t n); // length of s[0..n) after str.rstrip()
char *kda_eval_py_capitalize(const char *s);            // str.capitalize() for ASCII letters (others kept)

// ---- prompt builders (each returns a malloc'ed string) --------------------------------------------

// arc_easy / arc_challenge / piqa: "Question: " + q + "\nAnswer:"
char *kda_eval_question_answer(const char *q);
// hellaswag's preprocess(): strip; " [title]" -> ". "; drop every [...] tag; "  " -> " " (one pass)
char *kda_eval_hellaswag_preprocess(const char *text);
// hellaswag's query: preprocess(activity_label + ": " + ctx_a + " " + capitalize(ctx_b))
char *kda_eval_hellaswag_query(const char *activity_label, const char *ctx_a, const char *ctx_b);
// The text file's "activity_label: ctx" line, where ctx_b was not capitalized: upper-case the
// first letter after the last ". " when it is a lower-case ASCII letter, then preprocess.
char *kda_eval_hellaswag_query_from_text(const char *line);
// MMLU: "The following are multiple choice questions (with answers) about <subject with spaces>.\n\n"
char *kda_eval_mmlu_description(const char *subject);
// MMLU question block: q.strip() + "\nA. " + c[0] + ... + "\nD. " + c[3] + "\nAnswer:"
char *kda_eval_mmlu_question(const char *q, const char *const c[4]);
// RACE: "Article: " + article + "\n\n", then each earlier problem (a "  _  ." cloze: its question
// minus the last 5 characters + answer + "\n"; else "Question: q\nAnswer: a\n"), then the
// last question. questions[i], answers[i] (the correct option's text) for i < n.
char *kda_eval_race_prompt(const char *article, const char *const *questions, const char *const *answers, int n);
// Winogrande from its original fields: contexts sentence[:i] + option, continuation
// sentence[i+1:].strip(), i = index of "_". Returns 0 when the sentence has no "_".
int kda_eval_winogrande_split(const char *sentence, const char *option1, const char *option2, char **ctx1, char **ctx2,
                              char **cont);

// ---- tasks -------------------------------------------------------------------------------------

typedef struct {
    char name[96];  // lm-eval's task name ("arc_easy", "mmlu_abstract_algebra")
    char alias[96]; // lm-eval's alias ("abstract_algebra")
    char group[32]; // "mmlu_stem" ... when loaded as part of the mmlu group, else ""
    double version; // the task config's metadata version
    int num_fewshot;
    int has_acc_norm; // the task config lists acc_norm
    long n_docs;      // documents in the file (lm-eval's n-samples "original")
    int n_items;      // scored (after --limit)
    kda_eval_item *items;
    char source[1024]; // the file read (for the results' configs)
} kda_eval_task;

typedef struct {
    const char *data_dir;
    long limit;      // <= 0: every document; else the first `limit` of each task (lm-eval's --limit N)
    int num_fewshot; // MMLU's k (first k dev rows); other tasks are 0-shot
} kda_eval_load_opts;

// Task names this build knows (for --help and error messages), NULL-terminated.
extern const char *const kda_eval_task_names[];
// Load a comma-separated list (arc_easy, arc_challenge, hellaswag, openbookqa, piqa, winogrande,
// mmlu, mmlu_<subject>, race). "mmlu" expands to one task per subject whose test file exists
// (a note on stderr names the missing ones; none found is an error). Returns the count.
int kda_eval_load_tasks(const char *list, const kda_eval_load_opts *o, kda_eval_task **out);
void kda_eval_tasks_free(kda_eval_task *t, int n);

// The readers (also used by tests on hand-made files). Each appends items to t and sets n_docs.
void kda_eval_read_multiple_choice(kda_eval_task *t, const char *path, int arc_template, long limit);
void kda_eval_read_piqa(kda_eval_task *t, const char *jsonl, const char *labels, long limit);
void kda_eval_read_winogrande(kda_eval_task *t, const char *path, long limit);
void kda_eval_read_hellaswag(kda_eval_task *t, const char *path, long limit); // .jsonl | .txt | .txt.bz2
void kda_eval_read_mmlu(kda_eval_task *t, const char *subject, const char *test_csv, const char *dev_csv, int k,
                        long limit);
void kda_eval_read_race(kda_eval_task *t, const char *path, long limit); // .jsonl, or a directory of .txt

// MMLU's 57 subjects and their categories ("stem", "other", "social_sciences", "humanities").
int kda_eval_mmlu_n_subjects(void);
const char *kda_eval_mmlu_subject(int i);
const char *kda_eval_mmlu_category(const char *subject); // NULL if unknown

// ---- tokenization -------------------------------------------------------------------------------

// Text -> ids as the harness's tokenizer does: a Hugging Face tokenizer (tok != NULL: its
// post-processor's special tokens), or one id per byte with `bos` prepended when >= 0.
typedef struct kda_eval_codec kda_eval_codec;
kda_eval_codec *kda_eval_codec_new(const kda_tokenizer *tok, int32_t bos, int32_t eos);
void kda_eval_codec_free(kda_eval_codec *c);
// lm-eval's _encode_pair (see the top of this file). ctx_ids / cont_ids are overwritten.
void kda_eval_encode_pair(kda_eval_codec *c, const char *ctx, const char *cont, kda_tok_ids *ctx_ids,
                          kda_tok_ids *cont_ids);

// ---- scoring ------------------------------------------------------------------------------------

// A language model as the scorer sees it.
typedef struct {
    void *self;
    int vocab;
    // logits of a right-padded batch: ids[B*T] -> out[B*T*vocab] (row b, position t at (b*T+t)*vocab)
    void (*logits)(void *self, const int32_t *ids, int B, int T, float *out);
    // optional (NULL: logits is used): logits of chosen positions only, rows[i] = b*T + t of the
    // same right-padded batch -> out[n_rows*vocab]; scoring asks for the continuation positions
    void (*logits_rows)(void *self, const int32_t *ids, int B, int T, const int32_t *rows, int n_rows, float *out);
} kda_eval_lm;

typedef struct kda_eval_plan kda_eval_plan;

// Tokenize every request of the tasks; inputs longer than max_length are cut on the left.
kda_eval_plan *kda_eval_plan_new(kda_eval_task *tasks, int n_tasks, kda_eval_codec *codec, int max_length);
int kda_eval_plan_max_len(const kda_eval_plan *p); // longest model input (tokens)
long kda_eval_plan_requests(const kda_eval_plan *p);
long kda_eval_plan_inputs(const kda_eval_plan *p);    // distinct model inputs (rows to run)
long kda_eval_plan_truncated(const kda_eval_plan *p); // requests cut on the left
// Run the model over the plan: at most max_rows inputs per forward and at most max_logits
// floats of logits per forward (at least one row each); fills every item's ll and greedy.
// progress != NULL: progress lines there (about once a second, and at the end).
void kda_eval_plan_run(kda_eval_plan *p, const kda_eval_lm *lm, int max_rows, size_t max_logits, FILE *progress);
void kda_eval_plan_free(kda_eval_plan *p);

// ---- metrics -------------------------------------------------------------------------------------

typedef struct {
    int n;
    double acc, acc_stderr; // stderr NAN when n < 2
    double acc_norm, acc_norm_stderr;
} kda_eval_metrics;

int kda_eval_argmax(const double *x, int n);                                  // first index of the maximum
double kda_eval_mean_stderr(const double *x, int n);                          // NAN when n < 2
double kda_eval_pooled_stderr(const double *stderr, const int *sizes, int n); // NAN when undefined
void kda_eval_task_metrics(const kda_eval_task *t, kda_eval_metrics *m);

// ---- validation loss -------------------------------------------------------------------------------

typedef struct {
    double loss;           // mean cross-entropy per predicted token (nats)
    double perplexity;     // exp(loss)
    long tokens;           // tokens predicted
    long samples;          // samples of seq_length + 1 tokens scored: eval_iters x global_batch_size
    long iteration;        // the checkpoint's iteration
    long eval_index;       // the evaluation training ran after that iteration (kda_validate_index)
    const kda_config *cfg; // the data settings used (data_format, train/valid_data_path, split, ...)
} kda_eval_loss;

// Validation loss of model m (the checkpoint's weights, at training iteration `iteration`) with
// training's code on one rank: v = kda_validator_open(cfg, cfg->micro_batch_size, ...)
// (train/validate.h; NULL there says why cfg gives no validation) scores eval_iters global
// batches of the valid split (the `split` share of train_data_path, or valid_data_path),
// micro_batch_size samples per forward, the samples of evaluation kda_validate_index(cfg,
// iteration): the validation row training logged at that iteration with the same settings.
// m must hold micro_batch_size x seq_length tokens. progress != NULL: a line per global batch
// (at most one a second) and at the end.
void kda_eval_val_loss(kda_validator *v, const kda_config *cfg, kda_model *m, long iteration, kda_eval_loss *out,
                       FILE *progress);

// ---- results ---------------------------------------------------------------------------------------

typedef struct {
    const char *model;  // checkpoint path
    const char *device; // backend name
    int batch_size;
    int max_length; // 0: not reported
    long limit;
    double seconds;                // total evaluation time
    const kda_eval_loss *val_loss; // NULL: not run
} kda_eval_run_info;

// lm-eval's table(s) to f: one for the tasks, a second "Groups" one when MMLU's groups exist.
void kda_eval_print_table(FILE *f, const kda_eval_task *tasks, int n_tasks, const kda_eval_run_info *info);
// lm-eval's results JSON (results, groups, group_subtasks, configs, versions, n-shot,
// higher_is_better, n-samples, config, date, total_evaluation_time_seconds) to path (atomic).
void kda_eval_write_json(const char *path, const kda_eval_task *tasks, int n_tasks, const kda_eval_run_info *info);
// One JSON line per scored document: task, doc_id, target, arguments [[ctx, cont]...],
// lls, is_greedy, acc (and acc_norm where the task has it).
void kda_eval_write_samples(const char *path, const kda_eval_task *tasks, int n_tasks);

#endif
