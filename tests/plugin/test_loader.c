/* tests/plugin/test_loader.c — the plugin loader, host table and registry
 * against the probe plugins of probe.c: every refusal (status and the one
 * logged line: file path and versions), ABI normalisation as a newer core
 * sees an older plugin, duplicate ids, the search order, never the CWD.
 * OS calls through core/platform (libraries, paths, environment, the
 * executable's path), so that it runs on Windows too (under Wine in CI). */
#include "ork_test.h"

#include "plugin/host.h"     /* ork_host_register_service */
#include "plugin/loader.h"   /* ork_plugin_open, ork_plugin_search_dirs, ork_abi_profile */
#include "plugin/registry.h" /* ork_registry_* */
#include "util/log.h"        /* ork_log_set_sink */

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#define SO ORK_PLUGIN_SUFFIX /* ".so" / ".dll" */

#include <orakul/loss.h>

#include "platform/platform.h" /* ork_lib_*, ork_path_real, ork_env_set, ork_exe_path */

#include <limits.h>
#include <stdlib.h>

/* ---- log capture -------------------------------------------------------- */
#define MAX_LINES 64
static char g_lines[MAX_LINES][1024];
static int g_n, g_errors;
static char g_last_error[1024];

static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (g_n < MAX_LINES) snprintf(g_lines[g_n++], sizeof g_lines[0], "%s", line);
    if (lvl >= ORK_LOG_ERROR) {
        g_errors++;
        snprintf(g_last_error, sizeof g_last_error, "%s", line);
    }
}
static void clear_log(void) { g_n = g_errors = 0; g_last_error[0] = '\0'; }
static int logged(const char *needle) {
    for (int i = 0; i < g_n; i++)
        if (strstr(g_lines[i], needle)) return 1;
    return 0;
}

static const char *probe_path(const char *variant) {
    static char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s/%s/orakul-%s" SO, PROBE_DIR, variant, variant);
    return buf;
}

static int setup(void) {
    static int svc_table = 7;
    ork_log_set_sink(sink, NULL);
    ork_log_set_level(ORK_LOG_DEBUG);
    return ork_host_register_service("test.svc/1", &svc_table) == ORK_OK ? 0 : 1;
}
static int teardown(void) {
    ork_host_clear_services();
    ork_log_set_sink(NULL, NULL);
    return 0;
}

/* ---- host services ------------------------------------------------------- */
static void test_services(void) {
    static int other;
    CU_ASSERT_PTR_NOT_NULL(ork_host_get_service("test.svc/1"));
    CU_ASSERT_PTR_NULL(ork_host_get_service("test.svc/2"));
    CU_ASSERT_PTR_NULL(ork_host_get_service("test.svc"));   /* exact id with revision */
    CU_ASSERT_PTR_NULL(ork_host_get_service("test.svc/10"));
    CU_ASSERT_PTR_NULL(ork_host_get_service(NULL));
    clear_log();
    CU_ASSERT_EQUAL(ork_host_register_service("test.svc/1", ork_host_get_service("test.svc/1")), ORK_OK);
    CU_ASSERT_EQUAL(g_errors, 0);
    CU_ASSERT_EQUAL(ork_host_register_service("test.svc/1", &other), ORK_E_INVALID);
    CU_ASSERT_TRUE(logged("test.svc/1: registered twice, with another table"));
    CU_ASSERT_EQUAL(ork_host_register_service(NULL, &other), ORK_E_INVALID);
}

/* ---- a good plugin -------------------------------------------------------- */
static void test_loads_probe(void) {
    ork_registry *r;
    CU_ASSERT_EQUAL_FATAL(ork_registry_create(NULL, &r), ORK_OK);
    clear_log();
    const char *path = probe_path("probe");
    CU_ASSERT_EQUAL_FATAL(ork_registry_add_file(r, path), ORK_OK);
    CU_ASSERT_EQUAL(g_errors, 0);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "plugin probe 0.1 (ABI %d.%d) loaded from %s", ORK_ABI_MAJOR,
             ORK_ABI_MINOR, path);
    CU_ASSERT_TRUE(logged(want));
    /* init ran, its line is prefixed with the plugin name, get_service answered */
    CU_ASSERT_TRUE(logged("orakul: probe: init: core " ORAKUL_VERSION
                          ", test.svc/1=found, test.svc/2=null"));

    CU_ASSERT_EQUAL_FATAL(ork_registry_count(r), 1);
    const ork_plugin *p = ork_registry_plugin(r, 0);
    CU_ASSERT_EQUAL(p->n_components, 4);
    CU_ASSERT_STRING_EQUAL(p->name, "probe");

    /* by id and by alias, per kind */
    const ork_plugin_component *l = ork_registry_find(r, ORK_KIND_LOSS, "test.probe");
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_PTR_EQUAL(ork_registry_find(r, ORK_KIND_LOSS, "probe"), l);
    CU_ASSERT_PTR_NOT_NULL(ork_registry_find(r, ORK_KIND_MODEL, "probe-model"));
    CU_ASSERT_PTR_NOT_NULL(ork_registry_find(r, ORK_KIND_OPTIMIZER, "test.probe.opt"));
    CU_ASSERT_PTR_NOT_NULL(ork_registry_find(r, ORK_KIND_QUANT, "test.probe.quant"));
    CU_ASSERT_PTR_NULL(ork_registry_find(r, ORK_KIND_MODEL, "probe"));      /* wrong kind */
    CU_ASSERT_PTR_NULL(ork_registry_find(r, ORK_KIND_LOSS, "test.probe.opt"));
    CU_ASSERT_PTR_NULL(ork_registry_find(r, ORK_KIND_LOSS, "test.prob"));

    /* the normalised copy is the core's, with the plugin's contents */
    const ork_loss_vtable *vt = l->c->vtable;
    CU_ASSERT_PTR_NOT_NULL(vt->compute);
    CU_ASSERT_PTR_NULL(vt->prepare);
    CU_ASSERT_STRING_EQUAL(l->c->params[0].key, "weight");
    /* the component's host table prefixes plugin and component */
    clear_log();
    l->host.log(&l->host, ORK_LEVEL_WARN, "hello %d", 42);
    CU_ASSERT_TRUE(logged("orakul: warning: probe/test.probe: hello 42"));
    CU_ASSERT_PTR_NOT_NULL(l->host.get_service(&l->host, "test.svc/1"));

    /* an unavailable component lists the available ones */
    const ork_plugin_component *pc;
    clear_log();
    CU_ASSERT_EQUAL(ork_registry_require(r, ORK_KIND_LOSS, "l2", "train.loss_type", &pc), ORK_E_CONFIG);
    CU_ASSERT_PTR_NULL(pc);
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, "train.loss_type: no loss component 'l2'; "
                                                "available: test.probe (probe)"));
    CU_ASSERT_EQUAL(ork_registry_require(r, ORK_KIND_OPTIMIZER, "test.probe.opt", "x", &pc), ORK_OK);
    CU_ASSERT_PTR_EQUAL(pc, ork_registry_find(r, ORK_KIND_OPTIMIZER, "test.probe.opt"));
    ork_registry_destroy(r);
}

/* ---- every refusal: status, one line naming the file and the versions ------ */
typedef struct refusal {
    const char *variant;
    ork_status status;
    const char *says; /* printf pattern; %d %d = ABI major, minor of the core */
} refusal;

/* says with %1$d..%4$d (or %d in order: 1, 2, ...) = core major, minor, major,
 * minor + 1, substituted here: positional printf arguments are POSIX, not C
 * (neither MinGW's printf nor MSVC's takes them). */
static void says_text(const char *says, char *out, size_t n) {
    const int v[4] = {ORK_ABI_MAJOR, ORK_ABI_MINOR, ORK_ABI_MAJOR, ORK_ABI_MINOR + 1};
    size_t k = 0;
    int seq = 0;
    for (const char *c = says; *c && k + 12 < n; c++) {
        int idx = -1;
        if (c[0] == '%' && c[1] >= '1' && c[1] <= '4' && c[2] == '$' && c[3] == 'd') idx = c[1] - '1', c += 3;
        else if (c[0] == '%' && c[1] == 'd') idx = seq++, c += 1;
        if (idx >= 0) k += (size_t)snprintf(out + k, n - k, "%d", v[idx]);
        else out[k++] = *c;
    }
    out[k] = '\0';
}

static void check_refusal(const char *path, ork_status want, const char *says) {
    ork_registry *r;
    CU_ASSERT_EQUAL_FATAL(ork_registry_create(NULL, &r), ORK_OK);
    clear_log();
    ork_status s = ork_registry_add_file(r, path);
    char text[512];
    says_text(says, text, sizeof text);
    int ok = s == want && g_errors == 1 && strstr(g_last_error, path) && strstr(g_last_error, text);
    if (!ok) printf("\n  %s: status %d (want %d), %d error lines, last: %s\n  want: %s\n", path, s,
                    want, g_errors, g_last_error, text);
    CU_ASSERT_EQUAL(s, want);
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, text));
    CU_ASSERT_EQUAL(ork_registry_count(r), 0);
    ork_registry_destroy(r);
}

static void test_refusals(void) {
    /* %1$d.%2$d = the core's major.minor; %3$d.%4$d = major.(minor + 1) */
    static const refusal cases[] = {
        {"noentry", ORK_E_ABI, "no symbol orakul_plugin_entry: not an orakul plugin (core ABI %1$d.%2$d)"},
        {"major2", ORK_E_ABI, "entry built for ABI 2.0, core provides %1$d.%2$d: major versions differ"},
        {"newminor", ORK_E_ABI, "entry built against SDK %3$d.%4$d, core provides %1$d.%2$d: upgrade orakul"},
        {"trunc_entry", ORK_E_ABI, "entry (ABI %1$d.%2$d, core %1$d.%2$d) is truncated: struct_size 8 is less"},
        {"trunc_comp", ORK_E_ABI, "component #0 (ABI %1$d.%2$d, core %1$d.%2$d) is truncated"},
        {"trunc_vt", ORK_E_ABI, "loss vtable of test.trunc_vt (ABI %1$d.%2$d, core %1$d.%2$d) is truncated"},
        {"no_create", ORK_E_ABI, "component test.no_create (loss, ABI %1$d.%2$d): required vtable entry 'create' is NULL"},
        {"no_compute", ORK_E_ABI, "component test.no_compute (loss, ABI %1$d.%2$d): required vtable entry 'compute' is NULL"},
        {"no_block", ORK_E_ABI, "component test.no_block.model (model, ABI %1$d.%2$d): required vtable entry 'block' is NULL"},
        {"no_step", ORK_E_ABI, "component test.no_step.opt (optimizer, ABI %1$d.%2$d): required vtable entry 'step' is NULL"},
        {"no_dequantize", ORK_E_ABI, "component test.no_dequantize.quant (quant, ABI %1$d.%2$d): required vtable entry 'dequantize'"},
        {"bad_offset", ORK_E_ABI, "component test.bad_offset: key 'stray' at offset"},
        {"init_fails", ORK_E_UNSUPPORTED, "(ABI %1$d.%2$d): init failed: unsupported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_refusal(probe_path(cases[i].variant), cases[i].status, cases[i].says);
}

/* A file that is not a shared object at all, and one that does not exist. */
static void test_not_a_plugin(void) {
    char tmp[PATH_MAX], path[PATH_MAX + 64];
    CU_ASSERT_EQUAL_FATAL(ork_temp_dir(tmp, sizeof tmp), ORK_OK);
    snprintf(path, sizeof path, "%s/orakul-garbage-%ld" SO, tmp, ork_pid());
    int fd;
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(path, ORK_F_WRITE | ORK_F_CREATE | ORK_F_TRUNC, &fd), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_write(fd, "not an ELF file\n", 16), ORK_OK);
    ork_fd_close(fd);
    check_refusal(path, ORK_E_IO, "cannot load (core ABI %d.%d)");
    ork_path_remove(path);
    check_refusal("/nonexistent/orakul-none" SO, ORK_E_IO, "cannot load (core ABI %d.%d)");
}

static void test_duplicate_id(void) {
    ork_registry *r;
    char a[2 * PATH_MAX], b[2 * PATH_MAX], dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/dup", PROBE_DIR);
    snprintf(a, sizeof a, "%s/orakul-dup_a" SO, dir);
    snprintf(b, sizeof b, "%s/orakul-dup_b" SO, dir);
    CU_ASSERT_EQUAL_FATAL(ork_registry_create(NULL, &r), ORK_OK);
    clear_log();
    char *dirs[] = {dir};
    CU_ASSERT_EQUAL(ork_registry_scan(r, dirs, 1), ORK_E_ABI); /* sorted: a, then b */
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, b));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, "duplicate component id 'test.dup' (loss)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, a));
    CU_ASSERT_EQUAL(ork_registry_count(r), 1);
    CU_ASSERT_STRING_EQUAL(ork_registry_plugin(r, 0)->name, "dup_a");
    /* the same plugin again: every id clashes with itself */
    clear_log();
    CU_ASSERT_EQUAL(ork_registry_add_file(r, a), ORK_E_ABI);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last_error, "duplicate component id 'test.dup'"));
    CU_ASSERT_EQUAL(ork_registry_count(r), 1);
    ork_registry_destroy(r);
}

/* A scan keeps the good plugins, reports every refusal, returns the first. */
static void test_scan_goes_on(void) {
    ork_registry *r;
    char d1[PATH_MAX], d2[PATH_MAX], d3[PATH_MAX];
    snprintf(d1, sizeof d1, "%s/major2", PROBE_DIR);
    snprintf(d2, sizeof d2, "%s/probe", PROBE_DIR);
    snprintf(d3, sizeof d3, "%s/no_such_dir", PROBE_DIR);
    char *dirs[] = {d1, d3, d2};
    CU_ASSERT_EQUAL_FATAL(ork_registry_create(NULL, &r), ORK_OK);
    clear_log();
    CU_ASSERT_EQUAL(ork_registry_scan(r, dirs, 3), ORK_E_ABI);
    CU_ASSERT_EQUAL(g_errors, 1);
    CU_ASSERT_EQUAL(ork_registry_count(r), 1);
    CU_ASSERT_PTR_NOT_NULL(ork_registry_find(r, ORK_KIND_LOSS, "probe"));
    ork_registry_destroy(r);
}

/* ---- ABI growth: a 1.(m+1) core with a field appended to the component, the
 * entry and the loss vtable loads plugins built for 1.m. The junk_tail probe
 * has non-zero bytes right after its vtable and component: the appended
 * fields must still read NULL, because the core copies struct_size bytes. */
typedef struct future_loss_vtable {
    ork_loss_vtable v;
    void *appended;
} future_loss_vtable;
typedef struct future_component {
    ork_component c;
    void *appended;
} future_component;

static void test_older_minor_normalised(void) {
    ork_abi_profile future = ork_abi_current;
    future.minor = ORK_ABI_MINOR + 1;
    future.entry_size += sizeof(void *);
    future.component_size = sizeof(future_component);
    future.vtable_size[ORK_KIND_LOSS] = sizeof(future_loss_vtable);

    const char *path = probe_path("junk_tail");
    /* the test means something only if the plugin's memory past struct_size is not zero */
    ork_lib *dl;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(ork_lib_open(path, err, sizeof err, &dl), ORK_OK);
    ork_plugin_entry_fn fn;
    void *sym = ork_lib_sym(dl, ORK_ENTRY_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sym);
    memcpy(&fn, &sym, sizeof fn);
    const ork_component *raw = fn()->components[0];
    CU_ASSERT_EQUAL(raw->abi.struct_size, sizeof(ork_component));
    CU_ASSERT_EQUAL(raw->abi.minor, ORK_ABI_MINOR);
    CU_ASSERT_PTR_NOT_NULL(((const future_component *)raw)->appended);
    CU_ASSERT_PTR_NOT_NULL(((const future_loss_vtable *)raw->vtable)->appended);

    ork_registry *r;
    CU_ASSERT_EQUAL_FATAL(ork_registry_create(&future, &r), ORK_OK);
    clear_log();
    CU_ASSERT_EQUAL_FATAL(ork_registry_add_file(r, path), ORK_OK);
    CU_ASSERT_EQUAL(g_errors, 0);
    const ork_plugin_component *pc = ork_registry_find(r, ORK_KIND_LOSS, "test.junk_tail");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pc);
    CU_ASSERT_PTR_NULL(((const future_component *)pc->c)->appended);
    const future_loss_vtable *vt = pc->c->vtable;
    CU_ASSERT_PTR_NULL(vt->appended);
    CU_ASSERT_PTR_EQUAL(vt->v.compute, ((const ork_loss_vtable *)raw->vtable)->compute);
    CU_ASSERT_PTR_NOT_NULL(vt->v.create);
    CU_ASSERT_PTR_NULL(vt->v.prepare); /* optional and not set */
    /* and the plugin that is "too new" for this build is fine for the future core */
    CU_ASSERT_EQUAL(ork_registry_add_file(r, probe_path("newminor")), ORK_OK);
    ork_registry_destroy(r);
    ork_lib_close(dl);
}

/* ---- search path and order ---------------------------------------------- */
/* A fake orakul executable, order/<which>/bin/orakul: its exe-relative plugin
 * folder is order/<which>/lib/orakul/plugins (where the "exe" probe is); on
 * Windows its own folder, bin/, comes first (empty here). */
static void exe_of(char *buf, size_t n, const char *which) {
    snprintf(buf, n, "%s/order/%s/bin/orakul", PROBE_DIR, which);
}

static void real(const char *in, char *out) {
    if (ork_path_real(in, out, PATH_MAX) == ORK_OK) return;
    size_t n = strnlen(in, PATH_MAX - 1);
    memcpy(out, in, n);
    out[n] = '\0';
}

static void test_search_dirs(void) {
    char yaml[PATH_MAX], env[PATH_MAX], exe[PATH_MAX], exe_rel[PATH_MAX], want[2 * PATH_MAX];
    snprintf(yaml, sizeof yaml, "%s/order/yaml", PROBE_DIR);
    snprintf(env, sizeof env, "%s/order/env", PROBE_DIR);
    exe_of(exe, sizeof exe, "exe");
    snprintf(exe_rel, sizeof exe_rel, "%s/order/exe/lib/orakul/plugins", PROBE_DIR);
    char envvar[3 * PATH_MAX], c = ork_path_list_sep();
    snprintf(envvar, sizeof envvar, "%c%c%s%c%c%s%c", c, c, env, c, c, yaml, c); /* empty entries; yaml again */
    ork_env_set("ORAKUL_PLUGIN_PATH", envvar);
    const char *y[] = {yaml};
    char **dirs;
    int n;
    CU_ASSERT_EQUAL_FATAL(ork_plugin_search_dirs(y, 1, exe, &dirs, &n), ORK_OK);
    int w = ork_os_windows(); /* Windows: the exe's own folder before exe-relative */
    CU_ASSERT_EQUAL_FATAL(n, 4 + w);
    real(yaml, want);
    CU_ASSERT_STRING_EQUAL(dirs[0], want);
    real(env, want);
    CU_ASSERT_STRING_EQUAL(dirs[1], want);
    if (w) {
        char bin[PATH_MAX];
        snprintf(bin, sizeof bin, "%s/order/exe/bin", PROBE_DIR);
        real(bin, want);
        CU_ASSERT_STRING_EQUAL(dirs[2], want);
    }
    real(exe_rel, want);
    CU_ASSERT_STRING_EQUAL(dirs[2 + w], want);
    real(ORAKUL_PLUGIN_INSTALL_DIR, want);
    CU_ASSERT_STRING_EQUAL(dirs[3 + w], want);
    char cwd[PATH_MAX];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int i = 0; i < n; i++) CU_ASSERT_STRING_NOT_EQUAL(dirs[i], cwd);
    ork_plugin_dirs_free(dirs, n);

    /* exe NULL: the running executable (/proc/self/exe, GetModuleFileNameW) */
    ork_env_set("ORAKUL_PLUGIN_PATH", NULL);
    CU_ASSERT_EQUAL_FATAL(ork_plugin_search_dirs(NULL, 0, NULL, &dirs, &n), ORK_OK);
    CU_ASSERT_FATAL(n >= 1);
    char self[PATH_MAX];
    CU_ASSERT_EQUAL_FATAL(ork_exe_path(self, sizeof self), ORK_OK);
    char *slash = NULL;
    for (char *q = self; *q; q++)
        if (ork_path_is_sep(*q)) slash = q;
    CU_ASSERT_PTR_NOT_NULL_FATAL(slash);
    *slash = '\0';
    /* Windows: beside orakul.exe; else <exe_dir>/../lib/orakul/plugins */
    snprintf(want, sizeof want, "%s%s", self, ork_os_windows() ? "" : "/../lib/orakul/plugins");
    char w2[PATH_MAX];
    real(want, w2);
    CU_ASSERT_STRING_EQUAL(dirs[0], w2);
    ork_plugin_dirs_free(dirs, n);
}

/* Which copy of orakul-order.so the full search order picks. */
static const char *order_winner(int with_yaml, int with_env, int with_exe) {
    static char version[32];
    char yaml[PATH_MAX], env[PATH_MAX], exe[PATH_MAX];
    snprintf(yaml, sizeof yaml, "%s/order/yaml", PROBE_DIR);
    snprintf(env, sizeof env, "%s/order/env", PROBE_DIR);
    exe_of(exe, sizeof exe, with_exe ? "exe" : "none");
    ork_env_set("ORAKUL_PLUGIN_PATH", with_env ? env : NULL);
    const char *y[] = {yaml};
    char **dirs;
    int n;
    ork_registry *r;
    version[0] = '\0';
    if (ork_plugin_search_dirs(y, with_yaml, exe, &dirs, &n) != ORK_OK) return "error";
    if (ork_registry_create(NULL, &r) == ORK_OK) {
        if (ork_registry_scan(r, dirs, n) == ORK_OK) {
            const ork_plugin_component *pc = ork_registry_find(r, ORK_KIND_LOSS, "test.order");
            snprintf(version, sizeof version, "%s", pc ? pc->plugin->entry->version : "none");
        }
        ork_registry_destroy(r);
    }
    ork_plugin_dirs_free(dirs, n);
    ork_env_set("ORAKUL_PLUGIN_PATH", NULL);
    return version;
}

static void test_search_order(void) {
    CU_ASSERT_STRING_EQUAL(order_winner(1, 1, 1), "yaml");
    CU_ASSERT_STRING_EQUAL(order_winner(0, 1, 1), "env");
    CU_ASSERT_STRING_EQUAL(order_winner(0, 0, 1), "exe");
    CU_ASSERT_STRING_EQUAL(order_winner(0, 0, 0), "none");
}

/* A plugin in the current directory is never found, not even through empty
 * ORAKUL_PLUGIN_PATH entries (which a shell PATH would read as "."). */
static void test_never_cwd(void) {
    char cwd[PATH_MAX], here[PATH_MAX];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(here, sizeof here, "%s/order/cwd", PROBE_DIR);
    CU_ASSERT_EQUAL_FATAL(chdir(here), 0);
    CU_ASSERT_EQUAL(access("orakul-order" SO, R_OK), 0); /* it is really here */
    char seps[4] = {ork_path_list_sep(), ork_path_list_sep(), ork_path_list_sep(), 0};
    ork_env_set("ORAKUL_PLUGIN_PATH", seps);
    char exe[PATH_MAX];
    exe_of(exe, sizeof exe, "none");
    char **dirs;
    int n;
    ork_registry *r;
    CU_ASSERT_EQUAL(ork_plugin_search_dirs(NULL, 0, exe, &dirs, &n), ORK_OK);
    CU_ASSERT_EQUAL(ork_registry_create(NULL, &r), ORK_OK);
    ork_registry_scan(r, dirs, n);
    CU_ASSERT_PTR_NULL(ork_registry_find(r, ORK_KIND_LOSS, "test.order"));
    ork_registry_destroy(r);
    ork_plugin_dirs_free(dirs, n);
    ork_env_set("ORAKUL_PLUGIN_PATH", NULL);
    CU_ASSERT_EQUAL(chdir(cwd), 0);
}

static const ork_test_case cases[] = {
    {"host services by exact id", test_services},
    {"loads a plugin, finds components by id and alias", test_loads_probe},
    {"refusals: one line with file and versions", test_refusals},
    {"a file that is not a shared object", test_not_a_plugin},
    {"duplicate component id", test_duplicate_id},
    {"a scan keeps good plugins past a refusal", test_scan_goes_on},
    {"older minor: appended fields read NULL", test_older_minor_normalised},
    {"search directories", test_search_dirs},
    {"search order: yaml, env, exe-relative", test_search_order},
    {"never the current directory", test_never_cwd},
    {NULL, NULL},
};
ORK_TEST_MAIN("plugin_loader", setup, teardown, cases)
