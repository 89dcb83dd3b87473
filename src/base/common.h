// common.h — error handling, allocation, timing and the project RNG.
// Promises: every fallible call is checked where it happens (file:line in the message);
// kda_die() prints one clear line and exits non-zero; the RNG is deterministic for a seed
// and identical on every platform (xoshiro256** seeded by splitmix64).
#ifndef KDA_COMMON_H
#define KDA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define KDA_NORETURN __attribute__((noreturn))
#define KDA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KDA_NORETURN
#define KDA_PRINTF(a, b)
#endif

// Print "kda: error: <message>" to stderr and exit(1). Also runs registered cleanup hooks
// (temporary files are removed so nothing half-written is left behind).
KDA_NORETURN void kda_die(const char *fmt, ...) KDA_PRINTF(1, 2);
// Same, with the source location of an internal failure appended.
KDA_NORETURN void kda_die_at(const char *file, int line, const char *fmt, ...) KDA_PRINTF(3, 4);
#define KDA_CHECK(cond, ...)                                                                                           \
    do {                                                                                                               \
        if (!(cond)) kda_die_at(__FILE__, __LINE__, __VA_ARGS__);                                                      \
    } while (0)

// Testing hook (fuzzers): when set, kda_die runs the cleanup hooks and longjmps to *jb
// instead of exiting. NULL restores exiting.
#include <setjmp.h>
void kda_die_longjmp(jmp_buf *jb);

// Cleanup hooks run by kda_die (and at normal exit if registered with atexit by the caller).
typedef void (*kda_cleanup_fn)(void *arg);
void kda_on_die(kda_cleanup_fn fn, void *arg);
void kda_on_die_remove(kda_cleanup_fn fn, void *arg);

void *kda_malloc(size_t bytes); // dies with the size on failure
void *kda_calloc(size_t n, size_t size);
void *kda_realloc(void *p, size_t bytes);
char *kda_strdup(const char *s);
FILE *kda_fopen(const char *path, const char *mode); // dies naming the path and errno text

// The whole rest of stream f, NUL-terminated (*len excludes the NUL); a read error dies naming path.
char *kda_read_stream(FILE *f, const char *path, size_t *len);
// The whole file: NULL with errno set when it cannot be opened (the caller words that error).
char *kda_read_file(const char *path, size_t *len);

// snprintf into a path buffer; dies naming the start of the path if it does not fit.
void kda_path(char *dst, size_t size, const char *fmt, ...) KDA_PRINTF(3, 4);

double kda_now(void); // monotonic seconds

// Deterministic RNG.
typedef struct {
    uint64_t s[4];
} kda_rng;
void kda_rng_seed(kda_rng *r, uint64_t seed);
uint64_t kda_rng_u64(kda_rng *r);
double kda_rng_uniform(kda_rng *r);             // [0, 1), 53 random bits
double kda_rng_normal(kda_rng *r);              // N(0,1), Box-Muller (no cached second draw)
uint64_t kda_rng_below(kda_rng *r, uint64_t n); // uniform in [0, n)

// bf16 helpers (round to nearest even), shared by CPU code and tests.
static inline uint16_t kda_f32_to_bf16(float f) {
    union {
        float f;
        uint32_t u;
    } x = {f};
    if ((x.u & 0x7f800000u) == 0x7f800000u && (x.u & 0x7fffffu)) return (uint16_t)((x.u >> 16) | 0x40);
    uint32_t r = 0x7fffu + ((x.u >> 16) & 1u);
    return (uint16_t)((x.u + r) >> 16);
}
static inline float kda_bf16_to_f32(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } x = {(uint32_t)h << 16};
    return x.f;
}

// The overlap of the element ranges [a0, a1) and [b0, b1) (a tensor and a shard, say): its
// length (0: none), its start in *at.
static inline size_t kda_overlap(size_t a0, size_t a1, size_t b0, size_t b1, size_t *at) {
    size_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    *at = lo;
    return hi > lo ? hi - lo : 0;
}

// Relative error ||a-b|| / ||b|| in double.
double kda_rel_err_f32(const float *a, const double *ref, size_t n);
double kda_rel_err_f32f32(const float *a, const float *ref, size_t n);

#endif
