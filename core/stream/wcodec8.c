/* stream/wcodec8.c — the byte codec (format in wcodec.h): CPU encoder and
 * decoder. Like the 16-bit codec, both work in fixed chunks of W8_CHUNK tiles
 * (not per thread), so the output never depends on nthreads: the encoder
 * histograms each chunk, derives each chunk's exception count from its
 * histogram once the table is known, and writes codes, tile starts and
 * exceptions in one more pass. */
#include "stream/wcodec8.h"

#include "cpu/cpu.h" /* ork_par_for */
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

#define W8_ALIGN 256u
#define W8_TILE_VALUES ((uint64_t)ORK_WCODEC8_GROUP * ORK_WCODEC8_TILE)
#define W8_CHUNK_TILES 32u /* 256 K values a chunk */
#define W8_CHUNK_VALUES (W8_TILE_VALUES * W8_CHUNK_TILES)

static uint64_t w8_up(uint64_t x) { return (x + W8_ALIGN - 1) & ~(uint64_t)(W8_ALIGN - 1); }
static uint64_t w8_chunks(uint64_t n) { return (n + W8_CHUNK_VALUES - 1) / W8_CHUNK_VALUES; }
static inline unsigned w8_class(unsigned v) { return (v >> 2) & 31u; }
static inline uint32_t w8_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void w8_layout(ork_wcodec_hdr *h, uint64_t n, uint64_t n_exc, const uint8_t table[16]) {
    memset(h, 0, sizeof *h);
    h->magic = ORK_WCODEC_MAGIC8;
    h->raw_bytes = n;
    h->n_words = n;
    h->n_exc = n_exc;
    h->code_offset = ORK_WCODEC_HDR_BYTES;
    h->tile_exc_offset = w8_up(h->code_offset + 24 * ork_wcodec8_groups(n));
    h->exc_offset = w8_up(h->tile_exc_offset + 4 * (ork_wcodec8_tiles(n) + 1));
    h->coded_bytes = w8_up(h->exc_offset + n_exc);
    memcpy(h->table, table, 16);
}

/* ---- encode ------------------------------------------------------------ */

typedef struct w8_enc {
    const uint8_t *raw;
    uint64_t n;
    uint32_t (*hist)[32]; /* [chunks] */
    uint64_t *exc0;       /* [chunks] first exception of each chunk */
    uint8_t map[32];      /* class -> index, ESC when not in the table */
    uint8_t code[256];    /* byte -> its 6-bit code (bits 0..3 the nibble, 4..5 the crumb), bit 6: an escape */
    uint8_t *code_out, *tile_exc, *exc;
} w8_enc;

static void w8_hist_range(void *ctx, int64_t clo, int64_t chi) {
    w8_enc *j = ctx;
    for (int64_t c = clo; c < chi; c++) {
        uint64_t lo = (uint64_t)c * W8_CHUNK_VALUES, hi = lo + W8_CHUNK_VALUES < j->n ? lo + W8_CHUNK_VALUES : j->n;
        uint32_t t[4][32] = {{0}}; /* interleaved: runs of one class do not serialise on one counter */
        uint64_t i = lo;
        for (; i + 4 <= hi; i += 4) {
            uint32_t v = w8_ld32(j->raw + i);
            t[0][(v >> 2) & 31u]++;
            t[1][(v >> 10) & 31u]++;
            t[2][(v >> 18) & 31u]++;
            t[3][(v >> 26) & 31u]++;
        }
        for (; i < hi; i++) t[0][w8_class(j->raw[i])]++;
        for (int e = 0; e < 32; e++) j->hist[c][e] = t[0][e] + t[1][e] + t[2][e] + t[3][e];
    }
}

/* The first pass, shared by coded_bytes and encode so that both give the same
 * header. The table: the 7 most frequent classes (ork_wcodec_table). */
static ork_status w8_plan(const void *raw, size_t raw_bytes, int nthreads, w8_enc *j, ork_wcodec_hdr *hdr) {
    memset(j, 0, sizeof *j);
    if (!raw && raw_bytes) return ORK_FAIL(ORK_E_INVALID, "wcodec8: no raw bytes");
    if ((uint64_t)raw_bytes > UINT32_MAX)
        return ORK_FAIL(ORK_E_INVALID, "wcodec8: %zu bytes is past the u32 exception indices of the format", raw_bytes);
    uint64_t n = raw_bytes, nc = w8_chunks(n);
    j->raw = raw;
    j->n = n;
    j->hist = malloc((nc ? nc : 1) * sizeof *j->hist);
    j->exc0 = malloc((nc ? nc : 1) * sizeof *j->exc0);
    if (!j->hist || !j->exc0) {
        free(j->hist);
        free(j->exc0);
        j->exc0 = NULL;
        return ORK_FAIL(ORK_E_NOMEM, "wcodec8: encode scratch for %llu chunks", (unsigned long long)nc);
    }
    ork_par_for(nthreads, (int64_t)nc, 1, w8_hist_range, j);
    uint64_t h[32] = {0};
    for (uint64_t c = 0; c < nc; c++)
        for (int e = 0; e < 32; e++) h[e] += j->hist[c][e];
    uint8_t table[16];
    ork_wcodec_table(h, 32, ORK_WCODEC8_ESC, table, j->map);
    for (unsigned v = 0; v < 256; v++) {
        unsigned x = j->map[w8_class(v)], cd = x << 3 | (v >> 7) << 2 | (v & 3u);
        j->code[v] = (uint8_t)((cd & 15u) | (cd >> 4) << 4 | (x == ORK_WCODEC8_ESC) << 6);
    }
    uint64_t n_exc = 0;
    for (uint64_t c = 0; c < nc; c++) {
        j->exc0[c] = n_exc;
        for (int e = 0; e < 32; e++)
            if (j->map[e] == ORK_WCODEC8_ESC) n_exc += j->hist[c][e];
    }
    free(j->hist);
    j->hist = NULL;
    w8_layout(hdr, n, n_exc, table);
    return ORK_OK;
}

size_t ork_wcodec8_coded_bytes(const void *raw, size_t raw_bytes, ork_wcodec_hdr *hdr) {
    w8_enc j;
    ork_wcodec_hdr h;
    if (w8_plan(raw, raw_bytes, 1, &j, &h) != ORK_OK) return 0; /* encode refuses these bytes too */
    free(j.exc0);
    if (hdr) *hdr = h;
    return (size_t)h.coded_bytes;
}

static void w8_code_range(void *ctx, int64_t clo, int64_t chi) {
    const w8_enc *j = ctx;
    /* locals: the byte stores below may alias *j as far as the compiler knows */
    const uint8_t *raw = j->raw, *map = j->map;
    uint8_t ct[256];
    memcpy(ct, j->code, sizeof ct);
    uint8_t *code = j->code_out, *tile_exc = j->tile_exc, *exc = j->exc;
    uint64_t n = j->n, groups = ork_wcodec8_groups(n);
    for (int64_t c = clo; c < chi; c++) {
        uint64_t k = j->exc0[c], t0 = (uint64_t)c * W8_CHUNK_TILES, tiles = ork_wcodec8_tiles(n);
        for (uint64_t t = t0; t < t0 + W8_CHUNK_TILES && t < tiles; t++) {
            uint32_t k32 = (uint32_t)k;
            memcpy(tile_exc + 4 * t, &k32, 4);
            for (uint64_t g = t * ORK_WCODEC8_TILE; g < (t + 1) * ORK_WCODEC8_TILE && g < groups; g++) {
                uint32_t w[6] = {0};
                uint64_t i0 = g * ORK_WCODEC8_GROUP;
                if (i0 + ORK_WCODEC8_GROUP <= n) { /* a whole group: 8 values a u64, a table lookup each */
                    uint32_t esc = 0;
                    for (unsigned h = 0; h < 4; h++) {
                        uint64_t v8;
                        memcpy(&v8, raw + i0 + 8 * h, 8);
                        uint32_t nib = 0, cr = 0, e = 0;
                        for (unsigned q = 0; q < 8; q++) {
                            uint32_t cd = ct[(v8 >> (8 * q)) & 0xffu];
                            nib |= (cd & 15u) << (4 * q);
                            cr |= ((cd >> 4) & 3u) << (2 * q);
                            e |= (cd >> 6) << q;
                        }
                        w[h] = nib;
                        w[4 + h / 2] |= cr << (16 * (h % 2));
                        esc |= e << (8 * h);
                    }
                    for (; esc; esc &= esc - 1) exc[k++] = raw[i0 + (unsigned)__builtin_ctz(esc)];
                } else {
                    for (unsigned q = 0; i0 + q < n; q++) { /* the last group; its padding is code 0 */
                        unsigned v = raw[i0 + q], x = map[w8_class(v)];
                        if (x == ORK_WCODEC8_ESC) exc[k++] = (uint8_t)v;
                        unsigned cd = x << 3 | (v >> 7) << 2 | (v & 3u);
                        w[q / 8] |= (uint32_t)(cd & 15u) << (4 * (q % 8));
                        w[4 + q / 16] |= (uint32_t)(cd >> 4) << (2 * (q % 16));
                    }
                }
                memcpy(code + 24 * g, w, 24);
            }
        }
    }
}

ork_status ork_wcodec8_encode(const void *raw, size_t raw_bytes, void *out, size_t out_cap, size_t *coded,
                              int nthreads) {
    if (coded) *coded = 0;
    if (!out || !coded) return ORK_FAIL(ORK_E_INVALID, "wcodec8: encode needs out and coded");
    w8_enc j;
    ork_wcodec_hdr h;
    ORK_TRY(w8_plan(raw, raw_bytes, nthreads, &j, &h));
    if (out_cap < h.coded_bytes) {
        free(j.exc0);
        return ORK_FAIL(ORK_E_INVALID, "wcodec8: out_cap %zu below the coded size %llu", out_cap,
                        (unsigned long long)h.coded_bytes);
    }
    uint8_t *o = out;
    /* header, padding and gaps zero (the coding fills its three sections in full) */
    const uint64_t sec[3][2] = {{h.code_offset, 24 * ork_wcodec8_groups(h.n_words)},
                                {h.tile_exc_offset, 4 * (ork_wcodec8_tiles(h.n_words) + 1)},
                                {h.exc_offset, h.n_exc}};
    ork_wcodec_zero_gaps(o, h.coded_bytes, sec, 3);
    memcpy(o, &h, sizeof h);
    j.code_out = o + h.code_offset;
    j.tile_exc = o + h.tile_exc_offset;
    j.exc = o + h.exc_offset;
    ork_par_for(nthreads, (int64_t)w8_chunks(h.n_words), 1, w8_code_range, &j);
    uint32_t last = (uint32_t)h.n_exc;
    memcpy(j.tile_exc + 4 * ork_wcodec8_tiles(h.n_words), &last, 4);
    free(j.exc0);
    *coded = (size_t)h.coded_bytes;
    return ORK_OK;
}

/* ---- header and decode ------------------------------------------------- */

ork_status ork_wcodec8_check(const ork_wcodec_hdr *h) {
    if (h->n_words != h->raw_bytes || h->tail_present)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec8: n_words %llu != raw_bytes %llu (or a tail)",
                        (unsigned long long)h->n_words, (unsigned long long)h->raw_bytes);
    if (h->raw_bytes > UINT32_MAX)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec8: raw_bytes %llu past u32 exception indices", (unsigned long long)h->raw_bytes);
    if (h->n_exc > h->n_words)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec8: n_exc %llu exceeds n_words %llu", (unsigned long long)h->n_exc,
                        (unsigned long long)h->n_words);
    for (int i = 0; i < ORK_WCODEC8_ESC; i++)
        if (h->table[i] > 31) return ORK_FAIL(ORK_E_FORMAT, "wcodec8: table[%d] = %u is not a 5-bit exponent", i, h->table[i]);
    uint64_t n = h->n_words, end = ORK_WCODEC_HDR_BYTES, lim = h->coded_bytes;
    ORK_TRY(ork_wcodec_section("code_offset", h->code_offset, 24 * ork_wcodec8_groups(n), lim, &end));
    ORK_TRY(ork_wcodec_section("tile_exc_offset", h->tile_exc_offset, 4 * (ork_wcodec8_tiles(n) + 1), lim, &end));
    ORK_TRY(ork_wcodec_section("exc_offset", h->exc_offset, h->n_exc, lim, &end));
    return ORK_OK;
}

typedef struct w8_dec {
    const uint8_t *code, *tile_exc, *exc;
    uint8_t *out;
    uint64_t n, n_exc;
    uint8_t table[8];
    uint64_t *bad; /* [chunks] 0, or 1 + the first tile whose escapes do not match its exceptions */
} w8_dec;

static void w8_dec_range(void *ctx, int64_t clo, int64_t chi) {
    const w8_dec *j = ctx;
    const uint8_t *code = j->code, *exc = j->exc;
    uint8_t *out = j->out;
    /* 6-bit code (nibble | crumb << 4) -> byte; escapes (index 7) are patched below */
    uint8_t dt[64];
    for (unsigned cd = 0; cd < 64; cd++) {
        unsigned lo = cd & 15u, x = lo >> 3 | (cd >> 4) << 1;
        dt[cd] = (uint8_t)((lo & 4u) << 5 | (x < ORK_WCODEC8_ESC ? (unsigned)j->table[x] : 0u) << 2 | (lo & 3u));
    }
    uint64_t n = j->n, groups = ork_wcodec8_groups(n), tiles = ork_wcodec8_tiles(n);
    for (int64_t c = clo; c < chi; c++) {
        j->bad[c] = 0;
        for (uint64_t t = (uint64_t)c * W8_CHUNK_TILES; t < ((uint64_t)c + 1) * W8_CHUNK_TILES && t < tiles; t++) {
            uint64_t k = w8_ld32(j->tile_exc + 4 * t), ke = w8_ld32(j->tile_exc + 4 * (t + 1));
            if (k > ke || ke > j->n_exc) { j->bad[c] = 1 + t; break; }
            for (uint64_t g = t * ORK_WCODEC8_TILE; g < (t + 1) * ORK_WCODEC8_TILE && g < groups; g++) {
                uint32_t w[6];
                memcpy(w, code + 24 * g, 24);
                uint8_t v[ORK_WCODEC8_GROUP];
                uint32_t esc = 0;
                for (unsigned q = 0; q < ORK_WCODEC8_GROUP; q++) {
                    unsigned cd = ((w[q / 8] >> (4 * (q % 8))) & 15u) | ((w[4 + q / 16] >> (2 * (q % 16))) & 3u) << 4;
                    v[q] = dt[cd];
                    esc |= (uint32_t)((cd & 0x38u) == 0x38u) << q; /* index 7: nibble bit 3 and both crumb bits */
                }
                for (; esc; esc &= esc - 1) {
                    if (k >= ke) { j->bad[c] = 1 + t; return; } /* more escapes than exceptions */
                    v[__builtin_ctz(esc)] = exc[k++];
                }
                uint64_t i0 = g * ORK_WCODEC8_GROUP;
                memcpy(out + i0, v, i0 + ORK_WCODEC8_GROUP <= n ? ORK_WCODEC8_GROUP : n - i0);
            }
            if (k != ke) { j->bad[c] = 1 + t; break; } /* fewer */
        }
    }
}

ork_status ork_wcodec8_decode(const uint8_t *coded, const ork_wcodec_hdr *h, void *out, int nthreads) {
    uint64_t nc = w8_chunks(h->n_words), tiles = ork_wcodec8_tiles(h->n_words);
    if (w8_ld32(coded + h->tile_exc_offset) != 0 || w8_ld32(coded + h->tile_exc_offset + 4 * tiles) != h->n_exc)
        return ORK_FAIL(ORK_E_FORMAT, "wcodec8: tile_exc does not run from 0 to n_exc %llu", (unsigned long long)h->n_exc);
    w8_dec j = {.code = coded + h->code_offset, .tile_exc = coded + h->tile_exc_offset, .exc = coded + h->exc_offset,
                .out = out, .n = h->n_words, .n_exc = h->n_exc};
    memcpy(j.table, h->table, 8);
    j.bad = calloc(nc ? nc : 1, sizeof *j.bad);
    if (!j.bad) return ORK_FAIL(ORK_E_NOMEM, "wcodec8: decode scratch for %llu chunks", (unsigned long long)nc);
    ork_par_for(nthreads, (int64_t)nc, 1, w8_dec_range, &j);
    ork_status st = ORK_OK;
    for (uint64_t c = 0; c < nc && st == ORK_OK; c++)
        if (j.bad[c])
            st = ORK_FAIL(ORK_E_FORMAT, "wcodec8: tile %llu: its escapes do not match tile_exc (values %llu..)",
                          (unsigned long long)(j.bad[c] - 1), (unsigned long long)((j.bad[c] - 1) * W8_TILE_VALUES));
    free(j.bad);
    return st;
}
