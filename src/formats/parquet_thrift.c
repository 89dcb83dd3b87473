// parquet_thrift.c — see parquet_thrift.h (Thrift compact protocol, as the Thrift
// specification describes it: zigzag varints, field-id deltas, size-in-nibble list headers).
#include "formats/parquet_thrift.h"

#define MAX_DEPTH 32

static uint64_t varint(kda_thrift *t) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (t->err || t->p >= t->end) {
            t->err = 1;
            return 0;
        }
        uint8_t b = *t->p++;
        if (shift == 63 && (b & 0x7e)) break; // over 64 bits
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    t->err = 1;
    return 0;
}

static int64_t zigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static int byte(kda_thrift *t) {
    if (t->err || t->p >= t->end) {
        t->err = 1;
        return 0;
    }
    return *t->p++;
}

int kda_thrift_field(kda_thrift *t, int16_t *last, int16_t *id, int *type) {
    int b = byte(t);
    if (t->err || b == 0) return 0;
    *type = b & 0x0f;
    int delta = b >> 4;
    int64_t fid = delta ? *last + delta : zigzag(varint(t));
    if (t->err || fid < -32768 || fid > 32767 || *type > KDA_TT_STRUCT) {
        t->err = 1;
        return 0;
    }
    *id = (int16_t)fid;
    *last = (int16_t)fid;
    return 1;
}

int64_t kda_thrift_int(kda_thrift *t) { return zigzag(varint(t)); }

int kda_thrift_bool(kda_thrift *t, int type) {
    (void)t;
    return type == KDA_TT_TRUE;
}

const uint8_t *kda_thrift_binary(kda_thrift *t, size_t *n) {
    uint64_t len = varint(t);
    if (t->err || len > (uint64_t)(t->end - t->p)) {
        t->err = 1;
        *n = 0;
        return t->p;
    }
    const uint8_t *s = t->p;
    t->p += len;
    *n = (size_t)len;
    return s;
}

uint32_t kda_thrift_list(kda_thrift *t, int *elem_type) {
    int b = byte(t);
    uint64_t n = (uint64_t)(b >> 4);
    if (n == 15) n = varint(t);
    *elem_type = b & 0x0f;
    // every element takes at least one byte (bools in lists too), except empty structs
    if (t->err || n > (uint64_t)(t->end - t->p) + 1 || n > 0xffffffffu) {
        t->err = 1;
        return 0;
    }
    return (uint32_t)n;
}

void kda_thrift_enter(kda_thrift *t) {
    if (++t->depth > MAX_DEPTH) t->err = 1;
}

void kda_thrift_leave(kda_thrift *t) { t->depth--; }

static void skip_elem(kda_thrift *t, int type) {
    // inside containers a bool is one byte
    if (type == KDA_TT_TRUE || type == KDA_TT_FALSE)
        byte(t);
    else
        kda_thrift_skip(t, type);
}

void kda_thrift_skip(kda_thrift *t, int type) {
    if (t->err) return;
    switch (type) {
    case KDA_TT_TRUE:
    case KDA_TT_FALSE: return; // value is in the field header
    case KDA_TT_BYTE: byte(t); return;
    case KDA_TT_I16:
    case KDA_TT_I32:
    case KDA_TT_I64: varint(t); return;
    case KDA_TT_DOUBLE:
        if (t->end - t->p < 8)
            t->err = 1;
        else
            t->p += 8;
        return;
    case KDA_TT_BINARY: {
        size_t n;
        kda_thrift_binary(t, &n);
        return;
    }
    case KDA_TT_LIST:
    case KDA_TT_SET: {
        int et;
        uint32_t n = kda_thrift_list(t, &et);
        kda_thrift_enter(t);
        for (uint32_t i = 0; i < n && !t->err; i++) skip_elem(t, et);
        kda_thrift_leave(t);
        return;
    }
    case KDA_TT_MAP: {
        uint64_t n = varint(t);
        if (n == 0) return;
        int kv = byte(t);
        if (n > (uint64_t)(t->end - t->p)) {
            t->err = 1;
            return;
        }
        kda_thrift_enter(t);
        for (uint64_t i = 0; i < n && !t->err; i++) {
            skip_elem(t, kv >> 4);
            skip_elem(t, kv & 0x0f);
        }
        kda_thrift_leave(t);
        return;
    }
    case KDA_TT_STRUCT: {
        kda_thrift_enter(t);
        int16_t last = 0, id;
        int ft;
        while (kda_thrift_field(t, &last, &id, &ft)) kda_thrift_skip(t, ft);
        kda_thrift_leave(t);
        return;
    }
    default: t->err = 1; return;
    }
}
