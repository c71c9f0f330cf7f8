/* tensor/ops_impl.h — what the files of the ops service share (private to
 * core/tensor): the checks every op runs first (one clear line on a NULL,
 * released or foreign tensor, or a shape mismatch), output allocation from
 * the graph's arena, tape recording, broadcasting and the GEMM-into-gradient
 * step; and the ops themselves, one declaration each, for the table in ops.c.
 * The ops are grouped by layer: ops_linear.c (linear + LoRA, matmul),
 * ops_elementwise.c (add, mul, scale, modulate, activations), ops_norm.c
 * (layernorm, rmsnorm, groupnorm, softmax), ops_attention.c (rope,
 * attention), ops_shape.c (reshape, permute, concat, split), ops_image.c
 * (conv2d, maxpool, upsample, pad2d), ops_reduce.c (mse, mean, sum, cast).
 * Signatures and semantics: <orakul/ops.h>. Owns nothing. [control-thread] */
#ifndef ORK_TENSOR_OPS_IMPL_H
#define ORK_TENSOR_OPS_IMPL_H

#include "tensor/graph.h"
#include "tensor/tape.h"
#include "util/log.h"

#include <orakul/ops.h>
#include <string.h>

#define BE (g->be)
#define KX (&g->k)
#define D(t) ork_tensor_data(t)


static inline ork_status live(const char *op, const char *arg, const ork_tensor *t, const ork_graph *g) {
    if (!t) return ORK_FAIL(ORK_E_INVALID, "%s: %s is NULL", op, arg);
    if (t->flags & ORK_TF_FREED)
        return ORK_FAIL(ORK_E_INVALID, "%s: %s was released (by a backward pass, or dropped) and is used after", op, arg);
    if (t->device != g->be->device)
        return ORK_FAIL(ORK_E_INVALID, "%s: %s is on the %s but the graph runs on the %s", op, arg,
                        t->device == ORK_DEV_CPU ? "cpu" : "gpu", g->be->device == ORK_DEV_CPU ? "cpu" : "gpu");
    return ORK_OK;
}
#define LIVE(t) ORK_TRY(live(OP, #t, (t), g))

static inline ork_status shape_fail(const char *op, const char *what, const ork_tensor *a, const ork_tensor *b) {
    char sa[96], sb[96] = "";
    ork_tensor_str(a, sa, sizeof sa);
    if (b) ork_tensor_str(b, sb, sizeof sb);
    return ORK_FAIL(ORK_E_INVALID, "%s: %s: %s%s%s", op, what, sa, b ? " vs " : "", sb);
}

static inline int norm_axis(int axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

static inline ork_status new_t(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out) {
    return ork_graph_new_tensor(g, dt, ndim, shape, out);
}
static inline ork_status new_like(ork_graph *g, const ork_tensor *t, ork_tensor **out) {
    return new_t(g, t->dtype, t->ndim, t->shape, out);
}

static inline int wants(ork_graph *g, int n, ork_tensor *const *in) { return ork_tape_wants(g, n, in); }

static inline ork_status record(ork_graph *g, const char *op, ork_bwd_fn bwd, int nin, ork_tensor *const *in, int nout,
                         ork_tensor *const *out, ork_tape_node **n) {
    return ork_tape_push(g, op, bwd, nin, in, nout, out, n);
}

/* An arena block for a node's auxiliary F32 data (lse, mean, rstd). */
static inline ork_status aux_f32(ork_graph *g, int64_t n, float **p) {
    return ork_arena_get(g->arena, (size_t)(n > 0 ? n : 1) * sizeof(float), (void **)p);
}

/* Grad dtype for a gradient temp of t: F32 for parameters, else t's. */
static inline ork_dtype gdt_of(const ork_tensor *t) { return (t->flags & ORK_TF_PARAM) ? ORK_F32 : t->dtype; }

static inline int needs(const ork_tensor *t) { return t && t->requires_grad; }

/* Broadcast b against a (numpy, right-aligned, b never larger). */
static inline ork_status make_bcast(const char *op, const ork_tensor *a, const ork_tensor *b, ork_bcast *bc) {
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
static inline ork_status gemm_to_grad(ork_graph *g, ork_tensor *t, ork_gemm_desc *d) {
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

/* Rows of x as (rows, C), C its last dim. */
static inline int64_t rows_of(const ork_tensor *x) {
    int64_t C = x->shape[x->ndim - 1];
    return C ? ork_tensor_numel(x) / C : 0;
}

/* Grad (F32) buffer a kernel accumulates into: the param's own, or a zeroed
 * temporary pushed later (*tmp set). */
static inline ork_status f32_accum_target(ork_graph *g, ork_tensor *t, float **buf, ork_tensor **tmp) {
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

/* ---- the ops (the table in ops.c) ---------------------------------------------- */
ork_status ork_op_linear(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, ork_tensor **y);
ork_status ork_op_add(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
ork_status ork_op_mul(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
ork_status ork_op_scale(ork_graph *g, ork_tensor *x, float s, ork_tensor **y);
ork_status ork_op_modulate(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, ork_tensor **y);
ork_status ork_op_layernorm(ork_graph *g, ork_tensor *x, float eps, ork_tensor **y);
ork_status ork_op_rmsnorm(ork_graph *g, ork_tensor *x, ork_tensor *w, float eps, ork_tensor **y);
ork_status ork_op_gelu(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_silu(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_relu(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_swiglu(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_tanh_clamp(ork_graph *g, ork_tensor *x, float c, ork_tensor **y);
ork_status ork_op_rope(ork_graph *g, ork_tensor *x, ork_tensor *pe, ork_tensor **y);
ork_status ork_op_attention(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, const ork_attn_opts *opts, ork_tensor **y);
ork_status ork_op_reshape(ork_graph *g, ork_tensor *x, int ndim, const int64_t *shape, ork_tensor **y);
ork_status ork_op_permute(ork_graph *g, ork_tensor *x, const int *perm, ork_tensor **y);
ork_status ork_op_concat(ork_graph *g, int n, ork_tensor *const *xs, int axis, ork_tensor **y);
ork_status ork_op_split(ork_graph *g, ork_tensor *x, int axis, int n, const int64_t *sizes, ork_tensor **ys);
ork_status ork_op_conv2d(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, int stride, int pad, ork_tensor **y);
ork_status ork_op_maxpool(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_upsample(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_matmul(ork_graph *g, ork_tensor *a, ork_tensor *b, int ta, int tb, ork_tensor **y);
ork_status ork_op_mse(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
ork_status ork_op_mean(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_sum(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_cast(ork_graph *g, ork_tensor *x, ork_dtype dt, ork_tensor **y);
ork_status ork_op_groupnorm(ork_graph *g, ork_tensor *x, int num_groups, ork_tensor *w, ork_tensor *b, float eps, ork_tensor **y);
ork_status ork_op_pad2d(ork_graph *g, ork_tensor *x, int left, int right, int top, int bottom, ork_tensor **y);
ork_status ork_op_softmax(ork_graph *g, ork_tensor *x, ork_tensor **y);

#endif
