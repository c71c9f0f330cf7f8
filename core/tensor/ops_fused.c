/* tensor/ops_fused.c — the fused block epilogues of the ops service (ABI 1.4,
 * issue #31): the gated residual add y = x + gate·h and the modulated layer norm
 * y = LN(x)·(1 + scale) + shift. Where the backend has the fused kernels (CUDA:
 * cuda/cuda_fused.cu) and the per-row operand is per (leading dims, channel) —
 * (B, 1, C), (1, 1, C) or (C) against x (B, L, C) — each is one tape node whose
 * forward and backward are one kernel each (plus a small deterministic sum of
 * partials); everywhere else (the CPU backend, other broadcasts, other dtypes)
 * the op is the composition of the recorded ops it replaces, mul + add and
 * layernorm + modulate: the same values and the same tape as before.
 * gated_add's backward passes dy on to x without a copy when it may (dx = dy).
 * ORK_FUSED_OPS=0 in the environment turns the fused path off (A/B runs).
 * Owns nothing. [control-thread] */
#include "tensor/ops_fused.h"

#include "tensor/ops_impl.h"

#include <stdlib.h>
#include <string.h>

/* The fused path is on unless ORK_FUSED_OPS=0; read once. */
static int fused_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("ORK_FUSED_OPS");
        on = !(e && e[0] == '0');
    }
    return on;
}

/* x (..., L, C) as B·L rows of C and p broadcast per row: p's last dim C, its
 * second-to-last 1 (or absent), and numel C (shared: *Bp = 1) or B·C (one row
 * per leading index: *Bp = B; the broadcast check has made its dims x's).
 * 0: not of that form (the op composes). */
static int row_map(const ork_tensor *x, const ork_tensor *p, int64_t *B, int64_t *L, int64_t *C, int64_t *Bp) {
    if (x->ndim < 2 || p->ndim < 1) return 0;
    *C = x->shape[x->ndim - 1];
    *L = x->shape[x->ndim - 2];
    if (*C < 1 || *L < 1 || p->shape[p->ndim - 1] != *C) return 0;
    if (p->ndim >= 2 && p->shape[p->ndim - 2] != 1) return 0;
    *B = ork_tensor_numel(x) / (*L * *C);
    int64_t np = ork_tensor_numel(p);
    if (np == *C) *Bp = 1;
    else if (np == *B * *C) *Bp = *B;
    else return 0;
    return 1;
}

/* x's gradient is y's (dx = dy): hand dy itself on when nothing else holds
 * it (y is the graph's, not kept, its grad a whole arena block), else a copy. */
static ork_status pass_grad(ork_graph *g, ork_tensor *y, ork_tensor *x) {
    ork_tensor *dy = y->grad;
    if (!needs(x)) return ORK_OK;
    if (!(y->flags & ORK_TF_KEEP) && y->owner == ORK_OWN_GRAPH && dy->owner == ORK_OWN_GRAPH && dy->offset == 0 &&
        !(dy->flags & (ORK_TF_FREED | ORK_TF_KEEP | ORK_TF_VIEWED))) {
        y->grad = NULL; /* x's now: adopted, or added in and released by the push */
        return ork_grad_push(g, x, dy);
    }
    ork_tensor *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), 1.0f, D(dy), dy->dtype, 0.0f, D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

/* An output made for a fused kernel that declined: its arena block back. */
static void drop_out(ork_graph *g, ork_tensor *y) {
    ork_arena_put(g->arena, y->base);
    y->flags |= ORK_TF_FREED;
}

/* ---- gated_add ------------------------------------------------------------------------------ */

/* The row map a node keeps in its parameters: x as B·L rows of C; Bg rows of
 * gate (gated_add) or shift (layernorm_modulate), Bs of scale. */
typedef struct { int64_t B, L, C, Bg, Bs; } rows_p;
static void put_rows(ork_tape_node *n, const rows_p *r) {
    _Static_assert(sizeof(rows_p) <= sizeof n->p, "rows_p fits the node's parameters");
    memcpy(&n->p, r, sizeof *r);
}
static rows_p get_rows(const ork_tape_node *n) {
    rows_p r;
    memcpy(&r, &n->p, sizeof r);
    return r;
}

static ork_status gated_add_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *gate = n->in[1], *h = n->in[2], *y = n->out[0], *dy = y->grad, *dh = NULL, *dg = NULL;
    rows_p r = get_rows(n);
    if (needs(h)) ORK_TRY(ork_grad_new(g, h, h->dtype, &dh));
    if (needs(gate)) ORK_TRY(ork_grad_new(g, gate, gdt_of(gate), &dg));
    if (dh || dg)
        ORK_TRY(BE->gated_add_bwd(KX, r.B, r.L, r.C, r.Bg, D(gate), D(h), D(dy), dh ? D(dh) : NULL, dg ? D(dg) : NULL,
                                  dg ? dg->dtype : ORK_F32, x->dtype));
    if (dh) ORK_TRY(ork_grad_push(g, h, dh));
    if (dg) ORK_TRY(ork_grad_push(g, gate, dg));
    return pass_grad(g, y, x); /* last: dy is read above */
}

/* add(x, mul(h, gate)): the ops it replaces, recorded as they were */
static ork_status gated_composed(ork_graph *g, ork_tensor *x, ork_tensor *gate, ork_tensor *h, ork_tensor **y) {
    ork_tensor *t;
    ORK_TRY(ork_op_mul(g, h, gate, &t));
    return ork_op_add(g, x, t, y);
}

ork_status ork_op_gated_add(ork_graph *g, ork_tensor *x, ork_tensor *gate, ork_tensor *h, ork_tensor **y) {
    static const char *OP = "gated_add";
    LIVE(x); LIVE(gate); LIVE(h);
    if (!ork_shape_equal(x, h) || x->dtype != h->dtype) return shape_fail(OP, "x and h need one shape and dtype", x, h);
    ork_bcast bc;
    ORK_TRY(make_bcast(OP, x, gate, &bc));
    rows_p r = {0};
    if (!fused_on() || !BE->gated_add || gate->dtype != x->dtype || !row_map(x, gate, &r.B, &r.L, &r.C, &r.Bg))
        return gated_composed(g, x, gate, h, y);
    ORK_TRY(new_like(g, x, y));
    ork_status s = BE->gated_add(KX, r.B, r.L, r.C, r.Bg, D(x), D(gate), D(h), D(*y), x->dtype);
    if (s == ORK_E_UNSUPPORTED) { /* the backend cannot (nothing logged): compose */
        drop_out(g, *y);
        return gated_composed(g, x, gate, h, y);
    }
    ORK_TRY(s);
    ork_tensor *in[3] = {x, gate, h};
    if (!wants(g, 3, in)) return ORK_OK;
    ork_tape_node *n;
    ORK_TRY(record(g, OP, gated_add_bwd, 3, in, 1, y, &n));
    if (needs(h)) ork_tape_save(n, gate); /* dh = dy·gate */
    if (needs(gate)) ork_tape_save(n, h); /* dgate = Σ dy·h */
    put_rows(n, &r);
    return ORK_OK;
}

/* ---- layernorm_modulate ---------------------------------------------------------------------- */

static ork_status ln_mod_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *sh = n->in[1], *sc = n->in[2], *dy = n->out[0]->grad, *dx = NULL, *dsh = NULL,
               *dsc = NULL;
    rows_p r = get_rows(n);
    if (needs(x)) ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    if (needs(sh)) ORK_TRY(ork_grad_new(g, sh, gdt_of(sh), &dsh));
    if (needs(sc)) ORK_TRY(ork_grad_new(g, sc, gdt_of(sc), &dsc));
    ORK_TRY(BE->layernorm_modulate_bwd(KX, r.B, r.L, r.C, r.Bg, r.Bs, D(x), D(sc), n->aux[0], n->aux[1], D(dy),
                                       dx ? D(dx) : NULL, dsh ? D(dsh) : NULL, dsh ? dsh->dtype : ORK_F32,
                                       dsc ? D(dsc) : NULL, dsc ? dsc->dtype : ORK_F32, x->dtype));
    if (dx) ORK_TRY(ork_grad_push(g, x, dx));
    if (dsh) ORK_TRY(ork_grad_push(g, sh, dsh));
    if (dsc) ORK_TRY(ork_grad_push(g, sc, dsc));
    return ORK_OK;
}

static ork_status ln_mod_composed(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, float eps,
                                  ork_tensor **y) {
    ork_tensor *t;
    ORK_TRY(ork_op_layernorm(g, x, eps, &t));
    return ork_op_modulate(g, t, shift, scale, y);
}

ork_status ork_op_layernorm_modulate(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, float eps,
                                     ork_tensor **y) {
    static const char *OP = "layernorm_modulate";
    LIVE(x); LIVE(shift); LIVE(scale);
    if (x->ndim < 1) return shape_fail(OP, "needs at least one dim", x, NULL);
    if (shift->dtype != x->dtype || scale->dtype != x->dtype)
        return shape_fail(OP, "shift and scale need x's dtype", x, shift->dtype != x->dtype ? shift : scale);
    ork_bcast b1, b2;
    ORK_TRY(make_bcast(OP, x, shift, &b1));
    ORK_TRY(make_bcast(OP, x, scale, &b2));
    rows_p r = {0}, r2;
    if (!fused_on() || !BE->layernorm_modulate || !row_map(x, shift, &r.B, &r.L, &r.C, &r.Bg) ||
        !row_map(x, scale, &r2.B, &r2.L, &r2.C, &r.Bs))
        return ln_mod_composed(g, x, shift, scale, eps, y);
    int64_t R = r.B * r.L;
    float *mean, *rstd;
    ORK_TRY(new_like(g, x, y));
    ORK_TRY(aux_f32(g, R, &mean));
    ORK_TRY(aux_f32(g, R, &rstd));
    ork_status s = BE->layernorm_modulate(KX, r.B, r.L, r.C, r.Bg, r.Bs, eps, D(x), D(shift), D(scale), D(*y), mean,
                                          rstd, x->dtype);
    ork_tensor *in[3] = {x, shift, scale};
    if (s != ORK_OK || !wants(g, 3, in)) {
        ork_arena_put(g->arena, mean);
        ork_arena_put(g->arena, rstd);
        if (s != ORK_E_UNSUPPORTED) return s;
        drop_out(g, *y); /* the backend cannot (nothing logged): compose */
        return ln_mod_composed(g, x, shift, scale, eps, y);
    }
    ork_tape_node *n;
    ORK_TRY(record(g, OP, ln_mod_bwd, 3, in, 1, y, &n));
    ork_tape_save(n, x);
    ork_tape_save(n, scale);
    n->aux[n->naux++] = mean;
    n->aux[n->naux++] = rstd;
    put_rows(n, &r);
    return ORK_OK;
}
