// test_config.c — the configuration module: defaults, the shipped configs (run from the repo
// root: paths are relative to it), write -> load round trips, --set of every value type, and
// every error path. kda_die exits, so each error case runs in a fork()ed child whose stderr
// goes to a pipe; the test checks the exit status and what the one-line message names.
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "test_die.h"
#include "test_util.h"

#define FIX "tests/data/config/"

// ---- running something that must die --------------------------------------------------------

typedef enum { DO_LOAD, DO_SET, DO_SET_FINALIZE } action;
typedef struct {
    action a;
    const char *arg, *arg2;
} config_job;

// In the child: the action on a fresh config; returning (not dying) is a failure the parent sees.
static void config_job_run(void *p) {
    const config_job *j = p;
    kda_config c;
    kda_config_defaults(&c);
    if (j->a == DO_LOAD) kda_config_load(&c, j->arg);
    if (j->a == DO_SET || j->a == DO_SET_FINALIZE) kda_config_set(&c, j->arg);
    if (j->arg2) kda_config_set(&c, j->arg2);
    if (j->a == DO_SET_FINALIZE) kda_config_finalize(&c);
}

// Runs the action in a child (test_die.h); its exit status, its stderr without the last newline.
static t_child run_child(action a, const char *arg, const char *arg2) {
    config_job j = {a, arg, arg2};
    t_child r = t_run_child(config_job_run, &j);
    size_t n = strlen(r.err);
    if (n && r.err[n - 1] == '\n') r.err[n - 1] = 0;
    return r;
}

// Expect exit status 1, one line, starting "kda: error: ", containing each of the NULL-ended needles.
static void expect_die(const char *what, action a, const char *arg, const char *arg2, ...) {
    t_child ch = run_child(a, arg, arg2);
    const char *msg = ch.err;
    int rc = ch.status;
    int ok = rc == 1 && !strncmp(msg, "kda: error: ", 12) && !strchr(msg, '\n');
    const char *missing = NULL;
    va_list ap;
    va_start(ap, arg2);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(msg, needle) && !missing) missing = needle;
    va_end(ap);
    T_CHECK(ok && !missing, "%-22s exit %d: %s%s%s%s", what, rc, msg, missing ? "   [missing: '" : "",
            missing ? missing : "", missing ? "']" : "");
}
#define DIE_LOAD(what, file, ...) expect_die(what, DO_LOAD, file, NULL, __VA_ARGS__, (const char *)NULL)
#define DIE_SET(what, kv, ...) expect_die(what, DO_SET, kv, NULL, __VA_ARGS__, (const char *)NULL)
#define DIE_FINAL(what, kv, kv2, ...) expect_die(what, DO_SET_FINALIZE, kv, kv2, __VA_ARGS__, (const char *)NULL)

// ---- helpers ---------------------------------------------------------------------------------

static kda_config loaded(const char *path) {
    kda_config c;
    kda_config_defaults(&c);
    kda_config_load(&c, path);
    return c;
}

static int same(const kda_config *a, const kda_config *b) { return !memcmp(a, b, sizeof *a); }

// write a, load it onto fresh defaults, compare bytewise (the struct is zero-filled by defaults
// and every string write clears the whole buffer, so padding and tails compare too)
static int round_trip(const kda_config *a, const char *what) {
    char path[] = "/tmp/kda_test_config_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        perror("fdopen");
        exit(2);
    }
    kda_config_write_yaml(a, f);
    if (fclose(f)) {
        perror("fclose");
        exit(2);
    }
    kda_config b = loaded(path);
    int ok = same(a, &b);
    if (!ok) {
        printf("    %s: round trip differs; written file kept at %s\n", what, path);
        kda_config_write_yaml(&b, stdout);
    } else {
        unlink(path);
    }
    return ok;
}

// ---- the tests -------------------------------------------------------------------------------

static void test_defaults(void) {
    kda_config c;
    kda_config_defaults(&c);
    kda_config_finalize(&c);
    T_CHECK(c.vocab_size == 128256 && !strcmp(c.tokenizer_type, "HuggingFaceTokenizer") &&
                !strcmp(c.tokenizer_model, "data/tokenizer/llama3/tokenizer.json") &&
                !strcmp(c.data_format, "megatron") && c.n_train_data_path == 1 &&
                !strcmp(c.train_data_path[0], "build/data/tinyshakespeare-llama3"),
            "defaults: Llama 3 vocabulary, bundled tokenizer, token files of data/tinyshakespeare.txt (make demo)");
    T_CHECK(c.head_v_dim == 32 && c.num_v_heads == 4 && c.key_dim == 64 && c.value_dim == 128 &&
                c.lr_decay_iters == c.train_iters,
            "defaults finalize: head_v_dim %d, num_v_heads %d, key_dim %d, value_dim %d, lr_decay_iters %ld",
            c.head_v_dim, c.num_v_heads, c.key_dim, c.value_dim, c.lr_decay_iters);
    T_CHECK(c.bos_token_id == -1 && c.eos_token_id == -1 && c.pad_token_id == -1 && !strcmp(c.device, "auto") &&
                !strcmp(c.kda_algo, "chunk") && c.kda_chunk_size == 64 && c.seed == 42 && c.keep_last_n == 3 &&
                !strcmp(c.split, "969,30,1") && !strcmp(c.sample_prompt, "ROMEO:") && c.sample_tokens > 0 &&
                !strcmp(c.lr_decay_style, "cosine") && c.adam_beta1 == 0.9 && c.adam_beta2 == 0.95 &&
                c.adam_eps == 1e-8 && c.weight_decay == 0.01 && c.clip_grad == 1.0 && c.log_interval == 10,
            "defaults: token ids null, device auto, chunk 64, seed 42, recipe optimizer settings");
    kda_config d = c;
    kda_config_finalize(&d);
    T_CHECK(same(&c, &d), "finalize is idempotent");
}

static void test_tiny(void) {
    // tiny.yaml must set every key to the defaults' value: load it on top of a config where
    // almost every field differs (the 300M one) and compare with the defaults
    kda_config def, t = loaded("configs/kda-300M.yaml");
    kda_config_defaults(&def);
    kda_config_load(&t, "configs/tiny.yaml");
    T_CHECK(same(&def, &t), "configs/tiny.yaml == kda_config_defaults() (keep the two in sync)");
    kda_config_finalize(&t);
    T_CHECK(t.hidden_size == 64 && t.num_hidden_layers == 2 && t.num_heads == 4 && t.head_dim == 16 &&
                t.head_v_dim == 32 && t.intermediate_size == 192 && t.vocab_size == 128256 && t.seq_length == 64 &&
                t.micro_batch_size == 4 && t.global_batch_size == 4 && t.train_iters == 150 && t.lr == 1e-2 &&
                t.min_lr == 1e-3 && t.lr_warmup_iters == 10 && !t.save[0],
            "configs/tiny.yaml: 64 x 2 layers, 4 heads x 16, vocab 128256, seq 64, batch 4/4, 150 iterations");
}

static void test_tiny_bytes(void) {
    // tiny-bytes.yaml sets every key too: loaded onto the 300M config and onto the defaults it
    // gives the same config; and it is the byte-level model the tests train
    kda_config a = loaded("configs/kda-300M.yaml"), b;
    kda_config_defaults(&b);
    kda_config_load(&a, "configs/tiny-bytes.yaml");
    kda_config_load(&b, "configs/tiny-bytes.yaml");
    T_CHECK(same(&a, &b), "configs/tiny-bytes.yaml sets every key (same config on top of 300M and of the defaults)");
    kda_config_finalize(&a);
    T_CHECK(a.vocab_size == 256 && !strcmp(a.tokenizer_type, "byte") && !a.tokenizer_model[0] &&
                !strcmp(a.data_format, "text") && a.n_train_data_path == 1 &&
                !strcmp(a.train_data_path[0], "data/tinyshakespeare.txt") && a.bos_token_id == -1 &&
                a.eos_token_id == -1 && a.pad_token_id == -1,
            "configs/tiny-bytes.yaml: byte-level model on the raw bytes of data/tinyshakespeare.txt");
    T_CHECK(a.hidden_size == 128 && a.num_hidden_layers == 2 && a.num_heads == 4 && a.head_dim == 16 &&
                a.head_v_dim == 32 && a.intermediate_size == 384 && a.seq_length == 128 && a.micro_batch_size == 8 &&
                a.global_batch_size == 16 && a.train_iters == 300 && a.lr == 2e-3 && a.min_lr == 2e-4 &&
                a.lr_warmup_iters == 20 && !a.save[0],
            "configs/tiny-bytes.yaml: 128 x 2 layers, 4 heads x 16, seq 128, batch 8/16, 300 iterations");
}

static void test_300m(void) {
    kda_config c = loaded("configs/kda-300M.yaml");
    kda_config_finalize(&c);
    T_CHECK(c.hidden_size == 1024 && c.num_hidden_layers == 12 && c.num_heads == 8 && c.num_v_heads == 8 &&
                c.head_dim == 32 && c.expand_v == 2.0 && c.head_v_dim == 64 && c.use_short_conv && c.conv_size == 4 &&
                c.intermediate_size == 4096 && c.vocab_size == 128256 && c.norm_eps == 1e-6 && c.tie_word_embeddings &&
                c.initializer_range == 0.02 && c.max_position_embeddings == 2048 && !c.allow_neg_eigval &&
                !c.safe_gate && !strcmp(c.attn_mode, "chunk"),
            "kda-300M: model = kda-model.md §1.1");
    T_CHECK(c.key_dim == 256 && c.value_dim == 512, "kda-300M: key_dim %d (256), value_dim %d (512)", c.key_dim,
            c.value_dim);
    T_CHECK(c.bos_token_id == 128000 && c.eos_token_id == 128001 && c.pad_token_id == -1,
            "kda-300M: bos 128000, eos 128001, pad null");
    T_CHECK(c.train_iters == 4768 && c.micro_batch_size == 128 && c.global_batch_size == 1024 && c.seq_length == 2048 &&
                c.lr == 2e-4 && c.min_lr == 2e-5 && c.lr_warmup_iters == 200 && c.lr_decay_iters == 4768 &&
                !strcmp(c.lr_decay_style, "cosine") && c.adam_beta1 == 0.9 && c.adam_beta2 == 0.95 &&
                c.adam_eps == 1e-8 && c.weight_decay == 0.01 && c.clip_grad == 1.0 && c.seed == 42 && c.bf16 &&
                c.save_interval == 1024,
            "kda-300M: recipe = kda-model.md §6.1");
    T_CHECK(!strcmp(c.data_format, "megatron") && !strcmp(c.tokenizer_type, "HuggingFaceTokenizer") &&
                !strcmp(c.tokenizer_model, "data/tokenizer/llama3/tokenizer.json") && c.n_train_data_path == 1 &&
                !strcmp(c.train_data_path[0], "data/fineweb-edu/fineweb_edu_text_document"),
            "kda-300M: megatron data, Llama-3 tokenizer.json");
    T_CHECK(round_trip(&c, "kda-300M"), "kda-300M: write -> load gives the identical struct");
}

static void test_1b(void) {
    kda_config c = loaded("configs/kda-1B.yaml");
    kda_config_finalize(&c);
    T_CHECK(c.hidden_size == 2048 && c.num_hidden_layers == 16 && c.num_heads == 16 && c.head_dim == 32 &&
                c.head_v_dim == 64 && c.conv_size == 4 && c.intermediate_size == 8192 && c.vocab_size == 128256 &&
                c.tie_word_embeddings && c.norm_eps == 1e-6,
            "kda-1B: model = kda-model.md §1.2");
    T_CHECK(c.global_batch_size == 64 && c.micro_batch_size == 16 && c.train_iters == 76294 &&
                c.lr_decay_iters == 76294 && c.lr == 2e-4 && c.min_lr == 2e-5 && c.lr_warmup_iters == 200,
            "kda-1B: FLA reference schedule (64 x 2048, 76294 iterations)");
}

static void test_fla_json(void) {
    // an FLA config.json (JSON is YAML) with its informational / kernel-only keys
    kda_config c = loaded(FIX "fla_config_json.yaml"), d;
    kda_config_defaults(&d);
    d.hidden_size = 96;
    T_CHECK(same(&c, &d), "FLA config.json keys: accepted, only hidden_size changed");
}

static void test_round_trips(void) {
    kda_config c;
    kda_config_defaults(&c);
    T_CHECK(round_trip(&c, "defaults"), "defaults (unfinalized, nulls): write -> load identical");
    kda_config_set(&c, "sample_prompt=\"say \\\"hi\\\"\\\\ \\t\\n\\x01 caf\\u00e9: [x] # y\"");
    T_CHECK(!strcmp(c.sample_prompt, "say \"hi\"\\ \t\n\x01 caf\xc3\xa9: [x] # y"), "--set quoted string with escapes");
    kda_config_set(&c, "train_data_path=[0.3, \"a b/c\", 0.7, 'd:e']");
    kda_config_set(&c, "valid_data_path=v.txt");
    kda_config_set(&c, "lr=0.30000000000000004");
    kda_config_set(&c, "min_lr=1e-300");
    kda_config_set(&c, "norm_eps=1.2345678901234567e-7");
    kda_config_set(&c, "seed=9007199254740993");
    kda_config_set(&c, "bos_token_id=0");
    kda_config_set(&c, "num_v_heads=4");
    kda_config_set(&c, "save=runs/x y");
    T_CHECK(round_trip(&c, "awkward values"), "escapes, unicode, path lists, 17-digit doubles: identical");
    kda_config_finalize(&c);
    T_CHECK(round_trip(&c, "finalized"), "finalized config: write -> load identical");
}

static void test_set(void) {
    kda_config c;
    kda_config_defaults(&c);
    kda_config_set(&c, "hidden_size=256");
    kda_config_set(&c, "train_iters=+1000000");
    kda_config_set(&c, "lr=3e-4");
    kda_config_set(&c, "min_lr=3e-5");
    kda_config_set(&c, "expand_v=1");
    kda_config_set(&c, "bf16=true");
    kda_config_set(&c, "finetune=True");
    kda_config_set(&c, "device=cpu");
    kda_config_set(&c, "sample_prompt=ROMEO: hi");
    kda_config_set(&c, "tokenizer_model=");
    kda_config_set(&c, "pad_token_id=null");
    kda_config_set(&c, "eos_token_id=~");
    kda_config_set(&c, "num_v_heads=null");
    kda_config_set(&c, "hidden_act=swish"); // accepted, no effect
    kda_config_set(&c, "lower_bound=null");
    kda_config_set(&c, "fuse_norm=false");
    T_CHECK(c.hidden_size == 256 && c.train_iters == 1000000 && c.lr == 3e-4 && c.min_lr == 3e-5 && c.expand_v == 1.0 &&
                c.bf16 == 1 && c.finetune == 1 && !strcmp(c.device, "cpu") && !strcmp(c.sample_prompt, "ROMEO: hi") &&
                !c.tokenizer_model[0] && c.pad_token_id == -1 && c.eos_token_id == -1 && c.num_v_heads == 0,
            "--set int, long, number, bool, string, empty string, null");
    kda_config_set(&c, "train_data_path=[a.bin, b.bin]");
    T_CHECK(c.n_train_data_path == 2 && !strcmp(c.train_data_path[0], "a.bin") &&
                !strcmp(c.train_data_path[1], "b.bin"),
            "--set train_data_path=[a.bin, b.bin]");
    kda_config_set(&c, "train_data_path=one.txt");
    T_CHECK(c.n_train_data_path == 1 && !strcmp(c.train_data_path[0], "one.txt") && !c.train_data_path[1][0],
            "--set train_data_path=one.txt (plain string = one path; old entries cleared)");
    kda_config_set(&c, "split='98,2,0'");
    T_CHECK(!strcmp(c.split, "98,2,0"), "--set split='98,2,0' (single-quoted)");
    kda_config_set(&c, "intermediate_size=0");
    kda_config_set(&c, "hidden_size=1024");
    kda_config_set(&c, "expand_v=2");
    kda_config_finalize(&c);
    T_CHECK(c.intermediate_size == 2816, "intermediate_size 0 -> FLA fallback for hidden 1024, ratio 4: %d (2816)",
            c.intermediate_size);
    kda_config_defaults(&c);
    kda_config_set(&c, "intermediate_size=0");
    kda_config_set(&c, "hidden_size=2048");
    kda_config_finalize(&c);
    T_CHECK(c.intermediate_size == 5632, "intermediate_size 0 -> hidden 2048: %d (5632)", c.intermediate_size);
}

static void test_file_errors(void) {
    DIE_LOAD("unknown key", FIX "unknown_key.yaml", FIX "unknown_key.yaml:3:1:", "'hiden_size'",
             "did you mean 'hidden_size'");
    DIE_LOAD("unknown, no hint", FIX "unknown_far.yaml", FIX "unknown_far.yaml:1:1:", "'frobnicate_the_widgets'");
    DIE_LOAD("not an integer", FIX "bad_int.yaml", FIX "bad_int.yaml:2:12:", "'num_heads'",
             "expected an integer, got 'abc'");
    DIE_LOAD("float for integer", FIX "float_for_int.yaml", FIX "float_for_int.yaml:1:14:", "'train_iters'",
             "expected an integer, got '1.5'");
    DIE_LOAD("quoted integer", FIX "quoted_int.yaml", FIX "quoted_int.yaml:1:14:", "'hidden_size'", "integer",
             "remove the quotes");
    DIE_LOAD("null for integer", FIX "null_for_int.yaml", FIX "null_for_int.yaml:1:14:", "'hidden_size'", "integer");
    DIE_LOAD("not a number", FIX "bad_number.yaml", FIX "bad_number.yaml:1:5:", "'lr'",
             "expected a number, got 'fast'");
    DIE_LOAD("not a boolean", FIX "bad_bool.yaml", FIX "bad_bool.yaml:2:7:", "'bf16'", "true or false", "'yes'");
    DIE_LOAD("duplicate key", FIX "duplicate.yaml", FIX "duplicate.yaml:3:1:", "duplicate key 'lr'", "line 1");
    DIE_LOAD("malformed YAML", FIX "malformed.yaml", FIX "malformed.yaml:2:12:", "malformed YAML",
             "mapping values are not allowed");
    DIE_LOAD("unclosed list", FIX "unclosed.yaml", FIX "unclosed.yaml:", "malformed YAML");
    DIE_LOAD("sequence document", FIX "not_mapping.yaml", FIX "not_mapping.yaml:1:1:", "mapping", "a sequence");
    DIE_LOAD("scalar document", FIX "scalar_document.yaml", FIX "scalar_document.yaml:1:1:", "mapping", "a scalar");
    DIE_LOAD("list for a number", FIX "list_for_scalar.yaml", FIX "list_for_scalar.yaml:1:5:", "'lr'", "a sequence");
    DIE_LOAD("mapping for paths", FIX "mapping_for_paths.yaml", FIX "mapping_for_paths.yaml:1:18:", "'train_data_path'",
             "a mapping");
    DIE_LOAD("hidden_act gelu", FIX "hidden_act.yaml", FIX "hidden_act.yaml:1:13:", "'hidden_act'", "swish");
    DIE_LOAD("lower_bound set", FIX "lower_bound.yaml", FIX "lower_bound.yaml:1:14:", "'lower_bound'", "null");
    DIE_LOAD("hybrid attn", FIX "attn_hybrid.yaml", FIX "attn_hybrid.yaml:2:3:", "'attn'", "must be null",
             "not supported");
    DIE_LOAD("two documents", FIX "two_documents.yaml", FIX "two_documents.yaml:3:1:", "second YAML document");
    DIE_LOAD("missing file", FIX "no_such_file.yaml", FIX "no_such_file.yaml", "No such file or directory");
    DIE_LOAD("directory", FIX, FIX, "Is a directory");
}

static void test_set_errors(void) {
    DIE_SET("--set not a number", "lr=abc", "--set lr=abc", "'lr'", "expected a number, got 'abc'");
    DIE_SET("--set not an integer", "seq_length=2k", "--set seq_length=2k", "'seq_length'", "integer");
    DIE_SET("--set out of range", "hidden_size=99999999999", "--set hidden_size=99999999999", "'hidden_size'", "range");
    DIE_SET("--set not a boolean", "bf16=on", "--set bf16=on", "'bf16'", "true or false");
    DIE_SET("--set unknown key", "hiden_size=3", "--set hiden_size=3", "did you mean 'hidden_size'");
    DIE_SET("--set without =", "hidden_size", "--set hidden_size", "key=value");
    DIE_SET("--set bad list", "train_data_path=[a, b", "--set train_data_path=[a, b", "malformed YAML");
    DIE_SET("--set too long", "split=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1",
            "--set split=", "'split'", "at most 63");
    DIE_SET("--set ignored key", "use_l2warp=true", "--set use_l2warp=true", "'use_l2warp'", "false");
    DIE_SET("--set list for int", "hidden_size=[1]", "--set hidden_size=[1]", "'hidden_size'", "a sequence");
}

static void test_finalize_errors(void) {
    DIE_FINAL("head_dim > 128", "head_dim=256", "expand_v=0.5", "head_dim", "128");
    DIE_FINAL("head_v_dim > 128", "head_dim=128", NULL, "head_v_dim", "128");
    DIE_FINAL("fractional head_v_dim", "expand_v=1.3", NULL, "expand_v", "whole number");
    DIE_FINAL("GVA", "num_v_heads=2", NULL, "num_v_heads", "GVA");
    DIE_FINAL("zero size", "hidden_size=0", NULL, "hidden_size", "[1, 65536]");
    DIE_FINAL("negative size", "num_hidden_layers=-1", NULL, "num_hidden_layers", "[1, 4096]");
    DIE_FINAL("num_threads too large", "num_threads=100000", NULL, "num_threads 100000", "[0, 1024]");
    DIE_FINAL("batch divisibility", "global_batch_size=6", NULL, "global_batch_size", "micro_batch_size");
    DIE_FINAL("no short conv", "use_short_conv=false", NULL, "use_short_conv", "true");
    DIE_FINAL("untied", "tie_word_embeddings=false", NULL, "tie_word_embeddings", "not supported");
    DIE_FINAL("neg eigval", "allow_neg_eigval=true", NULL, "allow_neg_eigval", "false");
    DIE_FINAL("safe gate", "safe_gate=true", NULL, "safe_gate", "false");
    DIE_FINAL("min_lr > lr", "min_lr=0.1", NULL, "min_lr", "lr");
    DIE_FINAL("warmup > decay", "lr_warmup_iters=400", NULL, "lr_warmup_iters", "lr_decay_iters");
    DIE_FINAL("warmup > set decay", "lr_decay_iters=100", "lr_warmup_iters=101", "lr_warmup_iters", "100");
    DIE_FINAL("decay style", "lr_decay_style=poly", NULL, "lr_decay_style", "'poly'", "cosine");
    DIE_FINAL("device", "device=tpu", NULL, "device", "'tpu'", "cuda");
    DIE_FINAL("kda_algo", "kda_algo=fast", NULL, "kda_algo", "'fast'", "recurrent");
    DIE_FINAL("data_format", "data_format=json", NULL, "data_format", "'json'", "megatron");
    DIE_FINAL("attn_mode", "attn_mode=parallel", NULL, "attn_mode", "'parallel'");
    DIE_FINAL("bos >= vocab", "bos_token_id=128256", NULL, "bos_token_id", "vocab_size");
    DIE_FINAL("eos >= vocab", "eos_token_id=128300", NULL, "eos_token_id", "vocab_size");
    DIE_FINAL("pad >= vocab", "pad_token_id=128256", NULL, "pad_token_id", "vocab_size");
    DIE_FINAL("no train data", "train_data_path=null", NULL, "train_data_path");
    DIE_FINAL("no train data []", "train_data_path=[]", NULL, "train_data_path");
    DIE_FINAL("bad split", "split=a,b", NULL, "split");
    DIE_FINAL("byte vocab", "tokenizer_type=byte", "vocab_size=100", "vocab_size", "byte");
    DIE_FINAL("adam_beta2 = 1", "adam_beta2=1", NULL, "adam_beta2");
    // and the control: a valid override does not die
    t_child ch = run_child(DO_SET_FINALIZE, "lr=1e-3", NULL);
    T_CHECK(ch.status == 0 && !ch.err[0], "control: a valid --set finalizes (exit %d)", ch.status);
}

int main(void) {
    test_defaults();
    test_tiny();
    test_tiny_bytes();
    test_300m();
    test_1b();
    test_fla_json();
    test_round_trips();
    test_set();
    test_file_errors();
    test_set_errors();
    test_finalize_errors();
    return t_done("test_config");
}
