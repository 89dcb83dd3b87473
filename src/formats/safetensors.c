// safetensors.c — see safetensors.h.
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the file format is little-endian)"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [KDA_ST_F32] = {"F32", 4}, [KDA_ST_BF16] = {"BF16", 2}, [KDA_ST_I32] = {"I32", 4},
    [KDA_ST_F16] = {"F16", 2}, [KDA_ST_F64] = {"F64", 8},   [KDA_ST_I64] = {"I64", 8},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

const char *kda_st_dtype_name(kda_st_dtype dt) { return (int)dt >= 0 && (int)dt < N_DTYPES ? dtypes[dt].name : "?"; }
size_t kda_st_dtype_size(kda_st_dtype dt) { return (int)dt >= 0 && (int)dt < N_DTYPES ? dtypes[dt].size : 0; }

// Format "<prefix><message>" into err; returns -1 so callers can `return fail(...)`.
KDA_PRINTF(3, 4) static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

// ---- writer -------------------------------------------------------------------------------

static void remove_file_hook(void *path) { unlink((const char *)path); }

// numel of a tensor to write, or -1 on a bad shape
static int tensor_numel(const kda_st_tensor *t, size_t *numel) {
    if (t->ndim < 0 || t->ndim > KDA_ST_MAX_DIMS) return -1;
    size_t n = 1;
    for (int k = 0; k < t->ndim; k++) {
        if (t->shape[k] < 0 || (uint64_t)t->shape[k] > SIZE_MAX) return -1;
        if (__builtin_mul_overflow(n, (size_t)t->shape[k], &n)) return -1;
    }
    *numel = n;
    return 0;
}

// Build the header JSON (padded to a multiple of 8 bytes); NULL on error (message in err).
static char *build_header(const char *path, const kda_st_tensor *t, int n, size_t *hlen, char *err, size_t errlen) {
    json_t *root = json_object(), *meta = json_object();
    KDA_CHECK(root && meta, "out of memory building a safetensors header");
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const kda_st_tensor *ti = &t[i];
        size_t numel = 0, nbytes = 0, size = kda_st_dtype_size(ti->dtype);
        const char *bad = NULL;
        if (!ti->name || !ti->name[0])
            bad = "has no name";
        else if (!strcmp(ti->name, "__metadata__"))
            bad = "uses the reserved name __metadata__";
        else if (size == 0)
            bad = "has an unknown dtype";
        else if (tensor_numel(ti, &numel) != 0)
            bad = "has a bad shape (ndim 0..4, dims >= 0, no overflow)";
        else if (ti->data && ti->raw)
            bad = "has both data and raw set";
        else if (ti->data && ti->dtype != KDA_ST_F32 && ti->dtype != KDA_ST_BF16 && ti->dtype != KDA_ST_I32)
            bad = "converts fp32 data only to F32, BF16 or I32 (pass raw bytes for other dtypes)";
        else if (!ti->data && !ti->raw && numel > 0)
            bad = "has neither data nor raw";
        else if (__builtin_mul_overflow(numel, size, &nbytes))
            bad = "is too large";
        else if (json_object_get(root, ti->name))
            bad = "appears twice";
        if (bad) {
            json_decref(root);
            fail(err, errlen, "cannot write '%s': tensor %d ('%s') %s", path, i, ti->name ? ti->name : "(null)", bad);
            return NULL;
        }
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        KDA_CHECK(e && shape && offs, "out of memory building a safetensors header");
        for (int k = 0; k < ti->ndim; k++) json_array_append_new(shape, json_integer(ti->shape[k]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += nbytes;
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_object_set_new(e, "dtype", json_string(kda_st_dtype_name(ti->dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        if (json_object_set_new(root, ti->name, e) != 0) {
            json_decref(root);
            fail(err, errlen, "cannot write '%s': tensor %d's name is not valid UTF-8", path, i);
            return NULL;
        }
    }
    char *js = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    KDA_CHECK(js, "out of memory serialising a safetensors header");
    size_t len = strlen(js), padded = (len + 7) / 8 * 8;
    char *h = kda_malloc(padded);
    memcpy(h, js, len);
    memset(h + len, ' ', padded - len);
    free(js);
    *hlen = padded;
    return h;
}

enum { BLOCK = 16384 }; // elements converted at a time

// Write one tensor's bytes, converting fp32 data in blocks through buf (BLOCK * 4 bytes).
static int write_tensor(FILE *fp, const kda_st_tensor *t, unsigned char *buf, const char *tmp, char *err,
                        size_t errlen) {
    size_t numel = 0;
    tensor_numel(t, &numel);
    size_t size = kda_st_dtype_size(t->dtype);
    if (t->raw || numel == 0)
        return numel == 0 || fwrite(t->raw, size, numel, fp) == numel
            ? 0
            : fail(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
    for (size_t i0 = 0; i0 < numel; i0 += BLOCK) {
        size_t m = numel - i0 < BLOCK ? numel - i0 : BLOCK;
        const float *x = t->data + i0;
        if (t->dtype == KDA_ST_F32) {
            memcpy(buf, x, m * 4);
        } else if (t->dtype == KDA_ST_BF16) {
            for (size_t j = 0; j < m; j++) {
                uint16_t h = kda_f32_to_bf16(x[j]);
                memcpy(buf + 2 * j, &h, 2);
            }
        } else { // I32: only exact integers in range
            for (size_t j = 0; j < m; j++) {
                if (!(x[j] == floorf(x[j]) && x[j] >= -2147483648.0f && x[j] < 2147483648.0f))
                    return fail(err, errlen, "cannot write '%s': tensor '%s' as I32: element %zu is %g, not an int32",
                                tmp, t->name, i0 + j, (double)x[j]);
                int32_t v = (int32_t)x[j];
                memcpy(buf + 4 * j, &v, 4);
            }
        }
        if (fwrite(buf, size, m, fp) != m) return fail(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
    }
    return 0;
}

static int fsync_parent_dir(const char *path, char *err, size_t errlen) {
    char *dir = kda_strdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        slash[1] = 0;
    else
        *slash = 0;
    int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        rc = fail(err, errlen, "cannot open directory '%s' to sync it: %s", dir, strerror(errno));
    else {
        if (fsync(fd) != 0 && errno != EINVAL) // EINVAL: the file system cannot sync directories
            rc = fail(err, errlen, "cannot sync directory '%s': %s", dir, strerror(errno));
        close(fd);
    }
    free(dir);
    return rc;
}

int kda_st_write_err(const char *path, const kda_st_tensor *t, int n, char *err, size_t errlen) {
    if (!path || n < 0 || (n > 0 && !t)) return fail(err, errlen, "kda_st_write: bad arguments");
    size_t hlen;
    char *header = build_header(path, t, n, &hlen, err, errlen);
    if (!header) return -1;

    size_t tl = strlen(path) + 32;
    char *tmp = kda_malloc(tl);
    snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());
    kda_on_die(remove_file_hook, tmp);
    int rc = 0;
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        rc = fail(err, errlen, "cannot create '%s': %s (does the directory exist and is it writable?)", tmp,
                  strerror(errno));
        goto out;
    }
    uint64_t n8 = hlen;
    if (fwrite(&n8, 8, 1, fp) != 1 || fwrite(header, 1, hlen, fp) != hlen) {
        rc = fail(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char *buf = kda_malloc(BLOCK * 4);
    for (int i = 0; i < n && rc == 0; i++) rc = write_tensor(fp, &t[i], buf, tmp, err, errlen);
    free(buf);
    if (rc) goto out;
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        rc = fail(err, errlen, "cannot write '%s': %s (disk full?)", tmp, strerror(errno));
        goto out;
    }
    int c = fclose(fp);
    fp = NULL;
    if (c != 0) {
        rc = fail(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, path) != 0) {
        rc = fail(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        goto out;
    }
    rc = fsync_parent_dir(path, err, errlen);
out:
    if (fp) fclose(fp);
    if (rc) unlink(tmp);
    kda_on_die_remove(remove_file_hook, tmp);
    free(tmp);
    free(header);
    return rc;
}

void kda_st_write(const char *path, const kda_st_tensor *t, int n) {
    char err[1024];
    if (kda_st_write_err(path, t, n, err, sizeof err) != 0) kda_die("%s", err);
}

// ---- reader -------------------------------------------------------------------------------

// Byte offset of the first invalid UTF-8 sequence in s[0..n), or -1 if valid.
static long utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0)
            len = 2, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0)
            len = 3, cp = c & 0x0f, min = 0x800;
        else if ((c & 0xf8) == 0xf0)
            len = 4, cp = c & 0x07, min = 0x10000;
        else
            return (long)i;
        if (len > n - i) return (long)i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return (long)i;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (long)i;
        i += len;
    }
    return -1;
}

static int parse_dtype(const char *s, kda_st_dtype *dt) {
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(s, dtypes[i].name)) {
            *dt = (kda_st_dtype)i;
            return 0;
        }
    return -1;
}

typedef struct {
    uint64_t begin, end;
    int idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->idx - y->idx;
}

// Parse and check one tensor entry; data_size is the size of the data section.
static int parse_entry(const char *key, json_t *v, size_t data_size, kda_st_entry *e, span *sp, char *err,
                       size_t errlen) {
    if (!json_is_object(v)) return fail(err, errlen, "tensor '%s': entry is not a JSON object", key);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!jd) return fail(err, errlen, "tensor '%s' has no \"dtype\"", key);
    if (!js) return fail(err, errlen, "tensor '%s' has no \"shape\"", key);
    if (!jo) return fail(err, errlen, "tensor '%s' has no \"data_offsets\"", key);
    if (!json_is_string(jd)) return fail(err, errlen, "tensor '%s': \"dtype\" is not a string", key);
    if (parse_dtype(json_string_value(jd), &e->dtype) != 0)
        return fail(err, errlen,
                    "tensor '%s' has unknown or unsupported dtype '%s' (supported: F32, BF16, F16, F64, I32, I64)", key,
                    json_string_value(jd));
    if (!json_is_array(js)) return fail(err, errlen, "tensor '%s': \"shape\" is not an array", key);
    size_t nd = json_array_size(js);
    if (nd > KDA_ST_MAX_DIMS)
        return fail(err, errlen, "tensor '%s' has %zu dimensions (at most %d supported)", key, nd, KDA_ST_MAX_DIMS);
    e->ndim = (int)nd;
    size_t numel = 1;
    for (size_t k = 0; k < nd; k++) {
        json_t *d = json_array_get(js, k);
        if (!json_is_integer(d)) return fail(err, errlen, "tensor '%s': shape[%zu] is not an integer", key, k);
        json_int_t x = json_integer_value(d);
        if (x < 0) return fail(err, errlen, "tensor '%s': shape[%zu] is negative (%lld)", key, k, (long long)x);
        if ((uint64_t)x > SIZE_MAX || __builtin_mul_overflow(numel, (size_t)x, &numel))
            return fail(err, errlen, "tensor '%s': the shape's element count overflows", key);
        e->shape[k] = x;
    }
    size_t nbytes;
    if (__builtin_mul_overflow(numel, kda_st_dtype_size(e->dtype), &nbytes))
        return fail(err, errlen, "tensor '%s': the byte count overflows", key);
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return fail(err, errlen, "tensor '%s': \"data_offsets\" is not an array of two integers", key);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), en = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || en < b)
        return fail(err, errlen, "tensor '%s': data_offsets [%lld, %lld] are negative or decreasing", key, (long long)b,
                    (long long)en);
    if ((uint64_t)en > data_size)
        return fail(err, errlen,
                    "tensor '%s': data_offsets [%lld, %lld] run past the end of the data section (%zu bytes)", key,
                    (long long)b, (long long)en, data_size);
    if ((uint64_t)(en - b) != nbytes)
        return fail(err, errlen, "tensor '%s': data_offsets give %lld bytes, but shape x %s needs %zu", key,
                    (long long)(en - b), dtypes[e->dtype].name, nbytes);
    e->numel = numel;
    e->nbytes = nbytes;
    sp->begin = (uint64_t)b;
    sp->end = (uint64_t)en;
    return 0;
}

// Check the header of a mapped file and fill f; messages without the file name prefix.
static int parse_file(kda_st_file *f, char *err, size_t errlen) {
    const unsigned char *base = f->map;
    size_t size = f->map_size;
    if (size < 8) return fail(err, errlen, "the file has %zu bytes, fewer than the 8-byte header length", size);
    uint64_t hlen;
    memcpy(&hlen, base, 8);
    if (hlen > KDA_ST_MAX_HEADER)
        return fail(err, errlen, "header length %llu is over the %u-byte limit (corrupt, or not a safetensors file)",
                    (unsigned long long)hlen, KDA_ST_MAX_HEADER);
    if (hlen > size - 8)
        return fail(err, errlen, "header length %llu runs past the end of the file (%zu bytes)",
                    (unsigned long long)hlen, size);
    const char *hdr = (const char *)base + 8;
    long bad = utf8_invalid_at((const unsigned char *)hdr, hlen);
    if (bad >= 0) return fail(err, errlen, "header is not valid UTF-8 (at header byte %ld)", bad);
    json_error_t jerr;
    json_t *root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fail(err, errlen, "header is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                    jerr.column);
    int rc = 0;
    span *sp = NULL;
    if (!json_is_object(root)) {
        rc = fail(err, errlen, "header is not a JSON object");
        goto out;
    }
    size_t data_size = size - 8 - hlen;
    size_t n = json_object_size(root);
    f->entries = kda_calloc(n, sizeof *f->entries);
    sp = kda_calloc(n, sizeof *sp);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (json_is_null(v)) continue;
            if (!json_is_object(v)) {
                rc = fail(err, errlen, "\"__metadata__\" is not a JSON object");
                goto out;
            }
            size_t m = json_object_size(v);
            f->meta_keys = kda_calloc(m, sizeof(char *));
            f->meta_vals = kda_calloc(m, sizeof(char *));
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = fail(err, errlen, "\"__metadata__\" value of '%s' is not a string", mk);
                    goto out;
                }
                f->meta_keys[f->n_meta] = kda_strdup(mk);
                f->meta_vals[f->n_meta++] = kda_strdup(json_string_value(mv));
            }
            continue;
        }
        kda_st_entry *e = &f->entries[f->n];
        if ((rc = parse_entry(key, v, data_size, e, &sp[f->n], err, errlen)) != 0) goto out;
        e->name = kda_strdup(key);
        sp[f->n].idx = f->n;
        f->n++;
    }
    // The tensors must tile the data section exactly: sorted by offset, each starts where the
    // previous one ends, from 0 to the end of the file.
    qsort(sp, (size_t)f->n, sizeof *sp, cmp_span);
    uint64_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        if (sp[i].begin < pos) {
            rc = fail(err, errlen, "tensors '%s' and '%s' overlap in the data section", f->entries[sp[i - 1].idx].name,
                      f->entries[sp[i].idx].name);
            goto out;
        }
        if (sp[i].begin > pos) {
            rc = fail(err, errlen, "%llu unused bytes before tensor '%s' (offsets must be contiguous)",
                      (unsigned long long)(sp[i].begin - pos), f->entries[sp[i].idx].name);
            goto out;
        }
        pos = sp[i].end;
        f->entries[sp[i].idx].data = base + 8 + hlen + sp[i].begin;
    }
    if (pos != data_size)
        rc = fail(err, errlen, "the data section has %zu bytes, but the tensors cover only %llu", data_size,
                  (unsigned long long)pos);
out:
    free(sp);
    json_decref(root);
    return rc;
}

kda_st_file *kda_st_open_err(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errlen, "cannot open safetensors file '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(err, errlen, "safetensors file '%s' is not a regular file", path);
        close(fd);
        return NULL;
    }
    kda_st_file *f = kda_calloc(1, sizeof *f);
    f->path = kda_strdup(path);
    f->map_size = (size_t)st.st_size;
    if (f->map_size > 0) {
        f->map = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            fail(err, errlen, "cannot map safetensors file '%s': %s", path, strerror(errno));
            close(fd);
            kda_st_close(f);
            return NULL;
        }
    }
    close(fd);
    char msg[768];
    if (parse_file(f, msg, sizeof msg) != 0) {
        fail(err, errlen, "'%s' is not a valid safetensors file: %s", path, msg);
        kda_st_close(f);
        return NULL;
    }
    return f;
}

kda_st_file *kda_st_open(const char *path) {
    char err[1024];
    kda_st_file *f = kda_st_open_err(path, err, sizeof err);
    if (!f) kda_die("%s", err);
    return f;
}

void kda_st_close(kda_st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->entries);
    free(f->path);
    free(f);
}

const kda_st_entry *kda_st_find(const kda_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->entries[i].name, name)) return &f->entries[i];
    return NULL;
}

const kda_st_entry *kda_st_require(const kda_st_file *f, const char *name) {
    const kda_st_entry *e = kda_st_find(f, name);
    if (!e) kda_die("safetensors file '%s' has no tensor '%s'", f->path, name);
    return e;
}

const char *kda_st_meta(const kda_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_vals[i];
    return NULL;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float mag;
    if (exp == 0)
        mag = ldexpf((float)man, -24); // zero or subnormal
    else if (exp == 31)
        mag = man ? NAN : INFINITY;
    else
        mag = ldexpf((float)(man | 0x400), (int)exp - 25);
    union {
        float f;
        uint32_t u;
    } x = {mag};
    x.u |= sign;
    return x.f;
}

void kda_st_to_f32(const kda_st_file *f, const kda_st_entry *e, float *out) {
    (void)f;
    const unsigned char *p = e->data;
    if (e->dtype == KDA_ST_F32) {
        if (e->nbytes) memcpy(out, p, e->nbytes);
        return;
    }
    for (size_t i = 0; i < e->numel; i++) {
        switch (e->dtype) {
        case KDA_ST_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case KDA_ST_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = kda_bf16_to_f32(h);
            break;
        }
        case KDA_ST_F16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = f16_to_f32(h);
            break;
        }
        case KDA_ST_F64: {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
            break;
        }
        case KDA_ST_I32: {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = (float)v;
            break;
        }
        case KDA_ST_I64: {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (float)v;
            break;
        }
        }
    }
}
