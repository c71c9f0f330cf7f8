/* tests/vae/test_vae_ops.c — the ops the FLUX VAE added after ABI 1.0
 * (groupnorm, pad2d, softmax) on the CPU backend: backward against finite
 * differences (tests/ops/grad_check.h: rel. L2 <= 1e-3 of the whole gradient)
 * on odd shapes (C = 6 in 2 or 3 groups, H = 3, W = 5), affine weights in F32
 * and frozen BF16, forward values against direct formulas, and argument
 * errors (groups not dividing C, negative padding, mismatched affine). */
#include "../ops/grad_check.h"

#include "numerics/half.h"

#include <math.h>
#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NEED(x) CU_ASSERT_FATAL((x) != NULL)

/* ---- groupnorm -------------------------------------------------------------- */

typedef struct { int groups, affine; } gn_ctx;

static ork_status f_gn(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    const gn_ctx *c = ctx;
    *n = 1;
    return G.ops->groupnorm(g, in[0], c->groups, c->affine ? in[1] : NULL, c->affine ? in[2] : NULL, 1e-6f, &o[0]);
}

static void t_groupnorm_grad(void) {
    for (int groups = 2; groups <= 3; groups++) {
        for (int affine = 0; affine <= 1; affine++) {
            ork_tensor *in[3] = {gc_param(4, S(2, 6, 3, 5), 1.0), gc_param(1, S(6), 0.7), gc_param(1, S(6), 0.5)};
            NEED(in[0]); NEED(in[1]); NEED(in[2]);
            /* shift and scale x so the statistics are not trivial */
            float *x = ork_tensor_data(in[0]);
            for (int i = 0; i < 180; i++) x[i] = 1.5f * x[i] + 0.3f * (float)(i % 7);
            gn_ctx c = {groups, affine};
            char nm[48];
            snprintf(nm, sizeof nm, "groupnorm G%d affine %d", groups, affine);
            int check[3] = {1, affine, affine};
            CU_ASSERT(gc_check(nm, f_gn, &c, 3, in, check, 1e-3));
            gc_free(3, in);
        }
    }
}

/* forward value vs a direct two-pass formula; BF16 frozen affine */
static void t_groupnorm_value(void) {
    ork_tensor *x = gc_param(4, S(1, 4, 2, 3), 2.0), *w = gc_const(ORK_BF16, 1, S(4), 1.0),
               *b = gc_const(ORK_BF16, 1, S(4), 1.0), *y;
    NEED(x); NEED(w); NEED(b);
    ork_graph_reset(G.g);
    CU_ASSERT_FATAL(G.ops->groupnorm(G.g, x, 2, w, b, 1e-6f, &y) == ORK_OK);
    const float *X = ork_tensor_data(x), *Y = ork_tensor_data(y);
    const uint16_t *W = ork_tensor_data(w), *B = ork_tensor_data(b);
    for (int gi = 0; gi < 2; gi++) {
        double m = 0, v = 0;
        for (int i = 0; i < 12; i++) m += X[gi * 12 + i];
        m /= 12;
        for (int i = 0; i < 12; i++) v += (X[gi * 12 + i] - m) * (X[gi * 12 + i] - m);
        v /= 12;
        for (int i = 0; i < 12; i++) {
            int c = gi * 2 + i / 6;
            double ref = (X[gi * 12 + i] - m) / sqrt(v + 1e-6) * ork_bf16_to_f32(W[c]) + ork_bf16_to_f32(B[c]);
            CU_ASSERT(ork_close(Y[gi * 12 + i], ref, 1e-5, 1e-5));
        }
    }
    /* BF16 frozen affine: x still gets a gradient; w, b none */
    ork_tensor *in[3] = {x, w, b};
    int check[3] = {1, 0, 0};
    gn_ctx c = {2, 1};
    CU_ASSERT(gc_check("groupnorm bf16 affine", f_gn, &c, 3, in, check, 1e-3));
    CU_ASSERT(w->grad == NULL && b->grad == NULL);
    gc_free(3, in);
}

static void t_groupnorm_errors(void) {
    ork_tensor *x = gc_param(4, S(1, 6, 2, 2), 1.0), *w5 = gc_param(1, S(5), 1.0), *w6 = gc_const(ORK_BF16, 1, S(6), 1.0),
               *b6 = gc_param(1, S(6), 1.0), *y;
    NEED(x); NEED(w5); NEED(w6); NEED(b6);
    ork_graph_reset(G.g);
    CU_ASSERT(G.ops->groupnorm(G.g, x, 4, NULL, NULL, 1e-6f, &y) == ORK_E_INVALID);  /* 4 does not divide 6 */
    CU_ASSERT(G.ops->groupnorm(G.g, x, 0, NULL, NULL, 1e-6f, &y) == ORK_E_INVALID);
    CU_ASSERT(G.ops->groupnorm(G.g, x, 2, w5, NULL, 1e-6f, &y) == ORK_E_INVALID);    /* w (5) for C 6 */
    CU_ASSERT(G.ops->groupnorm(G.g, x, 2, w6, b6, 1e-6f, &y) == ORK_E_INVALID);     /* bf16 w, f32 b */
    ork_tensor *x1 = gc_param(1, S(6), 1.0);
    NEED(x1);
    CU_ASSERT(G.ops->groupnorm(G.g, x1, 2, NULL, NULL, 1e-6f, &y) == ORK_E_INVALID); /* no channel dim */
    ork_tensor *all[5] = {x, w5, w6, b6, x1};
    gc_free(5, all);
}

/* ---- pad2d ------------------------------------------------------------------------ */

typedef struct { int l, r, t, b; } pad_ctx;

static ork_status f_pad(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    const pad_ctx *c = ctx;
    *n = 1;
    return G.ops->pad2d(g, in[0], c->l, c->r, c->t, c->b, &o[0]);
}

static void t_pad2d(void) {
    static const pad_ctx cs[3] = {{0, 1, 0, 1}, {2, 0, 1, 3}, {0, 0, 0, 0}};
    for (int k = 0; k < 3; k++) {
        ork_tensor *in[1] = {gc_param(4, S(2, 3, 3, 5), 1.0)};
        NEED(in[0]);
        char nm[48];
        snprintf(nm, sizeof nm, "pad2d (%d,%d,%d,%d)", cs[k].l, cs[k].r, cs[k].t, cs[k].b);
        CU_ASSERT(gc_check(nm, f_pad, (void *)&cs[k], 1, in, NULL, 1e-3));
        /* values: interior copied, border zero */
        ork_tensor *y;
        ork_graph_reset(G.g);
        CU_ASSERT_FATAL(G.ops->pad2d(G.g, in[0], cs[k].l, cs[k].r, cs[k].t, cs[k].b, &y) == ORK_OK);
        int64_t Ho = 3 + cs[k].t + cs[k].b, Wo = 5 + cs[k].l + cs[k].r;
        CU_ASSERT(y->shape[2] == Ho && y->shape[3] == Wo && y->shape[0] == 2 && y->shape[1] == 3);
        const float *X = ork_tensor_data(in[0]), *Y = ork_tensor_data(y);
        int bad = 0;
        for (int p = 0; p < 6; p++)
            for (int64_t i = 0; i < Ho; i++)
                for (int64_t j = 0; j < Wo; j++) {
                    int64_t si = i - cs[k].t, sj = j - cs[k].l;
                    float ref = (si >= 0 && si < 3 && sj >= 0 && sj < 5) ? X[(p * 3 + si) * 5 + sj] : 0.0f;
                    bad += Y[(p * Ho + i) * Wo + j] != ref;
                }
        CU_ASSERT(bad == 0);
        gc_free(1, in);
    }
    ork_tensor *x = gc_param(4, S(1, 1, 2, 2), 1.0), *y, *x1 = gc_param(1, S(4), 1.0);
    NEED(x); NEED(x1);
    ork_graph_reset(G.g);
    CU_ASSERT(G.ops->pad2d(G.g, x, -1, 0, 0, 0, &y) == ORK_E_INVALID);
    CU_ASSERT(G.ops->pad2d(G.g, x1, 1, 1, 1, 1, &y) == ORK_E_INVALID);
    ork_tensor *all[2] = {x, x1};
    gc_free(2, all);
}

/* ---- softmax ----------------------------------------------------------------------- */

static ork_status f_softmax(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->softmax(g, in[0], &o[0]);
}

/* attention through matmul + softmax + matmul, the VAE's route for D = 512 */
static ork_status f_attn_mm(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    ork_tensor *s, *p;
    ORK_TRY(G.ops->matmul(g, in[0], in[1], 0, 1, &s));
    ORK_TRY(G.ops->scale(g, s, 0.4f, &s));
    ORK_TRY(G.ops->softmax(g, s, &p));
    *n = 1;
    return G.ops->matmul(g, p, in[2], 0, 0, &o[0]);
}

static void t_softmax(void) {
    ork_tensor *in[1] = {gc_param(3, S(2, 5, 7), 2.0)};
    NEED(in[0]);
    CU_ASSERT(gc_check("softmax", f_softmax, NULL, 1, in, NULL, 1e-3));
    ork_tensor *y;
    ork_graph_reset(G.g);
    /* large logits: max-subtracted, rows sum to 1 */
    float *X = ork_tensor_data(in[0]);
    X[3] = 300.0f;
    CU_ASSERT_FATAL(G.ops->softmax(G.g, in[0], &y) == ORK_OK);
    const float *Y = ork_tensor_data(y);
    for (int r = 0; r < 10; r++) {
        double s = 0;
        for (int c = 0; c < 7; c++) s += Y[r * 7 + c];
        CU_ASSERT(fabs(s - 1.0) < 1e-5);
    }
    CU_ASSERT(fabsf(Y[3] - 1.0f) < 1e-6f);
    gc_free(1, in);
    /* matmul-softmax-matmul equals the fused attention (CPU) in value and gradient */
    ork_tensor *q = gc_param(4, S(1, 1, 6, 9), 1.0), *k = gc_param(4, S(1, 1, 6, 9), 1.0),
               *v = gc_param(4, S(1, 1, 6, 9), 1.0), *a, *b;
    NEED(q); NEED(k); NEED(v);
    ork_tensor *qkv[3] = {q, k, v};
    CU_ASSERT(gc_check("attention via matmul+softmax", f_attn_mm, NULL, 3, qkv, NULL, 1e-3));
    ork_graph_reset(G.g);
    ork_attn_opts o = {.abi = ORK_ABI_INIT(ork_attn_opts), .scale = 0.4f};
    CU_ASSERT_FATAL(G.ops->attention(G.g, q, k, v, &o, &a) == ORK_OK);
    ork_tensor *outs[1];
    int n;
    CU_ASSERT_FATAL(f_attn_mm(G.g, qkv, NULL, outs, &n) == ORK_OK);
    b = outs[0];
    const float *A = ork_tensor_data(a), *B = ork_tensor_data(b);
    for (int i = 0; i < 54; i++) CU_ASSERT(ork_close(B[i], A[i], 1e-5, 1e-5));
    gc_free(3, qkv);
}

static const ork_test_case cases[] = {
    {"groupnorm gradients (2/3 groups, affine or not)", t_groupnorm_grad},
    {"groupnorm values, bf16 frozen affine", t_groupnorm_value},
    {"groupnorm argument errors", t_groupnorm_errors},
    {"pad2d values, gradients, errors", t_pad2d},
    {"softmax + attention via matmul", t_softmax},
    {NULL, NULL},
};

static int setup(void) { return gc_setup(); }
static int teardown(void) { return gc_teardown(); }
ORK_TEST_MAIN("vae_ops", setup, teardown, cases)
