/* dist/grad_sync.h — the data-parallel gradient all-reduce, bucketed and
 * overlapped with the backward pass (the DDP recipe):
 *  - the LoRA gradients move into one F32 buffer laid out by dist/bucket.h
 *    (each parameter's grad becomes a view into it; the tape accumulates into
 *    existing grads, so nothing else changes);
 *  - the runner's grads_ready(block) hook (train/runner.h) marks blocks done;
 *    a bucket whose blocks are all done is launched at once: an event on the
 *    compute stream, the communication stream waits for it, ncclAllReduce
 *    with ncclAvg in place, so the all-reduce of the last blocks runs while
 *    the backward of the earlier ones is still computing;
 *  - ork_gsync_finish launches what is left and makes the compute stream wait
 *    for the communication stream: the gradient norm and the optimizer read
 *    averaged gradients.
 * Only the last micro-step of an accumulation is armed (the others
 * accumulate locally, like DDP's no_sync). Bucket size: ORAKUL_DIST_BUCKET_MB
 * (default 50).
 *
 * Owns the flat gradient buffer and the grad views; ork_gsync_destroy puts
 * the parameters back to "no grad" (call it before the parameters are freed).
 * [control-thread] */
#ifndef ORK_DIST_GRAD_SYNC_H
#define ORK_DIST_GRAD_SYNC_H

#include "dist/bucket.h"
#include "dist/dist.h"
#include "tensor/graph.h"
#include "train/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_gsync ork_gsync;

/* params[i] (F32 grads) of model block block[i]; g: the graph (its kctx is the compute stream). */
ork_status ork_gsync_create(ork_dist *d, ork_graph *g, ork_alloc *a, ork_tensor **params, const int *block, int n,
                            int n_blocks, int64_t bucket_bytes, ork_gsync **out);
void ork_gsync_destroy(ork_gsync *s);

/* Hooks that call inner's first (the weight store's), then launch buckets at
 * grads_ready. Install *out on the runner. */
void ork_gsync_hooks(ork_gsync *s, const ork_block_hooks *inner, ork_block_hooks *out);
/* on: the next backward launches its buckets (the last micro-step); off: it accumulates only. */
void ork_gsync_arm(ork_gsync *s, int on);
/* Launch the buckets left; the compute stream waits for all of them. */
ork_status ork_gsync_finish(ork_gsync *s);
const ork_bucket_plan *ork_gsync_plan(const ork_gsync *s);
/* ORAKUL_DIST_BUCKET_MB (1..4096, default 50) in bytes; a bad value logs a warning and uses 50. */
int64_t ork_gsync_bucket_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
