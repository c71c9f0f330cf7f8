/* test_lora_merge.c — our LoRA file, read back and merged into the base
 * weights (W' = W + (alpha / rank) · up · down), gives the same model output
 * as the model run with the adapter attached (ops->linear's
 * y = x·Wᵀ + b + scale·(x·downᵀ)·upᵀ).
 *
 * Built against the core APIs like the trainer builds its job: the plugin
 * registry over ORK_PLUGIN_DIR, the quickstart model (tests/train/configs/
 * tiny.yaml, preset:custom, random frozen weights), the weight store, a LoRA
 * network loaded with ork_lora_load, ork_runner_forward on the CPU in F32.
 * The merge reads the file independently (ork_st_open) and adds the product
 * in double on the host.
 *
 * Two LoRA files:
 *  - random: every down/up of a fresh network set to seeded random values of
 *    a size that moves the output clearly (alpha 8, rank 16: scale 0.5), saved
 *    F32 with ork_lora_save, loaded into a second network;
 *  - trained: the F16 file `orakul run` writes after 12 steps of the quickstart.
 *
 * Tolerance |merged - adapter| <= 1e-4 + 1e-4·|adapter|, elementwise. Both
 * sides are F32 computations of the same function in a different order: the
 * adapter path rounds x·Wᵀ and the rank-16 detour separately, the merged path
 * rounds W' once (|ΔW| <~ |W|, so ≈ 1 ulp of W) and one dot product of length
 * K <= 480. Per linear that is a few ulps of relative error (1e-7 .. 1e-6);
 * through 4 blocks with layer norms, modulation and softmax it stays far below
 * 1e-4 (the measured maximum is printed). The test also asserts the adapter
 * moves the output by more than 100x that tolerance, so it cannot pass with
 * a LoRA that does nothing. */
#include "train_test_util.h"
#include "model_test_util.h"

#include "io/safetensors.h"
#include "train/lora.h"

typedef ork_test_model model_ctx;

static char g_root[1024], g_cfg[1200];

/* The quickstart model with its base weights in an F32 weight store on the CPU. */
static ork_status model_open(model_ctx *m) { return ork_test_model_open(m, g_cfg, 0); }

static ork_status lora_new(model_ctx *m, uint64_t seed, ork_lora_net **out) {
    const ork_network_config *nc = &ork_config_process(m->cfg)->network;
    ork_lora_opts lo = {.rank = nc->linear, .alpha = nc->linear_alpha, .param_dt = ORK_F32, .seed = seed};
    return ork_lora_create(m->alloc, m->be, &m->g->k, m->ws, &m->info, &lo, out);
}

enum { HT = 4, WT = 3 }; /* a non-square token grid */

/* Forward on fixed seeded inputs; out: [HT*WT*C] host copy of the prediction (1, N, C). */
static ork_status forward(model_ctx *m, float *out) { return ork_test_model_forward(m, HT, WT, out); }

/* W += (alpha/rank)·up·down for every module in the file (kohya keys), on the
 * store's F32 host memory (CPU backend). Returns how many modules were merged. */
static int merge_file(model_ctx *m, ork_lora_net *net, const char *path) {
    ork_st_file *f;
    if (ork_st_open(path, &f) != ORK_OK) return -1;
    int merged = 0;
    for (int i = 0; i < ork_lora_count(net); i++) {
        const char *module = ork_lora_module(net, i);
        char prefix[256], key[320], wname[256];
        ork_lora_key(module, m->info.lora_format, prefix, sizeof prefix);
        tt_fmt(key, sizeof key, "%s.lora_down.weight", prefix);
        const ork_st_tensor *d = ork_st_find(f, key);
        tt_fmt(key, sizeof key, "%s.lora_up.weight", prefix);
        const ork_st_tensor *u = ork_st_find(f, key);
        tt_fmt(key, sizeof key, "%s.alpha", prefix);
        const ork_st_tensor *a = ork_st_find(f, key);
        tt_fmt(wname, sizeof wname, "%s.weight", module);
        ork_tensor *w = ork_wstore_find(m->ws, wname);
        if (!d || !u || !a || !w || w->dtype != ORK_F32 || w->ndim != 2) continue;
        int64_t out = w->shape[0], in = w->shape[1], r = d->shape[0];
        if (d->shape[1] != in || u->shape[0] != out || u->shape[1] != r) continue;
        float *dh = malloc((size_t)(r * in) * sizeof *dh), *uh = malloc((size_t)(out * r) * sizeof *uh), alpha = 0;
        if (dh && uh && ork_st_read_f32(d, dh) == ORK_OK && ork_st_read_f32(u, uh) == ORK_OK &&
            ork_st_read_f32(a, &alpha) == ORK_OK) {
            double scale = (double)alpha / (double)r;
            float *W = ork_tensor_data(w);
            for (int64_t o = 0; o < out; o++)
                for (int64_t k = 0; k < in; k++) {
                    double acc = 0;
                    for (int64_t q = 0; q < r; q++) acc += (double)uh[o * r + q] * (double)dh[q * in + k];
                    W[o * in + k] = (float)((double)W[o * in + k] + scale * acc);
                }
            merged++;
        }
        free(dh);
        free(uh);
    }
    ork_st_close(f);
    return merged;
}

/* base, adapter, merged forwards for one LoRA file; the asserts. */
static void check_merge(const char *path, double min_effect) {
    model_ctx m;
    ork_status s = model_open(&m);
    CU_ASSERT_FATAL(s == ORK_OK);
    size_t n = (size_t)HT * WT * m.info.token_channels;
    float *y0 = malloc(n * sizeof *y0), *y1 = malloc(n * sizeof *y1), *y2 = malloc(n * sizeof *y2);
    CU_ASSERT_FATAL(y0 && y1 && y2);
    CU_ASSERT_FATAL(forward(&m, y0) == ORK_OK); /* base model, no adapter */

    ork_lora_net *net = NULL;
    CU_ASSERT_FATAL(lora_new(&m, 99, &net) == ORK_OK); /* initial values differ from the file's */
    CU_ASSERT_FATAL(ork_lora_load(net, path, m.info.lora_format) == ORK_OK);
    CU_ASSERT_FATAL(forward(&m, y1) == ORK_OK); /* adapter attached */

    /* detach: destroying the network clears every weight's ->lora */
    int nm = ork_lora_count(net);
    int merged = merge_file(&m, net, path);
    ork_lora_destroy(net);
    int attached = 0;
    for (int i = 0; i < ork_wstore_count(m.ws); i++) attached += ork_wstore_at(m.ws, i)->lora != NULL;
    CU_ASSERT(attached == 0);
    CU_ASSERT(merged == nm && nm == 26);
    CU_ASSERT_FATAL(forward(&m, y2) == ORK_OK); /* merged weights, no adapter */

    double max_err = 0, max_effect = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)y2[i] - (double)y1[i]);
        if (e > max_err) max_err = e;
        double eff = fabs((double)y1[i] - (double)y0[i]);
        if (eff > max_effect) max_effect = eff;
        if (!isfinite(y1[i]) || !ork_close(y2[i], y1[i], 1e-4, 1e-4)) {
            if (!bad) printf("  first mismatch at %zu: adapter %.8g merged %.8g\n", i, y1[i], y2[i]);
            bad++;
        }
    }
    printf("  %s: max |merged - adapter| %.3g, max |adapter - base| %.3g over %zu outputs\n",
           strrchr(path, '/') + 1, max_err, max_effect, n);
    CU_ASSERT(bad == 0);
    CU_ASSERT(max_effect > min_effect);
    free(y0); free(y1); free(y2);
    ork_test_model_free(&m);
}

static void test_merge_random(void) {
    char path[1400];
    tt_fmt(path, sizeof path, "%s/random_lora.safetensors", g_root);
    model_ctx m;
    CU_ASSERT_FATAL(model_open(&m) == ORK_OK);
    ork_lora_net *net = NULL;
    CU_ASSERT_FATAL(lora_new(&m, 5, &net) == ORK_OK);
    ork_rng r;
    ork_rng_init(&r, 11, ORK_RNG_INIT);
    for (int i = 0; i < ork_lora_count(net); i++) {
        ork_lora *l = ork_lora_at(net, i);
        /* down keeps its Kaiming init; up ~ N(0, 0.2²): scale·up·down comparable to the base weights */
        ork_rng_normal_f32(&r, ork_tensor_data(l->up), ork_tensor_numel(l->up));
        float *u = ork_tensor_data(l->up);
        for (int64_t q = 0; q < ork_tensor_numel(l->up); q++) u[q] *= 0.2f;
    }
    const char *meta[] = {"ss_network_dim", "16", NULL, NULL};
    CU_ASSERT_FATAL(ork_lora_save(net, path, m.info.lora_format, ORK_F32, meta) == ORK_OK);
    ork_lora_destroy(net);
    ork_test_model_free(&m);
    check_merge(path, 2e-2);
}

static void test_merge_trained(void) {
    char out[1100], data[1100], cfg[1100], log[1100], path[1400];
    tt_fmt(out, sizeof out, "%s/out", g_root);
    tt_fmt(data, sizeof data, "%s/data", g_root);
    tt_fmt(cfg, sizeof cfg, "%s/trained.yaml", g_root);
    tt_fmt(log, sizeof log, "%s/trained", g_root);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = 12;
    c.save_every = 12;
    c.alpha = 8;
    c.dtype = "float16";
    CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);
    CU_ASSERT_FATAL(tt_run(cfg, log, 120) == 0);
    tt_fmt(path, sizeof path, "%s/quickstart/quickstart_000000012.safetensors", out);
    check_merge(path, 1e-3);
}

static int setup(void) {
    if (tt_setup("merge", g_root, sizeof g_root) != 0) return 1;
    char out[1100], data[1100];
    tt_fmt(out, sizeof out, "%s/unused", g_root);
    tt_fmt(data, sizeof data, "%s/data", g_root);
    tt_fmt(g_cfg, sizeof g_cfg, "%s/model.yaml", g_root);
    tt_cfg c = tt_cfg_default(out, data);
    c.alpha = 8; /* scale 0.5: the file's alpha must be honoured */
    return tt_write_config(g_cfg, &c) == 0 ? 0 : 1;
}
static int teardown(void) { tt_rm_rf(g_root); return 0; }

static const ork_test_case cases[] = {
    {"merge_random_f32", test_merge_random},
    {"merge_trained_f16", test_merge_trained},
    {NULL, NULL},
};
ORK_TEST_MAIN("lora_merge", setup, teardown, cases)
