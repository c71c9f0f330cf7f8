/* tests/cuda/test_cuda_qkv.c — the attention-side ops on CUDA (issue #31):
 * qkv_rope's fused kernels (cuda/cuda_qkv.cu) against the composition it
 * replaces (split, reshape, permute, rmsnorm, concat, rope: the same CUDA
 * kernels the FLUX plugin ran before, ork_qkv_force_composite(1)), forward and
 * every gradient (dqkv of each stream, the q/k norm weights' F32 gradients),
 * on FLUX.1's shape (24 heads of 128, txt 512 + img 4096 tokens, two streams,
 * BF16 store weights as in LoRA training) and odd ones (head dims 6, 66 and
 * 256, one and three streams, batch 2, F32 trainable norm weights); and
 * attn_merge against permute + reshape + split / concat, bit for bit.
 *
 * Tolerances and why. v and dqkv's v part are moved only: asserted bit for
 * bit. q, k and the q/k columns of dqkv: the kernels repeat the composition's
 * arithmetic step for step (its F32 sums in the same order, the same fma
 * pairs: cuda_qkv.cu says how), so they are expected bit for bit too, and the
 * test prints every difference it sees; it asserts a bound that also holds
 * if a compiler contracted the composition's kernels otherwise (an rstd one
 * F32 ulp off flips a BF16 rounding of the normed value, which the rotation
 * and the backward's cancellation carry on): |fused − composed| <=
 * 2^-6·max(|fused|, |composed|) + 2^-6·max|composed|. The norm weights'
 * gradients are F32 sums over B·L·H rows in another partition than the
 * composition's: <= 1e-3·max|composed| + 1e-3·|composed|. A wrong index,
 * pair, stream offset, weight or sign gives errors of O(max). Exits 77
 * without a CUDA device. */
#include "ork_test.h"

#include "cuda/cuda_ctx.h"
#include "numerics/half.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/ops_qkv.h"
#include "tensor/tape.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ork_alloc *A;
static ork_graph *Gr;
static const ork_ops *O;
static const ork_tensor_api *T;
static uint64_t rng = 0x243F6A8885A308D3ull;

static float urand(void) { /* [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static uint16_t *rbf16(int64_t n, float sc, float shift) {
    uint16_t *h = malloc((size_t)n * 2);
    CU_ASSERT_FATAL(h != NULL);
    for (int64_t i = 0; i < n; i++) h[i] = ork_f32_to_bf16(shift + sc * urand());
    return h;
}

/* ---- qkv_rope ---- */
typedef struct {
    const char *name;
    int64_t B, H, D;
    int n;
    int64_t len[3];
    int w_param; /* 1: F32 norm weights that train (dw checked); 0: BF16 store-like weights without grad */
} qcase;

typedef struct { /* host inputs of one case, shared by both runs */
    uint16_t *qkv[3], *wq[3], *wk[3], *gq, *gk, *gv;
    float *wqf[3], *wkf[3], *pe;
    int64_t L;
} qin;

typedef struct { /* host results of one run, F32 */
    float *q, *k, *v, *dqkv[3], *dqw[3], *dkw[3];
} qout;

static void make_qin(const qcase *c, qin *in) {
    memset(in, 0, sizeof *in);
    for (int i = 0; i < c->n; i++) in->L += c->len[i];
    const int64_t D = c->D, HD = c->H * c->D, BHLD = c->B * c->H * in->L * c->D;
    for (int i = 0; i < c->n; i++) {
        in->qkv[i] = rbf16(c->B * c->len[i] * 3 * HD, 2.0f, 0.0f);
        in->wq[i] = rbf16(D, 0.4f, 1.0f);
        in->wk[i] = rbf16(D, 0.4f, 1.0f);
        in->wqf[i] = malloc((size_t)D * sizeof(float));
        in->wkf[i] = malloc((size_t)D * sizeof(float));
        for (int64_t j = 0; j < D; j++) {
            in->wqf[i][j] = ork_bf16_to_f32(in->wq[i][j]);
            in->wkf[i][j] = ork_bf16_to_f32(in->wk[i][j]);
        }
    }
    in->gq = rbf16(BHLD, 1.0f, 0.0f);
    in->gk = rbf16(BHLD, 1.0f, 0.0f);
    in->gv = rbf16(BHLD, 1.0f, 0.0f);
    in->pe = malloc((size_t)(in->L * D) * sizeof(float));
    for (int64_t l = 0; l < in->L; l++) /* FLUX-like angles: position times a falling frequency */
        for (int64_t j = 0; j < D / 2; j++) {
            double a = (double)l * pow(10000.0, -2.0 * (double)j / (double)D) + 0.3 * urand();
            in->pe[(l * D / 2 + j) * 2] = (float)cos(a);
            in->pe[(l * D / 2 + j) * 2 + 1] = (float)sin(a);
        }
}
static void free_qin(const qcase *c, qin *in) {
    for (int i = 0; i < c->n; i++) { free(in->qkv[i]); free(in->wq[i]); free(in->wk[i]); free(in->wqf[i]); free(in->wkf[i]); }
    free(in->gq); free(in->gk); free(in->gv); free(in->pe);
}
static void free_qout(qout *o) {
    free(o->q); free(o->k); free(o->v);
    for (int i = 0; i < 3; i++) { free(o->dqkv[i]); free(o->dqw[i]); free(o->dkw[i]); }
}

static float *host_of(ork_tensor *t) {
    if (!t) return NULL;
    float *h = malloc((size_t)ork_tensor_numel(t) * sizeof(float));
    CU_ASSERT_FATAL(h != NULL);
    CU_ASSERT_FATAL(T->to_host(Gr, t, ORK_F32, h) == ORK_OK);
    return h;
}

static void run_qkv(const qcase *c, const qin *in, int composite, qout *out) {
    memset(out, 0, sizeof *out);
    ork_qkv_force_composite(composite);
    CU_ASSERT_FATAL(ork_graph_reset(Gr) == ORK_OK);
    ork_graph_set_grad(Gr, 1);
    const int64_t HD = c->H * c->D;
    ork_tensor *qkv[3], *qw[3], *kw[3], *pe, *t;
    for (int i = 0; i < c->n; i++) {
        int64_t sh[3] = {c->B, c->len[i], 3 * HD}, shw[1] = {c->D};
        CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 3, sh, in->qkv[i], &t) == ORK_OK);
        CU_ASSERT_FATAL(ork_graph_leaf(Gr, t, 1, &qkv[i]) == ORK_OK);
        if (c->w_param) {
            CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, shw, in->wqf[i], &t) == ORK_OK);
            CU_ASSERT_FATAL(ork_graph_leaf(Gr, t, 1, &qw[i]) == ORK_OK);
            CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 1, shw, in->wkf[i], &t) == ORK_OK);
            CU_ASSERT_FATAL(ork_graph_leaf(Gr, t, 1, &kw[i]) == ORK_OK);
        } else {
            CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 1, shw, in->wq[i], &qw[i]) == ORK_OK);
            CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 1, shw, in->wk[i], &kw[i]) == ORK_OK);
        }
    }
    int64_t shp[3] = {in->L, c->D / 2, 2}, sho[4] = {c->B, c->H, in->L, c->D};
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_F32, 3, shp, in->pe, &pe) == ORK_OK);
    ork_tensor *o[3], *g[3];
    ork_status s = O->qkv_rope(Gr, c->n, qkv, qw, kw, pe, 1e-6f, (int)c->H, &o[0], &o[1], &o[2]);
    CU_ASSERT_FATAL(s == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 4, sho, in->gq, &g[0]) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 4, sho, in->gk, &g[1]) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 4, sho, in->gv, &g[2]) == ORK_OK);
    out->q = host_of(o[0]);
    out->k = host_of(o[1]);
    out->v = host_of(o[2]);
    CU_ASSERT_FATAL(ork_backward_from(Gr, 3, o, g) == ORK_OK);
    for (int i = 0; i < c->n; i++) {
        CU_ASSERT_FATAL(qkv[i]->grad != NULL);
        out->dqkv[i] = host_of(qkv[i]->grad);
        if (c->w_param) {
            CU_ASSERT_FATAL(qw[i]->grad != NULL && kw[i]->grad != NULL);
            out->dqw[i] = host_of(qw[i]->grad);
            out->dkw[i] = host_of(kw[i]->grad);
        }
    }
    ork_qkv_force_composite(0);
}

/* Elements of f (fused) vs c (composed) outside the tolerance (exact: bitwise). */
static int64_t compare(const char *cs, const char *what, const float *f, const float *c, int64_t n, int exact,
                       double rel, double floor_rel, int expect_same) {
    double cmax = 0;
    for (int64_t i = 0; i < n; i++) cmax = fmax(cmax, fabs(c[i]));
    int64_t bad = 0, diff = 0, worst_i = -1, nonfinite = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(f[i])) { nonfinite++; bad++; if (worst_i < 0) worst_i = i; continue; }
        double d = fabs((double)f[i] - (double)c[i]);
        diff += d != 0;
        double tol = exact ? 0 : rel * fmax(fabs(f[i]), fabs(c[i])) + floor_rel * cmax;
        if (d > tol) {
            bad++;
            if (d - tol > worst) { worst = d - tol; worst_i = i; }
        }
    }
    if (bad)
        printf("\n  %s: %s: %lld of %lld outside the tolerance (%s), %lld not finite; worst at element %lld: fused "
               "%.6g vs composed %.6g (max |composed| %.3g)\n",
               cs, what, (long long)bad, (long long)n, exact ? "bitwise" : "bf16 ulps", (long long)nonfinite,
               (long long)worst_i, worst_i >= 0 ? f[worst_i] : 0.0, worst_i >= 0 ? c[worst_i] : 0.0, cmax);
    else if (diff && expect_same)
        printf("\n    note: %s: %s: %lld of %lld differ from the composition, within the tolerance (expected 0: "
               "the kernel repeats its arithmetic)", cs, what, (long long)diff, (long long)n);
    return bad;
}

static void check_case(const qcase *c) {
    qin in;
    qout f, k;
    make_qin(c, &in);
    run_qkv(c, &in, 0, &f);
    run_qkv(c, &in, 1, &k);
    const int64_t n = c->B * c->H * in.L * c->D, HD = c->H * c->D;
    const double R = 1.0 / 64, F = 1.0 / 64;
    CU_ASSERT_EQUAL(compare(c->name, "q", f.q, k.q, n, 0, R, F, 1), 0);
    CU_ASSERT_EQUAL(compare(c->name, "k", f.k, k.k, n, 0, R, F, 1), 0);
    CU_ASSERT_EQUAL(compare(c->name, "v", f.v, k.v, n, 1, 0, 0, 1), 0);
    for (int i = 0; i < c->n; i++) {
        char nm[64];
        int64_t rows = c->B * c->len[i];
        /* the v columns exactly, the q and k columns within the tolerance */
        float *fv = malloc((size_t)(rows * HD) * sizeof(float)), *kv = malloc((size_t)(rows * HD) * sizeof(float));
        float *fqk = malloc((size_t)(rows * 2 * HD) * sizeof(float)), *kqk = malloc((size_t)(rows * 2 * HD) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) {
            memcpy(fqk + r * 2 * HD, f.dqkv[i] + r * 3 * HD, (size_t)(2 * HD) * sizeof(float));
            memcpy(kqk + r * 2 * HD, k.dqkv[i] + r * 3 * HD, (size_t)(2 * HD) * sizeof(float));
            memcpy(fv + r * HD, f.dqkv[i] + r * 3 * HD + 2 * HD, (size_t)HD * sizeof(float));
            memcpy(kv + r * HD, k.dqkv[i] + r * 3 * HD + 2 * HD, (size_t)HD * sizeof(float));
        }
        snprintf(nm, sizeof nm, "dqkv[%d] q,k columns", i);
        CU_ASSERT_EQUAL(compare(c->name, nm, fqk, kqk, rows * 2 * HD, 0, R, F, 1), 0);
        snprintf(nm, sizeof nm, "dqkv[%d] v columns", i);
        CU_ASSERT_EQUAL(compare(c->name, nm, fv, kv, rows * HD, 1, 0, 0, 1), 0);
        free(fv); free(kv); free(fqk); free(kqk);
        if (c->w_param) {
            snprintf(nm, sizeof nm, "d query_norm[%d]", i);
            CU_ASSERT_EQUAL(compare(c->name, nm, f.dqw[i], k.dqw[i], c->D, 0, 1e-3, 1e-3, 0), 0);
            snprintf(nm, sizeof nm, "d key_norm[%d]", i);
            CU_ASSERT_EQUAL(compare(c->name, nm, f.dkw[i], k.dkw[i], c->D, 0, 1e-3, 1e-3, 0), 0);
        }
    }
    free_qout(&f);
    free_qout(&k);
    free_qin(c, &in);
}

static void t_qkv_flux(void) {
    const qcase c = {"FLUX.1 double block (24x128, txt 512 + img 4096)", 1, 24, 128, 2, {512, 4096, 0}, 0};
    check_case(&c);
    const qcase s = {"FLUX.1 single block (24x128, 4608 tokens, trainable norms)", 1, 24, 128, 1, {4608, 0, 0}, 1};
    check_case(&s);
}
static void t_qkv_odd(void) {
    const qcase cs[] = {
        {"odd: B 2, 3 heads of 6, txt 5 + img 7", 2, 3, 6, 2, {5, 7, 0}, 1},
        {"odd: B 1, 5 heads of 66, three streams 3 + 4 + 2", 1, 5, 66, 3, {3, 4, 2}, 1},
        {"odd: B 2, 2 heads of 256, one stream of 33", 2, 2, 256, 1, {33, 0, 0}, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) check_case(&cs[i]);
}

/* ---- attn_merge: bitwise against permute + reshape + split / concat ---- */
static void t_merge(void) {
    const int64_t B = 1, H = 24, L = 4608, D = 128, T0 = 512, C2 = 12288;
    uint16_t *ah = rbf16(B * H * L * D, 1.0f, 0.0f), *eh = rbf16(B * L * C2, 1.0f, 0.0f);
    uint16_t *g0 = rbf16(B * L * (H * D + C2), 1.0f, 0.0f);
    static const int perm[4] = {0, 2, 1, 3};
    for (int single = 0; single < 2; single++) {
        float *res[2][4] = {{0}};
        for (int composed = 0; composed < 2; composed++) {
            CU_ASSERT_FATAL(ork_graph_reset(Gr) == ORK_OK);
            ork_graph_set_grad(Gr, 1);
            ork_tensor *t, *a, *e = NULL, *ys[2], *gs[2];
            int64_t sha[4] = {B, H, L, D}, she[3] = {B, L, C2};
            CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 4, sha, ah, &t) == ORK_OK);
            CU_ASSERT_FATAL(ork_graph_leaf(Gr, t, 1, &a) == ORK_OK);
            if (single) {
                CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 3, she, eh, &t) == ORK_OK);
                CU_ASSERT_FATAL(ork_graph_leaf(Gr, t, 1, &e) == ORK_OK);
            }
            int n = single ? 1 : 2;
            int64_t sizes[2] = {T0, L - T0};
            if (!composed) {
                CU_ASSERT_FATAL(O->attn_merge(Gr, a, n, single ? NULL : sizes, e, ys) == ORK_OK);
            } else {
                ork_tensor *x;
                int64_t shx[3] = {B, L, H * D};
                CU_ASSERT_FATAL(O->permute(Gr, a, perm, &x) == ORK_OK);
                CU_ASSERT_FATAL(O->reshape(Gr, x, 3, shx, &x) == ORK_OK);
                if (single) {
                    ork_tensor *cat[2] = {x, e};
                    CU_ASSERT_FATAL(O->concat(Gr, 2, cat, -1, &ys[0]) == ORK_OK);
                } else {
                    CU_ASSERT_FATAL(O->split(Gr, x, 1, 2, sizes, ys) == ORK_OK);
                }
            }
            for (int i = 0; i < n; i++) {
                int64_t sh[3] = {B, ys[i]->shape[1], ys[i]->shape[2]};
                CU_ASSERT_FATAL(T->from_host(Gr, ORK_BF16, 3, sh, g0, &gs[i]) == ORK_OK);
                res[composed][i] = host_of(ys[i]);
            }
            CU_ASSERT_FATAL(ork_backward_from(Gr, n, ys, gs) == ORK_OK);
            CU_ASSERT_FATAL(a->grad != NULL);
            res[composed][2] = host_of(a->grad);
            if (e) { CU_ASSERT_FATAL(e->grad != NULL); res[composed][3] = host_of(e->grad); }
        }
        const char *cs = single ? "attn_merge [attn | mlp] (4608 tokens, 3072 + 12288)" : "attn_merge txt 512 / img 4096";
        const char *nm[4] = {"output 0", "output 1", "d attention output", "d extra"};
        int64_t nn[4] = {single ? B * L * (H * D + C2) : B * T0 * H * D, single ? 0 : B * (L - T0) * H * D, B * H * L * D,
                         single ? B * L * C2 : 0};
        for (int j = 0; j < 4; j++) {
            if (nn[j]) CU_ASSERT_EQUAL(compare(cs, nm[j], res[0][j], res[1][j], nn[j], 1, 0, 0, 1), 0);
            free(res[0][j]);
            free(res[1][j]);
        }
    }
    free(ah); free(eh); free(g0);
}

static int setup(void) {
    O = ork_ops_table();
    T = ork_tensor_api_table();
    const ork_backend *be = ork_cuda_backend();
    ork_graph_opts go = {.act_dtype = ORK_BF16};
    if (ork_alloc_create(be, 0, &A) != ORK_OK) return 1;
    if (ork_graph_create(be, A, &go, &Gr) != ORK_OK) return 1;
    return 0;
}
static int teardown(void) {
    ork_graph_destroy(Gr);
    ork_alloc_destroy(A);
    return 0;
}

static const ork_test_case cases[] = {
    {"qkv_rope fused == composed on FLUX.1 shapes (forward, dqkv, norm grads)", t_qkv_flux},
    {"qkv_rope fused == composed on odd shapes (D 6/66/256, 1-3 streams)", t_qkv_odd},
    {"attn_merge == permute/split/concat on CUDA, bitwise", t_merge},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() == 0) { printf("no CUDA device: skipped\n"); return 77; }
    return ork_test_run("cuda_qkv", setup, teardown, cases);
}
