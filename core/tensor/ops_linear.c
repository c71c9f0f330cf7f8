/* tensor/ops_linear.c — linear (x W^T + b, with its LoRA branch and dropout or
 * its LoKr delta, dequantized or native FP8 weights: the forward and the input
 * gradient) and matmul, forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- linear (+ LoRA) ---------------------------------------------------------------- */

/* LoRA dropout (kohya/ai-toolkit: on the rank activation h = x·downᵀ): the mask
 * of one module in one micro-step is a function of the graph's dropout seed and
 * the weight's name, so the recompute redraws it exactly. */
static uint64_t lora_drop_seed(const ork_graph *g, const ork_tensor *w) {
    uint64_t h = 0xcbf29ce484222325ull ^ g->dropout_seed;
    for (const char *c = w->name ? w->name : ""; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    return h;
}
static uint64_t drop_threshold(float p) {
    double t = (double)p * 18446744073709551616.0;
    return t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t;
}

/* The dtype a quantized W is dequantized into for x's GEMMs: the activations'. */
static ork_status qscratch_dt(const ork_tensor *x, const ork_tensor *w, ork_dtype *dt) {
    if (x->dtype != ORK_BF16 && x->dtype != ORK_F32)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "linear: quantized weight %s needs bf16 or f32 activations, not %s", w->name,
                        ork_dtype_name(x->dtype));
    *dt = x->dtype;
    return ORK_OK;
}

/* W's values as a GEMM operand of dtype dt: W's own data, or for a quantized
 * W (w->q) a scratch from the arena dequantized into (stream-ordered), which
 * the caller releases with ork_arena_put(*scratch) once its GEMM is queued. */
static ork_status weight_operand(ork_graph *g, const ork_tensor *w, ork_dtype dt, const void **p, void **scratch) {
    *scratch = NULL;
    if (!w->q) {
        *p = D(w);
        return ORK_OK;
    }
    int64_t N = w->shape[0], K = w->shape[1]; /* w (N, K) -> scratch (N, K) of dt */
    ORK_TRY(ork_arena_get(g->arena, (size_t)(N * K) * ork_dtype_size(dt), scratch));
    ork_status s = w->q->dequantize(w->q->ctx, BE->device, KX->stream, D(w), w->q->scales, N, K, dt, *scratch);
    if (s != ORK_OK) {
        ork_arena_put(g->arena, *scratch);
        *scratch = NULL;
        return ORK_FAIL(s, "linear: dequantizing weight %s (%s) failed", w->name, ork_dtype_name(w->dtype));
    }
    *p = *scratch;
    return ORK_OK;
}

/* ---- LoKr (ork_lora.kind ORK_ADAPTER_LOKR) ---------------------------------------------------
 * ΔW (N, K) = scale · kron(w1 (a, c), w2 (b, d)), N = a·b, K = c·d: ΔW[i·b+k, j·d+l] =
 * scale · w1[i,j] · w2[k,l]. It is materialized into the GEMM operand (W + ΔW, like
 * ai-toolkit's LokrModule) and its gradient reduced from G = dyᵀ·x (docs/DECISIONS.md
 * "LoKr"): no kernel of its own, the backend's GEMM and strided copy. */

/* A parameter's values as the GEMMs below take them (F32·F32): rounded to the
 * activations' dtype adt first, as LoRA's cast copies are (so a BF16 shadow of an
 * F32 parameter, the streamed trainable state's, gives the same bits), then F32;
 * the parameter itself when both are F32. *tmp set when a copy was made (the
 * caller puts it). */
static ork_status lokr_f32(ork_graph *g, const ork_tensor *t, ork_dtype adt, const void **p, void **tmp) {
    *tmp = NULL;
    if (t->dtype == ORK_F32 && adt == ORK_F32) {
        *p = D(t);
        return ORK_OK;
    }
    int64_t n = ork_tensor_numel(t);
    ORK_TRY(ork_arena_get(g->arena, (size_t)n * 4, tmp));
    ork_status s = ORK_OK;
    if (t->dtype == ORK_F32 && adt != ORK_F32) { /* F32 -> adt -> F32 */
        void *r = NULL;
        s = ork_arena_get(g->arena, (size_t)n * ork_dtype_size(adt), &r);
        if (s == ORK_OK) s = BE->axpby(KX, n, 1.0f, D(t), ORK_F32, 0.0f, r, adt);
        if (s == ORK_OK) s = BE->axpby(KX, n, 1.0f, r, adt, 0.0f, *tmp, ORK_F32);
        if (r) ork_arena_put(g->arena, r);
    } else {
        s = BE->axpby(KX, n, 1.0f, D(t), t->dtype, 0.0f, *tmp, ORK_F32);
    }
    if (s != ORK_OK) {
        ork_arena_put(g->arena, *tmp);
        *tmp = NULL;
        return s;
    }
    *p = *tmp;
    return ORK_OK;
}

/* LoKr's w2 (b, d) as the GEMMs below take it (F32, x's dtype rounding): the
 * parameter up itself (ORK_ADAPTER_LOKR), or for ORK_ADAPTER_LOKR_LR (up packs
 * w2_a (b, r) over w2_bᵀ (d, r)) scale · w2_a · w2_b in *tmp; *u: up's F32 copy
 * when one was made. The caller puts *tmp and *u. */
static ork_status lokr_w2(ork_graph *g, const ork_tensor *up, int kind, int64_t b, int64_t d, float scale,
                          ork_dtype adt, const void **w2p, const void **up_f32, void **tmp, void **u) {
    *tmp = *u = NULL;
    if (kind != ORK_ADAPTER_LOKR_LR) {
        *up_f32 = NULL;
        return lokr_f32(g, up, adt, w2p, tmp);
    }
    int64_t r = up->shape[1];
    ORK_TRY(lokr_f32(g, up, adt, up_f32, u));
    ORK_TRY(ork_arena_get(g->arena, (size_t)(b * d) * 4, tmp));
    /* w2 (b, d) = scale · w2_a (b, r) · w2_b (r, d), w2_b stored transposed (d, r) */
    ork_gemm_desc e = {.tb = 1, .M = b, .N = d, .K = r, .batch = 1, .alpha = scale, .A = *up_f32, .adt = ORK_F32,
                       .lda = r, .B = (const float *)*up_f32 + b * r, .bdt = ORK_F32, .ldb = r, .C = *tmp,
                       .cdt = ORK_F32, .ldc = d};
    ORK_TRY(BE->gemm(KX, &e));
    *w2p = *tmp;
    return ORK_OK;
}

/* Bytes of the F32 buffers (P; G and G') one chunk of the LoKr helpers holds. */
#define LOKR_CHUNK_BYTES ((size_t)64 << 20)

/* The GEMM operand W + ΔW (N, K) of dtype dt in an arena scratch (*scratch, the
 * caller puts it once its GEMM is queued): W's values (dequantized when w->q),
 * then P = scale · vec(w1) · vec(w2)ᵀ added in kron order, a chunk of w1's rows
 * at a time (P of all of them is N·K F32: 264 MB for FLUX.1's linear1). */
static ork_status lokr_weight_operand(ork_graph *g, const ork_tensor *w, const ork_lora *lo, ork_dtype dt,
                                      ork_dtype adt, const void **p, void **scratch) {
    int64_t N = w->shape[0], K = w->shape[1];
    int64_t a = lo->down->shape[0], c = lo->down->shape[1], b = N / a, d = K / c;
    const int lr = lo->kind == ORK_ADAPTER_LOKR_LR;
    const void *wp, *uf = NULL;
    void *wq = NULL, *P = NULL, *c1 = NULL, *c2 = NULL, *cu = NULL;
    ORK_TRY(ork_arena_get(g->arena, (size_t)(N * K) * ork_dtype_size(dt), scratch));
    ork_status s = weight_operand(g, w, dt, &wp, &wq);
    if (s == ORK_OK && !wq) s = BE->axpby(KX, N * K, 1.0f, wp, w->dtype, 0.0f, *scratch, dt);
    if (s == ORK_OK && wq) s = BE->axpby(KX, N * K, 1.0f, wq, dt, 0.0f, *scratch, dt);
    if (wq) ork_arena_put(g->arena, wq);
    const void *w1p = NULL, *w2p = NULL;
    if (s == ORK_OK) s = lokr_f32(g, lo->down, adt, &w1p, &c1);
    if (s == ORK_OK) s = lokr_w2(g, lo->up, lo->kind, b, d, lo->scale, adt, &w2p, &uf, &c2, &cu);
    int64_t ci = (int64_t)(LOKR_CHUNK_BYTES / ((size_t)(c * b * d) * 4));
    if (ci < 1) ci = 1;
    if (ci > a) ci = a;
    if (s == ORK_OK) s = ork_arena_get(g->arena, (size_t)(ci * c * b * d) * 4, &P);
    for (int64_t i0 = 0; s == ORK_OK && i0 < a; i0 += ci) {
        int64_t ni = a - i0 < ci ? a - i0 : ci;
        /* P (ni·c, b·d) = scale · vec(w1[i0 ..]) (ni·c, 1) · vec(w2)ᵀ (1, b·d) */
        ork_gemm_desc e = {.M = ni * c, .N = b * d, .K = 1, .batch = 1, .alpha = lr ? 1.0f : lo->scale,
                           .A = (const float *)w1p + i0 * c, .adt = ORK_F32, .lda = 1, .B = w2p, .bdt = ORK_F32,
                           .ldb = b * d, .C = P, .cdt = ORK_F32, .ldc = b * d};
        s = BE->gemm(KX, &e);
        if (s == ORK_OK) { /* scratch[i·b+k, j·d+l] += P[(i-i0)·c+j, k·d+l], over (i, k, j, l) */
            ork_copy_desc cd = {.ndim = 4, .shape = {ni, b, c, d}, .src_stride = {c * b * d, d, b * d, 1},
                                .dst_stride = {b * K, K, d, 1}, .sdt = ORK_F32, .ddt = dt, .accumulate = 1};
            s = BE->copy(KX, &cd, P, (char *)*scratch + (size_t)(i0 * b * K) * ork_dtype_size(dt));
        }
    }
    if (P) ork_arena_put(g->arena, P);
    if (c1) ork_arena_put(g->arena, c1);
    if (c2) ork_arena_put(g->arena, c2);
    if (cu) ork_arena_put(g->arena, cu);
    if (s != ORK_OK) {
        ork_arena_put(g->arena, *scratch);
        *scratch = NULL;
        return ORK_FAIL(s, "linear (LoKr): building W + kron(w1, w2) for weight %s failed", w->name);
    }
    *p = *scratch;
    return ORK_OK;
}

/* dw1 (a, c) and dw2 (b, d) from G (N, K) = scale · dyᵀ · x, permuted to
 * G' (a·c, b·d): dw1 = G' · vec(w2), dw2 = vec(w1)ᵀ · G' (w1, w2 as the forward
 * took them: rounded to x's dtype). G is made a chunk of w1's rows i at a time
 * (rows i·b .. of G, rows i·c .. of G'), so the two F32 buffers stay within
 * LOKR_CHUNK_BYTES (a whole G of FLUX.1's linear1 would be 264 MB). */
static ork_status lokr_param_grads(ork_graph *g, const ork_tensor *dy, const ork_tensor *x, int64_t M, float scale,
                                   int kind, int64_t N, int64_t K, ork_tensor *w1, ork_tensor *w2) {
    int64_t a = w1->shape[0], c = w1->shape[1], b = N / a, d = K / c;
    const int lr = kind == ORK_ADAPTER_LOKR_LR;
    int64_t ci = (int64_t)(LOKR_CHUNK_BYTES / ((size_t)(b * K) * 8));
    if (ci < 1) ci = 1;
    if (ci > a) ci = a;
    void *G = NULL, *Gp = NULL, *c1 = NULL, *c2 = NULL, *cu = NULL, *T = NULL;
    const void *w1p = NULL, *w2p = NULL, *uf = NULL;
    float *g1 = NULL, *g2 = NULL, *gu = NULL;
    ork_tensor *t1 = NULL, *t2 = NULL;
    ork_status s = f32_accum_target(g, w1, &g1, &t1);
    if (s == ORK_OK) s = f32_accum_target(g, w2, lr ? &gu : &g2, &t2);
    if (s == ORK_OK && lr && gu) { /* dw2 (b, d) into a zeroed temp, then to w2_a, w2_b below */
        s = ork_arena_get(g->arena, (size_t)(b * d) * 4, &T);
        if (s == ORK_OK) s = BE->fill(KX, b * d, 0.0f, T, ORK_F32);
        g2 = T;
    }
    if (s == ORK_OK && (g1 || lr)) s = lokr_w2(g, w2, kind, b, d, scale, x->dtype, &w2p, &uf, &c2, &cu);
    if (s == ORK_OK && g2) s = lokr_f32(g, w1, x->dtype, &w1p, &c1);
    const float lr_scale = scale;
    if (lr) scale = 1.0f; /* ΔW = kron(w1, w2) with the scale inside w2 */
    if (s == ORK_OK) s = ork_arena_get(g->arena, (size_t)(ci * b * K) * 4, &G);
    if (s == ORK_OK) s = ork_arena_get(g->arena, (size_t)(ci * b * K) * 4, &Gp);
    for (int64_t i0 = 0; s == ORK_OK && i0 < a; i0 += ci) {
        int64_t ni = a - i0 < ci ? a - i0 : ci, rows = ni * b;
        { /* G (rows, K) = scale · dy[:, i0·b ..]ᵀ (rows, M) · x (M, K) */
            const char *dyp = (const char *)D(dy) + (size_t)(i0 * b) * ork_dtype_size(dy->dtype);
            ork_gemm_desc e = {.ta = 1, .M = rows, .N = K, .K = M, .batch = 1, .alpha = scale, .A = dyp,
                               .adt = dy->dtype, .lda = N, .B = D(x), .bdt = x->dtype, .ldb = K, .C = G,
                               .cdt = ORK_F32, .ldc = K};
            s = BE->gemm(KX, &e);
        }
        if (s == ORK_OK) { /* G'[i·c+j, k·d+l] = G[i·b+k, j·d+l], over (i, k, j, l) of the chunk */
            ork_copy_desc cd = {.ndim = 4, .shape = {ni, b, c, d}, .src_stride = {b * K, K, d, 1},
                                .dst_stride = {c * b * d, d, b * d, 1}, .sdt = ORK_F32, .ddt = ORK_F32};
            s = BE->copy(KX, &cd, G, Gp);
        }
        if (s == ORK_OK && g1) { /* dw1[i0·c ..] (ni·c, 1) += G' (ni·c, b·d) · vec(w2) (b·d, 1) */
            ork_gemm_desc e = {.M = ni * c, .N = 1, .K = b * d, .batch = 1, .alpha = 1.0f, .beta = 1.0f, .A = Gp,
                               .adt = ORK_F32, .lda = b * d, .B = w2p, .bdt = ORK_F32, .ldb = 1, .C = g1 + i0 * c,
                               .cdt = ORK_F32, .ldc = 1};
            s = BE->gemm(KX, &e);
        }
        if (s == ORK_OK && g2) { /* dw2 (1, b·d) += vec(w1[i0 ..])ᵀ (1, ni·c) · G' (ni·c, b·d) */
            ork_gemm_desc e = {.M = 1, .N = b * d, .K = ni * c, .batch = 1, .alpha = 1.0f, .beta = 1.0f,
                               .A = (const float *)w1p + i0 * c, .adt = ORK_F32, .lda = ni * c, .B = Gp,
                               .bdt = ORK_F32, .ldb = b * d, .C = g2, .cdt = ORK_F32, .ldc = b * d};
            s = BE->gemm(KX, &e);
        }
    }
    if (s == ORK_OK && lr && gu) { /* w2 = scale · w2_a · w2_b: dw2_a = scale · dw2 · w2_bᵀ, dw2_b = scale · w2_aᵀ · dw2 */
        int64_t r = w2->shape[1];
        const float *ua = uf, *ub = (const float *)uf + b * r; /* w2_a (b, r), w2_bᵀ (d, r) */
        ork_gemm_desc e = {.M = b, .N = r, .K = d, .batch = 1, .alpha = lr_scale, .beta = 1.0f, .A = T, .adt = ORK_F32,
                           .lda = d, .B = ub, .bdt = ORK_F32, .ldb = r, .C = gu, .cdt = ORK_F32, .ldc = r};
        s = BE->gemm(KX, &e); /* (b, r) += (b, d) · (d, r) */
        if (s == ORK_OK) { /* rows b.. hold dw2_bᵀ (d, r) += dw2ᵀ (d, b) · w2_a (b, r) */
            ork_gemm_desc f = {.ta = 1, .M = d, .N = r, .K = b, .batch = 1, .alpha = lr_scale, .beta = 1.0f, .A = T,
                               .adt = ORK_F32, .lda = d, .B = ua, .bdt = ORK_F32, .ldb = r, .C = gu + b * r,
                               .cdt = ORK_F32, .ldc = r};
            s = BE->gemm(KX, &f);
        }
    }
    if (T) ork_arena_put(g->arena, T);
    if (cu) ork_arena_put(g->arena, cu);
    if (G) ork_arena_put(g->arena, G);
    if (Gp) ork_arena_put(g->arena, Gp);
    if (c1) ork_arena_put(g->arena, c1);
    if (c2) ork_arena_put(g->arena, c2);
    if (s == ORK_OK && t1) s = ork_grad_push(g, w1, t1);
    if (s == ORK_OK && t2) s = ork_grad_push(g, w2, t2);
    return s;
}

/* Path (b), g->fp8_gemm native: y (M, N) = x (M, K) · wᵀ on the backend's FP8
 * GEMM from w's fp8 bytes and per-row scales (no dequantized scratch); *bias_done
 * when b went through its epilogue. *done 0: not taken (not an fp8 weight, or the
 * backend cannot take this layer: one WARN per graph), the caller runs path (a). */
static ork_status linear_native(ork_graph *g, const ork_tensor *x, const ork_tensor *w, const ork_tensor *b,
                                int64_t M, int64_t N, int64_t K, ork_tensor *y, int *done, int *bias_done) {
    *done = *bias_done = 0;
    if (w->dtype != ORK_F8_E4M3 && w->dtype != ORK_F8_E5M2) return ORK_OK; /* bf16/none quantizers: nothing to do */
    char why[256] = "";
    const char *no = NULL;
    if (!BE->linear_fp8 || !BE->linear_fp8_ws) no = "the backend has no native FP8 GEMM";
    else if (x->dtype != ORK_BF16) no = "the activations are not bf16";
    else if (w->q->block != 0 || w->q->n_scales != N || !w->q->scales)
        no = "the weight has block scales (block_size 128); native needs one scale per output row";
    if (!no) {
        void *ws;
        size_t wsb = BE->fp8_ws ? BE->fp8_ws(KX, 0, M, N, K) : BE->linear_fp8_ws(M, K);
        ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
        int ep = b && b->dtype == ORK_BF16;
        ork_fp8_linear_desc d = {.M = M, .N = N, .K = K, .x = D(x), .w = D(w), .wdt = w->dtype, .w_scale = w->q->scales,
                                 .bias = ep ? D(b) : NULL, .y = D(y), .ws = ws, .why = why, .why_n = sizeof why,
                                 .ws_bytes = wsb};
        ork_status s = BE->linear_fp8(KX, &d);
        ork_arena_put(g->arena, ws);
        if (s == ORK_OK) {
            *done = 1;
            *bias_done = ep;
            return ORK_OK;
        }
        if (s != ORK_E_UNSUPPORTED) return ORK_FAIL(s, "linear: native fp8 GEMM of weight %s failed", w->name);
        no = why;
    }
    if (!g->fp8_warned) {
        g->fp8_warned = 1;
        ORK_WARN("linear: native fp8 GEMM not used for %s (M=%lld N=%lld K=%lld): %s; dequantizing to bf16 for it "
                 "and any other such layer (logged once)", w->name, (long long)M, (long long)N, (long long)K, no);
    }
    return ORK_OK;
}

/* Path (b) of the input gradient, g->fp8_gemm native: dx (M, K) = dy (M, N) · w on
 * the backend's FP8 GEMM (w's per-row scales folded into dy's columns, w's bytes
 * transposed into a scratch: cuda_gemm_fp8.h). *done 0: not taken (as
 * linear_native: one WARN per graph), the caller dequantizes w. */
static ork_status linear_native_dgrad(ork_graph *g, const ork_tensor *dy, const ork_tensor *w, int64_t M, int64_t N,
                                      int64_t K, ork_tensor *dx, int *done) {
    *done = 0;
    if (w->dtype != ORK_F8_E4M3 && w->dtype != ORK_F8_E5M2) return ORK_OK;
    char why[256] = "";
    const char *no = NULL;
    if (!BE->linear_fp8_dgrad || !BE->fp8_ws) no = "the backend has no native FP8 input-gradient GEMM";
    else if (dy->dtype != ORK_BF16 || dx->dtype != ORK_BF16) no = "the gradients are not bf16";
    else if (w->q->block != 0 || w->q->n_scales != N || !w->q->scales)
        no = "the weight has block scales (block_size 128); native needs one scale per output row";
    if (!no) {
        void *ws;
        size_t wsb = BE->fp8_ws(KX, 1, M, N, K);
        ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
        ork_fp8_linear_desc d = {.M = M, .N = N, .K = K, .x = D(dy), .w = D(w), .wdt = w->dtype,
                                 .w_scale = w->q->scales, .y = D(dx), .ws = ws, .why = why, .why_n = sizeof why,
                                 .ws_bytes = wsb};
        ork_status s = BE->linear_fp8_dgrad(KX, &d);
        ork_arena_put(g->arena, ws);
        if (s == ORK_OK) {
            *done = 1;
            return ORK_OK;
        }
        if (s != ORK_E_UNSUPPORTED)
            return ORK_FAIL(s, "linear: native fp8 input-gradient GEMM of weight %s failed", w->name);
        no = why;
    }
    if (!g->fp8_warned) {
        g->fp8_warned = 1;
        ORK_WARN("linear: native fp8 GEMM not used for the input gradient of %s (M=%lld N=%lld K=%lld): %s; "
                 "dequantizing to bf16 for it and any other such layer (logged once)", w->name, (long long)M,
                 (long long)N, (long long)K, no);
    }
    return ORK_OK;
}

/* in: x (M, K), w (N, K), b (N), down (r, K), up (N, r); aux[0]: h (M, r).
 * LoKr (p.i[6]): in[3] w1 (a, c), in[4] w2 (b, d), no aux. */
static ork_status linear_bwd(ork_graph *g, ork_tape_node *n) {
    const int lokr = n->p.i[6] == ORK_ADAPTER_LOKR || n->p.i[6] == ORK_ADAPTER_LOKR_LR;
    ork_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out[0];
    ork_tensor *down = lokr ? NULL : n->in[3], *up = lokr ? NULL : n->in[4];
    ork_tensor *dy = y->grad;
    int64_t K = x->shape[x->ndim - 1], N = w->shape[0], M = ork_tensor_numel(x) / (K ? K : 1);
    int64_t r = down ? down->shape[0] : 0;
    float scale = n->p.f[0];
    void *h = n->naux ? n->aux[0] : NULL;
    /* LoRA weights in another dtype than the activations run their GEMMs from
     * the forward's cast copies (aux[1], aux[2]): CUDA GEMMs take one dtype. */
    int cast = n->p.f[1] != 0.0f;
    const void *downp = down ? (cast ? n->aux[1] : D(down)) : NULL, *upp = up ? (cast ? n->aux[2] : D(up)) : NULL;
    ork_dtype ldt = down ? (cast ? x->dtype : down->dtype) : x->dtype;
    ork_tensor *dh = NULL;
    if (down && (needs(x) || needs(down))) {
        /* dh (M, r) = scale · dy (M, N) · up (N, r) */
        int64_t sh[2] = {M, r};
        ORK_TRY(new_t(g, dy->dtype, 2, sh, &dh));
        ork_gemm_desc d = {.M = M, .N = r, .K = N, .batch = 1, .alpha = scale, .A = D(dy), .adt = dy->dtype,
                           .lda = N, .B = upp, .bdt = ldt, .ldb = r, .C = D(dh), .cdt = dh->dtype, .ldc = r};
        ORK_TRY(BE->gemm(KX, &d));
        float pd = n->p.f[2];
        if (pd > 0.0f && BE->dropout) { /* the forward's mask, on the gradient of h */
            uint64_t sd = (uint64_t)(uint32_t)n->p.i[4] | ((uint64_t)(uint32_t)n->p.i[5] << 32);
            ORK_TRY(BE->dropout(KX, M * r, sd, drop_threshold(pd), 1.0f / (1.0f - pd), D(dh), dh->dtype));
        }
    }
    if (needs(x)) {
        ork_tensor *dx;
        ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
        /* dx (M, K) = dy (M, N) · w (N, K) [+ dh (M, r) · down (r, K)]; a quantized
         * w: path (b) when g->fp8_gemm is native and the backend takes it, else it is
         * dequantized again here (no scratch lives from forward to backward) */
        int native = 0;
        if (w->q && !lokr && g->fp8_gemm == ORK_FP8_GEMM_NATIVE)
            ORK_TRY(linear_native_dgrad(g, dy, w, M, N, K, dx, &native));
        if (!native) {
            const void *wp;
            void *wq = NULL;
            ork_dtype wdt = w->dtype;
            if (w->q) ORK_TRY(qscratch_dt(x, w, &wdt));
            if (lokr) { /* dx through W + ΔW, rebuilt as in the forward */
                ork_lora lk = {.down = n->in[3], .up = n->in[4], .scale = scale, .kind = n->p.i[6]};
                ORK_TRY(lokr_weight_operand(g, w, &lk, wdt, x->dtype, &wp, &wq));
            } else {
                ORK_TRY(weight_operand(g, w, wdt, &wp, &wq));
            }
            ork_gemm_desc d = {.M = M, .N = K, .K = N, .batch = 1, .alpha = 1.0f, .A = D(dy), .adt = dy->dtype,
                               .lda = N, .B = wp, .bdt = wdt, .ldb = K, .C = D(dx), .cdt = dx->dtype, .ldc = K};
            ork_status gs = BE->gemm(KX, &d);
            if (wq) ork_arena_put(g->arena, wq);
            ORK_TRY(gs);
        }
        if (dh) {
            ork_gemm_desc e = {.M = M, .N = K, .K = r, .batch = 1, .alpha = 1.0f, .beta = 1.0f, .A = D(dh),
                               .adt = dh->dtype, .lda = r, .B = downp, .bdt = ldt, .ldb = K, .C = D(dx),
                               .cdt = dx->dtype, .ldc = K};
            ORK_TRY(BE->gemm(KX, &e));
        }
        ORK_TRY(ork_grad_push(g, x, dx));
    }
    if (needs(w)) { /* dw (N, K) = dyᵀ (N, M) · x (M, K) */
        ork_gemm_desc d = {.ta = 1, .M = N, .N = K, .K = M, .batch = 1, .alpha = 1.0f, .A = D(dy), .adt = dy->dtype,
                           .lda = N, .B = D(x), .bdt = x->dtype, .ldb = K, .ldc = K};
        ORK_TRY(gemm_to_grad(g, w, &d));
    }
    if (needs(b)) { /* db (N) = Σ_rows dy */
        ork_bcast bc = {.ndim = 2, .shape = {M, N}, .bstride = {0, 1}, .n = M * N, .nb = N};
        ork_tensor *db;
        ORK_TRY(ork_grad_new(g, b, gdt_of(b), &db));
        ORK_TRY(BE->binary_bwd(KX, ORK_BINARY_ADD, &bc, NULL, NULL, b->dtype, D(dy), dy->dtype, NULL, D(db), db->dtype));
        ORK_TRY(ork_grad_push(g, b, db));
    }
    if (needs(up)) { /* dup (N, r) = scale · dyᵀ (N, M) · h (M, r) */
        ork_gemm_desc d = {.ta = 1, .M = N, .N = r, .K = M, .batch = 1, .alpha = scale, .A = D(dy), .adt = dy->dtype,
                           .lda = N, .B = h, .bdt = x->dtype, .ldb = r, .ldc = r};
        ORK_TRY(gemm_to_grad(g, up, &d));
    }
    if (needs(down)) { /* ddown (r, K) = dhᵀ (r, M) · x (M, K) */
        ork_gemm_desc d = {.ta = 1, .M = r, .N = K, .K = M, .batch = 1, .alpha = 1.0f, .A = D(dh), .adt = dh->dtype,
                           .lda = r, .B = D(x), .bdt = x->dtype, .ldb = K, .ldc = K};
        ORK_TRY(gemm_to_grad(g, down, &d));
    }
    if (lokr && (needs(n->in[3]) || needs(n->in[4])))
        ORK_TRY(lokr_param_grads(g, dy, x, M, scale, n->p.i[6], N, K, n->in[3], n->in[4]));
    if (dh) ork_arena_put(g->arena, dh->base);
    return ORK_OK;
}

ork_status ork_op_linear(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, ork_tensor **y) {
    static const char *OP = "linear";
    LIVE(x); LIVE(w);
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return shape_fail(OP, "x (..., K) needs w (N, K)", x, w);
    if (w->q) {
        if (w->requires_grad)
            return ORK_FAIL(ORK_E_INVALID, "linear: weight %s is quantized (%s) and cannot be trained; "
                            "quantized weights are frozen", w->name, ork_dtype_name(w->dtype));
        if (!w->q->dequantize) return ORK_FAIL(ORK_E_INTERNAL, "linear: quantized weight %s has no dequantize", w->name);
    } else if (w->dtype != ORK_F32 && w->dtype != ORK_BF16 && w->dtype != ORK_F16) {
        return ORK_FAIL(ORK_E_UNSUPPORTED, "linear: weight %s has dtype %s without a quantizer's scales "
                        "(ork_tensor.q); only the weight store makes quantized weights", w->name,
                        ork_dtype_name(w->dtype));
    }
    ork_dtype wdt = w->dtype;
    if (w->q) ORK_TRY(qscratch_dt(x, w, &wdt));
    int64_t K = w->shape[1], N = w->shape[0], M = ork_tensor_numel(x) / (K ? K : 1);
    if (b) {
        LIVE(b);
        if (ork_tensor_numel(b) != N) return shape_fail(OP, "bias must have N elements", b, w);
    }
    ork_lora *lo = w->lora;
    const int lokr = lo && (lo->kind == ORK_ADAPTER_LOKR || lo->kind == ORK_ADAPTER_LOKR_LR);
    if (lokr) {
        LIVE(lo->down); LIVE(lo->up);
        int64_t a = lo->down->ndim == 2 ? lo->down->shape[0] : 0, c = lo->down->ndim == 2 ? lo->down->shape[1] : 0;
        int ok = a > 0 && c > 0 && N % a == 0 && K % c == 0 && lo->up->ndim == 2;
        if (ok && lo->kind == ORK_ADAPTER_LOKR) ok = lo->up->shape[0] == N / a && lo->up->shape[1] == K / c;
        if (ok && lo->kind == ORK_ADAPTER_LOKR_LR) ok = lo->up->shape[0] == N / a + K / c && lo->up->shape[1] > 0;
        if (!ok)
            return shape_fail("linear (LoKr)", "needs w1 (a, c) and w2 (b, d), or w2_a over w2_bᵀ (b + d, r), with "
                              "a·b = N, c·d = K", lo->down, lo->up);
    } else if (lo) {
        LIVE(lo->down); LIVE(lo->up);
        if (lo->down->ndim != 2 || lo->up->ndim != 2 || lo->down->shape[1] != K || lo->up->shape[0] != N ||
            lo->up->shape[1] != lo->down->shape[0])
            return shape_fail("linear (LoRA)", "needs down (r, K) and up (N, r)", lo->down, lo->up);
    }
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 1] = N;
    ORK_TRY(new_t(g, x->dtype, x->ndim, sh, y));
    /* y (M, N) = x (M, K) · wᵀ; a quantized w: path (b) when g->fp8_gemm is native and
     * the backend takes it, else its dequantized scratch, released after the GEMM.
     * LoKr: y = x · (W + ΔW)ᵀ on the materialized operand (never native) */
    int native = 0, bias_done = 0;
    if (w->q && !lokr && g->fp8_gemm == ORK_FP8_GEMM_NATIVE)
        ORK_TRY(linear_native(g, x, w, b, M, N, K, *y, &native, &bias_done));
    if (!native) {
        const void *wp;
        void *wq;
        if (lokr) ORK_TRY(lokr_weight_operand(g, w, lo, wdt, x->dtype, &wp, &wq));
        else ORK_TRY(weight_operand(g, w, wdt, &wp, &wq));
        ork_gemm_desc d = {.tb = 1, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1.0f, .A = D(x), .adt = x->dtype,
                           .lda = K, .B = wp, .bdt = wdt, .ldb = K, .C = D(*y), .cdt = x->dtype, .ldc = N};
        ork_status gs = BE->gemm(KX, &d);
        if (wq) ork_arena_put(g->arena, wq);
        ORK_TRY(gs);
    }
    if (b && !bias_done) {
        ork_bcast bc = {.ndim = 2, .shape = {M, N}, .bstride = {0, 1}, .n = M * N, .nb = N};
        ORK_TRY(BE->binary(KX, ORK_BINARY_ADD, &bc, D(*y), D(b), b->dtype, D(*y), x->dtype));
    }
    void *h = NULL, *dc = NULL, *uc = NULL;
    if (lo && !lokr) {
        int64_t r = lo->down->shape[0];
        const void *downp = D(lo->down), *upp = D(lo->up);
        ork_dtype ldt = lo->down->dtype;
        if (lo->down->dtype != x->dtype || lo->up->dtype != x->dtype) {
            /* F32 master weights, BF16 activations: GEMM on activation-dtype copies */
            size_t es = ork_dtype_size(x->dtype);
            ORK_TRY(ork_arena_get(g->arena, (size_t)(r * K) * es, &dc));
            ORK_TRY(ork_arena_get(g->arena, (size_t)(N * r) * es, &uc));
            ORK_TRY(BE->axpby(KX, r * K, 1.0f, D(lo->down), lo->down->dtype, 0.0f, dc, x->dtype));
            ORK_TRY(BE->axpby(KX, N * r, 1.0f, D(lo->up), lo->up->dtype, 0.0f, uc, x->dtype));
            downp = dc;
            upp = uc;
            ldt = x->dtype;
        }
        ORK_TRY(ork_arena_get(g->arena, (size_t)(M * r) * ork_dtype_size(x->dtype), &h));
        /* h (M, r) = x · downᵀ;  y += scale · h · upᵀ */
        ork_gemm_desc e = {.tb = 1, .M = M, .N = r, .K = K, .batch = 1, .alpha = 1.0f, .A = D(x), .adt = x->dtype,
                           .lda = K, .B = downp, .bdt = ldt, .ldb = K, .C = h, .cdt = x->dtype,
                           .ldc = r};
        ORK_TRY(BE->gemm(KX, &e));
        if (lo->dropout > 0.0f && g->dropout_seed && BE->dropout)
            ORK_TRY(BE->dropout(KX, M * r, lora_drop_seed(g, w), drop_threshold(lo->dropout), 1.0f / (1.0f - lo->dropout),
                                h, x->dtype));
        ork_gemm_desc f = {.tb = 1, .M = M, .N = N, .K = r, .batch = 1, .alpha = lo->scale, .beta = 1.0f, .A = h,
                           .adt = x->dtype, .lda = r, .B = upp, .bdt = ldt, .ldb = r, .C = D(*y),
                           .cdt = x->dtype, .ldc = N};
        ORK_TRY(BE->gemm(KX, &f));
    }
    ork_tensor *in[5] = {x, w, b, lo ? lo->down : NULL, lo ? lo->up : NULL};
    if (!wants(g, 5, in)) {
        if (h) ork_arena_put(g->arena, h);
        if (dc) ork_arena_put(g->arena, dc);
        if (uc) ork_arena_put(g->arena, uc);
        return ORK_OK;
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, linear_bwd, 5, in, 1, y, &n));
    ork_tape_save(n, x);
    n->p.f[0] = lo ? lo->scale : 0.0f;
    n->p.f[1] = dc ? 1.0f : 0.0f;
    n->p.f[2] = (lo && !lokr && g->dropout_seed) ? lo->dropout : 0.0f;
    n->p.i[6] = lokr ? lo->kind : ORK_ADAPTER_LORA;
    if (n->p.f[2] > 0.0f) {
        uint64_t sd = lora_drop_seed(g, w);
        n->p.i[4] = (int)(uint32_t)sd;
        n->p.i[5] = (int)(uint32_t)(sd >> 32);
    }
    if (h) n->aux[n->naux++] = h;
    if (dc) { n->aux[n->naux++] = dc; n->aux[n->naux++] = uc; }
    return ORK_OK;
}

/* ---- matmul ------------------------------------------------------------------------------------- */

/* p.i: ta, tb; M, N, K, batch recomputed from the inputs. */
static void mm_dims(const ork_tensor *a, const ork_tensor *b, int ta, int tb, int64_t *M, int64_t *N, int64_t *K,
                    int64_t *batch) {
    int r = a->ndim;
    *M = ta ? a->shape[r - 1] : a->shape[r - 2];
    *K = ta ? a->shape[r - 2] : a->shape[r - 1];
    *N = tb ? b->shape[r - 2] : b->shape[r - 1];
    *batch = 1;
    for (int i = 0; i < r - 2; i++) *batch *= a->shape[i];
}

static ork_status matmul_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *a = n->in[0], *b = n->in[1], *dy = n->out[0]->grad;
    int ta = n->p.i[0], tb = n->p.i[1];
    int64_t M, N, K, B;
    mm_dims(a, b, ta, tb, &M, &N, &K, &B);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (needs(a)) {
        ork_gemm_desc d = {.batch = B, .alpha = 1.0f, .stride_a = 0, .stride_c = M * K};
        if (!ta) { /* dA (M, K) = dY (M, N) · op(B)ᵀ (N, K) */
            d.M = M; d.N = K; d.K = N;
            d.A = D(dy); d.adt = dy->dtype; d.lda = N; d.stride_a = M * N;
            d.B = D(b); d.bdt = b->dtype; d.tb = !tb; d.ldb = ldb; d.stride_b = K * N;
            d.ldc = K;
        } else {    /* dA stored (K, M) = op(B) (K, N) · dYᵀ (N, M) */
            d.M = K; d.N = M; d.K = N;
            d.A = D(b); d.adt = b->dtype; d.ta = tb; d.lda = ldb; d.stride_a = K * N;
            d.B = D(dy); d.bdt = dy->dtype; d.tb = 1; d.ldb = N; d.stride_b = M * N;
            d.ldc = M;
        }
        ORK_TRY(gemm_to_grad(g, a, &d));
    }
    if (needs(b)) {
        ork_gemm_desc d = {.batch = B, .alpha = 1.0f, .stride_c = K * N};
        if (!tb) { /* dB (K, N) = op(A)ᵀ (K, M) · dY (M, N) */
            d.M = K; d.N = N; d.K = M;
            d.A = D(a); d.adt = a->dtype; d.ta = !ta; d.lda = lda; d.stride_a = M * K;
            d.B = D(dy); d.bdt = dy->dtype; d.ldb = N; d.stride_b = M * N;
            d.ldc = N;
        } else {   /* dB stored (N, K) = dYᵀ (N, M) · op(A) (M, K) */
            d.M = N; d.N = K; d.K = M;
            d.A = D(dy); d.adt = dy->dtype; d.ta = 1; d.lda = N; d.stride_a = M * N;
            d.B = D(a); d.bdt = a->dtype; d.tb = ta; d.ldb = lda; d.stride_b = M * K;
            d.ldc = K;
        }
        ORK_TRY(gemm_to_grad(g, b, &d));
    }
    return ORK_OK;
}

ork_status ork_op_matmul(ork_graph *g, ork_tensor *a, ork_tensor *b, int ta, int tb, ork_tensor **y) {
    static const char *OP = "matmul";
    LIVE(a); LIVE(b);
    ta = ta != 0;
    tb = tb != 0;
    if (a->ndim < 2 || a->ndim != b->ndim) return shape_fail(OP, "a and b need the same rank >= 2", a, b);
    for (int i = 0; i < a->ndim - 2; i++)
        if (a->shape[i] != b->shape[i]) return shape_fail(OP, "leading dims differ", a, b);
    int64_t M, N, K, B, Kb;
    mm_dims(a, b, ta, tb, &M, &N, &K, &B);
    Kb = tb ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    if (K != Kb) return shape_fail(OP, "inner dims differ", a, b);
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, a->shape, sizeof sh);
    sh[a->ndim - 2] = M;
    sh[a->ndim - 1] = N;
    ORK_TRY(new_t(g, a->dtype, a->ndim, sh, y));
    ork_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .batch = B, .alpha = 1.0f, .A = D(a),
                       .adt = a->dtype, .lda = ta ? M : K, .stride_a = M * K, .B = D(b), .bdt = b->dtype,
                       .ldb = tb ? K : N, .stride_b = K * N, .C = D(*y), .cdt = a->dtype, .ldc = N, .stride_c = M * N};
    ORK_TRY(BE->gemm(KX, &d));
    ork_tensor *in[2] = {a, b};
    if (!wants(g, 2, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, matmul_bwd, 2, in, 1, y, &n));
    ork_tape_save(n, a);
    ork_tape_save(n, b);
    n->p.i[0] = ta;
    n->p.i[1] = tb;
    return ORK_OK;
}
