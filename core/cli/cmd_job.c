/* cli/cmd_job.c — `orakul run [--gpus N] [--overwrite] CONFIG` and `orakul plan CONFIG`: load the
 * config and the plugins, then hand over to the trainer (train/train.h).
 * plan prints the trainer's checks, then the resolved configuration with the
 * origin of every value (component keys included, once the plan has read
 * them). run --gpus N (N > 1) starts N ranks of `orakul run CONFIG`, one per
 * GPU (dist/launcher.h), after checking that CONFIG trains on CUDA. */
#include "cli/cli.h"

#include "dist/launcher.h" /* ork_launch */
#include "platform/platform.h"

#include "train/train.h" /* ork_train_run, ork_train_plan */
#include "util/log.h"    /* ORK_INFO */

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int job(const char *cmd, int argc, char **argv, int run, const ork_train_opts *opts) {
    if (argc != 1) {
        fprintf(stderr, "orakul %s: expected one CONFIG argument (usage: orakul %s%s CONFIG)\n", cmd, cmd,
                run ? " [--gpus N] [--overwrite]" : "");
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
        code = ork_cli_exit_code(ork_train_run(cfg, reg, opts), 1);
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

/* `orakul run --gpus n CONFIG`: this process becomes the launcher of n ranks. */
static int launch_ranks(int n, int argc, char **argv, const ork_train_opts *opts) {
    if (argc != 1) {
        fprintf(stderr, "orakul run: expected one CONFIG argument (usage: orakul run [--gpus N] [--overwrite] CONFIG)\n");
        return ORK_EXIT_USAGE;
    }
#ifndef ORAKUL_HAVE_CUDA
    fprintf(stderr, "orakul run --gpus %d: this orakul was built without CUDA (-DORAKUL_CUDA=ON builds the GPU "
            "backend)\n", n);
    return ORK_EXIT_USAGE;
#else
    ork_config *cfg;
    ork_status s = ork_cli_load_config(argv[0], &cfg);
    if (s != ORK_OK) return ork_cli_exit_code(s, 0);
    const char *dev = ork_config_process(cfg)->device;
    int cpu = dev && !strncmp(dev, "cpu", 3);
    ork_config_free(cfg);
    if (cpu) {
        fprintf(stderr, "orakul run --gpus %d: %s trains on device: cpu; multi-GPU training needs device: cuda\n", n,
                argv[0]);
        return ORK_EXIT_USAGE;
    }
    char exe[4096];
    if (ork_exe_path(exe, sizeof exe) != ORK_OK) {
        fprintf(stderr, "orakul run --gpus %d: cannot find this executable: %s\n", n, strerror(errno));
        return ORK_EXIT_TRAIN;
    }
    char *child[5] = {exe, (char *)"run", NULL, NULL, NULL}; /* each rank: run [--overwrite] CONFIG */
    int c = 2;
    if (opts->overwrite) child[c++] = (char *)"--overwrite";
    child[c] = argv[0];
    return ork_launch(n, exe, child);
#endif
}

/* Remove "--overwrite" from argv (argc adjusted, argv NULL-terminated). */
static void parse_overwrite(int *argc, char **argv, ork_train_opts *o) {
    int k = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--overwrite")) o->overwrite = 1;
        else argv[k++] = argv[i];
    }
    *argc = k;
    argv[k] = NULL;
}

int ork_cmd_run(int argc, char **argv) {
    int gpus = 0;
    ork_train_opts o = {0};
    parse_overwrite(&argc, argv, &o);
    if (ork_launch_parse_gpus(&argc, argv, &gpus) != 0) return ORK_EXIT_USAGE;
    if (gpus > 1) return launch_ranks(gpus, argc, argv, &o);
    return job("run", argc, argv, 1, &o);
}
int ork_cmd_plan(int argc, char **argv) { return job("plan", argc, argv, 0, NULL); }
