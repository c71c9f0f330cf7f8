/* train/metrics.c — see metrics.h. Lines are written with fprintf (numbers
 * as %.9g, non-finite as null) and read back with jansson. */
#include "train/metrics.h"

#include "io/png_writer.h"
#include "platform/platform.h"
#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_open */

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ork_metrics {
    FILE *f;
    char path[4096];
};

void ork_ema_init(ork_ema *e, double beta) {
    e->beta = beta;
    e->acc = 0;
    e->pw = 1;
    e->n = 0;
}

double ork_ema_add(ork_ema *e, double x) {
    if (isfinite(x)) {
        e->acc = e->beta * e->acc + (1.0 - e->beta) * x;
        e->pw *= e->beta;
        e->n++;
    }
    return ork_ema_value(e);
}

double ork_ema_value(const ork_ema *e) { return e->n ? e->acc / (1.0 - e->pw) : NAN; }

/* ---- reading ---------------------------------------------------------------- */

/* A number or null (NAN); 0 when the member has another type. */
static int num_or_null(json_t *o, const char *key, int required, double *out) {
    json_t *v = json_object_get(o, key);
    *out = NAN;
    if (!v) return !required;
    if (json_is_null(v)) return 1;
    if (!json_is_number(v)) return 0;
    *out = json_number_value(v);
    return 1;
}

/* Parse one line into r; NULL on success, else why. */
static const char *parse_line(const char *line, ork_metrics_row *r, char *why, size_t n) {
    json_error_t e;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &e);
    if (!o) {
        snprintf(why, n, "not JSON (%s at column %d)", e.text, e.column);
        return why;
    }
    const char *bad = NULL;
    json_t *st = json_object_get(o, "step");
    if (!json_is_object(o)) bad = "not a JSON object";
    else if (!json_is_integer(st) || json_integer_value(st) < 0) bad = "'step' must be a non-negative integer";
    else if (!num_or_null(o, "loss", 1, &r->loss)) bad = "'loss' must be a number or null";
    else if (!num_or_null(o, "lr", 0, &r->lr)) bad = "'lr' must be a number or null";
    else if (!num_or_null(o, "grad_norm", 0, &r->grad_norm)) bad = "'grad_norm' must be a number or null";
    else if (!num_or_null(o, "s_per_it", 0, &r->s_per_it)) bad = "'s_per_it' must be a number or null";
    else if (!num_or_null(o, "vram_gib", 0, &r->vram_gib)) bad = "'vram_gib' must be a number or null";
    else if (!num_or_null(o, "loss_preservation", 0, &r->loss_preservation))
        bad = "'loss_preservation' must be a number or null";
    else {
        json_t *sk = json_object_get(o, "skipped");
        if (sk && !json_is_boolean(sk)) bad = "'skipped' must be true or false";
        r->skipped = json_is_true(sk);
        r->has_preservation = json_object_get(o, "loss_preservation") != NULL;
        r->step = (int64_t)json_integer_value(st);
    }
    json_decref(o);
    if (bad) snprintf(why, n, "%s", bad);
    return bad ? why : NULL;
}

/* The next line of f into *buf (grown as needed), with its newline: its
 * length, 0 at the end of the file, -1 out of memory (getline is POSIX, not C11). */
static ptrdiff_t read_line(FILE *f, char **buf, size_t *cap) {
    size_t len = 0;
    for (;;) {
        if (*cap - len < 2) {
            size_t nc = *cap ? 2 * *cap : 256;
            char *nb = realloc(*buf, nc);
            if (!nb) return -1;
            *buf = nb;
            *cap = nc;
        }
        size_t room = *cap - len;
        if (!fgets(*buf + len, room > (size_t)INT32_MAX ? INT32_MAX : (int)room, f)) break;
        len += strlen(*buf + len);
        if (len > 0 && (*buf)[len - 1] == '\n') break;
    }
    return (ptrdiff_t)len;
}

/* Calls fn for every line (without its newline) with its 1-based number. */
typedef int (*line_fn)(void *ctx, char *line, int lineno);
static ork_status each_line(const char *path, line_fn fn, void *ctx) {
    int fd; /* a regular file of at most 1 GiB: a FIFO or a device there is refused before reading */
    ORK_TRY(ork_rfile_open(path, "metrics log", ORK_LOG_MAX_BYTES, ORK_RFILE_MISSING_OK, &fd, NULL));
    if (fd < 0) return ORK_OK; /* none yet */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        ork_fd_close(fd);
        return ORK_FAIL(ORK_E_IO, "cannot read %s: %s", path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ptrdiff_t len = 0;
    int lineno = 0, stop = 0;
    while (!stop && (len = read_line(f, &line, &cap)) > 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        stop = fn(ctx, line, lineno);
    }
    int err = ferror(f);
    free(line);
    fclose(f);
    if (len < 0) return ORK_FAIL(ORK_E_NOMEM, "%s: out of host memory", path);
    if (err) return ORK_FAIL(ORK_E_IO, "cannot read %s", path);
    return stop < 0 ? ORK_E_FORMAT : ORK_OK;
}

typedef struct read_ctx {
    const char *path;
    int strict;
    ork_metrics_row *rows;
    size_t n, cap;
    int nomem;
} read_ctx;

static int read_one(void *ctx, char *line, int lineno) {
    read_ctx *c = ctx;
    if (!line[strspn(line, " \t")]) return 0; /* blank */
    ork_metrics_row r;
    char why[256];
    if (parse_line(line, &r, why, sizeof why)) {
        if (c->strict) {
            ORK_FAIL(ORK_E_FORMAT, "%s:%d: %s", c->path, lineno, why);
            return -1;
        }
        ORK_WARN("%s:%d: %s (line skipped)", c->path, lineno, why);
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        ork_metrics_row *g = realloc(c->rows, cap * sizeof *g);
        if (!g) { c->nomem = 1; return 1; }
        c->rows = g;
        c->cap = cap;
    }
    c->rows[c->n++] = r;
    return 0;
}

ork_status ork_metrics_read(const char *path, int strict, ork_metrics_row **rows, size_t *n) {
    read_ctx c = {.path = path, .strict = strict};
    *rows = NULL;
    *n = 0;
    if (!ork_path_exists(path)) return ORK_FAIL(ORK_E_IO, "cannot read %s: %s", path, strerror(errno));
    ork_status s = each_line(path, read_one, &c);
    if (s == ORK_OK && c.nomem) s = ORK_FAIL(ORK_E_NOMEM, "%s: out of host memory", path);
    if (s != ORK_OK) { free(c.rows); return s; }
    *rows = c.rows;
    *n = c.n;
    return ORK_OK;
}

/* ---- writing ------------------------------------------------------------------- */

typedef struct keep_ctx {
    const char *path;
    FILE *out;
    int64_t start;
    int dropped, bad;
} keep_ctx;

static int keep_one(void *ctx, char *line, int lineno) {
    keep_ctx *c = ctx;
    if (!line[strspn(line, " \t")]) return 0;
    ork_metrics_row r;
    char why[256];
    if (parse_line(line, &r, why, sizeof why)) {
        ORK_WARN("%s:%d: %s (line dropped)", c->path, lineno, why);
        c->bad++;
        return 0;
    }
    if (r.step > c->start) { c->dropped++; return 0; }
    fprintf(c->out, "%s\n", line);
    return 0;
}

ork_status ork_metrics_open(const char *path, int64_t start, ork_metrics **out) {
    *out = NULL;
    ork_metrics *m = calloc(1, sizeof *m);
    if (!m) return ORK_E_NOMEM;
    if ((size_t)snprintf(m->path, sizeof m->path, "%s", path) >= sizeof m->path) {
        free(m);
        return ORK_FAIL(ORK_E_IO, "%s: path too long", path);
    }
    char tmp[4200], dir[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, ork_pid());
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    ork_tmp_sweep(dir, slash ? slash + 1 : path); /* a killed run's half-rewritten file */
    if (start > 0 && ork_path_exists(path)) { /* keep the steps the saved state has seen */
        keep_ctx c = {.path = path, .start = start};
        c.out = ork_fopen(tmp, "wb");
        if (!c.out) { free(m); return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", tmp, strerror(errno)); }
        ork_status s = each_line(path, keep_one, &c);
        int bad = ferror(c.out);
        if (fclose(c.out) != 0 || bad) s = s != ORK_OK ? s : ORK_FAIL(ORK_E_IO, "cannot write %s", tmp);
        if (s == ORK_OK && ork_path_replace(tmp, path) != ORK_OK) s = ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, strerror(errno));
        if (s != ORK_OK) { ork_path_remove(tmp); free(m); return s; }
        if (c.dropped) ORK_INFO("%s: dropped %d lines past the resumed step %lld", path, c.dropped, (long long)start);
    }
    m->f = ork_fopen(path, start > 0 ? "ab" : "wb");
    if (!m->f) {
        ork_status s = ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, strerror(errno));
        free(m);
        return s;
    }
    *out = m;
    return ORK_OK;
}

static void put_num(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.9g", key, v);
    else fprintf(f, ", \"%s\": null", key);
}

ork_status ork_metrics_append(ork_metrics *m, const ork_metrics_row *r) {
    fprintf(m->f, "{\"step\": %lld", (long long)r->step);
    put_num(m->f, "loss", r->loss);
    put_num(m->f, "lr", r->lr);
    put_num(m->f, "grad_norm", r->grad_norm);
    put_num(m->f, "s_per_it", r->s_per_it);
    put_num(m->f, "vram_gib", r->vram_gib);
    if (r->has_preservation) put_num(m->f, "loss_preservation", r->loss_preservation);
    if (r->skipped) fprintf(m->f, ", \"skipped\": true");
    fputs("}\n", m->f);
    if (fflush(m->f) != 0 || ferror(m->f)) return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", m->path, strerror(errno));
    return ORK_OK;
}

void ork_metrics_close(ork_metrics *m) {
    if (!m) return;
    if (m->f) fclose(m->f);
    free(m);
}

const char *ork_metrics_path(const ork_metrics *m) { return m->path; }
