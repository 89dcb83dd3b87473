// cli_plot.c — `kda plot`: training curves of one or more metrics files as an SVG (train/plot.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/run_guard.h"
#include "base/common.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "train/plot.h"

static void plot_usage(FILE *f) {
    fprintf(f,
            "usage: kda plot METRICS.jsonl[=LABEL]... -o OUT.svg [--title TEXT]\n"
            "Draws loss (training solid, validation dashed), learning rate and tokens/s against iterations\n"
            "from metrics JSON lines (kda train's metrics file, or another trainer's log with the keys\n"
            "iteration, loss, val_loss, lr, tokens_per_s), one colour per file, as one SVG file.\n"
            "  -o, --output FILE   the SVG to write (required)\n"
            "  --title TEXT        the heading (default: kda training curves)\n"
            "  FILE=LABEL          the legend text for FILE (default: its file name)\n");
}

int cmd_plot(int argc, char **argv) {
    kda_plot_input in[16];
    int n = 0;
    const char *out = NULL, *title = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            plot_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--title")) {
            const char *v = kda_cli_value("plot", argc, argv, &i);
            if (!strcmp(a, "--title"))
                title = v;
            else
                out = v;
        } else if (a[0] == '-' && a[1]) {
            kda_cli_usage_error("plot", "unknown option '%s'", a);
        } else {
            if (n == 16) kda_cli_usage_error("plot", "at most 16 metrics files");
            char *copy = kda_strdup(a), *eq = strchr(copy, '=');
            if (eq) *eq = 0;
            in[n].path = copy, in[n].label = eq ? eq + 1 : NULL;
            n++;
        }
    }
    if (!n) kda_cli_usage_error("plot", "no metrics files given");
    if (!out) kda_cli_usage_error("plot", "no output file (-o OUT.svg)");
    kda_guard_file("-o", out); // not a folder; its folder writable
    for (int i = 0; i < n; i++) kda_guard_not_input("-o", out, in[i].path);
    long pts = kda_plot_svg(in, n, out, title);
    printf("kda plot: %ld points from %d file%s -> %s\n", pts, n, n > 1 ? "s" : "", out);
    for (int i = 0; i < n; i++) free((char *)in[i].path);
    return 0;
}
