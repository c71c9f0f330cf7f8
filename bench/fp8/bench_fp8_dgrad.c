/* bench_fp8_dgrad.c — speed of the native FP8 input gradient dx = dy · W
 * (core/cuda/cuda_gemm_fp8.h) on FLUX.1-dev shapes (M = 4608 tokens, 1024²):
 * against the bf16 GEMM dy · W_bf16 that path (a) runs after its dequantize,
 * with the weight's FP8 byte transpose and dy's per-token quantizer alone (GB/s
 * of what each reads and writes), and the tensor-wide scheme (sm_89's, run here
 * with scalar_scales). Median of 5 x mean of 20 back-to-back calls, CUDA events.
 * Usage: bench_fp8_dgrad [reps]. Owns nothing. */
#include "cuda/cuda_ctx.h"
#include "cuda/cuda_gemm.h"
#include "cuda/cuda_gemm_fp8.h"
#include "numerics/half.h"
#include "numerics/quantize.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    ork_cuda_ctx *ctx;
    cudaStream_t st;
    int64_t M, N, K;
    void *dy, *wb, *w8, *dx, *ws;
    size_t wsb;
    float *sw;
} job;

enum { J_BF16, J_NATIVE, J_SCALAR, J_TRANSPOSE, J_QUANT };

static int once(const job *j, int what) {
    char why[256] = "";
    ork_status s = ORK_OK;
    if (what == J_BF16) {
        ork_cuda_gemm_args g = {.M = j->M, .N = j->K, .K = j->N, .batch = 1, .alpha = 1.0f, .A = j->dy,
                                .adt = ORK_BF16, .lda = j->N, .B = j->wb, .bdt = ORK_BF16, .ldb = j->K, .C = j->dx,
                                .cdt = ORK_BF16, .ldc = j->K};
        s = ork_cuda_gemm(j->ctx, j->st, &g);
    } else if (what == J_TRANSPOSE) {
        s = ork_cuda_fp8_transpose(j->st, j->N, j->K, j->w8, j->ws);
    } else if (what == J_QUANT) {
        size_t off = ((size_t)(j->N * j->K) + 255) & ~(size_t)255, q = ((size_t)(j->M * j->N) + 255) & ~(size_t)255;
        s = ork_cuda_fp8_quant_rows_cs(j->st, j->M, j->N, j->dy, j->sw, (uint8_t *)j->ws + off,
                                       (float *)((char *)j->ws + off + q));
    } else {
        ork_cuda_fp8_dgrad_args a = {j->M, j->N, j->K, j->dy, j->w8, ORK_F8_E4M3, j->sw, j->dx, j->ws, j->wsb, 0,
                                     what == J_SCALAR, why, sizeof why};
        s = ork_cuda_fp8_dgrad(j->ctx, j->st, &a);
    }
    if (s != ORK_OK) fprintf(stderr, "bench_fp8_dgrad: %s\n", why[0] ? why : "failed");
    return s != ORK_OK;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over reps of the mean of 20 calls, seconds; < 0 on failure. */
static double timed(const job *j, int what, int reps) {
    cudaEvent_t e0, e1;
    double t[64], m = -1;
    if (cudaEventCreate(&e0) || cudaEventCreate(&e1)) return -1;
    for (int r = -1; r < reps; r++) {
        cudaEventRecord(e0, j->st);
        for (int k = 0; k < 20; k++)
            if (once(j, what)) goto out;
        cudaEventRecord(e1, j->st);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 0) t[r] = ms / 20 / 1e3;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    m = t[reps / 2];
out:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return m;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 64) reps = 5;
    if (ork_cuda_device_count() <= 0) { printf("bench_fp8_dgrad: no CUDA device\n"); return 0; }
    ork_cuda_ctx *ctx;
    if (ork_cuda_ctx_create(0, &ctx) != ORK_OK) return 1;
    char why[256] = "", name[128] = "";
    size_t fm = 0, tm = 0;
    ork_cuda_mem_info(0, &fm, &tm, name, sizeof name);
    int scheme = ork_cuda_fp8_scheme(ctx);
    printf("input gradient dx (M, K) = dy (M, N) · W (N, K) of an fp8 E4M3 linear, %s (sm_%d), bf16 dy/dx, median of %d "
           "x mean of 20 calls\n", name, ork_cuda_ctx_cc(ctx), reps);
    if (ork_cuda_fp8_native_ok(ctx, why, sizeof why) != ORK_OK) { printf("no native FP8 GEMM: %s\n", why); return 0; }
    printf("%-6s %-6s %-6s %-44s %9s %9s\n", "M", "N", "K", "path", "ms", "TFLOP/s|GB/s");
    static const struct { int64_t N, K; } sh[] = {{3072, 3072}, {12288, 3072}, {3072, 12288}, {21504, 3072},
                                                   {3072, 15360}};
    const int64_t M = 4608;
    for (size_t si = 0; si < sizeof sh / sizeof sh[0]; si++) {
        job j = {.ctx = ctx, .M = M, .N = sh[si].N, .K = sh[si].K};
        size_t ny = (size_t)(M * j.N), nw = (size_t)(j.N * j.K), nx = (size_t)(M * j.K);
        uint16_t *dyh = malloc(ny * 2), *wbh = malloc(nw * 2);
        float *wf = malloc(nw * 4), *swh = malloc((size_t)j.N * 4);
        uint8_t *w8h = malloc(nw);
        if (!dyh || !wbh || !wf || !swh || !w8h) return 1;
        uint64_t s = 12345 + si;
        for (size_t i = 0; i < nw; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            wf[i] = 0.02f * ((float)(s >> 40) / 16777216.0f - 0.5f);
        }
        for (size_t i = 0; i < ny; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            dyh[i] = ork_f32_to_bf16(1e-3f * ((float)(s >> 40) / 16777216.0f - 0.5f));
        }
        if (ork_quantize_fp8("w", wf, ORK_F32, (size_t)j.N, (size_t)j.K, ORK_F8_E4M3, 0, w8h, swh, NULL) != ORK_OK ||
            ork_dequantize_fp8(w8h, swh, (size_t)j.N, (size_t)j.K, ORK_F8_E4M3, 0, ORK_BF16, wbh) != ORK_OK)
            return 1;
        j.wsb = ork_cuda_fp8_ws(ctx, 1, 1, M, j.N, j.K);
        if (cudaStreamCreateWithFlags(&j.st, cudaStreamNonBlocking) || cudaMalloc(&j.dy, ny * 2) ||
            cudaMalloc(&j.wb, nw * 2) || cudaMalloc(&j.w8, nw) || cudaMalloc(&j.dx, nx * 2) ||
            cudaMalloc(&j.ws, j.wsb) || cudaMalloc((void **)&j.sw, (size_t)j.N * 4)) {
            fprintf(stderr, "cuda setup failed\n");
            return 1;
        }
        cudaMemcpyAsync(j.dy, dyh, ny * 2, cudaMemcpyHostToDevice, j.st);
        cudaMemcpyAsync(j.wb, wbh, nw * 2, cudaMemcpyHostToDevice, j.st);
        cudaMemcpyAsync(j.w8, w8h, nw, cudaMemcpyHostToDevice, j.st);
        cudaMemcpyAsync(j.sw, swh, (size_t)j.N * 4, cudaMemcpyHostToDevice, j.st);
        cudaStreamSynchronize(j.st);
        double flop = 2.0 * (double)M * (double)j.N * (double)j.K;
        struct { int what; const char *label; double bytes; } rows[] = {
            {J_BF16, "bf16 GEMM dy · W_bf16 ((a) after dequantize)", 0},
            {J_NATIVE, scheme == 2 ? "(b) native fp8, outer-vector scales" : "(b) native fp8, tensor-wide scales", 0},
            {J_SCALAR, "(b) tensor-wide scales (the sm_89 scheme)", 0},
            {J_TRANSPOSE, "    of which: W byte transpose", 2.0 * (double)nw},
            {J_QUANT, "    of which: dy·diag(sw) -> e4m3 per token", 5.0 * (double)ny}, /* 2 reads of bf16 + 1 B */
        };
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            double m = timed(&j, rows[r].what, reps);
            if (m < 0) { printf("%-6lld %-6lld %-6lld %-44s %9s\n", (long long)M, (long long)j.N, (long long)j.K,
                                rows[r].label, "failed"); continue; }
            printf("%-6lld %-6lld %-6lld %-44s %9.3f %9.1f\n", (long long)M, (long long)j.N, (long long)j.K,
                   rows[r].label, 1e3 * m, rows[r].bytes > 0 ? rows[r].bytes / m / 1e9 : flop / m / 1e12);
            fflush(stdout);
        }
        cudaFree(j.dy); cudaFree(j.wb); cudaFree(j.w8); cudaFree(j.dx); cudaFree(j.ws); cudaFree(j.sw);
        cudaStreamDestroy(j.st);
        free(dyh); free(wbh); free(wf); free(swh); free(w8h);
    }
    ork_cuda_ctx_destroy(ctx);
    return 0;
}
