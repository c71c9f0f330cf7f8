/* numerics/half.c — bulk bf16 / f16 conversions (the scalar ones are inline in
 * half.h). Owns nothing at run time. */
#include "numerics/half.h"

void ork_bf16_from_f32(const float *src, size_t n, uint16_t *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = ork_f32_to_bf16(src[i]);
}
void ork_bf16_to_f32_n(const uint16_t *src, size_t n, float *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = ork_bf16_to_f32(src[i]);
}
void ork_f16_from_f32(const float *src, size_t n, uint16_t *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = ork_f32_to_f16(src[i]);
}
void ork_f16_to_f32_n(const uint16_t *src, size_t n, float *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = ork_f16_to_f32(src[i]);
}

void ork_bf16_from_f32_sr(const float *src, size_t n, uint64_t seed, uint64_t step,
                          uint64_t index0, uint16_t *dst) {
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4] = {0};
    uint64_t g_have = UINT64_MAX;                 /* the 8-element group `out` holds */
    for (size_t k = 0; k < n; k++) {
        uint64_t i = index0 + k, g = i >> 3;
        if (g != g_have) {
            uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)step,
                               (uint32_t)(step >> 32)};
            ork_philox4x32_10(ctr, key, out);
            g_have = g;
        }
        unsigned j = (unsigned)(i & 7);
        dst[k] = ork_f32_to_bf16_sr(src[k], (uint16_t)(out[j >> 1] >> (16 * (j & 1))));
    }
}
