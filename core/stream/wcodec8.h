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
