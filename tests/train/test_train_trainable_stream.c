/* test_train_trainable_stream.c — `orakul run` with the trainable state streamed per block
 * (docs/streaming.md §4, stream/trainable_stream.h wired into train.c) on the CPU with the
 * quickstart's model; ORAKUL_STREAM_TRAINABLES=1 makes a plan that fits
 * stream the trainable state anyway (the test-only switch):
 *  - streamed_equals_resident: max_grad_norm 0, 4 steps: the printed losses
 *    and the LoRA files of steps 2 and 4 are bit-identical to the resident run;
 *  - streamed_resume: 2 steps, then resume to 4 == 4 straight (losses, LoRA
 *    and state file bytes), with max_grad_norm 0 and with clipping on (the
 *    previous step's norm travels in the state file's "prev_norm");
 *  - accumulation_refused: gradient_accumulation_steps 2 is refused with one
 *    line naming the key.
 * Built a second time with TT_GPU (train_trainable_stream_cuda, label gpu): the same on
 * device cuda:0, where BF16 activations make the forward visits read BF16
 * shadows of the F32 LoRA parameters — bit-identical to the resident run is
 * the check that the shadows round as the linear op's own cast. */
#include "train_test_util.h"
#include "io/png_writer.h"

/* The template's config with max_grad_norm and gradient_accumulation_steps set,
 * and `model_keys` (lines, each "key: value\n") added to the model section when
 * not NULL. */
static int write_cfg_m(const char *path, const tt_cfg *c, const char *max_norm, int accum, const char *model_keys) {
    if (tt_write_config(path, c) != 0) return -1;
    char *t = tt_read_all(path, NULL);
    if (!t) return -1;
    size_t cap = strlen(t) + 256 + (model_keys ? 2 * strlen(model_keys) : 0), o = 0;
    char *out = malloc(cap);
    if (!out) { free(t); return -1; }
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "max_grad_norm:"))
            o += (size_t)tt_fmt(out + o, cap - o, "        max_grad_norm: %s\n", max_norm);
        else if (strstr(line, "gradient_accumulation_steps:"))
            o += (size_t)tt_fmt(out + o, cap - o, "        gradient_accumulation_steps: %d\n", accum);
        else if (model_keys && !strcmp(line, "      model:")) {
            o += (size_t)tt_fmt(out + o, cap - o, "%s\n", line);
            for (const char *k = model_keys; *k;) {
                const char *nl = strchr(k, '\n');
                int len = nl ? (int)(nl - k) : (int)strlen(k);
                o += (size_t)tt_fmt(out + o, cap - o, "        %.*s\n", len, k);
                k += len + (nl != NULL);
            }
        }
#ifdef TT_GPU
        else if (strstr(line, "device: cpu"))
            o += (size_t)tt_fmt(out + o, cap - o, "      device: cuda:0\n");
#endif
        else
            o += (size_t)tt_fmt(out + o, cap - o, "%s\n", line);
    }
    free(t);
    int r = tt_write_all(path, out);
    free(out);
    return r;
}
static int write_cfg(const char *path, const tt_cfg *c, const char *max_norm, int accum) {
    return write_cfg_m(path, c, max_norm, accum, NULL);
}

/* Run one config, streamed or resident; 0 on exit 0 (and, streamed, the log says so).
 * `bf16_params`: the LoRA parameters are BF16 themselves, so no shadows.
 * `by_config`: the config asks for streaming itself (no test switch). */
static int run_c(const char *cfg, const char *log, int streamed, int bf16_params, int by_config) {
    if (streamed && !by_config) setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    else unsetenv("ORAKUL_STREAM_TRAINABLES");
    int rc = tt_run(cfg, log, 150);
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    if (rc == 0 && streamed != tt_file_has(e, "trainable state streamed per block")) {
        printf("  %s: %s\n", log, streamed ? "did not stream the trainable state" : "streamed unasked");
        return -1;
    }
#ifdef TT_GPU
    /* BF16 activations: the forward visits read BF16 shadows (stream/trainable_stream.h) */
    if (rc == 0 && streamed && (!bf16_params) != (tt_file_has(e, "BF16 shadows for the forward") != 0)) {
        printf("  %s: streamed %s BF16 shadows on CUDA\n", log, bf16_params ? "with" : "without");
        return -1;
    }
#else
    (void)bf16_params;
#endif
    return rc;
}
static int run_w(const char *cfg, const char *log, int streamed, int bf16_params) {
    return run_c(cfg, log, streamed, bf16_params, 0);
}
static int run(const char *cfg, const char *log, int streamed) { return run_w(cfg, log, streamed, 0); }

/* Streamed == resident, 4 steps, no clipping; `wdt`: network.weight_dtype (NULL: F32). */
static void equals_resident_case(const char *wdt) {
    tt_ab q;
    CU_ASSERT_FATAL(tt_ab_setup(&q, "tstream", "resident", "streamed", 4, 2, 4) == 0);
    char *oa = q.oa, *ob = q.ob, *ca = q.ca, *cb = q.cb;
    tt_cfg c = q.c;
    if (wdt) c.wdt = wdt;
    CU_ASSERT_FATAL(write_cfg(ca, &c, "0", 1) == 0);
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg(cb, &c, "0", 1) == 0);
    int bf16 = wdt != NULL && strstr(wdt, "bf") != NULL;
    CU_ASSERT_FATAL(run_w(ca, oa, 0, bf16) == 0);
    CU_ASSERT_FATAL(run_w(cb, ob, 1, bf16) == 0);
    CU_ASSERT(tt_same_losses(oa, 0, ob, 4));
    CU_ASSERT(tt_same_output(oa, ob, "000000002"));
    CU_ASSERT(tt_same_output(oa, ob, "000000004"));
    tt_rm_rf(q.root);
}
static void test_streamed_equals_resident(void) { equals_resident_case(NULL); }
/* BF16 LoRA parameters updated with stochastic rounding (NUMERICS.md §4): the
 * per-block step must draw the same random bits per element as the whole step. */
static void test_streamed_equals_resident_bf16(void) { equals_resident_case("bf16"); }

/* model.stream_trainable_state: always with a budget the resident plan fits:
 * the plan streams the trainable state (no test switch) and the run equals the
 * resident one; without a budget the key is refused with its file:line:col;
 * never with a budget that fits changes nothing. */
static void test_stream_trainable_state_key(void) {
    tt_ab q;
    char cc[1100], oc[1100], p[1200];
    CU_ASSERT_FATAL(tt_ab_setup(&q, "tstream_key", "resident", "always", 3, 3, 2) == 0);
    char *root = q.root, *oa = q.oa, *ob = q.ob, *ca = q.ca, *cb = q.cb;
    tt_fmt(oc, sizeof oc, "%s/nobudget", root);
    tt_fmt(cc, sizeof cc, "%s/nobudget.yaml", root);
    tt_cfg c = q.c;
    CU_ASSERT_FATAL(write_cfg_m(ca, &c, "0", 1, "vram_budget_gb: 64\nstream_trainable_state: never\n") == 0);
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg_m(cb, &c, "0", 1, "vram_budget_gb: 64\nstream_trainable_state: always\n") == 0);
    c.out = oc;
    CU_ASSERT_FATAL(write_cfg_m(cc, &c, "0", 1, "stream_trainable_state: always\n") == 0);
    CU_ASSERT_FATAL(run(ca, oa, 0) == 0); /* never: resident, as the plan fits */
    CU_ASSERT_FATAL(run_c(cb, ob, 1, 0, 1) == 0); /* always: streamed without ORAKUL_STREAM_TRAINABLES */
    CU_ASSERT(tt_same_losses(oa, 0, ob, 3));
    CU_ASSERT(tt_same_output(oa, ob, "000000003"));
    int rc = tt_run_q(cc, oc, 60, 1);
    CU_ASSERT_EQUAL(rc, 2);
    tt_fmt(p, sizeof p, "%s.err", oc);
    char *e = tt_read_all(p, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT(tt_located(e, cc, tt_line_of(cc, "stream_trainable_state: always")));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "stream_trainable_state always: it needs model.vram_budget_gb"));
    free(e);
    tt_rm_rf(root);
}

/* model.stream_compression reaches the streamer from the config: every
 * transformer block streamed (layer_offloading 100%) with coding asked for
 * gives the resident run's losses and LoRA, and the log says what travelled
 * coded — on the CPU nothing (F32 weights do not shrink: all raw). */
static void test_stream_compression_key(void) {
    tt_ab q;
    char p[1200];
    CU_ASSERT_FATAL(tt_ab_setup(&q, "tstream_codec", "resident", "coded", 3, 3, 2) == 0);
    char *oa = q.oa, *ob = q.ob, *ca = q.ca, *cb = q.cb;
    tt_cfg c = q.c;
    CU_ASSERT_FATAL(write_cfg(ca, &c, "0", 1) == 0);
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg_m(cb, &c, "0", 1,
                                "layer_offloading: true\nlayer_offloading_transformer_percent: 1.0\n"
                                "stream_compression: always\n") == 0);
    CU_ASSERT_FATAL(run(ca, oa, 0) == 0);
    CU_ASSERT_FATAL(run(cb, ob, 0) == 0);
    CU_ASSERT(tt_same_losses(oa, 0, ob, 3));
    CU_ASSERT(tt_same_output(oa, ob, "000000003"));
    tt_fmt(p, sizeof p, "%s.err", ob);
    CU_ASSERT(tt_file_has(p, "streaming "));
#ifdef TT_GPU
    CU_ASSERT(tt_file_has(p, "travel coded (lossless") || tt_file_has(p, "all travel raw"));
#else
    CU_ASSERT(tt_file_has(p, "all travel raw"));
#endif
    tt_rm_rf(q.root);
}

/* The LoRA gradients lent to the streamer between backward passes (train.c
 * setup_grad_pool, stream/streamer.h ork_streamer_lend): every transformer
 * block streamed, rank 64 (its gradients hold a block), clipping on, with and
 * without gradient accumulation — the resident run's losses, LoRA files and
 * state exactly, and the log says loads went through the lent memory. */
static void lent_case(int accum) {
    tt_ab q;
    char p[1200];
    CU_ASSERT_FATAL(tt_ab_setup(&q, "tstream_lend", "resident", "lent", 4, 2, 4) == 0);
    char *oa = q.oa, *ob = q.ob, *ca = q.ca, *cb = q.cb;
    tt_cfg c = q.c;
    CU_ASSERT_FATAL(write_cfg(ca, &c, "0.02", accum) == 0);
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg_m(cb, &c, "0.02", accum,
                                "layer_offloading: true\nlayer_offloading_transformer_percent: 1.0\n"
                                "stream_compression: always\n") == 0); /* coded: the staging buffer takes copies ahead */
    for (int k = 0; k < 2; k++) { /* rank 64 in both */
        const char *f = k ? cb : ca;
        char *t = tt_read_all(f, NULL), *r = t ? strstr(t, "linear: 16") : NULL;
        CU_ASSERT_FATAL(r != NULL);
        memcpy(r, "linear: 64", 10);
        CU_ASSERT_FATAL(tt_write_all(f, t) == 0);
        free(t);
    }
    CU_ASSERT_FATAL(run(ca, oa, 0) == 0);
    CU_ASSERT_FATAL(run(cb, ob, 0) == 0);
    CU_ASSERT(tt_same_losses(oa, 0, ob, 4));
    CU_ASSERT(tt_same_output(oa, ob, "000000002"));
    CU_ASSERT(tt_same_output(oa, ob, "000000004"));
    CU_ASSERT(tt_same_output(oa, ob, "state"));
    tt_fmt(p, sizeof p, "%s.err", ob);
    CU_ASSERT(tt_file_has(p, "carry the forward's loads"));
    char *e = tt_read_all(p, NULL), *l = e ? strstr(e, "blocks per step (") : NULL;
    double lent = l ? atof(l + strlen("blocks per step (")) : 0;
    CU_ASSERT(lent > 0);
    if (!(lent > 0)) printf("  %s: no load went through the lent gradients' memory\n", ob);
    /* the next forward's first lent load, copied ahead into the staging buffer at each step's end */
    char *after_lent = l ? strstr(l, "memory, ") : NULL;
    double ahead = after_lent ? atof(after_lent + strlen("memory, ")) : 0;
    CU_ASSERT(ahead > 0);
    if (!(ahead > 0)) printf("  %s: no load was copied ahead: %.120s\n", ob, l ? l : "(no loads line)");
    printf("\n    %s: %.1f loads a step copied ahead", ob, ahead);
    free(e);
    tt_rm_rf(q.root);
}
static void test_lent_grads(void) { lent_case(1); }
static void test_lent_grads_accumulated(void) { lent_case(2); }

/* 4 straight == 2 + resume to 4, all streamed. */
static void resume_case(const char *max_norm) {
    tt_ab q;
    char cb2[1100], cb4[1100], lb2[1100], lb4[1100];
    CU_ASSERT_FATAL(tt_ab_setup(&q, "tstream_resume", "straight", "resumed", 4, 2, 4) == 0);
    char *root = q.root, *oa = q.oa, *ob = q.ob, *ca = q.ca;
    tt_fmt(cb2, sizeof cb2, "%s/r2.yaml", root);
    tt_fmt(cb4, sizeof cb4, "%s/r4.yaml", root);
    tt_fmt(lb2, sizeof lb2, "%s/r2", root);
    tt_fmt(lb4, sizeof lb4, "%s/r4", root);
    tt_cfg c = q.c;
    CU_ASSERT_FATAL(write_cfg(ca, &c, max_norm, 1) == 0);
    c.out = ob;
    CU_ASSERT_FATAL(write_cfg(cb4, &c, max_norm, 1) == 0);
    c.steps = 2;
    CU_ASSERT_FATAL(write_cfg(cb2, &c, max_norm, 1) == 0);
    CU_ASSERT_FATAL(run(ca, oa, 1) == 0);
    CU_ASSERT_FATAL(run(cb2, lb2, 1) == 0);
    CU_ASSERT_FATAL(run(cb4, lb4, 1) == 0);
    char p[1200];
    tt_fmt(p, sizeof p, "%s.err", lb4);
    CU_ASSERT(tt_file_has(p, "at step 2"));
    /* with clipping on, the run says when previous-norm clipping was not exact
     * clipping (once, then a count at the end); without, it never does */
    tt_fmt(p, sizeof p, "%s.err", oa);
    int clipping = strcmp(max_norm, "0") != 0;
    CU_ASSERT_EQUAL(tt_file_has(p, "clipped it with the previous step's norm") != 0, clipping);
    CU_ASSERT_EQUAL(tt_file_has(p, "steps run clipped with the previous step's norm") != 0, clipping);
    CU_ASSERT(tt_same_losses(oa, 0, lb2, 2));
    CU_ASSERT(tt_same_losses(oa, 2, lb4, 2));
    CU_ASSERT(tt_same_output(oa, ob, "000000002"));
    CU_ASSERT(tt_same_output(oa, ob, "000000004"));
    CU_ASSERT(tt_same_output(oa, ob, "state"));
    tt_rm_rf(root);
}
static void test_streamed_resume(void) { resume_case("0"); }
static void test_streamed_resume_clipped(void) { resume_case("0.01"); }

static void test_accumulation_refused(void) {
    char root[1024], data[1100], o[1100], cf[1100], p[1200];
    CU_ASSERT_FATAL(tt_setup("tstream_accum", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(o, sizeof o, "%s/out", root);
    tt_fmt(cf, sizeof cf, "%s/accum.yaml", root);
    tt_cfg c = tt_cfg_default(o, data);
    c.steps = 2;
    CU_ASSERT_FATAL(write_cfg(cf, &c, "0", 2) == 0);
    setenv("ORAKUL_STREAM_TRAINABLES", "1", 1);
    int rc = tt_run_q(cf, o, 150, 1);
    unsetenv("ORAKUL_STREAM_TRAINABLES");
    CU_ASSERT(rc != 0);
    tt_fmt(p, sizeof p, "%s.err", o);
    CU_ASSERT(tt_file_has(p, "gradient_accumulation_steps 2") && tt_file_has(p, "streams the trainable state"));
    tt_rm_rf(root);
}

#ifndef TT_GPU
/* The latent encode is not in the plan: a 1024² TAEF1 encode (with the drops,
 * ~3 full-resolution activations: 0.8 GB) under a budget that the plan fits
 * (667 MiB at 1024²) but the encode does not is refused before step 1 with
 * the allocator's line and one saying what to do (run once with more: the
 * latents are cached). CPU only: a device's workspaces make another plan. */
static void test_encode_budget(void) {
    char taef1[1024], root[1024], data[1100], o[1100], cf[1100], p[1200], kw[1400];
    if (!ork_test_shared("assets/taef1/taef1_encoder.safetensors", taef1, sizeof taef1)) return;
    *strrchr(taef1, '/') = 0;
    CU_ASSERT_FATAL(tt_setup("tstream_encode", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(o, sizeof o, "%s/out", root);
    tt_fmt(cf, sizeof cf, "%s/encode.yaml", root);
    /* one 1024x1024 image (the photos are 512 or less, and images are not upscaled past themselves) */
    static const char *const photos[] = {"astronaut", "chelsea", "coffee"};
    for (int i = 0; i < 3; i++) {
        char f[1200];
        tt_fmt(f, sizeof f, "%s/%s.png", data, photos[i]);
        unlink(f);
        tt_fmt(f, sizeof f, "%s/%s.txt", data, photos[i]);
        unlink(f);
    }
    uint8_t *rgb = malloc(1024 * 1024 * 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rgb);
    for (int i = 0; i < 1024 * 1024; i++) {
        rgb[3 * i] = (uint8_t)(i % 1024 / 4);
        rgb[3 * i + 1] = (uint8_t)(i / 1024 / 4);
        rgb[3 * i + 2] = (uint8_t)((i % 1024) ^ (i / 1024));
    }
    tt_fmt(p, sizeof p, "%s/big.png", data);
    CU_ASSERT_FATAL(ork_png_write_rgb(p, 1024, 1024, rgb) == ORK_OK);
    free(rgb);
    tt_fmt(p, sizeof p, "%s/big.txt", data);
    CU_ASSERT_FATAL(tt_write_all(p, "a gradient") == 0);
    tt_cfg c = tt_cfg_default(o, data);
    c.steps = 1;
    c.save_every = 1;
    CU_ASSERT_FATAL(write_cfg_m(cf, &c, "0", 1, "vram_budget_gb: 0.7\n") == 0);
    char *t = tt_read_all(cf, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    tt_fmt(kw, sizeof kw, "codec: taef1\n          taef1_path: %s", taef1);
    char *a = strstr(t, "codec: pixel"), *r = strstr(t, "resolution: [64]");
    CU_ASSERT_FATAL(a && r && r < a);
    char *out = malloc(strlen(t) + 2048);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    sprintf(out, "%.*sresolution: [1024]%.*s%s%s", (int)(r - t), t, (int)(a - r - 16), r + 16, kw, a + 12);
    CU_ASSERT_FATAL(tt_write_all(cf, out) == 0);
    free(out);
    free(t);
    int rc = tt_run_q(cf, o, 120, 1);
    CU_ASSERT(rc != 0);
    tt_fmt(p, sizeof p, "%s.err", o);
    CU_ASSERT(tt_file_has(p, "device memory budget exceeded") && tt_file_has(p, "for \"encode\""));
    CU_ASSERT(tt_file_has(p, "big.png at 1024 px for the latent cache needs more device memory than the plan leaves"));
    CU_ASSERT(tt_file_has(p, "_latent_cache"));
    tt_rm_rf(root);
}
#endif

static const ork_test_case cases[] = {{"streamed_equals_resident", test_streamed_equals_resident},
                                      {"streamed_equals_resident_bf16", test_streamed_equals_resident_bf16},
                                      {"model.stream_trainable_state", test_stream_trainable_state_key},
                                      {"model.stream_compression", test_stream_compression_key},
                                      {"lent gradients == resident", test_lent_grads},
                                      {"lent gradients, accumulated == resident", test_lent_grads_accumulated},
                                      {"streamed_resume", test_streamed_resume},
                                      {"streamed_resume_clipped", test_streamed_resume_clipped},
                                      {"accumulation_refused", test_accumulation_refused},
#ifndef TT_GPU
                                      {"the latent encode past the budget: what to do", test_encode_budget},
#endif
                                      {NULL, NULL}};
#ifdef TT_GPU
#include "cuda/cuda_ctx.h" /* ork_cuda_device_count */
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("train_trainable_stream_cuda", NULL, NULL, cases);
}
#else
ORK_TEST_MAIN("train_trainable_stream", NULL, NULL, cases)
#endif
