/* stream/reader_history.h — which earlier reader a write into device bytes
 * must wait for. The streamer keeps one history per buffer it reuses (the lent
 * FIFO's entries, the staging ring's pieces): a ring of the byte ranges the
 * last readers held, all read in order on one lane. Header-only: two small
 * functions the streamer inlines and tests/stream/test_reader_history.c
 * checks directly. */
#ifndef ORK_STREAM_READER_HISTORY_H
#define ORK_STREAM_READER_HISTORY_H

#include <stddef.h>

/* Device bytes a reader held: [off, off + len). */
typedef struct byte_range {
    size_t off, len;
} byte_range;

/* Remember reader seq's bytes in hist (n long). */
static inline void reader_history_put(byte_range *hist, int n, int seq, size_t off, size_t len) {
    hist[seq % n].off = off;
    hist[seq % n].len = len;
}

/* The last reader a write into [off, off + len) must wait for, as a sequence
 * number: hist holds the byte ranges of the last min(count, n) of `seq`
 * readers (reader seq - 1 - h at (seq - 1 - h) % n), read in order on one
 * lane, so the newest overlapping one covers the older; bytes a reader older
 * than the history may have held: the oldest remembered (in order, it covers
 * every older one). -1: none. */
static inline int reader_history_last(const byte_range *hist, int n, int seq, int count, size_t off, size_t len) {
    int nh = count < n ? count : n;
    for (int h = 0; h < nh; h++) {
        const byte_range *r = &hist[(seq - 1 - h) % n];
        if (r->off < off + len && off < r->off + r->len) return seq - 1 - h; /* newest first */
    }
    return count > n ? seq - n : -1;
}

#endif
