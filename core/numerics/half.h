/* numerics/half.h — float32 <-> bf16 and float32 <-> IEEE f16, round to nearest
 * even, plus bf16 stochastic rounding keyed on (seed, step, element index).
 *
 * The RNE conversions are inline in <orakul/numerics.h> (shared with plugins;
 * NUMERICS.md §4): they match CUDA's __float2bfloat16 / __float2half (cvt.rn)
 * bit for bit, NaN included (any NaN becomes the canonical, unsigned 0x7FFF;
 * cuda_bf16.hpp and cuda_fp16.hpp drop the sign the same way); f16 overflow
 * (|x| >= 65520) -> +-Inf. Decoding is exact; NaN decodes to a quiet float NaN
 * keeping sign and payload.
 * Owns: the stochastic rounding, its Philox RNG and the bulk calls. [any-thread] */
#ifndef ORK_NUMERICS_HALF_H
#define ORK_NUMERICS_HALF_H

#include <orakul/numerics.h> /* the scalar conversions (RNE) */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stochastic rounding with a uniform 16-bit r: add r to the dropped half, then
 * truncate, so P(round up) = dropped / 2^16 (unbiased). A finite input never
 * rounds to Inf (clamped to +-max finite); NaN -> 0x7FFF; +-Inf stays. */
static inline uint16_t ork_f32_to_bf16_sr(float x, uint16_t r) {
    uint32_t u = ork_f32_bits(x), a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FFF;
    if (a == 0x7F800000u) return (uint16_t)(u >> 16);
    uint16_t h = (uint16_t)((u + r) >> 16);
    return (h & 0x7FFF) == 0x7F80 ? (uint16_t)(h - 1) : h;
}

/* ---- counter-based RNG: Philox4x32-10 (Salmon et al., Random123) ------------ */
static inline void ork_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                     uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* The 16-bit random for element `index` of update `step` under `seed`: one Philox
 * call serves 8 consecutive elements: counter = {index / 8 (64 bit), step (64 bit)},
 * key = seed; element index % 8 takes 16-bit half (index % 8) of the output,
 * low half first. A GPU kernel reproduces this exactly. */
static inline uint16_t ork_sr_bits(uint64_t seed, uint64_t step, uint64_t index) {
    uint64_t g = index >> 3;
    uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)step, (uint32_t)(step >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
    ork_philox4x32_10(ctr, key, out);
    unsigned j = (unsigned)(index & 7);
    return (uint16_t)(out[j >> 1] >> (16 * (j & 1)));
}

/* ---- bulk (src/dst: [n]) -------------------------------------------------- */
void ork_bf16_from_f32(const float *src, size_t n, uint16_t *dst);
void ork_bf16_to_f32_n(const uint16_t *src, size_t n, float *dst);
void ork_f16_from_f32(const float *src, size_t n, uint16_t *dst);
void ork_f16_to_f32_n(const uint16_t *src, size_t n, float *dst);
/* Stochastic rounding of src[k] as element index0 + k of (seed, step): the same
 * result however the array is split into calls. */
void ork_bf16_from_f32_sr(const float *src, size_t n, uint64_t seed, uint64_t step,
                          uint64_t index0, uint16_t *dst);

#ifdef __cplusplus
}
#endif
#endif
