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

enum { ORK_RNG_NOISE = 1, ORK_RNG_TIMESTEP = 2, ORK_RNG_DATA = 3, ORK_RNG_INIT = 4, ORK_RNG_DROPOUT = 5,
       ORK_RNG_CAPTION = 6 /* caption dropout (train/text_glue.c) */ };

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
/* out[q] = (float)((2·u - 1)·bound) for uniforms u0, u0+1, ... of (seed,
 * stream): what ork_rng_uniform gives from uniform u0 on (uniform k is
 * counter k/2), bit for bit, several times faster. */
void ork_rng_fill_sym(uint64_t seed, uint32_t stream, uint64_t u0, float *out, int64_t n, double bound);
/* The same over all cores into F32 (bf16 0) or BF16 (bf16 1, rounded to
 * nearest even): the values do not depend on the thread count. */
void ork_rng_fill_sym_mt(uint64_t seed, uint32_t stream, uint64_t u0, void *dst, int bf16, int64_t n, double bound);

#endif
