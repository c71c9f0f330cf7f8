/* stream/transit/exponent_code.h — the exponent-class codes (format in
 * transit/format.h) as transit.c and the CUDA decoder call them, and the
 * helpers transit.c keeps for them. Private to core/stream/transit. */
#ifndef ORK_STREAM_TRANSIT_EXPONENT_CODE_H
#define ORK_STREAM_TRANSIT_EXPONENT_CODE_H

#include "stream/transit/transit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* word: 2 for 16-bit words, 1 for bytes (anything else is refused). */
size_t ork_expcode_coded_bytes(const void *raw, size_t raw_bytes, int word, ork_transit_hdr *hdr);
ork_status ork_expcode_encode(const void *raw, size_t raw_bytes, int word, void *out, size_t out_cap,
                              size_t *coded, int nthreads);

/* The header fields, checked (h->magic is one of the two). */
ork_status ork_expcode_check(const ork_transit_hdr *h);

/* Decode a checked buffer on the CPU (the tiles' starts and escapes are checked here). */
ork_status ork_expcode_decode(const uint8_t *coded, const ork_transit_hdr *h, void *out, int nthreads);

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_expcode_decode_cuda(const void *coded_dev, const ork_transit_hdr *hdr, void *out_dev, void *stream);
#endif

/* ---- transit.c's helpers for the codes ------------------------------------- */

/* Section [off, off + len) of a coded buffer: 256-aligned, at or after *end,
 * inside limit; *end moves past it. ORK_E_FORMAT naming the field otherwise. */
ork_status ork_transit_section(const char *name, uint64_t off, uint64_t len, uint64_t limit, uint64_t *end);

/* Zero what an encoder does not write: every byte of [0, coded_bytes) outside
 * the n sections sec[i] = {offset, bytes}, given in ascending order (the
 * header's bytes too: the caller copies the header in afterwards), so that
 * the coded bytes are a function of the input alone without a pass over the
 * bytes the coding fills anyway. */
void ork_transit_zero_gaps(uint8_t *o, uint64_t coded_bytes, const uint64_t (*sec)[2], int n);

/* The k = esc most frequent of n symbols by histogram h (ties: smaller value
 * first; unused entries repeat entry 0; table[esc..15] = 0), and map[0..n) =
 * each symbol's first index, or esc. */
void ork_transit_table(const uint64_t *h, int n, int esc, uint8_t table[16], uint8_t *map);

#ifdef __cplusplus
}
#endif
#endif
