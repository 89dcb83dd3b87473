// kda_inputs.h — random KDA core inputs with the model's distributions (kda-model.md §2.4,
// §4): raw q, k, v, b ~ N(0,1), f ~ N(0, 0.5), A_log = ln U[1,16], dt_bias = softplus⁻¹(dt),
// dt log-uniform in [1e-3, 0.1]; the activations rounded to bf16 (what the CUDA backend stores),
// A_log and dt_bias fp32 (ops.h role S: the backends read them from the fp32 masters).
#ifndef KDA_CUDA_KDA_INPUTS_H
#define KDA_CUDA_KDA_INPUTS_H
#include "cuda/cuda_test_util.h"

typedef struct {
    kda_core_dims d;
    size_t nk, nv, nb; // elements of q/k/f, v/o, b
    float *q, *k, *v, *f, *b, *A_log, *dt_bias, *dO;
} kda_inputs;

static inline kda_inputs kda_inputs_make(int B, int T, int H, int K, int V, int chunk) {
    kda_inputs x;
    memset(&x, 0, sizeof x);
    x.d.B = B, x.d.T = T, x.d.H = H, x.d.K = K, x.d.V = V, x.d.chunk = chunk;
    x.d.scale = 1.0f / sqrtf((float)K), x.d.algo = KDA_CHUNKED;
    x.nk = (size_t)B * T * H * K, x.nv = (size_t)B * T * H * V, x.nb = (size_t)B * T * H;
    x.q = h_randn_bf(x.nk, 1.0), x.k = h_randn_bf(x.nk, 1.0), x.v = h_randn_bf(x.nv, 1.0);
    x.f = h_randn_bf(x.nk, 0.5), x.b = h_randn_bf(x.nb, 1.0), x.dO = h_randn_bf(x.nv, 1.0);
    x.A_log = (float *)kda_malloc(H * sizeof(float));
    x.dt_bias = (float *)kda_malloc((size_t)H * K * sizeof(float));
    for (int h = 0; h < H; h++) x.A_log[h] = (float)log(1.0 + 15.0 * kda_rng_uniform(&RNG));
    for (int i = 0; i < H * K; i++) {
        double dt = exp(kda_rng_uniform(&RNG) * (log(0.1) - log(0.001)) + log(0.001));
        x.dt_bias[i] = (float)(dt + log(-expm1(-dt)));
    }
    return x;
}

static inline void kda_inputs_free(kda_inputs *x) {
    free(x->q), free(x->k), free(x->v), free(x->f), free(x->b), free(x->A_log), free(x->dt_bias), free(x->dO);
}
#endif
