/* cli/main.c — the orakul executable: parse the command, set the log level
 * from ORAKUL_LOG, dispatch, and map the result to the exit code (cli.h).
 * Owns nothing; the only exit() of the program is main's return. */
#include "cli/cli.h"
#include "util/log.h" /* ork_log_set_level */

#include <orakul/abi.h> /* ORK_ABI_MAJOR/MINOR */
#include "train/services.h" /* ork_services_register */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char usage[] =
    "usage: orakul <command> [args]\n"
    "\n"
    "  run CONFIG         train the LoRA that CONFIG (ai-toolkit YAML) describes\n"
    "  run --gpus N CONFIG\n"
    "                     the same, data-parallel on N GPUs of this host (one process per\n"
    "                     GPU, NCCL); torchrun-style launchers work too (docs/multigpu.md)\n"
    "  run --overwrite CONFIG\n"
    "                     start afresh although LoRA files of this job exist with no state to\n"
    "                     resume from (refused without it: they would be overwritten)\n"
    "  plan CONFIG        check CONFIG, its plugins and datasets without training;\n"
    "                     print the resolved configuration and where each value came from\n"
    "  plugins [--keys | --unimplemented]\n"
    "                     list the plugins found, their components (and their config keys;\n"
    "                     --unimplemented: the ai-toolkit keys orakul accepts but ignores)\n"
    "  --version          print the version\n"
    "  help               print this text\n"
    "\n"
    "Plugins are searched in plugins.path (YAML), then ORAKUL_PLUGIN_PATH (':'-separated),\n"
    "then <exe>/../lib/orakul/plugins, then " ORAKUL_PLUGIN_INSTALL_DIR ".\n"
    "ORAKUL_LOG=debug|info|warn|error sets the log level (default info).\n"
    "Exit status: 0 success, 1 training failed, 2 usage, config, input or plugin error.\n";

static void set_log_level(void) {
    static const struct { const char *name; ork_log_level lvl; } levels[] = {
        {"debug", ORK_LOG_DEBUG}, {"info", ORK_LOG_INFO}, {"warn", ORK_LOG_WARN},
        {"warning", ORK_LOG_WARN}, {"error", ORK_LOG_ERROR},
    };
    const char *env = getenv("ORAKUL_LOG");
    if (!env || !env[0]) return;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strcasecmp(env, levels[i].name) == 0) {
            ork_log_set_level(levels[i].lvl);
            return;
        }
    ORK_WARN("ORAKUL_LOG=%s: unknown level (debug, info, warn, error); using info", env);
}

int main(int argc, char **argv) {
    set_log_level();
    if (argc < 2) {
        fputs(usage, stderr);
        return ORK_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage, stdout);
        return ORK_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("orakul %s (plugin ABI %d.%d, CUDA %s)\n", ORAKUL_VERSION, ORK_ABI_MAJOR,
               ORK_ABI_MINOR,
#ifdef ORAKUL_HAVE_CUDA
               "on"
#else
               "off"
#endif
        );
        return ORK_EXIT_OK;
    }
    /* before any plugin is loaded: init may look services up */
    if (ork_services_register() != ORK_OK) return ORK_EXIT_TRAIN;
    if (!strcmp(cmd, "run")) return ork_cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "plan")) return ork_cmd_plan(argc - 2, argv + 2);
    if (!strcmp(cmd, "plugins")) return ork_cmd_plugins(argc - 2, argv + 2);
    fprintf(stderr, "orakul: unknown command '%s'\n\n%s", cmd, usage);
    return ORK_EXIT_USAGE;
}
