/* test_timesteps.c — train.timestep_type and train.content_or_style
 * (core/train/schedule.c) against ai-toolkit, through the fixture
 * tests/fixtures/timesteps_ref.safetensors that tests/reference/timestep_ref.py
 * wrote from ai-toolkit's source (checked there against ai-toolkit's own
 * scheduler class):
 *  - the deterministic parts to 1e-6: t of every table index (linear/weighted/
 *    *_step, the resolution shift at five image sizes, the fixed shift 3, the
 *    8-entry next_sample table), the shift's mu, the 'weighted' loss weights;
 *  - the laws of the draws: per (type, content_or_style) the C draws' CDF
 *    against the reference's quantiles of 200,000 draws (a DKW bound, below);
 *  - the index ranges ai-toolkit's torch calls give (balanced never 999);
 *  - the parsers, with malformed names. */
#include "ork_test.h"

#include "io/safetensors.h"
#include "train/schedule.h"

#define FIXTURE ORK_SOURCE_DIR "/tests/fixtures/timesteps_ref.safetensors"
#define TOL 1e-6

static ork_st_file *fx;

static int init(void) { return ork_st_open(FIXTURE, &fx) != ORK_OK; }
static int clean(void) {
    ork_st_close(fx);
    return 0;
}

/* The fixture's F64 tensor `name` with n elements, or NULL (a failed assert). */
static double *ref(const char *name, size_t n) {
    const ork_st_tensor *t = ork_st_find(fx, name);
    CU_ASSERT_PTR_NOT_NULL(t);
    if (!t || ork_st_nelements(t) != n) {
        CU_FAIL("fixture tensor missing or of the wrong size");
        return NULL;
    }
    double *v = malloc(n * sizeof *v);
    if (v && ork_st_read_into(t, ORK_F64, v) != ORK_OK) {
        free(v);
        v = NULL;
    }
    CU_ASSERT_PTR_NOT_NULL(v);
    return v;
}

/* FLUX's scheduler (ai-toolkit flux_config): resolution shift 0.5 .. 1.15 over 256 .. 4096 tokens. */
static ork_ts_params flux_params(ork_ts_type type, ork_cs_type cs, int64_t seq) {
    ork_ts_params p = {type, cs, seq, 3.0, 0.5, 1.15, 256, 4096, 0};
    return p;
}

/* Worst |C - ref| over the n entries of table `name` for params p. */
static double table_err(const ork_ts_params *p, const char *name, int n) {
    double *r = ref(name, (size_t)n), worst = 0;
    if (!r) return 1;
    CU_ASSERT_EQUAL(ork_ts_table_size(p), n);
    for (int i = 0; i < n; i++) {
        double d = fabs(ork_ts_sigma_at(p, i) - r[i]);
        if (!(d <= worst)) worst = d; /* NaN counts */
    }
    free(r);
    return worst;
}

static void test_tables(void) {
    static const ork_ts_type linear_like[] = {ORK_TS_LINEAR, ORK_TS_WEIGHTED, ORK_TS_ONE_STEP, ORK_TS_TWO_STEP,
                                              ORK_TS_FOUR_STEP, ORK_TS_EIGHT_STEP};
    for (size_t k = 0; k < sizeof linear_like / sizeof linear_like[0]; k++) {
        ork_ts_params p = flux_params(linear_like[k], ORK_CS_BALANCED, 1024);
        CU_ASSERT(table_err(&p, "table.linear", 1000) <= TOL);
    }
    static const int64_t seqs[] = {256, 1024, 2304, 4096, 6144};
    double *mu = ref("mu", 5);
    for (int k = 0; k < 5 && mu; k++) {
        char name[64];
        snprintf(name, sizeof name, "table.shift_dyn_%lld", (long long)seqs[k]);
        /* 'shift' and 'flux_shift' are one branch in ai-toolkit: the model's scheduler decides */
        ork_ts_params p = flux_params(ORK_TS_RESOLUTION_SHIFT, ORK_CS_BALANCED, seqs[k]);
        CU_ASSERT(table_err(&p, name, 1000) <= TOL);
        p.type = ORK_TS_SHIFT;
        CU_ASSERT(table_err(&p, name, 1000) <= TOL);
        CU_ASSERT(fabs(ork_ts_mu(&p) - mu[k]) <= 1e-12);
    }
    free(mu);
    ork_ts_params p = flux_params(ORK_TS_SHIFT, ORK_CS_BALANCED, 1024);
    p.fixed_shift = 1; /* diffusers' use_dynamic_shifting false: shift 3, sigma_min shifted twice */
    CU_ASSERT(table_err(&p, "table.shift_fixed3", 1000) <= TOL);
    p = flux_params(ORK_TS_NEXT_SAMPLE, ORK_CS_BALANCED, 1024);
    CU_ASSERT(table_err(&p, "table.next_sample_dyn_1024", 8) <= TOL);
    /* a wrong mu moves the table far more than the tolerance */
    p = flux_params(ORK_TS_SHIFT, ORK_CS_BALANCED, 1000);
    CU_ASSERT(table_err(&p, "table.shift_dyn_1024", 1000) > 1e-4);
    /* the random tables have no fixed entry; out of range is -1 */
    p = flux_params(ORK_TS_SIGMOID, ORK_CS_BALANCED, 1024);
    CU_ASSERT_EQUAL(ork_ts_sigma_at(&p, 3), -1);
    p.type = ORK_TS_LOGNORM_BLEND;
    CU_ASSERT_EQUAL(ork_ts_sigma_at(&p, 3), -1);
    p.type = ORK_TS_LINEAR;
    CU_ASSERT_EQUAL(ork_ts_sigma_at(&p, -1), -1);
    CU_ASSERT_EQUAL(ork_ts_sigma_at(&p, 1000), -1);
}

static void test_weights(void) {
    double *w = ref("weights", 1000);
    if (!w) return;
    double worst = 0;
    for (int i = 0; i < 1000; i++) {
        double d = fabs(ork_ts_weight_at(i) - w[i]);
        if (!(d <= worst)) worst = d;
    }
    CU_ASSERT(worst <= TOL);
    CU_ASSERT_EQUAL(ork_ts_weight_at(-1), 1.0);
    CU_ASSERT_EQUAL(ork_ts_weight_at(1000), 1.0);
    free(w);
    /* a draw's weight is its index's entry; other types weigh 1 */
    ork_ts_params p = flux_params(ORK_TS_WEIGHTED, ORK_CS_BALANCED, 1024), q = p;
    q.type = ORK_TS_LINEAR;
    ork_rng r1, r2, r3;
    ork_rng_init(&r1, 7, ORK_RNG_TIMESTEP);
    ork_rng_init(&r2, 7, ORK_RNG_TIMESTEP);
    ork_rng_init(&r3, 7, ORK_RNG_TIMESTEP);
    for (int k = 0; k < 1000; k++) {
        float t, wt, tl, wl;
        int idx = ork_ts_index(&p, &r3);
        ork_ts_sample(&p, &r1, &t, &wt);
        ork_ts_sample(&q, &r2, &tl, &wl);
        CU_ASSERT_EQUAL(t, (float)ork_ts_sigma_at(&p, idx));
        CU_ASSERT_EQUAL(wt, (float)ork_ts_weight_at(idx));
        CU_ASSERT_EQUAL(tl, t);
        CU_ASSERT_EQUAL(wl, 1.0f);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether n sorted C draws s[] and the reference's quantiles q[k] (p = k/1000
 * of m draws, q = sorted[ceil(p·m) − 1], so F_ref(q−) < p <= F_ref(q)) can come
 * from one law F. DKW (Massart's constant) bounds sup|F_emp − F| <= eps(n) =
 * sqrt(ln(2/α)/(2n)) with probability >= 1 − α, for any F, discrete ones too;
 * with α = 1e-6 for each sample, under H0 one fails with probability
 * < 2e-6 per case; when both hold, and then F_C(q−) < p + eps(n) + eps(m) and
 * F_C(q) >= p − eps(n) − eps(m) at every q. At n = m = 200,000 the bound is
 * 0.0120: a wrong law (a content/style bias reversed, the shift's mu off by
 * 0.1, sigmoid drawn uniform) misses by 0.05 or more. The atoms of the fixed
 * tables agree to 1e-6, not bit for bit (float32 roundings in another order):
 * values within DELTA of q count as q. */
#define DELTA 1e-6
static int law_matches(const double *s, size_t n, const double *q, size_t m, const char *what) {
    double eps = sqrt(log(2.0 / 1e-6) / (2.0 * (double)n)) + sqrt(log(2.0 / 1e-6) / (2.0 * (double)m));
    double worst = 0;
    for (int k = 0; k <= 1000; k++) {
        double p = k / 1000.0;
        /* F_C(q−) = #(s < q − DELTA)/n, F_C(q) = #(s <= q + DELTA)/n */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s[mid] < q[k] - DELTA) lo = mid + 1;
            else hi = mid;
        }
        size_t below = lo;
        hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s[mid] <= q[k] + DELTA) lo = mid + 1;
            else hi = mid;
        }
        double fm = (double)below / (double)n, f = (double)lo / (double)n;
        double d = fm - p > p - f ? fm - p : p - f;
        if (d > worst) worst = d;
    }
    if (worst >= eps) printf("\n  %s: CDF off by %.4f (bound %.4f)", what, worst, eps);
    return worst < eps;
}

typedef struct dcase {
    const char *type, *cs;
} dcase;

static void test_laws(void) {
    static const dcase cases[] = {
        {"sigmoid", "balanced"}, {"sigmoid", "content"}, {"sigmoid", "style"},
        {"linear", "balanced"}, {"linear", "content"}, {"linear", "style"},
        {"weighted", "balanced"}, {"weighted", "content"}, {"weighted", "style"},
        {"shift", "balanced"}, {"shift", "content"}, {"shift", "style"},
        {"lognorm_blend", "balanced"}, {"lognorm_blend", "content"}, {"lognorm_blend", "style"},
        {"one_step", "balanced"}, {"two_step", "balanced"}, {"four_step", "balanced"},
        {"eight_step", "balanced"}, {"next_sample", "balanced"},
    };
    const char *nd = ork_st_meta(fx, "n_draws");
    CU_ASSERT_PTR_NOT_NULL_FATAL(nd);
    /* 200,000 draws, 20,000 of the types that draw 1000 normals each (bound 0.025) */
    size_t m = (size_t)atol(nd), n_all = 200000;
    double *s = malloc(n_all * sizeof *s), *w = malloc(n_all * sizeof *w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ork_ts_params p = flux_params(ORK_TS_SIGMOID, ORK_CS_BALANCED, 1024);
        CU_ASSERT_EQUAL_FATAL(ork_ts_type_parse(cases[c].type, &p.type), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_cs_type_parse(cases[c].cs, &p.cs), ORK_OK);
        size_t n = p.type == ORK_TS_SIGMOID || p.type == ORK_TS_LOGNORM_BLEND ? n_all / 10 : n_all;
        ork_rng r;
        ork_rng_init(&r, 1000 + c, ORK_RNG_TIMESTEP);
        for (size_t i = 0; i < n; i++) {
            float t, wt;
            ork_ts_sample(&p, &r, &t, &wt);
            s[i] = t;
            w[i] = wt;
        }
        qsort(s, n, sizeof *s, cmp_d);
        char name[96];
        snprintf(name, sizeof name, "q.%s.%s", cases[c].type, cases[c].cs);
        double *q = ref(name, 1001);
        if (q) CU_ASSERT(law_matches(s, n, q, m, name));
        free(q);
        if (p.type == ORK_TS_WEIGHTED) {
            qsort(w, n, sizeof *w, cmp_d);
            snprintf(name, sizeof name, "qw.%s.%s", cases[c].type, cases[c].cs);
            q = ref(name, 1001);
            if (q) CU_ASSERT(law_matches(w, n, q, m, name));
            free(q);
        }
        /* the test has power: content's draws are not style's law */
        if (!strcmp(cases[c].type, "linear") && !strcmp(cases[c].cs, "content")) {
            double *qs = ref("q.linear.style", 1001);
            if (qs) CU_ASSERT(!law_matches(s, n, qs, m, "(expected to differ) content vs style"));
            free(qs);
        }
    }
    free(s);
    free(w);
}

/* The index ranges of ai-toolkit's torch calls. */
static void test_index_ranges(void) {
    ork_rng r;
    ork_rng_init(&r, 3, ORK_RNG_TIMESTEP);
    int lo, hi;
    ork_ts_params p = flux_params(ORK_TS_LINEAR, ORK_CS_BALANCED, 1024);
#define RANGE(P) do { lo = 1 << 30, hi = -1; \
        for (int k = 0; k < 100000; k++) { int i_ = ork_ts_index((P), &r); lo = i_ < lo ? i_ : lo; hi = i_ > hi ? i_ : hi; } \
    } while (0)
    RANGE(&p); /* torch.randint(0, 999): 999 never */
    CU_ASSERT_EQUAL(lo, 0);
    CU_ASSERT_EQUAL(hi, 998);
    p.cs = ORK_CS_STYLE; /* floor((1 - u³)·1000) clamped: 999 with probability 0.1 */
    int n999 = 0;
    for (int k = 0; k < 100000; k++) n999 += ork_ts_index(&p, &r) == 999;
    CU_ASSERT(n999 > 9000 && n999 < 11000);
    p.cs = ORK_CS_CONTENT; /* floor(u³·1000): 0 with probability 0.1 */
    int n0 = 0;
    for (int k = 0; k < 100000; k++) n0 += ork_ts_index(&p, &r) == 0;
    CU_ASSERT(n0 > 9000 && n0 < 11000);
    p.type = ORK_TS_NEXT_SAMPLE; /* torch.randint(0, 8 - 2) */
    RANGE(&p);
    CU_ASSERT_EQUAL(lo, 0);
    CU_ASSERT_EQUAL(hi, 5);
    p.type = ORK_TS_ONE_STEP;
    RANGE(&p);
    CU_ASSERT(lo == 0 && hi == 0);
    p.type = ORK_TS_EIGHT_STEP;
    int seen[1000] = {0};
    for (int k = 0; k < 10000; k++) seen[ork_ts_index(&p, &r)]++;
    for (int i = 0; i < 1000; i++) CU_ASSERT(i % 125 == 0 ? seen[i] > 0 : seen[i] == 0);
#undef RANGE
}

static void test_parse(void) {
    static const char *const ok[] = {"sigmoid", "linear", "weighted", "shift", "flux_shift", "lognorm_blend",
                                     "one_step", "two_step", "four_step", "eight_step", "next_sample"};
    ork_ts_type t;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) CU_ASSERT_EQUAL(ork_ts_type_parse(ok[i], &t), ORK_OK);
    static const char *const bad[] = {"", "Sigmoid", "sigmoid ", "flux-shift", "lognorm", "three_step", "shift\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_ASSERT_EQUAL(ork_ts_type_parse(bad[i], &t), ORK_E_CONFIG);
    ork_cs_type c;
    CU_ASSERT_EQUAL(ork_cs_type_parse("style", &c), ORK_OK);
    CU_ASSERT_EQUAL(c, ORK_CS_STYLE);
    CU_ASSERT_EQUAL(ork_cs_type_parse("", &c), ORK_E_CONFIG);
    CU_ASSERT_EQUAL(ork_cs_type_parse("Balanced", &c), ORK_E_CONFIG);
    CU_ASSERT_EQUAL(ork_cs_type_parse("content ", &c), ORK_E_CONFIG);
}

static const ork_test_case cases[] = {
    {"tables and mu to 1e-6", test_tables},
    {"weighted loss weights", test_weights},
    {"laws of the draws (DKW)", test_laws},
    {"index ranges", test_index_ranges},
    {"parsers", test_parse},
    {NULL, NULL},
};
ORK_TEST_MAIN("timesteps", init, clean, cases)
