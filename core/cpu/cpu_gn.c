/* cpu/cpu_gn.c — CPU kernels for group norm (NCHW, optional per-channel
 * affine) and the row softmax, forward and backward (tensor/backend.h). F32
 * activations; affine weights F32 or BF16; statistics and row sums in F64.
 * Parallel over (batch, group) / channels / rows with ork_par_for.
 * Owns nothing between calls. */
#include "cpu/cpu.h"

#include <math.h>

/* ---- group norm ------------------------------------------------------------ */

typedef struct gn_args {
    int64_t B, C, P, G;
    float eps;
    const float *x, *dy;
    const void *w, *b;
    ork_dtype wdt;
    float *y, *dx, *dw, *db;
    float *mean, *rstd;
    const float *cmean, *crstd;
} gn_args;

static inline float wv(const void *p, ork_dtype dt, int64_t c, float dflt) {
    return p ? (float)ork_elem_load(p, dt, c) : dflt;
}

/* one (batch, group) per item */
static void gn_fwd_range(void *ctx, int64_t lo, int64_t hi) {
    const gn_args *a = ctx;
    int64_t cg = a->C / a->G, m = cg * a->P;
    for (int64_t r = lo; r < hi; r++) {
        int64_t n = r / a->G, gi = r % a->G, c0 = gi * cg;
        const float *x = a->x + (n * a->C + c0) * a->P;
        float *y = a->y + (n * a->C + c0) * a->P;
        double s = 0.0, v = 0.0;
        for (int64_t i = 0; i < m; i++) s += x[i];
        double mu = s / (double)m;
        for (int64_t i = 0; i < m; i++) v += (x[i] - mu) * (x[i] - mu);
        float rs = (float)(1.0 / sqrt(v / (double)m + a->eps)), muf = (float)mu;
        for (int64_t c = 0; c < cg; c++) {
            float sc = wv(a->w, a->wdt, c0 + c, 1.0f) * rs, sh = wv(a->b, a->wdt, c0 + c, 0.0f);
            for (int64_t p = 0; p < a->P; p++) y[c * a->P + p] = (x[c * a->P + p] - muf) * sc + sh;
        }
        a->mean[r] = muf;
        a->rstd[r] = rs;
    }
}

ork_status ork_cpu_groupnorm(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, float eps, const void *x,
                             const void *w, const void *b, ork_dtype wdt, void *y, float *mean, float *rstd,
                             ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "groupnorm");
    if ((w || b) && !ork_cpu_weight_dt(wdt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu groupnorm: weight dtype %d", (int)wdt);
    if (G <= 0 || C % G) return ORK_FAIL(ORK_E_INVALID, "cpu groupnorm: %lld groups do not divide %lld channels",
                                         (long long)G, (long long)C);
    gn_args a = {.B = B, .C = C, .P = P, .G = G, .eps = eps, .x = x, .w = w, .b = b, .wdt = wdt, .y = y,
                 .mean = mean, .rstd = rstd};
    ork_par_for(k ? k->nthreads : 1, B * G, 1, gn_fwd_range, &a);
    return ORK_OK;
}

/* dx per (batch, group): g = dy·w[c], dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) */
static void gn_dx_range(void *ctx, int64_t lo, int64_t hi) {
    const gn_args *a = ctx;
    int64_t cg = a->C / a->G, m = cg * a->P;
    for (int64_t r = lo; r < hi; r++) {
        int64_t n = r / a->G, c0 = (r % a->G) * cg, o = (n * a->C + c0) * a->P;
        const float *x = a->x + o, *dy = a->dy + o;
        float mu = a->cmean[r], rs = a->crstd[r];
        double s1 = 0.0, s2 = 0.0;
        for (int64_t c = 0; c < cg; c++) {
            float wc = wv(a->w, a->wdt, c0 + c, 1.0f);
            for (int64_t p = 0; p < a->P; p++) {
                float gg = dy[c * a->P + p] * wc, xh = (x[c * a->P + p] - mu) * rs;
                s1 += gg;
                s2 += (double)gg * xh;
            }
        }
        float m1 = (float)(s1 / (double)m), m2 = (float)(s2 / (double)m);
        for (int64_t c = 0; c < cg; c++) {
            float wc = wv(a->w, a->wdt, c0 + c, 1.0f);
            for (int64_t p = 0; p < a->P; p++) {
                int64_t i = c * a->P + p;
                a->dx[o + i] = rs * (dy[i] * wc - m1 - (x[i] - mu) * rs * m2);
            }
        }
    }
}

/* dw, db per channel (accumulate) */
static void gn_dw_range(void *ctx, int64_t lo, int64_t hi) {
    const gn_args *a = ctx;
    int64_t cg = a->C / a->G;
    for (int64_t c = lo; c < hi; c++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t n = 0; n < a->B; n++) {
            int64_t r = n * a->G + c / cg;
            const float *x = a->x + (n * a->C + c) * a->P, *dy = a->dy + (n * a->C + c) * a->P;
            float mu = a->cmean[r], rs = a->crstd[r];
            for (int64_t p = 0; p < a->P; p++) {
                sw += (double)dy[p] * ((x[p] - mu) * rs);
                sb += dy[p];
            }
        }
        if (a->dw) a->dw[c] += (float)sw;
        if (a->db) a->db[c] += (float)sb;
    }
}

ork_status ork_cpu_groupnorm_bwd(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, const void *x,
                                 const void *w, ork_dtype wdt, const float *mean, const float *rstd, const void *dy,
                                 void *dx, float *dw, float *db, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "groupnorm backward");
    if (w && !ork_cpu_weight_dt(wdt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu groupnorm backward: weight dtype %d", (int)wdt);
    if (G <= 0 || C % G) return ORK_FAIL(ORK_E_INVALID, "cpu groupnorm backward: %lld groups, %lld channels",
                                         (long long)G, (long long)C);
    gn_args a = {.B = B, .C = C, .P = P, .G = G, .x = x, .dy = dy, .w = w, .wdt = wdt, .dx = dx, .dw = dw, .db = db,
                 .cmean = mean, .crstd = rstd};
    int nt = k ? k->nthreads : 1;
    if (dx) ork_par_for(nt, B * G, 1, gn_dx_range, &a);
    if (dw || db) ork_par_for(nt, C, 1, gn_dw_range, &a);
    return ORK_OK;
}

/* ---- softmax over the last dim ------------------------------------------------ */

typedef struct sm_args {
    int64_t C;
    const float *x, *y, *dy;
    float *out;
} sm_args;

static void sm_fwd_range(void *ctx, int64_t lo, int64_t hi) {
    const sm_args *a = ctx;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = a->x + r * a->C;
        float *y = a->out + r * a->C, mx = -INFINITY;
        for (int64_t c = 0; c < a->C; c++) mx = x[c] > mx ? x[c] : mx;
        double s = 0.0;
        for (int64_t c = 0; c < a->C; c++) { y[c] = expf(x[c] - mx); s += y[c]; }
        float inv = (float)(1.0 / s);
        for (int64_t c = 0; c < a->C; c++) y[c] *= inv;
    }
}

static void sm_bwd_range(void *ctx, int64_t lo, int64_t hi) {
    const sm_args *a = ctx;
    for (int64_t r = lo; r < hi; r++) {
        const float *y = a->y + r * a->C, *g = a->dy + r * a->C;
        float *dx = a->out + r * a->C;
        double s = 0.0;
        for (int64_t c = 0; c < a->C; c++) s += (double)g[c] * y[c];
        float sf = (float)s;
        for (int64_t c = 0; c < a->C; c++) dx[c] = y[c] * (g[c] - sf);
    }
}

ork_status ork_cpu_softmax(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "softmax");
    sm_args a = {.C = C, .x = x, .out = y};
    if (C > 0) ork_par_for(k ? k->nthreads : 1, rows, 8, sm_fwd_range, &a);
    return ORK_OK;
}

ork_status ork_cpu_softmax_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *y, const void *dy, void *dx,
                               ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "softmax backward");
    sm_args a = {.C = C, .y = y, .dy = dy, .out = dx};
    if (C > 0) ork_par_for(k ? k->nthreads : 1, rows, 8, sm_bwd_range, &a);
    return ORK_OK;
}
