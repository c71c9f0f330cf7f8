/* bench/profile/bench_ew8.c — the broadcast binary ops and modulate at FLUX.1's
 * 1024² shapes through the CUDA backend (issue #31): the gated residual (img
 * tokens x the gate, a (1, 1, C) broadcast), the residual add (same shape),
 * the MLP-wide product, modulate and the mul's input gradient; the median of
 * 21 timed calls after 3 warm-ups, each call's time from device events, and
 * GB/s counted as each operand read once and the output written once. Run it
 * twice, with ORK_CUDA_EW8=0 (the scalar kernels, the default) and 1 (the
 * 8-wide path, opt-in until measured), in one device call: bench/profile/run_gpu.sh phase "ew8". Never a test. */
#include "cuda/cuda_ctx.h"
#include "numerics/half.h"
#include "tensor/backend.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static const ork_backend *G;
static ork_kctx K;

static int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static ork_bcast mkbc(const int64_t *shape, const int64_t *bshape) {
    ork_bcast bc = {.ndim = 3};
    int64_t s = 1, n = 1;
    for (int d = 2; d >= 0; d--) {
        bc.shape[d] = shape[d];
        n *= shape[d];
        bc.bstride[d] = bshape[d] == 1 && shape[d] != 1 ? 0 : s;
        s *= bshape[d];
    }
    bc.n = n;
    bc.nb = s;
    return bc;
}

static void *dev_rand(int64_t n) {
    uint16_t *h = malloc((size_t)n * 2);
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        h[i] = ork_f32_to_bf16((float)((r >> 40) * (1.0 / 8388608.0)) - 1.f);
    }
    void *d = NULL;
    if (!h || G->alloc((size_t)n * 2, &d) != ORK_OK || G->memcpy_h2d(&K, d, h, (size_t)n * 2) != ORK_OK) {
        fprintf(stderr, "bench_ew8: device memory\n");
        exit(1);
    }
    free(h);
    return d;
}

int main(void) {
    if (ork_cuda_device_count() == 0) { printf("no CUDA device\n"); return 77; }
    G = ork_cuda_backend();
    if (G->ctx_create(0, &K.priv) != ORK_OK || ork_cuda_stream_create(&K.stream) != ORK_OK) return 1;
    K.nthreads = 1;
    cudaStream_t st = (cudaStream_t)K.stream; /* the stream every launch below takes */
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const char *e = getenv("ORK_CUDA_EW8");
    printf("ORK_CUDA_EW8=%s\n", e ? e : "(unset: the scalar kernels)");
    struct { const char *name; int64_t sh[3], bsh[3]; int op; } cs[] = {
        {"gate mul (1,4096,3072)x(1,1,3072)", {1, 4096, 3072}, {1, 1, 3072}, 0},
        {"residual add (1,4608,3072) same shape", {1, 4608, 3072}, {1, 4608, 3072}, 1},
        {"mlp mul (1,4608,12288) same shape", {1, 4608, 12288}, {1, 4608, 12288}, 0},
        {"modulate (1,4096,3072), (1,1,3072)", {1, 4096, 3072}, {1, 1, 3072}, 2},
        {"mul da (1,4096,3072)x(1,1,3072)", {1, 4096, 3072}, {1, 1, 3072}, 3},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        ork_bcast bc = mkbc(cs[c].sh, cs[c].bsh);
        void *a = dev_rand(bc.n), *b = dev_rand(bc.nb), *s = dev_rand(bc.nb), *y = dev_rand(bc.n);
        float ms[24];
        for (int it = 0; it < 24; it++) {
            cudaEventRecord(e0, st);
            ork_status r = ORK_OK;
            switch (cs[c].op) {
            case 0: r = G->binary(&K, ORK_BINARY_MUL, &bc, a, b, ORK_BF16, y, ORK_BF16); break;
            case 1: r = G->binary(&K, ORK_BINARY_ADD, &bc, a, b, ORK_BF16, y, ORK_BF16); break;
            case 2: r = G->modulate(&K, &bc, &bc, a, b, s, y, ORK_BF16); break;
            case 3: r = G->binary_bwd(&K, ORK_BINARY_MUL, &bc, a, b, ORK_BF16, a, ORK_BF16, y, NULL, ORK_F32); break;
            }
            cudaEventRecord(e1, st);
            if (r != ORK_OK || cudaEventSynchronize(e1) != cudaSuccess) { fprintf(stderr, "bench_ew8: failed\n"); return 1; }
            cudaEventElapsedTime(&ms[it], e0, e1);
        }
        qsort(ms + 3, 21, sizeof(float), cmpf);
        double med = ms[3 + 10] * 1e-3, bytes = 2.0 * (2.0 * (double)bc.n + (cs[c].op == 2 ? 2.0 : 1.0) * (double)bc.nb);
        printf("  %-40s %8.1f us  %6.0f GB/s\n", cs[c].name, med * 1e6, bytes / med / 1e9);
        G->free(a); G->free(b); G->free(s); G->free(y);
    }
    G->ctx_destroy(K.priv);
    ork_cuda_stream_destroy(K.stream);
    return 0;
}
