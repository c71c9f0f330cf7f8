/* tensor/tensor.c — see tensor.h. Owns persistent tensors (struct + their
 * own allocation + their F32 grad). */
#include "tensor/tensor.h"

#include "tensor/alloc.h"
#include "tensor/graph.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ork_tensor_numel(const ork_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t ork_tensor_nbytes(const ork_tensor *t) { return (size_t)ork_tensor_numel(t) * ork_dtype_size(t->dtype); }

const char *ork_dtype_name(ork_dtype dt) {
    static const char *names[] = {"f32", "bf16", "f16", "f8_e4m3", "f8_e5m2", "i32", "u8", "f64", "i64"};
    return (unsigned)dt < ORK_DTYPE_COUNT ? names[dt] : "?";
}

const char *ork_tensor_str(const ork_tensor *t, char *buf, size_t n) {
    size_t p = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && p < n; i++)
        p += (size_t)snprintf(buf + p, n - p, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (p < n) snprintf(buf + p, n - p, ") %s", ork_dtype_name(t->dtype));
    return buf;
}

int ork_shape_equal(const ork_tensor *a, const ork_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

static ork_status check_shape(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > ORK_MAX_DIMS)
        return ORK_FAIL(ORK_E_INVALID, "tensor: %d dims (1..%d allowed)", ndim, ORK_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return ORK_FAIL(ORK_E_INVALID, "tensor: dim %d is negative (%lld)", i, (long long)shape[i]);
    return ORK_OK;
}

ork_status ork_tensor_new(struct ork_alloc *a, const char *tag, ork_dtype dt, int ndim, const int64_t *shape,
                          int param, ork_tensor **out) {
    ORK_TRY(check_shape(ndim, shape));
    if (!ork_dtype_size(dt)) return ORK_FAIL(ORK_E_INVALID, "tensor: invalid dtype %d", (int)dt);
    ork_tensor *t = calloc(1, sizeof *t);
    if (!t) return ORK_FAIL(ORK_E_NOMEM, "tensor: out of host memory");
    t->dtype = dt;
    t->device = ork_alloc_backend(a)->device;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->owner = ORK_OWN_ALLOC;
    t->alloc = a;
    t->name = "";
    ork_status s = ork_alloc_get(a, ork_tensor_nbytes(t), tag, &t->base);
    if (s != ORK_OK) { free(t); return s; }
    if (param) {
        t->flags |= ORK_TF_PARAM;
        t->requires_grad = 1;
    }
    *out = t;
    return ORK_OK;
}

ork_status ork_tensor_wrap(ork_device dev, ork_dtype dt, int ndim, const int64_t *shape, void *data,
                           const char *name, ork_tensor **out) {
    ORK_TRY(check_shape(ndim, shape));
    ork_tensor *t = calloc(1, sizeof *t);
    if (!t) return ORK_FAIL(ORK_E_NOMEM, "tensor: out of host memory");
    t->dtype = dt;
    t->device = dev;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->owner = ORK_OWN_EXTERN;
    t->base = data;
    t->name = name ? name : "";
    if (name) t->flags |= ORK_TF_WEIGHT;
    *out = t;
    return ORK_OK;
}

void ork_tensor_free(ork_tensor *t) {
    if (!t) return;
    if (t->grad && t->grad->owner == ORK_OWN_ALLOC) ork_tensor_free(t->grad);
    if (t->owner == ORK_OWN_ALLOC) ork_alloc_put(t->alloc, t->base);
    free(t);
}

ork_status ork_tensor_zero_grad(ork_graph *g, ork_tensor *t) {
    if (!t->grad) return ORK_OK;
    return g->be->fill(&g->k, ork_tensor_numel(t->grad), 0.0f, ork_tensor_data(t->grad), t->grad->dtype);
}
