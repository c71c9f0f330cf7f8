/* test_fp8.c — float32 -> fp8 rounding against an independent double-precision
 * reference (nearest of the enumerated fp8 values, ties to the even code) — both
 * the inline conversion and the quantizer's branchless variant — over
 * every float in the interesting binades, millions of random bit patterns and the
 * pinned specials of NUMERICS.md §1; fp8 -> float32 decode against the OCP
 * formula for all 256 codes. Both formats, both saturation modes. */
#include "numerics/fp8.h"
#include "ork_test.h"

#include <float.h>
#include <math.h>

/* ---- reference: nearest-even over the enumerated finite codes ------------ */
typedef struct ref_fmt {
    int e4, mbits, bias, maxcode;
    double val[0x80]; /* val[c] = value of code c for c <= maxcode; val[maxcode+1] = the
                         first value past max finite if the exponent range went on */
} ref_fmt;

static void ref_init(ref_fmt *f, int e4) {
    f->e4 = e4; f->mbits = e4 ? 3 : 2; f->bias = e4 ? 7 : 15; f->maxcode = e4 ? 0x7E : 0x7B;
    for (int c = 0; c <= f->maxcode; c++) {
        int e = c >> f->mbits, m = c & ((1 << f->mbits) - 1);
        f->val[c] = e ? ldexp(1.0 + ldexp(m, -f->mbits), e - f->bias)
                      : ldexp(m, 1 - f->bias - f->mbits);
    }
    int emax = f->maxcode >> f->mbits;
    f->val[f->maxcode + 1] = f->val[f->maxcode] + ldexp(1.0, emax - f->bias - f->mbits);
}

/* Unsigned result code of |x|; maxcode + 1 means "overflowed". */
static int ref_code(const ref_fmt *f, float x) {
    double a = fabs((double)x);
    int top = f->maxcode + 1, code;
    if (a >= f->val[top]) code = top;
    else {
        int lo = 0, hi = top;              /* val[lo] <= a < val[hi] */
        while (hi - lo > 1) { int mid = (lo + hi) / 2; if (f->val[mid] <= a) lo = mid; else hi = mid; }
        double mid = (f->val[lo] + f->val[hi]) / 2; /* exact in double */
        code = a < mid ? lo : a > mid ? hi : (lo % 2 == 0 ? lo : hi);
    }
    return code;
}

static uint8_t ref_apply(const ref_fmt *f, float x, int code, int sat) {
    if (isnan(x)) return 0x7F;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (code > f->maxcode) return sign | (sat ? f->maxcode : (f->e4 ? 0x7F : 0x7C));
    return (uint8_t)(sign | code);
}

static ref_fmt R4, R5;

static float bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

typedef struct tally { uint64_t n, bad; } tally;

static void check_one(uint32_t u, tally *t) {
    float x = bits(u);
    for (int e4 = 0; e4 < 2; e4++) {
        const ref_fmt *f = e4 ? &R4 : &R5;
        int code = isnan(x) ? 0 : ref_code(f, x);
        for (int sat = 0; sat < 2; sat++) {
            uint8_t want = ref_apply(f, x, code, sat);
            ork_fp8_sat s = sat ? ORK_FP8_SATFINITE : ORK_FP8_NOSAT;
            uint8_t got = e4 ? ork_f32_to_e4m3(x, s) : ork_f32_to_e5m2(x, s);
            t->n++;
            if (got != want && t->bad++ < 8)
                printf("\n  MISMATCH %s %s x=0x%08X (%a): got 0x%02X want 0x%02X", e4 ? "e4m3" : "e5m2",
                       sat ? "satfinite" : "nosat", u, (double)x, got, want);
        }
        if (isfinite(x)) {       /* the quantizer's branchless variant: finite, SATFINITE */
            uint8_t want = ref_apply(f, x, code, 1);
            uint8_t got = e4 ? ork_fp8_round_finite_sat_(u, 3, 7, 0x7E)
                             : ork_fp8_round_finite_sat_(u, 2, 15, 0x7B);
            t->n++;
            if (got != want && t->bad++ < 8)
                printf("\n  MISMATCH branchless %s x=0x%08X: got 0x%02X want 0x%02X",
                       e4 ? "e4m3" : "e5m2", u, got, want);
        }
    }
}

static int init(void) { ref_init(&R4, 1); ref_init(&R5, 0); return 0; }

/* Every float of the binades around each format's boundaries, both signs. */
static void test_binades(void) {
    static const int exps[] = {
        -127, /* float subnormals and zero (biased exponent 0) */
        -18, -17, -16, -15, -14, -11, -10, -7, -6, /* underflow / subnormal / min normal */
        8, 9, 15, 16,                               /* max finite and overflow */
        128,                                        /* Inf and NaN */
    };
    tally t = {0, 0};
    for (size_t k = 0; k < sizeof exps / sizeof exps[0]; k++) {
        uint32_t e = (uint32_t)(exps[k] + 127);
        for (uint32_t m = 0; m < (1u << 23); m++) {
            check_one((e << 23) | m, &t);
            check_one(0x80000000u | (e << 23) | m, &t);
        }
    }
    printf(" [%llu conversions, %llu mismatches] ", (unsigned long long)t.n,
           (unsigned long long)t.bad);
    CU_ASSERT_EQUAL(t.bad, 0);
}

static void test_random_bits(void) {
    tally t = {0, 0};
    for (int i = 0; i < 8000000; i++) check_one((uint32_t)(rng() >> 32), &t);
    /* and random values in the fp8 ranges, where most weights live */
    for (int i = 0; i < 4000000; i++) {
        float x = (float)ldexp((double)(rng() >> 40) / (1 << 24) * 2 - 1, (int)(rng() % 40) - 20);
        uint32_t u; memcpy(&u, &x, 4);
        check_one(u, &t);
    }
    printf(" [%llu conversions] ", (unsigned long long)t.n);
    CU_ASSERT_EQUAL(t.bad, 0);
}

/* NUMERICS.md §1, pinned by hand (not through the reference). */
static void test_pinned(void) {
    const ork_fp8_sat S = ORK_FP8_SATFINITE, N = ORK_FP8_NOSAT;
    /* E4M3 */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(448.0f, S), 0x7E);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(464.0f, S), 0x7E);             /* tie -> even 448 */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(464.0f, N), 0x7E);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(nextafterf(464.0f, 1e9f), S), 0x7E);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(nextafterf(464.0f, 1e9f), N), 0x7F);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-nextafterf(464.0f, 1e9f), N), 0xFF);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(INFINITY, S), 0x7E);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-INFINITY, S), 0xFE);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-INFINITY, N), 0xFF);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(NAN, S), 0x7F);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-NAN, S), 0x7F);               /* sign dropped */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(bits(0xFF800001u), N), 0x7F);  /* -sNaN */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(1.0f, S), 0x38);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-0.0f, S), 0x80);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(0x1p-10f, S), 0x00);           /* half min subnormal */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(-0x1p-10f, S), 0x80);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(nextafterf(0x1p-10f, 1), S), 0x01);
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(0x1.8p-9f, S), 0x02);          /* 1.5 steps: tie -> 2 */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(0x1.Ep-7f, S), 0x08);          /* 7.5 steps -> min normal */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(0x1.1p0f, S), 0x38);           /* 1 + 1/16: tie -> even */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(0x1.3p0f, S), 0x3A);           /* 1 + 3/16: tie -> even */
    CU_ASSERT_EQUAL(ork_f32_to_e4m3(bits(1), S), 0x00);            /* float subnormal */
    /* E5M2 */
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(57344.0f, S), 0x7B);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(nextafterf(61440.0f, 0), N), 0x7B);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(61440.0f, S), 0x7B);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(61440.0f, N), 0x7C);           /* tie -> even = Inf */
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(-61440.0f, N), 0xFC);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(INFINITY, N), 0x7C);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(-INFINITY, S), 0xFB);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(NAN, N), 0x7F);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(-NAN, S), 0x7F);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(1.0f, S), 0x3C);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(0x1p-17f, S), 0x00);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(nextafterf(0x1p-17f, 1), S), 0x01);
    CU_ASSERT_EQUAL(ork_f32_to_e5m2(-0x1p-14f, S), 0x84);
    /* the out-of-line and bulk paths agree with the inline one */
    CU_ASSERT_EQUAL(ork_f32_to_fp8(464.5f, ORK_F8_E4M3, N), 0x7F);
    CU_ASSERT_EQUAL(ork_f32_to_fp8(-3.0f, ORK_F8_E5M2, S), 0xC2);
    CU_ASSERT_EQUAL(ork_fp8_max(ORK_F8_E4M3), 448.0f);
    CU_ASSERT_EQUAL(ork_fp8_max(ORK_F8_E5M2), 57344.0f);
    CU_ASSERT_EQUAL(ork_fp8_max(ORK_BF16), 0.0f);
}

static void test_bulk(void) {
    enum { n = 100000 };
    static float src[n], back[n];
    static uint8_t dst[n];
    for (int i = 0; i < n; i++) src[i] = bits((uint32_t)(rng() >> 32));
    for (int e4 = 0; e4 < 2; e4++) {
        ork_dtype fmt = e4 ? ORK_F8_E4M3 : ORK_F8_E5M2;
        CU_ASSERT_EQUAL(ork_fp8_encode(src, n, fmt, ORK_FP8_NOSAT, dst), ORK_OK);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += dst[i] != ork_f32_to_fp8(src[i], fmt, ORK_FP8_NOSAT);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(ork_fp8_decode(dst, n, fmt, back), ORK_OK);
        bad = 0;
        for (int i = 0; i < n; i++) {
            float want = ork_fp8_to_f32(dst[i], fmt);
            bad += !(isnan(want) ? isnan(back[i]) : memcmp(&want, &back[i], 4) == 0);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    CU_ASSERT_EQUAL(ork_fp8_encode(src, 4, ORK_BF16, ORK_FP8_NOSAT, dst), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_fp8_decode(NULL, 4, ORK_F8_E4M3, back), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_fp8_encode(NULL, 0, ORK_F8_E4M3, ORK_FP8_NOSAT, NULL), ORK_OK);
}

/* Decode: all 256 codes against the OCP OFP8 value formula, sign by sign. */
static void test_decode_all_codes(void) {
    for (int e4 = 0; e4 < 2; e4++) {
        int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, bad = 0;
        for (int c = 0; c < 256; c++) {
            int s = c >> 7, e = (c & 0x7F) >> mb, m = c & ((1 << mb) - 1);
            float got = e4 ? ork_e4m3_to_f32((uint8_t)c) : ork_e5m2_to_f32((uint8_t)c);
            int is_nan = e4 ? (c & 0x7F) == 0x7F : (e == 31 && m != 0);
            int is_inf = !e4 && e == 31 && m == 0;
            if (is_nan) { bad += !isnan(got) || (signbit(got) != 0) != s; continue; }
            double want = is_inf ? INFINITY
                        : e ? ldexp(1.0 + m / (double)(1 << mb), e - bias)
                            : ldexp(m / (double)(1 << mb), 1 - bias);
            if (s) want = -want;
            if ((double)got != want || (signbit(got) != 0) != s) {
                bad++;
                printf("\n  %s code 0x%02X: got %a want %a", e4 ? "e4m3" : "e5m2", c, (double)got, want);
            }
            /* every non-NaN code survives a round trip in both modes (except that
             * NOSAT keeps Inf and SATFINITE maps it to max) */
            uint8_t rt = e4 ? ork_f32_to_e4m3(got, ORK_FP8_NOSAT) : ork_f32_to_e5m2(got, ORK_FP8_NOSAT);
            bad += rt != c;
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    /* the OCP table's landmarks */
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x7E), 448.0f);
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x01), 0x1p-9f);
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x07), 0x1.Cp-7f);
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x08), 0x1p-6f);
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0xB8), -1.0f);
    CU_ASSERT(isnan(ork_e4m3_to_f32(0xFF)));
    CU_ASSERT(!isnan(ork_e4m3_to_f32(0x7E)) && !isinf(ork_e4m3_to_f32(0x78)));
    CU_ASSERT_EQUAL(ork_e4m3_to_f32(0x78), 256.0f);                 /* no Inf in E4M3 */
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x7B), 57344.0f);
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x7C), INFINITY);
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0xFC), -INFINITY);
    CU_ASSERT(isnan(ork_e5m2_to_f32(0x7D)) && isnan(ork_e5m2_to_f32(0xFE)));
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x01), 0x1p-16f);
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x04), 0x1p-14f);
    CU_ASSERT_EQUAL(ork_e5m2_to_f32(0x3C), 1.0f);
    CU_ASSERT(signbit(ork_e5m2_to_f32(0x80)) && ork_e5m2_to_f32(0x80) == 0.0f);
}

static const ork_test_case cases[] = {
    {"pinned values from NUMERICS.md", test_pinned},
    {"decode all 256 codes (OCP)", test_decode_all_codes},
    {"bulk encode/decode", test_bulk},
    {"every float in 15 binades x 2 signs", test_binades},
    {"random bit patterns", test_random_bits},
    {NULL, NULL},
};
ORK_TEST_MAIN("numerics_fp8", init, NULL, cases)
