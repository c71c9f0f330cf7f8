/* train/train.c — the LoRA training job (see train.h). One job owns every
 * object of a run: components, backend, allocator, graph, weight store, LoRA
 * network, latent cache in memory, optimizer state. [control-thread] */
#include "train/train.h"

#include <orakul/orakul.h>

#include "data/dataset.h"
#include "data/image.h"
#include "dist/dist.h"
#include "dist/grad_sync.h"
#include "dist/shard.h"
#include "io/safetensors.h"
#include "plugin/loader.h"
#include "stream/copy_engine.h"
#include "stream/plan.h"
#include "stream/streamer.h"
#include "stream/zero.h"
#include "tensor/ops.h"
#include "tensor/tape.h"
#include "train/lora.h"
#include "train/runner.h"
#include "train/schedule.h"
#include "train/services.h"
#include "train/wstore.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/samples.h"
#include "numerics/half.h"
#include "util/log.h"
#include "util/prof.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

typedef struct item {
    char *path;
    int h_tok, w_tok;
    float *tokens;  /* (N, C) clean latent tokens x0 */
    float *txt;     /* (T, ctx) text embedding, or NULL: zeros */
    float *vec;     /* (vec_dim), or NULL: zeros */
} item;

/* A micro-batch's inputs on the host (inputs_build). */
typedef struct step_inputs {
    int64_t k;                       /* the micro-batch, -1: none */
    int nb, N, h_tok, w_tok;
    float *x0, *xt, *tg, *txt, *vec; /* [nb, N, C] x [3], [nb, T, ctx], [nb, vec_dim] */
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
    item *items;
    int n_items;
    int T;                  /* text tokens */
    int have_te;            /* text embeddings found on disk */
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
    ork_zero *zero;         /* NULL: the LoRA tensors and their state are resident */
    ork_block_hooks ws_hooks; /* the weight store's, called before the runtime's */
    int *zp_first, *zp_list; /* params of block b: zp_list[zp_first[b] .. zp_first[b + 1]) */
    int64_t cur_step;       /* optimizer step number and lr for the per-block step */
    double cur_lr;
    /* streaming figures (stream_stats_mark): [0] after the first step, [1] at the last */
    double ss_t[2];
    uint64_t ss_h2d[2], ss_d2h[2];
    int ss_timing;              /* ORAKUL_STREAM_TIMING=1: the copy lanes are timed (ork_ce_busy) */
    double ss_busy[2][3];       /* [mark] seconds busy: the H2D lane, the D2H lane, the DEC lane (decodes) */
    double ss_wait[2][2];       /* [mark][0 compute lane for loads, 1 H2D lane for free slots] seconds */
    FILE *ss_trace;             /* ORAKUL_STREAM_TRACE=path: the lanes' timeline (ork_ce_set_trace) */
    uint64_t ss_loads[2][5];    /* [mark] the streamer's loads, of them lent, visits reused, loads copied ahead;
                                 * zero.c's visits that found their record in its slot */
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
    pthread_t in_thread;    /* builds in_next (micro_step) */
    int in_running;
    ork_status in_st;
    int inputs_sync;        /* ORAKUL_INPUTS_AHEAD=0 (bench A/B): built on the main thread, after the backward's enqueue */
    void *grad_pool;        /* the LoRA gradients, one region lent to the streamer between steps */
    size_t grad_pool_bytes;
    int grads_dead;         /* no gradient is live (set at the optimizer step; the loss zeroes them) */
    /* the checkpoints pooled as the streamer's ahead region (ahead_region): the
     * micro-batch shape they were sized for; off after a shape change */
    int ckpt_sig[3], ckpt_pool_off;
    int ahead_off;          /* ORAKUL_STREAM_AHEAD=0 (bench A/B): nothing copied ahead */
    int lend_off;           /* ORAKUL_STREAM_LEND=0 (bench A/B): the gradients not lent */
    int short_warned;
} job;

static void inputs_free(step_inputs *si);
/* A bench switch set to "0" (ORAKUL_STREAM_LEND, ORAKUL_INPUTS_AHEAD). */
static int env_zero(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "0");
}
static int grads_lent(const job *j);
static ork_status grads_lend(job *j);

static void job_free(job *j) {
    if (j->in_running) pthread_join(j->in_thread, NULL);
    inputs_free(&j->in_cur);
    inputs_free(&j->in_next);
    ork_progress_destroy(j->progress);
    ork_metrics_close(j->metrics);
    ork_samples_destroy(j->samples);
    ork_gsync_destroy(j->gsync); /* gives the LoRA tensors their grads back */
    ork_dist_destroy(j->dist, j->failed); /* before the allocator: its scratch lives there */
    if (j->runner) ork_runner_destroy(j->runner);
    if (j->zero) {
        for (int i = 0; i < j->n_params; i++) { /* the slot headers: grads are ours, data is the slot's */
            free(j->pt[i]->grad);
            j->pt[i]->grad = NULL;
            j->pt[i]->base = NULL;
        }
        ork_zero_destroy(j->zero);
    }
    for (int i = 0; j->grad_pool && i < j->n_params; i++) { /* headers over the pool (ork_graph_set_grad_pool) */
        ork_tensor *gr = j->pt[i]->grad;
        if (gr && gr->owner == ORK_OWN_EXTERN && (uint8_t *)gr->base >= (uint8_t *)j->grad_pool &&
            (uint8_t *)gr->base < (uint8_t *)j->grad_pool + j->grad_pool_bytes) {
            free(gr);
            j->pt[i]->grad = NULL;
        }
    }
    free(j->zp_first);
    free(j->zp_list);
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

/* device slots of the streamed trainable state (stream/zero.h) */
enum { ZERO_SLOTS = 2 };

/* ---- components -------------------------------------------------------- */

static ork_status resolve(job *j, ork_component_kind kind, const ork_plugin_component **out, void **params) {
    ork_loc at;
    const char *name = ork_config_component_name(j->cfg, kind, &at);
    const ork_plugin_component *pc = ork_registry_find(j->reg, kind, name);
    if (!pc) {
        char list[1024] = "";
        size_t len = 0;
        for (int i = 0; i < ork_registry_count(j->reg); i++) {
            const ork_plugin *p = ork_registry_plugin(j->reg, i);
            for (int k = 0; k < p->n_components; k++) {
                const ork_component *c = p->components[k].c;
                if (c->kind != kind) continue;
                const char *shown = c->aliases && c->aliases[0] ? c->aliases[0] : c->id;
                len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s",
                                        len ? ", " : "", shown);
            }
        }
        return ork_config_fail_at(&at, ORK_E_CONFIG, "unknown %s '%s' (available: %s)", ork_kind_name(kind), name,
                                  len ? list : "none: no plugin of this kind was found");
    }
    size_t sz = pc->c->params_size ? pc->c->params_size : 1;
    void *buf = calloc(1, sz);
    if (!buf) return ORK_E_NOMEM;
    ork_status s = ork_config_component_params(j->cfg, ork_config_component_params_path(kind), pc->c->params, buf,
                                               pc->c->params_size);
    if (s != ORK_OK) { free(buf); return s; }
    *out = pc;
    *params = buf;
    return ORK_OK;
}

/* model.vae_path (ai-toolkit's key) reaches a model family that declares a
 * string key "vae_path" in its model_kwargs table, unless model_kwargs set it. */
static void pass_vae_path(job *j) {
    const char *vp = j->p->model.vae_path;
    if (!vp || !*vp || !j->c_model->c->params) return;
    for (const ork_param *k = j->c_model->c->params; k->key; k++)
        if (!strcmp(k->key, "vae_path") && k->type == ORK_PARAM_STRING) {
            const char **slot = (const char **)((char *)j->model_params + k->offset);
            if (!*slot || !**slot) *slot = vp;
            return;
        }
}

/* model.quantize_kwargs.fp8_gemm: a string key the fp8 quantizers declare
 * ("dequant" | "native"); the core reads it for the graph (graph.h). */
static int quant_fp8_gemm(const job *j) {
    if (!j->c_quant || !j->c_quant->c->params || !j->quant_params) return ORK_FP8_GEMM_DEQUANT;
    for (const ork_param *k = j->c_quant->c->params; k->key; k++)
        if (!strcmp(k->key, "fp8_gemm") && k->type == ORK_PARAM_STRING) {
            const char *v = *(const char *const *)((const char *)j->quant_params + k->offset);
            return v && !strcmp(v, "native") ? ORK_FP8_GEMM_NATIVE : ORK_FP8_GEMM_DEQUANT;
        }
    return ORK_FP8_GEMM_DEQUANT;
}

static ork_status resolve_all(job *j) {
    ORK_TRY(resolve(j, ORK_KIND_MODEL, &j->c_model, &j->model_params));
    pass_vae_path(j);
    ORK_TRY(resolve(j, ORK_KIND_LOSS, &j->c_loss, &j->loss_params));
    ORK_TRY(resolve(j, ORK_KIND_OPTIMIZER, &j->c_opt, &j->opt_params));
    j->mvt = j->c_model->c->vtable;
    j->lvt = j->c_loss->c->vtable;
    j->ovt = j->c_opt->c->vtable;
    /* the quantizer of the frozen linear weights (model.quantize + model.qtype) */
    if (j->p->model.qtype && strcmp(j->p->model.qtype, "none") != 0) {
        ORK_TRY(resolve(j, ORK_KIND_QUANT, &j->c_quant, &j->quant_params));
        j->qvt = j->c_quant->c->vtable;
        ORK_TRY(j->qvt->create(&j->c_quant->host, j->quant_params, &j->quant));
    }
    return ORK_OK;
}

/* Every dataset folder exists and is a folder: checked before the model is
 * loaded (minutes for FLUX.1-dev), with the YAML location of the bad path. */
static ork_status check_datasets(job *j) {
    for (size_t d = 0; d < j->p->datasets.n; d++) {
        const char *fp = j->p->datasets.v[d].folder_path;
        struct stat sb;
        const char *why = NULL;
        if (!fp || stat(fp, &sb) != 0) why = fp ? strerror(errno) : "not set";
        else if (!S_ISDIR(sb.st_mode)) why = "not a folder";
        if (!why) continue;
        char key[64];
        ork_loc at;
        snprintf(key, sizeof key, "datasets[%zu].folder_path", d);
        if (ork_config_where(j->cfg, key, &at) && at.line > 0)
            return ork_config_fail_at(&at, ORK_E_CONFIG, "%s '%s': %s", key, fp ? fp : "", why);
        return ORK_FAIL(ORK_E_CONFIG, "%s: %s '%s': %s", ork_config_file(j->cfg), key, fp ? fp : "", why);
    }
    return ORK_OK;
}

static ork_status open_model(job *j) {
    ORK_TRY(j->mvt->create(&j->c_model->host, j->model_params, &j->model));
    return j->mvt->open(j->model, j->p->model.name_or_path, &j->info);
}

/* ---- device -------------------------------------------------------------- */

static ork_status pick_backend(job *j) {
    const char *dev = j->p->device ? j->p->device : "cuda:0";
    if (!strncmp(dev, "cpu", 3)) {
        j->be = ork_cpu_backend();
        return ORK_OK;
    }
    if (!strncmp(dev, "cuda", 4)) {
#ifdef ORAKUL_HAVE_CUDA
        if (ork_cuda_device_count() > 0) {
            j->be = ork_cuda_backend();
            return ORK_OK;
        }
#endif
        ork_loc at;
        if (ork_config_where(j->cfg, "device", &at) && at.line > 0)
            return ork_config_fail_at(&at, ORK_E_CONFIG, "device '%s': no CUDA device available (use device: cpu)", dev);
        return ORK_FAIL(ORK_E_CONFIG, "%s: device '%s' (the default): no CUDA device available; set device: cpu",
                        ork_config_file(j->cfg), dev);
    }
    return ORK_FAIL(ORK_E_CONFIG, "%s: unknown device '%s' (cpu or cuda:N)", ork_config_file(j->cfg), dev);
}

/* ---- data ---------------------------------------------------------------- */

static int mkdir_p(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static const char *stem_of(const char *path, char *buf, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(buf, n, "%s", base);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = 0;
    return buf;
}

/* Encode one image into tokens with the model's codec (grad off). */
static ork_status encode_image(job *j, const char *path, int res, item *it) {
    ork_image img = {0}, fit = {0};
    ORK_TRY(ork_image_load(path, &img));
    int bw, bh, ppt = j->info.pixels_per_token > 0 ? j->info.pixels_per_token : 16;
    ork_image_bucket(img.w, img.h, res, ppt, &bw, &bh);
    ork_status s = ork_image_fit(&img, bw, bh, &fit);
    ork_image_free(&img);
    if (s != ORK_OK) return s;
    float *chw = malloc((size_t)3 * bw * bh * sizeof *chw);
    if (!chw) { ork_image_free(&fit); return ORK_E_NOMEM; }
    ork_image_to_f32_chw(&fit, chw);
    ork_image_free(&fit);
    ORK_TRY(ork_graph_reset(j->g));
    int prev = ork_graph_set_grad(j->g, 0);
    ork_tensor *x, *tok;
    int64_t shape[4] = {1, 3, bh, bw};
    s = j->ta->from_host(j->g, ORK_F32, 4, shape, chw, &x);
    free(chw);
    /* the codec gets the image in F32 and casts to what it computes in
     * (TAEF1: F32; the VAE: its weights' dtype) */
    if (s == ORK_OK) s = j->mvt->encode(j->model, j->g, x, &tok);
    ork_graph_set_grad(j->g, prev);
    if (s != ORK_OK) return s;
    it->h_tok = bh / ppt;
    it->w_tok = bw / ppt;
    int64_t n = j->ta->numel(tok);
    if (n != (int64_t)it->h_tok * it->w_tok * j->info.token_channels)
        return ORK_FAIL(ORK_E_INTERNAL, "codec returned %lld values for a %dx%d token grid", (long long)n, it->w_tok, it->h_tok);
    it->tokens = malloc((size_t)n * sizeof *it->tokens);
    if (!it->tokens) return ORK_E_NOMEM;
    return j->ta->to_host(j->g, tok, ORK_F32, it->tokens);
}

static ork_status load_cached(const char *cache, uint64_t key, item *it, int C) {
    ork_st_file *f;
    if (access(cache, R_OK) != 0) return ORK_E_IO;
    if (ork_st_open(cache, &f) != ORK_OK) return ORK_E_IO; /* unreadable cache: rebuild */
    ork_status s = ORK_E_IO;
    const char *k = ork_st_meta(f, "key");
    const ork_st_tensor *t = ork_st_find(f, "tokens");
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)key);
    if (k && !strcmp(k, want) && t && t->ndim == 3 && t->shape[2] == C) {
        it->h_tok = (int)t->shape[0];
        it->w_tok = (int)t->shape[1];
        it->tokens = malloc((size_t)ork_st_nelements(t) * sizeof(float));
        s = it->tokens ? ork_st_read_f32(t, it->tokens) : ORK_E_NOMEM;
    }
    ork_st_close(f);
    return s;
}

static ork_status load_text(job *j, const char *img_path, item *it) {
    char te[1200], stem[512];
    const char *slash = strrchr(img_path, '/');
    int dlen = slash ? (int)(slash - img_path) : 1;
    snprintf(te, sizeof te, "%.*s/%s.te.safetensors", dlen, slash ? img_path : ".", stem_of(img_path, stem, sizeof stem));
    if (access(te, R_OK) != 0) return ORK_OK;
    ork_st_file *f;
    ORK_TRY(ork_st_open(te, &f));
    ork_status s = ORK_OK;
    const ork_st_tensor *t = ork_st_find(f, "txt"), *v = ork_st_find(f, "vec");
    if (!t || t->ndim != 2 || t->shape[1] != j->info.context_dim || t->shape[0] != j->T) {
        s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor 'txt' must be (%d, %d)", te, j->T, j->info.context_dim);
    } else {
        it->txt = malloc((size_t)ork_st_nelements(t) * sizeof(float));
        s = it->txt ? ork_st_read_f32(t, it->txt) : ORK_E_NOMEM;
        if (s == ORK_OK && j->info.vec_dim > 0 && v) {
            if (v->ndim != 1 || v->shape[0] != j->info.vec_dim) s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor 'vec' must be (%d)", te, j->info.vec_dim);
            else if (!(it->vec = malloc((size_t)j->info.vec_dim * sizeof(float)))) s = ORK_E_NOMEM;
            else s = ork_st_read_f32(v, it->vec);
        }
        if (s == ORK_OK) j->have_te++;
    }
    ork_st_close(f);
    return s;
}

static ork_status build_dataset(job *j) {
    const ork_process_config *p = j->p;
    j->T = j->info.context_len > 0 ? j->info.context_len : 512;
    for (size_t d = 0; d < p->datasets.n; d++) {
        const ork_dataset_config *dc = &p->datasets.v[d];
        ork_dataset ds;
        ork_dataset_opts o = {.folder_path = dc->folder_path, .caption_ext = dc->caption_ext,
                              .default_caption = dc->default_caption, .trigger_word = p->trigger_word,
                              .is_reg = dc->is_reg, .caption_dropout_rate = (float)dc->caption_dropout_rate};
        ORK_TRY(ork_dataset_scan(&o, &ds));
        int res = dc->resolution.n > 0 ? (int)dc->resolution.v[0] : 512;
        char cache_dir[1100];
        snprintf(cache_dir, sizeof cache_dir, "%s/_latent_cache", ds.folder);
        if (mkdir_p(cache_dir) != 0) ORK_WARN("cannot create %s: latents will not be cached on disk", cache_dir);
        int64_t reps = dc->num_repeats > 0 ? dc->num_repeats : 1;
        item *grown = realloc(j->items, (size_t)(j->n_items + ds.n * reps) * sizeof *grown);
        if (!grown) { ork_dataset_free(&ds); return ORK_E_NOMEM; }
        j->items = grown;
        ork_status s = ORK_OK;
        int first = j->n_items, encoded = 0, cached = 0;
        for (size_t i = 0; s == ORK_OK && i < ds.n; i++) {
            item *it = &j->items[j->n_items];
            memset(it, 0, sizeof *it);
            it->path = strdup(ds.items[i].path);
            j->n_items++;
            ork_file_fp fp;
            s = ork_file_fingerprint(it->path, 1, &fp);
            if (s != ORK_OK) break;
            /* the cache key: image bytes, resolution and everything about the codec */
            char keytxt[512];
            snprintf(keytxt, sizeof keytxt, "%016llx|%d|%s|%s|%d|%d", (unsigned long long)fp.hash, res,
                     j->info.variant, p->model.name_or_path, j->info.token_channels, j->info.pixels_per_token);
            uint64_t key = ork_fnv1a64(keytxt, strlen(keytxt), ORK_FNV1A64_INIT);
            char stem[512], cache[2048];
            snprintf(cache, sizeof cache, "%s/%s_%016llx.safetensors", cache_dir, stem_of(it->path, stem, sizeof stem),
                     (unsigned long long)key);
            if (load_cached(cache, key, it, j->info.token_channels) == ORK_OK) {
                cached++;
            } else {
                s = encode_image(j, it->path, res, it);
                if (s == ORK_E_BUDGET) /* the line above says what was asked; this one what to do */
                    s = ORK_FAIL(ORK_E_BUDGET, "%s: encoding %s at %d px for the latent cache needs more device memory "
                                 "than the plan leaves beside the model (the plan does not count the encode): run once "
                                 "with a larger model.vram_budget_gb (the latents are then cached in %s) or a smaller "
                                 "resolution", ork_config_file(j->cfg), it->path, res, cache_dir);
                if (s != ORK_OK) break;
                encoded++;
                ork_st_writer *w;
                if (ork_st_writer_new(&w) == ORK_OK) {
                    int64_t shape[3] = {it->h_tok, it->w_tok, j->info.token_channels};
                    char ks[32];
                    snprintf(ks, sizeof ks, "%016llx", (unsigned long long)key);
                    size_t nb = (size_t)it->h_tok * it->w_tok * j->info.token_channels * sizeof(float);
                    if (ork_st_writer_add(w, "tokens", ORK_F32, 3, shape, it->tokens, nb) != ORK_OK ||
                        ork_st_writer_meta(w, "key", ks) != ORK_OK || ork_st_writer_commit(w, cache) != ORK_OK)
                        ORK_WARN("could not write the latent cache %s", cache);
                    ork_st_writer_free(w);
                }
            }
            s = load_text(j, it->path, it);
        }
        ork_dataset_free(&ds);
        if (s != ORK_OK) return s;
        ORK_INFO("dataset %s: %d images (%d encoded, %d from the latent cache)", dc->folder_path, j->n_items - first,
                 encoded, cached);
        /* num_repeats: the same items again (shared data, fresh struct copies) */
        int n = j->n_items - first;
        for (int64_t r = 1; r < reps; r++)
            for (int i = 0; i < n; i++) {
                item *src = &j->items[first + i], *dst = &j->items[j->n_items++];
                *dst = *src;
                dst->path = strdup(src->path);
                dst->tokens = malloc((size_t)src->h_tok * src->w_tok * j->info.token_channels * sizeof(float));
                if (!dst->tokens) return ORK_E_NOMEM;
                memcpy(dst->tokens, src->tokens, (size_t)src->h_tok * src->w_tok * j->info.token_channels * sizeof(float));
                dst->txt = dst->vec = NULL;
                if (src->txt) {
                    size_t nt = (size_t)j->T * j->info.context_dim * sizeof(float);
                    if (!(dst->txt = malloc(nt))) return ORK_E_NOMEM;
                    memcpy(dst->txt, src->txt, nt);
                }
            }
    }
    if (j->have_te) ORK_INFO("text conditioning: embeddings from <image>.te.safetensors for %d of %d images (others: zeros)", j->have_te, j->n_items);
    else ORK_INFO("text conditioning: no <image>.te.safetensors found; training with zero text embeddings (an empty-prompt stand-in; tools/encode_text.py writes real ones)");
    return ORK_OK;
}

/* Items of micro-batch k: an epoch is a seeded permutation; a batch takes the
 * next items with the same token grid as its first. Deterministic in k. */
static void batch_items(job *j, int64_t k, int B, int *idx, int *nb) {
    ork_data_pos at = ork_shard_advance(j->n_items, B, j->data_at, k - j->data_k); /* dist/shard.h */
    int64_t epoch = at.epoch, pos = at.offset;
    if (epoch != j->order_epoch) {
        ork_rng r;
        ork_rng_init(&r, j->seed, ORK_RNG_DATA);
        ork_rng_seek(&r, (uint64_t)epoch << 20);
        for (int i = 0; i < j->n_items; i++) j->order[i] = i;
        for (int i = j->n_items - 1; i > 0; i--) {
            int q = (int)(ork_rng_u32(&r) % (uint32_t)(i + 1));
            int t = j->order[i]; j->order[i] = j->order[q]; j->order[q] = t;
        }
        j->order_epoch = epoch;
    }
    int first = j->order[pos % j->n_items];
    *nb = 0;
    idx[(*nb)++] = first;
    for (int64_t q = pos + 1; *nb < B && q < pos + j->n_items; q++) {
        int c = j->order[q % j->n_items];
        if (j->items[c].h_tok == j->items[first].h_tok && j->items[c].w_tok == j->items[first].w_tok) idx[(*nb)++] = c;
    }
}

/* ---- data-parallel (core/dist, docs/multigpu.md) -------------------------- */

static int batch_of(const job *j) {
    int B = (int)(j->p->train.batch_size > 0 ? j->p->train.batch_size : 1);
    return B > 256 ? 256 : B;
}
static int64_t accum_of(const job *j) {
    return j->p->train.gradient_accumulation_steps > 0 ? j->p->train.gradient_accumulation_steps : 1;
}

/* This rank's items of global micro-batch k (world x B items, dist/shard.h)
 * and each one's slot in the global batch (its noise and timestep draws). */
static ork_status shard_items(job *j, int64_t k, int B, int *idx, int *slot, int *nb) {
    int W = ork_dist_world(j->dist), r = ork_dist_rank(j->dist), elem[256], gnb;
    int *g = W == 1 ? idx : malloc((size_t)W * B * sizeof *g);
    if (!g) return ORK_E_NOMEM;
    batch_items(j, k, W * B, g, &gnb);
    *nb = ork_shard_slice(gnb, W, r, B, elem);
    for (int b = 0; b < *nb; b++) {
        idx[b] = g[elem[b]];
        slot[b] = W == 1 ? b : r * B + b;
    }
    if (W > 1 && gnb < W * B && !j->short_warned++)
        ORK_WARN("global batch %lld: %d images of one size for %d x %d slots: some images count twice in short "
                 "batches (more images, or a smaller batch_size, avoid it)", (long long)k, gnb, W, B);
    if (g != idx) free(g);
    return ORK_OK;
}

/* The CUDA device of this process: LOCAL_RANK when distributed, else device: cuda:N. */
static ork_status dist_device(job *j, int *index) {
    ORK_TRY(ork_dist_env_read(&j->denv));
    *index = 0;
#ifdef ORAKUL_HAVE_CUDA
    if (j->be->device == ORK_DEV_CUDA)
        ORK_TRY(ork_dist_device_index(&j->denv, j->p->device, ork_cuda_device_count(), index));
#endif
    j->device_index = *index;
    return ORK_OK;
}

/* The rendezvous and the communicator (the device is current); NULL dist for one process. */
static ork_status dist_start(job *j) {
    uint64_t h = 0;
    if (ork_dist_env_active(&j->denv)) ORK_TRY(ork_dist_config_hash(ork_config_file(j->cfg), &h));
    ORK_TRY(ork_dist_start(&j->denv, j->be, &j->g->k, j->alloc, h, &j->dist));
    ork_dist_quiet_other_ranks(j->dist);
    return ORK_OK;
}

/* Rank 0 encodes the dataset first (turn 1: it is done), the others then
 * read its latent cache (turn 0: they wait for it). */
static ork_status dist_dataset_turn(job *j, int after) {
    if (!j->dist || (ork_dist_rank(j->dist) == 0) != after) return ORK_OK;
    return ork_dist_barrier(j->dist);
}

/* The LoRA gradients into buckets all-reduced during the backward; hooks after the weight store's. */
static ork_status dist_grads(job *j) {
    if (!j->dist) return ORK_OK;
    int *blk = malloc(((size_t)j->n_params + 1) * sizeof *blk);
    if (!blk) return ORK_E_NOMEM;
    for (int i = 0; i < j->n_params; i++) blk[i] = ork_lora_block(j->lora, i / 2);
    ork_status s = ork_gsync_create(j->dist, j->g, j->alloc, j->pt, blk, j->n_params, j->info.n_blocks,
                                    ork_gsync_bucket_bytes(), &j->gsync);
    free(blk);
    ORK_TRY(s);
    ork_block_hooks h;
    ork_gsync_hooks(j->gsync, &j->ws_hooks, &h);
    ork_runner_set_hooks(j->runner, &h);
    return ORK_OK;
}

/* After load_state: every rank resumes from the same step with the same
 * dataset, and holds rank 0's LoRA and optimizer state bit for bit. */
static ork_status dist_resume(job *j, int64_t *start) {
    if (!j->dist) return ORK_OK;
    double v[4] = {(double)*start, -(double)*start, (double)j->n_items, -(double)j->n_items};
    ORK_TRY(ork_dist_allreduce_host(j->dist, v, 4, ORK_NCCL_MAX));
    if (v[0] != -v[1])
        return ORK_FAIL(ORK_E_CONFIG, "distributed: the ranks found saved states at different steps (%.0f .. %.0f) in "
                        "%s: every rank must see the same output folder (shared storage)", -v[1], v[0], j->out_dir);
    if (v[2] != -v[3])
        return ORK_FAIL(ORK_E_CONFIG, "distributed: the ranks see different datasets (%.0f .. %.0f images): every "
                        "rank must see the same dataset folders", -v[3], v[2]);
    ORK_TRY(ork_dist_comm_after_compute(j->dist));
    for (int i = 0; i < j->n_params; i++) {
        ORK_TRY(ork_dist_broadcast(j->dist, ork_tensor_data(j->pt[i]), ork_tensor_nbytes(j->pt[i])));
        ORK_TRY(ork_dist_broadcast(j->dist, ork_tensor_data(j->state[i]), ork_tensor_nbytes(j->state[i])));
    }
    ORK_TRY(ork_dist_compute_after_comm(j->dist));
    return ork_dist_wait(j->dist, "rank 0's LoRA and optimizer state");
}

/* After the micro-steps: the gradients averaged over the ranks, the loss the
 * ranks' mean (non-finite on any rank: non-finite everywhere, so every rank
 * skips the same steps). */
static ork_status dist_step_end(job *j, float *loss, int *bad) {
    if (!j->dist) return ORK_OK;
    ORK_TRY(ork_gsync_finish(j->gsync));
    double v = *bad ? NAN : (double)*loss;
    ORK_TRY(ork_dist_allreduce_host(j->dist, &v, 1, ORK_NCCL_SUM));
    *loss = (float)(v / ork_dist_world(j->dist));
    *bad = !isfinite(*loss);
    return ORK_OK;
}

/* The data position after `step` (a global sample position: a resume with
 * another number of GPUs continues from it), into and out of the state file. */
static ork_status data_pos_save(job *j, ork_st_writer *w, int64_t step) {
    int64_t G = (int64_t)ork_dist_world(j->dist) * batch_of(j);
    ork_data_pos at = ork_shard_advance(j->n_items, G, j->data_at, step * accum_of(j) - j->data_k);
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)at.epoch);
    ORK_TRY(ork_st_writer_meta(w, "data_epoch", v));
    snprintf(v, sizeof v, "%lld", (long long)at.offset);
    ORK_TRY(ork_st_writer_meta(w, "data_offset", v));
    snprintf(v, sizeof v, "%lld", (long long)G);
    return ork_st_writer_meta(w, "global_batch", v);
}
static void data_pos_load(job *j, ork_st_file *f, int64_t step) {
    const char *e = ork_st_meta(f, "data_epoch"), *o = ork_st_meta(f, "data_offset"), *g = ork_st_meta(f, "global_batch");
    if (!e || !o) return; /* an older state: the position follows from the step */
    j->data_at = (ork_data_pos){atoll(e), atoll(o)};
    j->data_k = step * accum_of(j);
    int64_t G = (int64_t)ork_dist_world(j->dist) * batch_of(j);
    if (g && atoll(g) != G)
        ORK_INFO("resuming at sample %lld of epoch %lld with a global batch of %lld (the state was saved with %s)",
                 (long long)j->data_at.offset, (long long)j->data_at.epoch, (long long)G, g);
}

/* ---- optimizer ----------------------------------------------------------- */

static ork_status setup_optimizer(job *j) {
    ORK_TRY(j->ovt->create(&j->c_opt->host, j->opt_params, &j->opt));
    int nm = ork_lora_count(j->lora);
    j->n_params = 2 * nm;
    j->pt = calloc((size_t)j->n_params, sizeof *j->pt);
    j->state = calloc((size_t)j->n_params, sizeof *j->state);
    if (!j->pt || !j->state) return ORK_E_NOMEM;
    for (int i = 0; i < nm; i++) {
        j->pt[2 * i] = ork_lora_at(j->lora, i)->down;
        j->pt[2 * i + 1] = ork_lora_at(j->lora, i)->up;
    }
    size_t total = 0;
    for (int i = 0; i < j->n_params; i++) {
        size_t bytes = 0;
        ORK_TRY(j->ovt->state_bytes(j->opt, j->pt[i]->dtype, ork_tensor_numel(j->pt[i]), &bytes));
        int64_t n = (int64_t)(bytes ? bytes : 1);
        total += (size_t)n;
        if (j->plan->trainable_streamed) continue; /* in the block's host record (setup_zero) */
        ORK_TRY(ork_tensor_new(j->alloc, "optimizer", ORK_U8, 1, &n, 0, &j->state[i]));
        void *z = calloc(1, (size_t)n);
        if (!z) return ORK_E_NOMEM;
        ork_kctx *k = &j->g->k;
        ork_status s = j->be->memcpy_h2d(k, ork_tensor_data(j->state[i]), z, (size_t)n);
        if (s == ORK_OK) s = j->be->sync(k);
        free(z);
        ORK_TRY(s);
    }
    int64_t np = j->n_params;
    ORK_TRY(ork_tensor_new(j->alloc, "workspace", ORK_F32, 1, &np, 0, &j->norms));
    ORK_INFO("optimizer %s: %d tensors, %.1f MiB of state", j->c_opt->c->id, j->n_params, (double)total / 1048576.0);
    return ORK_OK;
}

/* ---- streamed trainable state (docs/streaming.md §4) ----------------------- */

/* The per-block optimizer step the runtime calls at grads_ready (grads already
 * scaled by the previous step's clip factor). */
static ork_status zero_step_cb(void *ctx, int block, ork_opt_param *ps, const int32_t *ids, int n) {
    job *j = ctx;
    (void)block;
    ork_opt_step st = {.abi = ORK_ABI_INIT(ork_opt_step), .step = j->cur_step, .lr = j->cur_lr, .grad_scale = 1.0f,
                       .device = j->be->device, .stream = j->g->k.stream, .seed = j->seed, .param_ids = ids};
    return n ? j->ovt->step(j->opt, &st, ps, n) : ORK_OK;
}

/* The streamed trainable state clips step s with step s-1's norm (zero.h): when
 * that factor is not the one exact clipping gives for step s's own norm, say so
 * once and count it (the run's end reports how often). */
static void zero_clip_check(job *j, int64_t step, double norm, float applied) {
    double mx = j->p->train.max_grad_norm;
    float exact = ork_clip_factor(mx, norm);
    if (applied == exact) return;
    if (!j->clip_differed++)
        ORK_WARN("step %lld: gradient norm %g against max_grad_norm %g: the streamed trainable state clipped it with "
                 "the previous step's norm (factor %.4g, exact clipping gives %.4g; docs/streaming.md §4) — said once, "
                 "counted to the end", (long long)step, norm, mx, (double)applied, (double)exact);
}

/* Point block b's LoRA tensors (and their grad headers) at its slot, or at nothing. */
static void zero_point(job *j, int b, int on) {
    if (b < 0 || b >= j->info.n_blocks) return;
    for (int q = j->zp_first[b]; q < j->zp_first[b + 1]; q++) {
        int i = j->zp_list[q];
        ork_tensor *t = j->pt[i];
        t->base = on ? ork_zero_data(j->zero, i) : NULL;
        t->offset = 0;
        /* a forward visit may read the parameter's BF16 shadow (zero.h) */
        t->dtype = on ? ork_zero_data_dtype(j->zero, i) : ork_zero_get_layout(j->zero)->params[i].dtype;
        t->grad->base = on ? (void *)ork_zero_grad(j->zero, i) : NULL;
        t->grad->offset = 0;
    }
}

/* The runner's hooks: the weight store's first, then the runtime's. */
static ork_status zh_pass_begin(void *ctx, const int *order, int n) {
    job *j = ctx;
    if (j->ws_hooks.pass_begin) ORK_TRY(j->ws_hooks.pass_begin(j->ws_hooks.ctx, order, n));
    return ork_zero_pass_begin(j->zero, order, n);
}
static ork_status zh_enter(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.enter) ORK_TRY(j->ws_hooks.enter(j->ws_hooks.ctx, b));
    ORK_TRY(ork_zero_enter(j->zero, b));
    zero_point(j, b, 1);
    return ORK_OK;
}
static ork_status zh_leave(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.leave) ORK_TRY(j->ws_hooks.leave(j->ws_hooks.ctx, b));
    zero_point(j, b, 0);
    return ork_zero_leave(j->zero, b);
}
static ork_status zh_pass_end(void *ctx) {
    job *j = ctx;
    if (j->ws_hooks.pass_end) ORK_TRY(j->ws_hooks.pass_end(j->ws_hooks.ctx));
    return ork_zero_pass_end(j->zero);
}
static ork_status zh_grads_ready(void *ctx, int b) {
    job *j = ctx;
    if (j->ws_hooks.grads_ready) ORK_TRY(j->ws_hooks.grads_ready(j->ws_hooks.ctx, b));
    return ork_zero_grads_ready(j->zero, b);
}

/* The runner's hooks when the trainable state streams (the sampler's too). */
static ork_block_hooks zero_hooks(job *j) {
    ork_block_hooks h = {.ctx = j, .streaming = 1, .pass_begin = zh_pass_begin, .enter = zh_enter, .leave = zh_leave,
                         .pass_end = zh_pass_end, .grads_ready = zh_grads_ready};
    return h;
}

/* ork_lora_save's reader: parameter values from the host records. */
static ork_status zero_reader(void *ctx, const ork_tensor *t, float *host) {
    job *j = ctx;
    const ork_zero_layout *L = ork_zero_get_layout(j->zero);
    for (int i = 0; i < j->n_params; i++) {
        if (j->pt[i] != t) continue;
        const ork_zero_param *p = &L->params[i];
        const char *src = (const char *)ork_zero_host(j->zero, p->block) + p->data_offset;
        if (p->dtype == ORK_F32) memcpy(host, src, p->data_bytes);
        else ork_bf16_to_f32_n((const uint16_t *)src, (size_t)p->numel, host);
        return ORK_OK;
    }
    return ORK_FAIL(ORK_E_INTERNAL, "LoRA save: a tensor that is not a trained parameter");
}

/* Build the runtime from the LoRA tensors, move their values into the host
 * records, free their device memory (the tensors become headers pointed at
 * the block's slot while the block is in use) and install the hooks. */
/* ork_lora_init's sink when the trainable state streams: tensor i's initial
 * values into its block's host record, in the tensor's dtype (the same
 * rounding as the resident upload, so both runs start bit-identical). */
static ork_status zero_init_cb(void *ctx, int i, ork_tensor *t, const float *host) {
    job *j = ctx;
    const ork_zero_param *p = &ork_zero_get_layout(j->zero)->params[i];
    char *dst = ork_zero_host(j->zero, p->block) + p->data_offset;
    size_t n = (size_t)ork_tensor_numel(t);
    if (t->dtype == ORK_F32) memcpy(dst, host, n * sizeof *host);
    else ork_bf16_from_f32(host, n, (uint16_t *)dst);
    return ORK_OK;
}

static ork_status setup_zero(job *j) {
    int np = j->n_params, nb = j->info.n_blocks;
    int *blk = calloc((size_t)np + 1, sizeof *blk);
    ork_dtype *dt = calloc((size_t)np + 1, sizeof *dt);
    int64_t *numel = calloc((size_t)np + 1, sizeof *numel);
    size_t *sb = calloc((size_t)np + 1, sizeof *sb);
    j->zp_first = calloc((size_t)nb + 2, sizeof *j->zp_first);
    j->zp_list = calloc((size_t)np + 1, sizeof *j->zp_list);
    ork_status s = (blk && dt && numel && sb && j->zp_first && j->zp_list) ? ORK_OK : ORK_E_NOMEM;
    for (int i = 0; s == ORK_OK && i < np; i++) {
        blk[i] = ork_lora_block(j->lora, i / 2);
        dt[i] = j->pt[i]->dtype;
        numel[i] = ork_tensor_numel(j->pt[i]);
        s = j->ovt->state_bytes(j->opt, dt[i], numel[i], &sb[i]);
    }
    /* ORAKUL_ZERO_CHUNKS=1: the whole record out before the next load (bench A/B) */
    const char *chunks = getenv("ORAKUL_ZERO_CHUNKS");
    /* BF16 activations: forward visits read BF16 shadows of the F32 masters
     * (what the linear op would cast them to; half the bytes over PCIe) */
    ork_zero_opts o = {nb, np, blk, dt, numel, sb, ZERO_SLOTS, j->plan->n_streamed > 0 ? ork_streamer_n_events(j->plan->n_slots) : 0,
                       j->p->train.max_grad_norm, zero_step_cb, j,
                       j->plan->lora_shadow && j->g->act_dt == ORK_BF16 ? ORK_BF16 : 0,
                       chunks ? atoi(chunks) : 0};
    if (s == ORK_OK) s = ork_zero_create(j->ce, j->alloc, j->be, &j->g->k, &o, &j->zero);
    free(blk); free(dt); free(numel); free(sb);
    ORK_TRY(s);
    if (env_zero("ORAKUL_ZERO_AHEAD")) ork_zero_set_ahead(j->zero, 0); /* bench A/B: the first loads at pass_begin */
    const ork_zero_layout *L = ork_zero_get_layout(j->zero);
    for (int i = 0; i < np; i++) {
        ork_tensor *t = j->pt[i];
        const ork_zero_param *p = &L->params[i];
        ork_tensor *gr;
        ORK_TRY(ork_tensor_wrap(j->be->device, ORK_F32, t->ndim, t->shape, NULL, NULL, &gr));
        if (t->grad && t->grad->owner == ORK_OWN_ALLOC) ork_tensor_free(t->grad);
        t->grad = gr; /* the LoRA was created deferred: t has no device memory */
        j->zp_first[p->block + 1]++;
    }
    ORK_TRY(ork_lora_init(j->lora, zero_init_cb, j)); /* initial values straight into the host records */
    ork_zero_refresh_shadows(j->zero);
    for (int b = 0; b < nb; b++) j->zp_first[b + 1] += j->zp_first[b];
    int *fill = calloc((size_t)nb + 1, sizeof *fill);
    if (!fill) return ORK_E_NOMEM;
    for (int i = 0; i < np; i++) {
        int b = L->params[i].block;
        j->zp_list[j->zp_first[b] + fill[b]++] = i;
    }
    free(fill);
    ork_lora_set_reader(j->lora, zero_reader, j);
    ork_block_hooks h = zero_hooks(j);
    ork_runner_set_hooks(j->runner, &h);
    size_t host = 0;
    for (int b = 0; b < nb; b++) host += L->block_bytes[b];
    ORK_INFO("trainable state streamed per block: %.1f MiB of LoRA + optimizer state in pinned host records, "
             "%d device slots of %.1f MiB%s", (double)host / 1048576.0, ZERO_SLOTS, (double)L->max_block_bytes / 1048576.0,
             o.shadow_dt == ORK_BF16 ? "; BF16 shadows for the forward pass" : "");
    return ORK_OK;
}

/* Global L2 norm of the LoRA gradients (missing grads count as zero). */
static ork_status grad_norm(job *j, double *out) {
    ork_kctx *k = &j->g->k;
    float *dn = ork_tensor_data(j->norms);
    ORK_TRY(j->be->fill(k, j->n_params, 0.0f, dn, ORK_F32));
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *gr = j->pt[i]->grad;
        if (!gr) continue;
        ORK_TRY(j->be->reduce(k, ORK_REDUCE_SUMSQ, ork_tensor_numel(gr), ork_tensor_data(gr), gr->dtype, dn + i));
    }
    float *h = malloc((size_t)j->n_params * sizeof *h);
    if (!h) return ORK_E_NOMEM;
    ork_status s = j->be->memcpy_d2h(k, h, dn, (size_t)j->n_params * sizeof *h);
    if (s == ORK_OK) s = j->be->sync(k);
    double sum = 0;
    for (int i = 0; s == ORK_OK && i < j->n_params; i++) sum += h[i];
    free(h);
    *out = sqrt(sum);
    return s;
}

static ork_status optimizer_step(job *j, int64_t step, double lr, float grad_scale) {
    if (grad_scale != 1.0f) /* clipping: scale the gradients in place */
        for (int i = 0; i < j->n_params; i++) {
            ork_tensor *gr = j->pt[i]->grad;
            if (gr) ORK_TRY(j->be->axpby(&j->g->k, ork_tensor_numel(gr), grad_scale, ork_tensor_data(gr), gr->dtype,
                                         0.0f, ork_tensor_data(gr), gr->dtype));
        }
    size_t cap = j->n_params > 0 ? (size_t)j->n_params : 1;
    ork_opt_param *ps = calloc(cap, sizeof *ps);
    int32_t *ids = calloc(cap, sizeof *ids); /* keys per-parameter randomness, as a streamed block's step does */
    if (!ps || !ids) {
        free(ps);
        free(ids);
        return ORK_E_NOMEM;
    }
    int n = 0;
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *t = j->pt[i];
        if (!t->grad) continue; /* no gradient reached it this step */
        ids[n] = (int32_t)i;
        ps[n].name = "";
        ps[n].dtype = t->dtype;
        ps[n].numel = ork_tensor_numel(t);
        ps[n].data = ork_tensor_data(t);
        ps[n].grad = ork_tensor_data(t->grad);
        ps[n].state = ork_tensor_data(j->state[i]);
        n++;
    }
    ork_opt_step st = {.abi = ORK_ABI_INIT(ork_opt_step), .step = step, .lr = lr, .grad_scale = 1.0f,
                       .device = j->be->device, .stream = j->g->k.stream, .seed = j->seed, .param_ids = ids};
    ork_status s = n ? j->ovt->step(j->opt, &st, ps, n) : ORK_OK;
    free(ps);
    free(ids);
    return s;
}

static ork_status zero_grads(job *j) {
    for (int i = 0; i < j->n_params; i++) ORK_TRY(ork_tensor_zero_grad(j->g, j->pt[i]));
    return ORK_OK;
}

/* ---- checkpoints ---------------------------------------------------------- */

static ork_status dev_read(job *j, ork_tensor *t, void *host) {
    ORK_TRY(j->be->memcpy_d2h(&j->g->k, host, ork_tensor_data(t), ork_tensor_nbytes(t)));
    return j->be->sync(&j->g->k);
}
static ork_status dev_write(job *j, ork_tensor *t, const void *host) {
    ORK_TRY(j->be->memcpy_h2d(&j->g->k, ork_tensor_data(t), host, ork_tensor_nbytes(t)));
    return j->be->sync(&j->g->k);
}

/* Streamed: parameter i's data and optimizer state in its block's host record
 * (read or written between passes only: after ork_zero_sync). */
static char *zero_part(job *j, int i, int state, size_t *nbytes) {
    const ork_zero_param *p = &ork_zero_get_layout(j->zero)->params[i];
    *nbytes = state ? p->state_bytes : p->data_bytes;
    return (char *)ork_zero_host(j->zero, p->block) + (state ? p->state_offset : p->data_offset);
}

/* The same tensors as the resident state (lora.i in its dtype, opt.i as U8 of
 * at least one byte), from the host records. */
static ork_status zero_save(job *j, ork_st_writer *w) {
    static const uint8_t pad = 0;
    ORK_TRY(ork_zero_sync(j->zero));
    for (int i = 0; i < j->n_params; i++) {
        size_t nd, ns;
        char *d = zero_part(j, i, 0, &nd), *st = zero_part(j, i, 1, &ns), key[64];
        snprintf(key, sizeof key, "lora.%d", i);
        ORK_TRY(ork_st_writer_add(w, key, j->pt[i]->dtype, j->pt[i]->ndim, j->pt[i]->shape, d, nd));
        int64_t n = (int64_t)(ns ? ns : 1);
        snprintf(key, sizeof key, "opt.%d", i);
        ORK_TRY(ork_st_writer_add(w, key, ORK_U8, 1, &n, ns ? (const void *)st : (const void *)&pad, (size_t)n));
    }
    return ORK_OK;
}

static ork_status zero_load(job *j, ork_st_file *f, const char *path) {
    ORK_TRY(ork_zero_sync(j->zero));
    for (int i = 0; i < j->n_params; i++)
        for (int q = 0; q < 2; q++) {
            size_t nb;
            char *h = zero_part(j, i, q, &nb), key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            const ork_st_tensor *t = ork_st_find(f, key);
            size_t want = q && nb == 0 ? 1 : nb;
            if (!t || t->dtype != (q ? ORK_U8 : j->pt[i]->dtype) || t->nbytes != want)
                return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or has the wrong size", path, key);
            memcpy(h, t->data, nb);
        }
    ork_zero_refresh_shadows(j->zero);
    const char *pn = ork_st_meta(f, "prev_norm");
    ork_zero_set_prev_norm(j->zero, pn ? strtod(pn, NULL) : 0.0);
    return ORK_OK;
}

static void state_path(job *j, char *buf, size_t n) { snprintf(buf, n, "%s/%s_state.safetensors", j->out_dir, j->name); }

/* The training state: LoRA tensors exactly (their own dtype), optimizer state
 * bytes and the step. Written atomically; everything else (data order, noise,
 * timesteps) is a function of the seed and the step. */
static ork_status save_state(job *j, int64_t step) {
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    void **bufs = calloc((size_t)j->n_params * 2, sizeof *bufs);
    ork_status s = bufs ? ORK_OK : ORK_E_NOMEM;
    if (s == ORK_OK && j->zero) s = zero_save(j, w);
    for (int i = 0; s == ORK_OK && !j->zero && i < j->n_params; i++) {
        ork_tensor *ts[2] = {j->pt[i], j->state[i]};
        for (int q = 0; s == ORK_OK && q < 2; q++) {
            size_t nb = ork_tensor_nbytes(ts[q]);
            void *h = malloc(nb ? nb : 1);
            if (!h) { s = ORK_E_NOMEM; break; }
            bufs[2 * i + q] = h;
            s = dev_read(j, ts[q], h);
            char key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            if (s == ORK_OK) s = ork_st_writer_add(w, key, ts[q]->dtype, ts[q]->ndim, ts[q]->shape, h, nb);
        }
    }
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "step", v);
    snprintf(v, sizeof v, "%d", j->n_params);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "tensors", v);
    snprintf(v, sizeof v, "%lld", (long long)j->skipped);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "skipped", v);
    if (s == ORK_OK) s = data_pos_save(j, w, step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "optimizer", j->c_opt->c->id);
    if (s == ORK_OK && j->zero) { /* the previous step's norm: the clip factor of the next step */
        snprintf(v, sizeof v, "%.17g", ork_zero_prev_norm(j->zero));
        s = ork_st_writer_meta(w, "prev_norm", v);
    }
    char path[1200];
    state_path(j, path, sizeof path);
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    for (int i = 0; bufs && i < j->n_params * 2; i++) free(bufs[i]);
    free(bufs);
    return s;
}

static ork_status load_state(job *j, int64_t *step) {
    char path[1200];
    state_path(j, path, sizeof path);
    *step = 0;
    if (access(path, F_OK) != 0) return ORK_OK;
    ork_st_file *f;
    ORK_TRY(ork_st_open(path, &f));
    ork_status s = ORK_OK;
    const char *ms = ork_st_meta(f, "step"), *mt = ork_st_meta(f, "tensors"), *mo = ork_st_meta(f, "optimizer");
    if (!ms || !mt || atoi(mt) != j->n_params || !mo || strcmp(mo, j->c_opt->c->id) != 0)
        s = ORK_FAIL(ORK_E_CONFIG, "%s: the saved training state does not match this config's LoRA network or optimizer; "
                     "move it away to start over", path);
    if (s == ORK_OK && j->zero) s = zero_load(j, f, path);
    for (int i = 0; s == ORK_OK && !j->zero && i < j->n_params; i++) {
        ork_tensor *ts[2] = {j->pt[i], j->state[i]};
        for (int q = 0; s == ORK_OK && q < 2; q++) {
            char key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            const ork_st_tensor *t = ork_st_find(f, key);
            if (!t || t->dtype != ts[q]->dtype || t->nbytes != ork_tensor_nbytes(ts[q])) {
                s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or has the wrong size", path, key);
                break;
            }
            void *h = malloc(t->nbytes ? t->nbytes : 1);
            if (!h) { s = ORK_E_NOMEM; break; }
            memcpy(h, t->data, t->nbytes);
            s = dev_write(j, ts[q], h);
            free(h);
        }
    }
    if (s == ORK_OK) {
        *step = atoll(ms);
        const char *sk = ork_st_meta(f, "skipped");
        j->skipped = sk ? atoll(sk) : 0;
        data_pos_load(j, f, *step);
        ORK_INFO("resuming from %s at step %lld", path, (long long)*step);
    }
    ork_st_close(f);
    return s;
}

static ork_dtype save_dtype(const char *s) {
    if (!s) return ORK_F16;
    if (!strcmp(s, "float32") || !strcmp(s, "fp32") || !strcmp(s, "float")) return ORK_F32;
    if (!strcmp(s, "bfloat16") || !strcmp(s, "bf16")) return ORK_BF16;
    return ORK_F16;
}

static ork_status save_lora(job *j, int64_t step) {
    char path[1400], rank[32], alpha[32], st[32];
    snprintf(path, sizeof path, "%s/%s_%09lld.safetensors", j->out_dir, j->name, (long long)step);
    snprintf(rank, sizeof rank, "%lld", (long long)j->p->network.linear);
    snprintf(alpha, sizeof alpha, "%g", j->p->network.linear_alpha);
    snprintf(st, sizeof st, "%lld", (long long)step);
    const char *meta[] = {"ss_network_dim", rank, "ss_network_alpha", alpha, "ss_network_module", "networks.lora",
                          "orakul_base_model", j->p->model.name_or_path, "orakul_variant", j->info.variant,
                          "training_info.step", st, "orakul_version", ORAKUL_VERSION, NULL, NULL};
    if (j->zero) ORK_TRY(ork_zero_sync(j->zero)); /* the LoRA values are read from the host records */
    ORK_TRY(ork_lora_save(j->lora, path, j->info.lora_format, save_dtype(j->p->save.dtype), meta));
    ORK_INFO("saved %s", path);
    /* keep the newest max_step_saves_to_keep step files */
    int64_t keep = j->p->save.max_step_saves_to_keep;
    int64_t every = j->p->save.save_every > 0 ? j->p->save.save_every : 1;
    if (keep > 0)
        for (int64_t old = step - keep * every; old > 0 && old > step - (keep + 64) * every; old -= every) {
            char op[1400];
            snprintf(op, sizeof op, "%s/%s_%09lld.safetensors", j->out_dir, j->name, (long long)old);
            unlink(op);
        }
    return ORK_OK;
}

/* ---- the loop ------------------------------------------------------------- */

typedef struct loss_ctx {
    job *j;
    ork_tensor *target, *x_t, *x0, *t;
    const float *t_host;
    int h_tok, w_tok;
    float scale;            /* 1 / accumulation · timestep weight */
} loss_ctx;

static ork_status decode_cb(void *ctx, ork_graph *g, ork_tensor *tokens, ork_tensor **img) {
    loss_ctx *lc = ctx;
    return lc->j->mvt->decode(lc->j->model, g, tokens, lc->h_tok, lc->w_tok, img);
}

static ork_status loss_fn(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    loss_ctx *lc = ctx;
    job *j = lc->j;
    if (j->grad_pool && j->grads_dead) { /* the forward is in: the gradients' memory back, zeroed for the backward */
        if (grads_lent(j)) ORK_TRY(ork_streamer_reclaim(ork_wstore_streamer(j->ws)));
        ORK_TRY(zero_grads(j));
        j->grads_dead = 0;
    }
    ork_loss_inputs in = {.abi = ORK_ABI_INIT(ork_loss_inputs), .pred = pred, .target = lc->target, .x_t = lc->x_t,
                          .x0 = lc->x0, .t = lc->t, .t_host = lc->t_host, .h_tokens = lc->h_tok,
                          .w_tokens = lc->w_tok, .decode = j->mvt->decode ? decode_cb : NULL, .decode_ctx = lc};
    ORK_TRY(j->lvt->compute(j->loss, g, &in, loss));
    if (lc->scale != 1.0f) ORK_TRY(j->ops->scale(g, *loss, lc->scale, loss));
    return ORK_OK;
}

/* The trainer's marks in the lane trace (ORAKUL_STREAM_TRACE; the streamer's are
 * -1, -2 and the blocks): where the step's tail goes (bench/stream/trace_timeline.py). */
enum {
    ORK_TRACE_MARK_NORM = -3,      /* the micro-steps are in: the gradient norm next (a host sync) */
    ORK_TRACE_MARK_OPTIMIZER = -4, /* the optimizer step is enqueued */
    ORK_TRACE_MARK_STEP = -5,      /* the next step begins (its gradients zeroed next) */
    ORK_TRACE_MARK_INPUTS = -6,    /* its inputs are built and uploaded: the runner next */
};

static ork_status upload_act(job *j, const float *host, int ndim, const int64_t *shape, ork_tensor **out) {
    ORK_TRY(j->ta->from_host(j->g, ORK_F32, ndim, shape, host, out));
    if (j->g->act_dt != ORK_F32) ORK_TRY(j->ops->cast(j->g, *out, j->g->act_dt, out));
    return ORK_OK;
}

/* Micro-batch k's inputs built on the host (from the latent cache and the
 * step's noise and timesteps): a pure function of k. */
static void inputs_free(step_inputs *si) {
    free(si->x0); free(si->xt); free(si->tg); free(si->txt); free(si->vec);
    memset(si, 0, sizeof *si);
    si->k = -1;
}

static ork_status inputs_build(job *j, int64_t k, step_inputs *si) {
    const int C = j->info.token_channels, ctx = j->info.context_dim, T = j->T;
    int B = batch_of(j), idx[256], slot[256], nb;
    inputs_free(si);
    ORK_TRY(shard_items(j, k, B, idx, slot, &nb));
    const item *first = &j->items[idx[0]];
    int N = first->h_tok * first->w_tok;
    size_t nt = (size_t)nb * N * C;
    si->nb = nb;
    si->N = N;
    si->h_tok = first->h_tok;
    si->w_tok = first->w_tok;
    si->x0 = malloc(nt * sizeof *si->x0);
    si->xt = malloc(nt * sizeof *si->xt);
    si->tg = malloc(nt * sizeof *si->tg);
    si->txt = calloc((size_t)nb * T * ctx, sizeof *si->txt);
    si->vec = j->info.vec_dim ? calloc((size_t)nb * j->info.vec_dim, sizeof *si->vec) : NULL;
    if (!si->x0 || !si->xt || !si->tg || !si->txt || (!si->vec && j->info.vec_dim)) {
        inputs_free(si);
        return ORK_E_NOMEM;
    }
    ork_rng rn, rt;
    ork_rng_init(&rn, j->seed, ORK_RNG_NOISE);
    ork_rng_seek(&rn, (uint64_t)k << 32);
    ork_rng_init(&rt, j->seed, ORK_RNG_TIMESTEP);
    ork_rng_seek(&rt, (uint64_t)k << 16);
    si->wsum = 0;
    for (int b = 0, drawn = 0; b < nb; b++) {
        const item *it = &j->items[idx[b]];
        float w;
        /* slot s of the global batch: the s-th timestep draw, noise from s·N·C normals on */
        for (; drawn < slot[b]; drawn++) ork_ts_sample(&j->ts, &rt, &si->ts[b], &w);
        ork_ts_sample(&j->ts, &rt, &si->ts[b], &w);
        drawn++;
        ork_rng_seek(&rn, ((uint64_t)k << 32) + (uint64_t)slot[b] * (uint64_t)N * (uint64_t)C);
        si->wsum += w;
        si->gd[b] = (float)j->p->train.cfg_scale;
        float t = si->ts[b];
        for (size_t q = 0; q < (size_t)N * C; q++) {
            float e = (float)ork_rng_normal(&rn), x = it->tokens[q];
            size_t o = (size_t)b * N * C + q;
            si->x0[o] = x;
            si->xt[o] = (1.0f - t) * x + t * e;
            si->tg[o] = e - x;
        }
        if (it->txt) memcpy(si->txt + (size_t)b * T * ctx, it->txt, (size_t)T * ctx * sizeof *si->txt);
        if (si->vec && it->vec) memcpy(si->vec + (size_t)b * j->info.vec_dim, it->vec, (size_t)j->info.vec_dim * sizeof *si->vec);
    }
    si->k = k;
    return ORK_OK;
}

/* The builder thread: micro-batch in_next.k's inputs (it alone touches the
 * data order cache while it runs; micro_step joins it before anything else). */
typedef struct inputs_job {
    job *j;
    int64_t k;
} inputs_job;

static void *inputs_thread(void *arg) {
    inputs_job *ij = arg;
    ij->j->in_st = inputs_build(ij->j, ij->k, &ij->j->in_next);
    free(ij);
    return NULL;
}

static void inputs_join(job *j) {
    if (!j->in_running) return;
    pthread_join(j->in_thread, NULL);
    j->in_running = 0;
}

static void inputs_ahead(job *j, int64_t k) {
    inputs_job *ij = malloc(sizeof *ij);
    if (!ij) return; /* built when needed instead */
    *ij = (inputs_job){j, k};
    j->in_next.k = -1;
    if (pthread_create(&j->in_thread, NULL, inputs_thread, ij) != 0) {
        free(ij);
        return;
    }
    j->in_running = 1;
}

/* Lending: from the second micro-step on, the
 * checkpoints become one pool and their tail the streamer's ahead region (the
 * next forward's lent loads after the staging buffer's, copied at the
 * backward's end while the link idles). A micro-batch of another shape gives
 * the pool back for good (a checkpoint that grows would hold both). */
static ork_status ahead_region(job *j, int nb, int N, int T) {
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

/* One micro-batch: its inputs (built ahead on a thread while the device ran
 * the previous one, or now), uploaded, then forward + loss + backward; micro-
 * batch k + 1's build starts once these are up. Its noise alone is N·C normals
 * (0.8 M at FLUX.2's 512²): built in the step's tail, the device waited ~55 ms
 * for it each step (docs/PERF.md). */
static ork_status micro_step(job *j, int64_t k, float inv_accum, float *loss_out) {
    const int ctx = j->info.context_dim, T = j->T, C = j->info.token_channels;
    inputs_join(j);
    if (j->in_next.k == k && j->in_st == ORK_OK) { /* swap: the built one runs */
        step_inputs t = j->in_cur;
        j->in_cur = j->in_next;
        j->in_next = t;
    } else {
        ORK_TRY(inputs_build(j, k, &j->in_cur));
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
    int64_t sh3[3] = {nb, N, C}, sht[3] = {nb, T, ctx}, shv[2] = {nb, j->info.vec_dim}, shb = nb;
    ORK_TRY(upload_act(j, si->xt, 3, sh3, &in.tokens));
    ORK_TRY(upload_act(j, si->tg, 3, sh3, &lc.target));
    ORK_TRY(upload_act(j, si->x0, 3, sh3, &lc.x0));
    lc.x_t = in.tokens;
    ORK_TRY(upload_act(j, si->txt, 3, sht, &in.txt));
    if (si->vec) ORK_TRY(upload_act(j, si->vec, 2, shv, &in.vec));
    ORK_TRY(j->ta->from_host(j->g, ORK_F32, 1, &shb, si->ts, &in.timesteps));
    lc.t = in.timesteps;
    if (in.guidance_host) ORK_TRY(j->ta->from_host(j->g, ORK_F32, 1, &shb, si->gd, &in.guidance));
    if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_INPUTS));
    ORK_TRY(grads_lend(j));
    ORK_TRY(ahead_region(j, nb, N, T));
    int ahead = k + 1 < j->p->train.steps * accum_of(j), thread = !j->inputs_sync;
    if (j->grad_pool) /* the next micro-batch's forward is lent when it starts a step */
        ork_streamer_next_lent(ork_wstore_streamer(j->ws), !j->ahead_off && ahead && (k + 1) % accum_of(j) == 0);
    if (ahead && thread) inputs_ahead(j, k + 1); /* into in_next: si (t_host) stays */
    ORK_TRY(ork_runner_step(j->runner, &in, j->p->train.gradient_checkpointing, loss_fn, &lc, loss_out));
    if (ahead && !thread) j->in_st = inputs_build(j, k + 1, &j->in_next);
    return ORK_OK;
}

static ork_status setup_schedule(job *j) {
    const ork_train_config *t = &j->p->train;
    ork_loc at;
    if (ork_ts_type_parse(t->timestep_type, &j->ts.type) != ORK_OK) {
        ork_config_where(j->cfg, "train.timestep_type", &at);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "timestep_type '%s' is not implemented (sigmoid, linear, weighted, shift, flux_shift)", t->timestep_type);
    }
    if (ork_cs_type_parse(t->content_or_style, &j->ts.cs) != ORK_OK) {
        ork_config_where(j->cfg, "train.content_or_style", &at);
        return ork_config_fail_at(&at, ORK_E_CONFIG, "content_or_style '%s' (balanced, content, style)", t->content_or_style);
    }
    j->ts.shift = 3.0;
    j->ts.base_shift = j->info.shift_base > 0 ? j->info.shift_base : 0.5;
    j->ts.max_shift = j->info.shift_max > 0 ? j->info.shift_max : 1.15;
    j->ts.base_seq = 256;
    j->ts.max_seq = 4096;
    j->ts.image_seq_len = j->n_items ? (int64_t)j->items[0].h_tok * j->items[0].w_tok : 1024;
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
        {NULL},
    };
    lrp v;
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

/* The residency plan (core/stream/plan.h) from the config: what stays on the
 * device and what streams, checked against the budget before step 1. */
static ork_status make_plan(job *j, ork_device dev) {
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
    /* the LoRA gradients lent to the forward's loads (setup_grad_pool): not with
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
    return ork_stream_plan_make(&in, &j->plan);
}

/* MemAvailable, or ORAKUL_HOST_AVAILABLE_GB; 0 (unknown) when
 * ORAKUL_PLAN_DEVICE plans another machine without it. */
static size_t host_available(void) {
    const char *ov = getenv("ORAKUL_HOST_AVAILABLE_GB"), *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (pd && *pd && !(ov && *ov)) return 0; /* another machine: unknown */
    return ov && *ov ? (size_t)(atof(ov) * 1073741824.0) : ork_host_mem_available();
}

/* The plan's pinned host memory against this machine's available memory
 * (ORAKUL_HOST_AVAILABLE_GB overrides it, for tests and for planning another
 * machine), before anything is loaded. */
static ork_status check_host(job *j) {
    size_t avail = host_available();
    const char *pd = getenv("ORAKUL_PLAN_DEVICE");
    if (!avail && pd && *pd && j->plan->host_pinned)
        ORK_INFO("host memory not checked: ORAKUL_PLAN_DEVICE plans another machine (ORAKUL_HOST_AVAILABLE_GB "
                 "gives its RAM in GiB)");
    return ork_stream_plan_check_host(j->plan, avail, ork_config_file(j->cfg)); /* 0: unknown, not refused */
}

/* The latent encode runs in a graph of its own, destroyed afterwards: a
 * 1024² encode grows an activation arena of GiBs, which would otherwise stay
 * reserved through training (the plan does not count it). Its memory is
 * tagged "encode": not the training's activations in the budget's lines and
 * the end-of-run summary. */
static ork_status encode_dataset(job *j) {
    ork_graph *train_g = j->g, *eg = NULL;
    ork_graph_opts go = {0};
    go.arena_tag = "encode";
    go.act_dtype = train_g->act_dt;
    go.device_index = j->device_index; /* this rank's GPU (a context on another would switch devices) */
    ORK_TRY(ork_graph_create(j->be, j->alloc, &go, &eg));
    ork_wstore_attach(j->ws, eg);
    j->g = eg;
    ork_status s = build_dataset(j);
    j->g = train_g;
    ork_status s2 = ork_graph_sync(eg);
    ork_graph_destroy(eg);
    return s != ORK_OK ? s : s2;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

/* The LoRA gradients in one region (ork_graph_set_grad_pool) when frozen blocks
 * stream and the trainable state does not: dead from the optimizer step to the
 * next backward, it is lent to the streamer (ork_streamer_lend), which moves
 * the next forward's loads through it — they start in the step's tail and
 * never wait for a slot. Not with data parallelism (its flat buffer holds the
 * gradients). ORAKUL_STREAM_LEND=0 (bench) turns it off. */
static ork_status setup_grad_pool(job *j) {
    if (!ork_wstore_streamer(j->ws) || j->zero || j->gsync || j->lend_off) return ORK_OK;
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
static ork_status grads_lend(job *j) {
    if (!j->grad_pool || !j->grads_dead) return ORK_OK;
    return ork_streamer_lend(ork_wstore_streamer(j->ws), j->grad_pool, j->grad_pool_bytes);
}

static ork_status setup(job *j) {
    double t[PH_N];
    t[PH_START] = now_s();
    ORK_TRY(ork_services_register());
    j->ops = ork_ops_table();
    j->ta = ork_tensor_api_table();
    ORK_TRY(resolve_all(j));
    ORK_TRY(check_datasets(j));
    ORK_TRY(pick_backend(j));
    size_t budget = j->p->model.vram_budget_gb > 0 ? (size_t)(j->p->model.vram_budget_gb * 1073741824.0) : 0;
    ORK_TRY(ork_alloc_create(j->be, budget, &j->alloc));
    ork_graph_opts go = {0};
    go.act_dtype = j->be->device == ORK_DEV_CPU ? ORK_F32 : ORK_BF16;
    ORK_TRY(dist_device(j, &go.device_index));
    ORK_TRY(ork_graph_create(j->be, j->alloc, &go, &j->g));
    ORK_TRY(dist_start(j));
    if (j->quant) ORK_TRY(ork_graph_set_fp8_gemm(j->g, quant_fp8_gemm(j), "model.quantize_kwargs.fp8_gemm"));
    ORK_TRY(open_model(j));
    if (!j->mvt->encode) return ORK_FAIL(ORK_E_UNSUPPORTED, "model %s has no image codec", j->c_model->c->id);
    ork_dtype store = j->be->device == ORK_DEV_CPU ? ORK_F32 : ORK_BF16;
    ORK_TRY(make_plan(j, j->be->device));
    ORK_TRY(check_host(j));
    ork_wstore_quant wq = {j->qvt, j->quant, j->c_quant ? j->c_quant->c->id : NULL};
    /* test-only: stream the trainable state even when everything fits (docs/streaming.md §4) */
    const char *force = getenv("ORAKUL_STREAM_TRAINABLES");
    if (force && atoi(force) > 0 && !j->plan->trainable_streamed) {
        j->plan->trainable_streamed = 1;
        ORK_INFO("ORAKUL_STREAM_TRAINABLES: streaming the trainable state per block although the plan does not need it");
    }
    if (j->plan->trainable_streamed) {
        if (j->dist)
            return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams the trainable state per block, which multi-GPU training "
                            "does not support yet: raise model.vram_budget_gb or lower the LoRA rank",
                            ork_config_file(j->cfg));
        if (j->p->train.gradient_accumulation_steps > 1)
            return ORK_FAIL(ORK_E_CONFIG, "%s: train.gradient_accumulation_steps %lld: the plan streams the trainable state "
                            "per block, which steps each block right after its backward and cannot accumulate; use 1 "
                            "(raise batch_size instead) or raise model.vram_budget_gb", ork_config_file(j->cfg),
                            (long long)j->p->train.gradient_accumulation_steps);
        if (!j->p->train.gradient_checkpointing)
            return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams the trainable state per block, which needs "
                            "train.gradient_checkpointing: true", ork_config_file(j->cfg));
    }
    int zero_events = j->plan->trainable_streamed ? ork_zero_n_events(ZERO_SLOTS) : 0;
    if (j->plan->n_streamed > 0) {
        if (!j->p->train.gradient_checkpointing)
            return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams %d blocks, which needs train.gradient_checkpointing: true",
                            ork_config_file(j->cfg), j->plan->n_streamed);
        ORK_TRY(ork_copy_engine_create(j->be, &j->g->k, ork_streamer_n_events(j->plan->n_slots) + zero_events, &j->ce));
        const char *tm = getenv("ORAKUL_STREAM_TIMING"); /* a diagnostic: where the streamed step waits */
        j->ss_timing = tm && atoi(tm) > 0;
        const char *tp = getenv("ORAKUL_STREAM_TRACE"); /* a diagnostic: the lanes' timeline (bench/stream/trace_timeline.py) */
        if (tp && *tp) {
            if (!(j->ss_trace = fopen(tp, "w"))) ORK_WARN("ORAKUL_STREAM_TRACE: cannot write %s: %s", tp, strerror(errno));
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
        if (zero_events) ORK_TRY(ork_copy_engine_create(j->be, &j->g->k, zero_events, &j->ce));
        ORK_TRY(ork_wstore_create_quant(j->alloc, j->be, &j->g->k, &j->info, store, NULL, j->quant ? &wq : NULL, &j->ws));
    }
    ORK_TRY(j->mvt->load(j->model, ork_wstore_sink(j->ws)));
    ORK_TRY(ork_wstore_check_complete(j->ws));
    if (ork_wstore_streamer(j->ws)) ORK_TRY(ork_streamer_seal(ork_wstore_streamer(j->ws)));
    ork_wstore_attach(j->ws, j->g);
    t[PH_WEIGHTS] = now_s();
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
                        .seed = j->seed, .deferred = j->plan->trainable_streamed};
    ORK_TRY(ork_lora_create(j->alloc, j->be, &j->g->k, j->ws, &j->info, &lo, &j->lora));
    int first = j->info.n_blocks;
    for (int i = 0; i < ork_lora_count(j->lora); i++)
        if (ork_lora_block(j->lora, i) < first) first = ork_lora_block(j->lora, i);
    ORK_INFO("LoRA: %d modules, rank %lld, alpha %g, %lld trainable parameters", ork_lora_count(j->lora),
             (long long)nc->linear, nc->linear_alpha, (long long)ork_lora_params(j->lora));
    t[PH_LORA] = now_s();
    ORK_TRY(ork_runner_create(j->g, j->alloc, j->mvt, j->model, &j->info, &j->runner));
    ork_runner_set_first_trainable(j->runner, first);
    ork_wstore_hooks(j->ws, &j->ws_hooks);
    ork_runner_set_hooks(j->runner, &j->ws_hooks);
    ORK_TRY(j->lvt->create(&j->c_loss->host, j->loss_params, &j->loss));
    if (j->lvt->prepare) ORK_TRY(j->lvt->prepare(j->loss, j->g));
    ORK_TRY(dist_dataset_turn(j, 0));
    ORK_TRY(encode_dataset(j));
    ORK_TRY(dist_dataset_turn(j, 1));
    if (j->n_items == 0) return ORK_FAIL(ORK_E_CONFIG, "%s: no images to train on", ork_config_file(j->cfg));
    j->order = malloc((size_t)j->n_items * sizeof *j->order);
    if (!j->order) return ORK_E_NOMEM;
    j->order_epoch = -1;
    ORK_TRY(setup_schedule(j));
    t[PH_DATA] = now_s();
    ORK_TRY(ork_samples_create(j->cfg, &j->info, j->T, j->out_dir, j->name, &j->samples));
    if (ork_dist_rank(j->dist) > 0) { ork_samples_destroy(j->samples); j->samples = NULL; } /* rank 0 samples */
    ORK_TRY(setup_optimizer(j));
    ORK_TRY(dist_grads(j));
    t[PH_OPT] = now_s();
    if (j->plan->trainable_streamed) ORK_TRY(setup_zero(j));
    ORK_TRY(setup_grad_pool(j));
    t[PH_END] = now_s();
    setup_times_report(t);
    return ORK_OK;
}

/* "<name>_*.safetensors.tmp.<pid>" files of a process that is gone: a run
 * killed while saving leaves its temp file (the writer renames it into place
 * only when complete). Removed at start-up so they do not pile up. */
static void remove_stale_tmp(job *j) {
    DIR *d = opendir(j->out_dir);
    if (!d) return;
    size_t nl = strlen(j->name);
    static const char mark[] = ".safetensors.tmp.";
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name, *t = strstr(s, mark), *pid = t ? t + sizeof mark - 1 : NULL;
        if (strncmp(s, j->name, nl) || s[nl] != '_' || !pid || !*pid || strspn(pid, "0123456789") != strlen(pid))
            continue;
        pid_t owner = (pid_t)atol(pid);
        if (owner == getpid() || kill(owner, 0) == 0 || errno != ESRCH) continue; /* a live writer's */
        char p[1400];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", j->out_dir, s) >= sizeof p) continue;
        if (unlink(p) == 0) ORK_INFO("removed %s, left by an interrupted save", p);
    }
    closedir(d);
}

/* Steady-state streaming figures (steps after the first of this process):
 * bytes each way per step, their average rate over the step time, pinned
 * host memory and the process's peak resident set. */
static void stream_stats_mark(job *j, int64_t step, int64_t start, int64_t last) {
    if (step != start + 1 && step != last) return;
    ork_graph_sync(j->g);
    int e = step == last && step != start + 1;
    j->ss_t[e] = now_s();
    j->ss_h2d[e] = ork_ce_bytes(j->ce, ORK_LANE_H2D);
    j->ss_d2h[e] = ork_ce_bytes(j->ce, ORK_LANE_D2H);
    j->ss_steps[e] = step;
    ork_streamer *st = ork_wstore_streamer(j->ws);
    if (st) {
        ork_streamer_stats ss;
        ork_streamer_stats_get(st, &ss);
        j->ss_loads[e][0] = ss.loads;
        j->ss_loads[e][1] = ss.lent_loads;
        j->ss_loads[e][2] = ss.reused;
        j->ss_loads[e][3] = ss.early_loads;
    }
    if (j->zero) j->ss_loads[e][4] = ork_zero_reused(j->zero);
    static const ork_lane busy_lane[3] = {ORK_LANE_H2D, ORK_LANE_D2H, ORK_LANE_DEC};
    for (int l = 0; j->ss_timing && l < 3; l++) {
        double c = 0, d = 0;
        if (ork_ce_busy(j->ce, busy_lane[l], &c, &d) != ORK_OK ||
            (l < 2 && ork_ce_waited(j->ce, l ? ORK_LANE_H2D : ORK_LANE_COMPUTE, &j->ss_wait[e][l]) != ORK_OK))
            j->ss_timing = 0; /* a diagnostic: the run goes on without it */
        j->ss_busy[e][l] = c + d;
    }
}

static void stream_stats_report(job *j) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t n = j->ss_steps[1] - j->ss_steps[0];
    double dt = j->ss_t[1] - j->ss_t[0];
    if (n > 0 && dt > 0) {
        double h = (double)(j->ss_h2d[1] - j->ss_h2d[0]) / (double)n, d = (double)(j->ss_d2h[1] - j->ss_d2h[0]) / (double)n;
        ORK_INFO("streaming measured over %lld steps: %.3f s/step; host->device %.2f GB/step (%.1f GB/s), "
                 "device->host %.2f GB/step (%.1f GB/s)", (long long)n, dt / (double)n, h / 1e9, h / 1e9 / (dt / (double)n),
                 d / 1e9, d / 1e9 / (dt / (double)n));
        if (ork_wstore_streamer(j->ws)) {
            double q[4];
            for (int k = 0; k < 4; k++) q[k] = (double)(j->ss_loads[1][k] - j->ss_loads[0][k]) / (double)n;
            ORK_INFO("streaming loads: %.1f blocks per step (%.1f through the lent gradients' memory, %.1f copied ahead "
                     "at the step before's end), %.1f visits found their block still in its slot", q[0], q[1], q[3], q[2]);
        }
        if (j->zero)
            ORK_INFO("streaming trainable state: %.1f forward visits per step found their block's record still in its slot",
                     (double)(j->ss_loads[1][4] - j->ss_loads[0][4]) / (double)n);
        if (j->ss_timing) {
            double b[3], step_s = dt / (double)n;
            for (int l = 0; l < 3; l++) b[l] = (j->ss_busy[1][l] - j->ss_busy[0][l]) / (double)n;
            ORK_INFO("streaming lanes: host->device busy %.3f s/step (%.0f%% of the step, copies at %.1f GB/s), "
                     "decodes %.3f s/step on their own lane, device->host busy %.3f s/step (%.0f%%)", b[0],
                     100.0 * b[0] / step_s, b[0] > 0 ? h / 1e9 / b[0] : 0.0, b[2], b[1], 100.0 * b[1] / step_s);
            ORK_INFO("streaming waits: the compute lane stood %.3f s/step for loads, the host->device lane %.3f s/step "
                     "for free slots", (j->ss_wait[1][0] - j->ss_wait[0][0]) / (double)n,
                     (j->ss_wait[1][1] - j->ss_wait[0][1]) / (double)n);
        }
    }
    ORK_INFO("host memory: %.1f GiB pinned for streaming, peak resident set %.1f GiB",
             (double)ork_ce_host_bytes(j->ce) / 1073741824.0, (double)ru.ru_maxrss / 1048576.0);
}

/* ---- samples, progress line, metrics.jsonl, loss.png ------------------------- */

static ork_status sample_now(job *j, int64_t step) {
    /* the weight store's hooks (or the streamed state's), not the runner's
     * chain: a forward-only pass has no gradients to hand on */
    ork_block_hooks hk = j->zero ? zero_hooks(j) : j->ws_hooks;
    ork_denoiser d = {.g = j->g, .alloc = j->alloc, .vt = j->mvt, .model = j->model, .info = &j->info, .hooks = &hk,
                      .device_index = j->device_index};
    return ork_samples_run(j->samples, &d, step, NULL);
}

static void plot_now(job *j) {
    char m[1100], p[1100];
    snprintf(m, sizeof m, "%s/metrics.jsonl", j->out_dir);
    snprintf(p, sizeof p, "%s/loss.png", j->out_dir);
    if (ork_plot_loss_file(m, p) != ORK_OK) ORK_WARN("%s was not redrawn", p);
}

static ork_status outputs_open(job *j, int64_t start, int64_t log_every) {
    char m[1100];
    snprintf(m, sizeof m, "%s/metrics.jsonl", j->out_dir);
    if (ork_dist_rank(j->dist) == 0) ORK_TRY(ork_metrics_open(m, start, &j->metrics)); /* rank 0 writes the run's files */
    ork_progress_opts po = {.out = stdout, .tty = -1, .start = start, .total = j->p->train.steps,
                            .log_every = log_every, .mem_label = j->be->device == ORK_DEV_CPU ? "mem" : "VRAM"};
    ORK_TRY(ork_progress_create(&po, &j->progress));
    return ork_samples_due(j->samples, start, start, j->p->train.steps) ? sample_now(j, start) : ORK_OK;
}

static ork_status step_outputs(job *j, int64_t step, double loss, double norm, int skipped) {
    double lr = ork_lr_at(&j->lr, step - 1);
    size_t in_use = ork_alloc_in_use(j->alloc, NULL);
    ork_progress_step ps = {.step = step, .loss = loss, .skipped = skipped, .lr = lr, .grad_norm = norm,
                            .mem_in_use = in_use, .mem_peak = ork_alloc_peak(j->alloc)};
    ork_progress_end(j->progress, &ps);
    ork_metrics_row r = {.step = step, .loss = loss, .lr = lr, .grad_norm = norm,
                         .s_per_it = ork_progress_last_s(j->progress), .vram_gib = (double)in_use / 1073741824.0,
                         .skipped = skipped};
    return j->metrics ? ork_metrics_append(j->metrics, &r) : ORK_OK;
}

static ork_status train_loop(job *j) {
    const ork_train_config *t = &j->p->train;
    int64_t start;
    if (ork_dist_rank(j->dist) == 0) remove_stale_tmp(j);
    ORK_TRY(load_state(j, &start));
    ORK_TRY(dist_resume(j, &start));
    int64_t accum = t->gradient_accumulation_steps > 0 ? t->gradient_accumulation_steps : 1;
    int64_t log_every = j->p->logging.log_every > 0 ? j->p->logging.log_every : 10;
    int64_t save_every = j->p->save.save_every > 0 ? j->p->save.save_every : t->steps;
    double t0 = now_s();
    ORK_TRY(outputs_open(j, start, log_every));
    for (int64_t step = start + 1; step <= t->steps; step++) {
        ork_progress_begin(j->progress);
        int64_t skipped0 = j->skipped;
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_STEP));
        if (!j->zero) {
            if (!(j->grad_pool && j->grads_dead)) ORK_TRY(zero_grads(j)); /* else zeroed in loss_fn, after the loan */
        } else { /* the runtime steps each block at grads_ready with these */
            j->cur_step = step - j->skipped;
            j->cur_lr = ork_lr_at(&j->lr, step - 1);
        }
        float loss = 0;
        int bad = 0;
        for (int64_t a = 0; a < accum; a++) {
            float l = 0;
            if (j->gsync) ork_gsync_arm(j->gsync, a == accum - 1); /* all-reduce in the last backward */
            ORK_TRY(micro_step(j, (step - 1) * accum + a, 1.0f / (float)accum, &l));
            if (!isfinite(l)) bad = 1;
            loss += l;
        }
        ORK_TRY(dist_step_end(j, &loss, &bad));
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_NORM)); /* the lane trace's tail */
        double norm = 0, tp = ork_prof_enabled() ? (ork_graph_sync(j->g), ork_prof_now()) : 0;
        int zskip = 0;
        float applied = 1.0f;
        if (j->zero) ORK_TRY(ork_zero_step_end(j->zero, &norm, &applied, &zskip)); /* stepped already, per block */
        else ORK_TRY(grad_norm(j, &norm));
        if (j->zero && !zskip && !bad && isfinite(norm)) zero_clip_check(j, step, norm, applied);
        if (ork_prof_enabled()) ork_prof_add("phase", "gradient norm", ork_prof_now() - tp);
        if (zskip) {
            ORK_WARN("step %lld skipped: %d blocks had non-finite gradients and were not updated (loss %g, gradient norm %g)",
                     (long long)step, zskip, (double)loss, norm);
            j->skipped++;
        } else if (bad || !isfinite(norm)) {
            ORK_WARN("step %lld skipped: non-finite %s (loss %g, gradient norm %g)", (long long)step,
                     bad ? "loss" : "gradient", (double)loss, norm);
            j->skipped++;
        } else if (!j->zero) { /* streamed: stepped already, per block */
            float gs = ork_clip_factor(t->max_grad_norm, norm);
            double lr = ork_lr_at(&j->lr, step - 1);
            tp = ork_prof_enabled() ? ork_prof_now() : 0;
            ORK_TRY(optimizer_step(j, step - j->skipped, lr, gs));
            if (ork_prof_enabled()) { ork_graph_sync(j->g); ork_prof_add("phase", "optimizer step", ork_prof_now() - tp); }
        }
        if (j->ce) ORK_TRY(ork_ce_mark(j->ce, ORK_LANE_COMPUTE, ORK_TRACE_MARK_OPTIMIZER));
        if (j->grad_pool) j->grads_dead = 1; /* read by the optimizer step just enqueued: dead from here on */
        ORK_TRY(step_outputs(j, step, loss, norm, j->skipped != skipped0)); /* progress line, metrics.jsonl */
        if (j->ce) stream_stats_mark(j, step, start, t->steps);
        if (step % save_every == 0 || step == t->steps) {
            /* the LoRA first: a kill between the two leaves the state one
             * save behind, and the resumed run rewrites the same LoRA file
             * (training is deterministic); the other order loses it */
            if (ork_dist_rank(j->dist) == 0) { /* rank 0 writes, the others wait */
                ORK_TRY(save_lora(j, step));
                ORK_TRY(save_state(j, step));
            plot_now(j); /* loss.png from metrics.jsonl */
            }
            ORK_TRY(ork_dist_barrier(j->dist));
        }
        if (ork_samples_due(j->samples, step, start, t->steps)) ORK_TRY(sample_now(j, step));
    }
    ORK_INFO("device memory: peak %.2f GiB allocated (weights %.2f, lora %.2f, optimizer %.2f, activations+checkpoints %.2f GiB now)",
             (double)ork_alloc_peak(j->alloc) / 1073741824.0, (double)ork_alloc_in_use(j->alloc, "weights") / 1073741824.0,
             (double)ork_alloc_in_use(j->alloc, "lora") / 1073741824.0, (double)ork_alloc_in_use(j->alloc, "optimizer") / 1073741824.0,
             (double)(ork_alloc_in_use(j->alloc, "activations") + ork_alloc_in_use(j->alloc, "checkpoints")) / 1073741824.0);
    if (j->ce) stream_stats_report(j);
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
    j->inputs_sync = env_zero("ORAKUL_INPUTS_AHEAD");
    j->ahead_off = env_zero("ORAKUL_STREAM_AHEAD");
    j->lend_off = env_zero("ORAKUL_STREAM_LEND");
    j->cfg = cfg;
    j->reg = reg;
    j->p = ork_config_process(cfg);
    const ork_job_config *jc = ork_config_job(cfg);
    snprintf(j->name, sizeof j->name, "%s", jc->name ? jc->name : "lora");
    snprintf(j->out_dir, sizeof j->out_dir, "%s/%s", j->p->training_folder ? j->p->training_folder : "output", j->name);
    j->seed = (uint64_t)j->p->train.seed;
    return ORK_OK;
}

ork_status ork_train_run(ork_config *cfg, const ork_registry *reg) {
    job j;
    ORK_TRY(common_init(&j, cfg, reg));
    ork_status s = setup(&j);
    if (s == ORK_OK && mkdir_p(j.out_dir) != 0) s = ORK_FAIL(ORK_E_IO, "cannot create %s: %s", j.out_dir, strerror(errno));
    if (s == ORK_OK) s = train_loop(&j);
    j.failed = s != ORK_OK;
    job_free(&j);
    return s;
}

ork_status ork_train_plan(ork_config *cfg, const ork_registry *reg, FILE *out) {
    job j;
    ORK_TRY(common_init(&j, cfg, reg));
    ork_status s = ork_services_register();
    if (s == ORK_OK) s = resolve_all(&j);
    if (s == ORK_OK) s = check_datasets(&j);
    if (s == ORK_OK) s = open_model(&j);
    for (size_t d = 0; s == ORK_OK && d < j.p->datasets.n; d++) {
        ork_dataset ds;
        ork_dataset_opts o = {.folder_path = j.p->datasets.v[d].folder_path, .caption_ext = j.p->datasets.v[d].caption_ext};
        s = ork_dataset_scan(&o, &ds);
        if (s == ORK_OK) {
            fprintf(out, "dataset %s: %zu images\n", j.p->datasets.v[d].folder_path, ds.n);
            ork_dataset_free(&ds);
        }
    }
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
        fprintf(out, "output: %s/%s_<step>.safetensors (%s LoRA format)\n", j.out_dir, j.name, j.info.lora_format);
        const char *dev = j.p->device ? j.p->device : "cuda:0";
        s = make_plan(&j, strncmp(dev, "cpu", 3) ? ORK_DEV_CUDA : ORK_DEV_CPU);
        /* the plan as it will run: without the shadows when host memory needs that */
        if (s == ORK_OK) ork_stream_plan_fit_host(j.plan, host_available(), ork_config_file(j.cfg));
        if (s == ORK_OK) ork_stream_plan_print(j.plan, out);
        fflush(out); /* the plan before any refusal line on stderr */
        if (s == ORK_OK) s = check_host(&j);
    }
    job_free(&j);
    return s;
}
