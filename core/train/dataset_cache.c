/* train/dataset_cache.c — the job's dataset in memory: every image encoded
 * once with the model's codec into latent tokens (cached on disk beside the
 * images, keyed by the image bytes and the codec), its text embeddings
 * (<image>.te.safetensors), and the deterministic batches: an epoch's seeded
 * order, micro-batch k's items and this rank's share of them. [control-thread;
 * the batch functions also on prefetch.c's builder thread, one at a time] */
#include "train/job.h"

#include "data/dataset.h"
#include "data/image.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ork_train_mkdir_p(const char *path) {
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
    /* a grid of at least one token per side, no wider than an image (fuzz_latent_cache) */
    if (k && !strcmp(k, want) && t && t->ndim == 3 && t->shape[2] == C && t->shape[0] >= 1 && t->shape[1] >= 1 &&
        t->shape[0] <= ORK_IMAGE_MAX_SIDE && t->shape[1] <= ORK_IMAGE_MAX_SIDE) {
        it->h_tok = (int)t->shape[0];
        it->w_tok = (int)t->shape[1];
        it->tokens = malloc((size_t)ork_st_nelements(t) * sizeof(float));
        s = it->tokens ? ork_st_read_f32(t, it->tokens) : ORK_E_NOMEM;
        if (s != ORK_OK) { /* the caller re-encodes into it */
            free(it->tokens);
            it->tokens = NULL;
            it->h_tok = it->w_tok = 0;
        }
    }
    ork_st_close(f);
    return s;
}

static ork_status load_text(job *j, const char *img_path, item *it) {
    char te[1200];
    ork_st_file *f; /* opened and its shapes checked as plan checks them (preflight.c) */
    ORK_TRY(ork_train_open_text(j, img_path, te, sizeof te, &f));
    if (!f) return ORK_OK; /* none: zeros */
    const ork_st_tensor *t = ork_st_find(f, "txt"), *v = ork_st_find(f, "vec");
    it->txt = malloc((size_t)ork_st_nelements(t) * sizeof(float));
    ork_status s = it->txt ? ork_st_read_f32(t, it->txt) : ORK_E_NOMEM;
    if (s == ORK_OK && j->info.vec_dim > 0 && v) {
        if (!(it->vec = malloc((size_t)j->info.vec_dim * sizeof(float)))) s = ORK_E_NOMEM;
        else s = ork_st_read_f32(v, it->vec);
    }
    if (s == ORK_OK) j->have_te++;
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
        /* the cache is an optimisation: what stops it is a warning, never an error line (a run that succeeds
         * prints none), and is said once per dataset */
        int nocache = ork_train_mkdir_p(cache_dir) != 0;
        if (nocache) ORK_WARN("cannot create %s (%s): latents are not cached on disk", cache_dir, strerror(errno));
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
            ork_log_demote(1); /* a cache file that fails to load is re-encoded: its line is a warning */
            ork_status ls = load_cached(cache, key, it, j->info.token_channels);
            ork_log_demote(-1);
            if (ls == ORK_OK) {
                cached++;
            } else {
                if (access(cache, F_OK) == 0) ORK_WARN("%s: re-encoding %s (its latent cache file cannot be used)", cache, it->path);
                s = encode_image(j, it->path, res, it);
                if (s == ORK_E_BUDGET) /* the line above says what was asked; this one what to do */
                    s = ORK_FAIL(ORK_E_BUDGET, "%s: encoding %s at %d px for the latent cache needs more device memory "
                                 "than the plan leaves beside the model (the plan does not count the encode): run once "
                                 "with a larger model.vram_budget_gb (the latents are then cached in %s) or a smaller "
                                 "resolution", ork_config_file(j->cfg), it->path, res, cache_dir);
                if (s != ORK_OK) break;
                encoded++;
                ork_st_writer *w;
                if (!nocache && ork_st_writer_new(&w) == ORK_OK) {
                    int64_t shape[3] = {it->h_tok, it->w_tok, j->info.token_channels};
                    char ks[32];
                    snprintf(ks, sizeof ks, "%016llx", (unsigned long long)key);
                    size_t nb = (size_t)it->h_tok * it->w_tok * j->info.token_channels * sizeof(float);
                    ork_log_demote(1); /* the writer's line says why; a warning */
                    nocache = ork_st_writer_add(w, "tokens", ORK_F32, 3, shape, it->tokens, nb) != ORK_OK ||
                              ork_st_writer_meta(w, "key", ks) != ORK_OK || ork_st_writer_commit(w, cache) != ORK_OK;
                    ork_log_demote(-1);
                    if (nocache) ORK_WARN("could not write the latent cache in %s: latents are not cached on disk", cache_dir);
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

/* The latent encode runs in a graph of its own, destroyed afterwards: a
 * 1024² encode grows an activation arena of GiBs, which would otherwise stay
 * reserved through training (the plan does not count it). Its memory is
 * tagged "encode": not the training's activations in the budget's lines and
 * the end-of-run summary. */
ork_status ork_train_encode_dataset(job *j) {
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

/* ---- batches -------------------------------------------------------------- */

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

int ork_train_batch_of(const job *j) {
    int B = (int)(j->p->train.batch_size > 0 ? j->p->train.batch_size : 1);
    return B > 256 ? 256 : B;
}
int64_t ork_train_accum_of(const job *j) {
    return j->p->train.gradient_accumulation_steps > 0 ? j->p->train.gradient_accumulation_steps : 1;
}

/* This rank's items of global micro-batch k (world x B items, dist/shard.h)
 * and each one's slot in the global batch (its noise and timestep draws). */
ork_status ork_train_shard_items(job *j, int64_t k, int B, int *idx, int *slot, int *nb) {
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
