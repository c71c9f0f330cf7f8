/* test_quant.c — the quant plugin (orakul-quant.so) loaded through the core's
 * registry: aliases, layouts, keys, quantize -> dequantize error on Gaussian
 * weights (E4M3 ~2.6%, E5M2 ~5.2%), what 1x128 blocks buy, zero rows, NaN/Inf
 * refusal with its one line, bit-exactness against core/numerics (the
 * reference the plugin compiles in), thread-count independence, bf16 and none
 * components, malformed arguments, the fp8_gemm key and its refusals (plugin
 * and graph, ORK_FP8_GEMM). CPU only. */
#include "quant_test_util.h"

#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/graph.h"

#include "numerics/fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h"

static const char *id_of(const char *name) {
    const ork_plugin_component *pc = ork_registry_find(qt_reg, ORK_KIND_QUANT, name);
    return pc ? pc->c->id : NULL;
}

static void test_aliases(void) {
    static const char *const map[][2] = {
        {"fp8_e4m3", "org.orakul.quant.fp8_e4m3"}, {"qfloat8", "org.orakul.quant.fp8_e4m3"},
        {"float8", "org.orakul.quant.fp8_e4m3"},   {"fp8", "org.orakul.quant.fp8_e4m3"},
        {"e4m3", "org.orakul.quant.fp8_e4m3"},     {"float8_e4m3fn", "org.orakul.quant.fp8_e4m3"},
        {"fp8_e5m2", "org.orakul.quant.fp8_e5m2"}, {"bf8", "org.orakul.quant.fp8_e5m2"},
        {"e5m2", "org.orakul.quant.fp8_e5m2"},     {"float8_e5m2", "org.orakul.quant.fp8_e5m2"},
        {"bf16", "org.orakul.quant.bf16"},         {"bfloat16", "org.orakul.quant.bf16"},
        {"none", "org.orakul.quant.none"},
        {"org.orakul.quant.fp8_e5m2", "org.orakul.quant.fp8_e5m2"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        const char *id = id_of(map[i][0]);
        CU_ASSERT_PTR_NOT_NULL(id);
        if (id) CU_ASSERT_STRING_EQUAL(id, map[i][1]);
    }
    /* Not offered: no silent substitutes. */
    CU_ASSERT_PTR_NULL(id_of("float16"));
    CU_ASSERT_PTR_NULL(id_of("qint8"));
    CU_ASSERT_PTR_NULL(id_of("uint4"));
    CU_ASSERT_PTR_NULL(ork_registry_find(qt_reg, ORK_KIND_LOSS, "qfloat8"));
}

static void test_layouts(void) {
    qt_inst q = {0};
    ork_quant_layout l;
    CU_ASSERT_EQUAL_FATAL(qt_make("qfloat8", 0, 0, &q), ORK_OK);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 3072, 12288, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.qdtype, ORK_F8_E4M3);
    CU_ASSERT_EQUAL(l.block, 0);
    CU_ASSERT_EQUAL(l.n_scales, 3072);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, -1, 5, &l), ORK_E_INVALID);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, INT64_MAX / 2, 3, &l), ORK_E_INVALID);
    qt_free(&q);

    CU_ASSERT_EQUAL_FATAL(qt_make("bf8", 128, 0, &q), ORK_OK);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 3072, 12288, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.qdtype, ORK_F8_E5M2);
    CU_ASSERT_EQUAL(l.block, 128);
    CU_ASSERT_EQUAL(l.n_scales, 3072 * 96);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 7, 130, &l), ORK_OK); /* short last block */
    CU_ASSERT_EQUAL(l.n_scales, 14);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 0, 0, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.n_scales, 0);
    qt_free(&q);

    CU_ASSERT_EQUAL_FATAL(qt_make("bf16", 0, 0, &q), ORK_OK);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 64, 64, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.qdtype, ORK_BF16);
    CU_ASSERT_EQUAL(l.n_scales, 0);
    qt_free(&q);

    CU_ASSERT_EQUAL_FATAL(qt_make("none", 0, 0, &q), ORK_OK);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 64, 64, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.qdtype, ORK_F32);
    CU_ASSERT_EQUAL(l.n_scales, 0);
    qt_free(&q);
    qt_keys k = {0, 0, 0, "bf16", NULL};
    CU_ASSERT_EQUAL_FATAL(qt_make_keys("none", &k, &q), ORK_OK);
    CU_ASSERT_EQUAL(q.vt->layout(q.self, 64, 64, &l), ORK_OK);
    CU_ASSERT_EQUAL(l.qdtype, ORK_BF16);
    qt_free(&q);
}

static void test_bad_keys(void) {
    qt_inst q = {0};
    qt_clear_log();
    CU_ASSERT_EQUAL(qt_make("fp8_e4m3", 64, 0, &q), ORK_E_CONFIG); /* in the table's range, not 0/128 */
    CU_ASSERT_PTR_NULL(q.self);
    CU_ASSERT_EQUAL(qt_nerrors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "block_size"));
    qt_keys k = {0, 0, 0, "f16", NULL};
    qt_clear_log();
    CU_ASSERT_EQUAL(qt_make_keys("none", &k, &q), ORK_E_CONFIG);
    CU_ASSERT_EQUAL(qt_nerrors, 1);
    /* the key table itself: block_size 0..128 with default 0, threads >= 0 */
    const ork_component *c = ork_registry_find(qt_reg, ORK_KIND_QUANT, "fp8_e4m3")->c;
    int seen = 0;
    for (const ork_param *p = c->params; p->key; p++)
        if (!strcmp(p->key, "block_size")) {
            seen = 1;
            CU_ASSERT_STRING_EQUAL(p->def, "0");
            CU_ASSERT_EQUAL(p->min, 0);
            CU_ASSERT_EQUAL(p->max, 128);
        }
    CU_ASSERT(seen);
}

/* Quantize w (f32 [rows, cols]) with component name/block, dequantize to f32 on
 * the CPU; returns the relative RMS error, or -1 on failure. */
static double roundtrip(const char *name, int64_t block, const float *w, int64_t rows, int64_t cols, float *back) {
    qt_inst q = {0};
    ork_quant_layout l;
    double err = -1;
    if (qt_make(name, block, 0, &q) != ORK_OK) return -1;
    if (q.vt->layout(q.self, rows, cols, &l) != ORK_OK) goto out;
    void *qb = malloc((size_t)(rows * cols) * ork_dtype_size(l.qdtype));
    float *s = malloc((size_t)(l.n_scales ? l.n_scales : 1) * sizeof(float));
    if (qb && s && q.vt->quantize(q.self, "w", ORK_F32, w, rows, cols, 0, qb, s) == ORK_OK &&
        q.vt->dequantize(q.self, ORK_DEV_CPU, NULL, qb, s, rows, cols, ORK_F32, back) == ORK_OK)
        err = qt_rel_rms(w, back, (size_t)(rows * cols));
    free(qb);
    free(s);
out:
    qt_free(&q);
    return err;
}

static void test_error_gaussian(void) {
    const int64_t rows = 512, cols = 3072;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4), *back = malloc(n * 4);
    CU_ASSERT_FATAL(w && back);
    qt_fill_gauss(w, n, 0.02f, 1);
    double e4 = roundtrip("fp8_e4m3", 0, w, rows, cols, back), e4b = roundtrip("fp8_e4m3", 128, w, rows, cols, back);
    double e5 = roundtrip("fp8_e5m2", 0, w, rows, cols, back), e5b = roundtrip("fp8_e5m2", 128, w, rows, cols, back);
    double eb = roundtrip("bf16", 0, w, rows, cols, back), en = roundtrip("none", 0, w, rows, cols, back);
    printf("\n    rel RMS: e4m3 row %.4f%% block %.4f%%, e5m2 row %.4f%% block %.4f%%, bf16 %.4f%%, none %g ",
           100 * e4, 100 * e4b, 100 * e5, 100 * e5b, 100 * eb, en);
    CU_ASSERT(e4 > 0.022 && e4 < 0.030);   /* NUMERICS.md §2: ~2.6% */
    CU_ASSERT(e5 > 0.045 && e5 < 0.058);   /* ~5.2% */
    CU_ASSERT(e4b > 0 && e4b <= e4 * 1.001);
    CU_ASSERT(e5b > 0 && e5b <= e5 * 1.001);
    CU_ASSERT(eb > 0.001 && eb < 0.003);   /* bf16: 8 bits of mantissa, ~0.2% */
    CU_ASSERT_EQUAL(en, 0.0);
    free(w);
    free(back);
}

/* Rows whose first 128 columns are 1e5 x louder than the rest: with one scale
 * per row the quiet columns land in E4M3's subnormals; 1x128 blocks keep them
 * at the usual few percent. */
static void test_blocks_keep_quiet_columns(void) {
    const int64_t rows = 64, cols = 1024;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4), *back = malloc(n * 4), *qw = malloc(n * 4), *qb = malloc(n * 4);
    CU_ASSERT_FATAL(w && back && qw && qb);
    qt_fill_gauss(w, n, 1e-6f, 2);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < 128; c++) w[r * cols + c] *= 1e5f;
    CU_ASSERT(roundtrip("fp8_e4m3", 0, w, rows, cols, back) > 0);
    size_t m = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 128; c < cols; c++, m++) { qw[m] = w[r * cols + c]; qb[m] = back[r * cols + c]; }
    double quiet_row = qt_rel_rms(qw, qb, m);
    CU_ASSERT(roundtrip("fp8_e4m3", 128, w, rows, cols, back) > 0);
    m = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 128; c < cols; c++, m++) qb[m] = back[r * cols + c];
    double quiet_blk = qt_rel_rms(qw, qb, m);
    printf("\n    quiet columns: per-row %.2f%%, 1x128 %.2f%% ", 100 * quiet_row, 100 * quiet_blk);
    CU_ASSERT(quiet_row > 0.20);
    CU_ASSERT(quiet_blk < 0.03);
    free(w); free(back); free(qw); free(qb);
}

static void test_zero_rows(void) {
    const int64_t rows = 9, cols = 300;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4), *back = malloc(n * 4), s[9 * 3];
    uint8_t *q = malloc(n);
    CU_ASSERT_FATAL(w && back && q);
    qt_fill_gauss(w, n, 0.1f, 3);
    for (int64_t c = 0; c < cols; c++) w[2 * cols + c] = w[5 * cols + c] = 0.0f;
    for (int64_t c = 128; c < 256; c++) w[7 * cols + c] = -0.0f;    /* one zero block */
    for (int b = 0; b < 2; b++) {
        qt_inst qi = {0};
        CU_ASSERT_EQUAL_FATAL(qt_make("fp8_e5m2", b ? 128 : 0, 0, &qi), ORK_OK);
        CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "z", ORK_F32, w, rows, cols, 0, q, s), ORK_OK);
        int nb = b ? 3 : 1;
        for (int r = 2; r <= 5; r += 3) {
            for (int k = 0; k < nb; k++) CU_ASSERT_EQUAL(s[r * nb + k], 1.0f);
            int nz = 0;
            for (int64_t c = 0; c < cols; c++) nz += q[r * cols + c] != 0;
            CU_ASSERT_EQUAL(nz, 0);
        }
        if (b) CU_ASSERT_EQUAL(s[7 * 3 + 1], 1.0f);
        CU_ASSERT(s[0] > 0 && s[0] != 1.0f);
        CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, s, rows, cols, ORK_F32, back), ORK_OK);
        for (int64_t c = 0; c < cols; c++) CU_ASSERT_EQUAL(back[5 * cols + c], 0.0f);
        qt_free(&qi);
    }
    /* an all-zero tensor */
    memset(w, 0, n * 4);
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("fp8_e4m3", 0, 0, &qi), ORK_OK);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "z", ORK_F32, w, rows, cols, 0, q, s), ORK_OK);
    for (int r = 0; r < rows; r++) CU_ASSERT_EQUAL(s[r], 1.0f);
    qt_free(&qi);
    free(w); free(back); free(q);
}

/* One ERROR line naming the tensor and the global element, for each component
 * and a multi-threaded split (the bad row is in the last thread's range). */
static void test_nonfinite_refused(void) {
    const int64_t rows = 256, cols = 1024;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4);
    uint16_t *wb = malloc(n * 2);
    void *q = malloc(n * 4);
    float *s = malloc((size_t)rows * 8 * 4);
    CU_ASSERT_FATAL(w && wb && q && s);
    qt_fill_gauss(w, n, 0.05f, 4);
    w[200 * cols + 513] = NAN;
    w[230 * cols + 7] = INFINITY;   /* later: not the one reported */
    for (size_t i = 0; i < n; i++) wb[i] = ork_f32_to_bf16(w[i]);
    static const char *const names[] = {"fp8_e4m3", "fp8_e5m2", "bf16", "none"};
    for (int k = 0; k < 4; k++)
        for (int in = 0; in < 2; in++) {
            qt_inst qi = {0};
            qt_keys keys = {k < 2 ? 128 : 0, 0, 0, k == 3 && in ? "bf16" : NULL, NULL};
            CU_ASSERT_EQUAL_FATAL(qt_make_keys(names[k], &keys, &qi), ORK_OK);
            qt_clear_log();
            ork_status st = qi.vt->quantize(qi.self, "double_blocks.3.img_mlp.0.weight", in ? ORK_BF16 : ORK_F32,
                                            in ? (const void *)wb : (const void *)w, rows, cols, 4, q, s);
            CU_ASSERT_EQUAL(st, ORK_E_NUMERIC);
            CU_ASSERT_EQUAL(qt_nlines, 1);
            CU_ASSERT_EQUAL(qt_nerrors, 1);
            CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "double_blocks.3.img_mlp.0.weight"));
            CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "NaN at [200, 513]"));
            CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "element 205313"));
            if (!strstr(qt_lines[0], "NaN at [200, 513]")) printf("\n    got: %s ", qt_lines[0]);
            qt_free(&qi);
        }
    /* -Inf alone, f16 input, per-row e4m3 */
    w[200 * cols + 513] = 1.0f;
    w[230 * cols + 7] = -INFINITY;
    for (size_t i = 0; i < n; i++) wb[i] = ork_f32_to_f16(w[i]);
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("fp8_e4m3", 0, 0, &qi), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "x", ORK_F16, wb, rows, cols, 0, q, s), ORK_E_NUMERIC);
    CU_ASSERT_EQUAL(qt_nlines, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "-Inf at [230, 7]"));
    qt_free(&qi);
    /* bf16 component: a finite f32 past bf16's max */
    w[230 * cols + 7] = 3.4e38f;
    CU_ASSERT_EQUAL_FATAL(qt_make("bf16", 0, 0, &qi), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "big", ORK_F32, w, rows, cols, 0, q, s), ORK_E_NUMERIC);
    CU_ASSERT_EQUAL(qt_nlines, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "overflows bf16"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "[230, 7]"));
    qt_free(&qi);
    free(w); free(wb); free(q); free(s);
}

/* Weights that exercise every rounding path: Gaussian rows at scales 2^-span..2^span,
 * exact ties of both formats, subnormal-bound values, a huge outlier. */
static void fill_hard(float *w, int64_t rows, int64_t cols, uint64_t seed, int span) {
    qt_rng r = {seed};
    for (int64_t i = 0; i < rows; i++) {
        float sc = ldexpf(1.0f, (int)(qt_next(&r) % (uint64_t)(2 * span + 1)) - span);
        for (int64_t c = 0; c < cols; c++) {
            float v = sc * qt_gauss(&r);
            uint64_t k = qt_next(&r) % 16;
            if (k == 0) v = sc * (1.0f + 0x1p-4f) * ((c & 1) ? -1 : 1);        /* e4m3 tie */
            else if (k == 1) v = sc * (1.0f + 0x1p-3f);                       /* e5m2 tie */
            else if (k == 2) v = sc * 1e-5f * qt_gauss(&r);                    /* deep subnormal */
            w[i * cols + c] = v;
        }
        if (i % 7 == 3) w[i * cols + (int64_t)(qt_next(&r) % (uint64_t)cols)] = sc * 300.0f;
    }
}

static void test_bitexact_vs_core(void) {
    const int64_t rows = 300, cols = 1000; /* 1000 = 7 x 128 + 104: a short last block */
    size_t n = (size_t)(rows * cols), ns = (size_t)rows * 8;
    float *w = malloc(n * 4), *s1 = malloc(ns * 4), *s2 = malloc(ns * 4), *d1 = malloc(n * 4), *d2 = malloc(n * 4);
    uint16_t *wh = malloc(n * 2);
    uint8_t *q1 = malloc(n), *q2 = malloc(n);
    CU_ASSERT_FATAL(w && s1 && s2 && d1 && d2 && wh && q1 && q2);
    fill_hard(w, rows, cols, 5, 40);
    for (int in = 0; in < 3; in++) {
        ork_dtype idt = in == 0 ? ORK_F32 : in == 1 ? ORK_BF16 : ORK_F16;
        const void *src = w;
        if (in == 1) { for (size_t i = 0; i < n; i++) wh[i] = ork_f32_to_bf16(w[i]); src = wh; }
        if (in == 2) {                      /* f16's range: scales 2^-6..2^6 */
            fill_hard(d1, rows, cols, 9, 6);
            for (size_t i = 0; i < n; i++) wh[i] = ork_f32_to_f16(d1[i]);
            src = wh;
        }
        for (int f = 0; f < 2; f++)
            for (int b = 0; b < 2; b++) {
                ork_dtype fmt = f ? ORK_F8_E5M2 : ORK_F8_E4M3;
                size_t block = b ? 128 : 0, nsc = (size_t)rows * ork_quant_nblocks((size_t)cols, block);
                qt_inst qi = {0};
                CU_ASSERT_EQUAL_FATAL(qt_make(f ? "fp8_e5m2" : "fp8_e4m3", (int64_t)block, 0, &qi), ORK_OK);
                CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "h", idt, src, rows, cols, 3, q1, s1), ORK_OK);
                CU_ASSERT_EQUAL(ork_quantize_fp8("h", src, idt, (size_t)rows, (size_t)cols, fmt, block, q2, s2, NULL), ORK_OK);
                CU_ASSERT(memcmp(q1, q2, n) == 0);
                CU_ASSERT(memcmp(s1, s2, nsc * 4) == 0);
                for (int o = 0; o < 2; o++) {
                    ork_dtype odt = o ? ORK_BF16 : ORK_F32;
                    size_t ob = n * ork_dtype_size(odt);
                    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q1, s1, rows, cols, odt, d1), ORK_OK);
                    CU_ASSERT_EQUAL(ork_dequantize_fp8(q2, s2, (size_t)rows, (size_t)cols, fmt, block, odt, d2), ORK_OK);
                    CU_ASSERT(memcmp(d1, d2, ob) == 0);
                }
                qt_free(&qi);
            }
    }
    /* bf16 component == ork_f32_to_bf16 (RNE), and its widening back */
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("bf16", 0, 0, &qi), ORK_OK);
    uint16_t *hb = (uint16_t *)d1;
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "h", ORK_F32, w, rows, cols, 0, hb, NULL), ORK_OK);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += hb[i] != ork_f32_to_bf16(w[i]);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, hb, NULL, rows, cols, ORK_F32, d2), ORK_OK);
    for (size_t i = 0, b2 = 0; i < n; i++) b2 += d2[i] != ork_bf16_to_f32(hb[i]), bad = b2;
    CU_ASSERT_EQUAL(bad, 0);
    qt_free(&qi);
    free(w); free(s1); free(s2); free(d1); free(d2); free(wh); free(q1); free(q2);
}

static void test_threads_identical(void) {
    const int64_t rows = 1027, cols = 768; /* 12 x 64Ki elements: up to 12 threads */
    size_t n = (size_t)(rows * cols), ns = (size_t)rows * 6;
    float *w = malloc(n * 4), *s1 = malloc(ns * 4), *s2 = malloc(ns * 4);
    uint8_t *q1 = malloc(n * 2), *q2 = malloc(n * 2);
    CU_ASSERT_FATAL(w && s1 && s2 && q1 && q2);
    fill_hard(w, rows, cols, 6, 40);
    static const char *const names[] = {"fp8_e4m3", "fp8_e5m2", "bf16"};
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 2; b++) {
            qt_inst one = {0}, many = {0};
            CU_ASSERT_EQUAL_FATAL(qt_make(names[k], k < 2 && b ? 128 : 0, 1, &one), ORK_OK); /* threads cap 1 */
            CU_ASSERT_EQUAL_FATAL(qt_make(names[k], k < 2 && b ? 128 : 0, 0, &many), ORK_OK);
            ork_quant_layout l;
            CU_ASSERT_EQUAL(one.vt->layout(one.self, rows, cols, &l), ORK_OK);
            size_t qb = n * ork_dtype_size(l.qdtype);
            memset(q1, 0xAA, qb); memset(q2, 0x55, qb);
            CU_ASSERT_EQUAL(one.vt->quantize(one.self, "t", ORK_F32, w, rows, cols, 16, q1, s1), ORK_OK);
            for (int nt = 0; nt <= 13; nt += 13) {   /* 0: all online CPUs; 13: more than the split allows */
                CU_ASSERT_EQUAL(many.vt->quantize(many.self, "t", ORK_F32, w, rows, cols, nt ? nt : 0, q2, s2), ORK_OK);
                CU_ASSERT(memcmp(q1, q2, qb) == 0);
                if (l.n_scales) CU_ASSERT(memcmp(s1, s2, (size_t)l.n_scales * 4) == 0);
            }
            for (int nt = 2; nt <= 7; nt += 5) {
                memset(q2, 0x11, qb);
                CU_ASSERT_EQUAL(many.vt->quantize(many.self, "t", ORK_F32, w, rows, cols, nt, q2, s2), ORK_OK);
                CU_ASSERT(memcmp(q1, q2, qb) == 0);
            }
            qt_free(&one);
            qt_free(&many);
        }
    free(w); free(s1); free(s2); free(q1); free(q2);
}

static void test_none(void) {
    const int64_t rows = 33, cols = 65;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4), *out = malloc(n * 4);
    uint16_t *wb = malloc(n * 2), *ob = malloc(n * 2);
    CU_ASSERT_FATAL(w && out && wb && ob);
    fill_hard(w, rows, cols, 7, 40);
    for (size_t i = 0; i < n; i++) wb[i] = ork_f32_to_bf16(w[i]);
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("none", 0, 0, &qi), ORK_OK);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "n", ORK_F32, w, rows, cols, 0, out, NULL), ORK_OK);
    CU_ASSERT(memcmp(w, out, n * 4) == 0);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "n", ORK_BF16, wb, rows, cols, 0, out, NULL), ORK_OK);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != ork_bf16_to_f32(wb[i]);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, w, NULL, rows, cols, ORK_BF16, ob), ORK_OK);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += ob[i] != ork_f32_to_bf16(w[i]);
    CU_ASSERT_EQUAL(bad, 0);
    qt_free(&qi);
    qt_keys k = {0, 0, 0, "bf16", NULL};
    CU_ASSERT_EQUAL_FATAL(qt_make_keys("none", &k, &qi), ORK_OK);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "n", ORK_BF16, wb, rows, cols, 0, ob, NULL), ORK_OK);
    CU_ASSERT(memcmp(wb, ob, n * 2) == 0);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "n", ORK_F32, w, rows, cols, 0, ob, NULL), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qt_nerrors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "qtype bf16"));
    qt_free(&qi);
    free(w); free(out); free(wb); free(ob);
}

static void test_report_error(void) {
    const int64_t rows = 64, cols = 512;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * 4), *s = malloc((size_t)rows * 4);
    uint8_t *q = malloc(n);
    CU_ASSERT_FATAL(w && s && q);
    qt_fill_gauss(w, n, 0.02f, 8);
    qt_keys k = {0, 0, 1, NULL, NULL};
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make_keys("fp8_e4m3", &k, &qi), ORK_OK);
    double ref = 0;
    CU_ASSERT_EQUAL(ork_quantize_fp8("r", w, ORK_F32, (size_t)rows, (size_t)cols, ORK_F8_E4M3, 0, q, s, &ref), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "blk.w", ORK_F32, w, rows, cols, 0, q, s), ORK_OK);
    CU_ASSERT_EQUAL(qt_nlines, 1);
    CU_ASSERT_EQUAL(qt_nerrors, 0);
    char want[64];
    snprintf(want, sizeof want, "relative RMS error %.3f%%", 100 * ref);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "blk.w [64 x 512]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], want));
    qt_free(&qi);
    free(w); free(s); free(q);
}

static void test_malformed_args(void) {
    float w[4 * 8] = {0}, s[4] = {0}, out[4 * 8];
    uint8_t q[4 * 8];
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("fp8_e4m3", 0, 0, &qi), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "m", ORK_F8_E4M3, w, 4, 8, 0, q, s), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "m", ORK_I32, w, 4, 8, 0, q, s), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "m", ORK_F32, w, 4, 8, 0, q, NULL), ORK_E_INVALID);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "m", ORK_F32, NULL, 4, 8, 0, q, s), ORK_E_INVALID);
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, "m", ORK_F32, w, -4, 8, 0, q, s), ORK_E_INVALID);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, s, 4, 8, ORK_F16, out), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, NULL, 4, 8, ORK_F32, out), ORK_E_INVALID);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, (ork_device)7, NULL, q, s, 4, 8, ORK_F32, out), ORK_E_INVALID);
    CU_ASSERT_EQUAL(qt_nerrors, 8);                      /* one line per refusal */
    CU_ASSERT_EQUAL(qi.vt->quantize(qi.self, NULL, ORK_F32, w, 0, 8, 0, NULL, NULL), ORK_OK); /* empty */
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, NULL, NULL, 4, 0, ORK_F32, NULL), ORK_OK);
#ifndef ORAKUL_HAVE_CUDA
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CUDA, NULL, q, s, 4, 8, ORK_BF16, out), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qt_nerrors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(qt_lines[0], "without CUDA"));
#endif
    qt_free(&qi);
}

/* fp8_gemm (model.quantize_kwargs): auto | dequant | native on the fp8 components only;
 * the plugin refuses other values and native with block scales; the graph
 * refuses native on a backend without it (here: the CPU) with one line, and
 * ORK_FP8_GEMM overrides the configured mode. */
static void test_fp8_gemm_key(void) {
    const ork_component *c = ork_registry_find(qt_reg, ORK_KIND_QUANT, "fp8_e5m2")->c;
    int seen = 0;
    for (const ork_param *p = c->params; p->key; p++)
        if (!strcmp(p->key, "fp8_gemm")) {
            seen = 1;
            CU_ASSERT_EQUAL(p->type, ORK_PARAM_STRING);
            CU_ASSERT_STRING_EQUAL(p->def, "auto"); /* native where the device allows it (#31) */
            CU_ASSERT_STRING_EQUAL(p->choices, "auto|dequant|native");
        }
    CU_ASSERT(seen);
    for (const ork_param *p = ork_registry_find(qt_reg, ORK_KIND_QUANT, "bf16")->c->params; p->key; p++)
        CU_ASSERT(strcmp(p->key, "fp8_gemm") != 0);
    qt_inst q = {0};
    qt_keys k = {0, 0, 0, NULL, "native"};
    CU_ASSERT_EQUAL(qt_make_keys("fp8_e4m3", &k, &q), ORK_OK);
    qt_free(&q);
    k.block_size = 128;
    qt_clear_log();
    CU_ASSERT_EQUAL(qt_make_keys("fp8_e4m3", &k, &q), ORK_E_CONFIG);
    CU_ASSERT(qt_nerrors == 1 && strstr(qt_lines[0], "fp8_gemm") && strstr(qt_lines[0], "block_size"));
    k.fp8_gemm = "auto"; /* auto takes block scales (the core picks dequant for them) */
    qt_clear_log();
    CU_ASSERT_EQUAL(qt_make_keys("fp8_e4m3", &k, &q), ORK_OK);
    CU_ASSERT_EQUAL(qt_nlines, 0);
    qt_free(&q);
    k.block_size = 0;
    k.fp8_gemm = "fast";
    qt_clear_log();
    CU_ASSERT_EQUAL(qt_make_keys("fp8_e5m2", &k, &q), ORK_E_CONFIG);
    CU_ASSERT(qt_nerrors == 1 && strstr(qt_lines[0], "'fast'"));
    CU_ASSERT_PTR_NULL(q.self);

    ork_alloc *a;
    ork_graph *g;
    CU_ASSERT_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a) == ORK_OK);
    CU_ASSERT_FATAL(ork_graph_create(ork_cpu_backend(), a, NULL, &g) == ORK_OK);
    unsetenv("ORK_FP8_GEMM");
    CU_ASSERT_EQUAL(ork_graph_set_fp8_gemm(g, ORK_FP8_GEMM_DEQUANT, "k"), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(ork_graph_set_fp8_gemm(g, ORK_FP8_GEMM_NATIVE, "model.quantize_kwargs.fp8_gemm"), ORK_E_CONFIG);
    CU_ASSERT(qt_nerrors == 1 && strstr(qt_lines[0], "model.quantize_kwargs.fp8_gemm: native"));
    CU_ASSERT_EQUAL(g->fp8_gemm, ORK_FP8_GEMM_DEQUANT);
    setenv("ORK_FP8_GEMM", "dequant", 1);
    CU_ASSERT_EQUAL(ork_graph_set_fp8_gemm(g, ORK_FP8_GEMM_NATIVE, "k"), ORK_OK);
    CU_ASSERT_EQUAL(g->fp8_gemm, ORK_FP8_GEMM_DEQUANT);
    setenv("ORK_FP8_GEMM", "native", 1);
    qt_clear_log();
    CU_ASSERT_EQUAL(ork_graph_set_fp8_gemm(g, ORK_FP8_GEMM_DEQUANT, "k"), ORK_E_CONFIG);
    CU_ASSERT(qt_nerrors == 1 && strstr(qt_lines[0], "ORK_FP8_GEMM: native"));
    setenv("ORK_FP8_GEMM", "yes", 1);
    qt_clear_log();
    CU_ASSERT_EQUAL(ork_graph_set_fp8_gemm(g, ORK_FP8_GEMM_DEQUANT, "k"), ORK_E_CONFIG);
    CU_ASSERT(qt_nerrors == 1 && strstr(qt_lines[0], "'yes'"));
    unsetenv("ORK_FP8_GEMM");
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
}

static const ork_test_case cases[] = {
    {"aliases resolve to the four components", test_aliases},
    {"layouts: storage dtype and scale counts", test_layouts},
    {"bad keys refused with one line", test_bad_keys},
    {"Gaussian error: E4M3 ~2.6%, E5M2 ~5.2%, blocks <= rows", test_error_gaussian},
    {"1x128 blocks keep quiet columns", test_blocks_keep_quiet_columns},
    {"zero rows and blocks: scale 1, codes 0", test_zero_rows},
    {"NaN/Inf refused with one line naming tensor and element", test_nonfinite_refused},
    {"bit-exact with core/numerics (quantize, dequantize, bf16)", test_bitexact_vs_core},
    {"any thread count gives the same bytes", test_threads_identical},
    {"none: exact copies, refuses rounding", test_none},
    {"report_error logs the reference error", test_report_error},
    {"malformed arguments", test_malformed_args},
    {"fp8_gemm: key, refusals, ORK_FP8_GEMM", test_fp8_gemm_key},
    {NULL, NULL},
};

ORK_TEST_MAIN("quant", qt_init, qt_clean, cases)
