/* stream/transit/format.h — the byte format of a block coded for transit (the
 * exponent-class codes of transit/exponent_code.c), apart from the code that
 * writes and reads it: the header, its constants and the sections' geometry.
 *
 * Why: a streamed block of BF16 (or FP8 E5M2) weights crosses PCIe every pass
 * and the link bounds the step (docs/streaming.md). A value's exponent (its
 * "class": bits 14..7 of a 16-bit word, 6..2 of an E5M2 byte) carries ~2.5
 * bits, so it travels as a 2-bit index with escapes; sign and mantissa travel
 * as they are. Bitwise lossless for ANY input (what does not compress is an
 * escape, and a block that does not shrink enough is sent raw by the streamer).
 *
 * n values (bytes: raw_bytes; 16-bit words: raw_bytes / 2, an odd last byte in
 * hdr.tail), at most ORK_TRANSIT_MAX_VALUES, in groups of ORK_TRANSIT_GROUP
 * values (the last one zero-padded) and tiles of ORK_TRANSIT_TILE groups (one
 * CUDA block). table[0..9] holds the region's 10 most frequent classes (ties:
 * smaller class first; unused entries repeat entry 0); a class's index x is
 * its position there, or 10. Each value carries a 2-bit L1 index min(x, 3); an
 * L1 escape (3) takes the next 3-bit L2 code of its tile: x - 3 for x < 10,
 * else 7; an L2 escape (7) takes the next L3 byte: the class itself. Both
 * kinds of escape have implicit positions (value order within a tile; each
 * tile records where its codes start). One contiguous buffer, every section
 * 256-aligned, in this order:
 *   ork_transit_hdr (ORK_TRANSIT_HDR_BYTES; magic ORK_TRANSIT_MAGIC_WORDS or
 *           ORK_TRANSIT_MAGIC_BYTES)
 *   16-bit: sm[n] u8 (s << 7) | m at hdr.sm_offset (s = bit 15, m = bits 6..0);
 *           code[groups][2] u32 at hdr.code_offset: 2-bit field j % 16 of
 *           word j / 16 holds value j's L1 index
 *   bytes:  code[groups][5] u32 at hdr.code_offset: value j's 5-bit code
 *           c = l1 << 3 | s << 2 | m (s = bit 7, m = bits 1..0): nibble j % 8
 *           of word j / 8 holds c & 15, bit j of word 4 holds c >> 4
 *   tile_l2[tiles + 1] u32 at hdr.tile_l2_offset: tile t's first L2 code, a
 *           multiple of 32; its codes (its L1 escapes', in value order) end at
 *           or before tile_l2[t + 1]; tile_l2[tiles] = hdr.l2_cap (codes)
 *   l2[3 l2_cap / 32 + 4] u32 at hdr.l2_offset: code k is bits 3k..3k+2 of
 *           the little-endian bit stream (bit b: bit b % 32 of word b / 32);
 *           the 4 trailing words are zero (a decoder may read them)
 *   tile_l3[tiles + 1] u32 at hdr.tile_l3_offset: tile t's first L3 byte;
 *           tile_l3[tiles] = hdr.n_exc
 *   l3[n_exc] u8 at hdr.exc_offset: the L2 escapes' classes, in value order
 * Words are little-endian; the header is host order (little-endian on every
 * target built for). Measured: 0.66-0.69 of the bytes for BF16 weights
 * (uniform, Gaussian, trained TAEF1), 0.68-0.77 for E5M2 ones.
 *
 * Owns nothing. [any-thread] */
#ifndef ORK_STREAM_TRANSIT_FORMAT_H
#define ORK_STREAM_TRANSIT_FORMAT_H

#include <stdint.h>

#define ORK_TRANSIT_MAGIC_WORDS 0x32773254u /* "T2w2": 16-bit words */
#define ORK_TRANSIT_MAGIC_BYTES 0x31773254u /* "T2w1": E5M2 bytes */
#define ORK_TRANSIT_HDR_BYTES 256
#define ORK_TRANSIT_ALIGN 256u             /* every section's offset */
#define ORK_TRANSIT_GROUP 32               /* values a group */
#define ORK_TRANSIT_TILE 256               /* groups a tile (one CUDA block) */
#define ORK_TRANSIT_TABLE 10               /* classes with an index: 3 at L1, 7 at L2 */
#define ORK_TRANSIT_L1_ESC 3
#define ORK_TRANSIT_L2_ESC 7
#define ORK_TRANSIT_MAX_VALUES ((uint64_t)1 << 31)

typedef struct ork_transit_hdr {
    uint32_t magic;
    uint32_t tail_present; /* 16-bit words: 1 when the raw bytes were odd; tail is the last byte */
    uint64_t raw_bytes;    /* decoded size in bytes */
    uint64_t n_values;     /* values coded: raw_bytes / 2 (words) or raw_bytes (bytes) */
    uint64_t n_exc;        /* L3 bytes */
    uint64_t sm_offset;    /* 16-bit words only */
    uint64_t coded_bytes;  /* the whole coded buffer, header included */
    uint8_t table[16];     /* [0..9] the classes with an index; the rest 0 */
    uint8_t tail;
    uint8_t pad_[7];
    uint64_t code_offset, exc_offset, tile_l2_offset, l2_offset, tile_l3_offset;
    uint64_t l2_cap;       /* L2 codes the stream has room for, a multiple of 32 */
} ork_transit_hdr;

/* 1 for ORK_TRANSIT_MAGIC_BYTES, 2 for ORK_TRANSIT_MAGIC_WORDS, 0 for any other magic. */
static inline int ork_transit_word(uint32_t magic) {
    return magic == ORK_TRANSIT_MAGIC_BYTES ? 1 : magic == ORK_TRANSIT_MAGIC_WORDS ? 2 : 0;
}
/* u32 words of a group's L1 code: 5 (bytes) or 2 (16-bit words). */
static inline unsigned ork_transit_group_words(int word) { return word == 1 ? 5u : 2u; }
/* u32 words of the L2 section for l2_cap codes (a multiple of 32), 4 zero words included. */
static inline uint64_t ork_transit_l2_words(uint64_t l2_cap) { return 3 * (l2_cap / 32) + 4; }
static inline uint64_t ork_transit_groups(uint64_t n) { return (n + ORK_TRANSIT_GROUP - 1) / ORK_TRANSIT_GROUP; }
static inline uint64_t ork_transit_tiles(uint64_t n) {
    return (ork_transit_groups(n) + ORK_TRANSIT_TILE - 1) / ORK_TRANSIT_TILE;
}

#endif
