/* tests/dop/test_dop.c — differential output preservation (train/dop.h),
 * issue #32 point 5, on the CPU with the tiny diffusers-layout FLUX.1 folder
 * of tests/train/test_train_text.c (tiny transformer, width-16 CLIP, tiny T5,
 * their tokenizers), the committed photos, trigger_word ohwx (injected at the
 * front of each caption), class "person":
 *  - caption: ork_dop_caption is Python's str.replace (values from Python);
 *  - run: DOP trains, metrics.jsonl holds loss_preservation each step: 0 at
 *    step 1 (the LoRA's up is zero: the LoRA-on prediction is the base's) and
 *    > 0 once the LoRA has moved;
 *  - prior: the prior prediction is the base model's prediction on the class
 *    prompt: with lr 0 the LoRA never moves (up stays zero), so the LoRA-on
 *    prediction is the base model's, and the preservation loss is exactly 0 at
 *    every step (mse 0: equal element for element); with lr 5e-3 the priors
 *    (ORAKUL_DOP_DUMP) are the lr-0 run's, bytes, although the LoRA moved;
 *  - zero: multiplier 0 gives the LoRA files and losses of the run without
 *    DOP, bytes and text;
 *  - resume: 4 steps straight == 2 + 2 resumed with DOP (LoRA bytes);
 *  - refused: DOP without trigger_word (run and plan), and with a preset
 *    without text encoders, exit 2 with one line naming the key. */
#include "../train/train_test_util.h"

#include "train/dop.h"

#include <math.h>

#ifdef ORK_DOP_GPU
#define DOP_GPU 1
#else
#define DOP_GPU 0
#endif

#define FX ORK_SOURCE_DIR "/tests/fixtures"

static char root[512], data[700], model[700];

static int lnk(const char *target, const char *dir, const char *name) {
    char p[1024];
    tt_fmt(p, sizeof p, "%s/%s", dir, name);
    return symlink(target, p);
}

static int init(void) {
    if (tt_setup("dop", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(model, sizeof model, "%s/m", root);
    char p[1024];
    int e = mkdir(model, 0755);
    tt_fmt(p, sizeof p, "%s/transformer", model);
    e |= mkdir(p, 0755);
    e |= lnk(FX "/flux1_small_diffusers.safetensors", p, "diffusion_pytorch_model.safetensors");
    e |= lnk(FX "/text/cond/clip16", model, "text_encoder") | lnk(FX "/text/t5_tiny", model, "text_encoder_2");
    e |= lnk(FX "/text/cond/tokenizer", model, "tokenizer") | lnk(FX "/text/cond/tokenizer_2", model, "tokenizer_2");
    return e != 0;
}
static int clean(void) {
    if (getenv("ORK_TEST_KEEP")) return 0;
    tt_rm_rf(root);
    return 0;
}

/* ---- the class prompt ---------------------------------------------------------- */

static void test_caption(void) {
    static const char *const c[][4] = {
        {"ohwx a cat", "ohwx", "person", "person a cat"}, {"a cat", "ohwx", "person", "a cat"},
        {"ohwx and ohwx", "ohwx", "dog", "dog and dog"},  {"aaaa", "aa", "b", "bb"},
        {"ab", "", "X", "XaXbX"},                          {"n\xc3\xa9", "", "-", "-n-\xc3\xa9-"},
        {"ohwxohwx", "ohwx", "", ""},                      {"", "ohwx", "p", ""},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *o = NULL;
        CU_ASSERT_FATAL(ork_dop_caption(c[i][0], c[i][1], c[i][2], &o) == ORK_OK);
        if (strcmp(o, c[i][3])) printf("\n  '%s'.replace('%s', '%s'): '%s', Python '%s'", c[i][0], c[i][1], c[i][2], o, c[i][3]);
        CU_ASSERT_STRING_EQUAL(o, c[i][3]);
        free(o);
    }
    char *o = NULL;
    CU_ASSERT(ork_dop_caption("ohwx x", NULL, "person", &o) == ORK_OK && !strcmp(o, "ohwx x")); /* no trigger: a copy */
    free(o);
}

/* ---- runs ------------------------------------------------------------------------ */

/* dop: -1 no DOP keys, else DOP with that multiplier; trigger 0: no trigger_word; preset: the
 * preset without encoders instead of the folder. */
static void write_cfg(const char *path, const char *out, int steps, int every, double dop, double lr, int trigger,
                      int preset) {
    char y[4096], d[256] = "";
    if (dop >= 0)
        tt_fmt(d, sizeof d, ",\n              diff_output_preservation: true, diff_output_preservation_multiplier: %g,\n"
               "              diff_output_preservation_class: person", dop);
    tt_fmt(y, sizeof y,
           "job: extension\n"
           "config:\n"
           "  name: dop\n"
           "  process:\n"
           "    - type: sd_trainer\n"
           "      training_folder: %s\n"
           "      device: %s\n"
           "%s"
           "      network: {type: lora, linear: 4, linear_alpha: 4}\n"
           "      save: {dtype: float32, save_every: %d, max_step_saves_to_keep: 10}\n"
           "      datasets:\n"
           "        - folder_path: %s\n"
           "          caption_ext: txt\n"
           "          resolution: [64]\n"
           "      train: {batch_size: 1, steps: %d, gradient_checkpointing: true, noise_scheduler: flowmatch,\n"
           "              optimizer: adamw, lr: %g, seed: 42, max_grad_norm: 0%s}\n"
           "      model:\n"
           "        name_or_path: %s\n"
           "        arch: flux\n"
           "        model_kwargs: {codec: pixel, pixel_patch: 4, context_len: 8%s}\n"
           "      logging: {log_every: 1}\n",
           out, DOP_GPU ? "cuda:0" : "cpu", trigger ? "      trigger_word: ohwx\n" : "", every, data, steps, lr, d,
           preset ? "preset:custom" : model,
           preset ? ", flux_version: 1, hidden_size: 96, num_heads: 2, depth: 2, depth_single_blocks: 2, "
                    "context_in_dim: 32, vec_in_dim: 16, seed: 1" : "");
    CU_ASSERT_FATAL(tt_write_all(path, y) == 0);
}

/* Run <root>/<name>.yaml into <root>/<name>; 0 on success. */
static int run(const char *name, int steps, int every, double dop, double lr, const char *dump) {
    char out[900], cfg[900], log[900];
    tt_fmt(out, sizeof out, "%s/%s", root, name);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, name);
    tt_fmt(log, sizeof log, "%s/%s.log", root, name);
    write_cfg(cfg, out, steps, every, dop, lr, 1, 0);
    if (dump) {
        mkdir(dump, 0755);
        setenv("ORAKUL_DOP_DUMP", dump, 1);
    }
    int rc = tt_run(cfg, log, 250);
    unsetenv("ORAKUL_DOP_DUMP");
    return rc;
}

/* metrics.jsonl's loss_preservation of steps 1..n (NAN: absent); the count found. */
static int pres_losses(const char *name, double *v, int n) {
    char p[1000];
    tt_fmt(p, sizeof p, "%s/%s/dop/metrics.jsonl", root, name);
    char *t = tt_read_all(p, NULL);
    int got = 0;
    for (int i = 0; i < n; i++) v[i] = NAN;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        long long s;
        const char *q = strstr(line, "\"loss_preservation\": ");
        if (sscanf(line, "{\"step\": %lld", &s) != 1 || s < 1 || s > n || !q) continue;
        v[s - 1] = strtod(q + strlen("\"loss_preservation\": "), NULL);
        got++;
    }
    free(t);
    return got;
}

static void test_run_and_prior(void) {
    char d0[900], d1[900];
    tt_fmt(d0, sizeof d0, "%s/dump0", root);
    tt_fmt(d1, sizeof d1, "%s/dump1", root);
    CU_ASSERT_FATAL(run("train", 4, 4, 1.0, 5e-3, d1) == 0);
    CU_ASSERT_FATAL(run("still", 4, 4, 1.0, 0.0, d0) == 0);
    char log[1000];
    tt_fmt(log, sizeof log, "%s/train.log.err", root);
    CU_ASSERT(tt_file_has(log, "differential output preservation: class 'person' for trigger 'ohwx'"));
    double v[4], z[4];
    CU_ASSERT_FATAL(pres_losses("train", v, 4) == 4);
    CU_ASSERT_FATAL(pres_losses("still", z, 4) == 4);
    CU_ASSERT(v[0] == 0.0); /* step 1: up is zero, the LoRA changes nothing yet */
    for (int s = 1; s < 4; s++) CU_ASSERT(v[s] > 0.0);
    for (int s = 0; s < 4; s++) CU_ASSERT(z[s] == 0.0); /* the prior is what the model gives without the LoRA */
    for (int k = 0; k < 4; k++) { /* and it does not depend on the LoRA */
        char a[1000], b[1000];
        tt_fmt(a, sizeof a, "%s/prior_%d.f32", d0, k);
        tt_fmt(b, sizeof b, "%s/prior_%d.f32", d1, k);
        size_t na = 0;
        char *x = tt_read_all(a, &na);
        CU_ASSERT(x && na > 0 && na % 4 == 0);
        free(x);
        CU_ASSERT(tt_same_bytes(a, b));
    }
}

static void test_zero_is_off(void) {
    CU_ASSERT_FATAL(run("zero", 3, 3, 0.0, 5e-3, NULL) == 0);
    CU_ASSERT_FATAL(run("off", 3, 3, -1, 5e-3, NULL) == 0);
    char a[1000], b[1000];
    tt_fmt(a, sizeof a, "%s/zero/dop/dop_000000003.safetensors", root);
    tt_fmt(b, sizeof b, "%s/off/dop/dop_000000003.safetensors", root);
    CU_ASSERT(tt_same_bytes(a, b));
    tt_losses la, lb;
    tt_fmt(a, sizeof a, "%s/zero.log.out", root);
    tt_fmt(b, sizeof b, "%s/off.log.out", root);
    CU_ASSERT_FATAL(tt_parse_losses(a, &la) == 3 && tt_parse_losses(b, &lb) == 3);
    for (int i = 0; i < 3; i++) CU_ASSERT_STRING_EQUAL(la.text[i], lb.text[i]);
    double v[3];
    CU_ASSERT(pres_losses("zero", v, 3) == 3 && v[2] == 0.0);
    CU_ASSERT(pres_losses("off", v, 3) == 0);
}

static void test_resume(void) {
    CU_ASSERT_FATAL(run("straight", 4, 2, 1.0, 5e-3, NULL) == 0);
    CU_ASSERT_FATAL(run("resumed", 2, 2, 1.0, 5e-3, NULL) == 0);
    CU_ASSERT_FATAL(run("resumed", 4, 2, 1.0, 5e-3, NULL) == 0);
    char a[1000], b[1000];
    tt_fmt(a, sizeof a, "%s/straight/dop/dop_000000004.safetensors", root);
    tt_fmt(b, sizeof b, "%s/resumed/dop/dop_000000004.safetensors", root);
    CU_ASSERT(tt_same_bytes(a, b));
}

static void refused(const char *name, int trigger, int preset, const char *want) {
    char out[900], cfg[900], log[900], e[1000];
    tt_fmt(out, sizeof out, "%s/%s", root, name);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", root, name);
    tt_fmt(log, sizeof log, "%s/%s.log", root, name);
    write_cfg(cfg, out, 2, 2, 1.0, 5e-3, trigger, preset);
    CU_ASSERT(tt_run_q(cfg, log, 120, 1) == 2);
    tt_fmt(e, sizeof e, "%s.err", log);
    char *t = tt_read_all(e, NULL), first[2048];
    CU_ASSERT(t && tt_lines_with(t, "error", first, sizeof first) == 1 && strstr(first, want));
    if (t && !strstr(t, want)) printf("\n  %s: %s", name, t);
    free(t);
    if (trigger) return;
    const char *args[] = {"plan", cfg, NULL}; /* plan refuses it as run does */
    tt_fmt(log, sizeof log, "%s/%s.plan", root, name);
    CU_ASSERT(tt_orakul(args, log, 120) == 2);
    tt_fmt(e, sizeof e, "%s.err", log);
    CU_ASSERT(tt_file_has(e, want));
}

static void test_refused(void) {
    refused("no_trigger", 0, 0, "train.diff_output_preservation needs trigger_word");
    refused("no_encoders", 1, 1, "train.diff_output_preservation needs the model's text encoders");
}

static const ork_test_case cases[] = {{"caption", test_caption},
                                      {"run_and_prior", test_run_and_prior},
                                      {"zero_is_off", test_zero_is_off},
                                      {"resume", test_resume},
                                      {"refused", test_refused},
                                      {NULL, NULL}};
#ifndef ORK_DOP_GPU
ORK_TEST_MAIN("dop", init, clean, cases)
#else
/* dop_cuda: the same runs on cuda:0 (BF16 activations, cuBLASLt) */
#include "cuda/cuda_ctx.h" /* ork_cuda_device_count */
int main(void) {
    if (ork_cuda_device_count() <= 0) return 77;
    return ork_test_run("dop_cuda", init, clean, cases);
}
#endif
