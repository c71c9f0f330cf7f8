/* test_cuda_sdpa.c — cuDNN fused SDPA (core/cuda/cuda_sdpa_cudnn) against our flash
 * kernels (cuda_attn) and a double-precision reference (gpu): y, lse, dq, dk, dv on
 * small shapes (gradients against the reference on every row) and at FLUX size
 * (L=4608, 24×128: y/lse/dq reference on sampled rows, dk/dv against our kernel);
 * lse must agree in definition and units (natural-log logsumexp of the scaled
 * scores), so that our backward run on cuDNN's lse gives our gradients; the
 * eligibility rules (causal, mask, GQA, odd D fall back). The cuDNN backward must
 * really be taken wherever ork_cudnn_sdpa_bwd_expected() says a backward graph is
 * offered (any cuDNN >= 9.13.1 builds the composite graph): no plan there fails
 * the test instead of silently running our kernel. The workspace is poisoned with
 * NaN before each cuDNN backward (its F32 dQ accumulator must not need clearing).
 * The backend-table path (which dispatches to cuDNN) is checked against references
 * in test_cuda_ops. Skips (77) without a device or without a loadable cuDNN >=
 * 9.13.1. Loading cuDNN and its backward-graph probe are host-only, so their
 * outcome is printed before the device check (a machine without a GPU still shows
 * it). Sets ORK_CUDNN_SDPA=1 unless set (the forward is tested even with a library
 * that builds no backward graph). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "ork_test.h"

#include "cuda/cuda_attn.h"
#include "cuda/cuda_ctx.h"
#include "cuda/cuda_sdpa_cudnn.h"
#include "numerics/half.h"
#include "tensor/backend.h"

#include <math.h>
#include <stdint.h>

static const ork_backend *G;
static ork_kctx KG;
static uint64_t rng = 0x243F6A8885A308D3ull;

static float urand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.f;
}

/* Device buffer of n elements of dt; host F32 copy (bf16-exact) when filled. */
typedef struct { int64_t n; ork_dtype dt; float *h; void *d; } tb;

static tb mk(int64_t n, ork_dtype dt, float scale) {
    tb t = {n, dt, malloc((size_t)n * sizeof(float)), NULL};
    uint16_t *tmp = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) {
        tmp[i] = ork_f32_to_bf16(scale * urand());
        t.h[i] = ork_bf16_to_f32(tmp[i]);
    }
    CU_ASSERT_FATAL(G->alloc((size_t)n * 2, &t.d) == ORK_OK);
    CU_ASSERT_FATAL(G->memcpy_h2d(&KG, t.d, tmp, (size_t)n * 2) == ORK_OK);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    free(tmp);
    return t;
}
/* Output: device poisoned with NaN so an unwritten element fails. */
static tb mk_out(int64_t n, ork_dtype dt) {
    tb t = {n, dt, NULL, NULL};
    CU_ASSERT_FATAL(G->alloc((size_t)n * ork_dtype_size(dt), &t.d) == ORK_OK);
    CU_ASSERT_FATAL(G->fill(&KG, n, NAN, t.d, dt) == ORK_OK);
    return t;
}
static void poison(tb *t) { CU_ASSERT_FATAL(G->fill(&KG, t->n, NAN, t->d, t->dt) == ORK_OK); }
static float *dl(const tb *t) {
    size_t es = ork_dtype_size(t->dt);
    void *tmp = malloc((size_t)t->n * es);
    float *o = malloc((size_t)t->n * sizeof(float));
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    CU_ASSERT_FATAL(G->memcpy_d2h(&KG, tmp, t->d, (size_t)t->n * es) == ORK_OK);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    for (int64_t i = 0; i < t->n; i++)
        o[i] = t->dt == ORK_BF16 ? ork_bf16_to_f32(((uint16_t *)tmp)[i]) : ((float *)tmp)[i];
    free(tmp);
    return o;
}
static void fr(tb *t) { free(t->h); G->free(t->d); t->h = NULL; t->d = NULL; }

/* ‖a − b‖ / ‖b‖ over n, every a finite; prints and asserts <= tol. */
static void rel_l2(const char *what, const float *a, const float *b, int64_t n, double tol) {
    double num = 0, den = 0, mx = 0;
    int64_t nonfin = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) { nonfin++; continue; }
        double e = (double)a[i] - b[i];
        num += e * e; den += (double)b[i] * b[i];
        if (fabs(e) > mx) mx = fabs(e);
    }
    double r = sqrt(num / (den > 0 ? den : 1));
    printf("\n    %-34s n=%-9lld rel_l2 %.3g (tol %.0e) max|d| %.3g nonfinite %lld", what, (long long)n, r, tol, mx,
           (long long)nonfin);
    CU_ASSERT(nonfin == 0);
    CU_ASSERT(r <= tol);
}
static void max_abs(const char *what, const float *a, const float *b, int64_t n, double tol) {
    double mx = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!isfinite(a[i]) || !(e <= tol)) bad++;
        if (isfinite(e) && e > mx) mx = e;
    }
    printf("\n    %-34s n=%-9lld max|d| %.3g (tol %.0e) bad %lld", what, (long long)n, mx, tol, (long long)bad);
    CU_ASSERT(bad == 0);
}

typedef struct { int64_t B, H, Lq, Lk, D; int rows; } scase; /* rows: 0 = reference on every row */

/* Double reference y row and lse for row r = (b·H + h)·Lq + i, scale 1/√D. */
static void ref_row(const scase *c, const float *q, const float *k, const float *v, int64_t r, double *y,
                    double *lse) {
    const int64_t D = c->D, i = r % c->Lq, bh = r / c->Lq;
    const float *qi = q + (bh * c->Lq + i) * D, *K = k + bh * c->Lk * D, *V = v + bh * c->Lk * D;
    double *s = malloc((size_t)c->Lk * sizeof(double)), m = -INFINITY, sum = 0, sc = 1.0 / sqrt((double)D);
    for (int64_t j = 0; j < c->Lk; j++) {
        double d = 0;
        for (int64_t e = 0; e < D; e++) d += (double)qi[e] * K[j * D + e];
        s[j] = d * sc;
        if (s[j] > m) m = s[j];
    }
    for (int64_t j = 0; j < c->Lk; j++) sum += exp(s[j] - m);
    *lse = m + log(sum);
    for (int64_t e = 0; e < D; e++) y[e] = 0;
    for (int64_t j = 0; j < c->Lk; j++) {
        double p = exp(s[j] - *lse);
        for (int64_t e = 0; e < D; e++) y[e] += p * V[j * D + e];
    }
    free(s);
}

/* Double reference gradients of one query row r (dq, D values) and, when dk/dv are
 * given, its contributions to every key row of its head (accumulated):
 * P = softmax(scale·q·kᵀ), dP = dO·vᵀ, Δ = Σ P∘dP, dS = P∘(dP − Δ),
 * dq = scale·dS·k, dk += scale·dSᵀ·q, dv += Pᵀ·dO. */
static void ref_grad_row(const scase *c, const float *q, const float *k, const float *v, const float *dy, int64_t r,
                         double *dq, double *dk, double *dv) {
    const int64_t D = c->D, i = r % c->Lq, bh = r / c->Lq;
    const float *qi = q + (bh * c->Lq + i) * D, *K = k + bh * c->Lk * D, *V = v + bh * c->Lk * D;
    const float *gi = dy + (bh * c->Lq + i) * D;
    double *p = malloc((size_t)c->Lk * sizeof(double)), *dp = malloc((size_t)c->Lk * sizeof(double));
    double m = -INFINITY, sum = 0, sc = 1.0 / sqrt((double)D), delta = 0;
    for (int64_t j = 0; j < c->Lk; j++) {
        double d = 0, g = 0;
        for (int64_t e = 0; e < D; e++) { d += (double)qi[e] * K[j * D + e]; g += (double)gi[e] * V[j * D + e]; }
        p[j] = d * sc;
        dp[j] = g;
        if (p[j] > m) m = p[j];
    }
    for (int64_t j = 0; j < c->Lk; j++) sum += exp(p[j] - m);
    for (int64_t j = 0; j < c->Lk; j++) { p[j] = exp(p[j] - m) / sum; delta += p[j] * dp[j]; }
    for (int64_t e = 0; e < D; e++) dq[e] = 0;
    for (int64_t j = 0; j < c->Lk; j++) {
        double ds = p[j] * (dp[j] - delta);
        for (int64_t e = 0; e < D; e++) dq[e] += sc * ds * K[j * D + e];
        if (dk)
            for (int64_t e = 0; e < D; e++) {
                dk[(bh * c->Lk + j) * D + e] += sc * ds * qi[e];
                dv[(bh * c->Lk + j) * D + e] += p[j] * gi[e];
            }
    }
    free(p); free(dp);
}

static void run_case(const scase *c) {
    const int dev = ork_cuda_ctx_device((const ork_cuda_ctx *)KG.priv);
    const int64_t nq = c->B * c->H * c->Lq * c->D, nk = c->B * c->H * c->Lk * c->D, nr = c->B * c->H * c->Lq;
    ork_cudnn_sdpa_args s = {c->B, c->H, c->H, c->Lq, c->Lk, c->D, 1.f / sqrtf((float)c->D), 0, NULL};
    ork_cuda_attn_args a = {c->B, c->H, c->H, c->Lq, c->Lk, c->D, s.scale, 0, NULL};
    printf("\n  B%lld H%lld Lq%lld Lk%lld D%lld", (long long)c->B, (long long)c->H, (long long)c->Lq,
           (long long)c->Lk, (long long)c->D);
    CU_ASSERT_FATAL(ork_cudnn_sdpa_eligible(&s));
    int okf = 0, okb = 0;
    size_t wsf = ork_cudnn_sdpa_ws(dev, &s, 0, &okf), wsb = ork_cudnn_sdpa_ws(dev, &s, 1, &okb);
    const char *kb = ork_cudnn_sdpa_plan_kind(dev, &s, 1);
    printf(" plans fwd %d (ws %zu B) bwd %d (%s graph, ws %zu B)", okf, wsf, okb, kb ? kb : "no", wsb);
    CU_ASSERT(okf);
    /* the backward must be cuDNN's wherever a backward graph is offered for the shape
     * (Ampere and newer: cuDNN's fused attention engines need sm_80+) */
    const int cc = ork_cuda_ctx_cc((const ork_cuda_ctx *)KG.priv);
    if (cc >= 80 && ork_cudnn_sdpa_bwd_expected(&s)) CU_ASSERT(okb);
    if (!okf) return;
    size_t wso = ork_cuda_attn_ws(&a, 1), wsz = wsf > wsb ? wsf : wsb;
    if (wso > wsz) wsz = wso;
    void *ws = NULL;
    CU_ASSERT_FATAL(G->alloc(wsz ? wsz : 1, &ws) == ORK_OK);

    tb q = mk(nq, ORK_BF16, 1.5f), k = mk(nk, ORK_BF16, 1.5f), v = mk(nk, ORK_BF16, 1.f), dy = mk(nq, ORK_BF16, 1.f);
    tb y1 = mk_out(nq, ORK_BF16), l1 = mk_out(nr, ORK_F32), y0 = mk_out(nq, ORK_BF16), l0 = mk_out(nr, ORK_F32);
    tb dq1 = mk_out(nq, ORK_BF16), dk1 = mk_out(nk, ORK_BF16), dv1 = mk_out(nk, ORK_BF16);
    tb dq0 = mk_out(nq, ORK_BF16), dk0 = mk_out(nk, ORK_BF16), dv0 = mk_out(nk, ORK_BF16);
    /* cuDNN forward + backward; ours forward + backward */
    CU_ASSERT_FATAL(ork_cudnn_sdpa_fwd(dev, &s, q.d, k.d, v.d, y1.d, l1.d, ws, KG.stream) == ORK_OK);
    CU_ASSERT_FATAL(ork_cuda_attn_fwd(&a, q.d, k.d, v.d, y0.d, l0.d, KG.stream) == ORK_OK);
    float *gy1 = dl(&y1), *gl1 = dl(&l1), *gy0 = dl(&y0), *gl0 = dl(&l0);
    rel_l2("y cudnn vs ours", gy1, gy0, nq, 1e-2);
    max_abs("lse cudnn vs ours", gl1, gl0, nr, 2e-3);
    if (okb) {
        CU_ASSERT_FATAL(G->fill(&KG, (int64_t)(wsz / 4), NAN, ws, ORK_F32) == ORK_OK); /* poison dQ accum + row sums */
        CU_ASSERT_FATAL(ork_cudnn_sdpa_bwd(dev, &s, q.d, k.d, v.d, y1.d, l1.d, dy.d, dq1.d, dk1.d, dv1.d, ws,
                                           KG.stream) == ORK_OK);
        CU_ASSERT_FATAL(ork_cuda_attn_bwd(&a, q.d, k.d, v.d, y0.d, l0.d, dy.d, dq0.d, dk0.d, dv0.d, ws, KG.stream) ==
                        ORK_OK);
        float *a1 = dl(&dq1), *a0 = dl(&dq0);
        rel_l2("dq cudnn vs ours", a1, a0, nq, 2e-2);
        free(a1); free(a0);
        a1 = dl(&dk1); a0 = dl(&dk0);
        rel_l2("dk cudnn vs ours", a1, a0, nk, 2e-2);
        free(a1); free(a0);
        a1 = dl(&dv1); a0 = dl(&dv0);
        rel_l2("dv cudnn vs ours", a1, a0, nk, 2e-2);
        free(a1); free(a0);
        /* lse interchange: our backward on cuDNN's y and lse gives cuDNN's gradients */
        poison(&dq0); poison(&dk0); poison(&dv0);
        CU_ASSERT_FATAL(ork_cuda_attn_bwd(&a, q.d, k.d, v.d, y1.d, l1.d, dy.d, dq0.d, dk0.d, dv0.d, ws, KG.stream) ==
                        ORK_OK);
        a1 = dl(&dq1); a0 = dl(&dq0);
        rel_l2("dq ours-on-cudnn-lse vs cudnn", a0, a1, nq, 2e-2);
        free(a1); free(a0);
        a1 = dl(&dk1); a0 = dl(&dk0);
        rel_l2("dk ours-on-cudnn-lse vs cudnn", a0, a1, nk, 2e-2);
        free(a1); free(a0);
        /* double reference: every gradient on small shapes, dq on sampled rows at FLUX size */
        float *g1 = dl(&dq1);
        if (!c->rows) {
            double *rq = calloc((size_t)nq, 8), *rk = calloc((size_t)nk, 8), *rv = calloc((size_t)nk, 8);
            float *fq = malloc((size_t)nq * 4), *fk = malloc((size_t)nk * 4), *fv = malloc((size_t)nk * 4);
            for (int64_t r = 0; r < nr; r++) ref_grad_row(c, q.h, k.h, v.h, dy.h, r, rq + r * c->D, rk, rv);
            for (int64_t i = 0; i < nq; i++) fq[i] = (float)rq[i];
            for (int64_t i = 0; i < nk; i++) { fk[i] = (float)rk[i]; fv[i] = (float)rv[i]; }
            rel_l2("dq cudnn vs double reference", g1, fq, nq, 2e-2);
            float *gk = dl(&dk1), *gv = dl(&dv1);
            rel_l2("dk cudnn vs double reference", gk, fk, nk, 2e-2);
            rel_l2("dv cudnn vs double reference", gv, fv, nk, 2e-2);
            free(gk); free(gv); free(rq); free(rk); free(rv); free(fq); free(fk); free(fv);
        } else {
            float *gq = malloc((size_t)(c->rows * c->D) * 4), *rq = malloc((size_t)(c->rows * c->D) * 4);
            double *row = malloc((size_t)c->D * 8);
            for (int64_t t = 0; t < c->rows; t++) {
                int64_t r = t == 0 ? nr - 1 : (t * 7919 + 13) % nr;
                ref_grad_row(c, q.h, k.h, v.h, dy.h, r, row, NULL, NULL);
                for (int64_t e = 0; e < c->D; e++) { gq[t * c->D + e] = g1[r * c->D + e]; rq[t * c->D + e] = (float)row[e]; }
            }
            rel_l2("dq cudnn vs double reference (rows)", gq, rq, c->rows * c->D, 2e-2);
            free(gq); free(rq); free(row);
        }
        free(g1);
    }
    /* double reference on every row (small) or sampled rows (large) */
    int64_t nsel = c->rows ? c->rows : nr;
    float *gy = calloc((size_t)(nsel * c->D), 4), *ry = calloc((size_t)(nsel * c->D), 4);
    float *gl = malloc((size_t)nsel * 4), *rl = malloc((size_t)nsel * 4);
    double *yo = malloc((size_t)c->D * 8), ls;
    for (int64_t t = 0; t < nsel; t++) {
        int64_t r = c->rows ? (t == 0 ? nr - 1 : (t * 7919 + 13) % nr) : t;
        ref_row(c, q.h, k.h, v.h, r, yo, &ls);
        for (int64_t e = 0; e < c->D; e++) { gy[t * c->D + e] = gy1[r * c->D + e]; ry[t * c->D + e] = (float)yo[e]; }
        gl[t] = gl1[r]; rl[t] = (float)ls;
    }
    rel_l2("y cudnn vs double reference", gy, ry, nsel * c->D, 1e-2);
    max_abs("lse cudnn vs double reference", gl, rl, nsel, 2e-3);
    free(gy); free(ry); free(gl); free(rl); free(yo);
    free(gy1); free(gl1); free(gy0); free(gl0);
    G->free(ws);
    fr(&q); fr(&k); fr(&v); fr(&dy); fr(&y1); fr(&l1); fr(&y0); fr(&l0);
    fr(&dq1); fr(&dk1); fr(&dv1); fr(&dq0); fr(&dk0); fr(&dv0);
}

static void test_small(void) {
    const scase cs[] = {
        {2, 4, 200, 333, 64, 0},  /* ragged, Lq != Lk */
        {1, 2, 128, 192, 128, 0}, /* exact tiles */
        {1, 3, 257, 257, 128, 0}, /* ragged */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_case(&cs[i]);
}
static void test_flux(void) {
    if (getenv("ORK_TEST_QUICK")) { printf("(skipped: ORK_TEST_QUICK)"); return; }
    const scase c = {1, 24, 4608, 4608, 128, 24};
    run_case(&c);
}
/* Shapes the cuDNN path must refuse (the backend runs our kernel for them). */
static void test_eligibility(void) {
    uint8_t m = 1;
    ork_cudnn_sdpa_args base = {1, 4, 4, 64, 64, 128, 0.f, 0, NULL};
    ork_cudnn_sdpa_args c = base;
    CU_ASSERT(ork_cudnn_sdpa_eligible(&c));
    c.causal = 1; CU_ASSERT(!ork_cudnn_sdpa_eligible(&c));
    c = base; c.kmask = &m; CU_ASSERT(!ork_cudnn_sdpa_eligible(&c));
    c = base; c.Hkv = 2; CU_ASSERT(!ork_cudnn_sdpa_eligible(&c));
    c = base; c.D = 96; CU_ASSERT(!ork_cudnn_sdpa_eligible(&c));
    c = base; c.Lq = 0; CU_ASSERT(!ork_cudnn_sdpa_eligible(&c));
    int ok = 1;
    c = base; c.causal = 1;
    CU_ASSERT(ork_cudnn_sdpa_ws(0, &c, 0, &ok) == 0 && ok == 0);
    CU_ASSERT(ork_cudnn_sdpa_fwd(0, &c, NULL, NULL, NULL, NULL, NULL, NULL, KG.stream) == ORK_E_UNSUPPORTED);
}

static int suite_init(void) {
    G = ork_cuda_backend();
    if (G->ctx_create(0, &KG.priv) != ORK_OK) return 1;
    if (ork_cuda_stream_create(&KG.stream) != ORK_OK) return 1;
    KG.nthreads = 1;
    return 0;
}
static int suite_clean(void) {
    ork_cudnn_sdpa_shutdown();
    G->ctx_destroy(KG.priv);
    ork_cuda_stream_destroy(KG.stream);
    return 0;
}

static const ork_test_case cases[] = {
    {"eligibility: causal, mask, GQA, D refused", test_eligibility},
    {"cuDNN SDPA fwd+bwd vs ours and reference, small", test_small},
    {"cuDNN SDPA fwd+bwd L=4608 24x128", test_flux},
    {NULL, NULL},
};

int main(void) {
    setenv("ORK_CUDNN_SDPA", "1", 0); /* forward too when no backward graph builds (=0 outside skips) */
    int avail = ork_cudnn_sdpa_available(); /* host only: dlopen + backward graph probe */
    if (avail) {
        int g = ork_cudnn_sdpa_bwd_graphs();
        printf("cuDNN %ld: backward operation graphs: composite %s, native SDPA_BWD %s\n", ork_cudnn_sdpa_version(),
               (g & 1) ? "builds" : "does not build", (g & 2) ? "builds" : "does not build");
    }
    if (ork_cuda_device_count() == 0) { printf("no CUDA device: skipped\n"); return 77; }
    if (!avail) { printf("no usable cuDNN (>= 9.13.1): skipped\n"); return 77; }
    return ork_test_run("cuda_sdpa", suite_init, suite_clean, cases);
}
