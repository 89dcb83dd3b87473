// mem_plan.c — the memory plan of a training run and its check (mem_plan.h).
#include "model/mem_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

static const double GiB = 1073741824.0;

void kda_mem_plan_compute(kda_mem_plan *p, const kda_config *c, const kda_ops *ops, int B, int T) {
    memset(p, 0, sizeof *p);
    p->B = B;
    p->T = T;
    p->host_memory = ops->host_memory;
    kda_model_mem_of(c, ops, B, T, &p->model);
    if (ops->scratch_bytes) {
        kda_step_shape s = kda_model_step_shape(c, B, T);
        ops->scratch_bytes(&s, &p->scratch_held, &p->scratch_transient);
    }
    p->backend = p->model.total + p->model.optim + p->scratch_held + p->scratch_transient;
    p->host_staging = p->model.n_alloc * sizeof(float); // checkpoint.c's and kda_model_init's host copy
}

size_t kda_mem_plan_backend_need(const kda_mem_plan *p) { return p->backend + (p->host_memory ? p->host_staging : 0); }
size_t kda_mem_plan_host_need(const kda_mem_plan *p) { return p->host_memory ? 0 : p->host_staging; }

size_t kda_mem_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

void kda_mem_available(const kda_ops *ops, kda_mem_avail *a) {
    memset(a, 0, sizeof *a);
    a->host = kda_mem_host_available();
    if (!ops->host_memory && ops->mem_info) {
        size_t used = 0, total = 0;
        ops->mem_info(&used, &total);
        if (total && used <= total) a->dev_free = total - used, a->dev_total = total;
    }
}

// The side that does not fit: backend memory (0) or the host's share of a device run (1); -1: fits.
static int short_side(const kda_mem_plan *p, const kda_mem_avail *a) {
    size_t have = p->host_memory ? a->host : a->dev_total ? a->dev_free : 0;
    int have_known = p->host_memory ? a->host > 0 : a->dev_total > 0;
    if (have_known && kda_mem_plan_backend_need(p) > have) return 0;
    if (!p->host_memory && a->host && p->host_staging > a->host) return 1;
    return -1;
}

int kda_mem_plan_fits(const kda_mem_plan *p, const kda_mem_avail *a) { return short_side(p, a) < 0; }

static const char *bytes_str(char *buf, size_t n, size_t bytes) {
    if (bytes >= (size_t)1 << 30)
        snprintf(buf, n, "%.2f GiB", bytes / GiB);
    else
        snprintf(buf, n, "%.1f MiB", bytes / 1048576.0);
    return buf;
}

static const char *granularity(const kda_config *c) {
    return c->recompute_granularity[0] ? c->recompute_granularity : "none";
}

const char *kda_mem_plan_summary(char *buf, size_t n, const kda_mem_plan *p, const kda_mem_avail *a) {
    const kda_model_mem *m = &p->model;
    char t[32], s1[32], s2[32], s3[32], h[32];
    size_t have = p->host_memory ? a->host : a->dev_total ? a->dev_free : 0;
    size_t state = m->params + m->grads + m->optim + (p->host_memory ? p->host_staging : 0);
    int k = snprintf(buf, n, "%s on the %s (parameter state %s, activations %s, scratch %s)",
                     bytes_str(t, sizeof t, kda_mem_plan_backend_need(p)), p->host_memory ? "host" : "GPU",
                     bytes_str(s1, sizeof s1, state), bytes_str(s2, sizeof s2, m->total - m->params - m->grads),
                     bytes_str(s3, sizeof s3, p->scratch_held + p->scratch_transient));
    if (have && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " of %s %s", bytes_str(h, sizeof h, have),
                 p->host_memory ? "available" : "free");
    return buf;
}

void kda_mem_plan_print(FILE *f, const char *prefix, const kda_mem_plan *p, const kda_mem_avail *a) {
    const kda_model_mem *m = &p->model;
    char b[32], b2[32], b3[32], b4[32], b5[32];
    int work = m->params > m->n_alloc * sizeof(float);
    fprintf(f, "%s  parameters        %10s  fp32 masters%s: %zu floats (the tied embedding %.1f%%)\n", prefix,
            bytes_str(b, sizeof b, m->params), work ? " and the working copy" : "", m->n_floats,
            100.0 * m->embed_floats / (m->n_floats ? m->n_floats : 1));
    fprintf(f, "%s  gradients         %10s  fp32\n", prefix, bytes_str(b, sizeof b, m->grads));
    fprintf(f, "%s  AdamW moments     %10s  fp32 m and v\n", prefix, bytes_str(b, sizeof b, m->optim));
    fprintf(f,
            "%s  layer activations %10s  kept for the backward, all layers: the KDA core's saved %s, recomputed "
            "(one buffer for all layers) %s\n",
            prefix, bytes_str(b, sizeof b, m->acts_layers), bytes_str(b2, sizeof b2, m->acts_core),
            bytes_str(b3, sizeof b3, m->acts_shared));
    fprintf(f, "%s  head activations  %10s  final hidden state, its norm, the residual stream's gradient\n", prefix,
            bytes_str(b, sizeof b, m->acts_head));
    fprintf(f, "%s  backward scratch  %10s  shared by the layers\n", prefix, bytes_str(b, sizeof b, m->grad_scratch));
    fprintf(f, "%s  token ids         %10s  ids and targets\n", prefix, bytes_str(b, sizeof b, m->tokens));
    fprintf(f,
            "%s  backend scratch   %10s  held (cross-entropy logits chunk, partial sums), %s transient (workspaces)\n",
            prefix, bytes_str(b, sizeof b, p->scratch_held), bytes_str(b2, sizeof b2, p->scratch_transient));
    if (p->host_memory)
        fprintf(f, "%s  staging           %10s  one fp32 copy of the parameters (init, checkpoints)\n", prefix,
                bytes_str(b, sizeof b, p->host_staging));
    size_t need = kda_mem_plan_backend_need(p);
    if (p->host_memory) {
        if (a->host)
            fprintf(f, "%s  total             %10s  of %s available on the host (MemAvailable): %s, %.0f%%\n", prefix,
                    bytes_str(b, sizeof b, need), bytes_str(b2, sizeof b2, a->host),
                    need <= a->host ? "fits" : "does NOT fit", 100.0 * need / a->host);
        else
            fprintf(f, "%s  total             %10s  (available host memory unknown: not checked)\n", prefix,
                    bytes_str(b, sizeof b, need));
        return;
    }
    if (a->dev_total)
        fprintf(f,
                "%s  total on the GPU  %10s  of %s free (%s in use before the run, %s total): %s, %.0f%%; "
                "peak in use expected %s\n",
                prefix, bytes_str(b, sizeof b, need), bytes_str(b2, sizeof b2, a->dev_free),
                bytes_str(b3, sizeof b3, a->dev_total - a->dev_free), bytes_str(b4, sizeof b4, a->dev_total),
                need <= a->dev_free ? "fits" : "does NOT fit", 100.0 * need / (a->dev_free ? a->dev_free : 1),
                bytes_str(b5, sizeof b5, need + (a->dev_total - a->dev_free)));
    else
        fprintf(f,
                "%s  total on the GPU  %10s  (no device here: free memory not checked; in use before a run, not "
                "planned: the CUDA context and cuBLASLt workspace, ~0.5 GiB on an H200)\n",
                prefix, bytes_str(b, sizeof b, need));
    fprintf(f, "%s  host              %10s  one fp32 copy of the parameters (init, checkpoints)%s%s\n", prefix,
            bytes_str(b, sizeof b, p->host_staging), a->host ? ", of " : "",
            a->host ? bytes_str(b2, sizeof b2, a->host) : "");
}

// ---- the check and its suggestions --------------------------------------------------------------

typedef struct {
    const kda_config *c;
    const kda_ops *ops;
    const kda_mem_avail *a;
} fit_ctx;

// Plans c with micro-batch B x T and recompute_granularity g (NULL: c's); 1 when it fits.
static int fits_with(const fit_ctx *x, const char *g, int B, int T, size_t *need) {
    kda_config c = *x->c;
    if (g && strcmp(g, granularity(x->c))) { // another granularity: its default modules
        snprintf(c.recompute_granularity, sizeof c.recompute_granularity, "%s", strcmp(g, "none") ? g : "");
        c.n_recompute_modules = 0;
    }
    kda_mem_plan p;
    kda_mem_plan_compute(&p, &c, x->ops, B, T);
    if (need) *need = kda_mem_plan_backend_need(&p);
    return kda_mem_plan_fits(&p, x->a);
}

// The largest micro_batch_size below B that divides global_batch_size and fits with granularity
// g; 0 when none does. The plan grows with B, so a binary search over the divisors.
static int largest_micro_batch(const fit_ctx *x, const char *g, int B, size_t *need) {
    int G = x->c->global_batch_size, nd = 0, div[4096];
    for (int b = 1; b < B && nd < 4096; b++) // divisors of G below B, ascending
        if (G % b == 0) div[nd++] = b;
    int lo = 0, hi = nd - 1, best = 0;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (fits_with(x, g, div[mid], x->c->seq_length, NULL))
            best = div[mid], lo = mid + 1;
        else
            hi = mid - 1;
    }
    if (best) fits_with(x, g, best, x->c->seq_length, need);
    return best;
}

// The longest seq_length below T that fits at micro-batch B with granularity g; 0 when none.
static int longest_seq(const fit_ctx *x, const char *g, int B, int T) {
    int lo = 1, hi = T - 1, best = 0;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (fits_with(x, g, B, mid, NULL))
            best = mid, lo = mid + 1;
        else
            hi = mid - 1;
    }
    return best;
}

// The message kda_mem_plan_check dies with, written in pieces (what does not fit is cut).
typedef struct {
    char s[4096];
    int n;
} msg_buf;

static void KDA_PRINTF(2, 3) say(msg_buf *m, const char *fmt, ...) {
    if (m->n >= (int)sizeof m->s) return;
    va_list ap;
    va_start(ap, fmt);
    m->n += vsnprintf(m->s + m->n, sizeof m->s - (size_t)m->n, fmt, ap);
    va_end(ap);
}

// What is needed where, and what is available there; side 1: the host's copy of a device run.
static void say_need(msg_buf *msg, const kda_mem_plan *p, const kda_mem_avail *a, int side) {
    char b1[32], b2[32], b3[32];
    size_t need = side ? p->host_staging : kda_mem_plan_backend_need(p);
    if (side == 1)
        say(msg,
            "the run needs %s of host memory for a copy of the parameters (init, checkpoints) but the host has %s "
            "available (MemAvailable)",
            bytes_str(b1, sizeof b1, need), bytes_str(b2, sizeof b2, a->host));
    else if (p->host_memory)
        say(msg, "the run needs %s of memory but the host has %s available (MemAvailable)",
            bytes_str(b1, sizeof b1, need), bytes_str(b2, sizeof b2, a->host));
    else
        say(msg, "the run needs %s of GPU memory but %s are free (of %s)", bytes_str(b1, sizeof b1, need),
            bytes_str(b2, sizeof b2, a->dev_free), bytes_str(b3, sizeof b3, a->dev_total));
}

// The plan's three parts: activations, parameter state, backend scratch.
typedef struct {
    size_t acts, state, scratch;
} plan_parts;

static plan_parts parts_of(const kda_mem_plan *p) {
    const kda_model_mem *m = &p->model;
    plan_parts x = {.acts = m->acts_layers + m->acts_head + m->grad_scratch + m->tokens,
                    .state = m->params + m->grads + m->optim + (p->host_memory ? p->host_staging : 0),
                    .scratch = p->scratch_held + p->scratch_transient};
    return x;
}

// The parts, largest first, with what each scales with (backend memory short) or the parameter
// floats (the host's copy short).
static void say_parts(msg_buf *msg, const kda_config *c, const kda_mem_plan *p, int side) {
    const kda_model_mem *m = &p->model;
    if (side != 0) {
        say(msg, " (%zu parameter floats: embedding %.0f%%, layers %.0f%%).", m->n_floats,
            100.0 * m->embed_floats / m->n_floats, 100.0 - 100.0 * m->embed_floats / m->n_floats);
        return;
    }
    plan_parts x = parts_of(p);
    char b1[32];
    struct {
        size_t bytes;
        char what[256];
    } part[3];
    snprintf(part[0].what, sizeof part[0].what,
             "activations %s (micro_batch_size %d x seq_length %d tokens, %d layers, recompute_granularity %s)",
             bytes_str(b1, sizeof b1, x.acts), p->B, p->T, c->num_hidden_layers, granularity(c));
    part[0].bytes = x.acts;
    snprintf(part[1].what, sizeof part[1].what,
             "parameters, gradients and AdamW %s (%zu parameter floats: embedding %.0f%%, layers %.0f%%)",
             bytes_str(b1, sizeof b1, x.state), m->n_floats, 100.0 * m->embed_floats / m->n_floats,
             100.0 - 100.0 * m->embed_floats / m->n_floats);
    part[1].bytes = x.state;
    snprintf(part[2].what, sizeof part[2].what,
             "backend scratch %s (cross-entropy logits chunk, partial sums, workspaces)",
             bytes_str(b1, sizeof b1, x.scratch));
    part[2].bytes = x.scratch;
    for (int i = 0; i < 3; i++) // largest first
        for (int j = i + 1; j < 3; j++)
            if (part[j].bytes > part[i].bytes) {
                size_t tb = part[i].bytes;
                char tw[256];
                memcpy(tw, part[i].what, sizeof tw);
                part[i].bytes = part[j].bytes, memcpy(part[i].what, part[j].what, sizeof tw);
                part[j].bytes = tb, memcpy(part[j].what, tw, sizeof tw);
            }
    say(msg, ": %s, %s, %s.", part[0].what, part[1].what, part[2].what);
}

// The settings with which backend memory would fit, each planned: the current recompute_granularity
// and the ones that recompute more, each at the largest micro_batch_size that fits; else the
// longest seq_length at micro-batch 1 with full recomputation. Returns how many were found.
static int say_fitting_settings(msg_buf *msg, const fit_ctx *x, const kda_mem_plan *p) {
    const kda_config *c = x->c;
    char b1[32];
    const char *cur = granularity(c);
    const char *opts[3] = {cur, NULL, NULL};
    int no = 1, found = 0;
    if (!strcmp(cur, "none")) opts[no++] = "selective";
    if (strcmp(cur, "full")) opts[no++] = "full";
    for (int i = 0; i < no; i++) {
        size_t nb = 0;
        int same = i == 0, b = 0;
        if (!same && fits_with(x, opts[i], p->B, p->T, &nb))
            b = p->B;
        else
            b = largest_micro_batch(x, opts[i], p->B, &nb);
        if (!b) continue;
        say(msg, "%s", found ? "; or " : " It fits with ");
        if (!same) say(msg, "recompute_granularity: %s%s", opts[i], b == p->B ? "" : " and ");
        if (b != p->B) say(msg, "micro_batch_size %d", b);
        say(msg, " (%s", bytes_str(b1, sizeof b1, nb));
        if (b != p->B)
            say(msg, "; global_batch_size %d in %d micro-batches", c->global_batch_size, c->global_batch_size / b);
        say(msg, ")");
        found++;
    }
    if (found) return found;
    int t = longest_seq(x, "full", 1, p->T);
    if (!t) return 0;
    say(msg,
        " Even micro_batch_size 1 with recompute_granularity: full does not fit; it fits with seq_length "
        "%d at micro_batch_size 1 and recompute_granularity: full",
        t);
    return 1;
}

void kda_mem_plan_check(const kda_config *c, const kda_ops *ops, const kda_mem_plan *p, const kda_mem_avail *a) {
    int side = short_side(p, a);
    if (side < 0) return;
    const kda_model_mem *m = &p->model;
    msg_buf msg = {.n = 0};
    char b1[32];
    say_need(&msg, p, a, side);
    say_parts(&msg, c, p, side);
    fit_ctx x = {c, ops, a};
    int found = side == 0 ? say_fitting_settings(&msg, &x, p) : 0;
    if (!found) {
        const char *embed_dims =
            c->vocab_size > c->hidden_size ? "vocab_size or hidden_size" : "hidden_size or vocab_size";
        const char *model_dims = m->embed_floats >= m->n_floats - m->embed_floats
            ? embed_dims
            : "hidden_size, num_hidden_layers or intermediate_size";
        size_t base = 0;
        fits_with(&x, "full", 1, 1, &base);
        say(&msg, " The model's state alone (micro-batch 1 x 1) needs %s: lower %s", bytes_str(b1, sizeof b1, base),
            model_dims);
    }
    plan_parts parts = parts_of(p);
    if (side == 0 && parts.scratch > parts.acts && parts.scratch > parts.state)
        say(&msg,
            "; the backend's scratch is the largest part (on CUDA KDA_CE_SCRATCH_MB sets the cross-entropy "
            "chunk, in MiB)");
    say(&msg, ".");
    kda_die("%s", msg.s);
}
