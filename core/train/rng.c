/* train/rng.c — see rng.h. */
#include "train/rng.h"

#include "cpu/cpu.h"
#include "numerics/half.h"
#include "numerics/quantize.h"

#include <math.h>

/* the hot helpers inline into the lane loop on every compiler (MSVC: __forceinline) */
#if defined(__GNUC__)
#define ORK_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define ORK_ALWAYS_INLINE __forceinline
#else
#define ORK_ALWAYS_INLINE inline
#endif

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

/* ---- bulk symmetric uniforms ------------------------------------------------
 * Uniform k of (seed, stream) is words (2·(k%2), 2·(k%2)+1) of Philox counter
 * k/2: the order ork_rng_uniform draws them in. Eight counters per batch, each
 * lane in its own array slot, so the compiler vectorizes the ten rounds; the
 * 53-bit integer is summed in double from two exact halves, which equals the
 * scalar path's (double)(hi·2^26 + lo) bit for bit. */
enum { LANES = 8 };

static ORK_ALWAYS_INLINE void philox_lanes(uint64_t ctr0, uint32_t stream, uint64_t seed, uint32_t w[4][LANES]) {
    uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int l = 0; l < LANES; l++) {
        uint64_t c = ctr0 + (uint64_t)l;
        c0[l] = (uint32_t)c; c1[l] = (uint32_t)(c >> 32); c2[l] = stream; c3[l] = 0x6f72616bu;
    }
    for (int r = 0; r < 10; r++) {
        for (int l = 0; l < LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c0[l] = n0; c1[l] = (uint32_t)p1; c2[l] = n2; c3[l] = (uint32_t)p0;
        }
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < LANES; l++) { w[0][l] = c0[l]; w[1][l] = c1[l]; w[2][l] = c2[l]; w[3][l] = c3[l]; }
}

/* A uniform u in [0, 1) mapped to [-bound, bound), as every path here maps it. */
static ORK_ALWAYS_INLINE float sym(double u, double bound) { return (float)((2.0 * u - 1.0) * bound); }

static ORK_ALWAYS_INLINE float sym_of(uint32_t a, uint32_t b, double bound) {
    return sym(((double)(int32_t)(a >> 5) * 67108864.0 + (double)(int32_t)(b >> 6)) * (1.0 / 9007199254740992.0), bound);
}

/* AVX2 where the CPU has it (eight 32x32->64 multiplies per instruction); the
 * baseline build is plain x86-64. Same arithmetic, same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) /* ifuncs: ELF only */
__attribute__((target_clones("avx2", "default")))
#endif
void ork_rng_fill_sym(uint64_t seed, uint32_t stream, uint64_t u0, float *out, int64_t n, double bound) {
    int64_t q = 0;
    if (n > 0 && (u0 & 1)) { /* the second half of a counter */
        ork_rng r;
        ork_rng_init(&r, seed, stream);
        ork_rng_restore(&r, u0 / 2 + 1, 2);
        out[q++] = sym(ork_rng_uniform(&r), bound);
    }
    uint64_t ctr = (u0 + (uint64_t)q) / 2;
    uint32_t w[4][LANES];
    for (; n - q >= 2 * LANES; q += 2 * LANES, ctr += LANES) {
        philox_lanes(ctr, stream, seed, w);
        for (int l = 0; l < LANES; l++) {
            out[q + 2 * l] = sym_of(w[0][l], w[1][l], bound);
            out[q + 2 * l + 1] = sym_of(w[2][l], w[3][l], bound);
        }
    }
    if (q < n) { /* the tail, through the scalar generator */
        ork_rng r;
        ork_rng_init(&r, seed, stream);
        ork_rng_seek(&r, ctr);
        for (; q < n; q++) out[q] = sym(ork_rng_uniform(&r), bound);
    }
}

/* Over all cores (ork_par_for): a range may start at any uniform, so the
 * values do not depend on the thread count. A BF16 destination is rounded
 * chunk by chunk as ork_bf16_from_f32 rounds. */
typedef struct fill_job {
    uint64_t seed, u0;
    uint32_t stream;
    void *dst;
    int bf16;
    double bound;
} fill_job;

static void fill_range(void *ctx, int64_t lo, int64_t hi) {
    const fill_job *f = ctx;
    if (!f->bf16) {
        ork_rng_fill_sym(f->seed, f->stream, f->u0 + (uint64_t)lo, (float *)f->dst + lo, hi - lo, f->bound);
        return;
    }
    float tmp[4096];
    for (int64_t k = lo; k < hi; k += 4096) {
        int64_t m = hi - k < 4096 ? hi - k : 4096;
        ork_rng_fill_sym(f->seed, f->stream, f->u0 + (uint64_t)k, tmp, m, f->bound);
        ork_bf16_from_f32(tmp, (size_t)m, (uint16_t *)f->dst + k);
    }
}

void ork_rng_fill_sym_mt(uint64_t seed, uint32_t stream, uint64_t u0, void *dst, int bf16, int64_t n, double bound) {
    fill_job f = {seed, u0, stream, dst, bf16, bound};
    ork_par_for(ork_numerics_threads(), n, 1 << 18, fill_range, &f);
}
