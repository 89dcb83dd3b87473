// bench_ops_cuda.c — time the memory-bound CUDA ops of one 300M training step (configs/kda-300M.yaml:
// hidden 1024, 8 heads, key head 32, value head 64, intermediate 4096, conv 4, vocab 128,256) at
// B x T = 32 x 2048 = 65,536 tokens, through the op table as the model calls them.
// Per op: CUDA events around REPS back-to-back calls (after WARM warm-up calls), the median of
// ROUNDS such rounds; GB/s counts each input read once and each output written once (an
// accumulated fp32 output: read + write); % of a device-to-device copy measured here the same
// way (cudaMemcpyAsync of 1 GiB: read + write). lm_head_ce includes its three GEMMs (x·Eᵀ, dx, dE:
// ~2.6e13 flop); its bytes are the bf16 logits' 2 reads + 1 write of the cross-entropy rows.
// A table last (one line per op: name, ms, GB/s, % of copy, calls per step, ms per step).
//   bench_ops_cuda [tokens]     (default 65536; a multiple of 2048)
//   KDA_BENCH_ONLY=text         only the rows whose name holds text (the copy row always)
#include "conv_one.h"
#include "cuda/cuda_bench.h"

// ---- the shapes and buffers ----
static int B = 32, T = 2048, N, D = 1024, H = 8, K = 32, V = 64, F = 4096, W = 4, NV = 128256;
static void *x_, *y_, *dy_, *dx_, *w_, *o_, *u_, *go_, *gdy_, *gdo_, *gdu_, *cx_, *cy_, *cdy_, *cdx_;
static void *sgu_, *sz_, *sdz_, *sdgu_, *cw_, *hid_, *E_, *ce_dx_;
static float *rstd_, *dw_, *grstd_, *gw_f_, *cdw_, *dE_;
static int32_t *tg_;
static int conv_c;
static size_t P; // parameters (floats)
static float *pm_, *pg_, *pmm_, *pvv_;
static void *pw_;
static kda_adamw_seg *segs;
static int nseg;
static void *cp_a, *cp_b;
static size_t cp_bytes = (size_t)1 << 30;

static void f_copy(void *c) {
    (void)c;
    ck(cudaMemcpyAsync(cp_b, cp_a, cp_bytes, cudaMemcpyDeviceToDevice, 0), "copy");
}
static void f_rms_fwd(void *c) { (void)c, CU->rmsnorm_fwd(x_, w_, y_, rstd_, N, D, 1e-6f); }
static void f_rms_bwd(void *c) { (void)c, CU->rmsnorm_bwd(x_, w_, rstd_, dy_, dx_, dw_, NULL, N, D, 0); }
static void f_rms_bwd_y(void *c) { (void)c, CU->rmsnorm_bwd(x_, w_, rstd_, dy_, dx_, dw_, y_, N, D, 0); }
static void f_grms_fwd(void *c) { (void)c, CU->gated_rmsnorm_fwd(o_, u_, w_, go_, grstd_, N * H, V, 1e-6f); }
static void f_grms_bwd(void *c) {
    (void)c, CU->gated_rmsnorm_bwd(o_, u_, w_, grstd_, gdy_, gdo_, gdu_, gw_f_, NULL, N * H, V);
}
static void f_grms_bwd_y(void *c) {
    (void)c, CU->gated_rmsnorm_bwd(o_, u_, w_, grstd_, gdy_, gdo_, gdu_, gw_f_, go_, N * H, V);
}
static void f_conv_fwd(void *c) { (void)c, conv_fwd1(CU, cx_, conv_c, cw_, cy_, B, T, conv_c, W); }
static void f_conv_bwd(void *c) { (void)c, conv_bwd1(CU, cx_, conv_c, cw_, cdy_, cdx_, cdw_, B, T, conv_c, W); }
// q, k, v in one call, as the model makes it: columns of the [N, P] projection buffer
static kda_conv_group qkv_[3];
static int qkv_ld;
static void f_conv_qkv_fwd(void *c) { (void)c, CU->conv_silu_fwd(cx_, qkv_ld, qkv_, 3, B, T, W); }
static void f_conv_qkv_bwd(void *c) { (void)c, CU->conv_silu_bwd(cx_, qkv_ld, cdx_, qkv_, 3, B, T, W); }
// gate and up as the halves of one [N, 2F] GEMM output, dz packed [N, F] (the model's dz sits in
// dgu's gate columns: the same bytes)
static void f_swiglu_fwd(void *c) { (void)c, CU->swiglu_fwd(sgu_, sz_, N, F); }
static void f_swiglu_bwd(void *c) { (void)c, CU->swiglu_bwd(sgu_, sdz_, F, sdgu_, NULL, N, F); }
static void f_swiglu_bwd_z(void *c) { (void)c, CU->swiglu_bwd(sgu_, sdz_, F, sdgu_, sz_, N, F); }
static void f_sumsq(void *c) { (void)c, CU->sumsq(pg_, P); }
static void f_adamw_multi(void *c) {
    (void)c, CU->adamw_multi(pm_, pw_, pg_, pmm_, pvv_, segs, nseg, 0.9f, 1e-5f, 0.9f, 0.95f, 1e-8f, 0.5f, 0.3f);
}
static void f_ce(void *c) {
    long nv;
    (void)c, CU->lm_head_ce(hid_, E_, tg_, N, D, NV, 1.0f / N, ce_dx_, dE_, &nv);
}
static void f_ce_fwd(void *c) {
    long nv;
    (void)c, CU->lm_head_ce(hid_, E_, tg_, N, D, NV, 1.0f, NULL, NULL, &nv);
}

typedef struct {
    const char *name;
    double ms, gb, per_step; // gb: bytes counted, GB; per_step: calls in one 300M step (fwd + bwd)
} row;
static row rows[48];
static int nrows;
static double copy_gbs;

// KDA_BENCH_ONLY=text: only the rows whose name holds text (and the copy, the reference)
static void bench(const char *name, bench_fn f, double bytes, double per_step) {
    const char *only = getenv("KDA_BENCH_ONLY");
    if (only && *only && !strstr(name, only) && strncmp(name, "copy", 4)) return;
    if (nrows == (int)(sizeof rows / sizeof rows[0])) {
        fprintf(stderr, "bench_ops_cuda: more than %d rows: make rows[] larger\n", nrows);
        exit(1);
    }
    double ms = time_ms(f, NULL);
    row *r = &rows[nrows++];
    r->name = name, r->ms = ms, r->gb = bytes / 1e9, r->per_step = per_step;
    double gbs = bytes / 1e9 / (ms / 1e3);
    printf("%-34s %9.3f ms  %8.1f GB/s  %5.1f%% of copy  (%.3f GB)\n", name, ms, gbs,
           copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 100.0, bytes / 1e9);
    fflush(stdout);
}

int main(int argc, char **argv) {
    bench_start(4321);
    CPU = kda_ops_cpu();
    N = argc > 1 ? atoi(argv[1]) : B * T;
    if (N < T || N % T) {
        fprintf(stderr, "usage: bench_ops_cuda [tokens, a multiple of %d]\n", T);
        return 2;
    }
    B = N / T;
    printf("bench_ops_cuda: %s; 300M shapes, %d tokens (B=%d T=%d), d=%d, F=%d, H=%d K=%d V=%d, vocab %d; "
           "median of %d rounds of %d calls (CUDA events)\n",
           CU->describe(), N, B, T, D, F, H, K, V, NV, ROUNDS, REPS);
    const double bf = 2, f4 = 4;
    double Nd = (double)N * D;

    // device-to-device copy: the bandwidth the others are measured against
    ck(cudaMalloc(&cp_a, cp_bytes), "malloc"), ck(cudaMalloc(&cp_b, cp_bytes), "malloc");
    ck(cudaMemset(cp_a, 1, cp_bytes), "memset");
    copy_gbs = 0; // not yet measured: the copy line prints 100%
    bench("copy d2d 1 GiB (read + write)", f_copy, 2.0 * cp_bytes, 0);
    copy_gbs = rows[0].gb / (rows[0].ms / 1e3);
    ck(cudaFree(cp_a), "free"), ck(cudaFree(cp_b), "free");

    // norms: RMSNorm [N, 1024] (2 a layer fwd, 2 bwd, + final), gated RMSNorm [N·H, 64]
    x_ = d_rand_bf((size_t)N * D, 1), dy_ = d_rand_bf((size_t)N * D, 1), w_ = d_rand_f32(D, 1, 0);
    y_ = CU->alloc((size_t)N * D * 2), dx_ = CU->alloc((size_t)N * D * 2);
    rstd_ = CU->alloc((size_t)N * 4), dw_ = CU->alloc(D * 4);
    CU->zero(dw_, D * 4);
    bench("rmsnorm_fwd [65536x1024]", f_rms_fwd, Nd * bf * 2 + D * f4 + N * f4, 25);
    bench("rmsnorm_bwd", f_rms_bwd, Nd * bf * 3 + N * f4 + D * f4 + 2.0 * D * f4, 25);
    bench("rmsnorm_bwd + y (recompute fused)", f_rms_bwd_y, Nd * bf * 4 + N * f4 + D * f4 + 2.0 * D * f4, 25);
    env_saved eg = env_set("KDA_NORM_GENERIC", "1"); // the general 16-byte kernel, for comparison
    bench("rmsnorm_bwd (general kernel)", f_rms_bwd, Nd * bf * 3 + N * f4 + D * f4 + 2.0 * D * f4, 0);
    bench("rmsnorm_bwd + y (general kernel)", f_rms_bwd_y, Nd * bf * 4 + N * f4 + D * f4 + 2.0 * D * f4, 0);
    env_restore(&eg);
    size_t gr = (size_t)N * H;
    double gn = (double)gr * V;
    o_ = d_rand_bf(gr * V, 1), u_ = d_rand_bf(gr * V, 1), gdy_ = d_rand_bf(gr * V, 1);
    go_ = CU->alloc(gr * V * 2), gdo_ = CU->alloc(gr * V * 2), gdu_ = CU->alloc(gr * V * 2);
    grstd_ = CU->alloc(gr * 4), gw_f_ = CU->alloc(V * 4);
    CU->zero(gw_f_, V * 4);
    bench("gated_rmsnorm_fwd [524288x64]", f_grms_fwd, gn * bf * 3 + gr * f4 + V * f4, 12);
    bench("gated_rmsnorm_bwd", f_grms_bwd, gn * bf * 5 + gr * f4 + V * f4 + 2.0 * V * f4, 12);
    bench("gated_rmsnorm_bwd + y (recompute fused)", f_grms_bwd_y, gn * bf * 6 + gr * f4 + V * f4 + 2.0 * V * f4, 12);
    CU->free(o_), CU->free(u_), CU->free(gdy_), CU->free(go_), CU->free(gdo_), CU->free(gdu_);
    CU->free(grstd_), CU->free(gw_f_);

    // short conv + SiLU: q, k (C = 256) and v (C = 512) a layer
    for (int pass = 0; pass < 2; pass++) {
        conv_c = pass ? H * V : H * K;
        double n = (double)N * conv_c;
        cx_ = d_rand_bf((size_t)N * conv_c, 1), cdy_ = d_rand_bf((size_t)N * conv_c, 1);
        cw_ = d_rand_f32((size_t)conv_c * W, 0.5, 0);
        cy_ = CU->alloc((size_t)N * conv_c * 2), cdx_ = CU->alloc((size_t)N * conv_c * 2);
        cdw_ = CU->alloc((size_t)conv_c * W * 4);
        CU->zero(cdw_, (size_t)conv_c * W * 4);
        bench(pass ? "conv_silu_fwd [65536x512] (v alone)" : "conv_silu_fwd [65536x256] (q or k alone)", f_conv_fwd,
              n * bf * 2 + conv_c * W * f4, 0);
        bench(pass ? "conv_silu_bwd [65536x512] (v alone)" : "conv_silu_bwd [65536x256] (q or k alone)", f_conv_bwd,
              n * bf * 3 + conv_c * W * f4 + 2.0 * conv_c * W * f4, 0);
        CU->free(cx_), CU->free(cdy_), CU->free(cw_), CU->free(cy_), CU->free(cdx_), CU->free(cdw_);
    }
    { // the model's call: q, k, v (256, 256, 512 channels) from a [N, 1160] projection buffer
        int Cs[3] = {H * K, H * K, H * V}, Ct = Cs[0] + Cs[1] + Cs[2];
        qkv_ld = Ct + 2 * 64 + H; // + f_proj.0, g_proj.0, b_proj
        double n = (double)N * Ct;
        cx_ = d_rand_bf((size_t)N * qkv_ld, 1), cdx_ = CU->alloc((size_t)N * qkv_ld * 2);
        for (int i = 0, col = 0; i < 3; col += Cs[i], i++) {
            void *w = d_rand_f32((size_t)Cs[i] * W, 0.5, 0), *dw = CU->alloc((size_t)Cs[i] * W * 4);
            CU->zero(dw, (size_t)Cs[i] * W * 4);
            qkv_[i] =
                (kda_conv_group){col, Cs[i], w, CU->alloc((size_t)N * Cs[i] * 2), d_rand_bf((size_t)N * Cs[i], 1), dw};
        }
        bench("conv_silu_fwd q,k,v one call [65536x1024]", f_conv_qkv_fwd, n * bf * 2 + Ct * W * f4, 12);
        bench("conv_silu_bwd q,k,v one call", f_conv_qkv_bwd, n * bf * 3 + 3.0 * Ct * W * f4, 12);
        for (int i = 0; i < 3; i++)
            CU->free((void *)qkv_[i].w), CU->free(qkv_[i].y), CU->free((void *)qkv_[i].dy), CU->free(qkv_[i].dw);
        CU->free(cx_), CU->free(cdx_);
    }
    CU->free(x_), CU->free(dy_), CU->free(w_), CU->free(y_), CU->free(dx_), CU->free(rstd_), CU->free(dw_);

    // SwiGLU [N, 4096]
    size_t sn = (size_t)N * F;
    sgu_ = d_rand_bf(2 * sn, 1), sdz_ = d_rand_bf(sn, 1);
    sz_ = CU->alloc(sn * 2), sdgu_ = CU->alloc(2 * sn * 2);
    bench("swiglu_fwd [65536x4096]", f_swiglu_fwd, (double)sn * bf * 3, 12);
    bench("swiglu_bwd", f_swiglu_bwd, (double)sn * bf * 5, 12);
    bench("swiglu_bwd + z (recompute fused)", f_swiglu_bwd_z, (double)sn * bf * 6, 12);
    CU->free(sgu_), CU->free(sdz_), CU->free(sz_), CU->free(sdgu_);

    // optimizer over ~300M parameters in 507 tensors: the tied embedding, then 506 of equal size
    // (16-float aligned like the model's)
    nseg = 507;
    segs = (kda_adamw_seg *)kda_malloc(nseg * sizeof *segs);
    size_t emb = (size_t)NV * D, rest = 172 * 1000 * 1000 / 506, off = 0;
    for (int i = 0; i < nseg; i++) {
        size_t n = i ? rest + (i % 7) : emb;
        segs[i] = (kda_adamw_seg){off, n, i % 3 ? 0.1f : 0.0f};
        off += (n + 15) & ~(size_t)15;
    }
    P = off;
    pm_ = d_rand_f32(P, 0.02, 0), pg_ = d_rand_f32(P, 1e-3, 0), pmm_ = d_rand_f32(P, 1e-3, 0);
    pvv_ = d_rand_f32(P, 1e-6, 1), pw_ = CU->alloc(P * 2);
    double Pd = (double)P;
    bench("sumsq (grad norm) [300M fp32]", f_sumsq, Pd * f4, 1);
    bench("adamw_multi (507 tensors, 1 launch)", f_adamw_multi, Pd * 30, 1);
    CU->free(pm_), CU->free(pg_), CU->free(pmm_), CU->free(pvv_), CU->free(pw_);

    // fused head + cross-entropy (GEMMs included); bytes: the logits' 2 reads + 1 write
    hid_ = d_rand_bf((size_t)N * D, 1), E_ = d_rand_bf((size_t)NV * D, 0.02);
    ce_dx_ = CU->alloc((size_t)N * D * 2), dE_ = CU->alloc((size_t)NV * D * 4);
    CU->zero(dE_, (size_t)NV * D * 4);
    tg_ = (int32_t *)CU->alloc((size_t)N * 4);
    int32_t *tg = (int32_t *)kda_malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) tg[i] = i % 97 == 0 ? -100 : (int32_t)kda_rng_below(&RNG, NV);
    CU->to_device(tg_, tg, (size_t)N * 4);
    double lg = (double)N * NV * bf;
    bench("lm_head_ce train (3 GEMMs + CE rows)", f_ce, lg * 3, 1);
    env_saved ec = env_set("KDA_CE_CLUSTER", "0"); // the on-chip row kernel, one block a row, for comparison
    bench("lm_head_ce train, one block a row", f_ce, lg * 3, 0);
    env_restore(&ec);
    bench("lm_head_ce forward (1 GEMM + CE rows)", f_ce_fwd, lg * 1, 0);
    CU->free(hid_), CU->free(E_), CU->free(ce_dx_), CU->free(dE_), CU->free(tg_);
    free(tg), free(segs);

    printf("\n=== bench_ops_cuda summary (%d tokens; copy %.0f GB/s; per step = calls in one 300M training "
           "step without recompute)\n",
           N, copy_gbs);
    printf("%-38s %9s %9s %8s %6s %10s\n", "op", "ms", "GB/s", "%copy", "calls", "ms/step");
    double tot = 0;
    for (int i = 0; i < nrows; i++) {
        double gbs = rows[i].gb / (rows[i].ms / 1e3);
        printf("%-38s %9.3f %9.1f %7.1f%% %6.0f %10.2f\n", rows[i].name, rows[i].ms, gbs, 100.0 * gbs / copy_gbs,
               rows[i].per_step, rows[i].ms * rows[i].per_step);
        tot += rows[i].ms * rows[i].per_step;
    }
    printf("%-38s %9s %9s %8s %6s %10.2f\n", "total per step (these ops)", "", "", "", "", tot);
    return 0;
}
