/* cuda/backend_cuda.cu — the CUDA backend table (ork_cuda_backend): memory entry
 * points, the per-graph context, and the adapters from tensor/backend.h's
 * descriptors to the GEMM (cuda_gemm), attention (cuda_attn) and convolution
 * (im2col/col2im + cuBLASLt) kernels. Elementwise entries live in cuda_ew.cu.
 * Everything a step calls is [stream-ordered] on ork_cuda_kstream(k). */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_gemm.h"
#include "cuda/cuda_gemm_fp8.h"
#include "cuda/cuda_attn.h"
#include "cuda/cuda_sdpa_cudnn.h"
#include "cuda/cuda_fused.h"

extern "C" {

void *ork_cuda_kstream(const ork_kctx *k) {
    return k->stream ? k->stream : (void *)((ork_cuda_ctx *)k->priv)->stream;
}
ork_cuda_ctx *ork_cuda_kctx(const ork_kctx *k) { return (ork_cuda_ctx *)k->priv; }

static ork_status be_ctx_create(int device_index, void **priv) {
    ork_cuda_ctx *c;
    ORK_TRY(ork_cuda_ctx_create(device_index, &c));
    *priv = c;
    return ORK_OK;
}
static void be_ctx_destroy(void *priv) { ork_cuda_ctx_destroy((ork_cuda_ctx *)priv); }

static ork_status be_alloc(size_t bytes, void **ptr) {
    *ptr = NULL;
    if (!bytes) bytes = 1;
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ORK_FAIL(ORK_E_BUDGET, "cuda: cudaMalloc(%zu bytes) failed: %s", bytes, cudaGetErrorString(e));
    }
    return ORK_OK;
}
static void be_free(void *p) { if (p) cudaFree(p); }
static ork_status be_host_alloc(size_t bytes, void **ptr) {
    *ptr = NULL;
    cudaError_t e = cudaMallocHost(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ORK_FAIL(ORK_E_NOMEM, "cuda: pinned host allocation of %zu bytes failed: %s", bytes,
                        cudaGetErrorString(e));
    }
    return ORK_OK;
}
static void be_host_free(void *p) { if (p) cudaFreeHost(p); }
static ork_status be_memcpy(const ork_kctx *k, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return ORK_OK;
    ORK_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, ork_stream(ork_cuda_kstream(k))));
    return ORK_OK;
}
static ork_status be_h2d(const ork_kctx *k, void *d, const void *s, size_t n) { return be_memcpy(k, d, s, n, cudaMemcpyHostToDevice); }
static ork_status be_d2h(const ork_kctx *k, void *d, const void *s, size_t n) { return be_memcpy(k, d, s, n, cudaMemcpyDeviceToHost); }
static ork_status be_d2d(const ork_kctx *k, void *d, const void *s, size_t n) { return be_memcpy(k, d, s, n, cudaMemcpyDeviceToDevice); }
static ork_status be_sync(const ork_kctx *k) { return ork_cuda_stream_sync(ork_cuda_kstream(k)); }

static ork_status be_gemm(const ork_kctx *k, const ork_gemm_desc *d) {
    ork_cuda_gemm_args g = {};
    g.ta = d->ta; g.tb = d->tb; g.M = d->M; g.N = d->N; g.K = d->K; g.batch = d->batch;
    g.alpha = d->alpha; g.beta = d->beta;
    g.A = d->A; g.adt = d->adt; g.lda = d->lda; g.stride_a = d->stride_a;
    g.B = d->B; g.bdt = d->bdt; g.ldb = d->ldb; g.stride_b = d->stride_b;
    g.C = d->C; g.cdt = d->cdt; g.ldc = d->ldc; g.stride_c = d->stride_c;
    return ork_cuda_gemm(ork_cuda_kctx(k), ork_cuda_kstream(k), &g);
}

static size_t be_linear_fp8_ws(int64_t M, int64_t K) { return ork_cuda_fp8_linear_ws(M, K); }
/* Fast accumulation on: the forward's choice in TransformerEngine (NUMERICS.md §3);
 * its error against path (a) is measured in tests/quant/test_quant_fp8_gemm.c. */
static ork_status be_linear_fp8(const ork_kctx *k, const ork_fp8_linear_desc *d) {
    if (d->M == 0) return ork_cuda_fp8_native_ok(ork_cuda_kctx(k), d->why, d->why_n);
    ork_cuda_fp8_linear_args a = {d->M, d->N, d->K, d->x, d->w, d->wdt, d->w_scale, d->bias, d->y, d->ws, 1,
                                  d->why, d->why_n};
    size_t wsb = d->ws_bytes ? d->ws_bytes : ork_cuda_fp8_linear_ws(d->M, d->K);
    return ork_cuda_fp8_linear_sized(ork_cuda_kctx(k), ork_cuda_kstream(k), &a, wsb, 0);
}
static size_t be_fp8_ws(const ork_kctx *k, int dgrad, int64_t M, int64_t N, int64_t K) {
    return ork_cuda_fp8_ws(ork_cuda_kctx(k), dgrad, 0, M, N, K);
}
/* Fast accumulation off: TransformerEngine's backward choice (NUMERICS.md §3). */
static ork_status be_linear_fp8_dgrad(const ork_kctx *k, const ork_fp8_linear_desc *d) {
    ork_cuda_fp8_dgrad_args a = {d->M, d->N, d->K, d->x, d->w, d->wdt, d->w_scale, d->y, d->ws, d->ws_bytes, 0, 0,
                                 d->why, d->why_n};
    return ork_cuda_fp8_dgrad(ork_cuda_kctx(k), ork_cuda_kstream(k), &a);
}

static ork_cuda_attn_args attn_args(const ork_attn_desc *d) {
    ork_cuda_attn_args a = {d->B, d->H, d->Hkv, d->Lq, d->Lk, d->D, d->scale, d->causal, d->kmask};
    return a;
}
/* Attention dispatch: cuDNN's fused SDPA (cuda_sdpa_cudnn) where it takes the
 * shape (non-causal, unmasked, H == Hkv, D 64/128; opt-in: ORK_CUDNN_SDPA=1, cuDNN
 * >= 9.13.1 fwd / 9.17 bwd) and has a plan; our flash kernels (cuda_attn) otherwise.
 * The workspace is the larger of the two, so either may run with it. */
static ork_cudnn_sdpa_args sdpa_args(const ork_attn_desc *d) {
    ork_cudnn_sdpa_args a = {d->B, d->H, d->Hkv, d->Lq, d->Lk, d->D, d->scale, d->causal, d->kmask};
    return a;
}
static size_t be_attention_ws(const ork_attn_desc *d, int backward) {
    ork_cuda_attn_args a = attn_args(d);
    size_t ws = ork_cuda_attn_ws(&a, backward);
    ork_cudnn_sdpa_args s = sdpa_args(d);
    int dev = 0, ok = 0;
    if (ork_cudnn_sdpa_eligible(&s) && cudaGetDevice(&dev) == cudaSuccess) {
        size_t c = ork_cudnn_sdpa_ws(dev, &s, backward, &ok);
        if (ok && c > ws) ws = c;
    }
    return ws;
}
static ork_status be_attention(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                               const void *v, void *y, float *lse, void *ws, ork_dtype dt) {
    if (dt != ORK_BF16) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda attention: dtype %d (BF16 only)", (int)dt);
    ork_cudnn_sdpa_args s = sdpa_args(d);
    if (ork_cudnn_sdpa_eligible(&s) && q && kk && v && y && lse) {
        ork_status st = ork_cudnn_sdpa_fwd(ork_cuda_ctx_device(ork_cuda_kctx(k)), &s, q, kk, v, y, lse, ws,
                                           ork_cuda_kstream(k));
        if (st != ORK_E_UNSUPPORTED) return st;
    }
    ork_cuda_attn_args a = attn_args(d);
    return ork_cuda_attn_fwd(&a, q, kk, v, y, lse, ork_cuda_kstream(k));
}
static ork_status be_attention_bwd(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                                   const void *v, const void *y, const float *lse, const void *dy, void *dq,
                                   void *dk, void *dv, void *ws, ork_dtype dt) {
    if (dt != ORK_BF16) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda attention: dtype %d (BF16 only)", (int)dt);
    ork_cudnn_sdpa_args s = sdpa_args(d);
    if (ork_cudnn_sdpa_eligible(&s) && q && kk && v && y && lse && dy) {
        ork_status st = ork_cudnn_sdpa_bwd(ork_cuda_ctx_device(ork_cuda_kctx(k)), &s, q, kk, v, y, lse, dy, dq,
                                           dk, dv, ws, ork_cuda_kstream(k));
        if (st != ORK_E_UNSUPPORTED) return st;
    }
    ork_cuda_attn_args a = attn_args(d);
    return ork_cuda_attn_bwd(&a, q, kk, v, y, lse, dy, dq, dk, dv, ws, ork_cuda_kstream(k));
}

/* ---- convolution: per image, col (Kc = Cin·kh·kw, P = Ho·Wo) ----
 * workspace: col + a copy of w in the activation dtype (Cout·Kc), 4 bytes each.
 * The forward takes the output positions in pieces of conv_cols columns, so its
 * col stays no larger than the image's own output (Cout·P, at 4 bytes) — or
 * 1/64 of its positions where the output is thin (Cout << Kc) — and under
 * ORK_CONV_COL_BYTES. Whole, a 3x3 conv's col is 9·Cin/Cout times its output:
 * a 1024² image's 64-channel conv needs 2.25 GiB (the latent encode's peak,
 * outside the plan's budget), and a no-grad encode that frees each activation
 * once read (ta->drop) was held up by its workspace (TAEF1: 4.5 full-resolution
 * activations of col beside ~3 live ones). The backward (dgrad's col2im gathers
 * over the whole col) keeps all P. */
#define ORK_CONV_COL_BYTES ((size_t)256 << 20)
static int64_t conv_cols(const ork_conv2d_desc *d) {
    const int64_t Kc = d->Cin * d->kh * d->kw, P = d->Ho * d->Wo;
    size_t cap = ORK_CONV_COL_BYTES;
    /* tests and A/B runs: the col's cap alone, from the environment (small: force
     * the pieces on small images; 262144: the pieces before the output rule) */
    const char *env = getenv("ORK_CONV_COL_KIB");
    const int by_env = env && atol(env) > 0;
    if (by_env) cap = (size_t)atol(env) << 10;
    const int64_t thin = (Kc > d->Cout ? d->Cout * P / Kc : P), least = (P + 63) / 64;
    int64_t c = by_env ? P : thin > least ? thin : least; /* col <= the output, or P/64 */
    if ((size_t)Kc * (size_t)c * 4 > cap) c = (int64_t)(cap / ((size_t)Kc * 4));
    if (c >= P) return P;
    c = c / 64 * 64; /* pieces start 64-aligned (the GEMM's C and B) */
    return c < 64 ? (P < 64 ? P : 64) : c;
}
static size_t be_conv2d_ws(const ork_conv2d_desc *d, int backward) {
    const int64_t Kc = d->Cin * d->kh * d->kw, cols = backward ? d->Ho * d->Wo : conv_cols(d);
    return (((size_t)Kc * (size_t)cols * 4 + 255) & ~(size_t)255) + (size_t)Kc * (size_t)d->Cout * 4 + 256;
}
static int conv_is_pointwise(const ork_conv2d_desc *d) {
    return d->kh == 1 && d->kw == 1 && d->stride == 1 && d->pad == 0;
}
/* The weight in the activation dtype: w itself, or a converted copy placed in ws. */
static ork_status conv_weight(const ork_kctx *k, const ork_conv2d_desc *d, const void *w, ork_dtype wdt,
                              ork_dtype dt, void *wsw, const void **out) {
    *out = w;
    if (wdt == dt) return ORK_OK;
    ORK_TRY(ork_cuda_axpby(k, d->Cout * d->Cin * d->kh * d->kw, 1.f, w, wdt, 0.f, wsw, dt));
    *out = wsw;
    return ORK_OK;
}
static ork_status be_conv2d(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *w,
                            const void *b, ork_dtype wdt, void *y, void *ws, ork_dtype dt) {
    const int64_t Kc = d->Cin * d->kh * d->kw, P = d->Ho * d->Wo;
    const int pw = conv_is_pointwise(d);
    const int64_t ccols = conv_cols(d), cols = pw ? P : ccols; /* ws laid out as be_conv2d_ws(d, 0) sized it */
    const size_t es = ork_dtype_size(dt);
    char *col = (char *)ws, *wsw = col + (((size_t)Kc * ccols * 4 + 255) & ~(size_t)255);
    const void *wd;
    ORK_TRY(conv_weight(k, d, w, wdt, dt, wsw, &wd));
    for (int64_t n = 0; n < d->N; n++) {
        const char *xn = (const char *)x + (size_t)n * d->Cin * d->H * d->W * es;
        for (int64_t p0 = 0; p0 < P; p0 += cols) { /* y_n[:, p0 .. p0 + pc) = w · col */
            const int64_t pc = P - p0 < cols ? P - p0 : cols;
            const void *B = xn;
            if (!pw) { ORK_TRY(ork_cuda_im2col(k, d, xn, col, dt, p0, pc)); B = col; }
            ork_gemm_desc g = {};
            g.M = d->Cout; g.N = pc; g.K = Kc; g.batch = 1; g.alpha = 1.f;
            g.A = wd; g.adt = dt; g.lda = Kc;
            g.B = B; g.bdt = dt; g.ldb = pw ? P : pc;
            g.C = (char *)y + ((size_t)n * d->Cout * P + p0) * es; g.cdt = dt; g.ldc = P;
            ORK_TRY(be_gemm(k, &g));
        }
    }
    if (b) ORK_TRY(ork_cuda_chan_bias(k, d->N, d->Cout, P, b, wdt, y, dt));
    return ORK_OK;
}
static ork_status be_conv2d_dgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *dy, const void *w,
                                  ork_dtype wdt, void *dx, void *ws, ork_dtype dt) {
    const int64_t Kc = d->Cin * d->kh * d->kw, P = d->Ho * d->Wo;
    const size_t es = ork_dtype_size(dt);
    char *col = (char *)ws, *wsw = col + (((size_t)Kc * P * es + 255) & ~(size_t)255);
    const void *wd;
    ORK_TRY(conv_weight(k, d, w, wdt, dt, wsw, &wd));
    int pw = conv_is_pointwise(d);
    for (int64_t n = 0; n < d->N; n++) {
        char *dxn = (char *)dx + (size_t)n * d->Cin * d->H * d->W * es;
        ork_gemm_desc g = {}; /* dcol (Kc, P) = wᵀ (Kc, Cout) · dy_n (Cout, P) */
        g.ta = 1; g.M = Kc; g.N = P; g.K = d->Cout; g.batch = 1; g.alpha = 1.f;
        g.A = wd; g.adt = dt; g.lda = Kc;
        g.B = (const char *)dy + (size_t)n * d->Cout * P * es; g.bdt = dt; g.ldb = P;
        g.C = pw ? (void *)dxn : (void *)col; g.cdt = dt; g.ldc = P;
        ORK_TRY(be_gemm(k, &g));
        if (!pw) ORK_TRY(ork_cuda_col2im(k, d, col, dxn, dt));
    }
    return ORK_OK;
}
static ork_status be_conv2d_wgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *dy,
                                  float *dw, float *db, void *ws, ork_dtype dt) {
    const int64_t Kc = d->Cin * d->kh * d->kw, P = d->Ho * d->Wo;
    const size_t es = ork_dtype_size(dt);
    if (dw) {
        for (int64_t n = 0; n < d->N; n++) {
            const char *xn = (const char *)x + (size_t)n * d->Cin * d->H * d->W * es;
            const void *B = xn;
            if (!conv_is_pointwise(d)) { ORK_TRY(ork_cuda_im2col(k, d, xn, ws, dt, 0, P)); B = ws; }
            ork_gemm_desc g = {}; /* dw (Cout, Kc) += dy_n (Cout, P) · colᵀ (P, Kc) */
            g.tb = 1; g.M = d->Cout; g.N = Kc; g.K = P; g.batch = 1; g.alpha = 1.f; g.beta = 1.f;
            g.A = (const char *)dy + (size_t)n * d->Cout * P * es; g.adt = dt; g.lda = P;
            g.B = B; g.bdt = dt; g.ldb = P;
            g.C = dw; g.cdt = ORK_F32; g.ldc = Kc;
            ORK_TRY(be_gemm(k, &g));
        }
    }
    if (db) ORK_TRY(ork_cuda_chan_sum(k, d->N, d->Cout, P, dy, dt, db));
    return ORK_OK;
}

/* cuda_qkv.cu: the fused q/k RMS norm + RoPE (backend.h's qkv_rope entries) */
ork_status ork_cuda_qkv_rope(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, void *q, void *kk, void *v,
                             float *rstd, ork_dtype dt);
ork_status ork_cuda_qkv_rope_bwd(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, const float *rstd,
                                 const void *dq, const void *dk, const void *dv, void *const *dqkv,
                                 float *const *dqw, float *const *dkw, ork_dtype dt);

static const ork_backend g_cuda = {
    "cuda", ORK_DEV_CUDA,
    be_ctx_create, be_ctx_destroy, ork_cuda_kstream,
    be_alloc, be_free, be_host_alloc, be_host_free, be_h2d, be_d2h, be_d2d, be_sync,
    ork_cuda_fill, ork_cuda_fill_scalar, ork_cuda_axpby, ork_cuda_copy,
    be_gemm,
    ork_cuda_binary, ork_cuda_binary_bwd, ork_cuda_modulate, ork_cuda_modulate_bwd,
    ork_cuda_layernorm, ork_cuda_layernorm_bwd, ork_cuda_rmsnorm, ork_cuda_rmsnorm_bwd,
    ork_cuda_unary, ork_cuda_unary_bwd, ork_cuda_swiglu, ork_cuda_swiglu_bwd,
    ork_cuda_rope, ork_cuda_rope_bwd,
    be_attention_ws, be_attention, be_attention_bwd,
    be_conv2d_ws, be_conv2d, be_conv2d_dgrad, be_conv2d_wgrad,
    ork_cuda_maxpool2x2, ork_cuda_maxpool2x2_bwd, ork_cuda_upsample2x, ork_cuda_upsample2x_bwd,
    ork_cuda_reduce, ork_cuda_mse, ork_cuda_mse_bwd,
    ork_cuda_groupnorm, ork_cuda_groupnorm_bwd, ork_cuda_softmax, ork_cuda_softmax_bwd,
    ork_cuda_dropout,
    be_linear_fp8_ws, be_linear_fp8,
    ork_cuda_restore_if_nonfinite,
    ork_cuda_embedding,
    ork_cuda_qkv_rope, ork_cuda_qkv_rope_bwd,
    ork_cuda_gated_add, ork_cuda_gated_add_bwd, ork_cuda_layernorm_modulate, ork_cuda_layernorm_modulate_bwd,
    be_fp8_ws, be_linear_fp8_dgrad,
};

const ork_backend *ork_cuda_backend(void) { return &g_cuda; }

} // extern "C"
