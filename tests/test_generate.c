// test_generate.c — the decoder (generate.h: the model's state-carrying forward through the CPU
// op table, model.c) and the sampler on a small random model moved off its init:
//  1. every prompt position and every greedy step: the decoder's logits equal the last row of
//     a full-sequence forward (kda_model_logits over the whole sequence so far, chunked core)
//     and the greedy id is that forward's argmax, >= 40 steps, two prompts;
//  2. a prompt fed in blocks through the chunked form (each continuing from the state the last
//     left) gives the same logits as token by token through the recurrent form, and as one block;
//  3. the state carries information past the conv window (so test 1 exercises the KDA core);
//  4. sampling with a seed is reproducible, another seed differs, top-k 1 equals greedy, eos stops;
//  5. state and allocated bytes are constant while generating;
//  6. the sampler's distribution (repetition penalty, temperature, top-k, top-p) matches a float64
//     reference written the way Hugging Face computes it, and greedy honours the penalty.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "infer/generate.h"
#include "model/model.h"
#include "test_util.h"

#define TMAX 200

static kda_config small_cfg(void) {
    kda_config c;
    kda_config_defaults(&c);
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_heads = 2;
    c.head_dim = 8;
    c.expand_v = 2;
    c.intermediate_size = 64;
    c.vocab_size = 256; // the byte tokenizer (the default) needs 256
    c.kda_chunk_size = 16;
    c.seq_length = TMAX;
    c.micro_batch_size = 1;
    c.global_batch_size = 1;
    kda_config_finalize(&c);
    return c;
}

static void perturb_params(kda_model *m, kda_rng *r) {
    for (int i = 0; i < m->n_params; i++) {
        kda_param *p = &m->params[i];
        double sd = strstr(p->name, "norm")                            ? 0.2
            : (strstr(p->name, "A_log") || strstr(p->name, "dt_bias")) ? 0.5
                                                                       : 0.15;
        for (size_t j = 0; j < p->numel; j++) m->master[p->offset + j] += (float)(sd * kda_rng_normal(r));
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// Σ (a−b)², Σ b² and the worst per-row relative error, for a whole-run relative error
typedef struct {
    double num, den, worst_row;
} err_acc;

static void err_add(err_acc *e, const float *a, const float *ref, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    e->num += num;
    e->den += den;
    double row = sqrt(num / den);
    e->worst_row = row > e->worst_row ? row : e->worst_row;
}

// 1. decoder vs full forward, prompt positions and greedy steps. The relative error is over all
// positions together (as FLA measures tensors); single rows get a looser bound because an fp32
// forward is ill-conditioned at some positions (both paths then differ from a float64 one by a
// few 1e-6), while a real defect (a wrong tail, state or block boundary) shows up as >= 1e-3.
static void test_vs_full_forward(kda_model *m, kda_rng *r, int n_prompt, int steps) {
    int NV = m->cfg.vocab_size, n = n_prompt;
    int32_t *seq = kda_malloc(sizeof(int32_t) * TMAX);
    float *full = kda_malloc(sizeof(float) * (size_t)TMAX * NV);
    for (int i = 0; i < n_prompt; i++) seq[i] = (int32_t)kda_rng_below(r, NV);
    kda_decoder *d = kda_decoder_create(m, 0);
    err_acc ep = {0}, eg = {0};
    kda_model_logits(m, seq, 1, n_prompt, full);
    for (int t = 0; t < n_prompt; t++) {
        kda_decoder_feed(d, &seq[t], 1);
        err_add(&ep, kda_decoder_logits(d), full + (size_t)t * NV, NV);
    }
    char name[96];
    snprintf(name, sizeof name, "prompt of %d: logits at every prompt position", n_prompt);
    T_REL(name, sqrt(ep.num / ep.den), 1e-5);
    int mismatches = 0, near_ties = 0;
    for (int s = 0; s < steps; s++) {
        const float *lg = kda_decoder_logits(d);
        int id = argmax(lg, NV);
        kda_model_logits(m, seq, 1, n, full);
        const float *ref = full + (size_t)(n - 1) * NV;
        err_add(&eg, lg, ref, NV);
        int rid = argmax(ref, NV);
        if (rid != id) {
            // only a numerical near-tie of the two best logits may excuse a different argmax
            if (fabs(ref[rid] - ref[id]) < 1e-5 * (fabs(ref[rid]) + 1))
                near_ties++;
            else
                mismatches++;
        }
        seq[n++] = id;
        kda_decoder_feed(d, &seq[n - 1], 1);
    }
    snprintf(name, sizeof name, "prompt of %d: logits at %d greedy steps", n_prompt, steps);
    T_REL(name, sqrt(eg.num / eg.den), 1e-5);
    double worst = ep.worst_row > eg.worst_row ? ep.worst_row : eg.worst_row;
    snprintf(name, sizeof name, "prompt of %d: worst single position", n_prompt);
    T_REL(name, worst, 1e-4);
    T_CHECK(mismatches == 0, "prompt of %d: %d greedy ids = argmax of the full forward (%d mismatches, %d near-ties)",
            n_prompt, steps, mismatches, near_ties);
    T_CHECK(kda_decoder_position(d) == n, "decoder position %ld == %d tokens fed", kda_decoder_position(d), n);
    kda_decoder_free(d);
    free(seq);
    free(full);
}

// 2. chunked prefill in blocks (each block continuing from the state the previous one left)
// vs one block vs one token at a time (recurrent); against the full forward at the end too
static void test_block_feed(kda_model *m, kda_rng *r) {
    int NV = m->cfg.vocab_size, n = 165; // 64 + 64 + 37 (chunk 16: whole and partial chunks)
    int32_t *ids = kda_malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)kda_rng_below(r, NV);
    kda_decoder *a = kda_decoder_create(m, 64), *b = kda_decoder_create(m, 0), *c = kda_decoder_create(m, 0);
    kda_decoder_feed(a, ids, n);
    for (int i = 0; i < n; i++) kda_decoder_feed(b, &ids[i], 1);
    kda_decoder_feed(c, ids, n);
    T_REL("prompt of 165 in blocks of 64 vs token by token",
          kda_rel_err_f32f32(kda_decoder_logits(a), kda_decoder_logits(b), NV), 1e-5);
    T_REL("prompt of 165 in one block vs token by token",
          kda_rel_err_f32f32(kda_decoder_logits(c), kda_decoder_logits(b), NV), 1e-5);
    float *full = kda_malloc(sizeof(float) * (size_t)n * NV);
    kda_model_logits(m, ids, 1, n, full);
    T_REL("prompt of 165 in blocks vs full forward",
          kda_rel_err_f32f32(kda_decoder_logits(a), full + (size_t)(n - 1) * NV, NV), 1e-5);
    // a reset decoder gives the same again
    kda_decoder_reset(a);
    kda_decoder_feed(a, ids, 10);
    kda_decoder_feed(a, ids + 10, n - 10);
    T_REL("after reset, 10 + 155 tokens", kda_rel_err_f32f32(kda_decoder_logits(a), kda_decoder_logits(b), NV), 1e-5);
    // the next greedy steps after a chunked prefill: recurrent from the state the chunked form left
    for (int s = 0; s < 5; s++) {
        int32_t id = (int32_t)kda_rng_below(r, NV);
        kda_decoder_feed(c, &id, 1);
        kda_decoder_feed(b, &id, 1);
    }
    T_REL("5 decode steps after the one-block prefill vs all token by token",
          kda_rel_err_f32f32(kda_decoder_logits(c), kda_decoder_logits(b), NV), 1e-5);
    kda_decoder_free(c);
    kda_decoder_free(a);
    kda_decoder_free(b);
    free(full);
    free(ids);
}

// 3. the first token changes the logits 20 tokens later (the conv window is 4): the KDA state matters
static void test_state_matters(kda_model *m, kda_rng *r) {
    int NV = m->cfg.vocab_size;
    int32_t ids[21];
    for (int i = 0; i < 21; i++) ids[i] = (int32_t)kda_rng_below(r, NV);
    kda_decoder *d = kda_decoder_create(m, 0);
    kda_decoder_feed(d, ids, 21);
    float *l1 = kda_malloc(sizeof(float) * NV);
    memcpy(l1, kda_decoder_logits(d), sizeof(float) * NV);
    ids[0] = (ids[0] + 1) % NV;
    kda_decoder_reset(d);
    kda_decoder_feed(d, ids, 21);
    double diff = kda_rel_err_f32f32(kda_decoder_logits(d), l1, NV);
    T_CHECK(diff > 1e-3, "changing token 0 moves the logits at position 20 (rel %.2e > 1e-3)", diff);
    kda_decoder_free(d);
    free(l1);
}

typedef struct {
    int32_t ids[TMAX];
    int n;
} collected;

static int collect(int32_t id, void *arg) {
    collected *c = arg;
    c->ids[c->n++] = id;
    return 0;
}

static collected gen(kda_decoder *d, const kda_sampling *s, uint64_t seed, const int32_t *prompt, int np, int max_new,
                     int32_t eos, kda_gen_stats *st) {
    collected c = {.n = 0};
    kda_sampler *sp = kda_sampler_create(256, s, seed); // small_cfg's vocabulary
    int n = kda_generate(d, sp, prompt, np, max_new, eos, collect, &c, st);
    KDA_CHECK(n == c.n, "kda_generate returned %d, callback saw %d", n, c.n);
    kda_sampler_free(sp);
    return c;
}

// 4 + 5. reproducibility, top-k 1, eos, constant memory
static void test_generate_loop(kda_model *m, kda_rng *r) {
    int32_t prompt[7];
    for (int i = 0; i < 7; i++) prompt[i] = (int32_t)kda_rng_below(r, 256);
    kda_decoder *d = kda_decoder_create(m, 0);
    size_t state0 = kda_decoder_state_bytes(d), total0 = kda_decoder_total_bytes(d);
    const kda_config *c = &m->cfg;
    size_t expect = (size_t)c->num_hidden_layers *
        ((size_t)(c->conv_size - 1) * (2 * c->key_dim + c->value_dim) +
         (size_t)c->num_heads * c->head_dim * c->head_v_dim) *
        sizeof(float);
    T_CHECK(state0 == expect, "state bytes %zu = L x ((W-1)(2Dk+Dv) + H K Vd) x 4 = %zu", state0, expect);

    kda_sampling samp = {.temperature = 1.5f, .top_k = 0, .top_p = 0.95f, .repetition_penalty = 1.2f};
    collected a = gen(d, &samp, 1234, prompt, 7, 60, -1, NULL);
    collected b = gen(d, &samp, 1234, prompt, 7, 60, -1, NULL);
    collected c2 = gen(d, &samp, 1235, prompt, 7, 60, -1, NULL);
    T_CHECK(a.n == 60 && b.n == 60 && !memcmp(a.ids, b.ids, sizeof(int32_t) * 60), "same seed, same 60 sampled ids");
    T_CHECK(memcmp(a.ids, c2.ids, sizeof(int32_t) * 60) != 0, "another seed, other ids");

    kda_sampling greedy = {.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
    kda_sampling topk1 = {.temperature = 0.7f, .top_k = 1, .top_p = 1, .repetition_penalty = 1};
    kda_gen_stats st;
    collected g = gen(d, &greedy, 1, prompt, 7, 150, -1, &st);
    collected k1 = gen(d, &topk1, 99, prompt, 7, 150, -1, NULL);
    T_CHECK(g.n == 150 && k1.n == 150 && !memcmp(g.ids, k1.ids, sizeof(int32_t) * 150), "top-k 1 = greedy (150 ids)");
    T_CHECK(st.prompt_tokens == 7 && st.new_tokens == 150 && !st.stopped_at_eos && st.prefill_s >= 0 &&
                st.first_token_s >= st.prefill_s && st.decode_s >= 0,
            "stats: 7 prompt, 150 new, times ordered");
    T_CHECK(kda_decoder_state_bytes(d) == state0 && kda_decoder_total_bytes(d) == total0,
            "state %zu B and total %zu B unchanged after 7 + 150 tokens", state0, total0);

    // eos: the greedy id at step 5 ends the run there (unless it appeared before)
    int first = 0;
    while (first < 5 && g.ids[first] != g.ids[5]) first++;
    collected e = gen(d, &greedy, 1, prompt, 7, 150, g.ids[5], &st);
    T_CHECK(e.n == first + 1 && st.stopped_at_eos && e.ids[first] == g.ids[5], "eos id %d stops after %d ids (got %d)",
            g.ids[5], first + 1, e.n);
    collected z = gen(d, &greedy, 1, prompt, 7, 0, -1, &st);
    T_CHECK(z.n == 0 && st.new_tokens == 0, "max_new 0 generates nothing");
    kda_decoder_free(d);
}

// float64 reference of HF's processors: penalty, temperature, top-k, top-p (ascending cumsum)
static void ref_probs(const float *logits, const int *seen, int n, const kda_sampling *s, double *p) {
    double x[32];
    for (int i = 0; i < n; i++) {
        x[i] = logits[i];
        if (seen[i]) x[i] = x[i] < 0 ? x[i] * s->repetition_penalty : x[i] / s->repetition_penalty;
        x[i] /= s->temperature;
    }
    if (s->top_k > 0) {
        for (int i = 0; i < n; i++) {
            int above = 0;
            for (int j = 0; j < n; j++) above += x[j] > x[i];
            if (above >= s->top_k)
                p[i] = -1; // marked removed
            else
                p[i] = 0;
        }
    } else
        for (int i = 0; i < n; i++) p[i] = 0;
    double mx = -INFINITY, Z = 0;
    for (int i = 0; i < n; i++)
        if (p[i] == 0 && x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) p[i] = p[i] < 0 ? 0 : exp(x[i] - mx), Z += p[i];
    for (int i = 0; i < n; i++) p[i] /= Z;
    // remove tokens whose ascending cumulative probability is <= 1 - top_p
    double keep_mass = 0;
    int keep[32];
    for (int i = 0; i < n; i++) {
        double cum = 0; // mass of tokens ranked at or below i (ascending order, ties by larger index first)
        for (int j = 0; j < n; j++)
            if (p[j] < p[i] || (p[j] == p[i] && j >= i)) cum += p[j];
        keep[i] = p[i] > 0 && cum > 1 - s->top_p;
    }
    int any = 0;
    for (int i = 0; i < n; i++) any |= keep[i];
    if (!any) { // the most probable token always stays
        int b = 0;
        for (int i = 1; i < n; i++) b = p[i] > p[b] ? i : b;
        keep[b] = 1;
    }
    for (int i = 0; i < n; i++) keep_mass += keep[i] ? p[i] : 0;
    for (int i = 0; i < n; i++) p[i] = keep[i] ? p[i] / keep_mass : 0;
}

static void test_sampler_distribution(kda_rng *r) {
    enum { n = 16 };
    const int draws = 40000;
    float logits[n];
    int seen[n] = {0};
    // a flat ladder of logits (several tokens in every nucleus), shuffled, a little jitter
    for (int i = 0; i < n; i++) logits[i] = 1.0f - 0.15f * (float)i + (float)(0.03 * kda_rng_normal(r));
    for (int i = n - 1; i > 0; i--) {
        int j = (int)kda_rng_below(r, (uint64_t)i + 1);
        float t = logits[i];
        logits[i] = logits[j];
        logits[j] = t;
    }
    for (int i = 0; i < n; i += 3) seen[i] = 1;
    kda_sampling cases[3] = {
        {.temperature = 0.8f, .top_k = 5, .top_p = 0.75f, .repetition_penalty = 1.5f},
        {.temperature = 1.3f, .top_k = 0, .top_p = 0.6f, .repetition_penalty = 1.0f},
        {.temperature = 1.0f, .top_k = 3, .top_p = 1.0f, .repetition_penalty = 0.7f},
    };
    for (int c = 0; c < 3; c++) {
        double p[n];
        ref_probs(logits, seen, n, &cases[c], p);
        kda_sampler *s = kda_sampler_create(n, &cases[c], kda_rng_u64(r));
        for (int i = 0; i < n; i++)
            if (seen[i]) kda_sampler_observe(s, i);
        int count[n] = {0};
        for (int k = 0; k < draws; k++) count[kda_sampler_pick(s, logits)]++;
        double worst = 0;
        int leaked = 0, kept = 0;
        for (int i = 0; i < n; i++) {
            kept += p[i] > 0;
            double dv = fabs((double)count[i] / draws - p[i]);
            worst = dv > worst ? dv : worst;
            leaked += p[i] == 0 && count[i] > 0;
        }
        T_CHECK(worst < 0.015 && !leaked,
                "sampler case %d (T %.1f, top-k %d, top-p %.2f, penalty %.1f): %d ids kept, |freq - p| %.4f < 0.015, "
                "%d removed ids drawn",
                c, (double)cases[c].temperature, cases[c].top_k, (double)cases[c].top_p,
                (double)cases[c].repetition_penalty, kept, worst, leaked);
        kda_sampler_free(s);
    }
    // top-k keeps ties with the k-th value; on a larger vocabulary only the k best are ever drawn
    {
        kda_sampling t = {.temperature = 1, .top_k = 2, .top_p = 1, .repetition_penalty = 1};
        kda_sampler *s = kda_sampler_create(5, &t, kda_rng_u64(r));
        int count[5] = {0};
        for (int k = 0; k < 3000; k++) count[kda_sampler_pick(s, (float[]){1, 3, 2.5f, 3, 2.5f})]++;
        T_CHECK(count[0] == 0 && count[2] == 0 && count[4] == 0 && count[1] > 0 && count[3] > 0,
                "top-k 2 with a tie at the top: only ids 1 and 3 drawn (%d, %d)", count[1], count[3]);
        kda_sampler_free(s);
        enum { NBIG = 3000, KBIG = 17 };
        float *big = kda_malloc(sizeof(float) * NBIG);
        for (int i = 0; i < NBIG; i++) big[i] = (float)kda_rng_normal(r);
        int above_min = 0; // ids whose logit is below the KBIG-th largest must never appear
        t.top_k = KBIG;
        s = kda_sampler_create(NBIG, &t, kda_rng_u64(r));
        for (int k = 0; k < 2000; k++) {
            int id = kda_sampler_pick(s, big), rank = 0;
            for (int i = 0; i < NBIG; i++) rank += big[i] > big[id];
            above_min += rank >= KBIG;
        }
        T_CHECK(above_min == 0, "top-k %d of %d random logits: %d draws outside the top %d", KBIG, NBIG, above_min,
                KBIG);
        kda_sampler_free(s);
        free(big);
    }
    // greedy honours the penalty: positive logits divided, negative multiplied
    kda_sampling g = {.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1.2f};
    kda_sampler *s = kda_sampler_create(2, &g, 1);
    kda_sampler_observe(s, 0);
    int p1 = kda_sampler_pick(s, (float[]){2.0f, 1.8f});   // 2/1.2 = 1.67 < 1.8
    int p2 = kda_sampler_pick(s, (float[]){-1.0f, -1.1f}); // -1.2 < -1.1
    int p3 = kda_sampler_pick(s, (float[]){2.4f, 1.8f});   // 2.0 > 1.8
    T_CHECK(p1 == 1 && p2 == 1 && p3 == 0, "greedy with penalty 1.2 picks %d %d %d (want 1 1 0)", p1, p2, p3);
    kda_sampler_reset(s);
    int p4 = kda_sampler_pick(s, (float[]){2.0f, 1.8f});
    T_CHECK(p4 == 0, "after reset nothing is penalised");
    kda_sampler_free(s);
}

int main(void) {
    unsigned long seed = t_seed();
    kda_rng r;
    kda_rng_seed(&r, seed);
    kda_config c = small_cfg();
    kda_model *m = kda_model_create(&c, kda_ops_cpu(), 1, TMAX);
    kda_model_init(m, seed);
    perturb_params(m, &r);
    test_state_matters(m, &r);
    test_vs_full_forward(m, &r, 1, 45);
    test_vs_full_forward(m, &r, 23, 45);
    test_block_feed(m, &r);
    test_generate_loop(m, &r);
    test_sampler_distribution(&r);
    kda_model_free(m);
    return t_done("test_generate");
}
