/* train/train.c — the LoRA training job (see train.h): setup, from the config
 * to the first step, and the training loop. The job (job.h) and its pieces,
 * one concern each, are listed in job.h. [control-thread] */
#include "train/job.h"

#include "data/dataset.h"
#include "platform/platform.h"
#include "plugin/model_decl.h"
#include "train/services.h"
#include "util/log.h"
#include "util/prof.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *ork_train_getenv(const char *name, const char *old_name) {
    const char *v = getenv(name);
    return v || !old_name ? v : getenv(old_name);
}

int ork_train_switched_off(const char *name, const char *old_name) {
    const char *v = ork_train_getenv(name, old_name);
    return v && !strcmp(v, "0");
}

double ork_train_now(void) { return 1e-9 * (double)ork_time_ns(); }

static void job_free(job *j) {
    if (j->in_running) ork_thread_join(j->in_thread);
    ork_train_inputs_free(&j->in_cur);
    ork_train_inputs_free(&j->in_next);
    ork_progress_destroy(j->progress);
    ork_metrics_close(j->metrics);
    ork_samples_destroy(j->samples);
    ork_train_text_free(j);
    ork_train_datasets_free(j);
    ork_gsync_destroy(j->gsync); /* gives the LoRA tensors their grads back */
    ork_dist_destroy(j->dist, j->failed); /* before the allocator: its scratch lives there */
    if (j->runner) ork_runner_destroy(j->runner);
    if (j->tstream) {
        for (int i = 0; i < j->n_params; i++) { /* the slot headers: grads are ours, data is the slot's */
            free(j->pt[i]->grad);
            j->pt[i]->grad = NULL;
            j->pt[i]->base = NULL;
        }
        ork_tstream_destroy(j->tstream);
    }
    for (int i = 0; j->grad_pool && i < j->n_params; i++) { /* headers over the pool (ork_graph_set_grad_pool) */
        ork_tensor *gr = j->pt[i]->grad;
        if (gr && gr->owner == ORK_OWN_EXTERN && (uint8_t *)gr->base >= (uint8_t *)j->grad_pool &&
            (uint8_t *)gr->base < (uint8_t *)j->grad_pool + j->grad_pool_bytes) {
            free(gr);
            j->pt[i]->grad = NULL;
        }
    }
    ork_train_ema_free(j);
    ork_train_dop_free(j);
    free(j->block_param_first);
    free(j->block_params);
    for (int i = 0; i < j->n_params; i++) ork_tensor_free(j->state ? j->state[i] : NULL);
    free(j->state);
    free(j->pt);
    ork_tensor_free(j->norms);
    if (j->lora) ork_lora_destroy(j->lora);
    if (j->ws) ork_wstore_destroy(j->ws);
    if (j->quant) j->qvt->destroy(j->quant);
    free(j->quant_params);
    if (j->ce && j->ss_trace) (void)ork_ce_busy(j->ce, ORK_LANE_H2D, NULL, NULL); /* writes what is left */
    if (j->grad_pool) ork_alloc_put(j->alloc, j->grad_pool); /* the streamer (destroyed with ws) synced its copies */
    if (j->ce) ork_copy_engine_destroy(j->ce);
    if (j->ss_trace) fclose(j->ss_trace);
    if (j->plan) ork_stream_plan_free(j->plan);
    if (j->opt) j->ovt->destroy(j->opt);
    if (j->loss) j->lvt->destroy(j->loss);
    ork_model_codec_close(&j->codec); /* the codec, and the merged declarations info.weights points at */
    if (j->model) j->mvt->destroy(j->model);
    if (j->g) ork_graph_destroy(j->g);
    if (j->alloc) ork_alloc_destroy(j->alloc);
    for (int i = 0; i < j->n_items; i++) {
        free(j->items[i].path);
        free(j->items[i].tokens);
        free(j->items[i].txt);
        free(j->items[i].vec);
    }
    free(j->items);
    free(j->order);
    free(j->model_params);
    free(j->loss_params);
    free(j->opt_params);
}

/* ---- the step ------------------------------------------------------------- */

typedef struct loss_ctx {
    job *j;
    ork_tensor *target, *x_t, *x0, *t;
    const float *t_host;
    int h_tok, w_tok;
    float scale;            /* 1 / accumulation · timestep weight */
} loss_ctx;

static ork_status decode_cb(void *ctx, ork_graph *g, ork_tensor *tokens, ork_tensor **img) {
    loss_ctx *lc = ctx;
    return ork_model_codec_decode(&lc->j->codec, g, tokens, lc->h_tok, lc->w_tok, img);
}

static ork_status loss_fn(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    loss_ctx *lc = ctx;
    job *j = lc->j;
    ork_loss_inputs in = {.abi = ORK_ABI_INIT(ork_loss_inputs), .pred = pred, .target = lc->target, .x_t = lc->x_t,
                          .x0 = lc->x0, .t = lc->t, .t_host = lc->t_host, .h_tokens = lc->h_tok,
                          .w_tokens = lc->w_tok, .decode = ork_model_codec_present(&j->codec) ? decode_cb : NULL,
                          .decode_ctx = lc};
    ORK_TRY(j->lvt->compute(j->loss, g, &in, loss));
    if (lc->scale != 1.0f) ORK_TRY(j->ops->scale(g, *loss, lc->scale, loss));
    return ORK_OK;
}

/* The runner's callback between the forward and the backward: the forward is
 * in, so the gradients' memory comes back from the streamer, zeroed for the
 * backward (plan_glue.c); then the loss. */
static ork_status after_forward(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    loss_ctx *lc = ctx;
    ORK_TRY(ork_train_grads_reclaim(lc->j));
    return loss_fn(ctx, g, pred, loss);
}

/* The trainer's marks in the lane trace (ORAKUL_STREAM_TRACE; the streamer's are
 * -1, -2 and the blocks): where the step's tail goes (bench/stream/trace_timeline.py). */
enum {
    ORK_TRACE_MARK_NORM = -3,      /* the micro-steps are in: the gradient norm next (a host sync) */
    ORK_TRACE_MARK_OPTIMIZER = -4, /* the optimizer step is enqueued */
    ORK_TRACE_MARK_STEP = -5,      /* the next step begins (its gradients zeroed next) */
    ORK_TRACE_MARK_INPUTS = -6,    /* its inputs are built and uploaded: the runner next */
};

/* One micro-batch: its inputs (built ahead on a thread while the device ran
 * the previous one, or now), uploaded, then forward + loss + backward; micro-
 * batch k + 1's build starts once these are up. Its noise alone is N·C normals
 * (0.8 M at FLUX.2's 512²): built in the step's tail, the device waited ~55 ms
 * for it each step (docs/PERF.md). */
static ork_status micro_step(job *j, int64_t k, float inv_accum, float *loss_out) {
    const int ctx = j->info.context_dim, T = j->T, C = j->info.token_channels;
    ork_train_inputs_join(j);
    if (j->in_next.k == k && j->in_st == ORK_OK) { /* swap: the built one runs */
        step_inputs t = j->in_cur;
        j->in_cur = j->in_next;
        j->in_next = t;
    } else {
        ORK_TRY(ork_train_inputs_build(j, k, &j->in_cur));
    }
    step_inputs *si = &j->in_cur;
    int nb = si->nb, N = si->N;
    loss_ctx lc = {.j = j, .t_host = si->ts, .h_tok = si->h_tok, .w_tok = si->w_tok,
                   .scale = inv_accum * (nb ? si->wsum / (float)nb : 1.0f)};
    ork_model_inputs in = {.abi = ORK_ABI_INIT(ork_model_inputs), .h_tokens = si->h_tok, .w_tokens = si->w_tok,
                           .timesteps_host = si->ts, .guidance_host = j->info.has_guidance ? si->gd : NULL};
    ORK_TRY(ork_graph_reset(j->g));
    /* LoRA dropout masks of this micro-step: a function of (seed, k), so the
     * recompute and a resumed run draw the same ones */
    j->g->dropout_seed = j->p->network.dropout > 0 ? (j->seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)k + 1) : 0;
    if (j->g->dropout_seed == 0 && j->p->network.dropout > 0) j->g->dropout_seed = 1;
    /* txt (1, T_i, ctx): a micro-batch of one takes its caption's own rows (an UNMASKED slot, prefetch.c) */
    int64_t sh3[3] = {nb, N, C}, sht[3] = {nb, nb == 1 ? si->tlen[0] : T, ctx}, shv[2] = {nb, j->info.vec_dim}, shb = nb;
    ORK_TRY(ork_train_upload_act(j, si->xt, 3, sh3, &in.tokens));
    ORK_TRY(ork_train_upload_act(j, si->tg, 3, sh3, &lc.target));
    ORK_TRY(ork_train_upload_act(j, si->x0, 3, sh3, &lc.x0));
    lc.x_t = in.tokens;
    ORK_TRY(ork_train_upload_act(j, si->txt, 3, sht, &in.txt));
    if (si->vec) ORK_TRY(ork_train_upload_act(j, si->vec, 2, shv, &in.vec));
    ORK_TRY(j->ta->from_host(j->g, ORK_F32, 1, &shb, si->ts, &in.timesteps));
    lc.t = in.timesteps;
    if (in.guidance_host) ORK_TRY(j->ta->from_host(j->g, ORK_F32, 1, &shb, si->gd, &in.guidance));
    if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_INPUTS));
    ORK_TRY(ork_train_grads_lend(j));
    ORK_TRY(ork_train_ahead_region(j, nb, N, T));
    int ahead = k + 1 < j->p->train.steps * ork_train_accum_of(j), thread = !j->inputs_sync;
    if (j->grad_pool) /* the next micro-batch's forward is lent when it starts a step */
        ork_streamer_next_lent(ork_wstore_streamer(j->ws), !j->ahead_off && ahead && (k + 1) % ork_train_accum_of(j) == 0);
    if (ahead && thread) ork_train_inputs_ahead(j, k + 1); /* into in_next: si (t_host) stays */
    ORK_TRY(ork_train_dop_prior(j, &in, si)); /* DOP: the prior with the LoRA off (dop.c), before the prediction */
    ORK_TRY(ork_runner_step(j->runner, &in, j->p->train.gradient_checkpointing, after_forward, &lc, loss_out));
    if (j->dop_on) { /* DOP: the preservation term, its gradients added to the step's */
        float pl = 0;
        ORK_TRY(ork_train_dop_step(j, &in, si, inv_accum, &pl));
        j->dop_loss += pl;
        *loss_out += pl;
    }
    if (ahead && !thread) j->in_st = ork_train_inputs_build(j, k + 1, &j->in_next);
    return ORK_OK;
}

/* ---- setup ---------------------------------------------------------------- */

static ork_status setup_schedule(job *j) {
    const ork_train_config *t = &j->p->train;
    ork_loc at;
    if (ork_ts_type_parse(t->timestep_type, &j->ts.type) != ORK_OK) {
        ork_config_where(j->cfg, "train.timestep_type", &at);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "timestep_type '%s' is not implemented (sigmoid, linear, weighted, shift, flux_shift, lognorm_blend, one_step, two_step, four_step, eight_step, next_sample)", t->timestep_type);
    }
    /* not in the file: the model's own, when it declares one (plugin/model_decl.h) */
    const char *mt = ork_model_timestep_type(&j->info);
    if (mt && !(ork_config_where(j->cfg, "train.timestep_type", &at) && at.line > 0) &&
        ork_ts_type_parse(mt, &j->ts.type) != ORK_OK)
        return ORK_FAIL(ORK_E_INTERNAL, "model timestep type '%s' does not parse", mt);
    if (ork_cs_type_parse(t->content_or_style, &j->ts.cs) != ORK_OK) {
        ork_config_where(j->cfg, "train.content_or_style", &at);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "content_or_style '%s' (balanced, content, style)", t->content_or_style);
    }
    ork_model_schedule ms; /* the model's shift parameters, or the core's defaults (plugin/model_decl.h) */
    ork_model_schedule_get(&j->info, &ms, &j->ts.base_shift, &j->ts.max_shift);
    j->ts.shift = ms.shift;
    j->ts.base_seq = ms.shift_base_seq;
    j->ts.max_seq = ms.shift_max_seq;
    j->ts.image_seq_len = j->n_items ? (int64_t)j->items[0].h_tok * j->items[0].w_tok : 1024;
    j->ts.fixed_shift = ms.time_shift == ORK_TIME_SHIFT_FIXED; /* shift / flux_shift: the model's rule */
    if (ork_lr_type_parse(t->lr_scheduler, &j->lr.type) != ORK_OK) {
        ork_config_where(j->cfg, "train.lr_scheduler", &at);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "lr_scheduler '%s' is not implemented (constant, cosine, linear, constant_with_warmup)", t->lr_scheduler);
    }
    typedef struct { int64_t warmup; double eta_min; int64_t decay; double start, end; int64_t total; } lrp;
    static const ork_param lr_keys[] = {
        {"num_warmup_steps", ORK_PARAM_INT, 1, 0, "-1", -1, 1e12, NULL, offsetof(lrp, warmup), "warmup steps (cosine: 0, constant_with_warmup: 1000)"},
        {"eta_min", ORK_PARAM_FLOAT, 1, 0, "0", 0, 1e9, NULL, offsetof(lrp, eta_min), "cosine: final learning rate"},
        {"cosine_decay_steps", ORK_PARAM_INT, 1, 0, "0", 0, 1e12, NULL, offsetof(lrp, decay), "cosine: decay length (0: steps)"},
        {"start_factor", ORK_PARAM_FLOAT, 1, 0, "0.3333333333333333", 0, 1e9, NULL, offsetof(lrp, start), "linear: first factor"},
        {"end_factor", ORK_PARAM_FLOAT, 1, 0, "1.0", 0, 1e9, NULL, offsetof(lrp, end), "linear: last factor"},
        {"total_iters", ORK_PARAM_INT, 1, 0, "0", 0, 1e12, NULL, offsetof(lrp, total), "schedule length (0: train.steps)"},
        {0},
    };
    lrp v = {0};
    ORK_TRY(ork_config_component_params(j->cfg, "train.lr_scheduler_params", lr_keys, &v, sizeof v));
    j->lr.lr = t->lr;
    j->lr.total_steps = v.total > 0 ? v.total : t->steps;
    j->lr.warmup_steps = v.warmup >= 0 ? v.warmup : (j->lr.type == ORK_LR_CONSTANT_WARMUP ? 1000 : 0);
    j->lr.eta_min = v.eta_min;
    j->lr.cosine_decay_steps = v.decay;
    j->lr.start_factor = v.start;
    j->lr.end_factor = v.end;
    return ORK_OK;
}

/* Wall time of setup's phases, printed once ready: a 32B-parameter preset
 * spends minutes before step 1, and the user should see where. */
enum { PH_START, PH_WEIGHTS, PH_LORA, PH_DATA, PH_OPT, PH_END, PH_N };

static void setup_times_report(const double *t) {
    static const char *const what[PH_N - 1] = {"plan and weights", "LoRA", "dataset", "optimizer",
                                               "trainable-state records"};
    double total = t[PH_END] - t[PH_START];
    if (total < 1.0) return; /* a small model: nothing worth a line */
    char parts[256] = "";
    size_t o = 0;
    for (int k = 0; k < PH_N - 1 && o < sizeof parts; k++) {
        double d = t[k + 1] - t[k];
        if (d >= 0.1) o += (size_t)snprintf(parts + o, sizeof parts - o, "%s%s %.1f s", o ? ", " : "", what[k], d);
    }
    ORK_INFO("ready in %.1f s: %s", total, parts);
}

static ork_status setup(job *j) {
    double t[PH_N];
    t[PH_START] = ork_train_now();
    ORK_TRY(ork_services_register());
    j->ops = ork_ops_table();
    j->ta = ork_tensor_api_table();
    ORK_TRY(ork_train_resolve_all(j));
    ORK_TRY(ork_train_check_datasets(j));
    ORK_TRY(ork_train_pick_backend(j));
    size_t budget = j->p->model.vram_budget_gb > 0 ? (size_t)(j->p->model.vram_budget_gb * 1073741824.0) : 0;
    ORK_TRY(ork_alloc_create(j->be, budget, &j->alloc));
    ork_graph_opts go = {0};
    go.act_dtype = j->be->device == ORK_DEV_CPU ? ORK_F32 : ORK_BF16;
    ORK_TRY(ork_train_dist_device(j, &go.device_index));
    ORK_TRY(ork_graph_create(j->be, j->alloc, &go, &j->g));
    ORK_TRY(ork_train_dist_start(j));
    if (j->quant) ORK_TRY(ork_graph_set_fp8_gemm(j->g, ork_train_fp8_gemm(j), "model.quantize_kwargs.fp8_gemm"));
    ORK_TRY(ork_train_open_model(j));
    /* the captions and sample prompts: the text cache, else the text encoders, whose memory is given back
     * before the denoiser's plan (text_glue.c); rank 0 first, the others then read its cache */
    ORK_TRY(ork_train_dist_dataset_turn(j, 0));
    ORK_TRY(ork_train_encode_text(j));
    ORK_TRY(ork_train_dist_dataset_turn(j, 1));
    ork_dtype store = j->be->device == ORK_DEV_CPU ? ORK_F32 : ORK_BF16;
    ORK_TRY(ork_train_preflight_status(ork_train_make_plan(j, j->be->device)));
    ORK_TRY(ork_train_preflight_status(ork_train_check_host(j)));
    ORK_TRY(ork_train_preflight(j)); /* what plan checks too: codec, streaming, loss, optimizer, samples */
    ork_wstore_quant wq = {j->qvt, j->quant, j->c_quant ? j->c_quant->c->id : NULL};
    int tstream_events = j->plan->trainable_streamed ? ork_tstream_n_events(ORK_TRAIN_STATE_SLOTS) : 0;
    if (j->plan->n_streamed > 0) {
        ORK_TRY(ork_copy_engine_create(j->be, &j->g->k, ork_streamer_n_events(j->plan->n_slots) + tstream_events, &j->ce));
        const char *tm = getenv("ORAKUL_STREAM_TIMING"); /* a diagnostic: where the streamed step waits */
        j->ss_timing = tm && atoi(tm) > 0;
        const char *tp = getenv("ORAKUL_STREAM_TRACE"); /* a diagnostic: the lanes' timeline (bench/stream/trace_timeline.py) */
        if (tp && *tp) {
            if (!(j->ss_trace = ork_fopen(tp, "w"))) ORK_WARN("ORAKUL_STREAM_TRACE: cannot write %s: %s", tp, strerror(errno));
            else {
                ork_ce_set_trace(j->ce, j->ss_trace);
                j->ss_timing = 1;
            }
        }
        if (j->ss_timing) ORK_TRY(ork_ce_set_timing(j->ce, 1));
        ork_wstore_stream ws = {j->ce, j->plan->streamed, j->plan->n_slots, 0, j->plan->stream_codec};
        ORK_TRY(ork_wstore_create_quant(j->alloc, j->be, &j->g->k, &j->info, store, &ws, j->quant ? &wq : NULL, &j->ws));
        ORK_INFO("streaming %d of %d blocks%s through %d device slots (plan: %.2f GB over PCIe per step)",
                 j->plan->n_streamed, j->info.n_blocks, j->plan->dense_first ? ", the most FLOPs per byte first," : "",
                 j->plan->n_slots, j->plan->h2d_bytes / 1e9);
        char hint[400];
        if (ork_stream_plan_trainable_hint(j->plan, hint, sizeof hint)) ORK_INFO("plan: %s", hint);
    } else {
        if (tstream_events) ORK_TRY(ork_copy_engine_create(j->be, &j->g->k, tstream_events, &j->ce));
        ORK_TRY(ork_wstore_create_quant(j->alloc, j->be, &j->g->k, &j->info, store, NULL, j->quant ? &wq : NULL, &j->ws));
    }
    ORK_TRY(ork_model_codec_load_all(&j->codec, ork_wstore_sink(j->ws))); /* the model's weights, then its codec's */
    ORK_TRY(ork_wstore_check_complete(j->ws));
    if (ork_wstore_streamer(j->ws)) ORK_TRY(ork_streamer_seal(ork_wstore_streamer(j->ws)));
    ork_wstore_attach(j->ws, j->g);
    t[PH_WEIGHTS] = ork_train_now();
    ORK_INFO("model %s (%s): %d blocks, %.1f MiB of weights on %s", j->p->model.name_or_path, j->info.variant,
             j->info.n_blocks, (double)ork_wstore_bytes(j->ws) / 1048576.0, j->be->name);
    int nq = 0;
    size_t qb = ork_wstore_quant_bytes(j->ws, &nq);
    if (j->quant) ORK_INFO("quantized %d linear weights with %s: %zu bytes (data + scales)", nq, j->c_quant->c->id, qb);
    const ork_network_config *nc = &j->p->network;
    ork_lora_opts lo = {.rank = nc->linear, .alpha = nc->linear_alpha, .dropout = nc->dropout,
                        .only_if_contains = nc->only_if_contains.v, .n_only = (int)nc->only_if_contains.n,
                        .ignore_if_contains = nc->ignore_if_contains.v, .n_ignore = (int)nc->ignore_if_contains.n,
                        .param_dt = (nc->weight_dtype && (!strcmp(nc->weight_dtype, "bf16") ||
                                                          !strcmp(nc->weight_dtype, "bfloat16"))) ? ORK_BF16 : ORK_F32,
                        .seed = j->seed, .deferred = j->plan->trainable_streamed,
                        .kind = (nc->type && !strcmp(nc->type, "lokr")) ? ORK_ADAPTER_LOKR : ORK_ADAPTER_LORA,
                        .lokr_factor = nc->lokr_factor, .lokr_full_rank = nc->lokr_full_rank};
    ORK_TRY(ork_lora_create(j->alloc, j->be, &j->g->k, j->ws, &j->info, &lo, &j->lora));
    int first = j->info.n_blocks;
    for (int i = 0; i < ork_lora_count(j->lora); i++)
        if (ork_lora_block(j->lora, i) < first) first = ork_lora_block(j->lora, i);
    if (lo.kind == ORK_ADAPTER_LOKR)
        ORK_INFO("LoKr: %d modules, factor %lld%s, %lld trainable parameters", ork_lora_count(j->lora),
                 (long long)nc->lokr_factor, nc->lokr_full_rank ? ", full rank" : "", (long long)ork_lora_params(j->lora));
    else
        ORK_INFO("LoRA: %d modules, rank %lld, alpha %g, %lld trainable parameters", ork_lora_count(j->lora),
                 (long long)nc->linear, nc->linear_alpha, (long long)ork_lora_params(j->lora));
    t[PH_LORA] = ork_train_now();
    ORK_TRY(ork_runner_create(j->g, j->alloc, j->mvt, j->model, &j->info, &j->runner));
    ork_runner_set_first_trainable(j->runner, first);
    ork_wstore_hooks(j->ws, &j->ws_hooks);
    ork_runner_set_hooks(j->runner, &j->ws_hooks);
    /* keep instead of recompute (issue #31, runner.h): on a GPU where nothing
     * streams, the trailing blocks whose recorded forward fits the plan's budget
     * beside the first step's peak skip their recompute from the second step on */
    if (j->be->device != ORK_DEV_CPU && !j->plan->n_streamed && !j->plan->trainable_streamed)
        ork_runner_set_keep(j->runner, -1, j->plan->budget);
    ORK_TRY(j->lvt->create(&j->c_loss->host, j->loss_params, &j->loss));
    if (j->lvt->prepare) ORK_TRY(j->lvt->prepare(j->loss, j->g));
    ORK_TRY(ork_train_dist_dataset_turn(j, 0));
    ORK_TRY(ork_train_encode_dataset(j));
    ORK_TRY(ork_train_dist_dataset_turn(j, 1));
    if (j->n_items == 0) return ORK_FAIL(ORK_E_CONFIG, "%s: no images to train on", ork_config_file(j->cfg));
    j->order = malloc((size_t)j->n_items * sizeof *j->order);
    if (!j->order) return ORK_E_NOMEM;
    j->order_epoch = -1;
    ORK_TRY(setup_schedule(j));
    t[PH_DATA] = ork_train_now();
    /* j->samples: made by ork_train_preflight */
    if (ork_dist_rank(j->dist) > 0) { ork_samples_destroy(j->samples); j->samples = NULL; } /* rank 0 samples */
    ORK_TRY(ork_train_setup_optimizer(j));
    ORK_TRY(ork_train_dist_grads(j));
    ORK_TRY(ork_train_ema_setup(j)); /* the EMA's shadows (ema.c): before the streamed records that hold them */
    t[PH_OPT] = ork_train_now();
    if (j->plan->trainable_streamed) ORK_TRY(ork_train_streamed_setup(j));
    ORK_TRY(ork_train_dop_setup(j)); /* DOP's refusals and adapted weights (dop.c); before the gradients are pooled */
    ORK_TRY(ork_train_setup_grad_pool(j));
    t[PH_END] = ork_train_now();
    setup_times_report(t);
    return ORK_OK;
}

/* ---- the loop ------------------------------------------------------------- */

static ork_status train_loop(job *j) {
    const ork_train_config *t = &j->p->train;
    int64_t start;
    if (ork_dist_rank(j->dist) == 0) ork_train_remove_stale_tmp(j);
    ORK_TRY(ork_train_load_state(j, &start));
    ORK_TRY(ork_train_dist_resume(j, &start));
    int64_t accum = t->gradient_accumulation_steps > 0 ? t->gradient_accumulation_steps : 1;
    int64_t log_every = j->p->logging.log_every > 0 ? j->p->logging.log_every : 10;
    int64_t save_every = j->p->save.save_every > 0 ? j->p->save.save_every : t->steps;
    double t0 = ork_train_now();
    ORK_TRY(ork_train_outputs_open(j, start, log_every));
    int64_t trained = 0, in_row = 0; /* steps of this run that updated the LoRA; skipped steps in a row */
    for (int64_t step = start + 1; step <= t->steps; step++) {
        ork_progress_begin(j->progress);
        int64_t skipped0 = j->skipped;
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_STEP));
        if (!j->tstream) {
            if (!(j->grad_pool && j->grads_dead)) ORK_TRY(ork_train_zero_grads(j)); /* else zeroed after the forward, after the loan */
        } else { /* the runtime steps each block at grads_ready with these */
            j->cur_step = step - j->skipped;
            j->cur_lr = ork_lr_at(&j->lr, step - 1);
        }
        float loss = 0;
        j->dop_loss = 0;
        int bad = 0;
        for (int64_t a = 0; a < accum; a++) {
            float l = 0;
            if (j->gsync) ork_gsync_arm(j->gsync, a == accum - 1); /* all-reduce in the last backward */
            ORK_TRY(micro_step(j, (step - 1) * accum + a, 1.0f / (float)accum, &l));
            if (!isfinite(l)) bad = 1;
            loss += l;
        }
        ORK_TRY(ork_train_dist_step_end(j, &loss, &bad));
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_NORM)); /* the lane trace's tail */
        double norm = 0, tp = ork_prof_enabled() ? (ork_graph_sync(j->g), ork_prof_now()) : 0;
        int stream_skip = 0;
        float applied = 1.0f;
        if (j->tstream) ORK_TRY(ork_tstream_step_end(j->tstream, &norm, &applied, &stream_skip)); /* stepped already, per block */
        else ORK_TRY(ork_train_grad_norm(j, &norm));
        if (j->tstream && !stream_skip && !bad && isfinite(norm)) ork_train_streamed_clip_check(j, step, norm, applied);
        if (ork_prof_enabled()) ork_prof_add("phase", "gradient norm", ork_prof_now() - tp);
        if (stream_skip) {
            ORK_WARN("step %lld skipped: %d blocks had non-finite gradients and were not updated (loss %g, gradient norm %g)",
                     (long long)step, stream_skip, (double)loss, norm);
            j->skipped++;
        } else if (bad || !isfinite(norm)) {
            ORK_WARN("step %lld skipped: non-finite %s (loss %g, gradient norm %g)", (long long)step,
                     bad ? "loss" : "gradient", (double)loss, norm);
            j->skipped++;
        } else if (!j->tstream) { /* streamed: stepped already, per block */
            float gs = ork_clip_factor(t->max_grad_norm, norm);
            double lr = ork_lr_at(&j->lr, step - 1);
            tp = ork_prof_enabled() ? ork_prof_now() : 0;
            ORK_TRY(ork_train_optimizer_step(j, step - j->skipped, lr, gs));
            ORK_TRY(ork_train_ema_step(j)); /* streamed: per block, after each block's step (state_stream.c) */
            if (ork_prof_enabled()) { ork_graph_sync(j->g); ork_prof_add("phase", "optimizer step", ork_prof_now() - tp); }
        }
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_OPTIMIZER));
        if (j->grad_pool) j->grads_dead = 1; /* read by the optimizer step just enqueued: dead from here on */
        ORK_TRY(ork_train_step_outputs(j, step, loss, norm, j->skipped != skipped0)); /* progress line, metrics.jsonl */
        if (j->ce) ork_train_stream_stats_mark(j, step, start, t->steps);
        if (j->skipped != skipped0) in_row++;
        else { in_row = 0; trained++; }
        /* non-finite steps learn nothing: stop rather than burn hours (every rank
         * skips the same steps: ork_train_dist_step_end), and save nothing new */
        if (in_row >= ORK_TRAIN_SKIP_LIMIT)
            return ORK_FAIL(ORK_E_NUMERIC, "steps %lld-%lld: %d steps in a row skipped for non-finite loss or gradients: "
                            "stopping (the LoRA and state saved last are kept; lower train.lr, check the images and "
                            "their text embeddings, or resume from an earlier state)", (long long)(step - in_row + 1),
                            (long long)step, ORK_TRAIN_SKIP_LIMIT);
        if (step == t->steps && !trained)
            return ORK_FAIL(ORK_E_NUMERIC, "no step trained: all %lld steps of this run (%lld-%lld) were skipped for "
                            "non-finite loss or gradients; nothing saved (lower train.lr, check the images and their "
                            "text embeddings, or resume from an earlier state)", (long long)(step - start),
                            (long long)(start + 1), (long long)step);
        if (step % save_every == 0 || step == t->steps) {
            /* the LoRA first: a kill between the two leaves the state one
             * save behind, and the resumed run rewrites the same LoRA file
             * (training is deterministic); the other order loses it */
            if (ork_dist_rank(j->dist) == 0) { /* rank 0 writes, the others wait */
                ORK_TRY(ork_train_save_lora(j, step));
                ORK_TRY(ork_train_save_state(j, step));
            ork_train_plot_now(j); /* loss.png from metrics.jsonl */
            }
            ORK_TRY(ork_dist_barrier(j->dist));
        }
        if (ork_samples_due(j->samples, step, start, t->steps)) ORK_TRY(ork_train_sample_now(j, step));
    }
    ORK_INFO("device memory: peak %.2f GiB allocated (weights %.2f, lora %.2f, optimizer %.2f, activations+checkpoints %.2f GiB now)",
             (double)ork_alloc_peak(j->alloc) / 1073741824.0, (double)ork_alloc_in_use(j->alloc, "weights") / 1073741824.0,
             (double)ork_alloc_in_use(j->alloc, "lora") / 1073741824.0, (double)ork_alloc_in_use(j->alloc, "optimizer") / 1073741824.0,
             (double)(ork_alloc_in_use(j->alloc, "activations") + ork_alloc_in_use(j->alloc, "checkpoints")) / 1073741824.0);
    if (j->ce) ork_train_stream_stats_report(j);
    if (j->clip_differed)
        ORK_INFO("gradient clipping: %lld of the %lld steps run clipped with the previous step's norm where exact "
                 "clipping differs (the trainable state streams per block)", (long long)j->clip_differed,
                 (long long)(t->steps - start));
    if (j->plan)
        ORK_INFO("activations: peak %.2f GiB (arena) + %.2f GiB (checkpoints); the plan counted %.2f GiB working set + "
                 "%.2f GiB saved carries", (double)ork_alloc_peak_tag(j->alloc, "activations") / 1073741824.0,
                 (double)ork_alloc_peak_tag(j->alloc, "checkpoints") / 1073741824.0, (double)j->plan->work / 1073741824.0,
                 (double)j->plan->saved / 1073741824.0);
    if (ork_prof_enabled() && t->steps > start) ork_prof_report(stdout, (double)(t->steps - start));
    (void)t0;
    if (start >= t->steps) ORK_INFO("nothing to do: the saved state is already at step %lld", (long long)start);
    return ORK_OK;
}

static ork_status common_init(job *j, ork_config *cfg, const ork_registry *reg) {
    memset(j, 0, sizeof *j);
    j->in_cur.k = j->in_next.k = -1;
    j->inputs_sync = ork_train_switched_off("ORAKUL_INPUTS_AHEAD", NULL);
    j->ahead_off = ork_train_switched_off("ORAKUL_STREAM_AHEAD", NULL);
    j->lend_off = ork_train_switched_off("ORAKUL_STREAM_LEND", NULL);
    j->cfg = cfg;
    j->reg = reg;
    j->p = ork_config_process(cfg);
    const ork_job_config *jc = ork_config_job(cfg);
    snprintf(j->name, sizeof j->name, "%s", jc->name ? jc->name : "lora");
    snprintf(j->out_dir, sizeof j->out_dir, "%s/%s", j->p->training_folder ? j->p->training_folder : "output", j->name);
    j->seed = (uint64_t)j->p->train.seed;
    return ORK_OK;
}

ork_status ork_train_run(ork_config *cfg, const ork_registry *reg, const ork_train_opts *opts) {
    job j;
    ORK_TRY(common_init(&j, cfg, reg));
    j.overwrite = opts && opts->overwrite;
    ork_status s = ork_train_check_outputs(&j); /* before minutes of model loading */
    if (s == ORK_OK) s = setup(&j);
    if (s == ORK_OK && ork_mkdir_p(j.out_dir) != ORK_OK) s = ORK_FAIL(ORK_E_IO, "cannot create %s: %s", j.out_dir, strerror(errno));
    if (s == ORK_OK) s = train_loop(&j);
    j.failed = s != ORK_OK;
    job_free(&j);
    return s;
}

ork_status ork_train_plan(ork_config *cfg, const ork_registry *reg, FILE *out) {
    job j;
    ORK_TRY(common_init(&j, cfg, reg));
    ork_status s = ork_services_register();
    if (s == ORK_OK) s = ork_train_resolve_all(&j);
    if (s == ORK_OK) s = ork_train_check_datasets(&j);
    if (s == ORK_OK) s = ork_train_open_model(&j);
    for (size_t d = 0; s == ORK_OK && d < j.p->datasets.n; d++) {
        const ork_dataset *ds;
        s = ork_train_dataset(&j, d, &ds);
        if (s == ORK_OK) {
            size_t missing = ork_train_dataset_uncaptioned(ds);
            fprintf(out, "dataset %s: %zu images, %zu without a %s caption%s\n", j.p->datasets.v[d].folder_path, ds->n,
                    missing, ds->caption_ext, missing && j.p->datasets.v[d].default_caption ? " (default_caption used)" : "");
            s = ork_train_check_texts(&j, ds); /* the text embeddings beside the images, as run reads them */
        }
    }
    if (s == ORK_OK) s = ork_train_plan_text(&j, out); /* the captions' encode, before the plan as in run (text_glue.c) */
    if (s == ORK_OK) {
        int64_t bytes = 0, lin = 0;
        for (int i = 0; i < j.info.n_weights; i++) {
            int64_t n = 1;
            for (int k = 0; k < j.info.weights[i].ndim; k++) n *= j.info.weights[i].shape[k];
            bytes += n;
            if (j.info.weights[i].flags & ORK_WEIGHT_LINEAR) lin++;
        }
        fprintf(out, "model: %s (%s), %d blocks, %d weights (%lld linear), %.3f G parameters\n",
                j.p->model.name_or_path, j.info.variant, j.info.n_blocks, j.info.n_weights, (long long)lin,
                (double)bytes / 1e9);
        fprintf(out, "components: model %s, loss %s, optimizer %s\n", j.c_model->c->id, j.c_loss->c->id, j.c_opt->c->id);
        ork_train_fp8_plan_line(&j, out);
        fprintf(out, "output: %s/%s_<step>.safetensors (%s LoRA format)\n", j.out_dir, j.name, j.info.lora_format);
        /* LoRA files of this job and no state: run refuses without --overwrite; plan says so as a warning */
        ork_log_demote(1);
        (void)ork_train_check_outputs(&j);
        ork_log_demote(-1);
        const char *dev = j.p->device ? j.p->device : "cuda:0";
        s = ork_train_make_plan(&j, strncmp(dev, "cpu", 3) ? ORK_DEV_CUDA : ORK_DEV_CPU);
        /* the plan as it will run: without the shadows when host memory needs that */
        if (s == ORK_OK) ork_stream_plan_fit_host(j.plan, ork_train_host_available(), ork_config_file(j.cfg));
        if (s == ORK_OK) ork_stream_plan_print(j.plan, out);
        fflush(out); /* the plan before any refusal line on stderr */
        if (s == ORK_OK) s = ork_train_check_host(&j);
        if (s == ORK_OK) s = ork_train_preflight(&j); /* what run checks before it loads the weights */
    }
    job_free(&j);
    return s;
}
