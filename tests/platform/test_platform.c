/* test_platform.c — core/platform/platform.h, every call, on the system the
 * test is built for (Linux, or Windows under Wine): shared libraries (a good
 * one, a missing path and a file that is no library: the error names the
 * path), threads, mutexes, condition variables, once; files by UTF-8 path,
 * offsets past 4 GiB, atomic replace, syncs, folders, maps; memory, process,
 * time, environment; the same calls for plugins through the table of the
 * host service "orakul.platform/1" (test_platform_host.c: the host offers it);
 * child processes (proc_child.c: arguments quoted through, output into files,
 * exit codes, a timed wait, kill); paths past Windows' MAX_PATH.
 * Works in a scratch folder under ork_temp_dir. */
#include "platform/platform.h"

#include "ork_test.h"

#include <errno.h>

static char g_root[1024]; /* the scratch folder */

static const char *at(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", g_root, rel);
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = ork_fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(text, 1, strlen(text), f), strlen(text));
    CU_ASSERT_EQUAL(fclose(f), 0);
}

static int read_text(const char *path, char *buf, size_t n) {
    FILE *f = ork_fopen(path, "rb");
    if (!f) return -1;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return (int)k;
}

/* Remove the scratch tree (one level of folders is all the tests make). */
static void remove_tree(const char *dir) {
    ork_dir *d;
    if (ork_dir_open(dir, &d) != ORK_OK) return;
    char p[2048];
    for (const char *n; (n = ork_dir_next(d));) {
        snprintf(p, sizeof p, "%s/%s", dir, n);
        ork_file_info fi;
        if (ork_path_lstat(p, &fi) == ORK_OK && fi.kind == ORK_KIND_DIR) remove_tree(p);
        else ork_path_remove(p);
    }
    ork_dir_close(d);
    ork_path_rmdir(dir);
}

static int suite_init(void) {
    char tmp[900];
    if (ork_temp_dir(tmp, sizeof tmp) != ORK_OK) return 1;
    snprintf(g_root, sizeof g_root, "%s/ork-platform-%ld", tmp, ork_pid());
    remove_tree(g_root);
    return ork_mkdir_p(g_root) == ORK_OK ? 0 : 1;
}

static int suite_clean(void) {
    remove_tree(g_root);
    return 0;
}

/* ---- shared libraries ---- */

static void test_lib_good(void) {
    char err[512];
    ork_lib *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_lib_open(ORK_TESTLIB, err, sizeof err, &l), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    int (*add)(int, int);
    void *f = ork_lib_sym(l, "ork_testlib_add");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    memcpy(&add, &f, sizeof add);
    CU_ASSERT_EQUAL(add(40, 2), 42);
    const int *v = ork_lib_sym(l, "ork_testlib_value");
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(*v, 1234);
    CU_ASSERT_PTR_NULL(ork_lib_sym(l, "ork_testlib_hidden")); /* not exported */
    CU_ASSERT_PTR_NULL(ork_lib_sym(l, "no_such_symbol"));
    ork_lib_close(l);
    ork_lib_close(NULL);
    CU_ASSERT_PTR_NULL(ork_lib_sym(NULL, "ork_testlib_add"));
    const char *sfx = ork_lib_suffix();
    CU_ASSERT(strcmp(sfx, ".so") == 0 || strcmp(sfx, ".dll") == 0);
}

static void test_lib_missing(void) {
    char path[1100], err[1500];
    at("no-such-lib.so", path, sizeof path);
    ork_lib *l = (ork_lib *)&l;
    CU_ASSERT_EQUAL(ork_lib_open(path, err, sizeof err, &l), ORK_E_IO);
    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path)); /* the line names the path */
    CU_ASSERT(strlen(err) > strlen(path) + 2);  /* and says why */
    CU_ASSERT_EQUAL(ork_lib_open(path, NULL, 0, &l), ORK_E_IO); /* no room for the reason: still fails */
}

static void test_lib_not_a_library(void) {
    char path[1100], err[1500];
    write_text(at("fake-lib.so", path, sizeof path), "this is text, not a shared library\n");
    ork_lib *l = NULL;
    CU_ASSERT_EQUAL(ork_lib_open(path, err, sizeof err, &l), ORK_E_IO);
    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
}

/* ---- threads ---- */

typedef struct counter {
    ork_mutex mu;
    ork_cond cv;
    long n;
    int ready, taken;
} counter;

static void count_up(void *arg) {
    counter *c = arg;
    for (int i = 0; i < 10000; i++) {
        ork_mutex_lock(&c->mu);
        c->n++;
        ork_mutex_unlock(&c->mu);
    }
}

static void test_threads_mutex(void) {
    counter c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL_FATAL(ork_mutex_init(&c.mu), ORK_OK);
    ork_thread *t[4];
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(ork_thread_start(count_up, &c, &t[i]), ORK_OK);
    for (int i = 0; i < 4; i++) ork_thread_join(t[i]);
    ork_thread_join(NULL);
    CU_ASSERT_EQUAL(c.n, 40000); /* no lost update: the mutex excludes */
    ork_mutex_destroy(&c.mu);
}

static void consumer(void *arg) {
    counter *c = arg;
    ork_mutex_lock(&c->mu);
    while (!c->ready) ork_cond_wait(&c->cv, &c->mu);
    c->taken = 1;
    ork_cond_broadcast(&c->cv);
    ork_mutex_unlock(&c->mu);
}

static void test_cond(void) {
    counter c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL_FATAL(ork_mutex_init(&c.mu), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_cond_init(&c.cv), ORK_OK);
    ork_thread *t;
    CU_ASSERT_EQUAL_FATAL(ork_thread_start(consumer, &c, &t), ORK_OK);
    ork_mutex_lock(&c.mu);
    c.ready = 1;
    ork_cond_signal(&c.cv);
    while (!c.taken) ork_cond_wait(&c.cv, &c.mu);
    ork_mutex_unlock(&c.mu);
    ork_thread_join(t);
    CU_ASSERT_EQUAL(c.taken, 1);
    /* nobody signals: the timed wait ends, saying it timed out */
    ork_mutex_lock(&c.mu);
    CU_ASSERT_EQUAL(ork_cond_timedwait(&c.cv, &c.mu, 20), 0);
    ork_mutex_unlock(&c.mu);
    ork_cond_destroy(&c.cv);
    ork_mutex_destroy(&c.mu);
}

static ork_once g_once = ORK_ONCE_INIT;
static int g_once_runs;
static void once_init(void) { g_once_runs++; }
static void once_thread(void *arg) {
    (void)arg;
    ork_call_once(&g_once, once_init);
}

static void test_once(void) {
    ork_thread *t[4];
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(ork_thread_start(once_thread, NULL, &t[i]), ORK_OK);
    for (int i = 0; i < 4; i++) ork_thread_join(t[i]);
    ork_call_once(&g_once, once_init);
    CU_ASSERT_EQUAL(g_once_runs, 1);
}

/* ---- files ---- */

static void test_fd_missing(void) {
    char p[1100];
    int fd = 5;
    errno = 0;
    CU_ASSERT_EQUAL(ork_fd_open(at("missing.bin", p, sizeof p), ORK_F_READ, &fd), ORK_E_IO);
    CU_ASSERT_EQUAL(fd, -1);
    CU_ASSERT_EQUAL(errno, ENOENT);
    ork_file_info fi;
    errno = 0;
    CU_ASSERT_EQUAL(ork_path_info(p, &fi), ORK_E_IO);
    CU_ASSERT_EQUAL(errno, ENOENT);
    CU_ASSERT_EQUAL(ork_path_exists(p), 0);
    errno = 0;
    CU_ASSERT_PTR_NULL(ork_fopen(p, "rb"));
    CU_ASSERT_EQUAL(errno, ENOENT);
    ork_fd_close(-1); /* nothing */
}

static void test_fd_rw(void) {
    char p[1100];
    int fd;
    at("rw.bin", p, sizeof p);
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(p, ORK_F_READ | ORK_F_WRITE | ORK_F_CREATE | ORK_F_TRUNC, &fd), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_write(fd, "hello, world", 12), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_pwrite(fd, "HELLO", 5, 0), ORK_OK);
    char buf[32] = {0};
    size_t got = 0;
    CU_ASSERT_EQUAL(ork_fd_pread(fd, buf, sizeof buf, 7, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 5); /* fewer at the end of the file */
    CU_ASSERT_NSTRING_EQUAL(buf, "world", 5);
    CU_ASSERT_EQUAL(ork_fd_pread(fd, buf, 4, 100, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 0);
    ork_file_info fi;
    CU_ASSERT_EQUAL(ork_fd_info(fd, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_FILE);
    CU_ASSERT_EQUAL(fi.size, 12);
    CU_ASSERT(fi.mtime_ns > 0);
    CU_ASSERT_EQUAL(ork_fd_truncate(fd, 5), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_sync(fd), ORK_OK);
    ork_fd_close(fd);
    /* read again from the start with plain reads */
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(p, ORK_F_READ | ORK_F_NONBLOCK, &fd), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_set_blocking(fd), ORK_OK);
    memset(buf, 0, sizeof buf);
    CU_ASSERT_EQUAL(ork_fd_read(fd, buf, sizeof buf, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 5);
    CU_ASSERT_STRING_EQUAL(buf, "HELLO");
    CU_ASSERT_EQUAL(ork_fd_read(fd, buf, sizeof buf, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 0); /* the end */
    CU_ASSERT_EQUAL(ork_fd_write(fd, "x", 1), ORK_E_IO); /* opened read-only */
    ork_fd_close(fd);
    /* EXCL on an existing file */
    errno = 0;
    CU_ASSERT_EQUAL(ork_fd_open(p, ORK_F_WRITE | ORK_F_CREATE | ORK_F_EXCL, &fd), ORK_E_IO);
    CU_ASSERT_EQUAL(errno, EEXIST);
    /* APPEND writes at the end */
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(p, ORK_F_WRITE | ORK_F_APPEND, &fd), ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_write(fd, "!", 1), ORK_OK);
    ork_fd_close(fd);
    CU_ASSERT_EQUAL(read_text(p, buf, sizeof buf), 6);
    CU_ASSERT_STRING_EQUAL(buf, "HELLO!");
}

/* Offsets and sizes past 4 GiB (a sparse file where the system makes one). */
static void test_fd_large_offset(void) {
    char p[1100];
    int fd;
    const uint64_t off = ((uint64_t)5 << 30) + 3;
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(at("big.bin", p, sizeof p), ORK_F_READ | ORK_F_WRITE | ORK_F_CREATE, &fd),
                          ORK_OK);
    ork_status s = ork_fd_pwrite(fd, "tail", 4, off);
    if (s != ORK_OK && errno == ENOSPC) { /* a small filesystem: nothing to learn here */
        printf("  (no room for a sparse 5 GiB file: skipped)\n");
        ork_fd_close(fd);
        ork_path_remove(p);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
    ork_file_info fi;
    CU_ASSERT_EQUAL(ork_fd_info(fd, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.size, off + 4);
    CU_ASSERT_EQUAL(ork_path_info(p, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.size, off + 4);
    char buf[8] = {0};
    size_t got;
    CU_ASSERT_EQUAL(ork_fd_pread(fd, buf, sizeof buf, off, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 4);
    CU_ASSERT_NSTRING_EQUAL(buf, "tail", 4);
    CU_ASSERT_EQUAL(ork_fd_truncate(fd, 0), ORK_OK);
    ork_fd_close(fd);
    CU_ASSERT_EQUAL(ork_path_remove(p), ORK_OK);
}

static void test_utf8_names(void) {
    char dir[1100], p[1200], buf[64];
    at("d\xc3\xbcr-\xe6\xb5\x8b", dir, sizeof dir); /* "dür-测" */
    CU_ASSERT_EQUAL_FATAL(ork_mkdir(dir), ORK_OK);
    snprintf(p, sizeof p, "%s/caf\xc3\xa9-\xe2\x98\x83.txt", dir); /* "café-☃.txt" */
    write_text(p, "utf8");
    CU_ASSERT_EQUAL(read_text(p, buf, sizeof buf), 4);
    CU_ASSERT_STRING_EQUAL(buf, "utf8");
    CU_ASSERT_EQUAL(ork_path_exists(p), 1);
    ork_dir *d;
    CU_ASSERT_EQUAL_FATAL(ork_dir_open(dir, &d), ORK_OK);
    const char *n = ork_dir_next(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_STRING_EQUAL(n, "caf\xc3\xa9-\xe2\x98\x83.txt"); /* the name comes back as UTF-8 */
    CU_ASSERT_PTR_NULL(ork_dir_next(d));
    ork_dir_close(d);
    ork_dir_close(NULL);
}

static void test_fopen_sync(void) {
    char p[1100], buf[32];
    FILE *f = ork_fopen(at("synced.txt", p, sizeof p), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT(fputs("line\n", f) >= 0);
    CU_ASSERT_EQUAL(ork_fsync_file(f), ORK_OK);
    CU_ASSERT_EQUAL(ork_isatty(f), 0);
    CU_ASSERT_EQUAL(ork_console_ansi(f), 0); /* a file: never escape codes */
    fclose(f);
    /* text mode is never used: "\n" stays one byte on every system */
    CU_ASSERT_EQUAL(read_text(p, buf, sizeof buf), 5);
    CU_ASSERT_PTR_NULL(ork_fopen(p, "this mode is far too long to be one"));
}

static void test_tmpfile(void) {
    FILE *f = ork_tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT(fprintf(f, "%s=%d\n", "key", 42) == 7);
    CU_ASSERT_EQUAL(ftell(f), 7);
    CU_ASSERT_EQUAL(fseek(f, 0, SEEK_SET), 0);
    char buf[16] = {0};
    CU_ASSERT_EQUAL(fread(buf, 1, sizeof buf, f), 7);
    CU_ASSERT_STRING_EQUAL(buf, "key=42\n");
    fclose(f);
}

static void test_replace(void) {
    char a[1100], b[1100], buf[32];
    write_text(at("target.txt", b, sizeof b), "old");
    write_text(at("target.txt.tmp", a, sizeof a), "new");
    CU_ASSERT_EQUAL(ork_path_replace(a, b), ORK_OK);
    CU_ASSERT_EQUAL(read_text(b, buf, sizeof buf), 3);
    CU_ASSERT_STRING_EQUAL(buf, "new");
    CU_ASSERT_EQUAL(ork_path_exists(a), 0);
    errno = 0;
    CU_ASSERT_EQUAL(ork_path_replace(a, b), ORK_E_IO); /* the source is gone */
    CU_ASSERT_EQUAL(errno, ENOENT);
    CU_ASSERT_EQUAL(read_text(b, buf, sizeof buf), 3); /* and the target is untouched */
    CU_ASSERT_EQUAL(ork_dir_sync(g_root), ORK_OK);
}

static void test_dirs(void) {
    char p[1100], q[1200], f[1200];
    at("a/b/c", p, sizeof p);
    CU_ASSERT_EQUAL(ork_mkdir_p(p), ORK_OK);
    CU_ASSERT_EQUAL(ork_mkdir_p(p), ORK_OK); /* existing: fine */
    snprintf(q, sizeof q, "%s/", p);
    CU_ASSERT_EQUAL(ork_mkdir_p(q), ORK_OK); /* a trailing slash */
    ork_file_info fi;
    CU_ASSERT_EQUAL(ork_path_info(p, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_DIR);
    CU_ASSERT_STRING_EQUAL(ork_file_kind_str(fi.kind), "a folder");
    errno = 0;
    CU_ASSERT_EQUAL(ork_mkdir(p), ORK_E_IO);
    CU_ASSERT_EQUAL(errno, EEXIST);
    /* a file in the way */
    snprintf(f, sizeof f, "%s/file", p);
    write_text(f, "x");
    CU_ASSERT_EQUAL(ork_path_info(f, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_FILE);
    CU_ASSERT_EQUAL(fi.size, 1);
    CU_ASSERT_STRING_EQUAL(ork_file_kind_str(fi.kind), "a regular file");
    snprintf(q, sizeof q, "%s/file/sub", p);
    CU_ASSERT_EQUAL(ork_mkdir_p(q), ORK_E_IO);
    errno = 0;
    CU_ASSERT_EQUAL(ork_mkdir_p(f), ORK_E_IO);
    CU_ASSERT_EQUAL(errno, ENOTDIR);
    CU_ASSERT_EQUAL(ork_mkdir_p(""), ORK_E_IO);
    /* listing a file, a missing folder */
    ork_dir *d = (ork_dir *)&d;
    CU_ASSERT_EQUAL(ork_dir_open(f, &d), ORK_E_IO);
    CU_ASSERT_PTR_NULL(d);
    errno = 0;
    CU_ASSERT_EQUAL(ork_dir_open(at("no-such-dir", q, sizeof q), &d), ORK_E_IO);
    CU_ASSERT_EQUAL(errno, ENOENT);
    /* a folder with something in it cannot go; emptied, it can */
    CU_ASSERT_EQUAL(ork_path_rmdir(p), ORK_E_IO);
    CU_ASSERT_EQUAL(ork_path_remove(f), ORK_OK);
    CU_ASSERT_EQUAL(ork_path_remove(f), ORK_E_IO);
    CU_ASSERT_EQUAL(ork_path_rmdir(p), ORK_OK);
    CU_ASSERT_EQUAL(ork_path_exists(p), 0);
    /* dir_sync of a missing folder fails on POSIX (a no-op on Windows) */
    if (strcmp(ork_lib_suffix(), ".so") == 0) CU_ASSERT_EQUAL(ork_dir_sync(p), ORK_E_IO);
}

static void test_list(void) {
    char dir[1100], p[1200];
    at("list", dir, sizeof dir);
    CU_ASSERT_EQUAL_FATAL(ork_mkdir(dir), ORK_OK);
    const char *names[] = {"one.txt", "two.png", "three"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        write_text(p, names[i]);
    }
    snprintf(p, sizeof p, "%s/sub", dir);
    CU_ASSERT_EQUAL(ork_mkdir(p), ORK_OK);
    ork_dir *d;
    CU_ASSERT_EQUAL_FATAL(ork_dir_open(dir, &d), ORK_OK);
    int seen = 0, count = 0;
    for (const char *n; (n = ork_dir_next(d));) {
        count++;
        CU_ASSERT(strcmp(n, ".") != 0 && strcmp(n, "..") != 0);
        for (int i = 0; i < 3; i++)
            if (strcmp(n, names[i]) == 0) seen |= 1 << i;
        if (strcmp(n, "sub") == 0) seen |= 8;
    }
    ork_dir_close(d);
    CU_ASSERT_EQUAL(count, 4);
    CU_ASSERT_EQUAL(seen, 15);
}

static void test_paths(void) {
    char p[1100], r[1100], e[1100], t[1100];
    CU_ASSERT_EQUAL(ork_path_real(g_root, r, sizeof r), ORK_OK);
    CU_ASSERT(r[0] == '/' || (r[1] == ':' && (r[2] == '\\' || r[2] == '/'))); /* absolute */
    CU_ASSERT_EQUAL(ork_path_real(at("missing/x", p, sizeof p), r, sizeof r), ORK_E_IO);
    CU_ASSERT_EQUAL(ork_path_real(g_root, r, 2), ORK_E_IO); /* no room */
    CU_ASSERT_EQUAL_FATAL(ork_exe_path(e, sizeof e), ORK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "test_platform"));
    ork_file_info fi;
    CU_ASSERT_EQUAL(ork_path_info(e, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_FILE);
    CU_ASSERT_EQUAL(ork_exe_path(e, 3), ORK_E_IO);
    CU_ASSERT_EQUAL(ork_temp_dir(t, sizeof t), ORK_OK);
    CU_ASSERT_EQUAL(ork_path_info(t, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_DIR);
}

static void test_map(void) {
    char p[1100];
    int fd;
    unsigned char data[10000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 1);
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(at("map.bin", p, sizeof p), ORK_F_WRITE | ORK_F_CREATE | ORK_F_TRUNC, &fd),
                          ORK_OK);
    CU_ASSERT_EQUAL(ork_fd_write(fd, data, sizeof data), ORK_OK);
    ork_fd_close(fd);
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(p, ORK_F_READ, &fd), ORK_OK);
    const void *m = (const void *)&m;
    CU_ASSERT_EQUAL(ork_map_fd(fd, 0, &m), ORK_E_IO); /* nothing to map */
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL_FATAL(ork_map_fd(fd, sizeof data, &m), ORK_OK);
    ork_fd_close(fd); /* the map outlives the descriptor */
    CU_ASSERT_EQUAL(memcmp(m, data, sizeof data), 0);
    ork_status pf = ork_map_prefetch((const char *)m + 100, 5000); /* a hint: taken, or not offered */
    CU_ASSERT(pf == ORK_OK || pf == ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(ork_map_prefetch(m, 0), ORK_OK);
    CU_ASSERT_EQUAL(memcmp(m, data, sizeof data), 0); /* the map reads the same after */
    ork_map_close(m, sizeof data);
    ork_map_close(NULL, 0);
    CU_ASSERT_EQUAL(ork_map_fd(-1, 16, &m), ORK_E_IO); /* a bad descriptor */
}

/* ---- the machine and the process ---- */

static void test_system(void) {
    uint64_t avail = 0, total = 0;
    CU_ASSERT_EQUAL(ork_mem_available(&avail), ORK_OK);
    CU_ASSERT_EQUAL(ork_mem_total(&total), ORK_OK);
    CU_ASSERT(avail > 0);
    CU_ASSERT(total >= avail);
    long pid = ork_pid();
    CU_ASSERT(pid > 0);
    CU_ASSERT_EQUAL(ork_pid_alive(pid), 1);
    CU_ASSERT_EQUAL(ork_pid_alive(0), 0);
    CU_ASSERT_EQUAL(ork_pid_alive(-5), 0);
    uint64_t t0 = ork_time_ns();
    ork_sleep_us(2000);
    uint64_t t1 = ork_time_ns();
    CU_ASSERT(t1 > t0); /* monotonic and moving */
    /* process CPU time: moves while this thread computes (Windows counts it in
     * ticks of ~15.6 ms: spin until it moves, for at most 10 s of wall time) */
    uint64_t c0 = ork_process_cpu_ns(), c1 = c0;
    volatile double sink = 0;
    for (uint64_t w0 = ork_time_ns(); c1 == c0 && ork_time_ns() - w0 < 10000000000u; c1 = ork_process_cpu_ns())
        for (int i = 0; i < 100000; i++) sink += i * 0.5;
    CU_ASSERT(c0 > 0);
    CU_ASSERT(c1 > c0);
    size_t pg = ork_page_size();
    CU_ASSERT(pg >= 4096 && (pg & (pg - 1)) == 0);
    CU_ASSERT(ork_cpu_count() >= 1);
    CU_ASSERT_EQUAL(ork_isatty(NULL), 0);
    CU_ASSERT_EQUAL(ork_console_ansi(NULL), 0);
}

/* ork_path_access: an existing file may be read and written; a missing one
 * neither, with errno ENOENT. */
static void test_access(void) {
    char p[1100], q[1100];
    at("access.txt", p, sizeof p);
    at("access-missing.txt", q, sizeof q);
    write_text(p, "x");
    CU_ASSERT_EQUAL(ork_path_access(p, 0), 1);
    CU_ASSERT_EQUAL(ork_path_access(p, 1), 1);
    errno = 0;
    CU_ASSERT_EQUAL(ork_path_access(q, 0), 0);
    CU_ASSERT_EQUAL(errno, ENOENT);
    CU_ASSERT_EQUAL(ork_path_access(q, 1), 0);
}

/* ork_peak_rss: in bytes, and it sees 64 MiB that were touched. */
static void test_peak_rss(void) {
    uint64_t a = 0, b = 0;
    CU_ASSERT_EQUAL_FATAL(ork_peak_rss(&a), ORK_OK);
    CU_ASSERT(a >= 1u << 20); /* a running process holds more than 1 MiB (KiB misread as bytes would not) */
    size_t n = (size_t)64 << 20;
    volatile unsigned char *m = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    for (size_t i = 0; i < n; i += 4096) m[i] = (unsigned char)i;
    CU_ASSERT_EQUAL(ork_peak_rss(&b), ORK_OK);
    CU_ASSERT(b >= a);
    CU_ASSERT(b >= n);
    free((void *)m);
}

static void test_env(void) {
    CU_ASSERT_EQUAL(ork_env_set("ORK_PLATFORM_TEST_VAR", "v\xc3\xa4lue"), ORK_OK);
    const char *v = ork_env_get("ORK_PLATFORM_TEST_VAR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v, "v\xc3\xa4lue");
    CU_ASSERT_EQUAL(ork_env_set("ORK_PLATFORM_TEST_VAR", NULL), ORK_OK);
    v = ork_env_get("ORK_PLATFORM_TEST_VAR");
    CU_ASSERT(v == NULL || *v == '\0');
    CU_ASSERT_PTR_NULL(ork_env_get("ORK_PLATFORM_NEVER_SET_ANYWHERE"));
    CU_ASSERT_EQUAL(ork_env_set("", "x"), ORK_E_IO); /* no name */
}

/* ---- the service for plugins ---- */

typedef struct svc_arg {
    const ork_platform_api *api;
    int ran;
} svc_arg;
static void svc_thread(void *arg) { ((svc_arg *)arg)->ran = ((svc_arg *)arg)->api->cpu_count(); }

static void test_service(void) {
    const ork_platform_api *api = ork_platform_api_table();
    CU_ASSERT_PTR_NOT_NULL_FATAL(api);
    CU_ASSERT_EQUAL(api->abi.struct_size, sizeof(ork_platform_api));
    /* every entry is there */
    const void *const fns[] = {(const void *)api->last_errno, (const void *)api->cpu_count,
                               (const void *)api->page_size, (const void *)api->time_ns,
                               (const void *)api->thread_start, (const void *)api->thread_join,
                               (const void *)api->fd_open, (const void *)api->fd_close,
                               (const void *)api->fd_pread, (const void *)api->fd_info,
                               (const void *)api->path_info, (const void *)api->dir_open,
                               (const void *)api->dir_next, (const void *)api->dir_close,
                               (const void *)api->map_fd, (const void *)api->map_close,
                               (const void *)api->map_prefetch,
                               (const void *)api->mem_available};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) CU_ASSERT_PTR_NOT_NULL(fns[i]);
    svc_arg a = {api, 0};
    ork_thread *t;
    CU_ASSERT_EQUAL_FATAL(api->thread_start(svc_thread, &a, &t), ORK_OK);
    api->thread_join(t);
    CU_ASSERT_EQUAL(a.ran, ork_cpu_count());
    char p[1100];
    int fd;
    CU_ASSERT_EQUAL(api->fd_open(at("svc-missing", p, sizeof p), ORK_F_READ, &fd), ORK_E_IO);
    CU_ASSERT_EQUAL(api->last_errno(), ENOENT); /* the reason, as the core saw it */
    write_text(at("svc.txt", p, sizeof p), "service");
    CU_ASSERT_EQUAL_FATAL(api->fd_open(p, ORK_F_READ, &fd), ORK_OK);
    char buf[16] = {0};
    size_t got;
    CU_ASSERT_EQUAL(api->fd_pread(fd, buf, sizeof buf, 3, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 4);
    CU_ASSERT_STRING_EQUAL(buf, "vice");
    api->fd_close(fd);
}

/* ---- child processes ---- */

/* Text a child wrote through its C runtime, "\r\n" made "\n" (Windows'
 * text-mode stdout writes "\r\n"). */
static int read_child_text(const char *path, char *buf, size_t n) {
    int k = read_text(path, buf, n);
    if (k < 0) return k;
    char *o = buf;
    for (const char *c = buf; *c; c++)
        if (!(c[0] == '\r' && c[1] == '\n')) *o++ = *c;
    *o = '\0';
    return (int)(o - buf);
}

static void test_proc(void) {
    char out[1100], err[1100], buf[512];
    at("child.out", out, sizeof out);
    at("child.err", err, sizeof err);
    /* blanks, quotes, backslashes (before a quote and at the end), empty */
    const char *argv[] = {ORK_PROC_CHILD, "echo", "plain", "two words", "q\"uote", "back\\slash\\",
                          "tail\\\\\"q", "", "a\tb", NULL};
    ork_proc *p;
    CU_ASSERT_EQUAL_FATAL(ork_proc_spawn(argv, out, err, &p), ORK_OK);
    CU_ASSERT(ork_proc_pid(p) > 0);
    int code = -1;
    CU_ASSERT_EQUAL(ork_proc_wait(p, ORK_PROC_FOREVER, &code), 1);
    CU_ASSERT_EQUAL(code, 0);
    ork_proc_free(p);
    CU_ASSERT(read_child_text(out, buf, sizeof buf) > 0);
    CU_ASSERT_STRING_EQUAL(buf, "[plain]\n[two words]\n[q\"uote]\n[back\\slash\\]\n[tail\\\\\"q]\n[]\n[a\tb]\n");
    CU_ASSERT(read_child_text(err, buf, sizeof buf) > 0);
    CU_ASSERT_STRING_EQUAL(buf, "to stderr\n");

    const char *ex[] = {ORK_PROC_CHILD, "exit", "3", NULL};
    CU_ASSERT_EQUAL_FATAL(ork_proc_spawn(ex, NULL, NULL, &p), ORK_OK);
    CU_ASSERT_EQUAL(ork_proc_wait(p, ORK_PROC_FOREVER, &code), 1);
    CU_ASSERT_EQUAL(code, 3);
    CU_ASSERT_EQUAL(ork_proc_wait(p, 0, &code), 1); /* asking again gives the same */
    CU_ASSERT_EQUAL(code, 3);
    ork_proc_free(p);

    const char *sl[] = {ORK_PROC_CHILD, "sleep", NULL};
    CU_ASSERT_EQUAL_FATAL(ork_proc_spawn(sl, NULL, NULL, &p), ORK_OK);
    CU_ASSERT_EQUAL(ork_proc_wait(p, 50, &code), 0); /* still sleeping */
    ork_proc_kill(p);
    CU_ASSERT_EQUAL(ork_proc_wait(p, ORK_PROC_FOREVER, &code), 1);
    CU_ASSERT_EQUAL(code, 137); /* 128 + SIGKILL; TerminateProcess's code */
    ork_proc_free(p);
    CU_ASSERT_EQUAL_FATAL(ork_proc_spawn(sl, NULL, NULL, &p), ORK_OK);
    ork_proc_free(p); /* still running: killed and reaped */
    ork_proc_free(NULL);

    const char *missing[] = {"/nonexistent/orakul-no-such-program", NULL};
    CU_ASSERT_EQUAL(ork_proc_spawn(missing, NULL, NULL, &p), ORK_E_IO);
    CU_ASSERT_PTR_NULL(p);
    const char *none[] = {NULL};
    CU_ASSERT_EQUAL(ork_proc_spawn(none, NULL, NULL, &p), ORK_E_INVALID);
    at("no-such-folder/child.out", out, sizeof out); /* the output file cannot be made */
    CU_ASSERT_EQUAL(ork_proc_spawn(ex, out, NULL, &p), ORK_E_IO);
    CU_ASSERT_PTR_NULL(p);
}

/* ---- paths past MAX_PATH (260 on Windows: the "\\?\" form) ---- */

static void test_long_paths(void) {
    char dir[2048], p[2200], buf[64];
    at("long", dir, sizeof dir);
    for (int i = 0; i < 8; i++) /* 8 * 41 characters: past 260 */
        snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/folder-%d-abcdefghijklmnopqrstuvwxyz012", i);
    CU_ASSERT_FATAL(strlen(dir) > 300);
    CU_ASSERT_EQUAL_FATAL(ork_mkdir_p(dir), ORK_OK);
    snprintf(p, sizeof p, "%s/a-file-at-the-bottom.txt", dir);
    write_text(p, "deep");
    CU_ASSERT_EQUAL(read_text(p, buf, sizeof buf), 4);
    CU_ASSERT_STRING_EQUAL(buf, "deep");
    ork_file_info fi;
    CU_ASSERT_EQUAL(ork_path_info(p, &fi), ORK_OK);
    CU_ASSERT_EQUAL(fi.kind, ORK_KIND_FILE);
    CU_ASSERT_EQUAL(fi.size, 4);
    int fd;
    CU_ASSERT_EQUAL_FATAL(ork_fd_open(p, ORK_F_READ, &fd), ORK_OK);
    size_t got = 0;
    CU_ASSERT_EQUAL(ork_fd_pread(fd, buf, 2, 2, &got), ORK_OK);
    CU_ASSERT_EQUAL(got, 2);
    CU_ASSERT_EQUAL(memcmp(buf, "ep", 2), 0);
    ork_fd_close(fd);
    char q[2200];
    snprintf(q, sizeof q, "%s/renamed.txt", dir);
    CU_ASSERT_EQUAL(ork_path_replace(p, q), ORK_OK);
    CU_ASSERT_EQUAL(ork_path_exists(p), 0);
    ork_dir *d;
    CU_ASSERT_EQUAL_FATAL(ork_dir_open(dir, &d), ORK_OK);
    const char *n = ork_dir_next(d);
    CU_ASSERT(n && strcmp(n, "renamed.txt") == 0);
    ork_dir_close(d);
    CU_ASSERT_EQUAL(ork_path_remove(q), ORK_OK);
    CU_ASSERT_EQUAL(ork_path_rmdir(dir), ORK_OK);
}

static const ork_test_case cases[] = {
    {"lib: load, symbols, data symbol, hidden symbol", test_lib_good},
    {"lib: a missing path fails, naming the path", test_lib_missing},
    {"lib: a file that is no library fails, naming the path", test_lib_not_a_library},
    {"threads + mutex: no lost update", test_threads_mutex},
    {"cond: wait, signal, broadcast, timed wait", test_cond},
    {"once: one run across threads", test_once},
    {"fd: a missing file is ENOENT", test_fd_missing},
    {"fd: write, pwrite, pread, read, truncate, sync, excl, append", test_fd_rw},
    {"fd: offsets and sizes past 4 GiB", test_fd_large_offset},
    {"UTF-8 names: create, read, list", test_utf8_names},
    {"fopen + fsync", test_fopen_sync},
    {"anonymous temporary file", test_tmpfile},
    {"atomic replace", test_replace},
    {"mkdir, mkdir -p, rmdir, remove, kinds", test_dirs},
    {"folder listing", test_list},
    {"realpath, executable path, temp folder", test_paths},
    {"read-only map", test_map},
    {"memory, pid, time, page size, cpus", test_system},
    {"path access: read, write, missing", test_access},
    {"peak resident memory", test_peak_rss},
    {"environment", test_env},
    {"the service orakul.platform/1", test_service},
    {"child processes: argv quoting, output files, exit codes, wait, kill", test_proc},
    {"paths past MAX_PATH", test_long_paths},
    {NULL, NULL},
};

ORK_TEST_MAIN("platform", suite_init, suite_clean, cases)
