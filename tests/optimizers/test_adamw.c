/* test_adamw.c — the fp32-state AdamW (torch semantics) on the CPU: against a
 * double-precision evaluation of torch's _single_tensor_adamw, the decay-before-
 * update order, bf16 params, and argument checks. */
#include "ork_test.h"

#include "../../plugins/optimizers/adamw/adamw_math.h"
#include "opt_test_util.h"

static void test_vs_double(void) {
    enum { N = 1000 };
    ork_adamw_hparams h = ork_adamw_hparams_default();
    h.eps = 1e-6f;
    static float p[N], g[N], st[2 * N];
    static double pd[N], md[N], vd[N];
    ork_trng r = {1};
    ork_trng_randn(&r, p, N, 0.1f);
    for (int i = 0; i < N; i++) pd[i] = p[i];
    double worst = 0.0;
    for (int t = 1; t <= 30; t++) {
        ork_trng_randn(&r, g, N, 0.01f);
        CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, t, p, ORK_F32, g, ORK_F32, st, N), ORK_OK);
        double bc1 = 1 - pow(h.beta1, t), bc2 = 1 - pow(h.beta2, t);
        for (int i = 0; i < N; i++) {
            pd[i] *= 1 - (double)h.lr * h.weight_decay;
            md[i] += (1 - (double)h.beta1) * (g[i] - md[i]);
            vd[i] = vd[i] * h.beta2 + (1 - (double)h.beta2) * g[i] * g[i];
            pd[i] -= h.lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + h.eps);
            double e = fabs(pd[i] - p[i]);
            if (e > worst) worst = e;
        }
    }
    CU_ASSERT(worst < 1e-6);
    for (int i = 0; i < N; i++) {
        CU_ASSERT(ork_close(st[i], md[i], 1e-9, 1e-4));
        CU_ASSERT(ork_close(st[N + i], vd[i], 1e-12, 1e-4));
    }
}

/* Zero gradient on zero state: only the decay acts, p * (1 - lr*wd). */
static void test_decay_first(void) {
    ork_adamw_hparams h = ork_adamw_hparams_default();
    h.weight_decay = 0.5f;
    float p[2] = {2.0f, -1.0f}, g[2] = {0.0f, 0.0f}, st[4] = {0};
    CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, 1, p, ORK_F32, g, ORK_F32, st, 2), ORK_OK);
    CU_ASSERT_EQUAL(p[0], 2.0f * (float)(1.0 - (double)1e-3f * 0.5));
    CU_ASSERT_EQUAL(p[1], -1.0f * (float)(1.0 - (double)1e-3f * 0.5));
}

static void test_bf16(void) {
    enum { N = 256 };
    ork_adamw_hparams h = ork_adamw_hparams_default();
    float pf[N], g[N], s1[2 * N] = {0}, s2[2 * N] = {0};
    uint16_t pb[N];
    ork_trng r = {2};
    ork_trng_randn(&r, pf, N, 0.1f);
    ork_trng_randn(&r, g, N, 0.01f);
    for (int i = 0; i < N; i++) { pb[i] = ork_f32_to_bf16_rne(pf[i]); pf[i] = ork_bf16_to_f32(pb[i]); }
    ork_adamw_step_cpu(&h, 1, pf, ORK_F32, g, ORK_F32, s1, N);
    ork_adamw_step_cpu(&h, 1, pb, ORK_BF16, g, ORK_F32, s2, N);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= pb[i] == ork_f32_to_bf16_rne(pf[i]); /* one RNE of the f32 result */
    CU_ASSERT(ok);
    CU_ASSERT(memcmp(s1, s2, sizeof s1) == 0);
}

static void test_invalid(void) {
    ork_adamw_hparams h = ork_adamw_hparams_default();
    float p[4] = {0}, g[4] = {0}, st[8] = {0};
    CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, 0, p, ORK_F32, g, ORK_F32, st, 4), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, 1, p, ORK_F8_E4M3, g, ORK_F32, st, 4), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, 1, p, ORK_F32, g, ORK_F32, NULL, 4), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw_step_cpu(&h, 1, p, ORK_F32, g, ORK_F32, st, -1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_adamw_state_size(10), 80);
}

static const ork_test_case cases[] = {
    {"matches torch AdamW algebra in double", test_vs_double},
    {"weight decay before the update", test_decay_first},
    {"bf16 params", test_bf16},
    {"invalid arguments", test_invalid},
    {NULL, NULL},
};

ORK_TEST_MAIN("adamw", NULL, NULL, cases)
