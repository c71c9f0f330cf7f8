/* cuda/cuda_ctx.h — the CUDA backend's per-graph context and device queries (C interface).
 * Owns: one ork_cuda_ctx per graph: the device index, a cuBLASLt handle, its
 * workspace (32 MiB on Hopper, 4 MiB otherwise), a small scratch buffer for
 * deterministic two-pass reductions, and the cuBLASLt heuristic cache keyed by
 * GEMM shape. No process globals. Not thread-safe: one graph, one thread. */
#ifndef ORK_CUDA_CTX_H
#define ORK_CUDA_CTX_H

#include <orakul/abi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_cuda_ctx ork_cuda_ctx;

/* Number of usable CUDA devices; 0 when there is no driver or no device
 * (GPU tests exit 77 on 0). Never fails. */
int ork_cuda_device_count(void);
/* Name and free / total memory of a device (cuda_info.cu). */
ork_status ork_cuda_mem_info(int device, size_t *free_b, size_t *total_b, char *name, size_t name_len);
/* 1 when the device runs under Windows' WDDM driver (cudaDevAttrTccDriver == 0
 * on Windows; 0 elsewhere and on TCC), whose shared-memory fallback pages VRAM
 * into system RAM past the free memory (cuda_info.cu). */
int ork_cuda_wddm(int device);

/* Context on device `device` (makes it current for this thread). */
ork_status ork_cuda_ctx_create(int device, ork_cuda_ctx **out);
void ork_cuda_ctx_destroy(ork_cuda_ctx *c);
int ork_cuda_ctx_device(const ork_cuda_ctx *c);
int ork_cuda_ctx_sm_count(const ork_cuda_ctx *c);
int ork_cuda_ctx_cc(const ork_cuda_ctx *c); /* compute capability, e.g. 90 */

/* A non-blocking stream (never the legacy default stream), as void * (cudaStream_t). */
ork_status ork_cuda_stream_create(void **stream);
void ork_cuda_stream_destroy(void *stream);
ork_status ork_cuda_stream_sync(void *stream); /* tests, benches, to_host only */

#ifdef __cplusplus
}
#endif
#endif
