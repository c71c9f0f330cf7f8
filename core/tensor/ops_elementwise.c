/* tensor/ops_elementwise.c — the elementwise ops: add and mul (with
 * broadcasting), scale, modulate, and the activations (gelu, silu, relu,
 * tanh_clamp, swiglu), forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
ork_status ork_op_add(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
    return op_binary(g, "add", ORK_BINARY_ADD, a, b, y);
}
ork_status ork_op_mul(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
    return op_binary(g, "mul", ORK_BINARY_MUL, a, b, y);
}

static ork_status scale_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), n->p.f[0], D(dy), dy->dtype, 0.0f, D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_scale(ork_graph *g, ork_tensor *x, float s, ork_tensor **y) {
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

ork_status ork_op_modulate(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, ork_tensor **y) {
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
ork_status ork_op_gelu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "gelu_tanh", ORK_UNARY_GELU_TANH, 0.0f, x, y);
}
ork_status ork_op_silu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "silu", ORK_UNARY_SILU, 0.0f, x, y);
}
ork_status ork_op_relu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    return op_unary(g, "relu", ORK_UNARY_RELU, 0.0f, x, y);
}
ork_status ork_op_tanh_clamp(ork_graph *g, ork_tensor *x, float c, ork_tensor **y) {
    if (!(c > 0.0f)) return ORK_FAIL(ORK_E_INVALID, "tanh_clamp: c must be > 0, got %g", (double)c);
    return op_unary(g, "tanh_clamp", ORK_UNARY_TANH_CLAMP, c, x, y);
}

static ork_status swiglu_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->swiglu_bwd(KX, rows_of(x), x->shape[x->ndim - 1] / 2, D(x), D(dy), D(dx), x->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_swiglu(ork_graph *g, ork_tensor *x, ork_tensor **y) {
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
