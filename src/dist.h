// dist.h — data parallelism across processes: MPI (OpenMPI) for launch, bootstrap and CPU
// collectives. (GPU collectives go through NCCL, bootstrapped with the MPI rank/world here.)
//
// Promises: a process started without a launcher is rank 0 of 1 and never touches MPI;
// under mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK set) MPI is initialised on first
// use. Collectives are deterministic for a fixed world size.
#ifndef KDA_DIST_H
#define KDA_DIST_H

#include <stddef.h>

typedef struct {
    int rank, world;
    int mpi; // MPI initialised by us
} kda_dist;

const kda_dist *kda_dist_init(void);   // idempotent
void kda_dist_allreduce_sum_f32(float *buf, size_t n);   // in place, host memory
double kda_dist_allreduce_sum_f64(double x);
void kda_dist_barrier(void);
void kda_dist_finalize(void);

#endif
