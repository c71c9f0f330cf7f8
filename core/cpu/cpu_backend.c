/* cpu/cpu_backend.c — the CPU backend table (ork_cpu_backend) and its simple
 * kernels: memory, fill/copy/axpby, broadcast elementwise, modulate, norms,
 * activations, rope, pooling, upsampling and reductions. Plain loops over
 * F32 activations (weights F32 or BF16; copies and axpby convert between
 * F32, BF16, F16 and F64). "Device" memory is host memory; streams are
 * ignored and every call completes before it returns.
 * Owns nothing between calls. */
#include "cpu/cpu.h"
#include "platform/platform.h" /* ork_aligned_alloc */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ---------------------------------------------------------------- */

static ork_status cpu_alloc(size_t bytes, void **ptr) {
    *ptr = ork_aligned_alloc(ORK_CPU_ALIGN, (bytes + ORK_CPU_ALIGN - 1) & ~(size_t)(ORK_CPU_ALIGN - 1));
    return *ptr ? ORK_OK : ORK_FAIL(ORK_E_NOMEM, "cpu: out of host memory (%zu bytes)", bytes);
}
static void cpu_free(void *p) { ork_aligned_free(p); }
static ork_status cpu_copy_bytes(const ork_kctx *k, void *dst, const void *src, size_t n) {
    if (n) memmove(dst, src, n);
    return ORK_OK;
}
static ork_status cpu_sync(const ork_kctx *k) { return ORK_OK; }

/* ---- fill, axpby, copy --------------------------------------------------------- */

static ork_status cpu_fill(const ork_kctx *k, int64_t n, float value, void *x, ork_dtype dt) {
    if (!ork_elem_float_dt(dt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu fill: dtype %d", (int)dt);
    for (int64_t i = 0; i < n; i++) ork_elem_store(x, dt, i, value);
    return ORK_OK;
}

static ork_status cpu_fill_scalar(const ork_kctx *k, int64_t n, const float *s, float scale, void *x,
                                  ork_dtype dt) {
    return cpu_fill(k, n, s[0] * scale, x, dt);
}

static ork_status cpu_axpby(const ork_kctx *k, int64_t n, float alpha, const void *x, ork_dtype xdt, float beta,
                            void *y, ork_dtype ydt) {
    if (!ork_elem_float_dt(xdt) || !ork_elem_float_dt(ydt))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu axpby: dtypes %d -> %d", (int)xdt, (int)ydt);
    if (xdt == ORK_F32 && ydt == ORK_F32) {
        const float *a = x;
        float *b = y;
        if (beta == 0.0f) for (int64_t i = 0; i < n; i++) b[i] = alpha * a[i];
        else for (int64_t i = 0; i < n; i++) b[i] = alpha * a[i] + beta * b[i];
        return ORK_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = (double)alpha * ork_elem_load(x, xdt, i);
        if (beta != 0.0f) v += (double)beta * ork_elem_load(y, ydt, i);
        ork_elem_store(y, ydt, i, v);
    }
    return ORK_OK;
}

static ork_status cpu_copy(const ork_kctx *k, const ork_copy_desc *d, const void *src, void *dst) {
    if (!ork_elem_float_dt(d->sdt) || !ork_elem_float_dt(d->ddt))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu copy: dtypes %d -> %d", (int)d->sdt, (int)d->ddt);
    int64_t n = 1, idx[ORK_MAX_DIMS] = {0}, so = 0, dof = 0;
    for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
    for (int64_t e = 0; e < n; e++) {
        double v = ork_elem_load(src, d->sdt, so);
        if (d->accumulate) v += ork_elem_load(dst, d->ddt, dof);
        ork_elem_store(dst, d->ddt, dof, v);
        for (int i = d->ndim - 1; i >= 0; i--) { /* odometer */
            so += d->src_stride[i];
            dof += d->dst_stride[i];
            if (++idx[i] < d->shape[i]) break;
            so -= d->src_stride[i] * d->shape[i];
            dof -= d->dst_stride[i] * d->shape[i];
            idx[i] = 0;
        }
    }
    return ORK_OK;
}

/* ---- broadcast elementwise -------------------------------------------------------- */

/* Advance the odometer over a's shape, keeping b's offset. */
static inline void bc_next(const ork_bcast *bc, int64_t *idx, int64_t *bo) {
    for (int i = bc->ndim - 1; i >= 0; i--) {
        *bo += bc->bstride[i];
        if (++idx[i] < bc->shape[i]) return;
        *bo -= bc->bstride[i] * bc->shape[i];
        idx[i] = 0;
    }
}

static ork_status cpu_binary(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a, const void *b,
                             ork_dtype bdt, void *y, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "add/mul");
    if (!ork_cpu_weight_dt(bdt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu add/mul: b dtype %d", (int)bdt);
    const float *A = a;
    float *Y = y;
    int64_t idx[ORK_MAX_DIMS] = {0}, bo = 0;
    for (int64_t i = 0; i < bc->n; i++, bc_next(bc, idx, &bo)) {
        float bv = bdt == ORK_F32 ? ((const float *)b)[bo] : ork_bf16_to_f32(((const uint16_t *)b)[bo]);
        Y[i] = op == ORK_BINARY_ADD ? A[i] + bv : A[i] * bv;
    }
    return ORK_OK;
}

static ork_status cpu_binary_bwd(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a,
                                 const void *b, ork_dtype bdt, const void *dy, ork_dtype dt, void *da, void *db,
                                 ork_dtype gdt) {
    ORK_CPU_NEED_F32(dt, "add/mul backward");
    const float *A = a, *DY = dy;
    float *DA = da;
    double *acc = db ? calloc((size_t)bc->nb, sizeof(double)) : NULL;
    if (db && !acc) return ORK_FAIL(ORK_E_NOMEM, "cpu add/mul backward: out of host memory");
    int64_t idx[ORK_MAX_DIMS] = {0}, bo = 0;
    for (int64_t i = 0; i < bc->n; i++, bc_next(bc, idx, &bo)) {
        if (DA) DA[i] = op == ORK_BINARY_ADD ? DY[i] : DY[i] * (float)ork_elem_load(b, bdt, bo);
        if (acc) acc[bo] += op == ORK_BINARY_ADD ? DY[i] : (double)DY[i] * A[i];
    }
    if (acc) {
        for (int64_t j = 0; j < bc->nb; j++) ork_elem_store(db, gdt, j, acc[j]);
        free(acc);
    }
    return ORK_OK;
}

static ork_status cpu_modulate(const ork_kctx *k, const ork_bcast *bsh, const ork_bcast *bsc, const void *x,
                               const void *shift, const void *scale, void *y, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "modulate");
    const float *X = x, *SH = shift, *SC = scale;
    float *Y = y;
    int64_t i1[ORK_MAX_DIMS] = {0}, i2[ORK_MAX_DIMS] = {0}, o1 = 0, o2 = 0;
    for (int64_t i = 0; i < bsh->n; i++, bc_next(bsh, i1, &o1), bc_next(bsc, i2, &o2))
        Y[i] = (1.0f + SC[o2]) * X[i] + SH[o1];
    return ORK_OK;
}

static ork_status cpu_modulate_bwd(const ork_kctx *k, const ork_bcast *bsh, const ork_bcast *bsc, const void *x,
                                   const void *scale, const void *dy, void *dx, void *dshift, void *dscale,
                                   ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "modulate backward");
    const float *X = x, *SC = scale, *DY = dy;
    float *DX = dx;
    double *ash = dshift ? calloc((size_t)bsh->nb, sizeof(double)) : NULL;
    double *asc = dscale ? calloc((size_t)bsc->nb, sizeof(double)) : NULL;
    if ((dshift && !ash) || (dscale && !asc)) {
        free(ash); free(asc);
        return ORK_FAIL(ORK_E_NOMEM, "cpu modulate backward: out of host memory");
    }
    int64_t i1[ORK_MAX_DIMS] = {0}, i2[ORK_MAX_DIMS] = {0}, o1 = 0, o2 = 0;
    for (int64_t i = 0; i < bsh->n; i++, bc_next(bsh, i1, &o1), bc_next(bsc, i2, &o2)) {
        if (DX) DX[i] = DY[i] * (1.0f + SC[o2]);
        if (ash) ash[o1] += DY[i];
        if (asc) asc[o2] += (double)DY[i] * X[i];
    }
    for (int64_t j = 0; ash && j < bsh->nb; j++) ((float *)dshift)[j] = (float)ash[j];
    for (int64_t j = 0; asc && j < bsc->nb; j++) ((float *)dscale)[j] = (float)asc[j];
    free(ash);
    free(asc);
    return ORK_OK;
}

/* ---- norms ------------------------------------------------------------------- */

static ork_status cpu_layernorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, void *y,
                                float *mean, float *rstd, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "layernorm");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x + r * C;
        float *yr = (float *)y + r * C;
        double m = 0.0, v = 0.0;
        for (int64_t c = 0; c < C; c++) m += xr[c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        float rs = (float)(1.0 / sqrt(v / (double)C + eps));
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - (float)m) * rs;
        mean[r] = (float)m;
        rstd[r] = rs;
    }
    return ORK_OK;
}

/* dx = rstd·(dy − mean(dy) − x̂·mean(dy·x̂)), x̂ = (x − mean)·rstd. */
static ork_status cpu_layernorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const float *mean,
                                    const float *rstd, const void *dy, void *dx, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "layernorm backward");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x + r * C, *g = (const float *)dy + r * C;
        float *o = (float *)dx + r * C;
        double sg = 0.0, sgx = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float xh = (xr[c] - mean[r]) * rstd[r];
            sg += g[c];
            sgx += (double)g[c] * xh;
        }
        float mg = (float)(sg / (double)C), mgx = (float)(sgx / (double)C);
        for (int64_t c = 0; c < C; c++) o[c] = rstd[r] * (g[c] - mg - (xr[c] - mean[r]) * rstd[r] * mgx);
    }
    return ORK_OK;
}

static ork_status cpu_rmsnorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, const void *w,
                              ork_dtype wdt, void *y, float *rstd, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "rmsnorm");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x + r * C;
        float *yr = (float *)y + r * C;
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        float rs = (float)(1.0 / sqrt(ss / (double)C + eps));
        for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * rs * (w ? (float)ork_elem_load(w, wdt, c) : 1.0f);
        rstd[r] = rs;
    }
    return ORK_OK;
}

/* With g = dy·w: dx = rstd·(g − x·rstd²·mean(g·x)); dw = Σ_rows dy·x·rstd. */
static ork_status cpu_rmsnorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *w,
                                  ork_dtype wdt, const float *rstd, const void *dy, void *dx, float *dw, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "rmsnorm backward");
    double *acc = dw ? calloc((size_t)C, sizeof(double)) : NULL;
    if (dw && !acc) return ORK_FAIL(ORK_E_NOMEM, "cpu rmsnorm backward: out of host memory");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x + r * C, *gr = (const float *)dy + r * C;
        float rs = rstd[r];
        double sgx = 0.0;
        for (int64_t c = 0; c < C; c++) {
            float g = gr[c] * (w ? (float)ork_elem_load(w, wdt, c) : 1.0f);
            sgx += (double)g * xr[c];
            if (acc) acc[c] += (double)gr[c] * xr[c] * rs;
        }
        float m = (float)(sgx / (double)C);
        if (dx) {
            float *o = (float *)dx + r * C;
            for (int64_t c = 0; c < C; c++) {
                float g = gr[c] * (w ? (float)ork_elem_load(w, wdt, c) : 1.0f);
                o[c] = rs * (g - xr[c] * rs * rs * m);
            }
        }
    }
    for (int64_t c = 0; acc && c < C; c++) dw[c] = (float)acc[c];
    free(acc);
    return ORK_OK;
}

/* ---- activations ----------------------------------------------------------------- */

#define GELU_K 0.7978845608028654f /* √(2/π) */

static ork_status cpu_unary(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x, void *y,
                            ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "activation");
    const float *X = x;
    float *Y = y;
    for (int64_t i = 0; i < n; i++) {
        float v = X[i];
        switch (op) {
        case ORK_UNARY_GELU_TANH: Y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v))); break;
        case ORK_UNARY_SILU: Y[i] = v / (1.0f + expf(-v)); break;
        case ORK_UNARY_RELU: Y[i] = v > 0.0f ? v : 0.0f; break;
        case ORK_UNARY_TANH_CLAMP: Y[i] = param * tanhf(v / param); break;
        default: return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu: unary op %d", (int)op);
        }
    }
    return ORK_OK;
}

static ork_status cpu_unary_bwd(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x,
                                const void *dy, void *dx, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "activation backward");
    const float *X = x, *G = dy;
    float *O = dx;
    for (int64_t i = 0; i < n; i++) {
        float v = X[i], d;
        switch (op) {
        case ORK_UNARY_GELU_TANH: {
            float u = GELU_K * (v + 0.044715f * v * v * v), t = tanhf(u);
            d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
            break;
        }
        case ORK_UNARY_SILU: {
            float s = 1.0f / (1.0f + expf(-v));
            d = s * (1.0f + v * (1.0f - s));
            break;
        }
        case ORK_UNARY_RELU: d = v > 0.0f ? 1.0f : 0.0f; break;
        case ORK_UNARY_TANH_CLAMP: {
            float t = tanhf(v / param);
            d = 1.0f - t * t;
            break;
        }
        default: return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu: unary op %d", (int)op);
        }
        O[i] = G[i] * d;
    }
    return ORK_OK;
}

static ork_status cpu_swiglu(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "swiglu");
    for (int64_t r = 0; r < rows; r++) {
        const float *a = (const float *)x + r * 2 * C, *b = a + C;
        float *o = (float *)y + r * C;
        for (int64_t c = 0; c < C; c++) o[c] = a[c] / (1.0f + expf(-a[c])) * b[c];
    }
    return ORK_OK;
}

static ork_status cpu_swiglu_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *dy, void *dx,
                                 ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "swiglu backward");
    for (int64_t r = 0; r < rows; r++) {
        const float *a = (const float *)x + r * 2 * C, *b = a + C, *g = (const float *)dy + r * C;
        float *da = (float *)dx + r * 2 * C, *db = da + C;
        for (int64_t c = 0; c < C; c++) {
            float s = 1.0f / (1.0f + expf(-a[c]));
            da[c] = g[c] * b[c] * s * (1.0f + a[c] * (1.0f - s));
            db[c] = g[c] * a[c] * s;
        }
    }
    return ORK_OK;
}

/* ---- rope ------------------------------------------------------------------------ */

/* sign = +1: y = R x; sign = −1: y = Rᵀ x (backward). */
static ork_status rope_apply(int64_t BH, int64_t L, int64_t D, int half, const float *x, const float *pe, float *y,
                             float sign) {
    int64_t P = D / 2;
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t l = 0; l < L; l++) {
            const float *xr = x + (bh * L + l) * D, *pr = pe + l * P * 2;
            float *yr = y + (bh * L + l) * D;
            for (int64_t p = 0; p < P; p++) {
                int64_t i0 = half ? p : 2 * p, i1 = half ? p + P : 2 * p + 1;
                float c = pr[2 * p], s = sign * pr[2 * p + 1], a = xr[i0], b = xr[i1];
                yr[i0] = c * a - s * b;
                yr[i1] = s * a + c * b;
            }
        }
    return ORK_OK;
}

static ork_status cpu_rope(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half, const void *x,
                           const float *pe, void *y, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "rope");
    return rope_apply(BH, L, D, half, x, pe, y, 1.0f);
}
static ork_status cpu_rope_bwd(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half, const void *dy,
                               const float *pe, void *dx, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "rope backward");
    return rope_apply(BH, L, D, half, dy, pe, dx, -1.0f);
}

/* ---- pooling, upsampling --------------------------------------------------------------- */

static ork_status cpu_maxpool(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                              ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "maxpool2x2");
    int64_t Ho = H / 2, Wo = W / 2;
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < Ho; i++)
            for (int64_t j = 0; j < Wo; j++) {
                const float *b = (const float *)x + (p * H + 2 * i) * W + 2 * j;
                float m = fmaxf(fmaxf(b[0], b[1]), fmaxf(b[W], b[W + 1]));
                ((float *)y)[(p * Ho + i) * Wo + j] = m;
            }
    return ORK_OK;
}

static ork_status cpu_maxpool_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, const void *dy,
                                  void *dx, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "maxpool2x2 backward");
    int64_t Ho = H / 2, Wo = W / 2;
    memset(dx, 0, sizeof(float) * (size_t)(NC * H * W));
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < Ho; i++)
            for (int64_t j = 0; j < Wo; j++) {
                int64_t base = (p * H + 2 * i) * W + 2 * j, off[4] = {0, 1, W, W + 1}, best = 0;
                const float *X = x;
                for (int q = 1; q < 4; q++)
                    if (X[base + off[q]] > X[base + off[best]]) best = q;
                ((float *)dx)[base + off[best]] = ((const float *)dy)[(p * Ho + i) * Wo + j];
            }
    return ORK_OK;
}

static ork_status cpu_upsample(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                               ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "upsample2x");
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < 2 * H; i++)
            for (int64_t j = 0; j < 2 * W; j++)
                ((float *)y)[(p * 2 * H + i) * 2 * W + j] = ((const float *)x)[(p * H + i / 2) * W + j / 2];
    return ORK_OK;
}

static ork_status cpu_upsample_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *dy, void *dx,
                                   ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "upsample2x backward");
    const float *G = dy;
    for (int64_t p = 0; p < NC; p++)
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++) {
                const float *g = G + (p * 2 * H + 2 * i) * 2 * W + 2 * j;
                ((float *)dx)[(p * H + i) * W + j] = g[0] + g[1] + g[2 * W] + g[2 * W + 1];
            }
    return ORK_OK;
}

/* ---- reductions ------------------------------------------------------------------------ */

static ork_status cpu_restore_if_nonfinite(const ork_kctx *k, const float *sums, int64_t n, const void *src,
                                           void *dst, size_t bytes, int32_t *flag) {
    (void)k;
    float t = 0.0f; /* summed in F32 in index order, as the CUDA kernel does */
    for (int64_t i = 0; i < n; i++) t += sums[i];
    if (isfinite(t)) return ORK_OK;
    memmove(dst, src, bytes);
    *flag = 1;
    return ORK_OK;
}

static ork_status cpu_reduce(const ork_kctx *k, ork_reduce_op op, int64_t n, const void *x, ork_dtype dt,
                             float *out) {
    if (!ork_elem_float_dt(dt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu reduce: dtype %d", (int)dt);
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = ork_elem_load(x, dt, i);
        acc += op == ORK_REDUCE_SUMSQ ? v * v : v;
    }
    out[0] = (float)acc;
    return ORK_OK;
}

static ork_status cpu_mse(const ork_kctx *k, int64_t n, const void *a, const void *b, ork_dtype dt, float *out) {
    ORK_CPU_NEED_F32(dt, "mse");
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)((const float *)a)[i] - ((const float *)b)[i];
        acc += d * d;
    }
    out[0] = (float)(acc / (double)(n ? n : 1));
    return ORK_OK;
}

static ork_status cpu_mse_bwd(const ork_kctx *k, int64_t n, const void *a, const void *b, const float *g, void *da,
                              void *db, ork_dtype dt) {
    ORK_CPU_NEED_F32(dt, "mse backward");
    float s = 2.0f * g[0] / (float)(n ? n : 1);
    for (int64_t i = 0; i < n; i++) {
        float d = s * (((const float *)a)[i] - ((const float *)b)[i]);
        if (da) ((float *)da)[i] = d;
        if (db) ((float *)db)[i] = -d;
    }
    return ORK_OK;
}

/* ---- the table ---------------------------------------------------------------------------- */

static const ork_backend g_cpu = {
    .name = "cpu",
    .device = ORK_DEV_CPU,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .memcpy_h2d = cpu_copy_bytes,
    .memcpy_d2h = cpu_copy_bytes,
    .memcpy_d2d = cpu_copy_bytes,
    .sync = cpu_sync,
    .fill = cpu_fill,
    .fill_scalar = cpu_fill_scalar,
    .axpby = cpu_axpby,
    .copy = cpu_copy,
    .gemm = ork_cpu_gemm,
    .binary = cpu_binary,
    .binary_bwd = cpu_binary_bwd,
    .modulate = cpu_modulate,
    .modulate_bwd = cpu_modulate_bwd,
    .layernorm = cpu_layernorm,
    .layernorm_bwd = cpu_layernorm_bwd,
    .rmsnorm = cpu_rmsnorm,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .unary = cpu_unary,
    .unary_bwd = cpu_unary_bwd,
    .swiglu = cpu_swiglu,
    .swiglu_bwd = cpu_swiglu_bwd,
    .rope = cpu_rope,
    .rope_bwd = cpu_rope_bwd,
    .attention_ws = ork_cpu_attention_ws,
    .attention = ork_cpu_attention,
    .attention_bwd = ork_cpu_attention_bwd,
    .conv2d_ws = ork_cpu_conv2d_ws,
    .conv2d = ork_cpu_conv2d,
    .conv2d_dgrad = ork_cpu_conv2d_dgrad,
    .conv2d_wgrad = ork_cpu_conv2d_wgrad,
    .maxpool2x2 = cpu_maxpool,
    .maxpool2x2_bwd = cpu_maxpool_bwd,
    .upsample2x = cpu_upsample,
    .upsample2x_bwd = cpu_upsample_bwd,
    .reduce = cpu_reduce,
    .restore_if_nonfinite = cpu_restore_if_nonfinite,
    .mse = cpu_mse,
    .mse_bwd = cpu_mse_bwd,
    .groupnorm = ork_cpu_groupnorm,
    .groupnorm_bwd = ork_cpu_groupnorm_bwd,
    .softmax = ork_cpu_softmax,
    .softmax_bwd = ork_cpu_softmax_bwd,
    .dropout = ork_cpu_dropout,
    .embedding = ork_cpu_embedding,
};

const ork_backend *ork_cpu_backend(void) { return &g_cpu; }
