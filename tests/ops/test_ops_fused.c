/* tests/ops/test_ops_fused.c — the fused ops gated_add and layernorm_modulate
 * (ABI 1.4, tensor/ops_fused.c) on the CPU:
 *  - on the CPU backend (no fused kernels) each op IS the composition it
 *    replaces (mul + add, layernorm + modulate): output and every input
 *    gradient equal bit for bit, for the broadcasts FLUX uses and others;
 *  - the fused tape node itself (the path CUDA takes) on a CPU backend given
 *    plain-C reference kernels for the four fused entries: output and
 *    gradients against the composition within F32 rounding, the node is the
 *    fused one (its op name), and dx is dy itself (gated_add passes it on);
 *  - where the fused entries decline (ORK_E_UNSUPPORTED, as CUDA's past their
 *    limits) the op composes: bit for bit the composition again;
 *  - backward vs central finite differences (grad_check.c) on both;
 *  - malformed arguments each fail with ORK_E_INVALID and one line.
 * The CUDA kernels against the CUDA composition: tests/cuda/test_cuda_fused.c. */
#include "grad_check.h"

#include "tensor/backend.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const ork_ops *O;
static const ork_tensor_api *T;
static uint64_t rs = 0x6A09E667F3BCC908ull;

static double urand(void) { /* [-1, 1) */
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (double)(rs >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
static float *rnd(int64_t n, double sc) {
    float *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = (float)(sc * urand());
    return h;
}
static int64_t numel(int nd, const int64_t *sh) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= sh[i];
    return n;
}

/* ---- reference kernels for the fused entries (F32), to run the fused node on the CPU ---- */

static ork_status ref_gated_add(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *x,
                                const void *gate, const void *h, void *y, ork_dtype dt) {
    (void)k;
    if (dt != ORK_F32) return ORK_E_UNSUPPORTED;
    const float *xp = x, *gp = gate, *hp = h;
    float *yp = y;
    for (int64_t r = 0; r < B * L; r++)
        for (int64_t c = 0; c < C; c++)
            yp[r * C + c] = xp[r * C + c] + gp[(Bg == 1 ? 0 : r / L) * C + c] * hp[r * C + c];
    return ORK_OK;
}
static ork_status ref_gated_add_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *gate,
                                    const void *h, const void *dy, void *dh, void *dgate, ork_dtype gdt, ork_dtype dt) {
    (void)k;
    if (dt != ORK_F32 || (dgate && gdt != ORK_F32)) return ORK_E_UNSUPPORTED;
    const float *gp = gate, *hp = h, *d = dy;
    if (dh)
        for (int64_t r = 0; r < B * L; r++)
            for (int64_t c = 0; c < C; c++) ((float *)dh)[r * C + c] = d[r * C + c] * gp[(Bg == 1 ? 0 : r / L) * C + c];
    if (dgate) {
        double *acc = calloc((size_t)(Bg * C), sizeof *acc);
        for (int64_t r = 0; r < B * L; r++)
            for (int64_t c = 0; c < C; c++) acc[(Bg == 1 ? 0 : r / L) * C + c] += (double)d[r * C + c] * hp[r * C + c];
        for (int64_t i = 0; i < Bg * C; i++) ((float *)dgate)[i] = (float)acc[i];
        free(acc);
    }
    return ORK_OK;
}
static ork_status ref_ln_mod(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc, float eps,
                             const void *x, const void *shift, const void *scale, void *y, float *mean, float *rstd,
                             ork_dtype dt) {
    (void)k;
    if (dt != ORK_F32) return ORK_E_UNSUPPORTED;
    const float *xp = x, *sh = shift, *sc = scale;
    for (int64_t r = 0; r < B * L; r++) {
        double m = 0, v = 0;
        for (int64_t c = 0; c < C; c++) m += xp[r * C + c];
        m /= (double)C;
        for (int64_t c = 0; c < C; c++) v += (xp[r * C + c] - m) * (xp[r * C + c] - m);
        double rsd = 1.0 / sqrt(v / (double)C + eps);
        const float *s1 = sh + (Bsh == 1 ? 0 : r / L) * C, *s2 = sc + (Bsc == 1 ? 0 : r / L) * C;
        for (int64_t c = 0; c < C; c++) ((float *)y)[r * C + c] = (float)((xp[r * C + c] - m) * rsd * (1.0 + s2[c]) + s1[c]);
        mean[r] = (float)m;
        rstd[r] = (float)rsd;
    }
    return ORK_OK;
}
static ork_status ref_ln_mod_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc,
                                 const void *x, const void *scale, const float *mean, const float *rstd, const void *dy,
                                 void *dx, void *dshift, ork_dtype shdt, void *dscale, ork_dtype scdt, ork_dtype dt) {
    (void)k;
    if (dt != ORK_F32 || (dshift && shdt != ORK_F32) || (dscale && scdt != ORK_F32)) return ORK_E_UNSUPPORTED;
    const float *xp = x, *sc = scale, *d = dy;
    double *ash = calloc((size_t)(Bsh * C), sizeof *ash), *asc = calloc((size_t)(Bsc * C), sizeof *asc);
    for (int64_t r = 0; r < B * L; r++) {
        const float *s2 = sc + (Bsc == 1 ? 0 : r / L) * C;
        double s1 = 0, s2m = 0;
        for (int64_t c = 0; c < C; c++) {
            double xh = (xp[r * C + c] - mean[r]) * (double)rstd[r], dn = d[r * C + c] * (1.0 + s2[c]);
            s1 += dn;
            s2m += dn * xh;
            ash[(Bsh == 1 ? 0 : r / L) * C + c] += d[r * C + c];
            asc[(Bsc == 1 ? 0 : r / L) * C + c] += d[r * C + c] * xh;
        }
        s1 /= (double)C;
        s2m /= (double)C;
        if (dx)
            for (int64_t c = 0; c < C; c++) {
                double xh = (xp[r * C + c] - mean[r]) * (double)rstd[r], dn = d[r * C + c] * (1.0 + s2[c]);
                ((float *)dx)[r * C + c] = (float)(rstd[r] * (dn - s1 - xh * s2m));
            }
    }
    for (int64_t i = 0; dshift && i < Bsh * C; i++) ((float *)dshift)[i] = (float)ash[i];
    for (int64_t i = 0; dscale && i < Bsc * C; i++) ((float *)dscale)[i] = (float)asc[i];
    free(ash);
    free(asc);
    return ORK_OK;
}

/* entries that decline, as CUDA's do past their limits */
static ork_status no_gated_add(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *x,
                               const void *gate, const void *h, void *y, ork_dtype dt) {
    (void)k; (void)B; (void)L; (void)C; (void)Bg; (void)x; (void)gate; (void)h; (void)y; (void)dt;
    return ORK_E_UNSUPPORTED;
}
static ork_status no_ln_mod(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc, float eps,
                            const void *x, const void *shift, const void *scale, void *y, float *mean, float *rstd,
                            ork_dtype dt) {
    (void)k; (void)B; (void)L; (void)C; (void)Bsh; (void)Bsc; (void)eps; (void)x; (void)shift; (void)scale; (void)y;
    (void)mean; (void)rstd; (void)dt;
    return ORK_E_UNSUPPORTED;
}

static ork_backend FB, NB; /* the CPU backend with the reference fused entries; with declining ones */
static ork_graph *Gc, *Gf, *Gn; /* composition graph (plain CPU), fused-node graph (FB), declining (NB) */

static int setup(void) {
    O = ork_ops_table();
    T = ork_tensor_api_table();
    if (gc_setup()) return 1;
    FB = *ork_cpu_backend();
    FB.gated_add = ref_gated_add;
    FB.gated_add_bwd = ref_gated_add_bwd;
    FB.layernorm_modulate = ref_ln_mod;
    FB.layernorm_modulate_bwd = ref_ln_mod_bwd;
    NB = FB;
    NB.gated_add = no_gated_add;
    NB.layernorm_modulate = no_ln_mod;
    ork_graph_opts o = {.act_dtype = ORK_F32, .nthreads = 2};
    if (ork_graph_create(ork_cpu_backend(), G.alloc, &o, &Gc) != ORK_OK) return 1;
    if (ork_graph_create(&NB, G.alloc, &o, &Gn) != ORK_OK) return 1;
    return ork_graph_create(&FB, G.alloc, &o, &Gf) != ORK_OK;
}
static int teardown(void) {
    ork_graph_destroy(Gc);
    ork_graph_destroy(Gf);
    ork_graph_destroy(Gn);
    return gc_teardown();
}

/* ---- one run: the op (fused 1) or the composition (0) with leaves from host values ---- */

enum { OP_GATED, OP_LNMOD };

typedef struct {
    int nd[3];
    int64_t sh[3][4];  /* x, then the per-row operands (gate | shift, scale) */
    const float *in[3];
    const float *dy;
} run_in;
typedef struct {
    float *y, *grad[3];
    const char *op; /* the node that made y */
    int dx_is_dy;   /* x's gradient is the very tensor seeded as y's */
} run_out;

static void run_out_free(run_out *o) {
    free(o->y);
    for (int i = 0; i < 3; i++) free(o->grad[i]);
}

static int Chain; /* see run */

static ork_status run(ork_graph *g, int op, int fused, const run_in *ri, run_out *ro) {
    memset(ro, 0, sizeof *ro);
    ork_graph_reset(g);
    ork_graph_set_grad(g, 1);
    ork_tensor *lv[4], *y;
    const int nin = 3; /* gated: x, gate, h; lnmod: x, shift, scale */
    const int shape_of[3] = {0, 1, op == OP_GATED ? 0 : 2}; /* h has x's shape */
    for (int i = 0; i < nin; i++) {
        ork_tensor *t;
        int s = shape_of[i];
        ORK_TRY(T->from_host(g, ORK_F32, ri->nd[s], ri->sh[s], ri->in[i], &t));
        ORK_TRY(ork_graph_leaf(g, t, 1, &lv[i]));
    }
    if (op == OP_GATED) {
        if (fused) ORK_TRY(O->gated_add(g, lv[0], lv[1], lv[2], &y));
        else {
            ork_tensor *t;
            ORK_TRY(O->mul(g, lv[2], lv[1], &t));
            ORK_TRY(O->add(g, lv[0], t, &y));
        }
    } else {
        if (fused) ORK_TRY(O->layernorm_modulate(g, lv[0], lv[1], lv[2], 1e-6f, &y));
        else {
            ork_tensor *t;
            ORK_TRY(O->layernorm(g, lv[0], 1e-6f, &t));
            ORK_TRY(O->modulate(g, t, lv[1], lv[2], &y));
        }
    }
    ro->op = y->node ? y->node->op : "";
    int64_t n = numel(ri->nd[0], ri->sh[0]);
    ro->y = malloc((size_t)n * sizeof(float));
    ORK_TRY(T->to_host(g, y, ORK_F32, ro->y));
    /* the seed: a graph tensor handed to backward_from as y's gradient */
    ork_tensor *dy;
    ORK_TRY(T->from_host(g, ORK_F32, ri->nd[0], ri->sh[0], ri->dy, &dy));
    /* chained: y feeds a scale by 1 (exact), so y is an inner tensor as in a block and its
     * gradient may be handed on; else y is the output backward starts from (kept) */
    ork_tensor *top = y;
    if (Chain) ORK_TRY(O->scale(g, y, 1.0f, &top));
    ORK_TRY(ork_backward_from(g, 1, &top, &dy));
    for (int i = 0; i < nin; i++) {
        int64_t m = numel(ri->nd[shape_of[i]], ri->sh[shape_of[i]]);
        ro->grad[i] = malloc((size_t)m * sizeof(float));
        if (!lv[i]->grad) return ORK_E_INVALID;
        ORK_TRY(T->to_host(g, lv[i]->grad, ORK_F32, ro->grad[i]));
    }
    ro->dx_is_dy = !memcmp(ro->grad[0], ri->dy, (size_t)n * sizeof(float));
    return ORK_OK;
}

static int same_bits(const float *a, const float *b, int64_t n) { return !memcmp(a, b, (size_t)n * sizeof *a); }
/* max |a − b| / (abs + rel·|b|) over n: <= 1 passes */
static double worst(const float *a, const float *b, int64_t n, double abs_tol, double rel_tol) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (abs_tol + rel_tol * fabs((double)b[i]));
        if (!(e <= w)) w = e; /* NaN sticks */
    }
    return w;
}

typedef struct {
    const char *name;
    int op;
    run_in ri;
} fcase;

/* Cases: x (2, 5, 12) with FLUX's (B, 1, C), a shared (C), a per-token same-shape
 * operand (composes everywhere), and an odd C. */
static void make_cases(fcase *cs, int *n) {
    static const struct { const char *name; int op; int nd[3]; int64_t sh[3][4]; } def[] = {
        {"gated (2,5,12) gate (2,1,12)", OP_GATED, {3, 3, 3}, {{2, 5, 12}, {2, 1, 12}, {2, 1, 12}}},
        {"gated (2,5,12) gate (12)", OP_GATED, {3, 1, 1}, {{2, 5, 12}, {12}, {12}}},
        {"gated (2,5,12) gate (2,5,12) (composes)", OP_GATED, {3, 3, 3}, {{2, 5, 12}, {2, 5, 12}, {2, 5, 12}}},
        {"gated (3,4,7) gate (1,1,7)", OP_GATED, {3, 3, 3}, {{3, 4, 7}, {1, 1, 7}, {1, 1, 7}}},
        {"lnmod (2,5,12) shift (2,1,12) scale (1,1,12)", OP_LNMOD, {3, 3, 3}, {{2, 5, 12}, {2, 1, 12}, {1, 1, 12}}},
        {"lnmod (2,5,12) shift (12) scale (2,1,12)", OP_LNMOD, {3, 1, 3}, {{2, 5, 12}, {12}, {2, 1, 12}}},
        {"lnmod (3,4,7) shift, scale (3,4,7) (composes)", OP_LNMOD, {3, 3, 3}, {{3, 4, 7}, {3, 4, 7}, {3, 4, 7}}},
    };
    *n = (int)(sizeof def / sizeof def[0]);
    for (int i = 0; i < *n; i++) {
        fcase *c = &cs[i];
        memset(c, 0, sizeof *c);
        c->name = def[i].name;
        c->op = def[i].op;
        memcpy(c->ri.nd, def[i].nd, sizeof c->ri.nd);
        memcpy(c->ri.sh, def[i].sh, sizeof c->ri.sh);
        int64_t nx = numel(c->ri.nd[0], c->ri.sh[0]);
        if (c->op == OP_GATED) {
            c->ri.in[0] = rnd(nx, 2.0);
            c->ri.in[1] = rnd(numel(c->ri.nd[1], c->ri.sh[1]), 1.0);
            c->ri.in[2] = rnd(nx, 1.5);
        } else {
            c->ri.in[0] = rnd(nx, 3.0);
            c->ri.in[1] = rnd(numel(c->ri.nd[1], c->ri.sh[1]), 0.5);
            c->ri.in[2] = rnd(numel(c->ri.nd[2], c->ri.sh[2]), 0.5);
        }
        c->ri.dy = rnd(nx, 1.0);
    }
}
static void free_cases(fcase *cs, int n) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 3; j++) free((void *)cs[i].ri.in[j]);
        free((void *)cs[i].ri.dy);
    }
}
static int64_t in_numel(const fcase *c, int i) {
    int s = i == 0 ? 0 : i == 1 ? 1 : (c->op == OP_GATED ? 0 : 2);
    return numel(c->ri.nd[s], c->ri.sh[s]);
}

static void t_table(void) {
    CU_ASSERT_FATAL(ork_ops_has_fused(O));
    CU_ASSERT(O->abi.minor >= 4);
    CU_ASSERT(O->abi.struct_size >= offsetof(ork_ops, layernorm_modulate) + sizeof(void *));
    CU_ASSERT(ork_cpu_backend()->gated_add == NULL); /* the CPU composes (same numerics as before) */
}

/* CPU backend, and a backend whose fused entries decline: the op is the composition, bit for bit */
static void is_composition(ork_graph *g) {
    fcase cs[8];
    int n;
    make_cases(cs, &n);
    for (int i = 0; i < n; i++) {
        run_out a, b;
        CU_ASSERT_FATAL(run(g, cs[i].op, 1, &cs[i].ri, &a) == ORK_OK);
        CU_ASSERT_FATAL(run(Gc, cs[i].op, 0, &cs[i].ri, &b) == ORK_OK);
        int ok = same_bits(a.y, b.y, in_numel(&cs[i], 0));
        for (int j = 0; j < 3; j++) ok &= same_bits(a.grad[j], b.grad[j], in_numel(&cs[i], j));
        if (!ok) printf("\n  %s: the CPU op differs from its composition\n", cs[i].name);
        CU_ASSERT(ok);
        CU_ASSERT_STRING_EQUAL(a.op, cs[i].op == OP_GATED ? "add" : "modulate"); /* the composition's last node */
        run_out_free(&a);
        run_out_free(&b);
    }
    free_cases(cs, n);
}
static void t_cpu_is_composition(void) {
    is_composition(Gc);
    Chain = 1;
    is_composition(Gc);
    Chain = 0;
}
static void t_declined_is_composition(void) { is_composition(Gn); }

/* The fused node (reference kernels) against the composition: F32 rounding apart */
static void t_fused_node(void) {
    fcase cs[8];
    int n;
    make_cases(cs, &n);
    for (int k = 0; k < 2 * n; k++) {
        const int i = k % n;
        Chain = k >= n; /* the cases twice: y the output, then y an inner tensor */
        const int composes = strstr(cs[i].name, "(composes)") != NULL;
        run_out a, b;
        CU_ASSERT_FATAL(run(Gf, cs[i].op, 1, &cs[i].ri, &a) == ORK_OK);
        CU_ASSERT_FATAL(run(Gc, cs[i].op, 0, &cs[i].ri, &b) == ORK_OK);
        const char *want = composes ? (cs[i].op == OP_GATED ? "add" : "modulate")
                                    : (cs[i].op == OP_GATED ? "gated_add" : "layernorm_modulate");
        CU_ASSERT_STRING_EQUAL(a.op, want);
        /* F32 math both ways; the fused LN keeps x̂ unrounded and sums in double:
         * a few F32 ulps of the largest value (inputs O(1), C <= 12) */
        double w = worst(a.y, b.y, in_numel(&cs[i], 0), 1e-5, 1e-5);
        for (int j = 0; j < 3; j++) {
            double wj = worst(a.grad[j], b.grad[j], in_numel(&cs[i], j), 1e-5, 1e-5);
            if (wj > w) w = wj;
        }
        if (!(w <= 1.0)) printf("\n  %s: fused node vs composition %.3g of the tolerance\n", cs[i].name, w);
        CU_ASSERT(w <= 1.0);
        if (cs[i].op == OP_GATED) CU_ASSERT(a.dx_is_dy); /* dx = dy exactly */
        run_out_free(&a);
        run_out_free(&b);
    }
    Chain = 0;
    free_cases(cs, n);
}

/* ---- finite differences (grad_check.c), on the plain CPU and through the fused node ---- */

static ork_status fd_gated(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **outs, int *nout) {
    (void)ctx;
    *nout = 1;
    return G.ops->gated_add(g, in[0], in[1], in[2], &outs[0]);
}
static ork_status fd_lnmod(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **outs, int *nout) {
    (void)ctx;
    *nout = 1;
    return G.ops->layernorm_modulate(g, in[0], in[1], in[2], 1e-5f, &outs[0]);
}

static void fd_both(int fused_graph) {
    ork_graph *keep = G.g;
    if (fused_graph) G.g = Gf;
    const int64_t sx[3] = {2, 3, 9}, sg[3] = {2, 1, 9}, ss[1] = {9};
    ork_tensor *a[3] = {gc_param(3, sx, 1.0), gc_param(3, sg, 0.7), gc_param(3, sx, 1.0)};
    CU_ASSERT(gc_check(fused_graph ? "gated_add (fused node)" : "gated_add", fd_gated, NULL, 3, a, NULL, 1e-3));
    gc_free(3, a);
    ork_tensor *b[3] = {gc_param(3, sx, 1.5), gc_param(3, sg, 0.4), gc_param(1, ss, 0.4)};
    CU_ASSERT(gc_check(fused_graph ? "layernorm_modulate (fused node)" : "layernorm_modulate", fd_lnmod, NULL, 3, b,
                       NULL, 1e-3));
    gc_free(3, b);
    G.g = keep;
}
static void t_fd_cpu(void) { fd_both(0); }
static void t_fd_fused_node(void) { fd_both(1); }

/* ---- malformed arguments ---- */
static void t_refusals(void) {
    ork_graph *g = Gc;
    ork_graph_reset(g);
    const int64_t sx[3] = {2, 5, 12}, sbad[3] = {3, 1, 12}, sx2[3] = {2, 5, 11};
    float *h = rnd(2 * 5 * 12, 1.0);
    ork_tensor *x, *gate, *gbad, *hh, *h2, *h16, *y;
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, sx, h, &x) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, (const int64_t[]){2, 1, 12}, h, &gate) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, sbad, h, &gbad) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, sx, h, &hh) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(g, ORK_F32, 3, sx2, h, &h2) == ORK_OK);
    CU_ASSERT_FATAL(T->empty(g, ORK_BF16, 3, sx, &h16) == ORK_OK);
    CU_ASSERT_EQUAL(O->gated_add(g, NULL, gate, hh, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL(O->gated_add(g, x, NULL, hh, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL(O->gated_add(g, x, gate, h2, &y), ORK_E_INVALID);  /* h's shape */
    CU_ASSERT_EQUAL(O->gated_add(g, x, gate, h16, &y), ORK_E_INVALID); /* h's dtype */
    CU_ASSERT_EQUAL(O->gated_add(g, x, gbad, hh, &y), ORK_E_INVALID);  /* gate does not broadcast */
    CU_ASSERT_EQUAL(O->gated_add(g, x, x, hh, &y), ORK_OK);            /* a same-shape gate composes */
    CU_ASSERT_EQUAL(O->layernorm_modulate(g, x, NULL, gate, 1e-6f, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL(O->layernorm_modulate(g, x, gate, gbad, 1e-6f, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL(O->layernorm_modulate(g, x, h16, gate, 1e-6f, &y), ORK_E_INVALID); /* shift's dtype */
    CU_ASSERT_EQUAL(O->layernorm_modulate(g, x, gate, gate, 1e-6f, &y), ORK_OK);
    free(h);
    /* the fused node's graph refuses the same way */
    ork_graph_reset(Gf);
    float *h3 = rnd(2 * 5 * 12, 1.0);
    CU_ASSERT_FATAL(T->from_host(Gf, ORK_F32, 3, sx, h3, &x) == ORK_OK);
    CU_ASSERT_FATAL(T->from_host(Gf, ORK_F32, 3, sbad, h3, &gbad) == ORK_OK);
    CU_ASSERT_EQUAL(O->gated_add(Gf, x, gbad, x, &y), ORK_E_INVALID);
    CU_ASSERT_EQUAL(O->layernorm_modulate(Gf, x, gbad, gbad, 1e-6f, &y), ORK_E_INVALID);
    free(h3);
}

static const ork_test_case cases[] = {
    {"ops table has the ABI 1.4 fused ops", t_table},
    {"CPU: each op is its composition, bit for bit", t_cpu_is_composition},
    {"fused entries that decline: the composition, bit for bit", t_declined_is_composition},
    {"fused node (reference kernels) vs the composition", t_fused_node},
    {"backward vs finite differences (CPU)", t_fd_cpu},
    {"backward vs finite differences (fused node)", t_fd_fused_node},
    {"malformed arguments refused", t_refusals},
    {NULL, NULL},
};

ORK_TEST_MAIN("ops_fused", setup, teardown, cases)
