/* tests/ema/test_ema.c — the EMA of the LoRA weights (train.ema_config,
 * core/train/ema.h), issue #32 point 4:
 *  - update_ref: ork_ema_update on the CPU backend over 6 updates equals
 *    ai-toolkit's ExponentialMovingAverage.update run in PyTorch
 *    (tests/reference/ema_ref.py -> tests/fixtures/ema_ref.safetensors) bit for
 *    bit, for F32 and BF16 parameters;
 *  - saved_is_ema: `orakul run` (the quickstart's tiny model, 3 steps, F32
 *    files): with the EMA on, every tensor of the LoRA file is the state's
 *    ema.<i> and the live lora.<i> are those of the same run without the EMA
 *    (the EMA does not change training); without it the file holds the live
 *    weights; the EMA follows ema.py's formula through the run: from the
 *    weights of a decay-1 run (the start) and the files of steps 1..3 of the
 *    run without the EMA, the C formula gives the state's ema.<i> exactly;
 *  - resume: 4 steps straight == 2 + resume to 4 (LoRA files and states,
 *    bytes), F32 and BF16 weights (network.weight_dtype), and a state saved
 *    with the EMA refused by a config without it (one line);
 *  - streamed: the trainable state streamed per block (ORAKUL_STREAM_TRAINABLES=1,
 *    no clipping) gives the resident run's LoRA file, state tensors and samples, bytes,
 *    with F32 and with BF16 weights;
 *  - bad_keys: ema_decay outside [0, 1] or not a number, use_ema not a bool: refused;
 *  - samples: with decay 1 the shadow stays the initial LoRA (up = 0), so the
 *    samples at the last step are the samples before the first, bytes; the
 *    same run without the EMA samples something else. */
#include "../train/train_test_util.h"

#include "io/safetensors.h"
#include "numerics/half.h"
#include "tensor/backend.h"
#include "train/ema.h"

#include <math.h>

#ifdef ORK_EMA_GPU
#define EMA_GPU 1
#else
#define EMA_GPU 0
#endif

/* ---- ork_ema_update against the PyTorch reference ---------------------------- */

static void check_ref(ork_st_file *f, const char *pk, const char *sk, ork_dtype pdt, double decay) {
    const ork_st_tensor *P = ork_st_find(f, pk), *S = ork_st_find(f, sk);
    CU_ASSERT_FATAL(P && S && P->ndim == 2 && S->ndim == 2);
    int64_t K = P->shape[0], N = P->shape[1];
    size_t es = pdt == ORK_F32 ? 4 : 2;
    char *p = malloc((size_t)(K * N) * es);
    float *s = malloc((size_t)(K * N) * sizeof *s), *sh = malloc((size_t)N * sizeof *sh),
          *tmp = malloc((size_t)N * sizeof *tmp);
    CU_ASSERT_FATAL(p && s && sh && tmp);
    memcpy(p, P->data, (size_t)(K * N) * es);
    memcpy(s, S->data, (size_t)(K * N) * sizeof *s);
    const ork_backend *be = ork_cpu_backend();
    ork_kctx k = {.nthreads = 1};
    /* the start: the parameter as F32 */
    CU_ASSERT_FATAL(be->axpby(&k, N, 1.0f, p, pdt, 0.0f, sh, ORK_F32) == ORK_OK);
    CU_ASSERT(memcmp(sh, s, (size_t)N * sizeof *sh) == 0);
    int moved = 0;
    for (int64_t t = 1; t < K; t++) {
        CU_ASSERT_FATAL(ork_ema_update(be, &k, decay, N, p + (size_t)(t * N) * es, pdt, sh, tmp) == ORK_OK);
        int64_t bad = -1;
        for (int64_t i = 0; i < N && bad < 0; i++)
            if (memcmp(&sh[i], &s[t * N + i], sizeof *sh)) bad = i;
        if (bad >= 0) printf("\n  %s update %lld element %lld: %.9g, torch %.9g\n", sk, (long long)t, (long long)bad,
                             (double)sh[bad], (double)s[t * N + bad]);
        CU_ASSERT(bad < 0);
        moved += sh[0] != s[0];
    }
    CU_ASSERT(moved > 0); /* the shadow did move */
    free(p); free(s); free(sh); free(tmp);
}

static void test_update_ref(void) {
    char path[1024];
    tt_fmt(path, sizeof path, "%s/tests/fixtures/ema_ref.safetensors", ORK_SOURCE_DIR);
    ork_st_file *f = NULL;
    CU_ASSERT_FATAL(ork_st_open(path, &f) == ORK_OK);
    const char *d = ork_st_meta(f, "decay");
    CU_ASSERT_FATAL(d != NULL);
    double decay = strtod(d, NULL);
    CU_ASSERT(decay == 0.99);
    check_ref(f, "p_f32", "s_f32", ORK_F32, decay);
    check_ref(f, "p_bf16", "s_bf16", ORK_BF16, decay);
    ork_st_close(f);
}

/* ---- runs ------------------------------------------------------------------------ */

/* The template's config with ema_config (decay < 0: none), max_grad_norm, and an
 * optional sample: section appended. */
static int write_cfg(const char *path, const tt_cfg *c, double decay, const char *max_norm, int samples) {
    if (tt_write_config(path, c) != 0) return -1;
    char *t = tt_read_all(path, NULL);
    if (!t) return -1;
    size_t cap = strlen(t) + 1024, o = 0;
    char *out = malloc(cap);
    if (!out) { free(t); return -1; }
    const char *tr = strstr(t, "      train:\n"), *mg = strstr(t, "max_grad_norm: 1.0"), *dv = strstr(t, "device: cpu");
    if (!tr || !mg) { free(t); free(out); return -1; }
    for (const char *p = t; *p;) {
        if (p == tr) {
            o += (size_t)snprintf(out + o, cap - o, "      train:\n");
            if (decay >= 0)
                o += (size_t)snprintf(out + o, cap - o, "        ema_config:\n          use_ema: true\n"
                                      "          ema_decay: %.17g\n", decay);
            p += strlen("      train:\n");
        } else if (p == dv && EMA_GPU) { /* the GPU variant (ema_cuda) */
            o += (size_t)snprintf(out + o, cap - o, "device: cuda:0");
            p += strlen("device: cpu");
        } else if (p == mg) {
            o += (size_t)snprintf(out + o, cap - o, "max_grad_norm: %s", max_norm);
            p += strlen("max_grad_norm: 1.0");
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = 0;
    if (samples)
        o += (size_t)snprintf(out + o, cap - o, "      sample:\n        sample_every: 3\n        width: 32\n"
                              "        height: 24\n        sample_steps: 3\n        seed: 1\n        guidance_scale: 1\n"
                              "        prompts:\n          - one\n");
    int r = tt_write_all(path, out);
    free(t);
    free(out);
    return r;
}

/* `orakul run` of a fresh config in <root>/<name>.yaml with output <root>/<name>. */
static int run_one(const char *root, const char *data, const char *name, int steps, int every, const char *wdt,
                   double decay, const char *max_norm, int samples, int streamed) {
    char out[1100], cfg[1100], log[1100];
    tt_fmt(out, sizeof out, "%s/%s", root, name);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, name);
    tt_fmt(log, sizeof log, "%s/%s.log", root, name);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = steps;
    c.save_every = every;
    c.keep = 10;
    c.dtype = "float32";
    c.wdt = wdt;
    if (write_cfg(cfg, &c, decay, max_norm, samples) != 0) return -1;
    if (streamed) setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    int rc = tt_run(cfg, log, 150);
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    return rc;
}

static ork_st_file *open_out(const char *root, const char *name, const char *leaf) {
    char p[1400];
    tt_fmt(p, sizeof p, "%s/%s/quickstart/quickstart_%s.safetensors", root, name, leaf);
    ork_st_file *f = NULL;
    return ork_st_open(p, &f) == ORK_OK ? f : NULL;
}

static int same_tensor(const ork_st_tensor *a, const ork_st_tensor *b) {
    return a && b && a->nbytes == b->nbytes && a->dtype == b->dtype && !memcmp(a->data, b->data, a->nbytes);
}

/* The tensor of file f holding exactly t's bytes (a LoRA file's keys against the state's indices). */
static const ork_st_tensor *find_same(ork_st_file *f, const ork_st_tensor *t) {
    for (size_t i = 0; i < ork_st_count(f); i++)
        if (same_tensor(ork_st_at(f, i), t)) return ork_st_at(f, i);
    return NULL;
}

static int n_state_params(ork_st_file *st) {
    const char *v = ork_st_meta(st, "tensors");
    return v ? atoi(v) : 0;
}

static void test_saved_is_ema(void) {
    char root[1024], data[1100];
    CU_ASSERT_FATAL(tt_setup("ema_saved", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    const double decay = 0.75;
    CU_ASSERT_FATAL(run_one(root, data, "ema", 3, 1, "fp32", decay, "1.0", 0, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "live", 3, 1, "fp32", -1, "1.0", 0, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "start", 1, 1, "fp32", 1.0, "1.0", 0, 0) == 0);
    ork_st_file *es = open_out(root, "ema", "state"), *el = open_out(root, "ema", "000000003"),
                *ls = open_out(root, "live", "state"), *l1 = open_out(root, "live", "000000001"),
                *l2 = open_out(root, "live", "000000002"), *l3 = open_out(root, "live", "000000003"),
                *s0 = open_out(root, "start", "000000001");
    CU_ASSERT_FATAL(es && el && ls && l1 && l2 && l3 && s0);
    int np = n_state_params(es);
    CU_ASSERT_FATAL(np > 0 && np == n_state_params(ls));
    CU_ASSERT(ork_st_find(ls, "ema.0") == NULL);
    CU_ASSERT(ork_st_meta(el, "orakul_ema_decay") != NULL && ork_st_meta(l3, "orakul_ema_decay") == NULL);
    int differs = 0;
    for (int i = 0; i < np; i++) {
        char k[64];
        tt_fmt(k, sizeof k, "lora.%d", i);
        const ork_st_tensor *live = ork_st_find(es, k), *live_b = ork_st_find(ls, k);
        CU_ASSERT_FATAL(live && live_b);
        CU_ASSERT(same_tensor(live, live_b));        /* training is the same with the EMA */
        CU_ASSERT(find_same(l3, live_b) != NULL);    /* without it the file holds the live weights */
        tt_fmt(k, sizeof k, "ema.%d", i);
        const ork_st_tensor *sh = ork_st_find(es, k);
        CU_ASSERT_FATAL(sh && sh->dtype == ORK_F32);
        CU_ASSERT(find_same(el, sh) != NULL);        /* with it the file holds the shadows */
        /* ema.py's update in C over steps 1..3 from the start (the decay-1 run's file) */
        const ork_st_tensor *key3 = find_same(l3, live_b);
        if (!key3) continue;
        const ork_st_tensor *w[4] = {ork_st_find(s0, key3->name), ork_st_find(l1, key3->name),
                                     ork_st_find(l2, key3->name), key3};
        CU_ASSERT_FATAL(w[0] && w[1] && w[2]);
        size_t n = sh->nbytes / 4;
        float *s = malloc(n * sizeof *s), *p = malloc(n * sizeof *p), *want = malloc(n * sizeof *want);
        CU_ASSERT_FATAL(s && p && want);
        memcpy(s, w[0]->data, n * 4);
        const float omd = (float)(1.0 - decay);
        for (int t = 1; t <= 3; t++) {
            memcpy(p, w[t]->data, n * 4);
            for (size_t e = 0; e < n; e++) {
                volatile float tmp = s[e] - p[e];
                tmp = tmp * omd;
                s[e] = s[e] - tmp;
            }
        }
        memcpy(want, sh->data, n * 4);
        CU_ASSERT(memcmp(s, want, n * 4) == 0);
        differs += memcmp(want, live->data, n * 4) != 0;
        free(s); free(p); free(want);
    }
    CU_ASSERT(differs > 0); /* the shadows are not the live weights */
    ork_st_close(es); ork_st_close(el); ork_st_close(ls); ork_st_close(l1); ork_st_close(l2); ork_st_close(l3);
    ork_st_close(s0);
    tt_rm_rf(root);
}

/* 4 straight == 2 + resume to 4 (files and state, bytes). */
static void resume_case(const char *wdt) {
    char root[1024], data[1100];
    CU_ASSERT_FATAL(tt_setup("ema_resume", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    CU_ASSERT_FATAL(run_one(root, data, "straight", 4, 2, wdt, 0.9, "1.0", 0, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "resumed", 2, 2, wdt, 0.9, "1.0", 0, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "resumed", 4, 2, wdt, 0.9, "1.0", 0, 0) == 0);
    char a[1100], b[1100];
    tt_fmt(a, sizeof a, "%s/straight", root);
    tt_fmt(b, sizeof b, "%s/resumed", root);
    CU_ASSERT(tt_same_output(a, b, "000000004"));
    CU_ASSERT(tt_same_output(a, b, "state"));
    char log[1200];
    tt_fmt(log, sizeof log, "%s/resumed.log.err", root);
    CU_ASSERT(tt_file_has(log, "resuming from"));
    /* the same state under a config without the EMA: refused, one line */
    char out[1100], cfg[1100], lg[1100];
    tt_fmt(out, sizeof out, "%s/resumed", root);
    tt_fmt(cfg, sizeof cfg, "%s/off.yaml", root);
    tt_fmt(lg, sizeof lg, "%s/off.log", root);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = 6;
    c.save_every = 2;
    c.keep = 10;
    c.dtype = "float32";
    c.wdt = wdt;
    CU_ASSERT_FATAL(write_cfg(cfg, &c, -1, "1.0", 0) == 0);
    CU_ASSERT(tt_run_q(cfg, lg, 60, 1) != 0);
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", lg);
    CU_ASSERT(tt_file_has(e, "train.ema_config.use_ema"));
    tt_rm_rf(root);
}
static void test_resume_f32(void) { resume_case("fp32"); }
static void test_resume_bf16(void) { resume_case("bf16"); }

/* The PNG files under <root>/<name>/quickstart/samples whose name holds tag. */
static int find_sample(const char *root, const char *name, const char *tag, char *out, size_t n) {
    char dir[1200];
    tt_fmt(dir, sizeof dir, "%s/%s/quickstart/samples", root, name);
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, tag) && strstr(e->d_name, ".png") && !strstr(e->d_name, "grid") && !found++)
            tt_fmt(out, n, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return found;
}

static void streamed_case(const char *wdt) {
    char root[1024], data[1100];
    CU_ASSERT_FATAL(tt_setup("ema_stream", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    CU_ASSERT_FATAL(run_one(root, data, "resident", 3, 3, wdt, 0.8, "0", 1, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "streamed", 3, 3, wdt, 0.8, "0", 1, 1) == 0);
    char a[1100], b[1100], log[1200];
    tt_fmt(a, sizeof a, "%s/resident", root);
    tt_fmt(b, sizeof b, "%s/streamed", root);
    tt_fmt(log, sizeof log, "%s/streamed.log.err", root);
    CU_ASSERT(tt_file_has(log, "trainable state streamed per block"));
    CU_ASSERT(tt_same_output(a, b, "000000003"));
    /* the states' tensors (their metadata differ: the streamed one keeps prev_norm) */
    ork_st_file *sa = open_out(root, "resident", "state"), *sb = open_out(root, "streamed", "state");
    CU_ASSERT_FATAL(sa && sb);
    CU_ASSERT(ork_st_count(sa) == ork_st_count(sb) && ork_st_count(sa) == 3 * (size_t)n_state_params(sa));
    for (size_t i = 0; i < ork_st_count(sa); i++) {
        const ork_st_tensor *t = ork_st_at(sa, i);
        CU_ASSERT(same_tensor(t, ork_st_find(sb, t->name)));
    }
    ork_st_close(sa);
    ork_st_close(sb);
    /* the samples at step 3, drawn with the shadows swapped into the records */
    char fa[1400], fb[1400];
    CU_ASSERT_FATAL(find_sample(root, "resident", "000000003", fa, sizeof fa) == 1);
    CU_ASSERT_FATAL(find_sample(root, "streamed", "000000003", fb, sizeof fb) == 1);
    CU_ASSERT(tt_same_bytes(fa, fb));
    tt_rm_rf(root);
}

static void test_streamed(void) { streamed_case("fp32"); }
static void test_streamed_bf16(void) { streamed_case("bf16"); }

static void test_samples(void) {
    char root[1024], data[1100];
    CU_ASSERT_FATAL(tt_setup("ema_samples", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    CU_ASSERT_FATAL(run_one(root, data, "frozen", 3, 3, "fp32", 1.0, "1.0", 1, 0) == 0);
    CU_ASSERT_FATAL(run_one(root, data, "live", 3, 3, "fp32", -1, "1.0", 1, 0) == 0);
    char f0[1400], f3[1400], l0[1400], l3[1400];
    CU_ASSERT_FATAL(find_sample(root, "frozen", "000000000", f0, sizeof f0) == 1);
    CU_ASSERT_FATAL(find_sample(root, "frozen", "000000003", f3, sizeof f3) == 1);
    CU_ASSERT_FATAL(find_sample(root, "live", "000000000", l0, sizeof l0) == 1);
    CU_ASSERT_FATAL(find_sample(root, "live", "000000003", l3, sizeof l3) == 1);
    CU_ASSERT(tt_same_bytes(f0, f3));  /* the shadow is still the start */
    CU_ASSERT(tt_same_bytes(f0, l0));
    CU_ASSERT(!tt_same_bytes(l0, l3)); /* the live LoRA has moved */
    tt_rm_rf(root);
}

/* ema_decay outside [0, 1] or not a number, use_ema not a bool: refused with the key's place */
static void test_bad_keys(void) {
    char root[1024], data[1100];
    CU_ASSERT_FATAL(tt_setup("ema_bad", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    static const char *const bad[][2] = {{"ema_decay: 0.5", "ema_decay: 1.5"}, {"ema_decay: 0.5", "ema_decay: fast"},
                                         {"use_ema: true", "use_ema: maybe"}, {"ema_decay: 0.5", "ema_decay: [1]"}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        char out[1100], cfg[1100], lg[1100], e[1200];
        tt_fmt(out, sizeof out, "%s/bad%zu", root, b);
        tt_fmt(cfg, sizeof cfg, "%s/bad%zu.yaml", root, b);
        tt_fmt(lg, sizeof lg, "%s/bad%zu.log", root, b);
        tt_cfg c = tt_cfg_default(out, data);
        CU_ASSERT_FATAL(write_cfg(cfg, &c, 0.5, "1.0", 0) == 0);
        char *t = tt_read_all(cfg, NULL), *at = t ? strstr(t, bad[b][0]) : NULL;
        CU_ASSERT_FATAL(at != NULL);
        char fixed[8192];
        tt_fmt(fixed, sizeof fixed, "%.*s%s%s", (int)(at - t), t, bad[b][1], at + strlen(bad[b][0]));
        free(t);
        CU_ASSERT_FATAL(tt_write_all(cfg, fixed) == 0);
        CU_ASSERT(tt_run_q(cfg, lg, 60, 1) == 2);
        tt_fmt(e, sizeof e, "%s.err", lg);
        CU_ASSERT(tt_file_has(e, b == 2 ? "train.ema_config.use_ema" : "train.ema_config.ema_decay"));
        CU_ASSERT(tt_file_has(e, "bad") && tt_file_has(e, ".yaml:"));
    }
    tt_rm_rf(root);
}

#ifndef ORK_EMA_GPU
static const ork_test_case cases[] = {{"update_ref", test_update_ref},
                                      {"bad_keys", test_bad_keys},
                                      {"saved_is_ema", test_saved_is_ema},
                                      {"resume_f32", test_resume_f32},
                                      {"resume_bf16", test_resume_bf16},
                                      {"streamed", test_streamed},
                                      {"streamed_bf16", test_streamed_bf16},
                                      {"samples", test_samples},
                                      {NULL, NULL}};
ORK_TEST_MAIN("ema", NULL, NULL, cases)
#else
/* ema_cuda: the runs on cuda:0 (the update is CUDA's axpby; the C formula's exact
 * bits are the CPU's, so saved_is_ema and update_ref stay CPU cases) */
static const ork_test_case cases[] = {{"resume_f32", test_resume_f32},
                                      {"resume_bf16", test_resume_bf16},
                                      {"streamed", test_streamed},
                                      {"streamed_bf16", test_streamed_bf16},
                                      {"samples", test_samples},
                                      {NULL, NULL}};
#include "cuda/cuda_ctx.h" /* ork_cuda_device_count */
int main(void) {
    (void)test_update_ref, (void)test_saved_is_ema, (void)test_bad_keys; /* CPU cases */
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("ema_cuda", NULL, NULL, cases);
}
#endif
