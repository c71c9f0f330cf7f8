/* cli/cli.h — what the orakul commands share: the exit-code rule, loading the
 * job config, and opening the plugin registry along the search path.
 *
 * Exit codes: 0 success; 1 training failed; 2 usage, config, input or plugin
 * error. [control-thread] */
#ifndef ORK_CLI_CLI_H
#define ORK_CLI_CLI_H

#include "config/config.h"   /* ork_config */
#include "plugin/registry.h" /* ork_registry */

#define ORK_EXIT_OK 0
#define ORK_EXIT_TRAIN 1
#define ORK_EXIT_USAGE 2

/* The exit code for a failure before or while training: input problems
 * (config, format, I/O, ABI, invalid) are 2, anything else 1. */
int ork_cli_exit_code(ork_status s, int training);

/* Read the job config (one error line on failure). Caller frees *out. */
ork_status ork_cli_load_config(const char *path, ork_config **out);

/* Load every plugin along the search path (plugins.path of cfg when cfg is
 * not NULL, then ORAKUL_PLUGIN_PATH, <exe>/../lib/orakul/plugins, the
 * install dir). Every refused plugin logs its line and the first refusal's
 * status is returned; *out still holds the plugins that loaded (NULL only
 * when the registry could not be created). Caller destroys *out. */
ork_status ork_cli_open_registry(const ork_config *cfg, ork_registry **out);

int ork_cmd_plugins(int argc, char **argv);
int ork_cmd_run(int argc, char **argv);
int ork_cmd_plan(int argc, char **argv);

#endif
