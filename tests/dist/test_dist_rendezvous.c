/* test_dist_rendezvous.c — dist/rendezvous.h with real processes and sockets
 * on 127.0.0.1: forked ranks exchange a random 128-byte id through an
 * ephemeral port (rank 0 listening late: the others retry), and every way it
 * must fail with one line: a stray client with bad bytes (ignored), wrong
 * world size, rank out of range or taken, another config hash, another
 * version, ranks that never come (rank 0's timeout), a rank 0 that never
 * listens (the join timeout), a "rank 0" that answers garbage or hangs up.
 * Each child reports (status, id, its last error line) through a pipe. */
#include "ork_test.h"
#include "dist_test_util.h"

#include "dist/rendezvous.h"
#include "util/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

typedef struct result {
    int status;
    unsigned char id[ORK_RDZV_ID_BYTES];
    char line[512];
} result;

typedef struct child {
    pid_t pid;
    int fd;
} child;

static char last_line[512];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR || (lvl == ORK_LOG_WARN && !last_line[0]))
        snprintf(last_line, sizeof last_line, "%s", line);
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

typedef ork_status (*child_fn)(void *arg, unsigned char *id);

/* Run fn in a child; its result comes back through the pipe. */
static child spawn(child_fn fn, void *arg) {
    int p[2];
    child c = {-1, -1};
    if (pipe(p) != 0) return c;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        result r;
        memset(&r, 0, sizeof r);
        last_line[0] = 0;
        ork_log_set_sink(sink, NULL);
        r.status = fn(arg, r.id);
        snprintf(r.line, sizeof r.line, "%s", last_line);
        ssize_t w = write(p[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(p[1]);
    c.pid = pid;
    c.fd = p[0];
    return c;
}

/* The child's result (status -1 when it died without one); waits at most 20 s. */
static result collect(child c) {
    result r;
    memset(&r, 0, sizeof r);
    r.status = -1;
    if (c.pid <= 0) return r;
    size_t got = 0;
    for (int i = 0; i < 2000 && got < sizeof r; i++) {
        ssize_t n = read(c.fd, (char *)&r + got, sizeof r - got);
        if (n > 0) { got += (size_t)n; continue; }
        if (n == 0) break;
        if (errno != EINTR) break;
    }
    if (got != sizeof r) r.status = -1;
    close(c.fd);
    int st;
    waitpid(c.pid, &st, 0);
    return r;
}

static unsigned char g_id[ORK_RDZV_ID_BYTES];
static void random_id(void) {
    FILE *f = fopen("/dev/urandom", "rb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(fread(g_id, 1, sizeof g_id, f) == sizeof g_id);
    fclose(f);
}

/* ---- rank behaviours ------------------------------------------------------ */

typedef struct rank_arg {
    int rank, world, port, timeout_ms, delay_ms;
    uint64_t hash;
    ork_rdzv_listener *l; /* rank 0: listen on `port` itself when NULL */
} rank_arg;

static ork_status rank0(void *arg, unsigned char *id) {
    rank_arg *a = arg;
    sleep_ms(a->delay_ms);
    ork_rdzv_listener *l = a->l;
    if (!l) ORK_TRY(ork_rdzv_listen("127.0.0.1", a->port, &l));
    ork_rdzv_opts o = {0, a->world, a->hash, a->timeout_ms};
    memcpy(id, g_id, ORK_RDZV_ID_BYTES);
    ork_status s = ork_rdzv_serve(l, &o, g_id);
    ork_rdzv_listener_close(l);
    return s;
}

static ork_status joiner(void *arg, unsigned char *id) {
    rank_arg *a = arg;
    if (a->l) ork_rdzv_listener_close(a->l); /* inherited: not ours */
    sleep_ms(a->delay_ms);
    ork_rdzv_opts o = {a->rank, a->world, a->hash, a->timeout_ms};
    return ork_rdzv_join("127.0.0.1", a->port, &o, id);
}

/* A client that sends `bytes` (n) and keeps the connection open for hold_ms. */
typedef struct raw_arg {
    int port, hold_ms;
    const uint8_t *bytes;
    size_t n;
} raw_arg;

static ork_status raw_client(void *arg, unsigned char *id) {
    raw_arg *a = arg;
    (void)id;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return ORK_E_IO; }
    if (write(fd, a->bytes, a->n) != (ssize_t)a->n) { close(fd); return ORK_E_IO; }
    sleep_ms(a->hold_ms);
    close(fd);
    return ORK_OK;
}

/* A fake rank 0: accepts one connection, reads the hello, answers `reply` (n bytes, may be 0). */
typedef struct fake_arg {
    ork_rdzv_listener *l;
    int port;
    const uint8_t *reply;
    size_t n;
} fake_arg;

static ork_status fake_rank0(void *arg, unsigned char *id) {
    fake_arg *a = arg;
    (void)id;
    (void)a->l;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4) != 0) return ORK_E_IO;
    int c = accept(fd, NULL, NULL);
    uint8_t hello[ORK_RDZV_HELLO_BYTES];
    size_t got = 0;
    while (c >= 0 && got < sizeof hello) {
        ssize_t r = read(c, hello + got, sizeof hello - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (c >= 0 && a->n) {
        ssize_t w = write(c, a->reply, a->n);
        (void)w;
    }
    sleep_ms(100);
    if (c >= 0) close(c);
    close(fd);
    return ORK_OK;
}

/* ---- tests ---------------------------------------------------------------- */

static ork_rdzv_listener *listen_ephemeral(int *port) {
    ork_rdzv_listener *l = NULL;
    CU_ASSERT_EQUAL(ork_rdzv_listen("127.0.0.1", 0, &l), ORK_OK);
    *port = ork_rdzv_listener_port(l);
    CU_ASSERT(*port > 0);
    return l;
}

static int has(const result *r, const char *needle) {
    if (strstr(r->line, needle)) return 1;
    printf("  expected '%s' in: %s\n", needle, r->line);
    return 0;
}

static void test_three_ranks(void) {
    random_id();
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    rank_arg a0 = {0, 3, port, 10000, 200, 0x1234, l}, a1 = {1, 3, port, 10000, 0, 0x1234, l},
             a2 = {2, 3, port, 10000, 50, 0x1234, l};
    child c1 = spawn(joiner, &a1), c2 = spawn(joiner, &a2), c0 = spawn(rank0, &a0);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0), r1 = collect(c1), r2 = collect(c2);
    CU_ASSERT_EQUAL(r0.status, ORK_OK);
    CU_ASSERT_EQUAL(r1.status, ORK_OK);
    CU_ASSERT_EQUAL(r2.status, ORK_OK);
    CU_ASSERT_EQUAL(memcmp(r1.id, g_id, sizeof g_id), 0);
    CU_ASSERT_EQUAL(memcmp(r2.id, g_id, sizeof g_id), 0);
}

/* rank 0 starts listening 700 ms after the others started connecting */
static void test_rank0_late(void) {
    random_id();
    int port = dist_free_port();
    rank_arg a0 = {0, 3, port, 10000, 700, 7, NULL}, a1 = {1, 3, port, 10000, 0, 7, NULL},
             a2 = {2, 3, port, 10000, 0, 7, NULL};
    child c1 = spawn(joiner, &a1), c2 = spawn(joiner, &a2), c0 = spawn(rank0, &a0);
    result r0 = collect(c0), r1 = collect(c1), r2 = collect(c2);
    CU_ASSERT_EQUAL(r0.status, ORK_OK);
    CU_ASSERT_EQUAL(r1.status, ORK_OK);
    CU_ASSERT_EQUAL(r2.status, ORK_OK);
    CU_ASSERT_EQUAL(memcmp(r1.id, g_id, sizeof g_id), 0);
    CU_ASSERT_EQUAL(memcmp(r2.id, g_id, sizeof g_id), 0);
}

/* bytes that are not an orakul hello: logged and dropped; the real rank still joins */
static void test_stray_client_ignored(void) {
    random_id();
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    static const uint8_t junk[40] = "GET / HTTP/1.0\r\n\r\n";
    raw_arg ra = {port, 300, junk, sizeof junk};
    rank_arg a0 = {0, 2, port, 10000, 0, 9, l}, a1 = {1, 2, port, 10000, 150, 9, l};
    child cj = spawn(raw_client, &ra), c0 = spawn(rank0, &a0), c1 = spawn(joiner, &a1);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0), r1 = collect(c1);
    collect(cj);
    CU_ASSERT_EQUAL(r0.status, ORK_OK);
    CU_ASSERT_EQUAL(r1.status, ORK_OK);
    CU_ASSERT_EQUAL(memcmp(r1.id, g_id, sizeof g_id), 0);
    CU_ASSERT(has(&r0, "not an orakul hello"));
}

/* rank 0 with world w0 and hash h0 against one joiner (rank r, world w, hash h):
 * both fail; the lines contain n0 and n1. */
static void refused(int w0, uint64_t h0, int r, int w, uint64_t h, const char *n0, const char *n1) {
    random_id();
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    rank_arg a0 = {0, w0, port, 5000, 0, h0, l}, a1 = {r, w, port, 5000, 0, h, l};
    child c0 = spawn(rank0, &a0), c1 = spawn(joiner, &a1);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0), r1 = collect(c1);
    CU_ASSERT_EQUAL(r0.status, ORK_E_CONFIG);
    CU_ASSERT_EQUAL(r1.status, ORK_E_CONFIG);
    CU_ASSERT(has(&r0, n0));
    CU_ASSERT(has(&r1, n1));
}

static void test_wrong_world(void) {
    refused(2, 1, 1, 3, 1, "says WORLD_SIZE=3, rank 0 has 2", "WORLD_SIZE=3 here but 2 on rank 0");
}

static void test_config_mismatch(void) {
    refused(2, 0xaaaa, 1, 2, 0xbbbb, "runs a different config", "runs a different config than rank 0");
}

/* ranks out of range can only come from a forged hello (join checks its own) */
static void test_rank_out_of_range(void) {
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    ork_rdzv_opts o = {5, 2, 1, 0};
    uint8_t h[ORK_RDZV_HELLO_BYTES];
    ork_rdzv_pack_hello(&o, h);
    raw_arg ra = {port, 500, h, sizeof h};
    rank_arg a0 = {0, 2, port, 5000, 0, 1, l};
    child c0 = spawn(rank0, &a0), cj = spawn(raw_client, &ra);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0);
    collect(cj);
    CU_ASSERT_EQUAL(r0.status, ORK_E_CONFIG);
    CU_ASSERT(has(&r0, "RANK=5, which is not in 1..1"));
}

static void test_bad_version(void) {
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    ork_rdzv_opts o = {1, 2, 1, 0};
    uint8_t h[ORK_RDZV_HELLO_BYTES];
    ork_rdzv_pack_hello(&o, h);
    h[4] = 99; /* version */
    raw_arg ra = {port, 500, h, sizeof h};
    rank_arg a0 = {0, 2, port, 5000, 0, 1, l};
    child c0 = spawn(rank0, &a0), cj = spawn(raw_client, &ra);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0);
    collect(cj);
    CU_ASSERT_EQUAL(r0.status, ORK_E_CONFIG);
    CU_ASSERT(has(&r0, "rendezvous version 99"));
}

static void test_duplicate_rank(void) {
    random_id();
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    rank_arg a0 = {0, 3, port, 5000, 300, 1, l}, a1 = {1, 3, port, 5000, 0, 1, l}, a1b = {1, 3, port, 5000, 100, 1, l};
    child c1 = spawn(joiner, &a1), c1b = spawn(joiner, &a1b), c0 = spawn(rank0, &a0);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0), r1 = collect(c1), r1b = collect(c1b);
    CU_ASSERT_EQUAL(r0.status, ORK_E_CONFIG);
    CU_ASSERT(has(&r0, "two clients claim RANK=1"));
    CU_ASSERT_NOT_EQUAL(r1.status, ORK_OK);  /* the job stops for everyone */
    CU_ASSERT_NOT_EQUAL(r1b.status, ORK_OK);
}

/* rank 2 never comes: rank 0 gives up naming it; rank 1 learns the job stopped */
static void test_rank0_timeout(void) {
    int port;
    ork_rdzv_listener *l = listen_ephemeral(&port);
    CU_ASSERT_FATAL(l != NULL);
    rank_arg a0 = {0, 3, port, 600, 0, 1, l}, a1 = {1, 3, port, 5000, 0, 1, l};
    child c0 = spawn(rank0, &a0), c1 = spawn(joiner, &a1);
    ork_rdzv_listener_close(l);
    result r0 = collect(c0), r1 = collect(c1);
    CU_ASSERT_EQUAL(r0.status, ORK_E_IO);
    CU_ASSERT(has(&r0, "missing ranks: 2"));
    CU_ASSERT_EQUAL(r1.status, ORK_E_CONFIG);
    CU_ASSERT(has(&r1, "rank 0 stopped the job (other ranks never checked in"));
}

/* nobody listens: the join retries until its deadline */
static void test_join_timeout(void) {
    int port = dist_free_port();
    rank_arg a1 = {1, 2, port, 500, 0, 1, NULL};
    child c1 = spawn(joiner, &a1);
    result r1 = collect(c1);
    CU_ASSERT_EQUAL(r1.status, ORK_E_IO);
    CU_ASSERT(has(&r1, "could not reach rank 0 at 127.0.0.1"));
    CU_ASSERT(has(&r1, "Connection refused"));
}

static void test_reply_garbage(void) {
    int port = dist_free_port();
    static uint8_t junk[ORK_RDZV_REPLY_BYTES];
    memset(junk, 0x5a, sizeof junk);
    fake_arg fa = {NULL, port, junk, sizeof junk};
    rank_arg a1 = {1, 2, port, 3000, 200, 1, NULL};
    child cf = spawn(fake_rank0, &fa), c1 = spawn(joiner, &a1);
    result r1 = collect(c1);
    collect(cf);
    CU_ASSERT_EQUAL(r1.status, ORK_E_FORMAT);
    CU_ASSERT(has(&r1, "not an orakul reply"));
}

static void test_reply_short(void) {
    int port = dist_free_port();
    static const uint8_t part[10] = {0x4f, 0x52, 0x4b, 0x44};
    fake_arg fa = {NULL, port, part, sizeof part};
    rank_arg a1 = {1, 2, port, 3000, 200, 1, NULL};
    child cf = spawn(fake_rank0, &fa), c1 = spawn(joiner, &a1);
    result r1 = collect(c1);
    collect(cf);
    CU_ASSERT_EQUAL(r1.status, ORK_E_IO);
    CU_ASSERT(has(&r1, "closed the connection after 10 of 160 bytes"));
}

static void test_listen_errors(void) {
    ork_rdzv_listener *l = NULL, *l2 = NULL;
    CU_ASSERT_EQUAL(ork_rdzv_listen("127.0.0.1", 0, &l), ORK_OK);
    int port = ork_rdzv_listener_port(l);
    CU_ASSERT_EQUAL(ork_rdzv_listen("127.0.0.1", port, &l2), ORK_E_IO); /* taken */
    ork_rdzv_listener_close(l);
    /* a world of one needs nobody */
    CU_ASSERT_EQUAL(ork_rdzv_listen("127.0.0.1", 0, &l), ORK_OK);
    ork_rdzv_opts o = {0, 1, 0, 100};
    CU_ASSERT_EQUAL(ork_rdzv_serve(l, &o, g_id), ORK_OK);
    ork_rdzv_listener_close(l);
}

static int init(void) {
    signal(SIGPIPE, SIG_IGN);
    ork_log_set_sink(sink, NULL);
    return 0;
}

static const ork_test_case cases[] = {
    {"three_ranks", test_three_ranks},
    {"rank0_late", test_rank0_late},
    {"stray_client_ignored", test_stray_client_ignored},
    {"wrong_world", test_wrong_world},
    {"config_mismatch", test_config_mismatch},
    {"rank_out_of_range", test_rank_out_of_range},
    {"bad_version", test_bad_version},
    {"duplicate_rank", test_duplicate_rank},
    {"rank0_timeout", test_rank0_timeout},
    {"join_timeout", test_join_timeout},
    {"reply_garbage", test_reply_garbage},
    {"reply_short", test_reply_short},
    {"listen_errors", test_listen_errors},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_rendezvous", init, NULL, cases)
