/* fuzz_config.c — libFuzzer target for the job config reader: each input is a
 * YAML file read through ork_cli_load_config (what `orakul plan` and `orakul
 * run` call), then, as the trainer does before anything else, the component
 * keys of every kind (model_kwargs, loss_params, optimizer_params and, with a
 * quantizer, quantize_kwargs) are checked against the in-tree plugins' key
 * tables (pass 2), and the resolved config is dumped (`plan`'s listing).
 * Contract checked: the status is OK, FORMAT, CONFIG or IO; a failure logs
 * exactly one error line and leaves *out NULL; a success logs none.
 * The plugins come from ORK_FUZZ_PLUGIN_DIR (the fuzz build's plugin folder,
 * compiled in; $ORAKUL_FUZZ_PLUGIN_DIR overrides); without them pass 2 is
 * skipped. Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"

#include "cli/cli.h"         /* ork_cli_load_config */
#include "config/config.h"
#include "plugin/registry.h"

#include <string.h>

static ork_registry *g_reg;
static FILE *g_null;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_config");
    g_null = fopen("/dev/null", "w");
    if (!g_null) { perror("/dev/null"); exit(1); }
    const char *dir = getenv("ORAKUL_FUZZ_PLUGIN_DIR");
#ifdef ORK_FUZZ_PLUGIN_DIR
    if (!dir) dir = ORK_FUZZ_PLUGIN_DIR;
#endif
    if (dir && ork_registry_create(NULL, &g_reg) == ORK_OK) {
        char *dirs[1] = {(char *)dir};
        ork_registry_scan(g_reg, dirs, 1);
        if (ork_registry_count(g_reg) == 0) {
            ork_registry_destroy(g_reg);
            g_reg = NULL;
        }
    }
    if (!g_reg) {
        const char msg[] = "fuzz_config: no plugins found: component keys (pass 2) are not fuzzed\n";
        if (write(2, msg, sizeof msg - 1) < 0) {}
    }
    return 0;
}

/* Pass 2 for one kind, as the trainer's resolve() does it. */
static void component_keys(ork_config *cfg, ork_component_kind kind) {
    ork_loc at;
    const char *name = ork_config_component_name(cfg, kind, &at);
    FZ_CHECK(name != NULL, "component name of kind %d is NULL", (int)kind);
    const ork_plugin_component *pc = g_reg ? ork_registry_find(g_reg, kind, name) : NULL;
    if (!pc) return; /* the trainer's "unknown optimizer" line: not the reader's */
    size_t sz = pc->c->params_size ? pc->c->params_size : 1;
    void *buf = calloc(1, sz);
    if (!buf) return;
    fz_errors = 0;
    ork_status s = ork_config_component_params(cfg, ork_config_component_params_path(kind), pc->c->params, buf,
                                               pc->c->params_size);
    FZ_CHECK(s == ORK_OK || s == ORK_E_CONFIG, "%s params: status %d (%s)", name, (int)s, ork_status_str(s));
    FZ_CHECK(s == ORK_OK ? fz_errors == 0 : fz_errors == 1, "%s params: status %d with %d error lines", name, (int)s,
             fz_errors);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write(data, size)) return 0;
    ork_config *cfg = (ork_config *)1;
    ork_status s = ork_cli_load_config(fz_path, &cfg);
    FZ_CHECK(s == ORK_OK || s == ORK_E_FORMAT || s == ORK_E_CONFIG || s == ORK_E_IO, "load: status %d (%s)", (int)s,
             ork_status_str(s));
    if (s != ORK_OK) {
        FZ_CHECK(fz_errors == 1, "load failed (%s) with %d error lines", ork_status_str(s), fz_errors);
        FZ_CHECK(cfg == NULL, "load failed but *out is not NULL");
        return 0;
    }
    FZ_CHECK(fz_errors == 0, "load succeeded with %d error lines", fz_errors);
    FZ_CHECK(cfg != NULL, "load succeeded with *out NULL");
    const ork_process_config *p = ork_config_process(cfg);
    FZ_CHECK(p != NULL && ork_config_job(cfg)->process.n == 1, "not exactly one process");
    FZ_CHECK(p->datasets.n >= 1 && p->model.name_or_path, "a required key is missing after a successful load");
    component_keys(cfg, ORK_KIND_MODEL);
    component_keys(cfg, ORK_KIND_LOSS);
    component_keys(cfg, ORK_KIND_OPTIMIZER);
    if (p->model.qtype && strcmp(p->model.qtype, "none") != 0) component_keys(cfg, ORK_KIND_QUANT);
    ork_loc where;
    ork_config_where(cfg, "train.steps", &where);
    ork_config_where(cfg, "datasets[0].resolution", &where);
    ork_config_dump(cfg, g_null);
    ork_config_free(cfg);
    return 0;
}
