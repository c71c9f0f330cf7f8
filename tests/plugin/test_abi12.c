/* tests/plugin/test_abi12.c — a model plugin built against ABI 1.2 still loads
 * and trains (issue #30): orakul-flux12.so is the FLUX plugin compiled as a
 * 1.2 plugin would be (flux_plugin.c with FLUX_ABI_MINOR_2: entry minor 2, an
 * ork_model_info that ends before the 1.3 fields, no declarations). The core's
 * defaults stand in (core/plugin/model_decl.h), and for a FLUX.1-shaped model
 * they give exactly what the declaring plugin gives: `orakul run` of the
 * quickstart's tiny model for 4 steps writes the same LoRA file, byte for
 * byte, with either plugin; `orakul plan` plans the 1.2 one. */
#include "../train/train_test_util.h"

#include <CUnit/CUnit.h>

static char g_root[1024], g_data[1100];

static int setup(void) {
    char env[1200];
    tt_fmt(env, sizeof env, "%s/flux12", PROBE_DIR);
    if (setenv("ORAKUL_PLUGIN_PATH", env, 1) != 0) return 1;
    if (tt_setup("abi12", g_root, sizeof g_root) != 0) return 1;
    tt_fmt(g_data, sizeof g_data, "%s/data", g_root);
    return 0;
}
static int teardown(void) {
    tt_rm_rf(g_root);
    return 0;
}

/* The tiny config for arch (flux or flux12), training into <root>/<tag>. */
static int write_cfg(const char *tag, const char *arch, char *cfg, size_t n) {
    char out[1200];
    tt_fmt(out, sizeof out, "%s/%s", g_root, tag);
    tt_fmt(cfg, n, "%s/%s.yaml", g_root, tag);
    tt_cfg c = tt_cfg_default(out, g_data);
    c.steps = 4;
    c.save_every = 4;
    c.keep = 1;
    if (tt_write_config(cfg, &c) != 0) return -1;
    char *t = tt_read_all(cfg, NULL), *at = t ? strstr(t, "arch: flux\n") : NULL;
    if (!at) { free(t); return -1; }
    char *o = malloc(strlen(t) + 64);
    if (!o) { free(t); return -1; }
    sprintf(o, "%.*sarch: %s\n%s", (int)(at - t), t, arch, at + strlen("arch: flux\n"));
    int r = tt_write_all(cfg, o);
    free(o);
    free(t);
    return r;
}

static void test_trains_like_the_declaring_plugin(void) {
    char c13[1200], c12[1200], log[1300], a[1400], b[1400];
    CU_ASSERT_FATAL(write_cfg("v13", "flux", c13, sizeof c13) == 0);
    CU_ASSERT_FATAL(write_cfg("v12", "flux12", c12, sizeof c12) == 0);
    tt_fmt(log, sizeof log, "%s/run13", g_root);
    CU_ASSERT_FATAL(tt_run(c13, log, 200) == 0);
    tt_fmt(log, sizeof log, "%s/run12", g_root);
    CU_ASSERT_FATAL(tt_run(c12, log, 200) == 0);
    /* the 1.2 plugin was the one that ran, loaded as ABI 1.2 */
    tt_fmt(a, sizeof a, "%s/run12.err", g_root);
    tt_fmt(b, sizeof b, "%s/run12.out", g_root);
    CU_ASSERT(tt_file_has(a, "plugin flux12 1.0.0 (ABI 1.2)") || tt_file_has(b, "plugin flux12 1.0.0 (ABI 1.2)"));
    tt_fmt(a, sizeof a, "%s/v13/quickstart/quickstart_000000004.safetensors", g_root);
    tt_fmt(b, sizeof b, "%s/v12/quickstart/quickstart_000000004.safetensors", g_root);
    CU_ASSERT_TRUE(tt_exists(a) && tt_exists(b));
    CU_ASSERT_TRUE(tt_same_bytes(a, b));
}

static void test_plans(void) {
    char c12[1200], log[1300], out[1400], err[1400];
    CU_ASSERT_FATAL(write_cfg("p12", "flux12", c12, sizeof c12) == 0);
    tt_fmt(log, sizeof log, "%s/plan12", g_root);
    tt_fmt(out, sizeof out, "%s.out", log);
    tt_fmt(err, sizeof err, "%s.err", log);
    const char *args[] = {"plan", c12, NULL};
    CU_ASSERT_EQUAL(tt_orakul(args, log, 200), 0); /* ork_proc_spawn: no shell */
    CU_ASSERT_TRUE(tt_file_has(out, "(ABI 1.2)") || tt_file_has(err, "(ABI 1.2)"));
    CU_ASSERT_TRUE(tt_file_has(out, "blocks")); /* the printed plan */
}

static const ork_test_case cases[] = {
    {"an ABI 1.2 model trains as the declaring plugin does", test_trains_like_the_declaring_plugin},
    {"an ABI 1.2 model plans", test_plans},
    {NULL, NULL},
};
ORK_TEST_MAIN("abi12", setup, teardown, cases)
