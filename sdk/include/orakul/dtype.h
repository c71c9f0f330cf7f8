/* orakul/dtype.h — element types and devices shared by the core, the SDK and
 * every file format orakul reads (safetensors names map 1:1 onto these).
 * Values are part of the ABI: append only. */
#ifndef ORAKUL_DTYPE_H
#define ORAKUL_DTYPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ork_dtype {
    ORK_F32 = 0,
    ORK_BF16 = 1,
    ORK_F16 = 2,
    ORK_F8_E4M3 = 3, /* OCP E4M3 "fn": no Inf, max 448 */
    ORK_F8_E5M2 = 4, /* OCP E5M2: IEEE-like, max 57344 */
    ORK_I32 = 5,
    ORK_U8 = 6,
    ORK_F64 = 7,     /* CPU-only: reference checks and reductions */
    ORK_I64 = 8,     /* CPU-only: index data read from files */
    ORK_DTYPE_COUNT
} ork_dtype;

typedef enum ork_device {
    ORK_DEV_CPU = 0,
    ORK_DEV_CUDA = 1,
} ork_device;

/* Bytes per element; 0 for an invalid dtype. */
static inline size_t ork_dtype_size(ork_dtype t) {
    switch (t) {
    case ORK_F32: case ORK_I32: return 4;
    case ORK_BF16: case ORK_F16: return 2;
    case ORK_F8_E4M3: case ORK_F8_E5M2: case ORK_U8: return 1;
    case ORK_F64: case ORK_I64: return 8;
    default: return 0;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_DTYPE_H */
