/* train/rng.h — the trainer's reproducible random numbers: a counter-based
 * generator (Philox4x32-10 from numerics/half.h) keyed by (seed, stream), so
 * every draw is a pure function of (seed, stream, counter) and the whole
 * state a checkpoint must keep is the counter. [control-thread] */
#ifndef ORK_TRAIN_RNG_H
#define ORK_TRAIN_RNG_H

#include <stdint.h>

typedef struct ork_rng {
    uint64_t seed;
    uint32_t stream;   /* independent sequences: noise, timesteps, data order, dropout, init */
    uint64_t counter;  /* 4 uint32 draws per counter value */
    uint32_t buf[4];
    int avail;
} ork_rng;

enum { ORK_RNG_NOISE = 1, ORK_RNG_TIMESTEP = 2, ORK_RNG_DATA = 3, ORK_RNG_INIT = 4, ORK_RNG_DROPOUT = 5 };

void ork_rng_init(ork_rng *r, uint64_t seed, uint32_t stream);
uint32_t ork_rng_u32(ork_rng *r);
double ork_rng_uniform(ork_rng *r);         /* [0, 1) with 53 bits */
double ork_rng_normal(ork_rng *r);          /* standard normal (Box-Muller, both values used in turn) */
void ork_rng_normal_f32(ork_rng *r, float *out, int64_t n);
/* Position for checkpoints: restoring (seed, stream, counter) and discarding
 * buffered draws reproduces the sequence from the next counter on. */
void ork_rng_seek(ork_rng *r, uint64_t counter);
/* Exact state for checkpoints: (counter, avail) restores mid-buffer too. */
void ork_rng_restore(ork_rng *r, uint64_t counter, int avail);

#endif
