/* tests/lokr/test_lokr_op.c — LoKr (network.type: lokr) below the trainer, on the CPU:
 *  - factorization: ork_lokr_factorization equals ai-toolkit's factorization(dim,
 *    factor) on every row of the fixture (tests/reference/lokr_ref.py, which also
 *    checks LyCORIS's factorization and LokrModule's lokr_w1 / lokr_w2 shapes agree);
 *  - vs_lycoris: the linear op with a LoKr adapter (ork_lora.kind ORK_ADAPTER_LOKR)
 *    gives lycoris-lora LokrModule's y and torch autograd's dx, dw1, dw2 on three
 *    shapes (F32, rel. L2 error <= 1e-5: both are F32 roundings of the same sums);
 *  - lowrank: lokr_full_rank false's w2 = (alpha / r) · w2_a · w2_b (ORK_ADAPTER_LOKR_LR,
 *    up packing w2_a over w2_bᵀ) equals LokrModule with lora_dim 3, alpha 2: y, dx,
 *    dw1, dw2_a, dw2_b (rel. L2 <= 1e-5);
 *  - grad_fd: the backward against finite differences with scale 0.7 (W frozen,
 *    F32: W + ΔW is the GEMM operand in W's dtype, so a BF16 W would round the
 *    finite-difference steps away, as ai-toolkit's own W + ΔW in bf16 does);
 *  - chunked: a layer whose P = vec(w1)·vec(w2)ᵀ and G = dyᵀ·x are past the op's
 *    64 MB chunks (w1 (3, 1), w2 (4096, 2560): three chunks each) gives y, dw1 and
 *    dw2 equal to sums in double here;
 *  - refusals: w1, w2 whose Kronecker product is not W's shape are refused.
 * Built a second time with LOKR_GPU (lokr_op_cuda, label gpu, exit 77 without a
 * device): vs_lycoris on the CUDA backend, F32 activations (rel. L2 <= 1e-5) and
 * BF16 activations with a BF16 W (y, dw1, dw2; rel. L2 <= 2e-2: bf16 inputs). */
#include "grad_check.h"

#include "io/safetensors.h"
#include "numerics/half.h"
#include "train/lora.h"
#ifdef LOKR_GPU
#include "cuda/cuda_ctx.h" /* ork_cuda_device_count */
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define NEED(x) CU_ASSERT_FATAL((x) != NULL)

static ork_st_file *F;

static int init(void) {
    if (gc_setup() != 0) return 1;
    return ork_st_open(ORK_SOURCE_DIR "/tests/fixtures/lokr/lokr_ref.safetensors", &F) != ORK_OK;
}
static int clean(void) {
    ork_st_close(F);
    return gc_teardown();
}

/* The fixture tensor `name` as F32 (malloc'd), its shape in shape[2] (1-D: shape[1] = 1). */
static float *fx(const char *name, int64_t shape[2]) {
    const ork_st_tensor *t = ork_st_find(F, name);
    if (!t) { printf("\n  fixture has no %s\n", name); return NULL; }
    shape[0] = t->ndim > 0 ? t->shape[0] : 1;
    shape[1] = t->ndim > 1 ? t->shape[1] : 1;
    float *p = malloc((size_t)(shape[0] * shape[1]) * sizeof *p);
    if (p && ork_st_read_f32(t, p) != ORK_OK) { free(p); return NULL; }
    return p;
}

#ifndef LOKR_GPU
static void t_factorization(void) {
    int64_t sh[2];
    float *f = fx("fact", sh);
    NEED(f);
    CU_ASSERT_FATAL(sh[1] == 4 && sh[0] > 100);
    int bad = 0;
    for (int64_t r = 0; r < sh[0]; r++) {
        int64_t m, n, dim = (int64_t)f[r * 4], factor = (int64_t)f[r * 4 + 1];
        ork_lokr_factorization(dim, factor, &m, &n);
        if (m != (int64_t)f[r * 4 + 2] || n != (int64_t)f[r * 4 + 3]) {
            if (bad++ < 5) printf("\n  factorization(%lld, %lld) = (%lld, %lld), ai-toolkit (%g, %g)", (long long)dim,
                                  (long long)factor, (long long)m, (long long)n, f[r * 4 + 2], f[r * 4 + 3]);
        }
    }
    CU_ASSERT(bad == 0);
    free(f);
}

#endif

/* Fixture case c: x, w, b, w1, w2, dy, y, dx, dw1, dw2 (fx each); 1 when all are there. */
static int load_case(int c, float *v[10], int64_t sh[10][2]) {
    static const char *const names[] = {"x", "w", "b", "w1", "w2", "dy", "y", "dx", "dw1", "dw2"};
    char k[64];
    int ok = 1;
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "c%d.%s", c, names[i]);
        v[i] = fx(k, sh[i]);
        ok &= v[i] != NULL;
    }
    return ok;
}

/* rel. L2 error of got against want (n floats). */
static double rel_l2(const float *got, const float *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

#ifndef LOKR_GPU
static ork_tensor *tensor_from(int ndim, const int64_t *shape, const float *v, int param) {
    ork_tensor *t = NULL;
    if (ork_tensor_new(G.alloc, "test", ORK_F32, ndim, shape, param, &t) != ORK_OK) return NULL;
    memcpy(ork_tensor_data(t), v, (size_t)ork_tensor_numel(t) * sizeof(float));
    return t;
}

static void vs_case(int c) {
    float *v[10];
    int64_t sh[10][2];
    CU_ASSERT_FATAL(load_case(c, v, sh));
    ork_tensor *x = tensor_from(2, sh[0], v[0], 1), *w = tensor_from(2, sh[1], v[1], 0);
    ork_tensor *b = tensor_from(1, sh[2], v[2], 0), *w1 = tensor_from(2, sh[3], v[3], 1);
    ork_tensor *w2 = tensor_from(2, sh[4], v[4], 1);
    NEED(x); NEED(w); NEED(b); NEED(w1); NEED(w2);
    ork_lora lo = {.down = w1, .up = w2, .scale = 1.0f, .kind = ORK_ADAPTER_LOKR};
    w->lora = &lo;
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_graph_set_grad(g, 1);
    ork_tensor_zero_grad(g, x);
    ork_tensor_zero_grad(g, w1);
    ork_tensor_zero_grad(g, w2);
    ork_tensor *y = NULL, *dy = NULL;
    CU_ASSERT_FATAL(G.ops->linear(g, x, w, b, &y) == ORK_OK);
    CU_ASSERT_FATAL(G.tapi->from_host(g, ORK_F32, 2, sh[5], v[5], &dy) == ORK_OK);
    int64_t ny = sh[6][0] * sh[6][1];
    double ey = rel_l2(ork_tensor_data(y), v[6], ny);
    CU_ASSERT_FATAL(ork_backward_from(g, 1, &y, &dy) == ORK_OK);
    NEED(x->grad); NEED(w1->grad); NEED(w2->grad);
    double ex = rel_l2(ork_tensor_data(x->grad), v[7], sh[7][0] * sh[7][1]);
    double e1 = rel_l2(ork_tensor_data(w1->grad), v[8], sh[8][0] * sh[8][1]);
    double e2 = rel_l2(ork_tensor_data(w2->grad), v[9], sh[9][0] * sh[9][1]);
    printf("\n  case %d: y (%lld, %lld) w1 (%lld, %lld) w2 (%lld, %lld): rel err y %.2g dx %.2g dw1 %.2g dw2 %.2g", c,
           (long long)sh[6][0], (long long)sh[6][1], (long long)sh[3][0], (long long)sh[3][1], (long long)sh[4][0],
           (long long)sh[4][1], ey, ex, e1, e2);
    CU_ASSERT(ey <= 1e-5);
    CU_ASSERT(ex <= 1e-5);
    CU_ASSERT(e1 <= 1e-5);
    CU_ASSERT(e2 <= 1e-5);
    CU_ASSERT(w->grad == NULL);
    /* the adapter moves y: without it the output differs clearly */
    w->lora = NULL;
    ork_graph_reset(g);
    ork_tensor *y0 = NULL;
    CU_ASSERT_FATAL(G.ops->linear(g, x, w, b, &y0) == ORK_OK);
    CU_ASSERT(rel_l2(ork_tensor_data(y0), v[6], ny) > 0.1);
    ork_tensor *t[5] = {x, w, b, w1, w2};
    gc_free(5, t);
    for (int i = 0; i < 10; i++) free(v[i]);
}

static void t_vs_lycoris(void) {
    for (int c = 0; c < 3; c++) vs_case(c);
}

static void t_lowrank(void) {
    const char *names[] = {"x", "w", "b", "w1", "w2a", "w2b", "dy", "y", "dx", "dw1", "dw2a", "dw2b"};
    float *v[12];
    int64_t sh[12][2];
    char k[64];
    for (int i = 0; i < 12; i++) {
        snprintf(k, sizeof k, "c3.%s", names[i]);
        v[i] = fx(k, sh[i]);
        NEED(v[i]);
    }
    int64_t b = sh[4][0], r = sh[4][1], d = sh[5][1];
    float *up = malloc((size_t)((b + d) * r) * sizeof *up);
    NEED(up);
    memcpy(up, v[4], (size_t)(b * r) * sizeof *up);
    for (int64_t l = 0; l < d; l++)
        for (int64_t q = 0; q < r; q++) up[(b + l) * r + q] = v[5][q * d + l];
    int64_t shu[2] = {b + d, r};
    ork_tensor *x = tensor_from(2, sh[0], v[0], 1), *w = tensor_from(2, sh[1], v[1], 0);
    ork_tensor *bias = tensor_from(1, sh[2], v[2], 0), *w1 = tensor_from(2, sh[3], v[3], 1);
    ork_tensor *wu = tensor_from(2, shu, up, 1);
    NEED(x); NEED(w); NEED(bias); NEED(w1); NEED(wu);
    ork_lora lo = {.down = w1, .up = wu, .scale = 2.0f / 3.0f, .kind = ORK_ADAPTER_LOKR_LR};
    w->lora = &lo;
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_graph_set_grad(g, 1);
    ork_tensor_zero_grad(g, x);
    ork_tensor_zero_grad(g, w1);
    ork_tensor_zero_grad(g, wu);
    ork_tensor *y = NULL, *dy = NULL;
    CU_ASSERT_FATAL(G.ops->linear(g, x, w, bias, &y) == ORK_OK);
    CU_ASSERT_FATAL(G.tapi->from_host(g, ORK_F32, 2, sh[6], v[6], &dy) == ORK_OK);
    double ey = rel_l2(ork_tensor_data(y), v[7], sh[7][0] * sh[7][1]);
    CU_ASSERT_FATAL(ork_backward_from(g, 1, &y, &dy) == ORK_OK);
    NEED(x->grad); NEED(w1->grad); NEED(wu->grad);
    const float *gu = ork_tensor_data(wu->grad);
    float *g2b = malloc((size_t)(r * d) * sizeof *g2b);
    NEED(g2b);
    for (int64_t q = 0; q < r; q++)
        for (int64_t l = 0; l < d; l++) g2b[q * d + l] = gu[(b + l) * r + q];
    double ex = rel_l2(ork_tensor_data(x->grad), v[8], sh[8][0] * sh[8][1]);
    double e1 = rel_l2(ork_tensor_data(w1->grad), v[9], sh[9][0] * sh[9][1]);
    double ea = rel_l2(gu, v[10], b * r), eb = rel_l2(g2b, v[11], r * d);
    printf("\n  low-rank w2 (b %lld, r %lld, d %lld): rel err y %.2g dx %.2g dw1 %.2g dw2_a %.2g dw2_b %.2g",
           (long long)b, (long long)r, (long long)d, ey, ex, e1, ea, eb);
    CU_ASSERT(ey <= 1e-5 && ex <= 1e-5 && e1 <= 1e-5 && ea <= 1e-5 && eb <= 1e-5);
    w->lora = NULL;
    ork_graph_reset(g);
    ork_tensor *t[5] = {x, w, bias, w1, wu};
    gc_free(5, t);
    free(g2b);
    free(up);
    for (int i = 0; i < 12; i++) free(v[i]);
}

static ork_status f_linear(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **o, int *n) {
    (void)ctx;
    *n = 1;
    return G.ops->linear(g, in[0], in[1], in[2], &o[0]);
}

static void t_grad_fd(void) {
    /* W (12, 6) frozen = kron shape of w1 (3, 2), w2 (4, 3); scale 0.7 */
    ork_tensor *x = gc_param(3, S(2, 5, 6), 1.0), *w = gc_const(ORK_F32, 2, S(12, 6), 0.5);
    ork_tensor *b = gc_const(ORK_F32, 1, S(12), 0.5);
    ork_tensor *w1 = gc_param(2, S(3, 2), 0.5), *w2 = gc_param(2, S(4, 3), 0.5);
    NEED(x); NEED(w); NEED(b); NEED(w1); NEED(w2);
    ork_lora lo = {.down = w1, .up = w2, .scale = 0.7f, .kind = ORK_ADAPTER_LOKR};
    w->lora = &lo;
    ork_tensor *in[5] = {x, w, b, w1, w2};
    int check[5] = {1, 0, 0, 1, 1};
    CU_ASSERT(gc_check("linear+lokr (x, w1, w2)", f_linear, NULL, 5, in, check, 1e-3));
    CU_ASSERT(w->grad == NULL);
    CU_ASSERT(b->grad == NULL);
    w->lora = NULL;
    gc_free(5, in);
}

static void t_chunked(void) {
    const int64_t a = 3, c = 1, b = 4096, d = 2560, M = 2, N = a * b, K = c * d;
    const float scale = 0.5f;
    ork_tensor *x = gc_param(2, S(M, K), 1.0), *w = gc_const(ORK_F32, 2, S(N, K), 0.0);
    ork_tensor *w1 = gc_param(2, S(a, c), 0.5), *w2 = gc_param(2, S(b, d), 0.5);
    NEED(x); NEED(w); NEED(w1); NEED(w2);
    ork_lora lo = {.down = w1, .up = w2, .scale = scale, .kind = ORK_ADAPTER_LOKR};
    w->lora = &lo;
    float *dyh = malloc((size_t)(M * N) * sizeof *dyh);
    NEED(dyh);
    for (int64_t i = 0; i < M * N; i++) dyh[i] = (float)gc_randn();
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_graph_set_grad(g, 1);
    ork_tensor_zero_grad(g, w1);
    ork_tensor_zero_grad(g, w2);
    ork_tensor *y = NULL, *dy = NULL;
    CU_ASSERT_FATAL(G.ops->linear(g, x, w, NULL, &y) == ORK_OK);
    { /* W = 0: y[m, i·b+k] = scale · w1[i] · Σ_l w2[k, l] x[m, l], at a sample of k in every chunk */
        const float *X = ork_tensor_data(x), *A = ork_tensor_data(w1), *B = ork_tensor_data(w2), *Y = ork_tensor_data(y);
        double e = 0, n = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t i = 0; i < a; i++)
                for (int64_t k = 0; k < b; k += 61) {
                    double r = 0;
                    for (int64_t l = 0; l < d; l++) r += (double)B[k * d + l] * X[m * K + l];
                    r *= scale * (double)A[i];
                    e += (Y[m * N + i * b + k] - r) * (Y[m * N + i * b + k] - r);
                    n += r * r;
                }
        printf("\n  chunked: rel err y %.2g", sqrt(e / n));
        CU_ASSERT(sqrt(e / n) <= 1e-5);
    }
    CU_ASSERT_FATAL(G.tapi->from_host(g, ORK_F32, 2, S(M, N), dyh, &dy) == ORK_OK);
    CU_ASSERT_FATAL(ork_backward_from(g, 1, &y, &dy) == ORK_OK);
    NEED(w1->grad); NEED(w2->grad);
    const float *X = ork_tensor_data(x), *A = ork_tensor_data(w1), *B = ork_tensor_data(w2);
    const float *g1 = ork_tensor_data(w1->grad), *g2 = ork_tensor_data(w2->grad);
    /* c = 1: dw1[i] = scale Σ_m Σ_k dy[m, i·b+k] (Σ_l x[m, l] w2[k, l]);
     *        dw2[k, l] = scale Σ_m Σ_i dy[m, i·b+k] w1[i] x[m, l] */
    double e1 = 0, n1 = 0, e2 = 0, n2 = 0;
    double *t = calloc((size_t)(M * b), sizeof *t);
    NEED(t);
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < b; k++)
            for (int64_t l = 0; l < d; l++) t[m * b + k] += (double)X[m * K + l] * B[k * d + l];
    for (int64_t i = 0; i < a; i++) {
        double r = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < b; k++) r += dyh[m * N + i * b + k] * t[m * b + k];
        r *= scale;
        e1 += (g1[i] - r) * (g1[i] - r);
        n1 += r * r;
    }
    for (int64_t k = 0; k < b; k += 7) /* a sample of rows */
        for (int64_t l = 0; l < d; l++) {
            double r = 0;
            for (int64_t m = 0; m < M; m++)
                for (int64_t i = 0; i < a; i++) r += (double)dyh[m * N + i * b + k] * A[i] * X[m * K + l];
            r *= scale;
            e2 += (g2[k * d + l] - r) * (g2[k * d + l] - r);
            n2 += r * r;
        }
    printf(", dw1 %.2g, dw2 %.2g", sqrt(e1 / n1), sqrt(e2 / n2));
    /* dw1 sums b·d = 10M F32 products per element (measured ~6e-6), dw2 a·M = 6 */
    CU_ASSERT(sqrt(e1 / n1) <= 5e-5);
    CU_ASSERT(sqrt(e2 / n2) <= 1e-5);
    free(t);
    free(dyh);
    w->lora = NULL;
    ork_graph_reset(g);
    ork_tensor *tt[4] = {x, w, w1, w2};
    gc_free(4, tt);
}

static void t_refusals(void) {
    ork_tensor *x = gc_param(2, S(4, 6), 1.0), *w = gc_const(ORK_F32, 2, S(12, 6), 0.5);
    ork_tensor *w1 = gc_param(2, S(3, 2), 0.5), *w2 = gc_param(2, S(4, 2), 0.5); /* kron: (12, 4), not (12, 6) */
    NEED(x); NEED(w); NEED(w1); NEED(w2);
    ork_lora lo = {.down = w1, .up = w2, .scale = 1.0f, .kind = ORK_ADAPTER_LOKR};
    w->lora = &lo;
    ork_graph_reset(G.g);
    ork_tensor *y = NULL;
    CU_ASSERT(G.ops->linear(G.g, x, w, NULL, &y) != ORK_OK);
    w->lora = NULL;
    ork_tensor *t[4] = {x, w, w1, w2};
    gc_free(4, t);
}

#endif

#ifdef LOKR_GPU
/* The fixture cases on the CUDA backend: activations (x, W, dy, y) in adt, w1 and
 * w2 F32 parameters; the bias is left out (y's reference less b). */
static void gpu_case(int c, ork_dtype adt, double tol) {
    const ork_backend *be = ork_cuda_backend();
    ork_alloc *a = NULL;
    ork_graph *g = NULL;
    CU_ASSERT_FATAL(ork_alloc_create(be, 0, &a) == ORK_OK);
    ork_graph_opts go = {.act_dtype = adt};
    CU_ASSERT_FATAL(ork_graph_create(be, a, &go, &g) == ORK_OK);
    float *v[10];
    int64_t sh[10][2];
    CU_ASSERT_FATAL(load_case(c, v, sh));
    for (int64_t m = 0; m < sh[6][0]; m++) /* y less the bias */
        for (int64_t n = 0; n < sh[6][1]; n++) v[6][m * sh[6][1] + n] -= v[2][n];
    /* tensors: x (param when F32), w frozen in adt, w1 / w2 F32 params */
    ork_tensor *t[4] = {NULL, NULL, NULL, NULL};
    const int idx[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; i++) {
        ork_dtype dt = (i < 2) ? adt : ORK_F32;
        int param = i >= 2 || (i == 0 && adt == ORK_F32);
        CU_ASSERT_FATAL(ork_tensor_new(a, "test", dt, 2, sh[idx[i]], param, &t[i]) == ORK_OK);
        int64_t n = ork_tensor_numel(t[i]);
        void *h = v[idx[i]];
        uint16_t *hb = NULL;
        if (dt == ORK_BF16) {
            hb = malloc((size_t)n * 2);
            NEED(hb);
            ork_bf16_from_f32(v[idx[i]], (size_t)n, hb);
            h = hb;
        }
        CU_ASSERT_FATAL(be->memcpy_h2d(&g->k, ork_tensor_data(t[i]), h, (size_t)n * ork_dtype_size(dt)) == ORK_OK);
        CU_ASSERT_FATAL(be->sync(&g->k) == ORK_OK);
        free(hb);
    }
    ork_tensor *x = t[0], *w = t[1], *w1 = t[2], *w2 = t[3];
    ork_lora lo = {.down = w1, .up = w2, .scale = 1.0f, .kind = ORK_ADAPTER_LOKR};
    w->lora = &lo;
    ork_graph_set_grad(g, 1);
    if (adt == ORK_F32) ork_tensor_zero_grad(g, x);
    ork_tensor_zero_grad(g, w1);
    ork_tensor_zero_grad(g, w2);
    ork_tensor *y = NULL, *dy = NULL;
    CU_ASSERT_FATAL(G.ops->linear(g, x, w, NULL, &y) == ORK_OK);
    int64_t ny = sh[6][0] * sh[6][1];
    void *dyh = v[5];
    uint16_t *dyb = NULL;
    if (adt == ORK_BF16) {
        dyb = malloc((size_t)ny * 2);
        NEED(dyb);
        ork_bf16_from_f32(v[5], (size_t)ny, dyb);
        dyh = dyb;
    }
    CU_ASSERT_FATAL(G.tapi->from_host(g, adt, 2, sh[5], dyh, &dy) == ORK_OK);
    free(dyb);
    float *yh = malloc((size_t)ny * sizeof *yh);
    NEED(yh);
    CU_ASSERT_FATAL(G.tapi->to_host(g, y, ORK_F32, yh) == ORK_OK);
    CU_ASSERT_FATAL(ork_backward_from(g, 1, &y, &dy) == ORK_OK);
    double e[4] = {rel_l2(yh, v[6], ny), 0, 0, 0};
    ork_tensor *gt[3] = {adt == ORK_F32 ? x->grad : NULL, w1->grad, w2->grad};
    for (int i = 0; i < 3; i++) {
        if (!gt[i]) continue;
        int64_t n = ork_tensor_numel(gt[i]);
        float *h = malloc((size_t)n * sizeof *h);
        NEED(h);
        CU_ASSERT_FATAL(G.tapi->to_host(g, gt[i], ORK_F32, h) == ORK_OK);
        e[1 + i] = rel_l2(h, v[7 + i], n);
        free(h);
    }
    printf("\n  cuda %s case %d: rel err y %.2g dx %.2g dw1 %.2g dw2 %.2g", adt == ORK_F32 ? "f32" : "bf16", c, e[0],
           e[1], e[2], e[3]);
    for (int i = 0; i < 4; i++) CU_ASSERT(e[i] <= tol);
    CU_ASSERT(w1->grad != NULL && w2->grad != NULL && w->grad == NULL);
    w->lora = NULL;
    free(yh);
    for (int i = 0; i < 4; i++) ork_tensor_free(t[i]);
    for (int i = 0; i < 10; i++) free(v[i]);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
}

static void t_cuda_f32(void) {
    for (int c = 0; c < 3; c++) gpu_case(c, ORK_F32, 1e-5);
}
static void t_cuda_bf16(void) {
    for (int c = 0; c < 3; c++) gpu_case(c, ORK_BF16, 2e-2);
}

static const ork_test_case gpu_cases[] = {
    {"CUDA: linear + LoKr equals lycoris-lora, F32 activations", t_cuda_f32},
    {"CUDA: linear + LoKr equals lycoris-lora, BF16 activations", t_cuda_bf16},
    {NULL, NULL}};
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("lokr_op_cuda", init, clean, gpu_cases);
}
#else
static const ork_test_case cases[] = {
    {"factorization equals ai-toolkit's (and LyCORIS's)", t_factorization},
    {"linear + LoKr equals lycoris-lora LokrModule (y, dx, dw1, dw2)", t_vs_lycoris},
    {"low-rank w2 (w2_a, w2_b) equals lycoris-lora LokrModule", t_lowrank},
    {"linear + LoKr backward against finite differences", t_grad_fd},
    {"dw1, dw2 over two chunks of G", t_chunked},
    {"a Kronecker product of the wrong shape is refused", t_refusals},
    {NULL, NULL}};
ORK_TEST_MAIN("lokr_op", init, clean, cases)
#endif
