/* test_rng.c — the bulk uniform generator (ork_rng_fill_sym, _mt) that fills
 * random preset weights and LoRA initial values against the scalar generator
 * it replaces (ork_rng_uniform, drawn in sequence): bit for bit, from odd and
 * even starting uniforms, with tails shorter than a batch, over threads (the
 * values must not depend on their number) and into BF16. A wrong word order,
 * lane offset or start half changes nearly every value, so these can fail. */
#include "ork_test.h"

#include "numerics/half.h"
#include "train/rng.h"

#include <stdlib.h>
#include <string.h>

/* The reference: the scalar generator from uniform u0 on. */
static void scalar_fill(uint64_t seed, uint32_t stream, uint64_t u0, float *out, int64_t n, double bound) {
    ork_rng r;
    ork_rng_init(&r, seed, stream);
    ork_rng_seek(&r, u0 / 2);
    if (u0 & 1) (void)ork_rng_uniform(&r);
    for (int64_t q = 0; q < n; q++) out[q] = (float)((2.0 * ork_rng_uniform(&r) - 1.0) * bound);
}

static int64_t first_diff(const float *a, const float *b, int64_t n) {
    for (int64_t q = 0; q < n; q++)
        if (memcmp(&a[q], &b[q], sizeof *a)) return q;
    return -1;
}

static void test_bulk_equals_scalar(void) {
    static const uint64_t starts[] = {0, 1, 2, 15, 16, 17, (1ull << 33) + 1, 0xFFFFFFFFull}; /* 2^32-1: counter carries into word 1 */
    static const int64_t ns[] = {0, 1, 2, 15, 16, 17, 31, 33, 1000};
    float a[1000], b[1000];
    for (size_t s = 0; s < sizeof starts / sizeof *starts; s++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            scalar_fill(0x1234567890abcdefull, ORK_RNG_INIT, starts[s], a, ns[k], 0.37);
            ork_rng_fill_sym(0x1234567890abcdefull, ORK_RNG_INIT, starts[s], b, ns[k], 0.37);
            int64_t d = first_diff(a, b, ns[k]);
            if (d >= 0) printf("  start %llu n %lld: first difference at %lld (%.9g vs %.9g)\n",
                               (unsigned long long)starts[s], (long long)ns[k], (long long)d, a[d], b[d]);
            CU_ASSERT_EQUAL(d, -1);
        }
    /* the values are spread over (-bound, bound), not a constant */
    ork_rng_fill_sym(7, ORK_RNG_INIT, 0, b, 1000, 1.0);
    double lo = 1, hi = -1;
    for (int q = 0; q < 1000; q++) { lo = b[q] < lo ? b[q] : lo; hi = b[q] > hi ? b[q] : hi; }
    CU_ASSERT(lo < -0.99 && hi > 0.99 && lo >= -1.0 && hi <= 1.0);
}

static void test_threads_and_bf16(void) {
    const int64_t n = (3 << 20) + 5; /* above the threading threshold, odd */
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    uint16_t *h = malloc((size_t)n * sizeof *h), *hr = malloc((size_t)n * sizeof *hr);
    CU_ASSERT_FATAL(a && b && h && hr);
    scalar_fill(42, ORK_RNG_INIT, 3, a, n, 0.05);
    ork_rng_fill_sym_mt(42, ORK_RNG_INIT, 3, b, 0, n, 0.05);
    CU_ASSERT_EQUAL(first_diff(a, b, n), -1);
    ork_bf16_from_f32(a, (size_t)n, hr);
    ork_rng_fill_sym_mt(42, ORK_RNG_INIT, 3, h, 1, n, 0.05);
    CU_ASSERT_EQUAL(memcmp(h, hr, (size_t)n * sizeof *h), 0);
    free(a); free(b); free(h); free(hr);
}

static const ork_test_case cases[] = {
    {"bulk uniforms == the scalar generator, any start and length", test_bulk_equals_scalar},
    {"threaded F32 and BF16 fills == the scalar generator", test_threads_and_bf16},
    {NULL, NULL},
};

ORK_TEST_MAIN("train_rng", NULL, NULL, cases)
