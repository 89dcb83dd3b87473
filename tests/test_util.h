// test_util.h — tiny assertion + reporting helpers shared by the C tests.
// Each test binary prints one line per check ("ok"/"FAIL"), then a summary, and exits
// non-zero if any check failed. Seeds are printed so a failure can be replayed.
#ifndef KDA_TEST_UTIL_H
#define KDA_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

// A test that cannot run here (no GPU) prints "SKIP: why" and exits KDA_TEST_SKIP (77, automake's
// code); tests/run.sh counts it as skipped, not passed.
#define KDA_TEST_SKIP 77

static int t_pass, t_fail;
#define T_CHECK(cond, ...)                                                                                             \
    do {                                                                                                               \
        if (cond) {                                                                                                    \
            t_pass++;                                                                                                  \
            printf("  ok    ");                                                                                        \
        } else {                                                                                                       \
            t_fail++;                                                                                                  \
            printf("  FAIL  ");                                                                                        \
        }                                                                                                              \
        printf(__VA_ARGS__);                                                                                           \
        printf("%s\n", (cond) ? "" : "   <-- (" __FILE__ ")");                                                         \
        fflush(stdout);                                                                                                \
    } while (0)
// rel err check: prints the measured value and the bound
#define T_REL(name, err, tol)                                                                                          \
    T_CHECK((err) <= (tol), "%-48s rel err %.3e (<= %.1e)", name, (double)(err), (double)(tol))
static inline int t_done(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_pass, t_fail);
    return t_fail ? 1 : 0;
}
// Environment override for the seed: KDA_TEST_SEED; otherwise a time-based fresh seed.
#include <time.h>
static inline unsigned long t_seed(void) {
    const char *s = getenv("KDA_TEST_SEED");
    unsigned long seed = s ? strtoul(s, NULL, 10) : (unsigned long)time(NULL);
    printf("seed %lu (replay with KDA_TEST_SEED=%lu)\n", seed, seed);
    return seed;
}

// Whole-file read / write for fixtures (die naming the file on failure).
#include "base/common.h"
static inline unsigned char *t_slurp(const char *path, size_t *n) {
    FILE *f = kda_fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = kda_malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) kda_die("short read of %s", path);
    fclose(f);
    return b;
}
static inline void t_spill(const char *path, const unsigned char *b, size_t n) {
    FILE *f = kda_fopen(path, "wb");
    if (fwrite(b, 1, n, f) != n) kda_die("short write of %s", path);
    fclose(f);
}
#endif
