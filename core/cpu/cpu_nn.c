/* cpu/cpu_nn.c — attention and 2-D convolution for the CPU backend.
 * Attention is the plain, stable form: scores of one query row, max-shifted
 * exp, lse saved; backward recomputes P from lse (no L×L buffer is kept).
 * Convolution is im2col + the blocked GEMM, one image at a time. Scratch
 * (one score row per thread, one column matrix) is malloc'd per call: host
 * memory outside the device budget. Owns nothing between calls. */
#include "cpu/cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- attention ------------------------------------------------------------ */

typedef struct attn_job {
    const ork_attn_desc *d;
    const float *q, *k, *v, *y, *lse, *dy;
    float *out, *olse, *dq, *dk, *dv;
    ork_status status;
} attn_job;

/* Is key j visible to query i of batch b? */
static inline int visible(const ork_attn_desc *d, int64_t b, int64_t i, int64_t j) {
    if (d->kmask && !d->kmask[b * d->Lk + j]) return 0;
    if (d->causal && j > i + (d->Lk - d->Lq)) return 0;
    return 1;
}

/* Rows of (b, h, i) in [lo, hi). */
static void attn_fwd_range(void *ctx, int64_t lo, int64_t hi) {
    attn_job *J = ctx;
    const ork_attn_desc *d = J->d;
    int64_t D = d->D, G = d->H / d->Hkv;
    float *s = malloc(sizeof(float) * (size_t)(d->Lk ? d->Lk : 1));
    if (!s) { J->status = ORK_E_NOMEM; return; }
    for (int64_t r = lo; r < hi; r++) {
        int64_t i = r % d->Lq, bh = r / d->Lq, b = bh / d->H, h = bh % d->H;
        const float *q = J->q + r * D;
        const float *K = J->k + ((b * d->Hkv + h / G) * d->Lk) * D;
        const float *V = J->v + ((b * d->Hkv + h / G) * d->Lk) * D;
        float *y = J->out + r * D, m = -INFINITY;
        for (int64_t j = 0; j < d->Lk; j++) {
            if (!visible(d, b, i, j)) { s[j] = -INFINITY; continue; }
            float acc = 0.0f;
            for (int64_t c = 0; c < D; c++) acc += q[c] * K[j * D + c];
            s[j] = acc * d->scale;
            if (s[j] > m) m = s[j];
        }
        memset(y, 0, sizeof(float) * (size_t)D);
        if (m == -INFINITY) { J->olse[r] = -INFINITY; continue; }
        double sum = 0.0;
        for (int64_t j = 0; j < d->Lk; j++) {
            if (s[j] == -INFINITY) continue;
            float p = expf(s[j] - m);
            sum += p;
            for (int64_t c = 0; c < D; c++) y[c] += p * V[j * D + c];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t c = 0; c < D; c++) y[c] *= inv;
        J->olse[r] = m + (float)log(sum);
    }
    free(s);
}

size_t ork_cpu_attention_ws(const ork_attn_desc *d, int backward) { return 0; }

ork_status ork_cpu_attention(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                             const void *v, void *y, float *lse, void *ws, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "attention");
    attn_job J = {.d = d, .q = q, .k = kk, .v = v, .out = y, .olse = lse};
    int64_t rows = d->B * d->H * d->Lq;
    int64_t per = 2 * d->Lk * d->D;
    ork_par_for(k->nthreads, rows, per >= 65536 ? 1 : 65536 / (per ? per : 1), attn_fwd_range, &J);
    return J.status == ORK_OK ? ORK_OK : ORK_FAIL(J.status, "cpu attention: out of host memory");
}

/* Tasks are (b, kv head): each owns its dk, dv rows, so no two threads write
 * the same gradient; dq rows of the group's query heads are owned too. */
static void attn_bwd_range(void *ctx, int64_t lo, int64_t hi) {
    attn_job *J = ctx;
    const ork_attn_desc *d = J->d;
    int64_t D = d->D, G = d->H / d->Hkv, Lk = d->Lk;
    float *dp = malloc(sizeof(float) * (size_t)(Lk ? Lk : 1) * 2);
    if (!dp) { J->status = ORK_E_NOMEM; return; }
    float *p = dp + Lk;
    for (int64_t t = lo; t < hi; t++) {
        int64_t b = t / d->Hkv, hk = t % d->Hkv;
        const float *K = J->k + t * Lk * D, *V = J->v + t * Lk * D;
        float *dK = J->dk ? J->dk + t * Lk * D : NULL, *dV = J->dv ? J->dv + t * Lk * D : NULL;
        if (dK) memset(dK, 0, sizeof(float) * (size_t)(Lk * D));
        if (dV) memset(dV, 0, sizeof(float) * (size_t)(Lk * D));
        for (int64_t h = hk * G; h < (hk + 1) * G; h++)
            for (int64_t i = 0; i < d->Lq; i++) {
                int64_t r = ((b * d->H + h) * d->Lq + i);
                const float *q = J->q + r * D, *y = J->y + r * D, *dy = J->dy + r * D;
                float *dq = J->dq ? J->dq + r * D : NULL;
                if (dq) memset(dq, 0, sizeof(float) * (size_t)D);
                float lse = J->lse[r];
                if (lse == -INFINITY) continue;
                float Di = 0.0f;
                for (int64_t c = 0; c < D; c++) Di += dy[c] * y[c];
                for (int64_t j = 0; j < Lk; j++) {
                    if (!visible(d, b, i, j)) { p[j] = 0.0f; dp[j] = 0.0f; continue; }
                    float s = 0.0f, g = 0.0f;
                    for (int64_t c = 0; c < D; c++) { s += q[c] * K[j * D + c]; g += dy[c] * V[j * D + c]; }
                    p[j] = expf(s * d->scale - lse);
                    dp[j] = p[j] * (g - Di) * d->scale; /* dS · scale */
                }
                for (int64_t j = 0; j < Lk; j++) {
                    if (p[j] == 0.0f && dp[j] == 0.0f) continue;
                    for (int64_t c = 0; c < D; c++) {
                        if (dq) dq[c] += dp[j] * K[j * D + c];
                        if (dK) dK[j * D + c] += dp[j] * q[c];
                        if (dV) dV[j * D + c] += p[j] * dy[c];
                    }
                }
            }
    }
    free(dp);
}

ork_status ork_cpu_attention_bwd(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                                 const void *v, const void *y, const float *lse, const void *dy, void *dq,
                                 void *dk, void *dv, void *ws, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "attention backward");
    attn_job J = {.d = d, .q = q, .k = kk, .v = v, .y = y, .lse = lse, .dy = dy, .dq = dq, .dk = dk, .dv = dv};
    ork_par_for(k->nthreads, d->B * d->Hkv, 1, attn_bwd_range, &J);
    return J.status == ORK_OK ? ORK_OK : ORK_FAIL(J.status, "cpu attention backward: out of host memory");
}

/* ---- convolution ------------------------------------------------------------ */

/* col (Cin·kh·kw, Ho·Wo) from one image x (Cin, H, W); zeros in the padding. */
static void im2col(const ork_conv2d_desc *d, const float *x, float *col) {
    int64_t HW = d->Ho * d->Wo;
    for (int64_t c = 0; c < d->Cin; c++)
        for (int64_t u = 0; u < d->kh; u++)
            for (int64_t v = 0; v < d->kw; v++) {
                float *row = col + ((c * d->kh + u) * d->kw + v) * HW;
                for (int64_t oy = 0; oy < d->Ho; oy++) {
                    int64_t iy = oy * d->stride - d->pad + u;
                    for (int64_t ox = 0; ox < d->Wo; ox++) {
                        int64_t ix = ox * d->stride - d->pad + v;
                        row[oy * d->Wo + ox] = (iy >= 0 && iy < d->H && ix >= 0 && ix < d->W)
                                                   ? x[(c * d->H + iy) * d->W + ix] : 0.0f;
                    }
                }
            }
}

/* dx (Cin, H, W) += col2im(dcol). */
static void col2im(const ork_conv2d_desc *d, const float *col, float *dx) {
    int64_t HW = d->Ho * d->Wo;
    for (int64_t c = 0; c < d->Cin; c++)
        for (int64_t u = 0; u < d->kh; u++)
            for (int64_t v = 0; v < d->kw; v++) {
                const float *row = col + ((c * d->kh + u) * d->kw + v) * HW;
                for (int64_t oy = 0; oy < d->Ho; oy++) {
                    int64_t iy = oy * d->stride - d->pad + u;
                    if (iy < 0 || iy >= d->H) continue;
                    for (int64_t ox = 0; ox < d->Wo; ox++) {
                        int64_t ix = ox * d->stride - d->pad + v;
                        if (ix >= 0 && ix < d->W) dx[(c * d->H + iy) * d->W + ix] += row[oy * d->Wo + ox];
                    }
                }
            }
}

static int conv_direct(const ork_conv2d_desc *d) {
    return d->kh == 1 && d->kw == 1 && d->stride == 1 && d->pad == 0;
}

size_t ork_cpu_conv2d_ws(const ork_conv2d_desc *d, int backward) { return 0; }

ork_status ork_cpu_conv2d(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *w,
                          const void *b, ork_dtype wdt, void *y, void *ws, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "conv2d");
    int64_t CK = d->Cin * d->kh * d->kw, HW = d->Ho * d->Wo;
    float *col = conv_direct(d) ? NULL : malloc(sizeof(float) * (size_t)(CK * HW));
    if (!conv_direct(d) && !col) return ORK_FAIL(ORK_E_NOMEM, "cpu conv2d: out of host memory");
    ork_status s = ORK_OK;
    for (int64_t n = 0; n < d->N && s == ORK_OK; n++) {
        const float *xn = (const float *)x + n * d->Cin * d->H * d->W;
        float *yn = (float *)y + n * d->Cout * HW;
        if (col) im2col(d, xn, col);
        /* yn (Cout, HW) = w (Cout, CK) · col (CK, HW) */
        ork_gemm_desc g = {.M = d->Cout, .N = HW, .K = CK, .batch = 1, .alpha = 1.0f, .beta = 0.0f,
                           .A = w, .adt = wdt, .lda = CK, .B = col ? col : xn, .bdt = ORK_F32, .ldb = HW,
                           .C = yn, .cdt = ORK_F32, .ldc = HW};
        s = ork_cpu_gemm(k, &g);
        if (b)
            for (int64_t o = 0; o < d->Cout; o++) {
                float bo = (float)ork_elem_load(b, wdt, o);
                for (int64_t i = 0; i < HW; i++) yn[o * HW + i] += bo;
            }
    }
    free(col);
    return s;
}

ork_status ork_cpu_conv2d_dgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *dy, const void *w,
                                ork_dtype wdt, void *dx, void *ws, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "conv2d dgrad");
    int64_t CK = d->Cin * d->kh * d->kw, HW = d->Ho * d->Wo, img = d->Cin * d->H * d->W;
    int direct = conv_direct(d);
    float *col = direct ? NULL : malloc(sizeof(float) * (size_t)(CK * HW));
    if (!direct && !col) return ORK_FAIL(ORK_E_NOMEM, "cpu conv2d: out of host memory");
    ork_status s = ORK_OK;
    for (int64_t n = 0; n < d->N && s == ORK_OK; n++) {
        float *dxn = (float *)dx + n * img;
        /* dcol (CK, HW) = wᵀ (CK, Cout) · dy (Cout, HW) */
        ork_gemm_desc g = {.ta = 1, .M = CK, .N = HW, .K = d->Cout, .batch = 1, .alpha = 1.0f, .beta = 0.0f,
                           .A = w, .adt = wdt, .lda = CK, .B = (const float *)dy + n * d->Cout * HW,
                           .bdt = ORK_F32, .ldb = HW, .C = direct ? dxn : col, .cdt = ORK_F32, .ldc = HW};
        s = ork_cpu_gemm(k, &g);
        if (!direct) {
            memset(dxn, 0, sizeof(float) * (size_t)img);
            col2im(d, col, dxn);
        }
    }
    free(col);
    return s;
}

ork_status ork_cpu_conv2d_wgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *dy,
                                float *dw, float *db, void *ws, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "conv2d wgrad");
    int64_t CK = d->Cin * d->kh * d->kw, HW = d->Ho * d->Wo;
    int direct = conv_direct(d);
    float *col = direct || !dw ? NULL : malloc(sizeof(float) * (size_t)(CK * HW));
    if (!direct && dw && !col) return ORK_FAIL(ORK_E_NOMEM, "cpu conv2d: out of host memory");
    ork_status s = ORK_OK;
    for (int64_t n = 0; n < d->N && s == ORK_OK; n++) {
        const float *xn = (const float *)x + n * d->Cin * d->H * d->W;
        const float *dyn = (const float *)dy + n * d->Cout * HW;
        if (dw) {
            if (col) im2col(d, xn, col);
            /* dw (Cout, CK) += dy (Cout, HW) · colᵀ (HW, CK) */
            ork_gemm_desc g = {.tb = 1, .M = d->Cout, .N = CK, .K = HW, .batch = 1, .alpha = 1.0f, .beta = 1.0f,
                               .A = dyn, .adt = ORK_F32, .lda = HW, .B = col ? col : xn, .bdt = ORK_F32, .ldb = HW,
                               .C = dw, .cdt = ORK_F32, .ldc = CK};
            s = ork_cpu_gemm(k, &g);
        }
        if (db)
            for (int64_t o = 0; o < d->Cout; o++) {
                double acc = 0.0;
                for (int64_t i = 0; i < HW; i++) acc += dyn[o * HW + i];
                db[o] += (float)acc;
            }
    }
    free(col);
    return s;
}
