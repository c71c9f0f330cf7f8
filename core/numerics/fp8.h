/* numerics/fp8.h — float32 <-> OCP FP8 (E4M3 "fn" and E5M2) conversion.
 *
 * Owns: the library's compiled copies of the conversions and the bulk calls.
 * The rounding itself is inline in <orakul/numerics.h> (shared with plugins):
 * bit-exact with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE | __NV_NOSAT,
 * __NV_E4M3 | __NV_E5M2) for all 2^32 float inputs
 * (tests/numerics/test_fp8_cuda_exhaustive.cu proves it on the GPU;
 * test_numerics_fp8 checks a large sample against a double-based reference).
 * Integer-only, no FPU state, no tables. See NUMERICS.md §1. [any-thread] */
#ifndef ORK_NUMERICS_FP8_H
#define ORK_NUMERICS_FP8_H

#include <orakul/numerics.h> /* the scalar conversions, ork_fp8_sat */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
