// cli_args.c — shared command-line helpers (cli_args.h).
#include "cli/cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kda_cli_usage_error(const char *cmd, const char *fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kda: error: kda %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'kda %s --help')\n", cmd);
    va_end(ap);
    exit(2);
}

long kda_cli_long(const char *cmd, const char *opt, const char *v, long lo, long hi) {
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        kda_cli_usage_error(cmd, "%s '%s' must be a whole number in [%ld, %ld]", opt, v, lo, hi);
    return x;
}

double kda_cli_double(const char *cmd, const char *opt, const char *v) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x)) kda_cli_usage_error(cmd, "%s '%s' must be a number", opt, v);
    return x;
}

int kda_cli_one_of(const char *a, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(a, *list)) return 1;
    return 0;
}

const char *kda_cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) kda_cli_usage_error(cmd, "%s needs a value", argv[*i]);
    return argv[++*i];
}

const char *kda_cli_set_value(const char *cmd, const char *v) {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v) kda_cli_usage_error(cmd, "--set '%s' must be key=value (e.g. --set lr=3e-4)", v);
    return v;
}

const char *kda_cli_device(const char *cmd, const char *v) {
    static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
    if (!kda_cli_one_of(v, devices)) kda_cli_usage_error(cmd, "--device '%s': use auto, cpu or cuda", v);
    return v;
}

// the "--key" strings kda_cli_split_eq made from "--key=value" (compared by address)
static char **eq_keys;
static int n_eq_keys;

void kda_cli_flag(const char *cmd, const char *arg) {
    for (int i = 0; i < n_eq_keys; i++)
        if (eq_keys[i] == arg) kda_cli_usage_error(cmd, "%s takes no value (remove the '=...')", arg);
}

char **kda_cli_split_eq(int *argc, char **argv) {
    int n = *argc, extra = 0;
    for (int i = 1; i < n; i++)
        if (!strncmp(argv[i], "--", 2) && argv[i][2] && strchr(argv[i], '=')) extra++;
    if (!extra) return argv;
    char **out = kda_calloc((size_t)(n + extra + 1), sizeof(char *));
    eq_keys = kda_calloc((size_t)extra, sizeof(char *));
    int m = 0;
    for (int i = 0; i < n; i++) {
        char *eq = i > 0 && !strncmp(argv[i], "--", 2) && argv[i][2] ? strchr(argv[i], '=') : NULL;
        if (!eq) {
            out[m++] = argv[i];
            continue;
        }
        size_t k = (size_t)(eq - argv[i]);
        char *key = kda_malloc(k + 1);
        memcpy(key, argv[i], k);
        key[k] = 0;
        eq_keys[n_eq_keys++] = key;
        out[m++] = key;
        out[m++] = eq + 1;
    }
    out[m] = NULL;
    *argc = m;
    return out;
}
