/* stream/streamer.c — see streamer.h. */
#include "stream/streamer.h"
#include "stream/reader_history.h"

#include "cpu/cpu.h" /* ork_par_for */
#include "platform/platform.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

#define R_EVENTS 16 /* lent entries in flight, and entered entries remembered */
#define E_MAX 8     /* entries copied ahead */
#define G_EVENTS 32 /* coded pieces whose decode is remembered (the staging ring's history) */

typedef struct visit {
    int block;
    int uses; /* consecutive repeats merged into this visit */
} visit;

struct ork_streamer {
    ork_copy_engine *ce;
    ork_alloc *a;
    int n_blocks, K, ev0;
    uint8_t *streamed;     /* [n_blocks] */
    size_t *bytes;         /* [n_blocks] */
    uint8_t **host;        /* [n_blocks] region in an arena */
    void **arena;          /* [n_arenas] */
    int n_arenas;
    size_t host_total;
    void **slot;           /* [K] */
    size_t slot_bytes;
    int n_streamed;
    /* the pass */
    visit *vis;            /* [cap] */
    int cap, nv, v, issued, left, active;
    int base;              /* visit x goes to slot (x + base) % K */
    int *content;          /* [K] block whose weights a slot holds (-1: none): frozen
                            * weights never change, so a visit to a block its slot
                            * still holds needs no copy (the backward's second block
                            * with K = 2; the next pass's first blocks) */
    uint64_t loads, h2d, raw, reused;
    /* transit coding */
    int compress, nthreads;
    double max_ratio;
    uint8_t *dirty;        /* [n_blocks] written since it was last considered for coding */
    size_t *coded;         /* [n_blocks] coded bytes in the region (all its pieces), 0: raw */
    size_t piece;          /* raw bytes a piece covers: a block is coded as independent pieces so
                            * the DEC lane decodes one while the H2D lane copies the next */
    int *pfirst;           /* [n_blocks + 1] index of the block's first piece in phdr / poff */
    ork_transit_hdr *phdr;  /* [pieces] each coded piece's header (the deferred CPU decode reads it) */
    size_t *poff;          /* [pieces] its offset in the coded region */
    void *staging;         /* the staging ring: coded pieces in copy order, wrapped once full */
    size_t staging_bytes;
    int n_coded;
    size_t g_off;          /* where the next piece goes in the ring */
    /* the pieces copied last: a copy into their bytes waits for the decode of
     * the newest one it overlaps (the DEC lane is in order) */
    byte_range g_hist[G_EVENTS]; /* piece g_seq - 1 - h at (g_seq - 1 - h) % G_EVENTS */
    int g_seq;             /* pieces copied through the ring so far: event ev_gdone(g_seq % G_EVENTS) */
    /* lending (ork_streamer_lend): the forward's loads copied back to back into
     * borrowed memory, a FIFO of entries, each decoded into its slot on the
     * compute lane when its visit is entered */
    uint8_t *kind;         /* [cap] this pass's visit: 0 ring (or reused), 1 lent */
    int x_turn;            /* the first visit after the forward (nv: a forward-only pass) */
    int lend_ok;           /* the copy engine has the events lending needs */
    uint8_t *lend;         /* the lent memory, NULL: none */
    size_t lend_bytes;
    int r_first, r_next;   /* lent visits r_first.. (kind 1) copied up to r_next, not yet entered */
    int r_last;            /* the last one copied (-1: none): the FIFO's head */
    size_t *r_off;         /* [cap] a lent visit's offset in the lent memory */
    int *r_ev;             /* [cap] its copy's event */
    int r_seq;             /* entries copied so far: event ev_rc(r_seq % R_EVENTS) */
    /* the entries entered (decoded) last: a copy into their bytes waits for the
     * decode of the newest one it overlaps — not for the last decode enqueued,
     * which with the host ahead of the device would hold the lane back to the
     * compute's pace (a FIFO of one) */
    byte_range r_hist[R_EVENTS]; /* entry r_dseq - 1 - h at (r_dseq - 1 - h) % R_EVENTS */
    int r_dseq;            /* entries entered so far: event ev_rd(r_dseq % R_EVENTS) */
    int r_entered;         /* of them since the lend (the history holds min(this, R_EVENTS)) */
    int r_go;              /* this pass's FIFO has started: copies are issued from the first enter on,
                            * after the model's pass set-up — its pageable uploads queue behind
                            * whatever H2D copies precede them (54 ms measured behind a FIFO) */
    uint64_t lent_loads;
    /* the next pass's first lent visits, copied ahead at this pass's end (after
     * its last ring load) into the staging buffer and the ahead region: the link
     * idles there (the last backward blocks, the optimizer step, the next
     * inputs) while the forward that follows is bound by it; each decoded at
     * enter like a lent entry (copy_ahead) */
    int e_pred[E_MAX];     /* the last lent pass's first lent visits' blocks (the next one's, predicted) */
    int e_npred;
    int e_hint;            /* ork_streamer_next_lent: the pass after this one is lent (1) or not (0); -1:
                            * as this one */
    int e_lent;            /* this pass has lent visits */
    int e_n;               /* entries copied ahead, in visit order: the first in the staging buffer,
                            * the rest in the ahead region (ork_streamer_set_ahead) */
    int e_blk[E_MAX];
    uint8_t *e_src[E_MAX];
    int e_used, e_next;    /* this pass: of them taken (visits of kind 2), entered */
    int e_wait;            /* a staging entry's decode read the buffer: the next staging copy waits for it */
    uint8_t *a_mem;        /* the ahead region: the trainer's checkpoints (see set_ahead) */
    size_t *a_off;         /* [a_n + 1] boundary i's first byte in it; [a_n]: its size */
    int a_n;
    uint64_t early_loads;
};

/* Lending's events after the ring's 2K: "lent memory free" (compute lane),
 * "lent copies done" (H2D lane), one per entry copy in flight, one per entry
 * decode (the history, R_EVENTS long: see struct ork_streamer); then the
 * copy ahead's "copied" (H2D lane) and "decoded" (compute lane); then the
 * staging ring's "piece copied" (H2D lane) and one "piece decoded" per piece
 * remembered (DEC lane). */

static int slot_of(const ork_streamer *s, int x) { return (x + s->base) % s->K; }

static size_t align_up(size_t n) { return (n + ORK_STREAM_ALIGN - 1) / ORK_STREAM_ALIGN * ORK_STREAM_ALIGN; }

void ork_stream_rec_add(size_t *size, size_t data_bytes, size_t scale_bytes, ork_stream_rec *rec) {
    size_t off = align_up(*size);
    rec->offset = off;
    rec->data_bytes = data_bytes;
    rec->scale_offset = scale_bytes ? (off + data_bytes + 15) / 16 * 16 : off + data_bytes;
    rec->scale_bytes = scale_bytes;
    *size = rec->scale_offset + scale_bytes;
}

static int ev_ready(const ork_streamer *s, int slot) { return s->ev0 + 2 * slot; }
static int ev_free(const ork_streamer *s, int slot) { return s->ev0 + 2 * slot + 1; }
static int ev_rfree(const ork_streamer *s) { return s->ev0 + 2 * s->K; }
static int ev_rdone(const ork_streamer *s) { return s->ev0 + 2 * s->K + 1; }
static int ev_rc(const ork_streamer *s, int seq) { return s->ev0 + 2 * s->K + 2 + seq % R_EVENTS; }
static int ev_rd(const ork_streamer *s, int seq) { return s->ev0 + 2 * s->K + 2 + R_EVENTS + seq % R_EVENTS; }
static int ev_ecopy(const ork_streamer *s, int i) { return s->ev0 + 2 * s->K + 2 + 2 * R_EVENTS + i; }
static int ev_edone(const ork_streamer *s) { return s->ev0 + 2 * s->K + 2 + 2 * R_EVENTS + E_MAX; }
static int ev_eregion(const ork_streamer *s) { return s->ev0 + 2 * s->K + 3 + 2 * R_EVENTS + E_MAX; }
static int ev_gcopied(const ork_streamer *s) { return s->ev0 + 2 * s->K + 4 + 2 * R_EVENTS + E_MAX; }
static int ev_gdone(const ork_streamer *s, int seq) { return s->ev0 + 2 * s->K + 5 + 2 * R_EVENTS + E_MAX + seq % G_EVENTS; }

static ork_status e_drop(ork_streamer *s, int from);

static ork_status set_region(ork_streamer *s, void *dev, const size_t *off, int n) {
    free(s->a_off);
    s->a_off = NULL;
    s->a_mem = NULL;
    s->a_n = 0;
    if (!dev || n < 1 || !off) return ORK_OK;
    s->a_off = malloc((size_t)(n + 1) * sizeof *s->a_off);
    if (!s->a_off) return ORK_E_NOMEM;
    memcpy(s->a_off, off, (size_t)(n + 1) * sizeof *off);
    s->a_mem = dev;
    s->a_n = n;
    return ORK_OK;
}

int ork_streamer_n_events(int n_slots) { return 2 * n_slots + 5 + 2 * R_EVENTS + E_MAX + G_EVENTS; }

ork_status ork_streamer_create(ork_copy_engine *ce, ork_alloc *a, const ork_streamer_opts *o, ork_streamer **out) {
    if (o->n_slots < 2) return ORK_FAIL(ORK_E_INVALID, "streamer: a ring needs at least 2 slots, got %d", o->n_slots);
    if (o->event_base < 0 || o->event_base + 2 * o->n_slots > ork_ce_n_events(ce))
        return ORK_FAIL(ORK_E_INVALID, "streamer: %d slots need events %d..%d but the copy engine has %d", o->n_slots,
                        o->event_base, o->event_base + 2 * o->n_slots - 1, ork_ce_n_events(ce));
    if (o->compress && o->event_base + ork_streamer_n_events(o->n_slots) > ork_ce_n_events(ce))
        return ORK_FAIL(ORK_E_INVALID, "streamer: coding in transit needs events %d..%d but the copy engine has %d",
                        o->event_base, o->event_base + ork_streamer_n_events(o->n_slots) - 1, ork_ce_n_events(ce));
    ork_streamer *s = calloc(1, sizeof *s);
    if (!s) return ORK_E_NOMEM;
    s->ce = ce;
    s->a = a;
    s->n_blocks = o->n_blocks;
    s->K = o->n_slots;
    s->ev0 = o->event_base;
    s->lend_ok = o->event_base + ork_streamer_n_events(o->n_slots) <= ork_ce_n_events(ce);
    s->r_last = -1;
    s->e_hint = -1;
    size_t nb = (size_t)o->n_blocks + 1;
    s->streamed = calloc(nb, 1);
    s->bytes = calloc(nb, sizeof *s->bytes);
    s->host = calloc(nb, sizeof *s->host);
    s->arena = calloc(nb, sizeof *s->arena);
    s->slot = calloc((size_t)s->K, sizeof *s->slot);
    s->content = malloc((size_t)s->K * sizeof *s->content);
    s->dirty = calloc(nb, 1);
    s->coded = calloc(nb, sizeof *s->coded);
    s->pfirst = calloc(nb + 1, sizeof *s->pfirst);
    s->compress = o->compress;
    s->max_ratio = o->max_ratio > 0 ? o->max_ratio : ORK_STREAM_CODEC_RATIO;
    s->nthreads = o->nthreads > 0 ? o->nthreads : 1;
    if (!s->streamed || !s->bytes || !s->host || !s->arena || !s->slot || !s->content || !s->dirty || !s->coded ||
        !s->pfirst) {
        ork_streamer_destroy(s);
        return ORK_E_NOMEM;
    }
    for (int k = 0; k < s->K; k++) s->content[k] = -1;
    size_t chunk = o->arena_bytes ? o->arena_bytes : (size_t)1 << 30;
    /* arenas: first-fit in block order; the current chunk is closed when a block does not fit */
    size_t used = 0, cap = 0;
    uint8_t *cur = NULL;
    ork_status st = ORK_OK;
    for (int b = 0; b < o->n_blocks && st == ORK_OK; b++) {
        if (!o->streamed[b]) continue;
        s->streamed[b] = 1;
        s->n_streamed++;
        size_t need = align_up(o->block_bytes[b]);
        if (!need) need = ORK_STREAM_ALIGN;
        s->bytes[b] = o->block_bytes[b];
        if (o->block_bytes[b] > s->slot_bytes) s->slot_bytes = o->block_bytes[b];
        if (!cur || used + need > cap) {
            /* size the chunk: the rest of the streamed blocks up to `chunk`, or this block alone */
            size_t want = 0;
            for (int c = b; c < o->n_blocks; c++) {
                if (!o->streamed[c]) continue;
                size_t nc = align_up(o->block_bytes[c]);
                if (!nc) nc = ORK_STREAM_ALIGN;
                if (want && want + nc > chunk) break;
                want += nc;
            }
            st = ork_ce_host_alloc(ce, want, (void **)&cur);
            if (st != ORK_OK) break;
            s->arena[s->n_arenas++] = cur;
            s->host_total += want;
            used = 0;
            cap = want;
        }
        s->host[b] = cur + used;
        s->dirty[b] = 1;
        memset(s->host[b], 0, need); /* the padding travels too: keep it defined */
        used += need;
    }
    if (s->slot_bytes == 0) s->slot_bytes = ORK_STREAM_ALIGN;
    for (int k = 0; k < s->K && st == ORK_OK && s->n_streamed; k++) st = ork_alloc_get(a, s->slot_bytes, "stream_slots", &s->slot[k]);
    if (st == ORK_OK && s->compress && s->n_streamed) {
        s->piece = ork_stream_piece_bytes(o->piece_bytes, s->slot_bytes);
        for (int b = 0; b < s->n_blocks; b++)
            s->pfirst[b + 1] = s->pfirst[b] + (s->streamed[b] ? (int)((s->bytes[b] + s->piece - 1) / s->piece) : 0);
        size_t np = (size_t)s->pfirst[s->n_blocks] + 1;
        s->phdr = calloc(np, sizeof *s->phdr);
        s->poff = calloc(np, sizeof *s->poff);
        if (!s->phdr || !s->poff) st = ORK_E_NOMEM;
        s->staging_bytes = ork_stream_staging_bytes(s->slot_bytes, s->max_ratio);
        if (st == ORK_OK) st = ork_alloc_get(a, s->staging_bytes, "stream_staging", &s->staging);
    }
    if (st != ORK_OK) { ork_streamer_destroy(s); return st; }
    *out = s;
    return ORK_OK;
}

void ork_streamer_destroy(ork_streamer *s) {
    if (!s) return;
    if (s->ce && s->n_streamed) (void)ork_ce_sync(s->ce); /* no copy may still read an arena or write a slot */
    for (int k = 0; s->slot && k < s->K; k++)
        if (s->slot[k]) ork_alloc_put(s->a, s->slot[k]);
    if (s->staging) ork_alloc_put(s->a, s->staging);
    free(s->a_off);
    for (int i = 0; s->arena && i < s->n_arenas; i++) ork_ce_host_free(s->ce, s->arena[i]);
    free(s->streamed);
    free(s->bytes);
    free(s->host);
    free(s->arena);
    free(s->slot);
    free(s->content);
    free(s->dirty);
    free(s->coded);
    free(s->pfirst);
    free(s->phdr);
    free(s->poff);
    free(s->vis);
    free(s->kind);
    free(s->r_off);
    free(s->r_ev);
    free(s);
}

int ork_streamer_is_streamed(const ork_streamer *s, int block) {
    return block >= 0 && block < s->n_blocks && s->streamed[block];
}

size_t ork_stream_piece_bytes(size_t piece_bytes, size_t slot_bytes) {
    size_t p = piece_bytes ? piece_bytes / ORK_STREAM_ALIGN * ORK_STREAM_ALIGN : SIZE_MAX / 2; /* 0: whole blocks */
    if (!p) p = ORK_STREAM_ALIGN;
    /* the ring remembers G_EVENTS pieces: a block in at most half of them */
    size_t least = align_up((slot_bytes + G_EVENTS / 2 - 1) / (G_EVENTS / 2));
    return p < least ? least : p;
}

size_t ork_stream_staging_bytes(size_t slot_bytes, double max_ratio) {
    size_t b = (size_t)((double)slot_bytes * max_ratio);
    return align_up(b);
}

/* Piece q of block b: its raw bytes start at (q - pfirst[b]) x piece. */
static size_t piece_raw(const ork_streamer *s, int b, int q, size_t *at) {
    *at = (size_t)(q - s->pfirst[b]) * s->piece;
    size_t left = s->bytes[b] - *at;
    return left < s->piece ? left : s->piece;
}

/* A coded region back to its raw bytes, in place (through a scratch copy). */
static ork_status uncode(ork_streamer *s, int b) {
    if (!s->coded[b]) return ORK_OK;
    ORK_TRY(ork_ce_sync(s->ce)); /* no load may still read the coded bytes */
    uint8_t *tmp = malloc(s->coded[b]);
    if (!tmp) return ORK_E_NOMEM;
    memcpy(tmp, s->host[b], s->coded[b]);
    ork_status st = ORK_OK;
    for (int q = s->pfirst[b]; q < s->pfirst[b + 1] && st == ORK_OK; q++) {
        size_t at;
        (void)piece_raw(s, b, q, &at);
        st = ork_transit_decode(tmp + s->poff[q], s->phdr[q].coded_bytes, s->host[b] + at, s->nthreads);
    }
    free(tmp);
    if (st != ORK_OK) return ORK_FAIL(st, "streamer: block %d: its coded region does not decode", b);
    s->coded[b] = 0;
    s->n_coded--;
    return ORK_OK;
}

void *ork_streamer_host(ork_streamer *s, int block) {
    if (!ork_streamer_is_streamed(s, block)) return NULL;
    if (uncode(s, block) != ORK_OK) return NULL;
    /* the caller may write the region: no slot's copy of it counts as current */
    for (int k = 0; k < s->K; k++)
        if (s->content[k] == block) s->content[k] = -1;
    for (int i = 0; !s->active && i < s->e_n; i++) /* nor the bytes copied ahead, from it on */
        if (s->e_blk[i] == block && e_drop(s, i) != ORK_OK) return NULL;
    s->dirty[block] = 1;
    return s->host[block];
}

/* The sizing pass of seal: the coded size of each piece of the blocks to code,
 * over all cores (a piece per task: ork_transit_coded_bytes is one thread). */
typedef struct size_job {
    ork_streamer *s;
    const int *blk; /* [pieces] the piece's block, -1: not to be coded now */
    size_t *csize;  /* [pieces] */
    uint8_t *kind;  /* [pieces] the ork_transit_kind that codes it smallest */
} size_job;

/* Which coding: each codes a sample (BF16 weights: as 16-bit words, ~0.68-0.69;
 * FP8 E5M2: as bytes, ~0.68-0.77; each does badly on the other's input), the
 * smaller sizes the whole piece; only when that does not pay does the other
 * (a sample unlike the rest of the block). */
#define SIZE_SAMPLE ((size_t)1 << 20)

static void size_range(void *ctx, int64_t lo, int64_t hi) {
    size_job *j = ctx;
    for (int64_t q = lo; q < hi; q++) {
        int b = j->blk[q];
        if (b < 0) continue;
        size_t at, raw = piece_raw(j->s, b, (int)q, &at);
        const uint8_t *p = j->s->host[b] + at;
        size_t ns = raw < SIZE_SAMPLE ? raw : SIZE_SAMPLE, ss[ORK_TRANSIT_KINDS];
        int order[ORK_TRANSIT_KINDS];
        for (int k = 0; k < ORK_TRANSIT_KINDS; k++) {
            ss[k] = ork_transit_coded_bytes((ork_transit_kind)k, p, ns, NULL);
            if (!ss[k]) ss[k] = SIZE_MAX; /* refused */
            int i = k;
            for (; i > 0 && ss[order[i - 1]] > ss[k]; i--) order[i] = order[i - 1];
            order[i] = k;
        }
        size_t c = 0;
        int best = order[0];
        for (int i = 0; i < ORK_TRANSIT_KINDS && ss[order[i]] != SIZE_MAX; i++) {
            size_t ci = ork_transit_coded_bytes((ork_transit_kind)order[i], p, raw, NULL);
            if (ci > 0 && (c == 0 || ci < c)) { c = ci; best = order[i]; }
            if (c > 0 && (double)c <= j->s->max_ratio * (double)raw) break; /* pays: the sample did not mislead */
        }
        j->kind[q] = (uint8_t)best;
        j->csize[q] = c;
    }
}

/* memcpy over all cores in 16 MiB pieces: one thread copies a coded block back
 * at a few GB/s, as long as coding it took on all of them. */
typedef struct copy_job {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
} copy_job;
#define PAR_COPY_PIECE ((size_t)16 << 20)

static void copy_range(void *ctx, int64_t lo, int64_t hi) {
    const copy_job *j = ctx;
    size_t a = (size_t)lo * PAR_COPY_PIECE, z = (size_t)hi * PAR_COPY_PIECE;
    if (z > j->n) z = j->n;
    memcpy(j->dst + a, j->src + a, z - a);
}

static void par_copy(uint8_t *dst, const uint8_t *src, size_t n, int nthreads) {
    copy_job j = {dst, src, n};
    ork_par_for(nthreads, (int64_t)((n + PAR_COPY_PIECE - 1) / PAR_COPY_PIECE), 1, copy_range, &j);
}

/* Code every written block that shrinks enough, in place (the coded form is
 * never longer than what it replaces: it must fit in staging_bytes <= raw). */
ork_status ork_streamer_seal(ork_streamer *s) {
    int any = 0;
    for (int b = 0; s->compress && b < s->n_blocks && !any; b++) any = s->streamed[b] && s->dirty[b];
    if (!any) return ORK_OK; /* every pass_begin asks: nothing written since */
    uint64_t t0 = ork_time_ns();
    int np = s->pfirst[s->n_blocks], done = 0;
    int *blk = malloc(((size_t)np + 1) * sizeof *blk);
    size_t *csize = calloc((size_t)np + 1, sizeof *csize);
    uint8_t *kind = calloc((size_t)np + 1, 1);
    if (!blk || !csize || !kind) { free(blk); free(csize); free(kind); return ORK_E_NOMEM; }
    for (int b = 0; b < s->n_blocks; b++)
        for (int q = s->pfirst[b]; q < s->pfirst[b + 1]; q++) blk[q] = s->streamed[b] && s->dirty[b] && s->bytes[b] ? b : -1;
    size_job sj = {s, blk, csize, kind};
    ork_par_for(s->nthreads, np, 1, size_range, &sj);
    free(blk);
    uint8_t *tmp = NULL;
    size_t tmp_cap = 0;
    int n_kind[ORK_TRANSIT_KINDS] = {0};
    for (int b = 0; b < s->n_blocks; b++) {
        if (!s->streamed[b] || !s->dirty[b]) continue;
        s->dirty[b] = 0;
        done++;
        if (!s->bytes[b]) continue;
        /* every piece must fit the staging buffer and the block must shrink to max_ratio */
        size_t n = 0;
        int fit = 1;
        for (int q = s->pfirst[b]; q < s->pfirst[b + 1] && fit; q++) {
            size_t c = csize[q];
            fit = c > 0 && c <= s->staging_bytes;
            s->poff[q] = n;
            n += c;
        }
        if (!fit || (double)n > s->max_ratio * (double)s->bytes[b]) continue; /* travels raw */
        if (n > tmp_cap) { /* one scratch for every block: fresh pages per block cost as much as the coding */
            free(tmp);
            tmp = malloc(n);
            tmp_cap = tmp ? n : 0;
            if (!tmp) { free(csize); free(kind); return ORK_E_NOMEM; }
        }
        ork_status st = ORK_OK;
        for (int q = s->pfirst[b]; q < s->pfirst[b + 1] && st == ORK_OK; q++) {
            size_t at, raw = piece_raw(s, b, q, &at), got = 0, cap = (q + 1 < s->pfirst[b + 1] ? s->poff[q + 1] : n) - s->poff[q];
            st = ork_transit_encode((ork_transit_kind)kind[q], s->host[b] + at, raw, tmp + s->poff[q], cap, &got,
                                        s->nthreads);
            if (st == ORK_OK) st = ork_transit_header(tmp + s->poff[q], got, &s->phdr[q]);
        }
        if (st == ORK_OK) par_copy(s->host[b], tmp, n, s->nthreads);
        if (st != ORK_OK) {
            free(tmp);
            free(csize);
            free(kind);
            return ORK_FAIL(st, "streamer: coding block %d failed", b);
        }
        s->coded[b] = n;
        s->n_coded++;
        n_kind[kind[s->pfirst[b]]]++;
    }
    free(tmp);
    free(csize);
    free(kind);
    if (done && !s->n_coded)
        ORK_INFO("streaming: no streamed block shrinks to %.2f of its bytes when coded (E4M3 or F32 weights code "
                 "poorly): all travel raw", s->max_ratio);
    if (done && s->n_coded) {
        double raw = 0, coded = 0;
        for (int b = 0; b < s->n_blocks; b++)
            if (s->streamed[b]) {
                raw += (double)s->bytes[b];
                coded += (double)(s->coded[b] ? s->coded[b] : s->bytes[b]);
            }
        ORK_INFO("streaming: %d of %d streamed blocks travel coded (lossless; blocks as 16-bit words %d, as bytes "
                 "%d): %.3f of their bytes, staging %.1f MiB, coded in %.1f s",
                 s->n_coded, s->n_streamed, n_kind[ORK_TRANSIT_WORDS], n_kind[ORK_TRANSIT_BYTES], coded / raw,
                 (double)s->staging_bytes / 1048576.0,
                 1e-9 * (double)(ork_time_ns() - t0));
    }
    return ORK_OK;
}

static ork_status copy_ahead(ork_streamer *s);

/* Before the H2D lane writes the staging buffer: an entry copied ahead into it
 * may still be decoded from it on the compute lane (e_enter's EDONE). */
static ork_status staging_reuse(ork_streamer *s) {
    if (!s->e_wait) return ORK_OK;
    s->e_wait = 0;
    return ork_ce_wait(s->ce, ORK_LANE_H2D, ev_edone(s));
}

/* Where the next coded piece of len bytes goes in the staging ring (wrapping
 * to its start when the rest is too short); the H2D lane first waits for the
 * decode of the newest piece whose bytes it overlaps. */
static ork_status g_place(ork_streamer *s, size_t len, size_t *off) {
    size_t l = align_up(len);
    if (s->g_off + l > s->staging_bytes) s->g_off = 0;
    *off = s->g_off;
    int wait = reader_history_last(s->g_hist, G_EVENTS, s->g_seq, s->g_seq, *off, l);
    if (wait >= 0) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_gdone(s, wait)));
    reader_history_put(s->g_hist, G_EVENTS, s->g_seq, *off, l);
    s->g_off += l;
    return ORK_OK;
}

/* The next visit's load (none for a lent visit, one copied ahead or a block
 * its slot still holds). */
static ork_status load_next(ork_streamer *s) {
    int x = s->issued, slot = slot_of(s, x), b = s->vis[x].block;
    if (s->kind[x]) { /* lent (copied by r_fill) or copied ahead: decoded at enter */
        s->issued++;
        return ORK_OK;
    }
    ork_ce_set_tag(s->ce, b); /* the lane trace's tag: the block loaded */
    if (s->content[slot] == b) {
        /* nothing to copy, and nothing on the H2D lane: a READY recorded there now
         * would queue behind every copy issued before it (a lent FIFO's: 54 ms at
         * a forward's start, measured). The slot's last READY record (the load that
         * filled it) stands; a lent decode filled it on the compute lane itself. */
        s->reused++;
        s->issued++;
        return ORK_OK;
    } else {
        if (s->coded[b]) {
            /* piece by piece through the staging ring: the H2D lane copies each
             * one once the ring's bytes are decoded (g_place; an entry copied
             * ahead, decoded on the compute lane: staging_reuse), the DEC lane
             * decodes it into the slot once the slot is free — the link copies
             * on meanwhile, and the copies need not wait for the slot */
            ORK_TRY(staging_reuse(s));
            for (int q = s->pfirst[b]; q < s->pfirst[b + 1]; q++) {
                size_t at, off, len = s->phdr[q].coded_bytes;
                (void)piece_raw(s, b, q, &at);
                ORK_TRY(g_place(s, len, &off));
                ORK_TRY(ork_ce_copy(s->ce, ORK_LANE_H2D, (uint8_t *)s->staging + off, s->host[b] + s->poff[q], len));
                ORK_TRY(ork_ce_record(s->ce, ORK_LANE_H2D, ev_gcopied(s)));
                ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_DEC, ev_gcopied(s)));
                if (q == s->pfirst[b]) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_DEC, ev_free(s, slot)));
                ORK_TRY(ork_ce_decode(s->ce, ORK_LANE_DEC, (uint8_t *)s->slot[slot] + at, (uint8_t *)s->staging + off,
                                      &s->phdr[q]));
                ORK_TRY(ork_ce_record(s->ce, ORK_LANE_DEC, ev_gdone(s, s->g_seq++)));
            }
            ORK_TRY(ork_ce_record(s->ce, ORK_LANE_DEC, ev_ready(s, slot)));
        } else {
            ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_free(s, slot)));
            ORK_TRY(ork_ce_copy(s->ce, ORK_LANE_H2D, s->slot[slot], s->host[b], s->bytes[b]));
            ORK_TRY(ork_ce_record(s->ce, ORK_LANE_H2D, ev_ready(s, slot)));
        }
        s->content[slot] = b;
        s->loads++;
        s->h2d += s->coded[b] ? s->coded[b] : s->bytes[b];
        s->raw += s->bytes[b];
    }
    s->issued++;
    return ORK_OK;
}

/* Issue the next visit's load; after the pass's last, the next pass's first
 * loads are copied ahead. */
static ork_status issue(ork_streamer *s) {
    ORK_TRY(load_next(s));
    return s->issued == s->nv ? copy_ahead(s) : ORK_OK;
}

/* ---- lending -------------------------------------------------------------- */

/* What a block's lent entry holds: its coded bytes, or its raw ones. */
static size_t entry_bytes(const ork_streamer *s, int b) { return s->coded[b] ? s->coded[b] : s->bytes[b]; }

/* The first lent visit (kind 1) at or after x (x_turn: none left). */
static int next_lent(const ork_streamer *s, int x) {
    while (x < s->x_turn && s->kind[x] != 1) x++;
    return x < s->x_turn ? x : s->x_turn;
}

/* The pass's ring rotation (the one that finds the most of the first K visits
 * in place), where the forward ends, and each visit's kind: lent when memory is
 * lent, the visit is in the forward and its block is not still in its slot. */
static void assign(ork_streamer *s) {
    int best = -1;
    for (int base = 0; base < s->K; base++) {
        int hit = 0;
        for (int x = 0; x < s->K && x < s->nv; x++) hit += s->content[(x + base) % s->K] == s->vis[x].block;
        if (hit > best) { best = hit; s->base = base; }
    }
    s->x_turn = s->nv;
    for (int x = 1; x < s->nv; x++)
        if (s->vis[x].block < s->vis[x - 1].block) { s->x_turn = x; break; }
    for (int x = 0; x < s->nv; x++)
        s->kind[x] = s->lend && x < s->x_turn && !(x < s->K && s->content[slot_of(s, x)] == s->vis[x].block);
}

/* Where the next entry of `len` bytes goes in the FIFO (entries r_first..r_last
 * lie in copy order, possibly wrapped once), or 0 when it does not fit yet. */
static int fifo_place(const ork_streamer *s, size_t len, size_t *off) {
    if (s->r_first >= s->r_next || s->r_last < 0) {
        *off = 0;
        return len <= s->lend_bytes;
    }
    if (s->r_seq - s->r_ev[s->r_first] >= R_EVENTS) return 0; /* every entry event in flight */
    size_t tail = s->r_off[s->r_first], head = s->r_off[s->r_last] + align_up(entry_bytes(s, s->vis[s->r_last].block));
    if (s->r_off[s->r_last] >= tail) { /* not wrapped: [head, end) then [0, tail) */
        if (head + len <= s->lend_bytes) { *off = head; return 1; }
        if (len <= tail) { *off = 0; return 1; }
        return 0;
    }
    if (head + len <= tail) { *off = head; return 1; }
    return 0;
}

/* Copy the next lent visits into the lent memory while they fit: back to back
 * on the H2D lane, no slot to wait for; each copy waits for the decodes that
 * freed its bytes (the last "free" record on the compute lane covers them all). */
static ork_status r_fill(ork_streamer *s) {
    for (int x = next_lent(s, s->r_next); s->lend && s->r_go && x < s->x_turn; x = next_lent(s, x + 1)) {
        int b = s->vis[x].block;
        size_t off, len = entry_bytes(s, b);
        if (!fifo_place(s, align_up(len), &off)) break;
        ork_ce_set_tag(s->ce, b);
        /* the bytes' last readers: the decodes of the entered entries it overlaps
         * (the newest of them is enough: the compute lane is in order), or, for
         * bytes no entry has held since the lend, the owner (the lend's record) */
        int wait = reader_history_last(s->r_hist, R_EVENTS, s->r_dseq, s->r_entered, off, align_up(len));
        ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_rfree(s))); /* complete after the first copies: free */
        if (wait >= 0) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_rd(s, wait)));
        ORK_TRY(ork_ce_copy(s->ce, ORK_LANE_H2D, s->lend + off, s->host[b], len));
        s->r_ev[x] = s->r_seq++;
        ORK_TRY(ork_ce_record(s->ce, ORK_LANE_H2D, ev_rc(s, s->r_ev[x])));
        s->r_off[x] = off;
        s->r_last = x;
        s->r_next = x + 1;
        s->h2d += len;
        s->raw += s->bytes[b];
    }
    return ORK_OK;
}

/* Block b's entry (its coded bytes, or its raw ones) at src on the device
 * into its slot, on the compute lane. */
static ork_status unpack(ork_streamer *s, int b, int slot, const uint8_t *src) {
    if (!s->coded[b]) return ork_ce_copy_d2d(s->ce, ORK_LANE_COMPUTE, s->slot[slot], src, s->bytes[b]);
    for (int q = s->pfirst[b]; q < s->pfirst[b + 1]; q++) {
        size_t at;
        (void)piece_raw(s, b, q, &at);
        ORK_TRY(ork_ce_decode(s->ce, ORK_LANE_COMPUTE, (uint8_t *)s->slot[slot] + at, src + s->poff[q], &s->phdr[q]));
    }
    return ORK_OK;
}

/* Enter a lent visit: wait for its copy, decode it (a raw block: copy it) from
 * the lent memory into its slot on the compute lane, free its bytes. */
static ork_status r_enter(ork_streamer *s, int x) {
    int b = s->vis[x].block, slot = slot_of(s, x);
    if (x >= s->r_next) ORK_TRY(r_fill(s)); /* not copied yet: the FIFO was full of older ones */
    if (x != s->r_first || x >= s->r_next)
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: lent visit %d (block %d) entered out of order", x, b);
    ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_COMPUTE, ev_rc(s, s->r_ev[x])));
    ORK_TRY(unpack(s, b, slot, s->lend + s->r_off[x]));
    reader_history_put(s->r_hist, R_EVENTS, s->r_dseq, s->r_off[x], align_up(entry_bytes(s, b)));
    ORK_TRY(ork_ce_record(s->ce, ORK_LANE_COMPUTE, ev_rd(s, s->r_dseq)));
    s->r_dseq++;
    s->r_entered++;
    s->content[slot] = b;
    s->loads++;
    s->lent_loads++;
    s->r_first = next_lent(s, x + 1);
    if (s->r_first >= s->r_next) s->r_last = -1; /* empty */
    return r_fill(s);
}

static void r_drop(ork_streamer *s) {
    s->r_first = s->r_next = 0;
    s->r_last = -1;
}

/* At the pass's last ring issue (the H2D lane's last use of the staging buffer
 * in this pass is queued): copy the next pass's first lent visits, as this
 * pass's predict them, ahead — the first into the staging buffer, the next
 * into the ahead region's tail from boundary m on while they fit, m past the
 * last of their blocks (the next forward writes boundary m after block m - 1,
 * entered after the entry's decode)
 * and no lower than this pass's backward has read (its block m is enqueued).
 * A pass that turns out otherwise drops them. */
static ork_status copy_ahead(ork_streamer *s) {
    if (!(s->e_hint >= 0 ? s->e_hint : s->e_lent)) return ORK_OK; /* the next pass's loads take the ring */
    if (s->e_n || s->x_turn >= s->nv) return ORK_OK;
    int first = 0, nreg = 0;
    if (s->e_npred > 0 && s->staging && entry_bytes(s, s->e_pred[0]) <= s->staging_bytes) first = 1;
    /* how many go to the region: the most whose bytes fit the tail above their last block */
    int m_reg = 0; /* the boundary the region's entries start at */
    if (s->a_mem && s->v >= s->x_turn) {
        size_t need = 0;
        for (int i = first; i < s->e_npred; i++) {
            int b = s->e_pred[i], m = b + 1 > s->vis[s->v].block ? b + 1 : s->vis[s->v].block;
            need += align_up(entry_bytes(s, b));
            if (m > s->a_n || need > s->a_off[s->a_n] - s->a_off[m]) break;
            nreg = i - first + 1;
            m_reg = m;
        }
    }
    int n = first + nreg;
    size_t off = 0;
    if (nreg) { /* the tail's last readers: the owner's work enqueued so far */
        off = s->a_off[m_reg];
        ORK_TRY(ork_ce_record(s->ce, ORK_LANE_COMPUTE, ev_eregion(s)));
    }
    for (int i = 0; i < n; i++) {
        int b = s->e_pred[i];
        size_t len = entry_bytes(s, b);
        uint8_t *dst;
        if (i < first) {
            ORK_TRY(staging_reuse(s));
            /* the ring's pieces are read by their decodes, the newest last (DEC lane) */
            if (s->g_seq > 0) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_gdone(s, s->g_seq - 1)));
            dst = s->staging;
        } else {
            if (i == first) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_H2D, ev_eregion(s)));
            dst = s->a_mem + off;
            off += align_up(len);
        }
        ork_ce_set_tag(s->ce, b);
        ORK_TRY(ork_ce_copy(s->ce, ORK_LANE_H2D, dst, s->host[b], len));
        ORK_TRY(ork_ce_record(s->ce, ORK_LANE_H2D, ev_ecopy(s, i)));
        s->e_blk[i] = b;
        s->e_src[i] = dst;
        s->e_n = i + 1;
        s->h2d += len;
        s->raw += s->bytes[b];
    }
    return ORK_OK;
}

/* Drop the entries copied ahead from `from` on: the compute lane waits for the
 * copies into the ahead region (its owner writes it there later); the staging
 * buffer's next copy follows its copy on the lane. */
static ork_status e_drop(ork_streamer *s, int from) {
    for (int i = from; i < s->e_n; i++)
        if (s->e_src[i] != s->staging) ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_COMPUTE, ev_ecopy(s, i)));
    if (from < s->e_n) s->e_n = from;
    if (s->e_used > s->e_n) s->e_used = s->e_n;
    return ORK_OK;
}

/* Enter a visit copied ahead: decode it into its slot. */
static ork_status e_enter(ork_streamer *s, int x) {
    int b = s->vis[x].block, slot = slot_of(s, x), i = s->e_next;
    if (i >= s->e_used || s->e_blk[i] != b)
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: visit %d (block %d) copied ahead, entered out of order", x, b);
    ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_COMPUTE, ev_ecopy(s, i)));
    ORK_TRY(unpack(s, b, slot, s->e_src[i]));
    if (s->e_src[i] == s->staging) {
        ORK_TRY(ork_ce_record(s->ce, ORK_LANE_COMPUTE, ev_edone(s)));
        s->e_wait = 1;
    }
    if (++s->e_next == s->e_used) s->e_n = s->e_used = s->e_next = 0;
    s->content[slot] = b;
    s->loads++;
    s->early_loads++;
    return ORK_OK;
}

ork_status ork_streamer_set_ahead(ork_streamer *s, void *dev, const size_t *off, int n) {
    if (s->active) return ORK_FAIL(ORK_E_INTERNAL, "streamer: ahead region set during a pass");
    for (int i = 0; i < s->e_n; i++)
        if (s->e_src[i] != s->staging) { /* copies into the old region: done before its owner takes it back */
            ORK_TRY(e_drop(s, i));
            break;
        }
    return set_region(s, dev, off, n);
}

ork_status ork_streamer_lend(ork_streamer *s, void *dev, size_t bytes) {
    if (s->active) return ORK_FAIL(ORK_E_INTERNAL, "streamer: memory lent during a pass");
    if (s->lend) return s->lend == dev ? ORK_OK : ORK_FAIL(ORK_E_INTERNAL, "streamer: memory lent twice");
    size_t need = 0;
    for (int b = 0; b < s->n_blocks; b++)
        if (s->streamed[b] && align_up(entry_bytes(s, b)) > need) need = align_up(entry_bytes(s, b));
    if (!s->lend_ok || !s->n_streamed || !dev || bytes < need) return ORK_OK; /* too small for a block: not taken */
    s->lend = dev;
    s->lend_bytes = bytes;
    ORK_TRY(ork_ce_record(s->ce, ORK_LANE_COMPUTE, ev_rfree(s))); /* free from here */
    r_drop(s);
    s->r_entered = 0; /* no entry has held these bytes since: the lend's record covers them */
    return ORK_OK;
}

ork_status ork_streamer_reclaim(ork_streamer *s) {
    if (!s->lend) return ORK_OK;
    if (s->active && (s->r_first < s->r_next || next_lent(s, s->r_next) < s->x_turn || s->e_next < s->e_used))
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: lent memory reclaimed before the pass's forward visits were entered");
    /* the compute lane's later work (the owner's) after every copy into it */
    ORK_TRY(ork_ce_record(s->ce, ORK_LANE_H2D, ev_rdone(s)));
    ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_COMPUTE, ev_rdone(s)));
    s->lend = NULL;
    s->lend_bytes = 0;
    r_drop(s);
    for (int x = 0; s->active && x < s->nv; x++)
        if (s->kind[x] == 1) s->kind[x] = 0;
    return ORK_OK;
}

int ork_streamer_lent(const ork_streamer *s) { return s->lend != NULL; }

void ork_streamer_next_lent(ork_streamer *s, int lent) { s->e_hint = lent ? 1 : 0; }

/* ---- passes --------------------------------------------------------------- */

ork_status ork_streamer_pass_begin(ork_streamer *s, const int *order, int n) {
    if (n > s->cap) {
        visit *v = realloc(s->vis, (size_t)n * sizeof *v);
        if (v) s->vis = v;
        uint8_t *k = realloc(s->kind, (size_t)n);
        if (k) s->kind = k;
        size_t *ro = realloc(s->r_off, (size_t)n * sizeof *ro);
        if (ro) s->r_off = ro;
        int *re = realloc(s->r_ev, (size_t)n * sizeof *re);
        if (re) s->r_ev = re;
        if (!v || !k || !ro || !re) return ORK_E_NOMEM;
        s->cap = n;
    }
    s->nv = 0;
    for (int i = 0; i < n; i++) {
        int b = order[i];
        if (!ork_streamer_is_streamed(s, b)) continue;
        if (s->nv > 0 && s->vis[s->nv - 1].block == b) s->vis[s->nv - 1].uses++;
        else s->vis[s->nv++] = (visit){b, 1};
    }
    ORK_TRY(ork_streamer_seal(s));
    s->v = -1;
    s->issued = 0;
    s->left = 0;
    s->active = 1;
    assign(s);
    r_drop(s);
    /* the entries copied ahead: taken while they match this pass's first lent visits */
    int m = 0, np = 0;
    for (int x = next_lent(s, 0); x < s->x_turn && np < E_MAX; x = next_lent(s, x + 1)) {
        if (m == np && m < s->e_n && s->vis[x].block == s->e_blk[m]) m++;
        s->e_pred[np++] = s->vis[x].block; /* the next pass's, predicted */
    }
    s->e_lent = np > 0;
    if (np) s->e_npred = np;
    ORK_TRY(e_drop(s, m)); /* not this pass's */
    s->e_used = m;
    s->e_next = 0;
    for (int x = next_lent(s, 0), i = 0; i < m; x = next_lent(s, x + 1), i++) s->kind[x] = 2;
    s->r_first = s->r_next = next_lent(s, 0);
    s->r_go = 0; /* the FIFO starts at the first enter (r_fill) */
    ORK_TRY(ork_ce_mark(s->ce, ORK_LANE_COMPUTE, ORK_STREAM_MARK_PASS_BEGIN));
    while (s->issued < s->nv && s->issued < s->K) ORK_TRY(issue(s));
    return ORK_OK;
}

ork_status ork_streamer_enter(ork_streamer *s, int block, void **dev) {
    *dev = NULL;
    ORK_TRY(ork_ce_mark(s->ce, ORK_LANE_COMPUTE, block)); /* the trace's block boundaries, resident ones too */
    if (s->active && s->lend && !s->r_go) { /* the model's pass set-up (its pageable uploads) is enqueued by now */
        s->r_go = 1;
        ORK_TRY(r_fill(s));
    }
    if (!ork_streamer_is_streamed(s, block)) return ORK_OK;
    if (!s->active) return ORK_FAIL(ORK_E_INTERNAL, "streamer: block %d entered outside a pass", block);
    if (s->v >= 0 && s->left > 0 && s->vis[s->v].block == block) { /* a merged repeat: still in its slot */
        *dev = s->slot[slot_of(s, s->v)];
        return ORK_OK;
    }
    if (s->v >= 0 && s->left > 0)
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: block %d entered while block %d still has %d uses", block,
                        s->vis[s->v].block, s->left);
    int nxt = s->v + 1;
    if (nxt >= s->nv || s->vis[nxt].block != block)
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: block %d entered out of the announced order (expected %d)", block,
                        nxt < s->nv ? s->vis[nxt].block : -1);
    s->v = nxt;
    s->left = s->vis[nxt].uses;
    int slot = slot_of(s, nxt);
    ork_ce_set_tag(s->ce, block);
    if (s->kind[nxt] == 1) ORK_TRY(r_enter(s, nxt));
    else if (s->kind[nxt] == 2) ORK_TRY(e_enter(s, nxt));
    else ORK_TRY(ork_ce_wait(s->ce, ORK_LANE_COMPUTE, ev_ready(s, slot)));
    *dev = s->slot[slot];
    return ORK_OK;
}

ork_status ork_streamer_leave(ork_streamer *s, int block) {
    if (!ork_streamer_is_streamed(s, block)) return ORK_OK;
    if (!s->active || s->v < 0 || s->vis[s->v].block != block || s->left <= 0)
        return ORK_FAIL(ORK_E_INTERNAL, "streamer: block %d left without being entered", block);
    if (--s->left > 0) return ORK_OK; /* it comes back (merged visit): keep the slot */
    int slot = slot_of(s, s->v);
    ORK_TRY(ork_ce_record(s->ce, ORK_LANE_COMPUTE, ev_free(s, slot)));
    /* the freed slot takes visit v + K */
    while (s->issued < s->nv && s->issued <= s->v + s->K) ORK_TRY(issue(s));
    return ORK_OK;
}

ork_status ork_streamer_pass_end(ork_streamer *s) {
    int ok = !s->active || (s->v == s->nv - 1 && s->left == 0);
    int v = s->v, nv = s->nv;
    s->active = 0;
    ORK_TRY(ork_ce_mark(s->ce, ORK_LANE_COMPUTE, ORK_STREAM_MARK_PASS_END));
    if (!ok) return ORK_FAIL(ORK_E_INTERNAL, "streamer: pass ended after %d of %d block visits", v + 1, nv);
    return ORK_OK;
}

void ork_streamer_stats_get(const ork_streamer *s, ork_streamer_stats *out) {
    out->loads = s->loads;
    out->h2d_bytes = s->h2d;
    out->raw_bytes = s->raw;
    out->n_coded = s->n_coded;
    out->staging_bytes = s->staging_bytes;
    out->reused = s->reused;
    out->lent_loads = s->lent_loads;
    out->early_loads = s->early_loads;
    out->slot_bytes = s->n_streamed ? s->slot_bytes : 0;
    out->n_slots = s->n_streamed ? s->K : 0;
    out->n_streamed = s->n_streamed;
    out->n_arenas = s->n_arenas;
    out->host_bytes = s->host_total;
}
