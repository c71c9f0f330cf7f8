/* cli/cli.c — see cli.h. Owns nothing beyond each call. */
#include "cli/cli.h"

#include "util/log.h" /* ORK_FAIL */

int ork_cli_exit_code(ork_status s, int training) {
    switch (s) {
    case ORK_OK: return ORK_EXIT_OK;
    case ORK_E_CONFIG: case ORK_E_FORMAT: case ORK_E_IO: case ORK_E_ABI: case ORK_E_INVALID:
        return ORK_EXIT_USAGE;
    default: return training ? ORK_EXIT_TRAIN : ORK_EXIT_USAGE;
    }
}

ork_status ork_cli_load_config(const char *path, ork_config **out) {
    return ork_config_load(path, out);
}

ork_status ork_cli_open_registry(const ork_config *cfg, ork_registry **out) {
    *out = NULL;
    const ork_strs *yaml = cfg ? &ork_config_process(cfg)->plugins.path : NULL;
    char **dirs;
    int n;
    ORK_TRY(ork_plugin_search_dirs(yaml ? yaml->v : NULL, yaml ? (int)yaml->n : 0, NULL, &dirs, &n));
    for (int i = 0; i < n; i++) ORK_DEBUG("plugin search path %d: %s", i + 1, dirs[i]);
    ork_status s = ork_registry_create(NULL, out);
    if (s == ORK_OK) s = ork_registry_scan(*out, dirs, n);
    ork_plugin_dirs_free(dirs, n);
    return s;
}
