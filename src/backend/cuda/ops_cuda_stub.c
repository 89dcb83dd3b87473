// ops_cuda_stub.c — the CUDA entry point of a build without nvcc: no CUDA backend.
// (The Makefile compiles the *_stub.c files only when nvcc is absent; src/backend/cuda/ holds the real ones.)
#include <stddef.h>

#include "backend/cuda/cuda_streams.h"
#include "model/ops.h"

const kda_ops *kda_ops_cuda(const char **why) {
    if (why) *why = "this kda was built without CUDA (nvcc not found at build time)";
    return NULL;
}

const kda_ops *kda_ops_cuda_sizing(void) { return NULL; }

// cuda_streams.h: nothing to select without a CUDA backend (its callers stop at kda_ops_cuda)
void kda_cuda_stream_select(int side) { (void)side; }
void kda_cuda_stream_fork(void) {}
void kda_cuda_stream_join(void) {}
void kda_cuda_gemm_sm_target(int sms) { (void)sms; }
