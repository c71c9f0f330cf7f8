/* tests/zimage/test_zimage_train.c — the Z-Image plugin through the CLI:
 * `orakul run` of the tiny preset (preset:tiny, arch zimage:turbo, the pixel
 * codec component, zero caption embeddings: the tiny size has no text slot)
 * on the committed photos for 60 CPU steps, whose loss falls, which samples
 * before the first step and at the end, and whose LoRA file holds exactly the
 * keys diffusers' and ComfyUI's Z-Image loaders read
 * (diffusion_model.<module>.lora_A/lora_B, alpha folded, no .alpha) on the
 * attention and feed-forward linears of every transformer block; and
 * `orakul plan` accepting configs/train_lora_zimage.yaml (its paths swapped
 * for the real-size preset, the photos and TAEF1). */
#include "ork_test.h"

#define ORK_ORAKUL_EXE ORK_CLI_EXE
#include "../train/train_test_util.h"

#include "io/safetensors.h"

static const char *const CFG =
    "job: extension\n"
    "config:\n"
    "  name: zimage_tiny\n"
    "  process:\n"
    "    - type: diffusion_trainer\n"
    "      training_folder: %s\n"
    "      device: cpu\n"
    "      network:\n"
    "        type: lora\n"
    "        linear: 16\n"
    "        linear_alpha: 16\n"
    "      save:\n"
    "        dtype: float32\n"
    "        save_every: 60\n"
    "      datasets:\n"
    "        - folder_path: %s\n"
    "          caption_ext: txt\n"
    "          resolution: [64]\n"
    "      train:\n"
    "        batch_size: 1\n"
    "        steps: 60\n"
    "        gradient_checkpointing: true\n"
    "        noise_scheduler: flowmatch\n"
    "        optimizer: adamw\n"
    "        lr: 1e-2\n"
    "        timestep_type: sigmoid\n"
    "        max_grad_norm: 1.0\n"
    "        seed: 42\n"
    "      model:\n"
    "        name_or_path: preset:tiny\n"
    "        arch: zimage:turbo\n"
    "        model_kwargs:\n"
    "          pixel_patch: 4\n"
    "          seed: 1\n"
    "      sample:\n"
    "        sample_every: 60\n"
    "        width: 64\n"
    "        height: 64\n"
    "        seed: 1\n"
    "        prompts:\n"
    "          - an astronaut\n"
    "      logging:\n"
    "        log_every: 1\n";

static void test_train(void) {
    char root[1024], out[1100], data[1100], cfg[1100], log[1100], text[4096];
    CU_ASSERT_FATAL(tt_setup("zimage", root, sizeof root) == 0);
    tt_fmt(out, sizeof out, "%s/out", root);
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(cfg, sizeof cfg, "%s/train.yaml", root);
    tt_fmt(log, sizeof log, "%s/run", root);
    snprintf(text, sizeof text, CFG, out, data);
    CU_ASSERT_FATAL(tt_write_all(cfg, text) == 0);
    CU_ASSERT_FATAL(tt_run(cfg, log, 300) == 0);
    char lo[1200];
    tt_fmt(lo, sizeof lo, "%s.out", log);
    tt_fmt(text, sizeof text, "%s.err", log);
    CU_ASSERT(tt_file_has(text, "Z-Image tiny"));
    static tt_losses L;
    CU_ASSERT_FATAL(tt_parse_losses(lo, &L) == 60);
    double first = 0, last = 0;
    for (int i = 0; i < 10; i++) {
        CU_ASSERT(isfinite(L.loss[i]) && isfinite(L.loss[L.n - 10 + i]));
        first += L.loss[i] / 10;
        last += L.loss[L.n - 10 + i] / 10;
    }
    printf("\n  loss: mean of steps 1-10 %.4f, of steps 51-60 %.4f (ratio %.3f)", first, last, last / first);
    CU_ASSERT(last < 0.9 * first); /* deterministic (seed 42): 0.836 measured */

    char p[1400];
    /* samples before the first step and at the end, with the model's 8 steps (no sample_steps given) */
    for (int k = 0; k < 2; k++) {
        tt_fmt(p, sizeof p, "%s/zimage_tiny/samples/zimage_tiny_%09d_0.png", out, k ? 60 : 0);
        if (!tt_exists(p)) printf("\n  no sample %s", p);
        CU_ASSERT(tt_exists(p));
    }
    tt_fmt(p, sizeof p, "%s/zimage_tiny/zimage_tiny_000000060.safetensors", out);
    ork_st_file *f = NULL;
    CU_ASSERT_FATAL(ork_st_open(p, &f) == ORK_OK);
    /* 4 blocks (noise_refiner.0, context_refiner.0, layers.0, layers.1) x 7 linears x (A, B) */
    CU_ASSERT_EQUAL(ork_st_count(f), 4 * 7 * 2);
    static const char *const want[] = {
        "diffusion_model.noise_refiner.0.attention.to_q.lora_A.weight",
        "diffusion_model.context_refiner.0.feed_forward.w2.lora_B.weight",
        "diffusion_model.layers.1.attention.to_out.0.lora_A.weight",
        "diffusion_model.layers.0.feed_forward.w3.lora_B.weight", NULL};
    for (int i = 0; want[i]; i++) {
        const ork_st_tensor *t = ork_st_find(f, want[i]);
        if (!t) printf("\n  LoRA file lacks %s", want[i]);
        CU_ASSERT_PTR_NOT_NULL(t);
    }
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const char *k = ork_st_at(f, i)->name;
        CU_ASSERT(strstr(k, ".alpha") == NULL && !strncmp(k, "diffusion_model.", 16));
    }
    ork_st_close(f);
    tt_rm_rf(root);
    printf("\n  ");
}

/* text with the first `from` replaced by `to` (malloc'd), or NULL when absent */
static char *subst(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    if (!at) return NULL;
    size_t n = strlen(text) + strlen(to) + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return out;
}

/* configs/train_lora_zimage.yaml through `orakul plan`, every key as written
 * but the paths: the model the real-size preset (random weights), the images
 * the committed photos, the codec TAEF1 from ../shared (FLUX.1's 16-channel
 * latents, as the VAE's; without the asset: the one refusal must be the
 * missing codec). */
static void test_plan_config(void) {
    char root[1024], cfg[1100], log[1100], data[1100], taef1[1024], line[1200];
    CU_ASSERT_FATAL(tt_setup("zimage_plan", root, sizeof root) == 0);
    tt_fmt(data, sizeof data, "%s/data", root);
    const char *tae = ork_test_shared("assets/taef1", taef1, sizeof taef1);
    char *src = tt_read_all(ORK_SOURCE_DIR "/configs/train_lora_zimage.yaml", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char *a = subst(src, "\"Tongyi-MAI/Z-Image-Turbo\"", "\"preset:zimage-turbo\"");
    char *b = a ? subst(a, "/path/to/images/folder", data) : NULL;
    if (tae) tt_fmt(line, sizeof line, "taef1_path: \"%s\"", tae);
    else tt_fmt(line, sizeof line, "seed: 1");
    char *c = b ? subst(b, "vae_path: \"/path/to/ae.safetensors\"", line) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    tt_fmt(cfg, sizeof cfg, "%s/zimage.yaml", root);
    CU_ASSERT_FATAL(tt_write_all(cfg, c) == 0);
    tt_fmt(log, sizeof log, "%s/plan", root);
    const char *args[] = {"plan", cfg, NULL};
    int rc = tt_orakul(args, log, 120);
    char o[1200], e[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    tt_fmt(e, sizeof e, "%s.err", log);
    char *se = tt_read_all(e, NULL);
    printf("\n  orakul plan: exit %d", rc);
    if (tae) {
        if (rc != 0) printf("\n%s", se ? se : "");
        CU_ASSERT_EQUAL(rc, 0);
    } else {
        CU_ASSERT(rc == 2 && se && strstr(se, "has no image codec that gives them"));
    }
    CU_ASSERT(tt_file_has(o, "layers.29") || tt_file_has(e, "layers.29"));
    free(se); free(src); free(a); free(b); free(c);
    tt_rm_rf(root);
    printf("\n  ");
}

static const ork_test_case cases[] = {
    {"orakul run: tiny preset, loss falls, LoRA keys", test_train},
    {"orakul plan: configs/train_lora_zimage.yaml", test_plan_config},
    {NULL, NULL},
};
ORK_TEST_MAIN("zimage_train", NULL, NULL, cases)
