// plot.c — see plot.h.
#include "train/plot.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

enum { S_LOSS, S_VAL, S_LR, S_TPS, N_SERIES };
static const char *const series_key[N_SERIES] = {"loss", "val_loss", "lr", "tokens_per_s"};
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
enum { W = 960, PANEL_H = 250, TOP = 66, LEFT = 84, RIGHT = 24, GAP = 44 };

typedef struct {
    double *x, *y;
    long n, cap;
} series;

typedef struct {
    const char *label;
    series s[N_SERIES];
} run;

static void push(series *s, double x, double y) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->x = kda_realloc(s->x, s->cap * sizeof(double));
        s->y = kda_realloc(s->y, s->cap * sizeof(double));
    }
    s->x[s->n] = x, s->y[s->n] = y, s->n++;
}

static void unlink_tmp(void *path) { unlink(path); }

static void read_run(const kda_plot_input *in, run *r) {
    struct stat st;
    if (stat(in->path, &st) == 0 && S_ISDIR(st.st_mode)) kda_die("kda plot: metrics file '%s' is a folder", in->path);
    FILE *f = fopen(in->path, "r");
    if (!f) kda_die("kda plot: cannot open metrics file '%s': %s", in->path, strerror(errno));
    const char *base = strrchr(in->path, '/');
    r->label = in->label ? in->label : base ? base + 1 : in->path;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, points = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (!o || !json_is_object(o))
            kda_die("kda plot: '%s' line %ld is not a JSON object (%s)", in->path, lineno,
                    o ? "not an object" : e.text);
        json_t *it = json_object_get(o, "iteration");
        if (json_is_number(it))
            for (int k = 0; k < N_SERIES; k++) {
                json_t *v = json_object_get(o, series_key[k]);
                if (json_is_number(v) && isfinite(json_number_value(v))) {
                    push(&r->s[k], json_number_value(it), json_number_value(v));
                    points++;
                }
            }
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (!points)
        kda_die("kda plot: '%s' has no rows with \"iteration\" and any of loss, val_loss, lr, tokens_per_s", in->path);
}

// A 1-2-5 step giving about 'want' ticks over [lo, hi].
static double nice_step(double lo, double hi, int want) {
    double raw = (hi - lo) / want, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void fmt_num(char *b, size_t n, double v, double step) {
    if (v == 0)
        snprintf(b, n, "0");
    else if (fabs(v) < 1e-3 || fabs(v) >= 1e6)
        snprintf(b, n, "%.3g", v);
    else if (step >= 1)
        snprintf(b, n, "%.0f", v);
    else
        snprintf(b, n, "%.*f", (int)ceil(-log10(step)), v);
}

typedef struct {
    double x0, x1, y0, y1;
    int top;
} frame;

static double px(const frame *fr, double x) { return LEFT + (x - fr->x0) / (fr->x1 - fr->x0) * (W - LEFT - RIGHT); }
static double py(const frame *fr, double y) { return fr->top + PANEL_H - (y - fr->y0) / (fr->y1 - fr->y0) * PANEL_H; }

static void axes(FILE *o, const frame *fr, const char *title, const char *ylabel) {
    fprintf(o, "<g class=\"panel\" id=\"%s\">\n<text x=\"%d\" y=\"%d\" class=\"title\">%s</text>\n", ylabel, LEFT,
            fr->top - 10, title);
    fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", LEFT, fr->top,
            W - LEFT - RIGHT, PANEL_H);
    double xs = nice_step(fr->x0, fr->x1, 8), ys = nice_step(fr->y0, fr->y1, 5);
    char b[32];
    for (double x = ceil(fr->x0 / xs) * xs; x <= fr->x1 + 1e-9 * xs; x += xs) {
        fmt_num(b, sizeof b, x, xs);
        fprintf(o, "<line class=\"xtick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>", px(fr, x),
                fr->top, px(fr, x), fr->top + PANEL_H);
        fprintf(o, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", px(fr, x), fr->top + PANEL_H + 16,
                b);
    }
    for (double y = ceil(fr->y0 / ys) * ys; y <= fr->y1 + 1e-9 * ys; y += ys) {
        fmt_num(b, sizeof b, y, ys);
        fprintf(o, "<line class=\"ytick\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>", LEFT,
                py(fr, y), W - RIGHT, py(fr, y));
        fprintf(o, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", LEFT - 6, py(fr, y) + 4, b);
    }
    fprintf(
        o, "<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\" text-anchor=\"middle\" class=\"label\">%s</text>\n",
        18, fr->top + PANEL_H / 2, 18, fr->top + PANEL_H / 2, ylabel);
    fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"label\">iteration</text>\n",
            (LEFT + W - RIGHT) / 2, fr->top + PANEL_H + 34);
}

static long polyline(FILE *o, const frame *fr, const series *s, const char *color, const char *cls, const char *dash) {
    if (s->n == 0) return 0;
    fprintf(o, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", cls, color, dash);
    for (long i = 0; i < s->n; i++) fprintf(o, "%s%.1f,%.1f", i ? " " : "", px(fr, s->x[i]), py(fr, s->y[i]));
    fprintf(o, "\"/>\n");
    return s->n;
}

static void xml_text(FILE *o, const char *s) {
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", o);
        else if (*s == '>')
            fputs("&gt;", o);
        else if (*s == '&')
            fputs("&amp;", o);
        else if (*s == '"')
            fputs("&quot;", o);
        else
            fputc(*s, o);
    }
}

long kda_plot_svg(const kda_plot_input *in, int n, const char *out_path, const char *title) {
    KDA_CHECK(n >= 1, "kda plot: no metrics files");
    run *r = kda_calloc(n, sizeof *r);
    for (int i = 0; i < n; i++) read_run(&in[i], &r[i]);
    static const int panel_series[3][2] = {{S_LOSS, S_VAL}, {S_LR, -1}, {S_TPS, -1}};
    static const char *const names[3][2] = {
        {"loss (solid: training, dashed: validation)", "loss"}, {"learning rate", "lr"}, {"throughput", "tokens/s"}};
    double gx0 = INFINITY, gx1 = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < N_SERIES; k++)
            for (long j = 0; j < r[i].s[k].n; j++) gx0 = fmin(gx0, r[i].s[k].x[j]), gx1 = fmax(gx1, r[i].s[k].x[j]);
    if (gx1 <= gx0) gx1 = gx0 + 1;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
    FILE *o = fopen(tmp, "w");
    if (!o) kda_die("kda plot: cannot write '%s': %s", tmp, strerror(errno));
    kda_on_die(unlink_tmp, tmp); // a failed write or rename leaves no OUT.tmp behind
    int H = TOP + 3 * (PANEL_H + GAP + 20) + 20 + 18 * n;
    fprintf(o,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(o,
            "<style>.title{font-weight:bold;font-size:14px}.label{fill:#333}</style>\n<rect width=\"100%%\" "
            "height=\"100%%\" fill=\"white\"/>\n<text x=\"%d\" y=\"24\" class=\"title\">",
            LEFT);
    xml_text(o, title ? title : "kda training curves");
    fprintf(o, "</text>\n");
    long drawn = 0;
    for (int p = 0; p < 3; p++) {
        frame fr = {gx0, gx1, INFINITY, -INFINITY, TOP + p * (PANEL_H + GAP + 20)};
        for (int i = 0; i < n; i++)
            for (int q = 0; q < 2; q++) {
                int k = panel_series[p][q];
                if (k < 0) continue;
                for (long j = 0; j < r[i].s[k].n; j++)
                    fr.y0 = fmin(fr.y0, r[i].s[k].y[j]), fr.y1 = fmax(fr.y1, r[i].s[k].y[j]);
            }
        if (!(fr.y1 >= fr.y0)) fr.y0 = 0, fr.y1 = 1; // no data in this panel
        double pad = (fr.y1 - fr.y0) * 0.05;
        if (pad == 0) pad = fabs(fr.y1) * 0.05 + 1e-12;
        fr.y0 -= pad, fr.y1 += pad;
        axes(o, &fr, names[p][0], names[p][1]);
        for (int i = 0; i < n; i++)
            for (int q = 0; q < 2; q++) {
                int k = panel_series[p][q];
                if (k >= 0)
                    drawn += polyline(o, &fr, &r[i].s[k], palette[i % 8], series_key[k],
                                      k == S_VAL ? " stroke-dasharray=\"6,4\"" : "");
            }
        fprintf(o, "</g>\n");
    }
    int ly = TOP + 3 * (PANEL_H + GAP + 20) + 4;
    for (int i = 0; i < n; i++) {
        fprintf(
            o,
            "<g class=\"legend\"><rect x=\"%d\" y=\"%d\" width=\"18\" height=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
            LEFT, ly + 18 * i - 4, palette[i % 8], LEFT + 26, ly + 18 * i + 1);
        xml_text(o, r[i].label);
        fprintf(o, "</text></g>\n");
    }
    fprintf(o, "</svg>\n");
    if (fclose(o) != 0) kda_die("kda plot: cannot write '%s': %s", tmp, strerror(errno));
    if (rename(tmp, out_path) != 0) kda_die("kda plot: cannot rename '%s' to '%s': %s", tmp, out_path, strerror(errno));
    kda_on_die_remove(unlink_tmp, tmp);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < N_SERIES; k++) free(r[i].s[k].x), free(r[i].s[k].y);
    free(r);
    return drawn;
}
