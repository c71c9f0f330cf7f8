/* tensor/tape.c — see tape.h. Owns the node list of one graph. */
#include "tensor/tape.h"

#include "util/log.h"
#include "util/prof.h"

#include <stdlib.h>
#include <string.h>

struct ork_tape {
    ork_tape_node **nodes;
    size_t len, cap;
};

ork_status ork_tape_create(ork_tape **out) {
    *out = calloc(1, sizeof **out);
    return *out ? ORK_OK : ORK_FAIL(ORK_E_NOMEM, "tape: out of host memory");
}

void ork_tape_destroy(ork_tape *t) {
    if (!t) return;
    free(t->nodes);
    free(t);
}

size_t ork_tape_len(const ork_tape *t) { return t->len; }
void ork_tape_truncate(ork_tape *t, size_t len) {
    if (len < t->len) t->len = len;
}

int ork_tape_wants(const ork_graph *g, int nin, ork_tensor *const *in) {
    if (!g->grad_enabled) return 0;
    for (int i = 0; i < nin; i++)
        if (in[i] && in[i]->requires_grad) return 1;
    return 0;
}

ork_status ork_tape_push(ork_graph *g, const char *op, ork_bwd_fn bwd, int nin, ork_tensor *const *in,
                         int nout, ork_tensor *const *out, ork_tape_node **node) {
    ork_tape *t = g->tape;
    if (t->len == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        ork_tape_node **n = realloc(t->nodes, cap * sizeof *n);
        if (!n) return ORK_FAIL(ORK_E_NOMEM, "tape: out of host memory");
        t->nodes = n;
        t->cap = cap;
    }
    ork_tape_node *n = ork_hpool_get(g->pool, sizeof *n);
    ork_tensor **io = ork_hpool_get(g->pool, (size_t)(nin + nout) * sizeof *io);
    if (!n || !io) return ORK_FAIL(ORK_E_NOMEM, "tape: out of host memory");
    n->op = op;
    n->bwd = bwd;
    n->nin = nin;
    n->nout = nout;
    n->in = io;
    n->out = io + nin;
    memcpy(n->in, in, (size_t)nin * sizeof *io);
    memcpy(n->out, out, (size_t)nout * sizeof *io);
    for (int i = 0; i < nout; i++) {
        out[i]->requires_grad = 1;
        out[i]->node = n;
    }
    t->nodes[t->len++] = n;
    *node = n;
    return ORK_OK;
}

void ork_tape_save(ork_tape_node *n, ork_tensor *t) {
    if (!t || n->nsaved == ORK_NODE_MAX_SAVED) return;
    n->saved[n->nsaved++] = t;
    t->saves++;
}

/* Free t's arena block when nothing needs it any more. */
static void maybe_free_data(ork_graph *g, ork_tensor *t) {
    if (t->saves > 0 || t->owner != ORK_OWN_GRAPH || !t->node || (t->flags & (ORK_TF_KEEP | ORK_TF_FREED)))
        return;
    if (t->flags & ORK_TF_VIEWED) return; /* shares storage with a view */
    if (t->offset != 0) return;           /* a view itself */
    ork_arena_put(g->arena, t->base);
    t->flags |= ORK_TF_FREED;
}

static void drop_grad(ork_graph *g, ork_tensor *t) {
    if (!t->grad || (t->flags & ORK_TF_KEEP) || t->owner != ORK_OWN_GRAPH) return;
    ork_tensor *gr = t->grad;
    if (gr->owner == ORK_OWN_GRAPH && !(gr->flags & ORK_TF_FREED) && gr->offset == 0) {
        ork_arena_put(g->arena, gr->base);
        gr->flags |= ORK_TF_FREED;
    }
    t->grad = NULL;
}

ork_status ork_grad_new(ork_graph *g, const ork_tensor *t, ork_dtype dt, ork_tensor **dx) {
    return ork_graph_new_tensor(g, dt, t->ndim, t->shape, dx);
}

ork_status ork_grad_param(ork_graph *g, ork_tensor *t, float **buf) {
    *buf = NULL;
    if (!t || !t->requires_grad || !(t->flags & ORK_TF_PARAM)) return ORK_OK;
    if (!t->grad) {
        ork_tensor *gr;
        size_t nb = ork_grad_pool_bytes(ork_tensor_numel(t));
        if (g->grad_pool && g->grad_pool_used + nb <= g->grad_pool_bytes) { /* a header over the pool */
            ORK_TRY(ork_tensor_wrap(g->be->device, ORK_F32, t->ndim, t->shape, g->grad_pool + g->grad_pool_used, NULL, &gr));
            g->grad_pool_used += nb;
        } else {
            ORK_TRY(ork_tensor_new(t->alloc, "grads", ORK_F32, t->ndim, t->shape, 0, &gr));
        }
        ork_status s = g->be->fill(&g->k, ork_tensor_numel(gr), 0.0f, ork_tensor_data(gr), ORK_F32);
        if (s != ORK_OK) { ork_tensor_free(gr); return s; }
        t->grad = gr;
    }
    *buf = ork_tensor_data(t->grad);
    return ORK_OK;
}

ork_status ork_grad_push(ork_graph *g, ork_tensor *t, ork_tensor *dx) {
    if (!t->requires_grad) goto drop;
    int64_t n = ork_tensor_numel(t);
    if (t->flags & ORK_TF_PARAM) {
        float *buf;
        ORK_TRY(ork_grad_param(g, t, &buf));
        ORK_TRY(g->be->axpby(&g->k, n, 1.0f, ork_tensor_data(dx), dx->dtype, 1.0f, buf, ORK_F32));
        goto drop;
    }
    if (!t->grad) {
        if (dx->dtype == t->dtype) { t->grad = dx; return ORK_OK; }
        ork_tensor *gr;
        ORK_TRY(ork_grad_new(g, t, t->dtype, &gr));
        ORK_TRY(g->be->axpby(&g->k, n, 1.0f, ork_tensor_data(dx), dx->dtype, 0.0f, ork_tensor_data(gr),
                             gr->dtype));
        t->grad = gr;
        goto drop;
    }
    ORK_TRY(g->be->axpby(&g->k, n, 1.0f, ork_tensor_data(dx), dx->dtype, 1.0f, ork_tensor_data(t->grad),
                         t->grad->dtype));
drop:
    if (dx->owner == ORK_OWN_GRAPH && dx->offset == 0 && !(dx->flags & ORK_TF_FREED)) {
        ork_arena_put(g->arena, dx->base);
        dx->flags |= ORK_TF_FREED;
    }
    return ORK_OK;
}

static void node_release(ork_graph *g, ork_tape_node *n) {
    for (int i = 0; i < n->nsaved; i++) {
        n->saved[i]->saves--;
        maybe_free_data(g, n->saved[i]);
    }
    n->nsaved = 0;
    for (int i = 0; i < n->naux; i++) ork_arena_put(g->arena, n->aux[i]);
    n->naux = 0;
    for (int i = 0; i < n->nout; i++) {
        drop_grad(g, n->out[i]);
        maybe_free_data(g, n->out[i]);
    }
}

static ork_status run_backward(ork_graph *g) {
    ork_tape *t = g->tape;
    ork_status s = ORK_OK;
    for (size_t k = t->len; k-- > 0;) {
        ork_tape_node *n = t->nodes[k];
        int any = 0;
        for (int i = 0; i < n->nout; i++) any |= n->out[i]->grad != NULL;
        if (any && s == ORK_OK) {
            double t0 = 0;
            if (ork_prof_enabled()) { g->be->sync(&g->k); t0 = ork_prof_now(); }
            s = n->bwd(g, n);
            if (ork_prof_enabled()) { g->be->sync(&g->k); ork_prof_add("bwd", n->op, ork_prof_now() - t0); }
            if (s != ORK_OK) ORK_ERROR("backward: op %s (node %zu) failed: %s", n->op, k, ork_status_str(s));
        }
        node_release(g, n);
        for (int i = 0; i < n->nout; i++) n->out[i]->node = NULL;
    }
    t->len = 0;
    return s;
}

ork_status ork_backward(ork_graph *g, ork_tensor *loss) {
    if (ork_tensor_numel(loss) != 1)
        return ORK_FAIL(ORK_E_INVALID, "backward: the loss must have one element, got %lld",
                        (long long)ork_tensor_numel(loss));
    if (!loss->requires_grad)
        return ORK_FAIL(ORK_E_INVALID, "backward: the loss does not depend on anything that requires grad");
    ork_tensor *seed;
    loss->flags |= ORK_TF_KEEP; /* the caller reads the loss value afterwards */
    ORK_TRY(ork_grad_new(g, loss, loss->dtype, &seed));
    ORK_TRY(g->be->fill(&g->k, 1, 1.0f, ork_tensor_data(seed), seed->dtype));
    ORK_TRY(ork_grad_push(g, loss, seed));
    return run_backward(g);
}

ork_status ork_backward_from(ork_graph *g, int n, ork_tensor *const *outs, ork_tensor *const *grads) {
    for (int i = 0; i < n; i++) {
        if (!outs[i] || !grads[i] || !outs[i]->requires_grad) continue;
        if (ork_tensor_numel(outs[i]) != ork_tensor_numel(grads[i])) {
            char a[96], b[96];
            return ORK_FAIL(ORK_E_INVALID, "backward: output %d is %s but its gradient is %s", i,
                            ork_tensor_str(outs[i], a, sizeof a), ork_tensor_str(grads[i], b, sizeof b));
        }
        ork_tensor *seed;
        outs[i]->flags |= ORK_TF_KEEP;
        ORK_TRY(ork_grad_new(g, outs[i], outs[i]->dtype, &seed));
        ORK_TRY(g->be->axpby(&g->k, ork_tensor_numel(seed), 1.0f, ork_tensor_data(grads[i]), grads[i]->dtype,
                             0.0f, ork_tensor_data(seed), seed->dtype));
        ORK_TRY(ork_grad_push(g, outs[i], seed));
    }
    return run_backward(g);
}
