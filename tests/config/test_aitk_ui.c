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
 * orakul (ORK_ORAKUL_EXE) with the built plugins (flux, zimage, ...), spawned
 * without a shell (tests/common/ork_test_proc.h), and prepares its inputs in C,
 * so that it runs on Windows too (there the links are copies: ork_test_win.h). */
#include "ork_test.h"
#include "ork_test_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

/* text (len bytes) into path, binary: the same bytes on every system. 0 on success. */
static int write_all(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    int ok = fwrite(text, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : 1;
}

/* Every *.png and *.txt of from copied into the folder to. 0 on success. */
static int copy_images(const char *from, const char *to) {
    ork_dir *d;
    if (ork_dir_open(from, &d) != ORK_OK) return 1;
    int bad = 0, n = 0;
    for (const char *name; !bad && (name = ork_dir_next(d)) != NULL;) {
        size_t k = strlen(name);
        if (k < 4 || (strcmp(name + k - 4, ".png") && strcmp(name + k - 4, ".txt"))) continue;
        char src[1200], dst[1200];
        snprintf(src, sizeof src, "%s/%s", from, name);
        snprintf(dst, sizeof dst, "%s/%s", to, name);
        size_t len = 0;
        char *b = ork_test_read_all(src, &len);
        bad = !b || write_all(dst, b, len);
        free(b);
        n++;
    }
    ork_dir_close(d);
    return bad || n == 0;
}

/* the folder snap made, with a link named link to tests/fixtures/<fixture>. 0 on success. */
static int link_fixture(const char *snap, const char *fixture, const char *link) {
    char target[600], path[600];
    snprintf(target, sizeof target, "%s/tests/fixtures/%s", ORK_SOURCE_DIR, fixture);
    snprintf(path, sizeof path, "%s/%s", snap, link);
    return ork_mkdir_p(snap) != ORK_OK || symlink(target, path) != 0;
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
    char data[300], photos[600];
    snprintf(data, sizeof data, "%s/data", g_tmp);
    snprintf(photos, sizeof photos, "%s/assets/photos", ORK_SOURCE_DIR);
    if (ork_mkdir_p(data) != ORK_OK || copy_images(photos, data)) return 1;
    for (size_t i = 0; i < sizeof g_repos / sizeof g_repos[0]; i++) {
        char snap[512], model[64], ae[64];
        snprintf(snap, sizeof snap, "%s/hub/models--black-forest-labs--%s/snapshots/0123abcd", g_tmp, g_repos[i].repo);
        snprintf(model, sizeof model, "%s.safetensors", g_repos[i].bfl);
        snprintf(ae, sizeof ae, "%s.safetensors", g_repos[i].ae);
        if (link_fixture(snap, model, "model.safetensors") || link_fixture(snap, ae, "ae.safetensors")) return 1;
    }
    for (size_t i = 0; i < sizeof g_zimage / sizeof g_zimage[0]; i++) {
        char snap[512];
        snprintf(snap, sizeof snap, "%s/hub/models--%s/snapshots/0123abcd/transformer", g_tmp, g_zimage[i]);
        if (link_fixture(snap, "zimage/zimage_tiny_diffusers.safetensors", "diffusion_pytorch_model.safetensors"))
            return 1;
    }
    return 0;
}

static int teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

/* The UI fixture <name>.json with its dataset folder (/path/to/images/folder)
 * made g_tmp/data, into cfg. 0 on success. */
static int fixture_config(const char *name, const char *cfg) {
    static const char ph[] = "/path/to/images/folder";
    char src[600], data[300];
    snprintf(src, sizeof src, "%s/tests/fixtures/aitk_ui/%s.json", ORK_SOURCE_DIR, name);
    snprintf(data, sizeof data, "%s/data", g_tmp);
    size_t len = 0;
    char *j = ork_test_read_all(src, &len), *at = j ? strstr(j, ph) : NULL;
    FILE *f = at ? fopen(cfg, "wb") : NULL;
    int ok = f && fprintf(f, "%.*s%s%s", (int)(at - j), j, data, at + strlen(ph)) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    free(j);
    return ok ? 0 : 1;
}

/* Plan fixture `name` (.json); want: the keys of its "ignored:" lines, in file
 * order, NULL-terminated. */
static void plan_fixture(const char *name, const char *const *want) {
    char cfg[600], err[600];
    snprintf(cfg, sizeof cfg, "%s/%s.json", g_tmp, name);
    snprintf(err, sizeof err, "%s/%s.err", g_tmp, name);
    CU_ASSERT_EQUAL_FATAL(fixture_config(name, cfg), 0);
    char out[600], hub[300];
    snprintf(out, sizeof out, "%s/%s.out", g_tmp, name);
    snprintf(hub, sizeof hub, "HF_HUB_CACHE=%s/hub", g_tmp);
    const char *argv[] = {ORK_ORAKUL_EXE, "plan", cfg, NULL}, *env[] = {hub, NULL};
    int rc = ork_test_spawn(argv, env, NULL, out, err);
    char *text = ork_test_read_text(err); /* "\r\n" on Windows made "\n" */
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
