/* cuda/cuda_ctx.cu — device queries, streams and the per-graph CUDA context
 * (cuBLASLt handle, its workspace, reduction scratch, GEMM heuristic cache).
 * Allocation happens here, at init only; nothing in a training step allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_gemm_fp8.h"
#include <stdlib.h>

extern "C" int ork_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
    return n;
}

extern "C" ork_status ork_cuda_stream_create(void **stream) {
    cudaStream_t s;
    ORK_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = (void *)s;
    return ORK_OK;
}
extern "C" void ork_cuda_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}
extern "C" ork_status ork_cuda_stream_sync(void *stream) {
    ORK_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    return ORK_OK;
}

extern "C" void ork_cuda_ctx_destroy(ork_cuda_ctx *c) {
    if (!c) return;
    ork_cuda_fp8_cache_free(c);
    for (int i = 0; i < ORK_GEMM_CACHE; i++) {
        ork_gemm_entry *e = &c->gemm[i];
        if (!e->used) continue;
        cublasLtMatmulDescDestroy(e->op);
        cublasLtMatrixLayoutDestroy(e->la);
        cublasLtMatrixLayoutDestroy(e->lb);
        cublasLtMatrixLayoutDestroy(e->lc);
    }
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaFree(c->ws);
    cudaFree(c->scratch);
    free(c);
}

extern "C" ork_status ork_cuda_ctx_create(int device, ork_cuda_ctx **out) {
    *out = NULL;
    int n = ork_cuda_device_count();
    if (device < 0 || device >= n)
        return ORK_FAIL(ORK_E_CUDA, "cuda: device %d requested, %d present", device, n);
    ORK_CUDA_TRY(cudaSetDevice(device));
    ork_cuda_ctx *c = (ork_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return ORK_FAIL(ORK_E_NOMEM, "cuda: context allocation failed");
    c->device = device;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) { free(c); ORK_CUDA_TRY(e); }
    c->sm_count = p.multiProcessorCount;
    c->cc = p.major * 10 + p.minor;
    c->ws_size = (c->cc >= 90 ? 32u : 4u) << 20;
    c->scratch_n = 4u << 20; /* 16 MiB of F32 partial sums */
    ork_status s = ORK_OK;
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) s = ORK_FAIL(ORK_E_CUDA, "cuda: cublasLtCreate failed");
    else if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
             (e = cudaMalloc(&c->ws, c->ws_size)) != cudaSuccess ||
             (e = cudaMalloc((void **)&c->scratch, c->scratch_n * sizeof(float))) != cudaSuccess)
        s = ORK_FAIL(ORK_E_CUDA, "cuda: workspace allocation: %s", cudaGetErrorString(e));
    if (s != ORK_OK) { ork_cuda_ctx_destroy(c); return s; }
    ORK_DEBUG("cuda: device %d %s, sm_%d, %d SMs, cuBLASLt workspace %zu MiB", device, p.name, c->cc,
              c->sm_count, c->ws_size >> 20);
    *out = c;
    return ORK_OK;
}

extern "C" int ork_cuda_ctx_device(const ork_cuda_ctx *c) { return c->device; }
extern "C" int ork_cuda_ctx_sm_count(const ork_cuda_ctx *c) { return c->sm_count; }
extern "C" int ork_cuda_ctx_cc(const ork_cuda_ctx *c) { return c->cc; }
