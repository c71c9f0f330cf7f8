/* test_quantize.c — FP8 weight pre-quantization: per-row and 1x128 scales, zero
 * rows, f32/bf16/f16 inputs, NaN/Inf refusal naming the tensor and first bad
 * element, relative RMS error on Gaussian weights, thread-count independence,
 * dequantization. */
#include "numerics/fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h"
#include "util/log.h"
#include "ork_test.h"

#include <float.h>
#include <math.h>

static uint64_t rng_state = 0x853C49E6748FEA9Bull;
static double urand(void) { /* (0, 1) */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return ((double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) + 0.5) * 0x1p-53;
}
static float gauss(void) { return (float)(sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand())); }

/* W[rows, cols]: Gaussian, row r scaled by 10^(r % 7 - 4) so rows differ wildly. */
static float *make_w(size_t rows, size_t cols) {
    float *w = malloc(rows * cols * sizeof(float));
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) w[r * cols + c] = gauss() * powf(10.f, (float)(r % 7) - 4);
    return w;
}

typedef struct qres { uint8_t *q; float *s; double rel; ork_status st; } qres;

static qres run(const void *w, ork_dtype in, size_t rows, size_t cols, ork_dtype fmt, size_t block) {
    qres r = {malloc(rows * cols), malloc(rows * ork_quant_nblocks(cols, block) * sizeof(float)), -1, 0};
    r.st = ork_quantize_fp8("t", w, in, rows, cols, fmt, block, r.q, r.s, &r.rel);
    return r;
}
static void qfree(qres *r) { free(r->q); free(r->s); }

/* Every scale is absmax / fmt_max of its slice and every code is the satfinite
 * rounding of w / s. */
static int check_scheme(const float *w, size_t rows, size_t cols, ork_dtype fmt, size_t block,
                        const qres *r) {
    size_t nb = ork_quant_nblocks(cols, block), bw = block ? block : cols;
    int bad = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t b = 0; b < nb; b++) {
            float amax = 0;
            size_t c1 = (b + 1) * bw < cols ? (b + 1) * bw : cols;
            for (size_t c = b * bw; c < c1; c++) amax = fmaxf(amax, fabsf(w[i * cols + c]));
            float s = amax > 0 ? amax / ork_fp8_max(fmt) : 1.0f;
            bad += r->s[i * nb + b] != s;
            int has_max = 0;
            for (size_t c = b * bw; c < c1; c++) {
                uint8_t want = ork_f32_to_fp8(w[i * cols + c] / s, fmt, ORK_FP8_SATFINITE);
                bad += r->q[i * cols + c] != want;
                has_max |= (r->q[i * cols + c] & 0x7F) == (fmt == ORK_F8_E4M3 ? 0x7E : 0x7B);
            }
            bad += amax > 0 && !has_max;            /* the absmax element lands on max */
        }
    return bad;
}

static void test_per_row(void) {
    size_t rows = 37, cols = 300;
    float *w = make_w(rows, cols);
    for (size_t c = 0; c < cols; c++) w[5 * cols + c] = 0.0f;   /* an all-zero row */
    for (int f = 0; f < 2; f++) {
        ork_dtype fmt = f ? ORK_F8_E5M2 : ORK_F8_E4M3;
        qres r = run(w, ORK_F32, rows, cols, fmt, 0);
        CU_ASSERT_EQUAL_FATAL(r.st, ORK_OK);
        CU_ASSERT_EQUAL(check_scheme(w, rows, cols, fmt, 0, &r), 0);
        CU_ASSERT_EQUAL(r.s[5], 1.0f);
        int nz = 0;
        for (size_t c = 0; c < cols; c++) nz += r.q[5 * cols + c] != 0;
        CU_ASSERT_EQUAL(nz, 0);
        /* rows 10^4 apart all keep their precision: per-row error is small everywhere */
        float *d = malloc(rows * cols * sizeof(float));
        CU_ASSERT_EQUAL(ork_dequantize_fp8(r.q, r.s, rows, cols, fmt, 0, ORK_F32, d), ORK_OK);
        for (size_t i = 0; i < rows; i++) {
            double e = 0, n = 0;
            for (size_t c = 0; c < cols; c++) {
                double x = w[i * cols + c], y = d[i * cols + c];
                e += (x - y) * (x - y); n += x * x;
            }
            if (n > 0) CU_ASSERT(sqrt(e / n) < (f ? 0.07 : 0.035));
        }
        free(d);
        qfree(&r);
    }
    free(w);
}

static void test_blocks(void) {
    size_t rows = 9, cols = 300;                  /* blocks of 128, 128, 44 */
    float *w = make_w(rows, cols);
    w[2 * cols + 200] = 1e3f;                     /* an outlier only its block sees */
    for (size_t c = 128; c < 256; c++) w[3 * cols + c] = 0.0f; /* a zero block */
    qres r = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, 128);
    CU_ASSERT_EQUAL_FATAL(r.st, ORK_OK);
    CU_ASSERT_EQUAL(ork_quant_nblocks(cols, 128), 3);
    CU_ASSERT_EQUAL(check_scheme(w, rows, cols, ORK_F8_E4M3, 128, &r), 0);
    CU_ASSERT_EQUAL(r.s[2 * 3 + 1], 1e3f / 448.0f);
    CU_ASSERT(r.s[2 * 3 + 0] < 1e-2f && r.s[2 * 3 + 2] < 1e-2f);
    CU_ASSERT_EQUAL(r.s[3 * 3 + 1], 1.0f);
    float *d = malloc(rows * cols * sizeof(float));
    CU_ASSERT_EQUAL(ork_dequantize_fp8(r.q, r.s, rows, cols, ORK_F8_E4M3, 128, ORK_F32, d), ORK_OK);
    int bad = 0;
    for (size_t i = 0; i < rows * cols; i++)
        bad += d[i] != ork_e4m3_to_f32(r.q[i]) * r.s[(i / cols) * 3 + (i % cols) / 128];
    CU_ASSERT_EQUAL(bad, 0);
    /* a block at least as wide as the row is the per-row scheme */
    qres p = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, 0), b = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, 4096);
    CU_ASSERT_EQUAL(memcmp(p.q, b.q, rows * cols), 0);
    CU_ASSERT_EQUAL(memcmp(p.s, b.s, rows * sizeof(float)), 0);
    qfree(&p); qfree(&b); qfree(&r); free(d); free(w);
}

/* bf16 and f16 inputs quantize exactly like their float32 values. */
static void test_input_dtypes(void) {
    size_t rows = 16, cols = 256, n = rows * cols;
    float *w = make_w(rows, cols), *wf = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    for (int k = 0; k < 2; k++) {
        ork_dtype in = k ? ORK_F16 : ORK_BF16;
        for (size_t i = 0; i < n; i++) {
            h[i] = k ? ork_f32_to_f16(w[i]) : ork_f32_to_bf16(w[i]);
            wf[i] = k ? ork_f16_to_f32(h[i]) : ork_bf16_to_f32(h[i]);
        }
        qres a = run(h, in, rows, cols, ORK_F8_E4M3, 128), b = run(wf, ORK_F32, rows, cols, ORK_F8_E4M3, 128);
        CU_ASSERT_EQUAL(a.st, ORK_OK);
        CU_ASSERT_EQUAL(memcmp(a.q, b.q, n), 0);
        CU_ASSERT_EQUAL(memcmp(a.s, b.s, rows * 2 * sizeof(float)), 0);
        CU_ASSERT_EQUAL(a.rel, b.rel);
        qfree(&a); qfree(&b);
    }
    /* dequantize to bf16 / f16 is the RNE of the f32 dequantization */
    qres r = run(w, ORK_F32, rows, cols, ORK_F8_E5M2, 0);
    float *d = malloc(n * 4);
    ork_dequantize_fp8(r.q, r.s, rows, cols, ORK_F8_E5M2, 0, ORK_F32, d);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(ork_dequantize_fp8(r.q, r.s, rows, cols, ORK_F8_E5M2, 0, k ? ORK_F16 : ORK_BF16, h), ORK_OK);
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad += h[i] != (k ? ork_f32_to_f16(d[i]) : ork_f32_to_bf16(d[i]));
        CU_ASSERT_EQUAL(bad, 0);
    }
    qfree(&r); free(d); free(w); free(wf); free(h);
}

/* ~2.6% (E4M3) and ~5.2% (E5M2) relative RMS on Gaussian weights (NUMERICS.md §2),
 * and rel_rms equals the error of the dequantized tensor. */
static void test_error(void) {
    size_t rows = 512, cols = 1024, n = rows * cols;
    float *w = malloc(n * 4), *d = malloc(n * 4);
    for (size_t i = 0; i < n; i++) w[i] = 0.02f * gauss();
    for (int f = 0; f < 2; f++)
        for (int blk = 0; blk < 2; blk++) {
            ork_dtype fmt = f ? ORK_F8_E5M2 : ORK_F8_E4M3;
            qres r = run(w, ORK_F32, rows, cols, fmt, blk ? 128 : 0);
            CU_ASSERT_EQUAL_FATAL(r.st, ORK_OK);
            ork_dequantize_fp8(r.q, r.s, rows, cols, fmt, blk ? 128 : 0, ORK_F32, d);
            double e = 0, nn = 0;
            for (size_t i = 0; i < n; i++) { e += ((double)w[i] - d[i]) * ((double)w[i] - d[i]); nn += (double)w[i] * w[i]; }
            printf(" [%s %s: %.4f] ", f ? "e5m2" : "e4m3", blk ? "1x128" : "row", r.rel);
            CU_ASSERT(ork_close(r.rel, sqrt(e / nn), 0, 1e-9));
            double lo = f ? 0.045 : 0.022, hi = f ? 0.060 : 0.030;
            CU_ASSERT(r.rel > lo && r.rel < hi);
            qfree(&r);
        }
    double rel = 1;
    CU_ASSERT_EQUAL(ork_quantize_fp8("z", w, ORK_F32, 0, cols, ORK_F8_E4M3, 0, NULL, NULL, &rel), ORK_OK);
    CU_ASSERT_EQUAL(rel, 0.0);
    free(w); free(d);
}

static void test_threads_identical(void) {
    size_t rows = 203, cols = 777, n = rows * cols;   /* neither divides evenly */
    float *w = make_w(rows, cols);
    for (int blk = 0; blk < 2; blk++) {
        ork_numerics_set_threads(1);
        CU_ASSERT_EQUAL(ork_numerics_threads(), 1);
        qres a = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, blk ? 128 : 0);
        ork_numerics_set_threads(7);
        qres b = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, blk ? 128 : 0);
        ork_numerics_set_threads(0);
        CU_ASSERT(ork_numerics_threads() >= 1);
        qres c = run(w, ORK_F32, rows, cols, ORK_F8_E4M3, blk ? 128 : 0);
        size_t ns = rows * ork_quant_nblocks(cols, blk ? 128 : 0) * sizeof(float);
        CU_ASSERT(memcmp(a.q, b.q, n) == 0 && memcmp(a.q, c.q, n) == 0);
        CU_ASSERT(memcmp(a.s, b.s, ns) == 0 && memcmp(a.s, c.s, ns) == 0);
        CU_ASSERT(a.rel == b.rel && a.rel == c.rel);
        qfree(&a); qfree(&b); qfree(&c);
    }
    free(w);
}

static char g_line[512];
static void sink(ork_log_level lvl, const char *line, void *user) {
    if (lvl == ORK_LOG_ERROR) snprintf(g_line, sizeof g_line, "%s", line);
}

static void test_refuse_nonfinite(void) {
    size_t rows = 100, cols = 64;
    float *w = make_w(rows, cols);
    w[90 * cols + 3] = NAN;                         /* seen by a later thread */
    w[10 * cols + 17] = -INFINITY;                  /* the first bad element */
    uint8_t *q = malloc(rows * cols);
    float *s = malloc(rows * sizeof(float));
    ork_log_set_sink(sink, NULL);
    ork_numerics_set_threads(4);
    g_line[0] = 0;
    CU_ASSERT_EQUAL(ork_quantize_fp8("double_blocks.3.img_mlp.0.weight", w, ORK_F32, rows, cols,
                                     ORK_F8_E4M3, 0, q, s, NULL), ORK_E_NUMERIC);
    printf(" [%s] ", g_line);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_line, "double_blocks.3.img_mlp.0.weight"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_line, "-Inf at [10, 17]"));
    w[10 * cols + 17] = 0;
    uint16_t *h = malloc(rows * cols * 2);
    for (size_t i = 0; i < rows * cols; i++) h[i] = ork_f32_to_bf16(w[i]);
    CU_ASSERT_EQUAL(ork_quantize_fp8("wb", h, ORK_BF16, rows, cols, ORK_F8_E5M2, 128, q, s, NULL),
                    ORK_E_NUMERIC);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_line, "wb: NaN at [90, 3]"));
    /* bad arguments */
    CU_ASSERT_EQUAL(ork_quantize_fp8("a", w, ORK_F32, rows, cols, ORK_BF16, 0, q, s, NULL), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_quantize_fp8("a", w, ORK_I32, rows, cols, ORK_F8_E4M3, 0, q, s, NULL), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_quantize_fp8("a", w, ORK_F32, rows, cols, ORK_F8_E4M3, 0, NULL, s, NULL), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_quantize_fp8(NULL, w, ORK_F32, SIZE_MAX, 2, ORK_F8_E4M3, 0, q, s, NULL), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_dequantize_fp8(q, s, rows, cols, ORK_F8_E4M3, 0, ORK_I32, w), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_dequantize_fp8(q, s, rows, cols, ORK_F32, 0, ORK_F32, w), ORK_E_INVALID);
    ork_log_set_sink(NULL, NULL);
    ork_numerics_set_threads(0);
    free(w); free(q); free(s); free(h);
}

/* Tiny rows: the scale never goes subnormal. */
static void test_tiny_scale(void) {
    float w[4] = {1e-44f, -3e-45f, 0, 1e-45f};
    uint8_t q[4];
    float s;
    CU_ASSERT_EQUAL(ork_quantize_fp8("tiny", w, ORK_F32, 1, 4, ORK_F8_E4M3, 0, q, &s, NULL), ORK_OK);
    CU_ASSERT_EQUAL(s, FLT_MIN);
    CU_ASSERT_EQUAL(q[2], 0);
}

static const ork_test_case cases[] = {
    {"per-row scales and zero rows", test_per_row},
    {"1x128 blocks", test_blocks},
    {"bf16 / f16 inputs and outputs", test_input_dtypes},
    {"relative RMS error on Gaussian weights", test_error},
    {"any thread count gives identical results", test_threads_identical},
    {"NaN / Inf refused with the tensor name", test_refuse_nonfinite},
    {"tiny weights keep a normal scale", test_tiny_scale},
    {NULL, NULL},
};
ORK_TEST_MAIN("numerics_quantize", NULL, NULL, cases)
