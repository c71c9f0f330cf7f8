/* train/dataset_cache.c — the job's dataset in memory: every image encoded
 * once with the model's codec into latent tokens (cached on disk beside the
 * images, keyed by the image bytes and the codec, with checksums: a cache file
 * that fails them, holds another shape or dtype than the codec gives for the
 * image's bucket, or a NaN/Inf is encoded again with one warning), its text embeddings
 * (<image>.te.safetensors), and the deterministic batches: an epoch's seeded
 * order, micro-batch k's items and this rank's share of them. [control-thread;
 * the batch functions also on prefetch.c's builder thread, one at a time] */
#include "train/job.h"

#include "data/dataset.h"
#include "data/image.h"
#include "io/st_check.h"
#include "numerics/finite.h"
#include "platform/platform.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    if (s == ORK_OK) s = ork_model_codec_encode(&j->codec, j->g, x, &tok);
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

/* Every value of the model component's keys (model.model_kwargs and what
 * the core passes on, e.g. vae_path), hashed: which codec makes the latents
 * (FLUX's VAE, TAEF1, pixel) is the model's business and the core names none,
 * so a change to any of them makes new cache keys — a TAEF1 cache is never
 * read back as the VAE's, though both give the same token grid and dtype. */
static uint64_t model_params_hash(const job *j) {
    uint64_t h = ORK_FNV1A64_INIT;
    const ork_param *k = j->c_model && j->c_model->c->params ? j->c_model->c->params : NULL;
    for (; k && k->key && j->model_params; k++) {
        const char *at = (const char *)j->model_params + k->offset;
        uint32_t n = k->count > 1 ? k->count : 1;
        char v[64];
        h = ork_fnv1a64(k->key, strlen(k->key) + 1, h);
        for (uint32_t e = 0; e < n; e++) {
            switch (k->type) {
            case ORK_PARAM_STRING: {
                const char *str = ((const char *const *)at)[e];
                h = ork_fnv1a64(str ? str : "", str ? strlen(str) + 1 : 1, h);
                continue;
            }
            case ORK_PARAM_BOOL: snprintf(v, sizeof v, "%d", (int)((const int32_t *)at)[e]); break;
            case ORK_PARAM_INT: snprintf(v, sizeof v, "%lld", (long long)((const int64_t *)at)[e]); break;
            case ORK_PARAM_FLOAT: snprintf(v, sizeof v, "%.17g", ((const double *)at)[e]); break;
            default: v[0] = 0;
            }
            h = ork_fnv1a64(v, strlen(v) + 1, h);
        }
    }
    return h;
}

/* The latent cache file of one image, if it can be trusted: its key is this
 * image's and codec's, its checksums match (st_check.h), it holds F32 tokens
 * of exactly the grid the codec gives for the image's bucket, (ht, wt, C),
 * and they are finite. ORK_OK: it->tokens filled. Otherwise it is left empty
 * (the caller encodes into it): ORK_E_IO, no file; ORK_E_FORMAT, unusable,
 * why says why in one line ("" for a cache written before the cache carried
 * checksums: encoded again quietly). The reader's own error lines are held
 * (ork_log_hold): a cache that is re-encoded is a warning, not an error. */
static ork_status load_cached(const char *cache, uint64_t key, item *it, int C, int ht, int wt, char *why, size_t wn) {
    why[0] = 0;
    if (!ork_path_exists(cache)) return ORK_E_IO;
    ork_st_file *f = NULL;
    int verified = 0;
    ork_log_hold_begin();
    ork_status s = ork_st_open(cache, &f);
    if (s == ORK_OK) s = ork_st_verify(f, &verified);
    ork_log_hold_end(why, wn);
    if (s != ORK_OK) {
        ork_st_close(f);
        return ORK_E_FORMAT;
    }
    s = ORK_E_FORMAT;
    const char *k = ork_st_meta(f, "key");
    const ork_st_tensor *t = ork_st_find(f, "tokens");
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)key);
    if (!verified) {
        /* an older orakul's cache: nothing to say, encoded again */
    } else if (!k || strcmp(k, want)) {
        snprintf(why, wn, "%s: its key %.20s is not this image's and codec's %s", cache, k ? k : "(none)", want);
    } else if (!t || t->dtype != ORK_F32 || t->ndim != 3 || t->shape[0] != ht || t->shape[1] != wt || t->shape[2] != C) {
        char got[128] = "no tensor 'tokens'";
        if (t) {
            size_t o = (size_t)snprintf(got, sizeof got, "tokens %s (", t->dtype_name ? t->dtype_name : "?");
            for (int d = 0; d < t->ndim && o < sizeof got; d++)
                o += (size_t)snprintf(got + o, sizeof got - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            if (o < sizeof got) snprintf(got + o, sizeof got - o, ")");
        }
        snprintf(why, wn, "%s: %s, the codec gives F32 (%d, %d, %d) for this image", cache, got, ht, wt, C);
    } else {
        int64_t bad = ork_first_nonfinite(ORK_F32, t->data, ork_st_nelements(t));
        if (bad >= 0) {
            snprintf(why, wn, "%s: tokens element %lld is %s", cache, (long long)bad,
                     ork_nonfinite_kind(ORK_F32, t->data, (uint64_t)bad));
        } else if ((it->tokens = malloc((size_t)ork_st_nelements(t) * sizeof(float)))) {
            s = ork_st_read_f32(t, it->tokens);
            it->h_tok = ht;
            it->w_tok = wt;
        } else {
            s = ORK_E_NOMEM;
        }
        if (s != ORK_OK) { /* the caller encodes into it */
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

/* The scan options of dataset dc: what build_dataset and the caption gather
 * (text_glue.c) both read. */
ork_dataset_opts ork_train_dataset_opts(const ork_process_config *p, const ork_dataset_config *dc) {
    return (ork_dataset_opts){.folder_path = dc->folder_path, .caption_ext = dc->caption_ext,
                              .default_caption = dc->default_caption, .trigger_word = p->trigger_word,
                              .is_reg = dc->is_reg, .caption_dropout_rate = (float)dc->caption_dropout_rate};
}

ork_status ork_train_dataset(job *j, size_t d, const ork_dataset **out) {
    const size_t n = j->p->datasets.n;
    if (d >= n) return ORK_FAIL(ORK_E_INVALID, "dataset %zu: the config has %zu", d, n);
    if (!j->scans && !(j->scans = calloc(n, sizeof *j->scans))) return ORK_FAIL(ORK_E_NOMEM, "datasets: no memory");
    ork_dataset *ds = &j->scans[d];
    if (!ds->items) {
        ork_dataset_opts o = ork_train_dataset_opts(j->p, &j->p->datasets.v[d]);
        /* the scan's own line would repeat the one run (build_dataset) or plan prints */
        ork_log_level lvl = ork_log_get_level();
        if (lvl < ORK_LOG_WARN) ork_log_set_level(ORK_LOG_WARN);
        ork_status s = ork_dataset_scan(&o, ds);
        ork_log_set_level(lvl);
        ORK_TRY(s);
    }
    *out = ds;
    return ORK_OK;
}

size_t ork_train_dataset_uncaptioned(const ork_dataset *ds) {
    size_t missing = 0;
    for (size_t i = 0; i < ds->n; i++) missing += !ds->items[i].has_caption_file;
    return missing;
}

void ork_train_datasets_free(job *j) {
    for (size_t d = 0; j->scans && d < j->p->datasets.n; d++) ork_dataset_free(&j->scans[d]);
    free(j->scans);
    j->scans = NULL;
}

/* One dataset's latent cache (<folder>/_latent_cache/): where, whether it can be written
 * (said once when not: the cache is an optimisation, what stops it is a warning, never an
 * error line), the dataset's resolution, and the counts its line reports. */
typedef struct latent_cache {
    char dir[1100];
    int nocache, res;
    uint64_t codec_hash;
    int encoded, cached, old;
} latent_cache;

/* it's latent tokens: read from lc when a file there holds them for this image's key
 * (the image bytes, the resolution, everything about the codec), else encoded with the
 * model's codec and written there. */
static ork_status item_latents(job *j, latent_cache *lc, item *it) {
    const int res = lc->res;
    ork_file_fp fp;
    ORK_TRY(ork_file_fingerprint(it->path, 1, &fp));
    char keytxt[512];
    snprintf(keytxt, sizeof keytxt, "%016llx|%d|%s|%s|%d|%d", (unsigned long long)fp.hash, res, j->info.variant,
             j->p->model.name_or_path, j->info.token_channels, j->info.pixels_per_token);
    uint64_t key = ork_fnv1a64(keytxt, strlen(keytxt), lc->codec_hash);
    char stem[512], cache[2048];
    snprintf(cache, sizeof cache, "%s/%s_%016llx.safetensors", lc->dir, stem_of(it->path, stem, sizeof stem),
             (unsigned long long)key);
    /* the token grid the codec gives this image: what its cache must hold */
    int iw, ih, bw, bh, ppt = j->info.pixels_per_token > 0 ? j->info.pixels_per_token : 16;
    char why[4096] = "";
    ork_log_hold_begin();
    ork_status ls = ork_image_probe(it->path, &iw, &ih); /* the encode below says what is wrong with it */
    ork_log_hold_end(NULL, 0);
    if (ls == ORK_OK) {
        ork_image_bucket(iw, ih, res, ppt, &bw, &bh);
        ls = load_cached(cache, key, it, j->info.token_channels, bh / ppt, bw / ppt, why, sizeof why);
    }
    if (ls == ORK_OK) {
        lc->cached++;
        return ORK_OK;
    }
    if (ls == ORK_E_FORMAT && why[0]) ORK_WARN("latent cache unusable (%s): re-encoding %s", why, it->path);
    else if (ls == ORK_E_FORMAT) lc->old++;
    ork_status s = encode_image(j, it->path, res, it);
    if (s == ORK_E_BUDGET) /* the line above says what was asked; this one what to do */
        s = ORK_FAIL(ORK_E_BUDGET, "%s: encoding %s at %d px for the latent cache needs more device memory "
                     "than the plan leaves beside the model (the plan does not count the encode): run once "
                     "with a larger model.vram_budget_gb (the latents are then cached in %s) or a smaller "
                     "resolution", ork_config_file(j->cfg), it->path, res, lc->dir);
    ORK_TRY(s);
    int64_t bad = ork_first_nonfinite(ORK_F32, it->tokens, (uint64_t)it->h_tok * it->w_tok * j->info.token_channels);
    if (bad >= 0) /* nothing to train on, and never a cache file holding it */
        return ORK_FAIL(ORK_E_NUMERIC, "%s: the codec's latents of this image hold %s (element %lld of its "
                        "%dx%d tokens): not cached, cannot train on it", it->path,
                        ork_nonfinite_kind(ORK_F32, it->tokens, (uint64_t)bad), (long long)bad, it->w_tok, it->h_tok);
    lc->encoded++;
    ork_st_writer *w;
    if (!lc->nocache && ork_st_writer_new(&w) == ORK_OK) {
        ork_st_writer_checksum(w, 1); /* verified when read back (load_cached) */
        int64_t shape[3] = {it->h_tok, it->w_tok, j->info.token_channels};
        char ks[32];
        snprintf(ks, sizeof ks, "%016llx", (unsigned long long)key);
        size_t nb = (size_t)it->h_tok * it->w_tok * j->info.token_channels * sizeof(float);
        ork_log_demote(1); /* the writer's line says why; a warning */
        lc->nocache = ork_st_writer_add(w, "tokens", ORK_F32, 3, shape, it->tokens, nb) != ORK_OK ||
                      ork_st_writer_meta(w, "key", ks) != ORK_OK || ork_st_writer_commit(w, cache) != ORK_OK;
        ork_log_demote(-1);
        if (lc->nocache) ORK_WARN("could not write the latent cache in %s: latents are not cached on disk", lc->dir);
        ork_st_writer_free(w);
    }
    return ORK_OK;
}

/* num_repeats: items [first, first + n) again, reps − 1 times (shared data, fresh struct copies). */
static ork_status repeat_items(job *j, int first, int n, int64_t reps) {
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
            if (src->vec && j->info.vec_dim > 0) {
                size_t nv = (size_t)j->info.vec_dim * sizeof(float);
                if (!(dst->vec = malloc(nv))) return ORK_E_NOMEM;
                memcpy(dst->vec, src->vec, nv);
            }
        }
    return ORK_OK;
}

static ork_status build_dataset(job *j) {
    const ork_process_config *p = j->p;
    j->T = j->info.context_len > 0 ? j->info.context_len : 512;
    const uint64_t codec_hash = model_params_hash(j);
    for (size_t d = 0; d < p->datasets.n; d++) {
        const ork_dataset_config *dc = &p->datasets.v[d];
        const ork_dataset *ds;
        ORK_TRY(ork_train_dataset(j, d, &ds));
        latent_cache lc = {.res = dc->resolution.n > 0 ? (int)dc->resolution.v[0] : 512, .codec_hash = codec_hash};
        snprintf(lc.dir, sizeof lc.dir, "%s/_latent_cache", ds->folder);
        lc.nocache = ork_mkdir_p(lc.dir) != ORK_OK;
        if (lc.nocache) ORK_WARN("cannot create %s (%s): latents are not cached on disk", lc.dir, strerror(errno));
        int64_t reps = dc->num_repeats > 0 ? dc->num_repeats : 1;
        item *grown = realloc(j->items, (size_t)(j->n_items + ds->n * reps) * sizeof *grown);
        if (!grown) return ORK_E_NOMEM;
        j->items = grown;
        ork_status s = ORK_OK;
        const int first = j->n_items;
        for (size_t i = 0; s == ORK_OK && i < ds->n; i++) {
            item *it = &j->items[j->n_items];
            memset(it, 0, sizeof *it);
            it->path = strdup(ds->items[i].path);
            j->n_items++;
            s = item_latents(j, &lc, it);
            if (s != ORK_OK) break;
            s = load_text(j, it->path, it); /* <image>.te.safetensors: an override of the encoded caption */
            it->ds = (int)d;
            if (s == ORK_OK) s = ork_train_text_item(j, (int)d, i, it); /* text_glue.c */
        }
        if (s != ORK_OK) return s;
        const size_t missing = ork_train_dataset_uncaptioned(ds);
        ORK_INFO("dataset %s: %d images, %zu without a %s caption%s (%d encoded, %d from the latent cache)",
                 dc->folder_path, j->n_items - first, missing, ds->caption_ext,
                 missing && dc->default_caption ? ", default_caption used" : "", lc.encoded, lc.cached);
        if (lc.old)
            ORK_INFO("latent cache: %d file%s written before the cache carried checksums, encoded again", lc.old,
                     lc.old == 1 ? "" : "s");
        ORK_TRY(repeat_items(j, first, j->n_items - first, reps));
    }
    if (j->text) /* text_glue.c said how many were encoded and read from the text cache */
        ORK_INFO("text conditioning: the encoded caption for %d images, <image>.te.safetensors for %d", j->have_enc,
                 j->have_te);
    else if (j->have_te)
        ORK_INFO("text conditioning: embeddings from <image>.te.safetensors for %d of %d images (others: zeros)", j->have_te, j->n_items);
    else
        ORK_INFO("text conditioning: zero text embeddings (an empty-prompt stand-in): no text encoders (%s)",
                 strncmp(j->p->model.name_or_path, "preset:", 7) ? "the warning above says how to give them"
                 : "a preset has none unless model_kwargs gives their paths");
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
    ork_train_datasets_free(j); /* the items hold what training reads */
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
