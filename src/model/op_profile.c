// op_profile.c — see op_profile.h.
#include "model/op_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char other_ops[] = "(other ops)";

static kda_op_time *entry(kda_phase_times *t, const char *key, int phase) {
    for (int i = 0; i < t->n_op; i++)
        if (t->op[i].phase == phase && strcmp(t->op[i].name, key) == 0) return &t->op[i];
    if (t->n_op >= KDA_PROF_MAX_OPS - 1 && strcmp(key, other_ops) != 0) // the last slot gathers the rest
        return entry(t, other_ops, KDA_PHASE_OTHER);
    kda_op_time *e = &t->op[t->n_op++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", key);
    e->phase = phase;
    return e;
}

void kda_op_profile_add(kda_phase_times *t, const char *parent, const char *name, int phase, double ms, double flops) {
    char key[KDA_PROF_NAME];
    snprintf(key, sizeof key, "%s%s%s", parent ? parent : "", parent ? ": " : "", name);
    kda_op_time *e = entry(t, key, phase);
    e->ms += ms;
    e->flops += flops;
    e->calls++;
}

static int by_ms_desc(const void *a, const void *b) {
    double x = ((const kda_op_time *)a)->ms, y = ((const kda_op_time *)b)->ms;
    return (x < y) - (x > y);
}

void kda_op_profile_sort(kda_phase_times *t) { qsort(t->op, (size_t)t->n_op, sizeof t->op[0], by_ms_desc); }
