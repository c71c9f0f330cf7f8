/* io/st_convert.h — scalar little-endian loads and exact narrow-float -> f32
 * conversions used by the safetensors reader (ork_st_read_f32). Owns nothing.
 * The f32 -> narrow direction (rounding) lives in core/numerics/, not here. */
#ifndef ORK_IO_ST_CONVERT_H
#define ORK_IO_ST_CONVERT_H

#include <stdint.h>

float ork_st_f16_to_f32(uint16_t h);    /* IEEE binary16, exact */
float ork_st_bf16_to_f32(uint16_t h);   /* bfloat16, exact */
float ork_st_e4m3_to_f32(uint8_t v);    /* OCP F8 E4M3 "fn": no Inf, 0x7f/0xff NaN */
float ork_st_e5m2_to_f32(uint8_t v);    /* OCP F8 E5M2: IEEE-like */

#endif
