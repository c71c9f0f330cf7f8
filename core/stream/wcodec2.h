/* stream/wcodec2.h — the two-level codecs' pieces that wcodec.c and the CUDA
 * decoder call (the format is in wcodec.h). Private to core/stream. */
#ifndef ORK_STREAM_WCODEC2_H
#define ORK_STREAM_WCODEC2_H

#include "stream/wcodec8.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_WCODEC2_L1_ESC 3
#define ORK_WCODEC2_L2_ESC 7

/* 1 for ORK_WCODEC2_MAGIC8, 2 for ORK_WCODEC2_MAGIC16, 0 for any other magic. */
static inline int ork_wcodec2_word(uint32_t magic) {
    return magic == ORK_WCODEC2_MAGIC8 ? 1 : magic == ORK_WCODEC2_MAGIC16 ? 2 : 0;
}
/* u32 words of a group's L1 code: 5 (bytes) or 2 (16-bit words). */
static inline unsigned ork_wcodec2_group_words(int word) { return word == 1 ? 5u : 2u; }
/* u32 words of the L2 section for l2_cap codes (a multiple of 32), 4 zero words included. */
static inline uint64_t ork_wcodec2_l2_words(uint64_t l2_cap) { return 3 * (l2_cap / 32) + 4; }

/* The two-level header fields, checked (h->magic is one of the two). */
ork_status ork_wcodec2_check(const ork_wcodec_hdr *h);

/* Decode a checked buffer on the CPU (the tiles' starts and escapes are checked here). */
ork_status ork_wcodec2_decode(const uint8_t *coded, const ork_wcodec_hdr *h, void *out, int nthreads);

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_wcodec2_decode_cuda(const void *coded_dev, const ork_wcodec_hdr *hdr, void *out_dev, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
