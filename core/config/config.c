/* config/config.c — the job config reader (see config.h): one walk over the
 * libyaml document tree, driven by the key tables of schema.c (core keys) or
 * a component's ork_param table (pass 2), that checks and stores in one go.
 * Owns: the ork_config object, its copy of the file text, the libyaml
 * document (kept for exact locations and pass 2), and every value it resolves.
 *
 * Why the typed load is this walk and not libcyaml (STYLE.md §4): with
 * libcyaml 1.3.1 the walk would be needed anyway, because its locations are
 * approximate (pitfall 2), it accepts "10abc" (pitfall 4), absent and 0 are the
 * same unless every leaf is a pointer (pitfall 3), it cannot parse a subtree
 * later for component keys (pitfall 8), and it exposes no per-value location
 * for provenance. The walk therefore already holds every value, strictly
 * parsed, with its exact mark; storing it at the table's offset is one line.
 * A libcyaml schema would be a second description of the same keys that can
 * drift from the first and whose only new effect is a second, vaguer error.
 * libyaml (a well-kept library) still does all of the YAML parsing. */
#include "config/config.h"
#include "config/schema.h"
#include "platform/platform.h"
#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_read */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

typedef struct ork_origin {
    char *path;      /* "train.steps" */
    ork_loc loc;     /* line 0: default */
    const char *how; /* NULL, or what it was derived from */
    uint8_t kind;
    uint32_t count;
    const void *val; /* the stored value (core structs), or NULL when text is set */
    char *text;      /* preformatted (component params: their buffer is not ours) */
    int node;        /* the YAML value node (1-based), 0 when default */
} ork_origin;

struct ork_config {
    char *file;
    char *text;
    size_t len;
    yaml_document_t doc;
    int have_doc;
    ork_job_config job;
    void **mem;
    size_t nmem, capmem;
    ork_origin *org;
    size_t norg, caporg;
};

/* One walk: over the user's document, or over a default's tiny document. */
typedef struct walker {
    ork_config *c;
    yaml_document_t *doc;
    const char *def;       /* non-NULL while parsing a table default: errors are table bugs */
    ork_status def_status; /* ORK_E_INTERNAL (core tables) or ORK_E_ABI (component tables) */
    int own_text;          /* origins keep formatted text (component params) */
} walker;

/* ---- memory owned by the config ------------------------------------------ */
static void *cmem(ork_config *c, size_t n) {
    if (c->nmem == c->capmem) {
        size_t cap = c->capmem ? 2 * c->capmem : 64;
        void **m = realloc(c->mem, cap * sizeof *m);
        if (!m) return NULL;
        c->mem = m, c->capmem = cap;
    }
    void *p = calloc(1, n ? n : 1);
    if (p) c->mem[c->nmem++] = p;
    return p;
}

static char *cstrdup(ork_config *c, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = cmem(c, n);
    return d ? memcpy(d, s, n) : NULL;
}

/* ---- messages ------------------------------------------------------------ */
static ork_loc loc_of(const ork_config *c, const yaml_mark_t *m) {
    ork_loc l = {c->file, m ? (int)m->line + 1 : 0, m ? (int)m->column + 1 : 0};
    return l;
}

static ork_status vfail_at(const ork_loc *at, ork_status s, const char *fmt, va_list ap) {
    char msg[1536];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (at->line > 0) return ORK_FAIL(s, "%s:%d:%d: %s", at->file, at->line, at->col, msg);
    return ORK_FAIL(s, "%s: %s", at->file, msg);
}

ork_status ork_config_fail_at(const ork_loc *at, ork_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ork_status r = vfail_at(at, s, fmt, ap);
    va_end(ap);
    return r;
}

/* An error about the user's input at node n (or a bug in a table default). */
ORK_PRINTF(3, 4)
static ork_status fail(walker *w, const yaml_node_t *n, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->def)
        return ORK_FAIL(w->def_status, "%s: key table: default '%s' is invalid: %s", w->c->file, w->def, msg);
    ork_loc l = loc_of(w->c, n ? &n->start_mark : NULL);
    return ork_config_fail_at(&l, ORK_E_CONFIG, "%s", msg);
}

static void warn_at(const ork_loc *at, const char *fmt, ...) ORK_PRINTF(2, 3);
static void warn_at(const ork_loc *at, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at->line > 0) ORK_WARN("%s:%d:%d: %s", at->file, at->line, at->col, msg);
    else ORK_WARN("%s: %s", at->file, msg);
}

/* ---- small helpers ------------------------------------------------------- */
static yaml_node_t *node(yaml_document_t *d, int i) { return i ? yaml_document_get_node(d, i) : NULL; }
static int node_id(yaml_document_t *d, const yaml_node_t *n) { return n ? (int)(n - d->nodes.start) + 1 : 0; }
static const char *sval(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }
static int plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

static int is_null(const yaml_node_t *n) {
    if (!n || n->type != YAML_SCALAR_NODE || !plain(n)) return 0;
    const char *s = sval(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static const char *what(const yaml_node_t *n) {
    if (n->type == YAML_MAPPING_NODE) return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE) return "a list";
    return "a scalar";
}

static char *join(const char *a, const char *b, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s", a, *a ? "." : "", b);
    return buf;
}

static int parse_bool(const char *s, int32_t *out) {
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes")) return *out = 1, 1;
    if (!strcasecmp(s, "false") || !strcasecmp(s, "no")) return *out = 0, 1;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *e;
    errno = 0;
    *out = strtod(s, &e);
    return e != s && !*e;
}

/* Edit distance, for "did you mean". Keys are short; longer ones are cut. */
static size_t levenshtein(const char *a, const char *b) {
    size_t la = strnlen(a, 63), lb = strnlen(b, 63), row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up, row[j] = best;
        }
    }
    return row[lb];
}

/* The nearest of `n` candidates, or NULL when none is plausibly a typo of s. */
static const char *nearest(const char *s, const char *const *cand, size_t n) {
    const char *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = levenshtein(s, cand[i]);
        if (d < bd) bd = d, best = cand[i];
    }
    size_t len = strlen(s);
    if (best && strlen(best) > len) len = strlen(best);
    size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return bd <= limit ? best : NULL;
}

/* ---- provenance ---------------------------------------------------------- */
static ork_origin *find_origin(const ork_config *c, const char *path) {
    for (size_t i = 0; i < c->norg; i++)
        if (!strcmp(c->org[i].path, path)) return &c->org[i];
    return NULL;
}

static void print_value(FILE *f, uint8_t kind, uint32_t count, const void *v);

static ork_status record(walker *w, const char *path, const ork_ck *k, const yaml_node_t *n, const void *val) {
    ork_config *c = w->c;
    if (c->norg == c->caporg) {
        size_t cap = c->caporg ? 2 * c->caporg : 128;
        ork_origin *o = realloc(c->org, cap * sizeof *o);
        if (!o) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
        c->org = o, c->caporg = cap;
    }
    ork_origin o = {cstrdup(c, path), loc_of(c, n ? &n->start_mark : NULL), NULL, k->kind, k->count, val,
                    NULL, node_id(&c->doc, n)};
    if (!o.path) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    if (w->own_text && val) {
        /* the value as print_value writes it, read back (open_memstream is POSIX only) */
        char *buf = NULL;
        FILE *m = ork_tmpfile();
        if (!m) return ORK_FAIL(ORK_E_IO, "config: no temporary file for a value: %s", strerror(errno));
        print_value(m, k->kind, k->count, val);
        long len = ftell(m);
        if (len >= 0 && fseek(m, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)))
            buf[fread(buf, 1, (size_t)len, m)] = '\0';
        fclose(m);
        o.text = buf ? cstrdup(c, buf) : NULL;
        free(buf);
        if (!o.text) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
        o.val = NULL;
    }
    c->org[c->norg++] = o;
    return ORK_OK;
}

/* ---- values -------------------------------------------------------------- */
static const char *expected(uint8_t kind) {
    switch (kind) {
    case ORK_CK_BOOL: return "true or false";
    case ORK_CK_INT: case ORK_CK_INTS: return "an integer";
    case ORK_CK_FLOAT: return "a number";
    default: return "a string";
    }
}

static ork_status check_range(walker *w, const ork_ck *k, const char *path, const yaml_node_t *n, double v) {
    if (k->min > k->max || (v >= k->min && v <= k->max)) return ORK_OK;
    const char *f = k->kind == ORK_CK_FLOAT ? "%g" : "%.0f";
    char lo[64], hi[64];
    snprintf(lo, sizeof lo, f, k->min);
    snprintf(hi, sizeof hi, f, k->max);
    if (k->max == HUGE_VAL) return fail(w, n, "%s: %s is out of range (must be >= %s)", path, sval(n), lo);
    if (k->min == -HUGE_VAL) return fail(w, n, "%s: %s is out of range (must be <= %s)", path, sval(n), hi);
    return fail(w, n, "%s: %s is out of range (must be between %s and %s)", path, sval(n), lo, hi);
}

static ork_status check_choice(walker *w, const ork_ck *k, const char *path, const yaml_node_t *n) {
    if (!k->choices) return ORK_OK;
    char buf[512], *save = NULL;
    const char *cand[64];
    size_t nc = 0;
    snprintf(buf, sizeof buf, "%s", k->choices);
    for (char *t = strtok_r(buf, "|", &save); t && nc < 64; t = strtok_r(NULL, "|", &save)) {
        if (!strcmp(t, sval(n))) return ORK_OK;
        cand[nc++] = t;
    }
    const char *near = nearest(sval(n), cand, nc);
    char list[600];
    snprintf(list, sizeof list, "%s", k->choices);
    for (char *p = list; *p; p++) if (*p == '|') *p = ',';
    if (near) return fail(w, n, "%s: '%s' is not one of: %s (did you mean '%s'?)", path, sval(n), list, near);
    return fail(w, n, "%s: '%s' is not one of: %s", path, sval(n), list);
}

/* One scalar of kind BOOL/INT/FLOAT/STR into dst. */
static ork_status parse_scalar(walker *w, const ork_ck *k, const char *path, const yaml_node_t *n, void *dst) {
    if (n->type != YAML_SCALAR_NODE)
        return fail(w, n, "%s: expected %s, got %s", path, expected(k->kind), what(n));
    const char *s = sval(n);
    if (k->kind != ORK_CK_STR && !plain(n))
        return fail(w, n, "%s: expected %s, got the quoted string \"%s\"", path, expected(k->kind), s);
    switch (k->kind) {
    case ORK_CK_BOOL:
        if (!parse_bool(s, dst)) return fail(w, n, "%s: expected true or false, got '%s'", path, s);
        return ORK_OK;
    case ORK_CK_INT: case ORK_CK_INTS: {
        char *e;
        errno = 0;
        long long v = strtoll(s, &e, 10);
        if (e == s || *e) return fail(w, n, "%s: expected an integer, got '%s'", path, s);
        if (errno == ERANGE) return fail(w, n, "%s: %s is out of range (not a 64-bit integer)", path, s);
        ORK_TRY(check_range(w, k, path, n, (double)v));
        *(int64_t *)dst = v;
        return ORK_OK;
    }
    case ORK_CK_FLOAT: {
        double v;
        if (!parse_double(s, &v)) return fail(w, n, "%s: expected a number, got '%s'", path, s);
        if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
            return fail(w, n, "%s: %s is out of range (not a finite double)", path, s);
        ORK_TRY(check_range(w, k, path, n, v));
        *(double *)dst = v;
        return ORK_OK;
    }
    default: {
        if (strlen(s) != n->data.scalar.length) /* "a\0b": the C string would end at the NUL */
            return fail(w, n, "%s: a NUL character (\\0) in a string; give the text without it", path);
        ORK_TRY(check_choice(w, k, path, n));
        const char *d = cstrdup(w->c, s);
        if (!d) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
        *(const char **)dst = d;
        return ORK_OK;
    }
    }
}

static size_t scalar_size(uint8_t kind) {
    switch (kind) {
    case ORK_CK_BOOL: return sizeof(int32_t);
    case ORK_CK_INT: case ORK_CK_INTS: return sizeof(int64_t);
    case ORK_CK_FLOAT: return sizeof(double);
    default: return sizeof(const char *);
    }
}

/* A leaf value: a scalar, a list of exactly k->count scalars, or (INTS/STRS)
 * one scalar or a list of any length. */
static ork_status parse_value(walker *w, const ork_ck *k, const char *path, const yaml_node_t *n, void *dst) {
    int var = k->kind == ORK_CK_INTS || k->kind == ORK_CK_STRS;
    if (!var && k->count <= 1) return parse_scalar(w, k, path, n, dst);
    ork_ck item = *k;
    item.kind = k->kind == ORK_CK_STRS ? ORK_CK_STR : k->kind == ORK_CK_INTS ? ORK_CK_INT : k->kind;
    size_t sz = scalar_size(item.kind);
    if (var && n->type == YAML_SCALAR_NODE) {
        void *v = cmem(w->c, sz);
        if (!v) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
        ORK_TRY(parse_scalar(w, &item, path, n, v));
        ((ork_strs *)dst)->n = 1, ((ork_strs *)dst)->v = v;
        return ORK_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE) {
        if (var) return fail(w, n, "%s: expected %s or a list of them, got %s", path, expected(item.kind), what(n));
        return fail(w, n, "%s: expected a list of %u values, got %s", path, k->count, what(n));
    }
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (!var && cnt != k->count)
        return fail(w, n, "%s: expected a list of %u values, got %zu", path, k->count, cnt);
    if (k->kind == ORK_CK_INTS && cnt == 0) return fail(w, n, "%s: the list is empty", path);
    char *v = var ? cmem(w->c, cnt * sz) : dst;
    if (!v) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    for (size_t i = 0; i < cnt; i++) {
        char ipath[544];
        snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
        ORK_TRY(parse_scalar(w, &item, ipath, node(w->doc, n->data.sequence.items.start[i]), v + i * sz));
    }
    if (var) ((ork_strs *)dst)->n = cnt, ((ork_strs *)dst)->v = (const char **)(void *)v;
    return ORK_OK;
}

/* Parse a table default with the same parser (so "[0.9, 0.999]" works). */
static ork_status parse_default(walker *w, const ork_ck *k, const char *path, void *dst) {
    yaml_parser_t p;
    yaml_document_t d;
    if (!yaml_parser_initialize(&p)) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)k->def, strlen(k->def));
    int ok = yaml_parser_load(&p, &d);
    yaml_parser_delete(&p);
    walker dw = *w;
    dw.doc = &d, dw.def = k->def;
    ork_status s;
    if (!ok) return ORK_FAIL(w->def_status, "%s: key table: default '%s' of %s is not YAML", w->c->file, k->def, path);
    yaml_node_t *root = yaml_document_get_root_node(&d);
    s = root ? parse_value(&dw, k, path, root, dst)
             : ORK_FAIL(w->def_status, "%s: key table: default of %s is empty", w->c->file, path);
    yaml_document_delete(&d);
    return s;
}

/* A known-but-unimplemented key is quiet when it restates ai-toolkit's default. */
static int restates_default(walker *w, const ork_ck *k, const yaml_node_t *n) {
    if (is_null(n)) return 1;
    if (!k->def) return 0;
    if (n->type == YAML_SEQUENCE_NODE) return !strcmp(k->def, "[]") && n->data.sequence.items.top == n->data.sequence.items.start;
    if (n->type == YAML_MAPPING_NODE) return !strcmp(k->def, "{}") && n->data.mapping.pairs.top == n->data.mapping.pairs.start;
    int32_t b1, b2;
    double d1, d2;
    if (parse_bool(sval(n), &b1) && parse_bool(k->def, &b2)) return b1 == b2;
    if (parse_double(sval(n), &d1) && parse_double(k->def, &d2)) return d1 == d2;
    return !strcmp(sval(n), k->def);
}

/* The value of `key` in mapping map, or NULL. */
static const yaml_node_t *map_get(walker *w, const yaml_node_t *map, const char *key, size_t len) {
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(w->doc, p->key);
        if (k->type == YAML_SCALAR_NODE && strlen(sval(k)) == len && !strncmp(sval(k), key, len))
            return node(w->doc, p->value);
    }
    return NULL;
}

/* A setting that switches a feature on: given, not null, false, 0 or "". */
static int is_on(const yaml_node_t *n) {
    if (!n || is_null(n)) return 0;
    if (n->type != YAML_SCALAR_NODE) return 1;
    int32_t b;
    double d;
    if (parse_bool(sval(n), &b)) return b;
    if (parse_double(sval(n), &d)) return d != 0;
    return sval(n)[0] != '\0';
}

/* Whether a known key's `when` (schema.h) holds: map is the mapping the key
 * sits in, v its value. */
static int when_holds(walker *w, const ork_ck *k, const yaml_node_t *map, const yaml_node_t *v) {
    const char *c = k->when;
    if (!c) return 1;
    if (c[0] == '.') return is_on(map_get(w, v, c + 1, strlen(c + 1)));
    const char *eq = strchr(c, '=');
    const yaml_node_t *s = map_get(w, map, c, eq ? (size_t)(eq - c) : strlen(c));
    if (!eq) return is_on(s);
    return s && s->type == YAML_SCALAR_NODE && !strcmp(sval(s), eq + 1);
}

/* ---- the walk ------------------------------------------------------------ */
static ork_status walk_map(walker *w, const ork_ck_table *t, const yaml_node_t *map, const yaml_mark_t *at,
                           const char *path, char *base);

/* The section of the core schema that does take `name` (for a misplaced key). */
static int home_of(const ork_ck_table *t, const char *prefix, const char *name, char *out, size_t n) {
    for (const ork_ck *k = t->keys; k->key; k++) {
        if (k->cls != ORK_CK_KNOWN && !strcmp(k->key, name) && *prefix) return snprintf(out, n, "%s", prefix), 1;
        if ((k->kind == ORK_CK_MAP || k->kind == ORK_CK_LIST) && k->sub) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s%s%s%s", prefix, *prefix ? "." : "", k->key,
                     k->kind == ORK_CK_LIST ? "[]" : "");
            if (home_of(k->sub, k->sub->anonymous ? "" : sub, name, out, n)) return 1;
        }
    }
    return 0;
}

static ork_status unknown_key(walker *w, const ork_ck_table *t, const yaml_node_t *key, const char *path) {
    const char *cand[256];
    size_t n = 0;
    for (const ork_ck *k = t->keys; k->key && n < 256; k++) cand[n++] = k->key;
    const char *near = nearest(sval(key), cand, n);
    const char *where = *path ? path : t->anonymous ? "config.process[0]" : NULL;
    char in[600];
    snprintf(in, sizeof in, "%s%s", where ? "in " : "at the top level", where ? where : "");
    if (near) return fail(w, key, "unknown key '%s' %s (did you mean '%s'?)", sval(key), in, near);
    char home[256];
    if (!w->own_text && home_of(&ork_schema_root, "", sval(key), home, sizeof home))
        return fail(w, key, "unknown key '%s' %s (it belongs in %s)", sval(key), in, home);
    return fail(w, key, "unknown key '%s' %s", sval(key), in);
}

static ork_status missing(walker *w, const yaml_mark_t *at, const yaml_node_t *null_value, const char *path) {
    if (null_value) return fail(w, null_value, "%s has no value (it is required)", path);
    ork_loc l = loc_of(w->c, at);
    return ork_config_fail_at(&l, ORK_E_CONFIG, "missing required key '%s'", path);
}

static ork_status walk_list(walker *w, const ork_ck *k, const yaml_node_t *n, const char *path, char *dst) {
    if (n->type != YAML_SEQUENCE_NODE) return fail(w, n, "%s: expected a list, got %s", path, what(n));
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if ((double)cnt < k->min) return fail(w, n, "%s: the list is empty (at least %.0f entry needed)", path, k->min);
    if ((double)cnt > k->max)
        return fail(w, node(w->doc, n->data.sequence.items.start[(size_t)k->max]),
                    "%s: %zu entries, orakul takes at most %.0f", path, cnt, k->max);
    char *arr = cmem(w->c, cnt * k->sub->size);
    if (!arr) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    for (size_t i = 0; i < cnt; i++) {
        char ipath[544];
        snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
        const yaml_node_t *item = node(w->doc, n->data.sequence.items.start[i]);
        ORK_TRY(walk_map(w, k->sub, item, &item->start_mark, k->sub->anonymous ? "" : ipath,
                         arr + i * k->sub->size));
    }
    ((ork_strs *)dst)->n = cnt, ((ork_strs *)dst)->v = (const char **)(void *)arr;
    return ORK_OK;
}

/* One entry of a table, given its value node (NULL: absent) and key node. */
static ork_status walk_key(walker *w, const ork_ck *k, const yaml_node_t *key, const yaml_node_t *v,
                           const yaml_mark_t *at, const char *path, char *base) {
    const yaml_node_t *null_value = is_null(v) && k->kind != ORK_CK_ANY ? v : NULL;
    if (null_value) v = NULL;
    const yaml_mark_t *kat = key ? &key->start_mark : at;
    if (k->cls == ORK_CK_KNOWN) return ORK_OK; /* warned while reading the keys */
    if (k->required && !v && k->kind != ORK_CK_MAP) return missing(w, kat, null_value, path);
    switch (k->kind) {
    case ORK_CK_MAP:
        if (k->required && !v) return missing(w, kat, null_value, path);
        return walk_map(w, k->sub, v, kat, path, base + k->off);
    case ORK_CK_LIST:
        return v ? walk_list(w, k, v, path, base + k->off) : ORK_OK;
    case ORK_CK_ANY:
        return ORK_OK;
    case ORK_CK_PARAMS: {
        if (v && v->type != YAML_MAPPING_NODE) return fail(w, v, "%s: expected a mapping, got %s", path, what(v));
        ORK_TRY(record(w, path, k, v, NULL));
        if (key) w->c->org[w->c->norg - 1].loc = loc_of(w->c, &key->start_mark);
        return ORK_OK;
    }
    default:
        if (v) ORK_TRY(parse_value(w, k, path, v, base + k->off));
        else if (k->def) ORK_TRY(parse_default(w, k, path, base + k->off));
        return record(w, path, k, v, base + k->off);
    }
}

static size_t find_key(const ork_ck_table *t, const char *name) {
    size_t i = 0;
    for (; t->keys[i].key; i++)
        if (!strcmp(t->keys[i].key, name)) return i;
    return (size_t)-1;
}

/* map: NULL when absent (every key takes its default). at: where the map's
 * own key is (for "missing required key"). base: the struct of this table. */
static ork_status walk_map(walker *w, const ork_ck_table *t, const yaml_node_t *map, const yaml_mark_t *at,
                           const char *path, char *base) {
    if (map && map->type != YAML_MAPPING_NODE)
        return fail(w, map, "%s: expected a mapping, got %s", *path ? path : "the top level (job:, config:, meta:)",
                    what(map));
    size_t nk = 0;
    while (t->keys[nk].key) nk++;
    const yaml_node_pair_t **seen = calloc(nk + 1, sizeof *seen);
    if (!seen) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    ork_status s = ORK_OK;
    for (const yaml_node_pair_t *p = map ? map->data.mapping.pairs.start : NULL;
         map && p < map->data.mapping.pairs.top && s == ORK_OK; p++) {
        const yaml_node_t *key = node(w->doc, p->key);
        if (key->type != YAML_SCALAR_NODE) {
            s = fail(w, key, "%s: a key must be a plain name, got %s", *path ? path : "the document", what(key));
            break;
        }
        size_t i = find_key(t, sval(key));
        if (i == (size_t)-1) { s = unknown_key(w, t, key, path); break; }
        if (t->keys[i].cls == ORK_CK_ALIAS) i = find_key(t, t->keys[i].alias);
        if (t->keys[i].cls == ORK_CK_KNOWN && !t->unimplemented) { /* warn in file order */
            const yaml_node_t *v = node(w->doc, p->value);
            char kpath[512];
            ork_loc l = loc_of(w->c, &key->start_mark);
            if (!restates_default(w, &t->keys[i], v) && when_holds(w, &t->keys[i], map, v))
                warn_at(&l, "ignored: %s (not implemented yet)", join(path, sval(key), kpath, sizeof kpath));
        }
        if (seen[i]) {
            const yaml_node_t *first = node(w->doc, seen[i]->key);
            if (!strcmp(sval(first), sval(key)))
                s = fail(w, key, "duplicate key '%s' (first given at %d:%d)", sval(key),
                         (int)first->start_mark.line + 1, (int)first->start_mark.column + 1);
            else
                s = fail(w, key, "'%s' and '%s' (at %d:%d) are the same setting; give only one", sval(key),
                         sval(first), (int)first->start_mark.line + 1, (int)first->start_mark.column + 1);
            break;
        }
        seen[i] = p;
    }
    if (s == ORK_OK && t->unimplemented) {
        ork_loc l = loc_of(w->c, at);
        if (map) warn_at(&l, "ignored: %s (not implemented yet)", path);
    } else {
        for (size_t i = 0; i < nk && s == ORK_OK; i++) {
            const ork_ck *k = &t->keys[i];
            if (k->cls == ORK_CK_ALIAS) continue;
            char kpath[512];
            join(path, k->key, kpath, sizeof kpath);
            s = walk_key(w, k, seen[i] ? node(w->doc, seen[i]->key) : NULL,
                         seen[i] ? node(w->doc, seen[i]->value) : NULL, at, kpath, base);
        }
    }
    free(seen);
    return s;
}

#define ORK_STR_(x) #x
#define ORK_STR(x) ORK_STR_(x)

/* ---- couplings after pass 1 (ai-toolkit's rules) --------------------------- */
static int from_file(const ork_config *c, const char *path) {
    const ork_origin *o = find_origin(c, path);
    return o && o->loc.line > 0;
}

static void derive(ork_config *c, const char *path, const char *src, const char *how) {
    ork_origin *o = find_origin(c, path), *s = find_origin(c, src);
    if (!o || !s) return;
    o->loc = s->loc, o->how = how, o->node = 0;
}

/* config.name names the output folder under training_folder and the files in
 * it (<name>_<step>.safetensors): a name, never a path that could leave
 * training_folder ("../x", "/abs") or be cut short by a path buffer. */
#define ORK_NAME_MAX 200
#define ORK_FOLDER_MAX 512 /* training_folder: <folder>/<name>/<name>_<step>.safetensors fits in the trainer's paths */
static ork_status check_name(ork_config *c) {
    const char *n = c->job.name, *why = NULL;
    size_t len = strlen(n);
    if (!len) why = "is empty";
    else if (len > ORK_NAME_MAX) why = "is longer than " ORK_STR(ORK_NAME_MAX) " bytes";
    else if (!strcmp(n, ".")) why = "is '.', the training folder itself";
    else if (strstr(n, "..")) why = "contains '..'";
    else if (strchr(n, '/')) why = "contains '/'";
    else if (strchr(n, '\\')) why = "contains '\\'";
    else
        for (const char *q = n; *q && !why; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) why = "contains a control character";
    ork_loc l;
    if (why && ork_config_where(c, "config.name", &l))
        return ork_config_fail_at(&l, ORK_E_CONFIG, "config.name %s: it names the output folder and files inside "
                                  "training_folder, so it must be a plain name (not a path) of 1 to "
                                  ORK_STR(ORK_NAME_MAX) " bytes", why);
    const char *tf = c->job.process.v[0].training_folder;
    if (tf && strlen(tf) > ORK_FOLDER_MAX && ork_config_where(c, "training_folder", &l))
        return ork_config_fail_at(&l, ORK_E_CONFIG, "training_folder is %zu bytes long, over the limit of "
                                  ORK_STR(ORK_FOLDER_MAX) " bytes", strlen(tf));
    return ORK_OK;
}

static ork_status resolve(ork_config *c) {
    ork_process_config *p = &c->job.process.v[0];
    ork_model_config *m = &p->model;
    ork_loc l;
    ORK_TRY(check_name(c));
    for (size_t i = 0; i < p->datasets.n; i++) { /* ai-toolkit adds the dot */
        ork_dataset_config *d = &p->datasets.v[i];
        if (d->caption_ext && d->caption_ext[0] && d->caption_ext[0] != '.') {
            char *e = cmem(c, strlen(d->caption_ext) + 2);
            if (!e) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
            e[0] = '.', strcpy(e + 1, d->caption_ext);
            d->caption_ext = e;
        }
    }
    /* model.arch stays whole: ai-toolkit's UI writes "arch:variant" (zimage:turbo,
     * zimage:deturbo) and a family plugin names its variants as aliases of its
     * components, so the variant selects the component (org.orakul.zimage-turbo)
     * rather than being cut here and guessed back from the weights' path. */
    if (!from_file(c, "model.arch") && m->is_flux) derive(c, "model.arch", "model.is_flux", "model.is_flux");
    char *bar = strchr(m->qtype, '|'); /* "uint3|adapter": accuracy recovery adapter */
    if (bar) {
        *bar = '\0';
        if (ork_config_where(c, "model.qtype", &l))
            warn_at(&l, "ignored: the accuracy recovery adapter in model.qtype (not implemented yet)");
    }
    if (!from_file(c, "model.quantize_te")) { /* ai-toolkit: quantize_te defaults to quantize */
        m->quantize_te = m->quantize;
        derive(c, "model.quantize_te", "model.quantize", "model.quantize");
    }
    if (!m->quantize) {
        if (from_file(c, "model.qtype") && ork_config_where(c, "model.qtype", &l))
            warn_at(&l, "ignored: model.qtype, because model.quantize is false");
        m->qtype = "none";
        derive(c, "model.qtype", "model.quantize", "model.quantize is false");
    } else if (m->layer_offloading && !strcmp(m->qtype, "qfloat8")) {
        m->qtype = "float8"; /* quanto -> torchao float8 when offloading */
        derive(c, "model.qtype", "model.layer_offloading", "qfloat8 with model.layer_offloading");
    }
    if (from_file(c, "training_seed")) {
        if (!from_file(c, "train.seed")) {
            p->train.seed = p->training_seed;
            derive(c, "train.seed", "training_seed", "training_seed");
        } else if (p->train.seed != p->training_seed && ork_config_where(c, "train.seed", &l)) {
            return ork_config_fail_at(&l, ORK_E_CONFIG, "train.seed (%lld) and training_seed (%lld) disagree; give one",
                                      (long long)p->train.seed, (long long)p->training_seed);
        }
    }
    for (size_t i = 0; i < p->plugins.path.n; i++) {
        ork_file_info st;
        char ip[64];
        snprintf(ip, sizeof ip, "plugins.path[%zu]", i);
        if (ork_path_info(p->plugins.path.v[i], &st) != ORK_OK && ork_config_where(c, ip, &l))
            return ork_config_fail_at(&l, ORK_E_CONFIG, "plugins.path: '%s' does not exist (%s)",
                                      p->plugins.path.v[i], strerror(errno));
    }
    return ORK_OK;
}

/* ---- loading ------------------------------------------------------------- */
static ork_status read_file(ork_config *c) {
    /* a regular file of at most 4 MiB, refused before reading otherwise
     * (/dev/zero never ends, a FIFO with no writer never answers) */
    return ork_rfile_read(c->file, "config", ORK_CONFIG_MAX_BYTES, 0, &c->text, &c->len);
}

static ork_status syntax_error(ork_config *c, yaml_parser_t *p) {
    yaml_mark_t m = p->problem_mark;
    /* libyaml says "found character that cannot start any token" for a tab;
     * name the real problem: a tab in the indentation of that line. */
    size_t bol = m.index <= c->len ? m.index : c->len;
    while (bol > 0 && c->text[bol - 1] != '\n') bol--;
    for (size_t i = bol; i < c->len && (c->text[i] == ' ' || c->text[i] == '\t'); i++)
        if (c->text[i] == '\t')
            return ORK_FAIL(ORK_E_FORMAT, "%s:%d:%d: tab indentation is not allowed in YAML (indent with spaces)",
                            c->file, (int)m.line + 1, (int)(i - bol) + 1);
    if (p->context)
        return ORK_FAIL(ORK_E_FORMAT, "%s:%d:%d: YAML syntax error: %s (%s at %d:%d)", c->file, (int)m.line + 1,
                        (int)m.column + 1, p->problem, p->context, (int)p->context_mark.line + 1,
                        (int)p->context_mark.column + 1);
    return ORK_FAIL(ORK_E_FORMAT, "%s:%d:%d: YAML syntax error: %s", c->file, (int)m.line + 1, (int)m.column + 1,
                    p->problem ? p->problem : "malformed input");
}

static ork_status parse(ork_config *c) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", c->file);
    yaml_parser_set_input_string(&p, (const unsigned char *)c->text, c->len);
    ork_status s = ORK_OK;
    if (!yaml_parser_load(&p, &c->doc)) {
        s = syntax_error(c, &p);
    } else {
        c->have_doc = 1;
        yaml_document_t more;
        if (!yaml_parser_load(&p, &more)) {
            s = syntax_error(c, &p);
        } else {
            yaml_node_t *r = yaml_document_get_root_node(&more);
            if (r)
                s = ORK_FAIL(ORK_E_FORMAT, "%s:%d:%d: a second YAML document; a config holds one", c->file,
                             (int)r->start_mark.line + 1, (int)r->start_mark.column + 1);
            yaml_document_delete(&more);
        }
    }
    yaml_parser_delete(&p);
    return s;
}

ork_status ork_config_load(const char *path, ork_config **out) {
    *out = NULL;
    if (!path) return ORK_FAIL(ORK_E_INVALID, "config: no file given");
    ork_config *c = calloc(1, sizeof *c);
    if (!c || !(c->file = strdup(path))) {
        free(c);
        return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    }
    ork_status s = read_file(c);
    if (s == ORK_OK) s = parse(c);
    if (s == ORK_OK) {
        yaml_node_t *root = yaml_document_get_root_node(&c->doc);
        walker w = {c, &c->doc, NULL, ORK_E_INTERNAL, 0};
        yaml_mark_t top = {0, 0, 0};
        if (!root || is_null(root))
            s = ORK_FAIL(ORK_E_CONFIG, "%s:1:1: the file is empty (expected job:, config: and meta:)", c->file);
        else
            s = walk_map(&w, &ork_schema_root, root, &top, "", (char *)&c->job);
    }
    if (s == ORK_OK) s = resolve(c);
    if (s != ORK_OK) {
        ork_config_free(c);
        return s;
    }
    *out = c;
    return ORK_OK;
}

void ork_config_free(ork_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->nmem; i++) free(c->mem[i]);
    free(c->mem);
    free(c->org);
    if (c->have_doc) yaml_document_delete(&c->doc);
    free(c->text);
    free(c->file);
    free(c);
}

/* ---- accessors ----------------------------------------------------------- */
const ork_job_config *ork_config_job(const ork_config *c) { return &c->job; }
const ork_process_config *ork_config_process(const ork_config *c) { return &c->job.process.v[0]; }
const char *ork_config_file(const ork_config *c) { return c->file; }

int ork_config_where(const ork_config *c, const char *path, ork_loc *out) {
    const ork_origin *o = find_origin(c, path);
    if (o) return *out = o->loc, 1;
    /* "plugins.path[1]": an item of a list-valued key */
    const char *br = strrchr(path, '[');
    char base[512];
    if (!br || (size_t)(br - path) >= sizeof base) return 0;
    memcpy(base, path, (size_t)(br - path));
    base[br - path] = '\0';
    if (!(o = find_origin(c, base))) return 0;
    yaml_document_t *d = (yaml_document_t *)&c->doc;
    const yaml_node_t *n = node(d, o->node);
    size_t i = strtoul(br + 1, NULL, 10);
    if (n && n->type == YAML_SEQUENCE_NODE && i < (size_t)(n->data.sequence.items.top - n->data.sequence.items.start))
        n = node(d, n->data.sequence.items.start[i]);
    else if (!(n && n->type == YAML_SCALAR_NODE && i == 0))
        return *out = o->loc, 1;
    *out = loc_of(c, &n->start_mark);
    return 1;
}

static const struct { const char *name, *params; size_t off; } comp[ORK_KIND_COUNT] = {
    [ORK_KIND_MODEL] = {"model.arch", "model.model_kwargs", offsetof(ork_process_config, model.arch)},
    [ORK_KIND_LOSS] = {"train.loss_type", "train.loss_params", offsetof(ork_process_config, train.loss_type)},
    [ORK_KIND_OPTIMIZER] = {"train.optimizer", "train.optimizer_params", offsetof(ork_process_config, train.optimizer)},
    [ORK_KIND_QUANT] = {"model.qtype", "model.quantize_kwargs", offsetof(ork_process_config, model.qtype)},
};

const char *ork_config_component_name(const ork_config *c, ork_component_kind kind, ork_loc *where) {
    if ((unsigned)kind >= ORK_KIND_COUNT || !comp[kind].name) return ""; /* a kind with no config key (text_encoder) */
    if (where && !ork_config_where(c, comp[kind].name, where)) *where = (ork_loc){c->file, 0, 0};
    return *(const char *const *)((const char *)ork_config_process(c) + comp[kind].off);
}

const char *ork_config_component_params_path(ork_component_kind kind) {
    return (unsigned)kind < ORK_KIND_COUNT ? comp[kind].params : NULL;
}

/* ---- pass 2: component keys ------------------------------------------------ */
/* The ork_param table is translated into the same row type and walked by the
 * same code as the core keys, so both get identical checks and messages. */
ork_status ork_config_component_params(ork_config *c, const char *section, const ork_param *table, void *buf,
                                       size_t buf_size) {
    const ork_origin *o = find_origin(c, section);
    if (!o || o->kind != ORK_CK_PARAMS)
        return ORK_FAIL(ORK_E_INVALID, "config: '%s' is not a component key section", section);
    if (buf && buf_size) memset(buf, 0, buf_size);
    size_t n = 0, nk = 0;
    while (table && table[n].key) n++;
    /* ai-toolkit's keys of this section that the component does not declare: known, warned */
    const ork_ck_table *known = ork_schema_component_known(section);
    while (known && known->keys[nk].key) nk++;
    ork_ck *keys = calloc(n + nk + 1, sizeof *keys);
    if (!keys) return ORK_FAIL(ORK_E_NOMEM, "config: out of memory");
    ork_status s = ORK_OK;
    static const uint8_t kinds[] = {ORK_CK_BOOL, ORK_CK_INT, ORK_CK_FLOAT, ORK_CK_STR};
    for (size_t i = 0; i < n && s == ORK_OK; i++) {
        const ork_param *p = &table[i];
        uint32_t cnt = p->count > 1 ? p->count : 1;
        if ((unsigned)p->type > ORK_PARAM_STRING)
            s = ORK_FAIL(ORK_E_ABI, "%s: key table: '%s' has an unknown type %d", section, p->key, (int)p->type);
        else if (p->offset > buf_size || cnt * scalar_size(kinds[p->type]) > buf_size - p->offset)
            s = ORK_FAIL(ORK_E_ABI, "%s: key table: '%s' at offset %zu does not fit in params_size %zu", section,
                         p->key, p->offset, buf_size);
        else if (!(p->flags & ORK_PARAM_REQUIRED) && !p->def)
            s = ORK_FAIL(ORK_E_ABI, "%s: key table: '%s' is neither required nor has a default", section, p->key);
        keys[i] = (ork_ck){p->key, s == ORK_OK ? kinds[p->type] : 0, ORK_CK_IMPL,
                           (p->flags & ORK_PARAM_REQUIRED) != 0, p->count, p->def,
                           p->min > p->max ? -HUGE_VAL : p->min, p->min > p->max ? HUGE_VAL : p->max,
                           p->choices, p->offset, NULL, NULL, NULL};
    }
    for (size_t i = 0, m = n; s == ORK_OK && i < nk; i++) {
        size_t j = 0;
        while (j < n && strcmp(table[j].key, known->keys[i].key)) j++;
        if (j == n) keys[m++] = known->keys[i];
    }
    if (s == ORK_OK) {
        /* pass 2 may run again (a second component load): drop the old origins */
        size_t len = strlen(section), j = 0;
        for (size_t i = 0; i < c->norg; i++)
            if (strncmp(c->org[i].path, section, len) || c->org[i].path[len] != '.') c->org[j++] = c->org[i];
        c->norg = j;
        o = find_origin(c, section);
        const yaml_node_t *map = node(&c->doc, o->node);
        ork_loc at = o->loc;
        if (at.line == 0) { /* absent: blame the component's name when the user chose it */
            for (int k = 0; k < ORK_KIND_COUNT; k++)
                if (comp[k].params && !strcmp(comp[k].params, section)) ork_config_where(c, comp[k].name, &at);
        }
        yaml_mark_t m = {0, at.line > 0 ? (size_t)at.line - 1 : 0, at.col > 0 ? (size_t)at.col - 1 : 0};
        ork_ck_table t = {keys, buf_size, 0, 0};
        walker w = {c, &c->doc, NULL, ORK_E_ABI, 1};
        if (at.line == 0) {
            /* no location at all: report "file: ..." (a missing required key) */
            for (size_t i = 0; i < n && s == ORK_OK; i++)
                if (keys[i].required) s = ORK_FAIL(ORK_E_CONFIG, "%s: missing required key '%s.%s'", c->file,
                                                   section, keys[i].key);
        }
        if (s == ORK_OK) s = walk_map(&w, &t, map, &m, section, buf);
    }
    free(keys);
    return s;
}

/* ---- dump ---------------------------------------------------------------- */
static void print_scalar(FILE *f, uint8_t kind, const void *v) {
    switch (kind) {
    case ORK_CK_BOOL: fputs(*(const int32_t *)v ? "true" : "false", f); break;
    case ORK_CK_INT: case ORK_CK_INTS: fprintf(f, "%lld", (long long)*(const int64_t *)v); break;
    case ORK_CK_FLOAT: fprintf(f, "%.9g", *(const double *)v); break;
    default: {
        const char *s = *(const char *const *)v;
        if (s) fprintf(f, "\"%s\"", s);
        else fputs("null", f);
    }
    }
}

static void print_value(FILE *f, uint8_t kind, uint32_t count, const void *v) {
    size_t n = count > 1 ? count : 1;
    const char *items = v;
    if (kind == ORK_CK_INTS || kind == ORK_CK_STRS) {
        const ork_strs *l = v;
        n = l->n, items = (const char *)l->v;
    } else if (count <= 1) {
        print_scalar(f, kind, v);
        return;
    }
    uint8_t ik = kind == ORK_CK_STRS ? ORK_CK_STR : kind;
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        print_scalar(f, ik, items + i * scalar_size(ik));
    }
    fputc(']', f);
}

void ork_config_dump(const ork_config *c, FILE *f) {
    fprintf(f, "# %s, resolved\n", c->file);
    for (size_t i = 0; i < c->norg; i++) {
        const ork_origin *o = &c->org[i];
        if (o->kind == ORK_CK_PARAMS) continue; /* its keys follow once a component has read them */
        fprintf(f, "%s = ", o->path);
        if (o->text) fputs(o->text, f);
        else print_value(f, o->kind, o->count, o->val);
        if (o->loc.line > 0)
            fprintf(f, "  (%s:%d:%d%s%s)\n", o->loc.file, o->loc.line, o->loc.col, o->how ? ", " : "",
                    o->how ? o->how : "");
        else
            fprintf(f, "  (default%s%s)\n", o->how ? ", " : "", o->how ? o->how : "");
    }
}

/* ---- the keys not implemented (docs/aitk-keys.md) -------------------------- */
static void each_known(const ork_ck_table *t, const char *prefix, int all, ork_config_known_fn fn, void *ctx) {
    for (const ork_ck *k = t->keys; k->key; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", k->key);
        if (k->cls == ORK_CK_KNOWN || (all && k->cls != ORK_CK_ALIAS)) fn(ctx, path, k->def, k->when);
        else if ((k->kind == ORK_CK_MAP || k->kind == ORK_CK_LIST) && k->sub) {
            char sub[520];
            snprintf(sub, sizeof sub, "%s%s", path, k->kind == ORK_CK_LIST ? "[]" : "");
            each_known(k->sub, k->sub->anonymous ? "" : sub, all || k->sub->unimplemented, fn, ctx);
        } else if (k->kind == ORK_CK_PARAMS) {
            const ork_ck_table *c = ork_schema_component_known(path);
            if (c) each_known(c, path, all, fn, ctx);
        }
    }
}

void ork_config_each_unimplemented(ork_config_known_fn fn, void *ctx) { each_known(&ork_schema_root, "", 0, fn, ctx); }
