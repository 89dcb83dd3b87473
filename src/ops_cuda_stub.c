// ops_cuda_stub.c — the CUDA entry point of a build without nvcc: no CUDA backend.
// (The Makefile compiles this file only when nvcc is absent; src/cuda/ holds the real one.)
#include <stddef.h>

#include "ops.h"

const kda_ops *kda_ops_cuda(const char **why) {
    if (why) *why = "this kda was built without CUDA (nvcc not found at build time)";
    return NULL;
}
