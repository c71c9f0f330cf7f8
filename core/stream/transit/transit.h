/* stream/transit/transit.h — the lossless transit coding of streamed blocks:
 * which coding a block takes, its size, encode, the header check and the CPU
 * and device decodes. The byte format is transit/format.h; the codes
 * themselves are transit/exponent_code.c (2-bit exponent-class indices with
 * two levels of escapes, for 16-bit words and for FP8 E5M2 bytes).
 * Callers (the streamer, the copy engine) see only this header.
 *
 * Owns nothing; pure functions. [any-thread] */
#ifndef ORK_STREAM_TRANSIT_H
#define ORK_STREAM_TRANSIT_H

#include "stream/transit/format.h"

#include <orakul/abi.h> /* ork_status */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a block's bytes are coded as (the streamer codes a sample with each and
 * keeps the smallest). */
typedef enum ork_transit_kind {
    ORK_TRANSIT_WORDS = 0, /* 16-bit words (BF16, F16) */
    ORK_TRANSIT_BYTES = 1, /* FP8 bytes (E5M2; uniform E4M3) */
    ORK_TRANSIT_KINDS = 2,
} ork_transit_kind;

/* The coded size of these bytes (a full pass over them); 0 when refused (more
 * than ORK_TRANSIT_MAX_VALUES values). *hdr (optional) gets the header encode
 * would write. */
size_t ork_transit_coded_bytes(ork_transit_kind k, const void *raw, size_t raw_bytes, ork_transit_hdr *hdr);

/* Encode raw into out (out_cap >= ork_transit_coded_bytes(raw)); *coded = the
 * bytes written, the same for any nthreads. raw and out must not overlap.
 * nthreads <= 1: this thread. */
ork_status ork_transit_encode(ork_transit_kind k, const void *raw, size_t raw_bytes, void *out, size_t out_cap,
                              size_t *coded, int nthreads);

/* Read and check a coded buffer's header (magic, sizes and offsets consistent
 * with coded_bytes): ORK_E_FORMAT with one line naming the bad field. */
ork_status ork_transit_header(const void *coded, size_t coded_bytes, ork_transit_hdr *hdr);

/* Decode on the CPU into out (hdr.raw_bytes). coded and out must not overlap. */
ork_status ork_transit_decode(const void *coded, size_t coded_bytes, void *out, int nthreads);

#ifdef ORAKUL_HAVE_CUDA
/* Decode on the device, enqueued on stream (a cudaStream_t): coded_dev is the
 * coded buffer in device memory, hdr its header (read on the host; the kernel
 * takes the table and counts as arguments), out_dev hdr->raw_bytes of device
 * memory. Never synchronises. */
ork_status ork_transit_decode_cuda(const void *coded_dev, const ork_transit_hdr *hdr, void *out_dev, void *stream);
#endif

#ifdef __cplusplus
}
#endif
#endif
