// cli_args.h — the one set of command-line helpers every kda command uses, so that all follow one
// rule: usage errors (unknown option, missing or malformed value, a missing or extra argument,
// options that do not go together) exit 2, other errors exit 1 (kda_die), every message starts
// "kda: error: "; "--key=value" works as "--key value", and "--flag=value" is refused for an
// option that takes no value. Every option a parser accepts is listed in its usage text
// (tests/cli/test_cli_conventions.sh derives the options from these sources and checks).
#ifndef KDA_CLI_ARGS_H
#define KDA_CLI_ARGS_H
#include "base/common.h"

// "kda: error: kda CMD: <message> (see 'kda CMD --help')" on stderr, exit 2.
KDA_NORETURN void kda_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A whole number in [lo, hi] for option OPT of command CMD, else a usage error naming both.
long kda_cli_long(const char *cmd, const char *opt, const char *v, long lo, long hi);
// A finite number for option OPT, else a usage error.
double kda_cli_double(const char *cmd, const char *opt, const char *v);
// 1 when A is one of the NULL-terminated LIST.
int kda_cli_one_of(const char *a, const char *const *list);
// The value of option argv[*i]: the next argument (advancing *i), else a usage error.
const char *kda_cli_value(const char *cmd, int argc, char **argv, int *i);
// For an option that takes no value: a usage error when it was written "--flag=value".
void kda_cli_flag(const char *cmd, const char *arg);
// The value of --set: "key=value" (the key non-empty), else a usage error. Returns v.
const char *kda_cli_set_value(const char *cmd, const char *v);
// The value of --device: auto, cpu or cuda, else a usage error. Returns v.
const char *kda_cli_device(const char *cmd, const char *v);
// Rewrites "--key=value" as "--key" "value" (argv[1..]); main.c calls it once for every command.
// Returns the new argv (argc updated); the strings are never freed (they live for the process).
char **kda_cli_split_eq(int *argc, char **argv);
#endif
