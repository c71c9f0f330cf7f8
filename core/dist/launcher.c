/* dist/launcher.c — see launcher.h. Owns the child processes of one launch. */
#include "dist/launcher.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t g_pids[ORK_LAUNCH_MAX];
static volatile sig_atomic_t g_n;
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    if (!g_signal) g_signal = sig;
    for (int i = 0; i < g_n; i++)
        if (g_pids[i] > 0) kill(g_pids[i], sig);
}

/* A TCP port free right now on 127.0.0.1 (the kernel's pick), or -1. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void describe(int st, char *buf, size_t n) {
    if (WIFEXITED(st)) snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(buf, n, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(buf, n, "status 0x%x", st);
}

int ork_launch(int n, const char *exe, char *const argv[]) {
    if (n < 1 || n > ORK_LAUNCH_MAX) {
        fprintf(stderr, "orakul run --gpus: %d ranks (1..%d)\n", n, ORK_LAUNCH_MAX);
        return 2;
    }
    const char *ws = getenv("WORLD_SIZE");
    if (ws && *ws) {
        fprintf(stderr, "orakul run --gpus %d: WORLD_SIZE=%s is already set (an external launcher?): use either "
                "--gpus or the launcher, not both\n", n, ws);
        return 2;
    }
    char port[16];
    const char *mp = getenv("MASTER_PORT");
    if (mp && *mp) {
        snprintf(port, sizeof port, "%.15s", mp);
    } else {
        int p = free_port();
        if (p <= 0) {
            fprintf(stderr, "orakul run --gpus %d: no free TCP port on 127.0.0.1 for the rendezvous: %s\n", n,
                    strerror(errno));
            return 1;
        }
        snprintf(port, sizeof port, "%d", p);
    }
    if (!getenv("NCCL_NVLS_ENABLE")) setenv("NCCL_NVLS_ENABLE", "0", 0);
    fflush(stdout);
    fflush(stderr);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    g_n = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    pid_t parent = getpid();
    int started = 0, code = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "orakul run --gpus %d: fork of rank %d failed: %s; stopping the others\n", n, i,
                    strerror(errno));
            code = 1;
            break;
        }
        if (pid == 0) {
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent) _exit(1); /* the parent is already gone */
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            char r[16], w[16];
            snprintf(r, sizeof r, "%d", i);
            snprintf(w, sizeof w, "%d", n);
            setenv("RANK", r, 1);
            setenv("LOCAL_RANK", r, 1);
            setenv("WORLD_SIZE", w, 1);
            setenv("LOCAL_WORLD_SIZE", w, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", port, 1);
            execv(exe, argv);
            fprintf(stderr, "orakul run --gpus: rank %d: cannot run %s: %s\n", i, exe, strerror(errno));
            fflush(stderr);
            _exit(127);
        }
        g_pids[i] = pid;
        g_n = i + 1;
        started++;
        if (g_signal) break;
    }
    int alive = started, failed_rank = -1;
    double kill_at = 0;
    if (code != 0 || g_signal) { /* stop what started */
        for (int i = 0; i < started; i++) kill(g_pids[i], g_signal ? g_signal : SIGTERM);
        kill_at = now_s() + 10;
    }
    while (alive > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno != EINTR) break;
        if (pid <= 0) {
            if (kill_at > 0 && now_s() > kill_at) {
                for (int i = 0; i < started; i++)
                    if (g_pids[i] > 0) kill(g_pids[i], SIGKILL);
                kill_at = 0;
            }
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int rank = -1;
        for (int i = 0; i < started; i++)
            if (g_pids[i] == pid) rank = i;
        if (rank < 0) continue;
        g_pids[rank] = 0;
        alive--;
        int bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (bad && failed_rank < 0 && !g_signal && code == 0) {
            char why[96];
            describe(st, why, sizeof why);
            failed_rank = rank;
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
            if (alive > 0)
                fprintf(stderr, "orakul run --gpus %d: rank %d (pid %d) failed with %s; stopping the other %d rank%s\n",
                        n, rank, (int)pid, why, alive, alive == 1 ? "" : "s");
            else
                fprintf(stderr, "orakul run --gpus %d: rank %d (pid %d) failed with %s\n", n, rank, (int)pid, why);
            for (int i = 0; i < started; i++)
                if (g_pids[i] > 0) kill(g_pids[i], SIGTERM);
            kill_at = now_s() + 10;
        }
        if (g_signal && kill_at == 0) kill_at = now_s() + 10;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    g_n = 0;
    if (g_signal) return 128 + g_signal;
    return code;
}
