// common.c — see common.h.
#include "base/common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_HOOKS 16
static struct {
    kda_cleanup_fn fn;
    void *arg;
} hooks[MAX_HOOKS];
static int n_hooks;

void kda_on_die(kda_cleanup_fn fn, void *arg) {
    KDA_CHECK(n_hooks < MAX_HOOKS, "too many cleanup hooks");
    hooks[n_hooks].fn = fn;
    hooks[n_hooks].arg = arg;
    n_hooks++;
}

void kda_on_die_remove(kda_cleanup_fn fn, void *arg) {
    for (int i = 0; i < n_hooks; i++)
        if (hooks[i].fn == fn && hooks[i].arg == arg) {
            hooks[i] = hooks[--n_hooks];
            return;
        }
}

static jmp_buf *die_jmp;
void kda_die_longjmp(jmp_buf *jb) { die_jmp = jb; }

static void run_hooks(void) {
    while (n_hooks > 0) {
        n_hooks--;
        hooks[n_hooks].fn(hooks[n_hooks].arg);
    }
}

void kda_die(const char *fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("kda: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    run_hooks();
    if (die_jmp) longjmp(*die_jmp, 1);
    exit(1);
}

void kda_die_at(const char *file, int line, const char *fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("kda: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s:%d)\n", file, line);
    va_end(ap);
    run_hooks();
    if (die_jmp) longjmp(*die_jmp, 1);
    exit(1);
}

void *kda_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) kda_die("out of memory allocating %zu bytes (%.2f GiB)", bytes, bytes / 1073741824.0);
    return p;
}

void *kda_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) kda_die("out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *kda_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) kda_die("out of memory reallocating to %zu bytes", bytes);
    return q;
}

char *kda_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = kda_malloc(n);
    memcpy(p, s, n);
    return p;
}

FILE *kda_fopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) kda_die("cannot open '%s' (%s): %s", path, mode[0] == 'r' ? "for reading" : "for writing", strerror(errno));
    return f;
}

char *kda_read_stream(FILE *f, const char *path, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = kda_malloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = kda_realloc(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) kda_die("cannot read '%s': %s", path, strerror(errno));
    buf[n] = 0;
    *len = n;
    return buf;
}

char *kda_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = kda_read_stream(f, path, len);
    fclose(f);
    return buf;
}

void kda_path(char *dst, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) kda_die("path too long (over %zu bytes): '%.60s...'", size - 1, dst);
}

double kda_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kda_rng_seed(kda_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t kda_rng_u64(kda_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kda_rng_uniform(kda_rng *r) { return (kda_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double kda_rng_normal(kda_rng *r) {
    double u1 = 1.0 - kda_rng_uniform(r); // (0, 1]
    double u2 = kda_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t kda_rng_below(kda_rng *r, uint64_t n) {
    // Lemire-free simple rejection to stay exact and portable.
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = kda_rng_u64(r);
    while (x >= lim);
    return x % n;
}

double kda_rel_err_f32(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double kda_rel_err_f32f32(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
