/* stream/wcodec8.h — the byte codec's pieces that wcodec.c and the CUDA
 * decoder call (the format is in wcodec.h). Private to core/stream. */
#ifndef ORK_STREAM_WCODEC8_H
#define ORK_STREAM_WCODEC8_H

#include "stream/wcodec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Section [off, off + len) of a coded buffer: 256-aligned, at or after *end,
 * inside limit; *end moves past it. ORK_E_FORMAT naming the field otherwise. */
ork_status ork_wcodec_section(const char *name, uint64_t off, uint64_t len, uint64_t limit, uint64_t *end);

/* Zero what an encoder does not write: every byte of [0, coded_bytes) outside
 * the n sections sec[i] = {offset, bytes}, given in ascending order (the
 * header's bytes too: the caller copies the header in afterwards), so that
 * the coded bytes are a function of the input alone without a pass over the
 * bytes the coding fills anyway. */
void ork_wcodec_zero_gaps(uint8_t *o, uint64_t coded_bytes, const uint64_t (*sec)[2], int n);

/* The k = esc most frequent of n symbols by histogram h (ties: smaller value
 * first; unused entries repeat entry 0; table[esc..15] = 0), and map[0..n) =
 * each symbol's first index, or esc. wcodec.c's table (n 256, esc 15) and
 * wcodec8.c's (n 32, esc 7). */
void ork_wcodec_table(const uint64_t *h, int n, int esc, uint8_t table[16], uint8_t *map);

/* The byte codec's header fields, checked (h->magic is ORK_WCODEC_MAGIC8). */
ork_status ork_wcodec8_check(const ork_wcodec_hdr *h);

/* Decode a checked buffer on the CPU (tile_exc and the escapes are checked here). */
ork_status ork_wcodec8_decode(const uint8_t *coded, const ork_wcodec_hdr *h, void *out, int nthreads);

static inline uint64_t ork_wcodec8_groups(uint64_t n) { return (n + ORK_WCODEC8_GROUP - 1) / ORK_WCODEC8_GROUP; }
static inline uint64_t ork_wcodec8_tiles(uint64_t n) {
    return (ork_wcodec8_groups(n) + ORK_WCODEC8_TILE - 1) / ORK_WCODEC8_TILE;
}

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_wcodec8_decode_cuda(const void *coded_dev, const ork_wcodec_hdr *hdr, void *out_dev, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
