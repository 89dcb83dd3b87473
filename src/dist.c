// dist.c — see dist.h.
#include "dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "common.h"

static kda_dist D = {0, 1, 0};
static int inited;

#define MPI_CHECK(call)                                                                   \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != MPI_SUCCESS) {                                                         \
            char msg_[MPI_MAX_ERROR_STRING];                                              \
            int len_ = 0;                                                                 \
            MPI_Error_string(rc_, msg_, &len_);                                           \
            kda_die_at(__FILE__, __LINE__, "MPI call %s failed: %s", #call, msg_);        \
        }                                                                                 \
    } while (0)

static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

const kda_dist *kda_dist_init(void) {
    if (inited) return &D;
    inited = 1;
    if (!launched_by_mpi()) return &D;
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
    D.mpi = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &D.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &D.world));
    return &D;
}

void kda_dist_allreduce_sum_f32(float *buf, size_t n) {
    if (!D.mpi || D.world == 1) return;
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        buf += chunk;
        n -= (size_t)chunk;
    }
}

double kda_dist_allreduce_sum_f64(double x) {
    if (!D.mpi || D.world == 1) return x;
    double y = 0;
    MPI_CHECK(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return y;
}

void kda_dist_barrier(void) {
    if (D.mpi) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void kda_dist_finalize(void) {
    if (D.mpi) {
        MPI_Finalize();
        D.mpi = 0;
    }
}
