/* tests/ops/test_ops_grad.c — every op's backward on the CPU backend against
 * finite differences (see grad_check.h), on odd shapes (L = 7, D = 6, C = 5,
 * H = 3), including linear with a LoRA attached (W frozen gets no grad),
 * broadcasting, rope with 3- and 4-axis tables, causal attention, conv
 * stride/pad/1x1/3x3, and a composite graph reusing a tensor (accumulation). */
#include "grad_check.h"

#include "numerics/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NEED(x) CU_ASSERT_FATAL((x) != NULL)

/* ---- linear ----------------------------------------------------------------------- */

static ork_status f_linear(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->linear(g, in[0], in[1], in[2], &o[0]);
}

static void t_linear_bias(void) {
    ork_tensor *in[3] = {gc_param(3, S(2, 7, 6), 1.0), gc_param(2, S(5, 6), 0.5), gc_param(1, S(5), 0.5)};
    NEED(in[0]); NEED(in[1]); NEED(in[2]);
    CU_ASSERT(gc_check("linear+bias", f_linear, NULL, 3, in, NULL, 1e-3));
    gc_free(3, in);
}

static void t_linear_lora(void) {
    /* W BF16 frozen (converted on the fly), b frozen, LoRA down/up trainable. */
    ork_tensor *x = gc_param(3, S(2, 7, 6), 1.0), *w = gc_const(ORK_BF16, 2, S(5, 6), 0.5);
    ork_tensor *b = gc_const(ORK_F32, 1, S(5), 0.5);
    ork_tensor *down = gc_param(2, S(3, 6), 0.5), *up = gc_param(2, S(5, 3), 0.5);
    NEED(x); NEED(w); NEED(b); NEED(down); NEED(up);
    ork_lora lo = {down, up, 0.7f, 0.0f, ORK_ADAPTER_LORA};
    w->lora = &lo;
    ork_tensor *in[5] = {x, w, b, down, up};
    int check[5] = {1, 0, 0, 1, 1};
    CU_ASSERT(gc_check("linear+lora", f_linear, NULL, 3, in, check, 1e-3));
    /* gc_check only knows in[0..2] as forward inputs; down/up ride on w. */
    CU_ASSERT(gc_check("linear+lora (down, up)", f_linear, NULL, 5, in, check, 1e-3));
    CU_ASSERT(w->grad == NULL);
    CU_ASSERT(b->grad == NULL);
    /* Forward value: y = x·Wᵀ + b + 0.7·(x·downᵀ)·upᵀ at one element. */
    ork_graph_reset(G.g);
    ork_tensor *y;
    CU_ASSERT_FATAL(G.ops->linear(G.g, x, w, b, &y) == ORK_OK);
    const float *X = ork_tensor_data(x), *D = ork_tensor_data(down), *U = ork_tensor_data(up), *B = ork_tensor_data(b);
    const uint16_t *W = ork_tensor_data(w);
    int row = 9, col = 3;
    double ref = B[col], h[3] = {0};
    for (int k = 0; k < 6; k++) ref += X[row * 6 + k] * (double)ork_bf16_to_f32(W[col * 6 + k]);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 6; k++) h[r] += X[row * 6 + k] * (double)D[r * 6 + k];
    for (int r = 0; r < 3; r++) ref += 0.7 * h[r] * U[col * 3 + r];
    CU_ASSERT(ork_close(((float *)ork_tensor_data(y))[row * 5 + col], ref, 1e-5, 1e-5));
    w->lora = NULL;
    gc_free(5, in);
}

static void t_linear_lora_dropout(void) {
    /* LoRA dropout (p 0.4 on h = x·downᵀ): the mask is a function of the graph's
     * seed and the weight's name, so finite differences see one fixed function;
     * a changed seed draws another mask and another output. */
    ork_tensor *x = gc_param(3, S(2, 7, 6), 1.0), *w = gc_const(ORK_F32, 2, S(5, 6), 0.5);
    ork_tensor *down = gc_param(2, S(3, 6), 0.5), *up = gc_param(2, S(5, 3), 0.5);
    NEED(x); NEED(w); NEED(down); NEED(up);
    w->name = "double_blocks.0.img_attn.qkv.weight";
    ork_lora lo = {down, up, 0.7f, 0.4f, ORK_ADAPTER_LORA};
    w->lora = &lo;
    G.g->dropout_seed = 12345;
    ork_tensor *in[5] = {x, w, NULL, down, up};
    int check[5] = {1, 0, 0, 1, 1};
    CU_ASSERT(gc_check("linear+lora+dropout", f_linear, NULL, 5, in, check, 1e-3));
    /* the mask really drops: some h entries vanish, the output depends on the seed */
    ork_graph_reset(G.g);
    ork_tensor *y1, *y2, *y0;
    float a[70], b2[70], c[70];
    CU_ASSERT_FATAL(G.ops->linear(G.g, x, w, NULL, &y1) == ORK_OK);
    memcpy(a, ork_tensor_data(y1), sizeof a);
    G.g->dropout_seed = 999;
    CU_ASSERT_FATAL(G.ops->linear(G.g, x, w, NULL, &y2) == ORK_OK);
    memcpy(b2, ork_tensor_data(y2), sizeof b2);
    G.g->dropout_seed = 0; /* inference: no dropout */
    CU_ASSERT_FATAL(G.ops->linear(G.g, x, w, NULL, &y0) == ORK_OK);
    memcpy(c, ork_tensor_data(y0), sizeof c);
    int diff12 = 0, diff10 = 0;
    for (int i = 0; i < 70; i++) { diff12 += a[i] != b2[i]; diff10 += a[i] != c[i]; }
    CU_ASSERT(diff12 > 0);
    CU_ASSERT(diff10 > 0);
    w->lora = NULL;
    w->name = "";
    ork_tensor *fr[4] = {x, w, down, up};
    gc_free(4, fr);
}

/* ---- elementwise ------------------------------------------------------------------------ */

static ork_status f_add(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->add(g, in[0], in[1], &o[0]);
}
static ork_status f_mul(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->mul(g, in[0], in[1], &o[0]);
}

static void t_broadcast(void) {
    const int64_t bshapes[4][3] = {{2, 3, 4}, {3, 1, 0}, {4, 0, 0}, {2, 1, 4}};
    const int bnd[4] = {3, 2, 1, 3};
    for (int k = 0; k < 4; k++) {
        ork_tensor *in[2] = {gc_param(3, S(2, 3, 4), 1.0), gc_param(bnd[k], bshapes[k], 1.0)};
        NEED(in[0]); NEED(in[1]);
        char nm[32];
        snprintf(nm, sizeof nm, "add bcast %d", k);
        CU_ASSERT(gc_check(nm, f_add, NULL, 2, in, NULL, 1e-3));
        snprintf(nm, sizeof nm, "mul bcast %d", k);
        CU_ASSERT(gc_check(nm, f_mul, NULL, 2, in, NULL, 1e-3));
        gc_free(2, in);
    }
    /* b larger than a: one clear refusal. */
    ork_tensor *a = gc_param(1, S(4), 1.0), *b = gc_param(2, S(3, 4), 1.0), *y;
    CU_ASSERT(G.ops->add(G.g, a, b, &y) == ORK_E_INVALID);
    ork_tensor *c = gc_param(1, S(3), 1.0);
    CU_ASSERT(G.ops->mul(G.g, b, c, &y) == ORK_E_INVALID);
    ork_tensor *fr[3] = {a, b, c};
    gc_free(3, fr);
}

static ork_status f_modulate(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->modulate(g, in[0], in[1], in[2], &o[0]);
}
static void t_modulate(void) {
    ork_tensor *in[3] = {gc_param(3, S(2, 7, 6), 1.0), gc_param(3, S(2, 1, 6), 0.5), gc_param(3, S(2, 1, 6), 0.5)};
    CU_ASSERT(gc_check("modulate", f_modulate, NULL, 3, in, NULL, 1e-3));
    gc_free(3, in);
    ork_tensor *in2[3] = {gc_param(3, S(2, 7, 6), 1.0), gc_param(1, S(6), 0.5), gc_param(2, S(7, 6), 0.5)};
    CU_ASSERT(gc_check("modulate mixed bcast", f_modulate, NULL, 3, in2, NULL, 1e-3));
    gc_free(3, in2);
}

static ork_status f_scale(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->scale(g, in[0], -1.7f, &o[0]);
}
static void t_scale(void) {
    ork_tensor *in[1] = {gc_param(2, S(5, 3), 1.0)};
    CU_ASSERT(gc_check("scale", f_scale, NULL, 1, in, NULL, 1e-3));
    gc_free(1, in);
}

/* ---- norms ----------------------------------------------------------------------------------- */

static ork_status f_layernorm(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->layernorm(g, in[0], 1e-6f, &o[0]);
}
static ork_status f_rmsnorm(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->rmsnorm(g, in[0], in[1], 1e-6f, &o[0]);
}
static void t_norms(void) {
    ork_tensor *in[2] = {gc_param(3, S(2, 7, 6), 1.0), gc_param(1, S(6), 1.0)};
    CU_ASSERT(gc_check("layernorm", f_layernorm, NULL, 1, in, NULL, 1e-3));
    CU_ASSERT(gc_check("rmsnorm w", f_rmsnorm, NULL, 2, in, NULL, 1e-3));
    ork_tensor *in1[2] = {in[0], NULL};
    CU_ASSERT(gc_check("rmsnorm", f_rmsnorm, NULL, 2, in1, NULL, 1e-3));
    /* layernorm output has zero mean and unit variance per row */
    ork_graph_reset(G.g);
    ork_tensor *y;
    CU_ASSERT_FATAL(G.ops->layernorm(G.g, in[0], 1e-6f, &y) == ORK_OK);
    const float *Y = ork_tensor_data(y);
    double m = 0, v = 0;
    for (int c = 0; c < 6; c++) m += Y[6 + c];
    for (int c = 0; c < 6; c++) v += (Y[6 + c] - m / 6) * (Y[6 + c] - m / 6);
    CU_ASSERT(fabs(m / 6) < 1e-6 && fabs(v / 6 - 1.0) < 1e-4);
    gc_free(2, in);
}

/* ---- activations ------------------------------------------------------------------------------- */

typedef struct { int which; } act_ctx;
static ork_status f_act(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    switch (((act_ctx *)ctx)->which) {
    case 0: return G.ops->gelu_tanh(g, in[0], &o[0]);
    case 1: return G.ops->silu(g, in[0], &o[0]);
    case 2: return G.ops->relu(g, in[0], &o[0]);
    case 3: return G.ops->tanh_clamp(g, in[0], 3.0f, &o[0]);
    default: return G.ops->swiglu(g, in[0], &o[0]);
    }
}
static void t_activations(void) {
    static const char *names[] = {"gelu_tanh", "silu", "relu", "tanh_clamp", "swiglu"};
    for (int k = 0; k < 5; k++) {
        ork_tensor *in[1] = {gc_param(3, S(2, 7, 10), k == 3 ? 4.0 : 1.5)};
        if (k == 2) gc_fill_spread(in[0], 0.05); /* relu: no value within 0.025 of the kink */
        act_ctx c = {k};
        CU_ASSERT(gc_check(names[k], f_act, &c, 1, in, NULL, 1e-3));
        gc_free(1, in);
    }
    ork_tensor *x = gc_param(2, S(3, 5), 1.0), *y;
    CU_ASSERT(G.ops->swiglu(G.g, x, &y) == ORK_E_INVALID); /* odd last dim */
    CU_ASSERT(G.ops->tanh_clamp(G.g, x, 0.0f, &y) == ORK_E_INVALID);
    gc_free(1, &x);
}

/* ---- rope, attention ------------------------------------------------------------------------------ */

/* pe (L, D/2, 2) like FLUX's EmbedND: axes_dim[a] dims (pairs = dim/2) per
 * axis, angle = pos_a · θ^(−2j/dim_a), positions ids (L, n_axes). */
static ork_tensor *make_pe(int L, int n_axes, const int *axes_dim) {
    int pairs = 0;
    for (int a = 0; a < n_axes; a++) pairs += axes_dim[a] / 2;
    ork_tensor *pe = gc_const(ORK_F32, 3, S(L, pairs, 2), 0.0);
    float *p = ork_tensor_data(pe);
    for (int l = 0; l < L; l++) {
        int j0 = 0;
        for (int a = 0; a < n_axes; a++) {
            double pos = a == 0 ? l % 2 : (a == 1 ? l / 3 : l % 3 + a);
            for (int j = 0; j < axes_dim[a] / 2; j++) {
                double w = pow(10000.0, -2.0 * j / axes_dim[a]), ang = pos * w;
                p[(l * pairs + j0 + j) * 2] = (float)cos(ang);
                p[(l * pairs + j0 + j) * 2 + 1] = (float)sin(ang);
            }
            j0 += axes_dim[a] / 2;
        }
    }
    return pe;
}

static ork_status f_rope(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->rope(g, in[0], in[1], &o[0]);
}
static void t_rope(void) {
    const int ax3[3] = {2, 4, 6}, ax4[4] = {2, 2, 4, 8};
    ork_tensor *in[2] = {gc_param(4, S(2, 3, 7, 12), 1.0), make_pe(7, 3, ax3)};
    CU_ASSERT(gc_check("rope 3 axes", f_rope, NULL, 2, in, NULL, 1e-3));
    /* out[2k] = c·x[2k] − s·x[2k+1] at one spot */
    ork_graph_reset(G.g);
    ork_tensor *y;
    CU_ASSERT_FATAL(G.ops->rope(G.g, in[0], in[1], &y) == ORK_OK);
    const float *X = ork_tensor_data(in[0]), *P = ork_tensor_data(in[1]), *Y = ork_tensor_data(y);
    int l = 5, k = 3, base = (1 * 7 + l) * 12; /* head 1, token 5, pair 3 */
    float c = P[(l * 6 + k) * 2], s = P[(l * 6 + k) * 2 + 1];
    CU_ASSERT(ork_close(Y[base + 2 * k], c * X[base + 2 * k] - s * X[base + 2 * k + 1], 1e-6, 1e-6));
    CU_ASSERT(ork_close(Y[base + 2 * k + 1], s * X[base + 2 * k] + c * X[base + 2 * k + 1], 1e-6, 1e-6));
    gc_free(2, in);
    ork_tensor *in4[2] = {gc_param(4, S(1, 3, 7, 16), 1.0), make_pe(7, 4, ax4)};
    CU_ASSERT(gc_check("rope 4 axes", f_rope, NULL, 2, in4, NULL, 1e-3));
    ork_tensor *bad = gc_param(4, S(1, 3, 6, 16), 1.0);
    CU_ASSERT(G.ops->rope(G.g, bad, in4[1], &y) == ORK_E_INVALID); /* L mismatch */
    gc_free(2, in4);
    gc_free(1, &bad);
}

static ork_status f_attn(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->attention(g, in[0], in[1], in[2], ctx, &o[0]);
}
static void t_attention(void) {
    ork_attn_opts full = {ORK_ABI_INIT(ork_attn_opts), 0.0f, 0}, causal = {ORK_ABI_INIT(ork_attn_opts), 0.3f, 1};
    ork_tensor *in[3] = {gc_param(4, S(2, 3, 7, 6), 1.0), gc_param(4, S(2, 3, 7, 6), 1.0), gc_param(4, S(2, 3, 7, 6), 1.0)};
    CU_ASSERT(gc_check("attention", f_attn, &full, 3, in, NULL, 1e-3));
    CU_ASSERT(gc_check("attention causal", f_attn, &causal, 3, in, NULL, 1e-3));
    /* forward against a naive softmax (double) at one row */
    ork_graph_reset(G.g);
    ork_tensor *y;
    CU_ASSERT_FATAL(G.ops->attention(G.g, in[0], in[1], in[2], NULL, &y) == ORK_OK);
    const float *Q = ork_tensor_data(in[0]), *K = ork_tensor_data(in[1]), *V = ork_tensor_data(in[2]);
    int bh = 4, i = 5;
    double s[7], m = -1e300, z = 0, ref[6] = {0};
    for (int j = 0; j < 7; j++) {
        s[j] = 0;
        for (int c = 0; c < 6; c++) s[j] += (double)Q[(bh * 7 + i) * 6 + c] * K[(bh * 7 + j) * 6 + c];
        s[j] /= sqrt(6.0);
        if (s[j] > m) m = s[j];
    }
    for (int j = 0; j < 7; j++) z += exp(s[j] - m);
    for (int j = 0; j < 7; j++)
        for (int c = 0; c < 6; c++) ref[c] += exp(s[j] - m) / z * V[(bh * 7 + j) * 6 + c];
    for (int c = 0; c < 6; c++) CU_ASSERT(ork_close(((float *)ork_tensor_data(y))[(bh * 7 + i) * 6 + c], ref[c], 1e-5, 1e-4));
    gc_free(3, in);
}


/* Backend attention with grouped K/V heads and a key mask (ARCHITECTURE §8)
 * equals full attention over repeated K/V; masked keys get no gradient. */
static void t_attention_gqa(void) {
    const ork_backend *be = ork_cpu_backend();
    const int64_t B = 1, H = 3, L = 5, Dh = 4, n = B * H * L * Dh, nk = B * L * Dh;
    ork_tensor *q = gc_const(ORK_F32, 1, S(n), 1.0), *k1 = gc_const(ORK_F32, 1, S(nk), 1.0);
    ork_tensor *v1 = gc_const(ORK_F32, 1, S(nk), 1.0), *dy = gc_const(ORK_F32, 1, S(n), 1.0);
    float *kr = malloc(sizeof(float) * n), *vr = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n),
          *y3 = malloc(sizeof(float) * n), *lse1 = malloc(sizeof(float) * B * H * L), *lse3 = malloc(sizeof(float) * B * H * L),
          *dq1 = malloc(sizeof(float) * n), *dq3 = malloc(sizeof(float) * n), *dk1 = malloc(sizeof(float) * nk),
          *dv1 = malloc(sizeof(float) * nk), *dk3 = malloc(sizeof(float) * n), *dv3 = malloc(sizeof(float) * n);
    for (int h = 0; h < H; h++) {
        memcpy(kr + h * nk, ork_tensor_data(k1), sizeof(float) * nk);
        memcpy(vr + h * nk, ork_tensor_data(v1), sizeof(float) * nk);
    }
    uint8_t mask[5] = {1, 1, 0, 1, 1};
    ork_attn_desc g1 = {B, H, 1, L, L, Dh, 0.5f, 0, mask}, g3 = {B, H, H, L, L, Dh, 0.5f, 0, mask};
    ork_kctx *kx = &G.g->k;
    CU_ASSERT_FATAL(be->attention(kx, &g1, ork_tensor_data(q), ork_tensor_data(k1), ork_tensor_data(v1), y1, lse1, NULL, ORK_F32) == ORK_OK);
    CU_ASSERT_FATAL(be->attention(kx, &g3, ork_tensor_data(q), kr, vr, y3, lse3, NULL, ORK_F32) == ORK_OK);
    CU_ASSERT_FATAL(be->attention_bwd(kx, &g1, ork_tensor_data(q), ork_tensor_data(k1), ork_tensor_data(v1), y1, lse1,
                                      ork_tensor_data(dy), dq1, dk1, dv1, NULL, ORK_F32) == ORK_OK);
    CU_ASSERT_FATAL(be->attention_bwd(kx, &g3, ork_tensor_data(q), kr, vr, y3, lse3, ork_tensor_data(dy), dq3, dk3, dv3,
                                      NULL, ORK_F32) == ORK_OK);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !ork_close(y1[i], y3[i], 1e-6, 1e-6) + !ork_close(dq1[i], dq3[i], 1e-6, 1e-6);
    for (int64_t i = 0; i < nk; i++) {
        double sk = 0, sv = 0;
        for (int h = 0; h < H; h++) { sk += dk3[h * nk + i]; sv += dv3[h * nk + i]; }
        bad += !ork_close(dk1[i], sk, 1e-5, 1e-5) + !ork_close(dv1[i], sv, 1e-5, 1e-5);
    }
    CU_ASSERT(bad == 0);
    for (int c = 0; c < Dh; c++) CU_ASSERT(dk1[2 * Dh + c] == 0.0f && dv1[2 * Dh + c] == 0.0f);
    free(kr); free(vr); free(y1); free(y3); free(lse1); free(lse3); free(dq1); free(dq3); free(dk1); free(dv1);
    free(dk3); free(dv3);
    ork_tensor *fr[4] = {q, k1, v1, dy};
    gc_free(4, fr);
}

/* ---- images ------------------------------------------------------------------------------------------ */

typedef struct { int stride, pad, bias; } conv_ctx;
static ork_status f_conv(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    conv_ctx *c = ctx;
    *n = 1;
    return G.ops->conv2d(g, in[0], in[1], c->bias ? in[2] : NULL, c->stride, c->pad, &o[0]);
}
static void t_conv2d(void) {
    const struct { int k, stride, pad, bias; } cases[] = {{3, 1, 1, 1}, {3, 2, 0, 0}, {1, 1, 0, 1}, {3, 2, 1, 1}, {1, 2, 0, 0}};
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        int k = cases[q].k;
        ork_tensor *in[3] = {gc_param(4, S(2, 3, 7, 6), 1.0), gc_param(4, S(5, 3, k, k), 0.4), gc_param(1, S(5), 0.5)};
        conv_ctx c = {cases[q].stride, cases[q].pad, cases[q].bias};
        char nm[48];
        snprintf(nm, sizeof nm, "conv2d k%d s%d p%d", k, c.stride, c.pad);
        int check[3] = {1, 1, c.bias};
        CU_ASSERT(gc_check(nm, f_conv, &c, 3, in, check, 1e-3));
        /* forward: direct sum at one output */
        ork_graph_reset(G.g);
        ork_tensor *y;
        CU_ASSERT_FATAL(G.ops->conv2d(G.g, in[0], in[1], c.bias ? in[2] : NULL, c.stride, c.pad, &y) == ORK_OK);
        const float *X = ork_tensor_data(in[0]), *W = ork_tensor_data(in[1]), *B = ork_tensor_data(in[2]);
        int64_t Ho = y->shape[2], Wo = y->shape[3], n = 1, o = 4, oy = Ho - 1, ox = Wo / 2;
        double ref = c.bias ? B[o] : 0.0;
        for (int ci = 0; ci < 3; ci++)
            for (int u = 0; u < k; u++)
                for (int v = 0; v < k; v++) {
                    int64_t iy = oy * c.stride - c.pad + u, ix = ox * c.stride - c.pad + v;
                    if (iy >= 0 && iy < 7 && ix >= 0 && ix < 6)
                        ref += (double)X[((n * 3 + ci) * 7 + iy) * 6 + ix] * W[((o * 3 + ci) * k + u) * k + v];
                }
        CU_ASSERT(ork_close(((float *)ork_tensor_data(y))[((n * 5 + o) * Ho + oy) * Wo + ox], ref, 1e-5, 1e-5));
        gc_free(3, in);
    }
}

static ork_status f_pool(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return ctx ? G.ops->upsample2x(g, in[0], &o[0]) : G.ops->maxpool2x2(g, in[0], &o[0]);
}
static void t_pool_upsample(void) {
    ork_tensor *in[1] = {gc_param(4, S(2, 3, 7, 6), 1.0)};
    gc_fill_spread(in[0], 0.05); /* distinct values: the max never switches under ±h */
    CU_ASSERT(gc_check("maxpool2x2", f_pool, NULL, 1, in, NULL, 1e-3));
    gc_free(1, in);
    int up = 1;
    ork_tensor *in2[1] = {gc_param(4, S(2, 3, 3, 5), 1.0)};
    CU_ASSERT(gc_check("upsample2x", f_pool, &up, 1, in2, NULL, 1e-3));
    gc_free(1, in2);
}

/* ---- matmul --------------------------------------------------------------------------------------------- */

typedef struct { int ta, tb; } mm_ctx;
static ork_status f_mm(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    mm_ctx *c = ctx;
    *n = 1;
    return G.ops->matmul(g, in[0], in[1], c->ta, c->tb, &o[0]);
}
static void t_matmul(void) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t M = 3, K = 5, N = 4;
            ork_tensor *in[2] = {gc_param(4, ta ? S(2, 2, K, M) : S(2, 2, M, K), 1.0),
                                 gc_param(4, tb ? S(2, 2, N, K) : S(2, 2, K, N), 1.0)};
            mm_ctx c = {ta, tb};
            char nm[32];
            snprintf(nm, sizeof nm, "matmul ta%d tb%d", ta, tb);
            CU_ASSERT(gc_check(nm, f_mm, &c, 2, in, NULL, 1e-3));
            gc_free(2, in);
        }
    /* Gram: matmul(F, F, 0, 1) with the same tensor twice (two gradient paths). */
    ork_tensor *f = gc_param(3, S(2, 5, 7), 1.0), *in[2] = {f, f};
    mm_ctx c = {0, 1};
    CU_ASSERT(gc_check("gram", f_mm, &c, 1, in, NULL, 1e-3));
    gc_free(1, &f);
}

/* Blocked GEMM vs a naive double product, shapes crossing the block sizes,
 * BF16 B (weights converted on the fly), alpha/beta, and 2 threads. */
static void t_gemm_blocked(void) {
    const int64_t M = 197, N = 45, K = 301;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ork_tensor *a = gc_const(ORK_F32, 2, ta ? S(K, M) : S(M, K), 1.0);
            ork_tensor *b = gc_const(ORK_BF16, 2, tb ? S(N, K) : S(K, N), 1.0);
            ork_tensor *c = gc_const(ORK_F32, 2, S(M, N), 1.0);
            float *C = ork_tensor_data(c), *C0 = malloc(sizeof(float) * (size_t)(M * N));
            memcpy(C0, C, sizeof(float) * (size_t)(M * N));
            ork_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .batch = 1, .alpha = 0.5f, .beta = -2.0f,
                               .A = ork_tensor_data(a), .adt = ORK_F32, .lda = ta ? M : K, .B = ork_tensor_data(b),
                               .bdt = ORK_BF16, .ldb = tb ? K : N, .C = C, .cdt = ORK_F32, .ldc = N};
            CU_ASSERT_FATAL(ork_cpu_backend()->gemm(&G.g->k, &d) == ORK_OK);
            const float *A = ork_tensor_data(a);
            const uint16_t *B = ork_tensor_data(b);
            int bad = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t p = 0; p < K; p++)
                        acc += (double)A[ta ? p * M + i : i * K + p] * ork_bf16_to_f32(B[tb ? j * K + p : p * N + j]);
                    double ref = 0.5 * acc - 2.0 * C0[i * N + j];
                    bad += !ork_close(C[i * N + j], ref, 1e-3, 1e-4);
                }
            CU_ASSERT(bad == 0);
            free(C0);
            ork_tensor *fr[3] = {a, b, c};
            gc_free(3, fr);
        }
}

/* ---- reductions, shape ops, cast ------------------------------------------------------------------------- */

static ork_status f_red(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    switch (*(int *)ctx) {
    case 0: return G.ops->mse(g, in[0], in[1], &o[0]);
    case 1: return G.ops->mean(g, in[0], &o[0]);
    default: return G.ops->sum(g, in[0], &o[0]);
    }
}
static void t_reductions(void) {
    ork_tensor *in[2] = {gc_param(3, S(2, 7, 5), 1.0), gc_param(3, S(2, 7, 5), 1.0)};
    static const char *nm[] = {"mse", "mean", "sum"};
    for (int k = 0; k < 3; k++) CU_ASSERT(gc_check(nm[k], f_red, &k, k ? 1 : 2, in, NULL, 1e-3));
    ork_graph_reset(G.g);
    ork_tensor *y;
    CU_ASSERT_FATAL(G.ops->mse(G.g, in[0], in[1], &y) == ORK_OK);
    const float *a = ork_tensor_data(in[0]), *b = ork_tensor_data(in[1]);
    double ref = 0;
    for (int i = 0; i < 70; i++) ref += (a[i] - b[i]) * (double)(a[i] - b[i]);
    CU_ASSERT(y->ndim == 1 && y->shape[0] == 1 && y->dtype == ORK_F32);
    CU_ASSERT(ork_close(*(float *)ork_tensor_data(y), ref / 70, 1e-6, 1e-5));
    gc_free(2, in);
}

static ork_status f_concat(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    *n = 1;
    return G.ops->concat(g, 3, in, *(int *)ctx, &o[0]);
}
static ork_status f_split(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    ork_tensor *ys[3];
    ORK_TRY(G.ops->split(g, in[0], -1, 3, S(2, 3, 1), ys));
    /* use parts 0 and 2 only (part 1's gradient is zero), part 2 via a reshape */
    *n = 2;
    o[0] = ys[0];
    return G.ops->reshape(g, ys[2], 1, S(-1), &o[1]);
}
static ork_status f_permute(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    ork_tensor *p;
    ORK_TRY(G.ops->permute(g, in[0], (const int[]){2, 0, 3, -3}, &p));
    *n = 1;
    return G.ops->reshape(g, p, 2, S(6, -1), &o[0]);
}
static void t_shape_ops(void) {
    ork_tensor *in[3] = {gc_param(3, S(2, 3, 4), 1.0), gc_param(3, S(2, 1, 4), 1.0), gc_param(3, S(2, 5, 4), 1.0)};
    int axis = 1;
    CU_ASSERT(gc_check("concat", f_concat, &axis, 3, in, NULL, 1e-3));
    gc_free(3, in);
    ork_tensor *in2[3] = {gc_param(2, S(7, 3), 1.0), gc_param(2, S(7, 2), 1.0), gc_param(2, S(7, 1), 1.0)};
    axis = -1;
    CU_ASSERT(gc_check("concat last", f_concat, &axis, 3, in2, NULL, 1e-3));
    gc_free(3, in2);
    ork_tensor *x = gc_param(3, S(2, 7, 6), 1.0);
    CU_ASSERT(gc_check("split+reshape", f_split, NULL, 1, &x, NULL, 1e-3));
    ork_tensor *ys[2], *y;
    CU_ASSERT(G.ops->split(G.g, x, 1, 2, S(3, 3), ys) == ORK_E_INVALID); /* sizes do not add up */
    CU_ASSERT(G.ops->reshape(G.g, x, 2, S(5, -1), &y) == ORK_E_INVALID);
    gc_free(1, &x);
    ork_tensor *z = gc_param(4, S(2, 3, 4, 5), 1.0);
    CU_ASSERT(gc_check("permute", f_permute, NULL, 1, &z, NULL, 1e-3));
    ork_graph_reset(G.g);
    ork_tensor *p;
    CU_ASSERT_FATAL(G.ops->permute(G.g, z, (const int[]){2, 0, 3, 1}, &p) == ORK_OK);
    CU_ASSERT(p->shape[0] == 4 && p->shape[1] == 2 && p->shape[2] == 5 && p->shape[3] == 3);
    /* p[c, a, d, b] = z[a, b, c, d] */
    CU_ASSERT(((float *)ork_tensor_data(p))[((3 * 2 + 1) * 5 + 4) * 3 + 2] ==
              ((float *)ork_tensor_data(z))[((1 * 3 + 2) * 4 + 3) * 5 + 4]);
    CU_ASSERT(G.ops->permute(G.g, z, (const int[]){0, 0, 1, 2}, &p) == ORK_E_INVALID);
    gc_free(1, &z);
}

static void t_cast(void) {
    /* F32 -> BF16 -> F32: forward rounds like ork_f32_to_bf16, the gradient is
     * the upstream gradient cast back (identity here, BF16-rounded). */
    ork_tensor *x = gc_param(2, S(3, 7), 1.0), *b, *y, *s;
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_tensor_zero_grad(g, x);
    CU_ASSERT_FATAL(G.ops->cast(g, x, ORK_BF16, &b) == ORK_OK);
    CU_ASSERT(b->dtype == ORK_BF16);
    CU_ASSERT_FATAL(G.ops->cast(g, b, ORK_F32, &y) == ORK_OK);
    const float *X = ork_tensor_data(x), *Y = ork_tensor_data(y);
    int same = 1;
    for (int i = 0; i < 21; i++) same &= Y[i] == ork_bf16_to_f32(ork_f32_to_bf16(X[i]));
    CU_ASSERT(same);
    CU_ASSERT_FATAL(G.ops->sum(g, y, &s) == ORK_OK);
    CU_ASSERT_FATAL(ork_backward(g, s) == ORK_OK);
    CU_ASSERT_FATAL(x->grad != NULL);
    int ones = 1;
    for (int i = 0; i < 21; i++) ones &= ((float *)ork_tensor_data(x->grad))[i] == 1.0f;
    CU_ASSERT(ones);
    gc_free(1, &x);
}

/* ---- composite: reuse, adoption and accumulation through intermediates ---------------------------------- */

static ork_status f_block(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    ork_tensor *x = in[0], *w = in[1], *sh = in[2], *sc = in[3], *h, *m, *a, *gl, *r;
    ORK_TRY(G.ops->layernorm(g, x, 1e-6f, &h));
    ORK_TRY(G.ops->modulate(g, h, sh, sc, &m));
    ORK_TRY(G.ops->linear(g, m, w, NULL, &a));
    ORK_TRY(G.ops->gelu_tanh(g, a, &gl));
    ORK_TRY(G.ops->mul(g, gl, a, &r));    /* a used twice */
    ORK_TRY(G.ops->add(g, x, r, &o[0])); /* residual: x used twice */
    *n = 1;
    return ORK_OK;
}
static void t_composite(void) {
    ork_tensor *in[4] = {gc_param(3, S(2, 7, 6), 1.0), gc_param(2, S(6, 6), 0.4), gc_param(3, S(2, 1, 6), 0.3),
                         gc_param(3, S(2, 1, 6), 0.3)};
    CU_ASSERT(gc_check("composite block", f_block, NULL, 4, in, NULL, 1e-3));
    gc_free(4, in);
}

static const ork_test_case cases[] = {
    {"linear with bias", t_linear_bias},
    {"linear with LoRA (W frozen, bf16)", t_linear_lora},
    {"linear with LoRA dropout (deterministic mask)", t_linear_lora_dropout},
    {"add/mul broadcasting", t_broadcast},
    {"modulate", t_modulate},
    {"scale", t_scale},
    {"layernorm/rmsnorm", t_norms},
    {"activations + swiglu", t_activations},
    {"rope 3 and 4 axes", t_rope},
    {"attention full and causal", t_attention},
    {"attention grouped kv + key mask (backend)", t_attention_gqa},
    {"conv2d stride/pad/1x1/3x3", t_conv2d},
    {"maxpool2x2, upsample2x", t_pool_upsample},
    {"matmul transposes + gram", t_matmul},
    {"blocked gemm vs naive", t_gemm_blocked},
    {"mse/mean/sum", t_reductions},
    {"concat/split/permute/reshape", t_shape_ops},
    {"cast", t_cast},
    {"composite block", t_composite},
    {NULL, NULL},
};

static int setup(void) { return gc_setup(); }
static int teardown(void) { return gc_teardown(); }
ORK_TEST_MAIN("ops_grad", setup, teardown, cases)
