/* stream/copy_engine_cuda.cu — the CUDA copy engine (see copy_engine.h): one
 * non-blocking stream per copy lane, the graph's stream as the compute lane,
 * cudaEvent_t with timing disabled, cudaMallocHost arenas. Never touches the
 * legacy default stream and never synchronises the device. */
#include <cuda_runtime.h>

extern "C" {
#include "stream/copy_engine_impl.h"
#include "util/log.h"
void *ork_cuda_kstream(const ork_kctx *k);
}

#include <stdlib.h>

#define CE_TRY(expr) do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) \
    return ork_fail(ORK_E_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); } while (0)

typedef struct cuda_ce {
    cudaStream_t s[ORK_LANES]; /* s[COMPUTE] borrowed from the graph */
    cudaEvent_t *ev;           /* [n_events] */
} cuda_ce;

static ork_status cu_host_alloc(ork_copy_engine *, size_t bytes, void **ptr) {
    *ptr = NULL;
    cudaError_t e = cudaMallocHost(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ork_fail(ORK_E_NOMEM, "stream: pinned host arena of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    }
    return ORK_OK;
}

static void cu_host_free(ork_copy_engine *, void *ptr) { cudaFreeHost(ptr); }

static ork_status cu_copy(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    cudaMemcpyKind kind = lane == ORK_LANE_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    CE_TRY(cudaMemcpyAsync(dst, src, bytes, kind, c->s[lane]));
    return ORK_OK;
}

static ork_status cu_decode(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_wcodec_hdr *hdr) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    return ork_wcodec_decode_cuda(src, hdr, dst, (void *)c->s[lane]);
}

static ork_status cu_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaEventRecord(c->ev[ev], c->s[lane]));
    return ORK_OK;
}

static ork_status cu_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaStreamWaitEvent(c->s[lane], c->ev[ev], 0));
    return ORK_OK;
}

static ork_status cu_sync(ork_copy_engine *ce) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaStreamSynchronize(c->s[ORK_LANE_H2D]));
    CE_TRY(cudaStreamSynchronize(c->s[ORK_LANE_D2H]));
    return ORK_OK;
}

static void cu_destroy(ork_copy_engine *ce) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    if (!c) return;
    for (int i = 0; c->ev && i < ce->n_events; i++)
        if (c->ev[i]) cudaEventDestroy(c->ev[i]);
    if (c->s[ORK_LANE_H2D]) cudaStreamDestroy(c->s[ORK_LANE_H2D]);
    if (c->s[ORK_LANE_D2H]) cudaStreamDestroy(c->s[ORK_LANE_D2H]);
    free(c->ev);
    free(c);
}

static const ork_ce_vt cuda_vt = {cu_host_alloc, cu_host_free, cu_copy, cu_decode, cu_record, cu_wait, cu_sync, cu_destroy};

extern "C" ork_status ork_copy_engine_create_cuda(const ork_kctx *compute, int n_events, ork_copy_engine **out) {
    if (n_events < 1) return ork_fail(ORK_E_INVALID, "copy engine: n_events must be >= 1, got %d", n_events);
    ork_copy_engine *ce = (ork_copy_engine *)calloc(1, sizeof *ce);
    cuda_ce *c = (cuda_ce *)calloc(1, sizeof *c);
    if (c) c->ev = (cudaEvent_t *)calloc((size_t)n_events, sizeof *c->ev);
    if (!ce || !c || !c->ev) {
        if (c) free(c->ev);
        free(c);
        free(ce);
        return ORK_E_NOMEM;
    }
    ce->vt = &cuda_vt;
    ce->n_events = n_events;
    ce->priv = c;
    c->s[ORK_LANE_COMPUTE] = (cudaStream_t)ork_cuda_kstream(compute);
    ork_status st = ORK_OK;
    /* the H2D lane also runs the transit decode: highest priority, so its blocks are
     * scheduled as soon as an SM frees rather than behind the compute lane's queue */
    int lo = 0, hi = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&lo, &hi);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&c->s[ORK_LANE_H2D], cudaStreamNonBlocking, hi);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->s[ORK_LANE_D2H], cudaStreamNonBlocking);
    for (int i = 0; e == cudaSuccess && i < n_events; i++) e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming);
    if (e != cudaSuccess) {
        st = ork_fail(ORK_E_CUDA, "copy engine: creating streams/events failed: %s", cudaGetErrorString(e));
        (void)cudaGetLastError();
        cu_destroy(ce);
        free(ce);
        return st;
    }
    *out = ce;
    return ORK_OK;
}
