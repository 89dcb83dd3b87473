// op_profile.h — the step profile's per-op table (ops.h kda_phase_times.op), filled span by span.
//
// A backend that profiles (ops.h profile_begin / profile_end) hands each timed span here with
// its exclusive device time: spans of the same name (and, for a span inside an op, the same
// parent op) add up into one entry; kda_op_profile_sort puts the largest first. Kept apart from
// any backend so that the CPU tests check it.
#ifndef KDA_OP_PROFILE_H
#define KDA_OP_PROFILE_H

#include "model/ops.h"

// Adds ms and flops (one call) to the entry "name", or "parent: name" where parent is not NULL.
// Past KDA_PROF_MAX_OPS - 1 distinct entries, they go to a last one, "(other ops)".
void kda_op_profile_add(kda_phase_times *t, const char *parent, const char *name, int phase, double ms, double flops);
// Orders t->op by device time, largest first.
void kda_op_profile_sort(kda_phase_times *t);

#endif
