/* dist/grad_sync.c — see grad_sync.h. Owns the flat gradient buffer and the views. */
#include "dist/grad_sync.h"

#include "tensor/tensor.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

struct ork_gsync {
    ork_dist *d;
    ork_graph *g;
    ork_tensor **params;
    int n;
    ork_tensor *flat;        /* F32 (plan.total) */
    ork_tensor **views;      /* [n] the grad headers we installed */
    ork_bucket_plan plan;
    ork_block_hooks inner;
    int armed;
    int launched_any;        /* this pass: the comm stream already waits for the compute stream once */
};

ork_status ork_gsync_create(ork_dist *d, ork_graph *g, ork_alloc *a, ork_tensor **params, const int *block, int n,
                            int n_blocks, int64_t bucket_bytes, ork_gsync **out) {
    *out = NULL;
    ork_gsync *s = calloc(1, sizeof *s);
    int64_t *numel = calloc((size_t)n + 1, sizeof *numel);
    if (!s || !numel) { free(s); free(numel); return ORK_E_NOMEM; }
    s->d = d;
    s->g = g;
    s->params = params;
    s->n = n;
    for (int i = 0; i < n; i++) numel[i] = ork_tensor_numel(params[i]);
    int64_t cap = bucket_bytes / 4 > 0 ? bucket_bytes / 4 : 1;
    ork_status st = ork_bucket_plan_make(n, numel, block, n_blocks, cap, 64, &s->plan);
    free(numel);
    int64_t total = s->plan.total > 0 ? s->plan.total : 1;
    if (st == ORK_OK) st = ork_tensor_new(a, "grads", ORK_F32, 1, &total, 0, &s->flat);
    if (st == ORK_OK) st = g->be->fill(&g->k, total, 0.0f, ork_tensor_data(s->flat), ORK_F32);
    if (st == ORK_OK && !(s->views = calloc((size_t)n + 1, sizeof *s->views))) st = ORK_E_NOMEM;
    for (int i = 0; st == ORK_OK && i < n; i++) {
        ork_tensor *t = params[i];
        float *at = (float *)ork_tensor_data(s->flat) + s->plan.offset[i];
        st = ork_tensor_wrap(t->device, ORK_F32, t->ndim, t->shape, at, NULL, &s->views[i]);
        if (st != ORK_OK) break;
        if (t->grad && t->grad->owner == ORK_OWN_ALLOC) ork_tensor_free(t->grad);
        t->grad = s->views[i];
    }
    if (st != ORK_OK) { ork_gsync_destroy(s); return st; }
    ORK_INFO("distributed: %d LoRA gradients (%.1f MiB) all-reduced in %d bucket%s of at most %.0f MiB, overlapped "
             "with the backward", n, (double)s->plan.total * 4 / 1048576.0, s->plan.n_buckets,
             s->plan.n_buckets == 1 ? "" : "s", (double)bucket_bytes / 1048576.0);
    *out = s;
    return ORK_OK;
}

void ork_gsync_destroy(ork_gsync *s) {
    if (!s) return;
    for (int i = 0; s->views && i < s->n; i++) {
        if (s->params[i]->grad == s->views[i]) s->params[i]->grad = NULL;
        ork_tensor_free(s->views[i]);
    }
    free(s->views);
    ork_tensor_free(s->flat);
    ork_bucket_plan_free(&s->plan);
    free(s);
}

const ork_bucket_plan *ork_gsync_plan(const ork_gsync *s) { return &s->plan; }

int64_t ork_gsync_bucket_bytes(void) {
    const char *e = getenv("ORAKUL_DIST_BUCKET_MB");
    if (!e || !*e) return (int64_t)50 << 20;
    char *end;
    double mb = strtod(e, &end);
    if (*end || !(mb >= 1 && mb <= 4096)) {
        ORK_WARN("ORAKUL_DIST_BUCKET_MB='%s': must be 1..4096 (MiB); using 50", e);
        return (int64_t)50 << 20;
    }
    return (int64_t)(mb * 1048576.0);
}

void ork_gsync_arm(ork_gsync *s, int on) {
    if (on) {
        ork_bucket_reset(&s->plan);
        s->launched_any = 0;
    }
    s->armed = on;
}

/* All-reduce buckets [first, first + n) on the communication stream, after the compute stream's work so far. */
static ork_status launch(ork_gsync *s, int first, int n) {
    if (n <= 0) return ORK_OK;
    ORK_TRY(ork_dist_comm_after_compute(s->d));
    s->launched_any = 1;
    float *base = ork_tensor_data(s->flat);
    for (int k = first; k < first + n; k++) {
        size_t count = (size_t)(s->plan.end[k] - s->plan.begin[k]);
        if (count == 0) continue;
        ORK_TRY(ork_nccl_allreduce(ork_dist_comm(s->d), base + s->plan.begin[k], base + s->plan.begin[k], count,
                                   ORK_NCCL_FLOAT32, ORK_NCCL_AVG, ork_dist_stream(s->d)));
    }
    return ORK_OK;
}

ork_status ork_gsync_finish(ork_gsync *s) {
    if (!s->armed) ork_gsync_arm(s, 1); /* nothing launched during the backward: everything now */
    int first, n = ork_bucket_flush(&s->plan, &first);
    ork_status st = launch(s, first, n);
    s->armed = 0;
    ORK_TRY(st);
    return ork_dist_compute_after_comm(s->d);
}

/* ---- hooks: the inner ones first ------------------------------------------ */

static ork_status h_pass_begin(void *ctx, const int *order, int n) {
    ork_gsync *s = ctx;
    return s->inner.pass_begin ? s->inner.pass_begin(s->inner.ctx, order, n) : ORK_OK;
}
static ork_status h_enter(void *ctx, int b) {
    ork_gsync *s = ctx;
    return s->inner.enter ? s->inner.enter(s->inner.ctx, b) : ORK_OK;
}
static ork_status h_leave(void *ctx, int b) {
    ork_gsync *s = ctx;
    return s->inner.leave ? s->inner.leave(s->inner.ctx, b) : ORK_OK;
}
static ork_status h_pass_end(void *ctx) {
    ork_gsync *s = ctx;
    return s->inner.pass_end ? s->inner.pass_end(s->inner.ctx) : ORK_OK;
}
static ork_status h_grads_ready(void *ctx, int b) {
    ork_gsync *s = ctx;
    if (s->inner.grads_ready) ORK_TRY(s->inner.grads_ready(s->inner.ctx, b));
    if (!s->armed) return ORK_OK;
    int first, n = ork_bucket_block_done(&s->plan, b, &first);
    return launch(s, first, n);
}

void ork_gsync_hooks(ork_gsync *s, const ork_block_hooks *inner, ork_block_hooks *out) {
    if (inner) s->inner = *inner;
    else memset(&s->inner, 0, sizeof s->inner);
    memset(out, 0, sizeof *out);
    out->ctx = s;
    out->streaming = s->inner.streaming;
    out->pass_begin = h_pass_begin;
    out->enter = h_enter;
    out->leave = h_leave;
    out->pass_end = h_pass_end;
    out->grads_ready = h_grads_ready;
}
