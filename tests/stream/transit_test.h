/* tests/stream/transit_test.h — what the transit coding's CPU and CUDA tests
 * share: BF16 words that look like trained weights, and FP8 E5M2 bytes as the
 * quantizer makes them (the input coded as bytes). */
#ifndef ORK_TESTS_TRANSIT_TEST_H
#define ORK_TESTS_TRANSIT_TEST_H

#include "ork_test.h"

#include "numerics/half.h"
#include "numerics/quantize.h"
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

/* rows x cols weights, uniform in [-1, 1) or N(0, 1), quantized to FP8 E5M2
 * with one absmax scale a row (block 0), as streamed FP8 weights are
 * (caller frees). */
static inline uint8_t *e5m2_weights(size_t rows, size_t cols, int gaussian, uint64_t seed) {
    size_t n = rows * cols;
    float *f = malloc((n ? n : 1) * 4), *s = malloc((rows ? rows : 1) * 4);
    uint8_t *q = malloc(n ? n : 1);
    CU_ASSERT_FATAL(f && s && q);
    if (gaussian) {
        ork_rng r;
        ork_rng_init(&r, seed, 0);
        ork_rng_normal_f32(&r, f, (int64_t)n);
    } else {
        ork_rng_fill_sym(seed, 0, 0, f, (int64_t)n, 1.0);
    }
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", f, ORK_F32, rows, cols, ORK_F8_E5M2, 0, q, s, NULL), ORK_OK);
    free(f);
    free(s);
    return q;
}

#endif
