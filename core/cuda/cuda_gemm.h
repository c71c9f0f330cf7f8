/* cuda/cuda_gemm.h — GEMM through cuBLASLt with row-major semantics (C interface).
 *
 *   C[b] (M, N) = alpha · op(A[b]) · op(B[b]) (+ bias (N)) + beta · C[b],  b < batch
 *   op(A) (M, K): A stored (M, K), row stride lda, or (K, M) when ta.
 *   op(B) (K, N): B stored (K, N), row stride ldb, or (N, K) when tb.
 *   stride_*: elements between batch matrices (0: the same matrix for every b).
 *
 * The three linear layouts, with x (M, K), w (N, K), y/dy (M, N):
 *   forward  y  = x · wᵀ      ta=0 tb=1   (cuBLASLt "TN")
 *   dgrad    dx = dy · w      ta=0 tb=0
 *   wgrad    dw = dyᵀ · x     ta=1 tb=0   (beta=1 accumulates into an F32 grad)
 * Types: BF16·BF16 or F32·F32 (F32 accumulate); C is BF16 or F32.
 * [stream-ordered]: enqueues on `stream`, never syncs. Descriptors and the
 * heuristic's algorithm are cached per shape in the context. */
#ifndef ORK_CUDA_GEMM_H
#define ORK_CUDA_GEMM_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include "cuda/cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_cuda_gemm_args {
    int ta, tb;
    int64_t M, N, K, batch; /* batch 0 is read as 1 */
    float alpha, beta;
    const void *A; ork_dtype adt; int64_t lda, stride_a;
    const void *B; ork_dtype bdt; int64_t ldb, stride_b;
    void *C;       ork_dtype cdt; int64_t ldc, stride_c;
    const void *bias; ork_dtype bias_dt; /* (N) per output column, or NULL; batch 1 only */
} ork_cuda_gemm_args;

ork_status ork_cuda_gemm(ork_cuda_ctx *c, void *stream, const ork_cuda_gemm_args *g);

#ifdef __cplusplus
}
#endif
#endif
