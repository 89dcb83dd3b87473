// cli_train.c — `kda train`: parse the arguments, run the training loop (train/trainer.h).
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "infer/sample.h"
#include "text/tokenizer.h"
#include "train/trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda train [CONFIG.yaml] [--set key=value]... [--device auto|cpu|cuda]\n"
            "\n"
            "Trains the model that CONFIG describes (default: the built-in tiny demo config).\n"
            "Keys use the reference recipe's names (train_iters, micro_batch_size, lr, ...) and FLA's\n"
            "KDAConfig names for the model (hidden_size, num_hidden_layers, ...); see configs/.\n"
            "  --set key=value   override one key (repeatable)\n"
            "  --device D        shorthand for --set device=D\n"
            "  --dry-run         check the memory plan, build the model, load the checkpoint named by `load` if\n"
            "                    any, print the plan (memory broken down), stop\n"
            "  --mem-plan        print the memory plan and stop, allocating nothing; with --device cuda on a\n"
            "                    machine without a GPU: the plan of the CUDA backend (free memory not checked)\n");
}

// The built-in demo trains on token files made by `kda tokenize` (`make demo` makes them);
// when they are missing, name the command that makes them.
static void demo_data_check(const kda_config *c) {
    static kda_config def;
    kda_config_defaults(&def);
    const char *p = def.train_data_path[0];
    if (strcmp(c->data_format, "megatron") || c->n_train_data_path != 1 || strcmp(c->train_data_path[0], p)) return;
    char bin[KDA_PATH_MAX + 8], idx[KDA_PATH_MAX + 8];
    snprintf(bin, sizeof bin, "%s.bin", p);
    snprintf(idx, sizeof idx, "%s.idx", p);
    if (!access(bin, R_OK) && !access(idx, R_OK)) return;
    kda_die("the demo's token files %s.bin/.idx (train_data_path) do not exist yet; make them with: ./kda tokenize "
            "--input data/tinyshakespeare.txt --text-docs block --output-prefix %s   (`make demo` runs it)",
            p, p);
}

// First pass: --help, --dry-run, the config file (so that --set applies on top of it whatever the
// order). Returns 1 when --help was printed.
static int scan_args(int argc, char **argv, const char **path, int *dry, int *plan_only) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--device")) {
            const char *opt = argv[i], *v = kda_cli_value("train", argc, argv, &i);
            if (!strcmp(opt, "--set"))
                kda_cli_set_value("train", v);
            else
                kda_cli_device("train", v);
            continue;
        }
        if (!strcmp(argv[i], "--dry-run")) {
            kda_cli_flag("train", argv[i]);
            *dry = 1;
            continue;
        }
        if (!strcmp(argv[i], "--mem-plan")) {
            kda_cli_flag("train", argv[i]);
            *plan_only = 1;
            continue;
        }
        if (argv[i][0] == '-') kda_cli_usage_error("train", "unknown option '%s'", argv[i]);
        if (*path) kda_cli_usage_error("train", "takes one config file; got '%s' and '%s'", *path, argv[i]);
        *path = argv[i];
    }
    return 0;
}

// Second pass: --set key=value and --device D, in order, over the config file's values.
static void apply_overrides(int argc, char **argv, kda_config *cfg) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--set") && strcmp(argv[i], "--device")) continue;
        if (i + 1 >= argc) kda_cli_usage_error("train", "%s needs a value", argv[i]);
        if (!strcmp(argv[i], "--set")) {
            kda_config_set(cfg, argv[i + 1]);
        } else {
            char kv[64];
            snprintf(kv, sizeof kv, "device=%s", argv[i + 1]);
            kda_config_set(cfg, kv);
        }
        i++;
    }
}

// The tokenizer of the sample after training (sample_tokens; NULL for byte-level or no sample),
// loaded before training, so that a missing or broken tokenizer_model fails at once, not after the
// last iteration. Without a sample the run needs none (its token files are made), but its
// checkpoints keep the path for export and generate: an unreadable one is a warning.
static kda_tokenizer *sample_tokenizer(const kda_config *c) {
    int byte = !strcmp(c->tokenizer_type, "byte");
    if (c->sample_tokens > 0 && !byte) {
        if (strcmp(c->tokenizer_type, "HuggingFaceTokenizer"))
            kda_die("kda train: tokenizer_type '%s' is not supported (byte | HuggingFaceTokenizer)", c->tokenizer_type);
        if (!c->tokenizer_model[0])
            kda_die("kda train: tokenizer_model is empty, and the sample after training (sample_tokens %d) needs it; "
                    "set tokenizer_model or sample_tokens=0",
                    c->sample_tokens);
        return kda_tok_load_path(c->tokenizer_model); // dies naming the file
    }
    if (!byte && c->tokenizer_model[0] && access(c->tokenizer_model, R_OK) != 0)
        fprintf(stderr,
                "kda train: warning: tokenizer_model '%s' is not readable; the checkpoints will name it, and export "
                "and generate will need --tokenizer PATH\n",
                c->tokenizer_model);
    return NULL;
}

// After training: a short text sample from the trained model (sample_tokens, rank 0 only).
static void print_sample(kda_model *m, const kda_config *c, void *tok) {
    if (c->sample_tokens > 0) kda_sample_print(m, c, tok, c->sample_prompt, c->sample_tokens, (uint64_t)c->seed);
}

int cmd_train(int argc, char **argv) {
    kda_config cfg;
    kda_config_defaults(&cfg);
    const char *path = NULL;
    int dry = 0, plan_only = 0;
    if (scan_args(argc, argv, &path, &dry, &plan_only)) return 0;
    if (path) kda_config_load(&cfg, path);
    apply_overrides(argc, argv, &cfg);
    kda_config_finalize(&cfg);
    if (!dry && !plan_only) demo_data_check(&cfg);
    kda_tokenizer *tok = plan_only ? NULL : sample_tokenizer(&cfg);
    kda_train_opts opts = {
        .config_path = path, .dry_run = dry, .plan_only = plan_only, .at_end = print_sample, .user = tok};
    kda_train(&cfg, &opts);
    kda_tok_free(tok);
    return 0;
}
