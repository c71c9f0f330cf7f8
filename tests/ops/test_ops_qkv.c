/* tests/ops/test_ops_qkv.c — the attention-side ops of <orakul/ops.h> (ABI
 * 1.4, issue #31: qkv_rope, attn_merge; core/tensor/ops_qkv.c) on the CPU:
 * - qkv_rope equals, bit for bit, forward and every gradient, the composition
 *   the FLUX plugin ran before (split, reshape, permute, rmsnorm, concat,
 *   rope), so tests/nofamily's CPU fixtures keep their numbers; and its values
 *   equal a float64 reference of FLUX's QKNorm + apply_rope written here
 *   (|err| <= 1e-5·(1 + |ref|): F32 math, measured ~1e-7);
 * - attn_merge equals permute + reshape + split / concat exactly, forward and
 *   backward, with and without the extra activation;
 * - both ops' gradients against finite differences in F32 (grad_check.h);
 * - malformed arguments fail with ORK_E_INVALID (one line each). */
#include "grad_check.h"

#include "tensor/ops_qkv.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})

enum { B_ = 2, H_ = 3, D_ = 8, LT = 3, LI = 5, L_ = LT + LI };

/* pe (L, D/2, 2) of (cos, sin) for arbitrary angles */
static ork_tensor *make_pe(int64_t L, int64_t D) {
    ork_tensor *pe = gc_const(ORK_F32, 3, S(L, D / 2, 2), 1.0);
    float *p = ork_tensor_data(pe);
    for (int64_t i = 0; i < L * D / 2; i++) {
        double a = 0.37 * (double)i + 0.1 * gc_randn();
        p[2 * i] = (float)cos(a);
        p[2 * i + 1] = (float)sin(a);
    }
    return pe;
}

typedef struct { int n; ork_tensor *pe; } qctx;

/* in: qkv[0..n), qw[0..n), kw[0..n) */
static ork_status f_qkv(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *nout) {
    qctx *c = ctx;
    *nout = 3;
    return G.ops->qkv_rope(g, c->n, in, in + c->n, in + 2 * c->n, c->pe, 1e-6f, H_, &o[0], &o[1], &o[2]);
}

/* The FLUX plugin's composition before the fused op (flux_forward.c qkv_heads + attend). */
static ork_status heads(ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const int perm[4] = {0, 2, 1, 3};
    ork_status s = G.ops->reshape(g, x, 4, S(x->shape[0], x->shape[1], H_, D_), &x);
    return s != ORK_OK ? s : G.ops->permute(g, x, perm, y);
}
static ork_status f_qkv_composed(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *nout) {
    qctx *c = ctx;
    const ork_ops *O = G.ops;
    ork_tensor *qs[2] = {0}, *ks[2] = {0}, *vs[2] = {0};
    *nout = 3;
    for (int i = 0; i < c->n; i++) {
        ork_tensor *p[3];
        ORK_TRY(O->split(g, in[i], -1, 3, S(H_ * D_, H_ * D_, H_ * D_), p));
        ORK_TRY(heads(g, p[0], &qs[i]));
        ORK_TRY(heads(g, p[1], &ks[i]));
        ORK_TRY(heads(g, p[2], &vs[i]));
        ORK_TRY(O->rmsnorm(g, qs[i], in[c->n + i], 1e-6f, &qs[i]));
        ORK_TRY(O->rmsnorm(g, ks[i], in[2 * c->n + i], 1e-6f, &ks[i]));
    }
    ork_tensor *q = qs[0], *k = ks[0];
    o[2] = vs[0];
    if (c->n > 1) {
        ORK_TRY(O->concat(g, c->n, qs, 2, &q));
        ORK_TRY(O->concat(g, c->n, ks, 2, &k));
        ORK_TRY(O->concat(g, c->n, vs, 2, &o[2]));
    }
    ORK_TRY(O->rope(g, q, c->pe, &o[0]));
    return O->rope(g, k, c->pe, &o[1]);
}

/* Forward + backward from fixed random output gradients; out values and the
 * inputs' gradients copied to host (caller frees). */
typedef struct { float *out[3]; int64_t nout[3]; float *grad[8]; } run_res;
static void run(gc_fwd fwd, void *ctx, int nin, ork_tensor **in, uint64_t seed, run_res *r) {
    ork_graph *g = G.g;
    memset(r, 0, sizeof *r);
    CU_ASSERT_FATAL(ork_graph_reset(g) == ORK_OK);
    ork_graph_set_grad(g, 1);
    for (int i = 0; i < nin; i++) ork_tensor_zero_grad(g, in[i]);
    ork_tensor *o[3], *go[3];
    int no = 0;
    CU_ASSERT_FATAL(fwd(g, in, ctx, o, &no) == ORK_OK);
    uint64_t rng = seed;
    for (int k = 0; k < no; k++) {
        int64_t n = ork_tensor_numel(o[k]);
        float *gh = malloc(sizeof(float) * (size_t)n);
        for (int64_t j = 0; j < n; j++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            gh[j] = (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
        }
        CU_ASSERT_FATAL(G.tapi->from_host(g, ORK_F32, o[k]->ndim, o[k]->shape, gh, &go[k]) == ORK_OK);
        free(gh);
        r->nout[k] = n;
        r->out[k] = malloc(sizeof(float) * (size_t)n);
        memcpy(r->out[k], ork_tensor_data(o[k]), sizeof(float) * (size_t)n);
    }
    CU_ASSERT_FATAL(ork_backward_from(g, no, o, go) == ORK_OK);
    for (int i = 0; i < nin; i++) {
        int64_t n = ork_tensor_numel(in[i]);
        r->grad[i] = calloc((size_t)n, sizeof(float));
        if (in[i]->grad) memcpy(r->grad[i], ork_tensor_data(in[i]->grad), sizeof(float) * (size_t)n);
    }
}
static void run_free(run_res *r, int nin) {
    for (int k = 0; k < 3; k++) free(r->out[k]);
    for (int i = 0; i < nin; i++) free(r->grad[i]);
}
static int64_t ndiff(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void make_inputs(int n, ork_tensor **in) {
    const int64_t len[2] = {LT, LI};
    for (int i = 0; i < n; i++) {
        in[i] = gc_param(3, S(B_, n == 1 ? L_ : len[i], 3 * H_ * D_), 1.0);
        in[n + i] = gc_param(1, S(D_), 0.5);
        in[2 * n + i] = gc_param(1, S(D_), 0.5);
        float *w = ork_tensor_data(in[n + i]), *w2 = ork_tensor_data(in[2 * n + i]);
        for (int c = 0; c < D_; c++) { w[c] += 1.0f; w2[c] += 1.0f; } /* around 1, as trained scales */
    }
}

/* float64 QKNorm + apply_rope (FLUX's math.py) of row (b, l, h) of stream i's part `which` (0 q, 1 k). */
static void ref_row(const float *qkv, int64_t Li, int64_t b, int64_t l, int64_t h, int which, const float *w,
                    const float *pe, int64_t lpe, double *out) {
    const float *x = qkv + ((b * Li + l) * 3 + which) * H_ * D_ + h * D_;
    double ss = 0;
    for (int c = 0; c < D_; c++) ss += (double)x[c] * x[c];
    double rs = 1.0 / sqrt(ss / D_ + 1e-6), y[D_];
    for (int c = 0; c < D_; c++) y[c] = x[c] * rs * w[c];
    for (int p = 0; p < D_ / 2; p++) {
        double cs = pe[(lpe * D_ / 2 + p) * 2], sn = pe[(lpe * D_ / 2 + p) * 2 + 1];
        out[2 * p] = cs * y[2 * p] - sn * y[2 * p + 1];
        out[2 * p + 1] = sn * y[2 * p] + cs * y[2 * p + 1];
    }
}

static void t_qkv_equals_composition(void) {
    for (int n = 1; n <= 2; n++) {
        ork_tensor *in[6];
        make_inputs(n, in);
        qctx c = {n, make_pe(L_, D_)};
        run_res a, b;
        run(f_qkv, &c, 3 * n, in, 42, &a);
        run(f_qkv_composed, &c, 3 * n, in, 42, &b);
        for (int k = 0; k < 3; k++) {
            int64_t d = ndiff(a.out[k], b.out[k], a.nout[k]);
            if (d) printf("\n  n=%d: output %d: %lld of %lld values differ from the composition\n", n, k,
                          (long long)d, (long long)a.nout[k]);
            CU_ASSERT_EQUAL(d, 0);
        }
        for (int i = 0; i < 3 * n; i++) {
            int64_t d = ndiff(a.grad[i], b.grad[i], ork_tensor_numel(in[i]));
            if (d) printf("\n  n=%d: input %d: %lld gradient values differ from the composition's\n", n, i, (long long)d);
            CU_ASSERT_EQUAL(d, 0);
        }
        /* values against float64 FLUX math */
        int bad = 0;
        double worst = 0;
        int64_t off = 0;
        for (int i = 0; i < n; i++) {
            int64_t Li = in[i]->shape[1];
            for (int64_t bb = 0; bb < B_; bb++)
                for (int64_t l = 0; l < Li; l++)
                    for (int64_t h = 0; h < H_; h++)
                        for (int which = 0; which < 3; which++) {
                            double ref[D_];
                            const float *x = ork_tensor_data(in[i]);
                            if (which < 2) {
                                ref_row(x, Li, bb, l, h, which, ork_tensor_data(in[(which + 1) * n + i]),
                                        ork_tensor_data(c.pe), off + l, ref);
                            } else {
                                for (int cc = 0; cc < D_; cc++) ref[cc] = x[((bb * Li + l) * 3 + 2) * H_ * D_ + h * D_ + cc];
                            }
                            const float *got = a.out[which] + ((bb * H_ + h) * L_ + off + l) * D_;
                            for (int cc = 0; cc < D_; cc++) {
                                double e = fabs(got[cc] - ref[cc]);
                                if (e > worst) worst = e;
                                bad += e > 1e-5 * (1 + fabs(ref[cc]));
                            }
                        }
            off += Li;
        }
        if (bad) printf("\n  n=%d: %d values off the float64 reference (worst %.3g)\n", n, bad, worst);
        CU_ASSERT_EQUAL(bad, 0);
        run_free(&a, 3 * n);
        run_free(&b, 3 * n);
        gc_free(3 * n, in);
        gc_free(1, &c.pe);
    }
}

static void t_qkv_grad(void) {
    for (int n = 1; n <= 2; n++) {
        ork_tensor *in[6];
        make_inputs(n, in);
        qctx c = {n, make_pe(L_, D_)};
        CU_ASSERT(gc_check(n == 1 ? "qkv_rope, one stream" : "qkv_rope, two streams", f_qkv, &c, 3 * n, in, NULL, 1e-3));
        gc_free(3 * n, in);
        gc_free(1, &c.pe);
    }
}

/* ---- attn_merge ---- */
typedef struct { int n; int extra; } mctx;

static ork_status f_merge(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *nout) {
    mctx *c = ctx;
    *nout = c->n;
    return G.ops->attn_merge(g, in[0], c->n, c->n == 1 ? NULL : S(LT, LI), c->extra ? in[1] : NULL, o);
}
static ork_status f_merge_composed(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *nout) {
    mctx *c = ctx;
    static const int perm[4] = {0, 2, 1, 3};
    ork_tensor *x;
    *nout = c->n;
    ORK_TRY(G.ops->permute(g, in[0], perm, &x));
    ORK_TRY(G.ops->reshape(g, x, 3, S(B_, L_, H_ * D_), &x));
    if (c->extra) {
        ork_tensor *cat[2] = {x, in[1]};
        ORK_TRY(G.ops->concat(g, 2, cat, -1, &x));
    }
    if (c->n == 1) { o[0] = x; return ORK_OK; }
    return G.ops->split(g, x, 1, 2, S(LT, LI), o);
}

static void t_merge(void) {
    for (int v = 0; v < 4; v++) {
        mctx c = {1 + (v & 1), v >> 1};
        ork_tensor *in[2] = {gc_param(4, S(B_, H_, L_, D_), 1.0), gc_param(3, S(B_, L_, 5), 1.0)};
        run_res a, b;
        run(f_merge, &c, 2, in, 7, &a);
        run(f_merge_composed, &c, 2, in, 7, &b);
        for (int k = 0; k < c.n; k++) {
            CU_ASSERT_EQUAL(a.nout[k], b.nout[k]);
            CU_ASSERT_EQUAL(ndiff(a.out[k], b.out[k], a.nout[k]), 0);
        }
        for (int i = 0; i < 1 + c.extra; i++) CU_ASSERT_EQUAL(ndiff(a.grad[i], b.grad[i], ork_tensor_numel(in[i])), 0);
        int check[2] = {1, c.extra};
        char nm[64];
        snprintf(nm, sizeof nm, "attn_merge, %d part(s)%s", c.n, c.extra ? " + extra" : "");
        CU_ASSERT(gc_check(nm, f_merge, &c, 2, in, check, 1e-3));
        run_free(&a, 2);
        run_free(&b, 2);
        gc_free(2, in);
    }
}

/* ---- malformed arguments ---- */
static void t_refusals(void) {
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_tensor *x = gc_const(ORK_F32, 3, S(1, 4, 3 * H_ * D_), 1.0), *x2 = gc_const(ORK_F32, 3, S(2, 4, 3 * H_ * D_), 1.0);
    ork_tensor *odd = gc_const(ORK_F32, 3, S(1, 4, 3 * H_ * 3), 1.0), *w = gc_const(ORK_F32, 1, S(D_), 1.0);
    ork_tensor *w7 = gc_const(ORK_F32, 1, S(D_ - 1), 1.0), *pe = make_pe(4, D_), *pe8 = make_pe(8, D_);
    ork_tensor *pebf = gc_const(ORK_BF16, 3, S(4, D_ / 2, 2), 1.0), *q, *k, *v;
    ork_tensor *xs[2] = {x, x2}, *ws[1] = {w}, *ws7[1] = {w7}, *xx[5] = {x, x, x, x, x};
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 0, &x, NULL, NULL, pe, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 5, xx, NULL, NULL, pe, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, NULL, NULL, pe, 1e-6f, 0, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, NULL, NULL, pe, 1e-6f, 5, &q, &k, &v), ORK_E_INVALID); /* 72 % 15 */
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &odd, NULL, NULL, pe, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID); /* D = 3 */
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 2, xs, NULL, NULL, pe8, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID); /* batch */
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws7, NULL, pe, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, NULL, ws7, pe, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, pe8, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID); /* pe length */
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, pebf, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID); /* pe dtype */
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, NULL, 1e-6f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, pe, -1.0f, H_, &q, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, pe, 1e-6f, H_, NULL, &k, &v), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->qkv_rope(g, 1, &x, ws, ws, pe, 1e-6f, H_, &q, &k, &v), ORK_OK);
    CU_ASSERT_EQUAL(q->ndim, 4);
    CU_ASSERT(q->shape[0] == 1 && q->shape[1] == H_ && q->shape[2] == 4 && q->shape[3] == D_);

    ork_tensor *a = gc_const(ORK_F32, 4, S(1, H_, 4, D_), 1.0), *e = gc_const(ORK_F32, 3, S(1, 3, 5), 1.0);
    ork_tensor *ebf = gc_const(ORK_BF16, 3, S(1, 4, 5), 1.0), *ys[3];
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 2, S(1, 2), NULL, ys), ORK_E_INVALID);  /* 3 of 4 tokens */
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 2, S(5, -1), NULL, ys), ORK_E_INVALID); /* negative */
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 2, NULL, NULL, ys), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 0, S(4), NULL, ys), ORK_E_INVALID);
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 1, NULL, e, ys), ORK_E_INVALID);   /* extra's length */
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 1, NULL, ebf, ys), ORK_E_INVALID); /* extra's dtype */
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, x, 1, NULL, NULL, ys), ORK_E_INVALID); /* not 4-d */
    CU_ASSERT_EQUAL(G.ops->attn_merge(g, a, 3, S(0, 1, 3), NULL, ys), ORK_OK);
    CU_ASSERT(ys[0]->shape[1] == 0 && ys[2]->shape[1] == 3 && ys[2]->shape[2] == H_ * D_);
    ork_tensor *all[] = {x, x2, odd, w, w7, pe, pe8, pebf, a, e, ebf};
    gc_free((int)(sizeof all / sizeof *all), all);
}

static void t_has(void) { CU_ASSERT(ork_ops_has_qkv(G.ops)); }

static int setup(void) { return gc_setup(); }
static int teardown(void) { return gc_teardown(); }

static const ork_test_case cases[] = {
    {"ops table has qkv_rope and attn_merge (ABI 1.4)", t_has},
    {"qkv_rope == the composition (bitwise) and float64 FLUX math", t_qkv_equals_composition},
    {"qkv_rope gradients vs finite differences", t_qkv_grad},
    {"attn_merge == permute/split/concat (bitwise), gradients vs FD", t_merge},
    {"malformed arguments refused", t_refusals},
    {NULL, NULL},
};

int main(void) { return ork_test_run("ops_qkv", setup, teardown, cases); }
