/* cuda/cuda_attn.h — fused flash attention for bf16 q, k, v (C interface).
 * Forward and backward never materialise the Lq×Lk score matrix.
 *
 *   q (B, H, Lq, D), k, v (B, Hkv, Lk, D), H % Hkv == 0 (query head h reads kv
 *   head h / (H / Hkv)); y (B, H, Lq, D); lse F32 (B, H, Lq): natural-log
 *   logsumexp of the scaled, masked scores (−inf for a row that sees no key,
 *   whose y is 0). kmask U8 (B, Lk): 1 = attend, or NULL. causal: query i
 *   sees keys j <= i + (Lk − Lq). D is 64 or 128; any Lq, Lk.
 * Backward needs the forward's y and lse; dk, dv are summed over the query
 * heads of a group and overwritten; a NULL gradient pointer is skipped.
 * Workspace: ork_cuda_attn_ws bytes (backward: F32 rowsum(dy∘y)).
 * [stream-ordered]. */
#ifndef ORK_CUDA_ATTN_H
#define ORK_CUDA_ATTN_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_cuda_attn_args {
    int64_t B, H, Hkv, Lq, Lk, D;
    float scale; /* 0: 1/sqrt(D) */
    int causal;
    const uint8_t *kmask;
} ork_cuda_attn_args;

size_t ork_cuda_attn_ws(const ork_cuda_attn_args *a, int backward);
ork_status ork_cuda_attn_fwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v,
                             void *y, float *lse, void *stream);
ork_status ork_cuda_attn_bwd(const ork_cuda_attn_args *a, const void *q, const void *k, const void *v,
                             const void *y, const float *lse, const void *dy, void *dq, void *dk,
                             void *dv, void *ws, void *stream);

#ifdef __cplusplus
}
#endif
#endif
