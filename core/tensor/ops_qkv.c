/* tensor/ops_qkv.c — the attention side of a FLUX block as two ops (issue
 * #31), forward and backward:
 *   qkv_rope   qkv linear outputs (B, L_i, 3·H·D), one per stream -> q, k, v
 *              (B, H, ΣL_i, D) with the q/k RMS norm and RoPE applied. Where
 *              the backend has the fused kernel (CUDA: cuda/cuda_qkv.cu) one
 *              read of qkv and one write of q, k, v each way; elsewhere (the
 *              CPU) the recorded composition split + reshape + permute +
 *              rmsnorm + concat + rope that the FLUX plugin ran before, so the
 *              CPU's numbers are those of the composition bit for bit.
 *   attn_merge attention's output (B, H, L, D) back to token rows, cut along
 *              L and/or followed by an extra activation's row: strided copies
 *              straight into the outputs (one copy of each element), exact on
 *              every backend.
 * Each op checks its arguments (one clear line), allocates outputs from the
 * graph's arena and records the node whose backward is next to it. Owns the
 * process-wide "force the composition" switch. [control-thread] */
#include "tensor/ops_qkv.h"

#include "tensor/ops_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- qkv_rope ---------------------------------------------------------------------------------- */

static int g_force_composite = -1; /* -1: not yet read from ORAKUL_QKV_COMPOSITE */

void ork_qkv_force_composite(int on) { g_force_composite = on != 0; }

static int use_fused(const ork_graph *g, int64_t D) {
    if (g_force_composite < 0) {
        const char *e = getenv("ORAKUL_QKV_COMPOSITE");
        g_force_composite = e && *e && strcmp(e, "0") != 0;
    }
    return !g_force_composite && g->be->qkv_rope && g->be->qkv_rope_bwd && D <= ORK_QKV_MAX_D;
}

/* (B, L, d) -> (B, H, L, D), as the FLUX plugin's to_heads did */
static ork_status heads_of(ork_graph *g, ork_tensor *x, int64_t H, int64_t D, ork_tensor **y) {
    int64_t shape[4] = {x->shape[0], x->shape[1], H, D};
    static const int perm[4] = {0, 2, 1, 3};
    ORK_TRY(ork_op_reshape(g, x, 4, shape, &x));
    return ork_op_permute(g, x, perm, y);
}

static ork_status qkv_rope_composite(ork_graph *g, int n, ork_tensor *const *qkv, ork_tensor *const *qw,
                                     ork_tensor *const *kw, ork_tensor *pe, float eps, int64_t H, int64_t D,
                                     ork_tensor **q, ork_tensor **k, ork_tensor **v) {
    ork_tensor *qs[ORK_QKV_MAX], *ks[ORK_QKV_MAX], *vs[ORK_QKV_MAX];
    int64_t d = H * D, sizes[3] = {d, d, d};
    for (int i = 0; i < n; i++) {
        ork_tensor *p[3];
        ORK_TRY(ork_op_split(g, qkv[i], -1, 3, sizes, p));
        ORK_TRY(heads_of(g, p[0], H, D, &qs[i]));
        ORK_TRY(heads_of(g, p[1], H, D, &ks[i]));
        ORK_TRY(heads_of(g, p[2], H, D, &vs[i]));
        ORK_TRY(ork_op_rmsnorm(g, qs[i], qw ? qw[i] : NULL, eps, &qs[i]));
        ORK_TRY(ork_op_rmsnorm(g, ks[i], kw ? kw[i] : NULL, eps, &ks[i]));
    }
    ork_tensor *qc = qs[0], *kc = ks[0];
    *v = vs[0];
    if (n > 1) {
        ORK_TRY(ork_op_concat(g, n, qs, 2, &qc));
        ORK_TRY(ork_op_concat(g, n, ks, 2, &kc));
        ORK_TRY(ork_op_concat(g, n, vs, 2, v));
    }
    ORK_TRY(ork_op_rope(g, qc, pe, q));
    return ork_op_rope(g, kc, pe, k);
}

/* The descriptor of a recorded or about-to-run call (n->in: qkv[0..n), qw[0..n), kw[0..n)). */
static void qkv_desc(int n, ork_tensor *const *qkv, ork_tensor *const *qw, ork_tensor *const *kw, int64_t H,
                     int64_t D, float eps, ork_qkv_desc *d) {
    memset(d, 0, sizeof *d);
    d->B = qkv[0]->shape[0];
    d->H = H;
    d->D = D;
    d->n = n;
    d->eps = eps;
    for (int i = 0; i < n; i++) {
        d->len[i] = qkv[i]->shape[1];
        d->L += d->len[i];
        d->qkv[i] = D(qkv[i]);
        if (qw && qw[i]) { d->qw[i] = D(qw[i]); d->qwdt[i] = qw[i]->dtype; }
        if (kw && kw[i]) { d->kw[i] = D(kw[i]); d->kwdt[i] = kw[i]->dtype; }
    }
}

static ork_status qkv_rope_bwd(ork_graph *g, ork_tape_node *n) {
    int ns = n->p.i[0];
    int64_t H = n->p.i[1];
    ork_tensor *const *qkv = n->in, *const *qw = n->in + ns, *const *kw = n->in + 2 * ns, *pe = n->in[3 * ns];
    int64_t D = n->out[0]->shape[3];
    ork_qkv_desc d;
    qkv_desc(ns, qkv, qw, kw, H, D, 0.0f, &d);
    ork_tensor *dqkv[ORK_QKV_MAX] = {0}, *dqw[ORK_QKV_MAX] = {0}, *dkw[ORK_QKV_MAX] = {0};
    void *pdqkv[ORK_QKV_MAX] = {0};
    float *pdqw[ORK_QKV_MAX] = {0}, *pdkw[ORK_QKV_MAX] = {0};
    for (int i = 0; i < ns; i++) {
        if (needs(qkv[i])) { ORK_TRY(ork_grad_new(g, qkv[i], qkv[i]->dtype, &dqkv[i])); pdqkv[i] = D(dqkv[i]); }
        if (needs(qw[i])) { ORK_TRY(ork_grad_new(g, qw[i], ORK_F32, &dqw[i])); pdqw[i] = D(dqw[i]); }
        if (needs(kw[i])) { ORK_TRY(ork_grad_new(g, kw[i], ORK_F32, &dkw[i])); pdkw[i] = D(dkw[i]); }
    }
    ork_tensor *dq = n->out[0]->grad, *dk = n->out[1]->grad, *dv = n->out[2]->grad;
    ORK_TRY(BE->qkv_rope_bwd(KX, &d, D(pe), n->aux[0], dq ? D(dq) : NULL, dk ? D(dk) : NULL, dv ? D(dv) : NULL,
                             pdqkv, pdqw, pdkw, n->out[0]->dtype));
    for (int i = 0; i < ns; i++) {
        if (dqkv[i]) ORK_TRY(ork_grad_push(g, qkv[i], dqkv[i]));
        if (dqw[i]) ORK_TRY(ork_grad_push(g, qw[i], dqw[i]));
        if (dkw[i]) ORK_TRY(ork_grad_push(g, kw[i], dkw[i]));
    }
    return ORK_OK;
}

ork_status ork_op_qkv_rope(ork_graph *g, int n, ork_tensor *const *qkv, ork_tensor *const *qw, ork_tensor *const *kw,
                           ork_tensor *pe, float eps, int heads, ork_tensor **q, ork_tensor **k, ork_tensor **v) {
    static const char *OP = "qkv_rope";
    if (n < 1 || n > ORK_QKV_MAX || !qkv)
        return ORK_FAIL(ORK_E_INVALID, "qkv_rope: %d streams (1..%d, qkv not NULL)", n, ORK_QKV_MAX);
    if (!q || !k || !v) return ORK_FAIL(ORK_E_INVALID, "qkv_rope: q, k and v must not be NULL");
    if (heads < 1) return ORK_FAIL(ORK_E_INVALID, "qkv_rope: %d heads", heads);
    if (!(eps >= 0.0f)) return ORK_FAIL(ORK_E_INVALID, "qkv_rope: eps %g", (double)eps);
    for (int i = 0; i < n; i++) ORK_TRY(live(OP, "a qkv tensor", qkv[i], g));
    ork_tensor *x0 = qkv[0];
    if (x0->ndim != 3 || x0->shape[2] % (3 * (int64_t)heads) || (x0->shape[2] / (3 * heads)) % 2)
        return shape_fail(OP, "qkv must be (B, L, 3·heads·D) with D even", x0, NULL);
    const int64_t H = heads, D = x0->shape[2] / (3 * H);
    if (D == 0) return shape_fail(OP, "qkv has no columns", x0, NULL);
    int64_t L = 0;
    for (int i = 0; i < n; i++) {
        ork_tensor *x = qkv[i];
        if (x->ndim != 3 || x->shape[0] != x0->shape[0] || x->shape[2] != x0->shape[2] || x->dtype != x0->dtype)
            return shape_fail(OP, "the qkv tensors differ in batch, width or dtype", x0, x);
        L += x->shape[1];
        ork_tensor *w[2] = {qw ? qw[i] : NULL, kw ? kw[i] : NULL};
        for (int j = 0; j < 2; j++) {
            if (!w[j]) continue;
            ORK_TRY(live(OP, j ? "a key-norm weight" : "a query-norm weight", w[j], g));
            if (ork_tensor_numel(w[j]) != D) return shape_fail(OP, "norm weights must have D elements", x0, w[j]);
            if (w[j]->dtype != ORK_F32 && w[j]->dtype != ORK_BF16 && w[j]->dtype != ORK_F16)
                return shape_fail(OP, "norm weights must be f32, bf16 or f16", x0, w[j]);
        }
    }
    LIVE(pe);
    if (pe->dtype != ORK_F32 || ork_tensor_numel(pe) != L * D || pe->shape[pe->ndim - 1] != 2)
        return shape_fail(OP, "pe must be f32 (L, D/2, 2) for L the sum of the streams' lengths", x0, pe);
    if (!use_fused(g, D)) return qkv_rope_composite(g, n, qkv, qw, kw, pe, eps, H, D, q, k, v);

    ork_qkv_desc d;
    qkv_desc(n, qkv, qw, kw, H, D, eps, &d);
    int64_t shape[4] = {d.B, H, L, D};
    float *rstd;
    ORK_TRY(new_t(g, x0->dtype, 4, shape, q));
    ORK_TRY(new_t(g, x0->dtype, 4, shape, k));
    ORK_TRY(new_t(g, x0->dtype, 4, shape, v));
    ORK_TRY(aux_f32(g, 2 * d.B * H * L, &rstd));
    ORK_TRY(BE->qkv_rope(KX, &d, D(pe), D(*q), D(*k), D(*v), rstd, x0->dtype));
    ork_tensor *in[3 * ORK_QKV_MAX + 1];
    for (int i = 0; i < n; i++) {
        in[i] = qkv[i];
        in[n + i] = qw ? qw[i] : NULL;
        in[2 * n + i] = kw ? kw[i] : NULL;
    }
    in[3 * n] = pe;
    if (!wants(g, 3 * n, in)) { /* pe gets no gradient */
        ork_arena_put(g->arena, rstd);
        return ORK_OK;
    }
    /* What the backward reads and the tape could free before it: the qkv
     * tensors and any weight an op made (store weights and pe are not freed). */
    int nsave = 0;
    for (int i = 0; i < 3 * n + 1; i++) nsave += in[i] && (i < n || in[i]->node);
    if (nsave > ORK_NODE_MAX_SAVED) {
        ork_arena_put(g->arena, rstd);
        return ORK_FAIL(ORK_E_UNSUPPORTED, "qkv_rope: %d tensors to keep for the backward (at most %d): pass weights "
                        "from the store, or fewer streams", nsave, ORK_NODE_MAX_SAVED);
    }
    ork_tensor *out[3] = {*q, *k, *v};
    ork_tape_node *nd;
    ORK_TRY(record(g, OP, qkv_rope_bwd, 3 * n + 1, in, 3, out, &nd));
    for (int i = 0; i < 3 * n + 1; i++)
        if (in[i] && (i < n || in[i]->node)) ork_tape_save(nd, in[i]);
    nd->aux[nd->naux++] = rstd;
    nd->p.i[0] = n;
    nd->p.i[1] = heads;
    return ORK_OK;
}

/* ---- attn_merge --------------------------------------------------------------------------------- */

/* The copy between a's rows [l0, l0 + Lp) (B, H, L, D) and y (B, Lp, W) columns [0, H·D):
 * a_to_y: a -> y, else y -> a. */
static ork_status merge_heads(ork_graph *g, ork_tensor *a, ork_tensor *y, int64_t l0, int a_to_y) {
    int64_t B = a->shape[0], H = a->shape[1], L = a->shape[2], D = a->shape[3], Lp = y->shape[1], W = y->shape[2];
    int64_t as[4] = {H * L * D, D, L * D, 1}, ys[4] = {Lp * W, W, D, 1};
    ork_copy_desc c = {.ndim = 4, .shape = {B, Lp, H, D}, .sdt = a->dtype, .ddt = y->dtype};
    memcpy(a_to_y ? c.src_stride : c.dst_stride, as, sizeof as);
    memcpy(a_to_y ? c.dst_stride : c.src_stride, ys, sizeof ys);
    char *ap = (char *)D(a) + (size_t)(l0 * D) * ork_dtype_size(a->dtype);
    return a_to_y ? BE->copy(KX, &c, ap, D(y)) : BE->copy(KX, &c, D(y), ap);
}

/* The copy between extra's rows [l0, l0 + Lp) (B, L, C2) and y (B, Lp, W) columns [W − C2, W). */
static ork_status merge_extra(ork_graph *g, ork_tensor *e, ork_tensor *y, int64_t l0, int e_to_y) {
    int64_t B = e->shape[0], L = e->shape[1], C2 = e->shape[2], Lp = y->shape[1], W = y->shape[2];
    int64_t es[3] = {L * C2, C2, 1}, ys[3] = {Lp * W, W, 1};
    ork_copy_desc c = {.ndim = 3, .shape = {B, Lp, C2}, .sdt = e->dtype, .ddt = y->dtype};
    memcpy(e_to_y ? c.src_stride : c.dst_stride, es, sizeof es);
    memcpy(e_to_y ? c.dst_stride : c.src_stride, ys, sizeof ys);
    char *ep = (char *)D(e) + (size_t)(l0 * C2) * ork_dtype_size(e->dtype);
    char *yp = (char *)D(y) + (size_t)(W - C2) * ork_dtype_size(y->dtype);
    return e_to_y ? BE->copy(KX, &c, ep, yp) : BE->copy(KX, &c, yp, ep);
}

static ork_status attn_merge_bwd(ork_graph *g, ork_tape_node *n) {
    ork_tensor *a = n->in[0], *e = n->in[1], *da = NULL, *de = NULL;
    int missing = 0;
    for (int i = 0; i < n->nout; i++) missing |= n->out[i]->grad == NULL;
    if (needs(a)) {
        ORK_TRY(ork_grad_new(g, a, a->dtype, &da));
        if (missing) ORK_TRY(BE->fill(KX, ork_tensor_numel(da), 0.0f, D(da), da->dtype));
    }
    if (needs(e)) {
        ORK_TRY(ork_grad_new(g, e, e->dtype, &de));
        if (missing) ORK_TRY(BE->fill(KX, ork_tensor_numel(de), 0.0f, D(de), de->dtype));
    }
    int64_t l0 = 0;
    for (int i = 0; i < n->nout; i++) {
        ork_tensor *dy = n->out[i]->grad;
        if (dy && da) ORK_TRY(merge_heads(g, da, dy, l0, 0));
        if (dy && de) ORK_TRY(merge_extra(g, de, dy, l0, 0));
        l0 += n->out[i]->shape[1];
    }
    if (da) ORK_TRY(ork_grad_push(g, a, da));
    if (de) ORK_TRY(ork_grad_push(g, e, de));
    return ORK_OK;
}

ork_status ork_op_attn_merge(ork_graph *g, ork_tensor *a, int n, const int64_t *sizes, ork_tensor *extra,
                             ork_tensor **ys) {
    static const char *OP = "attn_merge";
    LIVE(a);
    if (a->ndim != 4) return shape_fail(OP, "a must be (B, H, L, D)", a, NULL);
    if (n < 1 || n > ORK_MAX_DIMS + 2 || !ys || (!sizes && n != 1))
        return ORK_FAIL(ORK_E_INVALID, "attn_merge: %d parts (1..%d; sizes may be NULL only for one)", n,
                        ORK_MAX_DIMS + 2);
    const int64_t B = a->shape[0], L = a->shape[2], HD = a->shape[1] * a->shape[3];
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        int64_t s = sizes ? sizes[i] : L;
        if (s < 0) return ORK_FAIL(ORK_E_INVALID, "attn_merge: size %d is %lld", i, (long long)s);
        total += s;
    }
    if (total != L) {
        char buf[96];
        return ORK_FAIL(ORK_E_INVALID, "attn_merge: sizes add up to %lld but %s has %lld tokens", (long long)total,
                        ork_tensor_str(a, buf, sizeof buf), (long long)L);
    }
    int64_t C2 = 0;
    if (extra) {
        LIVE(extra);
        if (extra->ndim != 3 || extra->shape[0] != B || extra->shape[1] != L || extra->dtype != a->dtype)
            return shape_fail(OP, "extra must be (B, L, C2) in a's dtype", a, extra);
        C2 = extra->shape[2];
    }
    int64_t l0 = 0;
    for (int i = 0; i < n; i++) {
        int64_t shape[3] = {B, sizes ? sizes[i] : L, HD + C2};
        ORK_TRY(new_t(g, a->dtype, 3, shape, &ys[i]));
        ORK_TRY(merge_heads(g, a, ys[i], l0, 1));
        if (extra) ORK_TRY(merge_extra(g, extra, ys[i], l0, 1));
        l0 += shape[1];
    }
    ork_tensor *in[2] = {a, extra};
    if (!wants(g, 2, in)) return ORK_OK;
    ork_tape_node *nd;
    return record(g, OP, attn_merge_bwd, 2, in, n, ys, &nd); /* copies: nothing to save */
}
