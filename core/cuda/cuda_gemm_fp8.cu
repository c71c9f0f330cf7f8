/* cuda/cuda_gemm_fp8.cu — the native FP8 forward GEMM of a quantized linear (see
 * cuda_gemm_fp8.h): the per-row E4M3 quantizer of the bf16 activations and the
 * cuBLASLt FP8 matmul with outer-vector (per-channel x per-token) scales.
 * Owns: the context's FP8 descriptor cache (struct ork_fp8_cache, allocated on
 * first use, freed by ork_cuda_fp8_cache_free from ork_cuda_ctx_destroy). */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_gemm_fp8.h"

#include <cuda_fp8.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Outer-vector FP8 scales arrived in cuBLASLt 12.9 (CUBLAS_VERSION 120900). */
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120900
#define ORK_FP8_OUTER_VEC 1
#else
#define ORK_FP8_OUTER_VEC 0
#endif

#define ORK_FP8_CACHE 64

typedef struct ork_fp8_key {
    int64_t M, N, K;
    int32_t wdt, bias, fast_accum, pad;
} ork_fp8_key;

typedef struct ork_fp8_entry {
    int used, ok;           /* ok 0: cuBLASLt has no algorithm (answer cached) */
    ork_fp8_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int status;             /* the heuristic's cublasStatus_t when !ok */
} ork_fp8_entry;

struct ork_fp8_cache {
    int next;
    ork_fp8_entry e[ORK_FP8_CACHE];
};

static void entry_release(ork_fp8_entry *e) {
    if (e->op) cublasLtMatmulDescDestroy(e->op);
    if (e->la) cublasLtMatrixLayoutDestroy(e->la);
    if (e->lb) cublasLtMatrixLayoutDestroy(e->lb);
    if (e->lc) cublasLtMatrixLayoutDestroy(e->lc);
    memset(e, 0, sizeof *e);
}

extern "C" void ork_cuda_fp8_cache_free(ork_cuda_ctx *c) {
    if (!c || !c->fp8) return;
    for (int i = 0; i < ORK_FP8_CACHE; i++)
        if (c->fp8->e[i].used) entry_release(&c->fp8->e[i]);
    free(c->fp8);
    c->fp8 = NULL;
}

static ork_status unsupported(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ork_status unsupported(char *why, size_t n, const char *fmt, ...) {
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return ORK_E_UNSUPPORTED;
}

static size_t ws_xq_bytes(int64_t M, int64_t K) { return ((size_t)(M * K) + 255) & ~(size_t)255; }

extern "C" size_t ork_cuda_fp8_linear_ws(int64_t M, int64_t K) {
    if (M <= 0 || K <= 0) return 256;
    return ws_xq_bytes(M, K) + (((size_t)M * sizeof(float) + 255) & ~(size_t)255);
}

extern "C" ork_status ork_cuda_fp8_native_ok(const ork_cuda_ctx *c, char *why, size_t why_n) {
#if !ORK_FP8_OUTER_VEC
    (void)c;
    return unsupported(why, why_n, "built against cuBLASLt %d, which has no per-channel (outer-vector) FP8 scales "
                       "(needs 12.9+)", (int)CUBLAS_VERSION);
#else
    if (c->cc < 90)
        return unsupported(why, why_n, "this GPU is sm_%d; cuBLASLt's per-channel (outer-vector) FP8 scales need "
                           "sm_90 (Hopper) or newer (sm_89 has FP8 GEMMs with one scale per tensor only)", c->cc);
    size_t v = cublasLtGetVersion();
    if (v < 120900)
        return unsupported(why, why_n, "the loaded cuBLASLt is %zu; per-channel (outer-vector) FP8 scales need 12.9+", v);
    return ORK_OK;
#endif
}

/* ---- activations: bf16 rows -> E4M3 + one F32 scale per row ------------------------------ */

#define QR_THREADS 256

__device__ __forceinline__ uint32_t bmax_abs(uint32_t m, uint32_t two) { /* two bf16 in one word */
    uint32_t a = two & 0x7FFFu, b = (two >> 16) & 0x7FFFu;
    m = a > m ? a : m;
    return b > m ? b : m;
}

__device__ __forceinline__ uint8_t q_e4m3(uint16_t h, float s) {
    float v = __uint_as_float((uint32_t)h << 16);
    return (uint8_t)__nv_cvt_float_to_fp8(__fdiv_rn(v, s), __NV_SATFINITE, __NV_E4M3);
}

/* One block per row m: pass 1 finds max |x| (as bf16 magnitude bits: finite
 * values order like their bits), pass 2 divides by the scale and rounds, as
 * numerics/quantize.c does (IEEE division, then cvt.rn.satfinite). VEC: 8
 * elements per load (K % 8 == 0, 16-byte aligned x, 8-byte aligned xq). */
template <int VEC>
__global__ void __launch_bounds__(QR_THREADS) quant_rows_kernel(const uint16_t *__restrict__ x, uint8_t *__restrict__ xq,
                                                                 float *__restrict__ sx, int64_t K) {
    __shared__ uint32_t red[QR_THREADS / 32];
    __shared__ float s_sh;
    const int64_t m = blockIdx.x;
    const uint16_t *row = x + m * K;
    uint8_t *qrow = xq + m * K;
    uint32_t mb = 0;
    if (VEC) {
        const uint4 *r4 = (const uint4 *)row;
        for (int64_t i = threadIdx.x; i < K / 8; i += QR_THREADS) {
            uint4 v = r4[i];
            mb = bmax_abs(mb, v.x); mb = bmax_abs(mb, v.y); mb = bmax_abs(mb, v.z); mb = bmax_abs(mb, v.w);
        }
    } else {
        for (int64_t i = threadIdx.x; i < K; i += QR_THREADS) {
            uint32_t a = row[i] & 0x7FFFu;
            mb = a > mb ? a : mb;
        }
    }
    for (int o = 16; o; o >>= 1) {
        uint32_t t = __shfl_xor_sync(0xFFFFFFFFu, mb, o);
        mb = t > mb ? t : mb;
    }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mb;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t t = 0;
        for (int w = 0; w < QR_THREADS / 32; w++) t = red[w] > t ? red[w] : t;
        float amax = __uint_as_float(t << 16);
        float s = amax > 0.0f ? __fdiv_rn(amax, 448.0f) : 1.0f;
        if (s < FLT_MIN) s = FLT_MIN;
        s_sh = s;
        sx[m] = s;
    }
    __syncthreads();
    const float s = s_sh;
    if (VEC) {
        const uint4 *r4 = (const uint4 *)row;
        uint2 *q8 = (uint2 *)qrow;
        for (int64_t i = threadIdx.x; i < K / 8; i += QR_THREADS) {
            uint4 v = r4[i];
            uint32_t w[4] = {v.x, v.y, v.z, v.w}, lo = 0, hi = 0;
            for (int j = 0; j < 2; j++) {
                lo |= (uint32_t)q_e4m3((uint16_t)(w[j] & 0xFFFFu), s) << (16 * j);
                lo |= (uint32_t)q_e4m3((uint16_t)(w[j] >> 16), s) << (16 * j + 8);
                hi |= (uint32_t)q_e4m3((uint16_t)(w[j + 2] & 0xFFFFu), s) << (16 * j);
                hi |= (uint32_t)q_e4m3((uint16_t)(w[j + 2] >> 16), s) << (16 * j + 8);
            }
            q8[i] = make_uint2(lo, hi);
        }
    } else {
        for (int64_t i = threadIdx.x; i < K; i += QR_THREADS) qrow[i] = q_e4m3(row[i], s);
    }
}

extern "C" ork_status ork_cuda_fp8_quant_rows(void *stream, int64_t M, int64_t K, const void *x, uint8_t *xq, float *sx) {
    if (M <= 0 || K <= 0) return ORK_OK;
    if (M > 0x7FFFFFFF) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda fp8 quant rows: M = %lld rows", (long long)M);
    int vec = K % 8 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)xq % 8 == 0;
    if (vec)
        quant_rows_kernel<1><<<(unsigned)M, QR_THREADS, 0, ork_stream(stream)>>>((const uint16_t *)x, xq, sx, K);
    else
        quant_rows_kernel<0><<<(unsigned)M, QR_THREADS, 0, ork_stream(stream)>>>((const uint16_t *)x, xq, sx, K);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

/* ---- the GEMM -------------------------------------------------------------------------- */

#if ORK_FP8_OUTER_VEC
/* Descriptors and the heuristic's answer for k; the scale and bias pointers of
 * the first call are set before asking (each call sets its own again). Every
 * operand is at least 16-byte aligned by contract. */
static ork_status build_entry(ork_cuda_ctx *c, const ork_fp8_key *k, const float *sw, const float *sx, const void *bias,
                              ork_fp8_entry *e) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    e->used = 1;
    cublasOperation_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
    int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    int8_t fa = k->fast_accum ? 1 : 0;
    cudaDataType_t wt = k->wdt == ORK_F8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    ORK_CUBLAS_TRY(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sw, sizeof sw));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx));
    if (k->bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_16BF;
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    /* A = wq: K x N column-major (row-major (N, K)), op T -> (N, K); B = xq: K x M, op N; D = yᵀ: N x M */
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->la, wt, (uint64_t)k->K, (uint64_t)k->N, k->K));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_8F_E4M3, (uint64_t)k->K, (uint64_t)k->M, k->K));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lc, CUDA_R_16BF, (uint64_t)k->N, (uint64_t)k->M, k->N));
    int found = 0;
    cublasStatus_t st = ork_lt_pick_algo(c, e->op, e->la, e->lb, e->lc, 16, &e->algo, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
        e->ok = 1;
    } else {
        e->status = (int)st;
    }
    return ORK_OK;
}
#endif

extern "C" ork_status ork_cuda_fp8_linear(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a) {
    ORK_TRY(ork_cuda_fp8_native_ok(c, a->why, a->why_n));
#if ORK_FP8_OUTER_VEC
    if (a->M <= 0 || a->N <= 0) return ORK_OK;
    if (a->K <= 0) return ORK_FAIL(ORK_E_INVALID, "cuda fp8 linear: K = %lld", (long long)a->K);
    if (a->wdt != ORK_F8_E4M3 && a->wdt != ORK_F8_E5M2)
        return unsupported(a->why, a->why_n, "weight dtype %d is not fp8 E4M3/E5M2", (int)a->wdt);
    if (a->K % 16 || a->N % 16)
        return unsupported(a->why, a->why_n, "K = %lld and N = %lld must be multiples of 16 for cuBLASLt FP8",
                           (long long)a->K, (long long)a->N);
    const void *ptrs[] = {a->x, a->w, a->w_scale, a->y, a->ws, a->bias};
    for (int i = 0; i < 6; i++)
        if ((uintptr_t)ptrs[i] % 16)
            return unsupported(a->why, a->why_n, "operand %d is not 16-byte aligned", i);
    if (!a->x || !a->w || !a->w_scale || !a->y || !a->ws)
        return ORK_FAIL(ORK_E_INVALID, "cuda fp8 linear: NULL operand");
    ork_fp8_key k;
    memset(&k, 0, sizeof k);
    k.M = a->M; k.N = a->N; k.K = a->K;
    k.wdt = (int32_t)a->wdt; k.bias = a->bias != NULL; k.fast_accum = a->fast_accum != 0;
    if (!c->fp8) {
        c->fp8 = (struct ork_fp8_cache *)calloc(1, sizeof *c->fp8);
        if (!c->fp8) return ORK_FAIL(ORK_E_NOMEM, "cuda fp8 linear: descriptor cache");
    }
    ork_fp8_entry *e = NULL;
    for (int i = 0; i < ORK_FP8_CACHE; i++)
        if (c->fp8->e[i].used && !memcmp(&c->fp8->e[i].key, &k, sizeof k)) { e = &c->fp8->e[i]; break; }
    uint8_t *xq = (uint8_t *)a->ws;
    float *sx = (float *)((char *)a->ws + ws_xq_bytes(a->M, a->K));
    if (!e) {
        e = &c->fp8->e[c->fp8->next];
        c->fp8->next = (c->fp8->next + 1) % ORK_FP8_CACHE;
        if (e->used) entry_release(e);
        ork_status s = build_entry(c, &k, a->w_scale, sx, a->bias, e);
        if (s != ORK_OK) { entry_release(e); return s; }
    }
    if (!e->ok)
        return unsupported(a->why, a->why_n, "cuBLASLt has no FP8 algorithm for M=%lld N=%lld K=%lld %s weights%s "
                           "(status %d)", (long long)a->M, (long long)a->N, (long long)a->K,
                           a->wdt == ORK_F8_E5M2 ? "E5M2" : "E4M3", a->bias ? " with bias" : "", e->status);
    ORK_TRY(ork_cuda_fp8_quant_rows(stream, a->M, a->K, a->x, xq, sx));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a->w_scale,
                                                  sizeof a->w_scale));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sx, sizeof sx));
    if (a->bias)
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a->bias,
                                                      sizeof a->bias));
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = cublasLtMatmul(c->lt, e->op, &alpha, a->w, e->la, xq, e->lb, &beta, a->y, e->lc, a->y, e->lc,
                                       &e->algo, c->ws, c->ws_size, ork_stream(stream));
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
        /* refused at run time (scale modes are checked here, not by the heuristic): remember it */
        e->ok = 0;
        e->status = (int)st;
        return unsupported(a->why, a->why_n, "cuBLASLt refused the FP8 matmul M=%lld N=%lld K=%lld (status %d)",
                           (long long)a->M, (long long)a->N, (long long)a->K, (int)st);
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cuda fp8 linear: cublasLtMatmul M=%lld N=%lld K=%lld: cublas status %d",
                        (long long)a->M, (long long)a->N, (long long)a->K, (int)st);
    return ORK_OK;
#else
    (void)stream;
    return ORK_E_UNSUPPORTED;
#endif
}
