/* stream/copy_engine.c — see copy_engine.h. The dispatch and the CPU engine
 * (EAGER: memcpy now; DEFERRED: per-lane FIFO queues of copies and waits,
 * performed when the compute lane waits or at sync; SKEWED: the DEC lane
 * queued, the copy lanes at once). */
#include "stream/copy_engine_impl.h"

#include "platform/platform.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static double ce_now(void) {
    return 1e-9 * (double)ork_time_ns();
}

/* One copy or decode, timed into ce->busy[lane] when timing is on. */
static ork_status cpu_do(ork_copy_engine *ce, int lane, void *dst, const void *src, size_t bytes,
                         const ork_transit_hdr *hdr) {
    double t0 = ce->timing ? ce_now() : 0;
    ork_status st = ORK_OK;
    if (hdr) st = ork_transit_decode(src, hdr->coded_bytes, dst, 1);
    else memcpy(dst, src, bytes);
    if (ce->timing) {
        double t1 = ce_now();
        ce->busy[lane][hdr != NULL] += t1 - t0;
        if (ce->trace)
            ork_ce_trace_line(ce, lane, hdr != NULL, ce->tag, 1e3 * (t0 - ce->t0), 1e3 * (t1 - ce->t0));
    }
    return st;
}

/* A queued entry: a copy, a decode (hdr != NULL), or (wait_lane >= 0) a wait for the first wait_seq
 * entries of another lane — a copy lane waiting on an event is queued like
 * its copies, so what follows the wait is performed after what the event
 * covers, never before (a missing wait shows up as stale or clobbered data). */
typedef struct cpu_entry {
    void *dst;
    const void *src;
    size_t bytes;
    int wait_lane;
    uint64_t wait_seq;
    const ork_transit_hdr *hdr;
} cpu_entry;

typedef struct cpu_lane {
    cpu_entry *q;
    int head, n, cap; /* pending: q[head..n) */
    uint64_t done;    /* entries performed since create: q[head] is entry number done */
} cpu_lane;

typedef struct cpu_ce {
    ork_ce_cpu_mode mode;
    cpu_lane lane[ORK_LANES];
    int *ev_lane;      /* [n_events] lane of the last record, or -1 */
    uint64_t *ev_seq;  /* [n_events] entries queued on that lane before the record */
} cpu_ce;

static ork_status cpu_host_alloc(ork_copy_engine *ce, size_t bytes, void **ptr) {
    (void)ce;
    size_t n = (bytes + 4095) / 4096 * 4096;
    *ptr = ork_aligned_alloc(4096, n ? n : 4096);
    if (!*ptr) return ORK_FAIL(ORK_E_NOMEM, "stream: host arena of %zu bytes: out of host memory", bytes);
    return ORK_OK;
}

static void cpu_host_free(ork_copy_engine *ce, void *ptr) { (void)ce; ork_aligned_free(ptr); }

/* Perform a lane's entries up to entry number seq (a queued wait performs what
 * it waits for first; waits only point at earlier records, so this ends). */
static void perform(ork_copy_engine *ce, int lane, uint64_t seq) {
    cpu_ce *c = ce->priv;
    cpu_lane *l = &c->lane[lane];
    while (l->done < seq && l->head < l->n) {
        cpu_entry e = l->q[l->head++];
        if (e.wait_lane >= 0) perform(ce, e.wait_lane, e.wait_seq);
        else (void)cpu_do(ce, lane, e.dst, e.src, e.bytes, e.hdr); /* a decode's header was checked when queued */
        l->done++;
    }
    if (l->head == l->n) l->head = l->n = 0;
}

static ork_status push(cpu_lane *l, cpu_entry e) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        cpu_entry *q = realloc(l->q, (size_t)cap * sizeof *q);
        if (!q) return ORK_E_NOMEM;
        l->q = q;
        l->cap = cap;
    }
    l->q[l->n++] = e;
    return ORK_OK;
}

/* Whether work on lane is queued (performed when waited on) rather than done now. */
static int queued(const cpu_ce *c, ork_lane lane) {
    if (lane == ORK_LANE_COMPUTE) return 0; /* the CPU's compute is synchronous */
    return c->mode == ORK_CE_DEFERRED || (c->mode == ORK_CE_SKEWED && lane == ORK_LANE_DEC);
}

static ork_status cpu_copy_fn(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    cpu_ce *c = ce->priv;
    if (!queued(c, lane)) return cpu_do(ce, lane, dst, src, bytes, NULL);
    return push(&c->lane[lane], (cpu_entry){dst, src, bytes, -1, 0, NULL});
}

static ork_status cpu_decode(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_transit_hdr *hdr) {
    cpu_ce *c = ce->priv;
    if (!queued(c, lane)) return cpu_do(ce, lane, dst, src, hdr->raw_bytes, hdr);
    /* deferred: the coded bytes may not be there yet (a queued copy); the header was checked by the caller */
    return push(&c->lane[lane], (cpu_entry){dst, src, hdr->raw_bytes, -1, 0, hdr});
}

static ork_status cpu_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    cpu_ce *c = ce->priv;
    const cpu_lane *l = &c->lane[lane];
    c->ev_lane[ev] = (int)lane;
    c->ev_seq[ev] = l->done + (uint64_t)(l->n - l->head);
    return ORK_OK;
}

static ork_status cpu_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    cpu_ce *c = ce->priv;
    int l = c->ev_lane[ev];
    if (l < 0 || l == (int)lane) return ORK_OK; /* never recorded, or the lane's own order */
    if (queued(c, lane)) return push(&c->lane[lane], (cpu_entry){NULL, NULL, 0, l, c->ev_seq[ev], NULL});
    /* a lane that works at once: waiting = making the awaited work happen */
    perform(ce, l, c->ev_seq[ev]);
    return ORK_OK;
}

static ork_status cpu_sync(ork_copy_engine *ce) {
    cpu_ce *c = ce->priv;
    (void)c;
    for (int l = 0; l < ORK_LANES; l++) perform(ce, l, UINT64_MAX);
    return ORK_OK;
}

static ork_status cpu_host_wait(ork_copy_engine *ce, int ev) {
    cpu_ce *c = ce->priv;
    if (c->ev_lane[ev] >= 0) perform(ce, c->ev_lane[ev], c->ev_seq[ev]);
    return ORK_OK;
}

/* performed work was timed as it ran; what is still queued counts when performed */
static ork_status cpu_timing_on(ork_copy_engine *ce) { ce->t0 = ce_now(); return ORK_OK; }
static ork_status cpu_harvest(ork_copy_engine *ce) { (void)ce; return ORK_OK; }
/* the CPU's lanes are the host's order: a mark is now (DEFERRED copies queued
 * before it run later and are written when they run) */
static ork_status cpu_mark(ork_copy_engine *ce, ork_lane lane) {
    double t = 1e3 * (ce_now() - ce->t0);
    ork_ce_trace_line(ce, (int)lane, ORK_CE_MARK, ce->tag, t, t);
    return ORK_OK;
}

static void cpu_destroy(ork_copy_engine *ce) {
    cpu_ce *c = ce->priv;
    if (!c) return;
    for (int l = 0; l < ORK_LANES; l++) free(c->lane[l].q);
    free(c->ev_lane);
    free(c->ev_seq);
    free(c);
}

static const ork_ce_vt cpu_vt = {cpu_host_alloc, cpu_host_free, cpu_copy_fn, cpu_copy_fn,   cpu_decode,  cpu_record,
                                 cpu_wait,       cpu_sync,      cpu_host_wait, cpu_destroy, cpu_timing_on, cpu_harvest,
                                 cpu_mark};

ork_status ork_copy_engine_create_cpu(ork_ce_cpu_mode mode, int n_events, ork_copy_engine **out) {
    if (n_events < 1) return ORK_FAIL(ORK_E_INVALID, "copy engine: n_events must be >= 1, got %d", n_events);
    ork_copy_engine *ce = calloc(1, sizeof *ce);
    cpu_ce *c = calloc(1, sizeof *c);
    if (c) {
        c->ev_lane = malloc((size_t)n_events * sizeof *c->ev_lane);
        c->ev_seq = calloc((size_t)n_events, sizeof *c->ev_seq);
    }
    if (!ce || !c || !c->ev_lane || !c->ev_seq) {
        if (c) { free(c->ev_lane); free(c->ev_seq); }
        free(c);
        free(ce);
        return ORK_E_NOMEM;
    }
    for (int e = 0; e < n_events; e++) c->ev_lane[e] = -1;
    c->mode = mode;
    ce->vt = &cpu_vt;
    ce->n_events = n_events;
    ce->priv = c;
    *out = ce;
    return ORK_OK;
}

ork_status ork_copy_engine_create(const ork_backend *be, const ork_kctx *compute, int n_events,
                                  ork_copy_engine **out) {
    if (be->device == ORK_DEV_CPU) return ork_copy_engine_create_cpu(ORK_CE_EAGER, n_events, out);
#ifdef ORAKUL_HAVE_CUDA
    if (be->device == ORK_DEV_CUDA) return ork_copy_engine_create_cuda(compute, n_events, out);
#endif
    (void)compute;
    return ORK_FAIL(ORK_E_UNSUPPORTED, "copy engine: backend '%s' has no copy engine", be->name);
}

void ork_copy_engine_destroy(ork_copy_engine *ce) {
    if (!ce) return;
    ce->vt->destroy(ce);
    free(ce);
}

ork_status ork_ce_host_alloc(ork_copy_engine *ce, size_t bytes, void **ptr) {
    ORK_TRY(ce->vt->host_alloc(ce, bytes, ptr));
    ce->host_bytes += bytes;
    return ORK_OK;
}
void ork_ce_host_free(ork_copy_engine *ce, void *ptr) {
    if (ptr) ce->vt->host_free(ce, ptr);
}

static ork_status check_ev(const ork_copy_engine *ce, int ev) {
    if (ev < 0 || ev >= ce->n_events)
        return ORK_FAIL(ORK_E_INTERNAL, "copy engine: event %d out of range (0..%d)", ev, ce->n_events - 1);
    return ORK_OK;
}

ork_status ork_ce_copy(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    if (lane != ORK_LANE_H2D && lane != ORK_LANE_D2H)
        return ORK_FAIL(ORK_E_INTERNAL, "copy engine: copies go on the H2D or D2H lane (got %d)", (int)lane);
    if (!bytes) return ORK_OK;
    ce->bytes[lane] += bytes;
    return ce->vt->copy(ce, lane, dst, src, bytes);
}
ork_status ork_ce_copy_d2d(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    if (lane < 0 || lane >= ORK_LANES) return ORK_FAIL(ORK_E_INTERNAL, "copy engine: lane %d", (int)lane);
    return bytes ? ce->vt->copy_d2d(ce, lane, dst, src, bytes) : ORK_OK;
}
ork_status ork_ce_decode(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_transit_hdr *hdr) {
    if (lane != ORK_LANE_H2D && lane != ORK_LANE_DEC && lane != ORK_LANE_COMPUTE)
        return ORK_FAIL(ORK_E_INTERNAL, "copy engine: decodes go on the DEC, H2D or compute lane (got %d)", (int)lane);
    if (!hdr->raw_bytes) return ORK_OK;
    return ce->vt->decode(ce, lane, dst, src, hdr);
}
ork_status ork_ce_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    ORK_TRY(check_ev(ce, ev));
    return ce->vt->record(ce, lane, ev);
}
ork_status ork_ce_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    ORK_TRY(check_ev(ce, ev));
    return ce->vt->wait(ce, lane, ev);
}
ork_status ork_ce_sync(ork_copy_engine *ce) { return ce->vt->sync(ce); }
ork_status ork_ce_host_wait(ork_copy_engine *ce, int ev) {
    ORK_TRY(check_ev(ce, ev));
    return ce->vt->host_wait(ce, ev);
}
uint64_t ork_ce_bytes(const ork_copy_engine *ce, ork_lane lane) { return ce->bytes[lane]; }
int ork_ce_n_events(const ork_copy_engine *ce) { return ce->n_events; }
uint64_t ork_ce_host_bytes(const ork_copy_engine *ce) { return ce->host_bytes; }

ork_status ork_ce_set_timing(ork_copy_engine *ce, int on) {
    if (on && !ce->timing) ORK_TRY(ce->vt->timing_on(ce));
    if (!on && ce->timing) ORK_TRY(ce->vt->harvest(ce));
    ce->timing = on != 0;
    return ORK_OK;
}

ork_status ork_ce_busy(ork_copy_engine *ce, ork_lane lane, double *copy_s, double *decode_s) {
    if (lane < 0 || lane >= ORK_LANES) return ORK_FAIL(ORK_E_INTERNAL, "copy engine: lane %d", (int)lane);
    if (ce->timing) ORK_TRY(ce->vt->harvest(ce));
    if (copy_s) *copy_s = ce->busy[lane][ORK_CE_COPY];
    if (decode_s) *decode_s = ce->busy[lane][ORK_CE_DECODE];
    return ORK_OK;
}

ork_status ork_ce_waited(ork_copy_engine *ce, ork_lane lane, double *wait_s) {
    if (lane < 0 || lane >= ORK_LANES) return ORK_FAIL(ORK_E_INTERNAL, "copy engine: lane %d", (int)lane);
    if (ce->timing) ORK_TRY(ce->vt->harvest(ce));
    *wait_s = ce->busy[lane][ORK_CE_WAIT];
    return ORK_OK;
}

void ork_ce_set_trace(ork_copy_engine *ce, FILE *f) { ce->trace = f; }
void ork_ce_set_tag(ork_copy_engine *ce, int tag) { ce->tag = tag; }

ork_status ork_ce_mark(ork_copy_engine *ce, ork_lane lane, int tag) {
    if (lane < 0 || lane >= ORK_LANES) return ORK_FAIL(ORK_E_INTERNAL, "copy engine: lane %d", (int)lane);
    if (!ce->timing || !ce->trace) return ORK_OK;
    int keep = ce->tag;
    ce->tag = tag;
    ork_status st = ce->vt->mark(ce, lane);
    ce->tag = keep;
    return st;
}
