// profile.cu — the step profile of ops.h (profile_begin / profile_end): device time by phase
// and by op.
//
// While on, every op of the table (ops_cuda.cu wraps each entry with CU_PROFILED) and every
// cuBLASLt call inside an op records a CUDA event at its start and end on cu_stream. At the end
// the spans are attributed exclusively: a nested span (a GEMM inside the cross-entropy op, say)
// counts for its own phase and op entry ("lm_head_ce: GEMM TN m... n... k...") and is taken out of
// its parent's. Idle time is what lies between the top-level spans (the device waiting for the
// host). Events are pooled and reused; with profiling off a wrapped op costs one branch.
#include "backend/cuda/cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

enum { MAX_SPANS = 1 << 16, MAX_DEPTH = 8 };

struct span {
    cudaEvent_t t0, t1;
    int phase, parent;
    const char *name;
    double ms;    // its own time (cu_profile_end)
    double flops; // a GEMM span's 2·m·n·k (cu_prof_gemm_flops)
};

static span *spans;
static int n_events_made, n_spans, depth, stack[MAX_DEPTH], overflow;
static bool on;
static double gemm_flops;

static void ensure_events(int n) {
    if (!spans) spans = (span *)calloc(MAX_SPANS, sizeof *spans);
    KDA_CHECK(spans != NULL, "out of host memory for the step profile");
    for (; n_events_made < n; n_events_made++) {
        CU_CHECK(cudaEventCreate(&spans[n_events_made].t0));
        CU_CHECK(cudaEventCreate(&spans[n_events_made].t1));
    }
}

int cu_prof_push(int phase, const char *name) {
    if (!on) return -1;
    if (n_spans >= MAX_SPANS || depth >= MAX_DEPTH) {
        overflow = 1;
        return -1;
    }
    ensure_events(n_spans + 1);
    int i = n_spans++;
    spans[i].phase = phase;
    spans[i].name = name;
    spans[i].flops = 0, spans[i].ms = 0;
    spans[i].parent = depth > 0 ? stack[depth - 1] : -1;
    stack[depth++] = i;
    CU_CHECK(cudaEventRecord(spans[i].t0, cu_stream));
    return i;
}

void cu_prof_pop(int i) {
    if (i < 0) return;
    CU_CHECK(cudaEventRecord(spans[i].t1, cu_stream));
    depth--;
}

void cu_prof_gemm_flops(double flops) {
    if (!on) return;
    gemm_flops += flops;
    if (depth > 0) spans[stack[depth - 1]].flops += flops; // the GEMM's own span, pushed just before
}

void cu_profile_begin(void) {
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    on = true, n_spans = 0, depth = 0, overflow = 0, gemm_flops = 0;
}

void cu_profile_end(kda_phase_times *out) {
    on = false;
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    KDA_CHECK(!overflow, "step profile: more than %d op calls or nesting deeper than %d", MAX_SPANS, MAX_DEPTH);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n_spans; i++) { // each span's own time: its interval less its children's
        float ms = 0;
        CU_CHECK(cudaEventElapsedTime(&ms, spans[i].t0, spans[i].t1));
        spans[i].ms += ms;
        if (spans[i].parent >= 0)
            spans[spans[i].parent].ms -= ms;
        else
            out->busy_ms += ms;
    }
    for (int i = 0; i < n_spans; i++) {
        const span *s = &spans[i];
        out->ms[s->phase] += s->ms;
        kda_op_profile_add(out, s->parent >= 0 ? spans[s->parent].name : NULL, s->name, s->phase, s->ms, s->flops);
    }
    kda_op_profile_sort(out);
    if (n_spans > 0) {
        int last = 0; // the last top-level span ends last
        for (int i = 0; i < n_spans; i++)
            if (spans[i].parent < 0) last = i;
        float wall = 0;
        CU_CHECK(cudaEventElapsedTime(&wall, spans[0].t0, spans[last].t1));
        out->wall_ms = wall;
    }
    out->gemm_flops = gemm_flops;
    out->n_ops = n_spans;
}
