/* tensor/tensor_service.c — the tensor service ("orakul.tensor/1",
 * <orakul/tensor.h>): shape queries, host copies in and out (converting float
 * dtypes on the host), named weights, persistent tensors, release and drop.
 * Owns the static table. [control-thread] */
#include "tensor/ops.h"

#include "numerics/elem.h" /* ork_elem_load/store: host-side conversion in to_host */
#include "tensor/ops_impl.h"

#include <stdlib.h>
#include <string.h>

static int t_ndim(const ork_tensor *t) { return t->ndim; }
static int64_t t_dim(const ork_tensor *t, int axis) {
    int a = norm_axis(axis, t->ndim);
    return a >= 0 && a < t->ndim ? t->shape[a] : 0;
}
static int64_t t_numel(const ork_tensor *t) { return ork_tensor_numel(t); }
static ork_dtype t_dtype(const ork_tensor *t) { return t->dtype; }
static ork_device t_device(const ork_tensor *t) { return t->device; }
static const char *t_name(const ork_tensor *t) { return t->name ? t->name : ""; }

static ork_status t_empty(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out) {
    return ork_graph_new_tensor(g, dt, ndim, shape, out);
}

static ork_status t_from_host(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, const void *host,
                              ork_tensor **out) {
    ORK_TRY(ork_graph_new_tensor(g, dt, ndim, shape, out));
    if (!host) return ORK_FAIL(ORK_E_INVALID, "from_host: host data is NULL");
    return BE->memcpy_h2d(KX, D(*out), host, ork_tensor_nbytes(*out));
}

static ork_status t_to_host(ork_graph *g, const ork_tensor *t, ork_dtype dst_dt, void *host) {
    if (t->flags & ORK_TF_FREED) return ORK_FAIL(ORK_E_INVALID, "to_host: tensor was released (by a backward pass, or dropped)");
    if (dst_dt != t->dtype && (!ork_elem_float_dt(dst_dt) || !ork_elem_float_dt(t->dtype)))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "to_host: %s -> %s", ork_dtype_name(t->dtype), ork_dtype_name(dst_dt));
    size_t nb = ork_tensor_nbytes(t);
    int64_t n = ork_tensor_numel(t);
    if (dst_dt == t->dtype) {
        ORK_TRY(BE->memcpy_d2h(KX, host, D(t), nb));
        return BE->sync(KX);
    }
    void *tmp = malloc(nb ? nb : 1);
    if (!tmp) return ORK_FAIL(ORK_E_NOMEM, "to_host: out of host memory");
    ork_status s = BE->memcpy_d2h(KX, tmp, D(t), nb);
    if (s == ORK_OK) s = BE->sync(KX);
    for (int64_t i = 0; s == ORK_OK && i < n; i++) ork_elem_store(host, dst_dt, i, ork_elem_load(tmp, t->dtype, i));
    free(tmp);
    return s;
}

static ork_device t_graph_device(const ork_graph *g) { return g->be->device; }
static int t_grad_enabled(const ork_graph *g) { return g->grad_enabled; }

static ork_status t_weight(ork_graph *g, const char *name, ork_tensor **out) {
    if (!name) return ORK_FAIL(ORK_E_INVALID, "weight: name is NULL");
    if (!g->weight_fn) return ORK_FAIL(ORK_E_INVALID, "weight \"%s\": no weight store is attached to this graph", name);
    return g->weight_fn(g->weight_ctx, g, name, out);
}

static ork_status t_persistent(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, const void *host,
                               ork_tensor **out) {
    if (!host) return ORK_FAIL(ORK_E_INVALID, "persistent: host data is NULL");
    ORK_TRY(ork_tensor_new(g->alloc, "frozen", dt, ndim, shape, 0, out));
    ork_status s = BE->memcpy_h2d(KX, D(*out), host, ork_tensor_nbytes(*out));
    if (s == ORK_OK) s = BE->sync(KX); /* host may be freed as soon as we return */
    if (s != ORK_OK) { ork_tensor_free(*out); *out = NULL; }
    return s;
}

static void t_release(ork_tensor *t) { ork_tensor_free(t); }

/* The caller is done with t: its arena block goes back now. Only a tensor
 * that owns a whole block of g's arena nobody else reads: off the tape
 * (nothing saved it, no producer node: the tape frees its own), not a weight,
 * a parameter, a keep, a view or a view's source. */
static void t_drop(ork_graph *g, ork_tensor *t) {
    if (!g || !t || t->owner != ORK_OWN_GRAPH || t->node || t->saves > 0 || t->offset != 0 || t->grad) return;
    if (t->flags & (ORK_TF_WEIGHT | ORK_TF_PARAM | ORK_TF_KEEP | ORK_TF_FREED | ORK_TF_VIEWED)) return;
    if (ork_arena_put_if_live(g->arena, t->base)) t->flags |= ORK_TF_FREED; /* else another graph's: not ours */
}

static const ork_tensor_api g_tensor_api = {
    .abi = ORK_ABI_INIT(ork_tensor_api),
    .ndim = t_ndim,
    .dim = t_dim,
    .numel = t_numel,
    .dtype = t_dtype,
    .device = t_device,
    .name = t_name,
    .empty = t_empty,
    .from_host = t_from_host,
    .to_host = t_to_host,
    .graph_device = t_graph_device,
    .grad_enabled = t_grad_enabled,
    .weight = t_weight,
    .persistent = t_persistent,
    .release = t_release,
    .drop = t_drop,
};

const ork_tensor_api *ork_tensor_api_table(void) { return &g_tensor_api; }
