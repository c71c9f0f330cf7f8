/* stream/transit/exponent_code.c — the exponent-class codes (format in
 * transit/format.h): CPU encoder, header check and decoder, for 16-bit words
 * and for E5M2 bytes. The work goes in fixed chunks of W2_CHUNK_TILES tiles, so
 * the output never depends on nthreads: a histogram per chunk gives the table
 * and then each chunk's L2 and L3 counts; one more pass writes everything. A
 * chunk's L2 codes get room for its worst padding (31 codes a tile), so two
 * chunks never share a word of the bit stream and chunks code in parallel. */
#include "stream/transit/exponent_code.h"

#include "cpu/cpu.h" /* ork_par_for */
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

/* index of the lowest set bit of x != 0 (MSVC has no __builtin_ctz) */
static inline unsigned ctz32(uint32_t x) {
#if defined(__GNUC__)
    return (unsigned)__builtin_ctz(x);
#elif defined(_MSC_VER)
    unsigned long i;
    _BitScanForward(&i, x);
    return (unsigned)i;
#else
    unsigned i = 0;
    while (!(x & 1u)) x >>= 1, i++;
    return i;
#endif
}

#define W2_ALIGN ORK_TRANSIT_ALIGN
#define W2_TILE_VALUES ((uint64_t)ORK_TRANSIT_GROUP * ORK_TRANSIT_TILE)
#define W2_CHUNK_TILES 32u /* 256 K values a chunk */
#define W2_CHUNK_VALUES (W2_TILE_VALUES * W2_CHUNK_TILES)
#define W2_MAX_CLASSES 256

static uint64_t w2_up(uint64_t x) { return (x + W2_ALIGN - 1) & ~(uint64_t)(W2_ALIGN - 1); }
static uint64_t w2_up32(uint64_t x) { return (x + 31) & ~(uint64_t)31; }
static uint64_t w2_chunks(uint64_t n) { return (n + W2_CHUNK_VALUES - 1) / W2_CHUNK_VALUES; }
static int w2_n_classes(int word) { return word == 2 ? 256 : 32; }
static inline uint32_t w2_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void w2_st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline unsigned w2_word_at(const uint8_t *raw, uint64_t i) { return raw[2 * i] | (unsigned)raw[2 * i + 1] << 8; }
static inline unsigned w2_class_of(const uint8_t *raw, uint64_t i, int word) {
    return word == 2 ? (w2_word_at(raw, i) >> 7) & 0xffu : (raw[i] >> 2) & 31u;
}
/* Tiles in chunk c of n values. */
static uint64_t w2_chunk_tiles(uint64_t n, uint64_t c) {
    uint64_t tiles = ork_transit_tiles(n), t0 = c * W2_CHUNK_TILES;
    return tiles - t0 < W2_CHUNK_TILES ? tiles - t0 : W2_CHUNK_TILES;
}

static void w2_layout(ork_transit_hdr *h, int word, uint64_t raw_bytes, const uint8_t *raw, uint64_t l2_cap,
                      uint64_t n_exc, const uint8_t table[16]) {
    uint64_t n = word == 2 ? raw_bytes / 2 : raw_bytes, groups = ork_transit_groups(n), tiles = ork_transit_tiles(n);
    memset(h, 0, sizeof *h);
    h->magic = word == 2 ? ORK_TRANSIT_MAGIC_WORDS : ORK_TRANSIT_MAGIC_BYTES;
    h->tail_present = word == 2 ? (uint32_t)(raw_bytes & 1) : 0;
    h->tail = h->tail_present ? raw[raw_bytes - 1] : 0;
    h->raw_bytes = raw_bytes;
    h->n_values = n;
    h->n_exc = n_exc;
    h->l2_cap = l2_cap;
    uint64_t at = ORK_TRANSIT_HDR_BYTES;
    if (word == 2) {
        h->sm_offset = at;
        at = w2_up(at + n);
    }
    h->code_offset = at;
    h->tile_l2_offset = w2_up(at + 4 * (uint64_t)ork_transit_group_words(word) * groups);
    h->l2_offset = w2_up(h->tile_l2_offset + 4 * (tiles + 1));
    h->tile_l3_offset = w2_up(h->l2_offset + 4 * ork_transit_l2_words(l2_cap));
    h->exc_offset = w2_up(h->tile_l3_offset + 4 * (tiles + 1));
    h->coded_bytes = w2_up(h->exc_offset + n_exc);
    memcpy(h->table, table, 16);
}

/* ---- encode ------------------------------------------------------------ */

typedef struct w2_enc {
    const uint8_t *raw;
    uint64_t n;
    int word;
    uint32_t (*hist)[W2_MAX_CLASSES]; /* [chunks] */
    uint64_t *l2base, *l3base;        /* [chunks] each chunk's first L2 code and L3 byte */
    uint8_t map[W2_MAX_CLASSES];      /* class -> index in table, 10 when not there */
    uint8_t *sm, *code, *tile_l2, *l2, *tile_l3, *l3;
} w2_enc;

static void w2_hist_range(void *ctx, int64_t clo, int64_t chi) {
    w2_enc *j = ctx;
    for (int64_t c = clo; c < chi; c++) {
        uint64_t lo = (uint64_t)c * W2_CHUNK_VALUES, hi = lo + W2_CHUNK_VALUES < j->n ? lo + W2_CHUNK_VALUES : j->n;
        static const uint32_t zero[4][W2_MAX_CLASSES];
        uint32_t t[4][W2_MAX_CLASSES]; /* interleaved: runs of one class do not serialise on one counter */
        memcpy(t, zero, sizeof t);
        uint64_t i = lo;
        if (j->word == 2) {
            for (; i + 4 <= hi; i += 4) {
                uint64_t v;
                memcpy(&v, j->raw + 2 * i, 8);
                t[0][(v >> 7) & 0xffu]++;
                t[1][(v >> 23) & 0xffu]++;
                t[2][(v >> 39) & 0xffu]++;
                t[3][(v >> 55) & 0xffu]++;
            }
        } else {
            for (; i + 4 <= hi; i += 4) {
                uint32_t v = w2_ld32(j->raw + i);
                t[0][(v >> 2) & 31u]++;
                t[1][(v >> 10) & 31u]++;
                t[2][(v >> 18) & 31u]++;
                t[3][(v >> 26) & 31u]++;
            }
        }
        for (; i < hi; i++) t[0][w2_class_of(j->raw, i, j->word)]++;
        for (int e = 0; e < W2_MAX_CLASSES; e++) j->hist[c][e] = t[0][e] + t[1][e] + t[2][e] + t[3][e];
    }
}

/* The first pass, shared by coded_bytes and encode so that both give the same
 * header: histograms, the table, each chunk's L2 room and L3 count. */
static ork_status w2_plan(const void *raw, size_t raw_bytes, int word, int nthreads, w2_enc *j, ork_transit_hdr *hdr) {
    memset(j, 0, sizeof *j);
    if (word != 1 && word != 2) return ORK_FAIL(ORK_E_INVALID, "transit: word_bytes %d is not 1 or 2", word);
    if (!raw && raw_bytes) return ORK_FAIL(ORK_E_INVALID, "transit: no raw bytes");
    uint64_t n = word == 2 ? (uint64_t)raw_bytes / 2 : (uint64_t)raw_bytes, nc = w2_chunks(n);
    if (n > ORK_TRANSIT_MAX_VALUES)
        return ORK_FAIL(ORK_E_INVALID, "transit: %llu values is past the format's 2^31", (unsigned long long)n);
    j->raw = raw;
    j->n = n;
    j->word = word;
    j->hist = malloc((nc ? nc : 1) * sizeof *j->hist);
    j->l2base = malloc((nc + 1) * sizeof *j->l2base);
    j->l3base = malloc((nc + 1) * sizeof *j->l3base);
    if (!j->hist || !j->l2base || !j->l3base) {
        free(j->hist);
        free(j->l2base);
        free(j->l3base);
        memset(j, 0, sizeof *j);
        return ORK_FAIL(ORK_E_NOMEM, "transit: encode scratch for %llu chunks", (unsigned long long)nc);
    }
    ork_par_for(nthreads, (int64_t)nc, 1, w2_hist_range, j);
    int ncls = w2_n_classes(word);
    uint64_t h[W2_MAX_CLASSES] = {0};
    for (uint64_t c = 0; c < nc; c++)
        for (int e = 0; e < ncls; e++) h[e] += j->hist[c][e];
    uint8_t table[16];
    ork_transit_table(h, ncls, ORK_TRANSIT_TABLE, table, j->map);
    uint64_t k2 = 0, k3 = 0;
    for (uint64_t c = 0; c < nc; c++) {
        uint64_t e2 = 0, e3 = 0;
        for (int e = 0; e < ncls; e++) {
            if (j->map[e] >= ORK_TRANSIT_L1_ESC) e2 += j->hist[c][e];
            if (j->map[e] == ORK_TRANSIT_TABLE) e3 += j->hist[c][e];
        }
        j->l2base[c] = k2;
        j->l3base[c] = k3;
        k2 += w2_up32(e2 + 31 * w2_chunk_tiles(n, c)); /* each tile pads its codes to 32 */
        k3 += e3;
    }
    j->l2base[nc] = k2;
    j->l3base[nc] = k3;
    free(j->hist);
    j->hist = NULL;
    w2_layout(hdr, word, raw_bytes, raw, k2, k3, table);
    return ORK_OK;
}

static void w2_free(w2_enc *j) {
    free(j->hist);
    free(j->l2base);
    free(j->l3base);
}

size_t ork_expcode_coded_bytes(const void *raw, size_t raw_bytes, int word_bytes, ork_transit_hdr *hdr) {
    w2_enc j;
    ork_transit_hdr h;
    if (w2_plan(raw, raw_bytes, word_bytes, 1, &j, &h) != ORK_OK) return 0; /* encode refuses these bytes too */
    w2_free(&j);
    if (hdr) *hdr = h;
    return (size_t)h.coded_bytes;
}

/* The L2 bit stream of one tile, written a word at a time. */
typedef struct w2_bits {
    uint8_t *words; /* the tile's first word */
    uint64_t acc;
    unsigned nbits;
    uint64_t at; /* words written */
} w2_bits;

static inline void w2_put3(w2_bits *b, unsigned v) {
    b->acc |= (uint64_t)v << b->nbits;
    b->nbits += 3;
    if (b->nbits >= 32) {
        w2_st32(b->words + 4 * b->at++, (uint32_t)b->acc);
        b->acc >>= 32;
        b->nbits -= 32;
    }
}

static inline void w2_flush(w2_bits *b) {
    if (b->nbits) w2_st32(b->words + 4 * b->at, (uint32_t)b->acc);
}

/* Group g's L1 code (and, for words, its sm bytes) from per-class tables, no
 * branch per value; returns the mask of its L1 escapes (bit q: value q). */
static inline uint32_t w2_group_words(const uint8_t *raw, uint64_t i0, unsigned m, const uint8_t l1t[256],
                                      uint8_t *sm, uint32_t w[5]) {
    uint32_t esc = 0;
    if (m == ORK_TRANSIT_GROUP) { /* a whole group: 16 values a code word, 4 a u64 load */
        for (unsigned h = 0; h < 2; h++) {
            uint32_t acc = 0;
            for (unsigned r = 0; r < 4; r++) {
                uint64_t v4;
                uint32_t sm4 = 0;
                memcpy(&v4, raw + 2 * (i0 + 16 * h + 4 * r), 8);
                for (unsigned k = 0; k < 4; k++) {
                    unsigned v = (unsigned)(v4 >> (16 * k)) & 0xffffu, q = 4 * r + k, l1 = l1t[(v >> 7) & 0xffu];
                    sm4 |= (((v >> 8) & 0x80u) | (v & 0x7fu)) << (8 * k);
                    acc |= (uint32_t)l1 << (2 * q);
                }
                memcpy(sm + i0 + 16 * h + 4 * r, &sm4, 4); /* one store: byte stores would alias the tables */
            }
            w[h] = acc;
            /* bit q of the escape mask: both bits of crumb q set (even bits, unzipped) */
            uint32_t x = acc & (acc >> 1) & 0x55555555u;
            x = (x | x >> 1) & 0x33333333u;
            x = (x | x >> 2) & 0x0f0f0f0fu;
            x = (x | x >> 4) & 0x00ff00ffu;
            x = (x | x >> 8) & 0x0000ffffu;
            esc |= x << (16 * h);
        }
        return esc;
    }
    for (unsigned q = 0; q < m; q++) {
        unsigned v = w2_word_at(raw, i0 + q), l1 = l1t[(v >> 7) & 0xffu];
        sm[i0 + q] = (uint8_t)(((v >> 8) & 0x80u) | (v & 0x7fu));
        w[q / 16] |= (uint32_t)l1 << (2 * (q % 16));
        esc |= (uint32_t)(l1 == ORK_TRANSIT_L1_ESC) << q;
    }
    return esc;
}

/* The same for bytes: ct[byte] = its 5-bit code, bit 5 set for an L1 escape. */
static inline uint32_t w2_group_bytes(const uint8_t *raw, uint64_t i0, unsigned m, const uint8_t ct[256], uint32_t w[5]) {
    uint32_t esc = 0;
    if (m == ORK_TRANSIT_GROUP) { /* a whole group: 8 values a code word, a u64 load each, constant shifts */
        for (unsigned h = 0; h < 4; h++) {
            uint64_t v8;
            memcpy(&v8, raw + i0 + 8 * h, 8);
            uint32_t acc = 0, hi = 0, e = 0;
            for (unsigned r = 0; r < 8; r++) {
                unsigned cd = ct[(v8 >> (8 * r)) & 0xffu];
                acc |= (uint32_t)(cd & 15u) << (4 * r);
                hi |= ((cd >> 4) & 1u) << r;
                e |= (uint32_t)(cd >> 5) << r;
            }
            w[h] = acc;
            w[4] |= hi << (8 * h);
            esc |= e << (8 * h);
        }
        return esc;
    }
    for (unsigned q = 0; q < m; q++) {
        unsigned cd = ct[raw[i0 + q]];
        w[q / 8] |= (uint32_t)(cd & 15u) << (4 * (q % 8));
        w[4] |= (uint32_t)((cd >> 4) & 1u) << q;
        esc |= (uint32_t)(cd >> 5) << q;
    }
    return esc;
}

static void w2_code_range(void *ctx, int64_t clo, int64_t chi) {
    const w2_enc *j = ctx;
    /* locals: the byte stores below may alias *j as far as the compiler knows */
    const uint8_t *raw = j->raw;
    uint8_t l1t[W2_MAX_CLASSES], l2t[W2_MAX_CLASSES], ct[256];
    for (int c = 0; c < W2_MAX_CLASSES; c++) {
        unsigned x = j->map[c];
        l1t[c] = (uint8_t)(x < ORK_TRANSIT_L1_ESC ? x : ORK_TRANSIT_L1_ESC);
        l2t[c] = (uint8_t)(x < ORK_TRANSIT_L1_ESC ? 0 : x < ORK_TRANSIT_TABLE ? x - ORK_TRANSIT_L1_ESC : ORK_TRANSIT_L2_ESC);
    }
    uint8_t l2b[256]; /* bytes: a value's L2 code straight from the byte */
    for (unsigned v = 0; v < 256; v++) {
        unsigned l1 = l1t[(v >> 2) & 31u];
        ct[v] = (uint8_t)((l1 & 1u) << 3 | (v >> 7) << 2 | (v & 3u) | (l1 >> 1) << 4 | (l1 == ORK_TRANSIT_L1_ESC) << 5);
        l2b[v] = l2t[(v >> 2) & 31u];
    }
    uint8_t *sm = j->sm, *code = j->code, *tile_l2 = j->tile_l2, *l2 = j->l2, *tile_l3 = j->tile_l3, *l3 = j->l3;
    int word = j->word;
    unsigned gw = ork_transit_group_words(word);
    uint64_t n = j->n, groups = ork_transit_groups(n), tiles = ork_transit_tiles(n);
    for (int64_t c = clo; c < chi; c++) {
        uint64_t k2 = j->l2base[c], k3 = j->l3base[c], t0 = (uint64_t)c * W2_CHUNK_TILES;
        for (uint64_t t = t0; t < t0 + W2_CHUNK_TILES && t < tiles; t++) {
            w2_st32(tile_l2 + 4 * t, (uint32_t)k2);
            w2_st32(tile_l3 + 4 * t, (uint32_t)k3);
            w2_bits b = {l2 + 4 * (3 * (k2 / 32)), 0, 0, 0};
            uint64_t n2 = 0;
            for (uint64_t g = t * ORK_TRANSIT_TILE; g < (t + 1) * ORK_TRANSIT_TILE && g < groups; g++) {
                uint32_t w[5] = {0, 0, 0, 0, 0};
                uint64_t i0 = g * ORK_TRANSIT_GROUP;
                unsigned m = i0 + ORK_TRANSIT_GROUP <= n ? ORK_TRANSIT_GROUP : (unsigned)(n - i0);
                uint32_t esc = word == 2 ? w2_group_words(raw, i0, m, l1t, sm, w) : w2_group_bytes(raw, i0, m, ct, w);
                memcpy(code + 4 * gw * g, w, 4 * gw);
                /* the escapes' L2 codes (and L3 classes), in value order */
                if (word == 1) {
                    for (; esc; esc &= esc - 1) {
                        unsigned byte = raw[i0 + ctz32(esc)], v2 = l2b[byte];
                        w2_put3(&b, v2);
                        n2++;
                        if (v2 == ORK_TRANSIT_L2_ESC) l3[k3++] = (uint8_t)((byte >> 2) & 31u);
                    }
                } else {
                    for (; esc; esc &= esc - 1) {
                        unsigned cls = w2_class_of(raw, i0 + ctz32(esc), word), v2 = l2t[cls];
                        w2_put3(&b, v2);
                        n2++;
                        if (v2 == ORK_TRANSIT_L2_ESC) l3[k3++] = (uint8_t)cls;
                    }
                }
            }
            w2_flush(&b);
            k2 += w2_up32(n2);
        }
    }
}

ork_status ork_expcode_encode(const void *raw, size_t raw_bytes, int word_bytes, void *out, size_t out_cap,
                              size_t *coded, int nthreads) {
    if (coded) *coded = 0;
    if (!out || !coded) return ORK_FAIL(ORK_E_INVALID, "transit: encode needs out and coded");
    w2_enc j;
    ork_transit_hdr h;
    ORK_TRY(w2_plan(raw, raw_bytes, word_bytes, nthreads, &j, &h));
    if (out_cap < h.coded_bytes) {
        w2_free(&j);
        return ORK_FAIL(ORK_E_INVALID, "transit: out_cap %zu below the coded size %llu", out_cap,
                        (unsigned long long)h.coded_bytes);
    }
    uint8_t *o = out;
    /* what the coding pass fills in full; the rest (header padding, gaps, the
     * sparse L2 section between tile_l2 and tile_l3) is zeroed */
    uint64_t tiles = ork_transit_tiles(h.n_values);
    const uint64_t sec[5][2] = {
        {h.sm_offset, word_bytes == 2 ? h.n_values : 0},
        {h.code_offset, 4 * (uint64_t)ork_transit_group_words(word_bytes) * ork_transit_groups(h.n_values)},
        {h.tile_l2_offset, 4 * (tiles + 1)},
        {h.tile_l3_offset, 4 * (tiles + 1)},
        {h.exc_offset, h.n_exc}};
    ork_transit_zero_gaps(o, h.coded_bytes, word_bytes == 2 ? sec : sec + 1, word_bytes == 2 ? 5 : 4);
    memcpy(o, &h, sizeof h);
    j.sm = o + h.sm_offset;
    j.code = o + h.code_offset;
    j.tile_l2 = o + h.tile_l2_offset;
    j.l2 = o + h.l2_offset;
    j.tile_l3 = o + h.tile_l3_offset;
    j.l3 = o + h.exc_offset;
    ork_par_for(nthreads, (int64_t)w2_chunks(h.n_values), 1, w2_code_range, &j);
    w2_st32(j.tile_l2 + 4 * tiles, (uint32_t)h.l2_cap);
    w2_st32(j.tile_l3 + 4 * tiles, (uint32_t)h.n_exc);
    w2_free(&j);
    *coded = (size_t)h.coded_bytes;
    return ORK_OK;
}

/* ---- header and decode ------------------------------------------------- */

ork_status ork_expcode_check(const ork_transit_hdr *h) {
    int word = ork_transit_word(h->magic);
    if (!word) return ORK_FAIL(ORK_E_FORMAT, "transit: bad magic 0x%08x", h->magic);
    if (word == 2 && (h->tail_present > 1 || h->raw_bytes != 2 * h->n_values + h->tail_present))
        return ORK_FAIL(ORK_E_FORMAT, "transit: raw_bytes %llu != 2 * n_values %llu + tail",
                        (unsigned long long)h->raw_bytes, (unsigned long long)h->n_values);
    if (word == 1 && (h->n_values != h->raw_bytes || h->tail_present))
        return ORK_FAIL(ORK_E_FORMAT, "transit: n_values %llu != raw_bytes %llu (or a tail)",
                        (unsigned long long)h->n_values, (unsigned long long)h->raw_bytes);
    uint64_t n = h->n_values, tiles = ork_transit_tiles(n);
    if (n > ORK_TRANSIT_MAX_VALUES)
        return ORK_FAIL(ORK_E_FORMAT, "transit: n_values %llu past 2^31", (unsigned long long)n);
    if (h->n_exc > n)
        return ORK_FAIL(ORK_E_FORMAT, "transit: n_exc %llu exceeds n_values %llu", (unsigned long long)h->n_exc,
                        (unsigned long long)n);
    if (h->l2_cap % 32 || h->l2_cap > n + 64 * tiles) /* codes + 31 a tile of padding, + 31 a chunk */
        return ORK_FAIL(ORK_E_FORMAT, "transit: l2_cap %llu is not a multiple of 32 up to n_values + 64 a tile",
                        (unsigned long long)h->l2_cap);
    for (int i = 0; word == 1 && i < ORK_TRANSIT_TABLE; i++)
        if (h->table[i] > 31) return ORK_FAIL(ORK_E_FORMAT, "transit: table[%d] = %u is not a 5-bit exponent", i, h->table[i]);
    uint64_t end = ORK_TRANSIT_HDR_BYTES, lim = h->coded_bytes;
    if (word == 2) ORK_TRY(ork_transit_section("sm_offset", h->sm_offset, n, lim, &end));
    ORK_TRY(ork_transit_section("code_offset", h->code_offset, 4 * ork_transit_group_words(word) * ork_transit_groups(n),
                               lim, &end));
    ORK_TRY(ork_transit_section("tile_l2_offset", h->tile_l2_offset, 4 * (tiles + 1), lim, &end));
    ORK_TRY(ork_transit_section("l2_offset", h->l2_offset, 4 * ork_transit_l2_words(h->l2_cap), lim, &end));
    ORK_TRY(ork_transit_section("tile_l3_offset", h->tile_l3_offset, 4 * (tiles + 1), lim, &end));
    ORK_TRY(ork_transit_section("exc_offset", h->exc_offset, h->n_exc, lim, &end));
    return ORK_OK;
}

typedef struct w2_dec {
    const uint8_t *sm, *code, *tile_l2, *l2, *tile_l3, *l3;
    uint8_t *out;
    uint64_t n, n_exc, l2_cap;
    int word;
    uint8_t table[16];
    uint64_t *bad; /* [chunks] 0, or 1 + the first tile whose starts or escapes do not hold */
} w2_dec;

static void w2_dec_range(void *ctx, int64_t clo, int64_t chi) {
    const w2_dec *j = ctx;
    const uint8_t *sm = j->sm, *code = j->code, *l2 = j->l2, *l3 = j->l3, *tab = j->table;
    uint8_t *out = j->out;
    int word = j->word;
    unsigned gw = ork_transit_group_words(word);
    uint64_t n = j->n, groups = ork_transit_groups(n), tiles = ork_transit_tiles(n);
    for (int64_t c = clo; c < chi; c++) {
        j->bad[c] = 0;
        for (uint64_t t = (uint64_t)c * W2_CHUNK_TILES; t < ((uint64_t)c + 1) * W2_CHUNK_TILES && t < tiles; t++) {
            uint64_t k2 = w2_ld32(j->tile_l2 + 4 * t), e2 = w2_ld32(j->tile_l2 + 4 * (t + 1));
            uint64_t k3 = w2_ld32(j->tile_l3 + 4 * t), e3 = w2_ld32(j->tile_l3 + 4 * (t + 1));
            if (k2 % 32 || k2 > e2 || e2 > j->l2_cap || k3 > e3 || e3 > j->n_exc) { j->bad[c] = 1 + t; return; }
            /* the tile's L2 codes, read a word at a time */
            const uint8_t *bw = l2 + 4 * (3 * (k2 / 32));
            uint64_t acc = 0, at = 0;
            unsigned nbits = 0;
            for (uint64_t g = t * ORK_TRANSIT_TILE; g < (t + 1) * ORK_TRANSIT_TILE && g < groups; g++) {
                uint32_t w[5];
                memcpy(w, code + 4 * gw * g, 4 * gw);
                uint64_t i0 = g * ORK_TRANSIT_GROUP;
                for (unsigned q = 0; q < ORK_TRANSIT_GROUP && i0 + q < n; q++) {
                    uint64_t i = i0 + q;
                    unsigned l1, cd = 0;
                    if (word == 2) {
                        l1 = (w[q / 16] >> (2 * (q % 16))) & 3u;
                    } else {
                        cd = (w[q / 8] >> (4 * (q % 8))) & 15u;
                        l1 = cd >> 3 | ((w[4] >> q) & 1u) << 1;
                    }
                    unsigned cls;
                    if (l1 < ORK_TRANSIT_L1_ESC) {
                        cls = tab[l1];
                    } else {
                        if (k2 >= e2) { j->bad[c] = 1 + t; return; } /* more escapes than the tile's codes */
                        k2++;
                        if (nbits < 3) {
                            acc |= (uint64_t)w2_ld32(bw + 4 * at++) << nbits;
                            nbits += 32;
                        }
                        unsigned v2 = (unsigned)(acc & 7u);
                        acc >>= 3;
                        nbits -= 3;
                        if (v2 < ORK_TRANSIT_L2_ESC) {
                            cls = tab[ORK_TRANSIT_L1_ESC + v2];
                        } else {
                            if (k3 >= e3) { j->bad[c] = 1 + t; return; } /* more L2 escapes than L3 bytes */
                            cls = l3[k3++];
                            if (word == 1 && cls > 31) { j->bad[c] = 1 + t; return; }
                        }
                    }
                    if (word == 2) {
                        unsigned s = sm[i], v = (s & 0x80u) << 8 | cls << 7 | (s & 0x7fu);
                        out[2 * i] = (uint8_t)v;
                        out[2 * i + 1] = (uint8_t)(v >> 8);
                    } else {
                        out[i] = (uint8_t)((cd & 4u) << 5 | cls << 2 | (cd & 3u));
                    }
                }
            }
            if (k3 != e3) { j->bad[c] = 1 + t; return; } /* fewer L2 escapes than L3 bytes */
        }
    }
}

ork_status ork_expcode_decode(const uint8_t *coded, const ork_transit_hdr *h, void *out, int nthreads) {
    uint64_t n = h->n_values, nc = w2_chunks(n), tiles = ork_transit_tiles(n);
    const uint8_t *tl2 = coded + h->tile_l2_offset, *tl3 = coded + h->tile_l3_offset;
    if (w2_ld32(tl2) != 0 || w2_ld32(tl2 + 4 * tiles) != h->l2_cap)
        return ORK_FAIL(ORK_E_FORMAT, "transit: tile_l2 does not run from 0 to l2_cap %llu", (unsigned long long)h->l2_cap);
    if (w2_ld32(tl3) != 0 || w2_ld32(tl3 + 4 * tiles) != h->n_exc)
        return ORK_FAIL(ORK_E_FORMAT, "transit: tile_l3 does not run from 0 to n_exc %llu", (unsigned long long)h->n_exc);
    /* bytes have no sm section and its offset is not checked: no pointer from it */
    int word = ork_transit_word(h->magic);
    w2_dec j = {.sm = word == 2 ? coded + h->sm_offset : NULL, .code = coded + h->code_offset, .tile_l2 = tl2,
                .l2 = coded + h->l2_offset,
                .tile_l3 = tl3, .l3 = coded + h->exc_offset, .out = out, .n = n, .n_exc = h->n_exc,
                .l2_cap = h->l2_cap, .word = word};
    memcpy(j.table, h->table, 16);
    j.bad = calloc(nc ? nc : 1, sizeof *j.bad);
    if (!j.bad) return ORK_FAIL(ORK_E_NOMEM, "transit: decode scratch for %llu chunks", (unsigned long long)nc);
    ork_par_for(nthreads, (int64_t)nc, 1, w2_dec_range, &j);
    ork_status st = ORK_OK;
    for (uint64_t c = 0; c < nc && st == ORK_OK; c++)
        if (j.bad[c])
            st = ORK_FAIL(ORK_E_FORMAT, "transit: tile %llu: its starts or escapes do not match tile_l2 / tile_l3 "
                          "(values %llu..)", (unsigned long long)(j.bad[c] - 1),
                          (unsigned long long)((j.bad[c] - 1) * W2_TILE_VALUES));
    free(j.bad);
    if (st == ORK_OK && h->tail_present) ((uint8_t *)out)[h->raw_bytes - 1] = h->tail;
    return st;
}
