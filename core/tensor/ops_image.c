/* tensor/ops_image.c — the image ops: conv2d, maxpool2x2, upsample2x
 * and pad2d, forward and backward.
 * Each op checks its arguments, allocates outputs from the graph's arena,
 * runs the backend's kernel and, when the tape wants it, records the node
 * whose backward is next to it. Owns nothing. [control-thread] */
#include "tensor/ops_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- images ------------------------------------------------------------------------------------- */

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

ork_status ork_op_conv2d(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, int stride, int pad,
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

ork_status ork_op_maxpool(ork_graph *g, ork_tensor *x, ork_tensor **y) {
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

ork_status ork_op_upsample(ork_graph *g, ork_tensor *x, ork_tensor **y) {
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

/* ---- pad2d (the FLUX VAE) ------------------------------------------------------------------------ */

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

ork_status ork_op_pad2d(ork_graph *g, ork_tensor *x, int left, int right, int top, int bottom, ork_tensor **y) {
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
