/* ork_test_win.h — the POSIX calls the tests use, for the Windows build of the
 * tests only (tests/CMakeLists.txt force-includes it there, before anything
 * else; Linux never sees it). The core and the plugins reach the OS through
 * core/platform; the tests are older than that layer and call a few POSIX
 * functions directly, which this header gives them over the platform layer or
 * the C runtime: mkdir(path, mode), setenv / unsetenv, mkdtemp, realpath,
 * lstat, utimensat (whole seconds), getline, open_memstream and fmemopen (a temporary file whose bytes fclose hands back),
 * symlink (a copy: Windows needs a privilege for links), geteuid (0: see below), the <sys/wait.h>
 * macros for system()'s result (the exit code itself on Windows), and
 * system() itself for the three shell commands the tests give it for their
 * scratch folders — "rm -rf", "mkdir -p" and "cp [-r]" on single-quoted or
 * bare paths, joined by "&&" — done over the platform layer (cmd.exe has none
 * of them); any other command goes to the C runtime's system(). A test that
 * needs more than this (fork, signals, mmap, sockets, a POSIX shell) is in
 * tests/CMakeLists.txt's list of tests that do not run on Windows, with why.
 * Owns the open_memstream table below. */
#ifndef ORK_TEST_WIN_H
#define ORK_TEST_WIN_H
#ifdef _WIN32

#include "platform/platform.h"

#include <direct.h>
#include <errno.h>
#include <io.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utime.h>
#include <time.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static inline int ork_tw_mkdir(const char *path, int mode) {
    (void)mode;
    return ork_mkdir(path) == ORK_OK ? 0 : -1;
}
#define mkdir(path, mode) ork_tw_mkdir((path), (mode))

/* no links to tell apart: lstat is stat */
#define lstat(path, st) stat((path), (st))
#ifndef S_ISLNK
#define S_ISLNK(m) 0
#endif

/* utimensat(AT_FDCWD, path, {atime, mtime}, 0), to the second */
#ifndef AT_FDCWD
#define AT_FDCWD (-100)
#endif
static inline int utimensat(int dirfd, const char *path, const struct timespec ts[2], int flags) {
    (void)dirfd, (void)flags;
    struct _utimbuf u = {(time_t)ts[0].tv_sec, (time_t)ts[1].tv_sec};
    return _utime(path, &u);
}

static inline int setenv(const char *name, const char *value, int overwrite) {
    if (!overwrite && getenv(name)) return 0;
    return ork_env_set(name, value) == ORK_OK ? 0 : -1;
}
static inline int unsetenv(const char *name) { return ork_env_set(name, NULL) == ORK_OK ? 0 : -1; }

/* tmpl ends in "XXXXXX": replaced by digits of the pid and a counter until
 * ork_mkdir makes a new folder. */
static inline char *mkdtemp(char *tmpl) {
    static unsigned k;
    size_t n = strlen(tmpl);
    if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0) return errno = EINVAL, NULL;
    for (int tries = 0; tries < 1000; tries++) {
        char d[8];
        snprintf(d, sizeof d, "%06lu", (unsigned long)((ork_pid() * 7919u + k++) % 1000000u));
        memcpy(tmpl + n - 6, d, 6);
        if (ork_mkdir(tmpl) == ORK_OK) return tmpl;
        if (errno != EEXIST) return NULL;
    }
    return NULL;
}

static inline char *realpath(const char *path, char *out) {
    static char buf[PATH_MAX];
    char *o = out ? out : buf;
    return ork_path_real(path, o, PATH_MAX) == ORK_OK ? (out ? out : strdup(buf)) : NULL;
}

/* Windows: a folder's read-only attribute does not stop writing into it, as
 * permissions do not for root on POSIX: the tests' "as root" branch applies */
static inline int geteuid(void) { return 0; }


static inline ssize_t getline(char **line, size_t *cap, FILE *f) {
    size_t n = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 128;
            char *t = (char *)realloc(*line, nc);
            if (!t) return -1;
            *line = t, *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
    }
    if (n == 0) return -1;
    (*line)[n] = '\0';
    return (ssize_t)n;
}

/* open_memstream: a temporary file; fclose (this header's) copies its bytes
 * into a malloc'd, NUL-terminated *buf and sets *len, as POSIX's does. */
typedef struct ork_tw_mem {
    FILE *f;
    char **buf;
    size_t *len;
    char *fixed;  /* fmemopen "w": the caller's buffer of cap bytes, else NULL */
    size_t cap;
} ork_tw_mem;
static ork_tw_mem ork_tw_mems[16];

/* fmemopen(buf, size, mode): a temporary file. "r": it holds buf's size bytes;
 * "w" (and "w+"): fclose (this header's) copies what was written into buf, at
 * most size bytes, and a NUL after it when there is room, as glibc's does. */
static inline FILE *fmemopen(void *buf, size_t size, const char *mode) {
    if (!buf || !size || !mode) return errno = EINVAL, (FILE *)NULL;
    FILE *f = ork_tmpfile();
    if (!f) return NULL;
    if (mode[0] == 'r') {
        if (fwrite(buf, 1, size, f) != size) return fclose(f), (FILE *)NULL;
        rewind(f);
        return f;
    }
    for (int i = 0; i < 16; i++)
        if (!ork_tw_mems[i].f) {
            ork_tw_mems[i].f = f, ork_tw_mems[i].buf = NULL, ork_tw_mems[i].len = NULL;
            ork_tw_mems[i].fixed = (char *)buf, ork_tw_mems[i].cap = size;
            if (mode[0] == 'w') ((char *)buf)[0] = '\0';
            return f;
        }
    fclose(f);
    errno = EMFILE;
    return NULL;
}

static inline FILE *open_memstream(char **buf, size_t *len) {
    for (int i = 0; i < 16; i++)
        if (!ork_tw_mems[i].f) {
            FILE *f = ork_tmpfile();
            if (!f) return NULL;
            ork_tw_mems[i].f = f, ork_tw_mems[i].buf = buf, ork_tw_mems[i].len = len;
            ork_tw_mems[i].fixed = NULL, ork_tw_mems[i].cap = 0;
            *buf = NULL, *len = 0;
            return f;
        }
    errno = EMFILE;
    return NULL;
}

static inline int ork_tw_fclose(FILE *f) {
    for (int i = 0; i < 16; i++)
        if (f && ork_tw_mems[i].f == f) {
            ork_tw_mems[i].f = NULL;
            long n = (fflush(f), fseek(f, 0, SEEK_END), ftell(f));
            if (ork_tw_mems[i].fixed) { /* fmemopen: into the caller's buffer */
                size_t k = n > 0 ? (size_t)n : 0, cap = ork_tw_mems[i].cap;
                if (k > cap) k = cap;
                rewind(f);
                k = fread(ork_tw_mems[i].fixed, 1, k, f);
                if (k < cap) ork_tw_mems[i].fixed[k] = '\0';
                return fclose(f);
            }
            char *b = (char *)malloc(n > 0 ? (size_t)n + 1 : 1);
            rewind(f);
            size_t got = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
            if (b) b[got] = '\0';
            *ork_tw_mems[i].buf = b, *ork_tw_mems[i].len = got;
            return fclose(f);
        }
    return fclose(f);
}
#define fclose(f) ork_tw_fclose(f)

/* ---- system(): rm -rf, mkdir -p, cp [-r] ---- */

static inline int ork_tw_rm_rf(const char *path) {
    ork_file_info fi;
    if (ork_path_lstat(path, &fi) != ORK_OK) return errno == ENOENT ? 0 : -1;
    if (fi.kind != ORK_KIND_DIR) return ork_path_remove(path) == ORK_OK ? 0 : -1;
    ork_dir *d;
    if (ork_dir_open(path, &d) != ORK_OK) return -1;
    int rc = 0;
    for (const char *n; (n = ork_dir_next(d));) {
        size_t l = strlen(path) + strlen(n) + 2;
        char *c = (char *)malloc(l);
        if (!c) { rc = -1; break; }
        snprintf(c, l, "%s/%s", path, n);
        rc |= ork_tw_rm_rf(c);
        free(c);
    }
    ork_dir_close(d);
    return rc | (ork_path_rmdir(path) == ORK_OK ? 0 : -1);
}

static inline int ork_tw_cp(const char *from, const char *to, int recursive) {
    ork_file_info fi, ti;
    if (ork_path_info(from, &fi) != ORK_OK) return -1;
    char dst[PATH_MAX];
    const char *base = from;
    for (const char *c = from; *c; c++)
        if (ork_path_is_sep(*c) && c[1]) base = c + 1;
    if (ork_path_info(to, &ti) == ORK_OK && ti.kind == ORK_KIND_DIR) { /* into the folder */
        size_t bl = strlen(base);
        while (bl && ork_path_is_sep(base[bl - 1])) bl--;
        snprintf(dst, sizeof dst, "%s/%.*s", to, (int)bl, base);
    } else {
        snprintf(dst, sizeof dst, "%s", to);
    }
    if (fi.kind == ORK_KIND_DIR) {
        if (!recursive) return -1;
        if (ork_mkdir_p(dst) != ORK_OK) return -1;
        ork_dir *d;
        if (ork_dir_open(from, &d) != ORK_OK) return -1;
        int rc = 0;
        for (const char *n; (n = ork_dir_next(d));) {
            char a[PATH_MAX];
            snprintf(a, sizeof a, "%s/%s", from, n);
            rc |= ork_tw_cp(a, dst, 1);
        }
        ork_dir_close(d);
        return rc;
    }
    FILE *in = ork_fopen(from, "rb"), *out = in ? ork_fopen(dst, "wb") : NULL;
    int rc = in && out ? 0 : -1;
    char buf[1 << 15];
    for (size_t n; rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0;)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

/* symlink(target, path): a copy of target (a file, or a folder and all it
 * holds) at path. Windows makes symbolic links only with a privilege (or
 * developer mode) that a user's account and Wine's prefix may lack; the tests
 * link read-only fixtures into a scratch layout (a model folder, a Hugging
 * Face cache), for which a copy reads the same. A relative target is taken
 * from path's folder, as a link's is. Fails (EEXIST) when path exists. */
static inline int symlink(const char *target, const char *path) {
    char from[PATH_MAX];
    int abs = ork_path_is_sep(target[0]) || (target[0] && target[1] == ':');
    size_t dl = 0;
    for (size_t i = 0; path[i]; i++)
        if (ork_path_is_sep(path[i])) dl = i + 1;
    if (abs || dl == 0) snprintf(from, sizeof from, "%s", target);
    else snprintf(from, sizeof from, "%.*s%s", (int)dl, path, target);
    if (ork_path_exists(path)) return errno = EEXIST, -1;
    if (!ork_path_exists(from)) return errno = ENOENT, -1;
    return ork_tw_cp(from, path, 1) == 0 ? 0 : (errno = errno ? errno : EIO, -1);
}

/* The next word of a command line: bare, or in single quotes; NULL at the end. */
static inline const char *ork_tw_word(const char **p, char *w, size_t n) {
    const char *c = *p;
    while (*c == ' ') c++;
    if (!*c) return NULL;
    size_t k = 0;
    while (*c && *c != ' ') {
        if (*c == '\'') {
            for (c++; *c && *c != '\''; c++)
                if (k + 1 < n) w[k++] = *c;
            if (*c) c++;
        } else {
            if (k + 1 < n) w[k++] = *c;
            c++;
        }
    }
    w[k] = '\0';
    *p = c;
    return w;
}

static inline int ork_tw_system(const char *cmd) {
    if (!cmd) return system(NULL);
    /* every part must be one of the three; else the C runtime's system */
    if (strncmp(cmd, "rm -rf ", 7) != 0 && strncmp(cmd, "mkdir -p ", 9) != 0 && strncmp(cmd, "cp ", 3) != 0)
        return system(cmd);
    if (strpbrk(cmd, "|;<>`$*?"))
        return system(cmd);
    const char *p = cmd;
    char w[PATH_MAX], args[4][PATH_MAX];
    while (ork_tw_word(&p, w, sizeof w)) {
        char op[16];
        snprintf(op, sizeof op, "%s", w);
        int flag = 0, na = 0;
        const char *q;
        while ((q = ork_tw_word(&p, w, sizeof w)) && strcmp(w, "&&") != 0) {
            if (w[0] == '-' && na == 0 && !flag) flag = 1;
            else if (na < 4) snprintf(args[na++], PATH_MAX, "%s", w);
        }
        int rc = -1;
        if (!strcmp(op, "rm") && na >= 1) {
            rc = 0;
            for (int i = 0; i < na; i++) rc |= ork_tw_rm_rf(args[i]);
        } else if (!strcmp(op, "mkdir") && na >= 1) {
            rc = 0;
            for (int i = 0; i < na; i++) rc |= ork_mkdir_p(args[i]) == ORK_OK ? 0 : -1;
        } else if (!strcmp(op, "cp") && na == 2) {
            rc = ork_tw_cp(args[0], args[1], flag);
        }
        if (rc != 0) return 1;
        if (!q) break;
    }
    return 0;
}
#define system(cmd) ork_tw_system(cmd)

/* system() gives the command's exit code on Windows */
#ifndef WIFEXITED
#define WIFEXITED(s) ((s) != -1)
#define WEXITSTATUS(s) (s)
#define WIFSIGNALED(s) 0
#define WTERMSIG(s) 0
#endif

#endif /* _WIN32 */
#endif
