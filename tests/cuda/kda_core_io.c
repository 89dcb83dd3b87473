// kda_core_io.c — runs the CUDA KDA core on inputs from files, for the comparison with FLA's
// chunk_kda on the same GPU (tests/cuda/fla_kda_compare.py writes the inputs and reads back).
//   kda_core_io DIR B T H K V
// reads DIR/{q,k,f}.bf16 [B,T,H,K], v.bf16 and do.bf16 [B,T,H,V], b.bf16 [B,T,H],
// A_log.bf16 [H], dt_bias.bf16 [H*K] (raw little-endian bf16; A_log and dt_bias go to the core
// widened to fp32, ops.h role S); writes o, dq, dk, dv, df, db,
// dA_log, ddt_bias as raw fp32 (.f32), the accumulated parameter gradients starting from 0.
#include "cuda/cuda_test_util.h"

// DIR/NAME.bf16: n raw bf16 values (host memory)
static uint16_t *read_bf(const char *dir, const char *name, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.bf16", dir, name);
    FILE *fp = kda_fopen(p, "rb");
    uint16_t *h = kda_malloc(n * 2 + 2);
    if (fread(h, 2, n, fp) != n) kda_die("%s: expected %zu bf16 values", p, n);
    fclose(fp);
    return h;
}

static void *load_bf(const char *dir, const char *name, size_t n) {
    uint16_t *h = read_bf(dir, name, n);
    void *d = CU->alloc(n * 2);
    CU->to_device(d, h, n * 2);
    free(h);
    return d;
}

static float *load_bf_as_f32(const char *dir, const char *name, size_t n) {
    uint16_t *h = read_bf(dir, name, n);
    float *x = kda_malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = kda_bf16_to_f32(h[i]);
    float *d = d_f32(x, n);
    free(h), free(x);
    return d;
}

static void save_f32(const char *dir, const char *name, const float *h, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.f32", dir, name);
    FILE *fp = kda_fopen(p, "wb");
    if (fwrite(h, 4, n, fp) != n || fclose(fp) != 0) kda_die("%s: write failed", p);
}

int main(int argc, char **argv) {
    if (argc != 7) kda_die("usage: kda_core_io DIR B T H K V");
    const char *why = NULL;
    CU = kda_ops_cuda(&why);
    if (!CU) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return 0;
    }
    const char *dir = argv[1];
    kda_core_dims d = {.B = atoi(argv[2]),
                       .T = atoi(argv[3]),
                       .H = atoi(argv[4]),
                       .K = atoi(argv[5]),
                       .V = atoi(argv[6]),
                       .chunk = 64,
                       .algo = KDA_CHUNKED};
    d.scale = 1.0f / sqrtf((float)d.K);
    size_t nk = (size_t)d.B * d.T * d.H * d.K, nv = (size_t)d.B * d.T * d.H * d.V, nb = (size_t)d.B * d.T * d.H;
    void *q = load_bf(dir, "q", nk), *k = load_bf(dir, "k", nk), *f = load_bf(dir, "f", nk);
    void *v = load_bf(dir, "v", nv), *dO = load_bf(dir, "do", nv), *b = load_bf(dir, "b", nb);
    float *A = load_bf_as_f32(dir, "A_log", d.H), *dt = load_bf_as_f32(dir, "dt_bias", (size_t)d.H * d.K);
    void *o = d_bf_nan(nv), *dq = d_bf_nan(nk), *dk = d_bf_nan(nk), *dv = d_bf_nan(nv), *df = d_bf_nan(nk);
    void *db = d_bf_nan(nb);
    float *dA = CU->alloc(d.H * 4), *ddt = CU->alloc((size_t)d.H * d.K * 4);
    CU->zero(dA, d.H * 4), CU->zero(ddt, (size_t)d.H * d.K * 4);
    void *saved = CU->alloc(CU->kda_saved_bytes(&d));
    CU->kda_fwd(&d, q, k, v, f, b, A, dt, o, saved);
    CU->kda_bwd(&d, q, k, v, f, b, A, dt, saved, dO, dq, dk, dv, df, db, dA, ddt);
    struct {
        const char *name;
        void *p;
        size_t n;
        int f32;
    } outs[] = {{"o", o, nv, 0},
                {"dq", dq, nk, 0},
                {"dk", dk, nk, 0},
                {"dv", dv, nv, 0},
                {"df", df, nk, 0},
                {"db", db, nb, 0},
                {"dA_log", dA, (size_t)d.H, 1},
                {"ddt_bias", ddt, (size_t)d.H * d.K, 1}};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        float *h = outs[i].f32 ? h_of_f32(outs[i].p, outs[i].n) : h_of_bf(outs[i].p, outs[i].n);
        save_f32(dir, outs[i].name, h, outs[i].n);
        free(h);
    }
    printf("kda_core_io: B=%d T=%d H=%d K=%d V=%d done\n", d.B, d.T, d.H, d.K, d.V);
    return 0;
}
