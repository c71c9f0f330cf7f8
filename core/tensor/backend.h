/* tensor/backend.h — the compute backend interface: one table of memory entry
 * points and kernels per device kind (core/cpu/ for ORK_DEV_CPU, core/cuda/ for
 * ORK_DEV_CUDA). The op layer (tensor/ops.c) checks shapes, allocates outputs,
 * records the tape, and calls these; kernels never allocate device memory and
 * never synchronise (everything is [stream-ordered] on k->stream).
 *
 * Owns: nothing at run time; defines the contract between ops.c and backends.
 *
 * Conventions for every kernel entry:
 * - Pointers are device pointers to contiguous row-major data unless a stride
 *   argument says otherwise. Shapes are in elements. Shape comments name dims.
 * - Every entry returns ork_status; ORK_E_UNSUPPORTED (one logged line) for a
 *   dtype mix the backend does not implement.
 * - dtypes. Activations and their gradients ("dt"): F32 on CPU; BF16 on CUDA
 *   (F32 also accepted where cheap). Weights ("wdt"): F32 or BF16 on both;
 *   CPU converts BF16 weight panels to F32 on the fly. Accumulation is always
 *   F32 (CPU: F32 or F64 for reductions). Norm statistics (mean, rstd), the
 *   attention lse and the scalar reductions/loss are always F32.
 * - Backward kernels OVERWRITE their outputs (dx, dw, ...) unless documented
 *   with "accumulates"; the op layer adds into existing gradients with axpby.
 *   gemm is the exception: it has beta (used to accumulate into F32 weight
 *   gradients without a temporary).
 * - A NULL output pointer in a backward kernel means "not needed": skip it.
 * - Scalars that live on the device (a loss gradient) are F32 (1) pointers.
 */
#ifndef ORK_TENSOR_BACKEND_H
#define ORK_TENSOR_BACKEND_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <orakul/tensor.h> /* ORK_MAX_DIMS */
#include <stddef.h>
#include <stdint.h>

/* Per-call execution context: the graph's stream and the backend's private
 * per-graph state (CUDA: cuBLASLt handle + its workspace, cuDNN handle; CPU:
 * the thread count). Made by ctx_create, owned by the graph. */
typedef struct ork_kctx {
    void *stream; /* cudaStream_t on CUDA; NULL on CPU */
    void *priv;   /* backend state from ctx_create */
    int nthreads; /* CPU worker threads for parallel kernels (>= 1) */
} ork_kctx;

/* ---- descriptors ------------------------------------------------------- */

/* C[b] (M, N) = alpha · op(A[b]) · op(B[b]) + beta · C[b]  for b < batch.
 * op(A) is (M, K): A stored (M, K) with row stride lda, or (K, M) when ta.
 * op(B) is (K, N): B stored (K, N) with row stride ldb, or (N, K) when tb.
 * stride_a/b/c: elements between consecutive batch matrices (0: shared).
 * adt, bdt: F32 or BF16 (CPU: any mix; CUDA: BF16·BF16, F32·F32).
 * cdt: F32 or BF16; accumulation F32; beta == 0 never reads C (may be NaN). */
typedef struct ork_gemm_desc {
    int ta, tb;
    int64_t M, N, K, batch;
    float alpha, beta;
    const void *A; ork_dtype adt; int64_t lda, stride_a;
    const void *B; ork_dtype bdt; int64_t ldb, stride_b;
    void *C;       ork_dtype cdt; int64_t ldc, stride_c;
} ork_gemm_desc;

/* Native FP8 forward linear (Hopper): y (M, N) BF16 = (q8(x) · sx) · (w · w_scale)ᵀ
 * (+ bias (N) BF16), x (M, K) BF16 quantized per row to E4M3 into ws (sx: one F32
 * scale per row), w (N, K) F8_E4M3 / F8_E5M2 with F32 (N) per-row scales. */
typedef struct ork_fp8_linear_desc {
    int64_t M, N, K;
    const void *x;
    const void *w; ork_dtype wdt; const float *w_scale;
    const void *bias;   /* BF16 (N) or NULL */
    void *y;
    void *ws;           /* linear_fp8_ws(M, K) bytes, or ws_bytes */
    char *why; size_t why_n; /* ORK_E_UNSUPPORTED: why not (nothing is logged) */
    size_t ws_bytes;    /* bytes at ws; 0: linear_fp8_ws(M, K). fp8_ws (when the backend has it) gives the
                         * size this device needs (Ada's tensor-wide scheme needs more) */
} ork_fp8_linear_desc;

/* Broadcast of b (and y = result) against a: a has `shape` (ndim dims, n
 * elements); bstride[d] is b's element stride for a's dim d, 0 where b is
 * broadcast (size 1 or missing). nb = numel(b). */
typedef struct ork_bcast {
    int ndim;
    int64_t shape[ORK_MAX_DIMS];
    int64_t bstride[ORK_MAX_DIMS];
    int64_t n, nb;
} ork_bcast;

/* Strided N-d copy with conversion: dst[i] (+)= (ddt) src[i] for every index
 * i of `shape`, element strides per dim for each side. Covers copy, cast
 * (sdt != ddt), permute (permuted src strides), concat/split (offset pointers
 * plus the full tensor's strides). accumulate: dst += src. */
typedef struct ork_copy_desc {
    int ndim;
    int64_t shape[ORK_MAX_DIMS];
    int64_t src_stride[ORK_MAX_DIMS];
    int64_t dst_stride[ORK_MAX_DIMS];
    ork_dtype sdt, ddt;
    int accumulate;
} ork_copy_desc;

/* NCHW convolution, square stride and symmetric padding.
 * x (N, Cin, H, W), w (Cout, Cin, kh, kw), b (Cout), y (N, Cout, Ho, Wo) with
 * Ho = (H + 2·pad − kh) / stride + 1, Wo likewise. */
typedef struct ork_conv2d_desc {
    int64_t N, Cin, H, W, Cout, kh, kw, Ho, Wo;
    int stride, pad;
} ork_conv2d_desc;

/* Attention: q (B, H, Lq, D); k, v (B, Hkv, Lk, D) with H % Hkv == 0 (grouped
 * K/V heads: query head h reads kv head h / (H / Hkv)); y (B, H, Lq, D);
 * lse F32 (B, H, Lq) = logsumexp of the scaled, masked scores per query row.
 * kmask: U8 (B, Lk), 1 = attend, or NULL (all). causal: query i sees keys
 * j <= i + (Lk − Lq). A row with no visible key gives y = 0, lse = −inf. */
typedef struct ork_attn_desc {
    int64_t B, H, Hkv, Lq, Lk, D;
    float scale;
    int causal;
    const uint8_t *kmask;
} ork_attn_desc;

typedef enum ork_unary_op {
    ORK_UNARY_GELU_TANH = 0, /* 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) */
    ORK_UNARY_SILU = 1,      /* x·σ(x) */
    ORK_UNARY_RELU = 2,      /* max(x, 0); gradient 0 at x == 0 */
    ORK_UNARY_TANH_CLAMP = 3,/* c·tanh(x / c), c = param */
} ork_unary_op;

typedef enum ork_binary_op {
    ORK_BINARY_ADD = 0, /* y = a + b */
    ORK_BINARY_MUL = 1, /* y = a · b */
} ork_binary_op;

typedef enum ork_reduce_op {
    ORK_REDUCE_SUM = 0,   /* Σ x */
    ORK_REDUCE_SUMSQ = 1, /* Σ x² */
} ork_reduce_op;

/* The fused q/k RMS norm + RoPE (ops qkv_rope): n streams, qkv[i] (B, len[i],
 * 3·H·D) dt holding q | k | v each H heads of D; the outputs q, k, v are
 * (B, H, L, D), L = Σ len[i], stream i at rows len[0] + ... + len[i-1]. qw[i],
 * kw[i]: the q and k norm weights (D) of qwdt[i], kwdt[i], or NULL (= 1). */
#define ORK_QKV_MAX 4     /* streams */
#define ORK_QKV_MAX_D 256 /* head dim of the fused kernel (larger: the op composes) */
typedef struct ork_qkv_desc {
    int64_t B, H, D, L;
    int n;
    float eps;
    int64_t len[ORK_QKV_MAX];
    const void *qkv[ORK_QKV_MAX];
    const void *qw[ORK_QKV_MAX], *kw[ORK_QKV_MAX];
    ork_dtype qwdt[ORK_QKV_MAX], kwdt[ORK_QKV_MAX];
} ork_qkv_desc;

/* ---- the table ----------------------------------------------------------- */

typedef struct ork_backend {
    const char *name;  /* "cpu", "cuda" */
    ork_device device;

    /* Per-graph private state (handles, workspaces); priv may stay NULL. */
    ork_status (*ctx_create)(int device_index, void **priv);
    void (*ctx_destroy)(void *priv);
    /* The stream a graph's work runs on when its caller gives none (CUDA: the
     * context's own non-blocking stream, a cudaStream_t); NULL on a backend
     * without streams (CPU). */
    void *(*ctx_stream)(const ork_kctx *k);

    /* -- memory -- */
    /* Raw device allocation (the core's allocator accounts and budgets it). */
    ork_status (*alloc)(size_t bytes, void **ptr);
    void (*free)(void *ptr);
    /* Pinned host memory for staging (CPU: plain malloc). */
    ork_status (*host_alloc)(size_t bytes, void **ptr);
    void (*host_free)(void *ptr);
    /* [stream-ordered] copies; host memory should be pinned for real asynchrony.
     * memcpy_h2d from pageable memory must have consumed src when it returns
     * (cudaMemcpyAsync does); d2h results are valid after sync. */
    ork_status (*memcpy_h2d)(const ork_kctx *k, void *dst, const void *src, size_t bytes);
    ork_status (*memcpy_d2h)(const ork_kctx *k, void *dst, const void *src, size_t bytes);
    ork_status (*memcpy_d2d)(const ork_kctx *k, void *dst, const void *src, size_t bytes);
    /* Wait until everything enqueued on k->stream has finished. */
    ork_status (*sync)(const ork_kctx *k);

    /* -- fill, copy, axpby -- */
    /* x (n) of dt = value. */
    ork_status (*fill)(const ork_kctx *k, int64_t n, float value, void *x, ork_dtype dt);
    /* x (n) of dt = scale · s[0], s F32 (1) on the device (mean/sum backward). */
    ork_status (*fill_scalar)(const ork_kctx *k, int64_t n, const float *s, float scale, void *x,
                              ork_dtype dt);
    /* y (n, ydt) = alpha · x (n, xdt) + beta · y; beta == 0 never reads y.
     * scale fwd/bwd, gradient accumulation (BF16 grad into F32 grad), cast. */
    ork_status (*axpby)(const ork_kctx *k, int64_t n, float alpha, const void *x, ork_dtype xdt,
                        float beta, void *y, ork_dtype ydt);
    /* The strided N-d copy described above. */
    ork_status (*copy)(const ork_kctx *k, const ork_copy_desc *d, const void *src, void *dst);

    /* -- GEMM -- */
    ork_status (*gemm)(const ork_kctx *k, const ork_gemm_desc *d);

    /* -- elementwise with broadcast (see ork_bcast) -- */
    /* y (shape, dt) = a (shape, dt) op b (broadcast, bdt). */
    ork_status (*binary)(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a,
                         const void *b, ork_dtype bdt, void *y, ork_dtype dt);
    /* da (shape, dt) = dy (add) or dy·b (mul);
     * db (nb, gdt) = Σ over broadcast dims of dy (add) or dy·a (mul).
     * a is read only for mul's db; b only for mul's da. */
    ork_status (*binary_bwd)(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a,
                             const void *b, ork_dtype bdt, const void *dy, ork_dtype dt, void *da,
                             void *db, ork_dtype gdt);
    /* y = (1 + scale)·x + shift; x, y (shape, dt); shift, scale broadcast to x
     * each with its own descriptor (bc_shift, bc_scale share shape), dtype dt. */
    ork_status (*modulate)(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                           const void *x, const void *shift, const void *scale, void *y, ork_dtype dt);
    /* dx = dy·(1 + scale); dshift = Σ_bcast dy; dscale = Σ_bcast dy·x (all dt). */
    ork_status (*modulate_bwd)(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                               const void *x, const void *scale, const void *dy, void *dx,
                               void *dshift, void *dscale, ork_dtype dt);

    /* -- norms over the last dim: x, y (rows, C) dt; mean, rstd F32 (rows) -- */
    /* y = (x − mean)·rstd, rstd = 1/sqrt(var + eps) (biased variance). */
    ork_status (*layernorm)(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x,
                            void *y, float *mean, float *rstd, ork_dtype dt);
    ork_status (*layernorm_bwd)(const ork_kctx *k, int64_t rows, int64_t C, const void *x,
                                const float *mean, const float *rstd, const void *dy, void *dx,
                                ork_dtype dt);
    /* y = x·rstd·w, rstd = 1/sqrt(mean(x²) + eps); w (C) of wdt or NULL (= 1). */
    ork_status (*rmsnorm)(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x,
                          const void *w, ork_dtype wdt, void *y, float *rstd, ork_dtype dt);
    /* dx (rows, C) dt; dw F32 (C) = Σ_rows dy·x·rstd (overwritten; NULL: skip). */
    ork_status (*rmsnorm_bwd)(const ork_kctx *k, int64_t rows, int64_t C, const void *x,
                              const void *w, ork_dtype wdt, const float *rstd, const void *dy,
                              void *dx, float *dw, ork_dtype dt);

    /* -- activations: x, y, dy, dx (n) dt; param = c for tanh_clamp -- */
    ork_status (*unary)(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x,
                        void *y, ork_dtype dt);
    ork_status (*unary_bwd)(const ork_kctx *k, ork_unary_op op, int64_t n, float param,
                            const void *x, const void *dy, void *dx, ork_dtype dt);
    /* x (rows, 2C) gate first -> y (rows, C) = silu(x[:, :C]) · x[:, C:]. */
    ork_status (*swiglu)(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y,
                         ork_dtype dt);
    ork_status (*swiglu_bwd)(const ork_kctx *k, int64_t rows, int64_t C, const void *x,
                             const void *dy, void *dx, ork_dtype dt);

    /* -- rotary embedding: x, y (BH, L, D) dt, pe F32 (L, D/2, 2) = (cos, sin).
     * half_split 0: pairs (2k, 2k+1) (FLUX); 1: pairs (k, k + D/2) (Qwen,
     * Mistral). Backward is the inverse rotation: dx = Rᵀ dy. */
    ork_status (*rope)(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split,
                       const void *x, const float *pe, void *y, ork_dtype dt);
    ork_status (*rope_bwd)(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split,
                           const void *dy, const float *pe, void *dx, ork_dtype dt);

    /* -- attention (see ork_attn_desc); q, k, v, y, dy, dq, dk, dv dt -- */
    /* Workspace bytes the backend needs for one call (may be 0). */
    size_t (*attention_ws)(const ork_attn_desc *d, int backward);
    ork_status (*attention)(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                            const void *v, void *y, float *lse, void *ws, ork_dtype dt);
    /* Needs the forward's y and lse. dk, dv (B, Hkv, Lk, D) summed over the
     * query heads of a group (overwritten). */
    ork_status (*attention_bwd)(const ork_kctx *k, const ork_attn_desc *d, const void *q,
                                const void *kk, const void *v, const void *y, const float *lse,
                                const void *dy, void *dq, void *dk, void *dv, void *ws, ork_dtype dt);

    /* -- images, NCHW (see ork_conv2d_desc); x, y, dx, dy dt; w wdt -- */
    size_t (*conv2d_ws)(const ork_conv2d_desc *d, int backward);
    /* y = conv(x, w) + b; b (Cout) of wdt or NULL. */
    ork_status (*conv2d)(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *w,
                         const void *b, ork_dtype wdt, void *y, void *ws, ork_dtype dt);
    /* dx (N, Cin, H, W) from dy and w. */
    ork_status (*conv2d_dgrad)(const ork_kctx *k, const ork_conv2d_desc *d, const void *dy,
                               const void *w, ork_dtype wdt, void *dx, void *ws, ork_dtype dt);
    /* dw F32 (Cout, Cin, kh, kw) and db F32 (Cout) (either may be NULL),
     * both ACCUMULATE (dw += ..., db += ...): they are always F32 leaf-style. */
    ork_status (*conv2d_wgrad)(const ork_kctx *k, const ork_conv2d_desc *d, const void *x,
                               const void *dy, float *dw, float *db, void *ws, ork_dtype dt);
    /* x (NC, H, W) -> y (NC, H/2, W/2) (floor; odd last row/col dropped). */
    ork_status (*maxpool2x2)(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x,
                             void *y, ork_dtype dt);
    /* dx (NC, H, W): dy routed to the first maximum of each window; 0 elsewhere. */
    ork_status (*maxpool2x2_bwd)(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x,
                                 const void *dy, void *dx, ork_dtype dt);
    /* nearest: x (NC, H, W) -> y (NC, 2H, 2W); backward sums each 2x2 block. */
    ork_status (*upsample2x)(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x,
                             void *y, ork_dtype dt);
    ork_status (*upsample2x_bwd)(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *dy,
                                 void *dx, ork_dtype dt);

    /* -- reductions to an F32 (1) device scalar -- */
    /* out = Σ x or Σ x² over n elements of dt. */
    ork_status (*reduce)(const ork_kctx *k, ork_reduce_op op, int64_t n, const void *x, ork_dtype dt,
                         float *out);
    /* out = mean((a − b)²). */
    ork_status (*mse)(const ork_kctx *k, int64_t n, const void *a, const void *b, ork_dtype dt,
                      float *out);
    /* da = 2(a − b)/n · g[0], db = −da (either may be NULL); g F32 (1) device. */
    ork_status (*mse_bwd)(const ork_kctx *k, int64_t n, const void *a, const void *b, const float *g,
                          void *da, void *db, ork_dtype dt);

    /* ---- appended: group norm and softmax (the FLUX VAE) ---- */
    /* Group norm: x, y (B, C, P) dt (P = H·W); G groups of C/G channels; mean,
     * rstd F32 (B, G); w, b (C) of wdt or NULL: y = (x − mean)·rstd·w[c] + b[c],
     * rstd = 1/sqrt(var + eps), biased variance over (C/G)·P elements. */
    ork_status (*groupnorm)(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, float eps,
                            const void *x, const void *w, const void *b, ork_dtype wdt, void *y, float *mean,
                            float *rstd, ork_dtype dt);
    /* dx (B, C, P) dt (overwritten); dw, db F32 (C) ACCUMULATE (dw += Σ dy·x̂,
     * db += Σ dy); any of the three may be NULL. */
    ork_status (*groupnorm_bwd)(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, const void *x,
                                const void *w, ork_dtype wdt, const float *mean, const float *rstd,
                                const void *dy, void *dx, float *dw, float *db, ork_dtype dt);
    /* Row softmax: x, y (rows, C) dt; backward dx = y·(dy − Σ_c dy·y) from y. */
    ork_status (*softmax)(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt);
    ork_status (*softmax_bwd)(const ork_kctx *k, int64_t rows, int64_t C, const void *y, const void *dy,
                              void *dx, ork_dtype dt);

    /* ---- appended: dropout (LoRA) ---- */
    /* In place: x[i] = keep(seed, i) ? x[i] · scale : 0 for i < n (x of dt), with
     * keep from tensor/dropout_hash.h (threshold = p · 2^64). The same call is
     * the forward and the backward (the gradient takes the same mask). */
    ork_status (*dropout)(const ork_kctx *k, int64_t n, uint64_t seed, uint64_t threshold, float scale, void *x,
                          ork_dtype dt);

    /* ---- appended: native FP8 forward linear (ops->linear, fp8 weights, fp8_gemm native) ---- */
    /* Scratch bytes linear_fp8 needs for x (M, K). NULL: no native path (CPU). */
    size_t (*linear_fp8_ws)(int64_t M, int64_t K);
    /* See ork_fp8_linear_desc. ORK_E_UNSUPPORTED (nothing logged, d->why says it)
     * where the device, build, shape or cuBLASLt cannot: the caller dequantizes
     * instead. M == 0: only asks whether the device has the native path at all. */
    ork_status (*linear_fp8)(const ork_kctx *k, const ork_fp8_linear_desc *d);

    /* ---- appended: the streamed trainable state's guard (stream/trainable_stream.c) ---- */
    /* [stream-ordered] If Σ sums[0..n) (F32, device) is not finite: copy `bytes`
     * from src over dst and set *flag (int32, device) to 1; otherwise touch
     * neither. src is host memory the device reads directly (pinned, under
     * unified addressing) or device memory. Lets a block whose gradients are
     * not finite be undone without a host sync. */
    ork_status (*restore_if_nonfinite)(const ork_kctx *k, const float *sums, int64_t n, const void *src, void *dst,
                                       size_t bytes, int32_t *flag);

    /* ---- appended: the text encoders (ops embedding; cpu/cpu_embed.c, cuda/cuda_embed.cu) ---- */
    /* Row gather: y (n, D) dt = w[ids[i], :] for w (V, D) of wdt (F32 or BF16),
     * ids I32 (n). An id outside [0, V): CPU ORK_E_INVALID with one line (y is
     * partly written); CUDA a row of NaN (no sync to report it). */
    ork_status (*embedding)(const ork_kctx *k, int64_t n, int64_t V, int64_t D, const int32_t *ids, const void *w,
                            ork_dtype wdt, void *y, ork_dtype dt);

    /* ---- appended: the attention side of a block fused (ops qkv_rope; cuda/cuda_qkv.cu).
     * NULL where the backend has none (CPU): the op composes split, permute,
     * rmsnorm, concat and rope. pe F32 (L, D/2, 2) as for rope (pairs 2k, 2k+1). */
    /* q, k = rope(rmsnorm(.) · w), v moved; q, k, v (B, H, L, D) dt; rstd F32
     * (2, B, H, L): the q rows' then the k rows' 1/sqrt(mean(x²) + eps). The
     * normed value is rounded to dt before the rotation, as the composition does. */
    ork_status (*qkv_rope)(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, void *q, void *kk, void *v,
                           float *rstd, ork_dtype dt);
    /* From dq, dk, dv (B, H, L, D) dt (any NULL: zero): dqkv[i] (B, len[i], 3·H·D)
     * dt and dqw[i], dkw[i] F32 (D) = Σ_rows of the norm's input gradient·x̂
     * (all overwritten; a NULL entry: skip). d->eps is not read. */
    ork_status (*qkv_rope_bwd)(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, const float *rstd,
                               const void *dq, const void *dk, const void *dv, void *const *dqkv,
                               float *const *dqw, float *const *dkw, ork_dtype dt);

    /* ---- appended: fused block epilogues (ops gated_add, layernorm_modulate; tensor/ops_fused.c,
     * cuda/cuda_fused.cu). NULL (the CPU): the op composes binary, modulate and layernorm.
     * x, h, y, dy, dx, dh (B, L, C) dt as B·L rows of C; the per-row operands gate, shift,
     * scale are (Bg, C) dt with Bg 1 (shared by every row) or B (row b·L + l reads row b).
     * Reductions deterministic (fixed partition and order). ---- */
    /* y = x + gate·h. ORK_E_UNSUPPORTED, nothing logged, where the backward cannot run (C
     * too large): the op composes instead. */
    ork_status (*gated_add)(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *x,
                            const void *gate, const void *h, void *y, ork_dtype dt);
    /* dh = dy·gate (dt); dgate (Bg, C) of gdt = Σ over the rows reading it of dy·h; either may be
     * NULL. (dx = dy: the op passes dy on.) */
    ork_status (*gated_add_bwd)(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *gate,
                                const void *h, const void *dy, void *dh, void *dgate, ork_dtype gdt, ork_dtype dt);
    /* y = (x − mean)·rstd·(1 + scale) + shift per row, rstd = 1/sqrt(var + eps) (biased);
     * shift (Bsh, C), scale (Bsc, C); mean, rstd F32 (B·L). ORK_E_UNSUPPORTED, nothing
     * logged, where the backward cannot run (C too large): the op composes instead. */
    ork_status (*layernorm_modulate)(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc,
                                     float eps, const void *x, const void *shift, const void *scale, void *y,
                                     float *mean, float *rstd, ork_dtype dt);
    /* dx (dt) through the norm; dshift (Bsh, C) of shdt = Σ dy, dscale (Bsc, C) of scdt =
     * Σ dy·(x − mean)·rstd over the rows reading them; any of the three may be NULL. */
    ork_status (*layernorm_modulate_bwd)(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh,
                                         int64_t Bsc, const void *x, const void *scale, const float *mean,
                                         const float *rstd, const void *dy, void *dx, void *dshift, ork_dtype shdt,
                                         void *dscale, ork_dtype scdt, ork_dtype dt);

    /* ---- appended: native FP8 input gradient (ops->linear backward, fp8 weights, fp8_gemm native) ---- */
    /* Scratch bytes of the native FP8 forward (dgrad 0: y (M, N) = x (M, K) · wᵀ) or input
     * gradient (dgrad 1) on this device. NULL: no native path (CPU). */
    size_t (*fp8_ws)(const ork_kctx *k, int dgrad, int64_t M, int64_t N, int64_t K);
    /* dx (M, K) BF16 = dy (M, N) BF16 · (w · w_scale) (N, K) from w's fp8 bytes and
     * per-row scales (cuda_gemm_fp8.h: w_scale folded into dy's columns, w byte-
     * transposed into ws): the desc's x is dy (M, N), its y is dx (M, K, overwritten),
     * bias unused, ws/ws_bytes from fp8_ws(k, 1, M, N, K). ORK_E_UNSUPPORTED (nothing
     * logged, d->why says it) as linear_fp8: the caller dequantizes instead. */
    ork_status (*linear_fp8_dgrad)(const ork_kctx *k, const ork_fp8_linear_desc *d);
} ork_backend;

/* The CPU backend (core/cpu/). Always available. */
const ork_backend *ork_cpu_backend(void);
/* The CUDA backend (core/cuda/); only declared usable when ORAKUL_HAVE_CUDA
 * is defined (the graph code guards its use with #ifdef). */
const ork_backend *ork_cuda_backend(void);

#endif
