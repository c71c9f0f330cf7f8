/* tensor/ops_shape.c — reshape, permute, concat and split, forward and
 * backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

ork_status ork_op_reshape(ork_graph *g, ork_tensor *x, int ndim, const int64_t *shape, ork_tensor **y) {
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

ork_status ork_op_permute(ork_graph *g, ork_tensor *x, const int *perm, ork_tensor **y) {
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

ork_status ork_op_concat(ork_graph *g, int n, ork_tensor *const *xs, int axis, ork_tensor **y) {
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

ork_status ork_op_split(ork_graph *g, ork_tensor *x, int axis, int n, const int64_t *sizes, ork_tensor **ys) {
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
