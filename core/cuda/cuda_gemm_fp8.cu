/* cuda/cuda_gemm_fp8.cu — the native FP8 GEMMs of a quantized linear (see
 * cuda_gemm_fp8.h): the forward y = x·wᵀ and the input gradient dx = dy·w. The
 * per-row E4M3 quantizers (x; dy·diag(sw)), the FP8 byte transpose of w, the
 * cuBLASLt FP8 matmuls with outer-vector (per-channel x per-token) scales or,
 * where the device has none (sm_89), tensor-wide scales and a post kernel.
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

/* kind bits: 1 = tensor-wide scales (the sm_89 scheme: F32 D, post kernel), 2 = dgrad */
enum { KIND_SCALAR = 1, KIND_DGRAD = 2 };

typedef struct ork_fp8_key {
    int64_t M, N, K;
    int32_t wdt, bias, fast_accum, kind;
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

static size_t al256(size_t b) { return (b + 255) & ~(size_t)255; }
static size_t ws_xq_bytes(int64_t M, int64_t K) { return al256((size_t)(M * K)); }

extern "C" size_t ork_cuda_fp8_linear_ws(int64_t M, int64_t K) {
    if (M <= 0 || K <= 0) return 256;
    return ws_xq_bytes(M, K) + al256((size_t)M * sizeof(float));
}

/* 2: outer-vector scales (sm_90+, cuBLASLt 12.9+ built and loaded); 1: tensor-wide
 * scales only (sm_89, or sm_90 under an older cuBLASLt); 0: no FP8 GEMM (why set). */
static int fp8_mode(const ork_cuda_ctx *c, char *why, size_t why_n) {
    if (c->cc < 89) {
        unsupported(why, why_n, "this GPU is sm_%d; cuBLASLt's FP8 GEMMs need sm_89 (Ada) or newer", c->cc);
        return 0;
    }
#if ORK_FP8_OUTER_VEC
    if (c->cc >= 90 && cublasLtGetVersion() >= 120900) return 2;
#endif
    return 1;
}

extern "C" int ork_cuda_fp8_scheme(const ork_cuda_ctx *c) { return fp8_mode(c, NULL, 0); }

extern "C" ork_status ork_cuda_fp8_native_ok(const ork_cuda_ctx *c, char *why, size_t why_n) {
    return fp8_mode(c, why, why_n) ? ORK_OK : ORK_E_UNSUPPORTED;
}

/* dgrad scratch, in order: wT (K, N) E4M3/E5M2 | uq (M, N) E4M3 | su (M) F32 | ones (K) F32 |
 * [tensor-wide scheme: raw (M, K) F32]. Forward: xq | sx | [raw (M, N) F32]. */
extern "C" size_t ork_cuda_fp8_ws(const ork_cuda_ctx *c, int dgrad, int scalar, int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return 256;
    int sc = scalar || fp8_mode(c, NULL, 0) == 1;
    if (!dgrad) return ork_cuda_fp8_linear_ws(M, K) + (sc ? al256((size_t)(M * N) * 4) : 0);
    return al256((size_t)(N * K)) + al256((size_t)(M * N)) + al256((size_t)M * 4) + al256((size_t)K * 4) +
           (sc ? al256((size_t)(M * K) * 4) : 0);
}

/* ---- activations: bf16 rows -> E4M3 + one F32 scale per row ------------------------------ */

#define QR_THREADS 256

/* The row's scale from its largest magnitude given as F32 bits: finite values
 * order like their bits and NaN above Inf. An all-zero row: 1. A NaN row: 1 too
 * (NaN > 0 is false), and its NaN codes carry the NaN through the GEMM; an Inf
 * row: Inf, every code NaN or 0, so its output row is NaN. */
__device__ __forceinline__ float row_scale(uint32_t fbits) {
    float amax = __uint_as_float(fbits);
    float s = amax > 0.0f ? __fdiv_rn(amax, 448.0f) : 1.0f;
    return s < FLT_MIN ? FLT_MIN : s;
}

__device__ __forceinline__ uint32_t block_max(uint32_t mb, uint32_t *red) {
    for (int o = 16; o; o >>= 1) {
        uint32_t t = __shfl_xor_sync(0xFFFFFFFFu, mb, o);
        mb = t > mb ? t : mb;
    }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mb;
    __syncthreads();
    uint32_t t = 0;
    for (int w = 0; w < QR_THREADS / 32; w++) t = red[w] > t ? red[w] : t;
    return t;
}

/* Element k of a row as the quantizer sees it: the bf16 value, times cs[k] in
 * F32 (one rounding) when CS. */
template <int CS>
__device__ __forceinline__ float qval(uint16_t h, const float *__restrict__ cs, int64_t k) {
    float v = __uint_as_float((uint32_t)h << 16);
    return CS ? __fmul_rn(v, cs[k]) : v;
}
__device__ __forceinline__ uint32_t max_bits(uint32_t m, float v) {
    uint32_t a = __float_as_uint(v) & 0x7FFFFFFFu;
    return a > m ? a : m;
}
__device__ __forceinline__ uint32_t q_e4m3(float v, float s) {
    return (uint32_t)__nv_cvt_float_to_fp8(__fdiv_rn(v, s), __NV_SATFINITE, __NV_E4M3);
}

/* One block per row m of x (M, K) BF16 (times diag(cs) when CS): pass 1 finds
 * the largest magnitude, pass 2 divides by the scale and rounds, as
 * numerics/quantize.c does (IEEE division, then cvt.rn.satfinite). VEC: 8
 * elements per load (K % 8 == 0, 16-byte aligned x, 8-byte aligned xq). */
template <int VEC, int CS>
__global__ void __launch_bounds__(QR_THREADS) quant_rows_kernel(const uint16_t *__restrict__ x,
                                                                 const float *__restrict__ cs,
                                                                 uint8_t *__restrict__ xq, float *__restrict__ sx,
                                                                 int64_t K) {
    __shared__ uint32_t red[QR_THREADS / 32];
    const int64_t m = blockIdx.x;
    const uint16_t *row = x + m * K;
    uint8_t *qrow = xq + m * K;
    uint32_t mb = 0;
    if (VEC) {
        const uint4 *r4 = (const uint4 *)row;
        for (int64_t i = threadIdx.x; i < K / 8; i += QR_THREADS) {
            uint4 v = r4[i];
            uint32_t w[4] = {v.x, v.y, v.z, v.w};
            for (int j = 0; j < 4; j++) {
                mb = max_bits(mb, qval<CS>((uint16_t)(w[j] & 0xFFFFu), cs, 8 * i + 2 * j));
                mb = max_bits(mb, qval<CS>((uint16_t)(w[j] >> 16), cs, 8 * i + 2 * j + 1));
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < K; i += QR_THREADS) mb = max_bits(mb, qval<CS>(row[i], cs, i));
    }
    const float s = row_scale(block_max(mb, red));
    if (threadIdx.x == 0) sx[m] = s;
    if (VEC) {
        const uint4 *r4 = (const uint4 *)row;
        uint2 *q8 = (uint2 *)qrow;
        for (int64_t i = threadIdx.x; i < K / 8; i += QR_THREADS) {
            uint4 v = r4[i];
            uint32_t w[4] = {v.x, v.y, v.z, v.w}, q[2] = {0, 0};
            for (int j = 0; j < 4; j++) {
                q[j >> 1] |= q_e4m3(qval<CS>((uint16_t)(w[j] & 0xFFFFu), cs, 8 * i + 2 * j), s) << (16 * (j & 1));
                q[j >> 1] |= q_e4m3(qval<CS>((uint16_t)(w[j] >> 16), cs, 8 * i + 2 * j + 1), s) << (16 * (j & 1) + 8);
            }
            q8[i] = make_uint2(q[0], q[1]);
        }
    } else {
        for (int64_t i = threadIdx.x; i < K; i += QR_THREADS) qrow[i] = (uint8_t)q_e4m3(qval<CS>(row[i], cs, i), s);
    }
}

static ork_status quant_rows(void *stream, int64_t M, int64_t K, const void *x, const float *cs, uint8_t *xq,
                             float *sx) {
    if (M <= 0 || K <= 0) return ORK_OK;
    if (M > 0x7FFFFFFF) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda fp8 quant rows: M = %lld rows", (long long)M);
    int vec = K % 8 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)xq % 8 == 0;
    const uint16_t *xh = (const uint16_t *)x;
    cudaStream_t st = ork_stream(stream);
    if (vec && cs) quant_rows_kernel<1, 1><<<(unsigned)M, QR_THREADS, 0, st>>>(xh, cs, xq, sx, K);
    else if (vec) quant_rows_kernel<1, 0><<<(unsigned)M, QR_THREADS, 0, st>>>(xh, cs, xq, sx, K);
    else if (cs) quant_rows_kernel<0, 1><<<(unsigned)M, QR_THREADS, 0, st>>>(xh, cs, xq, sx, K);
    else quant_rows_kernel<0, 0><<<(unsigned)M, QR_THREADS, 0, st>>>(xh, cs, xq, sx, K);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

extern "C" ork_status ork_cuda_fp8_quant_rows(void *stream, int64_t M, int64_t K, const void *x, uint8_t *xq, float *sx) {
    return quant_rows(stream, M, K, x, NULL, xq, sx);
}

extern "C" ork_status ork_cuda_fp8_quant_rows_cs(void *stream, int64_t M, int64_t N, const void *dy, const float *cs,
                                                 uint8_t *q, float *s) {
    return quant_rows(stream, M, N, dy, cs, q, s);
}

/* ---- the FP8 byte transpose: out (C, R) = in (R, C)ᵀ ------------------------------------ */

#define TT 64
/* 64 x 64 byte tiles, 16 x 16 threads, 4 bytes per access (R, C multiples of 4,
 * both pointers 4-byte aligned). */
__global__ void __launch_bounds__(256) transpose_u8_kernel(const uint8_t *__restrict__ in, uint8_t *__restrict__ out,
                                                           int64_t R, int64_t C) {
    __shared__ uint32_t t[TT][TT / 4 + 1]; /* t[r][c/4]: 4 bytes of row r */
    const int64_t r0 = (int64_t)blockIdx.y * TT, c0 = (int64_t)blockIdx.x * TT;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int i = 0; i < 4; i++) {
        int r = ty + 16 * i;
        int64_t gr = r0 + r, gc = c0 + 4 * tx;
        if (gr < R && gc < C) t[r][tx] = *(const uint32_t *)(in + gr * C + gc);
    }
    __syncthreads();
    for (int i = 0; i < 4; i++) {
        int cc = ty + 16 * i; /* output row c0 + cc, output columns r0 + 4·tx .. + 3 */
        int64_t go = c0 + cc, gcol = r0 + 4 * tx;
        if (go < C && gcol < R) {
            int sh = 8 * (cc & 3), w = cc >> 2;
            uint32_t v = ((t[4 * tx][w] >> sh) & 0xFFu) | (((t[4 * tx + 1][w] >> sh) & 0xFFu) << 8) |
                         (((t[4 * tx + 2][w] >> sh) & 0xFFu) << 16) | (((t[4 * tx + 3][w] >> sh) & 0xFFu) << 24);
            *(uint32_t *)(out + go * R + gcol) = v;
        }
    }
}

extern "C" ork_status ork_cuda_fp8_transpose(void *stream, int64_t R, int64_t C, const void *in, void *out) {
    if (R <= 0 || C <= 0) return ORK_OK;
    if (R % 4 || C % 4 || (uintptr_t)in % 4 || (uintptr_t)out % 4 || ork_cdiv(R, TT) > 65535 ||
        ork_cdiv(C, TT) > 0x7FFFFFFF)
        return ORK_FAIL(ORK_E_INVALID, "cuda fp8 transpose: %lld x %lld needs multiples of 4, 4-byte aligned",
                        (long long)R, (long long)C);
    dim3 grid((unsigned)ork_cdiv(C, TT), (unsigned)ork_cdiv(R, TT)), block(16, 16);
    transpose_u8_kernel<<<grid, block, 0, ork_stream(stream)>>>((const uint8_t *)in, (uint8_t *)out, R, C);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

/* ---- small kernels of the schemes ------------------------------------------------------- */

__global__ void fill_ones_kernel(float *p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = 1.0f;
}

/* The tensor-wide scheme's epilogue: y (M, C) BF16 = bf16((raw · rs[m]) · cs[c] + bias[c]),
 * raw (M, C) F32 from the GEMM; cs, bias may be NULL. 4 elements per thread (C % 4 == 0). */
__global__ void post_scale_kernel(const float4 *__restrict__ raw, const float *__restrict__ rs,
                                  const float *__restrict__ cs, const __nv_bfloat16 *__restrict__ bias,
                                  uint2 *__restrict__ y, int64_t M, int64_t C) {
    const int64_t n4 = M * C / 4;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t m = (4 * i) / C, c = (4 * i) % C;
        float4 v = raw[i];
        float o[4] = {v.x, v.y, v.z, v.w};
        const float r = rs[m];
        uint32_t h[4];
        for (int j = 0; j < 4; j++) {
            float t = __fmul_rn(o[j], r);
            if (cs) t = __fmul_rn(t, cs[c + j]);
            if (bias) t = __fadd_rn(t, __bfloat162float(bias[c + j]));
            h[j] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(t));
        }
        y[i] = make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
    }
}

static unsigned grid_for(int64_t n, int threads) {
    int64_t g = ork_cdiv(n, threads);
    return (unsigned)(g < 1 ? 1 : g > 65535 * 8 ? 65535 * 8 : g);
}

/* ---- the GEMM -------------------------------------------------------------------------- */

/* Descriptors and the heuristic's answer for k. cuBLASLt terms (column-major):
 * D (m x n) = op(A)ᵀ-layout: A is kk x m (op T), B is kk x n (op N), D m x n, ld m.
 * Forward: m = N, n = M, kk = K (A = w, B = xq). Dgrad: m = K, n = M, kk = N
 * (A = wT (K, N) row-major, B = uq (M, N) row-major, D = dx (M, K) row-major).
 * Outer-vector scheme: the scale and bias pointers of the first call are set
 * before asking (each call sets its own again); tensor-wide scheme: no scale
 * pointers (1), D F32, no epilogue. Every operand at least 16-byte aligned. */
static ork_status build_entry(ork_cuda_ctx *c, const ork_fp8_key *k, const float *sa, const float *sb,
                              const void *bias, ork_fp8_entry *e) {
    memset(e, 0, sizeof *e);
    e->key = *k;
    e->used = 1;
    const int dg = (k->kind & KIND_DGRAD) != 0, sc = (k->kind & KIND_SCALAR) != 0;
    const int64_t m = dg ? k->K : k->N, n = k->M, kk = dg ? k->N : k->K;
    cublasOperation_t opa = CUBLAS_OP_T, opb = CUBLAS_OP_N;
    int8_t fa = k->fast_accum ? 1 : 0;
    cudaDataType_t wt = k->wdt == ORK_F8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    cudaDataType_t dt = sc ? CUDA_R_32F : CUDA_R_16BF;
    ORK_CUBLAS_TRY(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa));
    if (!sc) {
#if ORK_FP8_OUTER_VEC
        int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
#else
        (void)sa; (void)sb;
        return ORK_FAIL(ORK_E_INTERNAL, "cuda fp8: outer-vector scales asked of a build without them");
#endif
        if (k->bias) {
            cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
            cudaDataType_t bt = CUDA_R_16BF;
            ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
            ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
            ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        }
    }
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->la, wt, (uint64_t)kk, (uint64_t)m, kk));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lb, CUDA_R_8F_E4M3, (uint64_t)kk, (uint64_t)n, kk));
    ORK_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&e->lc, dt, (uint64_t)m, (uint64_t)n, m));
    int found = 0;
    cublasStatus_t st = ork_lt_pick_algo(c, e->op, e->la, e->lb, e->lc, 16, &e->algo, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
        e->ok = 1;
    } else {
        e->status = (int)st;
    }
    return ORK_OK;
}

/* The cache entry of k (built on first use); ORK_E_UNSUPPORTED (why) when cuBLASLt has none. */
static ork_status lookup(ork_cuda_ctx *c, const ork_fp8_key *k, const float *sa, const float *sb, const void *bias,
                         char *why, size_t why_n, ork_fp8_entry **out) {
    if (!c->fp8) {
        c->fp8 = (struct ork_fp8_cache *)calloc(1, sizeof *c->fp8);
        if (!c->fp8) return ORK_FAIL(ORK_E_NOMEM, "cuda fp8 GEMM: descriptor cache");
    }
    ork_fp8_entry *e = NULL;
    for (int i = 0; i < ORK_FP8_CACHE; i++)
        if (c->fp8->e[i].used && !memcmp(&c->fp8->e[i].key, k, sizeof *k)) { e = &c->fp8->e[i]; break; }
    if (!e) {
        e = &c->fp8->e[c->fp8->next];
        c->fp8->next = (c->fp8->next + 1) % ORK_FP8_CACHE;
        if (e->used) entry_release(e);
        ork_status s = build_entry(c, k, sa, sb, bias, e);
        if (s != ORK_OK) { entry_release(e); return s; }
    }
    if (!e->ok)
        return unsupported(why, why_n, "cuBLASLt has no FP8 %s algorithm for M=%lld N=%lld K=%lld %s weights%s%s "
                           "(status %d)", k->kind & KIND_DGRAD ? "input-gradient" : "forward", (long long)k->M,
                           (long long)k->N, (long long)k->K, k->wdt == ORK_F8_E5M2 ? "E5M2" : "E4M3",
                           k->bias ? " with bias" : "", k->kind & KIND_SCALAR ? ", tensor-wide scales" : "", e->status);
    *out = e;
    return ORK_OK;
}

/* D = A·B on e (operands as in build_entry); the outer-vector scheme sets sa, sb, bias. */
static ork_status run_entry(ork_cuda_ctx *c, void *stream, ork_fp8_entry *e, const void *A, const float *sa,
                            const void *B, const float *sb, const void *bias, void *D, char *why, size_t why_n) {
    const ork_fp8_key *k = &e->key;
#if ORK_FP8_OUTER_VEC
    if (!(k->kind & KIND_SCALAR)) {
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
        ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
        if (k->bias)
            ORK_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
#else
    (void)sa; (void)sb; (void)bias;
#endif
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = cublasLtMatmul(c->lt, e->op, &alpha, A, e->la, B, e->lb, &beta, D, e->lc, D, e->lc, &e->algo,
                                       c->ws, c->ws_size, ork_stream(stream));
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
        /* refused at run time (scale modes are checked here, not by the heuristic): remember it */
        e->ok = 0;
        e->status = (int)st;
        return unsupported(why, why_n, "cuBLASLt refused the FP8 %s matmul M=%lld N=%lld K=%lld (status %d)",
                           k->kind & KIND_DGRAD ? "input-gradient" : "forward", (long long)k->M, (long long)k->N,
                           (long long)k->K, (int)st);
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        return ORK_FAIL(ORK_E_CUDA, "cuda fp8 %s: cublasLtMatmul M=%lld N=%lld K=%lld: cublas status %d",
                        k->kind & KIND_DGRAD ? "dgrad" : "linear", (long long)k->M, (long long)k->N, (long long)k->K,
                        (int)st);
    return ORK_OK;
}

static ork_status post_scale(void *stream, const float *raw, const float *rs, const float *cs, const void *bias,
                             void *y, int64_t M, int64_t C) {
    post_scale_kernel<<<grid_for(M * C / 4, 256), 256, 0, ork_stream(stream)>>>(
        (const float4 *)raw, rs, cs, (const __nv_bfloat16 *)bias, (uint2 *)y, M, C);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

/* The checks both GEMMs share: dtype, multiples of 16, 16-byte alignment, scratch size. */
static ork_status common_checks(ork_dtype wdt, int64_t N, int64_t K, const void *const *ptrs, int np, size_t ws_bytes,
                                size_t need, char *why, size_t why_n) {
    if (wdt != ORK_F8_E4M3 && wdt != ORK_F8_E5M2)
        return unsupported(why, why_n, "weight dtype %d is not fp8 E4M3/E5M2", (int)wdt);
    if (K % 16 || N % 16)
        return unsupported(why, why_n, "K = %lld and N = %lld must be multiples of 16 for cuBLASLt FP8", (long long)K,
                           (long long)N);
    for (int i = 0; i < np; i++)
        if ((uintptr_t)ptrs[i] % 16) return unsupported(why, why_n, "operand %d is not 16-byte aligned", i);
    if (ws_bytes < need)
        return unsupported(why, why_n, "the scratch is %zu bytes, this scheme needs %zu", ws_bytes, need);
    return ORK_OK;
}

extern "C" ork_status ork_cuda_fp8_linear(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a) {
    return ork_cuda_fp8_linear_sized(c, stream, a, ork_cuda_fp8_linear_ws(a->M, a->K), 0);
}

extern "C" ork_status ork_cuda_fp8_linear_sized(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_linear_args *a,
                                                size_t have, int scalar_scales) {
    const int mode = fp8_mode(c, a->why, a->why_n);
    if (!mode) return ORK_E_UNSUPPORTED;
    if (a->M <= 0 || a->N <= 0) return ORK_OK;
    if (a->K <= 0) return ORK_FAIL(ORK_E_INVALID, "cuda fp8 linear: K = %lld", (long long)a->K);
    const int sc = mode == 1 || scalar_scales;
    size_t need = ork_cuda_fp8_ws(c, 0, sc, a->M, a->N, a->K);
    const void *ptrs[] = {a->x, a->w, a->w_scale, a->y, a->ws, a->bias};
    ORK_TRY(common_checks(a->wdt, a->N, a->K, ptrs, 6, have, need, a->why, a->why_n));
    if (!a->x || !a->w || !a->w_scale || !a->y || !a->ws)
        return ORK_FAIL(ORK_E_INVALID, "cuda fp8 linear: NULL operand");
    ork_fp8_key k;
    memset(&k, 0, sizeof k);
    k.M = a->M; k.N = a->N; k.K = a->K;
    k.wdt = (int32_t)a->wdt; k.bias = !sc && a->bias != NULL; k.fast_accum = a->fast_accum != 0;
    k.kind = sc ? KIND_SCALAR : 0;
    uint8_t *xq = (uint8_t *)a->ws;
    float *sx = (float *)((char *)a->ws + ws_xq_bytes(a->M, a->K));
    ork_fp8_entry *e;
    ORK_TRY(lookup(c, &k, a->w_scale, sx, a->bias, a->why, a->why_n, &e));
    ORK_TRY(ork_cuda_fp8_quant_rows(stream, a->M, a->K, a->x, xq, sx));
    if (!sc) return run_entry(c, stream, e, a->w, a->w_scale, xq, sx, a->bias, a->y, a->why, a->why_n);
    float *raw = (float *)((char *)a->ws + ork_cuda_fp8_linear_ws(a->M, a->K)); /* (M, N) */
    ORK_TRY(run_entry(c, stream, e, a->w, NULL, xq, NULL, NULL, raw, a->why, a->why_n));
    return post_scale(stream, raw, sx, a->w_scale, a->bias, a->y, a->M, a->N);
}

extern "C" ork_status ork_cuda_fp8_dgrad(ork_cuda_ctx *c, void *stream, const ork_cuda_fp8_dgrad_args *a) {
    const int mode = fp8_mode(c, a->why, a->why_n);
    if (!mode) return ORK_E_UNSUPPORTED;
    if (a->M <= 0 || a->K <= 0) return ORK_OK;
    if (a->N <= 0) return ORK_FAIL(ORK_E_INVALID, "cuda fp8 dgrad: N = %lld", (long long)a->N);
    const int sc = mode == 1 || a->scalar_scales;
    size_t need = ork_cuda_fp8_ws(c, 1, sc, a->M, a->N, a->K);
    const void *ptrs[] = {a->dy, a->w, a->w_scale, a->dx, a->ws};
    ORK_TRY(common_checks(a->wdt, a->N, a->K, ptrs, 5, a->ws_bytes, need, a->why, a->why_n));
    if (!a->dy || !a->w || !a->w_scale || !a->dx || !a->ws)
        return ORK_FAIL(ORK_E_INVALID, "cuda fp8 dgrad: NULL operand");
    char *p = (char *)a->ws;
    uint8_t *wt = (uint8_t *)p;                                          /* (K, N) */
    uint8_t *uq = (uint8_t *)(p += al256((size_t)(a->N * a->K)));        /* (M, N) */
    float *su = (float *)(p += al256((size_t)(a->M * a->N)));            /* (M) */
    float *ones = (float *)(p += al256((size_t)a->M * 4));               /* (K) */
    float *raw = (float *)(p + al256((size_t)a->K * 4));                 /* (M, K), tensor-wide scheme */
    ork_fp8_key k;
    memset(&k, 0, sizeof k);
    k.M = a->M; k.N = a->N; k.K = a->K;
    k.wdt = (int32_t)a->wdt; k.fast_accum = a->fast_accum != 0;
    k.kind = KIND_DGRAD | (sc ? KIND_SCALAR : 0);
    ork_fp8_entry *e;
    ORK_TRY(lookup(c, &k, ones, su, NULL, a->why, a->why_n, &e));
    ORK_TRY(ork_cuda_fp8_transpose(stream, a->N, a->K, a->w, wt));
    ORK_TRY(ork_cuda_fp8_quant_rows_cs(stream, a->M, a->N, a->dy, a->w_scale, uq, su));
    if (!sc) {
        fill_ones_kernel<<<grid_for(a->K, 256), 256, 0, ork_stream(stream)>>>(ones, a->K);
        ORK_CUDA_LAUNCHED();
        return run_entry(c, stream, e, wt, ones, uq, su, NULL, a->dx, a->why, a->why_n);
    }
    ORK_TRY(run_entry(c, stream, e, wt, NULL, uq, NULL, NULL, raw, a->why, a->why_n));
    return post_scale(stream, raw, su, NULL, NULL, a->dx, a->M, a->K);
}
