/* tests/cuda/test_cuda_fused.c — the fused ops gated_add and layernorm_modulate
 * on CUDA (cuda/cuda_fused.cu through tensor/ops_fused.c) against the ops they
 * replace, composed on the same backend (mul + add, layernorm + modulate), BF16
 * activations, the same inputs: the output and every input gradient, at FLUX's
 * shape (B 1, L 4608, C 3072: the 8-wide path) with a per-batch (B, 1, C) and a
 * shared (C) operand, at B 2 with a per-batch gate, and at an odd C (1001: the
 * scalar path). Leaves are graph tensors (BF16 gradients, as FLUX's carry).
 *
 * Tolerances (per element; u = 2^-8, a BF16 rounding's relative bound):
 *  - gated_add y: the composition rounds h·gate to BF16 before the add, the
 *    fused kernel does not: |Δ| <= 2u·(|y| + |h·gate|) (one rounding of each
 *    side's result plus the composition's extra one);
 *  - dh = dy·gate, dx = dy: the same single rounding both ways: bit for bit;
 *  - dgate = Σ_L dy·h and dshift = Σ_L dy: F32 sums in another order, then one
 *    BF16 rounding each side: |Δ| <= 2u·|ref| + 2^-14·Σ|terms|;
 *  - layernorm_modulate y: the composition rounds x̂ to BF16 before the
 *    modulation: |Δ| <= 2u·(|y| + |1 + scale|·|x̂|) (+ F32 mean/rstd order);
 *  - its dx: the composition rounds dn = dy·(1 + scale) to BF16 before the
 *    norm's backward, whose terms are rstd·(dn, mean(dn), x̂·mean(dn·x̂)):
 *    |Δ| <= 2u·(|dx| + rstd·(|dn| + mean|dn| + |x̂|·mean|dn·x̂|));
 *  - dscale = Σ_L dy·x̂: the composition's x̂ carries a BF16 rounding per term:
 *    |Δ| <= 2u·|ref| + u·Σ|dy·x̂|.
 * x̂, rstd and the sums of absolute terms are computed here in double.
 * Exits 77 without a CUDA device. */
#include "ork_test.h"

#include "numerics/half.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ork_cuda_device_count(void);

static ork_alloc *A;
static ork_graph *Gr;
static const ork_ops *O;
static const ork_tensor_api *T;
static uint64_t rs = 0xBB67AE8584CAA73Bull;

static const double U = 1.0 / 256.0;

static double urand(void) { /* [-1, 1) */
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
/* n BF16 values (and their F32 copies) of scale sc */
static uint16_t *rnd(int64_t n, double sc, float **f) {
    uint16_t *h = malloc((size_t)n * 2);
    *f = malloc((size_t)n * sizeof **f);
    for (int64_t i = 0; i < n; i++) {
        h[i] = ork_f32_to_bf16((float)(sc * urand()));
        (*f)[i] = ork_bf16_to_f32(h[i]);
    }
    return h;
}

typedef struct {
    int64_t B, L, C, Bp[2]; /* x (B, L, C); the per-row operands (Bp, 1, C) or (C) when Bp = 0 */
    int chain;              /* y feeds another op (see run) */
} shp;
static int64_t nx(const shp *s) { return s->B * s->L * s->C; }
static int64_t np(const shp *s, int i) { return (s->Bp[i] ? s->Bp[i] : 1) * s->C; }
static int pdims(const shp *s, int i, int64_t *d) {
    if (!s->Bp[i]) { d[0] = s->C; return 1; }
    d[0] = s->Bp[i]; d[1] = 1; d[2] = s->C;
    return 3;
}
static int64_t prow(const shp *s, int i, int64_t r) { return s->Bp[i] > 1 ? r / s->L : 0; }

enum { GATED, LNMOD };
typedef struct { uint16_t *in[3], *dy; float *f[3], *fdy; } inputs;
typedef struct { float *y, *g[3]; const char *op; } outputs;

static ork_status run(int op, int fused, const shp *s, const inputs *in, outputs *o) {
    memset(o, 0, sizeof *o);
    ork_graph_reset(Gr);
    ork_graph_set_grad(Gr, 1);
    const int64_t dx[3] = {s->B, s->L, s->C};
    int64_t d1[3], d2[3];
    int n1 = pdims(s, 0, d1), n2 = pdims(s, 1, d2);
    ork_tensor *t[3], *lv[3], *y;
    /* gated: x, gate, h; lnmod: x, shift, scale */
    const int nd[3] = {3, n1, op == GATED ? 3 : n2};
    const int64_t *dims[3] = {dx, d1, op == GATED ? dx : d2};
    for (int i = 0; i < 3; i++) {
        ORK_TRY(T->from_host(Gr, ORK_BF16, nd[i], dims[i], in->in[i], &t[i]));
        ORK_TRY(ork_graph_leaf(Gr, t[i], 1, &lv[i]));
    }
    if (op == GATED) {
        if (fused) ORK_TRY(O->gated_add(Gr, lv[0], lv[1], lv[2], &y));
        else {
            ork_tensor *m;
            ORK_TRY(O->mul(Gr, lv[2], lv[1], &m));
            ORK_TRY(O->add(Gr, lv[0], m, &y));
        }
    } else {
        if (fused) ORK_TRY(O->layernorm_modulate(Gr, lv[0], lv[1], lv[2], 1e-6f, &y));
        else {
            ork_tensor *m;
            ORK_TRY(O->layernorm(Gr, lv[0], 1e-6f, &m));
            ORK_TRY(O->modulate(Gr, m, lv[1], lv[2], &y));
        }
    }
    o->op = y->node ? y->node->op : "";
    o->y = malloc((size_t)nx(s) * sizeof(float));
    ORK_TRY(T->to_host(Gr, y, ORK_F32, o->y));
    ork_tensor *dy;
    ORK_TRY(T->from_host(Gr, ORK_BF16, 3, dx, in->dy, &dy));
    /* chained: y feeds a scale by 1 (exact), an inner tensor as in a block, whose gradient
     * gated_add hands on to x; else y is the output backward starts from (kept: a copy) */
    ork_tensor *top = y;
    if (s->chain) ORK_TRY(O->scale(Gr, y, 1.0f, &top));
    ORK_TRY(ork_backward_from(Gr, 1, &top, &dy));
    for (int i = 0; i < 3; i++) {
        int64_t m = ork_tensor_numel(lv[i]);
        o->g[i] = malloc((size_t)m * sizeof(float));
        if (!lv[i]->grad) return ORK_E_INVALID;
        ORK_TRY(T->to_host(Gr, lv[i]->grad, ORK_F32, o->g[i]));
    }
    return ORK_OK;
}
static void out_free(outputs *o) {
    free(o->y);
    for (int i = 0; i < 3; i++) free(o->g[i]);
}

/* The worst ratio |a − b| / bound[i] (<= 1 passes; NaN fails) and the count over. */
static double ratio(const char *what, const float *a, const float *b, const double *bound, int64_t n) {
    double w = 0;
    int64_t over = 0, at = -1;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (bound[i] > 0 ? bound[i] : 1e-30);
        if (!(r <= 1.0)) over++;
        if (!(r <= w)) { w = r; at = i; }
    }
    printf("\n    %-8s worst %.3g of the bound", what, w);
    if (over) printf(" (%lld over; at %lld: %g vs %g)", (long long)over, (long long)at, (double)a[at], (double)b[at]);
    return w;
}
static int bits_equal(const char *what, const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("\n    %-8s %lld of %lld differ (bitwise)", what, (long long)d, (long long)n);
    return d == 0;
}

static void make_inputs(int op, const shp *s, inputs *in) {
    memset(in, 0, sizeof *in);
    if (op == GATED) {
        in->in[0] = rnd(nx(s), 4.0, &in->f[0]);
        in->in[1] = rnd(np(s, 0), 1.0, &in->f[1]);
        in->in[2] = rnd(nx(s), 2.0, &in->f[2]);
    } else {
        in->in[0] = rnd(nx(s), 3.0, &in->f[0]);
        for (int64_t i = 0; i < nx(s); i++) { /* rows with an offset, as residual streams have */
            float v = in->f[0][i] + 0.5f;
            in->in[0][i] = ork_f32_to_bf16(v);
            in->f[0][i] = ork_bf16_to_f32(in->in[0][i]);
        }
        in->in[1] = rnd(np(s, 0), 0.5, &in->f[1]);
        in->in[2] = rnd(np(s, 1), 0.5, &in->f[2]);
    }
    in->dy = rnd(nx(s), 1.0, &in->fdy);
}
static void free_inputs(inputs *in) {
    for (int i = 0; i < 3; i++) { free(in->in[i]); free(in->f[i]); }
    free(in->dy);
    free(in->fdy);
}

static void check_gated(const shp *s) {
    inputs in;
    make_inputs(GATED, s, &in);
    outputs f, c;
    CU_ASSERT_FATAL(run(GATED, 1, s, &in, &f) == ORK_OK);
    CU_ASSERT_FATAL(run(GATED, 0, s, &in, &c) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(f.op, "gated_add"); /* the fused node ran */
    const int64_t n = nx(s), ng = np(s, 0);
    double *bd = calloc((size_t)n, sizeof *bd), *bg = calloc((size_t)ng, sizeof *bg);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i / s->C, j = i % s->C, gi = prow(s, 0, r) * s->C + j;
        double hg = (double)in.f[2][i] * in.f[1][gi];
        bd[i] = 2 * U * (fabs((double)c.y[i]) + fabs(hg)) + 1e-30;
        bg[gi] += fabs((double)in.fdy[i] * in.f[2][i]);
    }
    CU_ASSERT(ratio("y", f.y, c.y, bd, n) <= 1.0);
    CU_ASSERT(bits_equal("dx", f.g[0], c.g[0], n));
    CU_ASSERT(bits_equal("dh", f.g[2], c.g[2], n));
    for (int64_t j = 0; j < ng; j++) bg[j] = 2 * U * fabs((double)c.g[1][j]) + bg[j] / 16384.0 + 1e-30;
    CU_ASSERT(ratio("dgate", f.g[1], c.g[1], bg, ng) <= 1.0);
    free(bd);
    free(bg);
    out_free(&f);
    out_free(&c);
    free_inputs(&in);
}

static void check_lnmod(const shp *s) {
    inputs in;
    make_inputs(LNMOD, s, &in);
    outputs f, c;
    CU_ASSERT_FATAL(run(LNMOD, 1, s, &in, &f) == ORK_OK);
    CU_ASSERT_FATAL(run(LNMOD, 0, s, &in, &c) == ORK_OK);
    CU_ASSERT_STRING_EQUAL(f.op, "layernorm_modulate");
    const int64_t n = nx(s), C = s->C, rows = s->B * s->L, n1 = np(s, 0), n2 = np(s, 1);
    double *by = calloc((size_t)n, sizeof *by), *bx = calloc((size_t)n, sizeof *bx);
    double *bsh = calloc((size_t)n1, sizeof *bsh), *bsc = calloc((size_t)n2, sizeof *bsc);
    double *xh = malloc((size_t)C * sizeof *xh), *dn = malloc((size_t)C * sizeof *dn);
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in.f[0] + r * C, *dy = in.fdy + r * C;
        const float *sh = in.f[1] + prow(s, 0, r) * C, *sc = in.f[2] + prow(s, 1, r) * C;
        (void)sh;
        double m = 0, v = 0, m1 = 0, m2 = 0;
        for (int64_t j = 0; j < C; j++) m += x[j];
        m /= (double)C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        double rsd = 1.0 / sqrt(v / (double)C + 1e-6);
        for (int64_t j = 0; j < C; j++) {
            xh[j] = (x[j] - m) * rsd;
            dn[j] = dy[j] * (1.0 + sc[j]);
            m1 += fabs(dn[j]);
            m2 += fabs(dn[j] * xh[j]);
        }
        m1 /= (double)C;
        m2 /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            int64_t i = r * C + j;
            by[i] = 2 * U * (fabs((double)c.y[i]) + fabs(1.0 + sc[j]) * fabs(xh[j])) + 1e-6;
            bx[i] = 2 * U * (fabs((double)c.g[0][i]) + rsd * (fabs(dn[j]) + m1 + fabs(xh[j]) * m2)) + 1e-6;
            bsh[prow(s, 0, r) * C + j] += fabs((double)dy[j]);
            bsc[prow(s, 1, r) * C + j] += fabs(dy[j] * xh[j]);
        }
    }
    CU_ASSERT(ratio("y", f.y, c.y, by, n) <= 1.0);
    CU_ASSERT(ratio("dx", f.g[0], c.g[0], bx, n) <= 1.0);
    for (int64_t j = 0; j < n1; j++) bsh[j] = 2 * U * fabs((double)c.g[1][j]) + bsh[j] / 16384.0 + 1e-30;
    for (int64_t j = 0; j < n2; j++) bsc[j] = 2 * U * fabs((double)c.g[2][j]) + U * bsc[j] + 1e-30;
    CU_ASSERT(ratio("dshift", f.g[1], c.g[1], bsh, n1) <= 1.0);
    CU_ASSERT(ratio("dscale", f.g[2], c.g[2], bsc, n2) <= 1.0);
    free(by); free(bx); free(bsh); free(bsc); free(xh); free(dn);
    out_free(&f);
    out_free(&c);
    free_inputs(&in);
}

static const shp S_FLUX = {1, 4608, 3072, {1, 1}, 1};   /* gate / shift per batch (B, 1, C), scale too */
static const shp S_SHARED = {1, 4608, 3072, {0, 1}, 0}; /* gate / shift (C) shared, scale (B, 1, C) */
static const shp S_B2 = {2, 512, 3072, {2, 0}, 0};      /* per batch row; lnmod's scale shared */
static const shp S_ODD = {2, 77, 1001, {2, 1}, 1};      /* C not a multiple of 8: the scalar path */

static void t_gated_flux(void) { check_gated(&S_FLUX); }
static void t_gated_shared(void) { check_gated(&S_SHARED); }
static void t_gated_b2(void) { check_gated(&S_B2); }
static void t_gated_odd(void) { check_gated(&S_ODD); }
static void t_lnmod_flux(void) { check_lnmod(&S_FLUX); }
static void t_lnmod_shared(void) { check_lnmod(&S_SHARED); }
static void t_lnmod_b2(void) { check_lnmod(&S_B2); }
static void t_lnmod_odd(void) { check_lnmod(&S_ODD); }

static int setup(void) {
    O = ork_ops_table();
    T = ork_tensor_api_table();
    if (ork_alloc_create(ork_cuda_backend(), 0, &A) != ORK_OK) return 1;
    ork_graph_opts go = {.act_dtype = ORK_BF16};
    return ork_graph_create(ork_cuda_backend(), A, &go, &Gr) != ORK_OK;
}
static int teardown(void) {
    ork_graph_destroy(Gr);
    ork_alloc_destroy(A);
    return 0;
}

static const ork_test_case cases[] = {
    {"gated_add vs mul + add, (1, 4608, 3072), gate (1, 1, 3072)", t_gated_flux},
    {"gated_add vs mul + add, gate (3072) shared", t_gated_shared},
    {"gated_add vs mul + add, (2, 512, 3072), gate (2, 1, 3072)", t_gated_b2},
    {"gated_add vs mul + add, (2, 77, 1001): the scalar path", t_gated_odd},
    {"layernorm_modulate vs layernorm + modulate, (1, 4608, 3072)", t_lnmod_flux},
    {"layernorm_modulate, shift (3072) shared", t_lnmod_shared},
    {"layernorm_modulate, (2, 512, 3072), scale shared", t_lnmod_b2},
    {"layernorm_modulate, (2, 77, 1001): the scalar path", t_lnmod_odd},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() == 0) { printf("no CUDA device: skipped\n"); return 77; }
    return ork_test_run("cuda_fused", setup, teardown, cases);
}
