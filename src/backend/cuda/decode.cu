// decode.cu — the forwards that continue from a recurrent state (generation; ops.h
// conv_silu_step, kda_fwd_state). Simple, correct kernels: generation moves few tokens per call.
//
// conv_silu_step: one thread per (sequence, channel) walks the tokens in order with a sliding
//   window of the last W inputs in registers, starting from the tail; it then writes the new
//   tail over the old one (only that thread touches its channel: in place is safe).
// kda_fwd_state, KDA_RECURRENT (kda-model.md §3.1): one block per (b, h); thread c owns value
//   column c of the fp32 state S[K, V] in shared memory, so the state update needs no
//   synchronisation; per token the block shares l2-normalised q, k and the decay e^α [K].
//   Per token: S ← Diag(e^α)·S; e = v − Sᵀk; S += β·k·eᵀ; o = s·Sᵀq (fp32, o stored bf16).
// kda_fwd_state, KDA_CHUNKED: the chunked forward of kda_fwd.cu with the state handed in and out.
#include "backend/cuda/kda_cuda.cuh"

enum { CONV_MAXW = CU_CONV_MAXW };

__global__ void conv_silu_step_kernel(bf16 *__restrict__ tail, const bf16 *__restrict__ x, int ldx,
                                      const float *__restrict__ w, bf16 *__restrict__ y, int B, int T, int C, int W) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * C) return;
    int c = (int)(i % C), b = (int)(i / C), P = W - 1;
    float wr[CONV_MAXW], win[CONV_MAXW]; // win[j] = X[t + j]: the inputs the output at t reads
#pragma unroll
    for (int j = 0; j < CONV_MAXW; j++) {
        wr[j] = j < W ? w[(size_t)c * W + j] : 0.0f;
        win[j] = j < P ? bf2f(tail[((size_t)b * P + j) * C + c]) : 0.0f;
    }
    for (int t = 0; t < T; t++) {
        float xv = bf2f(x[((size_t)b * T + t) * ldx + c]);
#pragma unroll
        for (int j = 0; j < CONV_MAXW; j++)
            if (j == P) win[j] = xv;
        float z = 0.0f;
#pragma unroll
        for (int j = 0; j < CONV_MAXW; j++)
            if (j < W) z += wr[j] * win[j];
        y[((size_t)b * T + t) * C + c] = f2bf(z * sigmoidf_(z));
#pragma unroll
        for (int j = 0; j + 1 < CONV_MAXW; j++) win[j] = win[j + 1];
    }
#pragma unroll
    for (int j = 0; j < CONV_MAXW; j++)
        if (j < P) tail[((size_t)b * P + j) * C + c] = f2bf(win[j]);
}

void cu_conv_silu_step(void *tail, const void *x, int ldx, const float *w, void *y, int B, int T, int C, int W) {
    size_t n = (size_t)B * C;
    if (!n || T <= 0) return;
    KDA_CHECK(W >= 1 && W <= CONV_MAXW, "conv_size %d not supported by the CUDA backend (1..%d)", W, CONV_MAXW);
    conv_silu_step_kernel<<<cu_blocks(n, 128), 128, 0, cu_stream>>>((bf16 *)tail, (const bf16 *)x, ldx, w, (bf16 *)y, B,
                                                                    T, C, W);
    CU_LAUNCHED();
}

enum { REC_THREADS = 128 }; // >= K and >= V (both <= KDA_MAX_KV = 128)

// grid (H, B), REC_THREADS threads; dynamic shared memory: S [K·V] + q, k, decay [K] + 2
__global__ void __launch_bounds__(REC_THREADS)
    kda_recurrent_kernel(int T, int H, int K, int V, int ldb, float scale, const bf16 *__restrict__ q,
                         const bf16 *__restrict__ k, const bf16 *__restrict__ v, const bf16 *__restrict__ f,
                         const bf16 *__restrict__ bl, const float *__restrict__ A_log,
                         const float *__restrict__ dt_bias, bf16 *__restrict__ o, float *__restrict__ Sio) {
    extern __shared__ float sm[];
    float *S = sm, *qs = S + (size_t)K * V, *ks = qs + K, *dec = ks + K, *nrm = dec + K;
    int h = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
    float *Sg = Sio + ((size_t)b * H + h) * K * V;
    for (int e = tid; e < K * V; e += REC_THREADS) S[e] = Sg[e];
    float eA = expf(A_log[h]);
    for (int t = 0; t < T; t++) {
        size_t row = ((size_t)b * T + t) * H + h;
        if (tid < K) {
            qs[tid] = bf2f(q[row * K + tid]);
            ks[tid] = bf2f(k[row * K + tid]);
            dec[tid] = expf(-eA * softplus20(bf2f(f[row * K + tid]) + dt_bias[(size_t)h * K + tid]));
        }
        __syncthreads();
        if (tid < 32) { // l2 norms of q and k (kda_core.h: x / sqrt(Σx² + 1e-6))
            float sq = 0.0f, sk = 0.0f;
            for (int j = tid; j < K; j += 32) sq += qs[j] * qs[j], sk += ks[j] * ks[j];
            sq = warp_sum(sq), sk = warp_sum(sk);
            if (tid == 0) nrm[0] = l2_rstd(sq), nrm[1] = l2_rstd(sk);
        }
        __syncthreads();
        if (tid < V) {
            int c = tid;
            float rq = nrm[0], rk = nrm[1], beta = sigmoidf_(bf2f(bl[((size_t)b * T + t) * ldb + h]));
            float e = bf2f(v[row * V + c]);
            for (int j = 0; j < K; j++) {
                float s = S[(size_t)j * V + c] * dec[j];
                S[(size_t)j * V + c] = s;
                e -= s * (ks[j] * rk);
            }
            float acc = 0.0f, be = beta * e;
            for (int j = 0; j < K; j++) {
                float s = S[(size_t)j * V + c] + (ks[j] * rk) * be;
                S[(size_t)j * V + c] = s;
                acc += s * (qs[j] * rq);
            }
            o[row * V + c] = f2bf(scale * acc);
        }
        __syncthreads(); // qs, ks, dec are overwritten by the next token
    }
    for (int e = tid; e < K * V; e += REC_THREADS) Sg[e] = S[e];
}

void cu_kda_fwd_state(const kda_core_dims *d, const void *q, const void *k, const void *v, const void *f, const void *b,
                      const float *A_log, const float *dt_bias, void *o, void *saved, float *S) {
    KDA_CHECK(S, "kda_fwd_state needs a state buffer");
    if (d->B <= 0 || d->T <= 0) return;
    if (d->algo == KDA_CHUNKED) {
        KDA_CHECK(saved, "kda_fwd_state (chunked) needs the saved scratch of kda_saved_bytes");
        cu_kda_fwd_chunked_state(d, q, k, v, f, b, A_log, dt_bias, o, saved, S);
        return;
    }
    KDA_CHECK(d->K >= 1 && d->K <= KDA_MAX_KV && d->V >= 1 && d->V <= KDA_MAX_KV,
              "KDA head sizes K=%d V=%d: the CUDA core supports 1..%d", d->K, d->V, KDA_MAX_KV);
    size_t smem = sizeof(float) * ((size_t)d->K * d->V + 3 * (size_t)d->K + 2);
    if (smem > 48 * 1024)
        CU_CHECK(cudaFuncSetAttribute(kda_recurrent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kda_recurrent_kernel<<<dim3(d->H, d->B), REC_THREADS, smem, cu_stream>>>(
        d->T, d->H, d->K, d->V, kda_core_ldb(d), d->scale, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
        (const bf16 *)f, (const bf16 *)b, A_log, dt_bias, (bf16 *)o, S);
    CU_LAUNCHED();
}
