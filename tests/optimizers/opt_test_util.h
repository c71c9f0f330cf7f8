/* opt_test_util.h — deterministic randn for the optimizer tests (splitmix64 +
 * Box-Muller). Test-only. */
#ifndef ORK_OPT_TEST_UTIL_H
#define ORK_OPT_TEST_UTIL_H

#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s; } ork_trng;

static inline uint64_t ork_trng_u64(ork_trng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double ork_trng_unif(ork_trng *r) { /* (0, 1) */
    return ((double)(ork_trng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
/* out[n] = randn * scale */
static inline void ork_trng_randn(ork_trng *r, float *out, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i += 2) {
        double u = ork_trng_unif(r), v = ork_trng_unif(r);
        double rad = sqrt(-2.0 * log(u));
        out[i] = (float)(rad * cos(6.283185307179586 * v)) * scale;
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(6.283185307179586 * v)) * scale;
    }
}

#endif
