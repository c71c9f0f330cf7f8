/* quant_test_util.h — shared by the quant plugin tests: load orakul-quant.so
 * through the core's registry, create a component by alias with given keys
 * (filled through its own key table), capture log lines, and a Gaussian RNG.
 * Owns (per test binary): the registry and the captured lines. */
#ifndef ORK_QUANT_TEST_UTIL_H
#define ORK_QUANT_TEST_UTIL_H

#include "ork_test.h"

#include "plugin/registry.h"
#include "util/log.h"

#include <orakul/orakul.h>
#include <stdint.h>

#define QT_PLUGIN ORK_PLUGIN_DIR "/orakul-quant" ORK_PLUGIN_SUFFIX

static ork_registry *qt_reg;

/* ---- captured log lines ---------------------------------------------------- */
static char qt_lines[16][1024];
static int qt_nlines, qt_nerrors;
static inline void qt_sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR) qt_nerrors++;
    if (qt_nlines < 16) snprintf(qt_lines[qt_nlines], sizeof qt_lines[0], "%s", line);
    qt_nlines++;
}
static inline void qt_clear_log(void) { qt_nlines = 0; qt_nerrors = 0; qt_lines[0][0] = '\0'; }

static inline int qt_init(void) {
    ork_log_set_sink(qt_sink, NULL);
    if (ork_registry_create(NULL, &qt_reg) != ORK_OK) return 1;
    return ork_registry_add_file(qt_reg, QT_PLUGIN) != ORK_OK;
}
static inline int qt_clean(void) {
    ork_registry_destroy(qt_reg);
    ork_log_set_sink(NULL, NULL);
    return 0;
}

/* ---- instances ---------------------------------------------------------------- */
typedef struct qt_inst {
    const ork_quant_vtable *vt;
    void *self;
} qt_inst;

typedef struct qt_keys {
    int64_t block_size, threads;
    int32_t report_error;
    const char *dtype;
    const char *fp8_gemm;   /* NULL: the key's default */
} qt_keys;

/* Create component `name` (id or alias) with keys k (NULL: defaults); the
 * params buffer is filled through the component's key table only. */
static inline ork_status qt_make_keys(const char *name, const qt_keys *k, qt_inst *out) {
    const ork_plugin_component *pc = ork_registry_find(qt_reg, ORK_KIND_QUANT, name);
    if (!pc) return ORK_E_CONFIG;
    const ork_component *c = pc->c;
    unsigned char buf[256] = {0};
    if (c->params_size > sizeof buf) return ORK_E_INTERNAL;
    for (const ork_param *p = c->params; p && p->key; p++) {
        unsigned char *at = buf + p->offset;
        if (!strcmp(p->key, "block_size")) { int64_t v = k ? k->block_size : 0; memcpy(at, &v, 8); }
        else if (!strcmp(p->key, "threads")) { int64_t v = k ? k->threads : 0; memcpy(at, &v, 8); }
        else if (!strcmp(p->key, "report_error")) { int32_t v = k ? k->report_error : 0; memcpy(at, &v, 4); }
        else if (!strcmp(p->key, "dtype")) { const char *v = k && k->dtype ? k->dtype : p->def; memcpy(at, &v, sizeof v); }
        else if (!strcmp(p->key, "fp8_gemm")) { const char *v = k && k->fp8_gemm ? k->fp8_gemm : p->def; memcpy(at, &v, sizeof v); }
        else return ORK_E_INTERNAL; /* a key this test does not know */
    }
    out->vt = c->vtable;
    return out->vt->create(&pc->host, buf, &out->self);
}
static inline ork_status qt_make(const char *name, int64_t block, int64_t threads, qt_inst *out) {
    qt_keys k = {block, threads, 0, NULL, NULL};
    return qt_make_keys(name, &k, out);
}
static inline void qt_free(qt_inst *q) { if (q->self) q->vt->destroy(q->self); q->self = NULL; }

/* ---- data ------------------------------------------------------------------ */
typedef struct qt_rng { uint64_t s; } qt_rng;
static inline uint64_t qt_next(qt_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double qt_unif(qt_rng *r) { return ((double)(qt_next(r) >> 11) + 0.5) * 0x1p-53; }
static inline float qt_gauss(qt_rng *r) {
    double u = qt_unif(r), v = qt_unif(r);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static inline void qt_fill_gauss(float *w, size_t n, float std, uint64_t seed) {
    qt_rng r = {seed};
    for (size_t i = 0; i < n; i++) w[i] = std * qt_gauss(&r);
}

/* ||a - b|| / ||a|| over n floats. */
static inline double qt_rel_rms(const float *a, const float *b, size_t n) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) { double d = (double)a[i] - b[i]; e += d * d; r += (double)a[i] * a[i]; }
    return r > 0 ? sqrt(e / r) : 0;
}

#endif
