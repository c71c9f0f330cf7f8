/* stream/trainable_stream.h — trainable-state streaming (ZeRO-Offload per block): the
 * LoRA parameters of a block and their optimizer state live in ONE pinned
 * host record per block and come to the device through a ring of slots with
 * the block; in backward, as soon as the block's gradients are complete, the
 * block is stepped and its record goes back to the host on the D2H lane,
 * overlapped with the next block's compute (docs/streaming.md §4).
 *
 * Layout. Per block b, the host record holds, each part ORK_STREAM_ALIGN-
 * aligned and in parameter order: with shadow_dt BF16, a BF16 shadow of every
 * F32 parameter; every parameter's data (F32/BF16); every parameter's
 * optimizer state (state_bytes, zeroed at create). A visit that does not step
 * the block (the forward pass) loads the shadows when there are any, else the
 * data: the forward's GEMMs round F32 masters to the activations' BF16 anyway,
 * so a shadow written with the same rounding after each step gives the same
 * bits at half the bytes. The visit that steps the block loads data + state;
 * after the step the slot's shadows are rewritten from the new data (the
 * backend's axpby, the op's own F32->BF16 cast) and the whole record goes back. A device
 * slot holds the record followed by an F32 gradient buffer per parameter
 * (device only: zeroed when the block arrives, accumulated by the block's
 * backward). This runtime keeps its own slots and events beside the frozen
 * weights' streamer (the same copy engine, two more lanes of work on it):
 * one extra H2D copy per visit instead of appending the record to the frozen
 * region, which keeps the frozen streamer untouched.
 *
 * Schedule. ork_tstream_pass_begin takes the runner's block order; blocks with
 * trainable parameters form visits (consecutive repeats merged, as in the
 * streamer). A block that appears more than once in the order (forward, then
 * backward) is STEPPED at its last visit: ork_tstream_grads_ready(b)
 *   1. reduces each parameter's Σg² into a device array (the norm of THIS
 *      step, read back at ork_tstream_step_end for the NEXT step's clipping;
 *      the pass's last step sends the sums and flags up on the D2H lane ahead
 *      of its record, so the host does not wait for that write-back),
 *   2. scales the gradients by the clip factor of the PREVIOUS step
 *      (min(1, max_norm / (norm(s-1) + 1e-6)); 1 on the first step and
 *      whenever max_grad_norm is 0), then calls the step callback on just
 *      this block's parameters (device pointers into the slot),
 *   3. when the block's Σg² is not finite, undoes that step on the device
 *      (backend restore_if_nonfinite: the record copied back from the host,
 *      which still holds what was loaded) and flags the block — no host sync
 *      per block; step_end reads the flags, names the blocks and counts them.
 *      The optimizer's whole state for a parameter must live in the state
 *      memory it is given (ork_opt_param.state), as the ABI requires,
 *   4. the compute lane records STEPPED and the slot's FREE; the D2H lane
 *      waits for STEPPED and copies the record back in o.chunks pieces
 *      (default 32), an event after each, data + state first (what the next
 *      stepping load overwrites) and the shadows last, then the slot's WB.
 *      The next load into the slot waits for each chunk it overwrites, so
 *      with several chunks the two directions overlap in the slot instead
 *      of taking turns; its READY waits for WB (the new block's gradients
 *      may lie where the old record is still going out). A load of a block
 *      waits for the WB of the slot its record last left from.
 * Other visits (forward only) free their slot at leave. Gradient
 * accumulation over micro-batches is not supported (the caller refuses it).
 *
 * Owns: the host records (pinned, via the copy engine), the device slots
 * (tag "lora_slots") and the norm scratch. Uses copy-engine events
 * event_base .. event_base + ork_tstream_n_events(K) - 1. [control-thread] */
#ifndef ORK_STREAM_TRAINABLE_STREAM_H
#define ORK_STREAM_TRAINABLE_STREAM_H

#include "stream/copy_engine.h"
#include "tensor/alloc.h"

#include <orakul/optimizer.h>

#include <stddef.h>
#include <stdint.h>

/* One trainable tensor inside its block's record. */
typedef struct ork_tstream_param {
    int block;
    ork_dtype dtype;                  /* data: F32 or BF16 */
    int64_t numel;
    size_t data_offset, data_bytes;   /* from the block record's start */
    size_t state_offset, state_bytes;
    size_t grad_offset;               /* F32 gradient, in the device slot only */
    size_t shadow_offset, shadow_bytes; /* BF16 copy of F32 data for forward visits (0 bytes: none) */
} ork_tstream_param;

/* The per-block records (host) and their sizes. */
typedef struct ork_tstream_layout {
    int n_blocks, n_params;
    ork_tstream_param *params;           /* [n_params] */
    size_t *block_bytes;              /* [n_blocks] record size (0: no parameters) */
    size_t *slot_need;                /* [n_blocks] record + gradients */
    size_t max_block_bytes;           /* one device slot */
} ork_tstream_layout;

/* The optimizer step on n parameters of one block (device pointers in the
 * slot; grads already clip-scaled; ids[k]: ps[k]'s index among all the
 * parameters): the caller fills lr, step number, stream. */
typedef ork_status (*ork_tstream_step_fn)(void *ctx, int block, ork_opt_param *ps, const int32_t *ids, int n);

typedef struct ork_tstream_opts {
    int n_blocks;
    int n_params;
    const int *block;           /* [n_params] block of each parameter */
    const ork_dtype *dtype;     /* [n_params] F32 or BF16 */
    const int64_t *numel;       /* [n_params] */
    const size_t *state_bytes;  /* [n_params] optimizer state bytes */
    int n_slots;                /* >= 2 */
    int event_base;             /* first copy-engine event (ork_tstream_n_events(n_slots) are used) */
    double max_grad_norm;       /* 0: no clipping */
    ork_tstream_step_fn step;
    void *step_ctx;
    ork_dtype shadow_dt;        /* ORK_BF16: forward visits read BF16 shadows of F32 params; 0: none */
    int chunks;                 /* write-back chunks per slot, 1..ORK_TSTREAM_CHUNKS (0: ORK_TSTREAM_CHUNKS_DEFAULT) */
} ork_tstream_opts;

typedef struct ork_tstream ork_tstream;

/* Write-back chunks per slot (at most; the default), and the copy-engine
 * events K slots use. The default, 32 pieces, made the seed's step 2% (512²) and
 * 8% (1024²) faster than the whole record on the H200 (docs/PERF.md, fifth session). */
enum { ORK_TSTREAM_CHUNKS = 32, ORK_TSTREAM_CHUNKS_DEFAULT = 32 };
static inline int ork_tstream_n_events(int n_slots) { return (3 + ORK_TSTREAM_CHUNKS) * n_slots + 2; }

/* The gradient scale clipping by global norm gives (torch's clip_grad_norm_):
 * max_norm / (norm + 1e-6) when norm exceeds max_norm > 0, else 1. The one
 * formula for the resident step, the streamed state's previous-norm factor and
 * the check that compares the two. */
static inline float ork_clip_factor(double max_norm, double norm) {
    return (max_norm > 0 && norm > max_norm) ? (float)(max_norm / (norm + 1e-6)) : 1.0f;
}

ork_status ork_tstream_create(ork_copy_engine *ce, ork_alloc *a, const ork_backend *be, const ork_kctx *k,
                           const ork_tstream_opts *o, ork_tstream **out);
void ork_tstream_destroy(ork_tstream *z);

const ork_tstream_layout *ork_tstream_get_layout(const ork_tstream *z);
/* Block b's host record (NULL when b has no parameters). Read or written by
 * the host only between passes (after ork_tstream_sync): save / resume / init. */
void *ork_tstream_host(ork_tstream *z, int block);
/* After the host wrote parameter data (init, resume): the host records'
 * shadows from it, rounded as the device rounds them. */
void ork_tstream_refresh_shadows(ork_tstream *z);
ork_status ork_tstream_sync(ork_tstream *z); /* also drops the loads issued ahead and what the slots hold (the host may write) */
/* Forward visits that found their block's record still in its slot (the
 * backward's last stepped blocks, at the next pass's start): no load. */
uint64_t ork_tstream_reused(const ork_tstream *z);
/* At a pass's end, issue the next pass's first loads (its first visits as this
 * pass's predict them: every training pass and forward pass starts alike), so
 * the link works through the step's tail; pass_begin keeps those that match.
 * On by default. */
void ork_tstream_set_ahead(ork_tstream *z, int on);

ork_status ork_tstream_pass_begin(ork_tstream *z, const int *order, int n);
/* The block is about to run: the compute lane waits for its load; the
 * parameters' device pointers are *data[i] (params of the block in order,
 * see ork_tstream_block_params) — NULL for a block without parameters. */
ork_status ork_tstream_enter(ork_tstream *z, int block);
/* Device pointer of parameter i's data / F32 gradient while its block is
 * entered. A visit that does not step the block gives the BF16 shadow when the
 * parameter has one: ork_tstream_data_dtype says which. */
void *ork_tstream_data(ork_tstream *z, int param);
ork_dtype ork_tstream_data_dtype(const ork_tstream *z, int param);
float *ork_tstream_grad(ork_tstream *z, int param);
ork_status ork_tstream_leave(ork_tstream *z, int block);
ork_status ork_tstream_grads_ready(ork_tstream *z, int block);
ork_status ork_tstream_pass_end(ork_tstream *z);

/* After a training pass: reads this step's Σg² (one sync), returns the
 * global gradient norm of this step (*norm), the clip factor that was
 * applied (*applied) and how many blocks were skipped as non-finite
 * (*skipped_blocks); sets the clip factor of the next step. */
ork_status ork_tstream_step_end(ork_tstream *z, double *norm, float *applied, int *skipped_blocks);
/* The previous step's norm (saved with the training state; resume restores it). */
double ork_tstream_prev_norm(const ork_tstream *z);
void ork_tstream_set_prev_norm(ork_tstream *z, double norm);

#endif
