// gemm.cu — cuBLASLt GEMMs (bf16 operands, fp32 accumulation) and the linear layer ops.
//
// Row-major kda tensors are column-major transposes, so y[N,O] = x[N,In]·W[O,In]ᵀ is the
// column-major product yᵀ[O,N] = op_T(W)·xᵀ ("TN", the layout cuBLAS runs fastest).
// Each distinct problem (shape, transposes, output type, bias, pointer alignment) gets one
// plan (descriptors + the heuristic's first algorithm), created on first use and cached, so
// the training step itself asks cuBLASLt for nothing but the matmul. cu_gemm_survey times the
// heuristic's other candidates for every plan made so far (`kda bench --gemm-survey`).
#include "backend/cuda/cuda_common.cuh"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#define CUBLAS_CHECK(call)                                                                                             \
    do {                                                                                                               \
        cublasStatus_t s_ = (call);                                                                                    \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                               \
            kda_die_at(__FILE__, __LINE__, "cuBLASLt call %s failed: status %d (%s)", #call, (int)s_,                  \
                       cublasLtGetStatusString(s_));                                                                   \
    } while (0)

enum { WORKSPACE_BYTES = 32 << 20, MAX_PLANS = 256 };

struct plan_key {
    int ta, tb, m, n, k, lda, ldb, ldc, c_f32, bias;
    unsigned align_a, align_b, align_c;
};

struct plan {
    plan_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    long calls;    // cu_gemm calls that used this plan
    float beta;    // the last call's beta (the survey times with it)
    char name[32]; // the step profile's name for its spans: "GEMM TN m1024 n65536 k5632"
};

static cublasLtHandle_t lt;
static void *workspace;
static plan plans[MAX_PLANS];
static int n_plans, next_evict;

void cu_gemm_init(void) {
    CUBLAS_CHECK(cublasLtCreate(&lt));
    CU_CHECK(cudaMalloc(&workspace, WORKSPACE_BYTES));
}

static unsigned ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 2 && (a & (al - 1))) al >>= 1;
    return al;
}

static void plan_destroy(plan *p) {
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->lc);
    cublasLtMatmulDescDestroy(p->desc);
}

// Up to n of cuBLASLt's candidate algorithms for p's problem (its pointer alignments and our
// workspace), best first by its heuristic; returns how many.
static int plan_heuristics(const plan *p, cublasLtMatmulHeuristicResult_t *res, int n) {
    const plan_key *key = &p->key;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = WORKSPACE_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t al[3] = {key->align_a, key->align_b, key->align_c};
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], 4));
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, n, res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    return found;
}

static plan *plan_get(const plan_key *key) {
    for (int i = 0; i < n_plans; i++)
        if (!memcmp(&plans[i].key, key, sizeof *key)) return &plans[i];
    plan *p;
    if (n_plans < MAX_PLANS) {
        p = &plans[n_plans++];
    } else { // many distinct shapes (e.g. a sweep): recycle round-robin
        p = &plans[next_evict];
        next_evict = (next_evict + 1) % MAX_PLANS;
        CU_CHECK(cudaStreamSynchronize(cu_stream));
        plan_destroy(p);
    }
    memset(p, 0, sizeof *p);
    p->key = *key;
    snprintf(p->name, sizeof p->name, "GEMM %s%s m%d n%d k%d", key->ta ? "T" : "N", key->tb ? "T" : "N", key->m, key->n,
             key->k);
    cudaDataType_t ct = key->c_f32 ? CUDA_R_32F : CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (key->bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS; // bias type = D type (bf16)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    }
    // stored shapes (column-major): A is m×k (k×m when transposed), B is k×n (n×k)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, key->ta ? key->k : key->m, key->ta ? key->m : key->k,
                                            key->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, key->tb ? key->n : key->k, key->tb ? key->k : key->n,
                                            key->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, ct, key->m, key->n, key->ldc));

    cublasLtMatmulHeuristicResult_t res;
    if (plan_heuristics(p, &res, 1) < 1)
        kda_die("cuBLASLt has no algorithm for a %s%s GEMM m=%d n=%d k=%d (lda %d ldb %d ldc %d, %s output)",
                key->ta ? "T" : "N", key->tb ? "T" : "N", key->m, key->n, key->k, key->lda, key->ldb, key->ldc,
                key->c_f32 ? "fp32" : "bf16");
    p->algo = res.algo;
    return p;
}

void cu_gemm(int ta, int tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, void *C, int ldc,
             int c_f32, float alpha, float beta, const void *bias) {
    cu_gemm_cd(ta, tb, m, n, k, A, lda, B, ldb, C, C, ldc, c_f32, alpha, beta, bias);
}

void cu_gemm_cd(int ta, int tb, int m, int n, int k, const void *A, int lda, const void *B, int ldb, const void *Cin,
                void *C, int ldc, int c_f32, float alpha, float beta, const void *bias) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) { // empty sum: C = beta·C
        KDA_CHECK((beta == 0.0f || beta == 1.0f) && Cin == C, "empty GEMM with beta %g", beta);
        if (beta == 0.0f)
            for (int j = 0; j < n; j++)
                CU_CHECK(cudaMemsetAsync((char *)C + (size_t)j * ldc * (c_f32 ? 4 : 2), 0, (size_t)m * (c_f32 ? 4 : 2),
                                         cu_stream));
        return;
    }
    plan_key key;
    memset(&key, 0, sizeof key);
    key.ta = ta, key.tb = tb, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.c_f32 = c_f32, key.bias = bias != NULL;
    unsigned ac = ptr_align(C), aci = ptr_align(Cin);
    key.align_a = ptr_align(A), key.align_b = ptr_align(B), key.align_c = ac < aci ? ac : aci;
    plan *p = plan_get(&key);
    p->calls++, p->beta = beta;
    if (bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    int span = cu_prof_push(KDA_PHASE_GEMM, p->name);
    cu_prof_gemm_flops(2.0 * m * n * k);
    CUBLAS_CHECK(cublasLtMatmul(lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, Cin, p->lc, C, p->lc, &p->algo,
                                workspace, WORKSPACE_BYTES, cu_stream));
    cu_prof_pop(span);
}

// ---- algorithm survey ----

// Each candidate runs for at least SURVEY_MS (reps set once per problem from the heuristic's
// time), so that the card sits at its power limit as it does through a training step: a GEMM
// timed for a few calls runs at a clock the step never sees.
enum { SURVEY_ALGOS = 16, SURVEY_MAX_REPS = 400 };
static const float SURVEY_MS = 40.0f;

// Operands of the step's scale (|x| < 0.05, hashed from the index): the tensor cores draw less
// power on zeros, which would again time a candidate above the step's clock.
__global__ void survey_fill_kernel(bf16 *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        x[i] = f2bf(((float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f) * 0.1f);
    }
}

// Mean time of one call of algo on p's problem with the given operands over reps calls (ms), or
// -1 when cuBLASLt refuses it.
static float survey_time(plan *p, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B, void *C, int reps,
                         cudaEvent_t e0, cudaEvent_t e1) {
    float alpha = 1.0f, beta = p->beta;
    for (int r = 0; r < reps + 2; r++) {
        if (r == 2) CU_CHECK(cudaEventRecord(e0, cu_stream));
        cublasStatus_t st = cublasLtMatmul(lt, p->desc, &alpha, A, p->la, B, p->lb, &beta, C, p->lc, C, p->lc, algo,
                                           workspace, WORKSPACE_BYTES, cu_stream);
        if (st != CUBLAS_STATUS_SUCCESS) return -1.0f;
    }
    CU_CHECK(cudaEventRecord(e1, cu_stream));
    CU_CHECK(cudaEventSynchronize(e1));
    float ms;
    CU_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / reps;
}

struct survey_row {
    plan *p;
    float heur_ms, best_ms;
    int best, n;
    cublasLtMatmulAlgo_t best_algo;
};

// Times p's candidates on scratch operands of its shapes (survey_fill_kernel); false when they
// do not fit.
static bool survey_plan(plan *p, survey_row *row, cudaEvent_t e0, cudaEvent_t e1) {
    const plan_key *k = &p->key;
    size_t a = (size_t)k->lda * (k->ta ? k->m : k->k) * 2, b = (size_t)k->ldb * (k->tb ? k->k : k->n) * 2;
    size_t c = (size_t)k->ldc * k->n * (k->c_f32 ? 4 : 2), bias = (size_t)k->m * 2;
    char *buf = NULL;
    if (cudaMalloc(&buf, a + b + c + bias + 1024) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    char *A = buf, *B = A + ((a + 255) & ~(size_t)255), *C = B + ((b + 255) & ~(size_t)255);
    char *bp = C + ((c + 255) & ~(size_t)255);
    size_t n_bf16 = (a + b + c + bias + 1024) / 2;
    survey_fill_kernel<<<cu_blocks(n_bf16, 256, 4096), 256, 0, cu_stream>>>((bf16 *)buf, n_bf16);
    CU_LAUNCHED();
    if (k->bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    cublasLtMatmulHeuristicResult_t res[SURVEY_ALGOS];
    row->p = p, row->n = plan_heuristics(p, res, SURVEY_ALGOS), row->best = 0;
    float once = survey_time(p, &p->algo, A, B, C, 1, e0, e1);
    int reps = once > 0 ? (int)(SURVEY_MS / once) + 1 : 1;
    reps = reps < SURVEY_MAX_REPS ? reps : SURVEY_MAX_REPS;
    row->heur_ms = survey_time(p, &p->algo, A, B, C, reps, e0, e1), row->best_ms = row->heur_ms;
    row->best_algo = p->algo;
    for (int i = 1; i < row->n; i++) {
        float t = survey_time(p, &res[i].algo, A, B, C, reps, e0, e1);
        if (t > 0 && t < row->best_ms) row->best_ms = t, row->best = i, row->best_algo = res[i].algo;
    }
    CU_CHECK(cudaFree(buf));
    return true;
}

static int cmp_survey_cost(const void *x, const void *y) {
    const survey_row *a = (const survey_row *)x, *b = (const survey_row *)y;
    double ca = a->heur_ms * a->p->calls, cb = b->heur_ms * b->p->calls;
    return (ca < cb) - (ca > cb);
}

void cu_gemm_survey(FILE *out, int steps) {
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    cudaEvent_t e0, e1;
    CU_CHECK(cudaEventCreate(&e0));
    CU_CHECK(cudaEventCreate(&e1));
    survey_row *rows = (survey_row *)calloc(n_plans ? n_plans : 1, sizeof *rows);
    int nr = 0;
    for (int i = 0; i < n_plans; i++)
        if (plans[i].calls > 0 && survey_plan(&plans[i], &rows[nr], e0, e1))
            nr++;
        else if (plans[i].calls > 0)
            fprintf(out, "  GEMM survey: m=%d n=%d k=%d left out (its scratch operands do not fit)\n", plans[i].key.m,
                    plans[i].key.n, plans[i].key.k);
    qsort(rows, nr, sizeof *rows, cmp_survey_cost);
    fprintf(out, "  GEMM survey (cuBLASLt heuristic's choice vs the fastest of its first %d candidates, per step):\n",
            SURVEY_ALGOS);
    fprintf(out, "  %6s %6s %6s %2s %4s %5s %9s %9s %6s %7s %7s\n", "m", "n", "k", "op", "out", "calls", "chosen ms",
            "best ms", "best#", "TFLOP/s", "best");
    double tot_h = 0, tot_b = 0;
    for (int i = 0; i < nr; i++) {
        const plan_key *k = &rows[i].p->key;
        double per = (double)rows[i].p->calls / steps, fl = 2.0 * k->m * k->n * k->k;
        tot_h += per * rows[i].heur_ms, tot_b += per * rows[i].best_ms;
        rows[i].p->algo = rows[i].best_algo;
        fprintf(out, "  %6d %6d %6d %c%c %4s %5.1f %9.3f %9.3f %3d/%-2d %7.0f %7.0f\n", k->m, k->n, k->k,
                k->ta ? 'T' : 'N', k->tb ? 'T' : 'N', k->c_f32 ? "fp32" : "bf16", per, per * rows[i].heur_ms,
                per * rows[i].best_ms, rows[i].best, rows[i].n, fl / (rows[i].heur_ms * 1e9),
                fl / (rows[i].best_ms * 1e9));
    }
    fprintf(
        out,
        "  GEMM survey: %d problems, %.1f ms a step with the chosen algorithms, %.1f ms with the fastest (%.1f%%)\n",
        nr, tot_h, tot_b, tot_h > 0 ? 100.0 * (tot_b - tot_h) / tot_h : 0.0);
    fprintf(out, "  GEMM survey: the fastest algorithms are in use from here on\n");
    free(rows);
    CU_CHECK(cudaEventDestroy(e0));
    CU_CHECK(cudaEventDestroy(e1));
}

// ---- linear ----

void cu_linear_fwd(const void *x, int ldx, const void *W, const void *bias, const void *res, void *y, int N, int In,
                   int O) {
    // yᵀ[O,N] = op_T(W[In,O] col-major)·xᵀ[In,N] (+ resᵀ: cuBLASLt reads C = res, writes D = y)
    cu_gemm_cd(1, 0, O, N, In, W, In, x, ldx, res ? res : y, y, O, 0, 1.0f, res ? 1.0f : 0.0f, bias);
}

// dbias[o] += Σ_n dy[n,o]: block (32 columns × 8 row lanes) sums a fixed row range.
__global__ void bias_grad_partial(const bf16 *__restrict__ dy, int N, int O, int rows_per_blk,
                                  float *__restrict__ part) {
    __shared__ float s[8][33];
    int o = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * rows_per_blk, r1 = min(N, r0 + rows_per_blk);
    float acc = 0.0f;
    if (o < O)
        for (int n = r0 + threadIdx.y; n < r1; n += 8) acc += bf2f(dy[(size_t)n * O + o]);
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < O) {
        float t = 0.0f;
        for (int i = 0; i < 8; i++) t += s[i][threadIdx.x];
        part[(size_t)blockIdx.y * O + o] = t;
    }
}

// The bias gradient sums N rows in G groups of *rows (at most 256 groups), then the groups.
static int bias_grad_groups(int N, int *rows) {
    int G = (N + 255) / 256;
    if (G > 256) G = 256;
    *rows = (N + G - 1) / G;
    return (N + *rows - 1) / *rows;
}

// partial bias gradients [G, O] (only a linear with a bias takes scratch)
size_t cu_linear_bwd_scratch_bytes(int N, int O) {
    int rows;
    return N > 0 ? (size_t)bias_grad_groups(N, &rows) * O * sizeof(float) : 0;
}

void cu_linear_bwd(const void *x, int ldx, const void *W, const void *dy, void *dx, float *dW, float *dbias, int N,
                   int In, int O, int accumulate) {
    // dxᵀ[In,N] = W[In,O] (col-major view of W) · dyᵀ[O,N]
    if (dx) cu_gemm(0, 0, In, N, O, W, In, dy, O, dx, ldx, 0, 1.0f, accumulate ? 1.0f : 0.0f, NULL);
    // dWᵀ[In,O] += xᵀ[In,N] · op_T(dyᵀ[O,N])
    if (dW) cu_gemm(0, 1, In, O, N, x, ldx, dy, O, dW, In, 1, 1.0f, 1.0f, NULL);
    if (dbias && N > 0) {
        int rows, G = bias_grad_groups(N, &rows);
        float *part = (float *)cu_scratch(cu_linear_bwd_scratch_bytes(N, O));
        bias_grad_partial<<<dim3((O + 31) / 32, G), dim3(32, 8), 0, cu_stream>>>((const bf16 *)dy, N, O, rows, part);
        CU_LAUNCHED();
        cu_colreduce_add(part, G, O, dbias);
    }
}
