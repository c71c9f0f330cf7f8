/* train/plan_glue.c — the job and the residency plan (core/stream/plan.h):
 * the plan's inputs from the config, the device and the environment; the
 * plan's pinned host memory against the machine's; and what the streamer
 * borrows from the job: the LoRA gradients' memory between backward passes
 * (lent before the forward, reclaimed after it) and the pooled checkpoints as
 * its ahead region. [control-thread] */
#include "train/job.h"

#include "plugin/model_decl.h"
#include "train/lora.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

/* LoKr (network.type lokr, train/lora.h): over the default targets, the
 * largest transient the linear op builds (W + kron(w1, w2) and its chunks,
 * ork_plan_lokr_transient) and the largest of w1 (a, c), w2 (b, d) or its
 * low-rank pair (the EMA's scratch), with lora.c's factorization. */
static void lokr_sizes(const job *j, ork_plan_inputs *in) {
    const ork_network_config *nc = &j->p->network;
    size_t worst = 0;
    int64_t big = 0;
    for (int i = 0; i < j->info.n_weights; i++) {
        const ork_weight_decl *d = &j->info.weights[i];
        size_t len = strlen(d->name);
        char module[192];
        if (!(d->flags & ORK_WEIGHT_LINEAR) || d->ndim != 2 || len < 8 || strcmp(d->name + len - 7, ".weight")) continue;
        snprintf(module, sizeof module, "%.*s", (int)(len - 7), d->name);
        if (!ork_model_lora_default_target(&j->info, d, module)) continue;
        int64_t N = d->shape[0], K = d->shape[1], a, b, c, dd;
        ork_lokr_factorization(N, nc->lokr_factor, &a, &b);
        ork_lokr_factorization(K, nc->lokr_factor, &c, &dd);
        size_t t = ork_plan_lokr_transient(N, K, a, c, in->act_bytes);
        if (t > worst) worst = t;
        int64_t w2 = !nc->lokr_full_rank && (double)nc->linear < (double)(b > dd ? b : dd) / 2.0 ? (b + dd) * nc->linear
                                                                                                : b * dd;
        if (a * c > big) big = a * c;
        if (w2 > big) big = w2;
    }
    in->adapter_transient = worst;
    in->lora_max_tensor = big;
}

/* The residency plan (core/stream/plan.h) from the config: what stays on the
 * device and what streams, checked against the budget before step 1. */
ork_status ork_train_make_plan(job *j, ork_device dev) {
    ork_plan_inputs in;
    memset(&in, 0, sizeof in);
    in.info = &j->info;
    size_t free_b = 0;
    const char *kind = dev == ORK_DEV_CPU ? "cpu" : "h200";
#ifdef ORAKUL_HAVE_CUDA
    size_t total_b = 0;
    char name[256] = "";
    if (dev == ORK_DEV_CUDA && ork_cuda_device_count() > 0 && ork_cuda_mem_info(j->device_index, &free_b, &total_b, name, sizeof name) == ORK_OK)
        kind = strstr(name, "4090") ? "rtx4090" : strstr(name, "H100") ? "h100" : "h200";
#endif
    /* ORAKUL_PLAN_DEVICE=rtx4090|h100|h200: plan for another card (its rates and
     * memory) than the one present — `orakul plan` for the card you will train on */
    const char *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (pd && *pd) {
        ork_device_kind k;
        if (!ork_device_kind_find(pd, &k))
            return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_PLAN_DEVICE=%s: not a known device kind (h200, h100, rtx4090)", pd);
        kind = pd;
        free_b = 0;
    }
    if (!ork_device_kind_find(kind, &in.dev)) return ORK_FAIL(ORK_E_INTERNAL, "no device kind '%s'", kind);
    /* ORAKUL_PLAN_MFU: the fraction of the card's bf16 peak a step achieves, for
     * the prediction only (0.5 by default; the H200 resident runs measure 0.40-0.52) */
    const char *mf = getenv("ORAKUL_PLAN_MFU");
    if (mf && *mf) {
        char *end;
        double m = strtod(mf, &end);
        if (*end || !(m > 0 && m <= 1)) return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_PLAN_MFU=%s: not a fraction in (0, 1]", mf);
        in.dev.mfu = m;
    }
    const ork_model_config *mc = &j->p->model;
    in.budget_gb = mc->vram_budget_gb;
    in.device_free = free_b ? free_b : (size_t)(in.dev.mem_gib * 1073741824.0);
    /* The budget is what the allocator may hand out; the CUDA context, the
     * libraries' kernels and workspaces live beside it (1-2 GiB on the H200).
     * On a card whose free memory, measured after the context exists, is below
     * the budget plus a 1 GiB reserve for what loads later (cuDNN engines),
     * plan for what is really there — a 24 GB card with vram_budget_gb: 24. */
    if (dev == ORK_DEV_CUDA && free_b > ((size_t)1 << 30) && in.budget_gb > 0) {
        double avail = (double)(free_b - ((size_t)1 << 30)) / 1073741824.0;
        if (in.budget_gb > avail) {
            ORK_WARN("model.vram_budget_gb %.2f: this device has %.2f GiB free beside the CUDA context; planning for "
                     "%.2f GiB (1 GiB kept for library workspaces)", in.budget_gb, (double)free_b / 1073741824.0, avail);
            in.budget_gb = avail;
            if (j->alloc) ork_alloc_set_budget(j->alloc, (size_t)(avail * 1073741824.0));
        }
    }
    if (dev == ORK_DEV_CPU && in.budget_gb <= 0) in.device_free = (size_t)1 << 62; /* host memory: not planned */
    if (mc->layer_offloading) {
        in.mode = ORK_OFFLOAD_PERCENT;
        in.percent = mc->layer_offloading_transformer_percent;
    } else {
        in.mode = mc->vram_budget_gb > 0 ? ORK_OFFLOAD_AUTO : ORK_OFFLOAD_NONE;
    }
    /* a budget without a fixed percent: the trainable state may stream too
     * (ZeRO-Offload per block, docs/streaming.md §4) when nothing else fits,
     * from the start with model.stream_trainable_state: always, or never */
    const char *sts = mc->stream_trainable_state ? mc->stream_trainable_state : "auto";
    in.allow_trainable_streaming = in.mode != ORK_OFFLOAD_AUTO ? 0 : !strcmp(sts, "always") ? 2 : !strcmp(sts, "never") ? 0 : 1;
    if (!strcmp(sts, "always") && in.mode != ORK_OFFLOAD_AUTO) {
        ork_loc at;
        const char *why = mc->layer_offloading ? "model.layer_offloading fixes the streamed share instead"
                                               : "it needs model.vram_budget_gb (the planner's auto mode)";
        if (ork_config_where(j->cfg, "model.stream_trainable_state", &at) && at.line > 0)
            return ork_config_fail_at(&at, ORK_E_CONFIG, "model.stream_trainable_state always: %s", why);
        return ORK_FAIL(ORK_E_CONFIG, "%s: model.stream_trainable_state always: %s", ork_config_file(j->cfg), why);
    }
    /* the plan also predicts the trainable state streamed from the start, to say
     * when that would be faster — where this run could take it */
    in.suggest_trainable_streaming = in.allow_trainable_streaming == 1 && j->p->train.gradient_accumulation_steps <= 1 &&
                                     j->p->train.gradient_checkpointing && !j->dist;
    /* the LoRA gradients lent to the forward's loads (ork_train_setup_grad_pool): not with
     * data parallelism or accumulation (then only the first micro-batch's forward) */
    in.lend_grads = !j->dist && j->p->train.gradient_accumulation_steps <= 1 && !j->lend_off;
    /* ORAKUL_STREAM_SELECT=even|dense: AUTO's streamed set fixed (bench A/B);
     * unset, densest first when predicted faster by more than ORK_SELECT_MARGIN */
    const char *sel = getenv("ORAKUL_STREAM_SELECT");
    if (sel && *sel) {
        if (!strcmp(sel, "even")) in.select = ORK_SELECT_EVEN;
        else if (!strcmp(sel, "dense")) in.select = ORK_SELECT_DENSE;
        else return ORK_FAIL(ORK_E_CONFIG, "ORAKUL_STREAM_SELECT=%s: expected even or dense", sel);
    }
    in.weight_bytes = dev == ORK_DEV_CPU ? 4 : 2;
    ork_quant_layout ql;
    int e5m2 = 0;
    if (j->quant && j->qvt->layout(j->quant, 1, 128, &ql) == ORK_OK) { /* a quantized linear row: bytes + scales */
        e5m2 = ql.qdtype == ORK_F8_E5M2;
        in.bias_bytes = in.weight_bytes;
        in.weight_bytes = (int)ork_dtype_size(ql.qdtype);
        in.scale_bytes_per_row = (int)ql.n_scales * 4;
    }
    /* streamed frozen blocks coded in transit (stream/wcodec.h): auto takes it for
     * 16-bit and FP8 E5M2 weights on a GPU (the one planned for: ORAKUL_PLAN_DEVICE),
     * where a block shrinks to ~0.75 / ~0.78 of its bytes, unless the plan
     * predicts the raw transit faster (compute-bound: the staging buffer's VRAM
     * is worth more as resident blocks) */
    double ratio = in.weight_bytes == 2 ? ORK_PLAN_BF16_CODEC_RATIO : e5m2 ? ORK_PLAN_E5M2_CODEC_RATIO : 1.0;
    const char *sc = mc->stream_compression ? mc->stream_compression : "auto";
    in.stream_codec = !strcmp(sc, "always") ? 1
                      : !strcmp(sc, "auto") && strcmp(in.dev.name, "cpu") && ratio < 1.0 ? ORK_PLAN_CODEC_PREDICT : 0;
    in.codec_ratio = ratio;
    in.lora_rank = j->p->network.linear;
    in.param_bytes = (j->p->network.weight_dtype && strstr(j->p->network.weight_dtype, "bf")) ? 2 : 4;
    size_t sb = 0;
    void *tmp = NULL;
    if (j->ovt->create(&j->c_opt->host, j->opt_params, &tmp) == ORK_OK) {
        if (j->ovt->state_bytes(tmp, ORK_F32, (int64_t)1 << 24, &sb) != ORK_OK) sb = 0;
        j->ovt->destroy(tmp);
    }
    in.opt_bytes_per_param = sb ? (double)sb / (double)((int64_t)1 << 24) : 8.0;
    in.batch = (int)(j->p->train.batch_size > 0 ? j->p->train.batch_size : 1);
    int res = j->p->datasets.n && j->p->datasets.v[0].resolution.n ? (int)j->p->datasets.v[0].resolution.v[0] : 512;
    int ppt = j->info.pixels_per_token > 0 ? j->info.pixels_per_token : 16;
    in.img_tokens = (int64_t)(res / ppt) * (res / ppt);
    in.txt_tokens = j->info.context_len > 0 ? j->info.context_len : 512;
    in.act_bytes = dev == ORK_DEV_CPU ? 4 : 2;
    in.first_trainable = -1;
    in.ema = j->p->train.use_ema != 0; /* train/ema.c's shadows and scratch */
    in.dop = j->p->train.diff_output_preservation != 0; /* train/dop.c's prior pass */
    if (j->p->network.type && !strcmp(j->p->network.type, "lokr")) lokr_sizes(j, &in);
    return ork_stream_plan_make(&in, &j->plan);
}

/* MemAvailable, or ORAKUL_HOST_AVAILABLE_GB; 0 (unknown) when
 * ORAKUL_PLAN_DEVICE plans another machine without it. */
size_t ork_train_host_available(void) {
    const char *ov = getenv("ORAKUL_HOST_AVAILABLE_GB"), *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (pd && *pd && !(ov && *ov)) return 0; /* another machine: unknown */
    return ov && *ov ? (size_t)(atof(ov) * 1073741824.0) : ork_host_mem_available();
}

/* The plan's pinned host memory against this machine's available memory
 * (ORAKUL_HOST_AVAILABLE_GB overrides it, for tests and for planning another
 * machine), before anything is loaded. */
ork_status ork_train_check_host(job *j) {
    size_t avail = ork_train_host_available();
    const char *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (!avail && pd && *pd && j->plan->host_pinned)
        ORK_INFO("host memory not checked: ORAKUL_PLAN_DEVICE plans another machine (ORAKUL_HOST_AVAILABLE_GB "
                 "gives its RAM in GiB)");
    return ork_stream_plan_check_host(j->plan, avail, ork_config_file(j->cfg)); /* 0: unknown, not refused */
}

/* ---- memory lent to the streamer ------------------------------------------- */

/* The LoRA gradients in one region (ork_graph_set_grad_pool) when frozen blocks
 * stream and the trainable state does not: dead from the optimizer step to the
 * next backward, it is lent to the streamer (ork_streamer_lend), which moves
 * the next forward's loads through it — they start in the step's tail and
 * never wait for a slot. Not with data parallelism (its flat buffer holds the
 * gradients). ORAKUL_STREAM_LEND=0 (bench) turns it off. */
ork_status ork_train_setup_grad_pool(job *j) {
    if (!ork_wstore_streamer(j->ws) || j->tstream || j->gsync || j->lend_off) return ORK_OK;
    size_t bytes = 0;
    for (int i = 0; i < j->n_params; i++)
        bytes += ork_grad_pool_bytes(ork_tensor_numel(j->pt[i]));
    if (!bytes) return ORK_OK;
    ORK_TRY(ork_alloc_get(j->alloc, bytes, "grads", &j->grad_pool));
    j->grad_pool_bytes = bytes;
    ork_graph_set_grad_pool(j->g, j->grad_pool, bytes);
    j->grads_dead = 1; /* until the first backward */
    ORK_INFO("streaming: the LoRA gradients' %.2f GiB carry the forward's loads between backward passes",
             (double)bytes / 1073741824.0);
    return ORK_OK;
}

static int grads_lent(const job *j) { return j->grad_pool && ork_streamer_lent(ork_wstore_streamer(j->ws)); }

/* Lend the dead gradients for this micro-batch's forward — after its inputs
 * are up: its copies, queued first, would hold the uploads back (the H2D
 * copies share one queue: 59 ms measured). */
ork_status ork_train_grads_lend(job *j) {
    if (!j->grad_pool || !j->grads_dead) return ORK_OK;
    return ork_streamer_lend(ork_wstore_streamer(j->ws), j->grad_pool, j->grad_pool_bytes);
}

/* After the forward, before the loss and the backward (micro_step's loss
 * callback): the gradients' memory back from the streamer, zeroed for the
 * backward. */
ork_status ork_train_grads_reclaim(job *j) {
    if (!j->grad_pool || !j->grads_dead) return ORK_OK;
    if (grads_lent(j)) ORK_TRY(ork_streamer_reclaim(ork_wstore_streamer(j->ws)));
    ORK_TRY(ork_train_zero_grads(j));
    j->grads_dead = 0;
    return ORK_OK;
}

/* Lending: from the second micro-step on, the
 * checkpoints become one pool and their tail the streamer's ahead region (the
 * next forward's lent loads after the staging buffer's, copied at the
 * backward's end while the link idles). A micro-batch of another shape gives
 * the pool back for good (a checkpoint that grows would hold both). */
ork_status ork_train_ahead_region(job *j, int nb, int N, int T) {
    ork_streamer *st = ork_wstore_streamer(j->ws);
    if (!st || !j->grad_pool || j->ckpt_pool_off || j->ahead_off || !j->p->train.gradient_checkpointing)
        return ORK_OK;
    int sig[3] = {nb, N, T};
    if (!j->ckpt_sig[0]) { /* this micro-step sizes the checkpoints */
        memcpy(j->ckpt_sig, sig, sizeof sig);
        return ORK_OK;
    }
    void *dev;
    const size_t *off;
    int pooled = ork_runner_checkpoint_pool(j->runner, &dev, &off) > 0;
    if (memcmp(sig, j->ckpt_sig, sizeof sig)) {
        j->ckpt_pool_off = 1;
        if (!pooled) return ORK_OK;
        ORK_TRY(ork_streamer_set_ahead(st, NULL, NULL, 0));
        return ork_runner_unpool_checkpoints(j->runner);
    }
    if (pooled) return ORK_OK;
    ork_status ps = ork_runner_pool_checkpoints(j->runner);
    if (ps == ORK_E_BUDGET) { /* no room for the alignment: the copies ahead take the staging buffer only */
        j->ckpt_pool_off = 1;
        return ORK_OK;
    }
    ORK_TRY(ps);
    int n = ork_runner_checkpoint_pool(j->runner, &dev, &off);
    return n ? ork_streamer_set_ahead(st, dev, off, n) : ORK_OK;
}
