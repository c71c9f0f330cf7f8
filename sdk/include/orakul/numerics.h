/* orakul/numerics.h — the core's float conversions, for plugins: float32 <->
 * bf16 and IEEE f16 (round to nearest even), float32 <-> OCP FP8 (E4M3 "fn",
 * E5M2) with CUDA's rounding, as static inline functions (the core's own
 * definitions: core/numerics/{half,fp8}.h include this header), and the
 * service "orakul.numerics/1": the core's FP8 weight quantizer, the bit-exact
 * reference the quant plugin uses.
 *
 * Roundings (docs/NUMERICS.md): bit for bit CUDA's __float2bfloat16,
 * __float2half (cvt.rn) and __nv_cvt_float_to_fp8 (SATFINITE | NOSAT). Any NaN
 * becomes the canonical unsigned NaN (bf16/f16 0x7FFF, fp8 0x7F); f16 overflow
 * (|x| >= 65520) and bf16 overflow give +-Inf. Decoding is exact.
 * Owns nothing. [any-thread] */
#ifndef ORAKUL_NUMERICS_H
#define ORAKUL_NUMERICS_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bit views -------------------------------------------------------------- */
static inline uint32_t ork_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float ork_bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* ---- bf16 ------------------------------------------------------------------- */
static inline uint16_t ork_f32_to_bf16(float x) {
    uint32_t u = ork_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); /* overflow -> Inf */
}
static inline float ork_bf16_to_f32(uint16_t h) { return ork_bits_f32((uint32_t)h << 16); }

/* ---- f16 ----------------------------------------------------------------- */
static inline uint16_t ork_f32_to_f16(float x) {
    uint32_t u = ork_f32_bits(x), a = u & 0x7FFFFFFFu, sign = (u >> 16) & 0x8000u, code;
    if (a > 0x7F800000u) return 0x7FFF;
    if (a >= 0x38800000u) {                               /* |x| >= 2^-14: normal */
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        code = (r >> 13) - (112u << 10);
        if (code >= 0x7C00u) code = 0x7C00u;              /* overflow and Inf -> Inf */
    } else {                                              /* subnormal: steps of 2^-24 */
        uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, sh = 126u - e; /* >= 14 */
        code = sh >= 25u ? 0u : (m + ((1u << (sh - 1)) - 1u) + ((m >> sh) & 1u)) >> sh;
    }
    return (uint16_t)(sign | code);
}
static inline float ork_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 31) return ork_bits_f32(s | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e) return ork_bits_f32(s | ((e + 112u) << 23) | (m << 13));
    return ork_bits_f32(s | ork_f32_bits((float)m * 0x1p-24f)); /* exact */
}

/* ---- fp8 --------------------------------------------------------------------
 * Rules (CUDA's): round to nearest even, once, from the float32 value.
 *   SATFINITE: anything rounding past max finite, and +-Inf, -> +-max finite.
 *   NOSAT:     overflow and +-Inf -> E4M3 +-NaN (0x7F / 0xFF), E5M2 +-Inf (0x7C / 0xFC).
 *   Any NaN input -> 0x7F in both formats and modes (CUDA canonicalises the NaN to
 *   0x7FFFFFFF first, so the sign is dropped).
 *   Values at or below half the smallest subnormal -> +-0 (sign kept). */
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

/* Scale columns per row of an FP8 weight: 1 when block == 0 (one scale per
 * row), else ceil(cols / block) (the last block may be short). */
static inline size_t ork_quant_nblocks(size_t cols, size_t block) {
    return block ? (cols + block - 1) / block : 1;
}

/* ---- the service "orakul.numerics/1" ------------------------------------------
 * Symmetric absmax FP8 quantization of a weight W[rows = out, cols = in] (or of
 * each 1 x block slice of a row): s = max |W| / fmt_max (fp32, never below
 * FLT_MIN; an all-zero slice keeps s = 1), q = fp8_satfinite(W / s). */
#define ORK_SERVICE_NUMERICS "orakul.numerics/1"

typedef struct ork_numerics_api {
    ork_abi abi;
    /* Quantize on the calling thread only (callers split rows over their own
     * threads; rows are independent, so any split gives the same bytes).
     *   w: [rows, cols] of in_dtype F32, BF16 or F16   fmt: F8_E4M3 or F8_E5M2
     *   q: out [rows, cols] codes   scales: out [rows, ork_quant_nblocks(cols, block)]
     *   rel_rms: out (may be NULL) ||W - deq(q)|| / ||W||
     * A failure logs nothing: its one line goes into err[err_size] (may be
     * NULL). ORK_E_NUMERIC for a NaN/Inf in W (q and scales then unspecified),
     * ORK_E_INVALID for bad arguments, ORK_E_NOMEM. */
    ork_status (*quantize_fp8)(const char *name, const void *w, ork_dtype in_dtype, size_t rows, size_t cols,
                               ork_dtype fmt, size_t block, uint8_t *q, float *scales, double *rel_rms,
                               char *err, size_t err_size);
    /* The inverse, on the calling thread: out[r, c] = fp8_value(q[r, c]) *
     * scales[r, c / block] in fp32, stored as out_dtype F32, BF16 or F16 (RNE).
     * Errors as quantize_fp8. */
    ork_status (*dequantize_fp8)(const uint8_t *q, const float *scales, size_t rows, size_t cols, ork_dtype fmt,
                                 size_t block, ork_dtype out_dtype, void *out, char *err, size_t err_size);
} ork_numerics_api;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_NUMERICS_H */
