// mt19937.c — see mt19937.h. The generator is the published MT19937 algorithm; the bounded
// draw and the shuffle order follow numpy's documented legacy behaviour.
#include "base/mt19937.h"

#include <string.h>

#include "base/common.h"

#define MT_N 624
#define MT_M 397

void kda_mt_seed(kda_mt19937 *mt, uint32_t seed) {
    mt->key[0] = seed;
    for (int i = 1; i < MT_N; i++) {
        uint32_t prev = mt->key[i - 1];
        mt->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->pos = MT_N;
}

// Regenerate the whole state block (the "twist").
static void mt_twist(kda_mt19937 *mt) {
    uint32_t *k = mt->key;
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (k[i] & 0x80000000u) | (k[(i + 1) % MT_N] & 0x7fffffffu);
        k[i] = k[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    mt->pos = 0;
}

uint32_t kda_mt_next32(kda_mt19937 *mt) {
    if (mt->pos == MT_N) mt_twist(mt);
    uint32_t y = mt->key[mt->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t kda_mt_next64(kda_mt19937 *mt) {
    uint64_t hi = kda_mt_next32(mt);
    return (hi << 32) | kda_mt_next32(mt);
}

uint64_t kda_mt_interval(kda_mt19937 *mt, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (int s = 1; s < 64; s *= 2) mask |= mask >> s;
    uint64_t v;
    if (max <= 0xffffffffu) {
        do v = kda_mt_next32(mt) & mask;
        while (v > max);
    } else {
        do v = kda_mt_next64(mt) & mask;
        while (v > max);
    }
    return v;
}

void kda_mt_shuffle(kda_mt19937 *mt, void *a, size_t n, size_t elem_size) {
    unsigned char *p = a, tmp[16];
    KDA_CHECK(elem_size <= sizeof tmp, "kda_mt_shuffle: element size %zu over %zu bytes", elem_size, sizeof tmp);
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)kda_mt_interval(mt, i);
        memcpy(tmp, p + j * elem_size, elem_size);
        memcpy(p + j * elem_size, p + i * elem_size, elem_size);
        memcpy(p + i * elem_size, tmp, elem_size);
    }
}
