// dist.c — see dist.h. MPI bootstrap, host collectives and the MPI communicator (kda_comm).
#include "comm/dist.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

static kda_dist D = {0, 1, 0, 0, "none"};
static int inited;

#define MPI_CHECK(call)                                                                                                \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char msg_[MPI_MAX_ERROR_STRING];                                                                           \
            int len_ = 0;                                                                                              \
            MPI_Error_string(rc_, msg_, &len_);                                                                        \
            kda_die_at(__FILE__, __LINE__, "MPI call %s failed: %s", #call, msg_);                                     \
        }                                                                                                              \
    } while (0)

static int launched_by_mpi(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK"); }

// first of the named variables that is set, as a non-negative int; -1 if none
static int env_int(const char *const *names) {
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        char *end;
        long x = strtol(v, &end, 10);
        if (*end || x < 0 || x > INT_MAX)
            kda_die("environment variable %s='%s' is not a non-negative integer", *names, v);
        return (int)x;
    }
    return -1;
}

int kda_dist_env_local_rank(void) {
    static const char *const names[] = {"KDA_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK",
                                        NULL};
    int r = env_int(names);
    return r < 0 ? 0 : r;
}

// A rank that dies must not leave the others waiting in a collective: under MPI, abort the job
// (registered first, so it runs after every other cleanup hook).
static void abort_job(void *arg) {
    (void)arg;
    if (D.mpi && D.world > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// Rank 0 of an environment launch removes the NCCL id file it wrote, on success or death.
static void unlink_id_file(void *arg) {
    (void)arg;
    const char *p = getenv("KDA_NCCL_ID_FILE");
    if (p && *p) unlink(p);
}

const kda_dist *kda_dist_init(void) {
    if (inited) return &D;
    inited = 1;
    D.local_rank = kda_dist_env_local_rank();
    if (launched_by_mpi()) {
        int provided = 0;
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        D.mpi = 1;
        kda_on_die(abort_job, NULL);
        if (provided < MPI_THREAD_FUNNELED)
            kda_die("this MPI library gives thread support level %d; kda needs MPI_THREAD_FUNNELED (OpenMP threads "
                    "run between MPI calls)",
                    provided);
        D.launcher = "mpi";
        MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &D.rank));
        MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &D.world));
        return &D;
    }
    static const char *const rk[] = {"KDA_RANK", "RANK", NULL}, *const ws[] = {"KDA_WORLD_SIZE", "WORLD_SIZE", NULL};
    int r = env_int(rk), w = env_int(ws);
    if (w > 1 || r > 0) {
        if (r < 0 || w < 1 || r >= w)
            kda_die("launcher environment: rank %d of world size %d is not valid; set RANK (0..WORLD_SIZE-1) and "
                    "WORLD_SIZE, or launch with mpirun",
                    r, w);
        D.rank = r;
        D.world = w;
        D.launcher = "env";
    }
    return &D;
}

static void need_mpi(const char *what) {
    if (D.world > 1 && !D.mpi)
        kda_die("%s across %d ranks needs MPI on the CPU; launch with mpirun (the RANK/WORLD_SIZE launch is for "
                "the CUDA backend, whose collectives go through NCCL)",
                what, D.world);
}

void kda_dist_allreduce_sum_f32(float *buf, size_t n) {
    if (D.world == 1) return;
    need_mpi("a gradient all-reduce");
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)n;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        buf += chunk;
        n -= (size_t)chunk;
    }
}

double kda_dist_allreduce_sum_f64(double x) {
    if (D.world == 1) return x;
    need_mpi("a sum");
    double y = 0;
    MPI_CHECK(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return y;
}

void kda_dist_barrier(void) {
    if (D.mpi) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void kda_dist_share_bytes(void *buf, size_t n) {
    if (D.world == 1) return;
    if (D.mpi) {
        KDA_CHECK(n <= INT_MAX, "sharing %zu bytes is too large for one MPI call", n);
        MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD));
        return;
    }
    const char *path = getenv("KDA_NCCL_ID_FILE");
    if (!path || !*path)
        kda_die("rank %d of %d was started without mpirun: set KDA_NCCL_ID_FILE to a path on a filesystem that every "
                "rank sees (rank 0 writes NCCL's id there), or launch with mpirun",
                D.rank, D.world);
    if (D.rank == 0) {
        if (access(path, F_OK) == 0)
            kda_die("KDA_NCCL_ID_FILE '%s' already exists (left by an earlier run?); remove it and start again", path);
        char tmp[PATH_MAX + 32];
        snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
        FILE *f = kda_fopen(tmp, "wb");
        if (fwrite(buf, 1, n, f) != n || fflush(f) != 0 || fsync(fileno(f)) != 0)
            kda_die("cannot write '%s': %s", tmp, strerror(errno));
        fclose(f);
        if (rename(tmp, path) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        kda_on_die(unlink_id_file, NULL);
        return;
    }
    // other ranks: wait (up to 10 minutes) for rank 0's file
    for (int tries = 0;; tries++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(buf, 1, n, f);
            fclose(f);
            if (got == n) return;
        }
        if (tries == 6000)
            kda_die("rank %d: no NCCL id in KDA_NCCL_ID_FILE '%s' after 10 minutes; did rank 0 start?", D.rank, path);
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void kda_dist_finalize(void) {
    if (D.mpi) {
        MPI_Finalize();
        D.mpi = 0;
    }
    kda_dist_id_shared();
    kda_on_die_remove(abort_job, NULL);
}

void kda_dist_id_shared(void) {
    if (D.launcher && !strcmp(D.launcher, "env") && D.rank == 0) {
        unlink_id_file(NULL);
        kda_on_die_remove(unlink_id_file, NULL);
    }
}

// ---- the MPI communicator (CPU backend: backend memory is host memory) ---------------------

static void mpi_allreduce(kda_comm *c, float *buf, size_t n) {
    (void)c;
    kda_dist_allreduce_sum_f32(buf, n);
}
static void mpi_reduce(kda_comm *c, float *buf, size_t n, int root) {
    if (c->world == 1) return;
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)n;
        if (c->rank == root)
            MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, buf, chunk, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD));
        else
            MPI_CHECK(MPI_Reduce(buf, NULL, chunk, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD));
        buf += chunk;
        n -= (size_t)chunk;
    }
}
// MPI counts are ints: send `bytes` as *count blocks of a contiguous type (the largest power of
// two up to 1 MiB that divides bytes), so parts beyond 2 GiB go in one call. Free with MPI_Type_free.
static MPI_Datatype byte_blocks(size_t bytes, int *count) {
    size_t unit = 1;
    while (unit < ((size_t)1 << 20) && bytes % (unit * 2) == 0) unit *= 2;
    KDA_CHECK(bytes / unit <= INT_MAX, "a part of %zu bytes per rank is too large for MPI", bytes);
    MPI_Datatype t;
    MPI_CHECK(MPI_Type_contiguous((int)unit, MPI_BYTE, &t));
    MPI_CHECK(MPI_Type_commit(&t));
    *count = (int)(bytes / unit);
    return t;
}
static void mpi_allgather(kda_comm *c, void *buf, size_t bytes) {
    if (c->world == 1) return;
    int count;
    MPI_Datatype t = byte_blocks(bytes, &count);
    MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, t, MPI_COMM_WORLD));
    MPI_Type_free(&t);
}
static void mpi_nop(kda_comm *c) { (void)c; }
static double mpi_sum_f64(kda_comm *c, double x) {
    (void)c;
    return kda_dist_allreduce_sum_f64(x);
}
static void mpi_gather(kda_comm *c, const void *shard, size_t bytes, void *host, int root, void *stage) {
    (void)stage;
    if (c->world == 1) {
        memcpy(host, shard, bytes);
        return;
    }
    int count;
    MPI_Datatype t = byte_blocks(bytes, &count);
    MPI_CHECK(MPI_Gather(shard, count, t, c->rank == root ? host : NULL, count, t, root, MPI_COMM_WORLD));
    MPI_Type_free(&t);
}
static void mpi_destroy(kda_comm *c) { free(c); }

kda_comm *kda_comm_create(const kda_ops *ops) {
    const kda_dist *d = kda_dist_init();
    if (!ops->host_memory) return kda_comm_nccl_create(d);
    need_mpi("CPU data parallelism");
    kda_comm *c = kda_calloc(1, sizeof *c);
    c->name = "mpi";
    c->rank = d->rank;
    c->world = d->world;
    c->allreduce_f32 = mpi_allreduce;
    c->reduce_f32 = mpi_reduce;
    c->allgather = mpi_allgather;
    c->group_start = mpi_nop;
    c->group_end = mpi_nop;
    c->wait = mpi_nop;
    c->sum_f64 = mpi_sum_f64;
    c->gather_to_root = mpi_gather;
    c->destroy = mpi_destroy;
    return c;
}

void kda_comm_free(kda_comm *c) {
    if (c) c->destroy(c);
}
