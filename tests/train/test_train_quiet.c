/* test_train_quiet.c — a run that succeeds prints no error line. What it
 * handles on its own is a warning: a latent cache that cannot be written
 * (the dataset folder is read-only, or _latent_cache is not a folder) and
 * cache files that cannot be read (they are re-encoded and written again).
 * Each case trains 2 steps of the tiny model and checks exit 0, no "error:"
 * on stderr, and the warning that says what happened. */
#include "train_test_util.h"

static char g_root[1024];

static int setup(void) { return tt_setup("quiet", g_root, sizeof g_root) == 0 ? 0 : 1; }
static int teardown(void) {
    char data[1100];
    tt_fmt(data, sizeof data, "%s/data", g_root);
    chmod(data, 0755);
    tt_rm_rf(g_root);
    return 0;
}

/* Train 2 steps into <g_root>/<tag>; 0 when it exited 0 and printed no
 * error line. *err gets stderr (caller frees). */
static int quiet_run(const char *tag, char **err) {
    char out[1100], data[1100], cfg[1200], log[1200], e[1300];
    tt_fmt(out, sizeof out, "%s/%s", g_root, tag);
    tt_fmt(data, sizeof data, "%s/data", g_root);
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", g_root, tag);
    tt_fmt(log, sizeof log, "%s/%s", g_root, tag);
    tt_fmt(e, sizeof e, "%s.err", log);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = 2;
    c.save_every = 2;
    if (tt_write_config(cfg, &c) != 0) return -1;
    int rc = tt_run(cfg, log, 200);
    *err = tt_read_all(e, NULL);
    const char *bad = *err ? strstr(*err, "error:") : NULL;
    if (bad) printf("\n  %s: an error line in a run that succeeded:\n%s\n", tag, *err);
    return rc == 0 && *err && !bad ? 0 : 1;
}

/* _latent_cache is a file: no cache can be written there. */
static void test_cache_not_writable(void) {
    char lc[1200];
    tt_fmt(lc, sizeof lc, "%s/data/_latent_cache", g_root);
    tt_rm_rf(lc);
    CU_ASSERT_FATAL(tt_write_all(lc, "not a folder") == 0);
    char *err = NULL;
    CU_ASSERT_EQUAL(quiet_run("notdir", &err), 0);
    CU_ASSERT(err && strstr(err, "warning:") && strstr(err, "not cached on disk"));
    free(err);
    unlink(lc);
}

/* The dataset folder is read-only (as root, permissions do not stop a
 * write: then the case is the one above). */
static void test_dataset_read_only(void) {
    if (geteuid() == 0) {
        printf("\n  (root: a read-only folder is still writable; the _latent_cache case covers it)\n  ");
        return;
    }
    char data[1100], lc[1200];
    tt_fmt(data, sizeof data, "%s/data", g_root);
    tt_fmt(lc, sizeof lc, "%s/_latent_cache", data);
    tt_rm_rf(lc);
    CU_ASSERT_FATAL(chmod(data, 0555) == 0);
    char *err = NULL;
    CU_ASSERT_EQUAL(quiet_run("readonly", &err), 0);
    CU_ASSERT(err && strstr(err, "warning:") && strstr(err, "not cached on disk"));
    free(err);
    chmod(data, 0755);
}

/* Every cache file overwritten with junk: re-encoded with a warning each,
 * written again, and read from the cache by the next run. */
static void test_cache_corrupt(void) {
    char lc[1200];
    tt_fmt(lc, sizeof lc, "%s/data/_latent_cache", g_root);
    tt_rm_rf(lc);
    char *err = NULL;
    CU_ASSERT_EQUAL_FATAL(quiet_run("first", &err), 0);
    free(err);
    int n = 0;
    DIR *d = opendir(lc);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[1600];
        tt_fmt(p, sizeof p, "%s/%s", lc, e->d_name);
        CU_ASSERT(tt_write_all(p, "garbage, not a safetensors file") == 0);
        n++;
    }
    if (d) closedir(d);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(quiet_run("corrupt", &err), 0);
    CU_ASSERT(err && strstr(err, "warning:") && strstr(err, "re-encoding"));
    CU_ASSERT(err && strstr(err, "(3 encoded, 0 from the latent cache)"));
    free(err);
    CU_ASSERT_EQUAL(quiet_run("again", &err), 0);
    CU_ASSERT(err && strstr(err, "(0 encoded, 3 from the latent cache)")); /* written again */
    free(err);
}

static const ork_test_case cases[] = {
    {"latent cache folder not writable: warnings, exit 0", test_cache_not_writable},
    {"read-only dataset folder: warnings, exit 0", test_dataset_read_only},
    {"corrupt latent cache: re-encoded with warnings, exit 0", test_cache_corrupt},
    {NULL, NULL},
};
ORK_TEST_MAIN("train_quiet", setup, teardown, cases)
