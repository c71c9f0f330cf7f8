/* flux_test_util.h — shared by the FLUX plugin tests: load orakul-flux.so
 * and the image codecs (orakul-image_codecs.so) through the core's registry
 * (ORK_PLUGIN_DIR), create the model component with model_kwargs filled from
 * its own key table (defaults + overrides), open a checkpoint and the codec
 * the core picks for it (plugin/model_codec.h: ft_encode / ft_decode), load
 * both into a CPU weight store (F32), read fixture
 * tensors, and compare arrays against float64 references (the
 * plugin-neutral pieces are tests/common/plugin_test_util.h).
 * Owns (per test binary): the registry. */
#ifndef ORK_FLUX_TEST_UTIL_H
#define ORK_FLUX_TEST_UTIL_H

#ifdef FT_GPU
#define ORK_TEST_GPU 1
#endif
#include "plugin_test_util.h"

#include "io/safetensors.h"
#include "plugin/model_codec.h"
#include "plugin/registry.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "train/wstore.h"
#include "util/log.h"

#include <orakul/orakul.h>
#include <stdint.h>

#define FT_PLUGIN ORK_PLUGIN_DIR "/orakul-flux" ORK_PLUGIN_SUFFIX
#define FT_CODECS ORK_PLUGIN_DIR "/orakul-image_codecs" ORK_PLUGIN_SUFFIX
#define FT_FIXTURES ORK_SOURCE_DIR "/tests/fixtures"

static ork_registry *ft_reg;

static inline int ft_init(void) {
    return ork_test_registry_open(FT_PLUGIN, &ft_reg) || ork_registry_add_file(ft_reg, FT_CODECS) != ORK_OK;
}
static inline int ft_clean(void) { return ork_test_registry_close(&ft_reg); }

/* ---- the model ---------------------------------------------------------------- */
typedef struct ft_model {
    const ork_plugin_component *pc;
    const ork_model_vtable *vt;
    void *self;
    ork_model_info info;
    ork_model_codec mc;  /* the codec the core picks (info.weights: the model's, then the codec's) */
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
} ft_model;

/* Fill a params buffer from the component's key table: defaults, then the
 * NULL-terminated key/value pairs kv (values as YAML scalars). */
static inline ork_status ft_params(const ork_component *c, const char *const *kv, void *buf) {
    for (const ork_param *p = c->params; p && p->key; p++) {
        const char *v = p->def;
        for (int i = 0; kv && kv[i]; i += 2)
            if (!strcmp(kv[i], p->key)) v = kv[i + 1];
        if (!v) return ORK_E_CONFIG;
        unsigned char *at = (unsigned char *)buf + p->offset;
        switch (p->type) {
        case ORK_PARAM_BOOL: { int32_t b = !strcmp(v, "true"); memcpy(at, &b, sizeof b); break; }
        case ORK_PARAM_INT: { int64_t x = strtoll(v, NULL, 10); memcpy(at, &x, sizeof x); break; }
        case ORK_PARAM_FLOAT: { double x = strtod(v, NULL); memcpy(at, &x, sizeof x); break; }
        case ORK_PARAM_STRING: { const char *s = !strcmp(v, "''") ? "" : v; memcpy(at, &s, sizeof s); break; }
        }
    }
    return ORK_OK;
}

/* create + open (no weights yet). kv: model_kwargs overrides or NULL. */
static inline ork_status ft_open(const char *name_or_path, const char *const *kv, ft_model *m) {
    memset(m, 0, sizeof *m);
    m->pc = ork_registry_find(ft_reg, ORK_KIND_MODEL, "flux");
    if (!m->pc) return ORK_E_CONFIG;
    void *buf = calloc(1, m->pc->c->params_size);
    if (!buf) return ORK_E_NOMEM;
    ork_status s = ft_params(m->pc->c, kv, buf);
    m->vt = m->pc->c->vtable;
    if (s == ORK_OK) s = m->vt->create(&m->pc->host, buf, &m->self);
    free(buf);
    if (s == ORK_OK) s = m->vt->open(m->self, name_or_path, &m->info);
    if (s == ORK_OK) s = ork_model_codec_open(&m->mc, ft_reg, name_or_path, m->vt, m->self, &m->info);
    return s;
}

/* The model's image codec, as the trainer runs it. */
static inline ork_status ft_encode(ft_model *m, ork_graph *g, ork_tensor *img, ork_tensor **tokens) {
    return ork_model_codec_encode(&m->mc, g, img, tokens);
}
static inline ork_status ft_decode(ft_model *m, ork_graph *g, ork_tensor *tokens, int h, int w, ork_tensor **img) {
    return ork_model_codec_decode(&m->mc, g, tokens, h, w, img);
}

/* CPU graph (F32 activations), F32 weight store, load every weight. */
/* FT_GPU (the gpu-labelled build of a test): the CUDA backend with BF16
 * activations and a BF16 weight store, as training on the GPU runs. */
static inline ork_status ft_load(ft_model *m) {
    return ork_test_load_weights(&m->info, 1, ork_model_codec_load_all, &m->mc, &m->alloc, &m->g, &m->ws);
}

/* *t in the graph's activation dtype: a cast node when that is not F32 (CUDA:
 * BF16); an F32 leaf before it keeps its gradient. */
static inline ork_status ft_act(ork_graph *g, ork_tensor **t) {
    if (!*t || g->act_dt == ORK_F32) return ORK_OK;
    return ork_ops_table()->cast(g, *t, g->act_dt, t);
}

static inline void ft_close(ft_model *m) {
    if (m->ws) ork_wstore_destroy(m->ws);
    if (m->g) ork_graph_destroy(m->g);
    ork_model_codec_close(&m->mc);
    if (m->self) m->vt->destroy(m->self);
    if (m->alloc) ork_alloc_destroy(m->alloc);
    memset(m, 0, sizeof *m);
}

/* ---- fixture tensors ----------------------------------------------------------- */
/* A fixture tensor converted to F64 (malloc'd), its element count in *n; NULL when absent. */
static inline double *ft_f64(const ork_st_file *f, const char *name, size_t *n) {
    return ork_test_st_f64(f, name, n);
}
static inline float *ft_f32(const ork_st_file *f, const char *name, size_t *n) {
    const ork_st_tensor *t = ork_st_find(f, name);
    if (!t) { printf("\n  fixture lacks %s\n", name); return NULL; }
    size_t k = (size_t)ork_st_nelements(t);
    float *d = malloc((k ? k : 1) * sizeof *d);
    if (d && ork_st_read_f32(t, d) != ORK_OK) { free(d); return NULL; }
    if (n) *n = k;
    return d;
}

/* ---- comparison ------------------------------------------------------------------ */
/* ork_test_cmp: every element |got - ref| <= a·M + r·|ref|, M = max|ref|;
 * prints the worst error relative to M; returns 1 when all pass. */
static inline int ft_cmp(const char *what, const float *got, const double *ref, size_t n, double a, double r) {
    return ork_test_cmp(what, got, ref, n, a, r, NULL);
}

/* A graph tensor's values on the host (F32, malloc'd). */
static inline float *ft_host(ork_graph *g, const ork_tensor *t) { return ork_test_host(g, t); }

/* ---- files ------------------------------------------------------------------------- */
static inline int ft_copy(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int ok = a && b;
    char buf[1 << 16];
    size_t k;
    while (ok && (k = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, k, b) == k;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = 0;
    return ok;
}

#endif
