/* train/state_stream.c — the trainable state streamed per block
 * (plan->trainable_streamed, docs/streaming.md §4; the runtime is
 * stream/trainable_stream.h): the LoRA tensors and their optimizer state live in pinned
 * host records, a block's tensors point at a device slot while the block is in
 * use (the runner's hooks here, after the weight store's), the optimizer steps
 * each block right after its backward, and the records are what the
 * checkpoint and the LoRA file read. [control-thread] */
#include "train/job.h"

#include "numerics/half.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* The per-block optimizer step the runtime calls at grads_ready (grads already
 * scaled by the previous step's clip factor). */
static ork_status state_step_cb(void *ctx, int block, ork_opt_param *ps, const int32_t *ids, int n) {
    job *j = ctx;
    (void)block;
    ork_opt_step st = {.abi = ORK_ABI_INIT(ork_opt_step), .step = j->cur_step, .lr = j->cur_lr, .grad_scale = 1.0f,
                       .device = j->be->device, .stream = j->g->k.stream, .seed = j->seed, .param_ids = ids};
    if (n) ORK_TRY(j->ovt->step(j->opt, &st, ps, n));
    return ork_train_ema_block(j, ps, ids, n); /* the shadows after the step (ema.c) */
}

/* The streamed trainable state clips step s with step s-1's norm (trainable_stream.h): when
 * that factor is not the one exact clipping gives for step s's own norm, say so
 * once and count it (the run's end reports how often). */
void ork_train_streamed_clip_check(job *j, int64_t step, double norm, float applied) {
    double mx = j->p->train.max_grad_norm;
    float exact = ork_clip_factor(mx, norm);
    if (applied == exact) return;
    if (!j->clip_differed++)
        ORK_WARN("step %lld: gradient norm %g against max_grad_norm %g: the streamed trainable state clipped it with "
                 "the previous step's norm (factor %.4g, exact clipping gives %.4g; docs/streaming.md §4) — said once, "
                 "counted to the end", (long long)step, norm, mx, (double)applied, (double)exact);
}

/* Point block b's LoRA tensors (and their grad headers) at its slot, or at nothing. */
static void state_point(job *j, int b, int on) {
    if (b < 0 || b >= j->info.n_blocks) return;
    for (int q = j->block_param_first[b]; q < j->block_param_first[b + 1]; q++) {
        int i = j->block_params[q];
        ork_tensor *t = j->pt[i];
        t->base = on ? ork_tstream_data(j->tstream, i) : NULL;
        t->offset = 0;
        /* a forward visit may read the parameter's BF16 shadow (trainable_stream.h) */
        t->dtype = on ? ork_tstream_data_dtype(j->tstream, i) : ork_tstream_get_layout(j->tstream)->params[i].dtype;
        t->grad->base = on ? (void *)ork_tstream_grad(j->tstream, i) : NULL;
        t->grad->offset = 0;
    }
}

/* The runner's hooks: the weight store's first, then the runtime's. */
static ork_status state_pass_begin(void *ctx, const int *order, int n) {
    job *j = ctx;
    if (j->ws_hooks.pass_begin) ORK_TRY(j->ws_hooks.pass_begin(j->ws_hooks.ctx, order, n));
    return ork_tstream_pass_begin(j->tstream, order, n);
}
static ork_status state_enter(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.enter) ORK_TRY(j->ws_hooks.enter(j->ws_hooks.ctx, b));
    ORK_TRY(ork_tstream_enter(j->tstream, b));
    state_point(j, b, 1);
    return ORK_OK;
}
static ork_status state_leave(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.leave) ORK_TRY(j->ws_hooks.leave(j->ws_hooks.ctx, b));
    state_point(j, b, 0);
    return ork_tstream_leave(j->tstream, b);
}
static ork_status state_pass_end(void *ctx) {
    job *j = ctx;
    if (j->ws_hooks.pass_end) ORK_TRY(j->ws_hooks.pass_end(j->ws_hooks.ctx));
    return ork_tstream_pass_end(j->tstream);
}
static ork_status state_grads_ready(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.grads_ready) ORK_TRY(j->ws_hooks.grads_ready(j->ws_hooks.ctx, b));
    return ork_tstream_grads_ready(j->tstream, b);
}

/* The runner's hooks when the trainable state streams (the sampler's too). */
ork_block_hooks ork_train_streamed_hooks(job *j) {
    ork_block_hooks h = {.ctx = j, .streaming = 1, .pass_begin = state_pass_begin, .enter = state_enter, .leave = state_leave,
                         .pass_end = state_pass_end, .grads_ready = state_grads_ready};
    return h;
}

/* ork_lora_save's reader: parameter values from the host records. */
static ork_status state_reader(void *ctx, const ork_tensor *t, float *host) {
    job *j = ctx;
    const ork_tstream_layout *L = ork_tstream_get_layout(j->tstream);
    for (int i = 0; i < j->n_params; i++) {
        if (j->pt[i] != t) continue;
        const ork_tstream_param *p = &L->params[i];
        const char *src = (const char *)ork_tstream_host(j->tstream, p->block) + p->data_offset;
        if (p->dtype == ORK_F32) memcpy(host, src, p->data_bytes);
        else ork_bf16_to_f32_n((const uint16_t *)src, (size_t)p->numel, host);
        return ORK_OK;
    }
    return ORK_FAIL(ORK_E_INTERNAL, "LoRA save: a tensor that is not a trained parameter");
}

void ork_train_streamed_reader(job *j) { ork_lora_set_reader(j->lora, state_reader, j); }

/* ork_lora_init's sink when the trainable state streams: tensor i's initial
 * values into its block's host record, in the tensor's dtype (the same
 * rounding as the resident upload, so both runs start bit-identical). */
static ork_status state_init_cb(void *ctx, int i, ork_tensor *t, const float *host) {
    job *j = ctx;
    const ork_tstream_param *p = &ork_tstream_get_layout(j->tstream)->params[i];
    char *dst = (char *)ork_tstream_host(j->tstream, p->block) + p->data_offset;
    size_t n = (size_t)ork_tensor_numel(t);
    if (t->dtype == ORK_F32) memcpy(dst, host, n * sizeof *host);
    else ork_bf16_from_f32(host, n, (uint16_t *)dst);
    /* the EMA's shadow starts as the parameter (as rounded to its dtype) */
    ork_train_ema_init_record(j, i, (char *)ork_tstream_host(j->tstream, p->block) + p->state_offset, t->dtype, dst);
    return ORK_OK;
}

/* Build the runtime from the LoRA tensors, move their values into the host
 * records, free their device memory (the tensors become headers pointed at
 * the block's slot while the block is in use) and install the hooks. */

ork_status ork_train_streamed_setup(job *j) {
    int np = j->n_params, nb = j->info.n_blocks;
    int *blk = calloc((size_t)np + 1, sizeof *blk);
    ork_dtype *dt = calloc((size_t)np + 1, sizeof *dt);
    int64_t *numel = calloc((size_t)np + 1, sizeof *numel);
    size_t *sb = calloc((size_t)np + 1, sizeof *sb);
    j->block_param_first = calloc((size_t)nb + 2, sizeof *j->block_param_first);
    j->block_params = calloc((size_t)np + 1, sizeof *j->block_params);
    ork_status s = (blk && dt && numel && sb && j->block_param_first && j->block_params) ? ORK_OK : ORK_E_NOMEM;
    for (int i = 0; s == ORK_OK && i < np; i++) {
        blk[i] = ork_lora_block(j->lora, i / 2);
        dt[i] = j->pt[i]->dtype;
        numel[i] = ork_tensor_numel(j->pt[i]);
        s = j->ovt->state_bytes(j->opt, dt[i], numel[i], &sb[i]);
        sb[i] = ork_train_ema_state_bytes(j, i, sb[i]); /* the EMA's shadow after the optimizer's state */
    }
    /* ORAKUL_TRAINABLE_CHUNKS=1 (old name ORAKUL_ZERO_CHUNKS): the whole record out before
     * the next load (bench A/B) */
    const char *chunks = ork_train_getenv("ORAKUL_TRAINABLE_CHUNKS", "ORAKUL_ZERO_CHUNKS");
    /* BF16 activations: forward visits read BF16 shadows of the F32 masters
     * (what the linear op would cast them to; half the bytes over PCIe) */
    ork_tstream_opts o = {nb, np, blk, dt, numel, sb, ORK_TRAIN_STATE_SLOTS, j->plan->n_streamed > 0 ? ork_streamer_n_events(j->plan->n_slots) : 0,
                       j->p->train.max_grad_norm, state_step_cb, j,
                       j->plan->lora_shadow && j->g->act_dt == ORK_BF16 ? ORK_BF16 : 0,
                       chunks ? atoi(chunks) : 0};
    if (s == ORK_OK) s = ork_tstream_create(j->ce, j->alloc, j->be, &j->g->k, &o, &j->tstream);
    free(blk); free(dt); free(numel); free(sb);
    ORK_TRY(s);
    /* ORAKUL_TRAINABLE_AHEAD=0 (old name ORAKUL_ZERO_AHEAD), bench A/B: the first loads at pass_begin */
    if (ork_train_switched_off("ORAKUL_TRAINABLE_AHEAD", "ORAKUL_ZERO_AHEAD")) ork_tstream_set_ahead(j->tstream, 0);
    const ork_tstream_layout *L = ork_tstream_get_layout(j->tstream);
    for (int i = 0; i < np; i++) {
        ork_tensor *t = j->pt[i];
        const ork_tstream_param *p = &L->params[i];
        ork_tensor *gr;
        ORK_TRY(ork_tensor_wrap(j->be->device, ORK_F32, t->ndim, t->shape, NULL, NULL, &gr));
        if (t->grad && t->grad->owner == ORK_OWN_ALLOC) ork_tensor_free(t->grad);
        t->grad = gr; /* the LoRA was created deferred: t has no device memory */
        j->block_param_first[p->block + 1]++;
    }
    ORK_TRY(ork_lora_init(j->lora, state_init_cb, j)); /* initial values straight into the host records */
    ork_tstream_refresh_shadows(j->tstream);
    for (int b = 0; b < nb; b++) j->block_param_first[b + 1] += j->block_param_first[b];
    int *fill = calloc((size_t)nb + 1, sizeof *fill);
    if (!fill) return ORK_E_NOMEM;
    for (int i = 0; i < np; i++) {
        int b = L->params[i].block;
        j->block_params[j->block_param_first[b] + fill[b]++] = i;
    }
    free(fill);
    ork_lora_set_reader(j->lora, state_reader, j);
    ork_block_hooks h = ork_train_streamed_hooks(j);
    ork_runner_set_hooks(j->runner, &h);
    size_t host = 0;
    for (int b = 0; b < nb; b++) host += L->block_bytes[b];
    ORK_INFO("trainable state streamed per block: %.1f MiB of LoRA + optimizer state in pinned host records, "
             "%d device slots of %.1f MiB%s", (double)host / 1048576.0, ORK_TRAIN_STATE_SLOTS, (double)L->max_block_bytes / 1048576.0,
             o.shadow_dt == ORK_BF16 ? "; BF16 shadows for the forward pass" : "");
    return ORK_OK;
}

/* ---- the records in the training state (checkpoint.c) --------------------- */

/* Streamed: parameter i's data and optimizer state in its block's host record
 * (read or written between passes only: after ork_tstream_sync). */
static char *state_part(job *j, int i, int state, size_t *nbytes) {
    const ork_tstream_param *p = &ork_tstream_get_layout(j->tstream)->params[i];
    *nbytes = state ? (j->ema_on ? j->opt_bytes[i] : p->state_bytes) : p->data_bytes; /* the EMA's: ema.c */
    return (char *)ork_tstream_host(j->tstream, p->block) + (state ? p->state_offset : p->data_offset);
}

/* The same tensors as the resident state (lora.i in its dtype, opt.i as U8 of
 * at least one byte), from the host records. */
ork_status ork_train_streamed_save(job *j, ork_st_writer *w) {
    static const uint8_t pad = 0;
    ORK_TRY(ork_tstream_sync(j->tstream));
    for (int i = 0; i < j->n_params; i++) {
        size_t nd, ns;
        char *d = state_part(j, i, 0, &nd), *st = state_part(j, i, 1, &ns), key[64];
        snprintf(key, sizeof key, "lora.%d", i);
        ORK_TRY(ork_st_writer_add(w, key, j->pt[i]->dtype, j->pt[i]->ndim, j->pt[i]->shape, d, nd));
        int64_t n = (int64_t)(ns ? ns : 1);
        snprintf(key, sizeof key, "opt.%d", i);
        ORK_TRY(ork_st_writer_add(w, key, ORK_U8, 1, &n, ns ? (const void *)st : (const void *)&pad, (size_t)n));
    }
    return ORK_OK;
}

ork_status ork_train_streamed_load(job *j, ork_st_file *f, const char *path) {
    ORK_TRY(ork_tstream_sync(j->tstream));
    for (int i = 0; i < j->n_params; i++)
        for (int q = 0; q < 2; q++) {
            size_t nb;
            char *h = state_part(j, i, q, &nb), key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            const ork_st_tensor *t = ork_st_find(f, key);
            size_t want = q && nb == 0 ? 1 : nb;
            if (!t || t->dtype != (q ? ORK_U8 : j->pt[i]->dtype) || t->nbytes != want)
                return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or has the wrong size", path, key);
            memcpy(h, t->data, nb);
        }
    ork_tstream_refresh_shadows(j->tstream);
    const char *pn = ork_st_meta(f, "prev_norm");
    ork_tstream_set_prev_norm(j->tstream, pn ? strtod(pn, NULL) : 0.0);
    return ORK_OK;
}
