// ops_cuda_stub.c — the CUDA entry point of a build without nvcc: no CUDA backend.
// (The Makefile compiles the *_stub.c files only when nvcc is absent; src/backend/cuda/ holds the real ones.)
#include <stddef.h>

#include "model/ops.h"

const kda_ops *kda_ops_cuda(const char **why) {
    if (why) *why = "this kda was built without CUDA (nvcc not found at build time)";
    return NULL;
}

const kda_ops *kda_ops_cuda_sizing(void) { return NULL; }
