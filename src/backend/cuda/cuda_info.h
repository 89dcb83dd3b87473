// cuda_info.h — facts about the GPU for reports: the CUDA table's mem_info and clock_watch
// (kda bench).
#ifndef KDA_CUDA_INFO_H
#define KDA_CUDA_INFO_H
#include <stddef.h>

#include "model/ops.h"
// Bytes of device memory in use on this process's GPU (total − free: our buffers, the CUDA
// context and library workspaces) and the card's total; both 0 when there is no CUDA device.
void kda_cuda_mem_info(size_t *used, size_t *total);
// ops.h clock_watch through NVML (clock_watch.cu); reports nothing where NVML is not available.
void kda_cuda_clock_watch(int start, kda_clock_stats *out);
#endif
