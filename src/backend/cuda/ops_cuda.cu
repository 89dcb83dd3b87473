// ops_cuda.cu — the CUDA backend's table (ops.h), device start-up, memory and scratch.
// Everything runs on one stream (cu_stream); ops return without waiting except those that
// hand a number back to the host (lm_head_ce, loss_take, sumsq, to_host, sync).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kda_cuda.cuh"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend/cuda/cuda_info.h"
#include "comm/dist.h"
}

cudaStream_t cu_stream;
int *cu_err_flag;

static void *scratch_ptr;
static size_t scratch_size;

// A device attribute of the current GPU, read once into *cache (-1 until then; one GPU a process).
static int device_attr_once(cudaDeviceAttr attr, int *cache) {
    if (*cache < 0) {
        int dev = 0;
        CU_CHECK(cudaGetDevice(&dev));
        CU_CHECK(cudaDeviceGetAttribute(cache, attr, dev));
    }
    return *cache;
}

bool cu_smem_fits(size_t smem_bytes) {
    static int limit = -1;
    return smem_bytes <= (size_t)device_attr_once(cudaDevAttrMaxSharedMemoryPerBlockOptin, &limit);
}

int cu_sm_count(void) {
    static int sms = -1;
    return device_attr_once(cudaDevAttrMultiProcessorCount, &sms);
}

size_t cu_scratch_reserve(size_t bytes) { return bytes + bytes / 8; } // headroom: small growth does not reallocate

void *cu_scratch(size_t bytes) {
    if (bytes <= scratch_size) return scratch_ptr;
    if (scratch_ptr) {
        CU_CHECK(cudaStreamSynchronize(cu_stream)); // queued kernels may still read the old one
        CU_CHECK(cudaFree(scratch_ptr));
        scratch_ptr = NULL;
    }
    size_t want = cu_scratch_reserve(bytes);
    scratch_ptr = NULL;
    if (cudaMalloc(&scratch_ptr, want) != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        kda_die("out of GPU memory: the CUDA backend's scratch needs %.3f GiB, %.3f GiB of %.3f GiB are free; "
                "lower micro_batch_size or seq_length",
                want / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0);
    }
    scratch_size = want;
    return scratch_ptr;
}

void cu_check_error_flag(void) {
    int flag = 0;
    CU_CHECK(cudaMemcpyAsync(&flag, cu_err_flag, sizeof flag, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    if (flag == 1)
        kda_die(
            "a token id outside [0, vocab_size) reached the GPU embedding; check the data against the tokenizer's vocab_size");
    if (flag == 2)
        kda_die(
            "a target id outside [0, vocab_size) (and not -100) reached the GPU loss; check the data against the tokenizer's vocab_size");
}

// ---- memory ----

static void *cu_alloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        kda_die("out of GPU memory: asked for %.3f GiB, %.3f GiB of %.3f GiB are free (%s); "
                "lower micro_batch_size or seq_length",
                bytes / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0, cudaGetErrorString(e));
    }
    return p;
}
static void cu_free(void *p) {
    if (p) CU_CHECK(cudaFree(p));
}
static void cu_zero(void *p, size_t bytes) { CU_CHECK(cudaMemsetAsync(p, 0, bytes, cu_stream)); }
static void cu_to_device(void *dst, const void *src, size_t bytes) {
    // pageable source: returns once the bytes are staged, so the caller may reuse src at once
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu_stream));
}
static void cu_to_host(void *dst, const void *src, size_t bytes) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu_stream));
    CU_CHECK(cudaStreamSynchronize(cu_stream));
}
static void cu_copy(void *dst, const void *src, size_t bytes) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu_stream));
}
static void cu_sync(void) {
    CU_CHECK(cudaStreamSynchronize(cu_stream));
    cu_check_error_flag();
}

// ---- column reduction shared by the ops that produce parameter gradients ----

// A block takes 32 columns; its 32 row lanes sum rows lane, lane + 32, ... in order (a warp reads
// 32 consecutive columns of one row), then lane 0's column sums the 32 lane sums in lane order:
// a fixed order, so the result is the same run to run. (One thread a column summing all G rows
// left 4 blocks busy for the 1024 columns of a norm weight: ~80 µs a call.)
__global__ void __launch_bounds__(1024)
    colreduce_add_kernel(const float *__restrict__ partial, int G, size_t ncols, float *__restrict__ out) {
    __shared__ float s[32][33];
    size_t j = (size_t)blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (j < ncols) {
        // unrolled so that 16 of the thread's loads are in flight (the adds stay in row order):
        // the grid is only ncols / 32 blocks (32 for a norm of 1024, 64 for the v conv's 2048)
#pragma unroll 16
        for (int g = threadIdx.y; g < G; g += 32) acc += partial[(size_t)g * ncols + j];
    }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < ncols) {
        float t = 0.0f;
        for (int l = 0; l < 32; l++) t += s[l][threadIdx.x];
        out[j] += t;
    }
}

void cu_colreduce_add(const float *partial, int G, size_t ncols, float *out) {
    if (ncols == 0) return;
    colreduce_add_kernel<<<(unsigned)((ncols + 31) / 32), dim3(32, 32), 0, cu_stream>>>(partial, G, ncols, out);
    CU_LAUNCHED();
}

// ---- memory plan (ops.h scratch_bytes) ----
// Everything an op of this backend needs beyond its arguments comes from the arena, which grows
// to cu_scratch_reserve of the largest request and stays: held is that, for the largest request
// of a training step of shape s (the ops below, as model.c calls them, the KDA core backward's
// workspace among them, and the forward's Um: at 300M x 32 x 2048 it is 0.91 GiB, below the 1 GiB cross-entropy chunk);
// nothing is transient. Not counted: the AdamW item table (under 0.01% of the parameters), the
// CUDA context and cuBLASLt workspace (allocated before any plan: they are not in the free memory
// the plan is compared with).

static void cu_scratch_bytes(const kda_step_shape *s, size_t *held, size_t *transient) {
    int N = s->B * s->T;
    size_t req[] = {
        cu_lm_head_ce_scratch_bytes(N, s->NV),
        cu_embed_bwd_scratch_bytes(N),
        cu_linear_bwd_scratch_bytes(N, s->Dv), // g_proj.1, the one linear with a bias
        cu_rmsnorm_bwd_scratch_bytes(N, s->d),
        cu_gated_rmsnorm_bwd_scratch_bytes(N * s->core.H, s->core.V),
        cu_conv_silu_bwd_scratch_bytes(s->B, s->T, 2 * s->Dk + s->Dv, s->W), // q, k, v in one call
        cu_kda_fwd_scratch_bytes(&s->core),
        cu_kda_bwd_scratch_bytes(&s->core),
        cu_sumsq_scratch_bytes(),
    };
    size_t big = 0;
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) big = req[i] > big ? req[i] : big;
    *held = cu_scratch_reserve(big);
    *transient = 0;
}

static size_t cu_scratch_held(void) { return scratch_size; }

// ---- the table ----
// Every op that queues device work is wrapped for the step profile (profile.cu) by its phase.

static const char *cu_describe(void);

static const kda_ops cuda_ops = {
    .name = "cuda",
    .act_bytes = 2,
    .w_bytes = 2,
    .work_is_master = 0,  // bf16 working copy of the fp32 master
    .host_memory = 0,     // device memory: collectives through NCCL
    .peak_tflops = 989.4, // H100 SXM dense bf16, the MFU reference of kda bench
    .max_conv = CU_CONV_MAXW,
    .max_chunk = KDA_MAX_C,
    .alloc = cu_alloc,
    .free = cu_free,
    .zero = CU_PROFILED(KDA_PHASE_OTHER, cu_zero),
    .to_device = CU_PROFILED(KDA_PHASE_OTHER, cu_to_device),
    .to_host = cu_to_host,
    .copy = CU_PROFILED(KDA_PHASE_OTHER, cu_copy),
    .sync = cu_sync,
    .embed_fwd = CU_PROFILED(KDA_PHASE_OTHER, cu_embed_fwd),
    .embed_bwd = CU_PROFILED(KDA_PHASE_OTHER, cu_embed_bwd),
    .lm_head_ce = CU_PROFILED(KDA_PHASE_CE, cu_lm_head_ce),
    .lm_head_ce_acc = CU_PROFILED(KDA_PHASE_CE, cu_lm_head_ce_acc),
    .loss_take = cu_loss_take,
    .lm_head_logits = CU_PROFILED(KDA_PHASE_GEMM, cu_lm_head_logits),
    .rmsnorm_fwd = CU_PROFILED(KDA_PHASE_OTHER, cu_rmsnorm_fwd),
    .rmsnorm_bwd = CU_PROFILED(KDA_PHASE_OTHER, cu_rmsnorm_bwd),
    .gated_rmsnorm_fwd = CU_PROFILED(KDA_PHASE_OTHER, cu_gated_rmsnorm_fwd),
    .gated_rmsnorm_bwd = CU_PROFILED(KDA_PHASE_OTHER, cu_gated_rmsnorm_bwd),
    .linear_fwd = CU_PROFILED(KDA_PHASE_GEMM, cu_linear_fwd),
    .linear_bwd = CU_PROFILED(KDA_PHASE_GEMM, cu_linear_bwd),
    .conv_silu_fwd = CU_PROFILED(KDA_PHASE_OTHER, cu_conv_silu_fwd),
    .conv_silu_bwd = CU_PROFILED(KDA_PHASE_OTHER, cu_conv_silu_bwd),
    .kda_saved_bytes = cu_kda_saved_bytes,
    .kda_fwd = CU_PROFILED(KDA_PHASE_KDA, cu_kda_fwd),
    .kda_bwd = CU_PROFILED(KDA_PHASE_KDA, cu_kda_bwd),
    .conv_silu_step = CU_PROFILED(KDA_PHASE_OTHER, cu_conv_silu_step),
    .kda_fwd_state = CU_PROFILED(KDA_PHASE_KDA, cu_kda_fwd_state),
    .swiglu_fwd = CU_PROFILED(KDA_PHASE_OTHER, cu_swiglu_fwd),
    .swiglu_bwd = CU_PROFILED(KDA_PHASE_OTHER, cu_swiglu_bwd),
    .sumsq = CU_PROFILED(KDA_PHASE_OTHER, cu_sumsq),
    .adamw_multi = CU_PROFILED(KDA_PHASE_OTHER, cu_adamw_multi),
    .master_to_work = CU_PROFILED(KDA_PHASE_OTHER, cu_master_to_work),
    .describe = cu_describe,
    .profile_begin = cu_profile_begin,
    .profile_end = cu_profile_end,
    .gemm_survey = cu_gemm_survey,
    .mem_info = kda_cuda_mem_info,
    .clock_watch = kda_cuda_clock_watch,
    .scratch_bytes = cu_scratch_bytes,
    .scratch_held = cu_scratch_held,
};

extern "C" const kda_ops *kda_ops_cuda_sizing(void) { return &cuda_ops; }

static int probed; // 0: not yet, 1: usable, -1: not usable
static char why_buf[1024], desc_buf[1024];

#ifndef KDA_CUDA_ARCHS
#define KDA_CUDA_ARCHS "(not recorded)"
#endif

// Which code of this build the driver runs on the chosen GPU: a kernel's binary and PTX
// versions (a binary for another minor version of the same major, or PTX compiled by the
// driver at start, when the build has no binary for this card).
__global__ void probe_kernel(int *p) {
    if (p) *p = 0;
}

// The device line, and which cross-entropy row kernel runs (decided on the device at the first call).
static const char *cu_describe(void) {
    static char full[sizeof desc_buf + 64];
    snprintf(full, sizeof full, "%s; cross-entropy rows: %s", desc_buf, cu_ce_rows_kind());
    return full;
}

// Fills why_buf and returns 0 when GPU dev cannot run kda; else describes it and returns 1.
static int check_device(int dev) {
    cudaDeviceProp prop;
    CU_CHECK(cudaGetDeviceProperties(&prop, dev));
    if (prop.major < 8) {
        snprintf(why_buf, sizeof why_buf,
                 "GPU %d (%s) has compute capability %d.%d; kda's CUDA backend needs 8.0 or newer (bf16 tensor cores: "
                 "A100, RTX 30xx/40xx, L40S, H100/H200, B200)",
                 dev, prop.name, prop.major, prop.minor);
        return 0;
    }
    CU_CHECK(cudaSetDevice(dev));
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, probe_kernel);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why_buf, sizeof why_buf,
                 "GPU %d (%s, compute capability %d.%d) cannot run this build's kernels (%s): it was built for "
                 "CUDA_ARCHS=\"%s\"; rebuild with `make CUDA_ARCHS=...` including %d%d",
                 dev, prop.name, prop.major, prop.minor, cudaGetErrorString(e), KDA_CUDA_ARCHS, prop.major, prop.minor);
        return 0;
    }
    int cc = prop.major * 10 + prop.minor;
    char path[160];
    if (fa.binaryVersion == cc && fa.ptxVersion == cc)
        snprintf(path, sizeof path, "native sm_%d kernels", cc);
    else if (fa.ptxVersion < cc && fa.binaryVersion == cc)
        snprintf(path, sizeof path,
                 "portable kernels: compute_%d PTX compiled by the driver (no sm_%d code in this build)", fa.ptxVersion,
                 cc);
    else
        snprintf(path, sizeof path, "portable kernels: sm_%d binary", fa.binaryVersion);
    snprintf(desc_buf, sizeof desc_buf, "GPU %d %s, compute capability %d.%d, %d SMs, %.1f GiB; %s; built for %s", dev,
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, path,
             KDA_CUDA_ARCHS);
    return 1;
}

extern "C" const kda_ops *kda_ops_cuda(const char **why) {
    if (probed == 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n == 0) {
            snprintf(why_buf, sizeof why_buf, "no CUDA device found (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount reports 0 devices");
            (void)cudaGetLastError();
            probed = -1;
        } else {
            // One process per GPU: the launcher's local rank picks the device (0 without one).
            int dev = kda_dist_env_local_rank() % n;
            if (!check_device(dev)) {
                probed = -1;
            } else {
                CU_CHECK(cudaStreamCreate(&cu_stream));
                CU_CHECK(cudaMalloc(&cu_err_flag, sizeof(int)));
                CU_CHECK(cudaMemsetAsync(cu_err_flag, 0, sizeof(int), cu_stream));
                cu_gemm_init();
                probed = 1;
            }
        }
    }
    if (probed < 0) {
        if (why) *why = why_buf;
        return NULL;
    }
    return &cuda_ops;
}
