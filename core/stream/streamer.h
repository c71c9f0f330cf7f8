/* stream/streamer.h — the block streamer: frozen weights of streamed blocks
 * live packed in a few large pinned host arenas and come to the device one
 * block at a time through a ring of device slots.
 *
 * Packing. Each streamed block's weights form ONE contiguous host region,
 * records in declaration order, each record = the weight's stored bytes (any
 * dtype: F32, BF16, FP8) immediately followed by its optional F32 scales,
 * starting at a multiple of ORK_STREAM_ALIGN. A block's region never spans
 * two arenas, and the region's layout is the slot's layout, so a block moves
 * with one copy and a weight's device address is slot + record offset.
 * Arenas: chunks of arena_bytes (default 1 GiB) filled first-fit in block
 * order; a block larger than a chunk gets an arena of its own.
 *
 * Schedule. A pass (the runner's forward, or forward + backward) announces
 * its block order; the streamer keeps the streamed blocks of it, merging
 * consecutive repeats into one visit (the last block's forward and its
 * recompute + backward: one load serves both). Visit v uses slot v mod K.
 * pass_begin issues the loads of visits 0..K-1; when visit v has been left
 * for the last time, the compute lane records the slot's FREE event and the
 * load of visit v+K is issued into the same slot: the H2D lane waits FREE,
 * copies, records READY. enter(v) makes the compute lane wait READY. So up
 * to K-1 blocks are in flight while one computes; host-to-device only.
 *
 * Transit coding (opts.compress, stream/transit/transit.h). Before the first pass after
 * its region was written, a block is coded in place in its arena when that
 * shrinks it to at most max_ratio of its bytes, as independent pieces of
 * piece_bytes; its load then copies each coded piece into a staging ring
 * (max_ratio x the largest block, tag "stream_staging") on the H2D lane and
 * decodes it into the slot on the DEC lane: the copies need not wait for the
 * slot, only the decodes do, and the link copies the next piece while one
 * decodes. Lossless: a
 * slot holds the same bytes either way. ork_streamer_host on a coded block
 * decodes it back first.
 *
 * Owns: the arenas (pinned, via the copy engine), the slots (device, tag
 * "stream_slots" on the allocator), the staging buffer and the schedule state. The copy engine is
 * borrowed; the streamer uses its events event_base .. event_base +
 * ork_streamer_n_events(K) - 1 (2K without coding or lending).
 * [control-thread] */
#ifndef ORK_STREAM_STREAMER_H
#define ORK_STREAM_STREAMER_H

#include "stream/copy_engine.h"
#include "tensor/alloc.h"

#include <stddef.h>
#include <stdint.h>

#define ORK_STREAM_ALIGN 256

/* One weight's record inside its block's region. */
typedef struct ork_stream_rec {
    size_t offset;       /* from the region start, ORK_STREAM_ALIGN-aligned */
    size_t data_bytes;   /* the stored bytes */
    size_t scale_offset; /* from the region start (= offset + data_bytes rounded up to 16) */
    size_t scale_bytes;  /* F32 scales, 0 when none */
} ork_stream_rec;

/* Append a record to a region of *size bytes so far (grows *size). */
void ork_stream_rec_add(size_t *size, size_t data_bytes, size_t scale_bytes, ork_stream_rec *rec);

typedef struct ork_streamer_opts {
    int n_blocks;
    const uint8_t *streamed;   /* [n_blocks] 1: streamed */
    const size_t *block_bytes; /* [n_blocks] region bytes (read for streamed blocks) */
    int n_slots;               /* >= 2 */
    size_t arena_bytes;        /* 0: 1 GiB */
    int event_base;            /* first copy-engine event to use */
    int compress;              /* 1: code blocks that shrink (stream/transit/transit.h) */
    double max_ratio;          /* a block is coded when coded <= max_ratio x raw; 0: ORK_STREAM_CODEC_RATIO */
    int nthreads;              /* encoding threads, 0: 1 */
    size_t piece_bytes;        /* raw bytes per independently coded piece, 0: a block is one piece */
} ork_streamer_opts;

/* Pieces let the DEC lane decode one while the H2D lane copies the next (with
 * whole blocks through one buffer, the link idled through every decode: 31-39
 * ms a step on the H200 runs); the ring holds a whole block's coded bytes, so
 * the copies still run a block ahead of the slot's FREE. Each copy costs ~33 us
 * on top of its bytes on the H200 (45 MB pieces at 53.6 GB/s, 333 MB blocks at
 * 55.5): 64 MiB pieces gave back in copies what the DEC lane saved (the seed's
 * BF16 r1280 step 1.399 -> 1.404 s), hence 256 MiB. The streamer raises
 * piece_bytes to 1/16 of the largest block (the ring's history holds 32
 * pieces). ORK_STREAM_PIECE_BYTES is the trainer's (ORAKUL_STREAM_PIECE_MB, a
 * bench switch, overrides it; 0 there: whole blocks). */
#define ORK_STREAM_PIECE_BYTES ((size_t)256 << 20)
/* The raw bytes a piece covers when piece_bytes is asked for (0: whole
 * blocks) and the largest block has slot_bytes: ORK_STREAM_ALIGN-rounded, and
 * at least 1/16 of that block. The streamer's and the planner's one rule. */
size_t ork_stream_piece_bytes(size_t piece_bytes, size_t slot_bytes);

/* The coded size a block must reach to travel coded (the staging buffer's
 * fraction of a slot; the planner counts the same). BF16 weights code to ~0.75,
 * E5M2 ones to 0.76-0.80 (the trained TAEF1 encoder 0.8017: why not 0.80). */
#define ORK_STREAM_CODEC_RATIO 0.85

typedef struct ork_streamer ork_streamer;

typedef struct ork_streamer_stats {
    uint64_t loads;      /* block loads issued (copies) */
    uint64_t reused;     /* visits whose block its slot still held: no copy */
    uint64_t lent_loads; /* of the loads, those through lent memory (ork_streamer_lend) */
    uint64_t early_loads; /* of the loads, those copied ahead at the pass before's end (staging buffer, ahead region) */
    uint64_t h2d_bytes;  /* bytes of them (coded bytes for coded blocks) */
    uint64_t raw_bytes;  /* the same loads' decoded bytes */
    int n_coded;         /* streamed blocks that travel coded */
    size_t staging_bytes;
    size_t slot_bytes;   /* one slot */
    int n_slots, n_streamed, n_arenas;
    size_t host_bytes;   /* pinned bytes held */
} ork_streamer_stats;

ork_status ork_streamer_create(ork_copy_engine *ce, ork_alloc *a, const ork_streamer_opts *o, ork_streamer **out);
void ork_streamer_destroy(ork_streamer *s);

/* The staging buffer coded loads need: max_ratio x slot_bytes (pass the smaller
 * of the largest block and the piece size), aligned. */
size_t ork_stream_staging_bytes(size_t slot_bytes, double max_ratio);

int ork_streamer_is_streamed(const ork_streamer *s, int block);
/* The block's packed host region (streamed blocks), NULL otherwise (or when a
 * coded region could not be decoded back). */
void *ork_streamer_host(ork_streamer *s, int block);

/* Code the blocks written since the last seal (opts.compress; pass_begin does
 * it too): call it once the weights are loaded, so step 1 does not pay for it.
 * Logs one line with the coded share when it coded anything. */
ork_status ork_streamer_seal(ork_streamer *s);

/* The trace's marks on the compute lane (ork_ce_mark): a pass's start and end,
 * and each block's enter tagged with the block. */
#define ORK_STREAM_MARK_PASS_BEGIN (-1)
#define ORK_STREAM_MARK_PASS_END (-2)

/* Start a pass over blocks in `order` (n entries; resident ones are skipped).
 * A pass left unfinished by an error is dropped by the next pass_begin. */
ork_status ork_streamer_pass_begin(ork_streamer *s, const int *order, int n);
/* The block is about to run: *dev = its region on the device (NULL for a
 * resident block). Must follow the announced order. */
ork_status ork_streamer_enter(ork_streamer *s, int block, void **dev);
/* The block's work has been enqueued on the compute lane. */
ork_status ork_streamer_leave(ork_streamer *s, int block);
/* Checks every visit was made. */
ork_status ork_streamer_pass_end(ork_streamer *s);

void ork_streamer_stats_get(const ork_streamer *s, ork_streamer_stats *out);

/* Copy-engine events a streamer of n_slots uses from event_base on: 2 per slot,
 * the lending's (with fewer, ork_streamer_lend takes nothing) and the staging
 * ring's (coding needs them all: create fails without). */
int ork_streamer_n_events(int n_slots);

/* Lending. The owner of device memory it does not use from this point of the
 * compute lane until ork_streamer_reclaim (the trainer: the LoRA gradients,
 * dead from the optimizer step to the next backward) lends it between passes.
 * While lent, each pass's forward loads (the visits before the first repeat of
 * a lower block, those whose block its slot does not still hold) are copied
 * into it back to back — a FIFO of coded blocks, raw ones as they are —
 * without waiting for a free slot, and each is decoded into its slot on the
 * compute lane when entered. Copying starts at the pass's first enter (any
 * block), after the model's own set-up: a pageable upload queues behind every
 * H2D copy issued before it. Neither a slot's FREE nor a decode holds up the
 * copies (the forward pass, bound by the link, then runs at the link's rate;
 * a decode took the SMs either way). The first of those loads, as the pass
 * before predicts it, is copied ahead at that pass's end into the staging
 * buffer (idle from its last ring load to the next pass's backward), where
 * the link idles. Memory smaller
 * than the largest block (or too few events) is not taken: a no-op. Slots hold
 * the same bytes either way. */
ork_status ork_streamer_lend(ork_streamer *s, void *dev, size_t bytes);
/* The owner takes it back: the compute lane's later work is ordered after
 * every copy into it. Between passes, or in a pass once its forward visits
 * were entered (the trainer: in the loss, before the backward); else an
 * internal error. No-op when nothing is lent. */
ork_status ork_streamer_reclaim(ork_streamer *s);
int ork_streamer_lent(const ork_streamer *s);
/* Device memory the streamer may fill at a pass's end with the next pass's
 * lent loads after the one the staging buffer takes: the trainer's
 * checkpoints, n block boundaries laid out in order (boundary i from byte
 * off[i], off[n] the end; ork_runner_checkpoint_pool). The tail from boundary
 * m is dead from the backward's read of it (block m enqueued) until the next
 * forward writes it (after block m - 1): loads of blocks up to m - 1 go there,
 * m as low as the bytes allow, each decoded at its enter. Between passes;
 * NULL: none (copies into the old memory complete before the compute lane's
 * later work). */
ork_status ork_streamer_set_ahead(ork_streamer *s, void *dev, const size_t *off, int n);
/* Whether the pass after the current one will be lent (its owner knows: the
 * trainer lends only in a step's first micro-batch). Only then is that pass's
 * first lent load copied ahead at this pass's end; without the word, a lent
 * pass expects a lent one. */
void ork_streamer_next_lent(ork_streamer *s, int lent);

#endif
