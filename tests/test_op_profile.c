// test_op_profile.c — the step profile's per-op table (model/op_profile.h): spans of one name add
// up, a span inside an op is its own entry under "parent: name", the same name in two phases
// stays two entries, the table comes out largest first, and past KDA_PROF_MAX_OPS - 1 entries the
// rest is gathered in "(other ops)" with nothing lost.
#include <string.h>

#include "model/op_profile.h"
#include "test_util.h"

static const kda_op_time *find(const kda_phase_times *t, const char *name, int phase) {
    for (int i = 0; i < t->n_op; i++)
        if (t->op[i].phase == phase && strcmp(t->op[i].name, name) == 0) return &t->op[i];
    return NULL;
}

int main(void) {
    kda_phase_times t;
    memset(&t, 0, sizeof t);
    kda_op_profile_add(&t, NULL, "rmsnorm_fwd", KDA_PHASE_OTHER, 1.0, 0);
    kda_op_profile_add(&t, NULL, "linear_fwd", KDA_PHASE_GEMM, 0.25, 0);
    kda_op_profile_add(&t, "linear_fwd", "GEMM", KDA_PHASE_GEMM, 5.0, 2e12);
    kda_op_profile_add(&t, NULL, "rmsnorm_fwd", KDA_PHASE_OTHER, 2.0, 0);
    kda_op_profile_add(&t, "lm_head_ce", "GEMM", KDA_PHASE_GEMM, 3.0, 1e12);
    kda_op_profile_add(&t, "lm_head_ce", "GEMM", KDA_PHASE_GEMM, 1.0, 0.5e12);
    kda_op_profile_add(&t, NULL, "lm_head_ce", KDA_PHASE_CE, 0.5, 0);
    kda_op_profile_add(&t, NULL, "rmsnorm_fwd", KDA_PHASE_KDA, 0.125, 0); // same name, another phase
    kda_op_profile_sort(&t);
    T_CHECK(t.n_op == 6, "6 entries (%d)", t.n_op);
    const kda_op_time *rn = find(&t, "rmsnorm_fwd", KDA_PHASE_OTHER);
    T_CHECK(rn && rn->ms == 3.0 && rn->calls == 2, "rmsnorm_fwd: two calls add up to 3 ms");
    const kda_op_time *lg = find(&t, "linear_fwd: GEMM", KDA_PHASE_GEMM);
    T_CHECK(lg && lg->ms == 5.0 && lg->calls == 1 && lg->flops == 2e12,
            "the GEMM inside linear_fwd is \"linear_fwd: GEMM\", with its FLOPs");
    const kda_op_time *hg = find(&t, "lm_head_ce: GEMM", KDA_PHASE_GEMM), *hc = find(&t, "lm_head_ce", KDA_PHASE_CE);
    T_CHECK(hg && hc && hg->ms == 4.0 && hg->flops == 1.5e12 && hc->flops == 0,
            "the head's GEMM (two calls: 4 ms, 1.5 TFLOP) and its own time are two entries");
    T_CHECK(find(&t, "rmsnorm_fwd", KDA_PHASE_KDA) && find(&t, "rmsnorm_fwd", KDA_PHASE_KDA)->ms == 0.125,
            "the same name in another phase is its own entry");
    int sorted = 1;
    for (int i = 1; i < t.n_op; i++) sorted &= t.op[i - 1].ms >= t.op[i].ms;
    T_CHECK(sorted && strcmp(t.op[0].name, "linear_fwd: GEMM") == 0, "largest first (%s first)", t.op[0].name);

    // more distinct names than slots: the surplus lands in "(other ops)", the total is kept
    memset(&t, 0, sizeof t);
    double total = 0;
    int n_names = KDA_PROF_MAX_OPS + 10;
    for (int i = 0; i < n_names; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "op%d", i);
        kda_op_profile_add(&t, NULL, nm, KDA_PHASE_OTHER, 1.0 + i, 0);
        total += 1.0 + i;
    }
    kda_op_profile_sort(&t);
    double sum = 0;
    for (int i = 0; i < t.n_op; i++) sum += t.op[i].ms;
    const kda_op_time *o = find(&t, "(other ops)", KDA_PHASE_OTHER);
    T_CHECK(t.n_op == KDA_PROF_MAX_OPS, "the table holds %d entries (%d)", KDA_PROF_MAX_OPS, t.n_op);
    T_CHECK(o && o->calls == n_names - (KDA_PROF_MAX_OPS - 1), "(other ops) holds the %d surplus calls (%ld)",
            n_names - (KDA_PROF_MAX_OPS - 1), o ? o->calls : -1L);
    T_CHECK(sum == total, "no time lost (%.1f of %.1f ms)", sum, total);
    T_CHECK(strcmp(t.op[0].name, "(other ops)") == 0, "the surplus, the largest, sorts first");

    return t_done("test_op_profile");
}
