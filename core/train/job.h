/* train/job.h — private to core/train (not installed): the training job that
 * train.c and its pieces share. One job owns every object of a run:
 * components, backend, allocator, graph, weight store, LoRA network, latent
 * cache in memory, optimizer state. The pieces, one concern each:
 *   components.c     the plugins (model, loss, optimizer, quantizer), the backend
 *   dataset_cache.c  the dataset's latent encode and cache, text embeddings, batches
 *   dist_glue.c      data-parallel setup and step glue (core/dist)
 *   plan_glue.c      the residency plan, host memory, the gradients lent to the streamer
 *   preflight.c      the checks before the weights load, shared by plan and run
 *   optimizer.c      the optimizer's state and step, the gradient norm
 *   state_stream.c   the trainable state streamed per block (stream/trainable_stream.h)
 *   checkpoint.c     the training state, resume, the LoRA file
 *   prefetch.c       micro-batch inputs built ahead on a thread
 *   outputs.c        samples, progress, metrics, loss plot, streaming figures
 *   text_glue.c      the captions' text embeddings (text cache, encoders), caption dropout
 *   ema.c            the EMA of the LoRA parameters (train/ema.h)
 *   train.c          setup and the training loop (train.h's two entry points)
 * [control-thread] */
#ifndef ORK_TRAIN_JOB_H
#define ORK_TRAIN_JOB_H

#include "train/train.h"

#include <orakul/orakul.h>

#include "data/dataset.h"
#include "dist/dist.h"
#include "dist/grad_sync.h"
#include "dist/shard.h"
#include "io/safetensors.h"
#include "plugin/model_codec.h"
#include "stream/copy_engine.h"
#include "stream/plan.h"
#include "stream/streamer.h"
#include "stream/trainable_stream.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "train/lora.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/runner.h"
#include "train/samples.h"
#include "train/schedule.h"
#include "train/wstore.h"

#include <stdint.h>
#include <stdio.h>

typedef struct item {
    char *path;
    int h_tok, w_tok;
    float *tokens;  /* (N, C) clean latent tokens x0 */
    float *txt;     /* (T, ctx) text embedding, or NULL: zeros */
    int txt_len;    /* txt's valid rows (an UNMASKED slot: the caption's own, the rest zero), 0: T */
    float *vec;     /* (vec_dim), or NULL: zeros */
    int ds;         /* its datasets[] entry (caption dropout) */
    int dop;        /* DOP: its class prompt's embedding in the text table (text_glue.c), -1: none */
} item;

typedef struct ork_train_text ork_train_text; /* text_glue.c */

/* A micro-batch's inputs on the host (ork_train_inputs_build). */
typedef struct step_inputs {
    int64_t k;                       /* the micro-batch, -1: none */
    int nb, N, h_tok, w_tok;
    float *x0, *xt, *tg, *txt, *vec; /* [nb, N, C] x [3], [nb, T, ctx], [nb, vec_dim] */
    float *dtxt, *dvec;              /* DOP: the class prompts' [nb, T, ctx], [nb, vec_dim]; NULL without */
    int tlen[256], dlen[256];        /* each slot's valid txt / dtxt rows (1 .. T; < T only for an UNMASKED
                                      * slot's caption, text_glue.c): batch 1 uploads txt (1, tlen[0], ctx) */
    float ts[256], gd[256], wsum;
} step_inputs;

typedef struct job {
    ork_config *cfg;
    const ork_process_config *p;
    const ork_registry *reg;
    const ork_plugin_component *c_model, *c_loss, *c_opt;
    void *model_params, *loss_params, *opt_params;
    const ork_model_vtable *mvt;
    void *model;
    ork_model_info info;
    ork_model_codec codec; /* the model's image codec (plugin/model_codec.h); info.weights includes its weights */
    const ork_loss_vtable *lvt;
    void *loss;
    const ork_optimizer_vtable *ovt;
    void *opt;
    const ork_plugin_component *c_quant; /* NULL: model.qtype none (no quantizer) */
    void *quant_params;
    const ork_quant_vtable *qvt;
    void *quant;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_backend *be;
    ork_alloc *alloc;
    ork_graph *g;
    ork_wstore *ws;
    ork_stream_plan *plan;
    ork_copy_engine *ce;
    ork_lora_net *lora;
    ork_runner *runner;
    ork_dataset *scans;     /* [p->datasets.n] each folder scanned once (ork_train_dataset), freed once encoded */
    item *items;
    int n_items;
    int T;                  /* text tokens */
    int have_te;            /* text embeddings found on disk */
    ork_train_text *text;   /* the captions' embeddings (text_glue.c), NULL: no text encoder */
    int have_enc;           /* items given an encoded caption's embedding */
    /* optimizer */
    int n_params;
    ork_tensor **pt;        /* [n_params] LoRA tensors (down, up alternating) */
    ork_tensor **state;     /* [n_params] U8 state */
    ork_tensor *norms;      /* F32 (n_params) device scratch for gradient norms */
    ork_ts_params ts;
    ork_lr_params lr;
    uint64_t seed;
    char out_dir[768];
    char name[192];
    /* what the run writes besides the LoRA (samples.h, progress.h, metrics.h, plot.h) */
    ork_samples *samples;   /* NULL: no sampling */
    ork_progress *progress;
    ork_metrics *metrics;
    /* batches: micro-batches per epoch, for the deterministic data order */
    int64_t skipped;        /* steps skipped for non-finite values (saved with the state) */
    int64_t clip_differed;  /* streamed trainable state: steps whose previous-norm clipping was not exact clipping */
    int *order;             /* [n_items] permutation of the current epoch */
    int64_t order_epoch;
    /* trainable state streamed per block (plan->trainable_streamed, docs/streaming.md §4) */
    ork_tstream *tstream;   /* the streamer of the trainable state (stream/trainable_stream.h);
                             * NULL: the LoRA tensors and their state are resident */
    ork_block_hooks ws_hooks; /* the weight store's, called before the runtime's */
    int *block_param_first; /* [n_blocks + 1] the streamed params of block b: */
    int *block_params;      /* block_params[block_param_first[b] .. block_param_first[b + 1]) */
    int64_t cur_step;       /* optimizer step number and lr for the per-block step */
    double cur_lr;
    /* streaming figures (ork_train_stream_stats_mark): [0] after the first step, [1] at the last */
    double ss_t[2];
    uint64_t ss_h2d[2], ss_d2h[2];
    int ss_timing;              /* ORAKUL_STREAM_TIMING=1: the copy lanes are timed (ork_ce_busy) */
    double ss_busy[2][3];       /* [mark] seconds busy: the H2D lane, the D2H lane, the DEC lane (decodes) */
    double ss_wait[2][2];       /* [mark][0 compute lane for loads, 1 H2D lane for free slots] seconds */
    FILE *ss_trace;             /* ORAKUL_STREAM_TRACE=path: the lanes' timeline (ork_ce_set_trace) */
    uint64_t ss_loads[2][5];    /* [mark] the streamer's loads, of them lent, visits reused, loads copied ahead;
                                 * trainable_stream.c's visits that found their record in its slot */
    int64_t ss_steps[2];
    /* data-parallel (core/dist, docs/multigpu.md): dist NULL for one process */
    ork_dist_env denv;
    ork_dist *dist;
    ork_gsync *gsync;       /* the LoRA gradients' bucketed all-reduce */
    int device_index;       /* CUDA device of this process */
    int failed;             /* the run failed: abort the communicator */
    ork_data_pos data_at;   /* data position of micro-batch data_k (0, 0 or the resumed state's) */
    int64_t data_k;
    step_inputs in_cur, in_next; /* micro-batch inputs: the one running, the one a thread builds ahead */
    ork_thread *in_thread;  /* builds in_next (micro_step) */
    int in_running;
    ork_status in_st;
    int inputs_sync;        /* ORAKUL_INPUTS_AHEAD=0 (bench A/B): built on the main thread, after the backward's enqueue */
    void *grad_pool;        /* the LoRA gradients, one region lent to the streamer between steps */
    size_t grad_pool_bytes;
    int grads_dead;         /* no gradient is live (set at the optimizer step; the loss zeroes them) */
    /* the checkpoints pooled as the streamer's ahead region (ork_train_ahead_region): the
     * micro-batch shape they were sized for; off after a shape change */
    int ckpt_sig[3], ckpt_pool_off;
    int ahead_off;          /* ORAKUL_STREAM_AHEAD=0 (bench A/B): nothing copied ahead */
    int lend_off;           /* ORAKUL_STREAM_LEND=0 (bench A/B): the gradients not lent */
    int short_warned;
    int overwrite;          /* --overwrite (ork_train_opts): a fresh run may overwrite this job's LoRA files */
    /* the EMA of the LoRA parameters (ema.c, train/ema.h); ema_on 0: train.ema_config.use_ema off */
    int ema_on;
    ork_tensor **ema;       /* [n_params] resident F32 shadows; NULL when streamed (in the records) */
    ork_tensor *ema_tmp;    /* F32 scratch of the largest parameter's numel */
    size_t *ema_off;        /* [n_params] streamed: the shadow's offset in the parameter's state */
    size_t *opt_bytes;      /* [n_params] streamed: the optimizer's own state bytes (before the shadow) */
    void **ema_saved;       /* [n_params] the live values while the shadows stand in (sampling) */
    /* differential output preservation (dop.c, train/dop.h); dop_on 0: off */
    int dop_on;
    ork_tensor **dop_w;     /* [LoRA modules] the adapted weights ... */
    ork_lora **dop_lo;      /* ... and their adapters, detached for the prior prediction */
    float *dop_prior;       /* [dop_prior_n] the micro-batch's prior prediction (host F32) */
    size_t dop_prior_n;
    ork_tensor *dop_txt, *dop_vec; /* the class prompts on the graph (to its reset) */
    double dop_loss;        /* the step's preservation loss (metrics.jsonl) */
} job;

/* Skipped steps in a row (non-finite loss or gradients) that stop a run. */
enum { ORK_TRAIN_SKIP_LIMIT = 20 };

/* device slots of the streamed trainable state (stream/trainable_stream.h) */
enum { ORK_TRAIN_STATE_SLOTS = 2 };

/* train.c */
/* The environment variable name, else old_name (an older name kept as an alias for
 * scripts; may be NULL), else NULL. */
const char *ork_train_getenv(const char *name, const char *old_name);
/* A bench switch set to "0" (ORAKUL_STREAM_LEND, ORAKUL_INPUTS_AHEAD; old_name as above). */
int ork_train_switched_off(const char *name, const char *old_name);
double ork_train_now(void); /* monotonic seconds */

/* components.c: the plugins and the backend */
ork_status ork_train_resolve_all(job *j);
ork_status ork_train_check_datasets(job *j);
ork_status ork_train_open_model(job *j);
ork_status ork_train_pick_backend(job *j);
int ork_train_fp8_gemm(const job *j);
void ork_train_fp8_plan_line(const job *j, FILE *out);

/* dataset_cache.c: the latent cache, text embeddings, batches */
ork_dataset_opts ork_train_dataset_opts(const ork_process_config *p, const ork_dataset_config *dc);
/* datasets[d] scanned (data/dataset.c) on the first call and kept in j->scans: the caption
 * encode, the latent encode and plan read the one scan. The scan's own log line is
 * silenced: build_dataset (run) and plan each say the dataset once. */
ork_status ork_train_dataset(job *j, size_t d, const ork_dataset **out);
size_t ork_train_dataset_uncaptioned(const ork_dataset *ds); /* images without a caption file */
void ork_train_datasets_free(job *j);
ork_status ork_train_encode_dataset(job *j);
int ork_train_batch_of(const job *j);
int64_t ork_train_accum_of(const job *j);
ork_status ork_train_shard_items(job *j, int64_t k, int B, int *idx, int *slot, int *nb);

/* text_glue.c: the captions and sample prompts encoded (or read from the text
 * cache) before the plan; caption dropout */
ork_status ork_train_encode_text(job *j);
/* `orakul plan`: the text encoders resolved as run resolves them (the same refusals),
 * how many captions the cache holds, and the encode's plan for the rest */
ork_status ork_train_plan_text(job *j, FILE *out);
void ork_train_text_free(job *j);
/* item i of datasets[ds] gets its caption's embedding (copied) unless it has one */
ork_status ork_train_text_item(job *j, int ds, size_t i, item *it);
/* DOP: it's class prompt's embedding (dropped: its dataset's dropout caption's), held for the run,
 * and its valid rows *len (T but for an UNMASKED slot); 0 when there is none (*txt, *vec, *len untouched) */
int ork_train_text_dop(const job *j, const item *it, int dropped, const float **txt, const float **vec, int *len);
/* Does micro-batch k's slot drop its caption at rate? Pure in (seed, k, slot). */
int ork_train_caption_dropped(uint64_t seed, int64_t k, int slot, double rate);
/* 1 when it's caption is dropped at micro-batch k, slot: *txt, *vec the dropout
 * caption's embedding (NULL: zeros), *len its valid rows (T but for an UNMASKED
 * slot); 0: unchanged. */
int ork_train_text_drop(const job *j, int64_t k, int slot, const item *it, const float **txt, const float **vec,
                        int *len);

/* dist_glue.c: data parallelism (dist NULL: one process, each a no-op) */
ork_status ork_train_dist_device(job *j, int *index);
ork_status ork_train_dist_start(job *j);
ork_status ork_train_dist_dataset_turn(job *j, int after);
ork_status ork_train_dist_grads(job *j);
ork_status ork_train_dist_resume(job *j, int64_t *start);
ork_status ork_train_dist_step_end(job *j, float *loss, int *bad);

/* plan_glue.c: the residency plan and the gradients lent to the streamer */
ork_status ork_train_make_plan(job *j, ork_device dev);
size_t ork_train_host_available(void);
ork_status ork_train_check_host(job *j);
ork_status ork_train_setup_grad_pool(job *j);
ork_status ork_train_grads_lend(job *j);
ork_status ork_train_grads_reclaim(job *j);
ork_status ork_train_ahead_region(job *j, int nb, int N, int T);

/* preflight.c: what run checks before it loads the weights, which plan checks too */
ork_status ork_train_preflight(job *j);                /* after the plan: codec, streaming, loss, optimizer, samples */
ork_status ork_train_preflight_status(ork_status s);   /* a plan refusal before step 1 is the config's: BUDGET -> CONFIG */
int ork_train_text_len(const job *j);                  /* text tokens T */
/* <image stem>.te.safetensors beside img_path, opened with its shapes checked
 * (*out NULL when there is none); te gets its path. */
ork_status ork_train_open_text(const job *j, const char *img_path, char *te, size_t n, ork_st_file **out);
ork_status ork_train_check_texts(const job *j, const ork_dataset *ds); /* every image's, for plan */

/* optimizer.c */
ork_status ork_train_setup_optimizer(job *j);
ork_status ork_train_grad_norm(job *j, double *out);
ork_status ork_train_optimizer_step(job *j, int64_t step, double lr, float grad_scale);
ork_status ork_train_zero_grads(job *j);

/* state_stream.c: the trainable state streamed per block */
ork_status ork_train_streamed_setup(job *j);
ork_block_hooks ork_train_streamed_hooks(job *j);
void ork_train_streamed_clip_check(job *j, int64_t step, double norm, float applied);
ork_status ork_train_streamed_save(job *j, ork_st_writer *w);
ork_status ork_train_streamed_load(job *j, ork_st_file *f, const char *path);
void ork_train_streamed_reader(job *j); /* ork_lora_save reads the host records again */

/* ema.c: the EMA of the LoRA parameters (train/ema.h); each a no-op with ema_on 0 */
ork_status ork_train_ema_setup(job *j);                 /* after the optimizer, before ork_train_streamed_setup */
/* streamed: the state bytes of parameter i in its record, the optimizer's opt_bytes then the shadow */
size_t ork_train_ema_state_bytes(job *j, int i, size_t opt_bytes);
/* streamed: the shadow of parameter i in its record's state (state) from its initial data (dt) */
void ork_train_ema_init_record(job *j, int i, char *state, ork_dtype dt, const void *data);
void ork_train_ema_free(job *j);
ork_status ork_train_ema_step(job *j);                  /* resident: after the optimizer step */
ork_status ork_train_ema_block(job *j, const ork_opt_param *ps, const int32_t *ids, int n); /* streamed: per block */
ork_status ork_train_ema_save(job *j, ork_st_writer *w, void **bufs); /* ema.<i>; bufs [n_params] freed by the caller */
ork_status ork_train_ema_check(job *j, ork_st_file *f, const char *path);
ork_status ork_train_ema_load(job *j, ork_st_file *f, const char *path);
ork_status ork_train_ema_lora_begin(job *j);            /* the LoRA file reads the shadows ... */
void ork_train_ema_lora_end(job *j);                    /* ... and the live values again */
ork_status ork_train_ema_swap(job *j, int in);          /* sampling: the shadows in the parameters' place (1) and out (0) */

/* dop.c: differential output preservation (train/dop.h); each a no-op with dop_on 0 */
ork_status ork_train_dop_check(job *j);                 /* preflight (plan and run): trigger_word, streamed state */
ork_status ork_train_dop_setup(job *j);                 /* after the text, LoRA and trainable state: the refusals */
void ork_train_dop_free(job *j);
/* the prior prediction of micro-batch si with the LoRA off on its class prompts (in: the uploaded inputs) */
ork_status ork_train_dop_prior(job *j, ork_model_inputs *in, const step_inputs *si);
/* the preservation forward + backward after the main one; *loss_out its (scaled) loss */
ork_status ork_train_dop_step(job *j, const ork_model_inputs *in, const step_inputs *si, float inv_accum,
                              float *loss_out);

/* checkpoint.c */
void ork_train_remove_stale_tmp(job *j);
/* LoRA files of this job in its folder and no state to resume from: refused
 * (ORK_E_CONFIG, one line saying what to do) unless j->overwrite. */
ork_status ork_train_check_outputs(job *j);
ork_status ork_train_save_state(job *j, int64_t step);
ork_status ork_train_load_state(job *j, int64_t *step);
ork_status ork_train_save_lora(job *j, int64_t step);

/* prefetch.c: micro-batch inputs */
ork_status ork_train_upload_act(job *j, const float *host, int ndim, const int64_t *shape, ork_tensor **out);
void ork_train_inputs_free(step_inputs *si);
ork_status ork_train_inputs_build(job *j, int64_t k, step_inputs *si);
void ork_train_inputs_join(job *j);
void ork_train_inputs_ahead(job *j, int64_t k);

/* outputs.c: what the run reports besides the LoRA */
void ork_train_stream_stats_mark(job *j, int64_t step, int64_t start, int64_t last);
void ork_train_stream_stats_report(job *j);
ork_status ork_train_sample_now(job *j, int64_t step);
void ork_train_plot_now(job *j);
ork_status ork_train_outputs_open(job *j, int64_t start, int64_t log_every);
ork_status ork_train_step_outputs(job *j, int64_t step, double loss, double norm, int skipped);

#endif
