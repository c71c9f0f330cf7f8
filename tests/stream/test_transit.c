/* tests/stream/test_transit.c — the transit coding (stream/transit/: the
 * exponent-class codes, ORK_TRANSIT_MAGIC_WORDS and ORK_TRANSIT_MAGIC_BYTES) on the CPU: round trips bit
 * for bit for both word sizes around the group, tile and chunk sizes (empty,
 * odd byte counts, partial groups), on Gaussian BF16, uniform and Gaussian
 * E5M2 weights, random words and bytes (every class: many L2 and L3 escapes)
 * and inputs of 3 classes or fewer (no L2 code at all); coded_bytes() == what
 * encode writes; the same coded bytes for 1 and 4 threads; a reference
 * decoder written from transit/format.h's text (not from exponent_code.c)
 * agreeing with the input; the ratios against the one-level codecs' recorded
 * ones (smaller on weights);
 * malformed headers naming the field, malformed tile starts and escape counts
 * refused, random corruption answered OK or ORK_E_FORMAT. */
#include "ork_test.h"
#include "transit_cpu_test.h"

#include "io/safetensors.h"
#include "stream/transit/exponent_code.h"

#include <stdint.h>



static uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ---- a reference decoder, from transit/format.h's description ----------- */

/* Value i's L1 index, and for bytes its s and m bits. */
static unsigned ref_l1(const uint8_t *c, const ork_transit_hdr *h, int word, uint64_t i, unsigned *sm) {
    uint64_t g = i / 32, j = i % 32;
    if (word == 2) {
        uint32_t w = ld32(c + h->code_offset + 8 * g + 4 * (j / 16));
        *sm = c[h->sm_offset + i];
        return (w >> (2 * (j % 16))) & 3;
    }
    uint32_t nib = (ld32(c + h->code_offset + 20 * g + 4 * (j / 8)) >> (4 * (j % 8))) & 15;
    uint32_t hi = (ld32(c + h->code_offset + 20 * g + 16) >> j) & 1;
    unsigned code5 = nib | hi << 4;
    *sm = code5 & 7; /* s << 2 | m */
    return code5 >> 3;
}

/* Decode into out; returns 0, or 1 when the buffer breaks a rule of the text. */
static int ref_decode(const uint8_t *c, const ork_transit_hdr *h, uint8_t *out) {
    int word = h->magic == ORK_TRANSIT_MAGIC_WORDS ? 2 : 1;
    uint64_t n = h->n_values, tiles = (n + 8191) / 8192;
    for (uint64_t t = 0; t < tiles; t++) {
        uint64_t k2 = ld32(c + h->tile_l2_offset + 4 * t), e2 = ld32(c + h->tile_l2_offset + 4 * t + 4);
        uint64_t k3 = ld32(c + h->tile_l3_offset + 4 * t), e3 = ld32(c + h->tile_l3_offset + 4 * t + 4);
        if (k2 % 32) return 1;
        for (uint64_t i = t * 8192; i < n && i < (t + 1) * 8192; i++) {
            unsigned sm, l1 = ref_l1(c, h, word, i, &sm), cls;
            if (l1 < 3) {
                cls = h->table[l1];
            } else {
                if (k2 >= e2) return 1;
                unsigned v = 0;
                for (int b = 0; b < 3; b++) {
                    uint64_t bit = 3 * k2 + (uint64_t)b;
                    v |= ((ld32(c + h->l2_offset + 4 * (bit / 32)) >> (bit % 32)) & 1u) << b;
                }
                k2++;
                if (v < 7) cls = h->table[3 + v];
                else {
                    if (k3 >= e3) return 1;
                    cls = c[h->exc_offset + k3++];
                }
            }
            if (word == 2) {
                unsigned w = (sm & 0x80u) << 8 | cls << 7 | (sm & 0x7fu);
                out[2 * i] = (uint8_t)w;
                out[2 * i + 1] = (uint8_t)(w >> 8);
            } else {
                out[i] = (uint8_t)((sm >> 2) << 7 | cls << 2 | (sm & 3u));
            }
        }
        if (k3 != e3) return 1;
    }
    if (h->tail_present) out[h->raw_bytes - 1] = h->tail;
    return 0;
}

/* ---- round trips -------------------------------------------------------- */

/* codec_roundtrip, then the layout rules and the reference decoder; returns
 * the coded buffer (caller frees). */
static uint8_t *roundtrip(const void *raw, size_t bytes, int word, int nthreads, size_t *coded_out) {
    ork_transit_hdr got;
    size_t n;
    uint8_t *coded = codec_roundtrip(word == 2 ? ORK_TRANSIT_WORDS : ORK_TRANSIT_BYTES, raw, bytes, nthreads, &n, &got);
    CU_ASSERT_EQUAL(got.magic, word == 2 ? ORK_TRANSIT_MAGIC_WORDS : ORK_TRANSIT_MAGIC_BYTES);
    CU_ASSERT_EQUAL(got.l2_cap % 32, 0);
    uint8_t *ref = malloc(bytes + 1);
    CU_ASSERT_FATAL(ref != NULL);
    memset(ref, 0x5A, bytes + 1);
    CU_ASSERT_EQUAL(ref_decode(coded, &got, ref), 0);
    CU_ASSERT(bytes == 0 || memcmp(ref, raw, bytes) == 0);
    /* the 4 words past the L2 codes are zero: a decoder may read them */
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(ld32(coded + got.l2_offset + 4 * (3 * (got.l2_cap / 32) + k)), 0);
    free(ref);
    *coded_out = n;
    return coded;
}

static double ratio_of(const void *raw, size_t bytes, int word, uint64_t *n_exc) {
    size_t cb;
    uint8_t *c = roundtrip(raw, bytes, word, 4, &cb);
    ork_transit_hdr h;
    CU_ASSERT_EQUAL(ork_transit_header(c, cb, &h), ORK_OK);
    if (n_exc) *n_exc = h.n_exc;
    free(c);
    return (double)cb / (double)bytes;
}

static const size_t k_sizes[] = {0, 1, 2, 3, 31, 32, 33, 63, 64, 65, 8191, 8192, 8193, 16385, 3 * 8192 + 5,
                                 262144 - 1, 262144, 262144 + 77, 2 * 262144 + 8192 * 3 + 1};

/* Round trips of the first k_sizes[i] bytes of raw (>= the largest). */
static void sizes(const char *what, const uint8_t *raw, int word) {
    for (size_t i = 0; i < sizeof k_sizes / sizeof k_sizes[0]; i++) {
        size_t cb;
        unsigned fails = CU_get_number_of_failures();
        free(roundtrip(raw, k_sizes[i], word, (int)(i % 3) + 1, &cb));
        if (CU_get_number_of_failures() != fails) printf("\n  %s, word %d: %zu bytes failed\n", what, word, k_sizes[i]);
    }
}

#define BIG (2 * 262144 + 8192 * 3 + 1)

static void test_sizes_weights(void) {
    uint16_t *w = gauss_bf16(BIG / 2 + 1, 0.02, 7);
    sizes("gaussian bf16", (const uint8_t *)w, 2);
    sizes("gaussian bf16 as bytes", (const uint8_t *)w, 1);
    free(w);
    uint8_t *q = e5m2_weights(64, BIG / 64 + 1, 0, 8), *g = e5m2_weights(64, BIG / 64 + 1, 1, 9);
    sizes("uniform e5m2", q, 1);
    sizes("gaussian e5m2", g, 1);
    sizes("uniform e5m2 as words", q, 2);
    free(q);
    free(g);
}

static void test_sizes_random_and_few_classes(void) {
    uint8_t *r = random_bytes(BIG, 11);
    sizes("random", r, 1);
    sizes("random", r, 2);
    /* 3 classes (word: exponents 120..122; byte: classes 10..12): no L2 code */
    uint8_t *f = malloc(BIG);
    CU_ASSERT_FATAL(f != NULL);
    for (size_t i = 0; i < BIG; i++) f[i] = (uint8_t)((r[i] & 0x83u) | (10 + i % 3) << 2);
    sizes("3 classes", f, 1);
    ork_transit_hdr h;
    CU_ASSERT(ork_expcode_coded_bytes(f, BIG, 1, &h) > 0);
    CU_ASSERT_EQUAL(h.n_exc, 0);
    uint16_t *w = (uint16_t *)f;
    for (size_t i = 0; i < BIG / 2; i++) w[i] = (uint16_t)((r[i] << 8 | r[i + 1]) & 0x807f) | (uint16_t)((120 + i % 3) << 7);
    sizes("3 classes", f, 2);
    memset(f, 0, BIG); /* one class */
    sizes("zeros", f, 1);
    sizes("zeros", f, 2);
    free(f);
    free(r);
}

/* Escapes at every level in the last, partial group and tile. */
static void test_escapes_at_the_end(void) {
    size_t n = 8192 + 45;
    uint8_t *b = e5m2_weights(1, n, 1, 21);
    b[n - 1] = 0x7c; /* +inf: class 31, never among the 10 most frequent */
    b[n - 2] = 0x01; /* a subnormal: class 0 */
    size_t cb;
    uint8_t *c = roundtrip(b, n, 1, 2, &cb);
    ork_transit_hdr h;
    CU_ASSERT_EQUAL(ork_transit_header(c, cb, &h), ORK_OK);
    CU_ASSERT(h.n_exc >= 2);
    CU_ASSERT_EQUAL(c[h.exc_offset + h.n_exc - 1], 31);
    free(c);
    free(b);
}

static void test_threads_identical(void) {
    size_t n = 3 * 262144 + 999;
    uint8_t *r = random_bytes(n, 5);
    uint16_t *w = gauss_bf16(n / 2, 0.05, 6);
    for (int word = 1; word <= 2; word++) {
        const uint8_t *src = word == 1 ? r : (const uint8_t *)w;
        size_t bytes = word == 1 ? n : n / 2 * 2, c1, c4;
        uint8_t *a = roundtrip(src, bytes, word, 1, &c1), *b = roundtrip(src, bytes, word, 4, &c4);
        CU_ASSERT_EQUAL(c1, c4);
        CU_ASSERT(c1 == c4 && memcmp(a, b, c1) == 0);
        free(a);
        free(b);
    }
    free(r);
    free(w);
}

static void test_refusals(void) {
    uint8_t raw[64] = {0}, out[4096];
    size_t cb = 0;
    ork_log_set_sink(sink, NULL);
    CU_ASSERT_EQUAL(ork_expcode_encode(raw, sizeof raw, 3, out, sizeof out, &cb, 1), ORK_E_INVALID);
    size_t need = ork_expcode_coded_bytes(raw, sizeof raw, 1, NULL);
    CU_ASSERT(need > 0);
    CU_ASSERT_EQUAL(ork_expcode_encode(raw, sizeof raw, 1, out, need - 1, &cb, 1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(cb, 0);
    CU_ASSERT(strstr(g_line, "out_cap") != NULL);
    CU_ASSERT_EQUAL(ork_expcode_coded_bytes(raw, sizeof raw, 0, NULL), 0);
    ork_log_set_sink(NULL, NULL);
}

/* Smaller than the one-level codecs on weights; what random bytes cost. */
static void test_ratios(void) {
    size_t n = 4 << 20;
    uint16_t *w = gauss_bf16(n / 2, 0.02, 31), *wu = malloc(n);
    CU_ASSERT_FATAL(wu != NULL);
    float *f = malloc(n * 2);
    CU_ASSERT_FATAL(f != NULL);
    ork_rng_fill_sym(35, 0, 0, f, (int64_t)(n / 2), 0.02); /* the bench's random weights: uniform */
    for (size_t i = 0; i < n / 2; i++) wu[i] = ork_f32_to_bf16(f[i]);
    free(f);
    double r16 = ratio_of(w, n, 2, NULL);
    double r16u = ratio_of(wu, n, 2, NULL);
    uint8_t *u = e5m2_weights(256, n / 256, 0, 32), *g = e5m2_weights(256, n / 256, 1, 33), *r = random_bytes(n, 34);
    uint64_t eg;
    double ru = ratio_of(u, n, 1, NULL), rg = ratio_of(g, n, 1, &eg), rr = ratio_of(r, n, 1, NULL);
    /* The one-level codecs these replaced gave 0.7505 (gaussian bf16), 0.7590
     * (uniform e5m2) and 0.7781 (gaussian e5m2) on these inputs. */
    printf("\n  exponent codes: gaussian bf16 %.4f, uniform %.4f; e5m2 uniform %.4f, gaussian %.4f (%llu L3 bytes); "
           "random bytes %.4f\n", r16, r16u, ru, rg, (unsigned long long)eg, rr);
    CU_ASSERT(r16 < 0.69 && r16 < 0.7505 - 0.05);
    CU_ASSERT(r16u < 0.68);
    CU_ASSERT(ru < 0.69 && ru < 0.7590 - 0.05);
    CU_ASSERT(rg < 0.74 && rg < 0.7781 - 0.03);
    CU_ASSERT(rr > 1.0); /* 5 bits + 3 for 7 of 8 + 8 for most: random bytes do not pay */
    free(w);
    free(wu);
    free(u);
    free(g);
    free(r);
}

/* The trained TAEF1 decoder (when ../shared has it): as BF16 and as E5M2. */
static void test_taef1(void) {
    char path[1024];
    if (!ork_test_shared("assets/taef1/taef1_decoder.safetensors", path, sizeof path)) return;
    ork_st_file *f;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(path, &f), ORK_OK);
    size_t total = 0;
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        if (t->ndim >= 2) total += (size_t)ork_st_nelements(t);
    }
    uint16_t *w = malloc(total * 2);
    uint8_t *q = malloc(total);
    CU_ASSERT_FATAL(w && q);
    size_t at = 0;
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        if (t->ndim < 2) continue;
        size_t ne = (size_t)ork_st_nelements(t), rows = (size_t)t->shape[0];
        float *x = malloc(ne * 4), *sc = malloc(rows * 4);
        CU_ASSERT_FATAL(x && sc);
        CU_ASSERT_EQUAL_FATAL(ork_st_read_f32(t, x), ORK_OK);
        for (size_t k = 0; k < ne; k++) w[at + k] = ork_f32_to_bf16(x[k]);
        CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8(t->name, x, ORK_F32, rows, ne / rows, ORK_F8_E5M2, 0, q + at, sc, NULL), ORK_OK);
        free(x);
        free(sc);
        at += ne;
    }
    double rb = ratio_of(w, total * 2, 2, NULL), r8 = ratio_of(q, total, 1, NULL);
    printf("\n  TAEF1 decoder: BF16 %.4f (the one-level codec: 0.7517), E5M2 %.4f (0.7963)\n", rb, r8);
    CU_ASSERT(rb < 0.71);
    CU_ASSERT(r8 < 0.78);
    free(w);
    free(q);
    ork_st_close(f);
}

/* ---- malformed buffers -------------------------------------------------- */


/* A valid buffer with L2 and L3 escapes in every tile: 4 tiles and a bit of
 * Gaussian weights (words with an odd tail, or E5M2 bytes), every 50th value
 * given a rare exponent (cycling through all of them: L3 escapes). */
static void bad_make(bad_buf *b, int word) {
    size_t n = 4 * 8192 + 77;
    if (word == 2) {
        uint16_t *w = gauss_bf16(n + 1, 0.02, 99);
        for (size_t i = 5; i < n; i += 50) w[i] = (uint16_t)((w[i] & 0x807f) | (i / 50 % 256) << 7); /* rare exponents */
        b->raw = 2 * n + 1;
        b->c = roundtrip(w, b->raw, 2, 1, &b->cb);
        free(w);
    } else {
        uint8_t *q = e5m2_weights(1, n, 1, 98);
        for (size_t i = 5; i < n; i += 50) q[i] = (uint8_t)((q[i] & 0x83) | (i / 50 % 32) << 2);
        b->raw = n;
        b->c = roundtrip(q, b->raw, 1, 1, &b->cb);
        free(q);
    }
    CU_ASSERT_EQUAL_FATAL(ork_transit_header(b->c, b->cb, &b->h), ORK_OK);
    CU_ASSERT_FATAL(b->h.n_exc >= 300);
    b->out = malloc(b->raw);
    CU_ASSERT_FATAL(b->out != NULL);
}



static void test_malformed_header(void) {
    for (int word = 1; word <= 2; word++) {
        bad_buf b;
        bad_make(&b, word);
        ork_log_set_sink(sink, NULL);
        ork_transit_hdr h;
        BAD("magic", h.magic ^= 0x100);
        BAD("raw_bytes", h.raw_bytes += 2);
        if (word == 2) BAD("tail", h.tail_present = 2);
        else BAD("tail", h.tail_present = 1);
        BAD("n_values", h.n_values = h.raw_bytes = (uint64_t)1 << 32);
        BAD("n_exc", h.n_exc = h.n_values + 1);
        BAD("l2_cap", h.l2_cap += 1);
        BAD("l2_cap", h.l2_cap = h.n_values + 64 * 8192);
        if (word == 1) BAD("table[4]", h.table[4] = 40);
        if (word == 2) BAD("sm_offset", h.sm_offset = 0);
        BAD("code_offset", h.code_offset = h.code_offset + 8);
        BAD("tile_l2_offset", h.tile_l2_offset = h.code_offset);
        BAD("l2_offset", h.l2_offset = h.tile_l2_offset);
        BAD("tile_l3_offset", h.tile_l3_offset = h.l2_offset + 256);
        BAD("exc_offset", h.exc_offset = UINT64_MAX & ~(uint64_t)255);
        BAD("coded_bytes", h.coded_bytes = h.exc_offset);
        BAD("coded_bytes", h.coded_bytes += 256);
        bad_set_hdr(&b, &b.h);
        expect_hdr_format(&b, b.cb - 256, "coded_bytes");
        CU_ASSERT_EQUAL(ork_transit_decode(b.c, b.cb, b.out, 2), ORK_OK); /* restored */
        ork_log_set_sink(NULL, NULL);
        bad_free(&b);
    }
}

static uint32_t get32(const bad_buf *b, uint64_t off) { return ld32(b->c + off); }
static void set32(bad_buf *b, uint64_t off, uint32_t v) { memcpy(b->c + off, &v, 4); }

/* Tile starts and escape counts that break the rules; the header alone is fine. */
static void test_malformed_tiles(void) {
    for (int word = 1; word <= 2; word++) {
        bad_buf b;
        bad_make(&b, word);
        ork_log_set_sink(sink, NULL);
        uint64_t t2 = b.h.tile_l2_offset, t3 = b.h.tile_l3_offset, tiles = 5;
        struct { uint64_t off; int64_t delta; const char *what; } cases[] = {
            {t2, 32, "tile_l2[0] not 0"},
            {t2 + 4 * tiles, -32, "tile_l2[tiles] not l2_cap"},
            {t2 + 4, 1, "tile_l2[1] not a multiple of 32"},
            {t2 + 8, -(int64_t)get32(&b, t2 + 8), "tile_l2[2] below tile_l2[1]"},
            {t2 + 4, -(int64_t)get32(&b, t2 + 4) + (int64_t)(get32(&b, t2 + 4) / 2 / 32 * 32), "tile 0 short of codes"},
            {t2 + 12, (int64_t)b.h.l2_cap, "tile_l2[3] past l2_cap"},
            {t3, 1, "tile_l3[0] not 0"},
            {t3 + 4 * tiles, -1, "tile_l3[tiles] not n_exc"},
            {t3 + 4, 1, "tile 0 one L3 byte too many"},
            {t3 + 4, -1, "tile 0 one L3 byte short"},
            {t3 + 8, (int64_t)b.h.n_exc, "tile_l3[2] past n_exc"},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            uint32_t save = get32(&b, cases[k].off);
            set32(&b, cases[k].off, (uint32_t)((int64_t)save + cases[k].delta));
            expect_decode_format_tile(&b, cases[k].what);
            set32(&b, cases[k].off, save);
        }
        if (word == 1) { /* an L3 class past 5 bits */
            uint8_t save = b.c[b.h.exc_offset];
            b.c[b.h.exc_offset] = 32;
            CU_ASSERT_EQUAL(ork_transit_decode(b.c, b.cb, b.out, 1), ORK_E_FORMAT);
            b.c[b.h.exc_offset] = save;
        }
        CU_ASSERT_EQUAL(ork_transit_decode(b.c, b.cb, b.out, 1), ORK_OK);
        ork_log_set_sink(NULL, NULL);
        bad_free(&b);
    }
}

/* 1-4 bit flips in the header, the codes and tile starts, or L2/L3: OK or
 * ORK_E_FORMAT, never a crash (the sanitizer builds see any stray access). */
static void test_corruption_fuzz(void) {
    for (int word = 1; word <= 2; word++) {
        bad_buf b;
        bad_make(&b, word);
        const size_t region[3][2] = {{0, sizeof(ork_transit_hdr)},
                                     {b.h.tile_l2_offset, b.h.l2_offset + 4 * ork_transit_l2_words(b.h.l2_cap) - b.h.tile_l2_offset},
                                     {b.h.tile_l3_offset, b.cb - b.h.tile_l3_offset}};
        printf("\n  word %d:", word);
        CU_ASSERT(corruption_fuzz(&b, 4321 + (uint64_t)word, 3000, region) > 1000);
        bad_free(&b);
    }
}

static const ork_test_case cases[] = {
    {"weights, both word sizes, ragged sizes: bit for bit, = reference decoder", test_sizes_weights},
    {"random bytes and words, 3 classes, one class: bit for bit", test_sizes_random_and_few_classes},
    {"escapes of every level in the last partial group", test_escapes_at_the_end},
    {"1 and 4 threads: the same coded bytes", test_threads_identical},
    {"bad word size, out_cap too small refused", test_refusals},
    {"ratios: below the one-level codecs' recorded ones on weights", test_ratios},
    {"the trained TAEF1 decoder's weights (when ../shared has them)", test_taef1},
    {"malformed header fields: ORK_E_FORMAT naming the field", test_malformed_header},
    {"malformed tile starts and escape counts: ORK_E_FORMAT", test_malformed_tiles},
    {"random corruption: OK or ORK_E_FORMAT, never out of bounds", test_corruption_fuzz},
    {NULL, NULL},
};

ORK_TEST_MAIN("stream_transit", NULL, NULL, cases)
