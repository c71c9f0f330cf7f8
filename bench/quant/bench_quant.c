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
 * Owns nothing beyond main. */
#include "numerics/half.h"
#include "plugin/registry.h"
#include "util/log.h"

#include <orakul/orakul.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef ORAKUL_HAVE_CUDA
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

static double clk(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }
/* Process CPU seconds: with the wall time it tells a contended box apart. */
static double cpu_now(void) { return clk(CLOCK_PROCESS_CPUTIME_ID); }
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
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
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
    } else {
        rc = 2;
    }
    if (rc == 2) fprintf(stderr, "usage: %s [speed [repeats]] | errors [outlier_cols] [outlier_gain]\n", argv[0]);
    ork_registry_destroy(g_reg);
    return rc;
}
