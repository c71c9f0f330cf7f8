/* bench_quant.c — the quant plugin (orakul-quant.so, loaded through the core's
 * registry) on FLUX-sized weights.
 *
 *   bench_quant [speed] [repeats=5]
 *       CPU quantize throughput on a 3072 x 12288 bf16 weight (a FLUX.1 MLP
 *       matrix): E4M3 / E5M2 x per-row / 1x128 x 1 thread / all threads, plus
 *       the bf16 component from f32 and CPU dequantize; then, when built with
 *       CUDA and a device is present, CUDA dequantize throughput (fp8 -> bf16 /
 *       f32), timed with events on a non-blocking stream. GB/s counts the input
 *       bytes read (quantize) or bytes read + written (dequantize); each number
 *       is the median of `repeats` timed runs after a warm-up; "cpu ns/el" is
 *       the process CPU time per element (mean), which contention does not inflate.
 *   bench_quant errors [outlier_cols=4] [outlier_gain=100]
 *       Relative RMS error ||W - deq(q(W))|| / ||W|| of E4M3 and E5M2, per row
 *       and 1x128, for every FLUX.1-dev linear shape, on Gaussian bf16 weights
 *       and on the same weights with a few outlier input columns
 *       (docs/quant.md quotes this table); for the latter also the error over
 *       the other ("bulk") columns alone, which the outliers' energy hides.
 *   bench_quant gemm [repeats=5]
 *       The forward GEMM of a quantized linear on CUDA, y (M, N) = x (M, K) · Wᵀ at
 *       M = 4608 tokens and the FLUX shapes N x K = 3072 x 3072, 12288 x 3072,
 *       3072 x 12288: bf16 GEMM on a bf16 W (no quantization); path (a) = the
 *       plugin's dequantize of fp8 W into a bf16 scratch + the bf16 GEMM; path (b)
 *       = the native FP8 GEMM (activation quantizer + cuBLASLt FP8 with
 *       per-channel x per-token scales; cuda_gemm_fp8.h), E4M3 and E5M2 W, fast
 *       accumulation on and off; and the activation quantizer alone. Each row:
 *       the median over `repeats` of the mean of 20 back-to-back calls (events).
 * Owns nothing beyond main. */
#include "numerics/half.h"
#include "platform/platform.h"
#include "plugin/registry.h"
#include "util/log.h"

#include <orakul/orakul.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#include "cuda/cuda_gemm.h"
#include "cuda/cuda_gemm_fp8.h"

#include <cuda_runtime_api.h>
#endif

static ork_registry *g_reg;

typedef struct inst {
    const ork_quant_vtable *vt;
    void *self;
} inst;

/* Create component `name` with block_size / threads / dtype through its key table. */
static int make(const char *name, int64_t block, inst *out) {
    const ork_plugin_component *pc = ork_registry_find(g_reg, ORK_KIND_QUANT, name);
    if (!pc) { fprintf(stderr, "no quant component %s\n", name); return 1; }
    unsigned char buf[256] = {0};
    for (const ork_param *p = pc->c->params; p && p->key; p++) {
        if (!strcmp(p->key, "block_size")) memcpy(buf + p->offset, &block, 8);
        else if (!strcmp(p->key, "dtype")) memcpy(buf + p->offset, &p->def, sizeof p->def);
    }
    out->vt = pc->c->vtable;
    return out->vt->create(&pc->host, buf, &out->self) != ORK_OK;
}

static double now(void) { return 1e-9 * (double)ork_time_ns(); }
/* Process CPU seconds: with the wall time it tells a contended box apart. */
static double cpu_now(void) { return 1e-9 * (double)ork_process_cpu_ns(); }
static double g_cpu0;
static double g_cpu_per_run;

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmpd);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* splitmix64 + Box-Muller */
static uint64_t g_s = 12345;
static double unif(void) {
    uint64_t z = (g_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * 0x1p-53;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif())); }

static int speed(int reps) {
    const int64_t rows = 3072, cols = 12288;
    size_t n = (size_t)(rows * cols);
    uint16_t *w = malloc(n * 2);
    float *wf = malloc(n * 4), *s = malloc((size_t)rows * 96 * 4);
    double *t = malloc((size_t)reps * sizeof(double));
    uint8_t *q = malloc(n * 2), *out = malloc(n * 4);
    if (!w || !wf || !s || !t || !q || !out) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < n; i++) { wf[i] = 0.02f * gauss(); w[i] = ork_f32_to_bf16(wf[i]); }
    long ncpu = ork_cpu_count();
    printf("quant plugin, CPU: %lld x %lld weight, median of %d after a warm-up, %ld online CPUs\n",
           (long long)rows, (long long)cols, reps, ncpu);
    printf("%-24s %-8s %7s %9s %9s %10s\n", "op", "scales", "threads", "ms", "GB/s", "cpu ns/el");
    static const char *const fmts[] = {"fp8_e4m3", "fp8_e5m2"};
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 2; b++)
            for (int th = 0; th < 2; th++) {
                inst qi;
                if (make(fmts[f], b ? 128 : 0, &qi)) return 1;
                int nt = th ? (int)ncpu : 1;
                for (int r = -1; r < reps; r++) {
                    if (r == 0) g_cpu0 = cpu_now();
                    double t0 = now();
                    if (qi.vt->quantize(qi.self, "bench", ORK_BF16, w, rows, cols, nt, q, s) != ORK_OK) return 1;
                    if (r >= 0) t[r] = now() - t0;
                }
                g_cpu_per_run = (cpu_now() - g_cpu0) / reps;
                double m = median(t, reps);
                char op[32];
                snprintf(op, sizeof op, "quantize bf16->%s", fmts[f] + 4);
                printf("%-24s %-8s %7d %9.1f %9.2f %10.2f\n", op, b ? "1x128" : "per-row", nt, 1e3 * m, (double)n * 2 / m / 1e9,
                       1e9 * g_cpu_per_run / (double)n);
                qi.vt->destroy(qi.self);
            }
    for (int th = 0; th < 2; th++) {
        inst qi;
        if (make("bf16", 0, &qi)) return 1;
        int nt = th ? (int)ncpu : 1;
        for (int r = -1; r < reps; r++) {
            if (r == 0) g_cpu0 = cpu_now();
            double t0 = now();
            if (qi.vt->quantize(qi.self, "bench", ORK_F32, wf, rows, cols, nt, q, NULL) != ORK_OK) return 1;
            if (r >= 0) t[r] = now() - t0;
        }
        g_cpu_per_run = (cpu_now() - g_cpu0) / reps;
        double m = median(t, reps);
        printf("%-24s %-8s %7d %9.1f %9.2f %10.2f\n", "quantize f32->bf16", "-", nt, 1e3 * m, (double)n * 4 / m / 1e9,
               1e9 * g_cpu_per_run / (double)n);
        qi.vt->destroy(qi.self);
    }
    for (int o = 0; o < 2; o++) {                     /* CPU dequantize, all threads */
        inst qi;
        if (make("fp8_e4m3", 0, &qi)) return 1;
        if (qi.vt->quantize(qi.self, "bench", ORK_BF16, w, rows, cols, 0, q, s) != ORK_OK) return 1;
        ork_dtype odt = o ? ORK_F32 : ORK_BF16;
        for (int r = -1; r < reps; r++) {
            if (r == 0) g_cpu0 = cpu_now();
            double t0 = now();
            if (qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, s, rows, cols, odt, out) != ORK_OK) return 1;
            if (r >= 0) t[r] = now() - t0;
        }
        g_cpu_per_run = (cpu_now() - g_cpu0) / reps;
        double m = median(t, reps);
        printf("%-24s %-8s %7ld %9.1f %9.2f %10.2f\n", o ? "dequantize e4m3->f32" : "dequantize e4m3->bf16", "per-row",
               ncpu, 1e3 * m, (double)n * (1 + ork_dtype_size(odt)) / m / 1e9, 1e9 * g_cpu_per_run / (double)n);
        qi.vt->destroy(qi.self);
    }
#ifdef ORAKUL_HAVE_CUDA
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
        printf("CUDA dequantize: no device\n");
    } else {
        cudaStream_t st;
        cudaEvent_t e0, e1;
        void *dq, *dd;
        float *ds;
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) || cudaEventCreate(&e0) || cudaEventCreate(&e1) ||
            cudaMalloc(&dq, n) || cudaMalloc(&dd, n * 4) || cudaMalloc((void **)&ds, (size_t)rows * 96 * 4)) {
            fprintf(stderr, "cuda setup failed\n");
            return 1;
        }
        printf("quant plugin, CUDA dequantize: %lld x %lld, median of %d\n", (long long)rows, (long long)cols, reps);
        for (int f = 0; f < 2; f++)
            for (int b = 0; b < 2; b++)
                for (int o = 0; o < 2; o++) {
                    inst qi;
                    if (make(fmts[f], b ? 128 : 0, &qi)) return 1;
                    if (qi.vt->quantize(qi.self, "bench", ORK_BF16, w, rows, cols, 0, q, s) != ORK_OK) return 1;
                    size_t ns = (size_t)rows * (b ? 96 : 1);
                    cudaMemcpyAsync(dq, q, n, cudaMemcpyHostToDevice, st);
                    cudaMemcpyAsync(ds, s, ns * 4, cudaMemcpyHostToDevice, st);
                    ork_dtype odt = o ? ORK_F32 : ORK_BF16;
                    for (int r = -1; r < reps; r++) {
                        cudaEventRecord(e0, st);
                        for (int k = 0; k < 10; k++)
                            if (qi.vt->dequantize(qi.self, ORK_DEV_CUDA, st, dq, ds, rows, cols, odt, dd) != ORK_OK) return 1;
                        cudaEventRecord(e1, st);
                        cudaEventSynchronize(e1);
                        float ms = 0;
                        cudaEventElapsedTime(&ms, e0, e1);
                        if (r >= 0) t[r] = ms / 10 / 1e3;
                    }
                    double m = median(t, reps);
                    char op[40];
                    snprintf(op, sizeof op, "dequantize %s->%s", fmts[f] + 4, o ? "f32" : "bf16");
                    printf("%-24s %-8s %9.3f ms %9.1f GB/s\n", op, b ? "1x128" : "per-row", 1e3 * m,
                           ((double)n * (1 + ork_dtype_size(odt)) + (double)ns * 4) / m / 1e9);
                    qi.vt->destroy(qi.self);
                }
        cudaFree(dq); cudaFree(dd); cudaFree(ds);
        cudaEventDestroy(e0); cudaEventDestroy(e1); cudaStreamDestroy(st);
    }
#else
    printf("CUDA dequantize: not built (ORAKUL_CUDA off)\n");
#endif
    free(w); free(wf); free(s); free(t); free(q); free(out);
    return 0;
}

/* FLUX.1-dev linear weights [out, in] (FLUX.md): qkv / proj, img/txt mlp in and
 * out, single-block linear1 (qkv + mlp) and linear2. */
static const struct { int64_t rows, cols; const char *what; } g_shapes[] = {
    {3072, 3072, "attn proj"},
    {9216, 3072, "qkv"},
    {12288, 3072, "mlp.0 (in)"},
    {3072, 12288, "mlp.2 (out)"},
    {21504, 3072, "single linear1"},
    {3072, 15360, "single linear2"},
};

static int errors(int n_out, float gain) {
    printf("relative RMS error ||W - deq(q(W))|| / ||W||, bf16 Gaussian weights (std 0.02); "
           "'outliers': %d input columns x %g\n", n_out, (double)gain);
    printf("%-16s %-14s %-9s %10s %10s %10s %10s\n", "shape", "layer", "weights", "e4m3 row", "e4m3 1x128",
           "e5m2 row", "e5m2 1x128");
    static const char *const fmts[] = {"fp8_e4m3", "fp8_e5m2"};
    for (size_t k = 0; k < sizeof g_shapes / sizeof g_shapes[0]; k++) {
        int64_t rows = g_shapes[k].rows, cols = g_shapes[k].cols;
        size_t n = (size_t)(rows * cols);
        uint16_t *w = malloc(n * 2);
        float *ref = malloc(n * 4), *back = malloc(n * 4), *s = malloc((size_t)rows * (size_t)(cols / 128 + 1) * 4);
        uint8_t *q = malloc(n);
        int *oc = malloc((size_t)(n_out > 0 ? n_out : 1) * sizeof(int));
        if (!w || !ref || !back || !s || !q || !oc) { fprintf(stderr, "out of memory\n"); return 1; }
        unsigned char *isout = calloc((size_t)cols, 1);
        if (!isout) return 1;
        for (int i = 0; i < n_out; i++) { oc[i] = (int)(unif() * (double)cols); isout[oc[i]] = 1; }
        for (int v = 0; v < 2; v++) {
            g_s = 1000 + k;                          /* the same Gaussian for both variants */
            for (size_t i = 0; i < n; i++) ref[i] = 0.02f * gauss();
            if (v)
                for (int64_t r = 0; r < rows; r++)
                    for (int i = 0; i < n_out; i++) ref[r * cols + oc[i]] *= gain;
            for (size_t i = 0; i < n; i++) { w[i] = ork_f32_to_bf16(ref[i]); ref[i] = ork_bf16_to_f32(w[i]); }
            double e[4], eo[4];
            for (int f = 0; f < 2; f++)
                for (int b = 0; b < 2; b++) {
                    inst qi;
                    if (make(fmts[f], b ? 128 : 0, &qi)) return 1;
                    if (qi.vt->quantize(qi.self, g_shapes[k].what, ORK_BF16, w, rows, cols, 0, q, s) != ORK_OK ||
                        qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, s, rows, cols, ORK_F32, back) != ORK_OK)
                        return 1;
                    double e2 = 0, r2 = 0, eb = 0, rb = 0;
                    for (size_t i = 0; i < n; i++) {
                        double d = (double)ref[i] - back[i];
                        e2 += d * d;
                        r2 += (double)ref[i] * ref[i];
                        if (!isout[i % (size_t)cols]) { eb += d * d; rb += (double)ref[i] * ref[i]; }
                    }
                    e[f * 2 + b] = sqrt(e2 / r2);
                    eo[f * 2 + b] = sqrt(eb / rb);
                    qi.vt->destroy(qi.self);
                }
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
            printf("%-16s %-14s %-9s %9.3f%% %9.3f%% %9.3f%% %9.3f%%\n", shape, g_shapes[k].what,
                   v ? "outliers" : "gaussian", 100 * e[0], 100 * e[1], 100 * e[2], 100 * e[3]);
            if (v)
                printf("%-16s %-14s %-9s %9.3f%% %9.3f%% %9.3f%% %9.3f%%\n", "", "", " bulk cols", 100 * eo[0],
                       100 * eo[1], 100 * eo[2], 100 * eo[3]);
            fflush(stdout);
        }
        free(w); free(ref); free(back); free(s); free(q); free(oc); free(isout);
    }
    return 0;
}

#ifdef ORAKUL_HAVE_CUDA
typedef struct gemm_job {
    ork_cuda_ctx *ctx;
    cudaStream_t st;
    inst *q;                 /* the quantizer of w8 (path (a)'s dequantize) */
    int64_t M, N, K;
    void *x, *wb, *w8, *scratch, *y, *ws;
    float *sw;
    ork_dtype wdt;
    int fast_accum;
} gemm_job;

enum { G_BF16, G_DEQUANT, G_NATIVE, G_QUANT_ROWS };

static int gemm_once(const gemm_job *j, int what) {
    if (what == G_QUANT_ROWS) {
        size_t xq = ((size_t)(j->M * j->K) + 255) & ~(size_t)255;
        return ork_cuda_fp8_quant_rows(j->st, j->M, j->K, j->x, j->ws, (float *)((char *)j->ws + xq)) != ORK_OK;
    }
    if (what == G_NATIVE) {
        char why[256] = "";
        ork_cuda_fp8_linear_args a = {j->M, j->N, j->K, j->x, j->w8, j->wdt, j->sw, NULL, j->y, j->ws, j->fast_accum,
                                      why, sizeof why};
        ork_status s = ork_cuda_fp8_linear(j->ctx, j->st, &a);
        if (s != ORK_OK) fprintf(stderr, "native fp8 GEMM: %s\n", why[0] ? why : "failed");
        return s != ORK_OK;
    }
    const void *w = j->wb;
    if (what == G_DEQUANT) {
        if (j->q->vt->dequantize(j->q->self, ORK_DEV_CUDA, j->st, j->w8, j->sw, j->N, j->K, ORK_BF16, j->scratch) != ORK_OK)
            return 1;
        w = j->scratch;
    }
    ork_cuda_gemm_args g = {.ta = 0, .tb = 1, .M = j->M, .N = j->N, .K = j->K, .batch = 1, .alpha = 1.0f, .beta = 0.0f,
                            .A = j->x, .adt = ORK_BF16, .lda = j->K, .B = w, .bdt = ORK_BF16, .ldb = j->K,
                            .C = j->y, .cdt = ORK_BF16, .ldc = j->N};
    return ork_cuda_gemm(j->ctx, j->st, &g) != ORK_OK;
}

/* Median over reps of the mean of 20 calls, seconds; < 0 on failure. */
static double gemm_time(const gemm_job *j, int what, int reps, double *t) {
    cudaEvent_t e0, e1;
    if (cudaEventCreate(&e0) || cudaEventCreate(&e1)) return -1;
    double m = -1;
    for (int r = -1; r < reps; r++) {
        cudaEventRecord(e0, j->st);
        for (int k = 0; k < 20; k++)
            if (gemm_once(j, what)) goto out;
        cudaEventRecord(e1, j->st);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 0) t[r] = ms / 20 / 1e3;
    }
    m = median(t, reps);
out:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return m;
}

static int gemm_bench(int reps) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { printf("gemm: no CUDA device\n"); return 0; }
    ork_cuda_ctx *ctx;
    if (ork_cuda_ctx_create(0, &ctx) != ORK_OK) return 1;
    char why[256] = "";
    int native = ork_cuda_fp8_native_ok(ctx, why, sizeof why) == ORK_OK;
    size_t fm = 0, tm = 0;
    char name[128] = "";
    ork_cuda_mem_info(0, &fm, &tm, name, sizeof name);
    printf("forward GEMM of a quantized linear, %s (sm_%d), y (M, N) = x (M, K) · Wᵀ, bf16 out, median of %d x "
           "mean of 20 calls\n", name, ork_cuda_ctx_cc(ctx), reps);
    if (!native) printf("native FP8 GEMM unavailable: %s\n", why);
    printf("%-6s %-6s %-6s %-40s %9s %9s\n", "M", "N", "K", "path", "ms", "TFLOP/s");
    static const struct { int64_t N, K; } sh[] = {{3072, 3072}, {12288, 3072}, {3072, 12288}};
    const int64_t M = 4608;
    double *t = malloc((size_t)reps * sizeof(double));
    if (!t) return 1;
    for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++) {
        int64_t N = sh[si].N, K = sh[si].K;
        size_t nx = (size_t)(M * K), nw = (size_t)(N * K);
        uint16_t *xh = malloc(nx * 2), *wh = malloc(nw * 2);
        uint8_t *w8h = malloc(nw);
        float *swh = malloc((size_t)N * 4);
        if (!xh || !wh || !w8h || !swh) return 1;
        for (size_t i = 0; i < nx; i++) xh[i] = ork_f32_to_bf16(gauss());
        for (size_t i = 0; i < nw; i++) wh[i] = ork_f32_to_bf16(0.02f * gauss());
        gemm_job j = {.ctx = ctx, .M = M, .N = N, .K = K};
        if (cudaStreamCreateWithFlags(&j.st, cudaStreamNonBlocking) || cudaMalloc(&j.x, nx * 2) ||
            cudaMalloc(&j.wb, nw * 2) || cudaMalloc(&j.w8, nw) || cudaMalloc(&j.scratch, nw * 2) ||
            cudaMalloc(&j.y, (size_t)(M * N) * 2) || cudaMalloc(&j.ws, ork_cuda_fp8_linear_ws(M, K)) ||
            cudaMalloc((void **)&j.sw, (size_t)N * 4)) {
            fprintf(stderr, "cuda setup failed\n");
            return 1;
        }
        cudaMemcpyAsync(j.x, xh, nx * 2, cudaMemcpyHostToDevice, j.st);
        cudaMemcpyAsync(j.wb, wh, nw * 2, cudaMemcpyHostToDevice, j.st);
        double flop = 2.0 * (double)M * (double)N * (double)K;
        for (int f = 0; f < 2; f++) {
            inst qi;
            if (make(f ? "fp8_e5m2" : "fp8_e4m3", 0, &qi)) return 1;
            if (qi.vt->quantize(qi.self, "bench", ORK_BF16, wh, N, K, 0, w8h, swh) != ORK_OK) return 1;
            cudaMemcpyAsync(j.w8, w8h, nw, cudaMemcpyHostToDevice, j.st);
            cudaMemcpyAsync(j.sw, swh, (size_t)N * 4, cudaMemcpyHostToDevice, j.st);
            cudaStreamSynchronize(j.st);
            j.q = &qi;
            j.wdt = f ? ORK_F8_E5M2 : ORK_F8_E4M3;
            struct { int what, fa, only_e4m3; const char *label; } rows[] = {
                {G_BF16, 0, 1, "bf16 GEMM (bf16 W, unquantized)"},
                {G_DEQUANT, 0, 0, "(a) dequantize + bf16 GEMM"},
                {G_NATIVE, 1, 0, "(b) native fp8, fast accum"},
                {G_NATIVE, 0, 0, "(b) native fp8, exact accum"},
                {G_QUANT_ROWS, 0, 1, "    of which: x -> e4m3 per token"},
            };
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                if (rows[r].only_e4m3 && f) continue;
                if (rows[r].what == G_NATIVE && !native) continue;
                j.fast_accum = rows[r].fa;
                double m = gemm_time(&j, rows[r].what, reps, t);
                char label[64];
                snprintf(label, sizeof label, "%s%s", rows[r].label,
                         rows[r].what == G_BF16 || rows[r].what == G_QUANT_ROWS ? "" : f ? " [e5m2 W]" : " [e4m3 W]");
                if (m < 0) { printf("%-6lld %-6lld %-6lld %-40s %9s\n", (long long)M, (long long)N, (long long)K, label, "failed"); continue; }
                printf("%-6lld %-6lld %-6lld %-40s %9.3f %9.1f\n", (long long)M, (long long)N, (long long)K, label,
                       1e3 * m, rows[r].what == G_QUANT_ROWS ? 0.0 : flop / m / 1e12);
                fflush(stdout);
            }
            qi.vt->destroy(qi.self);
        }
        cudaFree(j.x); cudaFree(j.wb); cudaFree(j.w8); cudaFree(j.scratch); cudaFree(j.y); cudaFree(j.ws);
        cudaFree(j.sw);
        cudaStreamDestroy(j.st);
        free(xh); free(wh); free(w8h); free(swh);
    }
    free(t);
    ork_cuda_ctx_destroy(ctx);
    return 0;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "speed";
    if (ork_registry_create(NULL, &g_reg) != ORK_OK ||
        ork_registry_add_file(g_reg, ORK_PLUGIN_DIR "/orakul-quant.so") != ORK_OK) {
        fprintf(stderr, "cannot load %s/orakul-quant.so\n", ORK_PLUGIN_DIR);
        return 1;
    }
    int rc;
    if (!strcmp(mode, "speed")) {
        int reps = argc > 2 ? atoi(argv[2]) : 5;
        rc = reps >= 1 && reps <= 1000 ? speed(reps) : 2;
    } else if (!strcmp(mode, "errors")) {
        int n_out = argc > 2 ? atoi(argv[2]) : 4;
        float gain = argc > 3 ? (float)atof(argv[3]) : 100.0f;
        rc = n_out >= 0 && gain > 0 ? errors(n_out, gain) : 2;
    } else if (!strcmp(mode, "gemm")) {
        int reps = argc > 2 ? atoi(argv[2]) : 5;
#ifdef ORAKUL_HAVE_CUDA
        rc = reps >= 1 && reps <= 1000 ? gemm_bench(reps) : 2;
#else
        (void)reps;
        printf("gemm: not built (ORAKUL_CUDA off)\n");
        rc = 0;
#endif
    } else {
        rc = 2;
    }
    if (rc == 2) fprintf(stderr, "usage: %s [speed [repeats]] | errors [outlier_cols] [outlier_gain] | gemm [repeats]\n", argv[0]);
    ork_registry_destroy(g_reg);
    return rc;
}
