/* cpu/cpu_dropout.c — in-place dropout with the shared counter-hash mask. */
#include "cpu/cpu.h"

#include "numerics/half.h"
#include "tensor/dropout_hash.h"

ork_status ork_cpu_dropout(const ork_kctx *k, int64_t n, uint64_t seed, uint64_t threshold, float scale, void *x,
                           ork_dtype dt) {
    (void)k;
    if (dt == ORK_F32) {
        float *f = x;
        for (int64_t i = 0; i < n; i++) f[i] = ork_drop_keep(seed, (uint64_t)i, threshold) ? f[i] * scale : 0.0f;
        return ORK_OK;
    }
    if (dt == ORK_BF16) {
        uint16_t *h = x;
        for (int64_t i = 0; i < n; i++)
            h[i] = ork_drop_keep(seed, (uint64_t)i, threshold) ? ork_f32_to_bf16(ork_bf16_to_f32(h[i]) * scale) : 0;
        return ORK_OK;
    }
    return ORK_E_UNSUPPORTED;
}
