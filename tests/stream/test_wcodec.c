/* tests/stream/test_wcodec.c — the transit codec (stream/wcodec.h) on the
 * CPU: round trips bit for bit (Gaussian BF16 weights at ~0.75 of their size,
 * uniform random words that do not compress, zeros, a single word, odd byte
 * counts, ragged sizes around the chunk and section sizes, many exceptions),
 * coded_bytes() == what encode writes, the same coded bytes for 1 and 4
 * threads, an out_cap too small refused, and malformed buffers (magic, sizes,
 * offsets, exception positions; random corruption) answered ORK_E_FORMAT with
 * the bad field named, never a read or write out of bounds. Prints the
 * compression ratio and the encode / decode throughput (informative only).
 * The byte codec (FP8 E5M2, ork_wcodec8_*) likewise: round trips around the
 * group, tile and chunk sizes on quantized weights, random, repeated and
 * exception-in-the-last-group bytes, the header and coded bytes checked
 * against the format as wcodec.h writes it; ratios (uniform E5M2 < 0.77,
 * Gaussian < 0.79, random bytes > 1, the TAEF1 decoder <= 0.80 when ../shared
 * has it); malformed headers, tile_exc and escapes refused. */
#include "ork_test.h"
#include "wcodec_cpu_test.h"

#include "io/safetensors.h"

#include <stdint.h>
#include <time.h>


static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* The 16-bit codec's round trip (codec_roundtrip). Returns the coded buffer
 * (caller frees) and its size. */
static uint8_t *roundtrip(const void *raw, size_t bytes, int nthreads, size_t *coded_out) {
    ork_wcodec_hdr got;
    return codec_roundtrip(ORK_WCODEC_WORDS, raw, bytes, nthreads, coded_out, &got);
}

static void roundtrip_free(const void *raw, size_t bytes, int nthreads) {
    size_t n;
    free(roundtrip(raw, bytes, nthreads, &n));
}

static void test_gaussian_ratio(void) {
    size_t n = (1u << 20) + 37; /* several chunks, ragged */
    uint16_t *w = gauss_bf16(n, 0.02, 11);
    size_t cb;
    uint8_t *coded = roundtrip(w, n * 2, 4, &cb);
    ork_wcodec_hdr h;
    CU_ASSERT_EQUAL(ork_wcodec_header(coded, cb, &h), ORK_OK);
    double ratio = (double)cb / (double)(n * 2);
    printf("\n  gaussian bf16 (std 0.02, %zu words): coded/raw %.4f, %llu exceptions\n", n, ratio,
           (unsigned long long)h.n_exc);
    CU_ASSERT(ratio < 0.78);
    CU_ASSERT(h.n_exc < n / 1000);
    free(coded);
    free(w);
}

static void test_uniform_words(void) {
    size_t bytes = 2 * 300001;
    uint8_t *b = random_bytes(bytes, 5);
    size_t cb;
    uint8_t *coded = roundtrip(b, bytes, 2, &cb);
    printf("\n  uniform words: coded/raw %.4f\n", (double)cb / bytes);
    CU_ASSERT(cb > bytes); /* it does not shrink; the streamer then sends it raw */
    free(coded);
    free(b);
}

static void test_small_and_ragged(void) {
    uint8_t *b = random_bytes(1 << 20, 9);
    uint16_t *g = gauss_bf16((1u << 18) + 300, 0.05, 3);
    uint8_t zeros[4096] = {0};
    roundtrip_free(zeros, sizeof zeros, 1);
    roundtrip_free(zeros, 0, 1);        /* nothing at all */
    roundtrip_free(b, 1, 1);            /* the tail alone */
    roundtrip_free(b, 2, 1);            /* a single word */
    roundtrip_free(b, 3, 1);            /* a word and a tail */
    for (size_t bytes = 4; bytes < 80; bytes++) roundtrip_free(b, bytes, 1);
    const size_t words[] = {255, 256, 257, 511, 513, 1023, 4097, (1u << 18) - 1, 1u << 18, (1u << 18) + 1,
                            (1u << 18) + 299};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        roundtrip_free(g, words[k] * 2, 4);
        roundtrip_free(g, words[k] * 2 + 1, 4); /* odd: a tail byte */
        roundtrip_free(b, words[k] * 2 + 1, 4);
    }
    free(g);
    free(b);
}

/* 40 exponents in equal shares: 25 of them do not fit the table, so most
 * words are exceptions, spread over every chunk. */
static void test_many_exceptions(void) {
    size_t n = 3 * (1u << 18) + 11;
    uint16_t *w = (uint16_t *)random_bytes(n * 2, 21);
    for (size_t i = 0; i < n; i++) w[i] = (uint16_t)((w[i] & 0x807f) | ((100 + i % 40) << 7));
    size_t cb;
    uint8_t *c1 = roundtrip(w, n * 2, 1, &cb), *c4;
    ork_wcodec_hdr h;
    CU_ASSERT_EQUAL(ork_wcodec_header(c1, cb, &h), ORK_OK);
    CU_ASSERT(h.n_exc > n / 2);
    size_t cb4;
    c4 = roundtrip(w, n * 2, 4, &cb4);
    CU_ASSERT(cb == cb4 && memcmp(c1, c4, cb) == 0);
    free(c1);
    free(c4);
    free(w);
}

/* The coded bytes depend on the input alone: 1 and 4 threads, and an output
 * buffer full of garbage before encoding, give the same bytes. */
static void test_threads_identical(void) {
    size_t n = 5 * (1u << 18) + 3;
    uint16_t *w = gauss_bf16(n + 1, 0.02, 7); /* n words and a tail byte */
    for (size_t i = 0; i < n; i += 4099) w[i] = 0x7f80; /* +inf: exceptions in several chunks */
    size_t cb = ork_wcodec_coded_bytes(w, n * 2 + 1, NULL), n1, n4;
    uint8_t *a = malloc(cb), *b = malloc(cb);
    CU_ASSERT_FATAL(a && b);
    memset(a, 0x00, cb);
    memset(b, 0xEE, cb);
    CU_ASSERT_EQUAL(ork_wcodec_encode(w, n * 2 + 1, a, cb, &n1, 1), ORK_OK);
    CU_ASSERT_EQUAL(ork_wcodec_encode(w, n * 2 + 1, b, cb, &n4, 4), ORK_OK);
    CU_ASSERT(n1 == cb && n4 == cb && memcmp(a, b, cb) == 0);
    free(a);
    free(b);
    free(w);
}

static void test_out_cap(void) {
    uint16_t *w = gauss_bf16(1000, 0.02, 1);
    size_t cb = ork_wcodec_coded_bytes(w, 2000, NULL), n = 123;
    uint8_t *c = malloc(cb);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(ork_wcodec_encode(w, 2000, c, cb - 1, &n, 1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(ork_wcodec_encode(w, 2000, c, cb, &n, 1), ORK_OK);
    CU_ASSERT_EQUAL(n, cb);
    CU_ASSERT_EQUAL(ork_wcodec_encode(NULL, 2000, c, cb, &n, 1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_wcodec_encode(w, 2000, NULL, cb, &n, 1), ORK_E_INVALID);
    free(c);
    free(w);
}

/* ---- the byte codec (FP8 E5M2) ----------------------------------------- */

#define W8_CHUNK ((size_t)32 * ORK_WCODEC8_TILE * ORK_WCODEC8_GROUP) /* 262144 values */
#define W8_TILE_VALUES ((size_t)ORK_WCODEC8_TILE * ORK_WCODEC8_GROUP)

static size_t up256(size_t x) { return (x + 255) & ~(size_t)255; }

/* The table wcodec.h promises, from the bytes alone (the 7 most frequent
 * classes, ties by smaller class, unused entries repeating entry 0), and the
 * count of bytes outside it: what the header must say. */
static uint64_t ref_table8(const uint8_t *b, size_t n, uint8_t table[7]) {
    uint64_t h[32] = {0}, n_exc = 0;
    int used[32] = {0}, k = 0;
    for (size_t i = 0; i < n; i++) h[(b[i] >> 2) & 31]++;
    memset(table, 0, 7);
    for (; k < 7; k++) {
        int best = -1;
        for (int e = 31; e >= 0; e--) /* from the top: >= lets the smaller class win a tie */
            if (!used[e] && h[e] && (best < 0 || h[e] >= h[best])) best = e;
        if (best < 0) break;
        used[best] = 1;
        table[k] = (uint8_t)best;
    }
    for (int i = k; i < 7; i++) table[i] = table[0];
    for (int e = 0; e < 32; e++) n_exc += used[e] ? 0 : h[e];
    return n_exc;
}

/* Value j of group g's 3-bit index, and setting it, by the layout in
 * wcodec.h (not wcodec8.c's code): the low bit is bit 3 of nibble j % 8 of
 * word j / 8, the high two the 2-bit field j % 16 of word 4 + j / 16. */
static uint32_t w8_word(const uint8_t *code, size_t g, unsigned k) {
    uint32_t w;
    memcpy(&w, code + 24 * g + 4 * k, 4);
    return w;
}
static unsigned w8_code(const uint8_t *code, size_t g, unsigned j) {
    return (w8_word(code, g, j / 8) >> (4 * (j % 8)) & 15u) | (w8_word(code, g, 4 + j / 16) >> (2 * (j % 16)) & 3u) << 4;
}
static void w8_set_idx(uint8_t *code, size_t g, unsigned j, unsigned x) {
    uint32_t lo = w8_word(code, g, j / 8), hi = w8_word(code, g, 4 + j / 16);
    lo = (lo & ~(8u << (4 * (j % 8)))) | (x & 1u) << (4 * (j % 8) + 3);
    hi = (hi & ~(3u << (2 * (j % 16)))) | (x >> 1) << (2 * (j % 16));
    memcpy(code + 24 * g + 4 * (j / 8), &lo, 4);
    memcpy(code + 24 * g + 4 * (4 + j / 16), &hi, 4);
}

/* Decode by the letter of wcodec.h, as a second reading of the format: the
 * k-th escape overall takes exc[k], and tile_exc[t] counts the escapes before
 * tile t. Returns the number of disagreements with raw. */
static size_t ref_decode8(const uint8_t *c, const ork_wcodec_hdr *h, const uint8_t *raw) {
    size_t n = h->raw_bytes, groups = (n + 31) / 32, tiles = (groups + ORK_WCODEC8_TILE - 1) / ORK_WCODEC8_TILE;
    size_t bad = 0, k = 0;
    for (size_t i = 0; i < groups * 32; i++) {
        if (i % W8_TILE_VALUES == 0) {
            uint32_t te;
            memcpy(&te, c + h->tile_exc_offset + 4 * (i / W8_TILE_VALUES), 4);
            bad += te != k;
        }
        unsigned cd = w8_code(c + h->code_offset, i / 32, i % 32), x = cd >> 3, v;
        if (x != ORK_WCODEC8_ESC) v = (cd & 4u) << 5 | (unsigned)h->table[x] << 2 | (cd & 3u);
        else if (k < h->n_exc) v = c[h->exc_offset + k++];
        else v = 0x100u, k++; /* more escapes than exceptions: no byte to read */
        if (i < n) bad += v != raw[i];
        else bad += cd != 0; /* padding: code 0 */
    }
    uint32_t last;
    memcpy(&last, c + h->tile_exc_offset + 4 * tiles, 4);
    return bad + (last != k) + (k != h->n_exc);
}

/* roundtrip() for the byte codec, with the header checked against the bytes
 * (table, exception count, sections in order) and the coded bytes against
 * ref_decode8. */
static uint8_t *roundtrip8(const uint8_t *raw, size_t n, int nthreads, size_t *coded_out) {
    ork_wcodec_hdr got;
    size_t cb;
    uint8_t *coded = codec_roundtrip(ORK_WCODEC_BYTES, raw, n, nthreads, &cb, &got);
    CU_ASSERT_EQUAL(got.magic, ORK_WCODEC_MAGIC8);
    CU_ASSERT(got.raw_bytes == n && got.n_words == n && got.tail_present == 0);
    uint8_t table[7];
    uint64_t n_exc = ref_table8(raw, n, table);
    if (got.n_exc != n_exc || memcmp(got.table, table, 7) != 0)
        printf("\n  %zu bytes: n_exc %llu (want %llu), table %u %u %u.. (want %u %u %u..)\n", n,
               (unsigned long long)got.n_exc, (unsigned long long)n_exc, got.table[0], got.table[1], got.table[2],
               table[0], table[1], table[2]);
    CU_ASSERT_EQUAL(got.n_exc, n_exc);
    CU_ASSERT(memcmp(got.table, table, 7) == 0);
    /* 6 bits a value, a u32 a tile and a byte an exception, 256-aligned: nothing else */
    size_t groups = (n + 31) / 32, tiles = (groups + ORK_WCODEC8_TILE - 1) / ORK_WCODEC8_TILE;
    CU_ASSERT_EQUAL(cb, up256(up256(up256(ORK_WCODEC_HDR_BYTES + 24 * groups) + 4 * (tiles + 1)) + n_exc));
    size_t bad = ref_decode8(coded, &got, raw);
    if (bad) printf("\n  %zu bytes: %zu disagreements with the format as documented\n", n, bad);
    CU_ASSERT_EQUAL(bad, 0);
    *coded_out = cb;
    return coded;
}

static double ratio8(const uint8_t *raw, size_t n, uint64_t *n_exc) {
    size_t cb;
    uint8_t *c = roundtrip8(raw, n, 4, &cb);
    ork_wcodec_hdr h;
    CU_ASSERT_EQUAL(ork_wcodec_header(c, cb, &h), ORK_OK);
    if (n_exc) *n_exc = h.n_exc;
    free(c);
    return (double)cb / (double)n;
}

/* Around the group (32), tile (8192) and chunk (262144) sizes. */
static const size_t k_sizes8[] = {0,      1,      31,     32,     33,     8191,          8192,
                                  8193,   262143, 262144, 262145, 3 * 262144 + 77};
#define N_SIZES8 (sizeof k_sizes8 / sizeof k_sizes8[0])
#define MAX_SIZE8 (3 * 262144 + 77)

static void roundtrip8_sizes(const char *what, const uint8_t *raw, int nthreads) {
    for (size_t s = 0; s < N_SIZES8; s++) {
        size_t cb;
        unsigned f0 = CU_get_number_of_failures();
        free(roundtrip8(raw, k_sizes8[s], nthreads, &cb));
        if (CU_get_number_of_failures() != f0) printf("\n  ^ %s, %zu bytes\n", what, k_sizes8[s]);
    }
}

static void test8_sizes_e5m2(void) {
    uint8_t *u = e5m2_weights(769, 1024, 0, 3), *g = e5m2_weights(769, 1024, 1, 4); /* >= MAX_SIZE8 */
    roundtrip8_sizes("uniform e5m2", u, 4);
    roundtrip8_sizes("gaussian e5m2", g, 1);
    free(u);
    free(g);
}

static void test8_sizes_random_and_constant(void) {
    uint8_t *b = random_bytes(MAX_SIZE8, 13), *c = malloc(MAX_SIZE8);
    CU_ASSERT_FATAL(c != NULL);
    roundtrip8_sizes("random bytes", b, 4);
    const uint8_t one[] = {0x00, 0x3c, 0xff}; /* zero, 1.0, NaN */
    for (int k = 0; k < 3; k++) {
        memset(c, one[k], MAX_SIZE8);
        roundtrip8_sizes("one byte repeated", c, 2);
        ork_wcodec_hdr h;
        CU_ASSERT(ork_wcodec8_coded_bytes(c, MAX_SIZE8, &h) > 0 && h.n_exc == 0);
    }
    free(b);
    free(c);
}

/* Seven classes everywhere, and a class outside the table at the first and
 * the last value of the last (usually partial) group: the encoder's ragged
 * tail path escapes, and the decoder finds the exceptions after the padding's
 * non-escapes. */
static void test8_exception_in_last_group(void) {
    uint8_t *b = e5m2_seven_classes(MAX_SIZE8);
    for (size_t s = 0; s < N_SIZES8; s++) {
        size_t n = k_sizes8[s], cb;
        if (!n) continue;
        uint8_t *d = malloc(n);
        CU_ASSERT_FATAL(d != NULL);
        memcpy(d, b, n);
        d[(n - 1) / 32 * 32] = 0x81; /* class 0, negative */
        d[n - 1] = 0x7d;             /* class 31 (NaN) */
        uint8_t *c = roundtrip8(d, n, 3, &cb);
        ork_wcodec_hdr h;
        CU_ASSERT_EQUAL(ork_wcodec_header(c, cb, &h), ORK_OK);
        if (n >= 16) CU_ASSERT_EQUAL(h.n_exc, (n - 1) / 32 * 32 == n - 1 ? 1 : 2);
        free(c);
        free(d);
    }
    free(b);
}

static void test8_ratio(void) {
    size_t rows = 1024, cols = 1024, n = rows * cols;
    uint8_t *u = e5m2_weights(rows, cols, 0, 5), *g = e5m2_weights(rows, cols, 1, 6), *b = random_bytes(n, 7);
    uint64_t eu, eg, eb;
    double ru = ratio8(u, n, &eu), rg = ratio8(g, n, &eg), rb = ratio8(b, n, &eb);
    printf("\n  e5m2 %zux%zu, coded/raw: uniform weights %.4f (%.2f%% exceptions), gaussian %.4f (%.2f%%); random "
           "bytes %.4f (%.2f%%)\n",
           rows, cols, ru, 100.0 * eu / n, rg, 100.0 * eg / n, rb, 100.0 * eb / n);
    CU_ASSERT(ru < 0.77);
    CU_ASSERT(rg < 0.79);
    CU_ASSERT(rb > 1.0); /* does not shrink: the streamer sends it raw */
    free(u);
    free(g);
    free(b);
}

/* 1 and 4 threads, output buffers of different garbage: the same bytes. */
static void test8_threads_identical(void) {
    size_t n = 5 * W8_CHUNK + 3;
    uint8_t *w = e5m2_weights(1, n, 1, 8);
    for (size_t i = 0; i < n; i += 40009) w[i] = 0xff; /* NaN: exceptions in every chunk */
    size_t cb = ork_wcodec8_coded_bytes(w, n, NULL), n1 = 0, n4 = 0;
    uint8_t *a = malloc(cb), *b = malloc(cb);
    CU_ASSERT_FATAL(a && b);
    memset(a, 0x00, cb);
    memset(b, 0xEE, cb);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(w, n, a, cb, &n1, 1), ORK_OK);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(w, n, b, cb, &n4, 4), ORK_OK);
    CU_ASSERT(n1 == cb && n4 == cb && memcmp(a, b, cb) == 0);
    free(a);
    free(b);
    free(w);
}

static void test8_out_cap(void) {
    uint8_t *w = e5m2_weights(10, 100, 1, 9);
    size_t cb = ork_wcodec8_coded_bytes(w, 1000, NULL), n = 123;
    uint8_t *c = malloc(cb);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(w, 1000, c, cb - 1, &n, 1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(w, 1000, c, cb, &n, 1), ORK_OK);
    CU_ASSERT_EQUAL(n, cb);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(NULL, 1000, c, cb, &n, 1), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_wcodec8_encode(w, 1000, NULL, cb, &n, 1), ORK_E_INVALID);
    free(c);
    free(w);
}

/* A trained network's weights: every >= 2-D tensor of the TAEF1 decoder,
 * quantized per row (rows = shape[0]) to E5M2, coded as one region. */
static void test8_taef1(void) {
    char path[1024];
    if (!ork_test_shared("assets/taef1/taef1_decoder.safetensors", path, sizeof path)) return;
    ork_st_file *f = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_st_open(path, &f), ORK_OK);
    size_t total = 0, used = 0, nt = 0;
    for (size_t i = 0; i < ork_st_count(f); i++)
        if (ork_st_at(f, i)->ndim >= 2) total += ork_st_nelements(ork_st_at(f, i));
    uint8_t *q = malloc(total ? total : 1);
    CU_ASSERT_FATAL(q != NULL);
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        if (t->ndim < 2) continue;
        size_t ne = ork_st_nelements(t), rows = (size_t)t->shape[0];
        float *w = malloc(ne * 4), *s = malloc(rows * 4);
        CU_ASSERT_FATAL(w && s);
        CU_ASSERT_EQUAL_FATAL(ork_st_read_f32(t, w), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8(t->name, w, ORK_F32, rows, ne / rows, ORK_F8_E5M2, 0, q + used, s, NULL),
                              ORK_OK);
        used += ne;
        nt++;
        free(w);
        free(s);
    }
    CU_ASSERT_EQUAL(used, total);
    uint64_t n_exc;
    double r = ratio8(q, total, &n_exc);
    printf("\n  taef1 decoder, %zu tensors, %zu e5m2 bytes: coded/raw %.4f (%.2f%% exceptions)\n", nt, total, r,
           100.0 * n_exc / total);
    CU_ASSERT(total > 1000000);
    CU_ASSERT(r <= 0.80);
    free(q);
    ork_st_close(f);
}

/* ---- malformed buffers ------------------------------------------------- */


/* A valid coded buffer with exceptions (every 97th word +inf) to corrupt. */
static void bad_make(bad_buf *b) {
    size_t n = 5000;
    uint16_t *w = gauss_bf16(n + 1, 0.02, 99); /* n words and a tail byte */
    for (size_t i = 5; i < n; i += 97) w[i] = 0x7f80;
    b->raw = n * 2 + 1;
    b->c = roundtrip(w, b->raw, 1, &b->cb);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_header(b->c, b->cb, &b->h), ORK_OK);
    CU_ASSERT_FATAL(b->h.n_exc >= 4);
    b->out = malloc(b->raw);
    CU_ASSERT_FATAL(b->out != NULL);
    free(w);
}


static uint32_t bad_pos(const bad_buf *b, uint64_t k) {
    uint32_t p;
    memcpy(&p, b->c + b->h.exc_pos_offset + 4 * k, 4);
    return p;
}
static void bad_set_pos(bad_buf *b, uint64_t k, uint32_t p) { memcpy(b->c + b->h.exc_pos_offset + 4 * k, &p, 4); }


static void test_malformed_header(void) {
    bad_buf b;
    bad_make(&b);
    ork_log_set_sink(sink, NULL);
    ork_wcodec_hdr h;
    BAD("magic", h.magic ^= 1);
    BAD("tail_present", h.tail_present = 2);
    BAD("raw_bytes", h.raw_bytes += 2);
    BAD("raw_bytes", h.tail_present = 0);
    BAD("n_words", h.n_words = (uint64_t)UINT32_MAX + 2);
    BAD("n_exc", h.n_exc = h.n_words + 1);
    BAD("sm_offset", h.sm_offset = 0);                               /* overlaps the header */
    BAD("sm_offset", h.sm_offset = 300);                             /* not aligned */
    BAD("idx_offset", h.idx_offset = h.sm_offset + 256);             /* overlaps sm */
    BAD("exc_pos_offset", h.exc_pos_offset = h.idx_offset);
    BAD("exc_e_offset", h.exc_e_offset = h.exc_pos_offset + 4 * h.n_exc - 256 * (4 * h.n_exc > 256));
    BAD("exc_e_offset", h.exc_e_offset = UINT64_MAX & ~(uint64_t)255); /* past everything, overflowing */
    BAD("coded_bytes", h.coded_bytes = h.exc_e_offset);              /* ends inside the last section */
    BAD("coded_bytes", h.coded_bytes += 256);                        /* more than the buffer holds */
    bad_set_hdr(&b, &b.h);
    expect_hdr_format(&b, b.cb - 256, "coded_bytes"); /* truncated */
    expect_hdr_format(&b, 100, "coded_bytes");        /* shorter than the header */
    CU_ASSERT_EQUAL(ork_wcodec_decode(b.c, b.cb, b.out, 2), ORK_OK); /* restored */
    CU_ASSERT_EQUAL(ork_wcodec_header(b.c, b.cb + 512, &h), ORK_OK); /* a larger buffer is fine */
    ork_log_set_sink(NULL, NULL);
    bad_free(&b);
}

static void test_malformed_exceptions(void) {
    bad_buf b;
    bad_make(&b);
    ork_log_set_sink(sink, NULL);
    uint64_t k = b.h.n_exc / 2;
    uint32_t p0 = bad_pos(&b, k), p1 = bad_pos(&b, k + 1);
    struct { uint64_t k; uint32_t p; uint64_t k2; uint32_t p2; const char *what; } cases[] = {
        {b.h.n_exc - 1, (uint32_t)b.h.n_words, 0, 0, "past n_words"},
        {b.h.n_exc - 1, UINT32_MAX, 0, 0, "far past n_words"},
        {k, p1, k + 1, p0, "swapped"},
        {k + 1, p0, 0, 0, "duplicate"},
        {k, p0 + 1, 0, 0, "not at an escape"},
        {0, UINT32_MAX, 0, 0, "first one huge"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t save = bad_pos(&b, cases[c].k), save2 = bad_pos(&b, cases[c].k2);
        bad_set_pos(&b, cases[c].k, cases[c].p);
        if (cases[c].k2) bad_set_pos(&b, cases[c].k2, cases[c].p2);
        ork_wcodec_hdr h;
        CU_ASSERT_EQUAL(ork_wcodec_header(b.c, b.cb, &h), ORK_OK); /* the header alone is fine */
        g_line[0] = 0;
        ork_status st = ork_wcodec_decode(b.c, b.cb, b.out, 2);
        if (st != ORK_E_FORMAT) printf("\n  %s: status %d\n", cases[c].what, st);
        CU_ASSERT_EQUAL(st, ORK_E_FORMAT);
        CU_ASSERT(strstr(g_line, "exception") != NULL || strstr(g_line, "n_exc") != NULL);
        bad_set_pos(&b, cases[c].k, save);
        if (cases[c].k2) bad_set_pos(&b, cases[c].k2, save2);
    }
    /* One exception fewer than there are escapes (the last dropped, layout
     * still consistent): the counts disagree. */
    ork_wcodec_hdr h = b.h;
    h.n_exc--;
    bad_set_hdr(&b, &h);
    g_line[0] = 0;
    CU_ASSERT_EQUAL(ork_wcodec_decode(b.c, b.cb, b.out, 1), ORK_E_FORMAT);
    CU_ASSERT(strstr(g_line, "n_exc") != NULL);
    bad_set_hdr(&b, &b.h);
    CU_ASSERT_EQUAL(ork_wcodec_decode(b.c, b.cb, b.out, 1), ORK_OK);
    ork_log_set_sink(NULL, NULL);
    bad_free(&b);
}


/* Random corruption of header, idx and exceptions. */
static void test_corruption_fuzz(void) {
    bad_buf b;
    bad_make(&b);
    const size_t region[3][2] = {{0, 96}, /* the header's fields */
                                 {b.h.idx_offset, b.h.n_words / 2 + 1},
                                 {b.h.exc_pos_offset, b.cb - b.h.exc_pos_offset}};
    CU_ASSERT(corruption_fuzz(&b, 1234, 3000, region) > 1000);
    bad_free(&b);
}

/* ---- the byte codec's malformed buffers -------------------------------- */

/* A valid byte-codec buffer to corrupt: 3 whole tiles and a partial one of
 * Gaussian E5M2 (a few percent exceptions in every tile). */
static void bad_make8(bad_buf *b) {
    b->raw = 3 * W8_TILE_VALUES + 100;
    uint8_t *w = e5m2_weights(1, b->raw, 1, 98);
    b->c = roundtrip8(w, b->raw, 1, &b->cb);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_header(b->c, b->cb, &b->h), ORK_OK);
    CU_ASSERT_FATAL(b->h.n_exc >= 40);
    b->out = malloc(b->raw);
    CU_ASSERT_FATAL(b->out != NULL);
    free(w);
}

static uint32_t tile_exc(const bad_buf *b, size_t t) {
    uint32_t v;
    memcpy(&v, b->c + b->h.tile_exc_offset + 4 * t, 4);
    return v;
}
static void set_tile_exc(bad_buf *b, size_t t, uint32_t v) { memcpy(b->c + b->h.tile_exc_offset + 4 * t, &v, 4); }

static void test8_malformed_header(void) {
    bad_buf b;
    bad_make8(&b);
    CU_ASSERT_EQUAL_FATAL(b.h.magic, ORK_WCODEC_MAGIC8);
    ork_log_set_sink(sink, NULL);
    ork_wcodec_hdr h;
    BAD("magic", h.magic = ORK_WCODEC_MAGIC8 ^ 0x100);
    BAD("table", h.table[6] = 32);
    BAD("table", h.table[0] = 0xff);
    BAD("code_offset", h.code_offset += 8);                          /* not aligned */
    BAD("code_offset", h.code_offset = 0);                           /* overlaps the header */
    BAD("tile_exc_offset", h.tile_exc_offset = h.code_offset);       /* overlaps code */
    BAD("tile_exc_offset", h.tile_exc_offset -= 256);                /* inside code's last bytes */
    BAD("exc_offset", h.exc_offset = h.tile_exc_offset);             /* overlaps tile_exc */
    BAD("exc_offset", h.exc_offset = h.coded_bytes);                 /* runs past coded_bytes */
    BAD("exc_offset", h.exc_offset = UINT64_MAX & ~(uint64_t)255);   /* past everything, overflowing */
    BAD("n_exc", h.n_exc = h.n_words + 1);
    BAD("n_words", h.n_words = h.raw_bytes + 1);
    BAD("n_words", h.n_words = h.raw_bytes - 1);
    BAD("raw_bytes", h.raw_bytes = h.n_words = (uint64_t)UINT32_MAX + 1); /* past the u32 counts */
    BAD("tail", h.tail_present = 1);                                 /* no tail in this codec */
    BAD("coded_bytes", h.coded_bytes += 256);                        /* more than the buffer holds */
    bad_set_hdr(&b, &b.h);
    expect_hdr_format(&b, b.cb - 256, "coded_bytes"); /* truncated */
    expect_hdr_format(&b, 255, "coded_bytes");        /* shorter than the header */
    CU_ASSERT_EQUAL(ork_wcodec_decode(b.c, b.cb, b.out, 2), ORK_OK); /* restored */
    ork_log_set_sink(NULL, NULL);
    bad_free(&b);
}


static void test8_malformed_tiles(void) {
    bad_buf b;
    bad_make8(&b);
    ork_log_set_sink(sink, NULL);
    size_t tiles = 4;
    uint32_t t1 = tile_exc(&b, 1), t2 = tile_exc(&b, 2), n_exc = (uint32_t)b.h.n_exc;
    CU_ASSERT_FATAL(0 < t1 && t1 < t2 && t2 < tile_exc(&b, 3) && tile_exc(&b, tiles) == n_exc);
    struct { size_t t; uint32_t v; const char *what; } cases[] = {
        {0, 1, "tile_exc[0] != 0"},
        {tiles, n_exc - 1, "last tile_exc below n_exc"},
        {tiles, n_exc + 1, "last tile_exc past n_exc"},
        {2, t1 - 1, "tile_exc decreasing"},
        {1, n_exc + 5, "tile_exc past n_exc"},
        {1, UINT32_MAX, "tile_exc huge"},
        {1, t1 - 1, "tile 0: more escapes than exceptions"},
        {1, t1 + 1, "tile 0: fewer escapes than exceptions"},
        {3, tile_exc(&b, 3) + 1, "tile 2 one short, tile 3 one over"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t save = tile_exc(&b, cases[c].t);
        set_tile_exc(&b, cases[c].t, cases[c].v);
        expect_decode_format_tile(&b, cases[c].what);
        set_tile_exc(&b, cases[c].t, save);
    }
    /* Every tile_exc and n_exc one more (the exception section has room in
     * its padding): consistent tile by tile, but exc[0] belongs to no tile. */
    CU_ASSERT_FATAL(b.h.exc_offset + b.h.n_exc < b.h.coded_bytes);
    ork_wcodec_hdr h = b.h;
    h.n_exc++;
    bad_set_hdr(&b, &h);
    for (size_t t = 0; t <= tiles; t++) set_tile_exc(&b, t, tile_exc(&b, t) + 1);
    expect_decode_format_tile(&b, "tile_exc all shifted by one");
    for (size_t t = 0; t <= tiles; t++) set_tile_exc(&b, t, tile_exc(&b, t) - 1);
    bad_set_hdr(&b, &b.h);
    /* The codes alone: one value of tile 1 turned into an escape (or an escape
     * into a table index), tile_exc untouched. */
    uint8_t *code = b.c + b.h.code_offset;
    size_t g_esc = 0, g_val = 0;
    unsigned j_esc = 0, j_val = 0;
    int have_esc = 0, have_val = 0;
    for (size_t g = ORK_WCODEC8_TILE; g < 2 * ORK_WCODEC8_TILE && !(have_esc && have_val); g++)
        for (unsigned j = 0; j < 32; j++) {
            int esc = w8_code(code, g, j) >> 3 == ORK_WCODEC8_ESC;
            if (esc && !have_esc) g_esc = g, j_esc = j, have_esc = 1;
            if (!esc && !have_val) g_val = g, j_val = j, have_val = 1;
        }
    CU_ASSERT_FATAL(have_esc && have_val);
    unsigned x_val = w8_code(code, g_val, j_val) >> 3;
    w8_set_idx(code, g_val, j_val, ORK_WCODEC8_ESC);
    expect_decode_format_tile(&b, "tile 1: an escape more");
    w8_set_idx(code, g_val, j_val, x_val);
    w8_set_idx(code, g_esc, j_esc, 0);
    expect_decode_format_tile(&b, "tile 1: an escape fewer");
    w8_set_idx(code, g_esc, j_esc, ORK_WCODEC8_ESC);
    /* An escape in the last group's padding is an escape too: one more than
     * the last tile's exceptions. */
    size_t last_g = (b.raw + 31) / 32 - 1;
    w8_set_idx(code, last_g, 31, ORK_WCODEC8_ESC);
    expect_decode_format_tile(&b, "an escape in the padding");
    w8_set_idx(code, last_g, 31, 0);
    CU_ASSERT_EQUAL(ork_wcodec_decode(b.c, b.cb, b.out, 2), ORK_OK); /* restored */
    ork_log_set_sink(NULL, NULL);
    bad_free(&b);
}

/* Random corruption of header, code, tile_exc and exceptions: OK or
 * ORK_E_FORMAT, never a crash or an access out of bounds. */
static void test8_corruption_fuzz(void) {
    bad_buf b;
    bad_make8(&b);
    const size_t region[3][2] = {{0, sizeof(ork_wcodec_hdr)},
                                 {b.h.code_offset, b.h.tile_exc_offset - b.h.code_offset},
                                 {b.h.tile_exc_offset, b.cb - b.h.tile_exc_offset}};
    CU_ASSERT(corruption_fuzz(&b, 4321, 2000, region) > 500);
    bad_free(&b);
}

static void test_throughput(void) {
    size_t n = (size_t)16 << 20; /* 32 MiB of bf16 */
    uint16_t *w = gauss_bf16(n, 0.02, 42);
    size_t cap = ork_wcodec_coded_bytes(w, n * 2, NULL), cb;
    uint8_t *c = malloc(cap), *out = malloc(n * 2);
    CU_ASSERT_FATAL(c && out);
    const int threads[] = {1, 4, 16};
    printf("\n");
    for (int t = 0; t < 3; t++) {
        double best_e = 1e9, best_d = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_s();
            CU_ASSERT_EQUAL_FATAL(ork_wcodec_encode(w, n * 2, c, cap, &cb, threads[t]), ORK_OK);
            double t1 = now_s();
            CU_ASSERT_EQUAL_FATAL(ork_wcodec_decode(c, cb, out, threads[t]), ORK_OK);
            double t2 = now_s();
            if (t1 - t0 < best_e) best_e = t1 - t0;
            if (t2 - t1 < best_d) best_d = t2 - t1;
        }
        CU_ASSERT(memcmp(out, w, n * 2) == 0);
        printf("  %d thread(s), %zu MiB: encode %.2f GB/s, decode %.2f GB/s (raw bytes)\n", threads[t], n * 2 >> 20,
               n * 2 / best_e * 1e-9, n * 2 / best_d * 1e-9);
    }
    free(c);
    free(out);
    free(w);
}

static const ork_test_case cases[] = {
    {"gaussian bf16: bit-exact, ratio < 0.78", test_gaussian_ratio},
    {"uniform random words: bit-exact", test_uniform_words},
    {"zeros, empty, tail only, ragged sizes", test_small_and_ragged},
    {"many exceptions, 1 and 4 threads", test_many_exceptions},
    {"1 and 4 threads: the same coded bytes", test_threads_identical},
    {"out_cap too small refused", test_out_cap},
    {"malformed header fields: ORK_E_FORMAT naming the field", test_malformed_header},
    {"malformed exceptions: ORK_E_FORMAT", test_malformed_exceptions},
    {"random corruption: OK or ORK_E_FORMAT, never out of bounds", test_corruption_fuzz},
    {"throughput (informative)", test_throughput},
    {"byte codec: e5m2 weights, ragged sizes, bit for bit, as documented", test8_sizes_e5m2},
    {"byte codec: random and repeated bytes, ragged sizes", test8_sizes_random_and_constant},
    {"byte codec: an exception in the last, partial group", test8_exception_in_last_group},
    {"byte codec: e5m2 < 0.77 uniform, < 0.79 gaussian; random bytes > 1", test8_ratio},
    {"byte codec: 1 and 4 threads, the same coded bytes", test8_threads_identical},
    {"byte codec: out_cap too small refused", test8_out_cap},
    {"byte codec: taef1 decoder in e5m2 <= 0.80 (shared asset)", test8_taef1},
    {"byte codec: malformed header fields: ORK_E_FORMAT naming the field", test8_malformed_header},
    {"byte codec: tile_exc and escapes that disagree: ORK_E_FORMAT", test8_malformed_tiles},
    {"byte codec: random corruption: OK or ORK_E_FORMAT, never out of bounds", test8_corruption_fuzz},
    {NULL, NULL},
};

ORK_TEST_MAIN("stream_wcodec", NULL, NULL, cases)
