/* tensor/ops_reduce.c — the reductions (mse, mean, sum) and cast,
 * forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

ork_status ork_op_mse(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y) {
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
ork_status ork_op_mean(ork_graph *g, ork_tensor *x, ork_tensor **y) { return op_reduce(g, "mean", x, 1, y); }
ork_status ork_op_sum(ork_graph *g, ork_tensor *x, ork_tensor **y) { return op_reduce(g, "sum", x, 0, y); }

static ork_status cast_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *x = n->in[0], *dy = n->out[0]->grad, *dx;
    ORK_TRY(ork_grad_new(g, x, x->dtype, &dx));
    ORK_TRY(BE->axpby(KX, ork_tensor_numel(x), 1.0f, D(dy), dy->dtype, 0.0f, D(dx), dx->dtype));
    return ork_grad_push(g, x, dx);
}

ork_status ork_op_cast(ork_graph *g, ork_tensor *x, ork_dtype dt, ork_tensor **y) {
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
