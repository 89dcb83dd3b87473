// kda_gemm.cu — the chunk-batched small GEMM of the KDA core (see kda_cuda.cuh). A block
// computes one 64×64 output tile of one chunk in fp32, staging 16-deep slices of the operands
// in shared memory; operands are read through views, so bf16/fp32, transposes, token rows past
// the sequence end (zeros) and state snapshots all go through the same code.
#include "kda_cuda.cuh"

enum { TM = 64, TK = 16 };

__device__ __forceinline__ float kv_get(const kview &v, const kda_shape &s, int b, int c, int h, int n, int i, int k) {
    int row = v.trans ? k : i, col = v.trans ? i : k;
    size_t off;
    if (v.kind == KV_TOK) {
        if (row >= n) return 0.0f;
        off = kda_row(s, b, c, h, row) * v.ld + col;
    } else {
        off = (kda_chunk(s, b, c, h) * v.srows + row) * v.ld + col;
    }
    return v.f32 ? ((const float *)v.p)[off] : bf2f(((const bf16 *)v.p)[off]);
}

__global__ void __launch_bounds__(256) chunk_gemm_kernel(kda_shape s, kgemm g, int tiles_n, int tiles) {
    __shared__ float As[TK][TM + 1], Bs[TK][TM + 1];
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z / tiles, tile = blockIdx.z % tiles;
    int i0 = (tile / tiles_n) * TM, j0 = (tile % tiles_n) * TM;
    int n = min(s.C, s.T - c * s.C);
    int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    float acc[4][4] = {};
    for (int t = 0; t < g.nterms; t++) {
        const kgemm_term &tm = g.t[t];
        for (int k0 = 0; k0 < tm.Kd; k0 += TK) {
            for (int e = tid; e < TK * TM; e += 256) {
                // consecutive threads walk the stored rows' contiguous direction
                int kk, ii;
                if (tm.A.trans) ii = e % TM, kk = e / TM;
                else kk = e % TK, ii = e / TK;
                int i = i0 + ii, k = k0 + kk;
                As[kk][ii] = (i < g.M && k < tm.Kd) ? kv_get(tm.A, s, b, c, h, n, i, k) : 0.0f;
                int jj;
                if (tm.B.trans) kk = e % TK, jj = e / TK;
                else jj = e % TM, kk = e / TM;
                int j = j0 + jj;
                k = k0 + kk;
                Bs[kk][jj] = (j < g.N && k < tm.Kd) ? kv_get(tm.B, s, b, c, h, n, k, j) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < TK; kk++) {
                float a[4], bb[4];
#pragma unroll
                for (int x = 0; x < 4; x++) a[x] = As[kk][ty + 16 * x], bb[x] = Bs[kk][tx + 16 * x];
#pragma unroll
                for (int x = 0; x < 4; x++)
#pragma unroll
                    for (int y = 0; y < 4; y++) acc[x][y] += tm.alpha * a[x] * bb[y];
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int x = 0; x < 4; x++) {
        int i = i0 + ty + 16 * x;
        if (i >= g.M || i >= n) continue;
        size_t row = kda_row(s, b, c, h, i) * g.out_ld;
#pragma unroll
        for (int y = 0; y < 4; y++) {
            int j = j0 + tx + 16 * y;
            if (j >= g.N) continue;
            float v = acc[x][y];
            if ((g.mask == KMASK_LOWER && j > i) || (g.mask == KMASK_STRICT && j >= i)) v = 0.0f;
            if (g.out_f32) ((float *)g.out)[row + j] = v;
            else ((bf16 *)g.out)[row + j] = f2bf(v);
        }
    }
}

void kda_chunk_gemm(const kda_shape &s, const kgemm &g) {
    int tiles_n = (g.N + TM - 1) / TM, tiles = ((g.M + TM - 1) / TM) * tiles_n;
    KDA_CHECK((size_t)s.B * tiles <= 65535, "KDA batch %d too large for the chunk GEMM grid", s.B);
    chunk_gemm_kernel<<<dim3(s.NT, s.H, s.B * tiles), 256, 0, cu_stream>>>(s, g, tiles_n, tiles);
    CU_LAUNCHED();
}
