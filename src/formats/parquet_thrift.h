// parquet_thrift.h — a decoder for the Thrift compact protocol, the encoding of Parquet's
// file footer and page headers: fields (delta-coded ids and a type nibble), zigzag varints,
// binary strings, lists, and skipping of anything not needed (sets, maps, nested structs).
//
// Promises: never reads outside [p, end); any malformed input (truncation, varints over 10
// bytes, unknown types, nesting deeper than 32, absurd sizes) sets err and makes every later
// call return zero/empty, so callers check err once after decoding a structure.
#ifndef KDA_PARQUET_THRIFT_H
#define KDA_PARQUET_THRIFT_H

#include <stddef.h>
#include <stdint.h>

enum {
    KDA_TT_STOP = 0,
    KDA_TT_TRUE = 1,
    KDA_TT_FALSE = 2,
    KDA_TT_BYTE = 3,
    KDA_TT_I16 = 4,
    KDA_TT_I32 = 5,
    KDA_TT_I64 = 6,
    KDA_TT_DOUBLE = 7,
    KDA_TT_BINARY = 8,
    KDA_TT_LIST = 9,
    KDA_TT_SET = 10,
    KDA_TT_MAP = 11,
    KDA_TT_STRUCT = 12,
};

typedef struct {
    const uint8_t *p, *end;
    int err;
    int depth;
} kda_thrift;

// Next field of the current struct: returns 0 at its end (STOP) or on error; *last is the
// previous field id of this struct (start at 0), updated here.
int kda_thrift_field(kda_thrift *t, int16_t *last, int16_t *id, int *type);
int64_t kda_thrift_int(kda_thrift *t);        // I16 / I32 / I64 / BYTE field value
int kda_thrift_bool(kda_thrift *t, int type); // a BOOL field's value lives in its type
const uint8_t *kda_thrift_binary(kda_thrift *t, size_t *n);
// A list or set header: element type and count (count bounded by the bytes left).
uint32_t kda_thrift_list(kda_thrift *t, int *elem_type);
void kda_thrift_skip(kda_thrift *t, int type);
// Structs: call before reading a nested struct's fields, and after its STOP.
void kda_thrift_enter(kda_thrift *t);
void kda_thrift_leave(kda_thrift *t);

#endif
