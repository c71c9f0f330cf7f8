/* stream/wcodec.h — the lossless transit codec for streamed 16-bit weights.
 *
 * Why: a streamed block of BF16 weights crosses PCIe twice a step, and in the
 * forward pass the link, not the GPU, bounds the step (docs/streaming.md). The
 * 8 exponent bits of trained (or random Gaussian) BF16 weights carry ~2.5 bits
 * of information: coding each exponent as a 4-bit index into the block's 15
 * most frequent exponents (index 15: an exception, kept exactly on the side)
 * sends 12 bits a weight instead of 16 and the GPU rebuilds the exact bytes.
 * Bitwise lossless for ANY input (what does not compress is an exception, and
 * a block that does not shrink enough is simply sent raw by the streamer).
 *
 * The coded form of n 16-bit words w[i] (bf16 view: s = bit 15, e = bits
 * 14..7, m = bits 6..0), one contiguous buffer, every section 256-aligned:
 *   ork_wcodec_hdr                          (ORK_WCODEC_HDR_BYTES)
 *   sm[n]      u8   (s << 7) | m           at hdr.sm_offset
 *   idx[n/2+1] u8   nibble i = index of e in hdr.table (low nibble: even i);
 *                   15: exception          at hdr.idx_offset
 *   exc_pos[n_exc] u32  word positions, ascending   at hdr.exc_pos_offset
 *   exc_e[n_exc]   u8   their exponents             at hdr.exc_e_offset
 * A trailing odd byte (bytes odd) is carried raw in hdr.tail.
 * The table has 15 entries (the most frequent exponents, ties by value;
 * unused entries repeat entry 0); table[15] is unused (0).
 *
 * The byte codec (ORK_WCODEC_MAGIC8, wcodec8.c): for streamed FP8 E5M2
 * weights (s = bit 7, e = bits 6..2, m = bits 1..0). The 5 exponent bits of a
 * row-absmax-quantized weight carry ~2.0-2.8 bits, so each byte travels as 6
 * bits: a 3-bit index into the region's 7 most frequent exponents (7: an
 * exception) with s and m. Exceptions carry their whole byte on the side and
 * their positions are implicit (the escapes' order within a tile), so one
 * costs 8 bits, not a position. Measured: 0.758 of the bytes on uniform
 * random weights, 0.775 Gaussian, 0.795 on the trained TAEF1 decoder (E4M3's
 * 4 exponent bits do not pay: ~0.92, and such blocks travel raw). Layout,
 * n = raw_bytes values in groups of 32 (the last one zero-padded), tiles of
 * ORK_WCODEC8_TILE groups:
 *   ork_wcodec_hdr (magic ORK_WCODEC_MAGIC8, n_words = raw_bytes, table[0..6])
 *   code[groups][6] u32  at hdr.code_offset; for value j of a group, with
 *                   code c = idx << 3 | s << 2 | m: nibble j % 8 of word j / 8
 *                   holds c & 15, and 2-bit field j % 16 of word 4 + j / 16
 *                   holds c >> 4
 *   tile_exc[tiles + 1] u32  the first exception of each tile (the last: n_exc)
 *                   at hdr.tile_exc_offset
 *   exc[n_exc] u8   the escaped values' bytes, in position order, at hdr.exc_offset
 *
 * The two-level codecs (ORK_WCODEC2_MAGIC16 for 16-bit words,
 * ORK_WCODEC2_MAGIC8 for E5M2 bytes; wcodec2.c, wcodec2_cuda.cu): the same
 * values and sign/mantissa bits, but the exponent (its "class": bits 14..7 of
 * a word, 6..2 of a byte) costs ~2.7 bits instead of 4 (16-bit) or 3 (bytes),
 * closer to its ~2.5-bit entropy. table[0..9] holds the region's 10 most
 * frequent classes (ork_wcodec_table, esc 10); a class's index x is its
 * position there, or 10. Each value carries a 2-bit L1 index min(x, 3); an
 * L1 escape (3) takes the next 3-bit L2 code of its tile: x - 3 for x < 10,
 * else 7; an L2 escape (7) takes the next L3 byte: the class itself. Groups
 * of 32 values, tiles of ORK_WCODEC8_TILE groups, as the byte codec; n values
 * (bytes: raw_bytes; words: raw_bytes / 2, an odd byte in hdr.tail), at most
 * 2^31. Sections, 256-aligned:
 *   16-bit: sm[n] u8 (s << 7) | m at hdr.sm_offset;
 *           code[groups][2] u32 at hdr.code_offset: 2-bit field j % 16 of
 *           word j / 16 holds value j's L1 index
 *   bytes:  code[groups][5] u32 at hdr.code_offset: value j's 5-bit code
 *           c = l1 << 3 | s << 2 | m: nibble j % 8 of word j / 8 holds c & 15,
 *           bit j of word 4 holds c >> 4
 *   tile_l2[tiles + 1] u32 at hdr.tile_l2_offset: tile t's first L2 code, a
 *           multiple of 32; its codes (its L1 escapes', in value order) end at
 *           or before tile_l2[t + 1]; tile_l2[tiles] = hdr.l2_cap (codes)
 *   l2[3 l2_cap / 32 + 4] u32 at hdr.l2_offset: code k is bits 3k..3k+2 of
 *           the little-endian bit stream (bit b: bit b % 32 of word b / 32);
 *           the 4 trailing words are zero (a decoder may read them)
 *   tile_l3[tiles + 1] u32 at hdr.tile_l3_offset: tile t's first L3 byte;
 *           tile_l3[tiles] = hdr.n_exc
 *   l3[n_exc] u8 at hdr.exc_offset: the L2 escapes' classes, in value order
 * Measured on the trained TAEF1 weights: 0.69 of the bytes as BF16 (the
 * 16-bit codec 0.75), 0.76 as E5M2 (the byte codec 0.80).
 *
 * Owns nothing; pure functions. [any thread] */
#ifndef ORK_STREAM_WCODEC_H
#define ORK_STREAM_WCODEC_H

#include <orakul/abi.h> /* ork_status */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_WCODEC_MAGIC 0x31783445u /* "E4x1" little-endian */
#define ORK_WCODEC_HDR_BYTES 256
#define ORK_WCODEC_ESC 15
#define ORK_WCODEC_MAGIC8 0x31783342u /* "B3x1" little-endian */
#define ORK_WCODEC8_ESC 7
#define ORK_WCODEC8_GROUP 32  /* values a group (6 u32 of code) */
#define ORK_WCODEC8_TILE 256  /* groups a tile (one CUDA block) */
#define ORK_WCODEC2_MAGIC16 0x32773254u /* "T2w2" */
#define ORK_WCODEC2_MAGIC8 0x31773254u  /* "T2w1" */
#define ORK_WCODEC2_TABLE 10             /* classes with an index: 3 at L1, 7 at L2 */
#define ORK_WCODEC2_MAX_VALUES ((uint64_t)1 << 31)

typedef struct ork_wcodec_hdr {
    uint32_t magic;
    uint32_t tail_present; /* 1: the raw bytes were odd; tail is the last byte */
    uint64_t raw_bytes;    /* decoded size in bytes */
    uint64_t n_words;      /* raw_bytes / 2 */
    uint64_t n_exc;
    uint64_t sm_offset, idx_offset, exc_pos_offset, exc_e_offset;
    uint64_t coded_bytes;  /* the whole coded buffer, header included */
    uint8_t table[16];
    uint8_t tail;
    uint8_t pad_[7];
    uint64_t code_offset, tile_exc_offset, exc_offset; /* the byte codec's sections (0 for 16-bit words);
                                                        * code and exc (L3) also the two-level codecs' */
    uint64_t tile_l2_offset, l2_offset, tile_l3_offset, l2_cap; /* the two-level codecs' (0 otherwise) */
} ork_wcodec_hdr;

/* The coded size of these bytes (a full pass over them: histogram and
 * exception count); *hdr (optional) gets the header encode would write. */
size_t ork_wcodec_coded_bytes(const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr);

/* Encode raw into out (out_cap >= ork_wcodec_coded_bytes(raw)); *coded = the
 * bytes written. raw and out must not overlap. nthreads <= 1: this thread. */
ork_status ork_wcodec_encode(const void *raw, size_t raw_bytes, void *out, size_t out_cap, size_t *coded,
                             int nthreads);

/* The same two for the byte codec (FP8 E5M2 weights). Any bytes round-trip;
 * the coded size tells whether it paid. */
size_t ork_wcodec8_coded_bytes(const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr);
ork_status ork_wcodec8_encode(const void *raw, size_t raw_bytes, void *out, size_t out_cap, size_t *coded,
                              int nthreads);

/* The two-level codecs (word_bytes 2: 16-bit words, 1: E5M2 bytes). */
size_t ork_wcodec2_coded_bytes(const void *raw, size_t raw_bytes, int word_bytes, ork_wcodec_hdr *hdr);
ork_status ork_wcodec2_encode(const void *raw, size_t raw_bytes, int word_bytes, void *out, size_t out_cap,
                              size_t *coded, int nthreads);

/* The codecs by number, for whoever picks one per region (the streamer codes
 * a sample with each and keeps the smallest). */
typedef enum ork_wcodec_kind {
    ORK_WCODEC_WORDS = 0,  /* 16-bit words, 4-bit index (ORK_WCODEC_MAGIC) */
    ORK_WCODEC_BYTES = 1,  /* E5M2 bytes, 3-bit index (ORK_WCODEC_MAGIC8) */
    ORK_WCODEC2_WORDS = 2, /* 16-bit words, two levels (ORK_WCODEC2_MAGIC16) */
    ORK_WCODEC2_BYTES = 3, /* E5M2 bytes, two levels (ORK_WCODEC2_MAGIC8) */
    ORK_WCODEC_KINDS = 4,
} ork_wcodec_kind;
size_t ork_wcodec_kind_coded_bytes(ork_wcodec_kind k, const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr);
ork_status ork_wcodec_kind_encode(ork_wcodec_kind k, const void *raw, size_t raw_bytes, void *out, size_t out_cap,
                                  size_t *coded, int nthreads);

/* Read and check a coded buffer's header (either codec, by its magic) (magic, sizes and offsets consistent
 * with coded_bytes): ORK_E_FORMAT with one line naming the bad field. */
ork_status ork_wcodec_header(const void *coded, size_t coded_bytes, ork_wcodec_hdr *hdr);

/* Decode on the CPU into out (hdr->raw_bytes), either codec. coded and out must not overlap. */
ork_status ork_wcodec_decode(const void *coded, size_t coded_bytes, void *out, int nthreads);

#ifdef ORAKUL_HAVE_CUDA
/* Decode on the device, enqueued on stream (a cudaStream_t): coded_dev is the
 * coded buffer in device memory, hdr its header (read on the host; the kernel
 * takes the table and counts as arguments), out_dev hdr->raw_bytes of device
 * memory. Never synchronises. */
ork_status ork_wcodec_decode_cuda(const void *coded_dev, const ork_wcodec_hdr *hdr, void *out_dev, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
