/* tests/ops/grad_check.c — see grad_check.h. Owns the test graph and allocator. */
#include "grad_check.h"

#include "numerics/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gc_env G;

static uint64_t next_u64(void) {
    G.rng ^= G.rng << 13;
    G.rng ^= G.rng >> 7;
    G.rng ^= G.rng << 17;
    return G.rng;
}
double gc_rand01(void) { return ((double)(next_u64() >> 11) + 0.5) / 9007199254740992.0; }
double gc_randn(void) { return sqrt(-2.0 * log(gc_rand01())) * cos(6.283185307179586 * gc_rand01()); }

int gc_setup(void) {
    G.rng = 0x9E3779B97F4A7C15ull;
    G.ops = ork_ops_table();
    G.tapi = ork_tensor_api_table();
    if (ork_alloc_create(ork_cpu_backend(), 0, &G.alloc) != ORK_OK) return 1;
    ork_graph_opts o = {.act_dtype = ORK_F32, .nthreads = 2};
    return ork_graph_create(ork_cpu_backend(), G.alloc, &o, &G.g) != ORK_OK;
}

int gc_teardown(void) {
    ork_graph_destroy(G.g);
    ork_alloc_destroy(G.alloc);
    return 0;
}

ork_tensor *gc_param(int ndim, const int64_t *shape, double sd) {
    ork_tensor *t = NULL;
    if (ork_tensor_new(G.alloc, "test", ORK_F32, ndim, shape, 1, &t) != ORK_OK) return NULL;
    float *p = ork_tensor_data(t);
    for (int64_t i = 0; i < ork_tensor_numel(t); i++) p[i] = (float)(sd * gc_randn());
    return t;
}

ork_tensor *gc_const(ork_dtype dt, int ndim, const int64_t *shape, double sd) {
    ork_tensor *t = NULL;
    if (ork_tensor_new(G.alloc, "test", dt, ndim, shape, 0, &t) != ORK_OK) return NULL;
    for (int64_t i = 0; i < ork_tensor_numel(t); i++) {
        float v = (float)(sd * gc_randn());
        if (dt == ORK_BF16) ((uint16_t *)ork_tensor_data(t))[i] = ork_f32_to_bf16(v);
        else ((float *)ork_tensor_data(t))[i] = v;
    }
    return t;
}

void gc_fill_spread(ork_tensor *t, double gap) {
    int64_t n = ork_tensor_numel(t);
    float *p = ork_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)((double)(i - n / 2) * gap + 0.5 * gap);
    for (int64_t i = n - 1; i > 0; i--) { /* shuffle */
        int64_t j = (int64_t)(gc_rand01() * (double)(i + 1));
        float t2 = p[i]; p[i] = p[j]; p[j] = t2;
    }
}

void gc_free(int n, ork_tensor **t) {
    for (int i = 0; i < n; i++) ork_tensor_free(t[i]);
}

/* S = Σ outs·r in double, forward with grad off. */
static int eval_S(gc_fwd fwd, void *ctx, ork_tensor **in, float *const *r, double *S) {
    ork_graph_reset(G.g);
    int prev = ork_graph_set_grad(G.g, 0);
    ork_tensor *outs[GC_MAX_OUT];
    int nout = 0;
    ork_status s = fwd(G.g, in, ctx, outs, &nout);
    ork_graph_set_grad(G.g, prev);
    if (s != ORK_OK) return 0;
    double acc = 0.0;
    for (int o = 0; o < nout; o++) {
        const float *y = ork_tensor_data(outs[o]);
        for (int64_t k = 0; k < ork_tensor_numel(outs[o]); k++) acc += (double)y[k] * r[o][k];
    }
    *S = acc;
    return 1;
}

int gc_check(const char *name, gc_fwd fwd, void *ctx, int nin, ork_tensor **in, const int *check, double tol) {
    ork_graph *g = G.g;
    ork_graph_reset(g);
    ork_graph_set_grad(g, 1);
    for (int i = 0; i < nin; i++)
        if (in[i]) ork_tensor_zero_grad(g, in[i]);
    ork_tensor *outs[GC_MAX_OUT], *rt[GC_MAX_OUT];
    float *r[GC_MAX_OUT];
    int nout = 0, ok = 1;
    if (fwd(g, in, ctx, outs, &nout) != ORK_OK) { printf("\n  %s: forward failed\n", name); return 0; }
    for (int o = 0; o < nout; o++) {
        int64_t n = ork_tensor_numel(outs[o]);
        r[o] = malloc(sizeof(float) * (size_t)n);
        for (int64_t k = 0; k < n; k++) r[o][k] = (float)gc_randn();
        if (G.tapi->from_host(g, ORK_F32, outs[o]->ndim, outs[o]->shape, r[o], &rt[o]) != ORK_OK) return 0;
    }
    if (ork_backward_from(g, nout, outs, rt) != ORK_OK) { printf("\n  %s: backward failed\n", name); return 0; }
    for (int i = 0; i < nin && ok; i++) {
        ork_tensor *t = in[i];
        if (!t || !(check ? check[i] != 0 : (t->flags & ORK_TF_PARAM) != 0)) continue;
        if (!t->grad) { printf("\n  %s: input %d got no gradient\n", name, i); ok = 0; break; }
        int64_t n = ork_tensor_numel(t);
        float *x = ork_tensor_data(t);
        float *ga = malloc(sizeof(float) * (size_t)n);
        memcpy(ga, ork_tensor_data(t->grad), sizeof(float) * (size_t)n);
        /* Up to 48 elements per input, spread over the tensor. */
        int64_t step = n > 48 ? n / 48 : 1;
        double num = 0.0, den = 0.0, gmax = 0.0, worst = 0.0;
        int64_t worst_k = -1;
        const double h = 1e-2;
        double fdv[64], gav[64];
        int m = 0;
        for (int64_t k = 0; k < n && m < 64; k += step, m++) {
            float x0 = x[k];
            double sp, sm;
            x[k] = (float)(x0 + h);
            int e1 = eval_S(fwd, ctx, in, r, &sp);
            x[k] = (float)(x0 - h);
            int e2 = eval_S(fwd, ctx, in, r, &sm);
            double hh = ((double)(float)(x0 + h) - (double)(float)(x0 - h)) / 2.0;
            x[k] = x0;
            if (!e1 || !e2) { ok = 0; break; }
            fdv[m] = (sp - sm) / (2.0 * hh);
            gav[m] = ga[k];
            num += (fdv[m] - gav[m]) * (fdv[m] - gav[m]);
            den += fdv[m] * fdv[m];
            if (fabs(fdv[m]) > gmax) gmax = fabs(fdv[m]);
        }
        for (int j = 0; j < m; j++) {
            double err = fabs(fdv[j] - gav[j]) - (3.0 * tol * gmax + 5.0 * tol * fabs(fdv[j]));
            if (err > worst) { worst = err; worst_k = j; }
        }
        double rel = sqrt(num) / (sqrt(den) > 1e-6 ? sqrt(den) : 1e-6);
        if (getenv("GC_VERBOSE")) printf("\n    %s: input %d: rel. L2 error %.2e", name, i, rel);
        if (rel > tol || worst_k >= 0) {
            printf("\n  %s: input %d: rel. L2 error %.3g (tol %.1g)", name, i, rel, tol);
            if (worst_k >= 0) printf("; sample %d: analytic %.6g vs fd %.6g", (int)worst_k, gav[worst_k], fdv[worst_k]);
            printf("\n");
            ok = 0;
        }
        free(ga);
    }
    for (int o = 0; o < nout; o++) free(r[o]);
    return ok;
}
