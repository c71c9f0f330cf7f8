/* cpu/cpu_embed.c — the CPU backend's row gather (tensor/backend.h slot
 * embedding: token ids -> rows of an embedding table; the text encoders'
 * token, position and T5 relative-position tables). Owns nothing. */
#include "cpu/cpu.h"

#include "numerics/half.h"

#include <string.h>

/* Element access of the dtypes this kernel takes (F32, BF16, F16). */
static float ld(const void *p, ork_dtype dt, int64_t i) {
    if (dt == ORK_BF16) return ork_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == ORK_F16) return ork_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static void st(void *p, ork_dtype dt, int64_t i, float v) {
    if (dt == ORK_BF16) ((uint16_t *)p)[i] = ork_f32_to_bf16(v);
    else if (dt == ORK_F16) ((uint16_t *)p)[i] = ork_f32_to_f16(v);
    else ((float *)p)[i] = v;
}

ork_status ork_cpu_embedding(const ork_kctx *k, int64_t n, int64_t V, int64_t D, const int32_t *ids, const void *w,
                             ork_dtype wdt, void *y, ork_dtype dt) {
    (void)k;
    if (wdt != ORK_F32 && wdt != ORK_BF16) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu embedding: table dtype %d (F32 or BF16)", (int)wdt);
    if (dt != ORK_F32 && dt != ORK_BF16 && dt != ORK_F16) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu embedding: output dtype %d", (int)dt);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = ids[i];
        if (r < 0 || r >= V)
            return ORK_FAIL(ORK_E_INVALID, "embedding: id %lld at position %lld is outside the table's %lld rows",
                            (long long)r, (long long)i, (long long)V);
        if (wdt == dt) {
            size_t es = ork_dtype_size(dt);
            memcpy((char *)y + (size_t)(i * D) * es, (const char *)w + (size_t)(r * D) * es, (size_t)D * es);
            continue;
        }
        for (int64_t c = 0; c < D; c++) st(y, dt, i * D + c, ld(w, wdt, r * D + c));
    }
    return ORK_OK;
}
