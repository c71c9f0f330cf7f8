/* train/runner.h — runs a model plugin's blocks on a graph: the forward pass,
 * and the forward+backward of a training step with per-block activation
 * checkpointing (the recipe in tensor/tape.h): block inputs are kept at block
 * boundaries, each block is recomputed with grad on in reverse order, and the
 * carry gradients flow from block to block. Without checkpointing the whole
 * forward is recorded once.
 *
 * Block hooks (streaming, stream/streamer.h): every pass first announces its
 * block order (pass_begin), then each block's use is bracketed by enter /
 * leave: the forward's block i, and in backward ONE enter .. leave around
 * block i's recompute and backward, so one load serves both. After block i's
 * backward its LoRA gradients are complete for this micro-step: grads_ready(i)
 * (where a per-block optimizer step hooks in). With hooks that stream, the
 * step needs checkpointing (the un-checkpointed tape would need every block's
 * weights at once): ork_runner_step refuses with one line otherwise.
 *
 * Keeping instead of recomputing (issue #31): the last K trainable blocks may
 * run their forward recorded (grad on) and keep their tape to the backward, so
 * they are not recomputed (a third of their FLOPs). K comes from
 * ork_runner_set_keep: a fixed count, or automatic — after a step the runner
 * knows each block's recorded bytes (measured in its recompute) and keeps the
 * most trailing blocks whose bytes fit the room it was given. Never while
 * blocks stream (their weights are valid only between enter and leave).
 * Bitwise the same gradients as recomputing: the kept forward is the same
 * ops on the same inputs. ORAKUL_KEEP_BLOCKS=N fixes K (benches; 0: off).
 *
 * Owns the checkpoint tensors (tag "checkpoints"), the carry-gradient
 * buffers (tag "carry_grads") and the forward's two carries (tag
 * "forward_carry"); all are reused from step to step and grow
 * only when a batch's shapes grow. [control-thread] */
#ifndef ORK_TRAIN_RUNNER_H
#define ORK_TRAIN_RUNNER_H

#include "tensor/graph.h"

#include <orakul/model.h>

typedef struct ork_runner ork_runner;

/* Callbacks around block use; any may be NULL. streaming != 0: some block's
 * weights are only valid between enter and leave. */
typedef struct ork_block_hooks {
    void *ctx;
    int streaming;
    ork_status (*pass_begin)(void *ctx, const int *order, int n);
    ork_status (*enter)(void *ctx, int block);
    ork_status (*leave)(void *ctx, int block);
    ork_status (*pass_end)(void *ctx);
    ork_status (*grads_ready)(void *ctx, int block);
} ork_block_hooks;

/* Called with the prediction (B, N, C) on the graph with grad on; returns the
 * scalar loss (1) F32 to differentiate. */
typedef ork_status (*ork_loss_fn)(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss);

ork_status ork_runner_create(ork_graph *g, ork_alloc *a, const ork_model_vtable *vt, void *model,
                             const ork_model_info *info, ork_runner **out);
void ork_runner_destroy(ork_runner *r);

/* Only blocks >= first_trainable need a backward (earlier blocks hold no
 * trainable weights; their input gradients are not needed). */
void ork_runner_set_first_trainable(ork_runner *r, int block);

/* The checkpoints as one allocation, laid out boundary by boundary (their
 * sizes as the last step left them), so the dead ones at a pass's end form
 * one region: the tail from boundary i is dead from the backward's read of
 * boundary i (block i's recompute) until the next forward writes it (after
 * block i - 1). Between steps only. A checkpoint that must grow later leaves
 * its part of the pool unused; unpool (between steps) gives it all back.
 * ORK_E_BUDGET, nothing changed and nothing logged, when the pool (their sizes
 * aligned) would pass the allocator's budget. */
ork_status ork_runner_pool_checkpoints(ork_runner *r);
ork_status ork_runner_unpool_checkpoints(ork_runner *r);
/* Pooled: *dev = the pool, (*off)[i] = boundary i's first byte, (*off)[n] its
 * size; returns n, the boundaries (n_blocks + 1); 0 when not pooled. */
int ork_runner_checkpoint_pool(const ork_runner *r, void **dev, const size_t **off);

/* Keep-instead-of-recompute (see above). keep >= 0: that many trailing blocks
 * (clamped to the trainable ones); keep < 0: automatic, the kept bytes plus
 * what the allocator has peaked at so far within cap_bytes less a margin (1 GiB
 * and 3%); cap_bytes 0: nothing kept. Either way a step keeps blocks only once
 * a step has measured their bytes (the first step recomputes all), and K is
 * then fixed; a batch with more input tokens than any measured recomputes
 * every block once more (measuring), and the next step decides again. The environment variable ORAKUL_KEEP_BLOCKS=N overrides both. */
void ork_runner_set_keep(ork_runner *r, int keep, size_t cap_bytes);
/* The blocks the next step keeps (0 before automatic mode has measured a
 * step), and their recorded bytes as measured (0 when not yet measured). */
int ork_runner_kept(const ork_runner *r, size_t *bytes);

/* Install block hooks (copied); NULL removes them. */
void ork_runner_set_hooks(ork_runner *r, const ork_block_hooks *h);

/* Forward only (grad off): *pred on g's arena, valid until ork_graph_reset.
 * Each block runs in a graph region that keeps only its output carry (two
 * persistent carry buffers in turn, tag "forward_carry", grown only when a
 * batch's shapes grow), so the arena holds one block's working set at a time
 * plus what begin made and *pred (DOP's prior pass, train/dop.c). */
ork_status ork_runner_forward(ork_runner *r, const ork_model_inputs *in, ork_tensor **pred);

/* One training micro-step: forward, loss, backward; gradients accumulate
 * into the trainable parameters. *loss_out is the loss value (host). */
ork_status ork_runner_step(ork_runner *r, const ork_model_inputs *in, int checkpointing, ork_loss_fn loss_fn,
                           void *loss_ctx, float *loss_out);

#endif
