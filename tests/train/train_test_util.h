/* train_test_util.h — what the end-to-end training tests (tests/train) share:
 * a temp directory with a copy of the committed photos, the test config
 * written from the template tests/train/configs/tiny.yaml, running the built
 * `orakul` binary (ORK_ORAKUL_EXE) with its stdout/stderr in files and a
 * timeout, the `step N/M  loss X` lines of its log, and directory/file helpers.
 * Header-only (static functions); every test binary includes it once.
 * Owns nothing beyond the temp files it creates (removed by tt_rm_rf). */
#ifndef ORK_TRAIN_TEST_UTIL_H
#define ORK_TRAIN_TEST_UTIL_H

#include "ork_test.h"

#include "platform/platform.h" /* ork_proc: orakul runs as child processes */

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define TT_STEPS_MAX 1024

/* snprintf for paths and keys (truncation is not expected at these sizes). */
static inline int tt_fmt(char *buf, size_t n, const char *fmt, ...) ORK_PRINTF(3, 4);
static inline int tt_fmt(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}

/* The template's @KEY@ values. NULL fields take the defaults of tt_cfg_default. */
typedef struct tt_cfg {
    const char *out;        /* training_folder (absolute) */
    const char *data;       /* datasets[0].folder_path (absolute) */
    int steps, save_every, keep;
    double alpha;
    const char *dtype;      /* save.dtype */
    const char *optimizer;  /* train.optimizer */
    const char *preset;     /* model.name_or_path */
    const char *wdt;        /* network.weight_dtype: fp32 masters, or bf16 (stochastic rounding) */
} tt_cfg;

static inline tt_cfg tt_cfg_default(const char *out, const char *data) {
    tt_cfg c = {.out = out, .data = data, .steps = 40, .save_every = 20, .keep = 2, .alpha = 16,
                .dtype = "float16", .optimizer = "adamw", .preset = "preset:custom", .wdt = "fp32"};
    return c;
}

static inline double tt_now(void) { return 1e-9 * (double)ork_time_ns(); }

/* Whole file into a NUL-terminated malloc'd buffer (*len without the NUL), or NULL. */
static inline char *tt_read_all(const char *path, size_t *len) { return ork_test_read_all(path, len); }

static inline int tt_write_all(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static inline int tt_exists(const char *path) { return access(path, F_OK) == 0; }

/* Byte-equal files (both readable, same length, same bytes). */
static inline int tt_same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tt_read_all(a, &na), *y = tt_read_all(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* rm -r of a directory we made (no symlink following: lstat). */
static inline void tt_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[2048];
            tt_fmt(p, sizeof p, "%s/%s", path, e->d_name);
            tt_rm_rf(p);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* A fresh temp directory ($TMPDIR or /tmp) with data/ holding a copy of the
 * committed photos and captions (the trainer writes its latent cache next to
 * the images, so the source tree stays untouched). 0 on success. */
static inline int tt_setup(const char *tag, char *root, size_t n) {
    const char *tmp = getenv("TMPDIR");
    tt_fmt(root, n, "%s/ork_%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(root)) return -1;
    char data[1024];
    tt_fmt(data, sizeof data, "%s/data", root);
    if (mkdir(data, 0755) != 0) return -1;
    static const char *const files[] = {"astronaut.png", "astronaut.txt", "chelsea.png", "chelsea.txt",
                                        "coffee.png", "coffee.txt", NULL};
    for (int i = 0; files[i]; i++) {
        char src[1024], dst[1200];
        tt_fmt(src, sizeof src, "%s/assets/photos/%s", ORK_SOURCE_DIR, files[i]);
        tt_fmt(dst, sizeof dst, "%s/%s", data, files[i]);
        size_t len;
        char *b = tt_read_all(src, &len);
        if (!b) return -1;
        FILE *f = fopen(dst, "wb");
        int ok = f && fwrite(b, 1, len, f) == len;
        if (f && fclose(f) != 0) ok = 0;
        free(b);
        if (!ok) return -1;
    }
    return 0;
}

/* Template with every @KEY@ replaced, written to path. 0 on success. */
static inline int tt_write_config(const char *path, const tt_cfg *c) {
    char tpl_path[1024];
    tt_fmt(tpl_path, sizeof tpl_path, "%s/tests/train/configs/tiny.yaml", ORK_SOURCE_DIR);
    char *tpl = tt_read_all(tpl_path, NULL);
    if (!tpl) return -1;
    char steps[32], every[32], keep[32], alpha[32];
    tt_fmt(steps, sizeof steps, "%d", c->steps);
    tt_fmt(every, sizeof every, "%d", c->save_every);
    tt_fmt(keep, sizeof keep, "%d", c->keep);
    tt_fmt(alpha, sizeof alpha, "%g", c->alpha);
    const char *keys[][2] = {{"@OUT@", c->out}, {"@DATA@", c->data}, {"@STEPS@", steps}, {"@SAVE_EVERY@", every},
                             {"@KEEP@", keep}, {"@ALPHA@", alpha}, {"@DTYPE@", c->dtype},
                             {"@OPTIMIZER@", c->optimizer}, {"@PRESET@", c->preset}, {"@WDT@", c->wdt}};
    size_t cap = strlen(tpl) + 8192, o = 0;
    char *out = malloc(cap);
    if (!out) { free(tpl); return -1; }
    for (const char *p = tpl; *p;) {
        int hit = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t kl = strlen(keys[k][0]);
            if (!strncmp(p, keys[k][0], kl)) {
                o += (size_t)tt_fmt(out + o, cap - o, "%s", keys[k][1]);
                p += kl;
                hit = 1;
                break;
            }
        }
        if (!hit && o + 1 < cap) out[o++] = *p++;
        else if (!hit) p++;
    }
    out[o < cap ? o : cap - 1] = 0;
    free(tpl);
    int r = tt_write_all(path, out);
    free(out);
    return r;
}

/* The 1-based line of the file at cfg that holds `needle`, 0 when none (tests
 * find a key's line in the config they wrote, whatever the template's layout). */
static inline int tt_line_of(const char *cfg, const char *needle) {
    char *t = tt_read_all(cfg, NULL), *at = t ? strstr(t, needle) : NULL;
    int line = 0;
    if (at) {
        line = 1;
        for (const char *q = t; q < at; q++) line += *q == '\n';
    }
    free(t);
    return line;
}

/* text holds "<cfg>:<want_line>:<col>:" with a column > 0: an error located in cfg. */
static inline int tt_located(const char *text, const char *cfg, int want_line) {
    char pat[1400];
    tt_fmt(pat, sizeof pat, "%s:%d:", cfg, want_line);
    const char *at = text ? strstr(text, pat) : NULL;
    int col = 0;
    return at && sscanf(at + strlen(pat), "%d:", &col) == 1 && col > 0;
}

/* Start `orakul <args...>` (args NULL-terminated, at most 14) with
 * stdout/stderr into files (ork_proc_spawn). Returns the process or NULL. */
static inline ork_proc *tt_spawn(const char *const *args, const char *out_log, const char *err_log) {
    const char *argv[16];
    int n = 0;
    argv[n++] = ORK_ORAKUL_EXE;
    for (; args[n - 1] && n < 15; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    ork_proc *p;
    return ork_proc_spawn(argv, out_log, err_log, &p) == ORK_OK ? p : NULL;
}

/* Start `orakul run cfg` with stdout/stderr into files. Returns the process or NULL. */
static inline ork_proc *tt_spawn_run(const char *cfg, const char *out_log, const char *err_log) {
    const char *args[] = {"run", cfg, NULL};
    return tt_spawn(args, out_log, err_log);
}

/* Wait for p up to timeout_s (then kill it), and free it. Exit code (128 +
 * signal on POSIX), or -1 on the timeout. */
static inline int tt_wait(ork_proc *p, double timeout_s) {
    int code = -1;
    if (!ork_proc_wait(p, (uint32_t)(timeout_s * 1000), &code)) {
        ork_proc_kill(p);
        ork_proc_wait(p, ORK_PROC_FOREVER, &code);
        printf("  (orakul timed out after %.0f s)\n", timeout_s);
        code = -1;
    }
    ork_proc_free(p);
    return code;
}

/* `orakul <args...>` (NULL-terminated) to completion with stdout/stderr into
 * <log>.out / <log>.err; the exit code (see tt_wait), -1 when it did not start. */
static inline int tt_orakul(const char *const *args, const char *log, double timeout_s) {
    char o[1200], e[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    tt_fmt(e, sizeof e, "%s.err", log);
    ork_proc *p = tt_spawn(args, o, e);
    return p ? tt_wait(p, timeout_s) : -1;
}

/* `orakul run cfg` to completion; logs at <log>.out / <log>.err. A nonzero
 * exit prints the log unless quiet (the tests that expect one). */
static inline int tt_run_q(const char *cfg, const char *log, double timeout_s, int quiet) {
    char o[1200], e[1200];
    tt_fmt(o, sizeof o, "%s.out", log);
    tt_fmt(e, sizeof e, "%s.err", log);
    ork_proc *p = tt_spawn_run(cfg, o, e);
    if (!p) return -1;
    int rc = tt_wait(p, timeout_s);
    if (rc != 0 && !quiet) { /* show what it said */
        char *t = tt_read_all(e, NULL);
        printf("  orakul run %s: exit %d\n%s\n", cfg, rc, t ? t : "");
        free(t);
    }
    return rc;
}
static inline int tt_run(const char *cfg, const char *log, double timeout_s) { return tt_run_q(cfg, log, timeout_s, 0); }

/* The `step N/M  loss X` lines of a log: loss[N] (value and its printed text).
 * Returns how many lines were parsed; steps[i] = N of the i-th line. */
typedef struct tt_losses {
    int n;
    int step[TT_STEPS_MAX];
    double loss[TT_STEPS_MAX];
    char text[TT_STEPS_MAX][24];
} tt_losses;

static inline int tt_parse_losses(const char *log_path, tt_losses *L) {
    memset(L, 0, sizeof *L);
    char *t = tt_read_all(log_path, NULL);
    if (!t) return 0;
    for (char *line = strtok(t, "\n"); line && L->n < TT_STEPS_MAX; line = strtok(NULL, "\n")) {
        long long s, m;
        char lt[24];
        if (sscanf(line, "step %lld/%lld loss %23s", &s, &m, lt) != 3) continue;
        L->step[L->n] = (int)s;
        tt_fmt(L->text[L->n], sizeof L->text[L->n], "%s", lt);
        L->loss[L->n] = strtod(lt, NULL);
        L->n++;
    }
    free(t);
    return L->n;
}

/* The n loss lines of run lb's log (<lb>.out) equal, as printed, those of run
 * la's from its from-th line on (a resumed or streamed run against the
 * reference); the first difference is printed. */
static inline int tt_same_losses(const char *la, int from, const char *lb, int n) {
    static tt_losses A, B;
    char p[1200];
    tt_fmt(p, sizeof p, "%s.out", la);
    tt_parse_losses(p, &A);
    tt_fmt(p, sizeof p, "%s.out", lb);
    if (tt_parse_losses(p, &B) != n) return 0;
    for (int i = 0; i < n; i++)
        if (from + i >= A.n || A.step[from + i] != B.step[i] || strcmp(A.text[from + i], B.text[i])) {
            printf("  step %d: %s vs %s\n", B.step[i], from + i < A.n ? A.text[from + i] : "-", B.text[i]);
            return 0;
        }
    return 1;
}

/* Does the file contain the substring? */
static inline int tt_file_has(const char *path, const char *needle) {
    char *t = tt_read_all(path, NULL);
    int r = t && strstr(t, needle) != NULL;
    free(t);
    return r;
}

/* Byte-equal quickstart_<leaf>.safetensors (leaf "000000040", "state") in two runs'
 * output folders (training_folder oa and ob, job quickstart). */
static inline int tt_same_output(const char *oa, const char *ob, const char *leaf) {
    char p[1400], q[1400];
    tt_fmt(p, sizeof p, "%s/quickstart/quickstart_%s.safetensors", oa, leaf);
    tt_fmt(q, sizeof q, "%s/quickstart/quickstart_%s.safetensors", ob, leaf);
    return tt_same_bytes(p, q);
}

/* Two runs of one model in one temp root (tag, tt_setup): the photos in data, run a's
 * output folder <root>/<a> and config <root>/<a>.yaml, run b's likewise; c the default
 * config with out = a's, `steps` steps, saved in F32 every `every`, `keep` kept. */
typedef struct tt_ab {
    char root[1024], data[1100], oa[1100], ob[1100], ca[1100], cb[1100];
    tt_cfg c;
} tt_ab;

static inline int tt_ab_setup(tt_ab *q, const char *tag, const char *a, const char *b, int steps, int every,
                              int keep) {
    if (tt_setup(tag, q->root, sizeof q->root) != 0) return -1;
    tt_fmt(q->data, sizeof q->data, "%s/data", q->root);
    tt_fmt(q->oa, sizeof q->oa, "%s/%s", q->root, a);
    tt_fmt(q->ob, sizeof q->ob, "%s/%s", q->root, b);
    tt_fmt(q->ca, sizeof q->ca, "%s/%s.yaml", q->root, a);
    tt_fmt(q->cb, sizeof q->cb, "%s/%s.yaml", q->root, b);
    q->c = tt_cfg_default(q->oa, q->data);
    q->c.steps = steps;
    q->c.save_every = every;
    q->c.keep = keep;
    q->c.dtype = "float32";
    return 0;
}

/* The lines of text holding needle (e.g. "error"), counted; first gets the first of them
 * ("" when none). */
static inline int tt_lines_with(const char *text, const char *needle, char *first, size_t n) {
    int cnt = 0;
    first[0] = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char buf[2048];
        tt_fmt(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), p);
        if (strstr(buf, needle) && !cnt++) tt_fmt(first, n, "%s", buf);
        p = nl ? nl + 1 : NULL;
    }
    return cnt;
}

/* Step numbers of <dir>/<name>_<9 digits>.safetensors, ascending; returns the count. */
static inline int tt_step_files(const char *dir, const char *name, long long *steps, int max) {
    DIR *d = opendir(dir);
    int n = 0;
    size_t nl = strlen(name);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *s = e->d_name;
        if (strncmp(s, name, nl) || s[nl] != '_') continue;
        int k = 0;
        while (s[nl + 1 + k] >= '0' && s[nl + 1 + k] <= '9') k++;
        if (k != 9 || strcmp(s + nl + 1 + k, ".safetensors")) continue;
        if (n < max) steps[n++] = strtoll(s + nl + 1, NULL, 10);
    }
    if (d) closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
            long long t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t;
        }
    return n;
}

#endif
