/* train/text_glue.c — the run's text conditioning (issue #28 points 5, 6):
 * before the denoiser's plan, every caption the run needs — each image's
 * (after default_caption and the trigger word), each dataset's dropout
 * caption when caption_dropout_rate > 0, the sample prompts that are text —
 * is read from the text cache (text_cache.h) or, when missing or unusable,
 * encoded by the model's text encoders (text/conditioner.h) in ONE call
 * (encode_each: one pass of the encoders' weights when they stay resident,
 * else one per group of embeddings; their memory is given back before it
 * returns) and written to the cache. An image with a <stem>.te.safetensors
 * beside it keeps that file (an override: its caption is not encoded).
 * Without the model's text encoders (the conditioner's warning says so; a
 * preset without encoder paths says it in an info line) the run keeps the
 * older behaviour: those files, else zero embeddings.
 *
 * Caption dropout: micro-batch k's slot s drops its caption when uniform
 * draw (seed, ORK_RNG_CAPTION, counter k·2^16 + s) < the item's dataset's
 * caption_dropout_rate — a pure function of the run's seed and the
 * micro-batch, so a resumed run draws what the uninterrupted one drew. A
 * dropped caption trains on the dataset's dropout caption's embedding
 * (ai-toolkit's: "" , or the trigger word for a non-reg dataset with one),
 * zeros without text encoders.
 *
 * Host memory: an image's embedding is NOT held for the run (T5-XXL: 8 MiB
 * of F32 per caption, 80 GB for 10,000 images): it stays in its text cache
 * file and prefetch.c reads it (ork_train_text_read, checked as at the
 * start) when it builds the micro-batch — the same F32 values training used
 * when they were held. Held in memory: the dropout captions' embeddings, the
 * sample prompts' until copied, and any whose cache file could not be
 * written (an unwritable folder). The encode hands each caption's rows to a
 * callback that writes its file (ork_textcond_encode_each: at most
 * ORAKUL_TEXT_GROUP_GIB of embeddings on the host at once).
 *
 * A txt slot of each caption's unmasked tokens only (ORK_TEXT_SLOT_UNMASKED,
 * Z-Image): each embedding keeps its length (the encode's count, or the
 * cache entry's, which holds only those rows); prefetch.c gives the model
 * txt (1, T_i, ctx) for a micro-batch of one; batch_size > 1 is refused.
 *
 * The encode's plan (text/cond_plan.h) is printed by `orakul plan` and
 * checked by both: its host memory against MemAvailable before any weight is
 * read (the denoiser's pinned bytes are checked after the encode gave all of
 * its memory back, by the streaming plan).
 *
 * Owns: the ork_train_text table (embeddings, their cache files, per-image
 * indices, the (dataset, image) -> embedding map) of a job.
 * [control-thread; ork_train_text_drop and ork_train_text_read also on
 * prefetch.c's builder thread, reading the table only] */
#include "train/job.h"

#include "data/dataset.h"
#include "platform/platform.h"
#include "text/cond_plan.h"
#include "text/conditioner.h"
#include "train/dop.h"
#include "train/rng.h"
#include "train/text_cache.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct img_ref {
    const char *path;     /* the image's path (ork_train_text_item's item's: it lives as long as the job) */
    int ds, e;
} img_ref;

struct ork_train_text {
    int T, ctx, vdim;
    int n, cap;           /* embeddings */
    float **txt, **vec;   /* [n]: (T, ctx) and (vdim) in host memory, or NULL */
    int *len;             /* [n]: its valid txt rows: the caption's own (unmasked), else T */
    int unmasked;         /* the txt slot keeps each caption's unmasked rows (ORK_TEXT_SLOT_UNMASKED) */
    char **file;          /* [n]: its text cache file (checked at the start), or NULL: held in memory */
    char **caption;       /* [n]: its caption (the cache entry's check), with file */
    char *identity;       /* the encoders' (the cache entries') */
    img_ref *map;         /* open addressing over (ds, image path): images whose embedding is read from file */
    int map_n, map_cap;
    int n_ds;
    size_t *n_img;        /* [n_ds] */
    int **img;            /* [n_ds][n_img]: embedding of image i, -1: none (an override file, or no encoder) */
    int *drop;            /* [n_ds]: the dropout caption's embedding, -1: zeros */
    int *uses;            /* [n]: images and dropout captions still to take embedding e: the last image's
                           * ork_train_text_item takes the arrays themselves (one copy of each on the host) */
    int **dop_img;        /* DOP (train/dop.h): [n_ds][n_img] the class prompt's embedding, held; NULL: no DOP */
    int *dop_drop;        /* [n_ds] the dropout caption's class prompt's, -1: zeros */
};

void ork_train_text_free(job *j) {
    ork_train_text *t = j->text;
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->txt[i]), free(t->vec[i]), free(t->file[i]), free(t->caption[i]);
    for (int d = 0; d < t->n_ds; d++) free(t->img[d]), free(t->dop_img ? t->dop_img[d] : NULL);
    free(t->dop_img), free(t->dop_drop);
    free(t->txt), free(t->vec), free(t->len), free(t->file), free(t->caption), free(t->img), free(t->n_img), free(t->drop);
    free(t->uses), free(t->identity), free(t->map);
    free(t);
    j->text = NULL;
}

/* ---- what to encode ------------------------------------------------------- */

typedef struct want {
    char *caption;   /* owned */
    int dir;         /* index into dirs */
    uint64_t key;
    int emb;         /* embedding index */
} want;

typedef struct wants {
    want *v;
    int n, cap;
    int *hash;       /* open addressing over (key, dir): want index + 1, 0 empty */
    int hcap;
    char **dirs;     /* cache folders; NULL entries: not writable */
    int *dir_ok;
    int n_dirs;
    int plan;        /* `orakul plan`: nothing is created */
} wants;

static void wants_free(wants *w) {
    for (int i = 0; i < w->n; i++) free(w->v[i].caption);
    for (int i = 0; i < w->n_dirs; i++) free(w->dirs[i]);
    free(w->v), free(w->hash), free(w->dirs), free(w->dir_ok);
    memset(w, 0, sizeof *w);
}

static int add_dir(wants *w, const char *dir) {
    char **d = realloc(w->dirs, (size_t)(w->n_dirs + 1) * sizeof *d);
    if (!d) return -1;
    w->dirs = d;
    int *ok = realloc(w->dir_ok, (size_t)(w->n_dirs + 1) * sizeof *ok);
    if (!ok) return -1;
    w->dir_ok = ok;
    if (!(w->dirs[w->n_dirs] = strdup(dir))) return -1;
    /* the cache is an optimisation: a folder that cannot be made is a warning */
    w->dir_ok[w->n_dirs] = w->plan ? ork_path_access(dir, 1) : ork_mkdir_p(dir) == ORK_OK;
    if (!w->dir_ok[w->n_dirs] && !w->plan)
        ORK_WARN("cannot create %s (%s): text embeddings are not cached on disk", dir, strerror(errno));
    return w->n_dirs++;
}

/* The want index of (caption, dir), added when new; -1: no memory. */
static int add_want(wants *w, const char *identity, int T, const char *caption, int dir) {
    uint64_t key = ork_text_cache_key(identity, T, caption);
    if (2 * (w->n + 1) > w->hcap) { /* grow and rehash */
        int hcap = w->hcap ? w->hcap * 2 : 256;
        int *h = calloc((size_t)hcap, sizeof *h);
        if (!h) return -1;
        for (int i = 0; i < w->n; i++) {
            uint64_t q = (w->v[i].key ^ (uint64_t)w->v[i].dir * 0x9e3779b97f4a7c15ULL) & (uint64_t)(hcap - 1);
            while (h[q]) q = (q + 1) & (uint64_t)(hcap - 1);
            h[q] = i + 1;
        }
        free(w->hash);
        w->hash = h;
        w->hcap = hcap;
    }
    uint64_t q = (key ^ (uint64_t)dir * 0x9e3779b97f4a7c15ULL) & (uint64_t)(w->hcap - 1);
    for (; w->hash[q]; q = (q + 1) & (uint64_t)(w->hcap - 1)) {
        const want *o = &w->v[w->hash[q] - 1];
        if (o->key == key && o->dir == dir && !strcmp(o->caption, caption)) return w->hash[q] - 1;
    }
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        want *v = realloc(w->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        w->v = v;
        w->cap = cap;
    }
    want *x = &w->v[w->n];
    if (!(x->caption = strdup(caption))) return -1;
    x->dir = dir;
    x->key = key;
    x->emb = -1;
    w->hash[q] = w->n + 1;
    return w->n++;
}

/* "<dir>/<stem>.te.safetensors" beside an image (preflight.c reads it). */
static int has_override(const char *img_path) {
    char te[1200];
    const char *slash = strrchr(img_path, '/'), *base = slash ? slash + 1 : img_path;
    const char *dot = strrchr(base, '.');
    int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    int dlen = slash ? (int)(slash - img_path) : 1;
    snprintf(te, sizeof te, "%.*s/%.*s.te.safetensors", dlen, slash ? img_path : ".", stem, base);
    return ork_path_exists(te);
}

static ork_status nomem(void) { return ORK_FAIL(ORK_E_NOMEM, "text conditioning: no memory"); }

/* Every caption of every dataset into w; per-image want indices into t. */
static ork_status gather_datasets(job *j, const char *identity, wants *w, ork_train_text *t, int **img_want,
                                  int *drop_want, int **dop_want, int *dop_drop_want) {
    const ork_process_config *p = j->p;
    for (size_t d = 0; d < p->datasets.n; d++) {
        const ork_dataset_config *dc = &p->datasets.v[d];
        const ork_dataset *ds; /* the job's one scan of the folder, kept for build_dataset */
        ORK_TRY(ork_train_dataset(j, d, &ds));
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", ds->folder, ORK_TEXT_CACHE_DIR);
        int di = add_dir(w, dir);
        ork_status s = di < 0 ? nomem() : ORK_OK;
        t->n_img[d] = ds->n;
        if (s == ORK_OK && !(img_want[d] = malloc((ds->n ? ds->n : 1) * sizeof **img_want))) s = nomem();
        for (size_t i = 0; s == ORK_OK && i < ds->n; i++) {
            img_want[d][i] = -1; /* an override file: its caption is not encoded */
            if (!has_override(ds->items[i].path) && (img_want[d][i] = add_want(w, identity, t->T, ds->items[i].caption, di)) < 0)
                s = nomem();
        }
        /* DOP: each caption's class prompt (train/dop.h), the same entry when the trigger is not in it */
        const char *trig = p->trigger_word, *cls = p->train.diff_output_preservation_class;
        if (s == ORK_OK && dop_want && !(dop_want[d] = malloc((ds->n ? ds->n : 1) * sizeof **dop_want))) s = nomem();
        for (size_t i = 0; s == ORK_OK && dop_want && i < ds->n; i++) {
            char *dc_ = NULL;
            s = ork_dop_caption(ds->items[i].caption, trig, cls, &dc_);
            if (s == ORK_OK && (dop_want[d][i] = add_want(w, identity, t->T, dc_, di)) < 0) s = nomem();
            free(dc_);
        }
        drop_want[d] = -1;
        if (dop_drop_want) dop_drop_want[d] = -1;
        if (s == ORK_OK && dc->caption_dropout_rate > 0) {
            char *dcap = NULL, *dd = NULL;
            s = ork_dataset_dropout_caption(ds, &dcap);
            if (s == ORK_OK && (drop_want[d] = add_want(w, identity, t->T, dcap, di)) < 0) s = nomem();
            if (s == ORK_OK && dop_drop_want) s = ork_dop_caption(dcap, trig, cls, &dd);
            if (s == ORK_OK && dop_drop_want && (dop_drop_want[d] = add_want(w, identity, t->T, dd, di)) < 0) s = nomem();
            free(dcap);
            free(dd);
        }
        ORK_TRY(s);
    }
    return ORK_OK;
}

/* ---- the encode ------------------------------------------------------------ */

/* A new embedding slot, held nowhere yet. */
static ork_status add_emb(ork_train_text *t, int *out) {
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        float **a = realloc(t->txt, (size_t)cap * sizeof *a);
        if (!a) return nomem();
        t->txt = a;
        float **b = realloc(t->vec, (size_t)cap * sizeof *b);
        if (!b) return nomem();
        t->vec = b;
        char **f = realloc(t->file, (size_t)cap * sizeof *f);
        if (!f) return nomem();
        t->file = f;
        char **c = realloc(t->caption, (size_t)cap * sizeof *c);
        if (!c) return nomem();
        t->caption = c;
        int *l = realloc(t->len, (size_t)cap * sizeof *l);
        if (!l) return nomem();
        t->len = l;
        t->cap = cap;
    }
    t->txt[t->n] = t->vec[t->n] = NULL;
    t->len[t->n] = t->T;
    t->file[t->n] = t->caption[t->n] = NULL;
    *out = t->n++;
    return ORK_OK;
}

/* Embedding e's rows held in memory: copies of txt (T, ctx) and vec (vdim). */
static ork_status hold_emb(ork_train_text *t, int e, const float *txt, const float *vec) {
    if (!t->txt[e] && !(t->txt[e] = malloc((size_t)t->T * t->ctx * sizeof(float)))) return nomem();
    if (t->vdim && !t->vec[e] && !(t->vec[e] = malloc((size_t)t->vdim * sizeof(float)))) return nomem();
    memcpy(t->txt[e], txt, (size_t)t->T * t->ctx * sizeof(float));
    if (t->vdim) memcpy(t->vec[e], vec, (size_t)t->vdim * sizeof(float));
    return ORK_OK;
}

/* Embedding e lives in its cache file path (caption: its entry's). */
static ork_status file_emb(ork_train_text *t, int e, const char *path, const char *caption) {
    if (!(t->file[e] = strdup(path)) || !(t->caption[e] = strdup(caption))) return nomem();
    return ORK_OK;
}

/* encode_each's state: the misses' rows go to their cache files (or memory). */
typedef struct fill_ctx {
    ork_train_text *t;
    wants *w;
    const int *miss;      /* want index of each caption encoded */
    const char *keep;     /* [w->n]: held in memory too (dropout captions, sample prompts) */
    const char *identity;
    const int *len;       /* each caption's valid rows (ork_textcond_lengths) */
    int warned;
} fill_ctx;

static ork_status put_encoded(void *user, int m, const float *txt, const float *vec) {
    fill_ctx *c = user;
    ork_train_text *t = c->t;
    wants *w = c->w;
    const want *x = &w->v[c->miss[m]];
    int written = 0;
    t->len[x->emb] = c->len[m];
    if (w->dir_ok[x->dir]) {
        char path[1300];
        ork_text_cache_path(w->dirs[x->dir], x->key, path, sizeof path);
        ork_log_demote(1); /* the writer's line says why; a warning */
        /* an UNMASKED caption's entry keeps its own rows (the rest are zero) */
        ork_status ws = t->unmasked ? ork_text_cache_write_len(path, c->identity, t->T, t->ctx, t->vdim, x->caption,
                                                               c->len[m], txt, t->vdim ? vec : NULL)
                                    : ork_text_cache_write(path, c->identity, t->T, t->ctx, t->vdim, x->caption, txt,
                                                           t->vdim ? vec : NULL);
        ork_log_demote(-1);
        if (ws == ORK_OK) {
            ORK_TRY(file_emb(t, x->emb, path, x->caption));
            written = 1;
        } else {
            w->dir_ok[x->dir] = 0;
            if (!c->warned++)
                ORK_WARN("could not write the text cache in %s: text embeddings are not cached on disk (held in "
                         "memory for this run)", w->dirs[x->dir]);
        }
    }
    return !written || c->keep[c->miss[m]] ? hold_emb(t, x->emb, txt, vec) : ORK_OK;
}

/* Check what the cache holds (each entry read once, as training will read
 * it), encode the rest in one pass of the encoders, each caption's rows
 * written to its file as they come. keep[i]: want i is held in memory too. */
static ork_status fill(job *j, ork_textcond *tc, const char *identity, wants *w, const char *keep,
                       ork_train_text *t) {
    int *miss = malloc(((size_t)w->n + 1) * sizeof *miss), n_miss = 0, bad = 0;
    float *sx = malloc((size_t)t->T * t->ctx * sizeof *sx), *sv = malloc(((size_t)t->vdim + 1) * sizeof *sv);
    ork_status s = miss && sx && sv ? ORK_OK : nomem();
    for (int i = 0; s == ORK_OK && i < w->n; i++) {
        want *x = &w->v[i];
        if ((s = add_emb(t, &x->emb)) != ORK_OK) break;
        char path[1300], why[1024];
        ork_text_cache_path(w->dirs[x->dir], x->key, path, sizeof path);
        ork_log_hold_begin(); /* a cache entry that does not load is encoded again: a warning, not an error */
        ork_status ls = t->unmasked ? ork_text_cache_load_len(path, identity, t->T, t->ctx, t->vdim, x->caption, sx,
                                                              sv, &t->len[x->emb])
                                    : ork_text_cache_load(path, identity, t->T, t->ctx, t->vdim, x->caption, sx, sv);
        ork_log_hold_end(why, sizeof why);
        if (ls == ORK_E_NOMEM) {
            s = nomem();
        } else if (ls == ORK_OK) {
            s = file_emb(t, x->emb, path, x->caption);
            if (s == ORK_OK && keep[i]) s = hold_emb(t, x->emb, sx, sv);
        } else {
            if (ls != ORK_E_IO || ork_path_exists(path)) {
                ORK_WARN("%s: encoding its caption again (the text cache entry cannot be used: %s)", path,
                         why[0] ? why : ork_status_str(ls));
                bad++;
            }
            miss[n_miss++] = i;
        }
    }
    free(sx), free(sv);
    double secs = 0;
    if (s == ORK_OK && n_miss > 0) {
        const char **caps = malloc((size_t)n_miss * sizeof *caps);
        int *mlen = malloc((size_t)n_miss * sizeof *mlen);
        if (!caps || !mlen) s = nomem();
        for (int m = 0; s == ORK_OK && m < n_miss; m++) caps[m] = w->v[miss[m]].caption;
        /* each caption's own length (UNMASKED; T otherwise): encode_each hands over the compacted rows only */
        if (s == ORK_OK) s = ork_textcond_lengths(tc, n_miss, caps, mlen);
        size_t budget = j->p->model.vram_budget_gb > 0 ? (size_t)(j->p->model.vram_budget_gb * 1073741824.0) : 0;
        fill_ctx c = {t, w, miss, keep, identity, mlen, 0};
        /* the encode's plan: its host memory checked before any weight is read (the device's is the
         * plan's own refusal), and its predicted time beside the measured one */
        ork_tc_encode_plan ep;
        if (s == ORK_OK) s = ork_tc_encode_plan_make(tc, j->be, budget, n_miss, &ep);
        if (s == ORK_OK) s = ork_tc_encode_plan_check_host(&ep, ork_train_host_available(), ork_config_file(j->cfg));
        if (s == ORK_OK)
            ORK_INFO("text: encoding %d captions (plan: %s%s, %.2f GB over the link, predicted %.1f s)", n_miss,
                     ep.n && ep.s[0].layer_major ? "streamed layer-major" : "resident",
                     ep.n > 1 ? " (first encoder)" : "", ep.link_bytes / 1e9, ep.t_pred);
        if (s == ORK_OK) s = ork_textcond_encode_each(tc, j->be, budget, n_miss, caps, put_encoded, &c);
        free(caps), free(mlen);
        if (s == ORK_OK) {
            ork_textcond_stats st;
            ork_textcond_last_stats(tc, &st);
            secs = st.seconds;
        }
    }
    free(miss);
    if (s == ORK_OK)
        ORK_INFO("text: %d captions: %d encoded (%.1f s), %d from the text cache%s", w->n, n_miss, secs,
                 w->n - n_miss, bad ? " (the unusable entries were encoded again: see above)" : "");
    return s;
}

/* ---- the sample prompts ---------------------------------------------------- */

static ork_status gather_samples(job *j, const char *identity, wants *w, int **want_of, int *n) {
    *want_of = NULL;
    *n = j->samples ? ork_samples_text_count(j->samples) : 0;
    if (*n == 0) return ORK_OK;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", j->out_dir, ORK_TEXT_CACHE_DIR);
    int di = add_dir(w, dir);
    if (di < 0 || !(*want_of = malloc((size_t)*n * sizeof **want_of))) return nomem();
    for (int i = 0; i < *n; i++)
        if (((*want_of)[i] = add_want(w, identity, j->T, ork_samples_text_at(j->samples, i), di)) < 0) return nomem();
    return ORK_OK;
}

/* A preset (random weights of a variant's shapes: the quickstart, most tests)
 * has no text encoders unless model_kwargs gives their paths: zeros, said by
 * dataset_cache.c's info line, without the conditioner's warning (meant for a
 * real checkpoint whose encoders were not found). */
static int preset_without_encoders(const job *j) {
    const char *n = j->p->model.name_or_path;
    if (!n || strncmp(n, "preset:", 7) != 0) return 0;
    for (int i = 0; ork_model_info_has_text(&j->info) && i < j->info.n_text_slots; i++) {
        const ork_text_slot *t = &j->info.text_slots[i];
        if ((t->path && *t->path) || (t->tokenizer_path && *t->tokenizer_path)) return 0;
    }
    return 1;
}

/* A txt slot that keeps each caption's unmasked tokens only (Z-Image,
 * ORK_TEXT_SLOT_UNMASKED): each caption's embedding keeps its own length
 * (ork_text_embed.len, ork_textcond_lengths, the text cache's trimmed
 * entries) and a micro-batch of one goes to the model as txt (1, T_i, ctx)
 * (prefetch.c, train.c; DOP's class prompts and the sample prompts alike).
 * A batch above 1 would put captions of other lengths side by side, which
 * needs a key-masked attention: refused here, for plan and run alike, at
 * train.batch_size (a config refusal: run and plan exit 2), never trained on
 * padded rows. */
static ork_status refuse_unmasked(const job *j, ork_textcond *tc) {
    if (!ork_textcond_unmasked(tc) || j->p->train.batch_size <= 1) return ORK_OK;
    ork_textcond_close(tc);
    const char *m = j->info.variant ? j->info.variant : "the model";
    const char *why = "takes each caption's unmasked text tokens only, whose lengths differ: a batch of them needs "
                      "a key-masked attention (not yet); use batch_size 1";
    ork_loc at;
    if (ork_config_where(j->cfg, "train.batch_size", &at) && at.line > 0)
        return ork_config_fail_at(&at, ORK_E_CONFIG, "train.batch_size %lld: %s %s",
                                  (long long)j->p->train.batch_size, m, why);
    return ORK_FAIL(ORK_E_CONFIG, "%s: train.batch_size %lld: %s %s", ork_config_file(j->cfg),
                    (long long)j->p->train.batch_size, m, why);
}

ork_status ork_train_encode_text(job *j) {
    j->T = ork_train_text_len(j);
    /* the sample prompts are made here (preflight keeps them) so that their text is encoded with the captions */
    if (!j->samples) ORK_TRY(ork_samples_create(j->cfg, &j->info, j->T, j->out_dir, j->name, &j->samples));
    ork_textcond_opts o;
    ork_textcond_opts_from_config(&j->p->model, &j->info, &o); /* quantize_te, qtype_te, attn_masking */
    o.device_index = j->device_index;
    ork_textcond *tc = NULL;
    if (preset_without_encoders(j)) return ORK_OK;
    ORK_TRY(ork_textcond_open(j->reg, &j->info, &o, &tc));
    if (!tc) return ORK_OK; /* no text encoders: the conditioner said so; .te.safetensors files or zeros */
    ORK_TRY(refuse_unmasked(j, tc));
    ork_train_text *t = calloc(1, sizeof *t);
    wants w = {0};
    int *samp = NULL, n_samp = 0, **img_want = NULL, *drop_want = NULL;
    char *keep = NULL;
    ork_status s = t ? ORK_OK : nomem();
    const char *identity = ork_textcond_identity(tc);
    if (s == ORK_OK) {
        j->text = t;
        if (!(t->identity = strdup(identity))) s = nomem();
        ork_textcond_shape(tc, &t->T, &t->ctx, &t->vdim);
        t->unmasked = ork_textcond_unmasked(tc);
        if (t->T != j->T || t->ctx != j->info.context_dim || (j->info.vec_dim > 0 && t->vdim != j->info.vec_dim))
            s = ORK_FAIL(ORK_E_CONFIG, "%s: the text encoders give txt (%d, %d) and vec (%d); the model takes (%d, %d) "
                         "and (%d)", ork_config_file(j->cfg), t->T, t->ctx, t->vdim, j->T, j->info.context_dim,
                         j->info.vec_dim);
        if (j->info.vec_dim <= 0) t->vdim = 0;
    }
    size_t nd = j->p->datasets.n;
    if (s == ORK_OK) {
        t->n_ds = (int)nd;
        t->n_img = calloc(nd ? nd : 1, sizeof *t->n_img);
        t->img = calloc(nd ? nd : 1, sizeof *t->img);
        t->drop = calloc(nd ? nd : 1, sizeof *t->drop);
        img_want = calloc(nd ? nd : 1, sizeof *img_want);
        drop_want = calloc(nd ? nd : 1, sizeof *drop_want);
        if (!t->n_img || !t->img || !t->drop || !img_want || !drop_want) s = nomem();
    }
    int **dop_want = NULL, *dop_drop_want = NULL; /* DOP's class prompts (train/dop.h) */
    if (s == ORK_OK && j->p->train.diff_output_preservation) {
        dop_want = calloc(nd ? nd : 1, sizeof *dop_want);
        dop_drop_want = calloc(nd ? nd : 1, sizeof *dop_drop_want);
        t->dop_img = calloc(nd ? nd : 1, sizeof *t->dop_img);
        t->dop_drop = calloc(nd ? nd : 1, sizeof *t->dop_drop);
        if (!dop_want || !dop_drop_want || !t->dop_img || !t->dop_drop) s = nomem();
    }
    if (s == ORK_OK) s = gather_datasets(j, identity, &w, t, img_want, drop_want, dop_want, dop_drop_want);
    if (s == ORK_OK) s = gather_samples(j, identity, &w, &samp, &n_samp);
    /* held in memory whatever the cache holds: the dropout captions (any micro-batch may take them),
     * DOP's class prompts and the sample prompts (copied into the samples below) */
    if (s == ORK_OK && !(keep = calloc((size_t)w.n + 1, 1))) s = nomem();
    for (size_t d = 0; s == ORK_OK && d < nd; d++) {
        if (drop_want[d] >= 0) keep[drop_want[d]] = 1;
        if (dop_drop_want && dop_drop_want[d] >= 0) keep[dop_drop_want[d]] = 1;
        for (size_t i = 0; dop_want && dop_want[d] && i < t->n_img[d]; i++) keep[dop_want[d][i]] = 1;
    }
    for (int i = 0; s == ORK_OK && i < n_samp; i++) keep[samp[i]] = 1;
    if (s == ORK_OK) s = fill(j, tc, identity, &w, keep, t);
    if (s == ORK_OK && !(t->uses = calloc((size_t)t->n + 1, sizeof *t->uses))) s = nomem();
    for (size_t d = 0; s == ORK_OK && d < nd; d++) { /* want indices -> embedding indices */
        if (!(t->img[d] = malloc((t->n_img[d] ? t->n_img[d] : 1) * sizeof **t->img))) { s = nomem(); break; }
        for (size_t i = 0; i < t->n_img[d]; i++) {
            t->img[d][i] = img_want[d][i] < 0 ? -1 : w.v[img_want[d][i]].emb;
            if (t->img[d][i] >= 0 && !t->file[t->img[d][i]]) t->uses[t->img[d][i]]++; /* held: handed to items */
        }
        t->drop[d] = drop_want[d] < 0 ? -1 : w.v[drop_want[d]].emb;
        if (t->drop[d] >= 0) t->uses[t->drop[d]]++; /* kept for the whole run */
        if (!dop_want) continue;
        if (!(t->dop_img[d] = malloc((t->n_img[d] ? t->n_img[d] : 1) * sizeof **t->dop_img))) { s = nomem(); break; }
        for (size_t i = 0; i < t->n_img[d]; i++) t->uses[t->dop_img[d][i] = w.v[dop_want[d][i]].emb]++; /* kept */
        t->dop_drop[d] = dop_drop_want[d] < 0 ? -1 : w.v[dop_drop_want[d]].emb;
        if (t->dop_drop[d] >= 0) t->uses[t->dop_drop[d]]++;
    }
    for (int i = 0; s == ORK_OK && i < n_samp; i++) {
        int e = w.v[samp[i]].emb;
        s = ork_samples_text_set_len(j->samples, i, t->txt[e], t->vdim ? t->vec[e] : NULL, t->len[e]);
    }
    for (int e = 0; s == ORK_OK && e < t->n; e++) /* the prompts' rows: copied into the samples */
        if (!t->uses[e]) free(t->txt[e]), free(t->vec[e]), t->txt[e] = t->vec[e] = NULL;
    for (size_t d = 0; img_want && d < nd; d++) free(img_want[d]);
    for (size_t d = 0; dop_want && d < nd; d++) free(dop_want[d]);
    free(dop_want), free(dop_drop_want);
    free(img_want), free(drop_want), free(samp), free(keep);
    wants_free(&w);
    ork_textcond_close(tc);
    return s;
}

/* ---- use ------------------------------------------------------------------- */

static uint64_t ref_hash(int ds, const char *path) {
    return ork_fnv1a64(path, strlen(path), ORK_FNV1A64_INIT) ^ (uint64_t)(ds + 1) * 0x9e3779b97f4a7c15ULL;
}

/* Image (ds, path) reads embedding e from its file (the table grows at half full). */
static ork_status map_add(ork_train_text *t, int ds, const char *path, int e) {
    if (2 * (t->map_n + 1) > t->map_cap) {
        int cap = t->map_cap ? 2 * t->map_cap : 1024;
        img_ref *m = calloc((size_t)cap, sizeof *m);
        if (!m) return nomem();
        for (int i = 0; i < t->map_cap; i++) {
            if (!t->map[i].path) continue;
            uint64_t q = ref_hash(t->map[i].ds, t->map[i].path) & (uint64_t)(cap - 1);
            while (m[q].path) q = (q + 1) & (uint64_t)(cap - 1);
            m[q] = t->map[i];
        }
        free(t->map);
        t->map = m;
        t->map_cap = cap;
    }
    uint64_t q = ref_hash(ds, path) & (uint64_t)(t->map_cap - 1);
    for (; t->map[q].path; q = (q + 1) & (uint64_t)(t->map_cap - 1))
        if (t->map[q].ds == ds && !strcmp(t->map[q].path, path)) {
            t->map[q].e = e;
            return ORK_OK;
        }
    t->map[q] = (img_ref){path, ds, e};
    t->map_n++;
    return ORK_OK;
}

static int map_find(const ork_train_text *t, int ds, const char *path) {
    if (!t->map_n) return -1;
    uint64_t q = ref_hash(ds, path) & (uint64_t)(t->map_cap - 1);
    for (; t->map[q].path; q = (q + 1) & (uint64_t)(t->map_cap - 1))
        if (t->map[q].ds == ds && !strcmp(t->map[q].path, path)) return t->map[q].e;
    return -1;
}

ork_status ork_train_text_read(const job *j, const item *it, float *txt, float *vec, int *got, int *len) {
    *got = 0;
    *len = j->T;
    const ork_train_text *t = j->text;
    int e = t && it->path ? map_find(t, it->ds, it->path) : -1;
    if (e < 0) return ORK_OK;
    char why[1024];
    ork_log_hold_begin();
    ork_status s = t->unmasked ? ork_text_cache_load_len(t->file[e], t->identity, t->T, t->ctx, t->vdim, t->caption[e],
                                                         txt, t->vdim ? vec : NULL, len)
                               : ork_text_cache_load(t->file[e], t->identity, t->T, t->ctx, t->vdim, t->caption[e],
                                                     txt, t->vdim ? vec : NULL);
    ork_log_hold_end(why, sizeof why);
    if (s != ORK_OK)
        return ORK_FAIL(s == ORK_E_NOMEM ? s : ORK_E_IO, "%s: the text embedding of %s cannot be read back (%s): "
                        "the text cache changed during the run; run again to encode it anew", t->file[e], it->path,
                        why[0] ? why : ork_status_str(s));
    *got = 1;
    return ORK_OK;
}

ork_status ork_train_text_item(job *j, int ds, size_t i, item *it) {
    ork_train_text *t = j->text;
    it->dop = t && t->dop_img && ds < t->n_ds && i < t->n_img[ds] && t->dop_img[ds] ? t->dop_img[ds][i] : -1;
    if (!t || it->txt || ds >= t->n_ds || i >= t->n_img[ds] || t->img[ds][i] < 0) return ORK_OK;
    int e = t->img[ds][i];
    if (!t->txt[e] && !t->file[e]) return ORK_OK;
    j->have_enc++;
    it->txt_len = t->len[e];
    if (t->file[e]) return map_add(t, ds, it->path, e); /* read when a micro-batch takes it */
    if (--t->uses[e] == 0) { /* the last image of this caption takes the arrays */
        it->txt = t->txt[e], it->vec = t->vec[e];
        t->txt[e] = t->vec[e] = NULL;
        return ORK_OK;
    }
    if (!(it->txt = malloc((size_t)t->T * t->ctx * sizeof *it->txt))) return nomem();
    memcpy(it->txt, t->txt[e], (size_t)t->T * t->ctx * sizeof *it->txt);
    if (t->vdim && t->vec[e]) {
        if (!(it->vec = malloc((size_t)t->vdim * sizeof *it->vec))) return nomem();
        memcpy(it->vec, t->vec[e], (size_t)t->vdim * sizeof *it->vec);
    }
    return ORK_OK;
}

int ork_train_caption_dropped(uint64_t seed, int64_t k, int slot, double rate) {
    if (!(rate > 0)) return 0;
    ork_rng r;
    ork_rng_init(&r, seed, ORK_RNG_CAPTION);
    ork_rng_seek(&r, ((uint64_t)k << 16) + (uint64_t)slot);
    return ork_rng_uniform(&r) < rate;
}

int ork_train_text_dop(const job *j, const item *it, int dropped, const float **txt, const float **vec, int *len) {
    const ork_train_text *t = j->text;
    if (!t || !t->dop_img || it->ds < 0 || it->ds >= t->n_ds) return 0;
    int e = dropped ? t->dop_drop[it->ds] : it->dop;
    if (e < 0 || !t->txt[e]) return 0;
    *txt = t->txt[e];
    *vec = t->vdim ? t->vec[e] : NULL;
    *len = t->len[e];
    return 1;
}

int ork_train_text_drop(const job *j, int64_t k, int slot, const item *it, const float **txt, const float **vec,
                        int *len) {
    double rate = it->ds >= 0 && (size_t)it->ds < j->p->datasets.n ? j->p->datasets.v[it->ds].caption_dropout_rate : 0;
    if (!ork_train_caption_dropped(j->seed, k, slot, rate)) return 0;
    const ork_train_text *t = j->text;
    int e = t && it->ds < t->n_ds ? t->drop[it->ds] : -1;
    *txt = e >= 0 ? t->txt[e] : NULL;
    *vec = e >= 0 && t->vdim ? t->vec[e] : NULL;
    *len = e >= 0 ? t->len[e] : j->T;
    return 1;
}

/* ---- plan ------------------------------------------------------------------ */

ork_status ork_train_plan_text(job *j, FILE *out) {
    j->T = ork_train_text_len(j);
    if (!j->samples) ORK_TRY(ork_samples_create(j->cfg, &j->info, j->T, j->out_dir, j->name, &j->samples));
    ork_textcond_opts o;
    ork_textcond_opts_from_config(&j->p->model, &j->info, &o);
    ork_textcond *tc = NULL;
    if (!preset_without_encoders(j))
        ORK_TRY(ork_textcond_open(j->reg, &j->info, &o, &tc)); /* the pieces plan and run refuse alike */
    if (tc) ORK_TRY(refuse_unmasked(j, tc));
    if (!tc) {
        ork_tc_encode_plan_print(NULL, NULL, out);
        return ORK_OK;
    }
    ork_train_text t = {0};
    wants w = {.plan = 1};
    size_t nd = j->p->datasets.n;
    int **img_want = calloc(nd ? nd : 1, sizeof *img_want), *drop_want = calloc(nd ? nd : 1, sizeof *drop_want);
    int *samp = NULL, n_samp = 0;
    t.n_img = calloc(nd ? nd : 1, sizeof *t.n_img);
    ork_textcond_shape(tc, &t.T, &t.ctx, &t.vdim);
    const char *identity = ork_textcond_identity(tc);
    ork_status s = img_want && drop_want && t.n_img ? ORK_OK : nomem();
    if (s == ORK_OK) s = gather_datasets(j, identity, &w, &t, img_want, drop_want, NULL, NULL);
    if (s == ORK_OK) s = gather_samples(j, identity, &w, &samp, &n_samp);
    int cached = 0;
    for (int i = 0; s == ORK_OK && i < w.n; i++) { /* present; run checks each entry as it reads it */
        char path[1300];
        ork_text_cache_path(w.dirs[w.v[i].dir], w.v[i].key, path, sizeof path);
        cached += ork_path_access(path, 0);
    }
    if (s == ORK_OK) {
        fprintf(out, "text: %d captions (images, dropout captions, sample prompts): %d in the text cache, %d to encode\n",
                w.n, cached, w.n - cached);
        const char *dev = j->p->device ? j->p->device : "cuda:0";
        ork_backend pb = *ork_cpu_backend(); /* describe reads the device kind only */
        if (strncmp(dev, "cpu", 3)) pb.device = ORK_DEV_CUDA, pb.name = "cuda";
        size_t budget = j->p->model.vram_budget_gb > 0 ? (size_t)(j->p->model.vram_budget_gb * 1073741824.0) : 0;
        ork_tc_encode_plan ep;
        if (w.n > cached) s = ork_tc_encode_plan_make(tc, &pb, budget, w.n - cached, &ep);
        if (w.n > cached && s == ORK_OK) {
            ork_tc_encode_plan_print(tc, &ep, out);
            fflush(out); /* the plan before a refusal line on stderr */
            s = ork_tc_encode_plan_check_host(&ep, ork_train_host_available(), ork_config_file(j->cfg));
        }
    }
    for (size_t d = 0; img_want && d < nd; d++) free(img_want[d]);
    free(img_want), free(drop_want), free(samp), free(t.n_img);
    wants_free(&w);
    ork_textcond_close(tc);
    return s;
}
