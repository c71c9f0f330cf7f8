/* bench_vgg19.c — times VGG19 on the CUDA backend at S×S (default 512²), batch 1,
 * BF16 activations (the trainer's dtype on CUDA), frozen F32 weights (the
 * perceptual plugin's; conv2d casts them to BF16 per call), two variants:
 *
 *  features  torchvision's vgg19().features up to conv4_2's ReLU (features[:23],
 *            10 convs, 3 max-pools), forward + backward to the INPUT only
 *            (weights frozen: no weight gradient), loss = mse(feat, fixed random).
 *  loss      the whole perceptual loss as training runs it: the plugin
 *            orakul-perceptual.so through the registry (identity decode: the
 *            "tokens" are the image), default layers (content conv2_2, conv3_2,
 *            conv4_2; style conv2_1, conv3_1, conv4_1), mse_weight 1,
 *            layer_scalers none: x0_pred = x_t − t·v, ImageNet normalisation,
 *            VGG on the prediction (recorded) and on the target (not), content
 *            MSEs and F32 Gram losses, backward to v.
 *
 * METHOD (/work/.library/device/METHOD.md): inputs random (never zeros); warm-up
 * runs first (cuBLASLt heuristics, arena growth); then each repeat is one whole
 * step timed with a host clock between two stream synchronisations (the same
 * method bench_torch.py uses, so eager launch overhead counts on both sides);
 * median, min and max of the repeats. Peak device memory is the allocator's
 * high-water mark (ork_alloc_peak) of a fresh allocator per variant: weights,
 * inputs and the step's arena.
 *
 * Writes DIR/vgg19_bench_in.safetensors (the weights in torchvision layout,
 * features.<idx>.weight/bias F32, and the inputs, F32 holding bf16-exact
 * values) before timing, and DIR/vgg19_bench_out.safetensors (our loss and
 * input gradient of each variant, F32) after, so bench_torch.py runs torch on
 * the very same weights and inputs and compares the numbers.
 *
 * Usage: bench_vgg19 [--size S] [--warmup N] [--repeats N] [--dir DIR]
 * Prints one JSON object per variant on stdout; progress and errors on stderr.
 * Exit: 0 ok, 1 a step failed, 2 usage, 77 no CUDA device. */
#include "io/safetensors.h"
#include "numerics/half.h"
#include "plugin/registry.h"
#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "train/services.h"

#include <orakul/orakul.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ork_cuda_device_count(void);

#define PLUGIN ORK_PLUGIN_DIR "/orakul-perceptual.so"
#define NCONV 10 /* conv1_1 .. conv4_2 */
static const int v_idx[NCONV] = {0, 2, 5, 7, 10, 12, 14, 16, 19, 21};
static const int v_cout[NCONV] = {64, 64, 128, 128, 256, 256, 256, 256, 512, 512};
static int v_cin(int i) { return i ? v_cout[i - 1] : 3; }
static int pool_after(int i) { return i == 1 || i == 3 || i == 7; } /* torchvision features.4, 9, 18 */

#define TRY(what, x) do { ork_status s_ = (x); if (s_ != ORK_OK) { \
    fprintf(stderr, "bench_vgg19: %s failed (status %d) at %s:%d\n", what, (int)s_, __FILE__, __LINE__); \
    return 1; } } while (0)

static const ork_ops *O;
static const ork_tensor_api *TA;

/* ---- data ----------------------------------------------------------------------- */
static uint64_t rng = 0x5EEDB19ull;
static double urand(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }
static float bfr(double x) { return ork_bf16_to_f32(ork_f32_to_bf16((float)x)); } /* bf16-exact F32 */

static float *W[NCONV], *Bv[NCONV];
static int S = 512, WARMUP = 3, REPEATS = 15;
static size_t NIMG;               /* 3·S·S */
static float *x_img, *feat_tgt;   /* features: input image (1,3,S,S) in [0,1]; target (1,512,S/8,S/8) */
static float *l_v, *l_tgt, *l_xt, *l_x0, l_t = 0.6f; /* loss: v, velocity target, x_t, x0 (1,3,S,S) */

static void make_data(void) {
    for (int i = 0; i < NCONV; i++) { /* He-normal (fan-in), small biases, as a trained VGG's scale */
        size_t n = (size_t)v_cout[i] * v_cin(i) * 9;
        double sd = sqrt(2.0 / (9.0 * v_cin(i)));
        W[i] = malloc(n * sizeof(float));
        Bv[i] = malloc((size_t)v_cout[i] * sizeof(float));
        for (size_t k = 0; k < n; k++) W[i][k] = (float)(sd * nrand());
        for (int k = 0; k < v_cout[i]; k++) Bv[i][k] = (float)(0.02 * nrand());
    }
    NIMG = (size_t)3 * S * S;
    size_t nf = (size_t)512 * (S / 8) * (S / 8);
    x_img = malloc(NIMG * 4); feat_tgt = malloc(nf * 4);
    l_v = malloc(NIMG * 4); l_tgt = malloc(NIMG * 4); l_xt = malloc(NIMG * 4); l_x0 = malloc(NIMG * 4);
    /* images: a smooth gradient plus noise, in [0, 1] (not pure noise, not constant) */
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                size_t i = ((size_t)c * S + y) * S + x;
                double base = 0.5 + 0.3 * sin(0.02 * (x + 2 * c) + 0.013 * y);
                x_img[i] = bfr(fmin(1.0, fmax(0.0, base + 0.15 * nrand())));
                l_x0[i] = bfr(fmin(1.0, fmax(0.0, 0.5 + 0.3 * cos(0.017 * x - 0.021 * y + c) + 0.1 * nrand())));
                double x0p = fmin(1.0, fmax(0.0, (double)l_x0[i] + 0.2 * nrand())); /* a prediction near x0 */
                l_v[i] = bfr(0.5 * nrand());
                l_xt[i] = bfr(x0p + (double)l_t * l_v[i]); /* so that x_t − t·v ≈ x0p */
                l_tgt[i] = bfr(l_v[i] + 0.3 * nrand());
            }
    for (size_t i = 0; i < nf; i++) feat_tgt[i] = bfr(fabs(nrand()));
}

static int write_inputs(const char *path) {
    ork_st_writer *w;
    if (ork_st_writer_new(&w) != ORK_OK) return 0;
    char names[2 * NCONV][48];
    int ok = 1;
    int64_t si[4] = {1, 3, S, S}, sf[4] = {1, 512, S / 8, S / 8}, s1[1] = {1};
    for (int i = 0; ok && i < NCONV; i++) {
        int64_t ws[4] = {v_cout[i], v_cin(i), 3, 3}, bs[1] = {v_cout[i]};
        snprintf(names[2 * i], 48, "features.%d.weight", v_idx[i]);
        snprintf(names[2 * i + 1], 48, "features.%d.bias", v_idx[i]);
        ok = ork_st_writer_add(w, names[2 * i], ORK_F32, 4, ws, W[i], (uint64_t)v_cout[i] * v_cin(i) * 36) == ORK_OK &&
             ork_st_writer_add(w, names[2 * i + 1], ORK_F32, 1, bs, Bv[i], (uint64_t)v_cout[i] * 4) == ORK_OK;
    }
    ok = ok && ork_st_writer_add(w, "in.x", ORK_F32, 4, si, x_img, NIMG * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.feat_target", ORK_F32, 4, sf, feat_tgt, (uint64_t)512 * (S / 8) * (S / 8) * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.v", ORK_F32, 4, si, l_v, NIMG * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.target", ORK_F32, 4, si, l_tgt, NIMG * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.x_t", ORK_F32, 4, si, l_xt, NIMG * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.x0", ORK_F32, 4, si, l_x0, NIMG * 4) == ORK_OK &&
         ork_st_writer_add(w, "in.t", ORK_F32, 1, s1, &l_t, 4) == ORK_OK;
    ok = ok && ork_st_writer_commit(w, path) == ORK_OK;
    ork_st_writer_free(w);
    return ok;
}

/* ---- device helpers ---------------------------------------------------------------- */
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

/* a BF16 tensor outliving graph resets, from F32 host values */
static ork_status persist_bf16(ork_graph *g, int nd, const int64_t *sh, const float *h, ork_tensor **out) {
    size_t n = 1;
    for (int k = 0; k < nd; k++) n *= (size_t)sh[k];
    uint16_t *q = malloc(n * 2);
    if (!q) return ORK_E_NOMEM;
    ork_bf16_from_f32(h, n, q);
    ork_status s = TA->persistent(g, ORK_BF16, nd, sh, q, out); /* synchronous copy */
    free(q);
    return s;
}

typedef struct result {
    double med, mn, mx, loss, grad_l2;
    size_t peak;
    int finite;
    float *grad; /* (1,3,S,S) host F32 */
} result;

typedef ork_status (*step_fn)(void *ctx, ork_graph *g, ork_tensor **loss, ork_tensor **leaf);

/* warm-up, then REPEATS timed steps; the last step's loss and input gradient */
static int time_steps(ork_graph *g, step_fn fn, void *ctx, result *r) {
    double *t = malloc((size_t)REPEATS * sizeof *t);
    ork_tensor *L = NULL, *x = NULL;
    for (int i = 0; i < WARMUP + REPEATS; i++) {
        TRY("sync", ork_graph_sync(g));
        double t0 = now_ms();
        TRY("graph reset", ork_graph_reset(g));
        int prev = ork_graph_set_grad(g, 1);
        TRY("forward", fn(ctx, g, &L, &x));
        TRY("backward", ork_backward(g, L));
        ork_graph_set_grad(g, prev);
        TRY("sync", ork_graph_sync(g));
        if (i >= WARMUP) t[i - WARMUP] = now_ms() - t0;
    }
    qsort(t, (size_t)REPEATS, sizeof *t, cmpd);
    r->med = REPEATS % 2 ? t[REPEATS / 2] : 0.5 * (t[REPEATS / 2 - 1] + t[REPEATS / 2]);
    r->mn = t[0];
    r->mx = t[REPEATS - 1];
    free(t);
    float l = 0;
    if (!x->grad) { fprintf(stderr, "bench_vgg19: no gradient reached the input\n"); return 1; }
    r->grad = malloc(NIMG * 4);
    TRY("loss to host", TA->to_host(g, L, ORK_F32, &l));
    TRY("gradient to host", TA->to_host(g, x->grad, ORK_F32, r->grad));
    r->loss = l;
    double s2 = 0;
    r->finite = isfinite(l);
    for (size_t i = 0; i < NIMG; i++) {
        if (!isfinite(r->grad[i])) r->finite = 0;
        s2 += (double)r->grad[i] * r->grad[i];
    }
    r->grad_l2 = sqrt(s2);
    return 0;
}

/* ---- variant 1: features[:23] fwd + bwd to the input -------------------------------- */
typedef struct feat_ctx {
    ork_tensor *w[NCONV], *b[NCONV], *x, *tgt;
} feat_ctx;

static ork_status feat_step(void *vctx, ork_graph *g, ork_tensor **loss, ork_tensor **leaf) {
    feat_ctx *c = vctx;
    ork_tensor *y;
    ORK_TRY(ork_graph_leaf(g, c->x, 1, leaf));
    y = *leaf;
    for (int i = 0; i < NCONV; i++) {
        ORK_TRY(O->conv2d(g, y, c->w[i], c->b[i], 1, 1, &y));
        ORK_TRY(O->relu(g, y, &y));
        if (pool_after(i)) ORK_TRY(O->maxpool2x2(g, y, &y));
    }
    return O->mse(g, y, c->tgt, loss);
}

/* ---- variant 2: the plugin's loss --------------------------------------------------- */
typedef struct loss_ctx {
    const ork_loss_vtable *vt;
    void *self;
    ork_tensor *v, *tgt, *xt, *x0, *t;
} loss_ctx;

static ork_status identity(void *ctx, ork_graph *g, ork_tensor *tokens, ork_tensor **img) {
    (void)ctx; (void)g;
    *img = tokens;
    return ORK_OK;
}

static ork_status loss_step(void *vctx, ork_graph *g, ork_tensor **loss, ork_tensor **leaf) {
    loss_ctx *c = vctx;
    ORK_TRY(ork_graph_leaf(g, c->v, 1, leaf));
    ork_loss_inputs in = {.abi = ORK_ABI_INIT(ork_loss_inputs), .pred = *leaf, .target = c->tgt, .x_t = c->xt,
                          .x0 = c->x0, .t = c->t, .t_host = &l_t, .h_tokens = S, .w_tokens = S, .decode = identity};
    return c->vt->compute(c->self, g, &in, loss);
}

/* create the component through its own key table (offsets only) */
static ork_status make_loss(const ork_plugin_component *pc, const char *vgg_path, void **self) {
    unsigned char buf[512] = {0};
    if (pc->c->params_size > sizeof buf) return ORK_E_INTERNAL;
    for (const ork_param *p = pc->c->params; p && p->key; p++) {
        unsigned char *at = buf + p->offset;
        const char *s = NULL;
        double d = 0;
        int64_t i = 0;
        if (!strcmp(p->key, "vgg_path")) s = vgg_path;
        else if (!strcmp(p->key, "content_layers")) s = "conv2_2,conv3_2,conv4_2";
        else if (!strcmp(p->key, "style_layers")) s = "conv2_1,conv3_1,conv4_1";
        else if (!strcmp(p->key, "reduction")) s = "mean";
        else if (!strcmp(p->key, "layer_scalers")) s = "none";
        else if (!strcmp(p->key, "content_weight") || !strcmp(p->key, "style_weight") || !strcmp(p->key, "mse_weight"))
            d = 1.0;
        else if (!strcmp(p->key, "scaler_size")) i = 256;
        else if (!strcmp(p->key, "compute_dtype")) s = getenv("BENCH_COMPUTE") ? getenv("BENCH_COMPUTE") : "f32";
        else { fprintf(stderr, "bench_vgg19: the plugin has a key this bench does not know: %s\n", p->key); return ORK_E_INTERNAL; }
        if (p->type == ORK_PARAM_STRING) memcpy(at, &s, sizeof s);
        else if (p->type == ORK_PARAM_FLOAT) memcpy(at, &d, sizeof d);
        else memcpy(at, &i, sizeof i);
    }
    const ork_loss_vtable *vt = pc->c->vtable;
    return vt->create(&pc->host, buf, self);
}

static double conv_gflop(void) { /* forward, 2·Cin·9·Cout·H·W per conv */
    double f = 0;
    int h = S;
    for (int i = 0; i < NCONV; i++) {
        f += 2.0 * v_cin(i) * 9 * v_cout[i] * (double)h * h;
        if (pool_after(i)) h /= 2;
    }
    return f / 1e9;
}

static void print_json(const char *name, const char *what, const result *r, double gflop) {
    printf("{\"bench\": \"%s\", \"impl\": \"orakul\", \"what\": \"%s\", \"size\": %d, \"batch\": 1, "
           "\"dtype\": \"bf16 activations, f32 weights cast to bf16 per conv, f32 accumulate\", "
           "\"warmup\": %d, \"repeats\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, "
           "\"gflop\": %.2f, \"tflops\": %.2f, \"peak_mib\": %.1f, \"loss\": %.8g, \"grad_l2\": %.8g, \"finite\": %s}\n",
           name, what, S, WARMUP, REPEATS, r->med, r->mn, r->mx, gflop, gflop / r->med, (double)r->peak / 1048576.0,
           r->loss, r->grad_l2, r->finite ? "true" : "false");
    fflush(stdout);
}

static int run_features(result *r) {
    const ork_backend *be = ork_cuda_backend();
    ork_alloc *a;
    ork_graph *g;
    ork_graph_opts o = {.act_dtype = ORK_BF16};
    TRY("alloc", ork_alloc_create(be, 0, &a));
    TRY("graph", ork_graph_create(be, a, &o, &g));
    feat_ctx c;
    for (int i = 0; i < NCONV; i++) {
        int64_t ws[4] = {v_cout[i], v_cin(i), 3, 3}, bs[1] = {v_cout[i]};
        TRY("weights", TA->persistent(g, ORK_F32, 4, ws, W[i], &c.w[i]));
        TRY("weights", TA->persistent(g, ORK_F32, 1, bs, Bv[i], &c.b[i]));
    }
    int64_t si[4] = {1, 3, S, S}, sf[4] = {1, 512, S / 8, S / 8};
    TRY("input", persist_bf16(g, 4, si, x_img, &c.x));
    TRY("target", persist_bf16(g, 4, sf, feat_tgt, &c.tgt));
    int rc = time_steps(g, feat_step, &c, r);
    r->peak = ork_alloc_peak(a);
    ork_graph_reset(g);
    for (int i = 0; i < NCONV; i++) { TA->release(c.w[i]); TA->release(c.b[i]); }
    TA->release(c.x);
    TA->release(c.tgt);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
    return rc;
}

static int run_loss(const char *vgg_path, result *r) {
    ork_registry *reg;
    TRY("services", ork_services_register());
    TRY("registry", ork_registry_create(NULL, &reg));
    if (ork_registry_add_file(reg, PLUGIN) != ORK_OK) {
        fprintf(stderr, "bench_vgg19: cannot load %s (build the target orakul_plugin_perceptual)\n", PLUGIN);
        return 1;
    }
    const ork_plugin_component *pc = ork_registry_find(reg, ORK_KIND_LOSS, "perceptual");
    if (!pc) { fprintf(stderr, "bench_vgg19: no loss component 'perceptual' in %s\n", PLUGIN); return 1; }
    const ork_backend *be = ork_cuda_backend();
    ork_alloc *a;
    ork_graph *g;
    ork_graph_opts o = {.act_dtype = ORK_BF16};
    TRY("alloc", ork_alloc_create(be, 0, &a));
    TRY("graph", ork_graph_create(be, a, &o, &g));
    loss_ctx c = {pc->c->vtable, NULL, NULL, NULL, NULL, NULL, NULL};
    TRY("create the loss", make_loss(pc, vgg_path, &c.self));
    TRY("prepare (load VGG19)", c.vt->prepare(c.self, g));
    int64_t si[4] = {1, 3, S, S}, s1[1] = {1};
    TRY("v", persist_bf16(g, 4, si, l_v, &c.v));
    TRY("target", persist_bf16(g, 4, si, l_tgt, &c.tgt));
    TRY("x_t", persist_bf16(g, 4, si, l_xt, &c.xt));
    TRY("x0", persist_bf16(g, 4, si, l_x0, &c.x0));
    TRY("t", TA->persistent(g, ORK_F32, 1, s1, &l_t, &c.t));
    int rc = time_steps(g, loss_step, &c, r);
    r->peak = ork_alloc_peak(a);
    ork_graph_reset(g);
    c.vt->destroy(c.self);
    TA->release(c.v); TA->release(c.tgt); TA->release(c.xt); TA->release(c.x0); TA->release(c.t);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
    ork_registry_destroy(reg);
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = ".";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--size")) S = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) WARMUP = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--repeats")) REPEATS = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--dir")) dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_vgg19 [--size S (multiple of 8, >= 16)] [--warmup N] [--repeats N >= 1] [--dir DIR]\n");
            return 2;
        }
    }
    if (S < 16 || S % 8 || WARMUP < 0 || REPEATS < 1) {
        fprintf(stderr, "bench_vgg19: --size must be a multiple of 8 >= 16, --repeats >= 1, --warmup >= 0\n");
        return 2;
    }
    if (ork_cuda_device_count() <= 0) { fprintf(stderr, "bench_vgg19: no CUDA device\n"); return 77; }
    O = ork_ops_table();
    TA = ork_tensor_api_table();
    make_data();
    char in_path[1024], out_path[1024];
    snprintf(in_path, sizeof in_path, "%s/vgg19_bench_in.safetensors", dir);
    snprintf(out_path, sizeof out_path, "%s/vgg19_bench_out.safetensors", dir);
    if (!write_inputs(in_path)) { fprintf(stderr, "bench_vgg19: cannot write %s\n", in_path); return 1; }
    fprintf(stderr, "bench_vgg19: %dx%d, weights and inputs in %s\n", S, S, in_path);

    result rf = {0}, rl = {0};
    if (run_features(&rf)) return 1;
    double gf = conv_gflop();
    print_json("vgg19_features", "features[:23] (conv1_1..relu4_2) fwd + bwd to the input, loss mse(feat, random)", &rf,
               2 * gf);
    if (run_loss(in_path, &rl)) return 1;
    print_json("perceptual_loss", "plugin compute + backward: x0_pred, normalise, VGG on pred (recorded) and target, "
               "3 content + 3 style (F32 Gram) terms + velocity mse", &rl, 3 * gf);

    ork_st_writer *w;
    int64_t si[4] = {1, 3, S, S}, s1[1] = {1};
    float lf = (float)rf.loss, ll = (float)rl.loss;
    int ok = ork_st_writer_new(&w) == ORK_OK &&
             ork_st_writer_add(w, "out.features.loss", ORK_F32, 1, s1, &lf, 4) == ORK_OK &&
             ork_st_writer_add(w, "out.features.grad", ORK_F32, 4, si, rf.grad, NIMG * 4) == ORK_OK &&
             ork_st_writer_add(w, "out.loss.loss", ORK_F32, 1, s1, &ll, 4) == ORK_OK &&
             ork_st_writer_add(w, "out.loss.grad", ORK_F32, 4, si, rl.grad, NIMG * 4) == ORK_OK &&
             ork_st_writer_commit(w, out_path) == ORK_OK;
    ork_st_writer_free(w);
    if (!ok) { fprintf(stderr, "bench_vgg19: cannot write %s\n", out_path); return 1; }
    if (!rf.finite || !rl.finite || !(rf.grad_l2 > 0) || !(rl.grad_l2 > 0)) {
        fprintf(stderr, "bench_vgg19: a loss or gradient is non-finite or zero (see the JSON)\n");
        return 1;
    }
    fprintf(stderr, "bench_vgg19: done; our losses and gradients in %s\n", out_path);
    for (int i = 0; i < NCONV; i++) { free(W[i]); free(Bv[i]); }
    free(rf.grad); free(rl.grad);
    free(x_img); free(feat_tgt); free(l_v); free(l_tgt); free(l_xt); free(l_x0);
    return 0;
}
