/* train/runner.c — see runner.h. Owns the block loop of a training step:
 * checkpoints, carry gradients, and which trailing blocks keep their recorded
 * forward instead of recomputing it. */
#include "train/runner.h"

#include "tensor/ops.h"
#include "tensor/tape.h"
#include "util/log.h"
#include "util/prof.h"

#include <stdlib.h>
#include <string.h>

/* A reusable persistent buffer and a header viewing it with the shape and
 * dtype of its current use; both persist across graph regions and steps. */
typedef struct buf {
    ork_tensor *store;  /* persistent allocation (1-D U8, cap bytes), or a view into the runner's pool */
    size_t cap;
    ork_tensor *view;   /* header over store (ork_tensor_wrap), or NULL */
} buf;

struct ork_runner {
    ork_graph *g;
    ork_alloc *a;
    const ork_model_vtable *vt;
    void *model;
    const ork_model_info *info;
    const ork_tensor_api *ta;
    int first_trainable;
    buf *ckpt;            /* [(n_blocks + 1) * ORK_CARRY_MAX]: carry at each block boundary */
    int *ckpt_n;          /* [(n_blocks + 1)]: carry.n at each boundary */
    buf dgrad[2][ORK_CARRY_MAX];
    buf fwd[2][ORK_CARRY_MAX]; /* ork_runner_forward's carry, block to block (tag "forward_carry") */
    int fwd_n[2];
    ork_block_hooks hooks;
    int *order;           /* [2 * n_blocks] the pass's block order */
    ork_tensor *pool;     /* the checkpoints as one allocation, boundary by boundary (ork_runner_pool_checkpoints) */
    size_t *pool_off;     /* [n_blocks + 2] boundary i's first byte in it; [n_blocks + 1]: its size */
    /* keep instead of recompute (runner.h) */
    int keep_req;         /* >= 0: that many blocks; < 0: automatic */
    int keep_env;         /* ORAKUL_KEEP_BLOCKS, -1 when unset */
    size_t keep_cap;      /* automatic: the allocator's cap for everything (0: keep none) */
    size_t *rec_bytes;    /* [n_blocks] arena bytes block i's recorded forward holds (measured) */
    int measured;         /* rec_bytes holds a step's measurement for every trainable block */
    int keep;             /* trailing blocks kept, decided once (-1: not yet) */
    size_t keep_sum;      /* their recorded bytes when decided */
    int64_t meas_tok;     /* the input tokens' elements of the step that measured rec_bytes */
};

ork_status ork_runner_create(ork_graph *g, ork_alloc *a, const ork_model_vtable *vt, void *model,
                             const ork_model_info *info, ork_runner **out) {
    ork_runner *r = calloc(1, sizeof *r);
    if (!r) return ORK_E_NOMEM;
    r->g = g;
    r->a = a;
    r->vt = vt;
    r->model = model;
    r->info = info;
    r->ta = ork_tensor_api_table();
    r->ckpt = calloc((size_t)(info->n_blocks + 1) * ORK_CARRY_MAX, sizeof *r->ckpt);
    r->ckpt_n = calloc((size_t)(info->n_blocks + 1), sizeof *r->ckpt_n);
    r->order = calloc((size_t)(2 * info->n_blocks + 1), sizeof *r->order);
    r->pool_off = calloc((size_t)(info->n_blocks + 2), sizeof *r->pool_off);
    r->rec_bytes = calloc((size_t)(info->n_blocks + 1), sizeof *r->rec_bytes);
    if (!r->ckpt || !r->ckpt_n || !r->order || !r->pool_off || !r->rec_bytes) {
        free(r->ckpt); free(r->ckpt_n); free(r->order); free(r->pool_off); free(r->rec_bytes); free(r);
        return ORK_E_NOMEM;
    }
    r->keep_req = 0;
    r->keep = -1;
    r->keep_env = -1;
    const char *ke = getenv("ORAKUL_KEEP_BLOCKS");
    if (ke && *ke) {
        char *end;
        long v = strtol(ke, &end, 10);
        if (*end || *ke < '0' || *ke > '9' || v > 1000000) {
            ork_runner_destroy(r);
            return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_KEEP_BLOCKS=%s: not a block count (0 or more)", ke);
        }
        r->keep_env = (int)v;
    }
    *out = r;
    return ORK_OK;
}

static void buf_free(buf *b) {
    ork_tensor_free(b->view);
    ork_tensor_free(b->store);
    memset(b, 0, sizeof *b);
}

void ork_runner_destroy(ork_runner *r) {
    if (!r) return;
    for (int i = 0; i < (r->info->n_blocks + 1) * ORK_CARRY_MAX; i++) buf_free(&r->ckpt[i]);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < ORK_CARRY_MAX; j++) {
            buf_free(&r->dgrad[k][j]);
            buf_free(&r->fwd[k][j]);
        }
    ork_tensor_free(r->pool);
    free(r->pool_off);
    free(r->rec_bytes);
    free(r->ckpt);
    free(r->ckpt_n);
    free(r->order);
    free(r);
}

void ork_runner_set_first_trainable(ork_runner *r, int block) { r->first_trainable = block; }

void ork_runner_set_keep(ork_runner *r, int keep, size_t cap_bytes) {
    r->keep_req = keep;
    r->keep_cap = cap_bytes;
    r->keep = -1; /* decided again at the next step */
}

int ork_runner_kept(const ork_runner *r, size_t *bytes) {
    int k = r->keep > 0 ? r->keep : 0;
    size_t b = 0;
    for (int i = r->info->n_blocks - k; i < r->info->n_blocks; i++) b += r->rec_bytes[i];
    if (bytes) *bytes = r->measured ? b : 0;
    return k;
}

/* Block i's recorded bytes: the most any step measured (batches differ). */
static void rec_max(ork_runner *r, int i, size_t bytes) {
    if (bytes > r->rec_bytes[i]) r->rec_bytes[i] = bytes;
}

/* K for this step: 0 until a step measured every trainable block's recorded
 * bytes, then decided once (fixed, or the most trailing blocks that fit the
 * cap beside the allocator's peak), and the arena grown to hold them in one
 * chunk. */
static ork_status decide_keep(ork_runner *r, int64_t tok) {
    const int n = r->info->n_blocks, maxk = n - r->first_trainable;
    /* a batch larger than the one measured (buckets): recompute every block
     * this step, which measures again; the next step decides anew */
    if (tok > r->meas_tok && r->measured) {
        r->measured = 0;
        r->keep = -1;
    }
    if (r->hooks.streaming || maxk <= 0) return ORK_OK; /* r->keep stays -1: recompute all */
    if (r->keep >= 0 || !r->measured) return ORK_OK;
    int req = r->keep_env >= 0 ? r->keep_env : r->keep_req;
    int k = 0;
    size_t sum = 0;
    if (req >= 0) {
        k = req < maxk ? req : maxk;
        for (int i = n - k; i < n; i++) sum += r->rec_bytes[i];
    } else if (r->keep_cap) {
        size_t peak = ork_alloc_peak(r->a), margin = ((size_t)1 << 30) + r->keep_cap / 100 * 3;
        size_t room = r->keep_cap > peak + margin ? r->keep_cap - peak - margin : 0;
        while (k < maxk && sum + r->rec_bytes[n - 1 - k] <= room) sum += r->rec_bytes[n - 1 - k++];
    }
    r->keep = k;
    r->keep_sum = sum;
    if (k > 0) {
        ork_arena *ar = r->g->arena;
        ORK_TRY(ork_arena_reserve(ar, ork_arena_peak(ar) + sum));
        ORK_INFO("recompute: %d of %d trainable blocks keep their forward instead (%.2f GiB of activations)%s", k, maxk,
                 (double)sum / 1073741824.0, req >= 0 ? " [ORAKUL_KEEP_BLOCKS or fixed]" : "");
    }
    return ORK_OK;
}

/* Between steps only (every checkpoint is dead then). */
ork_status ork_runner_pool_checkpoints(ork_runner *r) {
    if (r->pool) return ORK_OK;
    const int nb = r->info->n_blocks + 1;
    size_t total = 0, held = 0;
    for (int i = 0; i < nb; i++) {
        r->pool_off[i] = total;
        for (int j = 0; j < ORK_CARRY_MAX; j++) {
            const buf *b = &r->ckpt[i * ORK_CARRY_MAX + j];
            total += ork_alloc_round(b->cap);
            held += b->store ? b->cap : 0;
        }
    }
    r->pool_off[nb] = total;
    if (!total) return ORK_OK;
    size_t budget = ork_alloc_budget(r->a), used = ork_alloc_in_use(r->a, NULL);
    if (budget && used - held + total > budget) return ORK_E_BUDGET; /* the alignment's bytes do not fit: quietly not pooled */
    /* the buffers go first: the pool reuses their memory under the budget */
    for (int i = 0; i < nb * ORK_CARRY_MAX; i++) {
        size_t cap = r->ckpt[i].cap;
        buf_free(&r->ckpt[i]);
        r->ckpt[i].cap = cap; /* viewed in the pool below */
    }
    int64_t n = (int64_t)total;
    ork_status s = ork_tensor_new(r->a, "checkpoints", ORK_U8, 1, &n, 0, &r->pool);
    for (int i = 0; i < nb; i++) {
        size_t at = r->pool_off[i];
        for (int j = 0; j < ORK_CARRY_MAX; j++) {
            buf *b = &r->ckpt[i * ORK_CARRY_MAX + j];
            int64_t c = (int64_t)b->cap;
            if (s == ORK_OK && c)
                s = ork_tensor_wrap(r->pool->device, ORK_U8, 1, &c, (uint8_t *)ork_tensor_data(r->pool) + at, "", &b->store);
            if (s != ORK_OK || !c) b->cap = 0; /* allocated again at its next use */
            at += ork_alloc_round(b->cap);
        }
    }
    return s;
}

ork_status ork_runner_unpool_checkpoints(ork_runner *r) {
    if (!r->pool) return ORK_OK;
    for (int i = 0; i < (r->info->n_blocks + 1) * ORK_CARRY_MAX; i++) buf_free(&r->ckpt[i]);
    ork_tensor_free(r->pool);
    r->pool = NULL;
    return ORK_OK;
}

int ork_runner_checkpoint_pool(const ork_runner *r, void **dev, const size_t **off) {
    if (!r->pool) return 0;
    *dev = ork_tensor_data(r->pool);
    *off = r->pool_off;
    return r->info->n_blocks + 1;
}

void ork_runner_set_hooks(ork_runner *r, const ork_block_hooks *h) {
    if (h) r->hooks = *h;
    else memset(&r->hooks, 0, sizeof r->hooks);
}

static ork_status hook_pass_begin(ork_runner *r, int n) {
    return r->hooks.pass_begin ? r->hooks.pass_begin(r->hooks.ctx, r->order, n) : ORK_OK;
}
static ork_status hook_enter(ork_runner *r, int i) { return r->hooks.enter ? r->hooks.enter(r->hooks.ctx, i) : ORK_OK; }
static ork_status hook_leave(ork_runner *r, int i) { return r->hooks.leave ? r->hooks.leave(r->hooks.ctx, i) : ORK_OK; }
static ork_status hook_pass_end(ork_runner *r) { return r->hooks.pass_end ? r->hooks.pass_end(r->hooks.ctx) : ORK_OK; }
static ork_status hook_grads_ready(ork_runner *r, int i) {
    return r->hooks.grads_ready ? r->hooks.grads_ready(r->hooks.ctx, i) : ORK_OK;
}

/* Block i's forward inside enter/leave. */
static ork_status run_block(ork_runner *r, int i, ork_carry *c) {
    ORK_TRY(hook_enter(r, i));
    ork_status s = r->vt->block(r->model, r->g, i, c);
    ork_status s2 = hook_leave(r, i);
    return s != ORK_OK ? s : s2;
}

/* b viewed with like's shape and dtype dt, grown if needed. */
static ork_status buf_view(ork_runner *r, buf *b, const char *tag, const ork_tensor *like, ork_dtype dt,
                           ork_tensor **out) {
    size_t need = (size_t)ork_tensor_numel(like) * ork_dtype_size(dt);
    if (need > b->cap) {
        buf_free(b);
        int64_t n = (int64_t)need;
        ORK_TRY(ork_tensor_new(r->a, tag, ORK_U8, 1, &n, 0, &b->store));
        b->cap = need;
    }
    int same = b->view && b->view->dtype == dt && ork_shape_equal(b->view, like);
    if (!same) {
        ork_tensor_free(b->view);
        b->view = NULL;
        ORK_TRY(ork_tensor_wrap(b->store->device, dt, like->ndim, like->shape, ork_tensor_data(b->store), "", &b->view));
    }
    *out = b->view;
    return ORK_OK;
}

/* Keep carry c in slots[0..ORK_CARRY_MAX) (allocations under tag), its count in *n. */
static ork_status keep_into(ork_runner *r, buf *slots, int *n, const char *tag, const ork_carry *c) {
    *n = c->n;
    for (int j = 0; j < ORK_CARRY_MAX; j++) {
        buf *b = &slots[j];
        if (j >= c->n || !c->t[j]) {
            ork_tensor_free(b->view); /* the slot is empty at this boundary */
            b->view = NULL;
            continue;
        }
        ork_tensor *dst;
        ORK_TRY(buf_view(r, b, tag, c->t[j], c->t[j]->dtype, &dst));
        ORK_TRY(ork_graph_copy_to(r->g, c->t[j], dst));
    }
    return ORK_OK;
}

/* Leaves over the carry kept in slots (n of them); float activations get requires_grad. */
static ork_status leaves_from(ork_runner *r, buf *slots, int n, int want_grad, ork_carry *in) {
    memset(in, 0, sizeof *in);
    in->n = n;
    for (int j = 0; j < in->n; j++) {
        ork_tensor *kt = slots[j].view;
        if (!kt) continue;
        int fp = kt->dtype == ORK_F32 || kt->dtype == ORK_BF16 || kt->dtype == ORK_F16;
        ORK_TRY(ork_graph_leaf(r->g, kt, want_grad && fp, &in->t[j]));
    }
    return ORK_OK;
}

/* Keep carry c at block boundary i. */
static ork_status keep_carry(ork_runner *r, int i, const ork_carry *c) {
    return keep_into(r, &r->ckpt[i * ORK_CARRY_MAX], &r->ckpt_n[i], "checkpoints", c);
}

/* Leaves over the carry kept at boundary i. */
static ork_status leaves(ork_runner *r, int i, int want_grad, ork_carry *in) {
    return leaves_from(r, &r->ckpt[i * ORK_CARRY_MAX], r->ckpt_n[i], want_grad, in);
}

ork_status ork_runner_forward(ork_runner *r, const ork_model_inputs *in, ork_tensor **pred) {
    ork_graph *g = r->g;
    int prev = ork_graph_set_grad(g, 0);
    ork_carry c;
    const int n = r->info->n_blocks;
    for (int i = 0; i < n; i++) r->order[i] = i;
    ork_status s = hook_pass_begin(r, n);
    /* as the checkpointed forward: each block in a region that keeps only its
     * output carry (two slots in turn), so the arena holds one block's working
     * set at a time, not the whole forward */
    int cur = 0;
    if (s == ORK_OK) s = r->vt->begin(r->model, g, in, &c);
    if (s == ORK_OK) s = keep_into(r, r->fwd[cur], &r->fwd_n[cur], "forward_carry", &c);
    for (int i = 0; s == ORK_OK && i < n; i++) {
        ork_region reg = ork_graph_region_begin(g);
        s = hook_enter(r, i);
        if (s == ORK_OK) s = leaves_from(r, r->fwd[cur], r->fwd_n[cur], 0, &c);
        if (s == ORK_OK) s = r->vt->block(r->model, g, i, &c);
        if (s == ORK_OK) s = keep_into(r, r->fwd[!cur], &r->fwd_n[!cur], "forward_carry", &c);
        ork_graph_region_end(g, reg);
        ork_status s2 = hook_leave(r, i);
        if (s == ORK_OK) s = s2;
        cur = !cur;
    }
    if (s == ORK_OK) s = hook_pass_end(r);
    /* the prediction (carry slot 0) into the arena, valid until the graph resets */
    const ork_tensor *p = r->fwd[cur][0].view;
    if (s == ORK_OK && (r->fwd_n[cur] < 1 || !p))
        s = ORK_FAIL(ORK_E_INTERNAL, "runner: the model's last block left no prediction in its carry");
    if (s == ORK_OK) s = ork_graph_new_tensor(g, p->dtype, p->ndim, p->shape, pred);
    if (s == ORK_OK) s = ork_graph_copy_to(g, p, *pred);
    ork_graph_set_grad(g, prev);
    return s;
}

static ork_status run_loss(ork_runner *r, ork_tensor *pred, ork_loss_fn fn, void *ctx, ork_tensor **loss,
                           float *loss_out) {
    ORK_TRY(fn(ctx, r->g, pred, loss));
    float v = 0;
    ORK_TRY(r->ta->to_host(r->g, *loss, ORK_F32, &v));
    *loss_out = v;
    return ORK_OK;
}

/* ORAKUL_PROFILE: synchronised phase timers. */
static double prof_t(ork_runner *r) {
    if (!ork_prof_enabled()) return 0;
    ork_graph_sync(r->g);
    return ork_prof_now();
}
static void prof_end(ork_runner *r, const char *phase, double t0) {
    if (!ork_prof_enabled()) return;
    ork_graph_sync(r->g);
    ork_prof_add("phase", phase, ork_prof_now() - t0);
}

ork_status ork_runner_step(ork_runner *r, const ork_model_inputs *in, int checkpointing, ork_loss_fn loss_fn,
                           void *loss_ctx, float *loss_out) {
    ork_graph *g = r->g;
    const int n = r->info->n_blocks;
    ork_carry c;
    ork_tensor *loss;
    if (!checkpointing) {
        if (r->hooks.streaming)
            return ORK_FAIL(ORK_E_CONFIG, "layer offloading streams blocks and needs train.gradient_checkpointing: true");
        int prev = ork_graph_set_grad(g, 1);
        ork_status s = r->vt->begin(r->model, g, in, &c);
        for (int i = 0; s == ORK_OK && i < n; i++) s = r->vt->block(r->model, g, i, &c);
        if (s == ORK_OK) s = run_loss(r, c.t[0], loss_fn, loss_ctx, &loss, loss_out);
        if (s == ORK_OK) s = ork_backward(g, loss);
        for (int i = n - 1; s == ORK_OK && i >= r->first_trainable; i--) s = hook_grads_ready(r, i);
        ork_graph_set_grad(g, prev);
        return s;
    }
    /* blocks kstart..n-1 keep their recorded forward (no recompute) */
    int64_t tok = in && in->tokens ? ork_tensor_numel(in->tokens) : 0;
    ORK_TRY(decide_keep(r, tok));
    const int kstart = n - (r->keep > 0 ? r->keep : 0);
    /* the pass: forward 0..n-1, then recompute + backward kstart-1..first_trainable */
    int no = 0;
    for (int i = 0; i < n; i++) r->order[no++] = i;
    for (int i = kstart - 1; i >= r->first_trainable; i--) r->order[no++] = i;
    ork_status s = hook_pass_begin(r, no);
    if (s != ORK_OK) return s;
    /* forward, grad off, keeping the carry at every block boundary up to kstart */
    int prev = ork_graph_set_grad(g, 0);
    s = r->vt->begin(r->model, g, in, &c);
    if (s == ORK_OK) s = keep_carry(r, 0, &c);
    for (int i = 0; s == ORK_OK && i < kstart; i++) {
        ork_region reg = ork_graph_region_begin(g);
        s = hook_enter(r, i);
        if (s == ORK_OK) s = leaves(r, i, 0, &c);
        double tp = prof_t(r);
        if (s == ORK_OK) s = r->vt->block(r->model, g, i, &c);
        prof_end(r, "forward (no grad)", tp);
        tp = prof_t(r);
        if (s == ORK_OK) s = keep_carry(r, i + 1, &c);
        prof_end(r, "keep carry", tp);
        ork_graph_region_end(g, reg);
        if (s == ORK_OK) s = hook_leave(r, i);
    }
    if (s != ORK_OK) { ork_graph_set_grad(g, prev); return s; }
    ork_graph_set_grad(g, 1);
    int cur = 0;
    ork_tensor *dc[ORK_CARRY_MAX] = {0};
    if (kstart < n) {
        /* the kept blocks recorded from boundary kstart, the loss, one backward
         * over them all; the gradient at boundary kstart seeds the recompute */
        ork_region reg = ork_graph_region_begin(g);
        ork_carry cin = {0};
        int need_in = kstart > r->first_trainable;
        double tp = prof_t(r);
        s = leaves(r, kstart, need_in, &cin);
        c = cin;
        for (int i = kstart; s == ORK_OK && i < n; i++) {
            size_t live0 = ork_arena_live(g->arena);
            s = run_block(r, i, &c);
            rec_max(r, i, ork_arena_live(g->arena) - live0);
        }
        prof_end(r, "forward (recorded, kept)", tp);
        tp = prof_t(r);
        if (s == ORK_OK) s = run_loss(r, c.t[0], loss_fn, loss_ctx, &loss, loss_out);
        if (s == ORK_OK) s = ork_backward(g, loss);
        prof_end(r, "loss + kept blocks' backward", tp);
        for (int j = 0; s == ORK_OK && need_in && j < cin.n; j++) {
            if (!cin.t[j] || !cin.t[j]->grad) continue;
            s = buf_view(r, &r->dgrad[cur][j], "carry_grads", cin.t[j], cin.t[j]->grad->dtype, &dc[j]);
            if (s == ORK_OK) s = ork_graph_copy_to(g, cin.t[j]->grad, dc[j]);
        }
        ork_graph_region_end(g, reg);
        for (int i = n - 1; s == ORK_OK && i >= kstart; i--) s = hook_grads_ready(r, i);
    } else {
        /* loss from the final carry; its gradient seeds the backward */
        ork_region reg = ork_graph_region_begin(g);
        ork_carry last;
        double tp = prof_t(r);
        s = leaves(r, n, 1, &last);
        if (s == ORK_OK) s = run_loss(r, last.t[0], loss_fn, loss_ctx, &loss, loss_out);
        if (s == ORK_OK) s = ork_backward(g, loss);
        prof_end(r, "loss + its backward", tp);
        for (int j = 0; s == ORK_OK && j < last.n; j++) {
            if (!last.t[j] || !last.t[j]->grad) continue;
            s = buf_view(r, &r->dgrad[cur][j], "carry_grads", last.t[j], last.t[j]->grad->dtype, &dc[j]);
            if (s == ORK_OK) s = ork_graph_copy_to(g, last.t[j]->grad, dc[j]);
        }
        ork_graph_region_end(g, reg);
    }
    /* backward through the blocks in reverse, recomputing each from its input */
    for (int i = kstart - 1; s == ORK_OK && i >= r->first_trainable; i--) {
        ork_region reg = ork_graph_region_begin(g);
        ork_carry cin = {0}, cout; /* cin: read below even when leaves() failed */
        int need_in = i > r->first_trainable;
        s = hook_enter(r, i);
        if (s == ORK_OK) s = leaves(r, i, need_in, &cin);
        cout = cin;
        double tp = prof_t(r);
        size_t live0 = ork_arena_live(g->arena);
        if (s == ORK_OK) s = r->vt->block(r->model, g, i, &cout);
        rec_max(r, i, ork_arena_live(g->arena) - live0);
        prof_end(r, "recompute (recorded)", tp);
        tp = prof_t(r);
        if (s == ORK_OK) s = ork_backward_from(g, cout.n, cout.t, dc);
        prof_end(r, "backward", tp);
        ork_tensor *ndc[ORK_CARRY_MAX] = {0};
        for (int j = 0; s == ORK_OK && need_in && j < cin.n; j++) {
            if (!cin.t[j] || !cin.t[j]->grad) continue;
            s = buf_view(r, &r->dgrad[!cur][j], "carry_grads", cin.t[j], cin.t[j]->grad->dtype, &ndc[j]);
            if (s == ORK_OK) s = ork_graph_copy_to(g, cin.t[j]->grad, ndc[j]);
        }
        ork_graph_region_end(g, reg);
        if (s == ORK_OK) s = hook_leave(r, i);
        if (s == ORK_OK) s = hook_grads_ready(r, i);
        memcpy(dc, ndc, sizeof dc);
        cur = !cur;
    }
    if (s == ORK_OK) {
        r->measured = 1;
        r->meas_tok = tok > r->meas_tok ? tok : r->meas_tok;
        /* automatic: a batch whose kept blocks outgrew the decision decides again */
        size_t kb = 0;
        for (int i = kstart; i < n; i++) kb += r->rec_bytes[i];
        if (kstart < n && r->keep_env < 0 && r->keep_req < 0 && kb > r->keep_sum) r->keep = -1;
    }
    if (s == ORK_OK) s = hook_pass_end(r);
    ork_graph_set_grad(g, prev);
    return s;
}
