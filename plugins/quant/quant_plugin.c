/* quant_plugin.c — the "quant" plugin: the quantizer components (kind
 * ORK_KIND_QUANT, model.qtype) for frozen linear weights W[rows = out, cols = in]:
 *
 *   org.orakul.quant.fp8_e4m3  (fp8_e4m3, qfloat8, float8, fp8, e4m3, float8_e4m3fn)
 *   org.orakul.quant.fp8_e5m2  (fp8_e5m2, bf8, e5m2, float8_e5m2)
 *   org.orakul.quant.bf16      (bf16, bfloat16)
 *   org.orakul.quant.none      (none)
 *
 * fp8: symmetric absmax, one fp32 scale per row or per row x 128-column block,
 * CUDA's satfinite RNE rounding (NUMERICS.md §2). The quantization is the core's
 * reference itself, reached through the host service "orakul.numerics/1"
 * (<orakul/numerics.h>, which also gives the inline bf16/f16/fp8 conversions):
 * the plugin splits rows over its own threads, calling the service's
 * single-threaded quantize_fp8 once per row range (rows are independent, so any
 * thread count gives the same bytes) and reporting a failure itself, with the
 * tensor's name and the global element index, as one line through host->log. The fp8 key
 * fp8_gemm (auto | dequant | native) picks the CUDA GEMMs of the fp8 weights; this
 * plugin only validates it (native needs block_size 0), the core reads it for its
 * graph (auto: native where the device and block_size allow it).
 * bf16: RNE f32 -> bf16, no scales. none: lossless copy / widening, no scales.
 * Every component refuses NaN/Inf in a weight (ORK_E_NUMERIC, one line naming
 * the tensor and the element).
 *
 * Threads and the CPU count come from the service "orakul.platform/1"
 * (<orakul/platform.h>: no OS header here, so the plugin builds for Windows
 * too); a core without it gets one thread.
 *
 * Owns: each instance (its params copy and fp8 decode table); per call, its
 * thread handles (joined before return); the service tables looked up at init. */
#include <orakul/numerics.h>
#include <orakul/orakul.h>
#include <orakul/platform.h>

#include "quant_cuda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- params (model.quantize_kwargs) ----------------------------------------- */
typedef struct quant_params {
    int64_t block_size;   /* fp8: 0 = one scale per row, 128 = per 1 x 128 block */
    int64_t threads;      /* cap on CPU threads; 0 = all online CPUs */
    int32_t report_error; /* log each tensor's relative RMS error (INFO) */
    const char *dtype;    /* none: storage dtype "f32" | "bf16" */
    const char *fp8_gemm; /* fp8: "auto" | "dequant" | "native" (read by the core for its graph; validated here) */
} quant_params;

#define P(f) offsetof(quant_params, f)
#define KEY_THREADS {"threads", ORK_PARAM_INT, 1, 0, "0", 0, 4096, NULL, P(threads), \
                     "CPU threads for quantize and CPU dequantize (0: all online CPUs; caps the core's count)"}
#define KEY_REPORT {"report_error", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, P(report_error), \
                    "log each weight's relative RMS quantization error"}
static const ork_param fp8_keys[] = {
    {"block_size", ORK_PARAM_INT, 1, 0, "0", 0, 128, NULL, P(block_size),
     "0: one fp32 scale per output row; 128: one per row and 128 input columns (outlier-heavy layers)"},
    {"fp8_gemm", ORK_PARAM_STRING, 1, 0, "auto", 1, 0, "auto|dequant|native", P(fp8_gemm),
     "CUDA GEMMs of the fp8 weights (forward and input gradient): native (FP8 GEMMs, per-token E4M3 activations; "
     "sm_89+, block_size 0), dequant (a bf16 copy of the weight, any GPU), auto (native where the GPU and "
     "block_size allow it, else dequant)"},
    KEY_THREADS, KEY_REPORT, {NULL}};
static const ork_param bf16_keys[] = {KEY_THREADS, KEY_REPORT, {NULL}};
static const ork_param none_keys[] = {
    {"dtype", ORK_PARAM_STRING, 1, 0, "f32", 1, 0, "f32|bf16", P(dtype),
     "storage dtype; the copy must be exact (bf16 refuses f32/f16 weights: use qtype bf16)"},
    KEY_THREADS, {NULL}};
#undef P

/* The core's numerics (init looks it up; every component needs it) and its
 * platform layer (threads; NULL from an older core: one thread). */
static const ork_numerics_api *g_num;
static const ork_platform_api *g_plat;

/* ---- instance ---------------------------------------------------------------- */
typedef enum qkind { QK_FP8, QK_BF16, QK_NONE } qkind;

typedef struct quant {
    const ork_host *host;
    qkind kind;
    ork_dtype qdt;   /* storage dtype */
    int64_t block;   /* fp8 only */
    int threads;     /* cap, 0 = none */
    int report;
    float lut[256];  /* fp8 code -> value (the reference decode) */
} quant;

#define QLOG(q, lvl, ...) (q)->host->log((q)->host, (lvl), __VA_ARGS__)

static const char *fmt_name(ork_dtype t) {
    switch (t) {
    case ORK_F32: return "f32";
    case ORK_BF16: return "bf16";
    case ORK_F16: return "f16";
    case ORK_F8_E4M3: return "fp8 e4m3";
    case ORK_F8_E5M2: return "fp8 e5m2";
    default: return "?";
    }
}

static ork_status create_kind(const ork_host *host, const void *params, qkind kind, ork_dtype fp8,
                              void **self) {
    const quant_params *p = params;
    if (!host || !p || !self) return ORK_E_INVALID;
    if (kind == QK_FP8 && p->block_size != 0 && p->block_size != 128) {
        host->log(host, ORK_LEVEL_ERROR, "model.quantize_kwargs.block_size: %lld is not 0 (per row) or 128",
                  (long long)p->block_size);
        return ORK_E_CONFIG;
    }
    if (kind == QK_FP8 && p->fp8_gemm && strcmp(p->fp8_gemm, "dequant") != 0 && strcmp(p->fp8_gemm, "auto") != 0) {
        if (strcmp(p->fp8_gemm, "native") != 0) {
            host->log(host, ORK_LEVEL_ERROR, "model.quantize_kwargs.fp8_gemm: '%s' is not auto, dequant or native",
                      p->fp8_gemm);
            return ORK_E_CONFIG;
        }
        if (p->block_size != 0) {
            host->log(host, ORK_LEVEL_ERROR, "model.quantize_kwargs.fp8_gemm: native needs block_size 0 (one scale per "
                      "output row, cuBLASLt's per-channel FP8 scales), not %lld", (long long)p->block_size);
            return ORK_E_CONFIG;
        }
    }
    ork_dtype none_dt = ORK_F32;
    if (kind == QK_NONE && p->dtype && strcmp(p->dtype, "f32") != 0) {
        if (strcmp(p->dtype, "bf16") != 0) {
            host->log(host, ORK_LEVEL_ERROR, "model.quantize_kwargs.dtype: '%s' is not f32 or bf16", p->dtype);
            return ORK_E_CONFIG;
        }
        none_dt = ORK_BF16;
    }
    quant *q = calloc(1, sizeof *q);
    if (!q) return ORK_E_NOMEM;
    q->host = host;
    q->kind = kind;
    q->qdt = kind == QK_FP8 ? fp8 : kind == QK_BF16 ? ORK_BF16 : none_dt;
    q->block = kind == QK_FP8 ? p->block_size : 0;
    q->threads = p->threads > 0 ? (int)p->threads : 0;
    q->report = kind != QK_NONE && p->report_error;
    if (kind == QK_FP8)
        for (int c = 0; c < 256; c++)
            q->lut[c] = fp8 == ORK_F8_E4M3 ? ork_e4m3_to_f32((uint8_t)c) : ork_e5m2_to_f32((uint8_t)c);
    *self = q;
    return ORK_OK;
}

static ork_status create_e4m3(const ork_host *h, const void *p, void **s) { return create_kind(h, p, QK_FP8, ORK_F8_E4M3, s); }
static ork_status create_e5m2(const ork_host *h, const void *p, void **s) { return create_kind(h, p, QK_FP8, ORK_F8_E5M2, s); }
static ork_status create_bf16(const ork_host *h, const void *p, void **s) { return create_kind(h, p, QK_BF16, ORK_BF16, s); }
static ork_status create_none(const ork_host *h, const void *p, void **s) { return create_kind(h, p, QK_NONE, ORK_F32, s); }

static void quant_destroy(void *self) { free(self); }

static ork_status quant_layout(void *self, int64_t rows, int64_t cols, ork_quant_layout *out) {
    quant *q = self;
    if (!q || !out) return ORK_E_INVALID;
    if (rows < 0 || cols < 0 || (cols && rows > INT64_MAX / cols)) {
        QLOG(q, ORK_LEVEL_ERROR, "layout: bad weight shape (%lld, %lld)", (long long)rows, (long long)cols);
        return ORK_E_INVALID;
    }
    out->qdtype = q->qdt;
    out->block = (int)q->block;
    out->n_scales = q->kind == QK_FP8 ? rows * (int64_t)ork_quant_nblocks((size_t)cols, (size_t)q->block) : 0;
    return ORK_OK;
}

/* ---- row-parallel runner ------------------------------------------------------- */
typedef struct part part;
typedef void (*part_fn)(const void *ctx, part *p);
struct part {
    part_fn fn;
    const void *ctx;
    size_t r0, r1;
    ork_status st;
    size_t bad;          /* first non-finite flat index (NUMERIC), else SIZE_MAX */
    double e2, ref2;     /* squared error / squared norm (report_error) */
    char msg[512];       /* the failure line of a non-NUMERIC failure */
};

static void part_main(void *arg) {
    part *p = arg;
    p->fn(p->ctx, p);
}

/* Threads for a (rows, cols) job: the caller's count (<= 0: online CPUs), capped
 * by the threads param, by rows, and to >= 64Ki elements per thread. */
static int job_threads(const quant *q, int nthreads, int64_t rows, int64_t cols) {
    long n = nthreads;
    if (n <= 0) n = g_plat ? g_plat->cpu_count() : 1;
    if (!g_plat || n < 1) n = 1; /* no threads without the platform service */
    if (q->threads > 0 && q->threads < n) n = q->threads;
    int64_t by_size = (rows * cols + 65535) / 65536;
    if (n > by_size) n = (long)by_size;
    if (n > rows) n = (long)rows;
    return n < 1 ? 1 : (int)n;
}

/* Run fn over nt contiguous row ranges of [0, rows); part 0 on this thread, a
 * thread that cannot start runs inline. Returns the parts (caller frees) or NULL. */
static part *run_rows(part_fn fn, const void *ctx, size_t rows, int nt) {
    part *parts = calloc((size_t)nt, sizeof *parts);
    ork_thread **tid = calloc((size_t)nt, sizeof *tid);
    unsigned char *started = calloc((size_t)nt, 1);
    if (!parts || !tid || !started) { free(parts); free(tid); free(started); return NULL; }
    for (int t = 0; t < nt; t++)
        parts[t] = (part){fn, ctx, rows * (size_t)t / (size_t)nt, rows * (size_t)(t + 1) / (size_t)nt,
                          ORK_OK, SIZE_MAX, 0, 0, {0}};
    for (int t = 1; t < nt; t++)
        started[t] = g_plat && g_plat->thread_start(part_main, &parts[t], &tid[t]) == ORK_OK;
    part_main(&parts[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) g_plat->thread_join(tid[t]);
        else part_main(&parts[t]);
    }
    free(tid);
    free(started);
    return parts;
}

/* ---- element access -------------------------------------------------------- */
static float load_elem(ork_dtype dt, const void *src, size_t i) {
    if (dt == ORK_F32) return ((const float *)src)[i];
    if (dt == ORK_BF16) return ork_bf16_to_f32(((const uint16_t *)src)[i]);
    return ork_f16_to_f32(((const uint16_t *)src)[i]);
}

/* Index of the first NaN/Inf in src[i0, i1), or SIZE_MAX. */
static size_t first_nonfinite(ork_dtype dt, const void *src, size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) {
        float v = load_elem(dt, src, i);
        if (!isfinite(v)) return i;
    }
    return SIZE_MAX;
}

/* ---- quantize ----------------------------------------------------------------- */
typedef struct qctx {
    const quant *q;
    const char *name;
    ork_dtype src_dt;
    const void *src;
    size_t cols, nblk;
    void *dst;
    float *scales;
} qctx;

static double sumsq(ork_dtype dt, const void *src, size_t i0, size_t i1) {
    double s = 0;
    for (size_t i = i0; i < i1; i++) { double v = load_elem(dt, src, i); s += v * v; }
    return s;
}

static void fp8_part(const void *vctx, part *p) {
    const qctx *c = vctx;
    size_t nr = p->r1 - p->r0, esz = ork_dtype_size(c->src_dt);
    double rel = 0;
    char err[sizeof p->msg];
    p->st = g_num->quantize_fp8(c->name, (const char *)c->src + p->r0 * c->cols * esz, c->src_dt, nr, c->cols,
                                c->q->qdt, (size_t)c->q->block, (uint8_t *)c->dst + p->r0 * c->cols,
                                c->scales + p->r0 * c->nblk, c->q->report ? &rel : NULL, err, sizeof err);
    if (p->st == ORK_E_NUMERIC) {
        p->bad = first_nonfinite(c->src_dt, c->src, p->r0 * c->cols, p->r1 * c->cols);
    } else if (p->st != ORK_OK) {
        snprintf(p->msg, sizeof p->msg, "%s", err);
    } else if (c->q->report) {
        p->ref2 = sumsq(c->src_dt, c->src, p->r0 * c->cols, p->r1 * c->cols);
        p->e2 = rel * rel * p->ref2;
    }
}

/* Largest |x| of src[i0, i1) as the magnitude bits of its dtype; at or above
 * nonfinite_bits(dt) means a NaN or Inf is there. Integer max: vectorizes. */
static uint32_t absmax_bits(ork_dtype dt, const void *src, size_t i0, size_t i1) {
    uint32_t m = 0;
    if (dt == ORK_F32) {
        const uint32_t *u = src;
        for (size_t i = i0; i < i1; i++) { uint32_t a = u[i] & 0x7FFFFFFFu; m = a > m ? a : m; }
    } else {
        const uint16_t *u = src;
        for (size_t i = i0; i < i1; i++) { uint32_t a = u[i] & 0x7FFFu; m = a > m ? a : m; }
    }
    return m;
}
static uint32_t nonfinite_bits(ork_dtype dt) {
    return dt == ORK_F32 ? 0x7F800000u : dt == ORK_BF16 ? 0x7F80u : 0x7C00u;
}

/* bf16 (RNE) and none (exact) conversions of rows [r0, r1). */
static void conv_part(const void *vctx, part *p) {
    const qctx *c = vctx;
    size_t i0 = p->r0 * c->cols, i1 = p->r1 * c->cols;
    if (absmax_bits(c->src_dt, c->src, i0, i1) >= nonfinite_bits(c->src_dt)) {
        p->st = ORK_E_NUMERIC;
        p->bad = first_nonfinite(c->src_dt, c->src, i0, i1);
        return;
    }
    ork_dtype out = c->q->qdt;
    if (out == c->src_dt) {
        size_t e = ork_dtype_size(out);
        memcpy((char *)c->dst + i0 * e, (const char *)c->src + i0 * e, (i1 - i0) * e);
        return;
    }
    if (out == ORK_F32) {                                  /* exact widening */
        float *d = c->dst;
        const uint16_t *h = c->src;
        if (c->src_dt == ORK_BF16)
            for (size_t i = i0; i < i1; i++) d[i] = ork_bf16_to_f32(h[i]);
        else
            for (size_t i = i0; i < i1; i++) d[i] = ork_f16_to_f32(h[i]);
        return;
    }
    uint16_t *d = c->dst;                                  /* -> bf16, RNE (inputs are finite) */
    if (c->src_dt == ORK_F32) {
        const uint32_t *u = c->src;
        for (size_t i = i0; i < i1; i++) d[i] = (uint16_t)((u[i] + 0x7FFFu + ((u[i] >> 16) & 1u)) >> 16);
    } else {
        for (size_t i = i0; i < i1; i++) d[i] = ork_f32_to_bf16(load_elem(c->src_dt, c->src, i));
    }
    if (absmax_bits(ORK_BF16, d, i0, i1) >= 0x7F80u) {     /* a finite value past bf16's max */
        size_t i = i0;
        while ((d[i] & 0x7FFFu) < 0x7F80u) i++;
        p->st = ORK_E_NUMERIC;
        p->bad = i;
        snprintf(p->msg, sizeof p->msg, "overflows bf16 (%g)", (double)load_elem(c->src_dt, c->src, i));
        return;
    }
    if (c->q->report) {
        double e2 = 0, r2 = 0;
        for (size_t i = i0; i < i1; i++) {
            double v = load_elem(c->src_dt, c->src, i), dv = v - (double)ork_bf16_to_f32(d[i]);
            e2 += dv * dv;
            r2 += v * v;
        }
        p->e2 = e2;
        p->ref2 = r2;
    }
}

static ork_status quant_quantize(void *self, const char *name, ork_dtype src_dt, const void *src, int64_t rows,
                                 int64_t cols, int nthreads, void *dst, float *scales) {
    quant *q = self;
    if (!q) return ORK_E_INVALID;
    if (!name) name = "(unnamed)";
    if (rows < 0 || cols < 0 || (cols && rows > INT64_MAX / cols)) {
        QLOG(q, ORK_LEVEL_ERROR, "quantize %s: bad shape (%lld, %lld)", name, (long long)rows, (long long)cols);
        return ORK_E_INVALID;
    }
    if (src_dt != ORK_F32 && src_dt != ORK_BF16 && src_dt != ORK_F16) {
        QLOG(q, ORK_LEVEL_ERROR, "quantize %s: source dtype %s (%d) is not f32, bf16 or f16", name,
             fmt_name(src_dt), (int)src_dt);
        return ORK_E_UNSUPPORTED;
    }
    if (q->kind == QK_NONE && q->qdt == ORK_BF16 && src_dt != ORK_BF16) {
        QLOG(q, ORK_LEVEL_ERROR, "quantize %s: qtype none with dtype bf16 would round this %s weight; "
             "use qtype bf16 (or none with dtype f32)", name, fmt_name(src_dt));
        return ORK_E_UNSUPPORTED;
    }
    if (rows == 0 || cols == 0) return ORK_OK;
    if (!src || !dst || (q->kind == QK_FP8 && !scales)) {
        QLOG(q, ORK_LEVEL_ERROR, "quantize %s: NULL %s", name, !src ? "source" : !dst ? "output" : "scales");
        return ORK_E_INVALID;
    }
    qctx c = {q, name, src_dt, src, (size_t)cols, ork_quant_nblocks((size_t)cols, (size_t)q->block), dst, scales};
    int nt = job_threads(q, nthreads, rows, cols);
    part *parts = run_rows(q->kind == QK_FP8 ? fp8_part : conv_part, &c, (size_t)rows, nt);
    if (!parts) {
        QLOG(q, ORK_LEVEL_ERROR, "quantize %s: out of memory for %d threads", name, nt);
        return ORK_E_NOMEM;
    }
    ork_status st = ORK_OK;
    const part *fail = NULL;
    double e2 = 0, r2 = 0;
    for (int t = 0; t < nt; t++) {            /* the lowest failing range: the first bad element */
        if (parts[t].st != ORK_OK && !fail) fail = &parts[t];
        e2 += parts[t].e2;
        r2 += parts[t].ref2;
    }
    if (fail) {
        st = fail->st;
        if (st == ORK_E_NUMERIC && fail->bad != SIZE_MAX) {
            size_t b = fail->bad;
            float v = load_elem(src_dt, src, b);
            QLOG(q, ORK_LEVEL_ERROR, "quantize %s: %s at [%zu, %zu] (element %zu of %lld x %lld); weights must be finite",
                 name, fail->msg[0] ? fail->msg : isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", b / (size_t)cols,
                 b % (size_t)cols, b, (long long)rows, (long long)cols);
        } else {
            QLOG(q, ORK_LEVEL_ERROR, "quantize %s: %s", name, fail->msg[0] ? fail->msg : "failed");
        }
    } else if (q->report) {
        const char *how = q->kind != QK_FP8 ? "" : q->block ? ", 1x128 block scales" : ", per-row scales";
        QLOG(q, ORK_LEVEL_INFO, "%s [%lld x %lld] -> %s%s: relative RMS error %.3f%%", name, (long long)rows,
             (long long)cols, fmt_name(q->qdt), how, r2 > 0 ? 100.0 * sqrt(e2 / r2) : 0.0);
    }
    free(parts);
    return st;
}

/* ---- dequantize ----------------------------------------------------------------- */
typedef struct dctx {
    const quant *q;
    const void *src;
    const float *scales;
    size_t cols, nblk;
    ork_dtype dst_dt;
    void *dst;
} dctx;

static void deq_part(const void *vctx, part *p) {
    const dctx *c = vctx;
    size_t nr = p->r1 - p->r0, i0 = p->r0 * c->cols, i1 = p->r1 * c->cols;
    size_t de = ork_dtype_size(c->dst_dt);
    ork_dtype qdt = c->q->qdt;
    if (c->q->kind == QK_FP8) {
        p->st = g_num->dequantize_fp8((const uint8_t *)c->src + i0, c->scales + p->r0 * c->nblk, nr, c->cols, qdt,
                                      (size_t)c->q->block, c->dst_dt, (char *)c->dst + i0 * de, p->msg, sizeof p->msg);
    } else if (qdt == c->dst_dt) {
        memcpy((char *)c->dst + i0 * de, (const char *)c->src + i0 * de, (i1 - i0) * de);
    } else if (c->dst_dt == ORK_F32) {   /* bf16 -> f32 */
        for (size_t i = i0; i < i1; i++) ((float *)c->dst)[i] = ork_bf16_to_f32(((const uint16_t *)c->src)[i]);
    } else {                             /* f32 -> bf16 */
        for (size_t i = i0; i < i1; i++) ((uint16_t *)c->dst)[i] = ork_f32_to_bf16(((const float *)c->src)[i]);
    }
}

static ork_status quant_dequantize(void *self, ork_device dev, void *stream, const void *src, const float *scales,
                                   int64_t rows, int64_t cols, ork_dtype dst_dt, void *dst) {
    quant *q = self;
    if (!q) return ORK_E_INVALID;
    if (rows < 0 || cols < 0 || (cols && rows > INT64_MAX / cols)) {
        QLOG(q, ORK_LEVEL_ERROR, "dequantize: bad shape (%lld, %lld)", (long long)rows, (long long)cols);
        return ORK_E_INVALID;
    }
    if (dst_dt != ORK_BF16 && dst_dt != ORK_F32) {
        QLOG(q, ORK_LEVEL_ERROR, "dequantize: output dtype %s (%d) is not bf16 or f32", fmt_name(dst_dt), (int)dst_dt);
        return ORK_E_UNSUPPORTED;
    }
    if (dev != ORK_DEV_CPU && dev != ORK_DEV_CUDA) {
        QLOG(q, ORK_LEVEL_ERROR, "dequantize: unknown device %d", (int)dev);
        return ORK_E_INVALID;
    }
    if (rows == 0 || cols == 0) return ORK_OK;
    if (!src || !dst || (q->kind == QK_FP8 && !scales)) {
        QLOG(q, ORK_LEVEL_ERROR, "dequantize: NULL %s", !src ? "source" : !dst ? "output" : "scales");
        return ORK_E_INVALID;
    }
    if (dev == ORK_DEV_CUDA) {
#ifdef ORK_QUANT_HAVE_CUDA
        ork_quant_cuda_args a = {q->qdt, dst_dt, src, scales, q->kind == QK_FP8 ? q->lut : NULL,
                                 rows, cols, q->block, dst};
        const char *err = NULL;
        ork_status st = ork_quant_cuda_dequantize(&a, stream, &err);
        if (st != ORK_OK)
            QLOG(q, ORK_LEVEL_ERROR, "dequantize %s -> %s on CUDA (%lld x %lld): %s", fmt_name(q->qdt),
                 fmt_name(dst_dt), (long long)rows, (long long)cols, err ? err : "unsupported");
        return st;
#else
        (void)stream;
        QLOG(q, ORK_LEVEL_ERROR, "dequantize on CUDA: this quant plugin was built without CUDA");
        return ORK_E_UNSUPPORTED;
#endif
    }
    dctx c = {q, src, scales, (size_t)cols, ork_quant_nblocks((size_t)cols, (size_t)q->block), dst_dt, dst};
    int nt = job_threads(q, 0, rows, cols);
    part *parts = run_rows(deq_part, &c, (size_t)rows, nt);
    if (!parts) {
        QLOG(q, ORK_LEVEL_ERROR, "dequantize: out of memory for %d threads", nt);
        return ORK_E_NOMEM;
    }
    ork_status st = ORK_OK;
    for (int t = 0; t < nt && st == ORK_OK; t++)
        if (parts[t].st != ORK_OK) {
            st = parts[t].st;
            QLOG(q, ORK_LEVEL_ERROR, "dequantize: %s", parts[t].msg[0] ? parts[t].msg : "failed");
        }
    free(parts);
    return st;
}

/* ---- tables --------------------------------------------------------------------- */
#define VTABLE(nm, cr) static const ork_quant_vtable nm = { \
    .abi = ORK_ABI_INIT(ork_quant_vtable), .create = cr, .destroy = quant_destroy, \
    .layout = quant_layout, .quantize = quant_quantize, .dequantize = quant_dequantize}
VTABLE(vt_e4m3, create_e4m3);
VTABLE(vt_e5m2, create_e5m2);
VTABLE(vt_bf16, create_bf16);
VTABLE(vt_none, create_none);

static const char *const al_e4m3[] = {"fp8_e4m3", "qfloat8", "float8", "fp8", "e4m3", "float8_e4m3fn", NULL};
static const char *const al_e5m2[] = {"fp8_e5m2", "bf8", "e5m2", "float8_e5m2", NULL};
static const char *const al_bf16[] = {"bf16", "bfloat16", NULL};
static const char *const al_none[] = {"none", NULL};

#define COMPONENT(nm, id_, al, desc, keys, vt) static const ork_component nm = { \
    .abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_QUANT, .id = id_, .aliases = al, \
    .description = desc, .params = keys, .params_size = sizeof(quant_params), .vtable = &vt}
COMPONENT(c_e4m3, "org.orakul.quant.fp8_e4m3", al_e4m3,
          "fp8 E4M3 weights with fp32 absmax scales per row (or 1x128 block); ~2.6% relative RMS error",
          fp8_keys, vt_e4m3);
COMPONENT(c_e5m2, "org.orakul.quant.fp8_e5m2", al_e5m2,
          "fp8 E5M2 weights with fp32 absmax scales per row (or 1x128 block); ~5.2% relative RMS error",
          fp8_keys, vt_e5m2);
COMPONENT(c_bf16, "org.orakul.quant.bf16", al_bf16,
          "bf16 weights (round to nearest even), no scales; ~0.2% relative RMS error", bf16_keys, vt_bf16);
COMPONENT(c_none, "org.orakul.quant.none", al_none,
          "no quantization: an exact f32 (or bf16) copy", none_keys, vt_none);

static const ork_component *const components[] = {&c_e4m3, &c_e5m2, &c_bf16, &c_none, NULL};

static ork_status quant_init(const ork_host *host) {
    g_num = host && host->get_service ? host->get_service(host, ORK_SERVICE_NUMERICS) : NULL;
    g_plat = host && host->get_service ? host->get_service(host, ORK_SERVICE_PLATFORM) : NULL;
    if (!g_num) {
        if (host) host->log(host, ORK_LEVEL_ERROR, "this core offers no %s service (orakul 1.x before it); "
                            "the quantizers need it", ORK_SERVICE_NUMERICS);
        return ORK_E_UNSUPPORTED;
    }
    return ORK_OK;
}

static void quant_deinit(void) { g_num = NULL, g_plat = NULL; }

static const ork_plugin_entry entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "quant",
    .version = "1.0.0",
    .description = "frozen-weight quantizers: fp8 E4M3 / E5M2 with fp32 scales, bf16, none",
    .init = quant_init,
    .deinit = quant_deinit,
    .components = components,
};

ORK_PLUGIN_ENTRY(entry)
