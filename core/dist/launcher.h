/* dist/launcher.h — `orakul run --gpus N CONFIG`: the parent process starts N
 * ranks of the same command on this host, one per GPU, as torchrun would:
 * each child gets RANK = LOCAL_RANK = i, WORLD_SIZE = LOCAL_WORLD_SIZE = N,
 * MASTER_ADDR = 127.0.0.1 and MASTER_PORT (the user's, or a free port the
 * parent picks), NCCL_NVLS_ENABLE=0 unless set. Children run in their own
 * process group (a terminal's Ctrl-C reaches only the parent, which forwards
 * it once) and die with the parent (PR_SET_PDEATHSIG).
 *
 * The parent waits for all of them and forwards SIGINT / SIGTERM. When a
 * child fails (non-zero exit or a signal) it prints one line naming the rank
 * and its status, sends SIGTERM to the others, SIGKILL after 10 s, and
 * returns that child's exit code (1 if it died by a signal); after a
 * forwarded signal it returns 128 + the signal; else 0.
 *
 * Owns the children. Process-wide state: the signal handlers and the child
 * pid table (one launch per process). [control-thread] */
#ifndef ORK_DIST_LAUNCHER_H
#define ORK_DIST_LAUNCHER_H

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_LAUNCH_MAX 256

/* Remove "--gpus N" / "--gpus=N" from argv (argc adjusted; argv stays
 * NULL-terminated). *gpus = 0 when absent. -1 (one line on stderr) for a bad
 * value; 0 otherwise. */
int ork_launch_parse_gpus(int *argc, char **argv, int *gpus);

/* Run argv (argv[0] is the program to exec, by path) as n ranks; returns the
 * exit code described above. A setup failure (WORLD_SIZE already set, no
 * free port, fork failure) is one line and 2 (usage) or 1. */
int ork_launch(int n, const char *exe, char *const argv[]);

#ifdef __cplusplus
}
#endif
#endif
