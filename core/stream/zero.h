/* stream/zero.h — trainable-state streaming (ZeRO-Offload per block): the
 * interface and data layout; the runtime is designed (docs/streaming.md §4)
 * but not implemented yet. The planner already sizes it
 * (ork_stream_plan.trainable_streamed) and the runner already calls
 * ork_block_hooks.grads_ready(block) after each block's backward.
 *
 * Layout. Per block b, one pinned host record holds, contiguous and in the
 * LoRA network's module order: every parameter's data (F32/BF16), then every
 * parameter's optimizer state (optimizer->state_bytes), then an F32 gradient
 * accumulator per parameter (only with gradient accumulation > 1). The
 * device ring of the block streamer grows by the largest block's record, so
 * a block's LoRA weights arrive with its frozen weights in the same slot (one
 * H2D copy; the record sits after the frozen region).
 *
 * Step (per micro-step, blocks >= first_trainable, in backward order):
 *   grads_ready(b): if this is the last micro-batch of the optimizer step:
 *     optimizer->step(params of b only) on the compute lane, with
 *     grad_scale = clip factor from the PREVIOUS step's global norm;
 *     the block's squared gradient norm is reduced into a device scalar
 *     (for the next step's clip factor) before the step;
 *     record COMPUTE -> D2H lane waits -> copy params + state back into
 *     b's host record -> record D2H; the slot's FREE waits for that D2H.
 *   else: gradients go D2H into the accumulator (or stay on the device
 *     when they fit: the planner decides).
 * [control-thread] */
#ifndef ORK_STREAM_ZERO_H
#define ORK_STREAM_ZERO_H

#include <stddef.h>
#include <stdint.h>

/* One trainable tensor inside its block's record. */
typedef struct ork_zero_param {
    int block;
    size_t data_offset, data_bytes;   /* from the block record's start */
    size_t state_offset, state_bytes;
    size_t accum_offset;              /* F32 gradient accumulator, or SIZE_MAX */
} ork_zero_param;

/* The per-block records (host) and their sizes. */
typedef struct ork_zero_layout {
    int n_blocks, n_params;
    ork_zero_param *params;           /* [n_params] */
    size_t *block_bytes;              /* [n_blocks] record size (0: no LoRA) */
    size_t max_block_bytes;           /* added to each ring slot */
} ork_zero_layout;

#endif
