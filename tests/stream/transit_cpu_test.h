/* tests/stream/transit_cpu_test.h — test_transit.c's scaffolding: the
 * error-line sink, random bytes, the round trip every coding owes (through
 * ork_transit_coded_bytes / ork_transit_encode), and the malformed-buffer
 * scaffolding — a valid buffer to corrupt, the BAD header-field macro, the
 * refusals expected of header and decode, and the bit-flip fuzz loop. */
#ifndef ORK_TESTS_TRANSIT_CPU_TEST_H
#define ORK_TESTS_TRANSIT_CPU_TEST_H

#include "transit_test.h"

#include "stream/transit/transit.h"
#include "util/log.h"

#include <stdint.h>

/* The last error line, to check that a refusal names the bad field. */
static char g_line[512];
static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl >= ORK_LOG_ERROR) snprintf(g_line, sizeof g_line, "%s", line);
}

static uint8_t *random_bytes(size_t n, uint64_t seed) {
    uint8_t *b = malloc(n ? n : 1);
    CU_ASSERT_FATAL(b != NULL);
    ork_rng r;
    ork_rng_init(&r, seed, 1);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)ork_rng_u32(&r);
    return b;
}

/* Code raw with codec k (nthreads): the size equals coded_bytes() and is
 * 256-aligned, the header read back equals the one coded_bytes() predicts,
 * and the decode (a guard byte past the output) gives raw back. Returns the
 * coded buffer (caller frees), its size and header. */
static uint8_t *codec_roundtrip(ork_transit_kind k, const void *raw, size_t bytes, int nthreads, size_t *coded_out,
                                ork_transit_hdr *hdr_out) {
    ork_transit_hdr want;
    size_t cb = ork_transit_coded_bytes(k, raw, bytes, &want);
    CU_ASSERT_FATAL(cb >= ORK_TRANSIT_HDR_BYTES && cb % 256 == 0);
    uint8_t *coded = malloc(cb), *out = malloc(bytes + 1);
    CU_ASSERT_FATAL(coded && out);
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ork_transit_encode(k, raw, bytes, coded, cb, &n, nthreads), ORK_OK);
    CU_ASSERT_EQUAL(n, cb);
    CU_ASSERT_EQUAL_FATAL(ork_transit_header(coded, n, hdr_out), ORK_OK);
    CU_ASSERT(memcmp(&want, hdr_out, sizeof want) == 0);
    CU_ASSERT_EQUAL(hdr_out->raw_bytes, bytes);
    CU_ASSERT_EQUAL(hdr_out->coded_bytes, cb);
    out[bytes] = 0xA5;
    CU_ASSERT_EQUAL_FATAL(ork_transit_decode(coded, n, out, nthreads), ORK_OK);
    CU_ASSERT(bytes == 0 || memcmp(out, raw, bytes) == 0);
    CU_ASSERT_EQUAL(out[bytes], 0xA5);
    free(out);
    *coded_out = n;
    return coded;
}

/* ---- malformed buffers -------------------------------------------------- */

typedef struct bad_buf {
    uint8_t *c;
    size_t cb, raw;
    ork_transit_hdr h;
    uint8_t *out;
} bad_buf;

static void bad_free(bad_buf *b) {
    free(b->c);
    free(b->out);
}

static void bad_set_hdr(bad_buf *b, const ork_transit_hdr *h) { memcpy(b->c, h, sizeof *h); }

/* Both the header read and the decode refuse with ORK_E_FORMAT, the header's
 * line naming field. */
static void expect_hdr_format(const bad_buf *b, size_t cb, const char *field) {
    ork_transit_hdr h;
    g_line[0] = 0;
    CU_ASSERT_EQUAL(ork_transit_header(b->c, cb, &h), ORK_E_FORMAT);
    if (!strstr(g_line, field)) printf("\n  expected '%s' in: %s\n", field, g_line);
    CU_ASSERT(strstr(g_line, field) != NULL);
    CU_ASSERT_EQUAL(ork_transit_decode(b->c, cb, b->out, 2), ORK_E_FORMAT);
}

/* One header field broken at a time, in a function with `bad_buf b` (valid)
 * and `ork_transit_hdr h` in scope: h starts as b.h, stmt breaks it, both
 * the header read and the decode must refuse naming field. */
#define BAD(field, stmt)                    \
    do {                                    \
        h = b.h;                            \
        stmt;                               \
        bad_set_hdr(&b, &h);                \
        expect_hdr_format(&b, b.cb, field); \
    } while (0)

/* The header is fine, the tile starts or the escapes are not: the decode
 * refuses with a line about a tile. */
static void expect_decode_format_tile(bad_buf *b, const char *what) {
    ork_transit_hdr h;
    CU_ASSERT_EQUAL(ork_transit_header(b->c, b->cb, &h), ORK_OK);
    g_line[0] = 0;
    ork_status st = ork_transit_decode(b->c, b->cb, b->out, 2);
    if (st != ORK_E_FORMAT) printf("\n  %s: status %d\n", what, st);
    CU_ASSERT_EQUAL(st, ORK_E_FORMAT);
    CU_ASSERT(strstr(g_line, "tile") != NULL);
}

/* iters rounds of 1-4 bit flips in a copy of b's valid buffer, each flip in
 * one of three sections (region[k] = {offset, bytes}, picked evenly), then
 * header + decode: OK or ORK_E_FORMAT, never a crash or an access out of
 * bounds (the sanitizer builds would see one). Returns the refusals. */
static int corruption_fuzz(bad_buf *b, uint64_t seed, int iters, const size_t region[3][2]) {
    uint8_t *orig = malloc(b->cb);
    CU_ASSERT_FATAL(orig != NULL);
    memcpy(orig, b->c, b->cb);
    ork_log_level lvl = ork_log_get_level();
    ork_log_set_level((ork_log_level)(ORK_LOG_ERROR + 1)); /* thousands of refusals: keep stderr quiet */
    ork_rng r;
    ork_rng_init(&r, seed, 2);
    int n_ok = 0, n_fmt = 0, n_other = 0, n_size = 0;
    for (int it = 0; it < iters; it++) {
        memcpy(b->c, orig, b->cb);
        int flips = 1 + (int)(ork_rng_u32(&r) % 4);
        for (int f = 0; f < flips; f++) {
            uint32_t u = ork_rng_u32(&r);
            size_t at = region[u % 3][0] + u / 3 % region[u % 3][1];
            b->c[at] ^= (uint8_t)(1u << (ork_rng_u32(&r) % 8));
        }
        ork_transit_hdr h;
        ork_status sh = ork_transit_header(b->c, b->cb, &h);
        /* decode writes h.raw_bytes: only a header that agrees on the size */
        if (sh == ORK_OK && h.raw_bytes != b->raw) { n_size++; continue; }
        ork_status st = ork_transit_decode(b->c, b->cb, b->out, (it & 1) + 1);
        n_ok += st == ORK_OK;
        n_fmt += st == ORK_E_FORMAT;
        n_other += st != ORK_OK && st != ORK_E_FORMAT;
    }
    ork_log_set_level(lvl);
    memcpy(b->c, orig, b->cb);
    printf("\n  fuzz: %d decoded, %d refused as malformed, %d valid with another size (not decoded)\n", n_ok, n_fmt,
           n_size);
    CU_ASSERT_EQUAL(n_other, 0);
    free(orig);
    return n_fmt;
}

#endif
