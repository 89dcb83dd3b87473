// main.c — the kda program: dispatch to subcommands (cli.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/version.h"
#include "cli/cli.h"
#include "cli/cli_args.h"

// OpenBLAS's own (not in every cblas.h: Debian's netlib alternative lacks it); we link -lopenblas.
char *openblas_get_corename(void);

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"train", cmd_train, "train a model from a YAML config (CPU fp32; CUDA bf16 when built)"},
    {"tokenize", cmd_tokenize, "raw text (txt/jsonl/gz/zst/parquet) to Megatron .bin/.idx token files"},
    {"encode", cmd_encode, "JSON lines of text on stdin to token ids"},
    {"decode", cmd_decode, "JSON lines of token ids on stdin to text"},
    {"export", cmd_export, "checkpoint to FLA KDAForCausalLM (config.json + model.safetensors)"},
    {"import", cmd_import, "FLA / Hugging Face folder to a kda checkpoint"},
    {"generate", cmd_generate, "text from a checkpoint with the recurrent form"},
    {"eval", cmd_eval, "lm-eval-harness-compatible scoring on local task files; validation loss"},
    {"bench", cmd_bench, "throughput and model FLOP utilisation of training steps"},
    {"plot", cmd_plot, "loss, lr and tokens/s curves of metrics files as an SVG"},
};
#define N_COMMANDS (int)(sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f) {
    fprintf(f, "usage: kda <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-9s %s\n", "help", "this list; 'kda help CMD' describes a command's options");
    fprintf(f, "  %-9s %s\n", "version", "release, git commit and CUDA architectures of this build (also --version)");
    fprintf(f, "\n'kda <command> --help' describes a command's options.\n");
}

// `kda version` (also `kda --version`): the build's one line (version.h).
static int cmd_version(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kda version   (or kda --version)\n"
                   "Prints the release, the git commit this build was made from (and whether the tree was\n"
                   "modified) and the CUDA architectures built in: the string stored in every checkpoint and in\n"
                   "the metrics header. Takes no options.\n");
            return 0;
        }
        if (argv[i][0] == '-') kda_cli_usage_error("version", "unknown option '%s'", argv[i]);
        kda_cli_usage_error("version", "takes no arguments; unexpected '%s'", argv[i]);
    }
    printf("%s\n", kda_version_string());
    return 0;
}

// OpenBLAS picks its GEMM kernels from the CPU model at load time; on virtual machines that
// report a generic model it falls back to SSE3 kernels ("Prescott"), 3-4x slower than the
// AVX2/AVX-512 ones the CPU has. OpenBLAS reads OPENBLAS_CORETYPE only at load, so when its
// choice is such a fallback, set the right core type and re-execute once.
static void fix_openblas_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("KDA_NO_REEXEC")) return;
    const char *core = openblas_get_corename();
    int generic = core &&
        (!strcasecmp(core, "prescott") || !strcasecmp(core, "core2") || !strcasecmp(core, "nehalem") ||
         !strcasecmp(core, "katmai") || !strcasecmp(core, "unknown"));
    if (!generic) return;
    __builtin_cpu_init();
    const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX"
        : __builtin_cpu_supports("avx2")                 ? "Haswell"
                                                         : NULL;
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("KDA_NO_REEXEC", "1", 1);
    execv("/proc/self/exe", argv); // returns only on failure: carry on with the slow kernels
}

int main(int argc, char **argv) {
    fix_openblas_kernels(argv);
    argv = kda_cli_split_eq(&argc, argv); // --key=value as --key value, for every command
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--version") || !strcmp(name, "version")) return cmd_version(argc - 1, argv + 1);
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        char *help_argv[] = {argv[2], "--help", NULL}; // kda help CMD = kda CMD --help
        if (!strcmp(argv[2], "version")) return cmd_version(2, help_argv);
        if (!strcmp(argv[2], "help")) {
            usage(stdout);
            return 0;
        }
        for (int i = 0; i < N_COMMANDS; i++)
            if (!strcmp(argv[2], commands[i].name) && commands[i].fn) return commands[i].fn(2, help_argv);
        fprintf(stderr, "kda: error: unknown command '%s'; 'kda help' lists the commands\n", argv[2]);
        return 2;
    }
    for (int i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, commands[i].name)) continue;
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "kda: error: unknown command '%s'; 'kda help' lists the commands\n", name);
    return 2;
}
