/* dist/shard.h — which samples each rank trains on, and where a resumed run
 * continues, as pure arithmetic (tests/dist checks it without processes).
 *
 * The data order is one deterministic permutation per epoch (a function of
 * the seed and the epoch). A global micro-batch takes G = world × batch_size
 * positions of it; the position advances by G per micro-batch and a new epoch
 * starts when it reaches n (the last batch of an epoch may wrap into the
 * start of the same permutation, as the single-process trainer always did).
 * With world 1 this is exactly the trainer's old k -> (epoch, offset) rule.
 *
 * The position (epoch, offset) is what a checkpoint records: a run resumed
 * with another number of GPUs (another G) continues from the same sample.
 *
 * Slicing: the trainer picks the global batch (nb items with the same token
 * grid, nb <= G); rank r takes elements r·B .. r·B+B-1 of it: disjoint slices
 * that cover the batch. When nb < G (a bucket ran short, or fewer images
 * than G) every rank still takes B elements, element e being e mod nb (some
 * images count twice in that batch); with world 1 the rank takes the nb it got.
 *
 * Owns nothing. [any-thread] */
#ifndef ORK_DIST_SHARD_H
#define ORK_DIST_SHARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_data_pos {
    int64_t epoch;
    int64_t offset; /* 0 .. n-1 within the epoch's permutation */
} ork_data_pos;

/* The position m global batches of g samples after at, for n items (n, g >= 1). */
ork_data_pos ork_shard_advance(int64_t n, int64_t g, ork_data_pos at, int64_t m);
/* Samples consumed before pos (epoch · n + offset). */
int64_t ork_shard_samples(int64_t n, ork_data_pos pos);
/* Rank's elements of a global batch of nb (>= 1) items: writes up to b indices
 * into the batch into elem, returns how many. */
int ork_shard_slice(int nb, int world, int rank, int b, int *elem);

#ifdef __cplusplus
}
#endif
#endif
