/* train/rng.c — see rng.h. */
#include "train/rng.h"

#include "numerics/half.h"

#include <math.h>

void ork_rng_init(ork_rng *r, uint64_t seed, uint32_t stream) {
    r->seed = seed;
    r->stream = stream;
    r->counter = 0;
    r->avail = 0;
}

void ork_rng_seek(ork_rng *r, uint64_t counter) {
    r->counter = counter;
    r->avail = 0;
}

uint32_t ork_rng_u32(ork_rng *r) {
    if (r->avail == 0) {
        uint32_t ctr[4] = {(uint32_t)r->counter, (uint32_t)(r->counter >> 32), r->stream, 0x6f72616bu};
        uint32_t key[2] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32)};
        ork_philox4x32_10(ctr, key, r->buf);
        r->counter++;
        r->avail = 4;
    }
    return r->buf[4 - r->avail--];
}

double ork_rng_uniform(ork_rng *r) {
    uint64_t hi = ork_rng_u32(r) >> 5, lo = ork_rng_u32(r) >> 6; /* 27 + 26 bits */
    return (double)(hi * 67108864u + lo) * (1.0 / 9007199254740992.0);
}

double ork_rng_normal(ork_rng *r) {
    /* Box-Muller; one value per call keeps the state a plain counter */
    double u1 = ork_rng_uniform(r), u2 = ork_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ork_rng_normal_f32(ork_rng *r, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)ork_rng_normal(r);
}

void ork_rng_restore(ork_rng *r, uint64_t counter, int avail) {
    r->avail = 0;
    if (avail <= 0 || counter == 0) { r->counter = counter; return; }
    r->counter = counter - 1;
    (void)ork_rng_u32(r); /* regenerate the buffer of counter-1 */
    r->avail = avail;
}
