/* cli/cmd_job.c — `orakul run CONFIG` and `orakul plan CONFIG`: load the
 * config and the plugins, then hand over to the trainer (train/train.h).
 * plan prints the trainer's checks, then the resolved configuration with the
 * origin of every value (component keys included, once the plan has read
 * them). */
#include "cli/cli.h"

#include "train/train.h" /* ork_train_run, ork_train_plan */
#include "util/log.h"    /* ORK_INFO */

#include <stdio.h>

static int job(const char *cmd, int argc, char **argv, int run) {
    if (argc != 1) {
        fprintf(stderr, "orakul %s: expected one CONFIG argument (usage: orakul %s CONFIG)\n", cmd, cmd);
        return ORK_EXIT_USAGE;
    }
    ork_config *cfg;
    ork_status s = ork_cli_load_config(argv[0], &cfg);
    if (s != ORK_OK) return ork_cli_exit_code(s, 0);
    ork_registry *reg;
    s = ork_cli_open_registry(cfg, &reg);
    int code;
    if (s != ORK_OK) {
        code = ork_cli_exit_code(s, 0);
    } else if (run) {
        code = ork_cli_exit_code(ork_train_run(cfg, reg), 1);
    } else {
        s = ork_train_plan(cfg, reg, stdout);
        if (s == ORK_OK) {
            printf("\n");
            ork_config_dump(cfg, stdout);
            printf("\nplan: %s is valid\n", argv[0]);
        }
        code = ork_cli_exit_code(s, 0);
    }
    ork_registry_destroy(reg);
    ork_config_free(cfg);
    return code;
}

int ork_cmd_run(int argc, char **argv) { return job("run", argc, argv, 1); }
int ork_cmd_plan(int argc, char **argv) { return job("plan", argc, argv, 0); }
