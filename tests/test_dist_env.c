// test_dist_env.c — the launch without MPI (RANK / WORLD_SIZE / KDA_NCCL_ID_FILE, dist.h), on
// the CPU with forked processes: rank 0 hands its bytes (NCCL's unique id in real runs) to rank 1
// through the file; the file is refused if it already exists, removed once every rank holds the
// id (kda_dist_id_shared) and removed when rank 0 dies; an invalid layout is refused.
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"
#include "comm/dist.h"
#include "test_util.h"

#define NB 128 // sizeof(ncclUniqueId)

static unsigned char expect[NB];
static char path[512];

enum { RANK0_WRITE, RANK0_SHARED, RANK0_DIE, RANK1_READ };

// a child process: take the launcher's layout from the environment, then do `what`
static int child(int rank, int world, int what) {
    char r[16], w[16];
    snprintf(r, sizeof r, "%d", rank);
    snprintf(w, sizeof w, "%d", world);
    setenv("RANK", r, 1);
    setenv("WORLD_SIZE", w, 1);
    setenv("KDA_NCCL_ID_FILE", path, 1);
    const kda_dist *d = kda_dist_init();
    if (d->world != world || d->rank != rank || strcmp(d->launcher, "env")) return 2;
    unsigned char buf[NB];
    if (rank == 0)
        memcpy(buf, expect, NB);
    else
        memset(buf, 0, NB);
    kda_dist_share_bytes(buf, NB);
    if (memcmp(buf, expect, NB)) return 3;
    char marker[600];
    snprintf(marker, sizeof marker, "%s.read", path);
    if (rank == 1) { // tell the test that rank 1 holds the id (NCCL's init is this barrier in real runs)
        FILE *f = kda_fopen(marker, "w");
        fclose(f);
    } else if (what != RANK0_WRITE) {
        for (int i = 0; i < 200 && access(marker, F_OK) != 0; i++) usleep(50 * 1000);
        unlink(marker);
    }
    if (what == RANK0_SHARED) kda_dist_id_shared();
    if (what == RANK0_DIE) kda_die("rank 0 stops on purpose after writing the id (test)");
    return 0;
}

static pid_t spawn(int rank, int world, int what) {
    fflush(stdout);
    pid_t p = fork();
    if (p < 0) kda_die("fork failed");
    if (p == 0) _exit(child(rank, world, what));
    return p;
}

static int wait_rc(pid_t p) {
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int exists(void) { return access(path, F_OK) == 0; }

int main(void) {
    unsigned long seed = t_seed();
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < NB; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        expect[i] = (unsigned char)x;
    }
    char dir[] = "/tmp/kda_dist_env_XXXXXX";
    if (!mkdtemp(dir)) kda_die("mkdtemp failed");
    snprintf(path, sizeof path, "%s/nccl_id", dir);

    // rank 1 starts first and waits for the file; rank 0 writes it
    pid_t p1 = spawn(1, 2, RANK1_READ);
    usleep(200 * 1000);
    pid_t p0 = spawn(0, 2, RANK0_WRITE);
    int rc0 = wait_rc(p0), rc1 = wait_rc(p1);
    T_CHECK(rc0 == 0 && rc1 == 0,
            "RANK/WORLD_SIZE launch: rank 1 receives rank 0's %d bytes through the file "
            "(exit codes %d, %d)",
            NB, rc0, rc1);
    T_CHECK(exists(), "the id file is left in place until every rank holds the id");
    char marker[600];
    snprintf(marker, sizeof marker, "%s.read", path);
    unlink(marker);

    // a stale file from an earlier run is refused, not read
    int rc = wait_rc(spawn(0, 2, RANK0_WRITE));
    T_CHECK(rc == 1, "rank 0 refuses an id file that already exists (exit %d)", rc);
    T_CHECK(exists(), "... and leaves that file alone");
    unlink(path);

    // every rank has joined: rank 0 removes the file
    p1 = spawn(1, 2, RANK1_READ);
    rc0 = wait_rc(spawn(0, 2, RANK0_SHARED));
    rc1 = wait_rc(p1);
    T_CHECK(rc0 == 0 && rc1 == 0 && !exists(), "kda_dist_id_shared removes the file (exit codes %d, %d)", rc0, rc1);

    // rank 0 dies after writing: the cleanup hook removes the file
    p1 = spawn(1, 2, RANK1_READ);
    rc0 = wait_rc(spawn(0, 2, RANK0_DIE));
    rc1 = wait_rc(p1);
    T_CHECK(rc0 == 1 && rc1 == 0 && !exists(), "rank 0 dying after writing removes the file (exit codes %d, %d)", rc0,
            rc1);

    // an impossible layout is refused
    rc = wait_rc(spawn(2, 2, RANK1_READ));
    T_CHECK(rc == 1 && !exists(), "RANK 2 of WORLD_SIZE 2 is refused (exit %d)", rc);
    rmdir(dir);
    return t_done("test_dist_env");
}
