/* text/cond_run.c — the text conditioner's encode: tokenize the captions,
 * then per encoder (one after the other, each within the whole budget) make
 * an allocator, a no-grad graph and a weight store of its own, run
 *   RESIDENT:    every weight loaded once; captions in chunks, each chunk
 *                through begin + every block + end, the arena reset at
 *                every block (the carry kept apart in between, as
 *                layer-major's on the device): a chunk's activations are
 *                one block's, what the plan counts;
 *   LAYER-MAJOR: for block k: load block k's weights (a store holding only
 *                them, filled through a sink that passes only their puts),
 *                push every chunk's carry (kept between blocks) through
 *                block k, free the weights; then block k+1.
 *   LAYER-MAJOR THROUGH THE STREAMER (ork_tc_lm_streamer: the weights fit the
 *                host allowance and a second block the budget): one store of
 *                every block streamed (train/wstore.h, stream/streamer.h, as
 *                the denoiser's streamed blocks): the plugin's load puts each
 *                weight once, straight into its block's pinned host region
 *                (quantize_te: quantized there on all cores, fp8 on the
 *                link), then one streamer pass per weight pass over two
 *                device slots — block k+1 crosses the link while every chunk
 *                runs block k. The store lives until the runner closes (each
 *                group of captions is one more pass, no more reads).
 * and free all of it before the next encoder. Both paths run the same ops on
 * the same chunks: their embeddings are bit-identical.
 * Layer-major keeps every caption's carry on the device when they fit (the
 * plan takes a smaller chunk, 16 or more, to make them fit), else on the host
 * in pinned buffers reused from block to block: captions are then taken in
 * groups whose carries fit ORAKUL_TEXT_HOST_GIB (8 by default), one weight
 * pass per group. Carry slots that stay the same across chunks (T5's position
 * bias) are kept once and uploaded once per block as a persistent tensor.
 * The graph's arena is sized up front from the plan (one piece), and the time
 * is split into loading the weights and encoding (ork_textcond_stats).
 * Layer-major reads the checkpoint once per weight pass, not once per block:
 * the plugin's load puts every weight (assembling q|k|v and gate|up of every
 * layer as it goes), so while block k's load passes, the weights of the
 * blocks after it are kept on the host (wcache: as put, in the put's dtype),
 * up to ORAKUL_TEXT_WCACHE_GIB (default: three quarters of the host's
 * available memory above 8 GiB; 0: none), and those blocks are put from
 * there; a block past the limit reads the file again.
 * A conditioner of one encoder hands each chunk's embeddings to encode_each's
 * callback as the last block gives them (emit): no group of embeddings is
 * held, so every caption shares one weight pass (issue #29 point 4).
 * Every device byte of an encoder is given back when its runner closes:
 * bytes its allocator still holds then are an error (ork_tc_release_check).
 * Owns, per call: the tokens, the host carries, the weight cache, the device
 * objects. */
#include "text/cond_internal.h"

#include "platform/platform.h"
#include "stream/copy_engine.h"
#include "text/cond_plan.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "text/prompt_format.h"
#include "text/tokenizer.h"
#include "train/wstore.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static double now_s(void) { return 1e-9 * (double)ork_time_ns(); }

void ork_text_embed_free(ork_text_embed *e) {
    if (!e) return;
    free(e->txt);
    free(e->vec);
    free(e->len);
    memset(e, 0, sizeof *e);
}

/* ---- a sink that passes only one block's weights ------------------------- */

/* Weights of later blocks kept on the host while one block's load passes. */
enum { WC_NONE, WC_PUT, WC_QUANT, WC_RANDOM };
typedef struct wc_ent {
    int kind;
    ork_dtype dt;
    void *data;
    float *scales;
    int qblock;
    float sd;
    uint64_t seed;
    size_t bytes;
} wc_ent;

typedef struct wcache {
    wc_ent *e;           /* [n_weights] of the encoder */
    size_t used, limit;
    int stop;            /* this load: blocks >= stop are not kept (the limit) */
    int loads;           /* the plugin's load calls (reads of the checkpoint) */
} wcache;

typedef struct fsink {
    ork_weight_sink s;
    const ork_weight_sink *inner;
    const ork_text_encoder_info *info;
    int block;
    wcache *wc;          /* or NULL: the other blocks' weights are dropped */
} fsink;

static int decl_of(const ork_text_encoder_info *in, const char *name) {
    for (int i = 0; i < in->n_weights; i++)
        if (!strcmp(in->weights[i].name, name)) return i;
    return -1;
}

static int64_t decl_numel(const ork_weight_decl *d) {
    int64_t n = 1;
    for (int k = 0; k < d->ndim; k++) n *= d->shape[k];
    return n;
}

static void wc_free_ent(wcache *w, wc_ent *e) {
    free(e->data);
    free(e->scales);
    w->used -= e->bytes;
    memset(e, 0, sizeof *e);
}

/* Forget the kept weights of blocks >= b: they will be read again. */
static void wc_stop_at(wcache *w, const ork_text_encoder_info *in, int b) {
    for (int i = 0; i < in->n_weights; i++)
        if (w->e[i].kind && in->weights[i].block >= b) wc_free_ent(w, &w->e[i]);
    if (b < w->stop) w->stop = b;
}

/* Keep weight i (a block after the one loading) when the limit allows. */
static ork_status wc_keep(const fsink *f, int i, int kind, ork_dtype dt, const void *data, const float *sc,
                          int qblock, float sd, uint64_t seed) {
    wcache *w = f->wc;
    if (!w || i < 0) return ORK_OK;
    const ork_weight_decl *d = &f->info->weights[i];
    int b = d->block;
    wc_ent *e = &w->e[i];
    if (b <= f->block || b >= w->stop || e->kind) return ORK_OK;
    int64_t n = decl_numel(d), rows = d->ndim == 2 ? d->shape[0] : 1, cols = d->ndim == 2 ? d->shape[1] : n;
    size_t db = kind == WC_RANDOM ? 0 : (size_t)n * ork_dtype_size(dt);
    size_t ns = kind == WC_QUANT ? (size_t)(qblock > 0 ? rows * ((cols + qblock - 1) / qblock) : rows) : 0;
    if (w->used + db + ns * sizeof(float) > w->limit || (db && !(e->data = malloc(db))) ||
        (ns && !(e->scales = malloc(ns * sizeof(float))))) { /* no room: this block and later ones read again */
        free(e->data);
        e->data = NULL;
        wc_stop_at(w, f->info, b);
        return ORK_OK;
    }
    if (db) memcpy(e->data, data, db);
    if (ns) memcpy(e->scales, sc, ns * sizeof(float));
    e->kind = kind;
    e->dt = dt;
    e->qblock = qblock;
    e->sd = sd;
    e->seed = seed;
    e->bytes = db + ns * sizeof(float);
    w->used += e->bytes;
    return ORK_OK;
}

/* Every weight of block k kept (then it is put from the host, not read). */
static int wc_has(const wcache *w, const ork_text_encoder_info *in, int k) {
    if (!w) return 0;
    for (int i = 0; i < in->n_weights; i++)
        if (in->weights[i].block == k && !w->e[i].kind) return 0;
    return 1;
}

/* Block k's kept weights into sink, each freed once put. */
static ork_status wc_replay(wcache *w, const ork_text_encoder_info *in, int k, const ork_weight_sink *sink) {
    for (int i = 0; i < in->n_weights; i++) {
        wc_ent *e = &w->e[i];
        if (in->weights[i].block != k || !e->kind) continue;
        const char *nm = in->weights[i].name;
        ork_status st = e->kind == WC_PUT     ? sink->put(sink, nm, e->dt, e->data)
                        : e->kind == WC_QUANT ? sink->put_quantized(sink, nm, e->dt, e->data, e->scales, e->qblock)
                                              : sink->put_random(sink, nm, e->sd, e->seed);
        wc_free_ent(w, e);
        ORK_TRY(st);
    }
    return ORK_OK;
}

static void wc_close(wcache *w, const ork_text_encoder_info *in) {
    if (!w->e) return;
    for (int i = 0; i < in->n_weights; i++) wc_free_ent(w, &w->e[i]);
    free(w->e);
    memset(w, 0, sizeof *w);
}

/* The cache's limit: ORAKUL_TEXT_WCACHE_GIB, else 3/4 of the available host
 * memory above 8 GiB (the carries, the embeddings and the process beside it). */
size_t ork_tc_wcache_limit(void) {
    const char *v = getenv("ORAKUL_TEXT_WCACHE_GIB");
    if (v && *v) return atof(v) > 0 ? (size_t)(atof(v) * 1073741824.0) : 0;
    uint64_t avail = 0;
    const uint64_t reserve = (uint64_t)8 << 30;
    if (ork_mem_available(&avail) != ORK_OK || avail <= reserve) return 0;
    return (size_t)((avail - reserve) / 4 * 3);
}

static ork_status fs_put(const ork_weight_sink *s, const char *name, ork_dtype dt, const void *data) {
    const fsink *f = s->store;
    int i = decl_of(f->info, name);
    if (i >= 0 && f->info->weights[i].block == f->block) return f->inner->put(f->inner, name, dt, data);
    return wc_keep(f, i, WC_PUT, dt, data, NULL, 0, 0, 0);
}
static ork_status fs_putq(const ork_weight_sink *s, const char *name, ork_dtype qdt, const void *q, const float *sc,
                          int block) {
    const fsink *f = s->store;
    int i = decl_of(f->info, name);
    if (i >= 0 && f->info->weights[i].block == f->block)
        return f->inner->put_quantized(f->inner, name, qdt, q, sc, block);
    return wc_keep(f, i, WC_QUANT, qdt, q, sc, block, 0, 0);
}
static ork_status fs_putr(const ork_weight_sink *s, const char *name, float sd, uint64_t seed) {
    const fsink *f = s->store;
    int i = decl_of(f->info, name);
    if (i >= 0 && f->info->weights[i].block == f->block) return f->inner->put_random(f->inner, name, sd, seed);
    return wc_keep(f, i, WC_RANDOM, ORK_F32, NULL, NULL, 0, sd, seed);
}

/* ---- the device side of one encoder --------------------------------------- */

typedef struct runner {
    tc_slot *t;
    const ork_backend *be;
    const ork_tensor_api *ta;
    ork_dtype act;
    ork_alloc *a;
    ork_graph *g;
    const ork_quant_vtable *qvt;
    void *q;
    ork_wstore_quant wq;
    ork_model_info mi;        /* the store's declarations: all, or block k's */
    ork_weight_decl *decls;   /* block k's (layer-major) */
    ork_wstore *ws;
    double load_s;            /* seconds in store_load (weights to the device), summed */
    wcache *wc;               /* layer-major: later blocks' weights kept on the host, or NULL */
    int file_loads;           /* the plugin's load calls (reads of the checkpoint), summed */
    const struct emit_to *em; /* encode_each of one encoder: each chunk's rows to its callback, or NULL */
    float *etxt, *evec;       /* ... through these (one chunk's rows) */
    int emit_g0;              /* ... the group's first caption */
    const int32_t *cmask;     /* the group's padding masks (n, L): an UNMASKED slot keeps their rows */
    int streamer;             /* layer-major through the block streamer (ork_tc_lm_streamer) */
    ork_copy_engine *ce;      /* ... its copy engine (made with the store) */
    uint8_t *streamed;        /* ... [n_blocks] all 1 */
} runner;

/* encode_each's callback for a conditioner of one encoder (run_slot's emit). */
typedef struct emit_to {
    ork_text_embed_fn fn;
    void *user;
} emit_to;

static void store_free(runner *r) {
    if (r->ws) ork_wstore_destroy(r->ws);
    r->ws = NULL;
}

/* A store of the encoder's weights of block `block` (-1: all; STORE_STREAMED:
 * all, every block streamed through two device slots from its pinned host
 * region, where the plugin's load puts each weight once), loaded. */
#define STORE_STREAMED (-2)
static ork_status store_load_(runner *r, int block);
static ork_status store_load(runner *r, int block) {
    double t0 = now_s();
    ork_status st = store_load_(r, block);
    r->load_s += now_s() - t0;
    return st;
}
static ork_status store_load_(runner *r, int block) {
    const ork_text_encoder_info *in = &r->t->info;
    memset(&r->mi, 0, sizeof r->mi);
    r->mi.abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    r->mi.family = in->family;
    r->mi.variant = in->variant;
    r->mi.n_blocks = in->n_blocks;
    r->mi.block_names = in->block_names;
    if (block < 0) {
        r->mi.n_weights = in->n_weights;
        r->mi.weights = in->weights;
    } else {
        int k = 0;
        for (int i = 0; i < in->n_weights; i++)
            if (in->weights[i].block == block) r->decls[k++] = in->weights[i];
        r->mi.n_weights = k;
        r->mi.weights = r->decls;
    }
    const int slots = 2;
    ork_wstore_stream so = {NULL, NULL, slots, 0, 0};
    if (block == STORE_STREAMED) {
        if (!r->streamed && !(r->streamed = malloc((size_t)in->n_blocks))) return ORK_E_NOMEM;
        memset(r->streamed, 1, (size_t)in->n_blocks);
        if (!r->ce) ORK_TRY(ork_copy_engine_create(r->be, &r->g->k, ork_streamer_n_events(slots), &r->ce));
        so.ce = r->ce;
        so.streamed = r->streamed;
    }
    ORK_TRY(ork_wstore_create_quant(r->a, r->be, &r->g->k, &r->mi, r->act, so.ce ? &so : NULL, r->q ? &r->wq : NULL,
                                    &r->ws));
    const ork_weight_sink *sink = ork_wstore_sink(r->ws);
    if (block >= 0 && wc_has(r->wc, in, block)) { /* kept while an earlier block's load passed */
        ORK_TRY(wc_replay(r->wc, in, block, sink));
    } else {
        fsink f = {{ORK_ABI_INIT(ork_weight_sink), NULL, fs_put, fs_putq, fs_putr}, sink, in, block, r->wc};
        f.s.store = &f;
        if (r->wc) r->wc->stop = in->n_blocks;
        r->file_loads++;
        ORK_TRY(r->t->vt->load(r->t->self, block < 0 ? sink : &f.s));
    }
    ORK_TRY(ork_wstore_check_complete(r->ws));
    if (ork_wstore_streamer(r->ws)) ORK_TRY(ork_streamer_seal(ork_wstore_streamer(r->ws)));
    ork_wstore_attach(r->ws, r->g);
    return ORK_OK;
}

/* t's values as F32 into host: a BF16 output widened on the device first
 * (exact), then one copy; to_host would widen element by element on one
 * host thread (a chunk of 64 T5 captions: 134M values). */
static ork_status to_host_f32(runner *r, ork_tensor *t, float *host) {
    if (r->ta->dtype(t) == ORK_F32 || !r->be->axpby) return r->ta->to_host(r->g, t, ORK_F32, host);
    int nd = r->ta->ndim(t);
    int64_t sh[ORK_MAX_DIMS];
    for (int d = 0; d < nd; d++) sh[d] = r->ta->dim(t, d);
    ork_tensor *f;
    ORK_TRY(r->ta->empty(r->g, ORK_F32, nd, sh, &f));
    ork_status st = r->be->axpby(&r->g->k, r->ta->numel(t), 1.0f, ork_tensor_data(t), r->ta->dtype(t), 0.0f,
                                 ork_tensor_data(f), ORK_F32);
    if (st == ORK_OK) st = r->ta->to_host(r->g, f, ORK_F32, host);
    if (ork_tensor_api_has_drop(r->ta)) r->ta->drop(r->g, f);
    return st;
}

/* An UNMASKED slot: each of the B captions' rows (L, D) at txt keeps the rows
 * its mask (B, L) marks, in order, moved to the front; the rest zeroed; the
 * count into len[i] (len may be NULL). */
static void keep_unmasked(float *txt, int B, int L, int D, const int32_t *mask, int *len) {
    for (int i = 0; i < B; i++) {
        float *x = txt + (size_t)i * L * D;
        const int32_t *m = mask + (size_t)i * L;
        int k = 0;
        for (int j = 0; j < L; j++) {
            if (!m[j]) continue;
            if (k != j) memmove(x + (size_t)k * D, x + (size_t)j * D, (size_t)D * sizeof *x);
            k++;
        }
        memset(x + (size_t)k * D, 0, (size_t)(L - k) * D * sizeof *x);
        if (len) len[i] = k;
    }
}

/* hidden (B, L, D) and pooled (B, P) of chunk [c0, c0 + B) into out. */
static ork_status copy_out(runner *r, const ork_text_encoder_outputs *o, int c0, int B, ork_text_embed *out) {
    const tc_slot *t = r->t;
    if (r->em) { /* one encoder: the chunk's rows into the chunk buffers, then each caption to the callback */
        const emit_to *em = r->em;
        ork_text_embed ch = *out;
        ch.txt = r->etxt;
        ch.vec = r->evec;
        ch.len = NULL;
        r->em = NULL;
        const int32_t *gm = r->cmask;
        if (gm) r->cmask = gm + (size_t)c0 * t->L; /* the chunk's masks at the buffers' row 0 */
        ork_status st = copy_out(r, o, 0, B, &ch);
        r->cmask = gm;
        r->em = em;
        for (int i = 0; i < B && st == ORK_OK; i++)
            st = em->fn(em->user, r->emit_g0 + c0 + i, ch.txt ? ch.txt + (size_t)i * ch.T * ch.ctx_dim : NULL,
                        ch.vec ? ch.vec + (size_t)i * ch.vec_dim : NULL);
        return st;
    }
    if (t->feeds & ORK_TEXT_FEEDS_TXT) {
        if (!o->hidden || r->ta->numel(o->hidden) != (int64_t)B * out->T * out->ctx_dim)
            return ORK_FAIL(ORK_E_INTERNAL, "text encoder %s: hidden output is not (%d, %d, %d)", t->s.encoder, B,
                            out->T, out->ctx_dim);
        ORK_TRY(to_host_f32(r, o->hidden, out->txt + (size_t)c0 * out->T * out->ctx_dim));
        if ((t->s.flags & ORK_TEXT_SLOT_UNMASKED) && r->cmask)
            keep_unmasked(out->txt + (size_t)c0 * out->T * out->ctx_dim, B, out->T, out->ctx_dim,
                          r->cmask + (size_t)c0 * t->L, out->len ? out->len + c0 : NULL);
    }
    if (t->feeds & ORK_TEXT_FEEDS_VEC) {
        if (!o->pooled || r->ta->numel(o->pooled) != (int64_t)B * out->vec_dim)
            return ORK_FAIL(ORK_E_INTERNAL, "text encoder %s: pooled output is not (%d, %d)", t->s.encoder, B,
                            out->vec_dim);
        ORK_TRY(to_host_f32(r, o->pooled, out->vec + (size_t)c0 * out->vec_dim));
    }
    return ORK_OK;
}

static ork_text_encoder_inputs inputs_of(const tc_slot *t, const int32_t *ids, const int32_t *mask, int c0, int B) {
    ork_text_encoder_inputs in = {ORK_ABI_INIT(ork_text_encoder_inputs), B, t->L, ids + (size_t)c0 * t->L,
                                  t->use_mask ? mask + (size_t)c0 * t->L : NULL};
    return in;
}

/* ---- layer-major: every chunk's carry kept between blocks ----------------- */

/* A carry slot of one chunk between blocks: on the device (keep, an
 * allocation of the encode's allocator, tag "text carry") or on the host
 * (data). owner 0: the storage is chunk 0's (a slot every chunk shares). */
typedef struct hslot {
    ork_dtype dt;
    int ndim;
    int64_t shape[ORK_MAX_DIMS];
    size_t bytes;
    void *data;
    ork_tensor *keep;
    int owner;
    ork_tensor *dev; /* the tensor the chunk's carry used for it this block */
} hslot;

typedef struct hcarry {
    int n;
    hslot s[ORK_CARRY_MAX];
} hcarry;

/* Every host carry buffer of a layer-major encode: given back at the end of
 * a block and taken again, by size, for the next block's carries (fresh
 * malloc'd ones would fault every page in again: n captions · L·D per block),
 * pinned on CUDA (the copies down and up at every block at full speed; an
 * upload from pinned memory is asynchronous, and the buffer is written next
 * by a download on the same stream, after it). Freed all at once at the end. */
typedef struct hbuf {
    void *p;
    size_t sz;
    int pinned, avail;
} hbuf;

typedef struct hpool {
    const ork_backend *be; /* host_alloc for pinned buffers, or NULL: malloc */
    hbuf *b;
    int n, cap;
} hpool;

static void *hpool_get(hpool *hp, size_t bytes) {
    for (int i = hp->n - 1; i >= 0; i--)
        if (hp->b[i].avail && hp->b[i].sz == bytes) {
            hp->b[i].avail = 0;
            return hp->b[i].p;
        }
    if (hp->n == hp->cap) {
        int cap = hp->cap ? 2 * hp->cap : 64;
        hbuf *nb = realloc(hp->b, (size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        hp->b = nb;
        hp->cap = cap;
    }
    hbuf *b = &hp->b[hp->n];
    memset(b, 0, sizeof *b);
    b->sz = bytes;
    if (hp->be && hp->be->host_alloc && hp->be->host_alloc(bytes ? bytes : 1, &b->p) == ORK_OK && b->p) b->pinned = 1;
    else if (!(b->p = malloc(bytes ? bytes : 1))) return NULL;
    hp->n++;
    return b->p;
}

static void hpool_put(hpool *hp, void *q) {
    for (int i = 0; q && i < hp->n; i++)
        if (hp->b[i].p == q) {
            hp->b[i].avail = 1;
            return;
        }
}

static void hpool_free(hpool *hp) {
    for (int i = 0; i < hp->n; i++) {
        if (hp->b[i].pinned) hp->be->host_free(hp->b[i].p);
        else free(hp->b[i].p);
    }
    free(hp->b);
    memset(hp, 0, sizeof *hp);
}

static void hcarry_free(hcarry *h, hpool *hp) {
    for (int i = 0; i < ORK_CARRY_MAX; i++)
        if (h->s[i].owner) {
            hpool_put(hp, h->s[i].data);
            if (h->s[i].keep) ork_tensor_free(h->s[i].keep);
        }
    memset(h, 0, sizeof *h);
}

static int slot_set(const hslot *s) { return s->data || s->keep; }
static int same_shape(const hslot *a, const hslot *b) {
    return a->dt == b->dt && a->bytes == b->bytes && a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof a->shape);
}

typedef struct lm_state {
    int on_device;                 /* carries on the device (else the host) */
    hpool pool;                    /* host carry buffers to reuse */
    int share[ORK_CARRY_MAX];      /* this block: -1 not yet known, 1 a batch-1 slot equal across chunks, 0 not */
} lm_state;

/* Is device tensor x (a batch-1 slot of chunk ci > 0) the same bytes as chunk
 * 0's z? Decided once per slot and block, on the host. */
static ork_status same_bytes(runner *r, ork_tensor *x, const hslot *z, int *eq) {
    void *a = malloc(z->bytes ? z->bytes : 1), *b = malloc(z->bytes ? z->bytes : 1);
    ork_status st = a && b ? ORK_OK : ORK_E_NOMEM;
    if (st == ORK_OK) st = r->ta->to_host(r->g, x, z->dt, a);
    if (st == ORK_OK) st = r->ta->to_host(r->g, z->keep, z->dt, b);
    *eq = st == ORK_OK && !memcmp(a, b, z->bytes);
    free(a);
    free(b);
    return st;
}

/* Save carry c of chunk ci (B captions) into nw[ci]. A slot the block left as
 * it was takes old[ci]'s storage over; a slot equal to chunk 0's shares it
 * (host: the bytes compared; device: a slot of batch 1 in a chunk of B > 1,
 * compared once per block). Chunks go in order: nw[0] is complete first. */
static ork_status save_carry(runner *r, lm_state *ls, const ork_carry *c, hcarry *old, hcarry *nw, int ci, int B) {
    hcarry *h = &nw[ci];
    h->n = c->n;
    for (int i = 0; i < c->n && i < ORK_CARRY_MAX; i++) {
        ork_tensor *x = c->t[i];
        hslot *s = &h->s[i];
        if (!x) continue;
        hslot *o = old ? &old[ci].s[i] : NULL;
        if (o && slot_set(o) && o->dev == x) { /* unchanged by the block */
            if (o->owner) {
                *s = *o;
                o->owner = 0;
                s->dev = NULL;
                continue;
            }
            const hslot *z0 = &nw[0].s[i], *o0 = &old[0].s[i];
            if (slot_set(z0) && z0->data == o0->data && z0->keep == o0->keep) { /* chunk 0's, moved already */
                *s = *o;
                s->dev = NULL;
                continue;
            }
        }
        memset(s, 0, sizeof *s);
        s->dt = r->ta->dtype(x);
        s->ndim = r->ta->ndim(x);
        for (int d = 0; d < s->ndim; d++) s->shape[d] = r->ta->dim(x, d);
        s->bytes = (size_t)r->ta->numel(x) * ork_dtype_size(s->dt);
        const hslot *z = &nw[0].s[i];
        if (ls->on_device) {
            if (ci > 0 && z->keep && same_shape(z, s) && s->ndim > 0 && s->shape[0] == 1 && B > 1) {
                if (ls->share[i] < 0) ORK_TRY(same_bytes(r, x, z, &ls->share[i]));
                if (ls->share[i] == 1) {
                    s->keep = z->keep;
                    continue;
                }
            }
            ORK_TRY(ork_tensor_new(r->a, "text carry", s->dt, s->ndim, s->shape, 0, &s->keep));
            s->owner = 1;
            ORK_TRY(r->be->memcpy_d2d(&r->g->k, ork_tensor_data(s->keep), ork_tensor_data(x), s->bytes));
            continue;
        }
        if (!(s->data = hpool_get(&ls->pool, s->bytes))) return ORK_E_NOMEM;
        s->owner = 1;
        ORK_TRY(r->ta->to_host(r->g, x, s->dt, s->data));
        if (ci > 0 && z->data && same_shape(z, s) && !memcmp(z->data, s->data, s->bytes)) {
            hpool_put(&ls->pool, s->data); /* the same bytes as chunk 0's (a bias shared by every caption) */
            s->data = z->data;
            s->owner = 0;
        }
    }
    return ORK_OK;
}

/* The carry of chunk ci (h = &old[ci]) for the next block. Device slots are
 * used as they are; host slots are uploaded, those shared with chunk 0 once
 * per block (shared[i], a persistent tensor). */
static ork_status restore_carry(runner *r, hcarry *h, int ci, ork_tensor **shared, ork_carry *c) {
    memset(c, 0, sizeof *c);
    c->n = h->n;
    for (int i = 0; i < h->n && i < ORK_CARRY_MAX; i++) {
        hslot *s = &h->s[i];
        s->dev = NULL;
        if (s->keep) {
            c->t[i] = s->dev = s->keep;
            continue;
        }
        if (!s->data) continue;
        if (shared[i] && (ci == 0 || !s->owner)) {
            c->t[i] = s->dev = shared[i];
            continue;
        }
        ORK_TRY(r->ta->from_host(r->g, s->dt, s->ndim, s->shape, s->data, &c->t[i]));
        s->dev = c->t[i];
    }
    return ORK_OK;
}

/* Block k of chunk ci (captions [c0, c0 + B)) in a fresh arena: its carry
 * from begin (k 0) or old[ci], then the block, then the outputs into out (the
 * last block) or the carry saved into nw[ci]. */
static ork_status run_block(runner *r, lm_state *ls, const int32_t *ids, const int32_t *mask, int k, int c0, int B,
                            int ci, hcarry *old, hcarry *nw, ork_tensor **shared, ork_text_embed *out) {
    tc_slot *t = r->t;
    ORK_TRY(ork_graph_reset(r->g));
    ork_carry c;
    if (k == 0) {
        ork_text_encoder_inputs in = inputs_of(t, ids, mask, c0, B);
        ORK_TRY(t->vt->begin(t->self, r->g, &in, &c));
    } else {
        ORK_TRY(restore_carry(r, &old[ci], ci, shared, &c));
    }
    ORK_TRY(t->vt->block(t->self, r->g, k, &c));
    if (k == t->info.n_blocks - 1) {
        ork_text_encoder_outputs o;
        ORK_TRY(t->vt->end(t->self, r->g, &c, &o));
        return copy_out(r, &o, c0, B, out);
    }
    return save_carry(r, ls, &c, k > 0 ? old : NULL, nw, ci, B);
}

static ork_status run_layer_major(runner *r, int on_device, const int32_t *ids, const int32_t *mask, int n,
                                  int chunk, ork_text_embed *out) {
    tc_slot *t = r->t;
    int nb = t->info.n_blocks, nch = (n + chunk - 1) / chunk;
    hcarry *old = calloc((size_t)nch, sizeof *old), *nw = calloc((size_t)nch, sizeof *nw);
    ork_tensor *shared[ORK_CARRY_MAX] = {0};
    lm_state ls;
    memset(&ls, 0, sizeof ls);
    ls.on_device = on_device;
    ls.pool.be = r->be->device == ORK_DEV_CUDA ? r->be : NULL;
    ork_status st = old && nw ? ORK_OK : ORK_E_NOMEM;
    /* the streamer: every weight on the host once, one pass over the blocks per group */
    ork_block_hooks hk;
    memset(&hk, 0, sizeof hk);
    int *order = r->streamer ? malloc((size_t)nb * sizeof *order) : NULL;
    if (st == ORK_OK && r->streamer) {
        if (!order) st = ORK_E_NOMEM;
        for (int k = 0; order && k < nb; k++) order[k] = k;
        if (st == ORK_OK && !r->ws) st = store_load(r, STORE_STREAMED);
        if (st == ORK_OK) {
            ork_wstore_hooks(r->ws, &hk);
            st = hk.pass_begin(hk.ctx, order, nb);
        }
    }
    /* else later blocks' weights kept on the host while a block's load passes: one read of the checkpoint */
    wcache wc;
    memset(&wc, 0, sizeof wc);
    wc.limit = r->streamer ? 0 : ork_tc_wcache_limit();
    if (st == ORK_OK && wc.limit && nb > 1) {
        if (!(wc.e = calloc((size_t)(t->info.n_weights > 0 ? t->info.n_weights : 1), sizeof *wc.e))) st = ORK_E_NOMEM;
        r->wc = &wc;
    }
    for (int k = 0; k < nb && st == ORK_OK; k++) {
        for (int i = 0; i < ORK_CARRY_MAX; i++) ls.share[i] = -1;
        st = r->streamer ? hk.enter(hk.ctx, k) : store_load(r, k);
        /* host carries every chunk shares: one persistent upload for this block */
        for (int i = 0; i < ORK_CARRY_MAX && st == ORK_OK && k > 0 && !on_device; i++) {
            int any = 0;
            for (int ci = 1; ci < nch && !any; ci++) any = old[ci].s[i].data && !old[ci].s[i].owner;
            if (any && ork_tensor_api_has_persistent(r->ta)) {
                hslot *s = &old[0].s[i];
                st = r->ta->persistent(r->g, s->dt, s->ndim, s->shape, s->data, &shared[i]);
            }
        }
        for (int ci = 0; ci < nch && st == ORK_OK; ci++) {
            int c0 = ci * chunk, B = n - c0 < chunk ? n - c0 : chunk;
            st = run_block(r, &ls, ids, mask, k, c0, B, ci, old, nw, shared, out);
        }
        if (st == ORK_OK) st = ork_graph_reset(r->g);
        for (int i = 0; i < ORK_CARRY_MAX; i++) {
            if (shared[i]) r->ta->release(shared[i]);
            shared[i] = NULL;
        }
        if (!r->streamer) store_free(r);
        else if (st == ORK_OK) st = hk.leave(hk.ctx, k);
        /* the new carries become the old ones */
        for (int ci = 0; ci < nch && old; ci++) hcarry_free(&old[ci], &ls.pool);
        hcarry *tmp = old;
        old = nw;
        nw = tmp;
    }
    if (st == ORK_OK && r->streamer) st = hk.pass_end(hk.ctx);
    free(order);
    r->wc = NULL;
    wc_close(&wc, &t->info);
    for (int ci = 0; ci < nch && old; ci++) hcarry_free(&old[ci], &ls.pool);
    for (int ci = 0; ci < nch && nw; ci++) hcarry_free(&nw[ci], &ls.pool);
    if (ls.pool.n) r->be->sync(&r->g->k); /* no upload still reads a buffer */
    hpool_free(&ls.pool);
    free(old);
    free(nw);
    return st;
}

/* ---- resident: every weight loaded once, the captions in chunks ----------- */

/* Chunk by chunk, each through begin + every block + end. The arena is reset
 * at every block and the carry kept between blocks in device tensors of its
 * own (save_carry, as layer-major's on-device carries): what a block leaves
 * in the arena — tensors it cannot drop, such as one a view was made of (the
 * heads' reshape of q, k, v) — dies with the block instead of piling up over
 * all of them (24 T5-XXL blocks pinned 3 L·D per caption each: 24 GiB for 64
 * captions). The activations of a chunk are then those of one block, what
 * the plan counts. The same ops on the same chunks: the same bits. */
static ork_status run_resident(runner *r, const int32_t *ids, const int32_t *mask, int n, int chunk,
                               ork_text_embed *out, int keep) {
    tc_slot *t = r->t;
    if (!r->ws) ORK_TRY(store_load(r, -1));
    int nb = t->info.n_blocks;
    lm_state ls;
    memset(&ls, 0, sizeof ls);
    ls.on_device = 1;
    hcarry hc[2];
    memset(hc, 0, sizeof hc);
    ork_tensor *shared[ORK_CARRY_MAX] = {0};
    ork_status st = ORK_OK;
    for (int c0 = 0; c0 < n && st == ORK_OK; c0 += chunk) {
        int B = n - c0 < chunk ? n - c0 : chunk;
        hcarry *old = &hc[0], *nw = &hc[1];
        for (int k = 0; k < nb && st == ORK_OK; k++) {
            for (int i = 0; i < ORK_CARRY_MAX; i++) ls.share[i] = -1;
            st = run_block(r, &ls, ids, mask, k, c0, B, 0, old, nw, shared, out);
            hcarry_free(old, &ls.pool); /* slots nw took over are no longer old's to free */
            hcarry *tmp = old;
            old = nw;
            nw = tmp;
        }
        hcarry_free(&hc[0], &ls.pool);
        hcarry_free(&hc[1], &ls.pool);
    }
    if (st == ORK_OK) st = ork_graph_reset(r->g);
    hpool_free(&ls.pool);
    if (!keep) store_free(r);
    return st;
}

/* ---- one encoder over all captions ----------------------------------------- */

int ork_tc_prompt_template(const tc_slot *t, ork_prompt_template *out) {
    const ork_text_slot *s = &t->s;
    memset(out, 0, sizeof *out);
    out->kind = s->prompt_template;
    out->flags = s->prompt_flags;
    out->system_message = s->system_message;
    out->max_length = t->L;
    return s->prompt_template != ORK_TEMPLATE_PLAIN || s->prompt_flags != 0;
}

static ork_status tokenize(const tc_slot *t, int n, const char *const *captions, int32_t *ids, int32_t *mask) {
    for (int i = 0; i < n; i++) {
        const char *cap = captions[i] ? captions[i] : "";
        int32_t got = 0;
        ork_prompt_template tpl;
        if (ork_tc_prompt_template(t, &tpl))
            ORK_TRY(ork_prompt_encode_template(t->tok, &tpl, cap, strlen(cap), t->L, ids + (size_t)i * t->L,
                                               mask + (size_t)i * t->L, t->L, &got));
        else
            ORK_TRY(ork_tokenizer_encode(t->tok, cap, strlen(cap), t->L, ORK_TOK_TRUNCATE | ORK_TOK_PAD,
                                         ids + (size_t)i * t->L, mask + (size_t)i * t->L, t->L, &got));
        if (got != t->L)
            return ORK_FAIL(ORK_E_INTERNAL, "text encoder %s: caption %d gave %d tokens, not %d", t->s.encoder, i,
                            (int)got, t->L);
    }
    return ORK_OK;
}

ork_status ork_textcond_lengths(const ork_textcond *tc, int n, const char *const *captions, int *len) {
    if (!tc || n < 0 || (n > 0 && (!captions || !len)))
        return ORK_FAIL(ORK_E_INVALID, "text lengths: no conditioner, captions or lengths");
    const tc_slot *t = NULL;
    for (int i = 0; i < tc->n && !t; i++)
        if (tc->sl[i].feeds & ORK_TEXT_FEEDS_TXT) t = &tc->sl[i];
    if (!t || !tc->unmasked) {
        for (int i = 0; i < n; i++) len[i] = tc->T;
        return ORK_OK;
    }
    int32_t *ids = malloc((size_t)t->L * sizeof *ids), *mask = malloc((size_t)t->L * sizeof *mask);
    ork_status st = ids && mask ? ORK_OK : ORK_E_NOMEM;
    for (int i = 0; i < n && st == ORK_OK; i++) {
        st = tokenize(t, 1, captions + i, ids, mask);
        int k = 0;
        for (int j = 0; st == ORK_OK && j < t->L; j++) k += mask[j] != 0;
        len[i] = k;
    }
    free(ids);
    free(mask);
    return st;
}

/* Layer-major: where the carries wait between blocks, and how many captions
 * share one pass of the weights. On the device when a group of at least one
 * chunk fits beside the block and the chunk (budget 0: up to 16 GiB of
 * carries); else on the host, up to ORAKUL_TEXT_HOST_GIB (8) per group.
 * ORAKUL_TEXT_CARRY=host|device forces the place (tests). */
void ork_tc_lm_group(const tc_plan *p, size_t budget, int n, int *on_device, int *group) {
    size_t per = p->carry_per_caption ? p->carry_per_caption : 1, fit;
    const char *force = getenv("ORAKUL_TEXT_CARRY");
    size_t avail = !budget ? (size_t)16 << 30
                 : budget > p->peak ? budget - p->peak : 0; /* the peak counts the chunk's own carries */
    fit = avail / per;
    *on_device = fit >= (size_t)p->chunk;
    if (force && !strcmp(force, "host")) *on_device = 0;
    if (force && !strcmp(force, "device")) {
        *on_device = 1;
        if (fit < (size_t)p->chunk) fit = (size_t)p->chunk;
    }
    if (!*on_device) {
        double gib = 8;
        const char *hg = getenv("ORAKUL_TEXT_HOST_GIB");
        if (hg && atof(hg) > 0) gib = atof(hg);
        fit = (size_t)(gib * 1073741824.0) / per;
        if (fit < (size_t)p->chunk) fit = (size_t)p->chunk;
    }
    *group = (size_t)n > fit ? (int)(fit / (size_t)p->chunk * (size_t)p->chunk) : n;
}

/* The arena a plan sizes up front: the chunk's activations (the margin,
 * p->scratch, stays outside: what the estimate misses grows into it). */
static size_t tc_arena_bytes(const tc_plan *p) { return ork_tc_chunk_bytes(p, p->chunk); }

/* Frees the runner; the bytes its allocator still held once the weights, the
 * graph and the quantizer were gone (0: everything was given back). */
static size_t runner_close(runner *r) {
    store_free(r);
    if (r->ce) ork_copy_engine_destroy(r->ce); /* after the store: its pinned arenas are the engine's */
    free(r->streamed);
    if (r->g) ork_graph_destroy(r->g);
    if (r->q) r->qvt->destroy(r->q);
    size_t held = r->a ? ork_alloc_in_use(r->a, NULL) : 0;
    if (r->a) ork_alloc_destroy(r->a);
    free(r->decls);
    free(r->etxt);
    free(r->evec);
    memset(r, 0, sizeof *r);
    return held;
}

/* The device side of slot t: an allocator of budget bytes, a no-grad graph,
 * the quantizer; no weights yet. p (may be NULL): the plan, whose chunk's
 * activations size the graph's arena up front in one piece (an arena grown
 * on demand doubles: 1 + 2 + ... + 16 GiB of chunks for 16 GiB of use, and a
 * large request cannot span two chunks). */
static ork_status runner_open(ork_textcond *tc, tc_slot *t, const ork_backend *be, size_t budget, const tc_plan *p,
                              runner *r) {
    memset(r, 0, sizeof *r);
    r->t = t;
    r->be = be;
    r->ta = ork_tensor_api_table();
    r->act = ork_tc_act_dtype(be);
    r->decls = malloc((size_t)(t->info.n_weights > 0 ? t->info.n_weights : 1) * sizeof *r->decls);
    ork_status st = r->decls ? ORK_OK : ORK_E_NOMEM;
    if (st == ORK_OK) st = ork_alloc_create(be, budget, &r->a);
    if (st == ORK_OK) {
        ork_graph_opts go = {0};
        go.device_index = tc->o.device_index;
        go.act_dtype = r->act;
        go.arena_tag = "text encode";
        /* the arena before the weights: what the plan gave the activations (within
         * the budget with the weights); on the CPU the pages are touched only when used */
        if (p) go.arena_initial = tc_arena_bytes(p);
        st = ork_graph_create(be, r->a, &go, &r->g);
    }
    if (st == ORK_OK) {
        ork_graph_set_grad(r->g, 0);
        if (t->qpc) {
            r->qvt = t->qpc->c->vtable;
            void *qp = calloc(1, t->qpc->c->params_size ? t->qpc->c->params_size : 1);
            st = qp ? r->qvt->create(&t->qpc->host, qp, &r->q) : ORK_E_NOMEM;
            free(qp);
            r->wq = (ork_wstore_quant){r->qvt, r->q, t->qpc->c->id};
        }
    }
    if (st != ORK_OK) runner_close(r);
    return st;
}

/* One encoder over n captions. kept: a runner whose resident weights stay
 * loaded across calls (encode_each), or NULL: one of this call's own. em (or
 * NULL): each chunk's rows go to em's callback (out gives the shape only). */
static ork_status run_slot(ork_textcond *tc, tc_slot *t, const ork_backend *be, size_t budget, int n,
                           const char *const *captions, ork_text_embed *out, ork_textcond_stats *stats,
                           runner *kept, const emit_to *em) {
    double t0 = now_s();
    runner own, *rp = kept ? kept : &own;
    runner *const r = rp;
    tc_plan p;
    ORK_TRY(ork_tc_plan(t, ork_tc_act_dtype(be), budget, n, 0, &p));
    if (kept && p.layer_major) return ORK_FAIL(ORK_E_INTERNAL, "text encode: a kept encoder must be resident");
    int32_t *ids = malloc((size_t)n * t->L * sizeof *ids), *mask = malloc((size_t)n * t->L * sizeof *mask);
    ork_status st = ids && mask ? ORK_OK : ORK_E_NOMEM;
    if (st == ORK_OK) st = tokenize(t, n, captions, ids, mask);
    double t_tok = now_s() - t0;
    if (st == ORK_OK && !kept) st = runner_open(tc, t, be, budget, &p, r);
    else if (!kept) memset(r, 0, sizeof *r);
    if (st == ORK_OK && em && !kept) { /* one chunk's rows (the plan's chunk: a retry only shrinks it) */
        r->em = em;
        if ((out->ctx_dim && !(r->etxt = malloc((size_t)p.chunk * out->T * out->ctx_dim * sizeof *r->etxt))) ||
            (out->vec_dim && !(r->evec = malloc((size_t)p.chunk * out->vec_dim * sizeof *r->evec))))
            st = ORK_E_NOMEM;
    }
    double load0 = r->load_s;
    int on_device = 0, retries = 0, loads0 = r->file_loads, loads_before = 0;
    /* The plan's activation figure is an estimate: a chunk the budget refuses
     * is tried again at half the captions (the refusal a warning), down to one */
    int no_stream = 0; /* the streamer's second slot did not fit after all: the per-block store */
    for (;;) {
        int stream_failed = st == ORK_E_BUDGET && r->streamer && !no_stream;
        if (st != ORK_OK && !(st == ORK_E_BUDGET && budget && (p.chunk > 1 || stream_failed))) break;
        if (st == ORK_E_BUDGET) {
            if (stream_failed) {
                ORK_WARN("text encoder %s: the block streamer's two slots did not fit in %.2f GiB: one block at a "
                         "time", t->s.encoder, budget / 1073741824.0);
                no_stream = 1;
            } else {
                ORK_WARN("text encoder %s: %d captions per chunk did not fit in %.2f GiB: trying %d", t->s.encoder,
                         p.chunk, budget / 1073741824.0, p.chunk / 2);
                p.chunk /= 2;
            }
            retries++;
            if (kept) { /* the caller's runner (encode_each): its arena stays */
                store_free(r);
                ork_graph_reset(r->g);
                st = ORK_OK;
            } else { /* the arena was sized for the larger chunk, in one piece: size it anew */
                double spent = r->load_s - load0;
                loads_before += r->file_loads - loads0;
                float *etxt = r->etxt, *evec = r->evec;
                r->etxt = r->evec = NULL;
                (void)runner_close(r); /* a failed chunk: what it held is freed with the allocator */
                st = runner_open(tc, t, be, budget, &p, r);
                r->em = em;
                r->etxt = etxt;
                r->evec = evec;
                load0 = -spent; /* r->load_s restarts at 0: keep the load time already spent */
                loads0 = 0;
                if (st != ORK_OK) break;
            }
        }
        int group = n;
        if (p.layer_major) ork_tc_lm_group(&p, budget, n, &on_device, &group);
        r->streamer = !no_stream && ork_tc_lm_streamer(&p, budget, on_device, group);
        if (budget && p.chunk > 1) ork_log_demote(1);
        for (int g0 = 0; g0 < n && st == ORK_OK; g0 += group) {
            int gn = n - g0 < group ? n - g0 : group;
            ork_text_embed part = *out; /* the group's rows of out */
            part.txt = out->txt ? out->txt + (size_t)g0 * out->T * out->ctx_dim : NULL;
            part.vec = out->vec ? out->vec + (size_t)g0 * out->vec_dim : NULL;
            part.len = out->len ? out->len + g0 : NULL;
            const int32_t *gi = ids + (size_t)g0 * t->L, *gm = mask + (size_t)g0 * t->L;
            r->emit_g0 = g0;
            r->cmask = gm;
            st = p.layer_major ? run_layer_major(r, on_device, gi, gm, gn, p.chunk, &part)
                               : run_resident(r, gi, gm, gn, p.chunk, &part, kept != NULL);
        }
        if (budget && p.chunk > 1) ork_log_demote(-1);
        if (st == ORK_OK) break;
    }
    size_t peak = r->a ? ork_alloc_peak(r->a) : 0;
    size_t act_peak = r->g ? ork_arena_peak(r->g->arena) : 0, act_cap = r->g ? ork_arena_capacity(r->g->arena) : 0;
    double t_load = r->load_s - load0;
    int file_loads = loads_before + r->file_loads - loads0, streamed = r->streamer;
    if (!kept) {
        size_t held = runner_close(r);
        if (st == ORK_OK) st = ork_tc_release_check(held, t->s.encoder);
    }
    free(ids);
    free(mask);
    if (st != ORK_OK) return st;
    double dt = now_s() - t0;
    if (peak > stats->peak_bytes) stats->peak_bytes = peak;
    if (act_peak > stats->act_peak_bytes) {
        stats->act_peak_bytes = act_peak;
        stats->act_planned_bytes = tc_arena_bytes(&p);
        stats->act_arena_bytes = act_cap;
    }
    stats->retries += retries;
    stats->layer_major |= p.layer_major;
    if (t->feeds & ORK_TEXT_FEEDS_TXT) stats->chunk = p.chunk;
    stats->weight_bytes += p.w_total;
    double t_enc = dt - t_load - t_tok;
    stats->load_seconds += t_load;
    stats->tokenize_seconds += t_tok;
    stats->encode_seconds += t_enc > 0 ? t_enc : 0;
    ORK_INFO("text encode %s (%s): %d caption%s in %.2f s (%.1f/s): weights to the device %.2f s, tokenize %.2f s, "
             "encode %.2f s (%.1f/s); %s, %d per chunk, peak %.2f GiB (activations %.1f MiB of the %.1f MiB "
             "planned)%s; checkpoint read %d time%s", t->s.encoder,
             t->info.variant ? t->info.variant : "?", n, n == 1 ? "" : "s", dt, dt > 0 ? n / dt : 0.0, t_load, t_tok,
             t_enc, t_enc > 0 ? n / t_enc : 0.0,
             !p.layer_major ? (kept ? "resident (weights kept for the next group)" : "resident")
             : streamed ? (on_device ? "layer-major through the streamer (carries on the device)"
                                     : "layer-major through the streamer (carries on the host)")
             : on_device ? "layer-major (carries on the device)"
                         : "layer-major (carries on the host)", p.chunk, peak / 1073741824.0,
             act_peak / 1048576.0, tc_arena_bytes(&p) / 1048576.0,
             t->qpc ? ", quantized" : "", file_loads, file_loads == 1 ? "" : "s");
    return ORK_OK;
}

/* Every encoder over n captions into out (allocated here). slot_budget and
 * kept (encode_each's kept runners) or NULL: each encoder gets the whole
 * budget and a runner of its own. */
static ork_status encode_impl(ork_textcond *tc, const ork_backend *be, size_t budget, const size_t *slot_budget,
                              runner *kept, int n, const char *const *captions, ork_text_embed *out) {
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    ork_textcond_stats stats = {0};
    stats.captions = n;
    out->n = n;
    out->T = tc->T;
    out->ctx_dim = tc->ctx_dim;
    out->vec_dim = tc->vec_dim;
    if (n == 0) return ORK_OK;
    out->txt = malloc((size_t)n * tc->T * tc->ctx_dim * sizeof *out->txt);
    if (tc->vec_dim) out->vec = malloc((size_t)n * tc->vec_dim * sizeof *out->vec);
    if (tc->unmasked) out->len = malloc((size_t)n * sizeof *out->len);
    if (!out->txt || (tc->vec_dim && !out->vec) || (tc->unmasked && !out->len)) {
        ork_text_embed_free(out);
        return ORK_FAIL(ORK_E_NOMEM, "text encode: no host memory for %d captions' embeddings (%.2f GiB)", n,
                        (double)n * tc->T * tc->ctx_dim * 4 / 1073741824.0);
    }
    for (int i = 0; i < tc->n; i++) {
        ork_status st = run_slot(tc, &tc->sl[i], be, slot_budget ? slot_budget[i] : budget, n, captions, out, &stats,
                                 kept ? &kept[i] : NULL, NULL);
        if (st != ORK_OK) {
            ork_text_embed_free(out);
            return st;
        }
    }
    stats.seconds = now_s() - t0;
    tc->last = stats;
    return ORK_OK;
}

ork_status ork_textcond_encode(ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                               const char *const *captions, ork_text_embed *out) {
    memset(out, 0, sizeof *out);
    if (!tc || !be) return ORK_FAIL(ORK_E_INVALID, "text encode: no conditioner or backend");
    if (n < 0 || (n > 0 && !captions)) return ORK_FAIL(ORK_E_INVALID, "text encode: %d captions and no list", n);
    size_t budget = ork_tc_budget_fit(be, budget_bytes, tc->o.device_index, 0, NULL);
    return encode_impl(tc, be, budget, NULL, NULL, n, captions, out);
}

/* encode_each over several groups keeps every encoder's weights loaded when
 * all of them are resident together within the budget: each gets its
 * weights, its margin and a share of the activation room in proportion to
 * its activations per caption. 0: not possible (the groups reload). */
static int keep_budgets(const ork_textcond *tc, const ork_backend *be, size_t budget, int group, size_t *sb,
                        tc_plan *q) {
    ork_dtype act = ork_tc_act_dtype(be);
    tc_plan p[TC_MAX_SLOTS];
    size_t fixed = 0, act_sum = 0;
    for (int i = 0; i < tc->n; i++) {
        if (ork_tc_plan(&tc->sl[i], act, budget, group, 1, &p[i]) != ORK_OK || p[i].layer_major) return 0;
        fixed += p[i].w_total + p[i].scratch;
        act_sum += p[i].act_per_caption;
    }
    if (budget <= fixed + act_sum) return 0;
    size_t room = budget - fixed;
    for (int i = 0; i < tc->n; i++) {
        sb[i] = p[i].w_total + p[i].scratch + (size_t)((double)room * (double)p[i].act_per_caption / (double)act_sum);
        if (ork_tc_plan(&tc->sl[i], act, sb[i], group, 1, &q[i]) != ORK_OK || q[i].layer_major) return 0;
    }
    return 1;
}

ork_status ork_textcond_encode_each(ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                                    const char *const *captions, ork_text_embed_fn fn, void *user) {
    if (!tc || !be || !fn) return ORK_FAIL(ORK_E_INVALID, "text encode: no conditioner, backend or callback");
    if (n < 0 || (n > 0 && !captions)) return ORK_FAIL(ORK_E_INVALID, "text encode: %d captions and no list", n);
    size_t budget = ork_tc_budget_fit(be, budget_bytes, tc->o.device_index, 0, NULL);
    if (tc->n == 1 && n > 0) { /* one encoder: each chunk's rows to fn as they come, one weight pass for all */
        ork_textcond_stats one = {0};
        one.captions = n;
        ork_text_embed shape = {.n = n, .T = tc->T, .ctx_dim = tc->ctx_dim, .vec_dim = tc->vec_dim};
        emit_to em = {fn, user};
        double t0 = now_s();
        ORK_TRY(run_slot(tc, &tc->sl[0], be, budget, n, captions, &shape, &one, NULL, &em));
        one.seconds = now_s() - t0;
        tc->last = one;
        return ORK_OK;
    }
    double gib = 4;
    const char *gg = getenv("ORAKUL_TEXT_GROUP_GIB");
    if (gg && atof(gg) > 0) gib = atof(gg);
    size_t per = ((size_t)tc->T * tc->ctx_dim + (size_t)tc->vec_dim) * sizeof(float);
    size_t fit = (size_t)(gib * 1073741824.0) / (per ? per : 1);
    int group = fit < 1 ? 1 : fit > (size_t)n ? n : (int)fit;
    size_t sb[TC_MAX_SLOTS];
    runner kr[TC_MAX_SLOTS];
    memset(kr, 0, sizeof kr);
    tc_plan kp[TC_MAX_SLOTS]; /* the kept runners' plans: their arenas sized for a whole group's chunk */
    int keep = n > group && keep_budgets(tc, be, budget, group, sb, kp);
    ork_status st = ORK_OK;
    for (int i = 0; keep && i < tc->n && st == ORK_OK; i++) st = runner_open(tc, &tc->sl[i], be, sb[i], &kp[i], &kr[i]);
    ork_textcond_stats all = {0};
    double t0 = now_s();
    for (int g0 = 0; g0 < n && st == ORK_OK; g0 += group) {
        int gn = n - g0 < group ? n - g0 : group;
        ork_text_embed e;
        st = encode_impl(tc, be, budget, keep ? sb : NULL, keep ? kr : NULL, gn, captions + g0, &e);
        for (int i = 0; i < gn && st == ORK_OK; i++)
            st = fn(user, g0 + i, e.txt + (size_t)i * e.T * e.ctx_dim, e.vec ? e.vec + (size_t)i * e.vec_dim : NULL);
        ork_text_embed_free(&e);
        if (st != ORK_OK) break;
        if (tc->last.peak_bytes > all.peak_bytes) all.peak_bytes = tc->last.peak_bytes;
        all.layer_major |= tc->last.layer_major;
        all.chunk = tc->last.chunk;
        all.weight_bytes = tc->last.weight_bytes;
        all.load_seconds += tc->last.load_seconds;
        all.encode_seconds += tc->last.encode_seconds;
        all.tokenize_seconds += tc->last.tokenize_seconds;
        all.retries += tc->last.retries;
        if (tc->last.act_peak_bytes > all.act_peak_bytes) {
            all.act_peak_bytes = tc->last.act_peak_bytes;
            all.act_planned_bytes = tc->last.act_planned_bytes;
            all.act_arena_bytes = tc->last.act_arena_bytes;
        }
    }
    for (int i = 0; i < tc->n; i++) { /* a no-op for runners never opened */
        size_t held = runner_close(&kr[i]);
        if (st == ORK_OK) st = ork_tc_release_check(held, tc->sl[i].s.encoder);
    }
    if (st != ORK_OK) return st;
    all.captions = n;
    all.seconds = now_s() - t0;
    tc->last = all;
    return ORK_OK;
}
