/* stream/copy_engine.h — the copy engine of the streaming runtime: pinned host
 * memory, copies on their own lanes (streams) beside the compute stream, and
 * events between lanes. A minimal, backend-neutral addition next to the
 * backend table (tensor/backend.h has one stream per graph and no events).
 *
 * Lanes: ORK_LANE_COMPUTE is the graph's stream (k->stream of the kctx given
 * at create); ORK_LANE_H2D carries host->device copies (frozen weights, LoRA
 * weights and optimizer state coming in); ORK_LANE_D2H carries device->host
 * copies (updated trainable state going back); ORK_LANE_DEC decodes what the
 * H2D lane copied (transit coding), so the link copies on while a decode runs.
 * Events are small integers
 * 0..n_events-1; record(lane, ev) captures everything enqueued on lane so far;
 * wait(lane, ev) makes later work on lane wait for the last record of ev (a
 * never-recorded event is complete).
 *
 * Implementations:
 * - CPU (ork_copy_engine_create_cpu): memcpy. EAGER copies at once (a copy
 *   overwriting memory still to be read shows up as wrong data); DEFERRED
 *   queues copies per lane and performs them only when an event recorded
 *   after them is waited on, or at sync (a missing wait shows up as stale
 *   data). SKEWED copies at once but queues the DEC lane's decodes until
 *   waited on (a copy into bytes a decode has still to read shows up as
 *   corrupt data). Tests run the modes.
 * - CUDA (copy_engine_cuda.cu, ORAKUL_CUDA): two cudaStreamNonBlocking
 *   streams, cudaEvent_t (timing disabled) per event, cudaMallocHost arenas.
 *
 * Owns: its streams and events. [control-thread] */
#ifndef ORK_STREAM_COPY_ENGINE_H
#define ORK_STREAM_COPY_ENGINE_H

#include "stream/transit/transit.h"
#include "tensor/backend.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ork_lane {
    ORK_LANE_COMPUTE = 0,
    ORK_LANE_H2D = 1,
    ORK_LANE_D2H = 2,
    ORK_LANE_DEC = 3,
    ORK_LANES = 4,
} ork_lane;

typedef enum ork_ce_cpu_mode {
    ORK_CE_EAGER = 0,
    ORK_CE_DEFERRED = 1,
    ORK_CE_SKEWED = 2,
} ork_ce_cpu_mode;

typedef struct ork_copy_engine ork_copy_engine;

/* The engine for be (CPU: EAGER; CUDA: streams on the current device).
 * compute: the graph's kctx (borrowed; its stream is the compute lane). */
ork_status ork_copy_engine_create(const ork_backend *be, const ork_kctx *compute, int n_events,
                                  ork_copy_engine **out);
ork_status ork_copy_engine_create_cpu(ork_ce_cpu_mode mode, int n_events, ork_copy_engine **out);
void ork_copy_engine_destroy(ork_copy_engine *ce);

/* Pinned host memory (CPU: malloc), 4096-aligned. */
ork_status ork_ce_host_alloc(ork_copy_engine *ce, size_t bytes, void **ptr);
void ork_ce_host_free(ork_copy_engine *ce, void *ptr);

/* lane H2D: dst device, src pinned host; lane D2H: dst pinned host, src device.
 * src must stay unchanged (and dst unread) until an event recorded after the
 * copy completes. */
ork_status ork_ce_copy(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes);
/* Decode a transit-coded buffer (stream/transit/transit.h) already on the device, in lane
 * order (the DEC lane, the H2D lane, or the compute lane): src holds
 * hdr->coded_bytes, dst gets hdr->raw_bytes. hdr must stay valid until the
 * decode has run (the CPU engine may defer it). CUDA: kernels on the lane's
 * stream (the DEC and H2D lanes have the highest stream priority, so a decode
 * is not queued behind the compute lane's kernels). */
ork_status ork_ce_decode(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, const ork_transit_hdr *hdr);
/* Device to device on any lane (the streamer's lent memory into a slot, on the
 * compute lane); not counted in ork_ce_bytes (no PCIe). */
ork_status ork_ce_copy_d2d(ork_copy_engine *ce, ork_lane lane, void *dst, const void *src, size_t bytes);
ork_status ork_ce_record(ork_copy_engine *ce, ork_lane lane, int ev);
ork_status ork_ce_wait(ork_copy_engine *ce, ork_lane lane, int ev);
/* The host waits for the copy lanes and the DEC lane (not the compute lane). */
ork_status ork_ce_sync(ork_copy_engine *ce);
/* The host waits for the work event ev's last record covers (on any lane). */
ork_status ork_ce_host_wait(ork_copy_engine *ce, int ev);

/* Bytes copied on a lane since create (issued, not necessarily complete). */
uint64_t ork_ce_bytes(const ork_copy_engine *ce, ork_lane lane);
int ork_ce_n_events(const ork_copy_engine *ce);
/* Pinned host bytes allocated since create (arenas and records). */
uint64_t ork_ce_host_bytes(const ork_copy_engine *ce);

/* Lane timing, a diagnostic (ORAKUL_STREAM_TIMING=1 in the trainer): from
 * ork_ce_set_timing(ce, 1) on, each copy and decode is timed where it runs
 * (CUDA: an event pair around it on its lane's stream; CPU: the memcpy or
 * decode's wall time). ork_ce_busy waits for the timed work issued so far and
 * returns the seconds the lane spent copying and decoding since timing began:
 * a lane busy for most of the step bounds it, one busy for little of it waits
 * on the compute (slot FREE events). Call it where the host syncs anyway. */
ork_status ork_ce_set_timing(ork_copy_engine *ce, int on);
ork_status ork_ce_busy(ork_copy_engine *ce, ork_lane lane, double *copy_s, double *decode_s);
/* Seconds the lane spent in event waits since timing began (CUDA: an event pair
 * around each cudaStreamWaitEvent: the compute lane's waits are where it stood
 * for a load, the H2D lane's where a load stood for a free slot; CPU: 0). */
ork_status ork_ce_waited(ork_copy_engine *ce, ork_lane lane, double *wait_s);

/* Trace, a diagnostic (ORAKUL_STREAM_TRACE=path in the trainer; needs timing
 * on): every timed item is also written to f as it is harvested, one line
 * "lane kind tag start_ms end_ms" — lane 0 compute, 1 H2D, 2 D2H, 3 DEC; kind 0 copy,
 * 1 decode, 2 wait, 3 mark; tag as set by ork_ce_set_tag when the item was
 * issued (the streamer: the block); times from when timing went on. Lines come
 * in harvest order, per lane in issue order. f is borrowed; NULL stops it. */
void ork_ce_set_trace(ork_copy_engine *ce, FILE *f);
void ork_ce_set_tag(ork_copy_engine *ce, int tag);
/* A zero-length item on lane at this point of its order, tagged tag (a no-op
 * unless timing is on and a trace is set). */
ork_status ork_ce_mark(ork_copy_engine *ce, ork_lane lane, int tag);

#ifdef __cplusplus
}
#endif
#endif
