// test_util.h — tiny assertion + reporting helpers shared by the C tests.
// Each test binary prints one line per check ("ok"/"FAIL"), then a summary, and exits
// non-zero if any check failed. Seeds are printed so a failure can be replayed.
#ifndef KDA_TEST_UTIL_H
#define KDA_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

static int t_pass, t_fail;
#define T_CHECK(cond, ...) do { \
    if (cond) { t_pass++; printf("  ok    "); } else { t_fail++; printf("  FAIL  "); } \
    printf(__VA_ARGS__); printf("%s\n", (cond) ? "" : "   <-- (" __FILE__ ")"); fflush(stdout); } while (0)
// rel err check: prints the measured value and the bound
#define T_REL(name, err, tol) T_CHECK((err) <= (tol), "%-48s rel err %.3e (<= %.1e)", name, (double)(err), (double)(tol))
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
#endif
