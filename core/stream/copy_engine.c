/* stream/copy_engine.c — see copy_engine.h. The dispatch and the CPU engine
 * (EAGER: memcpy now; DEFERRED: per-lane FIFO queues flushed by waits). */
#include "stream/copy_engine_impl.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>

typedef struct cpu_copy {
    void *dst;
    const void *src;
    size_t bytes;
    int ev;        /* the first event recorded after it on its lane, or -1 */
} cpu_copy;

typedef struct cpu_lane {
    cpu_copy *q;
    int n, cap;
} cpu_lane;

typedef struct cpu_ce {
    ork_ce_cpu_mode mode;
    cpu_lane lane[ORK_LANES];
    int *ev_lane;  /* [n_events] lane of the last record, or -1 */
    int *ev_pos;   /* [n_events] queue length on that lane at the record */
} cpu_ce;

static ork_status cpu_host_alloc(ork_copy_engine *ce, size_t bytes, void **ptr) {
    (void)ce;
    size_t n = (bytes + 4095) / 4096 * 4096;
    *ptr = aligned_alloc(4096, n ? n : 4096);
    if (!*ptr) return ORK_FAIL(ORK_E_NOMEM, "stream: host arena of %zu bytes: out of host memory", bytes);
    return ORK_OK;
}

static void cpu_host_free(ork_copy_engine *ce, void *ptr) { (void)ce; free(ptr); }

/* Perform the first upto copies queued on a lane and drop them. */
static void flush(cpu_ce *c, int lane, int upto) {
    cpu_lane *l = &c->lane[lane];
    if (upto > l->n) upto = l->n;
    for (int i = 0; i < upto; i++) memcpy(l->q[i].dst, l->q[i].src, l->q[i].bytes);
    if (l->n > upto) memmove(l->q, l->q + upto, (size_t)(l->n - upto) * sizeof *l->q); /* l->q may be NULL when empty */
    l->n -= upto;
}

static ork_status cpu_copy_fn(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    cpu_ce *c = ce->priv;
    if (c->mode == ORK_CE_EAGER || lane == ORK_LANE_COMPUTE) {
        memcpy(dst, src, bytes);
        return ORK_OK;
    }
    cpu_lane *l = &c->lane[lane];
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        cpu_copy *q = realloc(l->q, (size_t)cap * sizeof *q);
        if (!q) return ORK_E_NOMEM;
        l->q = q;
        l->cap = cap;
    }
    l->q[l->n++] = (cpu_copy){dst, src, bytes, -1};
    return ORK_OK;
}

static ork_status cpu_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    cpu_ce *c = ce->priv;
    c->ev_lane[ev] = (int)lane;
    c->ev_pos[ev] = c->lane[lane].n;
    return ORK_OK;
}

static ork_status cpu_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    cpu_ce *c = ce->priv;
    (void)lane; /* the CPU's compute is synchronous: waiting = making the copies happen */
    int l = c->ev_lane[ev];
    if (l < 0) return ORK_OK;
    int upto = c->ev_pos[ev];
    if (upto <= 0) return ORK_OK;
    flush(c, l, upto);
    /* every event recorded on lane l moves down by the copies performed */
    for (int e = 0; e < ce->n_events; e++)
        if (c->ev_lane[e] == l) c->ev_pos[e] = c->ev_pos[e] > upto ? c->ev_pos[e] - upto : 0;
    return ORK_OK;
}

static ork_status cpu_sync(ork_copy_engine *ce) {
    cpu_ce *c = ce->priv;
    for (int l = 0; l < ORK_LANES; l++) flush(c, l, c->lane[l].n);
    for (int e = 0; e < ce->n_events; e++) c->ev_pos[e] = 0;
    return ORK_OK;
}

static void cpu_destroy(ork_copy_engine *ce) {
    cpu_ce *c = ce->priv;
    if (!c) return;
    for (int l = 0; l < ORK_LANES; l++) free(c->lane[l].q);
    free(c->ev_lane);
    free(c->ev_pos);
    free(c);
}

static const ork_ce_vt cpu_vt = {cpu_host_alloc, cpu_host_free, cpu_copy_fn, cpu_record, cpu_wait, cpu_sync,
                                 cpu_destroy};

ork_status ork_copy_engine_create_cpu(ork_ce_cpu_mode mode, int n_events, ork_copy_engine **out) {
    if (n_events < 1) return ORK_FAIL(ORK_E_INVALID, "copy engine: n_events must be >= 1, got %d", n_events);
    ork_copy_engine *ce = calloc(1, sizeof *ce);
    cpu_ce *c = calloc(1, sizeof *c);
    if (c) {
        c->ev_lane = malloc((size_t)n_events * sizeof *c->ev_lane);
        c->ev_pos = calloc((size_t)n_events, sizeof *c->ev_pos);
    }
    if (!ce || !c || !c->ev_lane || !c->ev_pos) {
        if (c) { free(c->ev_lane); free(c->ev_pos); }
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
ork_status ork_ce_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    ORK_TRY(check_ev(ce, ev));
    return ce->vt->record(ce, lane, ev);
}
ork_status ork_ce_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    ORK_TRY(check_ev(ce, ev));
    return ce->vt->wait(ce, lane, ev);
}
ork_status ork_ce_sync(ork_copy_engine *ce) { return ce->vt->sync(ce); }
uint64_t ork_ce_bytes(const ork_copy_engine *ce, ork_lane lane) { return ce->bytes[lane]; }
int ork_ce_n_events(const ork_copy_engine *ce) { return ce->n_events; }
uint64_t ork_ce_host_bytes(const ork_copy_engine *ce) { return ce->host_bytes; }
