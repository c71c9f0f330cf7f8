/* tensor/ops.c — the ops service ("orakul.ops/1") and the tensor service
 * ("orakul.tensor/1"). Each op: check shapes and dtypes (one clear line on a
 * mismatch), allocate outputs from the graph's arena, dispatch the forward
 * kernel to the graph's backend, and, when the tape wants it, record a node
 * whose backward function (next to the forward, below) calls the backward
 * kernels. Owns the two static tables. [control-thread] */
#include "tensor/ops.h"

#include "numerics/elem.h" /* ork_elem_load/store: host-side conversion in to_host */
#include "tensor/graph.h"
#include "tensor/ops_text.h" /* embedding, attention_bias, quick_gelu, layernorm_affine (ABI 1.3) */
#include "tensor/tape.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BE (g->be)
#define KX (&g->k)
#define D(t) ork_tensor_data(t)

/* ---- checks and helpers ------------------------------------------------------ */

static ork_status live(const char *op, const char *arg, const ork_tensor *t, const ork_graph *g) {
    if (!t) return ORK_FAIL(ORK_E_INVALID, "%s: %s is NULL", op, arg);
    if (t->flags & ORK_TF_FREED)
        return ORK_FAIL(ORK_E_INVALID, "%s: %s was released (by a backward pass, or dropped) and is used after", op, arg);
    if (t->device != g->be->device)
        return ORK_FAIL(ORK_E_INVALID, "%s: %s is on the %s but the graph runs on the %s", op, arg,
                        t->device == ORK_DEV_CPU ? "cpu" : "gpu", g->be->device == ORK_DEV_CPU ? "cpu" : "gpu");
    return ORK_OK;
}
#define LIVE(t) ORK_TRY(live(OP, #t, (t), g))

static ork_status shape_fail(const char *op, const char *what, const ork_tensor *a, const ork_tensor *b) {
    char sa[96], sb[96] = "";
    ork_tensor_str(a, sa, sizeof sa);
    if (b) ork_tensor_str(b, sb, sizeof sb);
    return ORK_FAIL(ORK_E_INVALID, "%s: %s: %s%s%s", op, what, sa, b ? " vs " : "", sb);
}

static int norm_axis(int axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

static ork_status new_t(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out) {
    return ork_graph_new_tensor(g, dt, ndim, shape, out);
}
static ork_status new_like(ork_graph *g, const ork_tensor *t, ork_tensor **out) {
    return new_t(g, t->dtype, t->ndim, t->shape, out);
}

static int wants(ork_graph *g, int n, ork_tensor *const *in) { return ork_tape_wants(g, n, in); }

static ork_status record(ork_graph *g, const char *op, ork_bwd_fn bwd, int nin, ork_tensor *const *in, int nout,
                         ork_tensor *const *out, ork_tape_node **n) {
    return ork_tape_push(g, op, bwd, nin, in, nout, out, n);
}

/* An arena block for a node's auxiliary F32 data (lse, mean, rstd). */
static ork_status aux_f32(ork_graph *g, int64_t n, float **p) {
    return ork_arena_get(g->arena, (size_t)(n > 0 ? n : 1) * sizeof(float), (void **)p);
}

/* Grad dtype for a gradient temp of t: F32 for parameters, else t's. */
static ork_dtype gdt_of(const ork_tensor *t) { return (t->flags & ORK_TF_PARAM) ? ORK_F32 : t->dtype; }

static int needs(const ork_tensor *t) { return t && t->requires_grad; }

/* Broadcast b against a (numpy, right-aligned, b never larger). */
static ork_status make_bcast(const char *op, const ork_tensor *a, const ork_tensor *b, ork_bcast *bc) {
    if (b->ndim > a->ndim) return shape_fail(op, "b has more dims than a", a, b);
    memset(bc, 0, sizeof *bc);
    bc->ndim = a->ndim > 0 ? a->ndim : 1;
    bc->n = ork_tensor_numel(a);
    bc->nb = ork_tensor_numel(b);
    if (a->ndim == 0) { bc->shape[0] = 1; return ORK_OK; }
    int64_t stride = 1;
    for (int i = a->ndim - 1, j = b->ndim - 1; i >= 0; i--, j--) {
        bc->shape[i] = a->shape[i];
        int64_t bd = j >= 0 ? b->shape[j] : 1;
        if (bd != a->shape[i] && bd != 1) return shape_fail(op, "b does not broadcast to a", a, b);
        bc->bstride[i] = (bd == 1) ? 0 : stride;
        stride *= bd;
    }
    return ORK_OK;
}

/* C (per desc) into t's gradient: parameters accumulate in place (beta = 1
 * into the F32 grad), anything else through a temporary pushed afterwards. */
static ork_status gemm_to_grad(ork_graph *g, ork_tensor *t, ork_gemm_desc *d) {
    float *buf;
    ORK_TRY(ork_grad_param(g, t, &buf));
    if (buf) {
        d->C = buf; d->cdt = ORK_F32; d->beta = 1.0f;
        return BE->gemm(KX, d);
    }
    ork_tensor *tmp;
    ORK_TRY(ork_grad_new(g, t, t->dtype, &tmp));
    d->C = D(tmp); d->cdt = tmp->dtype; d->beta = 0.0f;
    ORK_TRY(BE->gemm(KX, d));
    return ork_grad_push(g, t, tmp);
}

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
        ORK_TRY(ork_arena_get(g->arena, BE->linear_fp8_ws(M, K), &ws));
        int ep = b && b->dtype == ORK_BF16;
        ork_fp8_linear_desc d = {.M = M, .N = N, .K = K, .x = D(x), .w = D(w), .wdt = w->dtype, .w_scale = w->q->scales,
                                 .bias = ep ? D(b) : NULL, .y = D(y), .ws = ws, .why = why, .why_n = sizeof why};
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

/* in: x (M, K), w (N, K), b (N), down (r, K), up (N, r); aux[0]: h (M, r). */
static ork_status linear_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *down = n->in[3], *up = n->in[4], *y = n->out[0];
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
         * w is dequantized again here (no scratch lives from forward to backward) */
        const void *wp;
        void *wq = NULL;
        ork_dtype wdt = w->dtype;
        if (w->q) ORK_TRY(qscratch_dt(x, w, &wdt));
        ORK_TRY(weight_operand(g, w, wdt, &wp, &wq));
        ork_gemm_desc d = {.M = M, .N = K, .K = N, .batch = 1, .alpha = 1.0f, .A = D(dy), .adt = dy->dtype,
                           .lda = N, .B = wp, .bdt = wdt, .ldb = K, .C = D(dx), .cdt = dx->dtype, .ldc = K};
        ork_status gs = BE->gemm(KX, &d);
        if (wq) ork_arena_put(g->arena, wq);
        ORK_TRY(gs);
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
    if (dh) ork_arena_put(g->arena, dh->base);
    return ORK_OK;
}

static ork_status op_linear(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, ork_tensor **y) {
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
    if (lo) {
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
     * the backend takes it, else its dequantized scratch, released after the GEMM */
    int native = 0, bias_done = 0;
    if (w->q && g->fp8_gemm == ORK_FP8_GEMM_NATIVE) ORK_TRY(linear_native(g, x, w, b, M, N, K, *y, &native, &bias_done));
    if (!native) {
        const void *wp;
        void *wq;
        ORK_TRY(weight_operand(g, w, wdt, &wp, &wq));
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
    if (lo) {
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
    n->p.f[2] = (lo && g->dropout_seed) ? lo->dropout : 0.0f;
    if (n->p.f[2] > 0.0f) {
        uint64_t sd = lora_drop_seed(g, w);
        n->p.i[4] = (int)(uint32_t)sd;
        n->p.i[5] = (int)(uint32_t)(sd >> 32);
    }
    if (h) n->aux[n->naux++] = h;
    if (dc) { n->aux[n->naux++] = dc; n->aux[n->naux++] = uc; }
    return ORK_OK;
}

/* ---- add, mul, scale, modulate ---------------------------------------------------------- */

static ork_status binary_bwd(ork_graph *g, ork_tape_node *n, ork_binary_op op) {
    ork_tensor *a = n->in[0], *b = n->in[1], *dy = n->out[0]->grad, *da = NULL, *db = NULL;
    ork_bcast bc;
    ORK_TRY(make_bcast(n->op, a, b, &bc));
    if (needs(a)) ORK_TRY(ork_grad_new(g, a, a->dtype, &da));
    if (needs(b)) ORK_TRY(ork_grad_new(g, b, gdt_of(b), &db));
    ORK_TRY(BE->binary_bwd(KX, op, &bc, D(a), D(b), b->dtype, D(dy), dy->dtype, da ? D(da) : NULL,
                           db ? D(db) : NULL, db ? db->dtype : ORK_F32));
    if (da) ORK_TRY(ork_grad_push(g, a, da));
    if (db) ORK_TRY(ork_grad_push(g, b, db));
    return ORK_OK;
}
static ork_status add_bwd(ork_graph *g, ork_tape_node *n) { return binary_bwd(g, n, ORK_BINARY_ADD); }
static ork_status mul_bwd(ork_graph *g, ork_tape_node *n) { return binary_bwd(g, n, ORK_BINARY_MUL); }

static ork_status op_binary(ork_graph *g, const char *OP, ork_binary_op op, ork_tensor *a, ork_tensor *b,
                            ork_tensor **y) {
    LIVE(a); LIVE(b);
    ork_bcast bc;
    ORK_TRY(make_bcast(OP, a, b, &bc));
    ORK_TRY(new_like(g, a, y));
    ORK_TRY(BE->binary(KX, op, &bc, D(a), D(b), b->dtype, D(*y), a->dtype));
    ork_tensor *in[2] = {a, b};
    if (!wants(g, 2, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, op == ORK_BINARY_ADD ? add_bwd : mul_bwd, 2, in, 1, y, &n));
    if (op == ORK_BINARY_MUL) { ork_tape_save(n, a); ork_tape_save(n, b); }
    return ORK_OK;
}
static ork_status op_add(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
    return op_binary(g, "add", ORK_BINARY_ADD, a, b, y);
}
static ork_status op_mul(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
    return op_binary(g, "mul", ORK_BINARY_MUL, a, b, y);
}

static ork_status scale_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), n->p.f[0], D(dy), dy->dtype, 0.0f, D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_scale(ork_graph *g, ork_tensor *x, float s, ork_tensor **y) {
    static const char *OP = "scale";
    LIVE(x);
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), s, D(x), x->dtype, 0.0f, D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, scale_bwd, 1, &x, 1, y, &n));
    n->p.f[0] = s;
    return ORK_OK;
}

static ork_status modulate_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *sh = n->in[1], *sc = n->in[2], *dy = n->out[0]->grad, *dx = NULL, *dsh = NULL, *dsc = NULL;
    ork_bcast b1, b2;
    ORK_TRY(make_bcast(n->op, x, sh, &b1));
    ORK_TRY(make_bcast(n->op, x, sc, &b2));
    if (needs(x)) ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    if (needs(sh)) ORK_TRY(ork_grad_new(g, sh, x->dtype, &dsh));
    if (needs(sc)) ORK_TRY(ork_grad_new(g, sc, x->dtype, &dsc));
    ORK_TRY(BE->modulate_bwd(KX, &b1, &b2, D(x), D(sc), D(dy), dx ? D(dx) : NULL, dsh ? D(dsh) : NULL,
                             dsc ? D(dsc) : NULL, x->dtype));
    if (dx) ORK_TRY(ork_grad_push(g, x, dx));
    if (dsh) ORK_TRY(ork_grad_push(g, sh, dsh));
    if (dsc) ORK_TRY(ork_grad_push(g, sc, dsc));
    return ORK_OK;
}

static ork_status op_modulate(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, ork_tensor **y) {
    static const char *OP = "modulate";
    LIVE(x); LIVE(shift); LIVE(scale);
    if (shift->dtype != x->dtype || scale->dtype != x->dtype)
        return shape_fail(OP, "shift and scale need x's dtype", x, shift->dtype != x->dtype ? shift : scale);
    ork_bcast b1, b2;
    ORK_TRY(make_bcast(OP, x, shift, &b1));
    ORK_TRY(make_bcast(OP, x, scale, &b2));
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(BE->modulate(KX, &b1, &b2, D(x), D(shift), D(scale), D(*y), x->dtype));
    ork_tensor *in[3] = {x, shift, scale};
    if (!wants(g, 3, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, modulate_bwd, 3, in, 1, y, &n));
    ork_tape_save(n, x);
    ork_tape_save(n, scale);
    return ORK_OK;
}

/* ---- norms ------------------------------------------------------------------------------- */

static int64_t rows_of(const ork_tensor *x) {
    int64_t C = x->shape[x->ndim - 1];
    return C ? ork_tensor_numel(x) / C : 0;
}

static ork_status layernorm_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->layernorm_bwd(KX, rows_of(x), x->shape[x->ndim - 1], D(x), n->aux[0], n->aux[1], D(dy), D(dx),
                              x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_layernorm(ork_graph *g, ork_tensor *x, float eps, ork_tensor **y) {
    static const char *OP = "layernorm";
    LIVE(x);
    if (x->ndim < 1) return shape_fail(OP, "needs at least one dim", x, NULL);
    int64_t R = rows_of(x);
    float *mean, *rstd;
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(aux_f32(g, R, &mean));
    ORK_TRY(aux_f32(g, R, &rstd));
    ORK_TRY(BE->layernorm(KX, R, x->shape[x->ndim - 1], eps, D(x), D(*y), mean, rstd, x->dtype));
    if (!wants(g, 1, &x)) {
        ork_arena_put(g->arena, mean);
        ork_arena_put(g->arena, rstd);
        return ORK_OK;
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, layernorm_bwd, 1, &x, 1, y, &n));
    ork_tape_save(n, x);
    n->aux[n->naux++] = mean;
    n->aux[n->naux++] = rstd;
    return ORK_OK;
}

static ork_status rmsnorm_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *w = n->in[1], *dy = n->out[0]->grad, *dx = NULL, *dw = NULL;
    if (needs(x)) ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    if (needs(w)) ORK_TRY(ork_grad_new(g, w, ORK_F32, &dw));
    ORK_TRY(BE->rmsnorm_bwd(KX, rows_of(x), x->shape[x->ndim - 1], D(x), w ? D(w) : NULL, w ? w->dtype : ORK_F32,
                            n->aux[0], D(dy), dx ? D(dx) : NULL, dw ? D(dw) : NULL, x->dtype));
    if (dx) ORK_TRY(ork_grad_push(g, x, dx));
    if (dw) ORK_TRY(ork_grad_push(g, w, dw));
    return ORK_OK;
}

static ork_status op_rmsnorm(ork_graph *g, ork_tensor *x, ork_tensor *w, float eps, ork_tensor **y) {
    static const char *OP = "rmsnorm";
    LIVE(x);
    if (x->ndim < 1) return shape_fail(OP, "needs at least one dim", x, NULL);
    int64_t C = x->shape[x->ndim - 1], R = rows_of(x);
    if (w) {
        LIVE(w);
        if (ork_tensor_numel(w) != C) return shape_fail(OP, "w must have C (last dim of x) elements", x, w);
    }
    float *rstd;
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(aux_f32(g, R, &rstd));
    ORK_TRY(BE->rmsnorm(KX, R, C, eps, D(x), w ? D(w) : NULL, w ? w->dtype : ORK_F32, D(*y), rstd, x->dtype));
    ork_tensor *in[2] = {x, w};
    if (!wants(g, 2, in)) {
        ork_arena_put(g->arena, rstd);
        return ORK_OK;
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, rmsnorm_bwd, 2, in, 1, y, &n));
    ork_tape_save(n, x);
    ork_tape_save(n, w);
    n->aux[n->naux++] = rstd;
    return ORK_OK;
}

/* ---- activations ---------------------------------------------------------------------------- */

static ork_status unary_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->unary_bwd(KX, (ork_unary_op)n->p.i[0], ork_tensor_numel(x), n->p.f[1], D(x), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_unary(ork_graph *g, const char *OP, ork_unary_op op, float param, ork_tensor *x, ork_tensor **y) {
    LIVE(x);
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(BE->unary(KX, op, ork_tensor_numel(x), param, D(x), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, unary_bwd, 1, &x, 1, y, &n));
    ork_tape_save(n, x);
    n->p.i[0] = (int)op;
    n->p.f[1] = param;
    return ORK_OK;
}
static ork_status op_gelu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "gelu_tanh", ORK_UNARY_GELU_TANH, 0.0f, x, y);
}
static ork_status op_silu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "silu", ORK_UNARY_SILU, 0.0f, x, y);
}
static ork_status op_relu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "relu", ORK_UNARY_RELU, 0.0f, x, y);
}
static ork_status op_tanh_clamp(ork_graph *g, ork_tensor *x, float c, ork_tensor **y) {
    if (!(c > 0.0f)) return ORK_FAIL(ORK_E_INVALID, "tanh_clamp: c must be > 0, got %g", (double)c);
    return op_unary(g, "tanh_clamp", ORK_UNARY_TANH_CLAMP, c, x, y);
}

static ork_status swiglu_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->swiglu_bwd(KX, rows_of(x), x->shape[x->ndim - 1] / 2, D(x), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_swiglu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const char *OP = "swiglu";
    LIVE(x);
    if (x->ndim < 1 || x->shape[x->ndim - 1] % 2) return shape_fail(OP, "last dim must be even (2C)", x, NULL);
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 1] /= 2;
    ORK_TRY(new_t(g, x->dtype, x->ndim, sh, y));
    ORK_TRY(BE->swiglu(KX, rows_of(x), sh[x->ndim - 1], D(x), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, swiglu_bwd, 1, &x, 1, y, &n));
    ork_tape_save(n, x);
    return ORK_OK;
}

/* ---- rope, attention ------------------------------------------------------------------------- */

static ork_status rope_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *pe = n->in[1], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->rope_bwd(KX, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], 0, D(dy), D(pe), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_rope(ork_graph *g, ork_tensor *x, ork_tensor *pe, ork_tensor **y) {
    static const char *OP = "rope";
    LIVE(x); LIVE(pe);
    if (x->ndim != 4 || x->shape[3] % 2) return shape_fail(OP, "x must be (B, H, L, D) with D even", x, NULL);
    if (pe->dtype != ORK_F32 || ork_tensor_numel(pe) != x->shape[2] * x->shape[3] ||
        pe->shape[pe->ndim - 1] != 2)
        return shape_fail(OP, "pe must be f32 (L, D/2, 2)", x, pe);
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(BE->rope(KX, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], 0, D(x), D(pe), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK; /* pe gets no gradient */
    ork_tensor *in[2] = {x, pe};
    ork_tape_node *n;
    ORK_TRY(record(g, OP, rope_bwd, 2, in, 1, y, &n));
    ork_tape_save(n, pe);
    return ORK_OK;
}

static ork_status attention_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *y = n->out[0], *dy = y->grad;
    ork_tensor *dq = NULL, *dk = NULL, *dv = NULL;
    const ork_attn_desc *d = &n->p.attn;
    if (needs(q)) ORK_TRY(ork_grad_new(g, q, q->dtype, &dq));
    if (needs(k)) ORK_TRY(ork_grad_new(g, k, k->dtype, &dk));
    if (needs(v)) ORK_TRY(ork_grad_new(g, v, v->dtype, &dv));
    size_t wsb = BE->attention_ws(d, 1);
    void *ws = NULL;
    if (wsb) ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
    ORK_TRY(BE->attention_bwd(KX, d, D(q), D(k), D(v), D(y), n->aux[0], D(dy), dq ? D(dq) : NULL,
                              dk ? D(dk) : NULL, dv ? D(dv) : NULL, ws, q->dtype));
    if (ws) ork_arena_put(g->arena, ws);
    if (dq) ORK_TRY(ork_grad_push(g, q, dq));
    if (dk) ORK_TRY(ork_grad_push(g, k, dk));
    if (dv) ORK_TRY(ork_grad_push(g, v, dv));
    return ORK_OK;
}

static ork_status op_matmul(ork_graph *g, ork_tensor *a, ork_tensor *b, int ta, int tb, ork_tensor **y);
static ork_status op_softmax(ork_graph *g, ork_tensor *x, ork_tensor **y);
static ork_status op_scale(ork_graph *g, ork_tensor *x, float s, ork_tensor **y);

/* softmax(q·kᵀ·scale)·v composed of recorded matmul, scale and softmax ops: it
 * materialises the (B, H, Lq, Lk) scores, so it is the fallback for head sizes
 * the fused CUDA kernel lacks (small test and quickstart models). Also forced
 * by ORAKUL_ATTN_COMPOSITE=1, which tests use to check it on the CPU. */
static int attention_composite_needed(const ork_graph *g, const ork_attn_desc *d) {
    static int forced = -1;
    if (forced < 0) {
        const char *e = getenv("ORAKUL_ATTN_COMPOSITE");
        forced = e && *e && strcmp(e, "0") != 0;
    }
    if (d->causal) return 0;
    return forced || (g->be->device == ORK_DEV_CUDA && d->D != 64 && d->D != 128);
}

static ork_status attention_composite(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, float scale,
                                      ork_tensor **y) {
    ork_tensor *s, *p;
    ORK_TRY(op_matmul(g, q, k, 0, 1, &s)); /* (B, H, Lq, Lk) */
    ORK_TRY(op_scale(g, s, scale, &s));
    ORK_TRY(op_softmax(g, s, &p));
    return op_matmul(g, p, v, 0, 0, y);
}

static ork_status op_attention(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, const ork_attn_opts *opts,
                               ork_tensor **y) {
    static const char *OP = "attention";
    LIVE(q); LIVE(k); LIVE(v);
    if (q->ndim != 4) return shape_fail(OP, "q must be (B, H, L, D)", q, NULL);
    if (!ork_shape_equal(q, k) || !ork_shape_equal(q, v) || q->dtype != k->dtype || q->dtype != v->dtype)
        return shape_fail(OP, "q, k, v must match", q, !ork_shape_equal(q, k) ? k : v);
    ork_attn_desc d = {.B = q->shape[0], .H = q->shape[1], .Hkv = q->shape[1], .Lq = q->shape[2],
                       .Lk = k->shape[2], .D = q->shape[3]};
    d.scale = opts && opts->scale != 0.0f ? opts->scale : (float)(1.0 / sqrt((double)(d.D ? d.D : 1)));
    d.causal = opts ? opts->causal : 0;
    if (attention_composite_needed(g, &d)) return attention_composite(g, q, k, v, d.scale, y);
    float *lse;
    ORK_TRY(new_like(g, q, y));
    ORK_TRY(aux_f32(g, d.B * d.H * d.Lq, &lse));
    size_t wsb = BE->attention_ws(&d, 0);
    void *ws = NULL;
    if (wsb) ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
    ORK_TRY(BE->attention(KX, &d, D(q), D(k), D(v), D(*y), lse, ws, q->dtype));
    if (ws) ork_arena_put(g->arena, ws);
    ork_tensor *in[3] = {q, k, v};
    if (!wants(g, 3, in)) {
        ork_arena_put(g->arena, lse);
        return ORK_OK;
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, attention_bwd, 3, in, 1, y, &n));
    ork_tape_save(n, q);
    ork_tape_save(n, k);
    ork_tape_save(n, v);
    ork_tape_save(n, *y);
    n->aux[n->naux++] = lse;
    n->p.attn = d;
    return ORK_OK;
}

/* ---- shape ops ------------------------------------------------------------------------------- */

/* Contiguous element strides of a shape. */
static void strides_of(int ndim, const int64_t *shape, int64_t *st) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) { st[i] = s; s *= shape[i]; }
}

static ork_status reshape_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *y = n->out[0], *dy = y->grad;
    ork_tensor *h = ork_hpool_get(g->pool, sizeof *h);
    if (!h) return ORK_FAIL(ORK_E_NOMEM, "reshape: out of host memory");
    *h = *dy;
    h->ndim = x->ndim;
    memcpy(h->shape, x->shape, sizeof h->shape);
    if (!x->grad && !(x->flags & ORK_TF_PARAM) && dy->dtype == x->dtype) {
        x->grad = h; /* hand the buffer over: y no longer owns it */
        y->grad = NULL;
        return ORK_OK;
    }
    h->owner = ORK_OWN_EXTERN; /* push must not free y's buffer */
    return ork_grad_push(g, x, h);
}

static ork_status op_reshape(ork_graph *g, ork_tensor *x, int ndim, const int64_t *shape, ork_tensor **y) {
    static const char *OP = "reshape";
    LIVE(x);
    if (ndim < 1 || ndim > ORK_MAX_DIMS) return ORK_FAIL(ORK_E_INVALID, "reshape: %d dims (1..%d)", ndim, ORK_MAX_DIMS);
    int64_t sh[ORK_MAX_DIMS], known = 1, n = ork_tensor_numel(x);
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        sh[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return ORK_FAIL(ORK_E_INVALID, "reshape: more than one -1 dim");
            infer = i;
        } else if (shape[i] < 0) {
            return ORK_FAIL(ORK_E_INVALID, "reshape: dim %d is %lld", i, (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || n % known) return shape_fail(OP, "cannot infer the -1 dim", x, NULL);
        sh[infer] = n / known;
        known *= sh[infer];
    }
    if (known != n) {
        char buf[96];
        return ORK_FAIL(ORK_E_INVALID, "reshape: %s has %lld elements, the new shape %lld", ork_tensor_str(x, buf, sizeof buf),
                        (long long)n, (long long)known);
    }
    ork_tensor *v = ork_hpool_get(g->pool, sizeof *v);
    if (!v) return ORK_FAIL(ORK_E_NOMEM, "reshape: out of host memory");
    *v = *x;
    v->ndim = ndim;
    memcpy(v->shape, sh, sizeof sh);
    v->grad = NULL;
    v->node = NULL;
    v->saves = 0;
    v->requires_grad = 0;
    v->lora = NULL;
    v->flags = (x->flags & ORK_TF_WEIGHT) | ORK_TF_VIEWED;
    if (v->owner == ORK_OWN_ALLOC) v->owner = ORK_OWN_EXTERN; /* the view never frees x's memory */
    x->flags |= ORK_TF_VIEWED;
    *y = v;
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *nd;
    return record(g, OP, reshape_bwd, 1, &x, 1, y, &nd);
}

static ork_status permute_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    /* dx[perm-inverse] = dy: walk dy's (= y's) shape, write into dx with permuted strides. */
    ork_copy_desc d = {.ndim = x->ndim, .sdt = dy->dtype, .ddt = dx->dtype};
    int64_t xs[ORK_MAX_DIMS];
    strides_of(x->ndim, x->shape, xs);
    strides_of(dy->ndim, dy->shape, d.src_stride);
    for (int i = 0; i < x->ndim; i++) {
        d.shape[i] = dy->shape[i];
        d.dst_stride[i] = xs[n->p.i[i]];
    }
    ORK_TRY(BE->copy(KX, &d, D(dy), D(dx)));
    return ork_grad_push(g, x, dx);
}

static ork_status op_permute(ork_graph *g, ork_tensor *x, const int *perm, ork_tensor **y) {
    static const char *OP = "permute";
    LIVE(x);
    int seen[ORK_MAX_DIMS] = {0};
    int64_t sh[ORK_MAX_DIMS], xs[ORK_MAX_DIMS];
    int pn[ORK_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int p = norm_axis(perm[i], x->ndim);
        if (p < 0 || p >= x->ndim || seen[p]++)
            return ORK_FAIL(ORK_E_INVALID, "permute: entry %d (%d) is not a permutation of %d dims", i, perm[i], x->ndim);
        pn[i] = p;
        sh[i] = x->shape[p];
    }
    ORK_TRY(new_t(g, x->dtype, x->ndim, sh, y));
    ork_copy_desc d = {.ndim = x->ndim, .sdt = x->dtype, .ddt = x->dtype};
    strides_of(x->ndim, x->shape, xs);
    strides_of(x->ndim, sh, d.dst_stride);
    for (int i = 0; i < x->ndim; i++) { d.shape[i] = sh[i]; d.src_stride[i] = xs[pn[i]]; }
    ORK_TRY(BE->copy(KX, &d, D(x), D(*y)));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, permute_bwd, 1, &x, 1, y, &n));
    memcpy(n->p.i, pn, sizeof(int) * (size_t)x->ndim);
    return ORK_OK;
}

/* Copy part (shape of `part`) to/from the slice of `whole` starting at `off`
 * along axis. to_whole: part -> whole, else whole -> part. */
static ork_status slice_copy(ork_graph *g, ork_tensor *whole, ork_tensor *part, int axis, int64_t off, int to_whole) {
    ork_copy_desc d = {.ndim = part->ndim, .sdt = to_whole ? part->dtype : whole->dtype,
                       .ddt = to_whole ? whole->dtype : part->dtype};
    int64_t ws[ORK_MAX_DIMS], ps[ORK_MAX_DIMS];
    strides_of(whole->ndim, whole->shape, ws);
    strides_of(part->ndim, part->shape, ps);
    memcpy(d.shape, part->shape, sizeof d.shape);
    memcpy(to_whole ? d.src_stride : d.dst_stride, ps, sizeof ps);
    memcpy(to_whole ? d.dst_stride : d.src_stride, ws, sizeof ws);
    char *wp = (char *)D(whole) + (size_t)(off * ws[axis]) * ork_dtype_size(whole->dtype);
    return to_whole ? BE->copy(KX, &d, D(part), wp) : BE->copy(KX, &d, wp, D(part));
}

static ork_status concat_bwd(ork_graph *g, ork_tape_node *n) {
    int axis = n->p.i[0];
    ork_tensor *dy = n->out[0]->grad;
    int64_t off = 0;
    for (int i = 0; i < n->nin; i++) {
        ork_tensor *x = n->in[i];
        if (needs(x)) {
            ork_tensor *dx;
            ORK_TRY(ork_grad_new(g, x, dy->dtype, &dx));
            ORK_TRY(slice_copy(g, dy, dx, axis, off, 0));
            ORK_TRY(ork_grad_push(g, x, dx));
        }
        off += x->shape[axis];
    }
    return ORK_OK;
}

static ork_status op_concat(ork_graph *g, int n, ork_tensor *const *xs, int axis, ork_tensor **y) {
    static const char *OP = "concat";
    if (n < 1 || !xs) return ORK_FAIL(ORK_E_INVALID, "concat: needs at least one tensor");
    for (int i = 0; i < n; i++) ORK_TRY(live(OP, "an input", xs[i], g));
    ork_tensor *x0 = xs[0];
    int ax = norm_axis(axis, x0->ndim);
    if (ax < 0 || ax >= x0->ndim) return ORK_FAIL(ORK_E_INVALID, "concat: axis %d out of range for %d dims", axis, x0->ndim);
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, x0->shape, sizeof sh);
    sh[ax] = 0;
    for (int i = 0; i < n; i++) {
        ork_tensor *x = xs[i];
        if (x->ndim != x0->ndim || x->dtype != x0->dtype) return shape_fail(OP, "inputs differ in rank or dtype", x0, x);
        for (int d = 0; d < x->ndim; d++)
            if (d != ax && x->shape[d] != x0->shape[d]) return shape_fail(OP, "inputs differ off the axis", x0, x);
        sh[ax] += x->shape[ax];
    }
    ORK_TRY(new_t(g, x0->dtype, x0->ndim, sh, y));
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        ORK_TRY(slice_copy(g, *y, xs[i], ax, off, 1));
        off += xs[i]->shape[ax];
    }
    if (!wants(g, n, xs)) return ORK_OK;
    ork_tape_node *nd;
    ORK_TRY(record(g, OP, concat_bwd, n, xs, 1, y, &nd));
    nd->p.i[0] = ax;
    return ORK_OK;
}

static ork_status split_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dx;
    int axis = n->p.i[0];
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->fill(KX, ork_tensor_numel(dx), 0.0f, D(dx), dx->dtype));
    int64_t off = 0;
    for (int i = 0; i < n->nout; i++) {
        ork_tensor *dy = n->out[i]->grad;
        if (dy) ORK_TRY(slice_copy(g, dx, dy, axis, off, 1));
        off += n->out[i]->shape[axis];
    }
    return ork_grad_push(g, x, dx);
}

static ork_status op_split(ork_graph *g, ork_tensor *x, int axis, int n, const int64_t *sizes, ork_tensor **ys) {
    static const char *OP = "split";
    LIVE(x);
    int ax = norm_axis(axis, x->ndim);
    if (ax < 0 || ax >= x->ndim) return ORK_FAIL(ORK_E_INVALID, "split: axis %d out of range for %d dims", axis, x->ndim);
    if (n < 1 || !sizes) return ORK_FAIL(ORK_E_INVALID, "split: needs at least one part");
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) return ORK_FAIL(ORK_E_INVALID, "split: size %d is negative", i);
        total += sizes[i];
    }
    if (total != x->shape[ax]) {
        char buf[96];
        return ORK_FAIL(ORK_E_INVALID, "split: sizes add up to %lld but %s has %lld along axis %d", (long long)total,
                        ork_tensor_str(x, buf, sizeof buf), (long long)x->shape[ax], ax);
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t sh[ORK_MAX_DIMS];
        memcpy(sh, x->shape, sizeof sh);
        sh[ax] = sizes[i];
        ORK_TRY(new_t(g, x->dtype, x->ndim, sh, &ys[i]));
        ORK_TRY(slice_copy(g, x, ys[i], ax, off, 0));
        off += sizes[i];
    }
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *nd;
    ORK_TRY(record(g, OP, split_bwd, 1, &x, n, ys, &nd));
    nd->p.i[0] = ax;
    return ORK_OK;
}

/* ---- images ------------------------------------------------------------------------------------- */

/* Grad (F32) buffer a kernel accumulates into: the param's own, or a zeroed
 * temporary pushed later (*tmp set). */
static ork_status f32_accum_target(ork_graph *g, ork_tensor *t, float **buf, ork_tensor **tmp) {
    *buf = NULL;
    *tmp = NULL;
    if (!needs(t)) return ORK_OK;
    ORK_TRY(ork_grad_param(g, t, buf));
    if (*buf) return ORK_OK;
    ORK_TRY(ork_grad_new(g, t, ORK_F32, tmp));
    ORK_TRY(BE->fill(KX, ork_tensor_numel(*tmp), 0.0f, D(*tmp), ORK_F32));
    *buf = D(*tmp);
    return ORK_OK;
}

static ork_status conv2d_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *dy = n->out[0]->grad;
    const ork_conv2d_desc *d = &n->p.conv;
    size_t wsb = BE->conv2d_ws(d, 1);
    void *ws = NULL;
    if (wsb) ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
    if (needs(x)) {
        ork_tensor *dx;
        ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
        ORK_TRY(BE->conv2d_dgrad(KX, d, D(dy), D(w), w->dtype, D(dx), ws, x->dtype));
        ORK_TRY(ork_grad_push(g, x, dx));
    }
    float *dw, *db;
    ork_tensor *tw, *tb;
    ORK_TRY(f32_accum_target(g, w, &dw, &tw));
    ORK_TRY(f32_accum_target(g, b, &db, &tb));
    if (dw || db) ORK_TRY(BE->conv2d_wgrad(KX, d, D(x), D(dy), dw, db, ws, x->dtype));
    if (tw) ORK_TRY(ork_grad_push(g, w, tw));
    if (tb) ORK_TRY(ork_grad_push(g, b, tb));
    if (ws) ork_arena_put(g->arena, ws);
    return ORK_OK;
}

static ork_status op_conv2d(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, int stride, int pad,
                            ork_tensor **y) {
    static const char *OP = "conv2d";
    LIVE(x); LIVE(w);
    if (x->ndim != 4 || w->ndim != 4 || w->shape[1] != x->shape[1])
        return shape_fail(OP, "x (N, Cin, H, W) needs w (Cout, Cin, kh, kw)", x, w);
    if (stride < 1 || pad < 0) return ORK_FAIL(ORK_E_INVALID, "conv2d: stride %d / pad %d", stride, pad);
    if (b) {
        LIVE(b);
        if (ork_tensor_numel(b) != w->shape[0] || b->dtype != w->dtype)
            return shape_fail(OP, "bias must be (Cout) of w's dtype", b, w);
    }
    ork_conv2d_desc d = {.N = x->shape[0], .Cin = x->shape[1], .H = x->shape[2], .W = x->shape[3], .Cout = w->shape[0],
                         .kh = w->shape[2], .kw = w->shape[3], .stride = stride, .pad = pad};
    if (d.H + 2 * pad < d.kh || d.W + 2 * pad < d.kw) return shape_fail(OP, "kernel larger than the padded image", x, w);
    d.Ho = (d.H + 2 * pad - d.kh) / stride + 1;
    d.Wo = (d.W + 2 * pad - d.kw) / stride + 1;
    int64_t sh[4] = {d.N, d.Cout, d.Ho, d.Wo};
    ORK_TRY(new_t(g, x->dtype, 4, sh, y));
    size_t wsb = BE->conv2d_ws(&d, 0);
    void *ws = NULL;
    if (wsb) ORK_TRY(ork_arena_get(g->arena, wsb, &ws));
    ORK_TRY(BE->conv2d(KX, &d, D(x), D(w), b ? D(b) : NULL, w->dtype, D(*y), ws, x->dtype));
    if (ws) ork_arena_put(g->arena, ws);
    ork_tensor *in[3] = {x, w, b};
    if (!wants(g, 3, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, conv2d_bwd, 3, in, 1, y, &n));
    ork_tape_save(n, x);
    ork_tape_save(n, w);
    n->p.conv = d;
    return ORK_OK;
}

static ork_status maxpool_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->maxpool2x2_bwd(KX, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], D(x), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_maxpool(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const char *OP = "maxpool2x2";
    LIVE(x);
    if (x->ndim != 4 || x->shape[2] < 2 || x->shape[3] < 2) return shape_fail(OP, "x must be (N, C, H >= 2, W >= 2)", x, NULL);
    int64_t sh[4] = {x->shape[0], x->shape[1], x->shape[2] / 2, x->shape[3] / 2};
    ORK_TRY(new_t(g, x->dtype, 4, sh, y));
    ORK_TRY(BE->maxpool2x2(KX, sh[0] * sh[1], x->shape[2], x->shape[3], D(x), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, maxpool_bwd, 1, &x, 1, y, &n));
    ork_tape_save(n, x);
    return ORK_OK;
}

static ork_status upsample_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->upsample2x_bwd(KX, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_upsample(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const char *OP = "upsample2x";
    LIVE(x);
    if (x->ndim != 4) return shape_fail(OP, "x must be (N, C, H, W)", x, NULL);
    int64_t sh[4] = {x->shape[0], x->shape[1], 2 * x->shape[2], 2 * x->shape[3]};
    ORK_TRY(new_t(g, x->dtype, 4, sh, y));
    ORK_TRY(BE->upsample2x(KX, sh[0] * sh[1], x->shape[2], x->shape[3], D(x), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    return record(g, OP, upsample_bwd, 1, &x, 1, y, &n);
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

static ork_status op_matmul(ork_graph *g, ork_tensor *a, ork_tensor *b, int ta, int tb, ork_tensor **y) {
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

/* ---- reductions, cast ------------------------------------------------------------------------------ */

static const int64_t k_scalar_shape[1] = {1};

static ork_status mse_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *a = n->in[0], *b = n->in[1], *dy = n->out[0]->grad, *da = NULL, *db = NULL;
    if (needs(a)) ORK_TRY(ork_grad_new(g, a, a->dtype, &da));
    if (needs(b)) ORK_TRY(ork_grad_new(g, b, b->dtype, &db));
    ORK_TRY(BE->mse_bwd(KX, ork_tensor_numel(a), D(a), D(b), D(dy), da ? D(da) : NULL, db ? D(db) : NULL, a->dtype));
    if (da) ORK_TRY(ork_grad_push(g, a, da));
    if (db) ORK_TRY(ork_grad_push(g, b, db));
    return ORK_OK;
}

static ork_status op_mse(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
    static const char *OP = "mse";
    LIVE(a); LIVE(b);
    if (ork_tensor_numel(a) != ork_tensor_numel(b) || a->dtype != b->dtype)
        return shape_fail(OP, "a and b must match in size and dtype", a, b);
    ORK_TRY(new_t(g, ORK_F32, 1, k_scalar_shape, y));
    ORK_TRY(BE->mse(KX, ork_tensor_numel(a), D(a), D(b), a->dtype, D(*y)));
    ork_tensor *in[2] = {a, b};
    if (!wants(g, 2, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, mse_bwd, 2, in, 1, y, &n));
    ork_tape_save(n, a);
    ork_tape_save(n, b);
    return ORK_OK;
}

/* p.f[0]: the factor (1 for sum, 1/n for mean). */
static ork_status reduce_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->fill_scalar(KX, ork_tensor_numel(x), D(dy), n->p.f[0], D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_reduce(ork_graph *g, const char *OP, ork_tensor *x, int mean, ork_tensor **y) {
    LIVE(x);
    int64_t nx = ork_tensor_numel(x);
    float f = mean ? 1.0f / (float)(nx ? nx : 1) : 1.0f;
    ORK_TRY(new_t(g, ORK_F32, 1, k_scalar_shape, y));
    ORK_TRY(BE->reduce(KX, ORK_REDUCE_SUM, nx, D(x), x->dtype, D(*y)));
    if (mean) ORK_TRY(BE->axpby(KX, 1, f, D(*y), ORK_F32, 0.0f, D(*y), ORK_F32));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, reduce_bwd, 1, &x, 1, y, &n));
    n->p.f[0] = f;
    return ORK_OK;
}
static ork_status op_mean(ork_graph *g, ork_tensor *x, ork_tensor **y) { return op_reduce(g, "mean", x, 1, y); }
static ork_status op_sum(ork_graph *g, ork_tensor *x, ork_tensor **y) { return op_reduce(g, "sum", x, 0, y); }

static ork_status cast_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), 1.0f, D(dy), dy->dtype, 0.0f, D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_cast(ork_graph *g, ork_tensor *x, ork_dtype dt, ork_tensor **y) {
    static const char *OP = "cast";
    LIVE(x);
    if (dt != ORK_F32 && dt != ORK_BF16 && dt != ORK_F16 && dt != ORK_F64)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cast: to %s is not supported (f32, bf16, f16, f64)", ork_dtype_name(dt));
    ORK_TRY(new_t(g, dt, x->ndim, x->shape, y));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), 1.0f, D(x), x->dtype, 0.0f, D(*y), dt));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    return record(g, OP, cast_bwd, 1, &x, 1, y, &n);
}

/* ---- groupnorm, pad2d, softmax (appended after ABI 1.0: the FLUX VAE) --------------------------- */

/* p.i[0]: groups; aux[0], aux[1]: mean, rstd (B, G). */
static ork_status groupnorm_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *dy = n->out[0]->grad, *dx = NULL;
    int64_t B = x->shape[0], C = x->shape[1], BC = x->shape[0] * x->shape[1];
    int64_t P = BC > 0 ? ork_tensor_numel(x) / BC : 0, G = n->p.i[0];
    if (needs(x)) ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    float *dw, *db;
    ork_tensor *tw, *tb;
    ORK_TRY(f32_accum_target(g, w, &dw, &tw));
    ORK_TRY(f32_accum_target(g, b, &db, &tb));
    ORK_TRY(BE->groupnorm_bwd(KX, B, C, P, G, D(x), w ? D(w) : NULL, w ? w->dtype : ORK_F32, n->aux[0], n->aux[1],
                              D(dy), dx ? D(dx) : NULL, dw, db, x->dtype));
    if (dx) ORK_TRY(ork_grad_push(g, x, dx));
    if (tw) ORK_TRY(ork_grad_push(g, w, tw));
    if (tb) ORK_TRY(ork_grad_push(g, b, tb));
    return ORK_OK;
}

static ork_status op_groupnorm(ork_graph *g, ork_tensor *x, int num_groups, ork_tensor *w, ork_tensor *b, float eps,
                               ork_tensor **y) {
    static const char *OP = "groupnorm";
    LIVE(x);
    if (x->ndim < 2) return shape_fail(OP, "x must be (B, C, ...)", x, NULL);
    int64_t B = x->shape[0], C = x->shape[1], BC = B * C, P = BC > 0 ? ork_tensor_numel(x) / BC : 0;
    if (num_groups < 1 || C % num_groups)
        return ORK_FAIL(ORK_E_INVALID, "groupnorm: %d groups do not divide %lld channels", num_groups, (long long)C);
    if (!(eps >= 0.0f)) return ORK_FAIL(ORK_E_INVALID, "groupnorm: eps %g", (double)eps);
    ork_tensor *aff[2] = {w, b};
    for (int i = 0; i < 2; i++) {
        if (!aff[i]) continue;
        LIVE(aff[i]);
        if (ork_tensor_numel(aff[i]) != C) return shape_fail(OP, "w and b must have C elements", x, aff[i]);
        if (aff[i]->dtype != ORK_F32 && aff[i]->dtype != ORK_BF16)
            return shape_fail(OP, "w and b must be f32 or bf16", x, aff[i]);
    }
    if (w && b && w->dtype != b->dtype) return shape_fail(OP, "w and b must share a dtype", w, b);
    ork_dtype wdt = w ? w->dtype : b ? b->dtype : ORK_F32;
    float *mean, *rstd;
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(aux_f32(g, B * num_groups, &mean));
    ORK_TRY(aux_f32(g, B * num_groups, &rstd));
    ORK_TRY(BE->groupnorm(KX, B, C, P, num_groups, eps, D(x), w ? D(w) : NULL, b ? D(b) : NULL, wdt, D(*y), mean, rstd,
                          x->dtype));
    ork_tensor *in[3] = {x, w, b};
    if (!wants(g, 3, in)) {
        ork_arena_put(g->arena, mean);
        ork_arena_put(g->arena, rstd);
        return ORK_OK;
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, groupnorm_bwd, 3, in, 1, y, &n));
    ork_tape_save(n, x);
    ork_tape_save(n, w);
    n->aux[n->naux++] = mean;
    n->aux[n->naux++] = rstd;
    n->p.i[0] = num_groups;
    return ORK_OK;
}

/* The (outer, H, W) block of x inside (outer, Ho, Wo) at row top, column left:
 * a strided copy descriptor and the byte offset of the block in the big one. */
static void pad_desc(const ork_tensor *small, const ork_tensor *big, int top, int left, ork_copy_desc *d,
                     size_t *off) {
    int r = small->ndim;
    int64_t H = small->shape[r - 2], W = small->shape[r - 1], Ho = big->shape[r - 2], Wo = big->shape[r - 1];
    memset(d, 0, sizeof *d);
    d->ndim = 3;
    d->shape[0] = H * W > 0 ? ork_tensor_numel(small) / (H * W) : 0;
    d->shape[1] = H;
    d->shape[2] = W;
    d->sdt = d->ddt = small->dtype;
    *off = (size_t)(top * Wo + left) * ork_dtype_size(small->dtype);
    int64_t st_small[3] = {H * W, W, 1}, st_big[3] = {Ho * Wo, Wo, 1};
    memcpy(d->src_stride, st_small, sizeof st_small); /* caller swaps for the backward */
    memcpy(d->dst_stride, st_big, sizeof st_big);
}

/* p.i[0..3]: left, right, top, bottom */
static ork_status pad2d_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ork_copy_desc d;
    size_t off;
    pad_desc(x, dy, n->p.i[2], n->p.i[0], &d, &off);
    int64_t t[3];
    memcpy(t, d.src_stride, sizeof t);
    memcpy(d.src_stride, d.dst_stride, sizeof t);
    memcpy(d.dst_stride, t, sizeof t);
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->copy(KX, &d, (const char *)D(dy) + off, D(dx)));
    return ork_grad_push(g, x, dx);
}

static ork_status op_pad2d(ork_graph *g, ork_tensor *x, int left, int right, int top, int bottom, ork_tensor **y) {
    static const char *OP = "pad2d";
    LIVE(x);
    if (x->ndim < 2) return shape_fail(OP, "x must be (..., H, W)", x, NULL);
    if (left < 0 || right < 0 || top < 0 || bottom < 0)
        return ORK_FAIL(ORK_E_INVALID, "pad2d: negative padding (left %d, right %d, top %d, bottom %d)", left, right,
                        top, bottom);
    int64_t sh[ORK_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 2] += top + bottom;
    sh[x->ndim - 1] += left + right;
    ORK_TRY(new_t(g, x->dtype, x->ndim, sh, y));
    ORK_TRY(BE->fill(KX, ork_tensor_numel(*y), 0.0f, D(*y), x->dtype));
    ork_copy_desc d;
    size_t off;
    pad_desc(x, *y, top, left, &d, &off);
    if (ork_tensor_numel(x)) ORK_TRY(BE->copy(KX, &d, D(x), (char *)D(*y) + off));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, pad2d_bwd, 1, &x, 1, y, &n));
    n->p.i[0] = left;
    n->p.i[1] = right;
    n->p.i[2] = top;
    n->p.i[3] = bottom;
    return ORK_OK;
}

static ork_status softmax_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *y = n->out[0], *dy = y->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->softmax_bwd(KX, rows_of(x), x->shape[x->ndim - 1], D(y), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

static ork_status op_softmax(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const char *OP = "softmax";
    LIVE(x);
    if (x->ndim < 1) return shape_fail(OP, "needs at least one dim", x, NULL);
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(BE->softmax(KX, rows_of(x), x->shape[x->ndim - 1], D(x), D(*y), x->dtype));
    if (!wants(g, 1, &x)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, softmax_bwd, 1, &x, 1, y, &n));
    ork_tape_save(n, *y);
    return ORK_OK;
}

static const ork_ops g_ops = {
    .abi = ORK_ABI_INIT(ork_ops),
    .linear = op_linear,
    .add = op_add,
    .mul = op_mul,
    .scale = op_scale,
    .modulate = op_modulate,
    .layernorm = op_layernorm,
    .rmsnorm = op_rmsnorm,
    .gelu_tanh = op_gelu,
    .silu = op_silu,
    .relu = op_relu,
    .swiglu = op_swiglu,
    .tanh_clamp = op_tanh_clamp,
    .rope = op_rope,
    .attention = op_attention,
    .reshape = op_reshape,
    .permute = op_permute,
    .concat = op_concat,
    .split = op_split,
    .conv2d = op_conv2d,
    .maxpool2x2 = op_maxpool,
    .upsample2x = op_upsample,
    .matmul = op_matmul,
    .mse = op_mse,
    .mean = op_mean,
    .sum = op_sum,
    .cast = op_cast,
    .groupnorm = op_groupnorm,
    .pad2d = op_pad2d,
    .softmax = op_softmax,
    .embedding = ork_op_embedding,
    .attention_bias = ork_op_attention_bias,
    .quick_gelu = ork_op_quick_gelu,
    .layernorm_affine = ork_op_layernorm_affine,
};

const ork_ops *ork_ops_table(void) { return &g_ops; }

/* ---- the tensor service ------------------------------------------------------------------------------ */

static int t_ndim(const ork_tensor *t) { return t->ndim; }
static int64_t t_dim(const ork_tensor *t, int axis) {
    int a = norm_axis(axis, t->ndim);
    return a >= 0 && a < t->ndim ? t->shape[a] : 0;
}
static int64_t t_numel(const ork_tensor *t) { return ork_tensor_numel(t); }
static ork_dtype t_dtype(const ork_tensor *t) { return t->dtype; }
static ork_device t_device(const ork_tensor *t) { return t->device; }
static const char *t_name(const ork_tensor *t) { return t->name ? t->name : ""; }

static ork_status t_empty(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out) {
    return ork_graph_new_tensor(g, dt, ndim, shape, out);
}

static ork_status t_from_host(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, const void *host,
                              ork_tensor **out) {
    ORK_TRY(ork_graph_new_tensor(g, dt, ndim, shape, out));
    if (!host) return ORK_FAIL(ORK_E_INVALID, "from_host: host data is NULL");
    return BE->memcpy_h2d(KX, D(*out), host, ork_tensor_nbytes(*out));
}

static ork_status t_to_host(ork_graph *g, const ork_tensor *t, ork_dtype dst_dt, void *host) {
    if (t->flags & ORK_TF_FREED) return ORK_FAIL(ORK_E_INVALID, "to_host: tensor was released (by a backward pass, or dropped)");
    if (dst_dt != t->dtype && (!ork_elem_float_dt(dst_dt) || !ork_elem_float_dt(t->dtype)))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "to_host: %s -> %s", ork_dtype_name(t->dtype), ork_dtype_name(dst_dt));
    size_t nb = ork_tensor_nbytes(t);
    int64_t n = ork_tensor_numel(t);
    if (dst_dt == t->dtype) {
        ORK_TRY(BE->memcpy_d2h(KX, host, D(t), nb));
        return BE->sync(KX);
    }
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return ORK_FAIL(ORK_E_NOMEM, "to_host: out of host memory");
    ork_status s = BE->memcpy_d2h(KX, tmp, D(t), nb);
    if (s == ORK_OK) s = BE->sync(KX);
    for (int64_t i = 0; s == ORK_OK && i < n; i++) ork_elem_store(host, dst_dt, i, ork_elem_load(tmp, t->dtype, i));
    free(tmp);
    return s;
}

static ork_device t_graph_device(const ork_graph *g) { return g->be->device; }
static int t_grad_enabled(const ork_graph *g) { return g->grad_enabled; }

static ork_status t_weight(ork_graph *g, const char *name, ork_tensor **out) {
    if (!name) return ORK_FAIL(ORK_E_INVALID, "weight: name is NULL");
    if (!g->weight_fn) return ORK_FAIL(ORK_E_INVALID, "weight \"%s\": no weight store is attached to this graph", name);
    return g->weight_fn(g->weight_ctx, g, name, out);
}

static ork_status t_persistent(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, const void *host,
                               ork_tensor **out) {
    if (!host) return ORK_FAIL(ORK_E_INVALID, "persistent: host data is NULL");
    ORK_TRY(ork_tensor_new(g->alloc, "frozen", dt, ndim, shape, 0, out));
    ork_status s = BE->memcpy_h2d(KX, D(*out), host, ork_tensor_nbytes(*out));
    if (s == ORK_OK) s = BE->sync(KX); /* host may be freed as soon as we return */
    if (s != ORK_OK) { ork_tensor_free(*out); *out = NULL; }
    return s;
}

static void t_release(ork_tensor *t) { ork_tensor_free(t); }

/* The caller is done with t: its arena block goes back now. Only a tensor
 * that owns a whole block of g's arena nobody else reads: off the tape
 * (nothing saved it, no producer node: the tape frees its own), not a weight,
 * a parameter, a keep, a view or a view's source. */
static void t_drop(ork_graph *g, ork_tensor *t) {
    if (!g || !t || t->owner != ORK_OWN_GRAPH || t->node || t->saves > 0 || t->offset != 0 || t->grad) return;
    if (t->flags & (ORK_TF_WEIGHT | ORK_TF_PARAM | ORK_TF_KEEP | ORK_TF_FREED | ORK_TF_VIEWED)) return;
    if (ork_arena_put_if_live(g->arena, t->base)) t->flags |= ORK_TF_FREED; /* else another graph's: not ours */
}

static const ork_tensor_api g_tensor_api = {
    .abi = ORK_ABI_INIT(ork_tensor_api),
    .ndim = t_ndim,
    .dim = t_dim,
    .numel = t_numel,
    .dtype = t_dtype,
    .device = t_device,
    .name = t_name,
    .empty = t_empty,
    .from_host = t_from_host,
    .to_host = t_to_host,
    .graph_device = t_graph_device,
    .grad_enabled = t_grad_enabled,
    .weight = t_weight,
    .persistent = t_persistent,
    .release = t_release,
    .drop = t_drop,
};

const ork_tensor_api *ork_tensor_api_table(void) { return &g_tensor_api; }
