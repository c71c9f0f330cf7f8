/* stream/copy_engine_cuda.cu — the CUDA copy engine (see copy_engine.h): one
 * non-blocking stream per copy lane and one for the decodes, the graph's stream as the compute lane,
 * cudaEvent_t with timing disabled, cudaMallocHost arenas. Never touches the
 * legacy default stream and never synchronises the device; with lane timing on
 * (a diagnostic), ork_ce_busy waits for the timed copies it reports. */
#include <cuda_runtime.h>

extern "C" {
#include "stream/copy_engine_impl.h"
#include "util/log.h"
void *ork_cuda_kstream(const ork_kctx *k);
}

#include <stdlib.h>

#define CE_TRY(expr) do { cudaError_t e_ = (expr); if (e_ != cudaSuccess) \
    return ork_fail(ORK_E_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); } while (0)

/* Timing (ork_ce_set_timing): an event pair around each copy or decode, in a
 * ring; harvest waits for the oldest pairs and adds their elapsed time. */
#define CE_TIMED 16384 /* pairs: a streamed-trainable FLUX step times ~4000 items; a fold stalls the host */
typedef struct timed {
    cudaEvent_t a, b;
    int lane, kind, tag; /* kind: ORK_CE_COPY, DECODE, WAIT, MARK */
} timed;

typedef struct cuda_ce {
    cudaStream_t s[ORK_LANES]; /* s[COMPUTE] borrowed from the graph */
    cudaEvent_t *ev;           /* [n_events] */
    timed *t;                  /* [CE_TIMED] when timing was ever on */
    cudaEvent_t ref;           /* recorded on the compute lane when timing went on: the trace's zero */
    int t_head, t_n;           /* pending pairs: t[(t_head + i) % CE_TIMED], i < t_n */
} cuda_ce;

/* Fold the oldest `upto` pending pairs into ce->busy (waiting for each to end). */
static ork_status cu_fold(ork_copy_engine *ce, int upto) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    for (; upto > 0 && c->t_n > 0; upto--) {
        timed *p = &c->t[c->t_head];
        float ms = 0;
        CE_TRY(cudaEventSynchronize(p->b));
        CE_TRY(cudaEventElapsedTime(&ms, p->a, p->b));
        if (p->kind < ORK_CE_MARK) ce->busy[p->lane][p->kind] += 1e-3 * (double)ms;
        if (ce->trace) {
            float a = 0;
            CE_TRY(cudaEventElapsedTime(&a, c->ref, p->a));
            ork_ce_trace_line(ce, p->lane, p->kind, p->tag, (double)a, (double)a + (double)ms);
        }
        c->t_head = (c->t_head + 1) % CE_TIMED;
        c->t_n--;
    }
    return ORK_OK;
}

static ork_status cu_harvest(ork_copy_engine *ce) { return cu_fold(ce, CE_TIMED); }

static ork_status cu_timing_on(ork_copy_engine *ce) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    if (!c->t) {
        c->t = (timed *)calloc(CE_TIMED, sizeof *c->t);
        if (!c->t) return ORK_E_NOMEM;
        for (int i = 0; i < CE_TIMED; i++) {
            CE_TRY(cudaEventCreate(&c->t[i].a));
            CE_TRY(cudaEventCreate(&c->t[i].b));
        }
        CE_TRY(cudaEventCreate(&c->ref));
    }
    CE_TRY(cudaEventRecord(c->ref, c->s[ORK_LANE_COMPUTE]));
    return ORK_OK;
}

/* The pair for the next timed item on lane (a recorded), or NULL when not timing. */
static ork_status cu_time_begin(ork_copy_engine *ce, ork_lane lane, int kind, timed **out) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    *out = NULL;
    if (!ce->timing || !c->t) return ORK_OK;
    if (c->t_n == CE_TIMED) ORK_TRY(cu_fold(ce, CE_TIMED / 2)); /* long done, as a rule */
    timed *p = &c->t[(c->t_head + c->t_n) % CE_TIMED];
    p->lane = (int)lane;
    p->kind = kind;
    p->tag = ce->tag;
    CE_TRY(cudaEventRecord(p->a, c->s[lane]));
    *out = p;
    return ORK_OK;
}

static ork_status cu_time_end(ork_copy_engine *ce, ork_lane lane, timed *p) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    if (!p) return ORK_OK;
    CE_TRY(cudaEventRecord(p->b, c->s[lane]));
    c->t_n++;
    return ORK_OK;
}

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
    timed *p;
    ORK_TRY(cu_time_begin(ce, lane, 0, &p));
    CE_TRY(cudaMemcpyAsync(dst, src, bytes, kind, c->s[lane]));
    return cu_time_end(ce, lane, p);
}

static ork_status cu_copy_d2d(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    timed *p;
    ORK_TRY(cu_time_begin(ce, lane, ORK_CE_COPY, &p));
    CE_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->s[lane]));
    return cu_time_end(ce, lane, p);
}

static ork_status cu_decode(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_transit_hdr *hdr) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    timed *p;
    ORK_TRY(cu_time_begin(ce, lane, 1, &p));
    ORK_TRY(ork_transit_decode_cuda(src, hdr, dst, (void *)c->s[lane]));
    return cu_time_end(ce, lane, p);
}

static ork_status cu_record(ork_copy_engine *ce, ork_lane lane, int ev) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaEventRecord(c->ev[ev], c->s[lane]));
    return ORK_OK;
}

static ork_status cu_wait(ork_copy_engine *ce, ork_lane lane, int ev) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    timed *p;
    ORK_TRY(cu_time_begin(ce, lane, ORK_CE_WAIT, &p));
    CE_TRY(cudaStreamWaitEvent(c->s[lane], c->ev[ev], 0));
    return cu_time_end(ce, lane, p);
}

static ork_status cu_mark(ork_copy_engine *ce, ork_lane lane) {
    timed *p;
    ORK_TRY(cu_time_begin(ce, lane, ORK_CE_MARK, &p));
    return cu_time_end(ce, lane, p);
}

static ork_status cu_sync(ork_copy_engine *ce) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaStreamSynchronize(c->s[ORK_LANE_H2D]));
    CE_TRY(cudaStreamSynchronize(c->s[ORK_LANE_D2H]));
    CE_TRY(cudaStreamSynchronize(c->s[ORK_LANE_DEC]));
    return ORK_OK;
}

static ork_status cu_host_wait(ork_copy_engine *ce, int ev) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    CE_TRY(cudaEventSynchronize(c->ev[ev]));
    return ORK_OK;
}

static void cu_destroy(ork_copy_engine *ce) {
    cuda_ce *c = (cuda_ce *)ce->priv;
    if (!c) return;
    for (int i = 0; c->ev && i < ce->n_events; i++)
        if (c->ev[i]) cudaEventDestroy(c->ev[i]);
    for (int i = 0; c->t && i < CE_TIMED; i++) {
        if (c->t[i].a) cudaEventDestroy(c->t[i].a);
        if (c->t[i].b) cudaEventDestroy(c->t[i].b);
    }
    if (c->ref) cudaEventDestroy(c->ref);
    free(c->t);
    if (c->s[ORK_LANE_H2D]) cudaStreamDestroy(c->s[ORK_LANE_H2D]);
    if (c->s[ORK_LANE_D2H]) cudaStreamDestroy(c->s[ORK_LANE_D2H]);
    if (c->s[ORK_LANE_DEC]) cudaStreamDestroy(c->s[ORK_LANE_DEC]);
    free(c->ev);
    free(c);
}

static const ork_ce_vt cuda_vt = {cu_host_alloc, cu_host_free, cu_copy,      cu_copy_d2d, cu_decode,    cu_record,
                                  cu_wait,       cu_sync,      cu_host_wait, cu_destroy,  cu_timing_on, cu_harvest,
                                  cu_mark};

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
    /* the DEC (and H2D) lanes run the transit decode: highest priority, so its blocks
     * are scheduled as soon as an SM frees rather than behind the compute lane's queue */
    int lo = 0, hi = 0;
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&lo, &hi);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&c->s[ORK_LANE_H2D], cudaStreamNonBlocking, hi);
    if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&c->s[ORK_LANE_DEC], cudaStreamNonBlocking, hi);
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
