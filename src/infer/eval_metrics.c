// eval_metrics.c — acc, acc_norm and their standard errors as lm-eval computes them (see eval.h).
#include <math.h>
#include <stdlib.h>

#include "base/common.h"
#include "infer/eval.h"

int kda_eval_argmax(const double *x, int n) {
    int b = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i])) return i; // numpy's argmax: the first NaN wins
        if (x[i] > x[b]) b = i;
    }
    return b;
}

double kda_eval_mean_stderr(const double *x, int n) {
    if (n < 2) return NAN;
    double mu = 0, ss = 0;
    for (int i = 0; i < n; i++) mu += x[i];
    mu /= n;
    for (int i = 0; i < n; i++) ss += (x[i] - mu) * (x[i] - mu);
    return sqrt(ss / (n - 1)) / sqrt((double)n);
}

// lm-eval's pooled_sample_stderr: sqrt(sum((n_i - 1) * se_i^2 * n_i) / (N - k) / N)
double kda_eval_pooled_stderr(const double *se, const int *sizes, int n) {
    double num = 0, N = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(se[i])) return NAN;
        num += (sizes[i] - 1.0) * se[i] * se[i] * sizes[i];
        N += sizes[i];
    }
    if (N - n <= 0) return NAN;
    return sqrt(num / (N - n) / N);
}

void kda_eval_task_metrics(const kda_eval_task *t, kda_eval_metrics *m) {
    int n = t->n_items;
    double *acc = kda_malloc(sizeof(double) * (size_t)(n ? n : 1)),
           *norm = kda_malloc(sizeof(double) * (size_t)(n ? n : 1));
    double sa = 0, sn = 0;
    for (int i = 0; i < n; i++) {
        const kda_eval_item *it = &t->items[i];
        double *scaled = kda_malloc(sizeof(double) * (size_t)it->n);
        for (int c = 0; c < it->n; c++) scaled[c] = it->ll[c] / it->choice_len[c];
        acc[i] = kda_eval_argmax(it->ll, it->n) == it->gold;
        norm[i] = kda_eval_argmax(scaled, it->n) == it->gold;
        free(scaled);
        sa += acc[i];
        sn += norm[i];
    }
    m->n = n;
    m->acc = n ? sa / n : NAN;
    m->acc_norm = n ? sn / n : NAN;
    m->acc_stderr = kda_eval_mean_stderr(acc, n);
    m->acc_norm_stderr = kda_eval_mean_stderr(norm, n);
    free(acc);
    free(norm);
}
