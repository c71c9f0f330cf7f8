/* tensor/ops_norm.c — the normalizations: layernorm, rmsnorm, groupnorm
 * and softmax, forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- layernorm, rmsnorm ------------------------------------------------------------------ */

static ork_status layernorm_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->layernorm_bwd(KX, rows_of(x), x->shape[x->ndim - 1], D(x), n->aux[0], n->aux[1], D(dy), D(dx),
                              x->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_layernorm(ork_graph *g, ork_tensor *x, float eps, ork_tensor **y) {
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

ork_status ork_op_rmsnorm(ork_graph *g, ork_tensor *x, ork_tensor *w, float eps, ork_tensor **y) {
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

/* ---- groupnorm (the FLUX VAE) ---------------------------------------------------------------- */

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

ork_status ork_op_groupnorm(ork_graph *g, ork_tensor *x, int num_groups, ork_tensor *w, ork_tensor *b, float eps,
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

/* ---- softmax ---------------------------------------------------------------------------------------------- */

static ork_status softmax_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *y = n->out[0], *dy = y->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->softmax_bwd(KX, rows_of(x), x->shape[x->ndim - 1], D(y), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_softmax(ork_graph *g, ork_tensor *x, ork_tensor **y) {
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
