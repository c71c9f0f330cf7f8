/* tests/stream/wcodec_test.h — what the transit codec's CPU and CUDA tests
 * share: BF16 words that look like trained weights. */
#ifndef ORK_TESTS_WCODEC_TEST_H
#define ORK_TESTS_WCODEC_TEST_H

#include "ork_test.h"

#include "numerics/half.h"
#include "train/rng.h"

#include <stdint.h>

/* n BF16 words of N(0, std^2) from a fixed seed (caller frees). */
static inline uint16_t *gauss_bf16(size_t n, double std, uint64_t seed) {
    uint16_t *w = malloc((n ? n : 1) * 2);
    float *f = malloc((n ? n : 1) * 4);
    CU_ASSERT_FATAL(w && f);
    ork_rng r;
    ork_rng_init(&r, seed, 0);
    ork_rng_normal_f32(&r, f, (int64_t)n);
    for (size_t i = 0; i < n; i++) w[i] = ork_f32_to_bf16((float)(f[i] * std));
    free(f);
    return w;
}

#endif
