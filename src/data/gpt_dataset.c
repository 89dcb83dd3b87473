// gpt_dataset.c — see gpt_dataset.h. Each step follows megatron-core 0.16
// (datasets/gpt_dataset.py, helpers.cpp, blended_dataset.py, blended_megatron_dataset_builder.py),
// including its floating-point order where that decides a rounding.
#include "data/gpt_dataset.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/mt19937.h"

struct kda_gpt_dataset {
    const kda_indexed *ds;
    int seq_length;
    int epochs;
    int32_t *doc_index; // [n_doc]: sequence ids
    uint64_t n_doc;
    int64_t *sample_index; // [2 * (n_samples + 1)]: (position in doc_index, token offset)
    int64_t *shuffle;      // [n_samples]
    uint64_t n_samples;
};

// numpy RandomState.shuffle of `documents` repeated `epochs` times (gpt_dataset.py
// _build_document_index with separate_final_epoch false).
static void shuffled_epochs(kda_mt19937 *rs, int32_t *out, uint64_t begin, uint64_t n_docs, int epochs) {
    for (int e = 0; e < epochs; e++)
        for (uint64_t i = 0; i < n_docs; i++) out[(uint64_t)e * n_docs + i] = (int32_t)(begin + i);
    kda_mt_shuffle(rs, out, (uint64_t)epochs * n_docs, sizeof(int32_t));
}

// helpers.cpp build_sample_idx (drop the last partial sample, one extra token per sample).
static void build_sample_index(kda_gpt_dataset *g, const int32_t *sizes, uint64_t n_samples) {
    int64_t *si = g->sample_index = kda_malloc(sizeof(int64_t) * 2 * (n_samples + 1));
    uint64_t k = 0, pos = 0;
    int64_t offset = 0;
    si[0] = 0;
    si[1] = 0;
    for (k = 1; k <= n_samples; k++) {
        int64_t remaining = (int64_t)g->seq_length + 1;
        while (remaining != 0) {
            int64_t doc_len = sizes[g->doc_index[pos]] - offset;
            remaining -= doc_len;
            if (remaining <= 0) {
                offset += remaining + doc_len - 1;
                remaining = 0;
            } else {
                if (pos == g->n_doc - 1) { // the stream ends exactly here
                    KDA_CHECK(k == n_samples, "sample index ran out of documents at sample %" PRIu64, k);
                    offset = sizes[g->doc_index[pos]] - 1;
                    break;
                }
                pos++;
                offset = 0;
            }
        }
        si[2 * k] = (int64_t)pos;
        si[2 * k + 1] = offset;
    }
}

static void identity_shuffled(kda_mt19937 *rs, int64_t *out, uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; i++) out[i - from] = (int64_t)i;
    kda_mt_shuffle(rs, out, to - from, sizeof(int64_t));
}

kda_gpt_dataset *kda_gpt_dataset_new(const kda_indexed *ds, uint64_t begin, uint64_t end, int64_t num_samples,
                                     int seq_length, uint32_t seed) {
    const char *name = kda_indexed_prefix(ds);
    KDA_CHECK(seq_length > 1, "seq_length %d: a GPT sample needs seq_length >= 2", seq_length);
    KDA_CHECK(begin <= end && end <= kda_indexed_num_sequences(ds), "sequence range [%" PRIu64 ", %" PRIu64 ") of '%s'",
              begin, end, name);
    KDA_CHECK(end <= (uint64_t)INT32_MAX, "'%s' has more than 2^31 sequences", name);
    const int32_t *sizes = kda_indexed_seq_lengths(ds);
    uint64_t n_docs = end - begin, tokens_per_epoch = 0;
    for (uint64_t i = begin; i < end; i++) tokens_per_epoch += (uint64_t)sizes[i];
    if (tokens_per_epoch < 2) // Megatron asserts the same (and loops forever on 0)
        kda_die("'%s': sequences %" PRIu64 "..%" PRIu64 " hold %" PRIu64
                " tokens, too few to cut samples from; use more "
                "data or a split that gives this part more",
                name, begin, end, tokens_per_epoch);

    kda_gpt_dataset *g = kda_calloc(1, sizeof *g);
    g->ds = ds;
    g->seq_length = seq_length;
    // _get_num_epochs
    int epochs = 1;
    if (num_samples >= 0) {
        uint64_t wanted = (uint64_t)num_samples * (uint64_t)seq_length + 1, have = tokens_per_epoch;
        while (have < wanted) {
            epochs++;
            have += tokens_per_epoch;
        }
    }
    g->epochs = epochs;
    int separate_final = 0;
    uint64_t sans_final = 0;
    if (epochs > 1) {
        sans_final = ((uint64_t)(epochs - 1) * tokens_per_epoch - 1) / (uint64_t)seq_length;
        uint64_t from_final = (uint64_t)num_samples - sans_final;
        uint64_t per_epoch = (tokens_per_epoch - 1) / (uint64_t)seq_length;
        separate_final = (double)from_final < (double)(int64_t)(0.80 * (double)per_epoch);
    }
    kda_mt19937 rs;
    kda_mt_seed(&rs, seed);
    g->n_doc = (uint64_t)epochs * n_docs;
    g->doc_index = kda_malloc(sizeof(int32_t) * (g->n_doc ? g->n_doc : 1));
    if (!separate_final) {
        shuffled_epochs(&rs, g->doc_index, begin, n_docs, epochs);
    } else {
        shuffled_epochs(&rs, g->doc_index, begin, n_docs, epochs - 1);
        shuffled_epochs(&rs, g->doc_index + (uint64_t)(epochs - 1) * n_docs, begin, n_docs, 1);
    }
    g->n_samples = ((uint64_t)epochs * tokens_per_epoch - 1) / (uint64_t)seq_length;
    build_sample_index(g, sizes, g->n_samples);
    g->shuffle = kda_malloc(sizeof(int64_t) * (g->n_samples ? g->n_samples : 1));
    if (separate_final) {
        identity_shuffled(&rs, g->shuffle, 0, sans_final);
        identity_shuffled(&rs, g->shuffle + sans_final, sans_final, g->n_samples);
    } else {
        identity_shuffled(&rs, g->shuffle, 0, g->n_samples);
    }
    return g;
}

void kda_gpt_dataset_free(kda_gpt_dataset *g) {
    if (!g) return;
    free(g->doc_index);
    free(g->sample_index);
    free(g->shuffle);
    free(g);
}

uint64_t kda_gpt_dataset_len(const kda_gpt_dataset *g) { return g->n_samples; }
int kda_gpt_dataset_epochs(const kda_gpt_dataset *g) { return g->epochs; }
const int32_t *kda_gpt_dataset_doc_index(const kda_gpt_dataset *g, uint64_t *n_doc) {
    *n_doc = g->n_doc;
    return g->doc_index;
}
const int64_t *kda_gpt_dataset_sample_index(const kda_gpt_dataset *g) { return g->sample_index; }
const int64_t *kda_gpt_dataset_shuffle_index(const kda_gpt_dataset *g) { return g->shuffle; }

void kda_gpt_dataset_get(const kda_gpt_dataset *g, uint64_t idx, int32_t *out) {
    KDA_CHECK(idx < g->n_samples, "sample %" PRIu64 " of %" PRIu64 " in '%s'", idx, g->n_samples,
              kda_indexed_prefix(g->ds));
    const int32_t *sizes = kda_indexed_seq_lengths(g->ds);
    uint64_t s = (uint64_t)g->shuffle[idx];
    int64_t p0 = g->sample_index[2 * s], o0 = g->sample_index[2 * s + 1];
    int64_t p1 = g->sample_index[2 * s + 2], o1 = g->sample_index[2 * s + 3];
    uint64_t n = 0, want = (uint64_t)g->seq_length + 1;
    for (int64_t p = p0; p <= p1; p++) {
        int32_t doc = g->doc_index[p];
        int64_t off = p == p0 ? o0 : 0;
        int64_t len = p < p1 ? sizes[doc] - off : o1 + 1 - off;
        KDA_CHECK(len >= 0 && n + (uint64_t)len <= want, "sample %" PRIu64 " of '%s' does not add up", idx,
                  kda_indexed_prefix(g->ds));
        kda_indexed_read(g->ds, (uint64_t)doc, (uint64_t)off, (uint64_t)len, out + n);
        n += (uint64_t)len;
    }
    KDA_CHECK(n == want, "sample %" PRIu64 " of '%s' has %" PRIu64 " tokens, not %" PRIu64, idx,
              kda_indexed_prefix(g->ds), n, want);
}

// ---------------------------------------------------------------------------------------------
// split string

// numpy.sum of a short float64 vector: identity 0 plus a left-to-right sum (pairwise summation
// only changes the order from 8 elements on).
static double np_sum(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

static void np_normalize(double *v, int n) {
    double s = np_sum(v, n);
    for (int i = 0; i < n; i++) v[i] = v[i] / s;
}

void kda_split_parse(const char *split, double fractions[3]) {
    double v[3] = {0, 0, 0};
    int n = 0;
    for (const char *p = split; *p;) {
        if (!(isdigit((unsigned char)*p) || *p == '.')) {
            p++;
            continue;
        }
        const char *q = p;
        while (isdigit((unsigned char)*q) || *q == '.') q++;
        char num[64];
        size_t len = (size_t)(q - p);
        char *endp = NULL;
        if (len >= sizeof num) kda_die("split '%s': number '%.*s' is too long", split, (int)len, p);
        memcpy(num, p, len);
        num[len] = 0;
        double x = strtod(num, &endp);
        if (*endp) kda_die("split '%s': '%s' is not a number (write it like \"969,30,1\")", split, num);
        if (n == 3) kda_die("split '%s' has more than three parts (train, valid, test)", split);
        v[n++] = x;
        p = q;
    }
    if (n == 0 || np_sum(v, 3) <= 0)
        kda_die("split '%s' gives no data to any split; write train,valid,test weights like \"969,30,1\"", split);
    np_normalize(v, 3);
    memcpy(fractions, v, sizeof v);
}

int kda_split_range(const double fractions[3], int which, uint64_t n, uint64_t *begin, uint64_t *end) {
    double lo = 0.0;
    for (int i = 0; i < which; i++) lo = lo + fractions[i];
    double hi = lo + fractions[which];
    if (hi <= lo) return 0;
    // Python's int(round(x)): halves to even, as nearbyint in the default rounding mode
    *begin = (uint64_t)nearbyint(lo * (double)n);
    *end = (uint64_t)nearbyint(hi * (double)n);
    return 1;
}

// ---------------------------------------------------------------------------------------------
// blends

struct kda_gpt_source {
    int n;
    kda_gpt_dataset **parts;
    int16_t *which;  // [size] dataset of each blend sample (NULL: one plain dataset)
    int64_t *sample; // [size] its sample number there
    uint64_t size;
};

// helpers.cpp build_blending_indices.
static void blending_indices(kda_gpt_source *s, const double *w) {
    int64_t *taken = kda_calloc((size_t)s->n, sizeof(int64_t));
    s->which = kda_malloc(sizeof(int16_t) * (s->size ? s->size : 1));
    s->sample = kda_malloc(sizeof(int64_t) * (s->size ? s->size : 1));
    for (uint64_t k = 0; k < s->size; k++) {
        double kd = k > 1 ? (double)k : 1.0;
        int best = 0;
        double best_err = w[0] * kd - (double)taken[0];
        for (int i = 1; i < s->n; i++) {
            double err = w[i] * kd - (double)taken[i];
            if (err > best_err) {
                best_err = err;
                best = i;
            }
        }
        s->which[k] = (int16_t)best;
        s->sample[k] = taken[best]++;
    }
    for (int i = 0; i < s->n; i++)
        if ((uint64_t)taken[i] > kda_gpt_dataset_len(s->parts[i]))
            kda_die("the blend asks %" PRId64 " samples of '%s', which has only %" PRIu64
                    "; raise its weight or add data",
                    taken[i], kda_indexed_prefix(s->parts[i]->ds), kda_gpt_dataset_len(s->parts[i]));
    free(taken);
}

static const char *split_names[3] = {"train", "valid", "test"};

static kda_gpt_dataset *part_for_split(const kda_indexed *ds, const double *fractions, int which, int64_t num_samples,
                                       int seq_length, uint32_t seed) {
    uint64_t n = kda_indexed_num_sequences(ds), b = 0, e = n;
    if (fractions && !kda_split_range(fractions, which, n, &b, &e))
        kda_die("the split string gives the %s split nothing of '%s'; give it a non-zero share (e.g. \"969,30,1\")",
                split_names[which], kda_indexed_prefix(ds));
    return kda_gpt_dataset_new(ds, b, e, num_samples, seq_length, seed);
}

kda_gpt_source *kda_gpt_source_new(kda_indexed *const *ds, const double *weights, int n, const double *fractions,
                                   int which, uint64_t size, int seq_length, uint32_t seed) {
    KDA_CHECK(n >= 1 && n < 32767 && which >= 0 && which < 3, "blend of %d datasets, split %d", n, which);
    kda_gpt_source *s = kda_calloc(1, sizeof *s);
    s->n = n;
    s->parts = kda_calloc((size_t)n, sizeof *s->parts);
    if (n == 1 && !weights) { // a plain GPT dataset
        s->parts[0] = part_for_split(ds[0], fractions, which, (int64_t)size, seq_length, seed);
        s->size = kda_gpt_dataset_len(s->parts[0]);
        return s;
    }
    double *w = kda_malloc(sizeof(double) * (size_t)n);
    if (weights) {
        for (int i = 0; i < n; i++) {
            if (!(weights[i] > 0) || !isfinite(weights[i]))
                kda_die("blend weight %g for '%s' must be a positive number", weights[i], kda_indexed_prefix(ds[i]));
            w[i] = weights[i];
        }
        np_normalize(w, n);
        uint64_t total = 0;
        for (int i = 0; i < n; i++) {
            double target = ceil((double)size * w[i]);
            int64_t buffer = (int64_t)ceil(target * (1.0 + 0.005)); // mid_level_dataset_surplus
            total += (uint64_t)target;
            s->parts[i] = part_for_split(ds[i], fractions, which, buffer, seq_length, seed);
        }
        s->size = total;
        np_normalize(w, n); // BlendedDataset normalises the weights again
    } else {
        uint64_t total = 0;
        for (int i = 0; i < n; i++) {
            s->parts[i] = part_for_split(ds[i], fractions, which, -1, seq_length, seed);
            w[i] = (double)kda_gpt_dataset_len(s->parts[i]);
            total += kda_gpt_dataset_len(s->parts[i]);
        }
        s->size = size < total ? size : total;
        np_normalize(w, n);
    }
    blending_indices(s, w);
    free(w);
    return s;
}

void kda_gpt_source_free(kda_gpt_source *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) kda_gpt_dataset_free(s->parts[i]);
    free(s->parts);
    free(s->which);
    free(s->sample);
    free(s);
}

uint64_t kda_gpt_source_len(const kda_gpt_source *s) { return s->size; }

void kda_gpt_source_locate(const kda_gpt_source *s, uint64_t idx, int *dataset, uint64_t *sample) {
    KDA_CHECK(idx < s->size, "blend sample %" PRIu64 " of %" PRIu64, idx, s->size);
    *dataset = s->which ? s->which[idx] : 0;
    *sample = s->which ? (uint64_t)s->sample[idx] : idx;
}

void kda_gpt_source_get(const kda_gpt_source *s, uint64_t idx, int32_t *out) {
    int d;
    uint64_t k;
    kda_gpt_source_locate(s, idx, &d, &k);
    kda_gpt_dataset_get(s->parts[d], k, out);
}
