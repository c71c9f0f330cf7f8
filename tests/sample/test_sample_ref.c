/* tests/sample/test_sample_ref.c — the sampler (core/train/sample.c) against
 * the independent PyTorch reference (tests/reference/sampler_ref.py, fixture
 * tests/fixtures/sampler_ref.safetensors) on the small FLUX.1 and FLUX.2
 * models of the FLUX tests (tests/fixtures/flux{1,2}_small_bfl.safetensors),
 * on the CPU graph in F32:
 *  - the shifted schedules (FLUX.1 mu from the sequence length, FLUX.2's
 *    empirical mu, none) equal the reference's double values;
 *  - from the fixture's noise, the final latent of 4 Euler steps with the
 *    FLUX.1 shift and guidance 3.5 (3x5 grid), 3 unshifted steps with the
 *    fixture LoRA attached and classifier-free guidance 2.5 against an empty
 *    negative prompt (2x3 grid), and 4 steps with FLUX.2's shift (4x3 grid)
 *    equal the float64 reference;
 *  - the same comparison FAILS with the wrong shift and without the LoRA (the
 *    tolerance is tight enough to see those mistakes);
 *  - the block hooks bracket every block of every forward, the sampler's
 *    allocations ("samples") are freed, and a budget too small for it is
 *    refused with ORK_E_BUDGET and leaks nothing.
 *
 * Tolerance (M = max|ref| of the final latent, per element):
 *     |c - ref| <= 2e-4·M + 1e-3·|ref|
 * Why: the C side runs in F32 what the reference runs in float64 from the
 * same F32 weights, noise and (F32-rounded) timesteps. torch's own float32 run
 * of the same sampler differs from the float64 one by 1.05e-6·M at worst
 * (sampler_ref.py prints it, fixture metadata worst_f32_rel), and a different
 * F32 summation order moves results by the same order, compounded over 3-4
 * steps: ~1e-5·M at most. The bound leaves >= 10x margin; a wrong shift or a
 * missing LoRA moves the latent by >= 1e-2·M (asserted below). */
#include "../flux/flux_test_util.h"

#include "train/sample.h"

#define SAMPLE_A 2e-4
#define SAMPLE_R 1e-3

static ork_st_file *fx;

static int init(void) {
    if (ft_init()) return 1;
    return ork_st_open(FT_FIXTURES "/sampler_ref.safetensors", &fx) != ORK_OK;
}
static int clean(void) {
    ork_st_close(fx);
    return ft_clean();
}

typedef struct scase {
    const char *name, *ckpt;
    int h, w, steps;
    ork_time_shift shift;
    float guidance, cfg;
    int lora;
} scase;

static const scase cases[3] = {
    {"flux1", "flux1_small", 3, 5, 4, ORK_TIME_SHIFT_RESOLUTION, 3.5f, 1.0f, 0},
    {"flux1_lora_cfg", "flux1_small", 2, 3, 3, ORK_TIME_SHIFT_NONE, 1.0f, 2.5f, 1},
    {"flux2", "flux2_small", 4, 3, 4, ORK_TIME_SHIFT_RESOLUTION_STEPS, 2.0f, 1.0f, 0},
};

static float *fx32(const scase *c, const char *what, size_t *n) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", c->name, what);
    return ork_st_find(fx, k) ? ft_f32(fx, k, n) : NULL;
}
static double *fx64(const scase *c, const char *what, size_t *n) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", c->name, what);
    return ft_f64(fx, k, n);
}

/* ---- the schedule ---- */
static void test_schedule(void) {
    for (int i = 0; i < 3; i++) {
        const scase *c = &cases[i];
        size_t n = 0;
        double *ref = fx64(c, "timesteps", &n), ts[16];
        CU_ASSERT_FATAL(ref && n == (size_t)c->steps + 1);
        ork_shift_rule r = ork_shift_default(c->shift);
        ork_sample_schedule(&r, c->steps, (int64_t)c->h * c->w, ts);
        double worst = 0;
        for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(ts[k] - ref[k]));
        printf("\n    %-16s schedule max |c - ref| %.3g", c->name, worst);
        CU_ASSERT(worst <= 1e-12);
        CU_ASSERT(ts[0] == 1.0 && ts[c->steps] == 0.0);
        for (int k = 0; k < c->steps; k++) CU_ASSERT(ts[k + 1] < ts[k]);
        free(ref);
    }
    /* mu: FLUX.1 is linear in the sequence length (0.5 at 256, 1.15 at 4096) */
    ork_shift_rule res = ork_shift_default(ORK_TIME_SHIFT_RESOLUTION), emp = ork_shift_default(ORK_TIME_SHIFT_RESOLUTION_STEPS);
    CU_ASSERT(fabs(ork_shift_mu(&res, 256, 20) - 0.5) < 1e-12);
    CU_ASSERT(fabs(ork_shift_mu(&res, 4096, 20) - 1.15) < 1e-12);
    /* FLUX.2: above 4300 tokens it no longer depends on the steps */
    CU_ASSERT(ork_shift_mu(&emp, 5000, 4) == ork_shift_mu(&emp, 5000, 50));
    printf("\n  ");
}

/* ---- the sampler on the fixture ---- */
typedef struct lora_pair { ork_tensor *down, *up; ork_lora l; } lora_pair;

/* The LoRA of flux1_small.safetensors on its two modules. */
static ork_status attach_lora(ft_model *m, lora_pair lp[2]) {
    ork_st_file *f;
    ORK_TRY(ork_st_open(FT_FIXTURES "/flux1_small.safetensors", &f));
    static const char *const mods[2] = {"double_blocks.0.img_attn.qkv", "single_blocks.0.linear1"};
    ork_status s = ORK_OK;
    for (int i = 0; s == ORK_OK && i < 2; i++) {
        char k[160];
        ork_tensor **dst[2] = {&lp[i].l.down, &lp[i].l.up};
        static const char *const part[2] = {"down", "up"};
        for (int p = 0; s == ORK_OK && p < 2; p++) {
            snprintf(k, sizeof k, "lora.%s.%s", mods[i], part[p]);
            const ork_st_tensor *t = ork_st_find(f, k);
            float *h = ft_f32(f, k, NULL);
            s = t && h ? ork_tensor_new(m->alloc, "lora", ORK_F32, 2, t->shape, 1, dst[p]) : ORK_E_FORMAT;
            if (s == ORK_OK) s = m->g->be->memcpy_h2d(&m->g->k, ork_tensor_data(*dst[p]), h, ork_tensor_nbytes(*dst[p]));
            free(h);
        }
        snprintf(k, sizeof k, "lora.%s.alpha", mods[i]);
        float *a = ft_f32(f, k, NULL);
        if (s == ORK_OK && !a) s = ORK_E_FORMAT;
        if (s == ORK_OK) lp[i].l.scale = a[0] / (float)lp[i].l.down->shape[0];
        free(a);
        snprintf(k, sizeof k, "%s.weight", mods[i]);
        ork_tensor *w = s == ORK_OK ? ork_wstore_find(m->ws, k) : NULL;
        if (s == ORK_OK && !w) s = ORK_E_INVALID;
        if (s == ORK_OK) w->lora = &lp[i].l;
    }
    ork_st_close(f);
    return s;
}

typedef struct counts { int begin, enter, leave, end, depth, bad, visits; } counts;
static ork_status h_begin(void *ctx, const int *order, int n) {
    counts *c = ctx;
    c->begin++;
    c->visits += n;
    for (int i = 0; i < n; i++)
        if (order[i] != i) c->bad++; /* a forward visits the blocks in order */
    return ORK_OK;
}
static ork_status h_enter(void *ctx, int b) {
    counts *c = ctx;
    (void)b;
    c->enter++;
    if (c->depth++ != 0) c->bad++;
    return ORK_OK;
}
static ork_status h_leave(void *ctx, int b) {
    counts *c = ctx;
    (void)b;
    c->leave++;
    if (--c->depth != 0) c->bad++;
    return ORK_OK;
}
static ork_status h_end(void *ctx) { ((counts *)ctx)->end++; return ORK_OK; }

/* Run case c (with the given shift, LoRA on or off); compare against the
 * reference; returns 1 when within tolerance. *rel: max error / M. */
static int run_case(const scase *c, ork_time_shift shift, int use_lora, counts *ct, double *rel) {
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/%s_bfl.safetensors", FT_FIXTURES, c->ckpt);
    ft_model m;
    lora_pair lp[2];
    memset(lp, 0, sizeof lp);
    ork_status s = ft_open(ckpt, NULL, &m);
    if (s == ORK_OK) s = ft_load(&m);
    if (s == ORK_OK && use_lora) s = attach_lora(&m, lp);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    size_t nn = 0, nr = 0;
    float *noise = fx32(c, "noise", &nn), *txt = fx32(c, "txt", NULL), *vec = fx32(c, "vec", NULL);
    double *ref = fx64(c, "ref.x", &nr);
    CU_ASSERT_FATAL(noise && txt && ref && nn == nr && nn == (size_t)c->h * c->w * m.info.token_channels);
    ork_block_hooks hk = {.ctx = ct, .pass_begin = h_begin, .enter = h_enter, .leave = h_leave, .pass_end = h_end};
    ork_denoiser d = {.g = m.g, .alloc = m.alloc, .vt = m.vt, .model = m.self, .info = &m.info, .hooks = &hk};
    ork_sample_params sp = {.h_tok = c->h, .w_tok = c->w, .steps = c->steps, .shift = ork_shift_default(shift), .guidance = c->guidance,
                            .cfg = c->cfg, .T = 8, .txt = txt, .vec = vec, .noise = noise};
    float *x = malloc(nn * sizeof *x);
    s = ork_sample_latent(&d, &sp, x);
    CU_ASSERT_EQUAL(s, ORK_OK);
    CU_ASSERT_EQUAL(ork_alloc_in_use(m.alloc, "samples"), 0); /* the kept carries are freed */
    int ok = 0;
    if (s == ORK_OK) {
        double M = 0, worst = 0;
        for (size_t i = 0; i < nn; i++) M = fmax(M, fabs(ref[i]));
        ok = 1;
        for (size_t i = 0; i < nn; i++) {
            double e = fabs((double)x[i] - ref[i]);
            worst = fmax(worst, e);
            if (!(e <= SAMPLE_A * M + SAMPLE_R * fabs(ref[i]))) ok = 0;
        }
        *rel = worst / M;
    }
    free(x);
    free(noise);
    free(txt);
    free(vec);
    free(ref);
    for (int i = 0; i < 2; i++) {
        ork_tensor_free(lp[i].l.down);
        ork_tensor_free(lp[i].l.up);
    }
    ft_close(&m);
    return ok;
}

static void test_sampler_vs_torch(void) {
    for (int i = 0; i < 3; i++) {
        const scase *c = &cases[i];
        counts ct = {0};
        double rel = 0;
        int ok = run_case(c, c->shift, c->lora, &ct, &rel);
        int forwards = c->steps * (c->cfg > 1.0f ? 2 : 1);
        printf("\n    %-16s final latent: max |c - ref| / M = %.3g%s  (%d forwards, %d block visits)", c->name, rel,
               ok ? "" : "  FAIL", ct.begin, ct.enter);
        CU_ASSERT(ok);
        CU_ASSERT(rel < 2e-5); /* the measured error is far inside the bound */
        CU_ASSERT_EQUAL(ct.begin, forwards);
        CU_ASSERT_EQUAL(ct.end, forwards);
        CU_ASSERT(ct.visits >= forwards * 4); /* at least 2 double + 2 single blocks each */
        CU_ASSERT_EQUAL(ct.enter, ct.visits);
        CU_ASSERT_EQUAL(ct.leave, ct.visits);
        CU_ASSERT_EQUAL(ct.bad, 0);
    }
    printf("\n  ");
}

/* The tolerance sees a wrong shift and a missing LoRA. */
static void test_mistakes_are_seen(void) {
    counts ct = {0};
    double rel = 0;
    CU_ASSERT(!run_case(&cases[0], ORK_TIME_SHIFT_NONE, 0, &ct, &rel));
    printf("\n    flux1 without the shift: max err / M = %.3g", rel);
    CU_ASSERT(rel > 1e-2);
    CU_ASSERT(!run_case(&cases[2], ORK_TIME_SHIFT_RESOLUTION, 0, &ct, &rel));
    printf("\n    flux2 with FLUX.1's shift: max err / M = %.3g", rel);
    CU_ASSERT(rel > 1e-2);
    CU_ASSERT(!run_case(&cases[1], ORK_TIME_SHIFT_NONE, 0, &ct, &rel));
    printf("\n    flux1_lora_cfg without the LoRA: max err / M = %.3g\n  ", rel);
    CU_ASSERT(rel > 1e-2);
}

/* A budget too small for the sampler's carries: ORK_E_BUDGET, nothing leaks. */
static void test_budget(void) {
    ft_model m;
    CU_ASSERT_EQUAL_FATAL(ft_open(FT_FIXTURES "/flux1_small_bfl.safetensors", NULL, &m), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ft_load(&m), ORK_OK);
    const scase *c = &cases[0];
    size_t nn = 0;
    float *noise = fx32(c, "noise", &nn);
    CU_ASSERT_FATAL(noise != NULL);
    size_t used = ork_alloc_in_use(m.alloc, NULL);
    ork_alloc_set_budget(m.alloc, used + 1024); /* the weights fit, a sample does not */
    ork_denoiser d = {.g = m.g, .alloc = m.alloc, .vt = m.vt, .model = m.self, .info = &m.info};
    ork_sample_params sp = {.h_tok = 16, .w_tok = 16, .steps = 2, .shift = ork_shift_default(ORK_TIME_SHIFT_RESOLUTION), .guidance = 3.5f,
                            .cfg = 1.0f, .T = 8, .seed = 7};
    float *x = malloc((size_t)256 * m.info.token_channels * sizeof *x);
    CU_ASSERT_EQUAL(ork_sample_latent(&d, &sp, x), ORK_E_BUDGET);
    CU_ASSERT_EQUAL(ork_alloc_in_use(m.alloc, "samples"), 0);
    ork_alloc_set_budget(m.alloc, 0);
    /* the graph still works afterwards, and seeded noise is reproducible */
    float *y = malloc((size_t)256 * m.info.token_channels * sizeof *y);
    CU_ASSERT_EQUAL(ork_sample_latent(&d, &sp, x), ORK_OK);
    CU_ASSERT_EQUAL(ork_sample_latent(&d, &sp, y), ORK_OK);
    CU_ASSERT(memcmp(x, y, (size_t)256 * m.info.token_channels * sizeof *x) == 0);
    free(x);
    free(y);
    free(noise);
    ft_close(&m);
}

static const ork_test_case tcases[] = {
    {"schedule (FLUX.1 / FLUX.2 shift, none) == reference", test_schedule},
    {"sampler final latent == torch (3 cases)", test_sampler_vs_torch},
    {"wrong shift / missing LoRA exceed the tolerance", test_mistakes_are_seen},
    {"over the budget: ORK_E_BUDGET, nothing leaks", test_budget},
    {NULL, NULL},
};
ORK_TEST_MAIN("sample_ref", init, clean, tcases)
