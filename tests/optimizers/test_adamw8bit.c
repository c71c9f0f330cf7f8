/* test_adamw8bit.c — AdamW-8bit on the CPU: code books pinned against the numpy
 * re-derivation of bnb's create_dynamic_map, the quantizer, state layout, bnb's
 * own tolerance harness (test_optim.py test_optimizer8bit) against our fp32
 * AdamW, free-running drift, NaN/Inf guard, the small-tensor path, bf16
 * parameters and save/restore of state bytes. */
#include "ork_test.h"

#include "../../plugins/optimizers/adamw/adamw_math.h"
#include "../../plugins/optimizers/adamw/adamw8bit_math.h"
#include "dynamic_map_fixture.h"
#include "opt_test_util.h"

static ork_adamw8bit_maps g_maps;

static int init(void) { ork_adamw8bit_maps_init(&g_maps, 0); return 0; }

static int bits_equal(const float *a, const unsigned *fix) {
    for (int i = 0; i < 256; i++)
        if (ork_f32_bits(a[i]) != fix[i]) { printf("  entry %d differs\n", i); return 0; }
    return 1;
}

static void test_maps_pinned(void) {
    CU_ASSERT(bits_equal(g_maps.signed_map, ork_fixture_map_signed));
    CU_ASSERT(bits_equal(g_maps.unsigned_map, ork_fixture_map_unsigned));
    ork_adamw8bit_maps f;
    ork_adamw8bit_maps_init(&f, 1);
    CU_ASSERT(bits_equal(f.signed_map, ork_fixture_map_signed_fused));
    CU_ASSERT(bits_equal(f.unsigned_map, ork_fixture_map_unsigned_fused));
    const float *s = g_maps.signed_map, *u = g_maps.unsigned_map;
    CU_ASSERT_EQUAL(ork_f32_bits(s[0]), 0xbf7e3333u); /* -0.99296874 */
    CU_ASSERT(s[127] == 0.0f && !signbit(s[127]));
    CU_ASSERT(s[255] == 1.0f && u[255] == 1.0f && u[0] == 0.0f);
    CU_ASSERT(s[126] == -s[128] && s[128] > 5.4e-7f && s[128] < 5.6e-7f);
    for (int i = 1; i < 256; i++) CU_ASSERT(s[i] > s[i - 1] && u[i] > u[i - 1]);
    for (int i = 0; i < 127; i++) CU_ASSERT(s[i] == -s[254 - i]); /* symmetric, no -1.0 */
}

static void test_quantizer(void) {
    const float *s = g_maps.signed_map, *u = g_maps.unsigned_map;
    for (int k = 0; k < 256; k++) {
        CU_ASSERT_EQUAL(ork_q8_quantize_m(s, s[k], 1.0f), k);
        CU_ASSERT_EQUAL(ork_q8_quantize_v(u, u[k], 1.0f), k);
    }
    /* nearest code for random x */
    ork_trng r = {7};
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        float x = (float)(ork_trng_unif(&r) * 2.0 - 1.0);
        int c = ork_q8_quantize(s, x, 1);
        float d = fabsf(s[c] - x);
        if ((c > 0 && fabsf(s[c - 1] - x) < d) || (c < 255 && fabsf(s[c + 1] - x) < d)) bad++;
        float y = fabsf(x);
        c = ork_q8_quantize(u, y, 0);
        d = fabsf(u[c] - y);
        if ((c > 0 && fabsf(u[c - 1] - y) < d) || (c < 255 && fabsf(u[c + 1] - y) < d)) bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* sign fix: a tiny negative m must not land on +0 (index 127) */
    CU_ASSERT_EQUAL(ork_q8_quantize_m(s, -1e-9f, 1.0f), 126);
    CU_ASSERT_EQUAL(ork_q8_quantize_m(s, 1e-9f, 1.0f), 127); /* +0: same sign, kept */
    /* midpoint: just above the midpoint of codes 200/201 goes up */
    float mid = (s[200] + s[201]) * 0.5f;
    CU_ASSERT_EQUAL(ork_q8_quantize(s, nextafterf(mid, 2.0f), 1), 201);
    CU_ASSERT_EQUAL(ork_q8_quantize(s, nextafterf(mid, -2.0f), 1), 200);
    /* all-zero block: 0/0 = NaN -> code 0, sign fix wraps m to 255 (bnb's bytes) */
    CU_ASSERT_EQUAL(ork_q8_quantize_m(s, 0.0f, 0.0f), 255);
    CU_ASSERT_EQUAL(ork_q8_quantize_v(u, 0.0f, 0.0f), 0);
}

static void test_state_layout(void) {
    CU_ASSERT_EQUAL(ork_adamw8bit_state_size(0), 0);
    CU_ASSERT_EQUAL(ork_adamw8bit_state_size(4095), 4095 * 8);
    CU_ASSERT_EQUAL(ork_adamw8bit_state_size(4096), 16 * 8 + 4096 * 2);
    CU_ASSERT_EQUAL(ork_adamw8bit_state_size(4097), 17 * 8 + 4097 * 2);
    static uint8_t buf[17 * 8 + 4097 * 2];
    ork_adamw8bit_view v;
    ork_adamw8bit_view_of(buf, 4097, &v);
    CU_ASSERT(v.m32 == NULL && v.nblocks == 17);
    CU_ASSERT((uint8_t *)v.absmax_v == buf + 68 && v.code_m == buf + 136 &&
              v.code_v == buf + 136 + 4097);
    ork_adamw8bit_view_of(buf, 100, &v);
    CU_ASSERT((uint8_t *)v.m32 == buf && v.v32 == v.m32 + 100 && v.code_m == NULL);
}

static void test_invalid(void) {
    ork_adamw_hparams h = ork_adamw_hparams_default();
    float p[8] = {0}, g[8] = {0};
    float st[16] = {0};
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 0, p, ORK_F32, g, ORK_F32, st, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F16, g, ORK_F32, st, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F32, g, ORK_U8, st, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F32, NULL, ORK_F32, st, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F32, g, ORK_F32, st, 0), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(NULL, &h, 1, p, ORK_F32, g, ORK_F32, st, 8), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F32, g, ORK_F32, st, 8), ORK_OK);
}

/* bnb's harness: p = randn*0.1, steps of g = randn*0.01; after each step count
 * state elements outside isclose(atol 3e-3, rtol 1e-3) (< 20 each for m and v),
 * parameter mean abs err < 6e-5, mean rel err < 6e-4; then re-sync as bnb does:
 * the 8-bit params take the fp32 reference's, the reference's m, v take the
 * dequantized 8-bit state. resync = 0: free-running, drift only reported. */
static void harness(int64_t numel, int steps, int resync, double *max_abs, double *max_rel,
                    int *max_bad) {
    ork_adamw_hparams h = ork_adamw_hparams_default(); /* wd 1e-2, eps 1e-8 */
    float *p8 = malloc(numel * 4), *p32 = malloc(numel * 4), *g = malloc(numel * 4);
    float *m = malloc(numel * 4), *v = malloc(numel * 4);
    void *st8 = calloc(1, ork_adamw8bit_state_size(numel));
    float *st32 = calloc(1, ork_adamw_state_size(numel));
    ork_trng r = {(uint64_t)numel};
    ork_trng_randn(&r, p32, numel, 0.1f);
    memcpy(p8, p32, numel * 4);
    *max_abs = *max_rel = 0.0;
    *max_bad = 0;
    for (int t = 1; t <= steps; t++) {
        ork_trng_randn(&r, g, numel, 0.01f);
        CU_ASSERT_EQUAL_FATAL(ork_adamw_step_cpu(&h, t, p32, ORK_F32, g, ORK_F32, st32, numel), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(
            ork_adamw8bit_step_cpu(&g_maps, &h, t, p8, ORK_F32, g, ORK_F32, st8, numel), ORK_OK);
        ork_adamw8bit_dequant(&g_maps, st8, numel, m, v);
        int bad_m = 0, bad_v = 0;
        double err = 0.0, rel = 0.0;
        for (int64_t i = 0; i < numel; i++) {
            bad_m += !ork_close(st32[i], m[i], 3e-3, 1e-3);
            bad_v += !ork_close(st32[numel + i], v[i], 3e-3, 1e-3);
            double e = fabs((double)p32[i] - p8[i]);
            err += e;
            rel += e / (fabs((double)p32[i]) + 1e-9);
        }
        err /= (double)numel;
        rel /= (double)numel;
        if (err > *max_abs) *max_abs = err;
        if (rel > *max_rel) *max_rel = rel;
        if (bad_m > *max_bad) *max_bad = bad_m;
        if (bad_v > *max_bad) *max_bad = bad_v;
        if (resync) {
            memcpy(p8, p32, numel * 4);
            memcpy(st32, m, numel * 4);
            memcpy(st32 + numel, v, numel * 4);
        }
    }
    free(p8); free(p32); free(g); free(m); free(v); free(st8); free(st32);
}

static void test_bnb_harness(void) {
    static const int64_t dim2[] = {32, 1024, 4097};
    for (int k = 0; k < 3; k++) {
        double ea, er;
        int bad;
        harness(1024 * dim2[k], 50, 1, &ea, &er, &bad);
        printf("\n  1024x%lld re-synced, worst step: mean abs err %.3g (< 6e-5), mean rel err %.3g "
               "(< 6e-4), state elements not close %d (< 20)", (long long)dim2[k], ea, er, bad);
        CU_ASSERT(ea < 6e-5);
        CU_ASSERT(er < 6e-4);
        CU_ASSERT(bad < 20);
    }
    printf("\n");
}

static void test_free_running(void) {
    double ea, er;
    int bad;
    harness(512 * 1024, 100, 0, &ea, &er, &bad);
    /* rel err is dominated by params that pass near 0; abs err is the measure */
    printf("\n  512x1024 free-running 100 steps, worst step: param mean abs err %.3g (params "
           "move ~1e-3/step), mean rel err %.3g, state elements not close %d\n", ea, er, bad);
    CU_ASSERT(ea < 5e-4);
}

static void test_nan_guard(void) {
    static const int64_t sizes[] = {1000, 8192};
    for (int k = 0; k < 2; k++) {
        int64_t n = sizes[k];
        ork_adamw_hparams h = ork_adamw_hparams_default();
        float *p = malloc(n * 4), *p0 = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4),
              *v = malloc(n * 4);
        void *st = calloc(1, ork_adamw8bit_state_size(n));
        ork_trng r = {3};
        ork_trng_randn(&r, p, n, 0.1f);
        for (int t = 1; t <= 3; t++) {
            ork_trng_randn(&r, g, n, 0.01f);
            if (t == 3) { g[5] = NAN; g[300] = INFINITY; g[301] = -INFINITY; }
            memcpy(p0, p, n * 4);
            CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, t, p, ORK_F32, g, ORK_F32, st, n), ORK_OK);
        }
        ork_adamw8bit_dequant(&g_maps, st, n, m, v);
        CU_ASSERT(p[5] == p0[5] && p[300] == p0[300] && p[301] == p0[301]);
        CU_ASSERT(m[5] == 0.0f && v[5] == 0.0f && m[300] == 0.0f && v[301] == 0.0f);
        CU_ASSERT(p[6] != p0[6] && m[6] != 0.0f && v[6] != 0.0f);
        int finite = 1;
        for (int64_t i = 0; i < n; i++) finite &= isfinite(p[i]) && isfinite(m[i]) && isfinite(v[i]);
        CU_ASSERT(finite);
        free(p); free(p0); free(g); free(m); free(v); free(st);
    }
}

/* Small tensors keep fp32 m, v with bnb's 32-bit formula: check against a double
 * evaluation of the same algebra (decay after the update). */
static void test_small_path(void) {
    enum { N = 100 };
    ork_adamw_hparams h = ork_adamw_hparams_default();
    h.eps = 1e-6f;
    float p[N], g[N];
    double pd[N], md[N] = {0}, vd[N] = {0};
    float st[2 * N] = {0};
    CU_ASSERT_EQUAL(ork_adamw8bit_state_size(N), sizeof st);
    ork_trng r = {11};
    ork_trng_randn(&r, p, N, 0.1f);
    for (int i = 0; i < N; i++) pd[i] = p[i];
    double worst = 0.0;
    for (int t = 1; t <= 20; t++) {
        ork_trng_randn(&r, g, N, 0.01f);
        CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, t, p, ORK_F32, g, ORK_F32, st, N), ORK_OK);
        double c1 = 1 - pow(h.beta1, t), c2 = sqrt(1 - pow(h.beta2, t));
        for (int i = 0; i < N; i++) {
            md[i] = md[i] * h.beta1 + (1 - (double)h.beta1) * g[i];
            vd[i] = vd[i] * h.beta2 + (1 - (double)h.beta2) * g[i] * g[i];
            pd[i] += -h.lr * c2 / c1 * md[i] / (sqrt(vd[i]) + c2 * h.eps);
            pd[i] *= 1 - (double)h.lr * h.weight_decay;
            double e = fabs(pd[i] - p[i]);
            if (e > worst) worst = e;
            CU_ASSERT(ork_close(st[i], md[i], 1e-9, 1e-4));
            CU_ASSERT(ork_close(st[N + i], vd[i], 1e-12, 1e-4));
        }
    }
    CU_ASSERT(worst < 1e-6);
}

/* Partial last block: bnb pads with code_m 128, so the new absmax_m picks up
 * map_signed[128] * old_absmax * beta1 even when the real elements are 0. */
static void test_partial_block_padding(void) {
    int64_t n = 4097;
    ork_adamw_hparams h = ork_adamw_hparams_default();
    float *p = calloc(n, 4), *g = calloc(n, 4);
    void *st = calloc(1, ork_adamw8bit_state_size(n));
    ork_adamw8bit_view s;
    ork_adamw8bit_view_of(st, n, &s);
    s.absmax_m[16] = 1.0f;
    s.code_m[4096] = 127; /* m = 0 */
    CU_ASSERT_EQUAL(ork_adamw8bit_step_cpu(&g_maps, &h, 1, p, ORK_F32, g, ORK_F32, st, n), ORK_OK);
    CU_ASSERT_EQUAL(ork_f32_bits(s.absmax_m[16]), ork_f32_bits(g_maps.signed_map[128] * 1.0f * 0.9f));
    CU_ASSERT_EQUAL(s.absmax_m[0], 0.0f); /* full all-zero block: absmax 0 */
    CU_ASSERT_EQUAL(s.code_m[0], 255);    /* bnb's bytes for 0/0 (dequantizes to 0) */
    free(p); free(g); free(st);
}

/* Saving the state bytes and params, then continuing from a copy at another
 * address, gives bit-identical results. */
static void test_save_restore(void) {
    int64_t n = 5000;
    size_t sb = ork_adamw8bit_state_size(n);
    ork_adamw_hparams h = ork_adamw_hparams_default();
    float *p = malloc(n * 4), *g = malloc(n * 4 * 20), *pa = malloc(n * 4), *ps = malloc(n * 4);
    uint8_t *st = calloc(1, sb), *sa = malloc(sb), *st2 = malloc(sb + 4);
    ork_trng r = {5};
    ork_trng_randn(&r, p, n, 0.1f);
    ork_trng_randn(&r, g, n * 20, 0.01f);
    for (int t = 1; t <= 10; t++)
        ork_adamw8bit_step_cpu(&g_maps, &h, t, p, ORK_F32, g + (t - 1) * n, ORK_F32, st, n);
    memcpy(ps, p, n * 4);
    memcpy(st2 + 4, st, sb); /* "saved", restored at another address/alignment */
    for (int t = 11; t <= 20; t++)
        ork_adamw8bit_step_cpu(&g_maps, &h, t, p, ORK_F32, g + (t - 1) * n, ORK_F32, st, n);
    memcpy(pa, p, n * 4);
    memcpy(sa, st, sb);
    for (int t = 11; t <= 20; t++)
        ork_adamw8bit_step_cpu(&g_maps, &h, t, ps, ORK_F32, g + (t - 1) * n, ORK_F32, st2 + 4, n);
    CU_ASSERT(memcmp(pa, ps, n * 4) == 0);
    CU_ASSERT(memcmp(sa, st2 + 4, sb) == 0);
    free(p); free(g); free(pa); free(ps); free(st); free(sa); free(st2);
}

/* bf16 params: RNE follows bnb (round after the update and again after the
 * decay); bf16 grads act as the f32 values they hold; stochastic rounding is
 * reproducible and unbiased. */
static void test_bf16_params(void) {
    int64_t n = 4096;
    size_t sb = ork_adamw8bit_state_size(n);
    ork_adamw_hparams h = ork_adamw_hparams_default(), h0 = h;
    h0.weight_decay = 0.0f;
    float *pf = malloc(n * 4), *g = malloc(n * 4), *gr = malloc(n * 4);
    uint16_t *pb = malloc(n * 2), *pb2 = malloc(n * 2), *gb = malloc(n * 2);
    void *s1 = calloc(1, sb), *s2 = calloc(1, sb);
    ork_trng r = {9};
    ork_trng_randn(&r, pf, n, 0.1f);
    ork_trng_randn(&r, g, n, 0.01f);
    for (int64_t i = 0; i < n; i++) {
        pb[i] = pb2[i] = ork_f32_to_bf16_rne(pf[i]);
        pf[i] = ork_bf16_to_f32(pb[i]);
        gb[i] = ork_f32_to_bf16_rne(g[i]);
        gr[i] = ork_bf16_to_f32(gb[i]);
    }
    /* f32 params without decay give p + update; bnb's bf16 result is
     * rne(rne(p + update) * (1 - lr*wd)) */
    ork_adamw8bit_step_cpu(&g_maps, &h0, 1, pf, ORK_F32, g, ORK_F32, s1, n);
    ork_adamw8bit_step_cpu(&g_maps, &h, 1, pb, ORK_BF16, g, ORK_F32, s2, n);
    float decay = 1.0f - h.lr * h.weight_decay;
    int exact = 1;
    for (int64_t i = 0; i < n; i++)
        exact &= pb[i] == ork_f32_to_bf16_rne(ork_bf16_to_f32(ork_f32_to_bf16_rne(pf[i])) * decay);
    CU_ASSERT(exact);
    CU_ASSERT(memcmp(s1, s2, sb) == 0); /* the state does not depend on the param dtype */
    /* bf16 grads == the f32 grads they hold */
    memset(s1, 0, sb);
    memset(s2, 0, sb);
    memcpy(pb, pb2, n * 2);
    ork_adamw8bit_step_cpu(&g_maps, &h, 1, pb, ORK_BF16, gb, ORK_BF16, s1, n);
    ork_adamw8bit_step_cpu(&g_maps, &h, 1, pb2, ORK_BF16, gr, ORK_F32, s2, n);
    CU_ASSERT(memcmp(s1, s2, sb) == 0);
    CU_ASSERT(memcmp(pb, pb2, n * 2) == 0);
    /* stochastic rounding: reproducible per (seed, step, index), unbiased */
    double acc = 0.0;
    float x = 1.0f + 0.3f * 0.0078125f; /* 30% of a bf16 ulp above 1.0 */
    for (int64_t i = 0; i < 100000; i++)
        acc += ork_bf16_to_f32(ork_f32_to_bf16_sr(x, ork_sr_hash(1, 1, i)));
    CU_ASSERT(fabs(acc / 100000 - x) < 2e-4);
    CU_ASSERT_EQUAL(ork_sr_hash(1, 2, 3), ork_sr_hash(1, 2, 3));
    CU_ASSERT(ork_sr_hash(1, 2, 3) != ork_sr_hash(2, 2, 3) && ork_sr_hash(1, 2, 3) != ork_sr_hash(1, 3, 3));
    /* with SR, an update far below the bf16 ulp of 1.0 still moves some params */
    h.bf16_stochastic = 1;
    h.seed = 42;
    memset(s1, 0, sb);
    for (int64_t i = 0; i < n; i++) pb[i] = ork_f32_to_bf16_rne(1.0f);
    ork_adamw8bit_step_cpu(&g_maps, &h, 1, pb, ORK_BF16, g, ORK_F32, s1, n);
    int moved = 0;
    for (int64_t i = 0; i < n; i++) moved += pb[i] != ork_f32_to_bf16_rne(1.0f);
    printf("\n  SR: %d of %d bf16 params at 1.0 moved by a sub-ulp step\n", moved, (int)n);
    CU_ASSERT(moved > 0 && moved < n);
    free(pf); free(g); free(gr); free(pb); free(pb2); free(gb); free(s1); free(s2);
}

static const ork_test_case cases[] = {
    {"code books pinned (fixture from numpy)", test_maps_pinned},
    {"quantizer: nearest code, midpoint, sign fix", test_quantizer},
    {"state layout and size", test_state_layout},
    {"invalid arguments", test_invalid},
    {"bnb harness vs fp32 AdamW, re-synced", test_bnb_harness},
    {"free-running drift", test_free_running},
    {"NaN/Inf gradient guard", test_nan_guard},
    {"small tensor fp32-state path", test_small_path},
    {"partial last block padding (bnb quirk)", test_partial_block_padding},
    {"save/restore state bytes", test_save_restore},
    {"bf16 params and grads", test_bf16_params},
    {NULL, NULL},
};

ORK_TEST_MAIN("adamw8bit", init, NULL, cases)
