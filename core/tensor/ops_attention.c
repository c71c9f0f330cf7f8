/* tensor/ops_attention.c — rope and attention (the backend's fused
 * kernel, or a composite of matmul, softmax and scale where it has none),
 * forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- rope, attention ------------------------------------------------------------------------- */

static ork_status rope_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *pe = n->in[1], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->rope_bwd(KX, x->shape[0] * x->shape[1], x->shape[2], x->shape[3], 0, D(dy), D(pe), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_rope(ork_graph *g, ork_tensor *x, ork_tensor *pe, ork_tensor **y) {
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
    ORK_TRY(ork_op_matmul(g, q, k, 0, 1, &s)); /* (B, H, Lq, Lk) */
    ORK_TRY(ork_op_scale(g, s, scale, &s));
    ORK_TRY(ork_op_softmax(g, s, &p));
    return ork_op_matmul(g, p, v, 0, 0, y);
}

ork_status ork_op_attention(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, const ork_attn_opts *opts,
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
