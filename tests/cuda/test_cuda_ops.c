/* test_cuda_ops.c — the CUDA backend against references on random inputs (gpu):
 * GEMM layouts (linear fwd/dgrad/wgrad, batched, bias epilogue) and flash
 * attention fwd+bwd against double-precision references written here (full for
 * small shapes incl. GQA, key mask, causal, ragged L; sampled rows/keys at FLUX
 * size L=4608, 24×128); every other kernel of the table against the CPU backend.
 * CUDA runs bf16 activations, the CPU the same bf16-rounded values in F32.
 * Tolerance: |got − ref| <= abs + rel·|ref| with rel ~ 2^-7 for bf16 outputs. */
#include "ork_test.h"

#include "cuda/cuda_attn.h"
#include "cuda/cuda_ctx.h"
#include "cuda/cuda_gemm.h"
#include "numerics/half.h"
#include "tensor/backend.h"

#include <math.h>
#include <stdint.h>

static const ork_backend *G, *C; /* cuda, cpu */
static ork_kctx KG, KC;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float urand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.f;
}
static float rbf(float x) { return ork_bf16_to_f32(ork_f32_to_bf16(x)); }

/* A tensor on both sides: host F32 values (exactly representable in dt) and a device copy in dt. */
typedef struct { int64_t n; ork_dtype dt; float *h; void *d; } tb;

static void upload(tb *t) {
    size_t es = ork_dtype_size(t->dt);
    void *tmp = malloc((size_t)t->n * es);
    for (int64_t i = 0; i < t->n; i++) {
        if (t->dt == ORK_BF16) ((uint16_t *)tmp)[i] = ork_f32_to_bf16(t->h[i]);
        else ((float *)tmp)[i] = t->h[i];
    }
    CU_ASSERT_FATAL(G->memcpy_h2d(&KG, t->d, tmp, (size_t)t->n * es) == ORK_OK);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    free(tmp);
}
static tb mk(int64_t n, ork_dtype dt, float scale) {
    tb t = {n, dt, malloc((size_t)(n ? n : 1) * sizeof(float)), NULL};
    for (int64_t i = 0; i < n; i++) t.h[i] = dt == ORK_BF16 ? rbf(scale * urand()) : scale * urand();
    CU_ASSERT_FATAL(G->alloc((size_t)(n ? n : 1) * ork_dtype_size(dt), &t.d) == ORK_OK);
    upload(&t);
    return t;
}
/* Output buffer: device filled with NaN (catches unwritten elements), host zero. */
static tb mk_out(int64_t n, ork_dtype dt) {
    tb t = {n, dt, calloc((size_t)(n ? n : 1), sizeof(float)), NULL};
    CU_ASSERT_FATAL(G->alloc((size_t)(n ? n : 1) * ork_dtype_size(dt), &t.d) == ORK_OK);
    CU_ASSERT_FATAL(G->fill(&KG, n, NAN, t.d, dt) == ORK_OK);
    return t;
}
static void fr(tb *t) { free(t->h); G->free(t->d); t->h = NULL; t->d = NULL; }
/* Device values as F32 (malloc'd). */
static float *dl(const tb *t) {
    size_t es = ork_dtype_size(t->dt);
    void *tmp = malloc((size_t)t->n * es + 1);
    float *o = malloc((size_t)t->n * sizeof(float) + 1);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    CU_ASSERT_FATAL(G->memcpy_d2h(&KG, tmp, t->d, (size_t)t->n * es) == ORK_OK);
    CU_ASSERT_FATAL(G->sync(&KG) == ORK_OK);
    for (int64_t i = 0; i < t->n; i++)
        o[i] = t->dt == ORK_BF16 ? ork_bf16_to_f32(((uint16_t *)tmp)[i]) : ((float *)tmp)[i];
    free(tmp);
    return o;
}
/* Compare got vs ref; prints the worst element. Returns number of misses. */
static int64_t cmpv(const char *what, const float *got, const float *ref, int64_t n, double abs_t, double rel_t) {
    int64_t bad = 0, worst = -1;
    double wr = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]), lim = abs_t + rel_t * fabs(ref[i]);
        int ok = isfinite(ref[i]) ? (isfinite(got[i]) && e <= lim) : (got[i] == ref[i]);
        if (!ok) bad++;
        double r = isfinite(ref[i]) && isfinite(got[i]) ? e / lim : 1e30;
        if (r > wr) { wr = r; worst = i; }
    }
    printf("\n    %-28s n=%-9lld bad=%-6lld worst[%lld] got %.6g ref %.6g (err/tol %.3g)", what, (long long)n,
           (long long)bad, (long long)worst, worst >= 0 ? got[worst] : 0., worst >= 0 ? ref[worst] : 0., wr);
    CU_ASSERT(bad == 0);
    return bad;
}
static void cmpt(const char *what, const tb *t, const float *ref, double abs_t, double rel_t) {
    float *g = dl(t);
    cmpv(what, g, ref, t->n, abs_t, rel_t);
    free(g);
}
#define REL_BF16 (1.0 / 128)

/* ------------------------------------------------------------------ GEMM */
static void ref_gemm(int ta, int tb_, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *Cm,
                     float alpha, float beta, const float *bias) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)(ta ? A[k * M + m] : A[m * K + k]) * (tb_ ? B[n * K + k] : B[k * N + n]);
            Cm[m * N + n] = (float)(alpha * s + beta * Cm[m * N + n] + (bias ? bias[n] : 0));
        }
}

static void test_gemm(void) {
    ork_cuda_ctx *cx = KG.priv;
    const int64_t M = 304, N = 200, K = 520;
    struct { int ta, tb; const char *name; } L[] = {{0, 1, "linear fwd (TN)"}, {0, 0, "dgrad (NN)"}, {1, 0, "wgrad (NT)"}};
    for (int l = 0; l < 3; l++) {
        for (int f32out = 0; f32out < 2; f32out++) {
            tb a = mk(M * K, ORK_BF16, 1), b = mk(K * N, ORK_BF16, 1), c = mk(M * N, f32out ? ORK_F32 : ORK_BF16, 1);
            float *ref = malloc(M * N * sizeof(float));
            memcpy(ref, c.h, M * N * sizeof(float));
            float beta = f32out ? 1.f : 0.f;
            ork_gemm_desc g = {.ta = L[l].ta, .tb = L[l].tb, .M = M, .N = N, .K = K, .batch = 1, .alpha = 0.5f,
                               .beta = beta, .A = a.d, .adt = ORK_BF16, .lda = L[l].ta ? M : K, .B = b.d,
                               .bdt = ORK_BF16, .ldb = L[l].tb ? K : N, .C = c.d, .cdt = c.dt, .ldc = N};
            CU_ASSERT(G->gemm(&KG, &g) == ORK_OK);
            ref_gemm(L[l].ta, L[l].tb, M, N, K, a.h, b.h, ref, 0.5f, beta, NULL);
            char nm[64];
            snprintf(nm, sizeof nm, "gemm %s %s", L[l].name, f32out ? "f32 beta=1" : "bf16");
            cmpt(nm, &c, ref, 1e-3 * sqrt((double)K), f32out ? 1e-4 : REL_BF16);
            free(ref); fr(&a); fr(&b); fr(&c);
        }
    }
    /* batched Gram: F (3, 96, 700) -> F·Fᵀ (3, 96, 96), F32 output */
    {
        const int64_t Bt = 3, R = 96, P = 700;
        tb f = mk(Bt * R * P, ORK_BF16, 1), o = mk_out(Bt * R * R, ORK_F32);
        ork_gemm_desc g = {.ta = 0, .tb = 1, .M = R, .N = R, .K = P, .batch = Bt, .alpha = 1, .A = f.d,
                           .adt = ORK_BF16, .lda = P, .stride_a = R * P, .B = f.d, .bdt = ORK_BF16, .ldb = P,
                           .stride_b = R * P, .C = o.d, .cdt = ORK_F32, .ldc = R, .stride_c = R * R};
        CU_ASSERT_FATAL(G->gemm(&KG, &g) == ORK_OK);
        float *ref = calloc(Bt * R * R, sizeof(float));
        for (int64_t i = 0; i < Bt; i++)
            ref_gemm(0, 1, R, R, P, f.h + i * R * P, f.h + i * R * P, ref + i * R * R, 1, 0, NULL);
        cmpt("gemm batched gram f32", &o, ref, 1e-3 * sqrt((double)P), 1e-4);
        free(ref); fr(&f); fr(&o);
    }
    /* F32·F32 and the bias epilogue */
    {
        tb a = mk(M * K, ORK_F32, 1), b = mk(N * K, ORK_F32, 1), o = mk_out(M * N, ORK_F32);
        ork_gemm_desc g = {.tb = 1, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1, .A = a.d, .adt = ORK_F32,
                           .lda = K, .B = b.d, .bdt = ORK_F32, .ldb = K, .C = o.d, .cdt = ORK_F32, .ldc = N};
        CU_ASSERT_FATAL(G->gemm(&KG, &g) == ORK_OK);
        float *ref = calloc(M * N, sizeof(float));
        ref_gemm(0, 1, M, N, K, a.h, b.h, ref, 1, 0, NULL);
        cmpt("gemm f32 TN", &o, ref, 1e-3 * sqrt((double)K), 1e-4); /* TF32 would miss this */
        free(ref); fr(&a); fr(&b); fr(&o);
        tb x = mk(M * K, ORK_BF16, 1), w = mk(N * K, ORK_BF16, 1), bias = mk(N, ORK_BF16, 1), y = mk_out(M * N, ORK_BF16);
        ork_cuda_gemm_args ga = {.tb = 1, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1, .A = x.d, .adt = ORK_BF16,
                                 .lda = K, .B = w.d, .bdt = ORK_BF16, .ldb = K, .C = y.d, .cdt = ORK_BF16, .ldc = N,
                                 .bias = bias.d, .bias_dt = ORK_BF16};
        CU_ASSERT_FATAL(ork_cuda_gemm(cx, KG.stream ? KG.stream : NULL, &ga) == ORK_OK);
        ref = calloc(M * N, sizeof(float));
        ref_gemm(0, 1, M, N, K, x.h, w.h, ref, 1, 0, bias.h);
        cmpt("gemm bf16 + bias epilogue", &y, ref, 1e-3 * sqrt((double)K), REL_BF16);
        free(ref); fr(&x); fr(&w); fr(&bias); fr(&y);
    }
}

/* ------------------------------------------------------------- attention */
typedef struct { int64_t B, H, Hkv, Lq, Lk, D; int causal, use_mask; } acase;

static int vis(const acase *c, const uint8_t *km, int64_t b, int64_t i, int64_t j) {
    return (!c->causal || j <= i + (c->Lk - c->Lq)) && (!km || km[b * c->Lk + j]);
}
/* Reference for one (b, h, query row i): y row, lse, dq row; ys, dqs: the RMS-sum
 * sqrt(Σ term²) of each output element, the scale of bf16 rounding of P and dS. */
static void ref_row(const acase *c, const uint8_t *km, const float *q, const float *k, const float *v,
                    const float *dy, const float *yv, int64_t b, int64_t h, int64_t i, double *yo, double *lse,
                    double *dq, double *ys, double *dqs) {
    const int64_t D = c->D, hk = h / (c->H / c->Hkv);
    const double sc = 1.0 / sqrt((double)D);
    const float *qi = q + ((b * c->H + h) * c->Lq + i) * D;
    const float *K = k + (b * c->Hkv + hk) * c->Lk * D, *V = v + (b * c->Hkv + hk) * c->Lk * D;
    double *s = malloc(c->Lk * sizeof(double)), m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c->Lk; j++) {
        s[j] = -INFINITY;
        if (!vis(c, km, b, i, j)) continue;
        double d = 0;
        for (int64_t e = 0; e < D; e++) d += (double)qi[e] * K[j * D + e];
        s[j] = d * sc;
        if (s[j] > m) m = s[j];
    }
    for (int64_t e = 0; e < D; e++) yo[e] = ys[e] = dq[e] = dqs[e] = 0;
    if (m == -INFINITY) { *lse = -INFINITY; free(s); return; }
    for (int64_t j = 0; j < c->Lk; j++) if (s[j] != -INFINITY) sum += exp(s[j] - m);
    *lse = m + log(sum);
    for (int64_t j = 0; j < c->Lk; j++) {
        if (s[j] == -INFINITY) continue;
        double p = exp(s[j] - *lse);
        for (int64_t e = 0; e < D; e++) { yo[e] += p * V[j * D + e]; ys[e] += p * V[j * D + e] * p * V[j * D + e]; }
    }
    {
        const float *dyi = dy + ((b * c->H + h) * c->Lq + i) * D, *yi = yv + ((b * c->H + h) * c->Lq + i) * D;
        double delta = 0;
        for (int64_t e = 0; e < D; e++) { dq[e] = 0; delta += (double)dyi[e] * yi[e]; }
        for (int64_t j = 0; j < c->Lk; j++) {
            if (s[j] == -INFINITY) continue;
            double p = exp(s[j] - *lse), dp = 0;
            for (int64_t e = 0; e < D; e++) dp += (double)dyi[e] * V[j * D + e];
            double ds = p * (dp - delta) * sc;
            for (int64_t e = 0; e < D; e++) { dq[e] += ds * K[j * D + e]; dqs[e] += ds * K[j * D + e] * ds * K[j * D + e]; }
        }
    }
    for (int64_t e = 0; e < D; e++) { ys[e] = sqrt(ys[e]); dqs[e] = sqrt(dqs[e]); }
    free(s);
}
/* dk, dv rows for key j of kv head hk (summed over the group), given lse and y per query row. */
static void ref_key(const acase *c, const uint8_t *km, const float *q, const float *k, const float *v,
                    const float *dy, const float *yv, const float *lse, int64_t b, int64_t hk, int64_t j, double *dk,
                    double *dv, double *dks, double *dvs) {
    const int64_t D = c->D, grp = c->H / c->Hkv;
    const double sc = 1.0 / sqrt((double)D);
    const float *kj = k + ((b * c->Hkv + hk) * c->Lk + j) * D, *vj = v + ((b * c->Hkv + hk) * c->Lk + j) * D;
    for (int64_t e = 0; e < D; e++) dk[e] = dv[e] = dks[e] = dvs[e] = 0;
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
        for (int64_t i = 0; i < c->Lq; i++) {
            if (!vis(c, km, b, i, j)) continue;
            const int64_t r = (b * c->H + h) * c->Lq + i;
            const float *qi = q + r * D, *dyi = dy + r * D, *yi = yv + r * D;
            double s = 0, dp = 0, delta = 0;
            for (int64_t e = 0; e < D; e++) {
                s += (double)qi[e] * kj[e]; dp += (double)dyi[e] * vj[e]; delta += (double)dyi[e] * yi[e];
            }
            double p = exp(s * sc - lse[r]), ds = p * (dp - delta) * sc;
            for (int64_t e = 0; e < D; e++) {
                dv[e] += p * dyi[e]; dk[e] += ds * qi[e];
                dvs[e] += p * dyi[e] * p * dyi[e]; dks[e] += ds * qi[e] * ds * qi[e];
            }
        }
    for (int64_t e = 0; e < D; e++) { dks[e] = sqrt(dks[e]); dvs[e] = sqrt(dvs[e]); }
}

/* |got − ref| <= 1e-6 + 2^-7·|ref| + 2^-7·scale (scale = sqrt(Σ term²): bf16 rounding of P and dS
 * gives an error of std ~2^-9/√3·scale). */
static void cmps(const char *what, const float *got, const float *ref, const float *scale, int64_t n) {
    int64_t bad = 0, worst = -1;
    double wr = -1;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]), lim = 1e-6 + REL_BF16 * fabs(ref[i]) + scale[i] / 128;
        int ok = isfinite(got[i]) && e <= lim;
        if (!ok) bad++;
        double r = isfinite(got[i]) ? e / lim : 1e30;
        if (r > wr) { wr = r; worst = i; }
    }
    printf("\n    %-28s n=%-9lld bad=%-6lld worst[%lld] got %.6g ref %.6g (err/tol %.3g)", what, (long long)n,
           (long long)bad, (long long)worst, got[worst], ref[worst], wr);
    CU_ASSERT(bad == 0);
}

static void run_attn(const acase *c, int rows_sampled) {
    const int64_t nq = c->B * c->H * c->Lq * c->D, nk = c->B * c->Hkv * c->Lk * c->D;
    tb q = mk(nq, ORK_BF16, 1.5f), k = mk(nk, ORK_BF16, 1.5f), v = mk(nk, ORK_BF16, 1), dy = mk(nq, ORK_BF16, 1);
    tb y = mk_out(nq, ORK_BF16), lse = mk_out(c->B * c->H * c->Lq, ORK_F32);
    tb dq = mk_out(nq, ORK_BF16), dk = mk_out(nk, ORK_BF16), dv = mk_out(nk, ORK_BF16);
    uint8_t *km = NULL;
    void *kmd = NULL;
    if (c->use_mask) {
        km = malloc(c->B * c->Lk);
        for (int64_t i = 0; i < c->B * c->Lk; i++) km[i] = urand() > -0.6f;
        CU_ASSERT_FATAL(G->alloc(c->B * c->Lk, &kmd) == ORK_OK);
        G->memcpy_h2d(&KG, kmd, km, c->B * c->Lk);
    }
    ork_attn_desc d = {.B = c->B, .H = c->H, .Hkv = c->Hkv, .Lq = c->Lq, .Lk = c->Lk, .D = c->D,
                       .scale = 1.f / sqrtf((float)c->D), .causal = c->causal, .kmask = kmd};
    void *ws = NULL;
    size_t wsz = G->attention_ws(&d, 1);
    CU_ASSERT_FATAL(G->alloc(wsz ? wsz : 1, &ws) == ORK_OK);
    CU_ASSERT_FATAL(G->attention(&KG, &d, q.d, k.d, v.d, y.d, lse.d, ws, ORK_BF16) == ORK_OK);
    CU_ASSERT_FATAL(G->attention_bwd(&KG, &d, q.d, k.d, v.d, y.d, lse.d, dy.d, dq.d, dk.d, dv.d, ws, ORK_BF16) == ORK_OK);
    float *yg = dl(&y), *lg = dl(&lse), *dqg = dl(&dq), *dkg = dl(&dk), *dvg = dl(&dv);
    const int64_t D = c->D;
    /* rows: all, or a sample */
    int64_t nrow = c->B * c->H * c->Lq, nsel = rows_sampled ? rows_sampled : nrow;
    float *gy = malloc(nsel * D * 4), *ry = malloc(nsel * D * 4), *gl = malloc(nsel * 4), *rl = malloc(nsel * 4);
    float *gq = malloc(nsel * D * 4), *rq = malloc(nsel * D * 4), *sy = malloc(nsel * D * 4), *sq = malloc(nsel * D * 4);
    double *yo = malloc(D * 8), *dqo = malloc(D * 8), *yso = malloc(D * 8), *dqso = malloc(D * 8), ls;
    for (int64_t s = 0; s < nsel; s++) {
        int64_t r = rows_sampled ? (int64_t)((s * 7919 + 13) % nrow) : s;
        if (rows_sampled && s == 0) r = nrow - 1;
        int64_t i = r % c->Lq, h = (r / c->Lq) % c->H, b = r / (c->Lq * c->H);
        ref_row(c, km, q.h, k.h, v.h, dy.h, yg, b, h, i, yo, &ls, dqo, yso, dqso);
        for (int64_t e = 0; e < D; e++) {
            gy[s * D + e] = yg[r * D + e]; ry[s * D + e] = (float)yo[e]; sy[s * D + e] = (float)yso[e];
            gq[s * D + e] = dqg[r * D + e]; rq[s * D + e] = (float)dqo[e]; sq[s * D + e] = (float)dqso[e];
        }
        gl[s] = lg[r]; rl[s] = (float)ls;
    }
    char nm[96];
    snprintf(nm, sizeof nm, "attn y  L%lld/%lld D%lld%s%s", (long long)c->Lq, (long long)c->Lk, (long long)D,
             c->causal ? " causal" : "", c->use_mask ? " mask" : "");
    cmps(nm, gy, ry, sy, nsel * D);
    cmpv("attn lse", gl, rl, nsel, 1e-4, 1e-5);
    cmps("attn dq", gq, rq, sq, nsel * D);
    /* keys: all, or a sample */
    int64_t nkey = c->B * c->Hkv * c->Lk, ksel = rows_sampled ? rows_sampled : nkey;
    float *gk = malloc(ksel * D * 4), *rk = malloc(ksel * D * 4), *gv = malloc(ksel * D * 4), *rv = malloc(ksel * D * 4);
    float *sk = malloc(ksel * D * 4), *sv = malloc(ksel * D * 4);
    double *dko = malloc(D * 8), *dvo = malloc(D * 8), *dkso = malloc(D * 8), *dvso = malloc(D * 8);
    for (int64_t s = 0; s < ksel; s++) {
        int64_t r = rows_sampled ? (int64_t)((s * 104729 + 5) % nkey) : s;
        int64_t j = r % c->Lk, hk = (r / c->Lk) % c->Hkv, b = r / (c->Lk * c->Hkv);
        ref_key(c, km, q.h, k.h, v.h, dy.h, yg, lg, b, hk, j, dko, dvo, dkso, dvso);
        for (int64_t e = 0; e < D; e++) {
            gk[s * D + e] = dkg[r * D + e]; rk[s * D + e] = (float)dko[e]; sk[s * D + e] = (float)dkso[e];
            gv[s * D + e] = dvg[r * D + e]; rv[s * D + e] = (float)dvo[e]; sv[s * D + e] = (float)dvso[e];
        }
    }
    cmps("attn dk", gk, rk, sk, ksel * D);
    cmps("attn dv", gv, rv, sv, ksel * D);
    free(gk); free(rk); free(gv); free(rv); free(sk); free(sv); free(dko); free(dvo); free(dkso); free(dvso);
    free(gy); free(ry); free(gl); free(rl); free(gq); free(rq); free(sy); free(sq); free(yo); free(dqo); free(yso);
    free(dqso);
    free(yg); free(lg); free(dqg); free(dkg); free(dvg); free(km);
    G->free(kmd); G->free(ws);
    fr(&q); fr(&k); fr(&v); fr(&dy); fr(&y); fr(&lse); fr(&dq); fr(&dk); fr(&dv);
}

static void test_attention_small(void) {
    const acase cs[] = {
        {2, 4, 2, 200, 333, 64, 0, 1},  /* GQA, key mask, ragged, Lq != Lk */
        {1, 2, 2, 257, 257, 128, 1, 0}, /* causal, ragged */
        {1, 3, 1, 100, 64, 128, 1, 0},  /* causal with Lq > Lk: rows that see no key */
        {1, 2, 2, 128, 192, 128, 0, 0}, /* exact tiles */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_attn(&cs[i], 0);
}
static void test_attention_flux(void) {
    if (getenv("ORK_TEST_QUICK")) { printf("(skipped: ORK_TEST_QUICK)"); return; }
    const acase c = {1, 24, 24, 4608, 4608, 128, 0, 0};
    run_attn(&c, 24);
}

/* -------------------------------------------------- CUDA table vs CPU table */
/* Run a CPU op on the host F32 copies and the CUDA op on the device bf16 copies. */
#define BOTH(call_cpu, call_gpu) do { CU_ASSERT_FATAL((call_cpu) == ORK_OK); CU_ASSERT_FATAL((call_gpu) == ORK_OK); } while (0)

static ork_bcast mkbc(int ndim, const int64_t *shape, const int64_t *bshape) {
    ork_bcast bc = {.ndim = ndim};
    int64_t s = 1, n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        bc.shape[d] = shape[d];
        n *= shape[d];
        bc.bstride[d] = bshape[d] == 1 && shape[d] != 1 ? 0 : s;
        s *= bshape[d];
    }
    bc.n = n;
    bc.nb = s;
    return bc;
}

static void test_elementwise(void) {
    const ork_dtype F = ORK_F32, B = ORK_BF16;
    /* binary + bwd, modulate + bwd: a (4, 37, 96), b (4, 1, 96) and (96) */
    const int64_t sh[3] = {4, 37, 96}, n = 4 * 37 * 96;
    const int64_t bs[2][3] = {{4, 1, 96}, {1, 1, 96}};
    for (int v = 0; v < 2; v++) {
        ork_bcast bc = mkbc(3, sh, bs[v]);
        for (int op = 0; op < 2; op++) {
            tb a = mk(n, B, 1), b = mk(bc.nb, B, 1), y = mk_out(n, B), dy = mk(n, B, 1);
            tb da = mk_out(n, B), db = mk_out(bc.nb, F);
            float *ry = calloc(n, 4), *rda = calloc(n, 4), *rdb = calloc(bc.nb, 4);
            BOTH(C->binary(&KC, op, &bc, a.h, b.h, F, ry, F), G->binary(&KG, op, &bc, a.d, b.d, B, y.d, B));
            BOTH(C->binary_bwd(&KC, op, &bc, a.h, b.h, F, dy.h, F, rda, rdb, F),
                 G->binary_bwd(&KG, op, &bc, a.d, b.d, B, dy.d, B, da.d, db.d, F));
            cmpt(op ? "mul" : "add", &y, ry, 1e-6, REL_BF16);
            cmpt(op ? "mul da" : "add da", &da, rda, 1e-6, REL_BF16);
            cmpt(op ? "mul db (bcast sum)" : "add db (bcast sum)", &db, rdb, 1e-4 * sqrt((double)n / bc.nb), 1e-3);
            free(ry); free(rda); free(rdb);
            fr(&a); fr(&b); fr(&y); fr(&dy); fr(&da); fr(&db);
        }
        tb x = mk(n, B, 1), shf = mk(bc.nb, B, 1), scl = mk(bc.nb, B, 0.5f), y = mk_out(n, B), dy = mk(n, B, 1);
        tb dx = mk_out(n, B), dsh = mk_out(bc.nb, B), dsc = mk_out(bc.nb, B);
        float *ry = calloc(n, 4), *rdx = calloc(n, 4), *rdsh = calloc(bc.nb, 4), *rdsc = calloc(bc.nb, 4);
        BOTH(C->modulate(&KC, &bc, &bc, x.h, shf.h, scl.h, ry, F), G->modulate(&KG, &bc, &bc, x.d, shf.d, scl.d, y.d, B));
        BOTH(C->modulate_bwd(&KC, &bc, &bc, x.h, scl.h, dy.h, rdx, rdsh, rdsc, F),
             G->modulate_bwd(&KG, &bc, &bc, x.d, scl.d, dy.d, dx.d, dsh.d, dsc.d, B));
        cmpt("modulate", &y, ry, 1e-3, REL_BF16);
        cmpt("modulate dx", &dx, rdx, 1e-3, REL_BF16);
        cmpt("modulate dshift", &dsh, rdsh, 1e-3 * sqrt((double)n / bc.nb), REL_BF16);
        cmpt("modulate dscale", &dsc, rdsc, 1e-3 * sqrt((double)n / bc.nb), REL_BF16);
        free(ry); free(rdx); free(rdsh); free(rdsc);
        fr(&x); fr(&shf); fr(&scl); fr(&y); fr(&dy); fr(&dx); fr(&dsh); fr(&dsc);
    }
    /* norms: (rows, C) */
    const int64_t R = 77, Cc = 3072;
    {
        tb x = mk(R * Cc, B, 2), y = mk_out(R * Cc, B), mu = mk_out(R, F), rs = mk_out(R, F), dy = mk(R * Cc, B, 1),
           dx = mk_out(R * Cc, B);
        float *ry = calloc(R * Cc, 4), *rmu = calloc(R, 4), *rrs = calloc(R, 4), *rdx = calloc(R * Cc, 4);
        BOTH(C->layernorm(&KC, R, Cc, 1e-6f, x.h, ry, rmu, rrs, F), G->layernorm(&KG, R, Cc, 1e-6f, x.d, y.d, mu.d, rs.d, B));
        float *gmu = dl(&mu), *grs = dl(&rs);
        BOTH(C->layernorm_bwd(&KC, R, Cc, x.h, rmu, rrs, dy.h, rdx, F),
             G->layernorm_bwd(&KG, R, Cc, x.d, mu.d, rs.d, dy.d, dx.d, B));
        cmpt("layernorm", &y, ry, 1e-2, REL_BF16);
        cmpv("layernorm mean", gmu, rmu, R, 1e-5, 1e-4);
        cmpv("layernorm rstd", grs, rrs, R, 1e-5, 1e-4);
        cmpt("layernorm dx", &dx, rdx, 1e-2, REL_BF16);
        free(gmu); free(grs); free(ry); free(rmu); free(rrs); free(rdx);
        fr(&x); fr(&y); fr(&mu); fr(&rs); fr(&dy); fr(&dx);
    }
    {
        tb x = mk(R * Cc, B, 2), w = mk(Cc, F, 1), y = mk_out(R * Cc, B), rs = mk_out(R, F), dy = mk(R * Cc, B, 1),
           dx = mk_out(R * Cc, B), dw = mk_out(Cc, F);
        float *ry = calloc(R * Cc, 4), *rrs = calloc(R, 4), *rdx = calloc(R * Cc, 4), *rdw = calloc(Cc, 4);
        BOTH(C->rmsnorm(&KC, R, Cc, 1e-6f, x.h, w.h, F, ry, rrs, F), G->rmsnorm(&KG, R, Cc, 1e-6f, x.d, w.d, F, y.d, rs.d, B));
        BOTH(C->rmsnorm_bwd(&KC, R, Cc, x.h, w.h, F, rrs, dy.h, rdx, rdw, F),
             G->rmsnorm_bwd(&KG, R, Cc, x.d, w.d, F, rs.d, dy.d, dx.d, dw.d, B));
        cmpt("rmsnorm", &y, ry, 1e-2, REL_BF16);
        cmpt("rmsnorm rstd", &rs, rrs, 1e-5, 1e-4);
        cmpt("rmsnorm dx", &dx, rdx, 1e-2, REL_BF16);
        cmpt("rmsnorm dw", &dw, rdw, 1e-3 * sqrt((double)R), 1e-3);
        free(ry); free(rrs); free(rdx); free(rdw);
        fr(&x); fr(&w); fr(&y); fr(&rs); fr(&dy); fr(&dx); fr(&dw);
    }
    /* activations */
    {
        const int64_t m = 100003;
        const char *names[] = {"gelu_tanh", "silu", "relu", "tanh_clamp"};
        for (int op = 0; op < 4; op++) {
            tb x = mk(m, B, 4), y = mk_out(m, B), dy = mk(m, B, 1), dx = mk_out(m, B);
            float *ry = calloc(m, 4), *rdx = calloc(m, 4);
            BOTH(C->unary(&KC, op, m, 3.f, x.h, ry, F), G->unary(&KG, op, m, 3.f, x.d, y.d, B));
            BOTH(C->unary_bwd(&KC, op, m, 3.f, x.h, dy.h, rdx, F), G->unary_bwd(&KG, op, m, 3.f, x.d, dy.d, dx.d, B));
            char nm[48];
            cmpt(names[op], &y, ry, 1e-3, REL_BF16);
            snprintf(nm, sizeof nm, "%s bwd", names[op]);
            cmpt(nm, &dx, rdx, 1e-3, REL_BF16);
            free(ry); free(rdx); fr(&x); fr(&y); fr(&dy); fr(&dx);
        }
        tb x = mk(2 * m, B, 3), y = mk_out(m, B), dy = mk(m, B, 1), dx = mk_out(2 * m, B);
        float *ry = calloc(m, 4), *rdx = calloc(2 * m, 4);
        BOTH(C->swiglu(&KC, 7, m / 7, x.h, ry, F), G->swiglu(&KG, 7, m / 7, x.d, y.d, B));
        BOTH(C->swiglu_bwd(&KC, 7, m / 7, x.h, dy.h, rdx, F), G->swiglu_bwd(&KG, 7, m / 7, x.d, dy.d, dx.d, B));
        y.n = 7 * (m / 7); dx.n = 2 * y.n;
        cmpt("swiglu", &y, ry, 1e-3, REL_BF16);
        cmpt("swiglu bwd", &dx, rdx, 1e-3, REL_BF16);
        free(ry); free(rdx); fr(&x); fr(&y); fr(&dy); fr(&dx);
    }
    /* rope: x (BH=6, L=50, D=128), pe (L, 64, 2) */
    for (int half = 0; half < 2; half++) {
        const int64_t BH = 6, L = 50, D = 128, m = BH * L * D;
        tb x = mk(m, B, 1), pe = mk(L * D, F, 1), y = mk_out(m, B), dx = mk_out(m, B);
        for (int64_t i = 0; i < L * D / 2; i++) { double a = 0.37 * i; pe.h[2 * i] = (float)cos(a); pe.h[2 * i + 1] = (float)sin(a); }
        upload(&pe);
        float *ry = calloc(m, 4), *rdx = calloc(m, 4);
        BOTH(C->rope(&KC, BH, L, D, half, x.h, pe.h, ry, F), G->rope(&KG, BH, L, D, half, x.d, pe.d, y.d, B));
        BOTH(C->rope_bwd(&KC, BH, L, D, half, x.h, pe.h, rdx, F), G->rope_bwd(&KG, BH, L, D, half, x.d, pe.d, dx.d, B));
        cmpt(half ? "rope half-split" : "rope adjacent", &y, ry, 1e-3, REL_BF16);
        cmpt(half ? "rope half-split bwd" : "rope adjacent bwd", &dx, rdx, 1e-3, REL_BF16);
        free(ry); free(rdx); fr(&x); fr(&pe); fr(&y); fr(&dx);
    }
    /* strided copy: permute (2, 3, 40, 64) -> (2, 40, 3, 64) with cast bf16 -> f32; axpby; fill_scalar */
    {
        const int64_t m = 2 * 3 * 40 * 64;
        tb x = mk(m, B, 1), y = mk_out(m, F), z = mk(m, F, 1);
        ork_copy_desc cd = {.ndim = 4, .shape = {2, 40, 3, 64}, .src_stride = {3 * 40 * 64, 64, 40 * 64, 1},
                            .dst_stride = {40 * 3 * 64, 3 * 64, 64, 1}, .sdt = B, .ddt = F};
        float *ry = calloc(m, 4), *rz = malloc(m * 4);
        memcpy(rz, z.h, m * 4);
        ork_copy_desc cdc = cd;
        cdc.sdt = F; /* the CPU side reads the F32 copy */
        BOTH(C->copy(&KC, &cdc, x.h, ry), G->copy(&KG, &cd, x.d, y.d));
        cmpt("copy permute+cast", &y, ry, 0, 0);
        BOTH(C->axpby(&KC, m, 0.5f, x.h, F, 2.f, rz, F), G->axpby(&KG, m, 0.5f, x.d, B, 2.f, z.d, F));
        cmpt("axpby bf16->f32", &z, rz, 1e-6, 1e-6);
        free(ry); free(rz); fr(&x); fr(&y); fr(&z);
    }
    /* images: maxpool, upsample (NC=6, H=33, W=20), conv2d */
    {
        const int64_t NC = 6, H = 33, W = 20, m = NC * H * W, mo = NC * (H / 2) * (W / 2);
        tb x = mk(m, B, 1), y = mk_out(mo, B), dy = mk(mo, B, 1), dx = mk_out(m, B);
        float *ry = calloc(mo, 4), *rdx = calloc(m, 4);
        BOTH(C->maxpool2x2(&KC, NC, H, W, x.h, ry, F), G->maxpool2x2(&KG, NC, H, W, x.d, y.d, B));
        BOTH(C->maxpool2x2_bwd(&KC, NC, H, W, x.h, dy.h, rdx, F), G->maxpool2x2_bwd(&KG, NC, H, W, x.d, dy.d, dx.d, B));
        cmpt("maxpool2x2", &y, ry, 0, 0);
        cmpt("maxpool2x2 bwd", &dx, rdx, 0, 0);
        free(ry); free(rdx); fr(&y); fr(&dy); fr(&dx);
        tb u = mk_out(4 * m, B), du = mk(4 * m, B, 1), dxu = mk_out(m, B);
        float *ru = calloc(4 * m, 4), *rdu = calloc(m, 4);
        BOTH(C->upsample2x(&KC, NC, H, W, x.h, ru, F), G->upsample2x(&KG, NC, H, W, x.d, u.d, B));
        BOTH(C->upsample2x_bwd(&KC, NC, H, W, du.h, rdu, F), G->upsample2x_bwd(&KG, NC, H, W, du.d, dxu.d, B));
        cmpt("upsample2x", &u, ru, 0, 0);
        cmpt("upsample2x bwd", &dxu, rdu, 1e-3, REL_BF16);
        free(ru); free(rdu); fr(&u); fr(&du); fr(&dxu); fr(&x);
    }
    const ork_conv2d_desc convs[] = {
        {.N = 2, .Cin = 5, .H = 17, .W = 12, .Cout = 7, .kh = 3, .kw = 3, .Ho = 17, .Wo = 12, .stride = 1, .pad = 1},
        {.N = 2, .Cin = 4, .H = 16, .W = 11, .Cout = 6, .kh = 3, .kw = 3, .Ho = 8, .Wo = 6, .stride = 2, .pad = 1},
        {.N = 1, .Cin = 8, .H = 9, .W = 10, .Cout = 16, .kh = 1, .kw = 1, .Ho = 9, .Wo = 10, .stride = 1, .pad = 0},
        {.N = 1, .Cin = 3, .H = 40, .W = 37, .Cout = 8, .kh = 3, .kw = 3, .Ho = 40, .Wo = 37, .stride = 1, .pad = 1},
        {.N = 2, .Cin = 4, .H = 64, .W = 50, .Cout = 6, .kh = 3, .kw = 3, .Ho = 32, .Wo = 25, .stride = 2, .pad = 1},
    };
    /* pass 1: the forward's col in pieces of 64 output positions (ORK_CONV_COL_KIB=1;
     * a 1024² encode takes 256 MiB pieces): 1480 and 800 positions, the last piece short */
    for (size_t cc = 0; cc < 10; cc++) {
        const ork_conv2d_desc *d = &convs[cc % 5];
        if (cc == 5) setenv("ORK_CONV_COL_KIB", "1", 1);
        int64_t nx = d->N * d->Cin * d->H * d->W, nw = d->Cout * d->Cin * d->kh * d->kw, ny = d->N * d->Cout * d->Ho * d->Wo;
        tb x = mk(nx, B, 1), w = mk(nw, F, 0.5f), bias = mk(d->Cout, F, 1), y = mk_out(ny, B), dy = mk(ny, B, 1);
        tb dx = mk_out(nx, B), dw = mk(nw, F, 1), db = mk(d->Cout, F, 1);
        float *ry = calloc(ny, 4), *rdx = calloc(nx, 4), *rdw = malloc(nw * 4), *rdb = malloc(d->Cout * 4);
        memcpy(rdw, dw.h, nw * 4);
        memcpy(rdb, db.h, d->Cout * 4);
        void *wsg, *wsc;
        CU_ASSERT_FATAL(G->alloc(G->conv2d_ws(d, 1), &wsg) == ORK_OK);
        wsc = malloc(C->conv2d_ws(d, 1) + 64);
        BOTH(C->conv2d(&KC, d, x.h, w.h, bias.h, F, ry, wsc, F), G->conv2d(&KG, d, x.d, w.d, bias.d, F, y.d, wsg, B));
        BOTH(C->conv2d_dgrad(&KC, d, dy.h, w.h, F, rdx, wsc, F), G->conv2d_dgrad(&KG, d, dy.d, w.d, F, dx.d, wsg, B));
        BOTH(C->conv2d_wgrad(&KC, d, x.h, dy.h, rdw, rdb, wsc, F), G->conv2d_wgrad(&KG, d, x.d, dy.d, dw.d, db.d, wsg, B));
        double K = (double)(d->Cin * d->kh * d->kw);
        /* the GPU rounds w to bf16 for its GEMM: relative error ~2^-9 per term */
        cmpt("conv2d", &y, ry, 1e-2 * sqrt(K), REL_BF16);
        cmpt("conv2d dgrad", &dx, rdx, 1e-2 * sqrt(K), REL_BF16);
        cmpt("conv2d wgrad (+=)", &dw, rdw, 1e-3 * sqrt((double)d->N * d->Ho * d->Wo), 1e-3);
        cmpt("conv2d db (+=)", &db, rdb, 1e-3 * sqrt((double)d->N * d->Ho * d->Wo), 1e-3);
        G->free(wsg); free(wsc);
        free(ry); free(rdx); free(rdw); free(rdb);
        fr(&x); fr(&w); fr(&bias); fr(&y); fr(&dy); fr(&dx); fr(&dw); fr(&db);
    }
    unsetenv("ORK_CONV_COL_KIB");
    /* reductions */
    {
        const int64_t m = 3000017;
        tb a = mk(m, B, 1), b = mk(m, B, 1), out = mk_out(3, F), g = mk(1, F, 1), da = mk_out(m, B), dbb = mk_out(m, B);
        float r[3], *rda = calloc(m, 4), *rdb = calloc(m, 4);
        BOTH(C->reduce(&KC, ORK_REDUCE_SUM, m, a.h, F, &r[0]), G->reduce(&KG, ORK_REDUCE_SUM, m, a.d, B, (float *)out.d));
        BOTH(C->reduce(&KC, ORK_REDUCE_SUMSQ, m, a.h, F, &r[1]), G->reduce(&KG, ORK_REDUCE_SUMSQ, m, a.d, B, (float *)out.d + 1));
        BOTH(C->mse(&KC, m, a.h, b.h, F, &r[2]), G->mse(&KG, m, a.d, b.d, B, (float *)out.d + 2));
        BOTH(C->mse_bwd(&KC, m, a.h, b.h, g.h, rda, rdb, F), G->mse_bwd(&KG, m, a.d, b.d, g.d, da.d, dbb.d, B));
        cmpt("sum / sumsq / mse", &out, r, 1e-2, 1e-4);
        cmpt("mse da", &da, rda, 1e-9, REL_BF16);
        cmpt("mse db", &dbb, rdb, 1e-9, REL_BF16);
        /* deterministic: the same reduction twice gives the same bits */
        float *o1 = dl(&out);
        CU_ASSERT(G->reduce(&KG, ORK_REDUCE_SUM, m, a.d, B, (float *)out.d) == ORK_OK);
        float *o2 = dl(&out);
        CU_ASSERT(memcmp(o1, o2, 4) == 0);
        free(o1); free(o2); free(rda); free(rdb);
        fr(&a); fr(&b); fr(&out); fr(&g); fr(&da); fr(&dbb);
    }
}

static void test_bad_input(void) {
    ork_attn_desc d = {.B = 1, .H = 3, .Hkv = 2, .Lq = 4, .Lk = 4, .D = 128};
    CU_ASSERT(G->attention(&KG, &d, NULL, NULL, NULL, NULL, NULL, NULL, ORK_BF16) == ORK_E_INVALID);
    d.Hkv = 3; d.D = 96;
    CU_ASSERT(G->attention(&KG, &d, NULL, NULL, NULL, NULL, NULL, NULL, ORK_BF16) == ORK_E_UNSUPPORTED);
    d.D = 128;
    CU_ASSERT(G->attention(&KG, &d, NULL, NULL, NULL, NULL, NULL, NULL, ORK_F32) == ORK_E_UNSUPPORTED);
    ork_gemm_desc g = {.M = 4, .N = 4, .K = 4, .adt = ORK_BF16, .bdt = ORK_F32, .cdt = ORK_F32};
    CU_ASSERT(G->gemm(&KG, &g) == ORK_E_UNSUPPORTED);
    CU_ASSERT(G->fill(&KG, 4, 0.f, NULL, ORK_I32) == ORK_E_UNSUPPORTED);
}

static int suite_init(void) {
    G = ork_cuda_backend();
    C = ork_cpu_backend();
    if (G->ctx_create(0, &KG.priv) != ORK_OK) return 1;
    if (ork_cuda_stream_create(&KG.stream) != ORK_OK) return 1;
    KG.nthreads = 1;
    KC.nthreads = 8;
    if (C->ctx_create && C->ctx_create(0, &KC.priv) != ORK_OK) return 1;
    return 0;
}
static int suite_clean(void) {
    G->ctx_destroy(KG.priv);
    ork_cuda_stream_destroy(KG.stream);
    if (C->ctx_destroy && KC.priv) C->ctx_destroy(KC.priv);
    return 0;
}

static const ork_test_case cases[] = {
    {"gemm layouts vs reference", test_gemm},
    {"attention fwd+bwd small shapes vs reference", test_attention_small},
    {"attention fwd+bwd L=4608 24x128 sampled", test_attention_flux},
    {"elementwise, norms, images, reductions vs cpu backend", test_elementwise},
    {"bad arguments refused", test_bad_input},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() == 0) { printf("no CUDA device: skipped\n"); return 77; }
    return ork_test_run("cuda_ops", suite_init, suite_clean, cases);
}
