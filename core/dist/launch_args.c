/* dist/launch_args.c — `--gpus N` taken out of `orakul run`'s arguments
 * (see launcher.h); the same on every system, where the launcher itself
 * (launcher.c: fork, signals, sockets) is POSIX only. Owns nothing. */
#include "dist/launcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ork_launch_parse_gpus(int *argc, char **argv, int *gpus) {
    *gpus = 0;
    int o = 0;
    for (int i = 0; i < *argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--gpus")) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "orakul run: --gpus needs a number of GPUs (e.g. --gpus 2)\n");
                return -1;
            }
            v = argv[++i];
        } else if (!strncmp(argv[i], "--gpus=", 7)) {
            v = argv[i] + 7;
        } else {
            argv[o++] = argv[i];
            continue;
        }
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || !*v || *end || n < 1 || n > ORK_LAUNCH_MAX) {
            fprintf(stderr, "orakul run: --gpus '%s': must be a number of GPUs on this host, 1..%d\n", v,
                    ORK_LAUNCH_MAX);
            return -1;
        }
        *gpus = (int)n;
    }
    *argc = o;
    argv[o] = NULL;
    return 0;
}
