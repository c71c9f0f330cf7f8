/* cuda/cuda_util.cuh — internal to core/cuda: the context struct, error macros and
 * small device helpers shared by the .cu files. Not a public header. */
#ifndef ORK_CUDA_UTIL_CUH
#define ORK_CUDA_UTIL_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <stdint.h>

extern "C" {
#include "util/log.h"
#include <orakul/dtype.h>
}
#include "cuda/cuda_ctx.h"

/* Run a CUDA runtime call; on failure log file:line and the call, return ORK_E_CUDA. */
#define ORK_CUDA_TRY(expr) do { cudaError_t ork_ce_ = (expr); if (ork_ce_ != cudaSuccess) \
    return ork_fail(ORK_E_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #expr, cudaGetErrorString(ork_ce_)); } while (0)
/* After a kernel launch: launch-configuration errors only (never syncs). */
#define ORK_CUDA_LAUNCHED() ORK_CUDA_TRY(cudaGetLastError())
#define ORK_CUBLAS_TRY(expr) do { cublasStatus_t ork_bs_ = (expr); if (ork_bs_ != CUBLAS_STATUS_SUCCESS) \
    return ork_fail(ORK_E_CUDA, "%s:%d: %s: cublas status %d", __FILE__, __LINE__, #expr, (int)ork_bs_); } while (0)

/* cuBLASLt's best algorithm for op over (la, lb, lc -> lc) within the context's
 * workspace, every operand aligned to `align` bytes (defined in cuda_gemm.cu; the
 * bf16/f32 and the FP8 GEMM caches both pick through it). *found = 0: none. */
cublasStatus_t ork_lt_pick_algo(ork_cuda_ctx *c, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, uint32_t align,
                                cublasLtMatmulAlgo_t *algo, int *found);

#define ORK_GEMM_CACHE 128

typedef struct ork_gemm_key {
    int32_t ta, tb, adt, bdt, cdt, bias_dt, beta_nz, align;
    int64_t M, N, K, batch, lda, ldb, ldc, sa, sb, sc;
} ork_gemm_key;

typedef struct ork_gemm_entry {
    int used;
    ork_gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} ork_gemm_entry;

struct ork_cuda_ctx {
    int device, sm_count, cc;
    cudaStream_t stream; /* the graph's default stream (non-blocking) when k->stream is NULL */
    cublasLtHandle_t lt;
    void *ws;           /* cuBLASLt workspace */
    size_t ws_size;
    float *scratch;     /* partial sums for deterministic reductions */
    size_t scratch_n;   /* floats */
    int gemm_next;      /* round-robin eviction */
    ork_gemm_entry gemm[ORK_GEMM_CACHE];
    struct ork_fp8_cache *fp8; /* FP8 GEMM descriptors (cuda_gemm_fp8.cu), NULL until first used */
};

static inline cudaStream_t ork_stream(void *s) { return (cudaStream_t)s; }

static inline int64_t ork_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Load/store an element of dtype dt as float (F32, BF16, F16). */
__device__ __forceinline__ float ork_ld(const void *p, int64_t i, int dt) {
    if (dt == ORK_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dt == ORK_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}
__device__ __forceinline__ void ork_st(void *p, int64_t i, float v, int dt) {
    if (dt == ORK_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else if (dt == ORK_F16) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

#endif
