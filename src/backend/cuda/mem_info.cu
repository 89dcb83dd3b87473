// mem_info.cu — cuda_info.h on a CUDA build.
#include "backend/cuda/cuda_common.cuh"

extern "C" {
#include "backend/cuda/cuda_info.h"
}

extern "C" void kda_cuda_mem_info(size_t *used, size_t *total) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        *used = *total = 0;
        return;
    }
    *used = tot - fr;
    *total = tot;
}
