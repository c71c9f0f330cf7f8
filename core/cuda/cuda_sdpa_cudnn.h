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
 * D 64 or 128, every gradient wanted, and cuDNN loaded. SWITCH: the path is
 * OFF unless the environment has ORK_CUDNN_SDPA=1 (the forward has run on the
 * H200 with 9.19, the backward not yet; docs/DECISIONS.md). Then libcudnn.so.9 (or the file named
 * by ORK_CUDNN_LIB) is dlopen'd at first use; forward needs cuDNN >= 9.13.1
 * (SDPA_FWD node), backward a cuDNN whose graph library builds the SDPA_BWD node
 * (the descriptor exists from 9.17, but 9.19 cannot put it in an operation graph;
 * 9.26 can; probed once at load, host-only), else our kernel runs that direction
 * (the lse is the same quantity, so the two mix). Plans are built once per (device, direction, B, H, Lq, Lk, D) and
 * cached for the process; a shape cuDNN offers no engine for is remembered as
 * such and reported by ork_cudnn_sdpa_ws() returning 0 with *ok = 0.
 *
 * Workspace: the plan's own size, asked for at plan time through
 * ork_cudnn_sdpa_ws() (the backend's attention_ws), and passed in by the op
 * layer from its arena, so nothing here allocates device memory in a step.
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

/* 1 when the loaded library builds an SDPA_BWD operation graph (checked once at
 * load, on the host: cuDNN 9.19 does not, 9.26 does); 0 otherwise. Per-shape
 * engine availability is still ork_cudnn_sdpa_ws(..., 1, &ok). */
int ork_cudnn_sdpa_has_bwd(void);

/* Frees the cached plans and handles (tests; safe to call more than once). */
void ork_cudnn_sdpa_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
