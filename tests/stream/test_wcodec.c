/* tests/stream/test_wcodec.c — the transit codec (stream/wcodec.h) on the
 * CPU: round trips bit for bit (Gaussian BF16 weights at ~0.75 of their size,
 * uniform random words that do not compress, zeros, a single word, odd byte
 * counts, ragged sizes around the chunk and section sizes, many exceptions),
 * coded_bytes() == what encode writes, the same coded bytes for 1 and 4
 * threads, an out_cap too small refused, and malformed buffers (magic, sizes,
 * offsets, exception positions; random corruption) answered ORK_E_FORMAT with
 * the bad field named, never a read or write out of bounds. Prints the
 * compression ratio and the encode / decode throughput (informative only). */
#include "ork_test.h"
#include "wcodec_test.h"

#include "stream/wcodec.h"
#include "util/log.h"

#include <stdint.h>
#include <time.h>

/* The last error line, to check that a refusal names the bad field. */
static char g_line[512];
static void sink(ork_log_level lvl, const char *line, void *user) {
    if (lvl >= ORK_LOG_ERROR) snprintf(g_line, sizeof g_line, "%s", line);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t *random_bytes(size_t n, uint64_t seed) {
    uint8_t *b = malloc(n ? n : 1);
    CU_ASSERT_FATAL(b != NULL);
    ork_rng r;
    ork_rng_init(&r, seed, 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)ork_rng_u32(&r);
    return b;
}

/* Encode raw (nthreads), check the size against coded_bytes() and the header,
 * decode into a buffer with a guard byte past its end, compare. Returns the
 * coded buffer (caller frees) and its size. */
static uint8_t *roundtrip(const void *raw, size_t bytes, int nthreads, size_t *coded_out) {
    ork_wcodec_hdr want, got;
    size_t cb = ork_wcodec_coded_bytes(raw, bytes, &want);
    CU_ASSERT_FATAL(cb >= ORK_WCODEC_HDR_BYTES && cb % 256 == 0);
    uint8_t *coded = malloc(cb), *out = malloc(bytes + 1);
    CU_ASSERT_FATAL(coded && out);
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_encode(raw, bytes, coded, cb, &n, nthreads), ORK_OK);
    CU_ASSERT_EQUAL(n, cb);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_header(coded, n, &got), ORK_OK);
    CU_ASSERT(memcmp(&want, &got, sizeof want) == 0);
    CU_ASSERT_EQUAL(got.raw_bytes, bytes);
    out[bytes] = 0xA5;
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_decode(coded, n, out, nthreads), ORK_OK);
    CU_ASSERT(bytes == 0 || memcmp(out, raw, bytes) == 0);
    CU_ASSERT_EQUAL(out[bytes], 0xA5);
    free(out);
    *coded_out = n;
    return coded;
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

/* ---- malformed buffers ------------------------------------------------- */

typedef struct bad_buf {
    uint8_t *c;
    size_t cb, raw;
    ork_wcodec_hdr h;
    uint8_t *out;
} bad_buf;

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

static void bad_set_hdr(bad_buf *b, const ork_wcodec_hdr *h) { memcpy(b->c, h, sizeof *h); }

static uint32_t bad_pos(const bad_buf *b, uint64_t k) {
    uint32_t p;
    memcpy(&p, b->c + b->h.exc_pos_offset + 4 * k, 4);
    return p;
}
static void bad_set_pos(bad_buf *b, uint64_t k, uint32_t p) { memcpy(b->c + b->h.exc_pos_offset + 4 * k, &p, 4); }

/* Both the header read and the decode refuse with ORK_E_FORMAT, the header's
 * line naming field. */
static void expect_hdr_format(const bad_buf *b, size_t cb, const char *field) {
    ork_wcodec_hdr h;
    g_line[0] = 0;
    CU_ASSERT_EQUAL(ork_wcodec_header(b->c, cb, &h), ORK_E_FORMAT);
    if (!strstr(g_line, field)) printf("\n  expected '%s' in: %s\n", field, g_line);
    CU_ASSERT(strstr(g_line, field) != NULL);
    CU_ASSERT_EQUAL(ork_wcodec_decode(b->c, cb, b->out, 2), ORK_E_FORMAT);
}

static void test_malformed_header(void) {
    bad_buf b;
    bad_make(&b);
    ork_log_set_sink(sink, NULL);
    ork_wcodec_hdr h;
#define BAD(field, stmt)          \
    do {                          \
        h = b.h;                  \
        stmt;                     \
        bad_set_hdr(&b, &h);      \
        expect_hdr_format(&b, b.cb, field); \
    } while (0)
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
#undef BAD
    ork_log_set_sink(NULL, NULL);
    free(b.c);
    free(b.out);
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
    free(b.c);
    free(b.out);
}

/* Random corruption of header, idx and exceptions: OK or ORK_E_FORMAT, never
 * a crash or an access out of bounds (the sanitizer builds would see one). */
static void test_corruption_fuzz(void) {
    bad_buf b;
    bad_make(&b);
    uint8_t *orig = malloc(b.cb);
    CU_ASSERT_FATAL(orig != NULL);
    memcpy(orig, b.c, b.cb);
    ork_log_level lvl = ork_log_get_level();
    ork_log_set_level((ork_log_level)(ORK_LOG_ERROR + 1)); /* thousands of refusals: keep stderr quiet */
    ork_rng r;
    ork_rng_init(&r, 1234, 2);
    int n_ok = 0, n_fmt = 0, n_other = 0, n_size = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(b.c, orig, b.cb);
        int flips = 1 + (int)(ork_rng_u32(&r) % 4);
        for (int f = 0; f < flips; f++) {
            uint32_t u = ork_rng_u32(&r);
            size_t at;
            switch (u % 3) {
            case 0: at = u / 3 % 96; break; /* the header's fields */
            case 1: at = b.h.idx_offset + u / 3 % (b.h.n_words / 2 + 1); break;
            default: at = b.h.exc_pos_offset + u / 3 % (b.cb - b.h.exc_pos_offset); break;
            }
            b.c[at] ^= (uint8_t)(1u << (ork_rng_u32(&r) % 8));
        }
        ork_wcodec_hdr h;
        ork_status sh = ork_wcodec_header(b.c, b.cb, &h);
        /* decode writes h.raw_bytes: only a header that agrees on the size */
        if (sh == ORK_OK && h.raw_bytes != b.raw) { n_size++; continue; }
        ork_status st = ork_wcodec_decode(b.c, b.cb, b.out, (it & 1) + 1);
        n_ok += st == ORK_OK;
        n_fmt += st == ORK_E_FORMAT;
        n_other += st != ORK_OK && st != ORK_E_FORMAT;
    }
    ork_log_set_level(lvl);
    printf("\n  fuzz: %d decoded, %d refused as malformed, %d valid with another size (not decoded)\n", n_ok, n_fmt,
           n_size);
    CU_ASSERT_EQUAL(n_other, 0);
    CU_ASSERT(n_fmt > 1000);
    free(orig);
    free(b.c);
    free(b.out);
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
    {NULL, NULL},
};

ORK_TEST_MAIN("stream_wcodec", NULL, NULL, cases)
