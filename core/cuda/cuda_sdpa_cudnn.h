/* cuda/cuda_sdpa_cudnn.h — fused attention (SDPA) forward and backward through
 * cuDNN 9's backend graph API (C interface), the fast path of the CUDA
 * backend's attention entries; cuda_attn (our own flash kernels) is the fallback.
 *
 *   q (B, H, L, D), k, v (B, H, Lk, D), y (B, H, L, D) bf16, contiguous
 *   (strides [H·L·D, L·D, D, 1]); lse F32 (B, H, L) = natural-log logsumexp of
 *   the scaled scores (cuDNN's softmax "Stats" output, same definition and
 *   units as cuda_attn's lse, so either forward pairs with either backward).
 *
 * Taken only when ork_cudnn_sdpa_eligible(): non-causal, no key mask, H == Hkv,
 * D 64 or 128, every gradient wanted, and cuDNN loaded. SWITCH ORK_CUDNN_SDPA:
 * unset = on when libcudnn.so.9 (or the file named by ORK_CUDNN_LIB, dlopen'd at
 * first use) is >= 9.13.1 and builds a backward graph; "0" = off; "1" = on even
 * when only the forward builds (docs/DECISIONS.md). Forward: one SDPA_FWD node.
 * Backward: the composite flash-attention graph that cudnn-frontend builds
 * (matmul/pointwise/reduction/reshape ops, F32 dQ accumulator and dO·O row sums
 * in the workspace; any cuDNN 9 — 9.19 included), else the native SDPA_BWD node
 * (builds in 9.26, not 9.19); ORK_CUDNN_SDPA_BWD=native tries the native one
 * first. Which graphs build is probed once at load, host-only. A direction with
 * no plan runs our kernel (the lse is the same quantity, so the two mix). Plans
 * are built once per (device, direction, B, H, Lq, Lk, D) and cached for the
 * process; a shape cuDNN offers no engine for is remembered as such and
 * reported by ork_cudnn_sdpa_ws() returning 0 with *ok = 0.
 *
 * Workspace: the plan's own size, asked for at plan time through
 * ork_cudnn_sdpa_ws() (the backend's attention_ws), and passed in by the op
 * layer from its arena, so nothing here allocates device memory in a step.
 * The composite backward's includes our F32 dQ accumulator (B·H·Lq·D·4 bytes,
 * 57 MB at FLUX size) and row sums (B·H·Lq·4), as cudnn-frontend's does.
 * Not thread-safe (one graph, one thread, like ork_cuda_ctx). [stream-ordered] */
#ifndef ORK_CUDA_SDPA_CUDNN_H
#define ORK_CUDA_SDPA_CUDNN_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_cudnn_sdpa_args {
    int64_t B, H, Hkv, Lq, Lk, D;
    float scale;
    int causal;
    const uint8_t *kmask;
} ork_cudnn_sdpa_args;

/* 1 when the shape/flags are ones the cuDNN path takes (does not load cuDNN). */
int ork_cudnn_sdpa_eligible(const ork_cudnn_sdpa_args *a);

/* Loads cuDNN on first call (once); 1 when usable. Logs the outcome once. */
int ork_cudnn_sdpa_available(void);

/* Builds (or finds) the plan for a shape on `device`: *ok = 1 and the
 * workspace bytes, or *ok = 0 (no cuDNN, not eligible, or no engine; logged
 * once per shape) and 0. */
size_t ork_cudnn_sdpa_ws(int device, const ork_cudnn_sdpa_args *a, int backward, int *ok);

/* ORK_E_UNSUPPORTED (no log) when there is no plan: the caller runs cuda_attn.
 * ws: at least ork_cudnn_sdpa_ws() bytes (may be NULL when that is 0). */
ork_status ork_cudnn_sdpa_fwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, void *y, float *lse, void *ws, void *stream);
ork_status ork_cudnn_sdpa_bwd(int device, const ork_cudnn_sdpa_args *a, const void *q, const void *k,
                              const void *v, const void *y, const float *lse, const void *dy, void *dq,
                              void *dk, void *dv, void *ws, void *stream);

/* cudnnGetVersion() of the loaded library, 0 when none. */
long ork_cudnn_sdpa_version(void);

/* 1 when the loaded library builds a backward operation graph of either kind
 * (checked once at load, on the host); 0 otherwise. Per-shape engine
 * availability is still ork_cudnn_sdpa_ws(..., 1, &ok). */
int ork_cudnn_sdpa_has_bwd(void);
/* The backward graph kinds that built at load: bit 1 composite, bit 2 native. */
int ork_cudnn_sdpa_bwd_graphs(void);
/* 1 when a backward plan is expected for this shape: eligible, cuDNN loaded, and
 * a backward graph kind offered for it (the composite needs Lk % 128 == 0 on
 * cuDNN <= 9.15, where cudnn-frontend adds a padding-mask workaround we do not
 * build). Tests assert that such shapes really get a plan. */
int ork_cudnn_sdpa_bwd_expected(const ork_cudnn_sdpa_args *a);
/* "fwd", "composite" or "native" for a cached plan, NULL when none (or none yet). */
const char *ork_cudnn_sdpa_plan_kind(int device, const ork_cudnn_sdpa_args *a, int backward);

/* Frees the cached plans and handles (tests; safe to call more than once). */
void ork_cudnn_sdpa_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
