/* tests/lokr/test_lokr_op.c — LoKr (network.type: lokr) below the trainer, on the CPU:
 *  - factorization: ork_lokr_factorization equals ai-toolkit's factorization(dim,
 *    factor) on every row of the fixture (tests/reference/lokr_ref.py, which also
 *    checks LyCORIS's factorization and LokrModule's lokr_w1 / lokr_w2 shapes agree);
 *  - vs_lycoris: the linear op with a LoKr adapter (ork_lora.kind ORK_ADAPTER_LOKR)
 *    gives lycoris-lora LokrModule's y and torch autograd's dx, dw1, dw2 on three
 *    shapes (F32, rel. L2 error <= 1e-5: both are F32 roundings of the same sums);
 *  - grad_fd: the backward against finite differences with scale 0.7 (W frozen,
 *    F32: W + ΔW is the GEMM operand in W's dtype, so a BF16 W would round the
 *    finite-difference steps away, as ai-toolkit's own W + ΔW in bf16 does);
 *  - refusals: w1, w2 whose Kronecker product is not W's shape are refused. */
#include "grad_check.h"

#include "io/safetensors.h"
#include "train/lora.h"

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

/* rel. L2 error of got against want (n floats). */
static double rel_l2(const float *got, const float *want, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        den += (double)want[i] * want[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static ork_tensor *tensor_from(int ndim, const int64_t *shape, const float *v, int param) {
    ork_tensor *t = NULL;
    if (ork_tensor_new(G.alloc, "test", ORK_F32, ndim, shape, param, &t) != ORK_OK) return NULL;
    memcpy(ork_tensor_data(t), v, (size_t)ork_tensor_numel(t) * sizeof(float));
    return t;
}

static void vs_case(int c) {
    char k[64];
    const char *names[] = {"x", "w", "b", "w1", "w2", "dy", "y", "dx", "dw1", "dw2"};
    float *v[10];
    int64_t sh[10][2];
    for (int i = 0; i < 10; i++) {
        snprintf(k, sizeof k, "c%d.%s", c, names[i]);
        v[i] = fx(k, sh[i]);
        NEED(v[i]);
    }
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

static const ork_test_case cases[] = {
    {"factorization equals ai-toolkit's (and LyCORIS's)", t_factorization},
    {"linear + LoKr equals lycoris-lora LokrModule (y, dx, dw1, dw2)", t_vs_lycoris},
    {"linear + LoKr backward against finite differences", t_grad_fd},
    {"a Kronecker product of the wrong shape is refused", t_refusals},
    {NULL, NULL}};
ORK_TEST_MAIN("lokr_op", init, clean, cases)
