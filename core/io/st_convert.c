/* io/st_convert.c — the bulk converters ork_st_read_f32 / ork_st_read_into.
 * Every load is a memcpy, so tensor data may sit at any alignment. The exact
 * narrow-float decoders are core/numerics' (tested against CUDA's). Owns nothing. */
#include "io/safetensors.h"
#include "numerics/fp8.h"
#include "numerics/half.h"
#include "util/log.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

/* Unaligned little-endian loads of element i. */
static inline uint16_t ld16(const uint8_t *p, uint64_t i) { uint16_t x; memcpy(&x, p + i * 2, 2); return x; }
static inline float ldf32(const uint8_t *p, uint64_t i) { float x; memcpy(&x, p + i * 4, 4); return x; }
static inline double ldf64(const uint8_t *p, uint64_t i) { double x; memcpy(&x, p + i * 8, 8); return x; }
static inline int32_t ldi32(const uint8_t *p, uint64_t i) { int32_t x; memcpy(&x, p + i * 4, 4); return x; }
static inline int64_t ldi64(const uint8_t *p, uint64_t i) { int64_t x; memcpy(&x, p + i * 8, 8); return x; }

static ork_status convert(const ork_st_tensor *t, float *f, double *d) {
    uint64_t n = ork_st_nelements(t);
    const uint8_t *p = t->data;
#define EACH(expr) do { if (f) for (uint64_t i = 0; i < n; i++) f[i] = (float)(expr); \
        else for (uint64_t i = 0; i < n; i++) d[i] = (double)(expr); } while (0)
    switch (t->dtype) {
    case ORK_F32: EACH(ldf32(p, i)); break;
    case ORK_F16: EACH(ork_f16_to_f32(ld16(p, i))); break;
    case ORK_BF16: EACH(ork_bf16_to_f32(ld16(p, i))); break;
    case ORK_F8_E4M3: EACH(ork_e4m3_to_f32(p[i])); break;
    case ORK_F8_E5M2: EACH(ork_e5m2_to_f32(p[i])); break;
    case ORK_F64: EACH(ldf64(p, i)); break;
    case ORK_I32: EACH(ldi32(p, i)); break;
    case ORK_I64: EACH(ldi64(p, i)); break;
    case ORK_U8: EACH(p[i]); break;
    default:
        return ORK_FAIL(ORK_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be converted to %s", t->name,
                        t->dtype_name ? t->dtype_name : "?", f ? "F32" : "F64");
    }
#undef EACH
    return ORK_OK;
}

ork_status ork_st_read_f32(const ork_st_tensor *t, float *dst) { return convert(t, dst, NULL); }

ork_status ork_st_read_into(const ork_st_tensor *t, ork_dtype dst_type, void *dst) {
    if (dst_type == t->dtype && (unsigned)dst_type < ORK_DTYPE_COUNT) {
        if (t->nbytes) memcpy(dst, t->data, (size_t)t->nbytes);
        return ORK_OK;
    }
    if (dst_type == ORK_F32) return convert(t, dst, NULL);
    if (dst_type == ORK_F64) return convert(t, NULL, dst);
    return ORK_FAIL(ORK_E_UNSUPPORTED, "tensor '%s': no conversion from %s to ork_dtype %d here "
                    "(narrowing belongs to core/numerics)", t->name,
                    t->dtype_name ? t->dtype_name : "?", (int)dst_type);
}
