/* tests/common/ork_test_proc.h — running a program (orakul) from a test the
 * same way on Linux and Windows, without a shell: the platform layer's
 * ork_proc_spawn with stdout / stderr into files, an environment changed for
 * the child only (set in this process around the spawn, then put back: the
 * child inherits it), a working directory (likewise), and the output read
 * back as text with Windows' "\r\n" made "\n" (orakul.exe's streams are text
 * mode there), so that the tests' assertions are the same on both systems.
 * Include after ork_test.h. */
#ifndef ORK_TEST_PROC_H
#define ORK_TEST_PROC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <direct.h>
#define ork_tp_chdir _chdir
#define ork_tp_getcwd _getcwd
#else
#include <unistd.h>
#define ork_tp_chdir chdir
#define ork_tp_getcwd getcwd
#endif

#include "platform/platform.h"

/* The file at path as text (NUL-terminated, "\r\n" and lone "\r" of the
 * Windows text mode dropped to "\n"), NULL when it cannot be read. */
static inline char *ork_test_read_text(const char *path) {
    char *t = ork_test_read_all(path, NULL);
    if (!t) return NULL;
    char *w = t;
    for (const char *r = t; *r; r++)
        if (*r != '\r') *w++ = *r;
        else if (r[1] != '\n') *w++ = '\n';
    *w = '\0';
    return t;
}

/* Run argv (argv[0] a path, NULL-terminated) to its end with env applied for
 * it: each entry "NAME=value" sets NAME, a bare "NAME" unsets it (env NULL or
 * NULL-terminated, at most 16); in the directory cwd (NULL: this one); its
 * stdout / stderr into out_path / err_path (NULL: this process's own).
 * It may run ms milliseconds (ORK_PROC_FOREVER: without limit); then it is
 * killed and -1 returned. Returns its exit code (128 + signal on POSIX), -1
 * when it could not start (the reason printed) or ran too long. This
 * process's environment and directory are the same afterwards. */
static inline int ork_test_spawn_for(const char *const *argv, const char *const *env, const char *cwd,
                                     const char *out_path, const char *err_path, uint32_t ms) {
    enum { MAXENV = 16 };
    char *name[MAXENV], *old[MAXENV];
    int n = 0, rc = -1;
    for (; env && env[n] && n < MAXENV; n++) {
        const char *eq = strchr(env[n], '=');
        size_t k = eq ? (size_t)(eq - env[n]) : strlen(env[n]);
        name[n] = malloc(k + 1);
        if (!name[n]) { fprintf(stderr, "ork_test_spawn: out of memory\n"); goto restore; }
        memcpy(name[n], env[n], k);
        name[n][k] = '\0';
        const char *was = ork_env_get(name[n]);
        old[n] = was ? strdup(was) : NULL;
        if (ork_env_set(name[n], eq ? eq + 1 : NULL) != ORK_OK) {
            fprintf(stderr, "ork_test_spawn: cannot set %s\n", env[n]);
            n++;
            goto restore;
        }
    }
    char here[4096];
    if (cwd && (!ork_tp_getcwd(here, sizeof here) || ork_tp_chdir(cwd) != 0)) {
        fprintf(stderr, "ork_test_spawn: cannot change to %s\n", cwd);
        goto restore;
    }
    ork_proc *p = NULL;
    ork_status st = ork_proc_spawn(argv, out_path, err_path, &p);
    if (cwd && ork_tp_chdir(here) != 0) fprintf(stderr, "ork_test_spawn: cannot return to %s\n", here);
    if (st != ORK_OK) {
        fprintf(stderr, "ork_test_spawn: %s did not start\n", argv[0]);
        goto restore;
    }
    if (!ork_proc_wait(p, ms, &rc)) {
        fprintf(stderr, "ork_test_spawn: %s still ran after %u ms: killed\n", argv[0], (unsigned)ms);
        ork_proc_kill(p);
        rc = -1;
    }
    ork_proc_free(p);
restore:
    while (n-- > 0) {
        (void)ork_env_set(name[n], old[n]);
        free(old[n]);
        free(name[n]);
    }
    return rc;
}

/* ork_test_spawn_for without a time limit. */
static inline int ork_test_spawn(const char *const *argv, const char *const *env, const char *cwd,
                                 const char *out_path, const char *err_path) {
    return ork_test_spawn_for(argv, env, cwd, out_path, err_path, ORK_PROC_FOREVER);
}

#endif
