/* numerics/finite.h — where the first NaN or Inf sits in a buffer of any of
 * the core's dtypes: the check every tensor read from a resumable state or a
 * cache passes through, and the one that keeps a non-finite LoRA from being
 * written (docs/outputs.md, "What orakul refuses to save or load").
 *
 * Bit tests only (no float compare, no FP exceptions), unaligned-safe (memcpy
 * loads), little-endian data as safetensors stores it. F8_E4M3 is the "fn"
 * variant: no Inf, NaN = S.1111.111. Integer dtypes are always finite.
 * Owns nothing. [any-thread] */
#ifndef ORK_NUMERICS_FINITE_H
#define ORK_NUMERICS_FINITE_H

#include <orakul/dtype.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* data: [n] elements of dt. The index of the first non-finite element, or -1
 * when all n are finite (and for integer dtypes, and for n == 0). */
int64_t ork_first_nonfinite(ork_dtype dt, const void *data, uint64_t n);

/* "NaN", "+inf" or "-inf": what element i of data is (after ork_first_nonfinite
 * found it); "finite" when it is not one of those. */
const char *ork_nonfinite_kind(ork_dtype dt, const void *data, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif
