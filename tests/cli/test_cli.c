/* tests/cli/test_cli.c — the orakul executable end to end: exit codes (0 ok,
 * 1 training failed, 2 usage/config/input/plugin error) and what it prints,
 * for each command. Configs are written into a temporary directory. */
#include "ork_test.h"
#include "ork_test_proc.h" /* orakul spawned without a shell, on Windows too */

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[PATH_MAX];
static char g_out[1 << 16];

/* What a plugin's folder ends with where orakul prints the path it loaded
 * (the plugin path's folder, then "/" and the file name): Windows prints the
 * folder resolved, Z:\work\...\probe. */
#ifdef _WIN32
#define DIR_SEP "\\"
#else
#define DIR_SEP "/"
#endif

/* Run orakul with args (space-separated words) in g_tmp, ORAKUL_PLUGIN_PATH
 * unset and then env ("NAME=value" or NULL) set for it; limited (POSIX): under
 * a 2 GiB address-space limit (prlimit). At most 30 s when limited, else
 * without limit; g_out is its stdout and then its stderr ("\r\n" made "\n").
 * Returns its exit code (-1: did not start or ran too long). */
static int orakul_in(const char *env, const char *args, int limited) {
    char words[4 * PATH_MAX], outf[PATH_MAX + 16], errf[PATH_MAX + 16];
    const char *argv[24];
    int n = 0;
#ifndef _WIN32
    if (limited) {
        argv[n++] = "/usr/bin/prlimit";
        argv[n++] = "--as=2147483648";
    }
#endif
    argv[n++] = ORK_CLI_EXE;
    snprintf(words, sizeof words, "%s", args);
    for (char *w = strtok(words, " "); w && n < 23; w = strtok(NULL, " ")) argv[n++] = w;
    argv[n] = NULL;
    const char *envv[] = {"ORAKUL_PLUGIN_PATH", env, NULL};
    snprintf(outf, sizeof outf, "%s/out.txt", g_tmp);
    snprintf(errf, sizeof errf, "%s/err.txt", g_tmp);
    int rc = ork_test_spawn_for(argv, envv, g_tmp, outf, errf, limited ? 30000 : ORK_PROC_FOREVER);
    char *o = ork_test_read_text(outf), *e = ork_test_read_text(errf);
    snprintf(g_out, sizeof g_out, "%s%s", o ? o : "", e ? e : "");
    free(o);
    free(e);
    return rc;
}
static int orakul(const char *env, const char *args) { return orakul_in(env, args, 0); }
static int out_has(const char *s) {
    int ok = strstr(g_out, s) != NULL;
    if (!ok) printf("\n  output lacks \"%s\":\n%s\n", s, g_out);
    return ok;
}

static void write_file(const char *name, const char *text) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    FILE *f = fopen(path, "wb"); /* the same bytes on Windows */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* A job config with the probe plugin's components (the loss named `loss`);
 * extra goes under train:. */
static void write_job(const char *name, const char *plugin_dir, const char *folder, const char *loss,
                      const char *extra) {
    char text[4 * PATH_MAX];
    snprintf(text, sizeof text,
             "job: extension\n"
             "config:\n"
             "  name: t\n"
             "  process:\n"
             "    - type: sd_trainer\n"
             "      datasets:\n"
             "        - folder_path: %s\n"
             "      model:\n"
             "        name_or_path: black-forest-labs/FLUX.1-dev\n"
             "        arch: probe-model\n"
             "      plugins:\n"
             "        path: [%s]\n"
             "      train:\n"
             "        optimizer: test.probe.opt\n"
             "        loss_type: %s\n"
             "%s",
             folder, plugin_dir, loss, extra);
    write_file(name, text);
}

static int setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/orakul-cli-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    char images[PATH_MAX + 16];
    snprintf(images, sizeof images, "%s/images", g_tmp);
    if (mkdir(images, 0755) != 0) return 1;
    /* one real image for the dataset scan */
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp '%s/assets/photos/coffee.png' '%s/'", ORK_SOURCE_DIR, images);
    return system(cmd) == 0 ? 0 : 1;
}
static int teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

static void test_usage(void) {
    CU_ASSERT_EQUAL(orakul(NULL, ""), 2);
    CU_ASSERT_TRUE(out_has("usage: orakul <command>"));
    CU_ASSERT_EQUAL(orakul(NULL, "frobnicate"), 2);
    CU_ASSERT_TRUE(out_has("unknown command 'frobnicate'"));
    CU_ASSERT_EQUAL(orakul(NULL, "run"), 2);
    CU_ASSERT_TRUE(out_has("expected one CONFIG argument"));
    CU_ASSERT_EQUAL(orakul(NULL, "plan a.yaml b.yaml"), 2);
    CU_ASSERT_EQUAL(orakul(NULL, "plugins --frob"), 2);
    CU_ASSERT_EQUAL(orakul(NULL, "help"), 0);
    CU_ASSERT_TRUE(out_has("plan CONFIG"));
    CU_ASSERT_TRUE(out_has("ORAKUL_PLUGIN_PATH"));
}

static void test_version(void) {
    CU_ASSERT_EQUAL(orakul(NULL, "--version"), 0);
    CU_ASSERT_TRUE(out_has("orakul " ORAKUL_VERSION " (plugin ABI "));
}

static void test_config_errors(void) {
    CU_ASSERT_EQUAL(orakul(NULL, "run missing.yaml"), 2);
    CU_ASSERT_TRUE(out_has("missing.yaml"));
    CU_ASSERT_EQUAL(orakul(NULL, "plan missing.yaml"), 2);
    write_file("empty.yaml", "");
    CU_ASSERT_EQUAL(orakul(NULL, "run empty.yaml"), 2);
    CU_ASSERT_TRUE(out_has("empty.yaml"));
    CU_ASSERT_EQUAL(orakul(NULL, "plan empty.yaml"), 2);
    write_file("junk.yaml", "job: [unclosed\n");
    CU_ASSERT_EQUAL(orakul(NULL, "plan junk.yaml"), 2);
}

static void test_plugins_keys(void) {
    char env[PATH_MAX + 32];
    snprintf(env, sizeof env, "ORAKUL_PLUGIN_PATH=%s/probe", PROBE_DIR);
    CU_ASSERT_EQUAL(orakul(env, "plugins --keys"), 0);
    CU_ASSERT_TRUE(out_has(DIR_SEP "probe/orakul-probe" ORK_PLUGIN_SUFFIX));
    CU_ASSERT_TRUE(out_has("loss      test.probe (alias: probe)"));
    CU_ASSERT_TRUE(out_has("weight"));
    CU_ASSERT_TRUE(out_has("default 1.0"));
    CU_ASSERT_TRUE(out_has("range [0, 10]"));
    CU_ASSERT_TRUE(out_has("Scale of the loss."));
    CU_ASSERT_TRUE(out_has("float[2]"));
    CU_ASSERT_TRUE(out_has("one of sum|mean"));
    /* the chosen path is logged */
    CU_ASSERT_TRUE(out_has("plugin probe 0.1 (ABI "));
    CU_ASSERT_EQUAL(orakul(env, "plugins"), 0);
    CU_ASSERT_PTR_NULL(strstr(g_out, "Scale of the loss."));
}

static void test_plugin_errors(void) {
    char env[2 * PATH_MAX + 32], dir[PATH_MAX], folder[PATH_MAX + 16];
    /* a refused plugin on the path: listed as an error, exit 2 */
    snprintf(env, sizeof env, "ORAKUL_PLUGIN_PATH=%s/probe%c%s/major2", PROBE_DIR, ork_path_list_sep(), PROBE_DIR);
    CU_ASSERT_EQUAL(orakul(env, "plugins"), 2);
    CU_ASSERT_TRUE(out_has(DIR_SEP "major2/orakul-major2" ORK_PLUGIN_SUFFIX ": entry built for ABI 2.0"));
    CU_ASSERT_TRUE(out_has("test.probe")); /* the good one is still listed */

    snprintf(folder, sizeof folder, "%s/images", g_tmp);
    snprintf(dir, sizeof dir, "%s/major2", PROBE_DIR);
    write_job("bad_plugin.yaml", dir, folder, "probe", "");
    CU_ASSERT_EQUAL(orakul(NULL, "plan bad_plugin.yaml"), 2);
    CU_ASSERT_TRUE(out_has("orakul-major2" ORK_PLUGIN_SUFFIX));
    CU_ASSERT_EQUAL(orakul(NULL, "run bad_plugin.yaml"), 2);

    /* a component no plugin provides: the error lists the available ones */
    snprintf(dir, sizeof dir, "%s/probe", PROBE_DIR);
    write_job("no_such.yaml", dir, folder, "l7", "");
    CU_ASSERT_EQUAL(orakul(NULL, "plan no_such.yaml"), 2);
    CU_ASSERT_TRUE(out_has("no_such.yaml:15:")); /* where train.loss_type is */
    CU_ASSERT_TRUE(out_has("'l7'"));
    CU_ASSERT_TRUE(out_has("probe"));            /* an available one */

    /* a plugins.path that does not exist */
    write_job("no_dir.yaml", "/nonexistent/plugins", folder, "probe", "");
    CU_ASSERT_EQUAL(orakul(NULL, "plan no_dir.yaml"), 2);
}

static void test_plan(void) {
    char dir[PATH_MAX], folder[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/probe", PROBE_DIR);
    snprintf(folder, sizeof folder, "%s/images", g_tmp);
    write_job("ok.yaml", dir, folder, "probe", "        loss_params:\n          weight: 2.5\n");
    CU_ASSERT_EQUAL(orakul(NULL, "plan ok.yaml"), 0);
    CU_ASSERT_TRUE(out_has("plan: ok.yaml is valid"));
    CU_ASSERT_TRUE(out_has("train.loss_params.weight = 2.5  (ok.yaml:"));
    CU_ASSERT_TRUE(out_has("train.loss_params.steps = 3  (default)"));
    CU_ASSERT_TRUE(out_has("train.steps = 1000  (default)"));
    CU_ASSERT_TRUE(out_has("1 images"));

    /* a component key out of range, an unknown component key */
    write_job("range.yaml", dir, folder, "probe", "        loss_params:\n          weight: 11\n");
    CU_ASSERT_EQUAL(orakul(NULL, "plan range.yaml"), 2);
    CU_ASSERT_TRUE(out_has("range.yaml:"));
    write_job("typo.yaml", dir, folder, "probe", "        loss_params:\n          wieght: 1\n");
    CU_ASSERT_EQUAL(orakul(NULL, "plan typo.yaml"), 2);
    CU_ASSERT_TRUE(out_has("wieght"));

    /* a dataset folder that is missing, or holds no image */
    write_job("no_folder.yaml", dir, "/nonexistent/images", "probe", "");
    CU_ASSERT_EQUAL(orakul(NULL, "plan no_folder.yaml"), 2);
    CU_ASSERT_TRUE(out_has("/nonexistent/images"));
    write_job("empty_folder.yaml", dir, g_tmp, "probe", "");
    CU_ASSERT_EQUAL(orakul(NULL, "plan empty_folder.yaml"), 2);
}

/* How many "error:" lines the last command printed. */
static int error_lines(void) {
    int n = 0;
    for (const char *p = g_out; (p = strstr(p, "error: ")); p++) n++;
    return n;
}

/* plan and run refuse, before reading, a CONFIG that is not a regular file
 * (/dev/zero never ends, a FIFO with no writer never answers), and a
 * config.name that is a path: exit 2 and one error line. Each command runs
 * under a 2 GiB address-space limit (POSIX) and a 30 s limit, so a reader
 * that grows or blocks fails here instead of stalling the suite. Windows has
 * no /dev/zero and no FIFO at a path: there its character device NUL. */
static void test_unreadable_config(void) {
    char args[PATH_MAX + 32];
    static const char *const cmd[] = {"plan", "run"};
#ifndef _WIN32
    char fifo[PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/fifo.yaml", g_tmp);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0644), 0);
    for (int c = 0; c < 2; c++) {
        snprintf(args, sizeof args, "%s /dev/zero", cmd[c]);
        CU_ASSERT_EQUAL(orakul_in(NULL, args, 1), 2);
        CU_ASSERT_TRUE(out_has("/dev/zero: the config is a character device, not a regular file"));
        CU_ASSERT_EQUAL(error_lines(), 1);
        snprintf(args, sizeof args, "%s fifo.yaml", cmd[c]);
        CU_ASSERT_EQUAL(orakul_in(NULL, args, 1), 2);
        CU_ASSERT_TRUE(out_has("fifo.yaml: the config is a FIFO, not a regular file"));
        CU_ASSERT_EQUAL(error_lines(), 1);
    }
#else
    for (int c = 0; c < 2; c++) {
        snprintf(args, sizeof args, "%s NUL", cmd[c]);
        CU_ASSERT_EQUAL(orakul_in(NULL, args, 1), 2);
        CU_ASSERT_TRUE(out_has("NUL: the config is a character device, not a regular file"));
        CU_ASSERT_EQUAL(error_lines(), 1);
    }
#endif
    /* config.name that would write two folders above training_folder */
    char folder[PATH_MAX + 16], text[3 * PATH_MAX];
    snprintf(folder, sizeof folder, "%s/images", g_tmp);
    snprintf(text, sizeof text,
             "job: extension\nconfig:\n  name: ../../escape\n  process:\n    - type: sd_trainer\n"
             "      training_folder: %s/out/a/b\n      datasets:\n        - folder_path: %s\n"
             "      model:\n        name_or_path: preset:custom\n",
             g_tmp, folder);
    write_file("escape.yaml", text);
    for (int c = 0; c < 2; c++) {
        snprintf(args, sizeof args, "%s escape.yaml", cmd[c]);
        CU_ASSERT_EQUAL(orakul_in(NULL, args, 1), 2);
        CU_ASSERT_TRUE(out_has("escape.yaml:3:9: config.name contains '..'"));
        CU_ASSERT_EQUAL(error_lines(), 1);
    }
    char esc[PATH_MAX + 32];
    snprintf(esc, sizeof esc, "%s/out/escape", g_tmp);
    CU_ASSERT_NOT_EQUAL(access(esc, F_OK), 0); /* nothing written outside training_folder */
}

static const ork_test_case cases[] = {
    {"usage errors exit 2, help exits 0", test_usage},
    {"--version", test_version},
    {"missing, empty and malformed configs exit 2", test_config_errors},
    {"plugins --keys documents every key", test_plugins_keys},
    {"plugin errors exit 2", test_plugin_errors},
    {"plan validates and prints the resolved config", test_plan},
    {"plan and run refuse /dev/zero, a FIFO, an escaping config.name", test_unreadable_config},
    {NULL, NULL},
};
ORK_TEST_MAIN("cli", setup, teardown, cases)
