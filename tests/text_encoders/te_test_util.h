/* te_test_util.h — shared by the t5clip tests: load orakul-t5clip.so through
 * the core's registry, create a text_encoder component, open a checkpoint,
 * load it into a weight store on the CPU (F32) or CUDA (TE_GPU: BF16
 * activations and store, as the GPU runs) graph, run begin + every block +
 * end on token ids, and compare outputs with a float64 reference.
 * Owns (per test binary): the registry. */
#ifndef ORK_TE_TEST_UTIL_H
#define ORK_TE_TEST_UTIL_H

#include "ork_test.h"

#include "io/safetensors.h"
#include "plugin/registry.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "train/wstore.h"

#include <orakul/orakul.h>
#include <stdint.h>

#define TT_PLUGIN ORK_PLUGIN_DIR "/orakul-t5clip.so"
#define TT_FIXTURES ORK_SOURCE_DIR "/tests/fixtures/text"

static ork_registry *tt_reg;

static inline int tt_init(void) {
    if (ork_services_register() != ORK_OK) return 1;
    if (ork_registry_create(NULL, &tt_reg) != ORK_OK) return 1;
    return ork_registry_add_file(tt_reg, TT_PLUGIN) != ORK_OK;
}
static inline int tt_clean(void) {
    ork_registry_destroy(tt_reg);
    tt_reg = NULL;
    return 0;
}

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
#ifdef TE_GPU
    const ork_backend *be = ork_cuda_backend();
    const ork_dtype act = ORK_BF16;
#else
    const ork_backend *be = ork_cpu_backend();
    const ork_dtype act = ORK_F32;
#endif
    ORK_TRY(ork_alloc_create(be, 0, &e->alloc));
    ork_graph_opts go = {0};
    go.act_dtype = act;
    ORK_TRY(ork_graph_create(be, e->alloc, &go, &e->g));
    ork_graph_set_grad(e->g, 0);
    e->mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    e->mi.family = e->info.family;
    e->mi.variant = e->info.variant;
    e->mi.n_blocks = e->info.n_blocks;
    e->mi.block_names = e->info.block_names;
    e->mi.n_weights = e->info.n_weights;
    e->mi.weights = e->info.weights;
    ORK_TRY(ork_wstore_create(e->alloc, be, &e->g->k, &e->mi, act, &e->ws));
    ORK_TRY(e->vt->load(e->self, ork_wstore_sink(e->ws)));
    ORK_TRY(ork_wstore_check_complete(e->ws));
    ork_wstore_attach(e->ws, e->g);
    return ORK_OK;
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
    const ork_st_tensor *t = ork_st_find(f, name);
    if (!t) { printf("\n  fixture lacks %s\n", name); return NULL; }
    size_t k = (size_t)ork_st_nelements(t);
    double *d = malloc((k ? k : 1) * sizeof *d);
    if (d && ork_st_read_into(t, ORK_F64, d) != ORK_OK) { free(d); return NULL; }
    if (n) *n = k;
    return d;
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
static inline float *tt_host(ork_graph *g, const ork_tensor *t) {
    size_t n = (size_t)ork_tensor_numel(t);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (h && ork_tensor_api_table()->to_host(g, t, ORK_F32, h) != ORK_OK) { free(h); return NULL; }
    return h;
}

/* Every element |got − ref| <= a·M + r·|ref| (M = max|ref|); prints the max
 * error relative to M. Returns 1 when all pass; *err_out the max error / M. */
static inline int tt_cmp(const char *what, const float *got, const double *ref, size_t n, double a, double r,
                         double *err_out) {
    double M = 0, worst = 0;
    for (size_t i = 0; i < n; i++) M = fmax(M, fabs(ref[i]));
    size_t bad = n;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= worst)) worst = d;
        if (!(d <= a * M + r * fabs(ref[i])) && bad == n) bad = i;
    }
    printf("\n    %-28s n %8zu  max|ref| %9.4g  max|err| %9.4g  max err/M %9.3g%s", what, n, M, worst,
           M > 0 ? worst / M : worst, bad < n ? "  FAIL" : "");
    if (bad < n) printf(" (element %zu: %.9g vs %.9g)", bad, (double)got[bad], ref[bad]);
    if (err_out) *err_out = M > 0 ? worst / M : worst;
    return bad == n;
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
