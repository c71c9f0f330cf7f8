/* numerics/fp8.c — out-of-line and bulk float32 <-> fp8 conversions.
 * Owns: nothing at run time; the rounding itself lives in fp8.h (inline). */
#include "numerics/fp8.h"

#include "util/log.h"

uint8_t ork_f32_to_fp8(float x, ork_dtype fmt, ork_fp8_sat sat) {
    return fmt == ORK_F8_E4M3 ? ork_f32_to_e4m3(x, sat) : ork_f32_to_e5m2(x, sat);
}

float ork_fp8_to_f32(uint8_t c, ork_dtype fmt) {
    return fmt == ORK_F8_E4M3 ? ork_e4m3_to_f32(c) : ork_e5m2_to_f32(c);
}

float ork_fp8_max(ork_dtype fmt) {
    return fmt == ORK_F8_E4M3 ? ORK_E4M3_MAX : fmt == ORK_F8_E5M2 ? ORK_E5M2_MAX : 0.0f;
}

static ork_status check_args(const void *a, const void *b, size_t n, ork_dtype fmt,
                             const char *what) {
    if (fmt != ORK_F8_E4M3 && fmt != ORK_F8_E5M2)
        return ORK_FAIL(ORK_E_INVALID, "%s: dtype %d is not an fp8 format", what, (int)fmt);
    if (n && (!a || !b)) return ORK_FAIL(ORK_E_INVALID, "%s: NULL array for %zu elements", what, n);
    return ORK_OK;
}

ork_status ork_fp8_encode(const float *src, size_t n, ork_dtype fmt, ork_fp8_sat sat,
                          uint8_t *dst) {
    ORK_TRY(check_args(src, dst, n, fmt, "fp8 encode"));
    if (fmt == ORK_F8_E4M3)
        for (size_t i = 0; i < n; i++) dst[i] = ork_f32_to_e4m3(src[i], sat);
    else
        for (size_t i = 0; i < n; i++) dst[i] = ork_f32_to_e5m2(src[i], sat);
    return ORK_OK;
}

ork_status ork_fp8_decode(const uint8_t *src, size_t n, ork_dtype fmt, float *dst) {
    ORK_TRY(check_args(src, dst, n, fmt, "fp8 decode"));
    float lut[256];
    for (int c = 0; c < 256; c++) lut[c] = ork_fp8_to_f32((uint8_t)c, fmt);
    for (size_t i = 0; i < n; i++) dst[i] = lut[src[i]];
    return ORK_OK;
}
