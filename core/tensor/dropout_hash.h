/* tensor/dropout_hash.h — the dropout mask as a pure function of (seed, index),
 * shared verbatim by the CPU and CUDA kernels so both backends drop the same
 * elements and a recomputed block redraws exactly the mask it used before.
 * keep(i) = splitmix64(seed + i) >= p · 2^64. */
#ifndef ORK_TENSOR_DROPOUT_HASH_H
#define ORK_TENSOR_DROPOUT_HASH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define ORK_DROP_FN __host__ __device__ __forceinline__
#else
#define ORK_DROP_FN static inline
#endif

ORK_DROP_FN uint64_t ork_drop_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 1 when element i is kept. threshold = p · 2^64 (saturated). */
ORK_DROP_FN int ork_drop_keep(uint64_t seed, uint64_t i, uint64_t threshold) {
    return ork_drop_mix(seed + i) >= threshold;
}

#endif
