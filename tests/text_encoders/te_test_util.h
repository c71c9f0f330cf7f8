/* te_test_util.h — shared by the t5clip tests: load orakul-t5clip.so through
 * the core's registry, create a text_encoder component, open a checkpoint,
 * load it into a weight store on the CPU (F32) or CUDA (TE_GPU: BF16
 * activations and store, as the GPU runs) graph, run begin + every block +
 * end on token ids, and compare outputs with a float64 reference (the
 * plugin-neutral pieces are tests/common/plugin_test_util.h).
 * Owns (per test binary): the registry. */
#ifndef ORK_TE_TEST_UTIL_H
#define ORK_TE_TEST_UTIL_H

#ifdef TE_GPU
#define ORK_TEST_GPU 1
#endif
#include "plugin_test_util.h"

#include "io/safetensors.h"
#include "plugin/registry.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "train/wstore.h"

#include <orakul/orakul.h>
#include <stdint.h>

#define TT_PLUGIN ORK_PLUGIN_DIR "/orakul-t5clip" ORK_PLUGIN_SUFFIX
#define TT_FIXTURES ORK_SOURCE_DIR "/tests/fixtures/text"

static ork_registry *tt_reg;

static inline int tt_init(void) { return ork_test_registry_open(TT_PLUGIN, &tt_reg); }
static inline int tt_clean(void) { return ork_test_registry_close(&tt_reg); }

typedef struct tt_enc {
    const ork_plugin_component *pc;
    const ork_text_encoder_vtable *vt;
    void *self;
    ork_text_encoder_info info;
    ork_model_info mi; /* the weight store takes a model's declarations: the same fields */
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
} tt_enc;

/* create (default keys) + open. */
static inline ork_status tt_open(const char *id, const char *path, tt_enc *e) {
    memset(e, 0, sizeof *e);
    e->pc = ork_registry_find(tt_reg, ORK_KIND_TEXT_ENCODER, id);
    if (!e->pc) return ORK_E_CONFIG;
    e->vt = e->pc->c->vtable;
    void *buf = calloc(1, e->pc->c->params_size ? e->pc->c->params_size : 1);
    if (!buf) return ORK_E_NOMEM;
    ork_status s = e->vt->create(&e->pc->host, buf, &e->self);
    free(buf);
    if (s == ORK_OK) s = e->vt->open(e->self, path, &e->info);
    return s;
}

static inline ork_status tt_load(tt_enc *e) {
    e->mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    e->mi.family = e->info.family;
    e->mi.variant = e->info.variant;
    e->mi.n_blocks = e->info.n_blocks;
    e->mi.block_names = e->info.block_names;
    e->mi.n_weights = e->info.n_weights;
    e->mi.weights = e->info.weights;
    return ork_test_load_weights(&e->mi, 0, e->vt->load, e->self, &e->alloc, &e->g, &e->ws);
}

static inline void tt_close(tt_enc *e) {
    if (e->ws) ork_wstore_destroy(e->ws);
    if (e->g) ork_graph_destroy(e->g);
    if (e->self) e->vt->destroy(e->self);
    if (e->alloc) ork_alloc_destroy(e->alloc);
    memset(e, 0, sizeof *e);
}

/* begin + every block + end on (B, L) ids and an optional mask. */
static inline ork_status tt_forward(tt_enc *e, int B, int L, const int32_t *ids, const int32_t *mask,
                                    ork_text_encoder_outputs *out) {
    ORK_TRY(ork_graph_reset(e->g));
    ork_text_encoder_inputs in = {ORK_ABI_INIT(ork_text_encoder_inputs), B, L, ids, mask};
    ork_carry c;
    ORK_TRY(e->vt->begin(e->self, e->g, &in, &c));
    for (int i = 0; i < e->info.n_blocks; i++) ORK_TRY(e->vt->block(e->self, e->g, i, &c));
    return e->vt->end(e->self, e->g, &c, out);
}

/* ---- fixture tensors ---- */
static inline double *tt_f64(const ork_st_file *f, const char *name, size_t *n) {
    return ork_test_st_f64(f, name, n);
}
/* I32 ids (B, L) of the fixture (malloc'd). */
static inline int32_t *tt_i32(const ork_st_file *f, const char *name, int *B, int *L) {
    const ork_st_tensor *t = ork_st_find(f, name);
    *B = *L = 0;
    if (!t || t->dtype != ORK_I32 || t->ndim != 2) { printf("\n  fixture lacks I32 (B, L) %s\n", name); return NULL; }
    int32_t *d = malloc(t->nbytes ? t->nbytes : 1);
    if (d) memcpy(d, t->data, t->nbytes);
    *B = (int)t->shape[0];
    *L = (int)t->shape[1];
    return d;
}
static inline float *tt_host(ork_graph *g, const ork_tensor *t) { return ork_test_host(g, t); }

/* ork_test_cmp: every element within a·M + r·|ref|; *err_out the max error / M. */
static inline int tt_cmp(const char *what, const float *got, const double *ref, size_t n, double a, double r,
                         double *err_out) {
    return ork_test_cmp(what, got, ref, n, a, r, err_out);
}

/* An output tensor against the fixture's reference of the same element count. */
static inline int tt_check(tt_enc *e, const ork_st_file *fx, const char *ref_name, const ork_tensor *t, double a,
                           double r) {
    size_t n = 0;
    double *ref = tt_f64(fx, ref_name, &n);
    float *got = t ? tt_host(e->g, t) : NULL;
    int ok = ref && got && (size_t)ork_tensor_numel(t) == n && tt_cmp(ref_name, got, ref, n, a, r, NULL);
    if (!t) printf("\n    %s: no output tensor", ref_name);
    else if (ref && (size_t)ork_tensor_numel(t) != n)
        printf("\n    %s: %lld elements, the reference has %zu", ref_name, (long long)ork_tensor_numel(t), n);
    free(ref);
    free(got);
    return ok;
}

#endif
