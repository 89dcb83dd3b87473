// nccl_stub.c — the NCCL communicator of a build without nvcc: none (CPU data parallelism is MPI).
// (The Makefile compiles the *_stub.c files only when nvcc is absent; comm_nccl.cu is the real one.)
#include <stddef.h>

#include "base/common.h"
#include "comm/dist.h"

kda_comm *kda_comm_nccl_create(const kda_dist *d) {
    (void)d;
    kda_die("this kda was built without CUDA (nvcc not found at build time), so it has no NCCL; use --device cpu "
            "with mpirun for CPU data parallelism");
    return NULL;
}
