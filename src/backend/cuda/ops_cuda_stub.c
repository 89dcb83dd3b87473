// ops_cuda_stub.c — the CUDA entry point of a build without nvcc: no CUDA backend.
// (The Makefile compiles this file only when nvcc is absent; src/backend/cuda/ holds the real one.)
#include <stddef.h>

#include "model/ops.h"

const kda_ops *kda_ops_cuda(const char **why) {
    if (why) *why = "this kda was built without CUDA (nvcc not found at build time)";
    return NULL;
}

#include "base/common.h"
#include "comm/dist.h"

kda_comm *kda_comm_nccl_create(const kda_dist *d) {
    (void)d;
    kda_die("this kda was built without CUDA (nvcc not found at build time), so it has no NCCL; use --device cpu "
            "with mpirun for CPU data parallelism");
    return NULL;
}

#include "backend/cuda/cuda_info.h"

void kda_cuda_mem_info(size_t *used, size_t *total) { *used = *total = 0; }
