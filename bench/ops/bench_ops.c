/* bench_ops.c — times the CUDA backend's bf16 linear GEMMs at FLUX shapes and the
 * attention fwd/bwd at FLUX size (B=1, 24 heads × 128, L=4608): our flash kernels
 * (causal and not) and the cuDNN fused SDPA path (non-causal; "path": "cudnn", "bwd_graph":
 * "composite" or "native"). METHOD:
 * warm-up, then the median of 7 repeats of 20 back-to-back calls timed with
 * CUDA events on a non-blocking stream; inputs random (never zeros).
 * Prints one JSON object per line (kind, shape, ms, tflops) for bench_torch.py. */
#include "cuda/cuda_attn.h"
#include "cuda/cuda_ctx.h"
#include "cuda/cuda_gemm.h"
#include "cuda/cuda_sdpa_cudnn.h"
#include "numerics/half.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define OK(x) do { if ((x) != ORK_OK) { fprintf(stderr, "%s:%d %s failed\n", __FILE__, __LINE__, #x); exit(1); } } while (0)

static void *rand_bf16(size_t n, float scale, unsigned seed) {
    uint16_t *h = malloc(n * 2);
    uint64_t s = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = ork_f32_to_bf16(scale * ((float)((s >> 40) * (1.0 / 8388608.0)) - 1.f));
    }
    void *d;
    CK(cudaMalloc(&d, n * 2));
    CK(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

typedef int (*bench_fn)(void *ctx);
static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

/* median over 7 repeats of (20 calls) / 20, in ms */
static float time_it(cudaStream_t st, bench_fn fn, void *ctx) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) if (fn(ctx)) exit(1);
    CK(cudaStreamSynchronize(st));
    float t[7];
    for (int r = 0; r < 7; r++) {
        CK(cudaEventRecord(a, st));
        for (int i = 0; i < 20; i++) if (fn(ctx)) exit(1);
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[r], a, b));
        t[r] /= 20;
    }
    qsort(t, 7, sizeof(float), cmpf);
    CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
    return t[3];
}

typedef struct { ork_cuda_ctx *c; void *st; ork_cuda_gemm_args g; } gemm_job;
static int run_gemm(void *p) { gemm_job *j = p; return ork_cuda_gemm(j->c, j->st, &j->g) != ORK_OK; }

typedef struct { ork_cuda_attn_args a; void *q, *k, *v, *y, *dy, *dq, *dk, *dv, *ws; float *lse; void *st; int dev; } attn_job;
static int run_fwd(void *p) { attn_job *j = p; return ork_cuda_attn_fwd(&j->a, j->q, j->k, j->v, j->y, j->lse, j->st) != ORK_OK; }
static ork_cudnn_sdpa_args sdpa_of(const ork_cuda_attn_args *a) {
    ork_cudnn_sdpa_args s = {a->B, a->H, a->Hkv, a->Lq, a->Lk, a->D, a->scale, a->causal, a->kmask};
    return s;
}
static int run_cudnn_fwd(void *p) {
    attn_job *j = p;
    ork_cudnn_sdpa_args s = sdpa_of(&j->a);
    return ork_cudnn_sdpa_fwd(j->dev, &s, j->q, j->k, j->v, j->y, j->lse, j->ws, j->st) != ORK_OK;
}
static int run_cudnn_bwd(void *p) {
    attn_job *j = p;
    ork_cudnn_sdpa_args s = sdpa_of(&j->a);
    return ork_cudnn_sdpa_bwd(j->dev, &s, j->q, j->k, j->v, j->y, j->lse, j->dy, j->dq, j->dk, j->dv, j->ws, j->st) !=
           ORK_OK;
}
static int run_bwd(void *p) {
    attn_job *j = p;
    return ork_cuda_attn_bwd(&j->a, j->q, j->k, j->v, j->y, j->lse, j->dy, j->dq, j->dk, j->dv, j->ws, j->st) != ORK_OK;
}

int main(int argc, char **argv) {
    if (ork_cuda_device_count() == 0) { fprintf(stderr, "no CUDA device\n"); return 77; }
    int only_attn = argc > 1 && !strcmp(argv[1], "attn");
    ork_cuda_ctx *c;
    void *st;
    OK(ork_cuda_ctx_create(0, &c));
    OK(ork_cuda_stream_create(&st));
    const long M = 4608;
    const long KN[][2] = {{3072, 3072}, {3072, 9216}, {3072, 12288}, {12288, 3072}, {3072, 21504}, {15360, 3072}};
    for (int s = 0; !only_attn && s < 6; s++) {
        long K = KN[s][0], N = KN[s][1];
        void *x = rand_bf16((size_t)M * K, 1, 1), *w = rand_bf16((size_t)N * K, 0.05f, 2), *y = rand_bf16((size_t)M * N, 1, 3);
        for (int layout = 0; layout < 3; layout++) {
            gemm_job j = {c, st, {0}};
            j.g.batch = 1; j.g.alpha = 1; j.g.adt = j.g.bdt = ORK_BF16; j.g.cdt = ORK_BF16;
            const char *name;
            if (layout == 0) { /* y (M,N) = x (M,K) · w (N,K)ᵀ */
                name = "fwd"; j.g.tb = 1; j.g.M = M; j.g.N = N; j.g.K = K;
                j.g.A = x; j.g.lda = K; j.g.B = w; j.g.ldb = K; j.g.C = y; j.g.ldc = N;
            } else if (layout == 1) { /* dx (M,K) = dy (M,N) · w (N,K) */
                name = "dgrad"; j.g.M = M; j.g.N = K; j.g.K = N;
                j.g.A = y; j.g.lda = N; j.g.B = w; j.g.ldb = K; j.g.C = x; j.g.ldc = K;
            } else { /* dw (N,K) = dyᵀ (N,M) · x (M,K), bf16 out */
                name = "wgrad"; j.g.ta = 1; j.g.M = N; j.g.N = K; j.g.K = M;
                j.g.A = y; j.g.lda = N; j.g.B = x; j.g.ldb = K; j.g.C = w; j.g.ldc = K;
            }
            float ms = time_it((cudaStream_t)st, run_gemm, &j);
            printf("{\"kind\": \"gemm_%s\", \"M\": %ld, \"K\": %ld, \"N\": %ld, \"ms\": %.4f, \"tflops\": %.1f}\n", name, M,
                   K, N, ms, 2.0 * M * K * N / (ms * 1e-3) / 1e12);
            fflush(stdout);
        }
        CK(cudaFree(x)); CK(cudaFree(w)); CK(cudaFree(y));
    }
    const long B = 1, H = 24, L = 4608, D = 128;
    /* path 0: our flash kernels, causal and not; path 1: cuDNN SDPA (non-causal), when it has plans */
    for (int run = 0; run < 3; run++) {
        int causal = run == 1, cud = run == 2;
        attn_job j;
        memset(&j, 0, sizeof j);
        j.a = (ork_cuda_attn_args){B, H, H, L, L, D, 0.f, causal, NULL};
        j.dev = ork_cuda_ctx_device(c);
        size_t wsz = ork_cuda_attn_ws(&j.a, 1);
        if (cud) {
            ork_cudnn_sdpa_args s = sdpa_of(&j.a);
            int okf = 0, okb = 0;
            size_t wf = ork_cudnn_sdpa_ws(j.dev, &s, 0, &okf), wb = ork_cudnn_sdpa_ws(j.dev, &s, 1, &okb);
            if (!okf || !okb) { fprintf(stderr, "cudnn sdpa: no plan (fwd %d, bwd %d); row skipped\n", okf, okb); continue; }
            wsz = wf > wb ? wf : wb;
        }
        size_t n = (size_t)B * H * L * D;
        j.q = rand_bf16(n, 1.5f, 4); j.k = rand_bf16(n, 1.5f, 5); j.v = rand_bf16(n, 1, 6); j.dy = rand_bf16(n, 1, 7);
        CK(cudaMalloc(&j.y, n * 2)); CK(cudaMalloc(&j.dq, n * 2)); CK(cudaMalloc(&j.dk, n * 2)); CK(cudaMalloc(&j.dv, n * 2));
        CK(cudaMalloc((void **)&j.lse, (size_t)B * H * L * 4));
        CK(cudaMalloc(&j.ws, wsz ? wsz : 1));
        j.st = st;
        float f = time_it((cudaStream_t)st, cud ? run_cudnn_fwd : run_fwd, &j);
        float b = time_it((cudaStream_t)st, cud ? run_cudnn_bwd : run_bwd, &j);
        double fl = 4.0 * B * H * L * L * D * (causal ? 0.5 : 1);
        const char *kind = "ours";
        if (cud) {
            ork_cudnn_sdpa_args s = sdpa_of(&j.a);
            kind = ork_cudnn_sdpa_plan_kind(j.dev, &s, 1);
            if (!kind) kind = "?";
        }
        printf("{\"kind\": \"attn\", \"path\": \"%s\", \"bwd_graph\": \"%s\", \"L\": %ld, \"H\": %ld, \"D\": %ld, "
               "\"causal\": %d, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_tflops\": %.1f, \"bwd_tflops\": %.1f, "
               "\"ws\": %zu}\n",
               cud ? "cudnn" : "ours", kind, L, H, D, causal, f, b, fl / (f * 1e-3) / 1e12, 2.5 * fl / (b * 1e-3) / 1e12,
               wsz);
        fflush(stdout);
        void *ps[] = {j.q, j.k, j.v, j.dy, j.y, j.dq, j.dk, j.dv, j.lse, j.ws};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) CK(cudaFree(ps[i]));
    }
    ork_cudnn_sdpa_shutdown();
    CK(cudaStreamSynchronize((cudaStream_t)st));
    ork_cuda_stream_destroy(st);
    ork_cuda_ctx_destroy(c);
    return 0;
}
