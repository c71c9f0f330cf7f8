/* test_train_config_errors.c — `orakul run` refuses a bad config before it
 * trains: exit 2 and one error line that says what is wrong, with
 * file:line:col where the value is in the YAML:
 *  - a dataset folder that does not exist (located; refused before the model
 *    is loaded, which for FLUX.1-dev is minutes of reading),
 *  - an unknown optimizer (located, with the available ones),
 *  - a model preset that does not exist (the plugin names the known ones). */
#include "train_test_util.h"

static char g_root[1024];

static int setup(void) { return tt_setup("cfgerr", g_root, sizeof g_root) == 0 ? 0 : 1; }
static int teardown(void) { tt_rm_rf(g_root); return 0; }

/* The default config with out g_root/out and the dataset g_root/<data_leaf>. */
static tt_cfg case_cfg(const char *data_leaf, char out[1100], char data[1100]) {
    tt_fmt(out, 1100, "%s/out", g_root);
    tt_fmt(data, 1100, "%s/%s", g_root, data_leaf);
    return tt_cfg_default(out, data);
}

/* Runs the config built from c (g_root/<tag>.yaml) and asserts the refusal: exit 2
 * and one line holding "error" (line gets it, printed). Returns the stderr text. */
static char *refused(const char *tag, const tt_cfg *c, char *line, size_t n) {
    char cfg[1200], log[1200], e[1300];
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", g_root, tag);
    tt_fmt(log, sizeof log, "%s/%s", g_root, tag);
    tt_fmt(e, sizeof e, "%s.err", log);
    line[0] = 0;
    if (tt_write_config(cfg, c) != 0) return NULL;
    CU_ASSERT(tt_run_q(cfg, log, 120, 1) == 2);
    char *err = tt_read_all(e, NULL);
    CU_ASSERT(tt_lines_with(err, "error", line, n) == 1);
    printf("  %s\n", line);
    return err;
}

/* The written config of a case, g_root/<tag>.yaml. */
static const char *cfg_path(const char *tag, char *buf, size_t n) {
    tt_fmt(buf, n, "%s/%s.yaml", g_root, tag);
    return buf;
}

static void test_missing_dataset(void) {
    char out[1100], data[1100], line[2048];
    tt_cfg c = case_cfg("no_such_folder", out, data);
    char *err = refused("missing_dataset", &c, line, sizeof line);
    CU_ASSERT(strstr(line, "folder_path") && strstr(line, "no_such_folder"));
    char cfg[1200];
    cfg_path("missing_dataset", cfg, sizeof cfg);
    CU_ASSERT(tt_located(line, cfg, tt_line_of(cfg, "folder_path:")));
    /* refused before the model was loaded and before anything was written */
    CU_ASSERT(err && !strstr(err, "MiB of weights"));
    CU_ASSERT(!tt_exists(out));
    free(err);
}

static void test_unknown_optimizer(void) {
    char out[1100], data[1100], line[2048];
    tt_cfg c = case_cfg("data", out, data);
    c.optimizer = "adamw9000";
    char *err = refused("unknown_optimizer", &c, line, sizeof line);
    CU_ASSERT(strstr(line, "optimizer") && strstr(line, "'adamw9000'") && strstr(line, "adamw8bit"));
    char cfg[1200];
    cfg_path("unknown_optimizer", cfg, sizeof cfg);
    CU_ASSERT(tt_located(line, cfg, tt_line_of(cfg, "optimizer: adamw9000")));
    CU_ASSERT(!tt_exists(out));
    free(err);
}

static void test_bad_preset(void) {
    char out[1100], data[1100], line[2048];
    tt_cfg c = case_cfg("data", out, data);
    c.preset = "preset:flux9-ultra";
    char *err = refused("bad_preset", &c, line, sizeof line);
    CU_ASSERT(strstr(line, "flux9-ultra") && strstr(line, "flux1-dev")); /* what is wrong, what is known */
    CU_ASSERT(!tt_exists(out));
    free(err);
}

static const ork_test_case cases[] = {
    {"missing_dataset", test_missing_dataset},
    {"unknown_optimizer", test_unknown_optimizer},
    {"bad_preset", test_bad_preset},
    {NULL, NULL},
};
ORK_TEST_MAIN("train_config_errors", setup, teardown, cases)
