// tensorboard.c — see tensorboard.h.
#include "train/tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

struct kda_tb {
    FILE *f;
    char path[1200];
};

uint32_t kda_crc32c(const void *p, size_t n) {
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    const unsigned char *b = p;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ b[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t kda_tb_masked_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// ---- protocol buffer encoding (the few wire types an Event needs) ----

typedef struct {
    unsigned char b[512];
    size_t n;
} pbuf;

static void put_varint(pbuf *o, uint64_t v) {
    do {
        KDA_CHECK(o->n < sizeof o->b, "TensorBoard event too large");
        unsigned char byte = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}
static void put_bytes(pbuf *o, const void *p, size_t n) {
    KDA_CHECK(o->n + n <= sizeof o->b, "TensorBoard event too large");
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_tag(pbuf *o, int field, int wire) { put_varint(o, (uint64_t)field << 3 | (uint64_t)wire); }
static void put_le(pbuf *o, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) {
        KDA_CHECK(o->n < sizeof o->b, "TensorBoard event too large");
        o->b[o->n++] = (unsigned char)(v >> (8 * i));
    }
}
static void put_double(pbuf *o, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    put_tag(o, field, 1);
    put_le(o, u, 8);
}
static void put_float(pbuf *o, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    put_tag(o, field, 5);
    put_le(o, u, 4);
}
static void put_len(pbuf *o, int field, const void *p, size_t n) {
    put_tag(o, field, 2);
    put_varint(o, n);
    put_bytes(o, p, n);
}

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

static void write_record(kda_tb *tb, const pbuf *ev) {
    unsigned char hdr[8];
    uint64_t len = ev->n;
    for (int i = 0; i < 8; i++) hdr[i] = (unsigned char)(len >> (8 * i));
    uint32_t c1 = kda_tb_masked_crc(kda_crc32c(hdr, 8)), c2 = kda_tb_masked_crc(kda_crc32c(ev->b, ev->n));
    unsigned char t1[4], t2[4];
    for (int i = 0; i < 4; i++) t1[i] = (unsigned char)(c1 >> (8 * i)), t2[i] = (unsigned char)(c2 >> (8 * i));
    if (fwrite(hdr, 1, 8, tb->f) != 8 || fwrite(t1, 1, 4, tb->f) != 4 || fwrite(ev->b, 1, ev->n, tb->f) != ev->n ||
        fwrite(t2, 1, 4, tb->f) != 4)
        kda_die("cannot write TensorBoard events to '%s': %s", tb->path, strerror(errno));
}

static void mkdir_p(const char *dir) {
    char tmp[1024];
    KDA_CHECK(strlen(dir) < sizeof tmp, "tensorboard_dir '%s' is too long", dir);
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            kda_die("cannot create '%s' for tensorboard_dir '%s': %s", tmp, dir, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        kda_die("cannot create tensorboard_dir '%s': %s", dir, strerror(errno));
}

kda_tb *kda_tb_open(const char *dir) {
    mkdir_p(dir);
    kda_tb *tb = kda_calloc(1, sizeof *tb);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%ld.%s.%ld", dir, (long)time(NULL), host,
             (long)getpid());
    tb->f = fopen(tb->path, "wb");
    if (!tb->f) kda_die("cannot create TensorBoard event file '%s': %s (tensorboard_dir)", tb->path, strerror(errno));
    pbuf ev = {.n = 0};
    put_double(&ev, 1, wall_now());
    put_len(&ev, 3, "brain.Event:2", 13);
    write_record(tb, &ev);
    kda_tb_flush(tb);
    return tb;
}

void kda_tb_scalar(kda_tb *tb, const char *tag, int64_t step, double value) {
    size_t tl = strlen(tag);
    KDA_CHECK(tl < 200, "TensorBoard tag '%s' too long", tag);
    pbuf val = {.n = 0}, sum = {.n = 0}, ev = {.n = 0};
    put_len(&val, 1, tag, tl);
    put_float(&val, 2, (float)value);
    put_len(&sum, 1, val.b, val.n);
    put_double(&ev, 1, wall_now());
    put_tag(&ev, 2, 0);
    put_varint(&ev, (uint64_t)step);
    put_len(&ev, 5, sum.b, sum.n);
    write_record(tb, &ev);
}

void kda_tb_flush(kda_tb *tb) {
    if (fflush(tb->f) != 0) kda_die("cannot write TensorBoard events to '%s': %s", tb->path, strerror(errno));
}

void kda_tb_close(kda_tb *tb) {
    if (!tb) return;
    if (fclose(tb->f) != 0) kda_die("cannot write TensorBoard events to '%s': %s", tb->path, strerror(errno));
    free(tb);
}

const char *kda_tb_path(const kda_tb *tb) { return tb->path; }
