/* numerics/quantize.c — FP8 weight pre-quantization on all CPU cores, and the
 * same on one thread for plugins (the service "orakul.numerics/1").
 * Owns: the process-wide numerics thread count, the service table; per call, its scratch rows and
 * per-row error sums (freed before return). Rows are split into contiguous
 * ranges, one per thread; every row is computed the same way by whichever thread
 * gets it and the error sums are added in row order, so results never depend on
 * the thread count. */
#include "numerics/quantize.h"

#include "numerics/fp8.h"
#include "numerics/half.h"
#include "platform/platform.h"
#include "util/log.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int g_threads; /* 0 = default */

void ork_numerics_set_threads(int n) { atomic_store(&g_threads, n > 0 ? n : 0); }

int ork_numerics_threads(void) {
    int n = atomic_load(&g_threads);
    if (n > 0) return n;
    return ork_cpu_count();
}

/* Where a failure line goes: logged (ORK_FAIL: the library calls) or kept in
 * buf for the caller to report with its own context (the service). */
typedef struct qerr {
    int quiet;
    char *buf;
    size_t size;
} qerr;

ORK_PRINTF(3, 4)
static ork_status qfail(const qerr *e, ork_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!e->quiet) ork_logv(ORK_LOG_ERROR, fmt, ap);
    else if (e->buf && e->size) vsnprintf(e->buf, e->size, fmt, ap);
    va_end(ap);
    return s;
}

typedef struct qjob {
    const void *w;
    ork_dtype in, fmt;
    size_t rows, cols, block, nblk;
    uint8_t *q;
    float *scales;
    double *err2, *ref2;  /* [rows] per-row sums */
    float lut[256];       /* fp8 code -> value */
} qjob;

typedef struct qpart {
    const qjob *j;
    size_t r0, r1;
    size_t bad;           /* first non-finite flat index, or SIZE_MAX */
    ork_status st;
} qpart;

/* GCC builds AVX2 copies of the hot loops next to the baseline ones and picks
 * them at load time (the rounding vectorizes with AVX2's per-lane shifts). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ORK_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ORK_CLONES
#endif

/* Row r of W as float32 (exact for every input dtype). buf: [cols] scratch. */
ORK_CLONES
static const float *load_row(const qjob *j, size_t r, float *buf) {
    size_t n = j->cols;
    if (j->in == ORK_F32) return (const float *)j->w + r * n;
    const uint16_t *h = (const uint16_t *)j->w + r * n;
    if (j->in == ORK_BF16)
        for (size_t c = 0; c < n; c++) buf[c] = ork_bf16_to_f32(h[c]);
    else
        for (size_t c = 0; c < n; c++) buf[c] = ork_f16_to_f32(h[c]);
    return buf;
}

/* Largest |x| of x[n] as float bits; >= 0x7F800000 means a NaN or Inf is there.
 * Integer max: vectorizes, no FP exceptions, and finite values order like their bits. */
ORK_CLONES
static uint32_t abs_bits_max(const float *x, size_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)x;
    int32_t m = 0;                                  /* masked bits are >= 0 as int32 */
    for (size_t i = 0; i < n; i++) {
        int32_t a = (int32_t)(u[i] & 0x7FFFFFFFu);
        m = a > m ? a : m;
    }
    return (uint32_t)m;
}

/* One slice: x: [n] finite values, s: its scale, y: [n] scratch, q: out [n] codes.
 * Adds the slice's squared error and squared norm to *err2 / *ref2. */
ORK_CLONES
static void quant_slice(const float *restrict x, size_t n, float s, int e4, const float *lut,
                        float *restrict y, uint8_t *restrict q, double *err2, double *ref2) {
    for (size_t c = 0; c < n; c++) y[c] = x[c] / s;
    const uint32_t *yu = (const uint32_t *)(const void *)y;
    if (e4)
        for (size_t c = 0; c < n; c++) q[c] = ork_fp8_round_finite_sat_(yu[c], 3, 7, 0x7E);
    else
        for (size_t c = 0; c < n; c++) q[c] = ork_fp8_round_finite_sat_(yu[c], 2, 15, 0x7B);
    double e0 = 0, e1 = 0, r0 = 0, r1 = 0;                    /* 2 lanes: shorter chains */
    size_t c = 0;
    for (; c + 2 <= n; c += 2) {
        double v0 = x[c], v1 = x[c + 1];
        double d0 = v0 - (double)(lut[q[c]] * s), d1 = v1 - (double)(lut[q[c + 1]] * s);
        e0 += d0 * d0; e1 += d1 * d1; r0 += v0 * v0; r1 += v1 * v1;
    }
    if (c < n) {
        double v = x[c], d = v - (double)(lut[q[c]] * s);
        e0 += d * d; r0 += v * v;
    }
    *err2 += e0 + e1;
    *ref2 += r0 + r1;
}

/* Quantize row r (x: its float values, y: [block] scratch). */
static void quant_row(const qjob *j, size_t r, const float *x, float *y) {
    const float fmax = ork_fp8_max(j->fmt);
    size_t bw = j->block ? j->block : j->cols;
    uint8_t *q = j->q + r * j->cols;
    float *sc = j->scales + r * j->nblk;
    double err2 = 0, ref2 = 0;
    for (size_t b = 0; b < j->nblk; b++) {
        size_t c0 = b * bw, n = (c0 + bw < j->cols ? c0 + bw : j->cols) - c0;
        uint32_t mb = abs_bits_max(x + c0, n);
        float amax;
        memcpy(&amax, &mb, 4);
        float s = amax > 0 ? amax / fmax : 1.0f;
        if (s < FLT_MIN) s = FLT_MIN;
        sc[b] = s;
        quant_slice(x + c0, n, s, j->fmt == ORK_F8_E4M3, j->lut, y, q + c0, &err2, &ref2);
    }
    j->err2[r] = err2;
    j->ref2[r] = ref2;
}

static void quant_part(void *arg) {
    qpart *p = arg;
    const qjob *j = p->j;
    size_t bw = j->block && j->block < j->cols ? j->block : j->cols;
    float *buf = malloc((j->cols + bw) * sizeof(float));    /* row as f32 + y scratch */
    if (!buf) { p->st = ORK_E_NOMEM; return; }
    for (size_t r = p->r0; r < p->r1; r++) {
        const float *x = load_row(j, r, buf);
        if (abs_bits_max(x, j->cols) >= 0x7F800000u) {        /* NaN or Inf: find it */
            const uint32_t *u = (const uint32_t *)(const void *)x;
            size_t c = 0;
            while ((u[c] & 0x7F800000u) != 0x7F800000u) c++;
            p->bad = r * j->cols + c;
            break;
        }
        quant_row(j, r, x, buf + j->cols);
    }
    free(buf);
}

static ork_status quantize(const char *name, const void *w, ork_dtype in_dtype, size_t rows, size_t cols,
                           ork_dtype fmt, size_t block, uint8_t *q, float *scales, double *rel_rms,
                           int nthreads, const qerr *e) {
    if (!name) name = "(unnamed)";
    if (fmt != ORK_F8_E4M3 && fmt != ORK_F8_E5M2)
        return qfail(e, ORK_E_INVALID, "quantize %s: target dtype %d is not fp8", name, (int)fmt);
    if (in_dtype != ORK_F32 && in_dtype != ORK_BF16 && in_dtype != ORK_F16)
        return qfail(e, ORK_E_INVALID, "quantize %s: input dtype %d is not f32/bf16/f16", name,
                        (int)in_dtype);
    if (rows && cols && (!w || !q || !scales))
        return qfail(e, ORK_E_INVALID, "quantize %s: NULL array", name);
    if (cols && rows > SIZE_MAX / cols)
        return qfail(e, ORK_E_INVALID, "quantize %s: %zu x %zu overflows", name, rows, cols);
    if (rel_rms) *rel_rms = 0;
    if (!rows || !cols) return ORK_OK;

    qjob j = {.w = w, .in = in_dtype, .fmt = fmt, .rows = rows, .cols = cols, .block = block,
              .nblk = ork_quant_nblocks(cols, block), .q = q, .scales = scales};
    for (int c = 0; c < 256; c++) j.lut[c] = ork_fp8_to_f32((uint8_t)c, fmt);
    j.err2 = malloc(rows * sizeof(double));
    j.ref2 = malloc(rows * sizeof(double));
    size_t nt = (size_t)(nthreads > 0 ? nthreads : 1);
    if (nt > rows) nt = rows;
    qpart *parts = calloc(nt, sizeof(qpart));
    ork_thread **tids = calloc(nt, sizeof *tids);
    unsigned char *started = calloc(nt, 1);
    ork_status st = ORK_OK;
    if (!j.err2 || !j.ref2 || !parts || !tids || !started) {
        st = qfail(e, ORK_E_NOMEM, "quantize %s: no memory for %zu rows of scratch", name, rows);
        goto out;
    }
    for (size_t t = 0; t < nt; t++)
        parts[t] = (qpart){&j, rows * t / nt, rows * (t + 1) / nt, SIZE_MAX, ORK_OK};
    for (size_t t = 1; t < nt; t++)          /* a thread that cannot start runs inline */
        started[t] = ork_thread_start(quant_part, &parts[t], &tids[t]) == ORK_OK;
    quant_part(&parts[0]);
    for (size_t t = 1; t < nt; t++) {
        if (started[t]) ork_thread_join(tids[t]);
        else quant_part(&parts[t]);
    }
    size_t bad = SIZE_MAX;
    for (size_t t = 0; t < nt; t++) {
        if (parts[t].st != ORK_OK && st == ORK_OK) st = parts[t].st;
        if (parts[t].bad < bad) bad = parts[t].bad;
    }
    if (bad != SIZE_MAX) {
        float v = in_dtype == ORK_F32 ? ((const float *)w)[bad]
                : in_dtype == ORK_BF16 ? ork_bf16_to_f32(((const uint16_t *)w)[bad])
                : ork_f16_to_f32(((const uint16_t *)w)[bad]);
        st = qfail(e, ORK_E_NUMERIC, "quantize %s: %s at [%zu, %zu] (element %zu of %zu x %zu); "
                      "weights must be finite", name, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                      bad / cols, bad % cols, bad, rows, cols);
        goto out;
    }
    if (st != ORK_OK) {
        st = qfail(e, st, "quantize %s: no memory for a row of %zu floats", name, cols);
        goto out;
    }
    if (rel_rms) {
        double e = 0, r = 0;
        for (size_t i = 0; i < rows; i++) { e += j.err2[i]; r += j.ref2[i]; }
        *rel_rms = r > 0 ? sqrt(e / r) : 0.0;
    }
out:
    free(j.err2); free(j.ref2); free(parts); free(tids); free(started);
    return st;
}

static ork_status dequantize(const uint8_t *q, const float *scales, size_t rows, size_t cols, ork_dtype fmt,
                             size_t block, ork_dtype out_dtype, void *out, const qerr *e) {
    if (fmt != ORK_F8_E4M3 && fmt != ORK_F8_E5M2)
        return qfail(e, ORK_E_INVALID, "dequantize: dtype %d is not fp8", (int)fmt);
    if (out_dtype != ORK_F32 && out_dtype != ORK_BF16 && out_dtype != ORK_F16)
        return qfail(e, ORK_E_INVALID, "dequantize: output dtype %d is not f32/bf16/f16",
                        (int)out_dtype);
    if (rows && cols && (!q || !scales || !out))
        return qfail(e, ORK_E_INVALID, "dequantize: NULL array");
    float lut[256];
    for (int c = 0; c < 256; c++) lut[c] = ork_fp8_to_f32((uint8_t)c, fmt);
    size_t nblk = ork_quant_nblocks(cols, block), bw = block ? block : cols;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * cols + c;
            float v = lut[q[i]] * scales[r * nblk + c / bw];
            if (out_dtype == ORK_F32) ((float *)out)[i] = v;
            else if (out_dtype == ORK_BF16) ((uint16_t *)out)[i] = ork_f32_to_bf16(v);
            else ((uint16_t *)out)[i] = ork_f32_to_f16(v);
        }
    return ORK_OK;
}

ork_status ork_quantize_fp8(const char *name, const void *w, ork_dtype in_dtype, size_t rows,
                            size_t cols, ork_dtype fmt, size_t block, uint8_t *q,
                            float *scales, double *rel_rms) {
    qerr e = {0, NULL, 0};
    return quantize(name, w, in_dtype, rows, cols, fmt, block, q, scales, rel_rms, ork_numerics_threads(), &e);
}

ork_status ork_dequantize_fp8(const uint8_t *q, const float *scales, size_t rows, size_t cols,
                              ork_dtype fmt, size_t block, ork_dtype out_dtype, void *out) {
    qerr e = {0, NULL, 0};
    return dequantize(q, scales, rows, cols, fmt, block, out_dtype, out, &e);
}

/* ---- the service "orakul.numerics/1": one thread, failure lines to the caller ---- */
static ork_status svc_quantize(const char *name, const void *w, ork_dtype in_dtype, size_t rows, size_t cols,
                               ork_dtype fmt, size_t block, uint8_t *q, float *scales, double *rel_rms,
                               char *err, size_t err_size) {
    qerr e = {1, err, err_size};
    if (err && err_size) err[0] = '\0';
    return quantize(name, w, in_dtype, rows, cols, fmt, block, q, scales, rel_rms, 1, &e);
}

static ork_status svc_dequantize(const uint8_t *q, const float *scales, size_t rows, size_t cols, ork_dtype fmt,
                                 size_t block, ork_dtype out_dtype, void *out, char *err, size_t err_size) {
    qerr e = {1, err, err_size};
    if (err && err_size) err[0] = '\0';
    return dequantize(q, scales, rows, cols, fmt, block, out_dtype, out, &e);
}

static const ork_numerics_api g_api = {
    .abi = ORK_ABI_INIT(ork_numerics_api),
    .quantize_fp8 = svc_quantize,
    .dequantize_fp8 = svc_dequantize,
};

const ork_numerics_api *ork_numerics_api_table(void) { return &g_api; }
