/* test_half.c — float32 -> bf16 / f16 round-to-nearest-even against independent
 * references (bf16: nearest of the two neighbours in double; f16: the compiler's
 * _Float16 conversion, and a double-based nearest search), exact decodes, the
 * Philox4x32-10 known answers and the bf16 stochastic rounding contract. */
#include "numerics/half.h"
#include "ork_test.h"

#include <math.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint32_t rng32(void) {
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* bf16 reference: the two bf16 neighbours of x (toward zero / away), nearest in
 * double, ties to the even one; past max finite the upper neighbour is Inf. */
static uint16_t ref_bf16(float x) {
    uint32_t u = ork_f32_bits(x);
    if (isnan(x)) return 0x7FFF;
    if (isinf(x)) return (uint16_t)(u >> 16);
    uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    double a = fabs((double)x), vlo = fabs((double)ork_bits_f32(lo));
    double vhi = ((hi >> 23) & 0xFF) == 0xFF ? ldexp(1.0, 128) : fabs((double)ork_bits_f32(hi));
    double dlo = a - vlo, dhi = vhi - a;
    return (uint16_t)((dlo < dhi || (dlo == dhi && !((lo >> 16) & 1)) ? lo : hi) >> 16);
}

static void test_bf16_rne(void) {
    uint64_t n = 0, bad = 0;
    static const uint32_t lows[] = {0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
    for (uint32_t h = 0; h < 0x10000u; h++)
        for (int k = 0; k < 8 + 8; k++) {
            uint32_t u = (h << 16) | (k < 8 ? lows[k] : (rng32() & 0xFFFF));
            float x = ork_bits_f32(u);
            n++;
            if (ork_f32_to_bf16(x) != ref_bf16(x) && bad++ < 8)
                printf("\n  bf16 0x%08X: got 0x%04X want 0x%04X", u, ork_f32_to_bf16(x), ref_bf16(x));
        }
    for (int i = 0; i < 8000000; i++) {
        float x = ork_bits_f32(rng32());
        n++;
        bad += ork_f32_to_bf16(x) != ref_bf16(x);
    }
    printf(" [%llu inputs] ", (unsigned long long)n);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ork_f32_to_bf16(NAN), 0x7FFF);
    CU_ASSERT_EQUAL(ork_f32_to_bf16(-NAN), 0x7FFF);              /* as CUDA: sign dropped */
    CU_ASSERT_EQUAL(ork_f32_to_bf16(ork_bits_f32(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX -> Inf */
    CU_ASSERT_EQUAL(ork_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);   /* tie -> even */
    CU_ASSERT_EQUAL(ork_f32_to_bf16(1.0f + 0x3p-8f), 0x3F82);   /* tie -> even (up) */
    /* decode is exact */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = ork_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && ork_f32_to_bf16(f) != h) { CU_FAIL("bf16 round trip"); break; }
    }
}

/* f16 reference 2: nearest finite f16 by binary search over the codes' values
 * (computed with ldexp), ties to the even code; past max -> Inf. */
static double f16_val(uint32_t c) {
    uint32_t e = c >> 10, m = c & 0x3FF;
    return e ? ldexp(1.0 + m / 1024.0, (int)e - 15) : ldexp(m, -24);
}
static uint16_t ref_f16(float x) {
    if (isnan(x)) return 0x7FFF;
    uint16_t s = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= 65520.0) return s | 0x7C00;        /* (65504 + 65536) / 2, tie -> even = Inf */
    uint32_t lo = 0, hi = 0x7C00;               /* val(lo) <= a < val(hi) */
    while (hi - lo > 1) { uint32_t mid = (lo + hi) / 2; if (f16_val(mid) <= a) lo = mid; else hi = mid; }
    double mid = (f16_val(lo) + f16_val(hi)) / 2;
    return (uint16_t)(s | (a < mid ? lo : a > mid ? hi : (lo & 1 ? hi : lo)));
}

static void test_f16_rne(void) {
    uint64_t n = 0, bad = 0;
#if defined(__FLT16_MAX__)
    static const int exps[] = {-127, -26, -25, -15, -14, 15, 128}; /* underflow, subnormal, overflow, specials */
    for (size_t k = 0; k < sizeof exps / sizeof exps[0]; k++)
        for (uint32_t m = 0; m < (1u << 24); m++) {   /* both signs */
            uint32_t u = ((m >> 23) << 31) | ((uint32_t)(exps[k] + 127) << 23) | (m & 0x7FFFFF);
            float x = ork_bits_f32(u);
            if (isnan(x)) { bad += ork_f32_to_f16(x) != 0x7FFF; continue; }
            _Float16 h = (_Float16)x;
            uint16_t want; memcpy(&want, &h, 2);
            n++;
            if (ork_f32_to_f16(x) != want && bad++ < 8)
                printf("\n  f16 0x%08X: got 0x%04X want 0x%04X", u, ork_f32_to_f16(x), want);
        }
    /* decode against the compiler, all codes */
    for (uint32_t c = 0; c < 0x10000u; c++) {
        uint16_t c16 = (uint16_t)c;
        _Float16 h; memcpy(&h, &c16, 2);
        float want = (float)h, got = ork_f16_to_f32(c16);
        bad += isnan(want) ? !isnan(got) : memcmp(&want, &got, 4) != 0;
    }
    printf(" [_Float16: %llu inputs] ", (unsigned long long)n);
#else
    printf(" [no _Float16: double reference only] ");
#endif
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = rng32();
        if (i & 1) u = (u & 0x807FFFFFu) | ((uint32_t)(100 + u % 48) << 23); /* f16 range */
        float x = ork_bits_f32(u);
        if (ork_f32_to_f16(x) != ref_f16(x) && bad++ < 16)
            printf("\n  f16 0x%08X: got 0x%04X want 0x%04X", u, ork_f32_to_f16(x), ref_f16(x));
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ork_f32_to_f16(65504.0f), 0x7BFF);
    CU_ASSERT_EQUAL(ork_f32_to_f16(nextafterf(65520.0f, 0)), 0x7BFF);
    CU_ASSERT_EQUAL(ork_f32_to_f16(65520.0f), 0x7C00);
    CU_ASSERT_EQUAL(ork_f32_to_f16(-INFINITY), 0xFC00);
    CU_ASSERT_EQUAL(ork_f32_to_f16(-NAN), 0x7FFF);
    CU_ASSERT_EQUAL(ork_f32_to_f16(0x1p-25f), 0x0000);          /* tie -> even 0 */
    CU_ASSERT_EQUAL(ork_f32_to_f16(-0x1.8p-24f), 0x8002);       /* tie -> even 2 */
    CU_ASSERT_EQUAL(ork_f16_to_f32(0x0001), 0x1p-24f);
    CU_ASSERT_EQUAL(ork_f16_to_f32(0x3C00), 1.0f);
}

/* Random123's kat_vectors for philox4x32-10 (counter, key -> output). */
static void test_philox_kat(void) {
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        ork_philox4x32_10(kat[k], kat[k] + 4, out);
        CU_ASSERT_EQUAL(memcmp(out, kat[k] + 6, sizeof out), 0);
    }
}

static void test_bf16_sr(void) {
    enum { n = 1 << 20 };
    static float src[n];
    static uint16_t a[n], b[n];
    const float x = 1.0f + 0x1p-10f;              /* 1/8 of the way from 1 to 1 + 2^-7 */
    for (int i = 0; i < n; i++) src[i] = i & 1 ? -x : x;
    ork_bf16_from_f32_sr(src, n, 1234, 7, 0, a);
    double sum = 0;
    int others = 0;
    for (int i = 0; i < n; i++) {
        if ((a[i] & 0x7FFF) != 0x3F80 && (a[i] & 0x7FFF) != 0x3F81) others++;
        if ((a[i] >> 15) != (uint16_t)(i & 1)) others++;   /* sign kept */
        sum += fabs((double)ork_bf16_to_f32(a[i]));
    }
    CU_ASSERT_EQUAL(others, 0);
    double mean = sum / n, sd = 0x1p-7 * sqrt(0.125 * 0.875 / n);
    printf(" [mean %.9f want %.9f, %.1f sd] ", mean, (double)x, fabs(mean - x) / sd);
    CU_ASSERT(fabs(mean - x) < 5 * sd);           /* unbiased */
    /* reproducible and independent of how the array is split */
    ork_bf16_from_f32_sr(src, 1000, 1234, 7, 0, b);
    ork_bf16_from_f32_sr(src + 1000, 3, 1234, 7, 1000, b + 1000);
    ork_bf16_from_f32_sr(src + 1003, n - 1003, 1234, 7, 1003, b + 1003);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    for (int i = 0; i < 64; i++)
        CU_ASSERT_EQUAL(a[i], ork_f32_to_bf16_sr(src[i], ork_sr_bits(1234, 7, (uint64_t)i)));
    ork_bf16_from_f32_sr(src, n, 1234, 8, 0, b);  /* another step: other bits */
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* representable values never move; specials */
    for (int i = 0; i < 1000; i++) {
        float v = ork_bf16_to_f32((uint16_t)(rng32() & 0x7F7F));
        CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(v, (uint16_t)rng32()), ork_f32_to_bf16(v));
    }
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(ork_bits_f32(0x7F7FFFFFu), 0xFFFF), 0x7F7F); /* no Inf */
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(ork_bits_f32(0xFF7FFFFFu), 0xFFFF), 0xFF7F);
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(INFINITY, 0xFFFF), 0x7F80);
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(-NAN, 0), 0x7FFF);
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(ork_bits_f32(0x3F80FFFFu), 0), 0x3F80);  /* r=0: truncate */
    CU_ASSERT_EQUAL(ork_f32_to_bf16_sr(ork_bits_f32(0x3F800001u), 0xFFFF), 0x3F81);
}

static void test_bulk(void) {
    enum { n = 4096 };
    static float src[n], back[n];
    static uint16_t h[n];
    for (int i = 0; i < n; i++) src[i] = ork_bits_f32(rng32());
    ork_bf16_from_f32(src, n, h);
    ork_bf16_to_f32_n(h, n, back);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bad += h[i] != ork_f32_to_bf16(src[i]);
        bad += ork_f32_bits(back[i]) != (uint32_t)h[i] << 16;
    }
    ork_f16_from_f32(src, n, h);
    ork_f16_to_f32_n(h, n, back);
    for (int i = 0; i < n; i++) {
        bad += h[i] != ork_f32_to_f16(src[i]);
        float w = ork_f16_to_f32(h[i]);
        bad += memcmp(&w, &back[i], 4) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

static const ork_test_case cases[] = {
    {"bf16 round to nearest even", test_bf16_rne},
    {"f16 round to nearest even", test_f16_rne},
    {"philox4x32-10 known answers", test_philox_kat},
    {"bf16 stochastic rounding", test_bf16_sr},
    {"bulk conversions", test_bulk},
    {NULL, NULL},
};
ORK_TEST_MAIN("numerics_half", NULL, NULL, cases)
