/* bench_quantize.c — CPU FP8 weight pre-quantization throughput
 * (ork_quantize_fp8) on a 3072 x 12288 bf16 weight (a FLUX MLP matrix):
 * E4M3 / E5M2 x per-row / 1x128 x 1 thread / all threads. Reports input GB/s
 * (bf16 bytes read per second), the median of R timed runs after one warm-up,
 * and the process CPU time per element (telling contention on a shared box apart).
 * Usage: bench_quantize [repeats=7] [rows=3072] [cols=12288] */
#include "numerics/half.h"
#include "numerics/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    size_t rows = argc > 2 ? (size_t)atol(argv[2]) : 3072, cols = argc > 3 ? (size_t)atol(argv[3]) : 12288;
    if (reps < 1 || reps > 1000 || !rows || !cols) { fprintf(stderr, "usage: %s [repeats] [rows] [cols]\n", argv[0]); return 2; }
    size_t n = rows * cols;
    uint16_t *w = malloc(n * 2);
    uint8_t *q = malloc(n);
    float *s = malloc(rows * ork_quant_nblocks(cols, 128) * sizeof(float));
    double *t = malloc((size_t)reps * sizeof(double)), *cpu = malloc((size_t)reps * sizeof(double));
    if (!w || !q || !s || !t || !cpu) { fprintf(stderr, "out of memory\n"); return 1; }
    uint64_t st = 88172645463325252ull;               /* Gaussian-ish: sum of 4 uniforms */
    for (size_t i = 0; i < n; i++) {
        float g = 0;
        for (int k = 0; k < 4; k++) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; g += (float)(st >> 40) * 0x1p-24f; }
        w[i] = ork_f32_to_bf16((g - 2.0f) * 0.03f);
    }
    int all = ork_numerics_threads();
    printf("ork_quantize_fp8: %zu x %zu bf16 (%.1f MB), median of %d after a warm-up, %d online CPUs\n",
           rows, cols, n * 2 / 1e6, reps, all);
    printf("%-5s %-7s %7s %9s %10s %12s %9s\n", "fmt", "scales", "threads", "ms", "GB/s in", "cpu ns/elem", "rel_rms");
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 2; b++)
            for (int th = 0; th < 2; th++) {
                int nt = th ? all : 1;
                ork_dtype fmt = f ? ORK_F8_E5M2 : ORK_F8_E4M3;
                size_t block = b ? 128 : 0;
                ork_numerics_set_threads(nt);
                double rel = 0;
                for (int r = -1; r < reps; r++) {
                    double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
                    if (ork_quantize_fp8("bench", w, ORK_BF16, rows, cols, fmt, block, q, s, &rel) != ORK_OK)
                        return 1;
                    if (r >= 0) {
                        t[r] = now(CLOCK_MONOTONIC) - t0;
                        cpu[r] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
                    }
                }
                qsort(t, (size_t)reps, sizeof(double), cmp);
                qsort(cpu, (size_t)reps, sizeof(double), cmp);
                double med = t[reps / 2];
                printf("%-5s %-7s %7d %9.2f %10.3f %12.2f %9.4f\n", f ? "e5m2" : "e4m3", b ? "1x128" : "row",
                       nt, med * 1e3, n * 2 / med / 1e9, cpu[reps / 2] * 1e9 / (double)n, rel);
                if (nt == 1 && all == 1) th = 1;     /* one CPU: skip the duplicate row */
            }
    free(w); free(q); free(s); free(t); free(cpu);
    return 0;
}
