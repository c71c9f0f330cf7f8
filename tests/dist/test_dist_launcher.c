/* test_dist_launcher.c — dist/launcher.h with /bin/sh ranks instead of
 * orakul: --gpus parsing; every rank's RANK / LOCAL_RANK / WORLD_SIZE /
 * MASTER_ADDR / MASTER_PORT / NCCL_NVLS_ENABLE; a failing rank stops the
 * others (they get SIGTERM) and its exit code is the launcher's, with one
 * line; SIGINT to the launcher reaches every rank once and gives 130; the
 * user's MASTER_PORT is kept; WORLD_SIZE already set and an unrunnable
 * program are refused. The launcher runs in a forked child (it owns signal
 * handlers), its stderr in a file. */
#include "ork_test.h"

#include "dist/launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char dir[256];

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int exists(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* ork_launch(n, /bin/sh -c script) in a child; signal_ms > 0: SIGINT it then.
 * Returns the launcher's exit code; its stderr is in dir/launcher.err. */
static int launch(int n, const char *script, int signal_ms) {
    char err[512];
    snprintf(err, sizeof err, "%s/launcher.err", dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(err, "w", stderr)) _exit(99);
        char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)script, NULL};
        int rc = ork_launch(n, "/bin/sh", argv);
        fflush(stderr);
        _exit(rc);
    }
    if (signal_ms > 0) {
        sleep_ms(signal_ms);
        kill(pid, SIGINT);
    }
    int st = 0;
    for (int i = 0; i < 3000; i++) { /* 60 s at most */
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
        sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void test_parse_gpus(void) {
    int gpus;
    char a0[] = "--gpus", a1[] = "4", a2[] = "cfg.yaml";
    char *v1[] = {a0, a1, a2, NULL};
    int argc = 3;
    CU_ASSERT_EQUAL(ork_launch_parse_gpus(&argc, v1, &gpus), 0);
    CU_ASSERT_EQUAL(gpus, 4);
    CU_ASSERT_EQUAL(argc, 1);
    CU_ASSERT_STRING_EQUAL(v1[0], "cfg.yaml");
    CU_ASSERT_PTR_NULL(v1[1]);
    char b0[] = "cfg.yaml", b1[] = "--gpus=2";
    char *v2[] = {b0, b1, NULL};
    argc = 2;
    CU_ASSERT_EQUAL(ork_launch_parse_gpus(&argc, v2, &gpus), 0);
    CU_ASSERT_EQUAL(gpus, 2);
    CU_ASSERT_EQUAL(argc, 1);
    char c0[] = "cfg.yaml";
    char *v3[] = {c0, NULL};
    argc = 1;
    CU_ASSERT_EQUAL(ork_launch_parse_gpus(&argc, v3, &gpus), 0);
    CU_ASSERT_EQUAL(gpus, 0);
    const char *bad[] = {"0", "-1", "x", "2x", "", "100000", NULL};
    for (int i = 0; bad[i]; i++) {
        char d0[] = "--gpus", d2[] = "cfg.yaml", d1[32];
        snprintf(d1, sizeof d1, "%s", bad[i]);
        char *v[] = {d0, d1, d2, NULL};
        argc = 3;
        CU_ASSERT_EQUAL(ork_launch_parse_gpus(&argc, v, &gpus), -1);
    }
    char e0[] = "cfg.yaml", e1[] = "--gpus";
    char *v4[] = {e0, e1, NULL};
    argc = 2;
    CU_ASSERT_EQUAL(ork_launch_parse_gpus(&argc, v4, &gpus), -1); /* no value */
}

static void test_env_of_ranks(void) {
    unsetenv("MASTER_PORT");
    unsetenv("NCCL_NVLS_ENABLE");
    int rc = launch(3, "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
                       "$NCCL_NVLS_ENABLE\" > \"$ORK_T_DIR/r$RANK\"", 0);
    CU_ASSERT_EQUAL(rc, 0);
    int port0 = -1;
    for (int r = 0; r < 3; r++) {
        char p[512];
        snprintf(p, sizeof p, "%s/r%d", dir, r);
        char *t = slurp(p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        int rank, local, world, lworld, port, nvls;
        char addr[64];
        CU_ASSERT_EQUAL(sscanf(t, "%d %d %d %d %63s %d %d", &rank, &local, &world, &lworld, addr, &port, &nvls), 7);
        CU_ASSERT_EQUAL(rank, r);
        CU_ASSERT_EQUAL(local, r);
        CU_ASSERT_EQUAL(world, 3);
        CU_ASSERT_EQUAL(lworld, 3);
        CU_ASSERT_STRING_EQUAL(addr, "127.0.0.1");
        CU_ASSERT(port > 0 && port < 65536);
        if (r == 0) port0 = port;
        CU_ASSERT_EQUAL(port, port0); /* one port for all */
        CU_ASSERT_EQUAL(nvls, 0);
    }
    /* the user's MASTER_PORT and NCCL_NVLS_ENABLE are kept */
    setenv("MASTER_PORT", "23456", 1);
    setenv("NCCL_NVLS_ENABLE", "1", 1);
    rc = launch(2, "echo \"$MASTER_PORT $NCCL_NVLS_ENABLE\" > \"$ORK_T_DIR/p$RANK\"", 0);
    unsetenv("MASTER_PORT");
    unsetenv("NCCL_NVLS_ENABLE");
    CU_ASSERT_EQUAL(rc, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/p1", dir);
    char *t = slurp(p);
    CU_ASSERT(t && !strcmp(t, "23456 1\n"));
}

/* rank 1 fails after 300 ms; ranks 0 and 2 would sleep 30 s: they get SIGTERM */
static void test_failure_stops_the_rest(void) {
    const char *script =
        "if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 3; fi; "
        "trap 'echo term > \"$ORK_T_DIR/term$RANK\"; kill $! 2>/dev/null; exit 143' TERM; sleep 30 & wait $!";
    time_t t0 = time(NULL);
    int rc = launch(3, script, 0);
    CU_ASSERT_EQUAL(rc, 3);
    CU_ASSERT(time(NULL) - t0 < 10);
    CU_ASSERT(exists("term0"));
    CU_ASSERT(exists("term2"));
    char p[512];
    snprintf(p, sizeof p, "%s/launcher.err", dir);
    char *t = slurp(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    if (!strstr(t, "rank 1 (pid") || !strstr(t, "failed with exit status 3; stopping the other 2 ranks")) {
        printf("  launcher said: %s\n", t);
        CU_FAIL("failure line");
    }
    int lines = 0;
    for (char *c = t; *c; c++) lines += *c == '\n';
    CU_ASSERT_EQUAL(lines, 1);
}

/* SIGINT to the launcher: forwarded once to every rank; exit 130 */
static void test_sigint_forwarded(void) {
    const char *script =
        "trap 'echo int >> \"$ORK_T_DIR/int$RANK\"; kill $! 2>/dev/null; exit 0' INT; sleep 30 & wait $!";
    int rc = launch(2, script, 700);
    CU_ASSERT_EQUAL(rc, 130);
    char p[512];
    for (int r = 0; r < 2; r++) {
        snprintf(p, sizeof p, "%s/int%d", dir, r);
        char *t = slurp(p);
        CU_ASSERT(t && !strcmp(t, "int\n")); /* once */
    }
}

static void test_refusals(void) {
    setenv("WORLD_SIZE", "2", 1);
    CU_ASSERT_EQUAL(launch(2, "true", 0), 2);
    unsetenv("WORLD_SIZE");
    char p[512];
    snprintf(p, sizeof p, "%s/launcher.err", dir);
    char *t = slurp(p);
    CU_ASSERT(t && strstr(t, "WORLD_SIZE=2 is already set"));
    /* a program that cannot run: every rank exits 127 */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(p, "w", stderr)) _exit(99);
        char *argv[] = {(char *)"/nonexistent/orakul", NULL};
        int rc = ork_launch(2, "/nonexistent/orakul", argv);
        fflush(stderr);
        _exit(rc);
    }
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    t = slurp(p);
    CU_ASSERT(t && strstr(t, "cannot run /nonexistent/orakul"));
}

static int init(void) {
    snprintf(dir, sizeof dir, "/tmp/ork_launch_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    setenv("ORK_T_DIR", dir, 1);
    unsetenv("WORLD_SIZE");
    return 0;
}

static int clean(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 0;
}

static const ork_test_case cases[] = {
    {"parse_gpus", test_parse_gpus},
    {"env_of_ranks", test_env_of_ranks},
    {"failure_stops_the_rest", test_failure_stops_the_rest},
    {"sigint_forwarded", test_sigint_forwarded},
    {"refusals", test_refusals},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_launcher", init, clean, cases)
