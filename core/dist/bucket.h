/* dist/bucket.h — how the LoRA gradients are laid out for the all-reduce:
 * one contiguous F32 buffer with the parameters in backward order (the last
 * block's first), cut into buckets at block boundaries, and which buckets may
 * be launched once a block's backward is done. Pure bookkeeping (no device,
 * no NCCL): dist/grad_sync.c does the memory and the collectives.
 *
 * Layout: blocks n_blocks-1 .. 0, each block's parameters in index order,
 * then the parameters whose block is out of range (launched at flush only).
 * Every parameter starts at a multiple of `align` elements (the gaps are
 * zeros that travel too). Buckets: consecutive blocks while the bucket stays
 * within cap elements; a block larger than cap is a bucket of its own. A
 * block never straddles two buckets, so "every block of bucket b is done" is
 * exactly "bucket b's gradients are final".
 *
 * Launch order is the bucket order on every rank (NCCL needs the same
 * sequence of collectives everywhere): a bucket is launched when it is
 * complete AND every bucket before it has been launched.
 *
 * Owns its arrays (ork_bucket_plan_free). [control-thread] */
#ifndef ORK_DIST_BUCKET_H
#define ORK_DIST_BUCKET_H

#include <orakul/abi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_bucket_plan {
    int n_params, n_blocks, n_buckets;
    int64_t total;          /* elements of the flat buffer, padding included */
    int64_t *offset;        /* [n_params] first element of parameter i */
    int *bucket_of_block;   /* [n_blocks] bucket holding block b's parameters, -1 if none */
    int64_t *begin, *end;   /* [n_buckets] element range [begin, end) */
    int *n_blocks_in;       /* [n_buckets] blocks with parameters in the bucket (0: the flush-only tail) */
    /* launch state of the current backward */
    int *pending;           /* [n_buckets] blocks not yet done */
    uint8_t *done;          /* [n_blocks] block reported this pass */
    int next;               /* buckets [0, next) are launched */
} ork_bucket_plan;

/* numel[i], block[i] of each parameter; cap, align in elements (>= 1). */
ork_status ork_bucket_plan_make(int n_params, const int64_t *numel, const int *block, int n_blocks, int64_t cap,
                                int64_t align, ork_bucket_plan *out);
void ork_bucket_plan_free(ork_bucket_plan *p);

/* A new backward: nothing done, nothing launched. */
void ork_bucket_reset(ork_bucket_plan *p);
/* Block b's gradients are final. Returns how many buckets became launchable:
 * they are [*first, *first + n) (and count as launched). A block reported
 * twice, or without parameters, launches nothing. */
int ork_bucket_block_done(ork_bucket_plan *p, int block, int *first);
/* End of the backward: the buckets not launched yet, [*first, *first + n). */
int ork_bucket_flush(ork_bucket_plan *p, int *first);

#ifdef __cplusplus
}
#endif
#endif
