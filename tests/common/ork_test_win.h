/* ork_test_win.h — the POSIX calls the tests use, for the Windows build of the
 * tests only (tests/CMakeLists.txt force-includes it there, before anything
 * else; Linux never sees it). The core and the plugins reach the OS through
 * core/platform; the tests are older than that layer and call a few POSIX
 * functions directly, which this header gives them over the platform layer or
 * the C runtime: mkdir(path, mode), setenv / unsetenv, mkdtemp, realpath,
 * lstat, getline, open_memstream (a temporary file whose bytes fclose hands back),
 * symlink (ENOSYS: Windows needs a privilege for it), and the <sys/wait.h>
 * macros for system()'s result (the exit code itself on Windows). A test that
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

static inline int symlink(const char *target, const char *path) {
    (void)target, (void)path;
    errno = ENOSYS;
    return -1;
}

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
} ork_tw_mem;
static ork_tw_mem ork_tw_mems[16];

static inline FILE *open_memstream(char **buf, size_t *len) {
    for (int i = 0; i < 16; i++)
        if (!ork_tw_mems[i].f) {
            FILE *f = ork_tmpfile();
            if (!f) return NULL;
            ork_tw_mems[i].f = f, ork_tw_mems[i].buf = buf, ork_tw_mems[i].len = len;
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

/* system() gives the command's exit code on Windows */
#ifndef WIFEXITED
#define WIFEXITED(s) ((s) != -1)
#define WEXITSTATUS(s) (s)
#define WIFSIGNALED(s) 0
#define WTERMSIG(s) 0
#endif

#endif /* _WIN32 */
#endif
