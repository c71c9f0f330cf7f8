/* stream/trainable_stream.c — see trainable_stream.h. */
#include "stream/trainable_stream.h"

#include "cpu/cpu.h"
#include "numerics/half.h"
#include "numerics/quantize.h"
#include "stream/streamer.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct zvisit {
    int block, uses, stepped;
} zvisit;

struct ork_tstream {
    ork_copy_engine *ce;
    ork_alloc *a;
    const ork_backend *be;
    const ork_kctx *k;
    ork_tstream_opts o;
    ork_tstream_layout L;
    int *first;          /* [n_blocks + 1] first parameter of block b (params sorted by block) */
    int *order_p;        /* [n_params] parameter indices sorted by block */
    uint8_t **host;      /* [n_blocks] */
    void **slot;         /* [K] */
    int K, ev0;
    size_t chunk;        /* slot bytes per write-back chunk (o.chunks per slot) */
    int *wb_slot;        /* [n_blocks] slot whose write-back last carried the block's record, -1 */
    /* Write-backs are numbered 1, 2, ... in D2H order. A load of block b must
     * follow b's last write-back (wb_seq[b]); once the H2D lane has waited for
     * a slot's WB it has seen every write-back up to that one (h2d_seen), and
     * b needs no wait of its own. Waiting anyway would wait for the slot's
     * LATEST write-back — in the backward pass the very record the load is
     * meant to overlap with. */
    uint64_t *wb_seq;    /* [n_blocks] */
    uint64_t *slot_seq;  /* [K] number of the slot's last write-back */
    uint64_t wb_n, h2d_seen;
    float *sums;         /* device F32 [n_params]: this step's Σg², in block order (order_p) */
    float *hsum;         /* pinned host [n_params] (hsum and hbad: one arena) */
    int32_t *bad;        /* device [n_blocks]: 1 when the block's gradients were not finite this step */
    int32_t *hbad;       /* pinned host [n_blocks] */
    int norm_out;        /* this pass's last stepped block sent sums and flags up on the D2H lane */
    double prev_norm;    /* norm of the previous step (0: none yet) */
    float clip;          /* factor applied this step */
    /* pass */
    zvisit *vis;
    int cap, nv, v, issued, left, active;
    int *slot_of;        /* [n_blocks] slot of the entered block, -1 */
    size_t *fwd_end;     /* [n_blocks] a visit that does not step the block (the
                          * forward pass) loads [0, fwd_end): the shadows, or
                          * the data when there are none — never the state */
    size_t *step_start;  /* [n_blocks] the stepping visit loads [step_start, record
                          * end): data + state (the shadows are rewritten) */
    /* the next pass's first K loads, issued at this pass's end as this pass's
     * first visits predict them (the link idles from the last write-back through
     * the step's tail otherwise); kept at pass_begin while they match */
    int ahead;           /* ork_tstream_set_ahead (default on) */
    int pre_n;           /* loads issued ahead */
    zvisit *pre;         /* [K] their visits */
    /* the block whose current record a slot holds (-1: none): a stepped block's
     * whole record, or a forward visit's part of it. The next pass's first
     * forward visits find the backward's last stepped blocks still there (the
     * record is the host's once its write-back is out): no load, and no wait
     * for that write-back (the step's tail waited 51 ms for it at r1280 fp32) */
    int *content;        /* [K] */
    uint64_t reused;     /* visits that found their block in the slot */
    int *vslot;          /* [max(cap, K)] visit x's slot: the first K visits' a permutation, then
                          * visit x + K takes visit x's (freed at its leave) */
    int *pre_slot;       /* [K] the permutation the loads ahead went to */
};

static int zslot(const ork_tstream *z, int x) { return z->vslot[x]; }

/* The host may write the records: no slot's copy counts as current. */
static void forget_slots(ork_tstream *z) {
    for (int s = 0; s < z->K; s++) z->content[s] = -1;
}

/* Visit x + K takes visit x's slot (freed at its leave), after the first K. */
static void repeat_slots(ork_tstream *z) {
    for (int x = z->K; x < z->nv; x++) z->vslot[x] = z->vslot[x - z->K];
}

/* The pass's slots: each of its first K visits that does not step its block
 * takes the slot still holding that block's record (the backward ends on the
 * blocks the forward starts with, in reverse: no rotation finds them all),
 * the others the slots left, in order. */
static void assign_slots(ork_tstream *z) {
    int K = z->K;
    for (int x = 0; x < K; x++) z->vslot[x] = -1;
    for (int x = 0; x < K && x < z->nv; x++)
        for (int s = 0; s < K && !z->vis[x].stepped; s++) {
            int taken = 0;
            for (int y = 0; y < x; y++) taken |= z->vslot[y] == s;
            if (!taken && z->content[s] == z->vis[x].block) { z->vslot[x] = s; break; }
        }
    for (int x = 0, s = 0; x < K; x++) {
        if (z->vslot[x] >= 0) continue;
        for (;; s++) {
            int taken = 0;
            for (int y = 0; y < K; y++) taken |= z->vslot[y] == s;
            if (!taken) break;
        }
        z->vslot[x] = s;
    }
    repeat_slots(z);
}

static size_t up(size_t x) { return (x + ORK_STREAM_ALIGN - 1) / ORK_STREAM_ALIGN * ORK_STREAM_ALIGN; }

/* Host-side bulk work over all cores: the seed's run zeroes 44 GiB of
 * records and rounds 7.8 G shadows at start-up. */
static void zero_range(void *ctx, int64_t lo, int64_t hi) { memset((char *)ctx + lo, 0, (size_t)(hi - lo)); }
typedef struct shadow_job { const float *src; uint16_t *dst; } shadow_job;
static void shadow_range(void *ctx, int64_t lo, int64_t hi) {
    const shadow_job *j = ctx;
    ork_bf16_from_f32(j->src + lo, (size_t)(hi - lo), j->dst + lo);
}
/* Events, per slot s: READY (its load is in), FREE (compute is done with it),
 * WB (its whole write-back is out) and one per write-back chunk; then STEPPED. */
enum { EV_PER_SLOT = 3 + ORK_TSTREAM_CHUNKS };
static int ev_ready(const ork_tstream *z, int s) { return z->ev0 + EV_PER_SLOT * s; }
static int ev_free(const ork_tstream *z, int s) { return z->ev0 + EV_PER_SLOT * s + 1; }
static int ev_wb(const ork_tstream *z, int s) { return z->ev0 + EV_PER_SLOT * s + 2; }
static int ev_chunk(const ork_tstream *z, int s, int c) { return z->ev0 + EV_PER_SLOT * s + 3 + c; }
static int ev_stepped(const ork_tstream *z) { return z->ev0 + EV_PER_SLOT * z->K; }
static int ev_norm(const ork_tstream *z) { return z->ev0 + EV_PER_SLOT * z->K + 1; }

ork_status ork_tstream_create(ork_copy_engine *ce, ork_alloc *a, const ork_backend *be, const ork_kctx *k,
                           const ork_tstream_opts *o, ork_tstream **out) {
    if (o->n_slots < 2) return ORK_FAIL(ORK_E_INVALID, "zero: a ring needs at least 2 slots, got %d", o->n_slots);
    if (o->event_base < 0 || o->event_base + ork_tstream_n_events(o->n_slots) > ork_ce_n_events(ce))
        return ORK_FAIL(ORK_E_INVALID, "zero: %d slots need events %d..%d but the copy engine has %d", o->n_slots,
                        o->event_base, o->event_base + ork_tstream_n_events(o->n_slots) - 1, ork_ce_n_events(ce));
    ork_tstream *z = calloc(1, sizeof *z);
    if (!z) return ORK_E_NOMEM;
    z->ce = ce; z->a = a; z->be = be; z->k = k; z->o = *o; z->K = o->n_slots; z->ev0 = o->event_base;
    z->clip = 1.0f;
    int nb = o->n_blocks, np = o->n_params;
    z->L.n_blocks = nb;
    z->L.n_params = np;
    z->L.params = calloc((size_t)np + 1, sizeof *z->L.params);
    z->L.block_bytes = calloc((size_t)nb + 1, sizeof *z->L.block_bytes);
    z->L.slot_need = calloc((size_t)nb + 1, sizeof *z->L.slot_need);
    z->first = calloc((size_t)nb + 2, sizeof *z->first);
    z->order_p = calloc((size_t)np + 1, sizeof *z->order_p);
    z->host = calloc((size_t)nb + 1, sizeof *z->host);
    z->slot = calloc((size_t)z->K, sizeof *z->slot);
    size_t hs = up(((size_t)np + 1) * 4);
    if (ork_ce_host_alloc(ce, hs + ((size_t)nb + 1) * 4, (void **)&z->hsum) == ORK_OK)
        z->hbad = (int32_t *)((char *)z->hsum + hs);
    z->pre = calloc((size_t)z->K + 1, sizeof *z->pre);
    z->pre_slot = calloc((size_t)z->K, sizeof *z->pre_slot);
    z->vslot = calloc((size_t)z->K, sizeof *z->vslot);
    z->content = malloc((size_t)z->K * sizeof *z->content);
    if (z->content) forget_slots(z);
    z->ahead = 1;
    z->slot_of = calloc((size_t)nb + 1, sizeof *z->slot_of);
    z->wb_slot = calloc((size_t)nb + 1, sizeof *z->wb_slot);
    z->wb_seq = calloc((size_t)nb + 1, sizeof *z->wb_seq);
    z->slot_seq = calloc((size_t)z->K, sizeof *z->slot_seq);
    z->fwd_end = calloc((size_t)nb + 1, sizeof *z->fwd_end);
    z->step_start = calloc((size_t)nb + 1, sizeof *z->step_start);
    ork_status st = (z->L.params && z->L.block_bytes && z->L.slot_need && z->first && z->order_p && z->host &&
                     z->slot && z->hsum && z->hbad && z->slot_of && z->wb_slot && z->wb_seq && z->slot_seq && z->fwd_end &&
                     z->step_start && z->pre && z->content && z->pre_slot && z->vslot) ? ORK_OK : ORK_E_NOMEM;
    if (st == ORK_OK && o->shadow_dt != 0 && o->shadow_dt != ORK_F32 && o->shadow_dt != ORK_BF16)
        st = ORK_FAIL(ORK_E_INVALID, "zero: shadow dtype %d: only BF16 (or none)", (int)o->shadow_dt);
    /* layout: per block, shadow parts, data parts, state parts; grads after the record in the slot */
    int q = 0, shadows = o->shadow_dt == ORK_BF16;
    for (int b = 0; st == ORK_OK && b < nb; b++) {
        z->first[b] = q;
        z->slot_of[b] = -1;
        z->wb_slot[b] = -1;
        size_t sz = 0;
        for (int i = 0; i < np; i++)
            if (o->block[i] == b) {
                if (o->dtype[i] != ORK_F32 && o->dtype[i] != ORK_BF16)
                    st = ORK_FAIL(ORK_E_INVALID, "zero: parameter %d must be F32 or BF16", i);
                ork_tstream_param *p = &z->L.params[i];
                p->block = b;
                p->dtype = o->dtype[i];
                p->numel = o->numel[i];
                if (shadows && o->dtype[i] == ORK_F32) {
                    p->shadow_offset = up(sz);
                    p->shadow_bytes = (size_t)o->numel[i] * 2;
                    sz = p->shadow_offset + p->shadow_bytes;
                }
                z->order_p[q++] = i;
            }
        z->step_start[b] = up(sz);
        for (int t = z->first[b]; t < q; t++) {
            ork_tstream_param *p = &z->L.params[z->order_p[t]];
            p->data_offset = up(sz);
            p->data_bytes = (size_t)p->numel * ork_dtype_size(p->dtype);
            sz = p->data_offset + p->data_bytes;
        }
        /* the forward visit: the shadows when every F32 param has one (then
         * BF16 params' data is needed too: load through the data part) */
        int all_shadowed = 1;
        for (int t = z->first[b]; t < q; t++)
            if (!z->L.params[z->order_p[t]].shadow_bytes) all_shadowed = 0;
        if (!all_shadowed) z->step_start[b] = 0;
        z->fwd_end[b] = all_shadowed && z->step_start[b] ? z->step_start[b] : up(sz);
        for (int t = z->first[b]; t < q; t++) {
            ork_tstream_param *p = &z->L.params[z->order_p[t]];
            p->state_offset = up(sz);
            p->state_bytes = o->state_bytes[z->order_p[t]];
            sz = p->state_offset + p->state_bytes;
        }
        size_t rec = q > z->first[b] ? up(sz) : 0, need = rec;
        for (int t = z->first[b]; t < q; t++) {
            ork_tstream_param *p = &z->L.params[z->order_p[t]];
            p->grad_offset = up(need);
            need = p->grad_offset + (size_t)p->numel * 4;
        }
        z->L.block_bytes[b] = rec;
        z->L.slot_need[b] = rec ? up(need) : 0;
        if (z->L.slot_need[b] > z->L.max_block_bytes) z->L.max_block_bytes = z->L.slot_need[b];
        if (rec && st == ORK_OK) {
            st = ork_ce_host_alloc(ce, rec, (void **)&z->host[b]);
            if (st == ORK_OK) /* state zeroed before step 1; padding defined */
                ork_par_for(ork_numerics_threads(), (int64_t)rec, (int64_t)1 << 24, zero_range, z->host[b]);
        }
    }
    z->first[nb] = q;
    size_t nch = o->chunks > 0 && o->chunks <= ORK_TSTREAM_CHUNKS ? (size_t)o->chunks : ORK_TSTREAM_CHUNKS_DEFAULT;
    z->chunk = up((z->L.max_block_bytes + nch - 1) / nch);
    if (!z->chunk) z->chunk = ORK_STREAM_ALIGN;
    if (st == ORK_OK && q != np) st = ORK_FAIL(ORK_E_INVALID, "zero: %d parameters have a block outside 0..%d", np - q, nb - 1);
    for (int s = 0; st == ORK_OK && s < z->K && z->L.max_block_bytes; s++)
        st = ork_alloc_get(a, z->L.max_block_bytes, "lora_slots", &z->slot[s]);
    if (st == ORK_OK) st = ork_alloc_get(a, ((size_t)np + 1) * 4, "workspace", (void **)&z->sums);
    if (st == ORK_OK) st = be->fill(k, np + 1, 0.0f, z->sums, ORK_F32);
    if (st == ORK_OK) st = ork_alloc_get(a, ((size_t)nb + 1) * 4, "workspace", (void **)&z->bad);
    if (st == ORK_OK) st = be->fill(k, nb + 1, 0.0f, z->bad, ORK_F32); /* 0.0f: all-zero bytes, int32 0 */
    if (st != ORK_OK) { ork_tstream_destroy(z); return st; }
    *out = z;
    return ORK_OK;
}

void ork_tstream_destroy(ork_tstream *z) {
    if (!z) return;
    if (z->ce) (void)ork_ce_sync(z->ce);
    for (int s = 0; z->slot && s < z->K; s++)
        if (z->slot[s]) ork_alloc_put(z->a, z->slot[s]);
    if (z->sums) ork_alloc_put(z->a, z->sums);
    if (z->bad) ork_alloc_put(z->a, z->bad);
    for (int b = 0; z->host && b < z->o.n_blocks; b++)
        if (z->host[b]) ork_ce_host_free(z->ce, z->host[b]);
    free(z->L.params); free(z->L.block_bytes); free(z->L.slot_need); free(z->first); free(z->order_p);
    free(z->pre);
    free(z->content);
    free(z->pre_slot);
    free(z->vslot);
    free(z->host); free(z->slot); ork_ce_host_free(z->ce, z->hsum); free(z->slot_of); free(z->vis); free(z->fwd_end);
    free(z->step_start); free(z->wb_slot); free(z->wb_seq); free(z->slot_seq);
    free(z);
}

const ork_tstream_layout *ork_tstream_get_layout(const ork_tstream *z) { return &z->L; }
void *ork_tstream_host(ork_tstream *z, int b) { return b >= 0 && b < z->o.n_blocks ? z->host[b] : NULL; }
/* The host may write the records next: loads issued ahead carry the old
 * bytes, and so may the slots. */
ork_status ork_tstream_sync(ork_tstream *z) {
    z->pre_n = 0;
    forget_slots(z);
    return ork_ce_sync(z->ce);
}
uint64_t ork_tstream_reused(const ork_tstream *z) { return z->reused; }

void ork_tstream_set_ahead(ork_tstream *z, int on) {
    z->ahead = on != 0;
    if (!z->ahead) z->pre_n = 0;
}
double ork_tstream_prev_norm(const ork_tstream *z) { return z->prev_norm; }
void ork_tstream_set_prev_norm(ork_tstream *z, double norm) {
    z->prev_norm = norm;
    z->clip = ork_clip_factor(z->o.max_grad_norm, norm);
}

static int has(const ork_tstream *z, int b) { return b >= 0 && b < z->o.n_blocks && z->host[b]; }

/* The H2D lane waits for slot s's last write-back, and so for every earlier one. */
static ork_status wait_wb(ork_tstream *z, int s) {
    ORK_TRY(ork_ce_wait(z->ce, ORK_LANE_H2D, ev_wb(z, s)));
    if (z->slot_seq[s] > z->h2d_seen) z->h2d_seen = z->slot_seq[s];
    return ORK_OK;
}

/* The load of the next visit into its slot. It follows the slot's write-back
 * chunk by chunk (each piece waits only for the chunk it overwrites), so with
 * several chunks the two directions run together instead of one after the
 * other; READY waits for the whole write-back, since the block's gradients may
 * lie where the old record is still going out. */
static ork_status issue(ork_tstream *z) {
    int x = z->issued, s = zslot(z, x), b = z->vis[x].block;
    if (!z->vis[x].stepped && z->content[s] == b) {
        /* a forward visit, the block's record still in the slot: nothing to copy
         * and no READY (the compute lane wrote it, or the load that did recorded
         * one); the next load into the slot waits for its write-back's chunks */
        z->reused++;
        z->issued++;
        return ORK_OK;
    }
    z->content[s] = b; /* a forward visit's part; a stepped visit's whole record once stepped */
    ORK_TRY(ork_ce_wait(z->ce, ORK_LANE_H2D, ev_free(z, s)));
    if (z->wb_slot[b] >= 0 && z->wb_seq[b] > z->h2d_seen) /* this block's record is back on the host */
        ORK_TRY(wait_wb(z, z->wb_slot[b]));
    size_t from = z->vis[x].stepped ? z->step_start[b] : 0;
    size_t to = z->vis[x].stepped ? z->L.block_bytes[b] : z->fwd_end[b];
    for (size_t at = from; at < to;) {
        int c = (int)(at / z->chunk);
        size_t end = (size_t)(c + 1) * z->chunk < to ? (size_t)(c + 1) * z->chunk : to;
        ORK_TRY(ork_ce_wait(z->ce, ORK_LANE_H2D, ev_chunk(z, s, c)));
        ORK_TRY(ork_ce_copy(z->ce, ORK_LANE_H2D, (char *)z->slot[s] + at, z->host[b] + at, end - at));
        at = end;
    }
    ORK_TRY(wait_wb(z, s));
    ORK_TRY(ork_ce_record(z->ce, ORK_LANE_H2D, ev_ready(z, s)));
    z->issued++;
    return ORK_OK;
}

ork_status ork_tstream_pass_begin(ork_tstream *z, const int *order, int n) {
    if (n > z->cap) {
        zvisit *v = realloc(z->vis, (size_t)n * sizeof *v);
        if (!v) return ORK_E_NOMEM;
        z->vis = v;
        int *vs = realloc(z->vslot, (size_t)(n > z->K ? n : z->K) * sizeof *vs);
        if (!vs) return ORK_E_NOMEM;
        z->vslot = vs;
        z->cap = n;
    }
    z->nv = 0;
    for (int i = 0; i < n; i++) {
        int b = order[i];
        if (!has(z, b)) continue;
        if (z->nv > 0 && z->vis[z->nv - 1].block == b) z->vis[z->nv - 1].uses++;
        else z->vis[z->nv++] = (zvisit){b, 1, 0};
    }
    /* a block used more than once in the pass (forward, then backward) is stepped at its last visit */
    for (int v = 0; v < z->nv; v++) {
        int b = z->vis[v].block, uses = 0, last = 1;
        for (int w = 0; w < z->nv; w++)
            if (z->vis[w].block == b) { uses += z->vis[w].uses; if (w > v) last = 0; }
        z->vis[v].stepped = uses > 1 && last;
    }
    /* the loads issued ahead at the last pass's end: kept while they are this pass's */
    int keep = 0;
    while (keep < z->pre_n && keep < z->nv && z->vis[keep].block == z->pre[keep].block &&
           z->vis[keep].stepped == z->pre[keep].stepped)
        keep++;
    if (keep) { /* the slots the loads ahead went to */
        memcpy(z->vslot, z->pre_slot, (size_t)z->K * sizeof *z->vslot);
        repeat_slots(z);
    } else {
        assign_slots(z);
    }
    z->pre_n = 0;
    z->v = -1; z->issued = keep; z->left = 0; z->active = 1;
    while (z->issued < z->nv && z->issued < z->K) ORK_TRY(issue(z)); /* a slot loaded ahead for nothing: again, in order */
    return ORK_OK;
}

ork_status ork_tstream_enter(ork_tstream *z, int b) {
    if (!has(z, b)) return ORK_OK;
    if (!z->active) return ORK_FAIL(ORK_E_INTERNAL, "zero: block %d entered outside a pass", b);
    if (z->v >= 0 && z->left > 0 && z->vis[z->v].block == b) return ORK_OK; /* merged repeat */
    if (z->v >= 0 && z->left > 0)
        return ORK_FAIL(ORK_E_INTERNAL, "zero: block %d entered while block %d is still in use", b, z->vis[z->v].block);
    int nxt = z->v + 1;
    if (nxt >= z->nv || z->vis[nxt].block != b)
        return ORK_FAIL(ORK_E_INTERNAL, "zero: block %d entered out of the announced order", b);
    z->v = nxt;
    z->left = z->vis[nxt].uses;
    int s = zslot(z, nxt);
    ORK_TRY(ork_ce_wait(z->ce, ORK_LANE_COMPUTE, ev_ready(z, s)));
    z->slot_of[b] = s;
    if (z->vis[nxt].stepped) { /* fresh gradients for this block's backward */
        size_t g0 = z->L.block_bytes[b], gn = z->L.slot_need[b] - g0;
        ORK_TRY(z->be->fill(z->k, (int64_t)(gn / 4), 0.0f, (char *)z->slot[s] + g0, ORK_F32));
    }
    return ORK_OK;
}

/* Does parameter i's current visit read its shadow? */
static int on_shadow(const ork_tstream *z, int i) {
    const ork_tstream_param *p = &z->L.params[i];
    int b = p->block;
    return p->shadow_bytes && z->slot_of[b] >= 0 && z->v >= 0 && z->vis[z->v].block == b && !z->vis[z->v].stepped &&
           z->step_start[b] > 0;
}

void *ork_tstream_data(ork_tstream *z, int i) {
    const ork_tstream_param *p = &z->L.params[i];
    int s = z->slot_of[p->block];
    if (s < 0) return NULL;
    return (char *)z->slot[s] + (on_shadow(z, i) ? p->shadow_offset : p->data_offset);
}
ork_dtype ork_tstream_data_dtype(const ork_tstream *z, int i) {
    return on_shadow(z, i) ? ORK_BF16 : z->L.params[i].dtype;
}

void ork_tstream_refresh_shadows(ork_tstream *z) {
    forget_slots(z); /* the host records change */
    for (int i = 0; i < z->o.n_params; i++) {
        const ork_tstream_param *p = &z->L.params[i];
        if (!p->shadow_bytes || !z->host[p->block]) continue;
        shadow_job j = {(const float *)(z->host[p->block] + p->data_offset),
                        (uint16_t *)(z->host[p->block] + p->shadow_offset)};
        ork_par_for(ork_numerics_threads(), p->numel, (int64_t)1 << 22, shadow_range, &j);
    }
}
float *ork_tstream_grad(ork_tstream *z, int i) {
    int b = z->L.params[i].block, s = z->slot_of[b];
    return s < 0 ? NULL : (float *)((char *)z->slot[s] + z->L.params[i].grad_offset);
}

static ork_status release(ork_tstream *z, int lane) {
    int s = zslot(z, z->v);
    z->slot_of[z->vis[z->v].block] = -1;
    ORK_TRY(ork_ce_record(z->ce, lane, ev_free(z, s)));
    while (z->issued < z->nv && z->issued <= z->v + z->K) ORK_TRY(issue(z));
    return ORK_OK;
}

ork_status ork_tstream_leave(ork_tstream *z, int b) {
    if (!has(z, b)) return ORK_OK;
    if (!z->active || z->v < 0 || z->vis[z->v].block != b || z->left <= 0)
        return ORK_FAIL(ORK_E_INTERNAL, "zero: block %d left without being entered", b);
    if (--z->left > 0) return ORK_OK;
    if (z->vis[z->v].stepped) return ORK_OK; /* grads_ready steps it and frees the slot */
    return release(z, ORK_LANE_COMPUTE);
}

ork_status ork_tstream_grads_ready(ork_tstream *z, int b) {
    if (!has(z, b)) return ORK_OK;
    if (!z->active || z->v < 0 || z->vis[z->v].block != b || z->left != 0 || !z->vis[z->v].stepped)
        return ORK_FAIL(ORK_E_INTERNAL, "zero: gradients of block %d reported outside its last visit", b);
    int s = zslot(z, z->v), f = z->first[b], l = z->first[b + 1];
    char *slot = z->slot[s];
    /* 1. Σg² per parameter, for this step's norm (the next step's clipping), in
     * block order: the block's sums are sums[f..l) */
    for (int t = f; t < l; t++) {
        int i = z->order_p[t];
        ORK_TRY(z->be->reduce(z->k, ORK_REDUCE_SUMSQ, z->L.params[i].numel, slot + z->L.params[i].grad_offset,
                              ORK_F32, z->sums + t));
    }
    /* 2. clip with the previous step's factor, then step this block only */
    ork_opt_param ps[64], *pp = l - f <= 64 ? ps : calloc((size_t)(l - f), sizeof *pp);
    int32_t id[64], *ip = l - f <= 64 ? id : calloc((size_t)(l - f), sizeof *ip);
    if (!pp || !ip) {
        if (pp != ps) free(pp);
        if (ip != id) free(ip);
        return ORK_E_NOMEM;
    }
    ork_status st = ORK_OK;
    for (int t = f; t < l && st == ORK_OK; t++) {
        int i = z->order_p[t];
        const ork_tstream_param *p = &z->L.params[i];
        float *g = (float *)(slot + p->grad_offset);
        if (z->clip != 1.0f) st = z->be->axpby(z->k, p->numel, z->clip, g, ORK_F32, 0.0f, g, ORK_F32);
        pp[t - f] = (ork_opt_param){"", p->dtype, p->numel, slot + p->data_offset, g, slot + p->state_offset};
        ip[t - f] = (int32_t)i;
    }
    if (st == ORK_OK) st = z->o.step(z->o.step_ctx, b, pp, ip, l - f);
    if (pp != ps) free(pp);
    if (ip != id) free(ip);
    ORK_TRY(st);
    /* 3. not finite? Undo the step on the device: the host record still holds the
     * values it was loaded from (its write-back comes after this), so they are
     * copied back over the slot and the block is flagged — no host sync per
     * block (it stalled the queue for every block of the backward pass); the
     * flags are read at step_end, where the host waits anyway */
    ORK_TRY(z->be->restore_if_nonfinite(z->k, z->sums + f, l - f, z->host[b], slot, z->L.block_bytes[b], z->bad + b));
    /* 3b. the shadows of the new values, cast as the linear op casts them */
    for (int t = f; t < l; t++) {
        const ork_tstream_param *p = &z->L.params[z->order_p[t]];
        if (p->shadow_bytes)
            ORK_TRY(z->be->axpby(z->k, p->numel, 1.0f, slot + p->data_offset, ORK_F32, 0.0f, slot + p->shadow_offset,
                                 ORK_BF16));
    }
    /* 4. the record goes back on the D2H lane in chunks (the next load into
     * the slot follows them); the compute lane is done with the slot */
    ORK_TRY(ork_ce_record(z->ce, ORK_LANE_COMPUTE, ev_stepped(z)));
    ORK_TRY(ork_ce_wait(z->ce, ORK_LANE_D2H, ev_stepped(z)));
    if (z->v == z->nv - 1) {
        /* the pass's last step: every block's Σg² and flag are in. They go up
         * before its record — a copy on the compute stream queued behind that
         * write-back on the link (51 ms of the seed's tail at r1280 fp32) */
        ORK_TRY(ork_ce_copy(z->ce, ORK_LANE_D2H, z->hsum, z->sums, (size_t)z->o.n_params * 4));
        ORK_TRY(ork_ce_copy(z->ce, ORK_LANE_D2H, z->hbad, z->bad, (size_t)z->o.n_blocks * 4));
        ORK_TRY(ork_ce_record(z->ce, ORK_LANE_D2H, ev_norm(z)));
        z->norm_out = 1;
    }
    size_t rec = z->L.block_bytes[b];
    int nc = (int)((rec + z->chunk - 1) / z->chunk), c0 = (int)(z->step_start[b] / z->chunk);
    for (int k = 0; k < nc; k++) { /* data + state first: what the next stepping load overwrites; the shadows last */
        int c = (c0 + k) % nc;
        size_t at = (size_t)c * z->chunk, end = at + z->chunk < rec ? at + z->chunk : rec;
        ORK_TRY(ork_ce_copy(z->ce, ORK_LANE_D2H, z->host[b] + at, slot + at, end - at));
        ORK_TRY(ork_ce_record(z->ce, ORK_LANE_D2H, ev_chunk(z, s, c)));
    }
    ORK_TRY(ork_ce_record(z->ce, ORK_LANE_D2H, ev_wb(z, s)));
    for (int k = 0; k < z->K; k++) /* this slot holds the new record; another's copy of b is stale */
        if (k != s && z->content[k] == b) z->content[k] = -1;
    z->content[s] = b;
    z->wb_slot[b] = s;
    z->wb_seq[b] = z->slot_seq[s] = ++z->wb_n;
    return release(z, ORK_LANE_COMPUTE);
}

ork_status ork_tstream_pass_end(ork_tstream *z) {
    int ok = !z->active || (z->v == z->nv - 1 && z->left == 0);
    int v = z->v, nv = z->nv;
    z->active = 0;
    if (!ok) return ORK_FAIL(ORK_E_INTERNAL, "zero: pass ended after %d of %d block visits", v + 1, nv);
    /* the next pass's first loads now, as this pass's first visits predict them:
     * each follows its slot's write-back on the lanes, as at pass_begin */
    z->pre_n = 0;
    if (!z->ahead) return ORK_OK;
    assign_slots(z);
    memcpy(z->pre_slot, z->vslot, (size_t)z->K * sizeof *z->pre_slot);
    z->issued = 0;
    while (z->issued < z->nv && z->issued < z->K) {
        z->pre[z->issued] = z->vis[z->issued];
        ORK_TRY(issue(z));
    }
    z->pre_n = z->issued;
    return ORK_OK;
}

ork_status ork_tstream_step_end(ork_tstream *z, double *norm, float *applied, int *skipped_blocks) {
    int np = z->o.n_params, nb = z->o.n_blocks, skipped = 0;
    if (z->norm_out) { /* sent up at the last step (grads_ready) */
        z->norm_out = 0;
        ORK_TRY(ork_ce_host_wait(z->ce, ev_norm(z)));
    } else {
        ORK_TRY(z->be->memcpy_d2h(z->k, z->hsum, z->sums, (size_t)np * 4));
        ORK_TRY(z->be->memcpy_d2h(z->k, z->hbad, z->bad, (size_t)nb * 4));
        ORK_TRY(z->be->sync(z->k));
    }
    double sum = 0;
    for (int i = 0; i < np; i++) sum += z->hsum[i];
    for (int b = 0; b < nb; b++)
        if (z->hbad[b]) {
            skipped++;
            ORK_WARN("block %d: non-finite gradients, its parameters were not updated this step", b);
        }
    double nm = sqrt(sum);
    if (norm) *norm = nm;
    if (applied) *applied = z->clip;
    if (skipped_blocks) *skipped_blocks = skipped;
    ORK_TRY(z->be->fill(z->k, np, 0.0f, z->sums, ORK_F32));
    if (skipped) ORK_TRY(z->be->fill(z->k, nb, 0.0f, z->bad, ORK_F32)); /* zero bytes */
    if (isfinite(nm)) ork_tstream_set_prev_norm(z, nm);
    return ORK_OK;
}
