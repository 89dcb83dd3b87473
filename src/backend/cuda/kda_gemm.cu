// kda_gemm.cu — the chunk-batched small GEMM of the KDA core (see kda_cuda.cuh), on tensor
// cores. A block computes one 64×64 output tile of one chunk. 64-deep slices of the operands are
// staged in shared memory as bf16 in their stored orientation (a transposed operand is loaded
// into col_major fragments), read and written 16 bytes at a time along the stored rows; an fp32
// operand is staged as two bf16 parts, hi + lo, so that it keeps ~16 bits (each of its products
// is then two bf16 MMAs). 8 warps multiply 16×16×16 fragments with fp32 accumulation (WMMA);
// each term's alpha scales its fp32 sum. Operands are read through views (kda_cuda.cuh), so
// bf16/fp32, transposes, token rows past the sequence end (zeros) and state snapshots all go
// through the same code.
#include <mma.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "backend/cuda/kda_tile.cuh" // frag_load, acc_store (and kda_cuda.cuh)

using namespace nvcuda;

enum { TM = 64, WK = 64, AP = WK + 8, BP = TM + 8, CPD = TM + 4 };

union __align__(32) gemm_smem {
    struct {
        bf16 Ah[TM][AP], Al[TM][AP]; // A slice, row-major [i][k]
        bf16 Bh[WK][BP], Bl[WK][BP]; // B slice, row-major [k][j]
    } in;
    float Cs[TM][CPD]; // the finished tile
};

// Stages the logical block x ∈ [X0, X0+XL), y ∈ [Y0, Y0+YL) of a view into shared memory in the
// view's stored orientation: dst[r][q] (row pitch 'pitch') holds stored row R0+r, column Q0+q,
// i.e. the logical block row-major when the view is not transposed and column-major when it is
// (the fragments are then loaded col_major, so nothing is transposed through shared memory).
// An fp32 view also leaves its low part in lo. Zeros where x ≥ xmax, y ≥ ymax or the stored
// token row is past n. Global reads and shared stores move 8 elements (16 bytes of bf16) at once
// where the row length and the pointer allow it; such bf16 pieces are copied as they are, with
// cp.async (the caller waits for them before its barrier).
__device__ __forceinline__ void stage_block(const kview &v, const kda_shape &s, int b, int c, int h, int n, int X0,
                                            int XL, int xmax, int Y0, int YL, int ymax, bf16 *hi, bf16 *lo, int pitch) {
    int R0 = v.trans ? Y0 : X0, RL = v.trans ? YL : XL, Q0 = v.trans ? X0 : Y0, QL = v.trans ? XL : YL;
    int rmax = v.trans ? ymax : xmax, qmax = v.trans ? xmax : ymax;
    size_t base, rstride; // stored row r starts at element base + r·rstride
    if (v.kind == KV_TOK) {
        rmax = min(rmax, n);
        base = kda_row(s, b, c, h, 0) * v.ld, rstride = (size_t)s.H * v.ld;
    } else {
        base = kda_chunk(s, b, c, h) * v.srows * v.ld, rstride = v.ld;
    }
    bool vec = v.ld % 8 == 0 && ((uintptr_t)v.p & 15) == 0;
    int nvq = QL / 8;
    for (int e = threadIdx.x; e < RL * nvq; e += blockDim.x) {
        int rr = e / nvq, qq = (e - rr * nvq) * 8, r = R0 + rr, q = Q0 + qq;
        float x[8];
        size_t off = base + (size_t)r * rstride + q;
        if (vec && !v.f32 && !v.rscale && r < rmax && q + 8 <= qmax) { // bf16 as stored: a raw 16-byte copy
            cp_async16(&hi[rr * pitch + qq], (const bf16 *)v.p + off);
            continue;
        }
        if (vec && r < rmax && q + 8 <= qmax) {
            if (v.f32) {
                load16((const float *)v.p + off, x);
                load16((const float *)v.p + off + 4, x + 4);
            } else {
                load16((const bf16 *)v.p + off, x);
            }
        } else {
#pragma unroll
            for (int t = 0; t < 8; t++) {
                bool ok = r < rmax && q + t < qmax;
                x[t] = !ok ? 0.0f : v.f32 ? ((const float *)v.p)[off + t] : bf2f(((const bf16 *)v.p)[off + t]);
            }
        }
        if (v.rscale && r < rmax) { // a token row scaled before rounding (β·v: the bits of bf16(β·v))
            float sc = v.rscale[kda_row(s, b, c, h, 0) + (size_t)r * s.H];
#pragma unroll
            for (int t = 0; t < 8; t++) x[t] = sc * x[t];
        }
        __align__(16) bf16 hv[8];
#pragma unroll
        for (int t = 0; t < 8; t++) hv[t] = f2bf(x[t]);
        *(uint4 *)&hi[rr * pitch + qq] = *(const uint4 *)hv;
        if (v.f32) {
#pragma unroll
            for (int t = 0; t < 8; t++) hv[t] = f2bf(x[t] - bf2f(hv[t]));
            *(uint4 *)&lo[rr * pitch + qq] = *(const uint4 *)hv;
        }
    }
}

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> facc;

// One staged 64-deep slice: part[f] += op(A)[wr.., :]·op(B)[:, wc+16f..] for this warp's two
// 16×16 tiles. TA/TB: the operand was staged in its stored (transposed) orientation. Al / Bl: the
// low parts of a split (fp32) operand, or NULL.
template <bool TA, bool TB>
__device__ __forceinline__ void mma_slice(const bf16 (*Ah)[AP], const bf16 (*Al)[AP], const bf16 (*Bh)[BP],
                                          const bf16 (*Bl)[BP], int wr, int wc, facc part[2]) {
    typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;
#pragma unroll
    for (int kk = 0; kk < WK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> ah, al;
        frag_load(ah, TA ? &Ah[kk][wr] : &Ah[wr][kk], AP);
        if (Al) frag_load(al, TA ? &Al[kk][wr] : &Al[wr][kk], AP);
#pragma unroll
        for (int f = 0; f < 2; f++) {
            int j = wc + 16 * f;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LB> bh, bl;
            frag_load(bh, TB ? &Bh[j][kk] : &Bh[kk][j], BP);
            wmma::mma_sync(part[f], ah, bh, part[f]);
            if (Al) wmma::mma_sync(part[f], al, bh, part[f]);
            if (Bl) {
                frag_load(bl, TB ? &Bl[j][kk] : &Bl[kk][j], BP);
                wmma::mma_sync(part[f], ah, bl, part[f]);
            }
        }
    }
}

__device__ __forceinline__ void mma_slice_any(const kgemm_term &tm, const bf16 (*Ah)[AP], const bf16 (*Al)[AP],
                                              const bf16 (*Bh)[BP], const bf16 (*Bl)[BP], int wr, int wc,
                                              facc part[2]) {
    if (tm.A.trans) {
        if (tm.B.trans)
            mma_slice<true, true>(Ah, Al, Bh, Bl, wr, wc, part);
        else
            mma_slice<true, false>(Ah, Al, Bh, Bl, wr, wc, part);
    } else {
        if (tm.B.trans)
            mma_slice<false, true>(Ah, Al, Bh, Bl, wr, wc, part);
        else
            mma_slice<false, false>(Ah, Al, Bh, Bl, wr, wc, part);
    }
}

// acc += alpha·part, a term's fp32 sum into the tile
__device__ __forceinline__ void acc_add(facc acc[2], const facc part[2], float alpha) {
#pragma unroll
    for (int f = 0; f < 2; f++)
        for (int x = 0; x < acc[f].num_elements; x++) acc[f].x[x] += alpha * part[f].x[x];
}

__global__ void __launch_bounds__(256, 3) chunk_gemm_kernel(kda_shape s, kgemm g, int tiles_n, int tiles) {
    __shared__ gemm_smem sm;
    int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z / tiles, tile = blockIdx.z % tiles;
    int i0 = (tile / tiles_n) * TM, j0 = (tile % tiles_n) * TM;
    int n = min(s.C, s.T - c * s.C);
    int tid = threadIdx.x, warp = tid >> 5, wr = (warp >> 1) * 16, wc = (warp & 1) * 32;
    facc acc[2], part[2];
    wmma::fill_fragment(acc[0], 0.0f), wmma::fill_fragment(acc[1], 0.0f);
    for (int t = 0; t < g.nterms; t++) {
        const kgemm_term &tm = g.t[t];
        wmma::fill_fragment(part[0], 0.0f), wmma::fill_fragment(part[1], 0.0f);
        for (int k0 = 0; k0 < tm.Kd; k0 += WK) {
            __syncthreads();
            stage_block(tm.A, s, b, c, h, n, i0, TM, g.M, k0, WK, tm.Kd, &sm.in.Ah[0][0], &sm.in.Al[0][0], AP);
            stage_block(tm.B, s, b, c, h, n, k0, WK, tm.Kd, j0, TM, g.N, &sm.in.Bh[0][0], &sm.in.Bl[0][0], BP);
            cp_async_wait_all();
            __syncthreads();
            mma_slice_any(tm, sm.in.Ah, tm.A.f32 ? sm.in.Al : NULL, sm.in.Bh, tm.B.f32 ? sm.in.Bl : NULL, wr, wc, part);
        }
        acc_add(acc, part, tm.alpha);
    }
    __syncthreads(); // Cs overlays the operand slices
    acc_store(&sm.Cs[wr][wc], acc[0], CPD);
    acc_store(&sm.Cs[wr][wc + 16], acc[1], CPD);
    __syncthreads();
    // 8 consecutive columns per thread: one 16-byte store of bf16 (two of fp32) where aligned
    bool vec = g.out_ld % 8 == 0 && ((uintptr_t)g.out & 15) == 0;
    for (int e = tid; e < TM * TM / 8; e += 256) {
        int ii = e / (TM / 8), jj = (e % (TM / 8)) * 8, i = i0 + ii, j = j0 + jj;
        if (i >= g.M || i >= n || j >= g.N) continue;
        float v[8];
#pragma unroll
        for (int t = 0; t < 8; t++) {
            v[t] = sm.Cs[ii][jj + t];
            if ((g.mask == KMASK_LOWER && j + t > i) || (g.mask == KMASK_STRICT && j + t >= i)) v[t] = 0.0f;
        }
        size_t o = kda_row(s, b, c, h, i) * g.out_ld + j;
        if (vec && j + 8 <= g.N) {
            if (g.out_f32) {
                *(float4 *)((float *)g.out + o) = make_float4(v[0], v[1], v[2], v[3]);
                *(float4 *)((float *)g.out + o + 4) = make_float4(v[4], v[5], v[6], v[7]);
            } else {
                __align__(16) bf16 w[8];
#pragma unroll
                for (int t = 0; t < 8; t++) w[t] = f2bf(v[t]);
                *(uint4 *)((bf16 *)g.out + o) = *(const uint4 *)w;
            }
        } else {
            for (int t = 0; t < 8 && j + t < g.N; t++) {
                if (g.out_f32)
                    ((float *)g.out)[o + t] = v[t];
                else
                    ((bf16 *)g.out)[o + t] = f2bf(v[t]);
            }
        }
    }
}

void kda_chunk_gemm(const kda_shape &s, const kgemm &g) {
    int tiles_n = (g.N + TM - 1) / TM, tiles = ((g.M + TM - 1) / TM) * tiles_n;
    KDA_CHECK((size_t)s.B * tiles <= 65535, "KDA batch %d too large for the chunk GEMM grid", s.B);
    cu_prof_scope span(KDA_PHASE_KDA, "chunk GEMM");
    chunk_gemm_kernel<<<dim3(s.NT, s.H, s.B * tiles), 256, 0, cu_stream>>>(s, g, tiles_n, tiles);
    CU_LAUNCHED();
}
