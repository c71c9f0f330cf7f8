/* tensor/ops_text.c — the ops the text encoders (T5, CLIP) brought to the ops
 * service (ABI 1.3): a row gather (embedding), attention with additive biases
 * (T5's relative position bias, padding masks, CLIP's causal mask) whose scores
 * and softmax are F32, computed in slices of whole sequences (at most
 * ORK_ATTN_BIAS_SLICE of scores at once; on CUDA the biases, softmax and the
 * cast to the probabilities' dtype are one kernel, cuda/cuda_text.cu), and two compositions of recorded ops (quick_gelu,
 * layernorm_affine) that get their backward from the ops they are made of.
 * embedding and attention_bias are forward only: recording them (an input that
 * requires grad, grad enabled) fails with one line. Owns nothing. [control-thread] */
#include "tensor/ops_text.h"

#include "tensor/ops_impl.h" /* LIVE, shape_fail, BE, KX, D */

#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "tensor/tensor.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_text.h" /* the biases, softmax and cast in one pass */
#endif

static ork_status no_backward(const char *op, const char *arg) {
    return ORK_FAIL(ORK_E_UNSUPPORTED, "%s: has no backward (forward only: the text encoders), but %s requires "
                    "grad with grad enabled; run it with grad off or on inputs that need no gradient", op, arg);
}

/* ---- embedding ------------------------------------------------------------------ */

ork_status ork_op_embedding(ork_graph *g, ork_tensor *w, ork_tensor *ids, ork_tensor **y) {
    static const char *OP = "embedding";
    LIVE(w); LIVE(ids);
    if (w->ndim != 2) return shape_fail(OP, "w must be a (V, D) table", w, NULL);
    if (w->q || (w->dtype != ORK_F32 && w->dtype != ORK_BF16))
        return shape_fail(OP, "w must be f32 or bf16 (not quantized)", w, NULL);
    if (ids->dtype != ORK_I32) return shape_fail(OP, "ids must be i32", ids, NULL);
    if (ids->ndim + 1 > ORK_MAX_DIMS) return shape_fail(OP, "ids has too many dims", ids, NULL);
    if (ork_tape_wants(g, 1, &w)) return no_backward(OP, "w");
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    sh[ids->ndim] = w->shape[1];
    ORK_TRY(ork_graph_new_tensor(g, g->act_dt, ids->ndim + 1, sh, y));
    if (!BE->embedding) return ORK_FAIL(ORK_E_UNSUPPORTED, "embedding: the %s backend has no row gather", BE->name);
    return BE->embedding(KX, ork_tensor_numel(ids), w->shape[0], w->shape[1], D(ids), D(w), w->dtype, D(*y),
                         g->act_dt);
}

/* ---- attention with additive biases ------------------------------------------------ */

/* b broadcast (numpy, right-aligned) against the 4-d scores shape sh. */
static ork_status bias_bcast(const char *op, const int64_t sh[4], const ork_tensor *s, const ork_tensor *b,
                             ork_bcast *bc) {
    if (b->ndim > 4) return shape_fail(op, "bias has more than 4 dims", b, NULL);
    memset(bc, 0, sizeof *bc);
    bc->ndim = 4;
    bc->n = sh[0] * sh[1] * sh[2] * sh[3];
    bc->nb = ork_tensor_numel(b);
    int64_t stride = 1;
    for (int i = 3, j = b->ndim - 1; i >= 0; i--, j--) {
        bc->shape[i] = sh[i];
        int64_t bd = j >= 0 ? b->shape[j] : 1;
        if (bd != sh[i] && bd != 1) return shape_fail(op, "bias does not broadcast to the scores (B, H, Lq, Lk)", s, b);
        bc->bstride[i] = bd == 1 ? 0 : stride;
        stride *= bd;
    }
    return ORK_OK;
}

static int float_dt(ork_dtype dt) { return dt == ORK_F32 || dt == ORK_BF16 || dt == ORK_F16; }

ork_status ork_op_attention_bias(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, ork_tensor *bias,
                                 ork_tensor *key_bias, const ork_attn_opts *opts, ork_tensor **y) {
    static const char *OP = "attention_bias";
    LIVE(q); LIVE(k); LIVE(v);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) return shape_fail(OP, "q, k, v must be (B, H, L, D)", q, k);
    if (k->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || k->shape[3] != q->shape[3] ||
        !ork_shape_equal(k, v) || q->dtype != k->dtype || q->dtype != v->dtype)
        return shape_fail(OP, "k, v must be (B, H, Lk, D) like q (B, H, Lq, D), one dtype",
                          q, !ork_shape_equal(k, v) ? v : k);
    int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2], Lk = k->shape[2], Dh = q->shape[3];
    int64_t sh[4] = {B, H, Lq, Lk};
    ork_bcast bb, kb;
    if (bias) {
        LIVE(bias);
        if (!float_dt(bias->dtype)) return shape_fail(OP, "bias must be a float tensor", bias, NULL);
        ORK_TRY(bias_bcast(OP, sh, q, bias, &bb));
    }
    if (key_bias) {
        LIVE(key_bias);
        if (!float_dt(key_bias->dtype) || ork_tensor_numel(key_bias) != B * Lk)
            return shape_fail(OP, "key_bias must be a float (B, Lk)", k, key_bias);
        memset(&kb, 0, sizeof kb);
        kb.ndim = 4;
        memcpy(kb.shape, sh, sizeof sh);
        kb.bstride[0] = Lk;
        kb.bstride[3] = 1;
        kb.n = B * H * Lq * Lk;
        kb.nb = B * Lk;
    }
    ork_tensor *in[5] = {q, k, v, bias, key_bias};
    if (ork_tape_wants(g, 5, in)) return no_backward(OP, "an input");
    float scale = opts && opts->scale != 0.0f ? opts->scale : (float)(1.0 / sqrt((double)(Dh ? Dh : 1)));
    int causal = opts ? opts->causal : 0;
    ORK_TRY(ork_graph_new_tensor(g, q->dtype, 4, q->shape, y));
    if (B * H * Lq == 0 || Dh == 0) return ORK_OK;
    if (Lk == 0) return BE->fill(KX, ork_tensor_numel(*y), 0.0f, D(*y), q->dtype);

    /* The scores go in slices of whole sequences, each slice's F32 scores at
     * most ORK_ATTN_BIAS_SLICE bytes (a batch of 64 T5-XXL captions at 512
     * tokens would be 4 GiB of scores and 2 GiB of probabilities at once):
     * every step is per (sequence, head) or per row, so the slices give the
     * same values as one pass. */
    int64_t per_seq = H * Lq * Lk, bs = (int64_t)(ORK_ATTN_BIAS_SLICE / ((size_t)per_seq * sizeof(float)));
    if (bs < 1) bs = 1;
    if (bs > B) bs = B;
    size_t qsz = ork_dtype_size(q->dtype);
    void *S = NULL, *P = NULL, *cm = NULL;
    int fused = 0; /* CUDA: add the biases, softmax and cast to P in one kernel (the same values) */
#ifdef ORAKUL_HAVE_CUDA
    const char *uf = getenv("ORAKUL_TEXT_ATTN_UNFUSED");
    fused = BE->device == ORK_DEV_CUDA && !(uf && *uf && strcmp(uf, "0"));
#endif
    ork_status s = ork_arena_get(g->arena, (size_t)(bs * per_seq) * sizeof(float), &S);
    /* P in v's dtype for the second GEMM (one dtype per GEMM on CUDA) */
    if (s == ORK_OK && q->dtype != ORK_F32) s = ork_arena_get(g->arena, (size_t)(bs * per_seq) * qsz, &P);
    if (s == ORK_OK && causal && !fused) {
        /* query i sees keys j <= i + (Lk − Lq) (the fused attention's rule); the
         * rest get −1e30 (finite: a row with no visible key stays a softmax, not NaN) */
        float *h = malloc((size_t)(Lq * Lk) * sizeof *h);
        if (!h) s = ORK_FAIL(ORK_E_NOMEM, "attention_bias: out of host memory for the causal mask");
        for (int64_t i = 0; s == ORK_OK && i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) h[i * Lk + j] = j <= i + (Lk - Lq) ? 0.0f : -1e30f;
        if (s == ORK_OK) s = ork_arena_get(g->arena, (size_t)(Lq * Lk) * sizeof(float), &cm);
        if (s == ORK_OK) s = BE->memcpy_h2d(KX, cm, h, (size_t)(Lq * Lk) * sizeof(float)); /* consumes h */
        free(h);
    }
    for (int64_t b0 = 0; b0 < B && s == ORK_OK; b0 += bs) {
        int64_t nb = B - b0 < bs ? B - b0 : bs, nS = nb * per_seq;
        /* S (nb·H, Lq, Lk) F32 = scale · q · kᵀ */
        ork_gemm_desc d1 = {.ta = 0, .tb = 1, .M = Lq, .N = Lk, .K = Dh, .batch = nb * H, .alpha = scale,
                            .A = (const char *)D(q) + (size_t)(b0 * H * Lq * Dh) * qsz, .adt = q->dtype, .lda = Dh,
                            .stride_a = Lq * Dh,
                            .B = (const char *)D(k) + (size_t)(b0 * H * Lk * Dh) * qsz, .bdt = k->dtype, .ldb = Dh,
                            .stride_b = Lk * Dh,
                            .C = S, .cdt = ORK_F32, .ldc = Lk, .stride_c = Lq * Lk};
        s = BE->gemm(KX, &d1);
#ifdef ORAKUL_HAVE_CUDA
        if (s == ORK_OK && fused) {
            const char *bp = bias ? (const char *)D(bias) + (size_t)(b0 * bb.bstride[0]) * ork_dtype_size(bias->dtype)
                                  : NULL;
            const char *kp = key_bias ? (const char *)D(key_bias) + (size_t)(b0 * Lk) * ork_dtype_size(key_bias->dtype)
                                      : NULL;
            s = ork_cuda_bias_softmax(KX, nb, H, Lq, Lk, S, bp, bias ? bias->dtype : ORK_F32, bias ? bb.bstride : NULL,
                                      kp, key_bias ? key_bias->dtype : ORK_F32, causal, P ? P : S,
                                      P ? q->dtype : ORK_F32);
        }
#endif
        if (s == ORK_OK && !fused && bias) {
            ork_bcast sb = bb; /* the slice's rows of the bias: dim 0 is its outermost */
            sb.shape[0] = nb;
            sb.n = nS;
            if (bb.bstride[0]) sb.nb = nb * bb.bstride[0];
            const char *bp = (const char *)D(bias) + (size_t)(b0 * bb.bstride[0]) * ork_dtype_size(bias->dtype);
            s = BE->binary(KX, ORK_BINARY_ADD, &sb, S, bp, bias->dtype, S, ORK_F32);
        }
        if (s == ORK_OK && !fused && key_bias) {
            ork_bcast sk = kb;
            sk.shape[0] = nb;
            sk.n = nS;
            sk.nb = nb * Lk;
            const char *kp = (const char *)D(key_bias) + (size_t)(b0 * Lk) * ork_dtype_size(key_bias->dtype);
            s = BE->binary(KX, ORK_BINARY_ADD, &sk, S, kp, key_bias->dtype, S, ORK_F32);
        }
        if (s == ORK_OK && !fused && causal) {
            ork_bcast cb = {.ndim = 4, .shape = {nb, H, Lq, Lk}, .bstride = {0, 0, Lk, 1}, .n = nS, .nb = Lq * Lk};
            s = BE->binary(KX, ORK_BINARY_ADD, &cb, S, cm, ORK_F32, S, ORK_F32);
        }
        if (s == ORK_OK && !fused) s = BE->softmax(KX, nb * H * Lq, Lk, S, S, ORK_F32); /* in place, row by row */
        if (s == ORK_OK && !fused && P) s = BE->axpby(KX, nS, 1.0f, S, ORK_F32, 0.0f, P, q->dtype);
        /* y (nb·H, Lq, D) = P · v */
        ork_gemm_desc d2 = {.M = Lq, .N = Dh, .K = Lk, .batch = nb * H, .alpha = 1.0f,
                            .A = P ? P : S, .adt = q->dtype, .lda = Lk, .stride_a = Lq * Lk,
                            .B = (const char *)D(v) + (size_t)(b0 * H * Lk * Dh) * qsz, .bdt = v->dtype, .ldb = Dh,
                            .stride_b = Lk * Dh,
                            .C = (char *)D(*y) + (size_t)(b0 * H * Lq * Dh) * qsz, .cdt = q->dtype, .ldc = Dh,
                            .stride_c = Lq * Dh};
        if (s == ORK_OK) s = BE->gemm(KX, &d2);
    }
    if (cm) ork_arena_put(g->arena, cm);
    if (P) ork_arena_put(g->arena, P);
    if (S) ork_arena_put(g->arena, S);
    return s;
}

/* ---- compositions (recorded ops: their backward comes with them) ---------------------- */

ork_status ork_op_quick_gelu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    /* x·σ(1.702x) = silu(1.702x) / 1.702 */
    const ork_ops *o = ork_ops_table();
    ork_tensor *a, *b;
    ORK_TRY(o->scale(g, x, 1.702f, &a));
    ORK_TRY(o->silu(g, a, &b));
    return o->scale(g, b, (float)(1.0 / 1.702), y);
}

ork_status ork_op_layernorm_affine(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, float eps,
                                   ork_tensor **y) {
    static const char *OP = "layernorm_affine";
    LIVE(x);
    if (x->ndim < 1) return shape_fail(OP, "needs at least one dim", x, NULL);
    int64_t C = x->shape[x->ndim - 1];
    if (w) {
        LIVE(w);
        if (ork_tensor_numel(w) != C) return shape_fail(OP, "w must have C (last dim of x) elements", x, w);
    }
    if (b) {
        LIVE(b);
        if (ork_tensor_numel(b) != C) return shape_fail(OP, "b must have C (last dim of x) elements", x, b);
    }
    const ork_ops *o = ork_ops_table();
    ork_tensor *t;
    ORK_TRY(o->layernorm(g, x, eps, &t));
    if (w) {
        ork_tensor *wf = w;
        if (w->ndim != 1) ORK_TRY(o->reshape(g, w, 1, &C, &wf));
        ORK_TRY(o->mul(g, t, wf, &t));
    }
    if (b) {
        ork_tensor *bf = b;
        if (b->ndim != 1) ORK_TRY(o->reshape(g, b, 1, &C, &bf));
        ORK_TRY(o->add(g, t, bf, &t));
    }
    *y = t;
    return ORK_OK;
}
