/* stream/copy_engine_impl.h — internal to core/stream: the engine struct the
 * CPU (copy_engine.c) and CUDA (copy_engine_cuda.cu) implementations fill. */
#ifndef ORK_STREAM_COPY_ENGINE_IMPL_H
#define ORK_STREAM_COPY_ENGINE_IMPL_H

#include "stream/copy_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_ce_vt {
    ork_status (*host_alloc)(ork_copy_engine *ce, size_t bytes, void **ptr);
    void (*host_free)(ork_copy_engine *ce, void *ptr);
    ork_status (*copy)(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes);
    ork_status (*decode)(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_wcodec_hdr *hdr);
    ork_status (*record)(ork_copy_engine *ce, ork_lane lane, int ev);
    ork_status (*wait)(ork_copy_engine *ce, ork_lane lane, int ev);
    ork_status (*sync)(ork_copy_engine *ce);
    void (*destroy)(ork_copy_engine *ce);
    /* timing (ork_ce_set_timing): start measuring; fold every timed copy and
     * decode issued so far into busy, waiting for them where needed */
    ork_status (*timing_on)(ork_copy_engine *ce);
    ork_status (*harvest)(ork_copy_engine *ce);
} ork_ce_vt;

struct ork_copy_engine {
    const ork_ce_vt *vt;
    int n_events;
    uint64_t bytes[ORK_LANES];
    uint64_t host_bytes;   /* pinned host memory handed out (ork_ce_host_alloc), never decremented */
    int timing;            /* ork_ce_set_timing */
    double busy[ORK_LANES][2]; /* seconds busy: [lane][0] copies, [lane][1] decodes (harvested) */
    void *priv;
};

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_copy_engine_create_cuda(const ork_kctx *compute, int n_events, ork_copy_engine **out);
#endif

#ifdef __cplusplus
}
#endif
#endif
