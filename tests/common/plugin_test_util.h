/* plugin_test_util.h — what the tests of one loaded plugin component share
 * (tests/flux/flux_test_util.h, tests/text_encoders/te_test_util.h): a
 * registry holding one plugin file, a graph and weight store filled by the
 * component's load() on the CPU (F32) or, when the including test defines
 * ORK_TEST_GPU, the CUDA backend (BF16 activations and store, as training on
 * the GPU runs), fixture tensors read as F64, graph tensors read back as F32,
 * and the element-wise comparison against a float64 reference.
 * Header-only (static functions). Owns nothing: the callers hold what it creates. */
#ifndef ORK_PLUGIN_TEST_UTIL_H
#define ORK_PLUGIN_TEST_UTIL_H

#include "ork_test.h"

#include "io/safetensors.h"
#include "plugin/registry.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/services.h"
#include "train/wstore.h"

#include <orakul/orakul.h>

/* Services registered, *reg created holding the plugin file; 0 on success (a CUnit suite init). */
static inline int ork_test_registry_open(const char *plugin, ork_registry **reg) {
    if (ork_services_register() != ORK_OK) return 1;
    if (ork_registry_create(NULL, reg) != ORK_OK) return 1;
    return ork_registry_add_file(*reg, plugin) != ORK_OK;
}
static inline int ork_test_registry_close(ork_registry **reg) {
    ork_registry_destroy(*reg);
    *reg = NULL;
    return 0;
}

/* Allocator, graph (gradients on when grad) and weight store for the
 * declarations mi, filled by load(self, sink), checked complete and attached
 * to the graph. What was created stays in the caller's alloc, g and ws (to
 * destroy), also on failure. */
static inline ork_status ork_test_load_weights(const ork_model_info *mi, int grad,
                                               ork_status (*load)(void *self, const ork_weight_sink *sink),
                                               void *self, ork_alloc **alloc, ork_graph **g, ork_wstore **ws) {
#ifdef ORK_TEST_GPU
    const ork_backend *be = ork_cuda_backend();
    const ork_dtype act = ORK_BF16;
#else
    const ork_backend *be = ork_cpu_backend();
    const ork_dtype act = ORK_F32;
#endif
    ORK_TRY(ork_alloc_create(be, 0, alloc));
    ork_graph_opts go = {0};
    go.act_dtype = act;
    ORK_TRY(ork_graph_create(be, *alloc, &go, g));
    if (!grad) ork_graph_set_grad(*g, 0);
    ORK_TRY(ork_wstore_create(*alloc, be, &(*g)->k, mi, act, ws));
    ORK_TRY(load(self, ork_wstore_sink(*ws)));
    ORK_TRY(ork_wstore_check_complete(*ws));
    ork_wstore_attach(*ws, *g);
    return ORK_OK;
}

/* A fixture tensor converted to F64 (malloc'd), its element count in *n; NULL when absent. */
static inline double *ork_test_st_f64(const ork_st_file *f, const char *name, size_t *n) {
    const ork_st_tensor *t = ork_st_find(f, name);
    if (!t) { printf("\n  fixture lacks %s\n", name); return NULL; }
    size_t k = (size_t)ork_st_nelements(t);
    double *d = malloc((k ? k : 1) * sizeof *d);
    if (d && ork_st_read_into(t, ORK_F64, d) != ORK_OK) { free(d); return NULL; }
    if (n) *n = k;
    return d;
}

/* A graph tensor's values on the host (F32, malloc'd); NULL on failure. */
static inline float *ork_test_host(ork_graph *g, const ork_tensor *t) {
    size_t n = (size_t)ork_tensor_numel(t);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (h && ork_tensor_api_table()->to_host(g, t, ORK_F32, h) != ORK_OK) { free(h); return NULL; }
    return h;
}

/* Every element |got − ref| <= a·M + r·|ref| (M = max|ref|); prints the max
 * error relative to M and the first violation. Returns 1 when all pass;
 * *err_out (when not NULL) the max error / M. */
static inline int ork_test_cmp(const char *what, const float *got, const double *ref, size_t n, double a, double r,
                               double *err_out) {
    double M = 0, worst = 0;
    for (size_t i = 0; i < n; i++) M = fmax(M, fabs(ref[i]));
    size_t bad = n;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= worst)) worst = d;
        if (!(d <= a * M + r * fabs(ref[i])) && bad == n) bad = i;
    }
    printf("\n    %-40s n %8zu  max|ref| %9.4g  max|err| %9.4g  max err/M %9.3g%s", what, n, M, worst,
           M > 0 ? worst / M : worst, bad < n ? "  FAIL" : "");
    if (bad < n) printf(" (element %zu: %.9g vs %.9g)", bad, (double)got[bad], ref[bad]);
    if (err_out) *err_out = M > 0 ? worst / M : worst;
    return bad == n;
}

#endif
