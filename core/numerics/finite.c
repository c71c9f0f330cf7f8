/* numerics/finite.c — see finite.h. The scan runs in blocks: a branch-free
 * OR over a block (vectorized by the compiler), then an element scan only in
 * the block that has a hit, so a finite multi-GiB state costs one pass at
 * memory speed. Owns nothing. */
#include "numerics/finite.h"

#include <string.h>

enum { BLOCK = 4096 };

/* 1 when the element's exponent field is all ones (NaN or Inf). */
static inline int bad32(uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u; }
static inline int bad64(uint64_t u) { return (u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull; }
static inline int bad16h(uint16_t u) { return (u & 0x7C00u) == 0x7C00u; }  /* IEEE f16 */
static inline int bad16b(uint16_t u) { return (u & 0x7F80u) == 0x7F80u; }  /* bf16 */
static inline int bad8e4(uint8_t u) { return (u & 0x7Fu) == 0x7Fu; }       /* e4m3fn: NaN only */
static inline int bad8e5(uint8_t u) { return (u & 0x7Cu) == 0x7Cu; }       /* e5m2 */

#define SCAN(T, BAD)                                                                  \
    do {                                                                              \
        const unsigned char *p = data;                                                \
        for (uint64_t b = 0; b < n; b += BLOCK) {                                     \
            uint64_t e = n - b < BLOCK ? n - b : BLOCK;                               \
            int any = 0;                                                              \
            for (uint64_t i = 0; i < e; i++) {                                        \
                T u;                                                                  \
                memcpy(&u, p + (b + i) * sizeof(T), sizeof(T));                       \
                any |= BAD(u);                                                        \
            }                                                                         \
            if (!any) continue;                                                       \
            for (uint64_t i = 0; i < e; i++) {                                        \
                T u;                                                                  \
                memcpy(&u, p + (b + i) * sizeof(T), sizeof(T));                       \
                if (BAD(u)) return (int64_t)(b + i);                                  \
            }                                                                         \
        }                                                                             \
        return -1;                                                                    \
    } while (0)

int64_t ork_first_nonfinite(ork_dtype dt, const void *data, uint64_t n) {
    if (!n || !data) return -1;
    switch (dt) {
    case ORK_F32: SCAN(uint32_t, bad32);
    case ORK_F64: SCAN(uint64_t, bad64);
    case ORK_F16: SCAN(uint16_t, bad16h);
    case ORK_BF16: SCAN(uint16_t, bad16b);
    case ORK_F8_E4M3: SCAN(uint8_t, bad8e4);
    case ORK_F8_E5M2: SCAN(uint8_t, bad8e5);
    default: return -1; /* integers */
    }
}

const char *ork_nonfinite_kind(ork_dtype dt, const void *data, uint64_t i) {
    const unsigned char *p = data;
    int neg, nan, bad;
    switch (dt) {
    case ORK_F32: {
        uint32_t u;
        memcpy(&u, p + i * 4, 4);
        bad = bad32(u); nan = (u & 0x007FFFFFu) != 0; neg = (int)(u >> 31);
        break;
    }
    case ORK_F64: {
        uint64_t u;
        memcpy(&u, p + i * 8, 8);
        bad = bad64(u); nan = (u & 0x000FFFFFFFFFFFFFull) != 0; neg = (int)(u >> 63);
        break;
    }
    case ORK_F16: case ORK_BF16: {
        uint16_t u;
        memcpy(&u, p + i * 2, 2);
        bad = dt == ORK_F16 ? bad16h(u) : bad16b(u);
        nan = (u & (dt == ORK_F16 ? 0x03FFu : 0x007Fu)) != 0;
        neg = u >> 15;
        break;
    }
    case ORK_F8_E4M3: bad = bad8e4(p[i]); nan = 1; neg = p[i] >> 7; break;
    case ORK_F8_E5M2: bad = bad8e5(p[i]); nan = (p[i] & 3u) != 0; neg = p[i] >> 7; break;
    default: return "finite";
    }
    if (!bad) return "finite";
    return nan ? "NaN" : neg ? "-inf" : "+inf";
}
