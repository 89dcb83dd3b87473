// kda_tile.cuh — per-chunk matrices in shared memory and their products on tensor cores, for
// the fused KDA kernels (one block of 256 threads = 8 warps per chunk; kda_cuda.cuh has the
// layouts in global memory).
//
// A matrix operand lives in shared memory as bf16, row-major with a row pitch that is a
// multiple of 8 elements: 'hi' holds bf16(x) and, for a matrix with fp32 values, 'lo' holds
// bf16(x − hi), so that the pair keeps ~16 bits. A product with a split operand is then two or
// three bf16 MMAs (hi·hi, lo·hi, hi·lo), accumulated in fp32, exactly as kda_gemm.cu does: the
// fused kernels give the same bits as the chunk GEMMs they replace. Results are fp32 matrices
// in shared memory (row pitch a multiple of 4). Every dimension is padded to a multiple of 16
// with zeros, so padded rows and columns of a product are zero.
#ifndef KDA_TILE_CUH
#define KDA_TILE_CUH

#include <mma.h>
#include <type_traits>

#include "backend/cuda/kda_cuda.cuh"

struct smat {
    bf16 *hi, *lo; // lo is NULL for a matrix of bf16 values
    int ld;        // row pitch in elements (multiple of 8)
};

static constexpr inline __host__ __device__ int pad16(int x) { return (x + 15) & ~15; }
// Shared-memory offsets: 128-byte aligned.
static constexpr __host__ __device__ inline size_t up128(size_t x) { return (x + 127) & ~(size_t)127; }

// The threads of the block over a rows × nv grid of pieces without a division per piece: a
// thread takes piece column q of rows r0, r0 + rstep, ... (false: this thread has none).
struct tile_walk {
    int r0, q, rstep;
    __device__ __forceinline__ bool init(int nv) {
        rstep = blockDim.x / nv, r0 = threadIdx.x / nv, q = threadIdx.x - r0 * nv;
        return r0 < rstep;
    }
};

// One 8-column piece of tile_load's: row r's columns [q, q + 8) (zeros past nrows / ncols).
template <typename T>
__device__ __forceinline__ void tile_piece_fetch(const T *src, size_t rstride, int nrows, int ncols, bool vec, int r,
                                                 int q, float *x) {
    constexpr int W = 8;
    const T *p = src + (size_t)r * rstride + q;
    if (vec && r < nrows && q + W <= ncols) {
        if (sizeof(T) == 4) {
            load16((const float *)p, x), load16((const float *)p + 4, x + 4);
        } else {
            load16((const bf16 *)p, x);
        }
    } else {
#pragma unroll
        for (int t = 0; t < W; t++) x[t] = (r < nrows && q + t < ncols) ? tof(p[t]) : 0.0f;
    }
}
__device__ __forceinline__ void tile_piece_put(smat m, int r, int q, const float *x) {
    constexpr int W = 8;
    __align__(16) bf16 hv[W];
#pragma unroll
    for (int t = 0; t < W; t++) hv[t] = f2bf(x[t]);
    *(uint4 *)&m.hi[r * m.ld + q] = *(const uint4 *)hv;
    if (m.lo) {
#pragma unroll
        for (int t = 0; t < W; t++) hv[t] = f2bf(x[t] - bf2f(hv[t]));
        *(uint4 *)&m.lo[r * m.ld + q] = *(const uint4 *)hv;
    }
}

// Copies rows [0, rows_pad) × columns [0, cols_pad) of a chunk's token-major rows (row r at
// src + r·rstride, only r < nrows and columns < ncols read; zeros elsewhere) into m as bf16
// (hi and, when m.lo, the fp32 remainder). 16-byte reads where aligned, a thread's pieces two
// rows at a time with both rows' reads issued before either is stored (one memory latency a
// pair, not one a row). All threads call it. For bf16 values into a hi-only tile, tile_copy.
template <typename T>
__device__ __forceinline__ void tile_load(smat m, const T *src, size_t rstride, int nrows, int ncols, int rows_pad,
                                          int cols_pad) {
    constexpr int W = 8;
    bool vec = (rstride % (16 / sizeof(T))) == 0 && ((uintptr_t)src & 15) == 0 && ncols % W == 0;
    tile_walk w;
    if (!w.init(cols_pad / W)) return;
    int q = w.q * W;
    for (int r = w.r0; r < rows_pad; r += 2 * w.rstep) {
        int r2 = r + w.rstep;
        float x[W], y[W];
        tile_piece_fetch(src, rstride, nrows, ncols, vec, r, q, x);
        if (r2 < rows_pad) tile_piece_fetch(src, rstride, nrows, ncols, vec, r2, q, y);
        tile_piece_put(m, r, q, x);
        if (r2 < rows_pad) tile_piece_put(m, r2, q, y);
    }
}

// tile_load for bf16 values into a hi-only tile (m.lo NULL), by cp.async where a piece is 16
// aligned bytes inside the row or wholly past it (then zeros): the same bytes as tile_load's
// (bf16 → fp32 → bf16 is exact), but every piece's read in flight at once and none waited for
// here (cuda_common.cuh's cp_async16_or_zero). The caller calls cp_async_wait_all() before the
// barrier after which the tile is read.
// Other pieces (unaligned rows, a row's last piece when ncols % 8 != 0) are tile_load's.
__device__ __forceinline__ void tile_copy(smat m, const bf16 *src, size_t rstride, int nrows, int ncols, int rows_pad,
                                          int cols_pad) {
    constexpr int W = 8;
    bool vec = rstride % W == 0 && ((uintptr_t)src & 15) == 0;
    tile_walk w;
    if (!w.init(cols_pad / W)) return;
    int q = w.q * W;
    for (int r = w.r0; r < rows_pad; r += w.rstep) {
        bool in = r < nrows && q < ncols;
        if (vec && (!in || q + W <= ncols)) {
            cp_async16_or_zero(&m.hi[r * m.ld + q], in ? src + (size_t)r * rstride + q : src, in);
        } else {
            float x[W];
            tile_piece_fetch(src, rstride, nrows, ncols, false, r, q, x);
            tile_piece_put(m, r, q, x);
        }
    }
}

// tile_copy in two steps, for a tile whose shared-memory space is still being read when its global
// reads should be issued: tile_fetch reads a thread's pieces (16 bytes each, at most NP of them)
// into registers and uses none of them, so that they stay in flight through whatever the block
// does next; tile_place, called with the same arguments, writes them into m (zeros past nrows /
// ncols): the bytes tile_copy writes. Only where every piece is 16 aligned bytes of a row (vec);
// tile_fetch returns false otherwise, and the caller takes tile_copy / tile_load instead.
template <int NP> struct tile_held { uint4 p[NP]; };
template <int NP>
__device__ __forceinline__ bool tile_fetch(tile_held<NP> &t, const bf16 *src, size_t rstride, int nrows, int ncols,
                                           int rows_pad, int cols_pad) {
    if (rstride % 8 != 0 || ((uintptr_t)src & 15) != 0 || ncols % 8 != 0) return false;
    tile_walk w;
    bool has = w.init(cols_pad / 8);
    if (NP * w.rstep < rows_pad) return false; // the block's threads a piece short: not every row covered
    if (!has) return true;
    int q = w.q * 8;
#pragma unroll
    for (int i = 0; i < NP; i++) {
        int r = w.r0 + i * w.rstep;
        bool in = r < rows_pad && r < nrows && q < ncols;
        t.p[i] = in ? *(const uint4 *)(src + (size_t)r * rstride + q) : make_uint4(0, 0, 0, 0);
    }
    return true;
}
template <int NP>
__device__ __forceinline__ void tile_place(smat m, const tile_held<NP> &t, int rows_pad, int cols_pad) {
    tile_walk w;
    if (!w.init(cols_pad / 8)) return;
    int q = w.q * 8;
#pragma unroll
    for (int i = 0; i < NP; i++) {
        int r = w.r0 + i * w.rstep;
        if (r < rows_pad) *(uint4 *)&m.hi[r * m.ld + q] = t.p[i];
    }
}

// Scales rows [0, nrows) of a bf16 tile that tile_load just wrote (hi only) by rsc[r·rsc_stride],
// in place: each thread takes the pieces it loaded (tile_load's walk), so no barrier is needed
// between the two. A bf16 value is exact in fp32, so a bf16 input v gives bf16(β·v) as computed
// from v directly (the bits the prep stored when it kept β·v).
__device__ __forceinline__ void tile_scale_rows(smat m, int nrows, int cols_pad, int rows_pad, const float *rsc,
                                                size_t rsc_stride) {
    tile_walk w;
    if (!w.init(cols_pad / 8)) return;
    int q = w.q * 8;
    for (int r = w.r0; r < rows_pad && r < nrows; r += w.rstep) {
        float x[8];
        unpack16(*(const uint4 *)&m.hi[r * m.ld + q], x);
        float sc = rsc[r * rsc_stride];
        __align__(16) bf16 hv[8];
#pragma unroll
        for (int t = 0; t < 8; t++) hv[t] = f2bf(sc * x[t]);
        *(uint4 *)&m.hi[r * m.ld + q] = *(const uint4 *)hv;
    }
}

// m (hi, and lo when set) ← the fp32 shared matrix F (pitch ldf, a multiple of 4), rows × cols
// (padded sizes, cols a multiple of 8), 8 values at a time.
__device__ __forceinline__ void tile_split(smat m, const float *F, int ldf, int rows, int cols) {
    tile_walk w;
    if (!w.init(cols / 8)) return;
    int q = w.q * 8;
    for (int r = w.r0; r < rows; r += w.rstep) {
        float x[8];
        load16(F + (size_t)r * ldf + q, x), load16(F + (size_t)r * ldf + q + 4, x + 4);
        __align__(16) bf16 hv[8];
#pragma unroll
        for (int t = 0; t < 8; t++) hv[t] = f2bf(x[t]);
        *(uint4 *)&m.hi[r * m.ld + q] = *(const uint4 *)hv;
        if (m.lo) {
#pragma unroll
            for (int t = 0; t < 8; t++) hv[t] = f2bf(x[t] - bf2f(hv[t]));
            *(uint4 *)&m.lo[r * m.ld + q] = *(const uint4 *)hv;
        }
    }
}

// Fragment loads from shared memory as wmma.load with the .shared state space. The C++ API emits
// the generic form, which ptxas lowers to element-wise generic loads and movmatrix transposes
// wherever it cannot prove that the address lies in shared memory (D3 in session 19's profile:
// generic LD 10% and MOVM 3.5% of its instructions, besides their address arithmetic). The
// .shared form is the same instruction on the same bytes, so the same fragment, lowered to
// ldmatrix. Every operand of these kernels is in shared memory.
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, bf16, nvcuda::wmma::row_major> frag_a_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, bf16, nvcuda::wmma::col_major> frag_a_col;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, bf16, nvcuda::wmma::row_major> frag_b_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, bf16, nvcuda::wmma::col_major> frag_b_col;
// frag_at takes the shared-memory address itself (smem_addr of a base plus a byte offset: 32-bit
// address arithmetic, where a pointer's would be 64-bit).
__device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
#define KDA_FRAG_LOAD(FRAG, MAT, LAYOUT)                                                                               \
    __device__ __forceinline__ void frag_at(FRAG &f, unsigned a, int ld) {                                             \
        static_assert(sizeof(f.x) == 16, "a bf16 16x16x16 fragment is 4 registers");                                   \
        unsigned *r = reinterpret_cast<unsigned *>(&f.x[0]);                                                           \
        asm volatile("wmma.load." MAT ".sync.aligned." LAYOUT ".m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;"     \
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                                                  \
                     : "r"(a), "r"(ld)                                                                                 \
                     : "memory");                                                                                      \
    }                                                                                                                  \
    __device__ __forceinline__ void frag_load(FRAG &f, const bf16 *p, int ld) { frag_at(f, smem_addr(p), ld); }
KDA_FRAG_LOAD(frag_a_row, "a", "row")
KDA_FRAG_LOAD(frag_a_col, "a", "col")
KDA_FRAG_LOAD(frag_b_row, "b", "row")
KDA_FRAG_LOAD(frag_b_col, "b", "col")
#undef KDA_FRAG_LOAD

// The same for fp32 accumulator tiles, row-major in shared memory (wmma.load.c / wmma.store.d).
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> tacc;
__device__ __forceinline__ void acc_load(tacc &f, const float *p, int ld) {
    static_assert(sizeof(f.x) == 32, "an fp32 16x16 accumulator is 8 registers");
    float *r = &f.x[0];
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.shared.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3]), "=f"(r[4]), "=f"(r[5]), "=f"(r[6]), "=f"(r[7])
                 : "r"(a), "r"(ld)
                 : "memory");
}
__device__ __forceinline__ void acc_store(float *p, const tacc &f, int ld) {
    const float *r = &f.x[0];
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile(
        "wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;" ::"r"(a),
        "f"(r[0]), "f"(r[1]), "f"(r[2]), "f"(r[3]), "f"(r[4]), "f"(r[5]), "f"(r[6]), "f"(r[7]), "r"(ld)
        : "memory");
}

// One term of a product: alpha · op(A) · op(B), op(X) = Xᵀ when the flag is set (the stored
// matrix is then read through col_major fragments), inner size Kd (multiple of 16).
struct tterm {
    smat A, B;
    bool ta, tb;
    int Kd;
    float alpha;
};

// part += op(A)[i0..i0+15, :] · op(B)[:, j0..j0+15] over the inner size, in the order of kda_gemm.cu.
template <bool TA, bool TB> __device__ __forceinline__ void tile_mma(tacc &part, const tterm &t, int i0, int j0) {
    using namespace nvcuda;
    typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;
    unsigned ah0 = smem_addr(t.A.hi), bh0 = smem_addr(t.B.hi); // the lo parts: read only where given
    unsigned al0 = t.A.lo ? smem_addr(t.A.lo) : 0, bl0 = t.B.lo ? smem_addr(t.B.lo) : 0;
    for (int kk = 0; kk < t.Kd; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> ah, al;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LB> bh, bl;
        unsigned ao = 2 * (TA ? kk * t.A.ld + i0 : i0 * t.A.ld + kk); // byte offsets
        unsigned bo = 2 * (TB ? j0 * t.B.ld + kk : kk * t.B.ld + j0);
        frag_at(ah, ah0 + ao, t.A.ld);
        if (t.A.lo) frag_at(al, al0 + ao, t.A.ld);
        frag_at(bh, bh0 + bo, t.B.ld);
        wmma::mma_sync(part, ah, bh, part);
        if (t.A.lo) wmma::mma_sync(part, al, bh, part);
        if (t.B.lo) {
            frag_at(bl, bl0 + bo, t.B.ld);
            wmma::mma_sync(part, ah, bl, part);
        }
    }
}

// tile_mma for two output tiles of one column j0 (rows i0a, i0b) at once: B's fragments read
// once for both, the two tiles' loads and MMAs interleaved. Each tile's MMAs in tile_mma's order,
// so each part gets tile_mma's bits.
template <bool TA, bool TB>
__device__ __forceinline__ void tile_mma2(tacc &pa, tacc &pb, const tterm &t, int i0a, int i0b, int j0) {
    using namespace nvcuda;
    typedef typename std::conditional<TA, wmma::col_major, wmma::row_major>::type LA;
    typedef typename std::conditional<TB, wmma::col_major, wmma::row_major>::type LB;
    unsigned ah0 = smem_addr(t.A.hi), bh0 = smem_addr(t.B.hi); // the lo parts: read only where given
    unsigned al0 = t.A.lo ? smem_addr(t.A.lo) : 0, bl0 = t.B.lo ? smem_addr(t.B.lo) : 0;
    for (int kk = 0; kk < t.Kd; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LA> ah, al, ah2, al2;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LB> bh, bl;
        unsigned aoa = 2 * (TA ? kk * t.A.ld + i0a : i0a * t.A.ld + kk); // byte offsets
        unsigned aob = 2 * (TA ? kk * t.A.ld + i0b : i0b * t.A.ld + kk);
        unsigned bo = 2 * (TB ? j0 * t.B.ld + kk : kk * t.B.ld + j0);
        frag_at(ah, ah0 + aoa, t.A.ld);
        frag_at(ah2, ah0 + aob, t.A.ld);
        frag_at(bh, bh0 + bo, t.B.ld);
        if (t.A.lo) {
            frag_at(al, al0 + aoa, t.A.ld);
            frag_at(al2, al0 + aob, t.A.ld);
        }
        if (t.B.lo) frag_at(bl, bl0 + bo, t.B.ld);
        wmma::mma_sync(pa, ah, bh, pa);
        wmma::mma_sync(pb, ah2, bh, pb);
        if (t.A.lo) {
            wmma::mma_sync(pa, al, bh, pa);
            wmma::mma_sync(pb, al2, bh, pb);
        }
        if (t.B.lo) {
            wmma::mma_sync(pa, ah, bl, pa);
            wmma::mma_sync(pb, ah2, bl, pb);
        }
    }
}

// acc = (first ? 0 : acc) + alpha·part: one term of a product summed into its tile in
// kda_gemm.cu's order (each term's own fp32 sum, then alpha times it added; the first term as
// 0 + alpha·part, so acc is never −0), which keeps a fused kernel's bits those of the chunk GEMM.
__device__ __forceinline__ void acc_term(tacc &acc, const tacc &part, float alpha, bool first) {
    for (int e = 0; e < acc.num_elements; e++) acc.x[e] = (first ? 0.0f : acc.x[e]) + alpha * part.x[e];
}

// Stores a warp's finished tile (i0, j0) into F and, for a masked product's diagonal tile,
// zeroes what lies above the diagonal (or on it, KMASK_STRICT).
__device__ __forceinline__ void tile_put(float *F, int ldf, const tacc &acc, int i0, int j0, int mask) {
    using namespace nvcuda;
    acc_store(F + (size_t)i0 * ldf + j0, acc, ldf);
    if (mask != KMASK_NONE && j0 == i0) { // the diagonal tile: this warp masks what it stored
        __syncwarp();
        int lane = threadIdx.x & 31;
        for (int e = lane; e < 256; e += 32) {
            int ii = e >> 4, jj = e & 15;
            if (jj > ii || (mask == KMASK_STRICT && jj == ii)) F[(size_t)(i0 + ii) * ldf + j0 + jj] = 0.0f;
        }
        __syncwarp();
    }
}

// F (fp32, pitch ldf, M×N padded) = Σ_terms alpha·op(A)·op(B) (every term read through the same
// transposes TA, TB), with KMASK_LOWER / KMASK_STRICT zeroing j > i / j ≥ i. The 16×16 output
// tiles are spread over the warps, a warp's tiles tile and tile + nw two at a time where they
// share their column (nw a multiple of the tiles a row: tile_mma2), else one at a time. The
// caller synchronises before (operands written) and after (F read).
template <bool TA, bool TB, int NT, bool PAIRS = false>
__device__ __forceinline__ void tile_gemm(float *F, int ldf, int M, int N, const tterm (&t)[NT], int mask) {
    using namespace nvcuda;
    int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, tn = N >> 4, ntiles = (M >> 4) * tn;
    bool pairs = PAIRS && nw % tn == 0;
    for (int tile = warp; tile < ntiles; tile += pairs ? 2 * nw : nw) {
        int ti = tile / tn, i0 = ti << 4, j0 = (tile - ti * tn) << 4;
        int i0b = i0 + (nw / tn) * 16; // tile + nw, when pairs: the same column, nw / tn tile rows down
        bool two = pairs && tile + nw < ntiles;
        bool doa = mask == KMASK_NONE || j0 <= i0, dob = two && (mask == KMASK_NONE || j0 <= i0b);
        // acc = 0 + Σ_x alpha_x·part_x in term order (the first term's sum taken as 0 + alpha·part: the
        // bits of adding it to a zeroed accumulator, with one fragment fewer live while it runs)
        tacc acc, accb;
#pragma unroll
        for (int x = 0; x < NT; x++) { // tiles wholly above the diagonal stay zero
            tacc part, partb;
            wmma::fill_fragment(part, 0.0f);
            if (two) wmma::fill_fragment(partb, 0.0f);
            if (doa && dob)
                tile_mma2<TA, TB>(part, partb, t[x], i0, i0b, j0);
            else if (doa)
                tile_mma<TA, TB>(part, t[x], i0, j0);
            else if (dob)
                tile_mma<TA, TB>(partb, t[x], i0b, j0);
            acc_term(acc, part, t[x].alpha, x == 0);
            if (two) acc_term(accb, partb, t[x].alpha, x == 0);
        }
        tile_put(F, ldf, acc, i0, j0, mask);
        if (two) tile_put(F, ldf, accb, i0b, j0, mask);
    }
}

__device__ __forceinline__ void put_elem(float *d, float x) { *d = x; }
__device__ __forceinline__ void put_elem(bf16 *d, float x) { *d = f2bf(x); }

// Stores rows < nrows, columns < ncols of the fp32 shared matrix F to a chunk's token-major
// rows (row r at dst + r·rstride), fp32 or bf16 (rounded once), one 16-byte store a piece (4
// floats or 8 bf16) where aligned.
template <typename T>
__device__ __forceinline__ void tile_store(T *dst, size_t rstride, const float *F, int ldf, int nrows, int ncols) {
    constexpr int W = 16 / sizeof(T);
    bool vec = rstride % W == 0 && ((uintptr_t)dst & 15) == 0 && ncols % W == 0;
    tile_walk w;
    if (!w.init((ncols + W - 1) / W)) return;
    int q = w.q * W;
    for (int r = w.r0; r < nrows; r += w.rstep) {
        const float *s = F + (size_t)r * ldf + q;
        T *d = dst + (size_t)r * rstride + q;
        if (vec) {
            float x[W];
#pragma unroll
            for (int t = 0; t < W; t += 4) load16(s + t, x + t);
            if constexpr (sizeof(T) == 4)
                *(float4 *)d = make_float4(x[0], x[1], x[2], x[3]);
            else
                store16((bf16 *)d, x);
        } else {
            for (int t = 0; t < W && q + t < ncols; t++) put_elem(d + t, s[t]);
        }
    }
}

#endif
