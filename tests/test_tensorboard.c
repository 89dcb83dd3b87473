// test_tensorboard.c — the TensorBoard event writer: CRC-32C against its published check value,
// then a file of scalars read back record by record (TFRecord framing, both masked CRCs, the
// Event fields) with a decoder written here from the format description. The parity test
// tests/python/test_tensorboard.py reads such a file with the tensorboard package itself.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "train/tensorboard.h"
#include "test_util.h"

static uint64_t rd_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t rd_varint(const unsigned char **p) {
    uint64_t v = 0;
    int s = 0;
    while (**p & 0x80) v |= (uint64_t)(*(*p)++ & 0x7f) << s, s += 7;
    return v | (uint64_t)(*(*p)++) << s;
}

typedef struct {
    int has_version, has_step;
    long step;
    char tag[64];
    float value;
    double wall;
} event;

// Decodes one Event (fields 1 wall_time, 2 step, 3 file_version, 5 summary.value[0]).
static void decode(const unsigned char *p, size_t n, event *e) {
    memset(e, 0, sizeof *e);
    const unsigned char *end = p + n;
    while (p < end) {
        uint64_t key = rd_varint(&p);
        int field = (int)(key >> 3), wire = (int)(key & 7);
        if (wire == 1) {
            uint64_t u = rd_le(p, 8);
            p += 8;
            if (field == 1) memcpy(&e->wall, &u, 8);
        } else if (wire == 0) {
            uint64_t v = rd_varint(&p);
            if (field == 2) e->step = (long)v, e->has_step = 1;
        } else if (wire == 2) {
            uint64_t len = rd_varint(&p);
            if (field == 3) e->has_version = len == 13 && !memcmp(p, "brain.Event:2", 13);
            if (field == 5) { // Summary { Value value = 1 { tag = 1; simple_value = 2 } }
                const unsigned char *q = p;
                rd_varint(&q);
                uint64_t vl = rd_varint(&q);
                const unsigned char *ve = q + vl;
                while (q < ve) {
                    uint64_t k2 = rd_varint(&q);
                    if ((k2 >> 3) == 1) {
                        uint64_t tl = rd_varint(&q);
                        memcpy(e->tag, q, tl < 63 ? tl : 63);
                        q += tl;
                    } else if ((k2 >> 3) == 2 && (k2 & 7) == 5) {
                        uint32_t u = (uint32_t)rd_le(q, 4);
                        memcpy(&e->value, &u, 4);
                        q += 4;
                    } else {
                        T_CHECK(0, "unexpected Value field %d", (int)(k2 >> 3));
                        return;
                    }
                }
            }
            p += len;
        } else {
            T_CHECK(0, "unexpected wire type %d", wire);
            return;
        }
    }
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    T_CHECK(f != NULL, "open %s", path);
    if (!f) exit(1);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    T_CHECK(fread(b, 1, *n, f) == *n, "read %s", path);
    fclose(f);
    return b;
}

int main(void) {
    T_CHECK(kda_crc32c("123456789", 9) == 0xe3069283u, "CRC-32C check value of \"123456789\" is e3069283 (got %08x)",
            kda_crc32c("123456789", 9));
    char dir[] = "/tmp/kda_tb_XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL, "temporary folder");
    char sub[256];
    snprintf(sub, sizeof sub, "%s/run/a", dir); // parents created
    kda_tb *tb = kda_tb_open(sub);
    static const char *tags[3] = {"lm loss", "learning-rate", "lm loss validation"};
    for (int s = 1; s <= 5; s++)
        for (int t = 0; t < 3; t++) kda_tb_scalar(tb, tags[t], s * 10, 1.0 / (s + t));
    char path[1300];
    snprintf(path, sizeof path, "%s", kda_tb_path(tb));
    kda_tb_close(tb);
    T_CHECK(strstr(path, "/events.out.tfevents.") != NULL, "file name has events.out.tfevents: %s", path);
    size_t n = 0;
    unsigned char *buf = slurp(path, &n);
    size_t off = 0;
    int records = 0, crc_ok = 0, fields_ok = 0;
    event e;
    while (off + 12 <= n) {
        uint64_t len = rd_le(buf + off, 8);
        uint32_t c1 = (uint32_t)rd_le(buf + off + 8, 4);
        if (off + 12 + len + 4 > n) break;
        uint32_t c2 = (uint32_t)rd_le(buf + off + 12 + len, 4);
        crc_ok += c1 == kda_tb_masked_crc(kda_crc32c(buf + off, 8)) &&
            c2 == kda_tb_masked_crc(kda_crc32c(buf + off + 12, len));
        decode(buf + off + 12, len, &e);
        if (records == 0)
            fields_ok += e.has_version && e.wall > 1.6e9;
        else {
            int s = (records - 1) / 3 + 1, t = (records - 1) % 3;
            fields_ok += e.has_step && e.step == s * 10 && !strcmp(e.tag, tags[t]) && e.value == (float)(1.0 / (s + t));
        }
        records++;
        off += 12 + len + 4;
    }
    T_CHECK(off == n, "the file is whole records (%zu of %zu bytes)", off, n);
    T_CHECK(records == 16, "16 records: the version event and 15 scalars (got %d)", records);
    T_CHECK(crc_ok == records, "both masked CRCs right in %d of %d records", crc_ok, records);
    T_CHECK(fields_ok == records, "version, steps, tags and values right in %d of %d records", fields_ok, records);
    buf[20] ^= 1; // a flipped bit breaks the first record's data CRC
    uint64_t len0 = rd_le(buf, 8);
    T_CHECK(rd_le(buf + 12 + len0, 4) != kda_tb_masked_crc(kda_crc32c(buf + 12, len0)),
            "a flipped bit shows in the CRC");
    free(buf);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    T_CHECK(system(cmd) == 0, "cleanup");
    return t_done("test_tensorboard");
}
