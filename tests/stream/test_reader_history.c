/* tests/stream/test_reader_history.c — stream/reader_history.h against a
 * brute-force search over every reader ever remembered: the newest overlapping
 * reader when the history still holds it; the oldest remembered when the
 * bytes' last reader has fallen out of it (the "older than the history" case
 * the streamer's buffers rarely reach); none only when no reader since the
 * reset held them. */
#include "ork_test.h"

#include "stream/reader_history.h"

enum { N = 4, READERS = 4000, BUF = 1000 };

static unsigned rng_state = 12345;
static unsigned rnd(unsigned m) {
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % m;
}

static int overlaps(byte_range r, size_t off, size_t len) { return r.off < off + len && off < r.off + r.len; }

/* readers' ranges at random in a BUF-byte buffer; every 97th reader resets
 * the count (the streamer's lend: bytes no entry has held since) */
static void test_against_brute_force(void) {
    static byte_range all[READERS];
    byte_range hist[N];
    int count = 0, reset_at = 0, seen_newest = 0, seen_fallen = 0, seen_none = 0;
    for (int seq = 0; seq < READERS; seq++) {
        if (seq % 97 == 96) { count = 0; reset_at = seq; }
        size_t off = rnd(BUF), len = 1 + rnd(seq % 3 ? 40 : 300);
        int truth = -1; /* the newest reader since the reset that held any of the bytes */
        for (int t = seq - 1; t >= reset_at && truth < 0; t--)
            if (overlaps(all[t], off, len)) truth = t;
        int got = reader_history_last(hist, N, seq, count, off, len);
        if (truth >= seq - N) {
            CU_ASSERT_EQUAL(got, truth);
            seen_newest++;
        } else if (count > N) { /* fallen out of (or never in) the history: the oldest remembered covers it */
            CU_ASSERT_EQUAL(got, seq - N);
            if (truth >= 0) seen_fallen++;
        } else {
            CU_ASSERT_EQUAL(got, -1);
            seen_none++;
        }
        all[seq].off = off;
        all[seq].len = len;
        reader_history_put(hist, N, seq, off, len);
        count++;
    }
    /* each branch reached many times */
    CU_ASSERT(seen_newest > 100);
    CU_ASSERT(seen_fallen > 100);
    CU_ASSERT(seen_none > 10);
}

/* the fixed cases: adjacent ranges do not overlap; the newest of two
 * overlapping readers is the one to wait for */
static void test_edges(void) {
    byte_range hist[N];
    reader_history_put(hist, N, 0, 0, 100);
    reader_history_put(hist, N, 1, 100, 100);
    CU_ASSERT_EQUAL(reader_history_last(hist, N, 2, 2, 200, 50), -1); /* [200, 250) touches [100, 200) only */
    CU_ASSERT_EQUAL(reader_history_last(hist, N, 2, 2, 199, 1), 1);
    CU_ASSERT_EQUAL(reader_history_last(hist, N, 2, 2, 50, 100), 1); /* both: the newest */
    CU_ASSERT_EQUAL(reader_history_last(hist, N, 2, 2, 0, 100), 0);
    CU_ASSERT_EQUAL(reader_history_last(hist, N, 2, 0, 0, 100), -1); /* none since the reset */
}

static const ork_test_case cases[] = {
    {"against a brute-force search, all three branches", test_against_brute_force},
    {"edges: adjacent ranges, newest of two, reset", test_edges},
    {NULL, NULL},
};

ORK_TEST_MAIN("stream_reader_history", NULL, NULL, cases)
