// test_cuda_decode.c — generation on the GPU: the state-carrying ops (ops.h conv_silu_step,
// kda_fwd_state) against the CPU backend on the same inputs (activations bf16-rounded; the conv
// weights, A_log and dt_bias fp32, ops.h role S), then the decoder
// (generate.h, through the model's op table) on CUDA against the same decoder on the CPU.
//   1. conv_silu_step: y (one bf16 rounding: 5e-3) and the new tail (bf16 copies: exact), tails
//      longer and shorter than the block, a zero tail equals conv_silu_fwd;
//   2. kda_fwd_state, recurrent form (the new kernel): from a random fp32 state, o (bf16 store:
//      5e-3) and the final fp32 state (fp32 math on the same inputs: 1e-4), this model's heads,
//      K=48/V=80 and K=V=128 (64 KiB of shared memory); two calls of 4 + 3 tokens = one of 7;
//   3. kda_fwd_state, chunked form (kda_fwd.cu with the state in and out): o as test_cuda_kda
//      (6e-3) and the final state (bf16 operands in the chunk scan: 1e-2) from a random state;
//   4. a small random model (2 layers, K=32, V=64, vocab 512) on both backends with the same bf16
//      weights: a 40-token prompt (chunked prefill) then 24 steps, both decoders fed the CPU's
//      greedy ids: logits rel err per step (bf16 activations through 2 layers: 3e-2), the GPU's
//      argmax equals the CPU's wherever the CPU's top-2 margin exceeds 0.1 x the rms logit
//      (bf16 noise is ~1e-2 of it), and the GPU decoder agrees with the GPU's own full-sequence forward
//      (recurrent kernel vs chunked kernels: 3e-2).
// Without a GPU it prints "SKIP: no CUDA device" and exits 77 (skipped).
#include "conv_one.h"
#include "cuda/kda_inputs.h"
#include "infer/generate.h"
#include "model/model.h"

// ---- 1. conv with a tail ----
static void test_conv_step(int B, int T, int C, int W) {
    char nm[128];
    int P = W - 1;
    float *x = h_randn_bf((size_t)B * T * C, 1.0), *w = h_randn((size_t)C * W, 0.5); // fp32: ops.h role S
    float *tail = h_randn_bf((size_t)B * P * C, 1.0);
    float *y_ref = h_randn((size_t)B * T * C, 1), *tail_ref = h_copy(tail, (size_t)B * P * C);
    CPU->conv_silu_step(tail_ref, x, C, w, y_ref, B, T, C, W);
    void *x_ = d_bf(x, (size_t)B * T * C), *w_ = d_f32(w, (size_t)C * W), *t_ = d_bf(tail, (size_t)B * P * C);
    void *y_ = d_bf_nan((size_t)B * T * C);
    CU->conv_silu_step(t_, x_, C, w_, y_, B, T, C, W);
    float *y = h_of_bf(y_, (size_t)B * T * C), *tl = h_of_bf(t_, (size_t)B * P * C);
    snprintf(nm, sizeof nm, "conv_silu_step y (B=%d T=%d C=%d W=%d)", B, T, C, W);
    CHECK_REL(nm, y, y_ref, (size_t)B * T * C, 5e-3);
    T_CHECK(!memcmp(tl, tail_ref, (size_t)B * P * C * 4), "conv_silu_step new tail (T=%d, tail %d): exact", T, P);
    // a zero tail gives conv_silu_fwd's output
    CU->zero(t_, (size_t)B * P * C * 2);
    void *y2_ = d_bf_nan((size_t)B * T * C), *y3_ = d_bf_nan((size_t)B * T * C);
    CU->conv_silu_step(t_, x_, C, w_, y2_, B, T, C, W);
    conv_fwd1(CU, x_, C, w_, y3_, B, T, C, W);
    float *y2 = h_of_bf(y2_, (size_t)B * T * C), *y3 = h_of_bf(y3_, (size_t)B * T * C);
    T_CHECK(n_nonfinite(y2, (size_t)B * T * C) == 0 && !memcmp(y2, y3, (size_t)B * T * C * 4),
            "conv_silu_step from a zero tail == conv_silu_fwd (T=%d)", T);
    CU->free(x_), CU->free(w_), CU->free(t_), CU->free(y_), CU->free(y2_), CU->free(y3_);
    free(x), free(w), free(tail), free(y_ref), free(tail_ref), free(y), free(tl), free(y2), free(y3);
}

// a plausible state: the CPU recurrence over 20 random tokens
static float *make_state(int B, int H, int K, int V) {
    kda_inputs w = kda_inputs_make(B, 20, H, K, V, 64);
    size_t nS = (size_t)B * H * K * V;
    float *S = (float *)kda_calloc(nS, sizeof(float)), *o = h_randn(w.nv, 1);
    w.d.algo = KDA_RECURRENT;
    CPU->kda_fwd_state(&w.d, w.q, w.k, w.v, w.f, w.b, w.A_log, w.dt_bias, o, NULL, S);
    free(o);
    kda_inputs_free(&w);
    return S;
}

// ---- 2 + 3. the core from a state ----
static void test_core_state(int B, int T, int H, int K, int V, int chunk, kda_core_algo algo) {
    char nm[160];
    kda_inputs x = kda_inputs_make(B, T, H, K, V, chunk);
    x.d.algo = algo;
    size_t nS = (size_t)B * H * K * V;
    float *S0 = make_state(B, H, K, V), *S_ref = h_copy(S0, nS), *o_ref = h_randn(x.nv, 1);
    CPU->kda_fwd_state(&x.d, x.q, x.k, x.v, x.f, x.b, x.A_log, x.dt_bias, o_ref, NULL, S_ref);
    void *q_ = d_bf(x.q, x.nk), *k_ = d_bf(x.k, x.nk), *v_ = d_bf(x.v, x.nv), *f_ = d_bf(x.f, x.nk);
    void *b_ = d_bf(x.b, x.nb), *A_ = d_f32(x.A_log, H), *dt_ = d_f32(x.dt_bias, (size_t)H * K), *o_ = d_bf_nan(x.nv);
    float *S_ = d_f32(S0, nS);
    void *saved = algo == KDA_CHUNKED ? CU->alloc(CU->kda_saved_bytes(&x.d)) : NULL;
    CU->kda_fwd_state(&x.d, q_, k_, v_, f_, b_, A_, dt_, o_, saved, S_);
    float *o = h_of_bf(o_, x.nv), *S = h_of_f32(S_, nS);
    const char *form = algo == KDA_CHUNKED ? "chunked" : "recurrent";
    snprintf(nm, sizeof nm, "kda_fwd_state %s o (B=%d T=%d H=%d K=%d V=%d)", form, B, T, H, K, V);
    CHECK_REL(nm, o, o_ref, x.nv, algo == KDA_CHUNKED ? 6e-3 : 5e-3);
    snprintf(nm, sizeof nm, "kda_fwd_state %s final state", form);
    CHECK_REL(nm, S, S_ref, nS, algo == KDA_CHUNKED ? 1e-2 : 1e-4);
    if (algo == KDA_RECURRENT && T == 7) { // 4 tokens, then 3 from the state they left
        CU->to_device(S_, S0, nS * 4);
        kda_core_dims d1 = x.d, d2 = x.d;
        d1.T = 4, d2.T = 3;
        // split every [B,T,H,w] tensor at token 4 (per sequence)
        size_t rk = (size_t)H * K, rv = (size_t)H * V;
        float *in1[5], *in2[5];
        const float *src[5] = {x.q, x.k, x.v, x.f, x.b};
        size_t rw[5] = {rk, rk, rv, rk, (size_t)H};
        for (int i = 0; i < 5; i++) {
            in1[i] = (float *)kda_malloc(sizeof(float) * B * 4 * rw[i]);
            in2[i] = (float *)kda_malloc(sizeof(float) * B * 3 * rw[i]);
            for (int b = 0; b < B; b++) {
                memcpy(in1[i] + (size_t)b * 4 * rw[i], src[i] + (size_t)b * 7 * rw[i], sizeof(float) * 4 * rw[i]);
                memcpy(in2[i] + (size_t)b * 3 * rw[i], src[i] + ((size_t)b * 7 + 4) * rw[i], sizeof(float) * 3 * rw[i]);
            }
        }
        void *p1[5], *p2[5];
        for (int i = 0; i < 5; i++) p1[i] = d_bf(in1[i], B * 4 * rw[i]), p2[i] = d_bf(in2[i], B * 3 * rw[i]);
        void *o1_ = d_bf_nan((size_t)B * 4 * rv), *o2_ = d_bf_nan((size_t)B * 3 * rv);
        CU->kda_fwd_state(&d1, p1[0], p1[1], p1[2], p1[3], p1[4], A_, dt_, o1_, NULL, S_);
        CU->kda_fwd_state(&d2, p2[0], p2[1], p2[2], p2[3], p2[4], A_, dt_, o2_, NULL, S_);
        float *S2 = h_of_f32(S_, nS), *o2 = h_of_bf(o2_, (size_t)B * 3 * rv), *o_tail = h_of_bf(o_, x.nv);
        int same = !memcmp(S2, S, nS * 4);
        for (int b = 0; b < B; b++)
            same &= !memcmp(o2 + (size_t)b * 3 * rv, o_tail + ((size_t)b * 7 + 4) * rv, sizeof(float) * 3 * rv);
        T_CHECK(same, "recurrent: 4 tokens then 3 from the state = 7 at once (bitwise: o and state)");
        for (int i = 0; i < 5; i++) free(in1[i]), free(in2[i]), CU->free(p1[i]), CU->free(p2[i]);
        CU->free(o1_), CU->free(o2_), free(S2), free(o2), free(o_tail);
    }
    { // b as the columns of a wider matrix (kda_core_dims.ldb, as the model passes it): the packed call's bits
        kda_core_dims ds = x.d;
        ds.ldb = H + 5;
        size_t rows = (size_t)B * T, wide = rows * ds.ldb;
        float *bw = h_randn(wide, 1);
        for (size_t t = 0; t < rows; t++) memcpy(bw + t * ds.ldb, x.b + t * H, (size_t)H * 4);
        void *bw_ = d_bf(bw, wide), *os_ = d_bf_nan(x.nv);
        float *Ss_ = d_f32(S0, nS);
        void *ss = algo == KDA_CHUNKED ? CU->alloc(CU->kda_saved_bytes(&ds)) : NULL;
        CU->kda_fwd_state(&ds, q_, k_, v_, f_, bw_, A_, dt_, os_, ss, Ss_);
        float *os = h_of_bf(os_, x.nv), *Ss = h_of_f32(Ss_, nS);
        T_CHECK(!memcmp(os, o, x.nv * 4) && !memcmp(Ss, S, nS * 4),
                "kda_fwd_state %s: b with rows %d apart gives the packed call's o and state bits", form, ds.ldb);
        CU->free(bw_), CU->free(os_), CU->free(Ss_), CU->free(ss), free(bw), free(os), free(Ss);
    }
    CU->free(q_), CU->free(k_), CU->free(v_), CU->free(f_), CU->free(b_), CU->free(A_), CU->free(dt_);
    CU->free(o_), CU->free(S_), CU->free(saved);
    free(S0), free(S_ref), free(o_ref), free(o), free(S);
    kda_inputs_free(&x);
}

// ---- 4. the decoder on both backends ----
static kda_config small_cfg(void) {
    kda_config c;
    kda_config_defaults(&c);
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_heads = 2;
    c.head_dim = 32;
    c.expand_v = 2;
    c.intermediate_size = 128;
    c.vocab_size = 512;
    c.kda_chunk_size = 64;
    c.seq_length = 128;
    c.micro_batch_size = 1;
    c.global_batch_size = 1;
    kda_config_finalize(&c);
    return c;
}

static int argmax(const float *x, int n, float *margin) {
    int b = 0, s = -1;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            s = b, b = i;
        else if (s < 0 || x[i] > x[s])
            s = i;
    if (s < 0) s = b == 0 ? 1 : 0;
    *margin = x[b] - x[s];
    return b;
}

static void test_decoder(void) {
    enum { NP = 40, STEPS = 24, TMAX = 128 };
    kda_config c = small_cfg();
    kda_model *mc = kda_model_create(&c, CPU, 1, TMAX), *mg = kda_model_create(&c, CU, 1, TMAX);
    // §4 init moved off it (as test_generate), rounded to bf16 so both backends use the same weights
    kda_model_init(mc, kda_rng_u64(&RNG));
    for (int i = 0; i < mc->n_params; i++) {
        kda_param *p = &mc->params[i];
        double sd = strstr(p->name, "norm")                            ? 0.2
            : (strstr(p->name, "A_log") || strstr(p->name, "dt_bias")) ? 0.5
                                                                       : 0.15;
        for (size_t j = 0; j < p->numel; j++) mc->master[p->offset + j] += (float)(sd * kda_rng_normal(&RNG));
    }
    h_bf(mc->master, mc->n_floats);
    CU->to_device(mg->master, mc->master, mc->n_floats * sizeof(float));
    CU->master_to_work(mg->master, mg->work, mg->n_floats);
    int NV = c.vocab_size;
    int32_t seq[NP + STEPS];
    for (int i = 0; i < NP; i++) seq[i] = (int32_t)kda_rng_below(&RNG, NV);
    kda_decoder *dc = kda_decoder_create(mc, 0), *dg = kda_decoder_create(mg, 0);
    kda_decoder_feed(dc, seq, NP); // one chunked prefill block on each side
    kda_decoder_feed(dg, seq, NP);
    double worst = 0, num = 0, den = 0;
    int clear = 0, agree = 0, n = NP;
    float *lc = (float *)kda_malloc(sizeof(float) * NV);
    for (int s = 0; s <= STEPS; s++) {
        memcpy(lc, kda_decoder_logits(dc), sizeof(float) * NV);
        const float *lg = kda_decoder_logits(dg);
        double e = rel_vs(lg, lc, NV);
        worst = e > worst ? e : worst;
        for (int i = 0; i < NV; i++)
            num += ((double)lg[i] - lc[i]) * ((double)lg[i] - lc[i]), den += (double)lc[i] * lc[i];
        float mc_, mg_;
        int ic = argmax(lc, NV, &mc_), ig = argmax(lg, NV, &mg_);
        double rms = 0;
        for (int i = 0; i < NV; i++) rms += (double)lc[i] * lc[i];
        rms = sqrt(rms / NV);
        if (mc_ > 0.1 * rms) clear++, agree += ic == ig; // 10x the expected bf16 noise (~1e-2 rms)
        if (s == STEPS) break;
        seq[n++] = ic; // both follow the CPU's greedy ids
        kda_decoder_feed(dc, &seq[n - 1], 1);
        kda_decoder_feed(dg, &seq[n - 1], 1);
    }
    printf("  (GPU vs CPU decoder: %d positions, %d with a clear CPU top-2 margin)\n", STEPS + 1, clear);
    T_REL("decoder GPU vs CPU: logits over prompt end + 24 steps", sqrt(num / den), 3e-2);
    T_REL("decoder GPU vs CPU: worst single position", worst, 6e-2);
    T_CHECK(clear >= 5 && agree == clear,
            "greedy ids: GPU argmax = CPU argmax at all %d positions with a clear margin "
            "(%d agree)",
            clear, agree);
    // the GPU decoder vs the GPU's full-sequence forward (chunked kernels) at the last position
    float *full = (float *)kda_malloc(sizeof(float) * (size_t)n * NV);
    kda_model_logits(mg, seq, 1, n, full);
    T_REL("GPU decoder vs GPU full forward (last position)",
          rel_vs(kda_decoder_logits(dg), full + (size_t)(n - 1) * NV, NV), 3e-2);
    // memory: the decoder's state is fixed, and a reset decoder repeats itself bitwise
    float *first = (float *)kda_malloc(sizeof(float) * NV);
    kda_decoder_reset(dg);
    kda_decoder_feed(dg, seq, NP);
    memcpy(first, kda_decoder_logits(dg), sizeof(float) * NV);
    kda_decoder_reset(dg);
    kda_decoder_feed(dg, seq, NP);
    T_CHECK(!memcmp(first, kda_decoder_logits(dg), sizeof(float) * NV), "GPU decoder after a reset: same bits again");
    size_t expect = (size_t)c.num_hidden_layers *
        ((size_t)(c.conv_size - 1) * (2 * c.key_dim + c.value_dim) * 2 +
         (size_t)c.num_heads * c.head_dim * c.head_v_dim * 4);
    T_CHECK(kda_decoder_state_bytes(dg) == expect,
            "GPU state bytes %zu = L x ((W-1)(2Dk+Dv) x 2 (bf16 tails) + H K Vd x 4)", kda_decoder_state_bytes(dg));
    free(full), free(first), free(lc);
    kda_decoder_free(dc), kda_decoder_free(dg);
    kda_model_free(mc), kda_model_free(mg);
}

int main(void) {
    cu_test_start("test_cuda_decode");
    T_CHECK(CU->conv_silu_step && CU->kda_fwd_state, "table: conv_silu_step and kda_fwd_state present");
    test_conv_step(2, 1, 96, 4);   // a decode step
    test_conv_step(2, 2, 96, 4);   // shorter than the tail
    test_conv_step(3, 37, 300, 4); // a prefill block
    test_conv_step(1, 5, 64, 3);
    test_core_state(2, 1, 8, 32, 64, 64, KDA_RECURRENT); // the 300M model's heads, one token
    test_core_state(2, 7, 3, 32, 64, 64, KDA_RECURRENT);
    test_core_state(1, 9, 2, 48, 80, 64, KDA_RECURRENT);
    test_core_state(1, 5, 2, 128, 128, 64, KDA_RECURRENT); // 64 KiB of state in shared memory
    test_core_state(2, 100, 2, 32, 64, 64, KDA_CHUNKED);   // prefill from a state, partial last chunk
    test_core_state(1, 40, 3, 32, 64, 64, KDA_CHUNKED);    // shorter than a chunk
    test_decoder();
    return t_done("test_cuda_decode");
}
