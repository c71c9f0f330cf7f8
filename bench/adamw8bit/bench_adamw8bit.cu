// bench_adamw8bit.cu — step time and effective bandwidth of the AdamW-8bit CUDA
// step (and, with --adamw, the fp32-state AdamW) on one tensor of N parameters.
//   bench_adamw8bit [N=6e9] [--bf16] [--adamw] [--steps S=10]
// Bytes moved per step (counted, not measured): 8-bit, f32 params: read p, g,
// code_m, code_v (10 B) + write p, codes (6 B) + absmax r/w (16 B per 256);
// bf16 params: 4 B less each way for p and g. fp32 AdamW: read p, g, m, v, write p, m, v.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "../../plugins/optimizers/adamw/adamw_math.h"
#include "../../plugins/optimizers/adamw/adamw8bit.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

// Deterministic pseudo-random fill: p ~ U(-0.1, 0.1), g ~ U(-0.01, 0.01).
__global__ void k_fill(void *x, int bf16, int64_t n, float scale, uint64_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float u = (float)(ork_sr_hash(seed, 0, i) >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
        if (bf16) ((uint16_t *)x)[i] = ork_f32_to_bf16_rne(u * scale);
        else ((float *)x)[i] = u * scale;
    }
}

int main(int argc, char **argv) {
    int64_t n = 6000000000LL;
    int bf16 = 0, adamw = 0, steps = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else if (!strcmp(argv[i], "--adamw")) adamw = 1;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else n = (int64_t)strtod(argv[i], NULL);
    }
    if (n < 1 || steps < 1) { fprintf(stderr, "usage: %s [N] [--bf16] [--adamw] [--steps S]\n", argv[0]); return 2; }
    ork_dtype dt = bf16 ? ORK_BF16 : ORK_F32;
    size_t es = bf16 ? 2 : 4;
    size_t sb = adamw ? ork_adamw_state_size(n) : ork_adamw8bit_state_size(n);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *p, *g, *st;
    ork_adamw8bit_maps maps, *d_maps;
    ork_adamw8bit_maps_init(&maps, 0);
    CK(cudaMalloc(&p, n * es));
    CK(cudaMalloc(&g, n * es));
    CK(cudaMalloc(&st, sb));
    CK(cudaMalloc((void **)&d_maps, sizeof maps));
    CK(cudaMemcpyAsync(d_maps, &maps, sizeof maps, cudaMemcpyHostToDevice, s));
    CK(cudaMemsetAsync(st, 0, sb, s));
    k_fill<<<4096, 256, 0, s>>>(p, bf16, n, 0.1f, 1);
    k_fill<<<4096, 256, 0, s>>>(g, bf16, n, 0.01f, 2);
    ork_adamw_hparams h = ork_adamw_hparams_default();
    h.eps = 1e-6f;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int t = 1; t <= steps + 1; t++) {
        if (t == 2) CK(cudaEventRecord(e0, s)); // step 1 is warm-up
        ork_status rc = adamw ? ork_adamw_step_cuda(&h, t, p, dt, g, dt, st, n, s)
                              : ork_adamw8bit_step_cuda(d_maps, &h, t, p, dt, g, dt, st, n, s);
        if (rc != ORK_OK) { fprintf(stderr, "step %d failed: %d\n", t, (int)rc); return 1; }
    }
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ms /= (float)steps;
    double bytes = adamw ? (double)n * (2 * es + 8 + es + 8)
                         : (double)n * (2 * es + 2 + es + 2) + (double)((n + 255) / 256) * 16;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s %s params, N=%.3g: %.3f ms/step, %.1f GB moved, %.0f GB/s (%s)\n",
           adamw ? "adamw(fp32 state)" : "adamw8bit", bf16 ? "bf16" : "f32", (double)n, ms,
           bytes / 1e9, bytes / (ms * 1e-3) / 1e9, prop.name);
    cudaFree(p); cudaFree(g); cudaFree(st); cudaFree(d_maps);
    return 0;
}
