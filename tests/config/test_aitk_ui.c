/* tests/config/test_aitk_ui.c — the job configs ai-toolkit's web UI saves
 * (the .json files of tests/fixtures/aitk_ui/, written by tests/reference/aitk_ui_configs.py
 * from the UI's source) are accepted by `orakul plan`: exit 0, and the config
 * reader's "ignored: ..." warnings are exactly the keys orakul does not
 * implement. A key implemented later must update the lists below.
 *
 * What the test changes in each file is what a user's machine supplies: the
 * dataset folder (a copy of assets/photos) and the model, whose Hugging Face
 * repo id resolves in a local hub cache built here (HF_HUB_CACHE) holding the
 * small FLUX.1 / FLUX.2 checkpoints of tests/fixtures and, for Z-Image, the
 * tiny transformer of tests/fixtures/zimage as a diffusers folder's transformer/
 * (its caption width has no text encoder; its tokens fit the pixel codec): the
 * plan checks the config and the shapes, not the real weights. Runs the built
 * orakul (ORK_ORAKUL_EXE) with the built plugins (flux, zimage, ...). */
#include "ork_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char g_tmp[256];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* hub repo -> the small checkpoint and autoencoder standing in for it */
static const struct { const char *repo, *bfl, *ae; } g_repos[] = {
    {"FLUX.1-dev", "flux1_small_bfl", "vae1_small"},
    {"FLUX.1-schnell", "flux1_small_bfl", "vae1_small"},
    {"FLUX.2-dev", "flux2_small_bfl", "vae2_small"},
    {"FLUX.2-klein-base-4B", "flux2_small_bfl", "vae2_small"},
    {"FLUX.2-klein-base-9B", "flux2_small_bfl", "vae2_small"},
};

/* Z-Image repos (models--<org>--<name>): a diffusers folder whose transformer/ is the tiny checkpoint */
static const char *const g_zimage[] = {"Tongyi-MAI--Z-Image-Turbo", "Tongyi-MAI--Z-Image", "ostris--Z-Image-De-Turbo"};

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-aitk-ui-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    if (sh("mkdir -p '%s/data' && cp '%s'/assets/photos/*.png '%s'/assets/photos/*.txt '%s/data/'", g_tmp,
           ORK_SOURCE_DIR, ORK_SOURCE_DIR, g_tmp))
        return 1;
    for (size_t i = 0; i < sizeof g_repos / sizeof g_repos[0]; i++) {
        char snap[512];
        snprintf(snap, sizeof snap, "%s/hub/models--black-forest-labs--%s/snapshots/0123abcd", g_tmp, g_repos[i].repo);
        if (sh("mkdir -p '%s' && ln -s '%s/tests/fixtures/%s.safetensors' '%s/model.safetensors' && "
               "ln -s '%s/tests/fixtures/%s.safetensors' '%s/ae.safetensors'",
               snap, ORK_SOURCE_DIR, g_repos[i].bfl, snap, ORK_SOURCE_DIR, g_repos[i].ae, snap))
            return 1;
    }
    for (size_t i = 0; i < sizeof g_zimage / sizeof g_zimage[0]; i++) {
        char snap[512];
        snprintf(snap, sizeof snap, "%s/hub/models--%s/snapshots/0123abcd/transformer", g_tmp, g_zimage[i]);
        if (sh("mkdir -p '%s' && ln -s '%s/tests/fixtures/zimage/zimage_tiny_diffusers.safetensors' "
               "'%s/diffusion_pytorch_model.safetensors'", snap, ORK_SOURCE_DIR, snap))
            return 1;
    }
    return 0;
}

static int teardown(void) { return sh("rm -rf '%s'", g_tmp) ? 1 : 0; }

/* Plan fixture `name` (.json); want: the keys of its "ignored:" lines, in file
 * order, NULL-terminated. */
static void plan_fixture(const char *name, const char *const *want) {
    char cfg[600], err[600];
    snprintf(cfg, sizeof cfg, "%s/%s.json", g_tmp, name);
    snprintf(err, sizeof err, "%s/%s.err", g_tmp, name);
    CU_ASSERT_EQUAL_FATAL(sh("sed 's#/path/to/images/folder#%s/data#' '%s/tests/fixtures/aitk_ui/%s.json' > '%s'",
                             g_tmp, ORK_SOURCE_DIR, name, cfg), 0);
    int rc = sh("HF_HUB_CACHE='%s/hub' '%s' plan '%s' > '%s/%s.out' 2> '%s'", g_tmp, ORK_ORAKUL_EXE, cfg, g_tmp,
                name, err);
    char *text = ork_test_read_all(err, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    printf("\n  %s: exit %d", name, rc);
    if (rc != 0) printf("\n%s", text);
    CU_ASSERT_EQUAL(rc, 0);
    /* every "ignored:" line, in order, against want */
    int n = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        const char *ig = strstr(line, ": ignored: ");
        if (!ig) continue;
        ig += strlen(": ignored: ");
        char key[256];
        size_t len = strcspn(ig, " ");
        snprintf(key, sizeof key, "%.*s", (int)len, ig);
        printf("\n    ignored: %s", key);
        /* the warning names the file and where the key is */
        if (!strstr(line, cfg)) bad++;
        if (!want[n] || strcmp(want[n], key)) {
            printf("  <- expected %s", want[n] ? want[n] : "nothing more");
            bad++;
        }
        if (want[n]) n++;
    }
    if (want[n]) printf("\n    missing: ignored: %s", want[n]);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_PTR_NULL(want[n]);
    CU_ASSERT_PTR_NULL(strstr(text, "orakul: error"));
    free(text);
}

/* What every UI job carries that orakul does not do: the UI's own database and
 * logger (sqlite_db_path, logging.use_ui_logger) and its timing lines
 * (performance_log_every). Everything else the UI writes is implemented or,
 * for these architectures, does nothing in ai-toolkit either (conv on a model
 * without conv layers; lokr_* with type lora; save_format for a LoRA; DOP's
 * multiplier and class with DOP off; ema_config with use_ema false; mask_min_value
 * without mask_path; match_target_res false). */
static void test_flux1_dev(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "logging.use_ui_logger", NULL};
    plan_fixture("flux1_dev", want);
}
static void test_flux1_schnell(void) {
    /* schnell's training adapter (config/examples/train_lora_flux_schnell_24gb.yaml) */
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "model.assistant_lora_path",
                                       "logging.use_ui_logger", NULL};
    plan_fixture("flux1_schnell", want);
}
static void test_flux2_dev(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "logging.use_ui_logger", NULL};
    plan_fixture("flux2_dev", want);
}
static void test_flux2_klein_4b(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "logging.use_ui_logger", NULL};
    plan_fixture("flux2_klein_4b", want);
}
static void test_flux2_klein_9b(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "logging.use_ui_logger", NULL};
    plan_fixture("flux2_klein_9b", want);
}

/* FLUX.2-dev with the form's options on (aitk_ui_configs.py: trigger word, rank/alpha,
 * layer offloading, caption dropout, repeats, flips, cached text, accumulation, content
 * timesteps, skip first sample, a sample seed, EMA and DOP are implemented); the rest warn,
 * each once. The model_kwargs key warns when the
 * model's keys are read (pass 2), after the core's. */
static void test_flux2_dev_options(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "datasets[0].control_path_1",
                                       "model.layer_offloading_text_encoder_percent", "sample.samples[0].ctrl_img_1",
                                       "sample.samples[0].network_multiplier", "logging.use_ui_logger",
                                       "model.model_kwargs.match_target_res", NULL};
    plan_fixture("flux2_dev_options", want);
}

/* Z-Image (options.tsx zimage:turbo, zimage, zimage:deturbo): the UI's keys as
 * FLUX.2's, less model_kwargs; Turbo's training adapter (model.assistant_lora_path,
 * which the UI sets for zimage:turbo) is not applied by orakul, nor De-Turbo's
 * model.extras_name_or_path (the repo ai-toolkit takes the text encoder, tokenizer
 * and VAE from: orakul reads them from name_or_path's folder or model_kwargs'
 * text_encoder_path / vae_path). */
static void test_zimage_turbo(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "model.assistant_lora_path",
                                       "logging.use_ui_logger", NULL};
    plan_fixture("zimage_turbo", want);
}
static void test_zimage(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "logging.use_ui_logger", NULL};
    plan_fixture("zimage", want);
}

static void test_zimage_deturbo(void) {
    static const char *const want[] = {"sqlite_db_path", "performance_log_every", "model.extras_name_or_path",
                                       "logging.use_ui_logger", NULL};
    plan_fixture("zimage_deturbo", want);
}

static const ork_test_case cases[] = {
    {"UI job FLUX.1-dev", test_flux1_dev},
    {"UI job FLUX.1-schnell", test_flux1_schnell},
    {"UI job FLUX.2-dev", test_flux2_dev},
    {"UI job FLUX.2-klein-base-4B", test_flux2_klein_4b},
    {"UI job FLUX.2-klein-base-9B", test_flux2_klein_9b},
    {"UI job FLUX.2-dev, options on", test_flux2_dev_options},
    {"UI job Z-Image Turbo", test_zimage_turbo},
    {"UI job Z-Image", test_zimage},
    {"UI job Z-Image De-Turbo", test_zimage_deturbo},
    {NULL, NULL}};
ORK_TEST_MAIN("aitk_ui", setup, teardown, cases)
