/* numerics/elem.h — one element of a float array of any storage dtype (F32,
 * BF16, F16, F64) read as a double or written from one with the rounding of
 * numerics/half.h (RNE). For host-side loops that convert as they go (the CPU
 * backend's kernels, a tensor copied to the host in another dtype).
 * Owns nothing; inline. [any-thread] */
#ifndef ORK_NUMERICS_ELEM_H
#define ORK_NUMERICS_ELEM_H

#include "numerics/half.h"

#include <orakul/dtype.h>
#include <stdint.h>

/* Element i of p (dtype dt) as a double; 0 for a dtype that is not a float. */
static inline double ork_elem_load(const void *p, ork_dtype dt, int64_t i) {
    switch (dt) {
    case ORK_F32: return ((const float *)p)[i];
    case ORK_BF16: return ork_bf16_to_f32(((const uint16_t *)p)[i]);
    case ORK_F16: return ork_f16_to_f32(((const uint16_t *)p)[i]);
    case ORK_F64: return ((const double *)p)[i];
    default: return 0.0;
    }
}
/* Store v as element i of p (dtype dt); nothing for a dtype that is not a float. */
static inline void ork_elem_store(void *p, ork_dtype dt, int64_t i, double v) {
    switch (dt) {
    case ORK_F32: ((float *)p)[i] = (float)v; break;
    case ORK_BF16: ((uint16_t *)p)[i] = ork_f32_to_bf16((float)v); break;
    case ORK_F16: ((uint16_t *)p)[i] = ork_f32_to_f16((float)v); break;
    case ORK_F64: ((double *)p)[i] = v; break;
    default: break;
    }
}
/* 1 for the dtypes ork_elem_load/store convert. */
static inline int ork_elem_float_dt(ork_dtype dt) {
    return dt == ORK_F32 || dt == ORK_BF16 || dt == ORK_F16 || dt == ORK_F64;
}

#endif
