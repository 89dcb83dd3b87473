// mt19937.h — the random stream of numpy's legacy numpy.random.RandomState(seed), as far as
// Megatron's GPT dataset uses it: MT19937 seeded by an unsigned 32-bit integer (Matsumoto &
// Nishimura's init_genrand), 32- and 64-bit draws, numpy's bounded draw random_interval
// (mask the smallest covering bit pattern, reject above the bound) and RandomState.shuffle of a
// 1-D array (Fisher-Yates from the last element down, j = random_interval(i)).
//
// Promises: kda_mt_shuffle(RandomState(seed)) leaves an array in exactly the order
// numpy.random.RandomState(seed).shuffle leaves it (any element size), and consecutive calls
// continue the same stream, so a sequence of shuffles matches the same sequence in numpy.
#ifndef KDA_MT19937_H
#define KDA_MT19937_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t key[624];
    int pos;
} kda_mt19937;

void kda_mt_seed(kda_mt19937 *mt, uint32_t seed);
uint32_t kda_mt_next32(kda_mt19937 *mt);
uint64_t kda_mt_next64(kda_mt19937 *mt);                 // two 32-bit draws, the first one high
uint64_t kda_mt_interval(kda_mt19937 *mt, uint64_t max); // uniform in [0, max], numpy's way
// Shuffle n elements of elem_size bytes in place.
void kda_mt_shuffle(kda_mt19937 *mt, void *a, size_t n, size_t elem_size);

#endif
