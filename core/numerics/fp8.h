/* numerics/fp8.h — float32 <-> OCP FP8 (E4M3 "fn" and E5M2) conversion.
 *
 * Owns: the one CPU definition of float32 -> fp8 rounding. It is bit-exact with
 * CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE | __NV_NOSAT, __NV_E4M3 | __NV_E5M2)
 * for all 2^32 float inputs (tests/numerics/test_fp8_cuda_exhaustive.cu proves it
 * on the GPU; test_numerics_fp8 checks a large sample against a double-based
 * reference). Integer-only, no FPU state, no tables. See NUMERICS.md §1.
 *
 * Rules (CUDA's): round to nearest even, once, from the float32 value.
 *   SATFINITE: anything rounding past max finite, and +-Inf, -> +-max finite.
 *   NOSAT:     overflow and +-Inf -> E4M3 +-NaN (0x7F / 0xFF), E5M2 +-Inf (0x7C / 0xFC).
 *   Any NaN input -> 0x7F in both formats and modes (CUDA canonicalises the NaN to
 *   0x7FFFFFFF first, so the sign is dropped).
 *   Values at or below half the smallest subnormal -> +-0 (sign kept).
 * [any-thread] */
#ifndef ORK_NUMERICS_FP8_H
#define ORK_NUMERICS_FP8_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ork_fp8_sat {
    ORK_FP8_SATFINITE = 0, /* __NV_SATFINITE: clamp to +-max finite (the default) */
    ORK_FP8_NOSAT = 1,     /* __NV_NOSAT: overflow gives NaN (E4M3) / Inf (E5M2) */
} ork_fp8_sat;

#define ORK_E4M3_MAX 448.0f
#define ORK_E5M2_MAX 57344.0f

/* Core rounding on float32 bits. mbits: mantissa bits (3 / 2), bias (7 / 15),
 * maxcode: largest finite code (0x7E / 0x7B), ovf: NOSAT overflow code (0x7F / 0x7C). */
static inline uint8_t ork_fp8_round_bits_(uint32_t u, unsigned mbits, unsigned bias,
                                          unsigned maxcode, unsigned ovf, int satfinite) {
    uint32_t a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u, code;
    if (a > 0x7F800000u) return 0x7F;                    /* NaN: canonical, unsigned */
    if (a >= (128u - bias) << 23) {                      /* |x| >= 2^(1-bias): normal */
        unsigned sh = 23u - mbits;                       /* RNE on the dropped bits; a */
        uint32_t r = a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u); /* carry may bump e */
        code = (r >> sh) - ((127u - bias) << mbits);    /* rebias the exponent field */
        if (code > maxcode) return (uint8_t)(sign | (satfinite ? maxcode : ovf));
    } else {                                             /* fp8 subnormal (or zero) */
        /* |x| = m * 2^(e-150) with the implicit bit; one fp8 subnormal step is
         * 2^(1-bias-mbits), so the code is m >> (151 - bias - mbits - e), rounded. */
        uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t sh = 151u - bias - mbits - e;           /* >= 21 here */
        code = sh >= 25u ? 0u : (m + ((1u << (sh - 1)) - 1u) + ((m >> sh) & 1u)) >> sh;
    }
    return (uint8_t)(sign | code);
}

/* The same rounding for FINITE inputs with SATFINITE only, written without
 * branches so that compilers can vectorize it (the quantizer's inner loop; both
 * paths are computed and one selected). Equal to ork_fp8_round_bits_(u, ..., 1)
 * for every finite u (tests/numerics/test_fp8.c checks it). */
static inline uint8_t ork_fp8_round_finite_sat_(uint32_t u, unsigned mbits, unsigned bias,
                                                unsigned maxcode) {
    uint32_t a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u, sh = 23u - mbits;
    uint32_t cn = ((a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u)) >> sh) - ((127u - bias) << mbits);
    int32_t ss = (int32_t)(151u - bias - mbits) - (int32_t)(a >> 23);
    uint32_t s2 = (uint32_t)(ss < 1 ? 1 : ss > 31 ? 31 : ss); /* >= 25 rounds to 0 */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t cs = (m + ((1u << (s2 - 1)) - 1u) + ((m >> s2) & 1u)) >> s2;
    uint32_t code = a >= (128u - bias) << 23 ? cn : cs;
    return (uint8_t)(sign | (code < maxcode ? code : maxcode));
}

static inline uint8_t ork_f32_to_e4m3(float x, ork_fp8_sat sat) {
    uint32_t u; memcpy(&u, &x, 4);
    return ork_fp8_round_bits_(u, 3, 7, 0x7E, 0x7F, sat == ORK_FP8_SATFINITE);
}
static inline uint8_t ork_f32_to_e5m2(float x, ork_fp8_sat sat) {
    uint32_t u; memcpy(&u, &x, 4);
    return ork_fp8_round_bits_(u, 2, 15, 0x7B, 0x7C, sat == ORK_FP8_SATFINITE);
}

/* Exact decode. NaN codes decode to a quiet float NaN with the code's sign
 * (0x7FC00000 | sign); E5M2 +-Inf to +-Inf. */
static inline float ork_e4m3_to_f32(uint8_t c) {
    uint32_t s = (uint32_t)(c & 0x80) << 24, e = (c >> 3) & 0xF, m = c & 7, u;
    if (e == 15 && m == 7) u = s | 0x7FC00000u;
    else if (e) u = s | ((e + 120u) << 23) | (m << 20);
    else {                                               /* m * 2^-9, exact in float */
        float f = (float)m * 0x1p-9f;
        memcpy(&u, &f, 4);
        u |= s;
    }
    float f; memcpy(&f, &u, 4);
    return f;
}
static inline float ork_e5m2_to_f32(uint8_t c) {
    uint32_t s = (uint32_t)(c & 0x80) << 24, e = (c >> 2) & 0x1F, m = c & 3, u;
    if (e == 31) u = s | (m ? 0x7FC00000u : 0x7F800000u);
    else if (e) u = s | ((e + 112u) << 23) | (m << 21);
    else {                                               /* m * 2^-16 */
        float f = (float)m * 0x1p-16f;
        memcpy(&u, &f, 4);
        u |= s;
    }
    float f; memcpy(&f, &u, 4);
    return f;
}

/* Scalar conversions by format (fmt: ORK_F8_E4M3 or ORK_F8_E5M2; anything else
 * is treated as E5M2 — the bulk calls below check it). Out-of-line copies of the
 * inline functions, for callers that want the library's compiled code. */
uint8_t ork_f32_to_fp8(float x, ork_dtype fmt, ork_fp8_sat sat);
float ork_fp8_to_f32(uint8_t c, ork_dtype fmt);

/* Largest finite value of an fp8 format (448 / 57344); 0 for other dtypes. */
float ork_fp8_max(ork_dtype fmt);

/* Bulk conversions. src/dst: [n]. ORK_E_INVALID for a non-fp8 fmt or NULL arrays
 * with n > 0. Single-threaded; callers split large arrays. */
ork_status ork_fp8_encode(const float *src, size_t n, ork_dtype fmt, ork_fp8_sat sat,
                          uint8_t *dst);
ork_status ork_fp8_decode(const uint8_t *src, size_t n, ork_dtype fmt, float *dst);

#ifdef __cplusplus
}
#endif
#endif
