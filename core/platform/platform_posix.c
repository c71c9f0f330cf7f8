/* platform/platform_posix.c — platform.h on Linux (POSIX + glibc): dlopen,
 * pthreads, open/pread/pwrite, rename + fsync of the folder, mmap,
 * /proc/meminfo. Owns each ork_lib, ork_thread and ork_dir it hands out. */
#include "platform/platform.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((ork_mutex *)0)->u.b), "ork_mutex too small");
_Static_assert(sizeof(pthread_cond_t) <= sizeof(((ork_cond *)0)->u.b), "ork_cond too small");
_Static_assert(sizeof(pthread_once_t) <= sizeof(((ork_once *)0)->u.b), "ork_once too small");

#define IO_FAIL() ORK_E_IO /* errno is already set by the failed call */

/* ---- shared libraries ---------------------------------------------------------- */

struct ork_lib {
    void *h;
};

ork_status ork_lib_open(const char *path, char *err, size_t errn, ork_lib **out) {
    *out = NULL;
    if (err && errn) err[0] = '\0';
    ork_lib *l = malloc(sizeof *l);
    if (!l) {
        if (err && errn) snprintf(err, errn, "%s: out of memory", path);
        return ORK_E_NOMEM;
    }
    dlerror();
    l->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!l->h) {
        const char *e = dlerror();
        /* dlerror names the path already when the file is the problem; the
         * line must name it in every case */
        if (err && errn) {
            if (e && strncmp(e, path, strlen(path)) == 0) snprintf(err, errn, "%s", e);
            else snprintf(err, errn, "%s: %s", path, e ? e : "cannot load");
        }
        free(l);
        return ORK_E_IO;
    }
    *out = l;
    return ORK_OK;
}

void *ork_lib_sym(ork_lib *lib, const char *name) { return lib ? dlsym(lib->h, name) : NULL; }

void ork_lib_close(ork_lib *lib) {
    if (!lib) return;
    dlclose(lib->h);
    free(lib);
}

const char *ork_lib_suffix(void) { return ".so"; }
int ork_os_windows(void) { return 0; }
char ork_path_list_sep(void) { return ':'; }
int ork_path_is_sep(char c) { return c == '/'; }

/* ---- threads -------------------------------------------------------------------- */

struct ork_thread {
    pthread_t th;
    void (*fn)(void *);
    void *arg;
};

static void *thread_main(void *p) {
    ork_thread *t = p;
    t->fn(t->arg);
    return NULL;
}

ork_status ork_thread_start(void (*fn)(void *arg), void *arg, ork_thread **out) {
    *out = NULL;
    ork_thread *t = malloc(sizeof *t);
    if (!t) return ORK_E_NOMEM;
    t->fn = fn, t->arg = arg;
    int e = pthread_create(&t->th, NULL, thread_main, t);
    if (e != 0) {
        free(t);
        errno = e;
        return ORK_E_IO;
    }
    *out = t;
    return ORK_OK;
}

void ork_thread_join(ork_thread *t) {
    if (!t) return;
    pthread_join(t->th, NULL);
    free(t);
}

#define MU(m) ((pthread_mutex_t *)(void *)(m)->u.b)
#define CV(c) ((pthread_cond_t *)(void *)(c)->u.b)

ork_status ork_mutex_init(ork_mutex *m) {
    int e = pthread_mutex_init(MU(m), NULL);
    if (e) errno = e;
    return e ? ORK_E_IO : ORK_OK;
}
void ork_mutex_destroy(ork_mutex *m) { pthread_mutex_destroy(MU(m)); }
void ork_mutex_lock(ork_mutex *m) { pthread_mutex_lock(MU(m)); }
void ork_mutex_unlock(ork_mutex *m) { pthread_mutex_unlock(MU(m)); }

ork_status ork_cond_init(ork_cond *c) {
    pthread_condattr_t a;
    int e = pthread_condattr_init(&a);
    if (!e) e = pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* timed waits immune to clock changes */
    if (!e) e = pthread_cond_init(CV(c), &a);
    pthread_condattr_destroy(&a);
    if (e) errno = e;
    return e ? ORK_E_IO : ORK_OK;
}
void ork_cond_destroy(ork_cond *c) { pthread_cond_destroy(CV(c)); }
void ork_cond_wait(ork_cond *c, ork_mutex *m) { pthread_cond_wait(CV(c), MU(m)); }
int ork_cond_timedwait(ork_cond *c, ork_mutex *m, uint32_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return pthread_cond_timedwait(CV(c), MU(m), &ts) == 0;
}
void ork_cond_signal(ork_cond *c) { pthread_cond_signal(CV(c)); }
void ork_cond_broadcast(ork_cond *c) { pthread_cond_broadcast(CV(c)); }

/* ORK_ONCE_INIT is all zeros; glibc's PTHREAD_ONCE_INIT is 0 too (checked in
 * the test through behaviour, and here at compile time) */
_Static_assert(PTHREAD_ONCE_INIT == 0, "ORK_ONCE_INIT assumes PTHREAD_ONCE_INIT is 0");
void ork_call_once(ork_once *once, void (*init)(void)) { pthread_once((pthread_once_t *)(void *)once->u.b, init); }

/* ---- files -------------------------------------------------------------------------- */

ork_status ork_fd_open(const char *path, int flags, int *fd) {
    *fd = -1;
    int o = O_CLOEXEC | O_NOCTTY;
    if ((flags & ORK_F_READ) && (flags & ORK_F_WRITE)) o |= O_RDWR;
    else if (flags & ORK_F_WRITE) o |= O_WRONLY;
    else o |= O_RDONLY;
    if (flags & ORK_F_CREATE) o |= O_CREAT;
    if (flags & ORK_F_TRUNC) o |= O_TRUNC;
    if (flags & ORK_F_EXCL) o |= O_EXCL;
    if (flags & ORK_F_APPEND) o |= O_APPEND;
    if (flags & ORK_F_NONBLOCK) o |= O_NONBLOCK;
    int d = open(path, o, 0644);
    if (d < 0) return IO_FAIL();
    *fd = d;
    return ORK_OK;
}

void ork_fd_close(int fd) {
    if (fd >= 0) close(fd);
}

ork_status ork_fd_set_blocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return IO_FAIL();
    return ORK_OK;
}

ork_status ork_fd_read(int fd, void *buf, size_t n, size_t *got) {
    *got = 0;
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return IO_FAIL();
        *got = (size_t)r;
        return ORK_OK;
    }
}

ork_status ork_fd_write(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return IO_FAIL();
        p += w, n -= (size_t)w;
    }
    return ORK_OK;
}

ork_status ork_fd_pread(int fd, void *buf, size_t n, uint64_t off, size_t *got) {
    *got = 0;
    char *p = buf;
    if (off > (uint64_t)INT64_MAX) return errno = EINVAL, ORK_E_IO;
    while (*got < n) {
        ssize_t r = pread(fd, p + *got, n - *got, (off_t)(off + *got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return IO_FAIL();
        if (r == 0) break;
        *got += (size_t)r;
    }
    return ORK_OK;
}

ork_status ork_fd_pwrite(int fd, const void *buf, size_t n, uint64_t off) {
    const char *p = buf;
    if (off > (uint64_t)INT64_MAX) return errno = EINVAL, ORK_E_IO;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return IO_FAIL();
        p += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return ORK_OK;
}

ork_status ork_fd_truncate(int fd, uint64_t size) {
    if (size > (uint64_t)INT64_MAX) return errno = EINVAL, ORK_E_IO;
    return ftruncate(fd, (off_t)size) == 0 ? ORK_OK : IO_FAIL();
}

ork_status ork_fd_sync(int fd) { return fsync(fd) == 0 ? ORK_OK : IO_FAIL(); }

FILE *ork_fopen(const char *path, const char *mode) {
    /* "e": O_CLOEXEC, as every descriptor here (glibc) */
    char m[16];
    if (strlen(mode) + 2 > sizeof m) return errno = EINVAL, NULL;
    snprintf(m, sizeof m, "%se", mode);
    return fopen(path, m);
}

FILE *ork_tmpfile(void) { return tmpfile(); }

ork_status ork_fsync_file(FILE *f) {
    if (fflush(f) != 0) return IO_FAIL();
    return fsync(fileno(f)) == 0 ? ORK_OK : IO_FAIL();
}

static ork_file_kind kind_of(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return ORK_KIND_FILE;
    case S_IFDIR: return ORK_KIND_DIR;
    case S_IFIFO: return ORK_KIND_FIFO;
    case S_IFCHR: return ORK_KIND_CHAR;
    case S_IFBLK: return ORK_KIND_BLOCK;
    case S_IFSOCK: return ORK_KIND_SOCKET;
    case S_IFLNK: return ORK_KIND_LINK;
    default: return ORK_KIND_OTHER;
    }
}

static void info_of(const struct stat *st, ork_file_info *out) {
    out->kind = kind_of(st->st_mode);
    out->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
    out->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

ork_status ork_fd_info(int fd, ork_file_info *out) {
    struct stat st;
    if (fstat(fd, &st) != 0) return IO_FAIL();
    info_of(&st, out);
    return ORK_OK;
}

ork_status ork_path_info(const char *path, ork_file_info *out) {
    struct stat st;
    if (stat(path, &st) != 0) return IO_FAIL();
    info_of(&st, out);
    return ORK_OK;
}

ork_status ork_path_lstat(const char *path, ork_file_info *out) {
    struct stat st;
    if (lstat(path, &st) != 0) return IO_FAIL();
    info_of(&st, out);
    return ORK_OK;
}

int ork_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int ork_path_access(const char *path, int write) { return access(path, write ? W_OK : R_OK) == 0; }

/* The folder of path ("." when it has none) into buf. */
static int parent_of(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) return snprintf(buf, n, ".") < (int)n;
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    if (len + 1 > n) return 0;
    memcpy(buf, path, len);
    buf[len] = '\0';
    return 1;
}

ork_status ork_dir_sync(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return IO_FAIL();
    int r = fsync(fd);
    int e = errno;
    close(fd);
    if (r != 0) return errno = e, ORK_E_IO;
    return ORK_OK;
}

ork_status ork_path_replace(const char *from, const char *to) {
    if (rename(from, to) != 0) return IO_FAIL();
    char dir[PATH_MAX];
    if (!parent_of(to, dir, sizeof dir)) return errno = ENAMETOOLONG, ORK_E_IO;
    return ork_dir_sync(dir);
}

ork_status ork_path_remove(const char *path) { return unlink(path) == 0 ? ORK_OK : IO_FAIL(); }
ork_status ork_path_rmdir(const char *path) { return rmdir(path) == 0 ? ORK_OK : IO_FAIL(); }
ork_status ork_mkdir(const char *path) { return mkdir(path, 0755) == 0 ? ORK_OK : IO_FAIL(); }

ork_status ork_mkdir_p(const char *path) {
    size_t n = strlen(path);
    if (n == 0) return errno = ENOENT, ORK_E_IO;
    char *p = malloc(n + 1);
    if (!p) return ORK_E_NOMEM;
    memcpy(p, path, n + 1);
    ork_status s = ORK_OK;
    for (size_t i = 1; i <= n && s == ORK_OK; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) s = ORK_E_IO; /* errno says why */
        p[i] = c;
    }
    free(p);
    struct stat st;
    if (s == ORK_OK && stat(path, &st) != 0) s = ORK_E_IO;
    else if (s == ORK_OK && !S_ISDIR(st.st_mode)) errno = ENOTDIR, s = ORK_E_IO;
    return s;
}

ork_status ork_path_real(const char *path, char *buf, size_t n) {
    char *r = realpath(path, NULL);
    if (!r) return IO_FAIL();
    size_t len = strlen(r);
    ork_status s = ORK_OK;
    if (len + 1 > n) errno = ENAMETOOLONG, s = ORK_E_IO;
    else memcpy(buf, r, len + 1);
    free(r);
    return s;
}

ork_status ork_exe_path(char *buf, size_t n) {
    if (n < 2) return errno = ENAMETOOLONG, ORK_E_IO;
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len < 0) return IO_FAIL();
    if ((size_t)len >= n - 1) return errno = ENAMETOOLONG, ORK_E_IO;
    buf[len] = '\0';
    return ORK_OK;
}

ork_status ork_temp_dir(char *buf, size_t n) {
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = "/tmp";
    if ((size_t)snprintf(buf, n, "%s", t) >= n) return errno = ENAMETOOLONG, ORK_E_IO;
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') buf[--len] = '\0';
    return ORK_OK;
}

struct ork_dir {
    DIR *d;
};

ork_status ork_dir_open(const char *path, ork_dir **out) {
    *out = NULL;
    ork_dir *d = malloc(sizeof *d);
    if (!d) return ORK_E_NOMEM;
    d->d = opendir(path);
    if (!d->d) {
        int e = errno;
        free(d);
        return errno = e, ORK_E_IO;
    }
    *out = d;
    return ORK_OK;
}

const char *ork_dir_next(ork_dir *d) {
    for (struct dirent *e; (e = readdir(d->d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        return e->d_name;
    }
    return NULL;
}

void ork_dir_close(ork_dir *d) {
    if (!d) return;
    closedir(d->d);
    free(d);
}

ork_status ork_map_fd(int fd, uint64_t size, const void **p) {
    *p = NULL;
    if (size == 0 || size > (uint64_t)SIZE_MAX) return errno = EINVAL, ORK_E_IO;
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return IO_FAIL();
    *p = m;
    return ORK_OK;
}

void ork_map_close(const void *p, uint64_t size) {
    if (p) munmap((void *)p, (size_t)size);
}

ork_status ork_map_prefetch(const void *p, size_t n) {
    uintptr_t pg = ork_page_size(), a = (uintptr_t)p & ~(pg - 1), e = (uintptr_t)p + n;
    if (n == 0) return ORK_OK;
#ifdef MADV_POPULATE_READ /* Linux 5.14: reads the pages in, synchronously */
    if (madvise((void *)a, e - a, MADV_POPULATE_READ) == 0) return ORK_OK;
#endif
    (void)a, (void)e;
    return ORK_E_UNSUPPORTED;
}

/* ---- memory ---------------------------------------------------------------------- */

void *ork_aligned_alloc(size_t align, size_t size) {
    if (size % align) size += align - size % align; /* C11: a multiple of the alignment */
    return aligned_alloc(align, size);
}

void ork_aligned_free(void *p) { free(p); }

/* ---- the machine and the process ------------------------------------------------ */

/* A "Key:   N kB" value of /proc/meminfo, in bytes. */
static ork_status meminfo(const char *key, uint64_t *bytes) {
    *bytes = 0;
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return IO_FAIL();
    char line[256];
    size_t kl = strlen(key);
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0 || line[kl] != ':') continue;
        unsigned long long kb = strtoull(line + kl + 1, NULL, 10);
        *bytes = (uint64_t)kb * 1024;
        found = 1;
        break;
    }
    fclose(f);
    if (!found) return errno = ENOENT, ORK_E_IO;
    return ORK_OK;
}

ork_status ork_mem_available(uint64_t *bytes) { return meminfo("MemAvailable", bytes); }
ork_status ork_mem_total(uint64_t *bytes) { return meminfo("MemTotal", bytes); }

ork_status ork_peak_rss(uint64_t *bytes) {
    struct rusage ru;
    *bytes = 0;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return ORK_E_IO;
    *bytes = (uint64_t)ru.ru_maxrss * 1024u; /* KiB on Linux */
    return ORK_OK;
}

long ork_pid(void) { return (long)getpid(); }

int ork_pid_alive(long pid) {
    if (pid <= 0) return 0;
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

uint64_t ork_time_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t ork_process_cpu_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void ork_sleep_us(uint32_t us) {
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

const char *ork_env_get(const char *name) { return getenv(name); }

ork_status ork_env_set(const char *name, const char *value) {
    int r = value ? setenv(name, value, 1) : unsetenv(name);
    return r == 0 ? ORK_OK : IO_FAIL();
}

size_t ork_page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

int ork_cpu_count(void) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)(c > 4096 ? 4096 : c) : 1;
}

int ork_isatty(FILE *f) { return f && isatty(fileno(f)); }

int ork_console_ansi(FILE *f) {
    const char *term = getenv("TERM");
    return ork_isatty(f) && !(term && strcmp(term, "dumb") == 0);
}

/* ---- child processes ------------------------------------------------------- */

extern char **environ;

struct ork_proc {
    pid_t pid;
    int done, code;
};

ork_status ork_proc_spawn(const char *const *argv, const char *out_path, const char *err_path, ork_proc **out) {
    *out = NULL;
    if (!argv || !argv[0]) return errno = EINVAL, ORK_E_INVALID;
    ork_proc *p = calloc(1, sizeof *p);
    if (!p) return ORK_E_NOMEM;
    posix_spawn_file_actions_t fa;
    int e = posix_spawn_file_actions_init(&fa);
    if (e == 0 && out_path)
        e = posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e == 0 && err_path)
        e = posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e == 0) e = posix_spawn(&p->pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        free(p);
        errno = e;
        return ORK_E_IO;
    }
    *out = p;
    return ORK_OK;
}

static int reap(ork_proc *p, int flags) {
    if (p->done) return 1;
    int st;
    pid_t r;
    do r = waitpid(p->pid, &st, flags);
    while (r < 0 && errno == EINTR);
    if (r == 0) return 0;
    p->done = 1;
    p->code = r < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return 1;
}

int ork_proc_wait(ork_proc *p, uint32_t ms, int *code) {
    int ended;
    if (ms == ORK_PROC_FOREVER) {
        ended = reap(p, 0);
    } else {
        uint64_t t0 = ork_time_ns();
        while (!(ended = reap(p, WNOHANG)) && ork_time_ns() - t0 < (uint64_t)ms * 1000000u) ork_sleep_us(2000);
    }
    if (ended && code) *code = p->code;
    return ended;
}

void ork_proc_kill(ork_proc *p) {
    if (p && !p->done) kill(p->pid, SIGKILL);
}

long ork_proc_pid(const ork_proc *p) { return (long)p->pid; }

void ork_proc_free(ork_proc *p) {
    if (!p) return;
    if (!reap(p, WNOHANG)) {
        kill(p->pid, SIGKILL);
        reap(p, 0);
    }
    free(p);
}
