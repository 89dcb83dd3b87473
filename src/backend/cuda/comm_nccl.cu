// comm_nccl.cu — the NCCL communicator (dist.h's kda_comm) for the CUDA backend.
//
// NCCL is loaded at run time (dlopen of libnccl.so.2, or the file KDA_NCCL_LIBRARY names), so
// a kda built with CUDA starts on machines without NCCL and needs it only for several GPUs.
// Collectives run on their own stream: each call first waits for the compute stream's work
// issued so far (an event), so gradient reductions overlap the rest of the backward pass;
// wait() makes the compute stream wait for the communication issued so far.
// NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 unless the environment says otherwise.
#include "backend/cuda/cuda_common.cuh"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "comm/dist.h"
}

#if __has_include(<nccl.h>)
#include <nccl.h>
#define KDA_HAVE_NCCL_H 1
#endif

#ifdef KDA_HAVE_NCCL_H

// the NCCL entry points we use, resolved from the library
static struct {
    void *lib;
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*GetVersion)(int *);
} N;

#define NC_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) kda_die_at(__FILE__, __LINE__, "NCCL call %s failed: %s", #call, N.GetErrorString(r_)); \
    } while (0)

static void *sym(const char *name) {
    void *p = dlsym(N.lib, name);
    if (!p) kda_die("the NCCL library has no symbol %s (too old?); NCCL 2.7 or newer is needed", name);
    return p;
}

static void load_nccl(void) {
    if (N.lib) return;
    const char *path = getenv("KDA_NCCL_LIBRARY");
    N.lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!N.lib)
        kda_die("cannot load NCCL (%s): several GPUs need it. Install it (Debian/Ubuntu: libnccl2; or pip's "
                "nvidia-nccl-cu13) and put its directory on LD_LIBRARY_PATH, or set KDA_NCCL_LIBRARY to the "
                "libnccl.so.2 file",
                dlerror());
    N.GetUniqueId = (decltype(N.GetUniqueId))sym("ncclGetUniqueId");
    N.CommInitRank = (decltype(N.CommInitRank))sym("ncclCommInitRank");
    N.CommDestroy = (decltype(N.CommDestroy))sym("ncclCommDestroy");
    N.AllReduce = (decltype(N.AllReduce))sym("ncclAllReduce");
    N.Reduce = (decltype(N.Reduce))sym("ncclReduce");
    N.AllGather = (decltype(N.AllGather))sym("ncclAllGather");
    N.Send = (decltype(N.Send))sym("ncclSend");
    N.Recv = (decltype(N.Recv))sym("ncclRecv");
    N.GroupStart = (decltype(N.GroupStart))sym("ncclGroupStart");
    N.GroupEnd = (decltype(N.GroupEnd))sym("ncclGroupEnd");
    N.GetErrorString = (decltype(N.GetErrorString))sym("ncclGetErrorString");
    N.GetVersion = (decltype(N.GetVersion))sym("ncclGetVersion");
}

typedef struct {
    kda_comm base;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ev_compute, ev_comm;
    double *d_scalar;
    int in_group;
} nccl_comm;

// the communication stream waits for the compute issued so far (once per group)
static void after_compute(nccl_comm *c) {
    if (c->in_group > 1) return;
    CU_CHECK(cudaEventRecord(c->ev_compute, cu_stream));
    CU_CHECK(cudaStreamWaitEvent(c->stream, c->ev_compute, 0));
    if (c->in_group == 1) c->in_group = 2;
}

static void nc_allreduce(kda_comm *b, float *buf, size_t n) {
    nccl_comm *c = (nccl_comm *)b;
    after_compute(c);
    NC_CHECK(N.AllReduce(buf, buf, n, ncclFloat32, ncclSum, c->comm, c->stream));
}
static void nc_reduce(kda_comm *b, float *buf, size_t n, int root) {
    nccl_comm *c = (nccl_comm *)b;
    after_compute(c);
    NC_CHECK(N.Reduce(buf, buf, n, ncclFloat32, ncclSum, root, c->comm, c->stream));
}
static void nc_allgather(kda_comm *b, void *buf, size_t bytes) {
    nccl_comm *c = (nccl_comm *)b;
    after_compute(c);
    NC_CHECK(N.AllGather((char *)buf + (size_t)b->rank * bytes, buf, bytes, ncclInt8, c->comm, c->stream));
}
static void nc_group_start(kda_comm *b) {
    nccl_comm *c = (nccl_comm *)b;
    c->in_group = 1;
    NC_CHECK(N.GroupStart());
}
static void nc_group_end(kda_comm *b) {
    nccl_comm *c = (nccl_comm *)b;
    NC_CHECK(N.GroupEnd());
    c->in_group = 0;
}
static void nc_wait(kda_comm *b) {
    nccl_comm *c = (nccl_comm *)b;
    CU_CHECK(cudaEventRecord(c->ev_comm, c->stream));
    CU_CHECK(cudaStreamWaitEvent(cu_stream, c->ev_comm, 0));
}
static double nc_sum_f64(kda_comm *b, double x) {
    nccl_comm *c = (nccl_comm *)b;
    after_compute(c);
    CU_CHECK(cudaMemcpyAsync(c->d_scalar, &x, sizeof x, cudaMemcpyHostToDevice, c->stream));
    NC_CHECK(N.AllReduce(c->d_scalar, c->d_scalar, 1, ncclFloat64, ncclSum, c->comm, c->stream));
    CU_CHECK(cudaMemcpyAsync(&x, c->d_scalar, sizeof x, cudaMemcpyDeviceToHost, c->stream));
    CU_CHECK(cudaStreamSynchronize(c->stream));
    return x;
}
static void nc_gather(kda_comm *b, const void *shard, size_t bytes, void *host, int root, void *stage) {
    nccl_comm *c = (nccl_comm *)b;
    after_compute(c);
    if (b->rank != root) {
        NC_CHECK(N.Send(shard, bytes, ncclInt8, root, c->comm, c->stream));
        CU_CHECK(cudaStreamSynchronize(c->stream));
        return;
    }
    CU_CHECK(cudaMemcpyAsync((char *)host + (size_t)root * bytes, shard, bytes, cudaMemcpyDeviceToHost, c->stream));
    for (int r = 0; r < b->world; r++) {
        if (r == root) continue;
        NC_CHECK(N.Recv(stage, bytes, ncclInt8, r, c->comm, c->stream));
        CU_CHECK(cudaMemcpyAsync((char *)host + (size_t)r * bytes, stage, bytes, cudaMemcpyDeviceToHost, c->stream));
        CU_CHECK(cudaStreamSynchronize(c->stream));
    }
    CU_CHECK(cudaStreamSynchronize(c->stream));
}
static void nc_destroy(kda_comm *b) {
    nccl_comm *c = (nccl_comm *)b;
    CU_CHECK(cudaStreamSynchronize(c->stream));
    N.CommDestroy(c->comm);
    cudaEventDestroy(c->ev_compute);
    cudaEventDestroy(c->ev_comm);
    cudaFree(c->d_scalar);
    cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" kda_comm *kda_comm_nccl_create(const kda_dist *d) {
    setenv("NCCL_NVLS_ENABLE", "0", 0); // NVLink multicast off unless asked for (see docs/distributed.md)
    load_nccl();
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (d->rank == 0) NC_CHECK(N.GetUniqueId(&id));
    kda_dist_share_bytes(&id, sizeof id);
    nccl_comm *c = (nccl_comm *)kda_calloc(1, sizeof *c);
    NC_CHECK(N.CommInitRank(&c->comm, d->world, id, d->rank));
    kda_dist_id_shared(); // every rank has joined, so each has read the id

    CU_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CU_CHECK(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
    CU_CHECK(cudaEventCreateWithFlags(&c->ev_comm, cudaEventDisableTiming));
    CU_CHECK(cudaMalloc(&c->d_scalar, sizeof(double)));
    int ver = 0;
    N.GetVersion(&ver);
    c->base.name = "nccl";
    c->base.rank = d->rank;
    c->base.world = d->world;
    c->base.allreduce_f32 = nc_allreduce;
    c->base.reduce_f32 = nc_reduce;
    c->base.allgather = nc_allgather;
    c->base.group_start = nc_group_start;
    c->base.group_end = nc_group_end;
    c->base.wait = nc_wait;
    c->base.sum_f64 = nc_sum_f64;
    c->base.gather_to_root = nc_gather;
    c->base.destroy = nc_destroy;
    if (d->rank == 0) fprintf(stderr, "kda: NCCL %d communicator, %d rank%s\n", ver, d->world, d->world > 1 ? "s" : "");
    return &c->base;
}

#else // no nccl.h at build time

extern "C" kda_comm *kda_comm_nccl_create(const kda_dist *d) {
    (void)d;
    kda_die("this kda was built without NCCL headers (nccl.h not found), so it cannot run several GPUs; install "
            "NCCL's development files (libnccl-dev) and rebuild");
    return NULL;
}

#endif
