/* cuda/cuda_gemm_fp8.h — the Hopper native FP8 forward GEMM of a quantized linear
 * layer (issue #6, path (b); C interface).
 *
 *   y (M, N) BF16 = (xq · sx) · (wq · sw)ᵀ  (+ bias (N) BF16)
 *
 * x (M, K) BF16 activations are quantized per row (token) to E4M3 with the
 * weights' scheme (NUMERICS.md §2): sx[m] = max_k |x[m, k]| / 448 (1 for an
 * all-zero row, never below FLT_MIN), xq[m, k] = cvt.rn.satfinite(x / sx[m]),
 * bit-equal to ork_quantize_fp8 of the same row. A NaN/Inf in a row makes that
 * row of y NaN (nothing is refused: the loss shows it).
 * wq (N, K) is the quant plugin's fp8 weight (E4M3 or E5M2) with one F32 scale
 * per output row sw (N) (block_size 0). cuBLASLt FP8 "TN" GEMM with outer-vector
 * scales (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, sm_90+, cuBLASLt 12.9+):
 * cuBLASLt's A = wq (K x N column-major, op T; scale vector sw, length N = its
 * m), B = xq (K x M, op N; scale vector sx, length M = its n), D = yᵀ (N x M,
 * ld N). E5M2 weights always meet E4M3 activations (cuBLASLt has no E5M2·E5M2).
 * The bias is the BIAS epilogue. Only the forward uses this; dx = dy · w stays
 * on the dequantized bf16 weight (path (a)).
 *
 * Needs: K and N multiples of 16, every pointer 16-byte aligned. Where the device
 * (below sm_90), the build (cuBLASLt headers older than 12.9), the shape or
 * cuBLASLt's heuristic cannot, ork_cuda_fp8_linear returns ORK_E_UNSUPPORTED
 * WITHOUT logging and says why in args->why: the caller falls back to path (a).
 * Descriptors and the heuristic's answer (found or not) are cached per shape in
 * the context. [stream-ordered]: enqueues on `stream`, never syncs. */
#ifndef ORK_CUDA_GEMM_FP8_H
#define ORK_CUDA_GEMM_FP8_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <stddef.h>
#include <stdint.h>
#include "cuda/cuda_ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_cuda_fp8_linear_args {
    int64_t M, N, K;
    const void *x;                       /* (M, K) BF16 */
    const void *w; ork_dtype wdt;        /* (N, K) F8_E4M3 or F8_E5M2 */
    const float *w_scale;                /* (N) F32 */
    const void *bias;                    /* (N) BF16, or NULL */
    void *y;                             /* (M, N) BF16 (overwritten) */
    void *ws;                            /* scratch of ork_cuda_fp8_linear_ws(M, K) bytes, 256-byte aligned */
    int fast_accum;                      /* cuBLASLt FP8 fast accumulation (TransformerEngine's forward choice) */
    char *why; size_t why_n;             /* on ORK_E_UNSUPPORTED: why not (may be NULL) */
} ork_cuda_fp8_linear_args;

/* Scratch bytes for x (M, K): xq (M, K) E4M3, then sx F32 (M) at a 256-byte boundary. */
size_t ork_cuda_fp8_linear_ws(int64_t M, int64_t K);

/* ORK_OK when this device and build have the native path at all; otherwise
 * ORK_E_UNSUPPORTED (nothing logged) and the reason in why. */
ork_status ork_cuda_fp8_native_ok(const ork_cuda_ctx *c, char *why, size_t why_n);

/* xq (M, K) E4M3 and sx F32 (M) from x (M, K) BF16, per row as above. */
ork_status ork_cuda_fp8_quant_rows(void *stream, int64_t M, int64_t K, const void *x, uint8_t *xq, float *sx);

ork_status ork_cuda_fp8_linear(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a);

/* The context's FP8 descriptor cache (cuda_ctx.cu calls it on destroy). */
void ork_cuda_fp8_cache_free(ork_cuda_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
