/* cuda/cuda_gemm_fp8.h — the native FP8 GEMMs of a quantized linear layer
 * (issue #6 path (b), issue #31; C interface): the forward and the input gradient.
 *
 *   forward  y  (M, N) BF16 = (xq · sx) · (wq · sw)ᵀ  (+ bias (N) BF16)
 *   dgrad    dx (M, K) BF16 = dy (M, N) · (wq · sw)   (N x K, sw along N)
 *
 * x (M, K) BF16 activations are quantized per row (token) to E4M3 with the
 * weights' scheme (NUMERICS.md §2): sx[m] = max_k |x[m, k]| / 448 (1 for an
 * all-zero row, never below FLT_MIN), xq[m, k] = cvt.rn.satfinite(x / sx[m]),
 * bit-equal to ork_quantize_fp8 of the same row. A NaN/Inf in a row makes that
 * row of y NaN (nothing is refused: the loss shows it).
 * wq (N, K) is the quant plugin's fp8 weight (E4M3 or E5M2) with one F32 scale
 * per output row sw (N) (block_size 0). E5M2 weights always meet E4M3
 * activations (cuBLASLt has no E5M2·E5M2).
 *
 * Forward, outer-vector scheme (sm_90+, cuBLASLt 12.9+): cuBLASLt FP8 "TN" GEMM
 * with CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F: A = wq (K x N column-major,
 * op T; scale vector sw, length N = its m), B = xq (K x M, op N; scale vector
 * sx, length M = its n), D = yᵀ (N x M, ld N); bias in the BIAS epilogue.
 *
 * Input gradient. dx[m, k] = Σ_n dy[m, n] · sw[n] · wq[n, k]: the sum runs over
 * N, the axis sw lies on, so sw cannot be an outer scale of this product. It is
 * folded into dy first, exactly (one F32 rounding of each product):
 *   u[m, n] = fl32(dy[m, n] · sw[n]),  su[m] = max_n |u[m, n]| / 448 (rules as sx),
 *   uq[m, n] = cvt.rn.satfinite(u[m, n] / su[m]) (E4M3, bit-equal to
 *   ork_quantize_fp8 of the F32 matrix u),
 *   dx[m, k] = su[m] · Σ_n uq[m, n] · wq[n, k]
 * so the only new error is u's E4M3 rounding (the same size as x's in the
 * forward); wq's bytes are used as they are. cuBLASLt FP8 is TN only, and both
 * TN operands need the contraction axis (N) contiguous: uq (M, N) has it, wq
 * (N, K) does not, so wq is byte-transposed into wT (K, N) in the scratch just
 * before the GEMM (an exact copy; the alternative, a persistent transposed copy
 * of every weight, doubles FP8 weight memory: docs/DECISIONS.md "FP8 input
 * gradient"). GEMM: A = wT (N x K column-major, op T; scale vector of K ones),
 * B = uq (N x M, op N; scale vector su), D = dxᵀ (K x M, ld K). dy NaN/Inf
 * rows give NaN dx rows as in the forward. No fast accumulation unless asked
 * (TransformerEngine's backward choice).
 *
 * Tensor-wide scheme (sm_89 Ada, or sm_90 under a cuBLASLt older than 12.9;
 * `scalar_scales` forces it anywhere, for tests): the same quantized operands,
 * the GEMM with no scale pointers (scale 1) into an F32 D in the scratch, then
 * one post kernel: y = bf16((raw · sx[m]) · sw[n] + bias[n]), dx = bf16(raw · su[m]).
 * F32 D keeps it at one bf16 rounding; it costs M·N·4 (forward) or M·K·4
 * (dgrad) scratch bytes (ork_cuda_fp8_ws).
 *
 * Needs: K and N multiples of 16, every pointer 16-byte aligned, enough
 * scratch. Where the device (below sm_89), the shape, the scratch or
 * cuBLASLt's heuristic cannot, the GEMMs return ORK_E_UNSUPPORTED WITHOUT
 * logging and say why in args->why: the caller falls back to path (a) (the
 * dequantized bf16 weight). Descriptors and the heuristic's answer (found or
 * not) are cached per shape and kind in the context. [stream-ordered]:
 * enqueues on `stream`, never syncs. */
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
    void *ws;                            /* scratch of ork_cuda_fp8_linear_ws(M, K) bytes (the outer-vector
                                          * scheme), or see ork_cuda_fp8_linear_sized; 256-byte aligned */
    int fast_accum;                      /* cuBLASLt FP8 fast accumulation (TransformerEngine's forward choice) */
    char *why; size_t why_n;             /* on ORK_E_UNSUPPORTED: why not (may be NULL) */
} ork_cuda_fp8_linear_args;

typedef struct ork_cuda_fp8_dgrad_args {
    int64_t M, N, K;
    const void *dy;                      /* (M, N) BF16 */
    const void *w; ork_dtype wdt;        /* (N, K) F8_E4M3 or F8_E5M2 */
    const float *w_scale;                /* (N) F32 */
    void *dx;                            /* (M, K) BF16 (overwritten) */
    void *ws; size_t ws_bytes;           /* ork_cuda_fp8_ws(c, 1, scalar_scales, M, N, K) bytes, 256-byte aligned */
    int fast_accum;                      /* 0: TransformerEngine's backward choice */
    int scalar_scales;                   /* 1: the tensor-wide scheme even where outer vectors exist */
    char *why; size_t why_n;             /* on ORK_E_UNSUPPORTED: why not (may be NULL) */
} ork_cuda_fp8_dgrad_args;

/* Scratch bytes of the outer-vector forward for x (M, K): xq (M, K) E4M3, then
 * sx F32 (M) at a 256-byte boundary. */
size_t ork_cuda_fp8_linear_ws(int64_t M, int64_t K);

/* Scratch bytes of the forward (dgrad 0) or the input gradient (dgrad 1) on
 * this device, with the tensor-wide scheme when `scalar` or when the device has
 * no outer-vector scales. Dgrad: wT (K, N) | uq (M, N) | su (M) F32 | ones (K)
 * F32 | [raw (M, K) F32], each at a 256-byte boundary. */
size_t ork_cuda_fp8_ws(const ork_cuda_ctx *c, int dgrad, int scalar, int64_t M, int64_t N, int64_t K);

/* ORK_OK when this device and build have a native path at all (sm_89+);
 * otherwise ORK_E_UNSUPPORTED (nothing logged) and the reason in why. */
ork_status ork_cuda_fp8_native_ok(const ork_cuda_ctx *c, char *why, size_t why_n);

/* 2: outer-vector scales; 1: the tensor-wide scheme; 0: no FP8 GEMM here. */
int ork_cuda_fp8_scheme(const ork_cuda_ctx *c);

/* xq (M, K) E4M3 and sx F32 (M) from x (M, K) BF16, per row as above. */
ork_status ork_cuda_fp8_quant_rows(void *stream, int64_t M, int64_t K, const void *x, uint8_t *xq, float *sx);

/* uq (M, N) E4M3 and su F32 (M) from u = dy (M, N) BF16 · diag(cs (N) F32), per row as above. */
ork_status ork_cuda_fp8_quant_rows_cs(void *stream, int64_t M, int64_t N, const void *dy, const float *cs, uint8_t *uq,
                                      float *su);

/* out (C, R) = in (R, C)ᵀ, bytes; R, C multiples of 4, pointers 4-byte aligned. */
ork_status ork_cuda_fp8_transpose(void *stream, int64_t R, int64_t C, const void *in, void *out);

/* The forward with ork_cuda_fp8_linear_ws(M, K) bytes at a->ws: enough for the
 * outer-vector scheme only (elsewhere ORK_E_UNSUPPORTED, "scratch"). */
ork_status ork_cuda_fp8_linear(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a);
/* The forward with ws_bytes at a->ws (ork_cuda_fp8_ws(c, 0, scalar_scales, M, N, K)
 * for this device); scalar_scales 1: the tensor-wide scheme even where outer
 * vectors exist (tests). */
ork_status ork_cuda_fp8_linear_sized(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a, size_t ws_bytes,
                                     int scalar_scales);
ork_status ork_cuda_fp8_dgrad(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_dgrad_args *a);

/* The context's FP8 descriptor cache (cuda_ctx.cu calls it on destroy). */
void ork_cuda_fp8_cache_free(ork_cuda_ctx *c);

#ifdef __cplusplus
}
#endif
#endif
