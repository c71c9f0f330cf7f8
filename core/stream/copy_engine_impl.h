/* stream/copy_engine_impl.h — internal to core/stream: the engine struct the
 * CPU (copy_engine.c) and CUDA (copy_engine_cuda.cu) implementations fill. */
#ifndef ORK_STREAM_COPY_ENGINE_IMPL_H
#define ORK_STREAM_COPY_ENGINE_IMPL_H

#include "stream/copy_engine.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_ce_vt {
    ork_status (*host_alloc)(ork_copy_engine *ce, size_t bytes, void **ptr);
    void (*host_free)(ork_copy_engine *ce, void *ptr);
    ork_status (*copy)(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes);
    ork_status (*copy_d2d)(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes);
    ork_status (*decode)(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_transit_hdr *hdr);
    ork_status (*record)(ork_copy_engine *ce, ork_lane lane, int ev);
    ork_status (*wait)(ork_copy_engine *ce, ork_lane lane, int ev);
    ork_status (*sync)(ork_copy_engine *ce);
    ork_status (*host_wait)(ork_copy_engine *ce, int ev);
    void (*destroy)(ork_copy_engine *ce);
    /* timing (ork_ce_set_timing): start measuring; fold every timed copy and
     * decode issued so far into busy, waiting for them where needed */
    ork_status (*timing_on)(ork_copy_engine *ce);
    ork_status (*harvest)(ork_copy_engine *ce);
    /* a zero-length timed item on lane (kind ORK_CE_MARK) for the trace */
    ork_status (*mark)(ork_copy_engine *ce, ork_lane lane);
} ork_ce_vt;

/* Timed item kinds: busy[lane][kind] for the first three; the trace's column. */
enum { ORK_CE_COPY = 0, ORK_CE_DECODE = 1, ORK_CE_WAIT = 2, ORK_CE_MARK = 3 };

struct ork_copy_engine {
    const ork_ce_vt *vt;
    int n_events;
    uint64_t bytes[ORK_LANES];
    uint64_t host_bytes;   /* pinned host memory handed out (ork_ce_host_alloc), never decremented */
    int timing;            /* ork_ce_set_timing */
    double busy[ORK_LANES][3]; /* seconds: [lane][ORK_CE_COPY / DECODE / WAIT] (harvested) */
    FILE *trace;           /* ork_ce_set_trace: timed items are written here as harvested */
    int tag;               /* ork_ce_set_tag: the tag of items timed from now on */
    double t0;             /* CPU: wall time when timing went on (trace times count from it) */
    void *priv;
};

/* One trace line (copy_engine.h, ork_ce_set_trace): times in ms from timing on. */
static inline void ork_ce_trace_line(ork_copy_engine *ce, int lane, int kind, int tag, double t0_ms, double t1_ms) {
    fprintf(ce->trace, "%d %d %d %.4f %.4f\n", lane, kind, tag, t0_ms, t1_ms);
}

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_copy_engine_create_cuda(const ork_kctx *compute, int n_events, ork_copy_engine **out);
#endif

#ifdef __cplusplus
}
#endif
#endif
