/* tensor/graph.c — see graph.h. Owns a graph's arena, host pool, tape and
 * backend context. */
#include "tensor/graph.h"

#include "tensor/tape.h"
#include "platform/platform.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

ork_status ork_graph_create(const ork_backend *be, ork_alloc *alloc, const ork_graph_opts *opts,
                            ork_graph **out) {
    ork_graph_opts o = {0};
    if (opts) o = *opts;
    ork_graph *g = calloc(1, sizeof *g);
    if (!g) return ORK_FAIL(ORK_E_NOMEM, "graph: out of host memory");
    g->be = be;
    g->alloc = alloc;
    g->grad_enabled = 1;
    /* Default activation dtype by backend; opts->act_dtype wins when opts are given. */
    g->act_dt = opts ? o.act_dtype : (be->device == ORK_DEV_CUDA ? ORK_BF16 : ORK_F32);
    g->k.nthreads = o.nthreads > 0 ? o.nthreads : ork_cpu_count();
    g->k.stream = o.stream;
    ork_status s = ORK_OK;
    if (be->ctx_create) s = be->ctx_create(o.device_index, &g->k.priv);
    /* k.stream is always the stream the graph's work runs on: the context's
     * own (non-blocking) one unless the caller gave one. Plugins (quantizer
     * dequantize, optimizer steps) get k.stream as it is; NULL there meant the
     * legacy default stream, which does not order against a non-blocking
     * stream — the dequantized scratch was read before it was written. */
    if (s == ORK_OK && be->ctx_stream && !g->k.stream) g->k.stream = be->ctx_stream(&g->k);
    if (s == ORK_OK) s = ork_arena_create(alloc, o.arena_tag ? o.arena_tag : "activations", o.arena_initial, &g->arena);
    if (s == ORK_OK) s = ork_hpool_create((size_t)1 << 20, &g->pool);
    if (s == ORK_OK) s = ork_tape_create(&g->tape);
    if (s != ORK_OK) { ork_graph_destroy(g); return s; }
    *out = g;
    return ORK_OK;
}

void ork_graph_set_grad_pool(ork_graph *g, void *base, size_t bytes) {
    g->grad_pool = base;
    g->grad_pool_bytes = base ? bytes : 0;
    g->grad_pool_used = 0;
}

ork_status ork_graph_set_fp8_gemm(ork_graph *g, int mode, const char *what) {
    const char *env = getenv("ORK_FP8_GEMM");
    if (env && *env) {
        if (!strcmp(env, "native")) mode = ORK_FP8_GEMM_NATIVE;
        else if (!strcmp(env, "dequant")) mode = ORK_FP8_GEMM_DEQUANT;
        else return ORK_FAIL(ORK_E_CONFIG, "ORK_FP8_GEMM: '%s' is not native or dequant", env);
        what = "ORK_FP8_GEMM";
    }
    if (mode == ORK_FP8_GEMM_NATIVE) {
        char why[256] = "the backend has no native FP8 GEMM";
        ork_fp8_linear_desc d = {.M = 0, .why = why, .why_n = sizeof why};
        if (!g->be->linear_fp8 || g->be->linear_fp8(&g->k, &d) != ORK_OK)
            return ORK_FAIL(ORK_E_CONFIG, "%s: native: %s (%s); use dequant", what ? what : "fp8_gemm", why,
                            g->be->name);
    }
    g->fp8_gemm = mode;
    g->fp8_warned = 0;
    return ORK_OK;
}

void ork_graph_destroy(ork_graph *g) {
    if (!g) return;
    ork_tape_destroy(g->tape);
    ork_hpool_destroy(g->pool);
    ork_arena_destroy(g->arena);
    if (g->k.priv && g->be->ctx_destroy) g->be->ctx_destroy(g->k.priv);
    free(g);
}

ork_status ork_graph_reset(ork_graph *g) {
    ork_tape_truncate(g->tape, 0);
    ork_hpool_reset(g->pool);
    return ork_arena_reset(g->arena);
}

int ork_graph_set_grad(ork_graph *g, int enabled) {
    int prev = g->grad_enabled;
    g->grad_enabled = enabled != 0;
    return prev;
}

void ork_graph_set_weight_fn(ork_graph *g, ork_weight_fn fn, void *ctx) {
    g->weight_fn = fn;
    g->weight_ctx = ctx;
}

ork_status ork_graph_sync(ork_graph *g) { return g->be->sync(&g->k); }

ork_region ork_graph_region_begin(ork_graph *g) {
    return (ork_region){ork_arena_mark(g->arena), ork_hpool_mark_get(g->pool), ork_tape_len(g->tape)};
}

void ork_graph_region_end(ork_graph *g, ork_region r) {
    ork_tape_truncate(g->tape, r.tape_len);
    ork_arena_release(g->arena, r.arena_mark);
    ork_hpool_release(g->pool, r.pool_mark);
}

ork_status ork_graph_new_tensor(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out) {
    if (ndim < 0 || ndim > ORK_MAX_DIMS)
        return ORK_FAIL(ORK_E_INVALID, "tensor: %d dims (0..%d allowed)", ndim, ORK_MAX_DIMS);
    if (!ork_dtype_size(dt)) return ORK_FAIL(ORK_E_INVALID, "tensor: invalid dtype %d", (int)dt);
    ork_tensor *t = ork_hpool_get(g->pool, sizeof *t);
    if (!t) return ORK_FAIL(ORK_E_NOMEM, "graph: out of host memory");
    t->dtype = dt;
    t->device = g->be->device;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ORK_FAIL(ORK_E_INVALID, "tensor: dim %d is negative (%lld)", i, (long long)shape[i]);
        t->shape[i] = shape[i];
    }
    t->owner = ORK_OWN_GRAPH;
    t->name = "";
    ORK_TRY(ork_arena_get(g->arena, ork_tensor_nbytes(t), &t->base));
    *out = t;
    return ORK_OK;
}

ork_status ork_graph_copy_to(ork_graph *g, const ork_tensor *src, ork_tensor *dst) {
    int64_t n = ork_tensor_numel(src);
    if (n != ork_tensor_numel(dst))
        return ORK_FAIL(ORK_E_INVALID, "graph: copy of %lld elements into a tensor of %lld", (long long)n,
                        (long long)ork_tensor_numel(dst));
    if (src->dtype == dst->dtype)
        return g->be->memcpy_d2d(&g->k, ork_tensor_data(dst), ork_tensor_data(src), ork_tensor_nbytes(src));
    return g->be->axpby(&g->k, n, 1.0f, ork_tensor_data(src), src->dtype, 0.0f, ork_tensor_data(dst), dst->dtype);
}

ork_status ork_graph_leaf(ork_graph *g, ork_tensor *t, int requires_grad, ork_tensor **out) {
    ork_tensor *h = ork_hpool_get(g->pool, sizeof *h);
    if (!h) return ORK_FAIL(ORK_E_NOMEM, "graph: out of host memory");
    *h = *t;
    h->owner = ORK_OWN_EXTERN;
    h->alloc = NULL;
    h->flags &= ~(uint32_t)(ORK_TF_PARAM | ORK_TF_FREED);
    h->requires_grad = requires_grad != 0;
    h->grad = NULL;
    h->node = NULL;
    h->saves = 0;
    h->lora = NULL;
    *out = h;
    return ORK_OK;
}
