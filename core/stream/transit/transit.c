/* stream/transit/transit.c — see transit.h: the kinds of coding mapped onto
 * the exponent-class codes (exponent_code.c), the header check, the CPU and
 * device decode entry points, and the helpers the codes share (the class
 * table, the section checks, the gaps an encoder zeroes).
 * Owns nothing. */
#include "stream/transit/exponent_code.h"

#include "util/log.h"

#include <string.h>

_Static_assert(sizeof(ork_transit_hdr) <= ORK_TRANSIT_HDR_BYTES, "transit header too large");

static int kind_word(ork_transit_kind k) { return k == ORK_TRANSIT_WORDS ? 2 : k == ORK_TRANSIT_BYTES ? 1 : 0; }

size_t ork_transit_coded_bytes(ork_transit_kind k, const void *raw, size_t raw_bytes, ork_transit_hdr *hdr) {
    int word = kind_word(k);
    return word ? ork_expcode_coded_bytes(raw, raw_bytes, word, hdr) : 0;
}

ork_status ork_transit_encode(ork_transit_kind k, const void *raw, size_t raw_bytes, void *out, size_t out_cap,
                              size_t *coded, int nthreads) {
    int word = kind_word(k);
    if (!word) return ORK_FAIL(ORK_E_INVALID, "transit: no coding %d", (int)k);
    return ork_expcode_encode(raw, raw_bytes, word, out, out_cap, coded, nthreads);
}

/* The k most frequent of n symbols (see exponent_code.h). */
void ork_transit_table(const uint64_t *h, int n, int esc, uint8_t table[16], uint8_t *map) {
    uint8_t used[256] = {0};
    memset(table, 0, 16);
    int k = 0;
    for (; k < esc; k++) {
        int best = -1;
        for (int e = 0; e < n; e++)
            if (!used[e] && h[e] > 0 && (best < 0 || h[e] > h[best])) best = e;
        if (best < 0) break;
        used[best] = 1;
        table[k] = (uint8_t)best;
    }
    for (; k < esc; k++) table[k] = table[0];
    memset(map, esc, (size_t)n);
    for (int i = esc - 1; i >= 0; i--) map[table[i]] = (uint8_t)i;
}

void ork_transit_zero_gaps(uint8_t *o, uint64_t coded_bytes, const uint64_t (*sec)[2], int n) {
    uint64_t at = 0;
    for (int i = 0; i <= n; i++) {
        uint64_t next = i < n ? sec[i][0] : coded_bytes;
        if (next > at) memset(o + at, 0, next - at);
        if (i < n) at = sec[i][0] + sec[i][1];
    }
}

ork_status ork_transit_section(const char *name, uint64_t off, uint64_t len, uint64_t limit, uint64_t *end) {
    if (off % ORK_TRANSIT_ALIGN != 0)
        return ORK_FAIL(ORK_E_FORMAT, "transit: %s %llu is not 256-aligned", name, (unsigned long long)off);
    if (off < *end)
        return ORK_FAIL(ORK_E_FORMAT, "transit: %s %llu overlaps the section before it (ends at %llu)", name,
                        (unsigned long long)off, (unsigned long long)*end);
    if (off > limit || len > limit - off)
        return ORK_FAIL(ORK_E_FORMAT, "transit: %s %llu + %llu bytes runs past coded_bytes %llu", name,
                        (unsigned long long)off, (unsigned long long)len, (unsigned long long)limit);
    *end = off + len;
    return ORK_OK;
}

ork_status ork_transit_header(const void *coded, size_t coded_bytes, ork_transit_hdr *hdr) {
    if (!coded || !hdr) return ORK_FAIL(ORK_E_INVALID, "transit: header needs coded and hdr");
    if (coded_bytes < ORK_TRANSIT_HDR_BYTES)
        return ORK_FAIL(ORK_E_FORMAT, "transit: coded_bytes %zu is shorter than the header", coded_bytes);
    ork_transit_hdr h;
    memcpy(&h, coded, sizeof h);
    if (!ork_transit_word(h.magic)) return ORK_FAIL(ORK_E_FORMAT, "transit: bad magic 0x%08x", h.magic);
    if (h.coded_bytes > coded_bytes)
        return ORK_FAIL(ORK_E_FORMAT, "transit: coded_bytes %llu but the buffer holds %zu (truncated)",
                        (unsigned long long)h.coded_bytes, coded_bytes);
    ORK_TRY(ork_expcode_check(&h));
    *hdr = h;
    return ORK_OK;
}

ork_status ork_transit_decode(const void *coded, size_t coded_bytes, void *out, int nthreads) {
    if (!out) return ORK_FAIL(ORK_E_INVALID, "transit: decode needs out");
    ork_transit_hdr h;
    ORK_TRY(ork_transit_header(coded, coded_bytes, &h));
    return ork_expcode_decode(coded, &h, out, nthreads);
}

#ifdef ORAKUL_HAVE_CUDA
ork_status ork_transit_decode_cuda(const void *coded_dev, const ork_transit_hdr *hdr, void *out_dev, void *stream) {
    if (!coded_dev || !hdr || (!out_dev && hdr->raw_bytes))
        return ORK_FAIL(ORK_E_INVALID, "transit: device decode needs coded_dev, hdr and out_dev");
    if (!ork_transit_word(hdr->magic))
        return ORK_FAIL(ORK_E_FORMAT, "transit: device decode given an inconsistent header (use ork_transit_header)");
    return ork_expcode_decode_cuda(coded_dev, hdr, out_dev, stream);
}
#endif
