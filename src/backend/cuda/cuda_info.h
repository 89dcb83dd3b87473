// cuda_info.h — facts about the GPU for reports: the CUDA table's mem_info (kda bench).
#ifndef KDA_CUDA_INFO_H
#define KDA_CUDA_INFO_H
#include <stddef.h>
// Bytes of device memory in use on this process's GPU (total − free: our buffers, the CUDA
// context and library workspaces) and the card's total; both 0 when there is no CUDA device.
void kda_cuda_mem_info(size_t *used, size_t *total);
#endif
