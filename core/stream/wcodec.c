/* stream/wcodec.c — see wcodec.h. The CPU encoder and decoder.
 *
 * Both work in fixed chunks of WC_CHUNK words (not per thread), so the output
 * never depends on nthreads: the encoder histograms each chunk, derives each
 * chunk's exception count from its histogram once the table is known, and a
 * prefix sum tells every chunk where its exceptions go (ascending overall);
 * a second pass writes sm, idx and exceptions at once. Words are read as
 * little-endian 16-bit values; the u32 positions and the header are host
 * order (little-endian on every target we build for). */
#include "stream/wcodec.h"
#include "stream/wcodec2.h"

#include "cpu/cpu.h" /* ork_par_for */
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(ork_wcodec_hdr) <= ORK_WCODEC_HDR_BYTES, "wcodec header too large");

#define WC_ALIGN 256u
#define WC_CHUNK ((uint64_t)1 << 18) /* words; even, so an idx byte never straddles two chunks */

static uint64_t wc_up(uint64_t x) { return (x + WC_ALIGN - 1) & ~(uint64_t)(WC_ALIGN - 1); }
static uint64_t wc_idx_bytes(uint64_t n) { return n / 2 + 1; }
static uint64_t wc_chunks(uint64_t n) { return (n + WC_CHUNK - 1) / WC_CHUNK; }

static inline unsigned wc_word(const uint8_t *p, uint64_t i) { return p[2 * i] | (unsigned)p[2 * i + 1] << 8; }
static inline unsigned wc_exp(unsigned w) { return (w >> 7) & 0xffu; }
static inline uint8_t wc_sm(unsigned w) { return (uint8_t)(((w >> 8) & 0x80u) | (w & 0x7fu)); }
static inline uint32_t wc_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wcodec: the 8-word paths load words as little-endian u64 lanes"
#endif
#define WC_LANE_SIGN 0x0080008000800080ull /* per 16-bit lane: the sm sign bit */
#define WC_LANE_MANT 0x007f007f007f007full /* per 16-bit lane: the mantissa */

/* Bit 4j set where nibble j of 8 packed indices is the escape (15). */
static inline uint32_t wc_esc_bits(uint32_t nib) { return nib & nib >> 1 & nib >> 2 & nib >> 3 & 0x11111111u; }

/* Exponent histogram of words [lo, hi): four interleaved tables so that runs
 * of one exponent do not serialise on a single counter. */
static void wc_hist(const uint8_t *raw, uint64_t lo, uint64_t hi, uint32_t h[256]) {
    uint32_t t[4][256] = {{0}};
    uint64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        uint64_t v;
        memcpy(&v, raw + 2 * i, 8);
        t[0][(v >> 7) & 0xffu]++;
        t[1][(v >> 23) & 0xffu]++;
        t[2][(v >> 39) & 0xffu]++;
        t[3][(v >> 55) & 0xffu]++;
    }
    for (; i < hi; i++) t[0][wc_exp(wc_word(raw, i))]++;
    for (int e = 0; e < 256; e++) h[e] = t[0][e] + t[1][e] + t[2][e] + t[3][e];
}

/* The k most frequent of n symbols (ties: smaller value first; unused entries
 * repeat entry 0; table[k..15] = 0) and map[s] = the first index of s, or esc
 * (k = esc). Both codecs build their table so (wcodec8.h). */
void ork_wcodec_table(const uint64_t *h, int n, int esc, uint8_t table[16], uint8_t *map) {
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

/* The header for raw_bytes with this table and exception count. */
static void wc_layout(ork_wcodec_hdr *hdr, const uint8_t *raw, uint64_t raw_bytes, uint64_t n_exc,
                      const uint8_t table[16]) {
    uint64_t n = raw_bytes / 2;
    memset(hdr, 0, sizeof *hdr);
    hdr->magic = ORK_WCODEC_MAGIC;
    hdr->tail_present = (uint32_t)(raw_bytes & 1);
    hdr->tail = hdr->tail_present ? raw[raw_bytes - 1] : 0;
    hdr->raw_bytes = raw_bytes;
    hdr->n_words = n;
    hdr->n_exc = n_exc;
    hdr->sm_offset = ORK_WCODEC_HDR_BYTES;
    hdr->idx_offset = wc_up(hdr->sm_offset + n);
    hdr->exc_pos_offset = wc_up(hdr->idx_offset + wc_idx_bytes(n));
    hdr->exc_e_offset = wc_up(hdr->exc_pos_offset + 4 * n_exc);
    hdr->coded_bytes = wc_up(hdr->exc_e_offset + n_exc);
    memcpy(hdr->table, table, 16);
}

/* ---- encode ------------------------------------------------------------ */

typedef struct enc_job {
    const uint8_t *raw;
    uint64_t n;
    uint32_t (*hist)[256]; /* [n_chunks] */
    uint64_t *exc0;        /* [n_chunks] first exception index of each chunk */
    uint8_t map[256];
    uint8_t *sm, *idx, *exc_pos, *exc_e;
} enc_job;

static void enc_hist_range(void *ctx, int64_t clo, int64_t chi) {
    enc_job *j = ctx;
    for (int64_t c = clo; c < chi; c++) {
        uint64_t lo = (uint64_t)c * WC_CHUNK, hi = lo + WC_CHUNK < j->n ? lo + WC_CHUNK : j->n;
        wc_hist(j->raw, lo, hi, j->hist[c]);
    }
}

/* The first pass, shared by coded_bytes and encode so that both give the same
 * header: histograms, table, exception count and start per chunk (j->exc0,
 * the caller frees it), layout. */
static ork_status enc_plan(const void *raw, size_t raw_bytes, int nthreads, enc_job *j, ork_wcodec_hdr *hdr) {
    memset(j, 0, sizeof *j);
    if (!raw && raw_bytes) return ORK_FAIL(ORK_E_INVALID, "wcodec: no raw bytes");
    uint64_t n = raw_bytes / 2;
    if (n > UINT32_MAX)
        return ORK_FAIL(ORK_E_INVALID, "wcodec: %zu bytes is past the u32 word positions of the format", raw_bytes);
    uint64_t nc = wc_chunks(n);
    j->raw = raw;
    j->n = n;
    j->hist = malloc((nc ? nc : 1) * sizeof *j->hist);
    j->exc0 = malloc((nc ? nc : 1) * sizeof *j->exc0);
    if (!j->hist || !j->exc0) {
        free(j->hist);
        free(j->exc0);
        j->exc0 = NULL;
        return ORK_FAIL(ORK_E_NOMEM, "wcodec: encode scratch for %llu chunks", (unsigned long long)nc);
    }
    ork_par_for(nthreads, (int64_t)nc, 1, enc_hist_range, j);
    uint64_t h[256] = {0};
    for (uint64_t c = 0; c < nc; c++)
        for (int e = 0; e < 256; e++) h[e] += j->hist[c][e];
    uint8_t table[16];
    ork_wcodec_table(h, 256, ORK_WCODEC_ESC, table, j->map);
    uint64_t n_exc = 0;
    for (uint64_t c = 0; c < nc; c++) {
        j->exc0[c] = n_exc;
        for (int e = 0; e < 256; e++)
            if (j->map[e] == ORK_WCODEC_ESC) n_exc += j->hist[c][e];
    }
    free(j->hist);
    j->hist = NULL;
    wc_layout(hdr, raw, raw_bytes, n_exc, table);
    return ORK_OK;
}

size_t ork_wcodec_coded_bytes(const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr) {
    enc_job j;
    ork_wcodec_hdr h;
    if (enc_plan(raw, raw_bytes, 1, &j, &h) != ORK_OK) return 0; /* encode refuses these bytes too */
    free(j.exc0);
    if (hdr) *hdr = h;
    return (size_t)h.coded_bytes;
}

static void enc_put_exc(const enc_job *j, uint64_t *k, uint64_t pos, unsigned e) {
    uint32_t p = (uint32_t)pos;
    memcpy(j->exc_pos + 4 * *k, &p, 4);
    j->exc_e[*k] = (uint8_t)e;
    (*k)++;
}

/* 4 words in u64 lanes: their sm bytes to sm[0..3], their 4 indices returned
 * as 16 bits (first word in the low nibble). */
static inline uint32_t enc_4(uint64_t v, const uint8_t *map, uint8_t *sm) {
    uint64_t s = ((v >> 8) & WC_LANE_SIGN) | (v & WC_LANE_MANT);
    s = (s | s >> 8) & 0x0000ffff0000ffffull; /* the lanes' low bytes, packed */
    uint32_t s4 = (uint32_t)(s | s >> 16);
    memcpy(sm, &s4, 4);
    return map[(v >> 7) & 0xffu] | (uint32_t)map[(v >> 23) & 0xffu] << 4 | (uint32_t)map[(v >> 39) & 0xffu] << 8 |
           (uint32_t)map[(v >> 55) & 0xffu] << 12;
}

static void enc_code_range(void *ctx, int64_t clo, int64_t chi) {
    const enc_job *j = ctx;
    /* locals: the byte stores below may alias *j as far as the compiler knows */
    const uint8_t *raw = j->raw, *map = j->map;
    uint8_t *sm = j->sm, *idx = j->idx;
    for (int64_t c = clo; c < chi; c++) {
        uint64_t lo = (uint64_t)c * WC_CHUNK, hi = lo + WC_CHUNK < j->n ? lo + WC_CHUNK : j->n;
        uint64_t k = j->exc0[c], i = lo;
        for (; i + 8 <= hi; i += 8) { /* 8 words: 16 bytes in, 8 sm bytes and 4 idx bytes out */
            uint64_t x[2];
            memcpy(x, raw + 2 * i, 16);
            uint32_t nib = enc_4(x[0], map, sm + i) | enc_4(x[1], map, sm + i + 4) << 16;
            memcpy(idx + i / 2, &nib, 4);
            if (wc_esc_bits(nib)) /* rare for weights */
                for (int q = 0; q < 8; q++)
                    if (((nib >> 4 * q) & 15u) == ORK_WCODEC_ESC)
                        enc_put_exc(j, &k, i + q, wc_exp(wc_word(raw, i + q)));
        }
        for (; i + 2 <= hi; i += 2) {
            unsigned w0 = wc_word(raw, i), w1 = wc_word(raw, i + 1);
            unsigned e0 = wc_exp(w0), e1 = wc_exp(w1), x0 = map[e0], x1 = map[e1];
            sm[i] = wc_sm(w0);
            sm[i + 1] = wc_sm(w1);
            idx[i / 2] = (uint8_t)(x0 | x1 << 4);
            if ((x0 == ORK_WCODEC_ESC) | (x1 == ORK_WCODEC_ESC)) { /* rare for weights */
                if (x0 == ORK_WCODEC_ESC) enc_put_exc(j, &k, i, e0);
                if (x1 == ORK_WCODEC_ESC) enc_put_exc(j, &k, i + 1, e1);
            }
        }
        if (i < hi) { /* the odd last word; its byte's high nibble is padding */
            unsigned w = wc_word(raw, i), e = wc_exp(w), x = map[e];
            sm[i] = wc_sm(w);
            idx[i / 2] = (uint8_t)x;
            if (x == ORK_WCODEC_ESC) enc_put_exc(j, &k, i, e);
        }
    }
}

ork_status ork_wcodec_encode(const void *raw, size_t raw_bytes, void *out, size_t out_cap, size_t *coded,
                             int nthreads) {
    if (coded) *coded = 0;
    if (!out || !coded) return ORK_FAIL(ORK_E_INVALID, "wcodec: encode needs out and coded");
    enc_job j;
    ork_wcodec_hdr hdr;
    ORK_TRY(enc_plan(raw, raw_bytes, nthreads, &j, &hdr));
    if (out_cap < hdr.coded_bytes) {
        free(j.exc0);
        return ORK_FAIL(ORK_E_INVALID, "wcodec: out_cap %zu below the coded size %llu", out_cap,
                        (unsigned long long)hdr.coded_bytes);
    }
    uint64_t n = hdr.n_words, n_exc = hdr.n_exc;
    uint8_t *o = out;
    /* Header, its padding and the gaps between sections are zero: the coded
     * bytes are a function of the input alone (idx: the coding writes n / 2
     * whole bytes, an odd last word the byte after, whole) */
    const uint64_t sec[4][2] = {{hdr.sm_offset, n}, {hdr.idx_offset, n / 2}, {hdr.exc_pos_offset, 4 * n_exc},
                                {hdr.exc_e_offset, n_exc}};
    ork_wcodec_zero_gaps(o, hdr.coded_bytes, sec, 4);
    memcpy(o, &hdr, sizeof hdr);
    j.sm = o + hdr.sm_offset;
    j.idx = o + hdr.idx_offset;
    j.exc_pos = o + hdr.exc_pos_offset;
    j.exc_e = o + hdr.exc_e_offset;
    ork_par_for(nthreads, (int64_t)wc_chunks(n), 1, enc_code_range, &j);
    free(j.exc0);
    *coded = (size_t)hdr.coded_bytes;
    return ORK_OK;
}

/* ---- header ------------------------------------------------------------ */

/* Section [off, off + len): 256-aligned, at or after *end (the previous
 * section's end), inside limit (the header's coded_bytes); *end moves past it. */
size_t ork_wcodec_kind_coded_bytes(ork_wcodec_kind k, const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr) {
    switch (k) {
    case ORK_WCODEC_WORDS: return ork_wcodec_coded_bytes(raw, raw_bytes, hdr);
    case ORK_WCODEC_BYTES: return ork_wcodec8_coded_bytes(raw, raw_bytes, hdr);
    case ORK_WCODEC2_WORDS: return ork_wcodec2_coded_bytes(raw, raw_bytes, 2, hdr);
    case ORK_WCODEC2_BYTES: return ork_wcodec2_coded_bytes(raw, raw_bytes, 1, hdr);
    default: return 0;
    }
}

ork_status ork_wcodec_kind_encode(ork_wcodec_kind k, const void *raw, size_t raw_bytes, void *out, size_t out_cap,
                                  size_t *coded, int nthreads) {
    switch (k) {
    case ORK_WCODEC_WORDS: return ork_wcodec_encode(raw, raw_bytes, out, out_cap, coded, nthreads);
    case ORK_WCODEC_BYTES: return ork_wcodec8_encode(raw, raw_bytes, out, out_cap, coded, nthreads);
    case ORK_WCODEC2_WORDS: return ork_wcodec2_encode(raw, raw_bytes, 2, out, out_cap, coded, nthreads);
    case ORK_WCODEC2_BYTES: return ork_wcodec2_encode(raw, raw_bytes, 1, out, out_cap, coded, nthreads);
    default: return ORK_FAIL(ORK_E_INVALID, "wcodec: no codec %d", (int)k);
    }
}

void ork_wcodec_zero_gaps(uint8_t *o, uint64_t coded_bytes, const uint64_t (*sec)[2], int n) {
    uint64_t at = 0;
    for (int i = 0; i <= n; i++) {
        uint64_t next = i < n ? sec[i][0] : coded_bytes;
        if (next > at) memset(o + at, 0, next - at);
        if (i < n) at = sec[i][0] + sec[i][1];
    }
}

ork_status ork_wcodec_section(const char *name, uint64_t off, uint64_t len, uint64_t limit, uint64_t *end) {
    if (off % WC_ALIGN != 0)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: %s %llu is not 256-aligned", name, (unsigned long long)off);
    if (off < *end)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: %s %llu overlaps the section before it (ends at %llu)", name,
                        (unsigned long long)off, (unsigned long long)*end);
    if (off > limit || len > limit - off)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: %s %llu + %llu bytes runs past coded_bytes %llu", name,
                        (unsigned long long)off, (unsigned long long)len, (unsigned long long)limit);
    *end = off + len;
    return ORK_OK;
}

ork_status ork_wcodec_header(const void *coded, size_t coded_bytes, ork_wcodec_hdr *hdr) {
    if (!coded || !hdr) return ORK_FAIL(ORK_E_INVALID, "wcodec: header needs coded and hdr");
    if (coded_bytes < ORK_WCODEC_HDR_BYTES)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: coded_bytes %zu is shorter than the header", coded_bytes);
    ork_wcodec_hdr h;
    memcpy(&h, coded, sizeof h);
    if (h.magic != ORK_WCODEC_MAGIC && h.magic != ORK_WCODEC_MAGIC8 && !ork_wcodec2_word(h.magic))
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: bad magic 0x%08x", h.magic);
    if (h.coded_bytes > coded_bytes)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: coded_bytes %llu but the buffer holds %zu (truncated)",
                        (unsigned long long)h.coded_bytes, coded_bytes);
    if (h.magic == ORK_WCODEC_MAGIC8 || ork_wcodec2_word(h.magic)) {
        ORK_TRY(h.magic == ORK_WCODEC_MAGIC8 ? ork_wcodec8_check(&h) : ork_wcodec2_check(&h));
        *hdr = h;
        return ORK_OK;
    }
    if (h.tail_present > 1) return ORK_FAIL(ORK_E_FORMAT, "wcodec: tail_present %u is not 0 or 1", h.tail_present);
    if (h.n_words > UINT32_MAX)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: n_words %llu past u32 positions", (unsigned long long)h.n_words);
    if (h.raw_bytes != h.n_words * 2 + h.tail_present)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: raw_bytes %llu != 2 * n_words %llu + tail",
                        (unsigned long long)h.raw_bytes, (unsigned long long)h.n_words);
    if (h.n_exc > h.n_words)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec: n_exc %llu exceeds n_words %llu", (unsigned long long)h.n_exc,
                        (unsigned long long)h.n_words);
    uint64_t end = ORK_WCODEC_HDR_BYTES, lim = h.coded_bytes;
    ORK_TRY(ork_wcodec_section("sm_offset", h.sm_offset, h.n_words, lim, &end));
    ORK_TRY(ork_wcodec_section("idx_offset", h.idx_offset, wc_idx_bytes(h.n_words), lim, &end));
    ORK_TRY(ork_wcodec_section("exc_pos_offset", h.exc_pos_offset, 4 * h.n_exc, lim, &end));
    ORK_TRY(ork_wcodec_section("exc_e_offset", h.exc_e_offset, h.n_exc, lim, &end));
    *hdr = h;
    return ORK_OK;
}

/* ---- decode ------------------------------------------------------------ */

typedef struct dec_job {
    const uint8_t *sm, *idx, *exc_pos, *exc_e;
    uint8_t *out;
    uint64_t n, n_exc;
    uint8_t table[16];
    uint64_t *esc;     /* [n_chunks] escape nibbles in the chunk */
    uint64_t *exc_end; /* [n_chunks] first exception at or past the chunk's end */
    uint8_t *bad;      /* [n_chunks] an exception out of order or not at an escape */
} dec_job;

/* First k in [0, n_exc) with exc_pos[k] >= v (n_exc if none). Deterministic on
 * any data, sorted or not: neighbouring chunks compute their shared boundary
 * identically, which is what the order check below relies on. */
static uint64_t dec_lower_bound(const dec_job *j, uint64_t v) {
    uint64_t a = 0, b = j->n_exc;
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (wc_ld32(j->exc_pos + 4 * m) < v) a = m + 1;
        else b = m;
    }
    return a;
}

static inline void dec_put(uint8_t *out, uint64_t i, unsigned sm, unsigned e) {
    uint16_t w = (uint16_t)(((sm & 0x80u) << 8) | (e << 7) | (sm & 0x7fu));
    memcpy(out + 2 * i, &w, 2);
}

/* 4 words as u64 lanes from 4 sm bytes and 4 index nibbles (low first). */
static inline uint64_t dec_4(uint32_t sm4, uint32_t x, const uint8_t t[16]) {
    uint64_t s = sm4;
    s = (s | s << 16) & 0x0000ffff0000ffffull; /* the bytes to 16-bit lanes */
    s = (s | s << 8) & 0x00ff00ff00ff00ffull;
    uint64_t e = (uint64_t)t[x & 15u] | (uint64_t)t[(x >> 4) & 15u] << 16 | (uint64_t)t[(x >> 8) & 15u] << 32 |
                 (uint64_t)t[(x >> 12) & 15u] << 48;
    return ((s & WC_LANE_SIGN) << 8) | (e << 7) | (s & WC_LANE_MANT);
}

static void dec_range(void *ctx, int64_t clo, int64_t chi) {
    const dec_job *j = ctx;
    /* locals: the byte stores below may alias *j as far as the compiler knows */
    const uint8_t *sm = j->sm, *idx = j->idx, *exc_e = j->exc_e;
    uint8_t *out = j->out;
    uint8_t t[16];
    memcpy(t, j->table, 16);
    for (int64_t c = clo; c < chi; c++) {
        uint64_t lo = (uint64_t)c * WC_CHUNK, hi = lo + WC_CHUNK < j->n ? lo + WC_CHUNK : j->n;
        uint64_t esc = 0, i = lo;
        for (; i + 8 <= hi; i += 8) { /* 8 words: 8 sm bytes and 4 idx bytes in, 16 bytes out */
            uint64_t s8, o[2];
            uint32_t nib;
            memcpy(&s8, sm + i, 8);
            memcpy(&nib, idx + i / 2, 4);
            o[0] = dec_4((uint32_t)s8, nib, t);
            o[1] = dec_4((uint32_t)(s8 >> 32), nib >> 16, t);
            memcpy(out + 2 * i, o, 16);
            esc += (wc_esc_bits(nib) * 0x11111111u) >> 28; /* the bits' sum lands in the top nibble */
        }
        for (; i + 2 <= hi; i += 2) {
            unsigned b = idx[i / 2], x0 = b & 15u, x1 = b >> 4;
            dec_put(out, i, sm[i], t[x0]);
            dec_put(out, i + 1, sm[i + 1], t[x1]);
            esc += (x0 == ORK_WCODEC_ESC) + (x1 == ORK_WCODEC_ESC);
        }
        if (i < hi) {
            unsigned x = idx[i / 2] & 15u;
            dec_put(out, i, sm[i], t[x]);
            esc += x == ORK_WCODEC_ESC;
        }
        j->esc[c] = esc;
        /* The chunk's exceptions: strictly ascending, inside [lo, hi), each at
         * an escape nibble. With the chunk boundaries shared and the totals
         * equal (checked by the caller) this makes them one-to-one with the
         * escapes. */
        uint64_t a = dec_lower_bound(j, lo), z = dec_lower_bound(j, hi);
        uint64_t next = lo; /* the smallest position the next exception may have */
        int bad = 0;
        for (uint64_t k = a; k < z; k++) {
            uint64_t p = wc_ld32(j->exc_pos + 4 * k);
            if (p < next || p >= hi || ((idx[p / 2] >> (4 * (p & 1))) & 15u) != ORK_WCODEC_ESC) {
                bad = 1;
                break;
            }
            next = p + 1;
            /* keep sign and mantissa, replace the exponent (bits 14..7) */
            out[2 * p] = (uint8_t)((out[2 * p] & 0x7fu) | (unsigned)exc_e[k] << 7);
            out[2 * p + 1] = (uint8_t)((out[2 * p + 1] & 0x80u) | exc_e[k] >> 1);
        }
        j->exc_end[c] = z;
        j->bad[c] = (uint8_t)bad;
    }
}

ork_status ork_wcodec_decode(const void *coded, size_t coded_bytes, void *out, int nthreads) {
    if (!out) return ORK_FAIL(ORK_E_INVALID, "wcodec: decode needs out");
    ork_wcodec_hdr h;
    ORK_TRY(ork_wcodec_header(coded, coded_bytes, &h));
    if (h.magic == ORK_WCODEC_MAGIC8) return ork_wcodec8_decode(coded, &h, out, nthreads);
    if (ork_wcodec2_word(h.magic)) return ork_wcodec2_decode(coded, &h, out, nthreads);
    const uint8_t *c = coded;
    uint64_t nc = wc_chunks(h.n_words);
    dec_job j = {.sm = c + h.sm_offset, .idx = c + h.idx_offset, .exc_pos = c + h.exc_pos_offset,
                 .exc_e = c + h.exc_e_offset, .out = out, .n = h.n_words, .n_exc = h.n_exc};
    memcpy(j.table, h.table, 16);
    j.esc = malloc((nc ? nc : 1) * sizeof *j.esc);
    j.exc_end = malloc((nc ? nc : 1) * sizeof *j.exc_end);
    j.bad = malloc(nc ? nc : 1);
    ork_status st = ORK_OK;
    if (!j.esc || !j.exc_end || !j.bad) {
        st = ORK_FAIL(ORK_E_NOMEM, "wcodec: decode scratch for %llu chunks", (unsigned long long)nc);
        goto done;
    }
    ork_par_for(nthreads, (int64_t)nc, 1, dec_range, &j);
    uint64_t esc = 0;
    for (uint64_t k = 0; k < nc; k++) {
        if (j.bad[k]) {
            st = ORK_FAIL(ORK_E_FORMAT, "wcodec: exception positions not ascending or not at escapes (words %llu..)",
                          (unsigned long long)(k * WC_CHUNK));
            goto done;
        }
        esc += j.esc[k];
    }
    if ((nc ? j.exc_end[nc - 1] : 0) != h.n_exc) {
        st = ORK_FAIL(ORK_E_FORMAT, "wcodec: exception positions not ascending or past n_words %llu",
                      (unsigned long long)h.n_words);
        goto done;
    }
    if (esc != h.n_exc) {
        st = ORK_FAIL(ORK_E_FORMAT, "wcodec: n_exc %llu but %llu escape indices", (unsigned long long)h.n_exc,
                      (unsigned long long)esc);
        goto done;
    }
    if (h.tail_present) ((uint8_t *)out)[h.raw_bytes - 1] = h.tail;
done:
    free(j.esc);
    free(j.exc_end);
    free(j.bad);
    return st;
}
