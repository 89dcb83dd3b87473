// safetensors.h — read and write .safetensors files (kda-model.md §5.4).
//
// Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"__metadata__": {"format": "pt"}, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// (padded with spaces), then the row-major little-endian tensor bytes; offsets are relative
// to the start of that data section.
//
// Writer promises: tensors are stored in the order given with contiguous offsets from 0; the
// header always carries "__metadata__": {"format": "pt"} and is padded with spaces so that the
// data starts at a multiple of 8 bytes; the file appears atomically (written to
// "<path>.tmp.<pid>", flushed, fsync'ed, renamed over <path>, directory fsync'ed), and the
// temporary is removed on any error, including a kda_die elsewhere while it is open.
//
// Reader promises: the whole file is validated when it is opened and never read out of
// bounds; a bad file is rejected with one message that names the file and the problem (too
// short, header length beyond the file or > 100 MB, header not UTF-8 / not JSON / not an
// object / duplicate names, entry without dtype, shape or data_offsets or with wrong JSON
// types, unknown dtype, negative or overflowing shape, more than KDA_ST_MAX_DIMS dims, byte
// count != numel * dtype size, offsets out of range, overlapping, with gaps, or not covering
// the data section). Tensor bytes point into a read-only mapping of the file and may be
// unaligned: read them with memcpy or kda_st_to_f32.
//
// Each fallible call comes in two forms: *_err returns failure (NULL or -1) with the message
// in err[errlen], for library use; the plain form dies with that message (kda_die).
#ifndef KDA_SAFETENSORS_H
#define KDA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define KDA_ST_MAX_DIMS 4
#define KDA_ST_MAX_HEADER (100u * 1000u * 1000u) // bytes; larger headers are rejected

// Dtypes the reader understands; the writer converts fp32 data to F32, BF16 or I32 and
// writes raw bytes of any of them.
typedef enum { KDA_ST_F32 = 0, KDA_ST_BF16, KDA_ST_I32, KDA_ST_F16, KDA_ST_F64, KDA_ST_I64 } kda_st_dtype;

const char *kda_st_dtype_name(kda_st_dtype dt); // "F32", "BF16", ...
size_t kda_st_dtype_size(kda_st_dtype dt);      // bytes per element

// One tensor to write. Exactly one of data / raw is set:
//   data: numel fp32 values, converted to dtype (BF16: round to nearest even, common.h;
//         I32: every value must be an integer in int32 range, else the write fails)
//   raw:  numel * dtype size bytes already in dtype's little-endian layout
// ndim 0 is a scalar (one element).
typedef struct {
    const char *name;
    kda_st_dtype dtype;
    int ndim;
    int64_t shape[KDA_ST_MAX_DIMS];
    const float *data;
    const void *raw;
} kda_st_tensor;

int kda_st_write_err(const char *path, const kda_st_tensor *t, int n, char *err, size_t errlen);
void kda_st_write(const char *path, const kda_st_tensor *t, int n);

// One tensor of an open file (all fields read-only).
typedef struct {
    char *name;
    kda_st_dtype dtype;
    int ndim;
    int64_t shape[KDA_ST_MAX_DIMS];
    size_t numel;     // product of shape (1 for a scalar)
    size_t nbytes;    // numel * dtype size
    const void *data; // nbytes bytes inside the mapping, possibly unaligned
} kda_st_entry;

typedef struct {
    char *path;
    int n; // tensors, in header order
    kda_st_entry *entries;
    int n_meta; // "__metadata__" string pairs
    char **meta_keys, **meta_vals;
    void *map; // the whole file, mapped read-only
    size_t map_size;
} kda_st_file;

kda_st_file *kda_st_open_err(const char *path, char *err, size_t errlen);
kda_st_file *kda_st_open(const char *path);
void kda_st_close(kda_st_file *f); // NULL is fine

const kda_st_entry *kda_st_find(const kda_st_file *f, const char *name); // NULL if absent
// Like kda_st_find, but dies naming the file and the tensor when it is absent.
const kda_st_entry *kda_st_require(const kda_st_file *f, const char *name);
const char *kda_st_meta(const kda_st_file *f, const char *key); // NULL if absent

// Convert e's numel elements to fp32 into out (integers convert to the nearest float).
void kda_st_to_f32(const kda_st_file *f, const kda_st_entry *e, float *out);

#endif
