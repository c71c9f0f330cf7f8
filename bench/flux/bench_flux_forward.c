/* bench/flux/bench_flux_forward.c — FLUX forward throughput of the flux
 * plugin on the CUDA backend: preset flux1-dev (11.9 G parameters, random BF16
 * weights) at 1024² (4096 image + 512 text tokens, batch 1), no grad, timed
 * from begin() to the last block with the stream synchronised; achieved
 * TFLOP/s against the analytic forward FLOPs (FLUX.md §8: 74.38 TFLOP at
 * 1024², T = 512) and against a BF16 GEMM ceiling measured in the same run
 * through the same backend (an 8192³ GEMM, plus one FLUX-shaped GEMM).
 *
 * Weights. The weight store's put_random generates on the host, single
 * threaded (minutes for 12 G values), so this bench skips the store: it
 * declares the model through the registry (ORK_PLUGIN_DIR), allocates every
 * declared weight itself (BF16 on CUDA; norm scales F32 = 1), and fills each
 * linear weight/bias on the device as alpha·pool[off : off + n] with the
 * backend's axpby, where pool is a 64 Mi-element BF16 buffer of uniform
 * random values made once on the host and uploaded (off varies per weight,
 * the pool is reused cyclically for larger weights; alpha gives PyTorch's
 * default scale 1/sqrt(3·fan_in) std). GEMM and attention speed do not
 * depend on the values; the values only need to stay finite (checked).
 * The graph's weight hook is set to a lookup over these tensors.
 *
 * Memory: each block runs inside a graph region and its carry is copied out
 * to two alternating persistent buffer sets (the runner's no-grad forward
 * recipe), so activations of one block are live at a time: ~24 GB weights +
 * ~2 GB. The copies (~30 MB per block) are inside the timing (< 1 ms).
 *
 * Usage: bench_flux_forward [--preset NAME] [--size PX] [--txt T] [--iters K] [--no-gemm]
 *   defaults: flux1-dev, 1024, 512, 3. Without CUDA it runs on the CPU with
 *   preset custom at 64 px (a smoke run of the same code path).
 * Not a test; results go to bench/flux/NOTES.md by hand. */
#include "plugin/registry.h"
#include "tensor/alloc.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "util/log.h"

#include <orakul/orakul.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY ORK_TRY

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* ---- weights -------------------------------------------------------------------- */
typedef struct wentry {
    const char *name;
    ork_tensor *t;
} wentry;

typedef struct bench {
    const ork_backend *be;
    ork_alloc *alloc;
    ork_graph *g;
    ork_dtype wdt, adt;
    const ork_plugin_component *pc;
    const ork_model_vtable *vt;
    void *self;
    ork_model_info info;
    wentry *w;
    int nw;
    ork_tensor *pool;          /* (POOL) wdt uniform(-1, 1) */
    ork_tensor *keep[2][ORK_CARRY_MAX], *view[2][ORK_CARRY_MAX];
    size_t keep_cap[2][ORK_CARRY_MAX];
} bench;

#define POOL ((int64_t)64 << 20)

static int cmp_w(const void *a, const void *b) { return strcmp(((const wentry *)a)->name, ((const wentry *)b)->name); }

static ork_status weight_fn(void *ctx, ork_graph *g, const char *name, ork_tensor **out) {
    bench *b = ctx;
    (void)g;
    wentry key = {name, NULL};
    wentry *e = bsearch(&key, b->w, (size_t)b->nw, sizeof *b->w, cmp_w);
    if (!e) return ORK_FAIL(ORK_E_INVALID, "bench: unknown weight '%s'", name);
    *out = e->t;
    return ORK_OK;
}

static ork_status make_pool(bench *b) {
    uint16_t *h = malloc((size_t)POOL * 2);
    float *hf = b->wdt == ORK_F32 ? malloc((size_t)POOL * 4) : NULL;
    if (!h || (b->wdt == ORK_F32 && !hf)) { free(h); free(hf); return ORK_E_NOMEM; }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < POOL; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17; /* xorshift64 */
        float u = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
        if (hf) hf[i] = u;
        else h[i] = f2bf(u);
    }
    ork_status st = ork_tensor_new(b->alloc, "bench_pool", b->wdt, 1, (int64_t[]){POOL}, 0, &b->pool);
    if (st == ORK_OK)
        st = b->be->memcpy_h2d(&b->g->k, ork_tensor_data(b->pool), hf ? (void *)hf : (void *)h, (size_t)POOL * (hf ? 4 : 2));
    if (st == ORK_OK) st = b->be->sync(&b->g->k);
    free(h);
    free(hf);
    return st;
}

/* dst (n) = alpha · pool, cycling through the pool from offset off */
static ork_status fill_from_pool(bench *b, ork_tensor *t, float alpha, int64_t off) {
    int64_t n = ork_tensor_numel(t), done = 0;
    size_t es = ork_dtype_size(t->dtype);
    while (done < n) {
        int64_t o = (off + done) % POOL, k = n - done < POOL - o ? n - done : POOL - o;
        TRY(b->be->axpby(&b->g->k, k, alpha, (const char *)ork_tensor_data(b->pool) + (size_t)o * es, b->pool->dtype,
                         0.0f, (char *)ork_tensor_data(t) + (size_t)done * es, t->dtype));
        done += k;
    }
    return ORK_OK;
}

static ork_status make_weights(bench *b) {
    TRY(make_pool(b));
    b->w = calloc((size_t)b->info.n_weights, sizeof *b->w);
    if (!b->w) return ORK_E_NOMEM;
    double bytes = 0;
    double t0 = now_s();
    for (int i = 0; i < b->info.n_weights; i++) {
        const ork_weight_decl *d = &b->info.weights[i];
        if (d->flags & ORK_WEIGHT_CODEC) continue;
        int norm = (d->flags & ORK_WEIGHT_NORM) != 0;
        ork_tensor *t;
        TRY(ork_tensor_new(b->alloc, "weights", norm ? ORK_F32 : b->wdt, d->ndim, d->shape, 0, &t));
        t->name = d->name;
        t->flags |= ORK_TF_WEIGHT;
        if (norm) {
            TRY(b->be->fill(&b->g->k, ork_tensor_numel(t), 1.0f, ork_tensor_data(t), ORK_F32));
        } else {
            /* uniform(-1, 1) has std 1/sqrt(3): alpha = 1/sqrt(fan_in) gives std 1/sqrt(3·fan_in) */
            int64_t fan_in = d->ndim == 2 ? d->shape[1] : 3072;
            TRY(fill_from_pool(b, t, 1.0f / sqrtf((float)fan_in), (int64_t)i * 7919 * 1024));
        }
        bytes += (double)ork_tensor_nbytes(t);
        b->w[b->nw].name = d->name;
        b->w[b->nw++].t = t;
    }
    TRY(b->be->sync(&b->g->k));
    qsort(b->w, (size_t)b->nw, sizeof *b->w, cmp_w);
    ork_graph_set_weight_fn(b->g, weight_fn, b);
    printf("weights: %d tensors, %.2f GB (%s), filled on the device in %.2f s\n", b->nw, bytes / 1e9,
           ork_dtype_name(b->wdt), now_s() - t0);
    return ORK_OK;
}

/* ---- the model ------------------------------------------------------------------ */
static ork_status open_model(bench *b, const char *preset) {
    ork_registry *reg;
    TRY(ork_services_register());
    TRY(ork_registry_create(NULL, &reg));
    TRY(ork_registry_add_file(reg, ORK_PLUGIN_DIR "/orakul-flux.so"));
    b->pc = ork_registry_find(reg, ORK_KIND_MODEL, "flux");
    if (!b->pc) return ORK_FAIL(ORK_E_CONFIG, "bench: no flux model component");
    /* params: the component's defaults (the registry stays loaded until exit) */
    void *buf = calloc(1, b->pc->c->params_size);
    if (!buf) return ORK_E_NOMEM;
    for (const ork_param *p = b->pc->c->params; p && p->key; p++) {
        unsigned char *at = (unsigned char *)buf + p->offset;
        const char *v = p->def ? p->def : "0";
        if (p->type == ORK_PARAM_INT) { int64_t x = strtoll(v, NULL, 10); memcpy(at, &x, 8); }
        else if (p->type == ORK_PARAM_BOOL) { int32_t x = !strcmp(v, "true"); memcpy(at, &x, 4); }
        else if (p->type == ORK_PARAM_FLOAT) { double x = strtod(v, NULL); memcpy(at, &x, 8); }
        else { const char *s = !strcmp(v, "''") ? "" : v; memcpy(at, &s, sizeof s); }
    }
    b->vt = b->pc->c->vtable;
    char name[128];
    snprintf(name, sizeof name, "preset:%s", preset);
    ork_status s = b->vt->create(&b->pc->host, buf, &b->self);
    free(buf);
    if (s == ORK_OK) s = b->vt->open(b->self, name, &b->info);
    return s;
}

/* Keep carry slot j of parity p: copy into a persistent buffer, view it as a leaf. */
static ork_status keep_slot(bench *b, int p, int j, ork_tensor *src) {
    size_t need = ork_tensor_nbytes(src);
    if (need > b->keep_cap[p][j]) {
        ork_tensor_free(b->keep[p][j]);
        int64_t n = (int64_t)need;
        TRY(ork_tensor_new(b->alloc, "checkpoints", ORK_U8, 1, &n, 0, &b->keep[p][j]));
        b->keep_cap[p][j] = need;
    }
    ork_tensor_free(b->view[p][j]);
    b->view[p][j] = NULL;
    TRY(ork_tensor_wrap(src->device, src->dtype, src->ndim, src->shape, ork_tensor_data(b->keep[p][j]), "",
                        &b->view[p][j]));
    return ork_graph_copy_to(b->g, src, b->view[p][j]);
}

typedef struct run_in {
    int h, w, T;
    void *tok, *txt, *vec; /* host, act dtype */
    float ts, gd;
} run_in;

/* One forward; *sec = begin .. last block, synchronised. */
static ork_status forward(bench *b, const run_in *ri, double *sec, ork_tensor **pred_out) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_graph *g = b->g;
    TRY(ork_graph_reset(g));
    ork_graph_set_grad(g, 0);
    int N = ri->h * ri->w;
    ork_model_inputs in = {.abi = ORK_ABI_INIT(ork_model_inputs), .h_tokens = ri->h, .w_tokens = ri->w,
                           .timesteps_host = &ri->ts, .guidance_host = b->info.has_guidance ? &ri->gd : NULL};
    TRY(ta->from_host(g, b->adt, 3, (int64_t[]){1, N, b->info.token_channels}, ri->tok, &in.tokens));
    TRY(ta->from_host(g, b->adt, 3, (int64_t[]){1, ri->T, b->info.context_dim}, ri->txt, &in.txt));
    if (b->info.vec_dim > 0) TRY(ta->from_host(g, b->adt, 2, (int64_t[]){1, b->info.vec_dim}, ri->vec, &in.vec));
    TRY(b->be->sync(&g->k));
    double t0 = now_s();
    ork_carry c;
    TRY(b->vt->begin(b->self, g, &in, &c));
    for (int i = 0; i < b->info.n_blocks; i++) {
        ork_region r = ork_graph_region_begin(g);
        ork_status s = b->vt->block(b->self, g, i, &c);
        for (int j = 0; s == ORK_OK && j < c.n; j++)
            if (c.t[j]) s = keep_slot(b, i & 1, j, c.t[j]);
        ork_graph_region_end(g, r);
        TRY(s);
        for (int j = 0; j < c.n; j++)
            if (c.t[j]) TRY(ork_graph_leaf(g, b->view[i & 1][j], 0, &c.t[j]));
    }
    TRY(b->be->sync(&g->k));
    *sec = now_s() - t0;
    *pred_out = c.t[0];
    return ORK_OK;
}

/* begin + every block with no regions (the CPU smoke run's cross-check); host copy into out. */
static ork_status plain_forward(bench *b, const run_in *ri, float *out) {
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_graph *g = b->g;
    TRY(ork_graph_reset(g));
    ork_graph_set_grad(g, 0);
    ork_model_inputs in = {.abi = ORK_ABI_INIT(ork_model_inputs), .h_tokens = ri->h, .w_tokens = ri->w,
                           .timesteps_host = &ri->ts, .guidance_host = b->info.has_guidance ? &ri->gd : NULL};
    TRY(ta->from_host(g, b->adt, 3, (int64_t[]){1, ri->h * ri->w, b->info.token_channels}, ri->tok, &in.tokens));
    TRY(ta->from_host(g, b->adt, 3, (int64_t[]){1, ri->T, b->info.context_dim}, ri->txt, &in.txt));
    if (b->info.vec_dim > 0) TRY(ta->from_host(g, b->adt, 2, (int64_t[]){1, b->info.vec_dim}, ri->vec, &in.vec));
    ork_carry c;
    TRY(b->vt->begin(b->self, g, &in, &c));
    for (int i = 0; i < b->info.n_blocks; i++) TRY(b->vt->block(b->self, g, i, &c));
    return ta->to_host(g, c.t[0], ORK_F32, out);
}

/* Analytic forward FLOPs (1 MAC = 2), FLUX.md §8 generalised to FLUX.2's SwiGLU. */
static double flops(const ork_model_info *info, int hidden, int mlp, int depth, int single, int version, int N, int T) {
    double d = hidden, m = mlp, L = N + T, mi = version == 2 ? 2 * m : m;
    double dbl = 2 * L * (4 * d * d + d * mi + m * d) + 4 * L * L * d;
    double sgl = 2 * L * (d * (3 * d + mi) + (d + m) * d) + 4 * L * L * d;
    double emb = 2 * d * ((double)info->token_channels * N * 2 + (double)info->context_dim * T);
    return depth * dbl + single * sgl + emb;
}

/* BF16 (or F32 on CPU) GEMM C(M,N) = A(M,K)·B(N,K)ᵀ through the backend: TFLOP/s. */
static ork_status gemm_tflops(bench *b, int64_t M, int64_t N, int64_t K, int iters, double *tf) {
    ork_tensor *A, *B, *C;
    TRY(ork_tensor_new(b->alloc, "bench_gemm", b->wdt, 2, (int64_t[]){M, K}, 0, &A));
    TRY(ork_tensor_new(b->alloc, "bench_gemm", b->wdt, 2, (int64_t[]){N, K}, 0, &B));
    TRY(ork_tensor_new(b->alloc, "bench_gemm", b->adt, 2, (int64_t[]){M, N}, 0, &C));
    TRY(fill_from_pool(b, A, 1.0f, 0));
    TRY(fill_from_pool(b, B, 1.0f / sqrtf((float)K), 12345));
    ork_gemm_desc d = {.ta = 0, .tb = 1, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1, .beta = 0,
                       .A = ork_tensor_data(A), .adt = A->dtype, .lda = K,
                       .B = ork_tensor_data(B), .bdt = B->dtype, .ldb = K,
                       .C = ork_tensor_data(C), .cdt = C->dtype, .ldc = N};
    for (int i = 0; i < 2; i++) TRY(b->be->gemm(&b->g->k, &d));
    TRY(b->be->sync(&b->g->k));
    double t0 = now_s();
    for (int i = 0; i < iters; i++) TRY(b->be->gemm(&b->g->k, &d));
    TRY(b->be->sync(&b->g->k));
    double dt = (now_s() - t0) / iters;
    *tf = 2.0 * (double)M * (double)N * (double)K / dt / 1e12;
    ork_tensor_free(A);
    ork_tensor_free(B);
    ork_tensor_free(C);
    return ORK_OK;
}

int main(int argc, char **argv) {
#ifdef ORAKUL_HAVE_CUDA
    const char *preset = "flux1-dev";
    int px = 1024;
#else
    const char *preset = "custom";
    int px = 64;
#endif
    int T = -1, iters = 3, do_gemm = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) px = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--txt") && i + 1 < argc) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-gemm")) do_gemm = 0;
        else { fprintf(stderr, "usage: %s [--preset NAME] [--size PX] [--txt T] [--iters K] [--no-gemm]\n", argv[0]); return 2; }
    }
    bench b;
    memset(&b, 0, sizeof b);
#ifdef ORAKUL_HAVE_CUDA
    b.be = ork_cuda_backend();
    b.wdt = b.adt = ORK_BF16;
#else
    b.be = ork_cpu_backend();
    b.wdt = b.adt = ORK_F32;
    printf("no CUDA in this build: CPU smoke run\n");
#endif
    ork_status s = ork_alloc_create(b.be, 0, &b.alloc);
    ork_graph_opts go = {0};
    go.act_dtype = b.adt;
    if (s == ORK_OK) s = ork_graph_create(b.be, b.alloc, &go, &b.g);
    if (s == ORK_OK) s = open_model(&b, preset);
    if (s == ORK_OK) s = make_weights(&b);
    if (s != ORK_OK) { fprintf(stderr, "bench_flux_forward: setup failed (%d)\n", (int)s); return 1; }
    const ork_model_info *info = &b.info;
    int ppt = info->pixels_per_token > 0 ? info->pixels_per_token : 16;
    run_in ri = {.h = px / ppt, .w = px / ppt, .T = T > 0 ? T : info->context_len, .ts = 0.7f, .gd = 3.5f};
    int N = ri.h * ri.w;
    size_t es = ork_dtype_size(b.adt);
    size_t ntok = (size_t)N * info->token_channels, ntxt = (size_t)ri.T * info->context_dim;
    ri.tok = malloc(ntok * es);
    ri.txt = malloc(ntxt * es);
    ri.vec = malloc((size_t)(info->vec_dim > 0 ? info->vec_dim : 1) * es);
    if (!ri.tok || !ri.txt || !ri.vec) return 1;
    uint64_t r = 12345;
    for (int which = 0; which < 3; which++) {
        size_t n = which == 0 ? ntok : which == 1 ? ntxt : (size_t)(info->vec_dim > 0 ? info->vec_dim : 1);
        void *dst = which == 0 ? ri.tok : which == 1 ? ri.txt : ri.vec;
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            float v = (float)((r >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
            if (b.adt == ORK_BF16) ((uint16_t *)dst)[i] = f2bf(v);
            else ((float *)dst)[i] = v;
        }
    }
    /* the model's sizes, read back from its declarations */
    int hidden = 0, mlp = 0, depth = 0, single = 0, version = 1;
    for (int i = 0; i < info->n_weights; i++) {
        const ork_weight_decl *d = &info->weights[i];
        if (!strcmp(d->name, "txt_in.weight")) hidden = (int)d->shape[0];
        if (!strcmp(d->name, "double_blocks.0.img_mlp.2.weight")) mlp = (int)d->shape[1];
        if (!strcmp(d->name, "single_stream_modulation.lin.weight")) version = 2;
    }
    for (int i = 0; i < info->n_blocks; i++) {
        depth += !strncmp(info->block_names[i], "double_blocks.", 14);
        single += !strncmp(info->block_names[i], "single_blocks.", 14);
    }
    double F = flops(info, hidden, mlp, depth, single, version, N, ri.T);
    printf("model %s: hidden %d, mlp %d, %d double + %d single blocks; %dx%d px -> %d image + %d text tokens\n",
           info->variant, hidden, mlp, depth, single, px, px, N, ri.T);
    printf("forward FLOPs (analytic, FLUX.md §8): %.2f TFLOP%s\n", F / 1e12,
           !strcmp(preset, "flux1-dev") && px == 1024 && ri.T == 512 ? " (§8 table: 74.38)" : "");
    double sec, best = 1e30, sum = 0;
    ork_tensor *pred = NULL;
    s = forward(&b, &ri, &sec, &pred); /* warm-up: grows the arena, plans, autotunes */
    if (s != ORK_OK) { fprintf(stderr, "bench_flux_forward: forward failed (%d)\n", (int)s); return 1; }
    printf("warm-up forward: %.3f s\n", sec);
    for (int it = 0; it < iters; it++) {
        s = forward(&b, &ri, &sec, &pred);
        if (s != ORK_OK) { fprintf(stderr, "bench_flux_forward: forward failed (%d)\n", (int)s); return 1; }
        printf("forward %d: %.4f s  %.4g TFLOP/s\n", it, sec, F / sec / 1e12);
        best = fmin(best, sec);
        sum += sec;
    }
    if (b.be->device == ORK_DEV_CPU) {
        /* smoke run: the region/keep recipe gives the plain forward's values */
        size_t n = (size_t)ork_tensor_numel(pred);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        /* pred's header lives until the next graph reset: read it first */
        if (!x || !y || ork_tensor_api_table()->to_host(b.g, pred, ORK_F32, y) != ORK_OK ||
            plain_forward(&b, &ri, x) != ORK_OK) {
            fprintf(stderr, "bench_flux_forward: plain forward failed\n");
            return 1;
        }
        double md = 0;
        for (size_t i = 0; i < n; i++) md = fmax(md, fabs((double)x[i] - y[i]));
        printf("check: region forward vs plain forward, max |diff| %.3g\n", md);
        free(x);
        free(y);
        s = forward(&b, &ri, &sec, &pred);
        if (s != ORK_OK || md != 0) return 1;
    }
    /* the output must be finite (random weights of the right scale) */
    size_t np = (size_t)ork_tensor_numel(pred);
    float *ph = malloc(np * sizeof *ph);
    size_t bad = 0;
    double amax = 0;
    if (ph && ork_tensor_api_table()->to_host(b.g, pred, ORK_F32, ph) == ORK_OK)
        for (size_t i = 0; i < np; i++) { bad += !isfinite(ph[i]); amax = fmax(amax, fabs(ph[i])); }
    free(ph);
    printf("prediction: %zu values, %zu non-finite, max |v| %.3g\n", np, bad, amax);
    double tf = F / best / 1e12;
    printf("forward: best %.4f s, mean %.4f s -> %.4g TFLOP/s (best)\n", best, sum / iters, tf);
    if (do_gemm) {
        ork_graph_reset(b.g);
        int64_t g = b.be->device == ORK_DEV_CUDA ? 8192 : 512;
        double ceil = 0, shape = 0;
        s = gemm_tflops(&b, g, g, g, b.be->device == ORK_DEV_CUDA ? 20 : 2, &ceil);
        /* a FLUX-shaped GEMM: the single block's linear1 at this resolution */
        if (s == ORK_OK && hidden > 0)
            s = gemm_tflops(&b, N + ri.T, 3 * (int64_t)hidden + (version == 2 ? 2 : 1) * (int64_t)mlp, hidden,
                            b.be->device == ORK_DEV_CUDA ? 20 : 2, &shape);
        if (s != ORK_OK) { fprintf(stderr, "bench_flux_forward: gemm failed (%d)\n", (int)s); return 1; }
        printf("GEMM ceiling %lld^3 %s: %.4g TFLOP/s; linear1 shape (%d x %d x %d): %.4g TFLOP/s\n", (long long)g,
               ork_dtype_name(b.wdt), ceil, N + ri.T, 3 * hidden + (version == 2 ? 2 : 1) * mlp, hidden, shape);
        printf("forward / GEMM ceiling: %.1f%%\n", 100.0 * tf / ceil);
    }
    return bad ? 1 : 0;
}
