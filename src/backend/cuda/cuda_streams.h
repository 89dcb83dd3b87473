// cuda_streams.h — a second stream for work that may overlap the backend's own: a weight-gradient
// GEMM beside the backward's memory- and latency-bound ops (the GEMMs leave HBM mostly idle, those
// ops the tensor cores; issue 17, "no avoidable GPU idle time"). Used by ops.h side_begin /
// side_end / side_join (KDA_WGRAD_STREAM=1, ops_cuda.cu) and tests/cuda/bench_overlap_cuda.c.
// Every op runs on the backend's own stream unless a caller selects the second one here. One host
// thread drives them, as it drives the backend.
#ifndef KDA_CUDA_STREAMS_H
#define KDA_CUDA_STREAMS_H
// The stream the backend's ops are queued on from now: 0 its own stream, 1 a second one (created
// on first use). Both are blocking streams: work on the legacy default stream orders with them.
void kda_cuda_stream_select(int side);
// The second stream waits for what is queued on the first so far (fork), or the first for what
// is queued on the second (join).
void kda_cuda_stream_fork(void);
void kda_cuda_stream_join(void);
// cuBLASLt plans made from now target this many SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), for a
// GEMM that shares the GPU with a concurrent kernel; 0: all of them (the default).
void kda_cuda_gemm_sm_target(int sms);
#endif
