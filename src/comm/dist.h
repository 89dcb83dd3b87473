// dist.h — data parallelism across processes. MPI (OpenMPI) launches and bootstraps; CPU
// collectives go through MPI, GPU collectives through NCCL (src/backend/cuda/comm_nccl.cu), bootstrapped
// with the MPI rank/world or, for launchers without MPI, from environment variables.
//
// Promises: a process started without a launcher is rank 0 of 1 and never touches MPI;
// under mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK set) MPI is initialised on first
// use; without MPI, RANK / WORLD_SIZE / LOCAL_RANK (torchrun's names; KDA_RANK,
// KDA_WORLD_SIZE, KDA_LOCAL_RANK take precedence) give the layout and KDA_NCCL_ID_FILE names a
// file on a shared filesystem through which rank 0 hands NCCL's unique id to the others.
// Collectives are deterministic for a fixed world size.
#ifndef KDA_DIST_H
#define KDA_DIST_H

#include <stddef.h>

#include "model/ops.h"

typedef struct {
    int rank, world;
    int local_rank;       // rank on this node (picks the GPU)
    int mpi;              // MPI initialised by us
    const char *launcher; // "none" | "mpi" | "env"
} kda_dist;

const kda_dist *kda_dist_init(void); // idempotent
// Rank on this node from the launcher's environment, without initialising anything (0 if none).
int kda_dist_env_local_rank(void);
void kda_dist_allreduce_sum_f32(float *buf, size_t n); // in place, host memory (MPI)
double kda_dist_allreduce_sum_f64(double x);           // host scalar (MPI)
void kda_dist_barrier(void);
// Rank 0's n bytes to every rank (MPI broadcast, or the KDA_NCCL_ID_FILE exchange without MPI).
void kda_dist_share_bytes(void *buf, size_t n);
void kda_dist_finalize(void);
// Every rank holds the shared id (NCCL's init has returned): rank 0 removes KDA_NCCL_ID_FILE.
void kda_dist_id_shared(void);

// ---- collectives on backend memory -------------------------------------------------------
// MPI over host memory for the CPU backend, NCCL over GPU memory for the CUDA backend. Every
// rank issues the same calls in the same order. NCCL work runs on its own stream, after the
// compute issued so far (so it overlaps later compute); kda_comm_wait makes compute issued
// afterwards wait for it. MPI calls complete before they return.
typedef struct kda_comm kda_comm;
struct kda_comm {
    const char *name; // "mpi" | "nccl"
    int rank, world;
    void (*allreduce_f32)(kda_comm *c, float *buf, size_t n);         // sum, in place
    void (*reduce_f32)(kda_comm *c, float *buf, size_t n, int root);  // sum into root's buf, in place
    void (*allgather)(kda_comm *c, void *buf, size_t bytes_per_rank); // in place: rank r's part at r*bytes
    void (*group_start)(kda_comm *c);                                 // batch the calls that follow
    void (*group_end)(kda_comm *c);
    void (*wait)(kda_comm *c);
    double (*sum_f64)(kda_comm *c, double x); // host scalar, synchronous
    // root's host[world*bytes] = every rank's shard (backend memory) in rank order; synchronous.
    // stage: backend memory of `bytes` that the call may overwrite (no allocation at save time).
    void (*gather_to_root)(kda_comm *c, const void *shard, size_t bytes, void *host, int root, void *stage);
    void (*destroy)(kda_comm *c);
};
// The communicator for this backend and the process layout; dies with what to do when the
// transport is missing (no MPI launcher for CPU ranks, no NCCL library for GPU ranks).
kda_comm *kda_comm_create(const kda_ops *ops);
void kda_comm_free(kda_comm *c);
// NCCL (src/backend/cuda/comm_nccl.cu; the no-CUDA build's stub dies saying so).
kda_comm *kda_comm_nccl_create(const kda_dist *d);

#endif
