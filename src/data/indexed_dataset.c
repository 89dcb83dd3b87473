// indexed_dataset.c — see indexed_dataset.h.
#include "data/indexed_dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

static const char IDX_MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define IDX_HEADER_BYTES 34 // magic 9 + version 8 + dtype 1 + S 8 + D 8

int kda_indexed_dtype_for_vocab(int64_t vocab_size) { return vocab_size < 65500 ? KDA_IDX_UINT16 : KDA_IDX_INT32; }

const char *kda_indexed_dtype_name(int code) {
    static const char *names[] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? names[code] : "unknown";
}

int kda_indexed_dtype_size(int code) {
    static const int sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
    return code >= 1 && code <= 8 ? sizes[code] : 0;
}

static int dtype_is_integer(int code) {
    return code >= 1 && code <= 8 && code != KDA_IDX_FLOAT32 && code != KDA_IDX_FLOAT64;
}

// Little-endian loads from unaligned memory (the .idx arrays start at byte 34).
static uint64_t load_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

struct kda_indexed {
    char *prefix, *idx_path, *bin_path;
    int dtype, elem;
    uint64_t n_seq, n_doc_entries, n_tokens;
    int32_t *seq_len; // [n_seq]
    int64_t *seq_ptr; // [n_seq]
    int64_t *doc_idx; // [n_doc_entries]
    const unsigned char *bin;
    size_t bin_bytes;
    int64_t vocab; // 0 = ids not checked
};

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = kda_malloc(na + nb + 1);
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

// Map a whole file read-only; *bytes gets its size. An empty file maps to NULL.
static const unsigned char *map_file(const char *path, size_t *bytes, const char *what) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        kda_die("cannot open %s '%s': %s (a Megatron dataset prefix names <prefix>.bin and <prefix>.idx; "
                "make them with 'kda tokenize')",
                what, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) kda_die("cannot stat '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) kda_die("'%s' is not a regular file", path);
    *bytes = (size_t)st.st_size;
    const unsigned char *p = NULL;
    if (*bytes > 0) {
        void *m = mmap(NULL, *bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) kda_die("cannot map '%s' (%zu bytes): %s", path, *bytes, strerror(errno));
        p = m;
    }
    close(fd);
    return p;
}

kda_indexed *kda_indexed_open(const char *prefix) {
    kda_indexed *d = kda_calloc(1, sizeof *d);
    d->prefix = kda_strdup(prefix);
    d->idx_path = concat(prefix, ".idx");
    d->bin_path = concat(prefix, ".bin");
    const char *ip = d->idx_path, *bp = d->bin_path;

    size_t idx_bytes = 0;
    const unsigned char *idx = map_file(ip, &idx_bytes, "index file");
    if (idx_bytes < IDX_HEADER_BYTES)
        kda_die(
            "'%s' is truncated: %zu bytes, shorter than the %d-byte MMIDIDX header; re-create it with 'kda tokenize'",
            ip, idx_bytes, IDX_HEADER_BYTES);
    if (memcmp(idx, IDX_MAGIC, sizeof IDX_MAGIC) != 0)
        kda_die("'%s' is not a Megatron MMIDIDX index (bad magic bytes); expected a .idx written by megatron-core "
                "or 'kda tokenize'",
                ip);
    uint64_t version = load_u64(idx + 9);
    if (version != 1)
        kda_die("'%s' has MMIDIDX version %" PRIu64 "; only version 1 (megatron-core) is supported", ip, version);
    d->dtype = idx[17];
    if (!dtype_is_integer(d->dtype))
        kda_die("'%s' declares token dtype code %d (%s); token ids must be an integer type (uint16 or int32 as "
                "Megatron writes them)",
                ip, d->dtype, kda_indexed_dtype_name(d->dtype));
    d->elem = kda_indexed_dtype_size(d->dtype);
    d->n_seq = load_u64(idx + 18);
    d->n_doc_entries = load_u64(idx + 26);
    uint64_t room = (uint64_t)idx_bytes - IDX_HEADER_BYTES;
    // 12 bytes per sequence (length + pointer) and 8 per document entry, checked without overflow
    // 12 bytes per sequence (length + pointer) and 8 per document entry, checked without overflow
    if (d->n_seq > room / 12 || d->n_doc_entries > (room - d->n_seq * 12) / 8 ||
        room != d->n_seq * 12 + d->n_doc_entries * 8) {
        char want[64] = "more than the file holds";
        if (d->n_seq <= UINT64_MAX / 40 && d->n_doc_entries <= UINT64_MAX / 16)
            snprintf(want, sizeof want, "%" PRIu64 " bytes", IDX_HEADER_BYTES + d->n_seq * 12 + d->n_doc_entries * 8);
        kda_die("'%s' is truncated or corrupt: %zu bytes, but its header announces %" PRIu64 " sequences and %" PRIu64
                " document entries (%s); re-create it with 'kda tokenize'",
                ip, idx_bytes, d->n_seq, d->n_doc_entries, want);
    }
    if (d->n_doc_entries < 1)
        kda_die("'%s' is corrupt: the document index is empty (it must hold at least the leading 0)", ip);

    const unsigned char *p_len = idx + IDX_HEADER_BYTES;
    const unsigned char *p_ptr = p_len + 4 * d->n_seq;
    const unsigned char *p_doc = p_ptr + 8 * d->n_seq;
    d->seq_len = kda_malloc(4 * d->n_seq);
    d->seq_ptr = kda_malloc(8 * d->n_seq);
    d->doc_idx = kda_malloc(8 * d->n_doc_entries);
    memcpy(d->seq_len, p_len, 4 * d->n_seq);
    memcpy(d->seq_ptr, p_ptr, 8 * d->n_seq);
    memcpy(d->doc_idx, p_doc, 8 * d->n_doc_entries);
    munmap((void *)idx, idx_bytes);

    if (d->doc_idx[0] != 0) kda_die("'%s' is corrupt: document index entry 0 is %" PRId64 ", not 0", ip, d->doc_idx[0]);
    for (uint64_t i = 1; i < d->n_doc_entries; i++)
        if (d->doc_idx[i] < d->doc_idx[i - 1])
            kda_die("'%s' is corrupt: document index entry %" PRIu64 " (%" PRId64 ") is below entry %" PRIu64
                    " (%" PRId64 ")",
                    ip, i, d->doc_idx[i], i - 1, d->doc_idx[i - 1]);
    if ((uint64_t)d->doc_idx[d->n_doc_entries - 1] != d->n_seq)
        kda_die("'%s' is corrupt: the document index ends at sequence %" PRId64 " but there are %" PRIu64 " sequences",
                ip, d->doc_idx[d->n_doc_entries - 1], d->n_seq);

    d->bin = map_file(bp, &d->bin_bytes, "token file");
    uint64_t total = 0;
    for (uint64_t i = 0; i < d->n_seq; i++) {
        if (d->seq_len[i] < 0) kda_die("'%s' is corrupt: sequence %" PRIu64 " has length %d", ip, i, d->seq_len[i]);
        total += (uint64_t)d->seq_len[i];
    }
    d->n_tokens = total;
    if (total * (uint64_t)d->elem != d->bin_bytes)
        kda_die("'%s' has %zu bytes but '%s' describes %" PRIu64 " %s ids (%" PRIu64
                " bytes): a truncated file, or .bin and .idx written with different dtypes; re-create them with "
                "'kda tokenize'",
                bp, d->bin_bytes, ip, total, kda_indexed_dtype_name(d->dtype), total * (uint64_t)d->elem);
    for (uint64_t i = 0; i < d->n_seq; i++) {
        int64_t len = d->seq_len[i], ptr = d->seq_ptr[i];
        if (ptr < 0 || ptr % d->elem != 0 || (uint64_t)ptr > d->bin_bytes ||
            (uint64_t)len > (d->bin_bytes - (uint64_t)ptr) / (uint64_t)d->elem)
            kda_die("'%s': sequence %" PRIu64 " (%" PRId64 " %s ids at byte %" PRId64
                    ") lies outside '%s' (%zu bytes); "
                    "the .idx is corrupt or does not belong to this .bin",
                    ip, i, len, kda_indexed_dtype_name(d->dtype), ptr, bp, d->bin_bytes);
    }
    return d;
}

void kda_indexed_close(kda_indexed *d) {
    if (!d) return;
    if (d->bin) munmap((void *)d->bin, d->bin_bytes);
    free(d->seq_len);
    free(d->seq_ptr);
    free(d->doc_idx);
    free(d->prefix);
    free(d->idx_path);
    free(d->bin_path);
    free(d);
}

const char *kda_indexed_prefix(const kda_indexed *d) { return d->prefix; }
int kda_indexed_dtype(const kda_indexed *d) { return d->dtype; }
uint64_t kda_indexed_num_sequences(const kda_indexed *d) { return d->n_seq; }
uint64_t kda_indexed_num_documents(const kda_indexed *d) { return d->n_doc_entries - 1; }
uint64_t kda_indexed_num_tokens(const kda_indexed *d) { return d->n_tokens; }
const int32_t *kda_indexed_seq_lengths(const kda_indexed *d) { return d->seq_len; }
const int64_t *kda_indexed_doc_index(const kda_indexed *d) { return d->doc_idx; }
void kda_indexed_set_vocab(kda_indexed *d, int64_t vocab_size) { d->vocab = vocab_size; }

// The document that holds sequence seq: the last d with doc_idx[d] <= seq < doc_idx[d+1].
static uint64_t doc_of_seq(const kda_indexed *d, uint64_t seq) {
    uint64_t lo = 0, hi = d->n_doc_entries - 1; // answer in [lo, hi)
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)d->doc_idx[mid] <= seq)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

KDA_NORETURN static void bad_id(const kda_indexed *d, uint64_t seq, uint64_t pos, int64_t id, int64_t vocab) {
    kda_die("'%s': token id %" PRId64 " at position %" PRIu64 " of document %" PRIu64 " (sequence %" PRIu64
            ") is outside the vocabulary [0, %" PRId64 "); the file was made with another tokenizer, or vocab_size "
            "is too small",
            d->bin_path, id, pos, doc_of_seq(d, seq), seq, vocab);
}

static int64_t id_at(const kda_indexed *d, const unsigned char *p) {
    switch (d->dtype) {
    case KDA_IDX_UINT8: return *p;
    case KDA_IDX_INT8: return (int8_t)*p;
    case KDA_IDX_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case KDA_IDX_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case KDA_IDX_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

void kda_indexed_read(const kda_indexed *d, uint64_t seq, uint64_t offset, uint64_t len, int32_t *out) {
    KDA_CHECK(seq < d->n_seq && offset <= (uint64_t)d->seq_len[seq] && len <= (uint64_t)d->seq_len[seq] - offset,
              "read of sequence %" PRIu64 " [%" PRIu64 ", +%" PRIu64 ") outside '%s'", seq, offset, len, d->bin_path);
    const unsigned char *p = d->bin + d->seq_ptr[seq] + offset * (uint64_t)d->elem;
    int64_t vocab = d->vocab > 0 ? d->vocab : (int64_t)INT32_MAX + 1;
    if (d->dtype == KDA_IDX_UINT16) { // the common case, kept tight
        for (uint64_t i = 0; i < len; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            if (v >= vocab) bad_id(d, seq, offset + i, v, vocab);
            out[i] = v;
        }
        return;
    }
    for (uint64_t i = 0; i < len; i++) {
        int64_t v = id_at(d, p + i * (uint64_t)d->elem);
        if (v < 0 || v >= vocab) bad_id(d, seq, offset + i, v, vocab);
        out[i] = (int32_t)v;
    }
}

void kda_indexed_check_ids(const kda_indexed *d, int64_t vocab_size) {
    if (d->dtype == KDA_IDX_UINT16 && vocab_size > 65535) return; // nothing can be out of range
    for (uint64_t s = 0; s < d->n_seq; s++) {
        const unsigned char *p = d->bin + d->seq_ptr[s];
        for (int64_t i = 0; i < d->seq_len[s]; i++) {
            int64_t v = id_at(d, p + (uint64_t)i * (uint64_t)d->elem);
            if (v < 0 || v >= vocab_size) bad_id(d, s, (uint64_t)i, v, vocab_size);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// writer

struct kda_indexed_writer {
    char *prefix, *bin_tmp, *idx_tmp;
    FILE *bin;
    int dtype, elem;
    int64_t id_min, id_max;
    int32_t *seq_len;
    size_t n_seq, cap_seq;
    int64_t *doc_idx;
    size_t n_doc, cap_doc;
    uint64_t n_tokens;
    unsigned char *buf;
    size_t buf_cap;
};

static void writer_cleanup(void *arg) {
    kda_indexed_writer *w = arg;
    if (w->bin) fclose(w->bin);
    w->bin = NULL;
    unlink(w->bin_tmp);
    unlink(w->idx_tmp);
}

kda_indexed_writer *kda_indexed_writer_open(const char *prefix, int dtype) {
    KDA_CHECK(dtype_is_integer(dtype), "token dtype code %d is not an integer type", dtype);
    kda_indexed_writer *w = kda_calloc(1, sizeof *w);
    w->prefix = kda_strdup(prefix);
    char suffix[64];
    snprintf(suffix, sizeof suffix, ".bin.tmp.%ld", (long)getpid());
    w->bin_tmp = concat(prefix, suffix);
    snprintf(suffix, sizeof suffix, ".idx.tmp.%ld", (long)getpid());
    w->idx_tmp = concat(prefix, suffix);
    w->dtype = dtype;
    w->elem = kda_indexed_dtype_size(dtype);
    switch (dtype) {
    case KDA_IDX_UINT8:
        w->id_min = 0;
        w->id_max = UINT8_MAX;
        break;
    case KDA_IDX_INT8:
        w->id_min = INT8_MIN;
        w->id_max = INT8_MAX;
        break;
    case KDA_IDX_UINT16:
        w->id_min = 0;
        w->id_max = UINT16_MAX;
        break;
    case KDA_IDX_INT16:
        w->id_min = INT16_MIN;
        w->id_max = INT16_MAX;
        break;
    default:
        w->id_min = INT32_MIN;
        w->id_max = INT32_MAX;
        break;
    }
    w->bin = fopen(w->bin_tmp, "wb");
    if (!w->bin)
        kda_die("cannot create '%s': %s (is the output folder there and writable?)", w->bin_tmp, strerror(errno));
    kda_on_die(writer_cleanup, w);
    w->cap_doc = 1024;
    w->doc_idx = kda_malloc(sizeof(int64_t) * w->cap_doc);
    w->doc_idx[w->n_doc++] = 0;
    return w;
}

void kda_indexed_writer_add_doc(kda_indexed_writer *w, const int32_t *ids, size_t n) {
    if (n > 0) {
        KDA_CHECK(n <= INT32_MAX, "document of %zu tokens is longer than a Megatron sequence can be (2^31-1)", n);
        if (w->buf_cap < n * (size_t)w->elem) {
            w->buf_cap = n * (size_t)w->elem * 2;
            w->buf = kda_realloc(w->buf, w->buf_cap);
        }
        for (size_t i = 0; i < n; i++) {
            int64_t v = ids[i];
            if (v < w->id_min || v > w->id_max)
                kda_die("token id %" PRId64
                        " of document %zu does not fit the %s dtype of '%s'; use a dtype for a larger "
                        "vocabulary",
                        v, w->n_doc - 1, kda_indexed_dtype_name(w->dtype), w->bin_tmp);
            switch (w->elem) { // little-endian host (x86-64, aarch64)
            case 1: {
                int8_t x = (int8_t)v;
                memcpy(w->buf + i, &x, 1);
                break;
            }
            case 2: {
                uint16_t x = (uint16_t)v;
                memcpy(w->buf + 2 * i, &x, 2);
                break;
            }
            case 4: {
                int32_t x = (int32_t)v;
                memcpy(w->buf + 4 * i, &x, 4);
                break;
            }
            default: memcpy(w->buf + 8 * i, &v, 8); break;
            }
        }
        if (fwrite(w->buf, (size_t)w->elem, n, w->bin) != n)
            kda_die("cannot write '%s': %s (disk full?)", w->bin_tmp, strerror(errno));
        if (w->n_seq == w->cap_seq) {
            w->cap_seq = w->cap_seq ? 2 * w->cap_seq : 1024;
            w->seq_len = kda_realloc(w->seq_len, sizeof(int32_t) * w->cap_seq);
        }
        w->seq_len[w->n_seq++] = (int32_t)n;
        w->n_tokens += n;
    }
    if (w->n_doc == w->cap_doc) {
        w->cap_doc *= 2;
        w->doc_idx = kda_realloc(w->doc_idx, sizeof(int64_t) * w->cap_doc);
    }
    w->doc_idx[w->n_doc++] = (int64_t)w->n_seq;
}

uint64_t kda_indexed_writer_tokens(const kda_indexed_writer *w) { return w->n_tokens; }
const char *kda_indexed_writer_tmp_path(const kda_indexed_writer *w, int idx) { return idx ? w->idx_tmp : w->bin_tmp; }
uint64_t kda_indexed_writer_docs(const kda_indexed_writer *w) { return w->n_doc - 1; }

static void writer_free(kda_indexed_writer *w) {
    kda_on_die_remove(writer_cleanup, w);
    free(w->prefix);
    free(w->bin_tmp);
    free(w->idx_tmp);
    free(w->seq_len);
    free(w->doc_idx);
    free(w->buf);
    free(w);
}

static void write_all(FILE *f, const void *p, size_t bytes, const char *path) {
    if (bytes && fwrite(p, 1, bytes, f) != bytes) kda_die("cannot write '%s': %s (disk full?)", path, strerror(errno));
}

static void flush_sync_close(FILE *f, const char *path) {
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) kda_die("cannot write '%s': %s (disk full?)", path, strerror(errno));
    if (fclose(f) != 0) kda_die("cannot close '%s': %s", path, strerror(errno));
}

static void sync_parent_dir(const char *path) {
    char *dir = kda_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    else
        strcpy(dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); // best effort: some file systems refuse fsync on directories
        close(fd);
    }
    free(dir);
}

void kda_indexed_writer_finish(kda_indexed_writer *w) {
    FILE *bin = w->bin;
    w->bin = NULL;
    flush_sync_close(bin, w->bin_tmp);

    FILE *f = fopen(w->idx_tmp, "wb");
    if (!f) kda_die("cannot create '%s': %s", w->idx_tmp, strerror(errno));
    unsigned char head[IDX_HEADER_BYTES];
    uint64_t version = 1, S = w->n_seq, D = w->n_doc;
    memcpy(head, IDX_MAGIC, 9);
    memcpy(head + 9, &version, 8);
    head[17] = (unsigned char)w->dtype;
    memcpy(head + 18, &S, 8);
    memcpy(head + 26, &D, 8);
    write_all(f, head, sizeof head, w->idx_tmp);
    write_all(f, w->seq_len, 4 * w->n_seq, w->idx_tmp);
    int64_t ptr_buf[1024];
    int64_t ptr = 0;
    for (size_t i = 0; i < w->n_seq;) {
        size_t k = 0;
        for (; k < 1024 && i < w->n_seq; k++, i++) {
            ptr_buf[k] = ptr;
            ptr += (int64_t)w->seq_len[i] * w->elem;
        }
        write_all(f, ptr_buf, 8 * k, w->idx_tmp);
    }
    write_all(f, w->doc_idx, 8 * w->n_doc, w->idx_tmp);
    flush_sync_close(f, w->idx_tmp);

    char *bin_path = concat(w->prefix, ".bin"), *idx_path = concat(w->prefix, ".idx");
    if (rename(w->bin_tmp, bin_path) != 0)
        kda_die("cannot rename '%s' to '%s': %s", w->bin_tmp, bin_path, strerror(errno));
    if (rename(w->idx_tmp, idx_path) != 0)
        kda_die("cannot rename '%s' to '%s': %s", w->idx_tmp, idx_path, strerror(errno));
    sync_parent_dir(idx_path);
    free(bin_path);
    free(idx_path);
    writer_free(w);
}

void kda_indexed_writer_abort(kda_indexed_writer *w) {
    writer_cleanup(w);
    writer_free(w);
}
