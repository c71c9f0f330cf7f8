/* tests/stream/test_stream.c — the streaming runtime on the CPU: the copy
 * engine's two modes, the streamer's schedule (visits, merged repeats, loads
 * per step, order errors, lookups outside a block), and the main property:
 * a training run with streamed blocks gives bit-identical losses, LoRA
 * weights and forward outputs to the fully resident run, for several
 * residency patterns, ring sizes and both CPU copy-engine modes (EAGER shows
 * a slot overwritten too early, DEFERRED shows a missing wait). */
#include "ork_test.h"

#include <time.h>
#include "toy_model.h"

#include "numerics/quantize.h"
#include "stream/streamer.h"
#include "util/log.h"

#define NB 8

static toy g_toy;

static void test_copy_engine_modes(void) {
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_DEFERRED, 4, &ce), ORK_OK);
    char src[8] = "abcdefg", dst[8] = "0000000";
    CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dst, src, 3), ORK_OK);
    CU_ASSERT_EQUAL(ork_ce_record(ce, ORK_LANE_H2D, 1), ORK_OK);
    CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dst + 3, src + 3, 3), ORK_OK);
    CU_ASSERT_EQUAL(memcmp(dst, "000", 3), 0); /* deferred: not yet */
    CU_ASSERT_EQUAL(ork_ce_wait(ce, ORK_LANE_COMPUTE, 1), ORK_OK);
    CU_ASSERT_EQUAL(memcmp(dst, "abc000", 6), 0); /* only what was before the record */
    CU_ASSERT_EQUAL(ork_ce_wait(ce, ORK_LANE_COMPUTE, 2), ORK_OK); /* never recorded: complete, no effect */
    CU_ASSERT_EQUAL(memcmp(dst, "abc000", 6), 0);
    CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
    CU_ASSERT_EQUAL(memcmp(dst, "abcdef", 6), 0);
    CU_ASSERT_EQUAL(ork_ce_bytes(ce, ORK_LANE_H2D), 6);
    CU_ASSERT_NOT_EQUAL(ork_ce_record(ce, ORK_LANE_H2D, 4), ORK_OK); /* out of range */
    CU_ASSERT_NOT_EQUAL(ork_ce_copy(ce, ORK_LANE_COMPUTE, dst, src, 1), ORK_OK);
    ork_copy_engine_destroy(ce);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, 2, &ce), ORK_OK);
    memcpy(dst, "0000000", 8);
    CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dst, src, 7), ORK_OK);
    CU_ASSERT_EQUAL(memcmp(dst, src, 7), 0);
    ork_copy_engine_destroy(ce);
    CU_ASSERT_NOT_EQUAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, 0, &ce), ORK_OK);
}

/* Lane timing (ork_ce_set_timing / ork_ce_busy): nothing counted before it is
 * on; copies count on their lane, decodes apart, deferred work when it is
 * performed (ork_ce_busy waits for it); each lane's figure no more than the
 * wall time around it. */
static void test_copy_engine_timing(void) {
    enum { N = 64 << 20 };
    char *src = malloc(N), *dst = malloc(N);
    CU_ASSERT_FATAL(src && dst);
    memset(src, 7, N);
    for (int mode = 0; mode < 2; mode++) {
        ork_copy_engine *ce;
        double c = -1, d = -1, c2 = -1;
        CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(mode ? ORK_CE_DEFERRED : ORK_CE_EAGER, 2, &ce), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dst, src, N), ORK_OK); /* not timed */
        CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_H2D, &c, &d), ORK_OK);
        CU_ASSERT(c == 0 && d == 0);
        CU_ASSERT_EQUAL(ork_ce_set_timing(ce, 1), ORK_OK);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dst, src, N), ORK_OK);
        if (mode) { /* deferred: queued, not yet performed */
            CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_H2D, &c, NULL), ORK_OK);
            CU_ASSERT(c == 0);
            CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_H2D, &c, &d), ORK_OK);
        CU_ASSERT(c > 0 && c <= wall);
        CU_ASSERT(d == 0);
        CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_D2H, &c2, NULL), ORK_OK);
        CU_ASSERT(c2 == 0);
        /* a decode counts apart from the copies */
        size_t cap = ork_transit_coded_bytes(ORK_TRANSIT_WORDS, src, 1 << 20, NULL);
        char *coded = malloc(cap);
        size_t got = 0;
        ork_transit_hdr h;
        CU_ASSERT_FATAL(coded && ork_transit_encode(ORK_TRANSIT_WORDS, src, 1 << 20, coded, cap, &got, 1) == ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_transit_header(coded, got, &h), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_decode(ce, ORK_LANE_H2D, dst, coded, &h), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_H2D, &c2, &d), ORK_OK);
        CU_ASSERT(d > 0 && c2 == c);
        CU_ASSERT_EQUAL(memcmp(dst, src, 1 << 20), 0);
        /* off: later work is not counted */
        CU_ASSERT_EQUAL(ork_ce_set_timing(ce, 0), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_D2H, dst, src, N), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_D2H, &c2, NULL), ORK_OK);
        CU_ASSERT(c2 == 0);
        CU_ASSERT_NOT_EQUAL(ork_ce_busy(ce, (ork_lane)7, &c2, NULL), ORK_OK);
        free(coded);
        ork_copy_engine_destroy(ce);
    }
    free(src);
    free(dst);
}

static void test_rec_layout(void) {
    size_t size = 0;
    ork_stream_rec a, b, c;
    ork_stream_rec_add(&size, 1000, 0, &a);
    ork_stream_rec_add(&size, 4096, 64 * 4, &b); /* fp8 bytes + one scale per row: one record */
    ork_stream_rec_add(&size, 3, 0, &c);
    CU_ASSERT_EQUAL(a.offset, 0);
    CU_ASSERT_EQUAL(b.offset, 1024);
    CU_ASSERT_EQUAL(b.scale_offset, 1024 + 4096);
    CU_ASSERT_EQUAL(b.scale_bytes, 256);
    CU_ASSERT_EQUAL(c.offset % ORK_STREAM_ALIGN, 0);
    CU_ASSERT(c.offset >= b.scale_offset + b.scale_bytes);
    CU_ASSERT_EQUAL(size, c.offset + 3);
}

/* The schedule: visits, merged repeat of the last block, loads issued. */
static void test_streamer_schedule(void) {
    ork_alloc *a;
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_DEFERRED, 8, &ce), ORK_OK);
    uint8_t st[6] = {0, 1, 1, 0, 1, 1};
    size_t bytes[6] = {0, 1000, 3000, 0, 500, 700};
    ork_streamer_opts o = {.n_blocks = 6, .streamed = st, .block_bytes = bytes, .n_slots = 2, .arena_bytes = 2048};
    ork_streamer *s;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    ork_streamer_stats stats;
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT_EQUAL(stats.slot_bytes, 3000);
    CU_ASSERT_EQUAL(stats.n_streamed, 4);
    CU_ASSERT(stats.n_arenas >= 2); /* block 2 does not fit a 2 KiB chunk: its own arena */
    CU_ASSERT(ork_alloc_in_use(a, "stream_slots") >= 2 * 3000 && ork_alloc_in_use(a, "stream_slots") <= 2 * 3072);
    for (int b = 0; b < 6; b++) {
        uint8_t *h = ork_streamer_host(s, b);
        CU_ASSERT_EQUAL(h != NULL, st[b]);
        if (h) memset(h, b, bytes[b]);
    }
    int order[11] = {0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1};
    CU_ASSERT_EQUAL(ork_streamer_pass_begin(s, order, 11), ORK_OK);
    for (int q = 0; q < 11; q++) {
        void *dev = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        CU_ASSERT_EQUAL(dev != NULL, st[order[q]]);
        if (dev) {
            const uint8_t *d = dev;
            CU_ASSERT(d[0] == order[q] && d[bytes[order[q]] - 1] == order[q]);
        }
        CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_streamer_stats_get(s, &stats);
    /* 1 2 4 5 | (5 merged) 4 2 1 with 2 slots: the backward's 4 lands in the
     * slot that still holds it from the forward (visits 2 and 4) */
    CU_ASSERT_EQUAL(stats.loads, 6);
    CU_ASSERT_EQUAL(stats.reused, 1);
    CU_ASSERT_EQUAL(stats.h2d_bytes, 1000 + 3000 + 500 + 700 + 3000 + 1000);
    /* out of order: refused with one line */
    CU_ASSERT_EQUAL(ork_streamer_pass_begin(s, order, 11), ORK_OK);
    void *dev;
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ork_streamer_enter(s, 2, &dev), ORK_OK);
    CU_ASSERT_NOT_EQUAL(ork_streamer_leave(s, 1), ORK_OK);
    CU_ASSERT_NOT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_log_set_level(ORK_LOG_INFO);
    /* a fresh pass after an abandoned one works */
    CU_ASSERT_EQUAL(ork_streamer_pass_begin(s, order, 6), ORK_OK);
    for (int q = 0; q < 6; q++) {
        CU_ASSERT_EQUAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        CU_ASSERT_EQUAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_streamer_destroy(s);
    CU_ASSERT_EQUAL(ork_alloc_in_use(a, NULL), 0);
    o.n_slots = 1;
    CU_ASSERT_NOT_EQUAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    o.n_slots = 5; /* needs 10 events, the engine has 8 */
    CU_ASSERT_NOT_EQUAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

/* The lane trace (ork_ce_set_trace, the streamer's marks): one line per timed
 * item, the compute lane's marks in pass order — pass begin, every block's
 * enter (resident ones too), pass end — and each load's copy tagged with its
 * block; times from timing on, never decreasing along the compute lane; no line
 * before timing is on or after the trace is cleared. */
static void test_copy_engine_trace(void) {
    ork_alloc *a;
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, 4, &ce), ORK_OK);
    uint8_t st[4] = {0, 1, 0, 1};
    size_t bytes[4] = {0, 1000, 0, 700};
    ork_streamer_opts o = {.n_blocks = 4, .streamed = st, .block_bytes = bytes, .n_slots = 2};
    ork_streamer *s;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    FILE *f = tmpfile();
    CU_ASSERT_FATAL(f != NULL);
    ork_ce_set_trace(ce, f);
    CU_ASSERT_EQUAL(ork_ce_mark(ce, ORK_LANE_COMPUTE, 99), ORK_OK); /* timing off: nothing written */
    CU_ASSERT_EQUAL(ork_ce_set_timing(ce, 1), ORK_OK);
    int order[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 8), ORK_OK);
    for (int q = 0; q < 8; q++) {
        void *dev;
        CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_ce_set_trace(ce, NULL);
    CU_ASSERT_EQUAL(ork_ce_mark(ce, ORK_LANE_COMPUTE, 98), ORK_OK); /* cleared: not written */
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ork_ce_mark(ce, (ork_lane)9, 0), ORK_OK);
    ork_log_set_level(ORK_LOG_INFO);
    rewind(f);
    int lane, kind, tag, n_marks = 0, marks[16], copies[8], n_copies = 0;
    double t0, t1, last = 0;
    while (fscanf(f, "%d %d %d %lf %lf", &lane, &kind, &tag, &t0, &t1) == 5) {
        CU_ASSERT(t1 >= t0 && t0 >= 0);
        if (lane == ORK_LANE_COMPUTE && kind == 3 && n_marks < 16) {
            CU_ASSERT(t0 >= last);
            last = t0;
            marks[n_marks++] = tag;
        } else if (lane == ORK_LANE_H2D && kind == 0 && n_copies < 8) {
            copies[n_copies++] = tag;
        } else {
            CU_FAIL("unexpected trace line");
        }
    }
    /* -1, the 8 enters, -2; the loads 1 and 3 (3's visits merged, the backward's 1 still in its slot) */
    int want[10] = {ORK_STREAM_MARK_PASS_BEGIN, 0, 1, 2, 3, 3, 2, 1, 0, ORK_STREAM_MARK_PASS_END};
    CU_ASSERT_EQUAL(n_marks, 10);
    CU_ASSERT(n_marks == 10 && memcmp(marks, want, sizeof want) == 0);
    CU_ASSERT_EQUAL(n_copies, 2);
    CU_ASSERT(n_copies == 2 && copies[0] == 1 && copies[1] == 3);
    fclose(f);
    ork_streamer_destroy(s);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

static void run_ok(const toy_run_opts *o, toy_run_out *out) {
    ork_status s = toy_train(&g_toy, o, out);
    CU_ASSERT_EQUAL_FATAL(s, ORK_OK);
}

static toy_run_opts base_opts(void) {
    toy_run_opts o = {.be = ork_cpu_backend(), .store_dt = ORK_F32, .act_dt = ORK_F32, .steps = 4,
                      .forward_only_check = 1};
    return o;
}

static void same(const toy_run_out *ref, const toy_run_out *got, const char *what) {
    int ok = memcmp(ref->loss, got->loss, sizeof ref->loss) == 0 && ref->n_params == got->n_params &&
             memcmp(ref->params, got->params, ref->n_params * sizeof(float)) == 0 && ref->n_fwd == got->n_fwd &&
             memcmp(ref->fwd, got->fwd, ref->n_fwd * sizeof(float)) == 0;
    if (!ok) printf("\n  %s: differs from the resident run (loss %.9g vs %.9g)\n", what, got->loss[3], ref->loss[3]);
    CU_ASSERT(ok);
}

static void test_streamed_equals_resident(void) {
    toy_init(&g_toy, NB, 16, 8);
    toy_run_opts o = base_opts();
    toy_run_out ref, got;
    run_ok(&o, &ref);
    CU_ASSERT(ref.loss[3] < ref.loss[0] || ref.loss[3] != ref.loss[0]); /* it trains: something moved */
    int moved = 0;
    for (size_t i = 0; i < ref.n_params; i++) moved |= ref.params[i] != 0.0f;
    CU_ASSERT(moved);
    struct { const char *name; uint8_t st[NB]; int slots; } cases[] = {
        {"all blocks streamed, 2 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 2},
        {"all blocks streamed, 3 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 3},
        {"every other block, 2 slots", {0, 1, 0, 1, 0, 1, 0, 1}, 2},
        {"middle blocks, 2 slots", {0, 0, 1, 1, 1, 0, 0, 0}, 2},
        {"one block, 4 slots", {0, 0, 0, 0, 1, 0, 0, 0}, 4},
        {"last block only (merged visit)", {0, 0, 0, 0, 0, 0, 0, 1}, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = 0; mode < 2; mode++) {
            o = base_opts();
            o.streamed = cases[c].st;
            o.n_slots = cases[c].slots;
            o.cpu_mode = mode;
            run_ok(&o, &got);
            char what[128];
            snprintf(what, sizeof what, "%s, %s", cases[c].name, mode ? "deferred" : "eager");
            same(&ref, &got, what);
            CU_ASSERT(got.loads > 0);
            toy_out_free(&got);
        }
    /* the checkpoints pooled after the first step (ork_runner_pool_checkpoints), given
     * back after the second, pooled again after the third: the same run, resident and
     * streamed */
    for (int k = 0; k < 2; k++) {
        static const uint8_t all[NB] = {1, 1, 1, 1, 1, 1, 1, 1};
        o = base_opts();
        o.streamed = k ? all : NULL;
        o.pool_after = 1u << 0 | 1u << 2;
        o.unpool_after = 1u << 1;
        run_ok(&o, &got);
        same(&ref, &got, k ? "streamed, checkpoints pooled" : "checkpoints pooled");
        CU_ASSERT(got.pool_ok);
        toy_out_free(&got);
    }
    toy_out_free(&ref);
}

/* Transit coding (stream/transit/transit.h): BF16 blocks travel coded and the run is
 * bit-identical to the resident one in every copy-engine mode (DEFERRED shows
 * a decode reading the staging ring before its copy; SKEWED a copy into ring
 * bytes a decode has still to read); fewer bytes cross than the blocks hold. */
static void test_coded_equals_resident(void) {
    toy_init(&g_toy, NB, 64, 16);
    toy_run_opts o = base_opts();
    o.store_dt = ORK_BF16;
    toy_run_out ref, got;
    run_ok(&o, &ref);
    /* the final layer (H -> C, a few KiB) does not shrink past the headers: raw */
    struct { const char *name; uint8_t st[NB]; int slots, raw; } cases[] = {
        {"all blocks, 2 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 2, 2},
        {"every other block, 3 slots", {0, 1, 0, 1, 0, 1, 0, 1}, 3, 1},
        {"the final layer only (merged visit, raw)", {0, 0, 0, 0, 0, 0, 0, 1}, 2, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = 0; mode < 3; mode++) {
            static const char *mode_name[3] = {"eager", "deferred", "skewed"};
            o.streamed = cases[c].st;
            o.n_slots = cases[c].slots;
            o.cpu_mode = mode;
            o.compress = 1;
            run_ok(&o, &got);
            char what[128];
            snprintf(what, sizeof what, "%s, %s", cases[c].name, mode_name[mode]);
            same(&ref, &got, what);
            int n_st = 0;
            for (int b = 0; b < NB; b++) n_st += cases[c].st[b];
            CU_ASSERT_EQUAL(got.n_coded, n_st - cases[c].raw);
            CU_ASSERT(got.loads > 0);
            CU_ASSERT(got.n_coded ? got.h2d_bytes < got.raw_bytes * 0.85 : got.h2d_bytes == got.raw_bytes);
            toy_out_free(&got);
            /* the same run uncoded moves the raw bytes */
            o.compress = 0;
            run_ok(&o, &got);
            CU_ASSERT_EQUAL(got.n_coded, 0);
            CU_ASSERT_EQUAL(got.h2d_bytes, got.raw_bytes);
            toy_out_free(&got);
        }
    toy_out_free(&ref);
}

/* The streamer's coding by hand: a block that does not shrink travels raw, a
 * coded block's host region reads back raw (decoded in place) and is coded
 * again at the next pass; the slot always holds the raw bytes — its pieces
 * wrap the staging ring (DEFERRED: a decode before its copy shows; SKEWED: a
 * copy over a piece still to be decoded). */
static void coding_case(ork_ce_cpu_mode mode) {
    ork_alloc *a;
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(mode, ork_streamer_n_events(2), &ce), ORK_OK);
    uint8_t st[3] = {1, 1, 1};
    /* pieces of 32 KiB: blocks 0 and 1 in 7, block 2 in 5 (the last one short and odd) */
    size_t bytes[3] = {200000, 200002, 150001};
    ork_streamer_opts o = {.n_blocks = 3, .streamed = st, .block_bytes = bytes, .n_slots = 2, .compress = 1,
                           .piece_bytes = 32768};
    ork_streamer *s;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    /* the staging ring holds the largest block's coded bytes, in pieces */
    CU_ASSERT_EQUAL(ork_alloc_in_use(a, "stream_staging"), ork_stream_staging_bytes(200002, ORK_STREAM_CODEC_RATIO));
    CU_ASSERT(ork_alloc_in_use(a, "stream_staging") <= (size_t)(ORK_STREAM_CODEC_RATIO * 200002) + ORK_STREAM_ALIGN);
    uint8_t *want[3];
    uint64_t x = 88172645463325252ull;
    for (int b = 0; b < 3; b++) {
        want[b] = malloc(bytes[b]);
        for (size_t i = 0; i + 1 < bytes[b]; i += 2) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            /* blocks 0, 2: bf16 values of a few exponents; block 1: random words (no gain: raw) */
            uint16_t w = b == 1 ? (uint16_t)x : (uint16_t)((x & 0x807f) | ((uint64_t)(120 + (x >> 40) % 6) << 7));
            want[b][i] = (uint8_t)w;
            want[b][i + 1] = (uint8_t)(w >> 8);
        }
        if (bytes[b] & 1) want[b][bytes[b] - 1] = 0xa5;
        memcpy(ork_streamer_host(s, b), want[b], bytes[b]);
    }
    CU_ASSERT_EQUAL(ork_streamer_seal(s), ORK_OK);
    ork_streamer_stats stats;
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT_EQUAL(stats.n_coded, 2);
    int order[6] = {0, 1, 2, 2, 1, 0};
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 6), ORK_OK);
        for (int q = 0; q < 6; q++) {
            void *dev = NULL;
            CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
            CU_ASSERT(dev && memcmp(dev, want[order[q]], bytes[order[q]]) == 0);
            CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
        }
        CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
        /* between rounds: block 2 read back (raw), changed, coded again at pass_begin */
        uint8_t *h = ork_streamer_host(s, 2);
        CU_ASSERT_FATAL(h != NULL);
        CU_ASSERT_EQUAL(memcmp(h, want[2], bytes[2]), 0);
        ork_streamer_stats_get(s, &stats);
        CU_ASSERT_EQUAL(stats.n_coded, 1);
        want[2][100] ^= 0x01; /* in the first piece */
        h[100] ^= 0x01;
        want[2][150000] ^= 0x80; /* the tail byte of the last piece */
        h[150000] ^= 0x80;
    }
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT(stats.h2d_bytes < stats.raw_bytes);
    ork_streamer_destroy(s);
    CU_ASSERT_EQUAL(ork_alloc_in_use(a, NULL), 0);
    for (int b = 0; b < 3; b++) free(want[b]);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

static void test_streamer_coding(void) {
    coding_case(ORK_CE_DEFERRED);
    coding_case(ORK_CE_SKEWED);
}

/* One pass over `order` checking each slot's bytes against want[]; the trainer's
 * shape when reclaim_at >= 0: the lent memory is taken back after that many
 * enters (its loss, between the forward and the backward). */
static void lend_pass(ork_streamer *s, const int *order, int n, uint8_t **want, const size_t *bytes, int reclaim_at) {
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, n), ORK_OK);
    for (int q = 0; q < n; q++) {
        if (q == reclaim_at) CU_ASSERT_EQUAL(ork_streamer_reclaim(s), ORK_OK);
        void *dev = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        if (want[order[q]]) CU_ASSERT(dev && memcmp(dev, want[order[q]], bytes[order[q]]) == 0);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
}

/* The lending tests' streamer: blocks 1, 4, 6 bf16 values of a few exponents
 * (coded), 2, 5 random words (raw), 0 and 3 resident; want[] their bytes. */
enum { LF_NBL = 7 };
typedef struct lend_fix {
    ork_alloc *a;
    ork_copy_engine *ce;
    ork_streamer *s;
    ork_streamer_opts o;
    uint8_t st[LF_NBL];
    size_t bytes[LF_NBL];
    uint8_t *want[LF_NBL];
    uint64_t x; /* the generator, for more random bytes */
} lend_fix;

static void lend_fix_setup(lend_fix *f, ork_ce_cpu_mode mode, uint64_t seed, uint8_t tag) {
    static const uint8_t st[LF_NBL] = {0, 1, 1, 0, 1, 1, 1};
    static const size_t bytes[LF_NBL] = {0, 40000, 60002, 0, 30000, 50000, 20001};
    memset(f, 0, sizeof *f);
    memcpy(f->st, st, sizeof st);
    memcpy(f->bytes, bytes, sizeof bytes);
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &f->a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(mode, ork_streamer_n_events(2), &f->ce), ORK_OK);
    f->o = (ork_streamer_opts){.n_blocks = LF_NBL, .streamed = f->st, .block_bytes = f->bytes, .n_slots = 2, .compress = 1};
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(f->ce, f->a, &f->o, &f->s), ORK_OK);
    uint64_t x = seed;
    for (int b = 0; b < LF_NBL; b++) {
        if (!st[b]) continue;
        f->want[b] = malloc(bytes[b]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f->want[b]);
        for (size_t i = 0; i + 1 < bytes[b]; i += 2) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            uint16_t w = (b == 2 || b == 5) ? (uint16_t)x : (uint16_t)((x & 0x807f) | ((uint64_t)(120 + (x >> 40) % 6) << 7));
            f->want[b][i] = (uint8_t)w;
            f->want[b][i + 1] = (uint8_t)(w >> 8);
        }
        if (bytes[b] & 1) f->want[b][bytes[b] - 1] = (uint8_t)(tag + b);
        memcpy(ork_streamer_host(f->s, b), f->want[b], bytes[b]);
    }
    f->x = x;
}

static void lend_fix_free(lend_fix *f) {
    ork_streamer_destroy(f->s);
    ork_copy_engine_destroy(f->ce);
    CU_ASSERT_EQUAL(ork_alloc_in_use(f->a, NULL), 0);
    for (int b = 0; b < LF_NBL; b++) free(f->want[b]);
    ork_alloc_destroy(f->a);
}

/* Lending (ork_streamer_lend): the forward's loads go through the lent memory
 * — copied from the pass's first enter, decoded (coded blocks) or copied
 * (raw ones) into the slot on the compute lane at enter — and every slot holds
 * its block's bytes: with the deferred engine a missing wait shows as stale
 * bytes. Lent memory that holds one block at a time (the FIFO waits and wraps),
 * or many; a pass of another order; a forward-only pass; reclaim too
 * early refused; too small a loan not taken; fewer events: not taken. */
static void test_streamer_lend(void) {
    lend_fix f;
    lend_fix_setup(&f, ORK_CE_DEFERRED, 88172645463325252ull, 0x30);
    enum { NBL = LF_NBL };
    ork_streamer *s = f.s;
    uint8_t **want = f.want, *st = f.st;
    size_t *bytes = f.bytes;
    uint64_t x = f.x;
    int order[13] = {0, 1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1}, fwd[7] = {0, 1, 2, 3, 4, 5, 6};
    lend_pass(s, order, 13, want, bytes, -1); /* codes 1, 4, 6 */
    ork_streamer_stats st0, st1;
    ork_streamer_stats_get(s, &st0);
    CU_ASSERT_EQUAL(st0.n_coded, 3);
    CU_ASSERT_EQUAL(st0.lent_loads, 0);
    /* too small (under the largest block's 60 KiB raw): not taken */
    uint8_t *mem = malloc(1 << 20);
    CU_ASSERT_FATAL(mem != NULL);
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 40000), ORK_OK);
    CU_ASSERT_FALSE(ork_streamer_lent(s));
    size_t sizes[2] = {60416, 1 << 20}; /* one block at a time, all of them */
    for (int k = 0; k < 2; k++) {
        /* the trainer's cycle, three times: lend after the optimizer, reclaim in the loss */
        for (int step = 0; step < 3; step++) {
            memset(mem, 0xee, sizes[k]); /* the owner's bytes, overwritten by the copies */
            CU_ASSERT_EQUAL_FATAL(ork_streamer_lend(s, mem, sizes[k]), ORK_OK);
            CU_ASSERT_TRUE(ork_streamer_lent(s));
            ork_streamer_stats_get(s, &st0);
            lend_pass(s, order, 13, want, bytes, 7);
            ork_streamer_stats_get(s, &st1);
            CU_ASSERT_FALSE(ork_streamer_lent(s));
            /* forward visits 1 2 4 5 6 (6 merged), the two in the slots reused: the other 3 lent,
             * the first of them (4) copied ahead at the pass before's end once a lent pass predicts it */
            CU_ASSERT_EQUAL(st1.lent_loads - st0.lent_loads + st1.early_loads - st0.early_loads, 3);
            CU_ASSERT_EQUAL(st1.early_loads - st0.early_loads, (uint64_t)(k > 0 || step > 0));
            memset(mem, 0xdd, sizes[k]); /* the owner's backward writes it again */
        }
    }
    /* the copy ahead (the last pass predicted 4) not taken by a pass whose first
     * lent visit is another block (5), nor after its block was written: the
     * slots hold the block's bytes either way */
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    int other[5] = {0, 5, 6, 6, 5};
    ork_streamer_stats_get(s, &st0);
    lend_pass(s, other, 5, want, bytes, 3);
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT_EQUAL(st1.early_loads, st0.early_loads);
    CU_ASSERT_EQUAL(st1.lent_loads - st0.lent_loads, 2);
    for (int k = 0; k < 2; k++) { /* the first predicts 1 (slots: 6 and 5), the second 4 again */
        CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
        lend_pass(s, order, 13, want, bytes, 7);
    }
    uint8_t *h4 = ork_streamer_host(s, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h4);
    for (size_t i = 0; i < bytes[4]; i++) { /* random bytes: block 4 now travels raw */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        want[4][i] = h4[i] = (uint8_t)x;
    }
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    ork_streamer_stats_get(s, &st0);
    lend_pass(s, order, 13, want, bytes, 7);
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT_EQUAL(st1.early_loads, st0.early_loads);
    CU_ASSERT_EQUAL(st1.lent_loads - st0.lent_loads, 3);
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    lend_pass(s, order, 13, want, bytes, 7); /* 4 raw, copied ahead again: it fits the staging buffer */
    ork_streamer_stats_get(s, &st0);
    CU_ASSERT_EQUAL(st0.early_loads - st1.early_loads, (uint64_t)(bytes[4] <= st0.staging_bytes));
    /* a forward-only pass (all its visits lent); then one in the backward's order
     * (only its first visit is a forward one) */
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    ork_streamer_stats_get(s, &st0);
    lend_pass(s, fwd, 7, want, bytes, -1);
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT(st1.lent_loads - st0.lent_loads + st1.early_loads - st0.early_loads >= 3);
    CU_ASSERT_EQUAL(ork_streamer_reclaim(s), ORK_OK);
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    int back[6] = {6, 5, 4, 3, 2, 1};
    lend_pass(s, back, 6, want, bytes, -1); /* copies 6 ahead for a pass like it */
    ork_streamer_stats_get(s, &st0);
    lend_pass(s, order, 13, want, bytes, 7); /* ... which this is not (its first lent visit is 4): dropped */
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT_EQUAL(st1.early_loads, st0.early_loads);
    CU_ASSERT_EQUAL(st1.lent_loads - st0.lent_loads, 3);
    /* the FIFO starts at the pass's first enter, not before (the model's set-up
     * between pass_begin and it uploads from pageable memory: copies queued ahead
     * would hold it back) */
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    ork_streamer_stats_get(s, &st0);
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 13), ORK_OK);
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT_EQUAL(st1.h2d_bytes, st0.h2d_bytes);
    void *dev0;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, 0, &dev0), ORK_OK); /* a resident block */
    ork_streamer_stats_get(s, &st1);
    CU_ASSERT(st1.h2d_bytes > st0.h2d_bytes);
    CU_ASSERT_EQUAL(ork_streamer_leave(s, 0), ORK_OK);
    for (int q = 1; q < 13; q++) {
        if (q == 7) CU_ASSERT_EQUAL(ork_streamer_reclaim(s), ORK_OK);
        void *dev = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        if (want[order[q]]) CU_ASSERT(dev && memcmp(dev, want[order[q]], bytes[order[q]]) == 0);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    /* reclaim before the forward's lent visits were entered: refused */
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 13), ORK_OK);
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ork_streamer_reclaim(s), ORK_OK);
    CU_ASSERT_NOT_EQUAL(ork_streamer_lend(s, mem + 4096, 1 << 19), ORK_OK); /* during a pass */
    ork_log_set_level(ORK_LOG_INFO);
    ork_streamer_destroy(f.s);
    ork_copy_engine_destroy(f.ce);
    /* an engine without lending's events: coding is refused (the staging ring's
     * events come after lending's); uncoded, lend takes nothing, the passes work */
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_DEFERRED, 4, &f.ce), ORK_OK);
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ork_streamer_create(f.ce, f.a, &f.o, &f.s), ORK_OK);
    ork_log_set_level(ORK_LOG_INFO);
    f.o.compress = 0;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(f.ce, f.a, &f.o, &f.s), ORK_OK);
    s = f.s;
    for (int b = 0; b < NBL; b++)
        if (st[b]) memcpy(ork_streamer_host(s, b), want[b], bytes[b]);
    lend_pass(s, order, 13, want, bytes, -1);
    CU_ASSERT_EQUAL(ork_streamer_lend(s, mem, 1 << 20), ORK_OK);
    CU_ASSERT_FALSE(ork_streamer_lent(s));
    lend_pass(s, order, 13, want, bytes, 7);
    lend_fix_free(&f);
    free(mem);
}

/* The ahead region (ork_streamer_set_ahead): the trainer's checkpoints, here
 * 8 boundaries the test writes as their owner does — boundary i + 1 after
 * forward block i, read back at backward block i — hold the next forward's
 * loads after the staging buffer's, copied at the pass's end: each boundary
 * still holds what its owner wrote when read (the copies go only where the
 * backward has read and the forward writes after the entry is entered), the
 * slots hold their blocks, two loads a pass are copied ahead; set_ahead(NULL)
 * stops it. Both engine modes (EAGER: a copy too early shows; DEFERRED: a
 * missing wait). */
static void ahead_case(ork_ce_cpu_mode mode) {
    lend_fix f;
    lend_fix_setup(&f, mode, 0x9E3779B97F4A7C15ull, 0x40);
    enum { NBL = LF_NBL, BND = NBL + 1, BB = 80000 };
    ork_streamer *s = f.s;
    uint8_t **want = f.want;
    size_t *bytes = f.bytes;
    size_t off[BND + 1];
    for (int i = 0; i <= BND; i++) off[i] = (size_t)i * BB;
    uint8_t *grads = malloc(1 << 20), *ck = malloc(BND * BB);
    CU_ASSERT_FATAL(grads && ck);
    int order[13] = {0, 1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1};
    int clobbered = 0;
    for (int step = 0; step < 5; step++) {
        if (step == 1) CU_ASSERT_EQUAL(ork_streamer_set_ahead(s, ck, off, BND), ORK_OK);
        if (step == 4) CU_ASSERT_EQUAL(ork_streamer_set_ahead(s, NULL, NULL, 0), ORK_OK);
        ork_streamer_stats st0, st1;
        ork_streamer_stats_get(s, &st0);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_lend(s, grads, 1 << 20), ORK_OK);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 13), ORK_OK);
        memset(ck, step * 16, BB); /* boundary 0: the model's begin */
        for (int q = 0; q < 13; q++) {
            int b = order[q], bwd = q >= NBL;
            if (q == NBL) CU_ASSERT_EQUAL(ork_streamer_reclaim(s), ORK_OK);
            /* the loss reads boundary 7, the recompute its input boundary: as the owner wrote them */
            for (int k = q == NBL ? 2 : bwd; k > 0; k--) {
                int bd = k == 2 ? NBL : b;
                for (size_t i = 0; i < BB; i++)
                    if (ck[off[bd] + i] != (uint8_t)(step * 16 + bd)) { clobbered++; break; }
            }
            void *dev = NULL;
            CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, b, &dev), ORK_OK);
            if (want[b]) CU_ASSERT(dev && memcmp(dev, want[b], bytes[b]) == 0);
            if (!bwd) memset(ck + off[b + 1], step * 16 + b + 1, BB); /* keep the carry after block b */
            CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, b), ORK_OK);
        }
        CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
        ork_streamer_stats_get(s, &st1);
        /* copied ahead: nothing at step 0; step 0's prediction (1, its slots empty)
         * is not step 1's (4: 1 and 2 are still in their slots), dropped; then 4 in
         * the staging buffer, 5 and 6 in the region (boundaries 6 and 7); 4 alone
         * once the region is taken back (its entries dropped) */
        static const uint64_t want_e[5] = {0, 0, 3, 3, 1};
        uint64_t e = st1.early_loads - st0.early_loads;
        CU_ASSERT_EQUAL(e, want_e[step]);
        if (e != want_e[step]) printf("\n    step %d: %llu copied ahead", step, (unsigned long long)e);
    }
    CU_ASSERT_EQUAL(clobbered, 0);
    lend_fix_free(&f);
    free(grads);
    free(ck);
}
static void test_streamer_ahead(void) {
    ahead_case(ORK_CE_EAGER);
    ahead_case(ORK_CE_DEFERRED);
    ahead_case(ORK_CE_SKEWED);
}

/* FP8 blocks as the weight store packs them (a record of FP8 bytes, one F32
 * scale per row), of uniform weights: the two-level byte codec takes the E5M2
 * block (~0.68) and, its class being E4M3's 4 exponent bits and top mantissa
 * bit, the E4M3 one too (~0.78; trained E4M3 weights code to ~0.98 and travel
 * raw); slots hold the exact bytes. */
static void test_streamer_coding_fp8(void) {
    ork_alloc *a;
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_DEFERRED, ork_streamer_n_events(2), &ce), ORK_OK);
    enum { ROWS = 96, COLS = 1024 };
    uint8_t st[2] = {1, 1};
    size_t bytes[2];
    ork_stream_rec rec[2];
    float *w = malloc(sizeof(float) * ROWS * COLS);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        w[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0); /* PyTorch's uniform init shape */
    }
    for (int b = 0; b < 2; b++) {
        bytes[b] = 0;
        ork_stream_rec_add(&bytes[b], (size_t)ROWS * COLS, ROWS * 4, &rec[b]);
    }
    ork_streamer_opts o = {.n_blocks = 2, .streamed = st, .block_bytes = bytes, .n_slots = 2, .compress = 1};
    ork_streamer *s;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    uint8_t *want[2];
    for (int b = 0; b < 2; b++) {
        want[b] = calloc(1, bytes[b]);
        CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", w, ORK_F32, ROWS, COLS, b ? ORK_F8_E4M3 : ORK_F8_E5M2, 0,
                                               want[b] + rec[b].offset, (float *)(want[b] + rec[b].scale_offset), NULL),
                              ORK_OK);
        memcpy(ork_streamer_host(s, b), want[b], bytes[b]);
    }
    CU_ASSERT_EQUAL(ork_streamer_seal(s), ORK_OK);
    ork_streamer_stats stats;
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT_EQUAL(stats.n_coded, 2);
    int order[4] = {0, 1, 1, 0};
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 4), ORK_OK);
    for (int q = 0; q < 4; q++) {
        void *dev = NULL;
        CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, order[q], &dev), ORK_OK);
        CU_ASSERT(dev && memcmp(dev, want[order[q]], bytes[order[q]]) == 0);
        CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, order[q]), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_streamer_stats_get(s, &stats);
    /* block 0 (its second visit finds it in its slot) and block 1 (one merged
     * visit) loaded once each, coded */
    CU_ASSERT_EQUAL(stats.loads, 2);
    CU_ASSERT_EQUAL(stats.raw_bytes, bytes[0] + bytes[1]);
    printf("\n  coded share of the loads: %.4f\n", (double)stats.h2d_bytes / (double)stats.raw_bytes);
    CU_ASSERT((double)stats.h2d_bytes < 0.80 * (double)stats.raw_bytes);
    CU_ASSERT((double)stats.h2d_bytes > 0.65 * (double)stats.raw_bytes);
    /* read back raw */
    uint8_t *h = ork_streamer_host(s, 0);
    CU_ASSERT(h && memcmp(h, want[0], bytes[0]) == 0);
    ork_streamer_destroy(s);
    for (int b = 0; b < 2; b++) free(want[b]);
    free(w);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

/* The codec is picked on a block's first MiB; a block whose first MiB looks
 * like BF16 (16-bit words of few exponents) but whose other 15 MiB are E5M2
 * bytes does not pay under the 16-bit codecs (~0.94), so the byte codecs size
 * it too (~0.79-0.81) and it travels coded; the slot gets the exact bytes. */
static void test_streamer_codec_fallback(void) {
    ork_alloc *a;
    ork_copy_engine *ce;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, ork_streamer_n_events(2), &ce), ORK_OK);
    enum { HEAD = 1 << 20, ROWS = 3840, COLS = 4096 }; /* 15 MiB of E5M2 */
    uint8_t st[1] = {1};
    size_t bytes[1] = {HEAD + (size_t)ROWS * COLS};
    ork_streamer_opts o = {.n_blocks = 1, .streamed = st, .block_bytes = bytes, .n_slots = 2, .compress = 1};
    ork_streamer *s;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_create(ce, a, &o, &s), ORK_OK);
    uint8_t *want = malloc(bytes[0]);
    float *w = malloc(sizeof(float) * ROWS * COLS), *sc = malloc(sizeof(float) * ROWS);
    CU_ASSERT_FATAL(want && w && sc);
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i + 1 < HEAD; i += 2) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        uint16_t v = (uint16_t)((x & 0x807f) | ((uint64_t)(120 + (x >> 40) % 6) << 7));
        want[i] = (uint8_t)v;
        want[i + 1] = (uint8_t)(v >> 8);
    }
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        w[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    CU_ASSERT_EQUAL_FATAL(ork_quantize_fp8("w", w, ORK_F32, ROWS, COLS, ORK_F8_E5M2, 0, want + HEAD, sc, NULL), ORK_OK);
    memcpy(ork_streamer_host(s, 0), want, bytes[0]);
    CU_ASSERT_EQUAL(ork_streamer_seal(s), ORK_OK);
    ork_streamer_stats stats;
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT_EQUAL(stats.n_coded, 1);
    int order[1] = {0};
    void *dev = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_streamer_pass_begin(s, order, 1), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_streamer_enter(s, 0, &dev), ORK_OK);
    CU_ASSERT(dev && memcmp(dev, want, bytes[0]) == 0);
    CU_ASSERT_EQUAL_FATAL(ork_streamer_leave(s, 0), ORK_OK);
    CU_ASSERT_EQUAL(ork_streamer_pass_end(s), ORK_OK);
    ork_streamer_stats_get(s, &stats);
    CU_ASSERT(stats.h2d_bytes < 0.85 * (double)bytes[0] && stats.h2d_bytes > 0.7 * (double)bytes[0]);
    ork_streamer_destroy(s);
    free(want);
    free(w);
    free(sc);
    ork_copy_engine_destroy(ce);
    ork_alloc_destroy(a);
}

/* Loads per step: forward once each, backward once each for blocks >=
 * first_trainable, the last block's two uses merged into one load. */
static void test_loads_per_step(void) {
    toy_init(&g_toy, NB, 16, 8);
    uint8_t st[NB] = {1, 1, 1, 1, 1, 1, 1, 1};
    toy_run_opts o = base_opts();
    o.streamed = st;
    o.forward_only_check = 0;
    o.steps = 3;
    toy_run_out got;
    run_ok(&o, &got);
    /* per step: 8 forward + blocks 6..1 in backward (7 merged) = 14 visits; with
     * 2 slots block 6's backward finds its forward copy in place, and from the
     * second pass on block 1 (the last backward visit) is still in the slot the
     * ring's rotation gives the next forward's block 1: 13 + 12 + 12 copies */
    CU_ASSERT_EQUAL(got.loads, 13 + 12 + 12);
    toy_out_free(&got);
}

/* A streamed block's weight looked up outside the block's run fails. */
static void test_lookup_outside_block(void) {
    toy_init(&g_toy, NB, 16, 8);
    ork_alloc *a;
    ork_graph *g;
    ork_copy_engine *ce;
    ork_wstore *ws;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 1};
    CU_ASSERT_EQUAL_FATAL(ork_graph_create(ork_cpu_backend(), a, &go, &g), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, 4, &ce), ORK_OK);
    uint8_t st[NB] = {0, 0, 1, 0, 0, 0, 0, 0};
    ork_wstore_stream so = {.ce = ce, .streamed = st, .n_slots = 2};
    CU_ASSERT_EQUAL_FATAL(ork_wstore_create_ex(a, ork_cpu_backend(), &g->k, &g_toy.info, ORK_F32, &so, &ws), ORK_OK);
    CU_ASSERT_EQUAL(toy_load(&g_toy, ork_wstore_sink(ws)), ORK_OK);
    CU_ASSERT_EQUAL(ork_wstore_check_complete(ws), ORK_OK);
    ork_wstore_attach(ws, g);
    CU_ASSERT(ork_wstore_resident_bytes(ws) < ork_wstore_bytes(ws));
    CU_ASSERT(ork_alloc_in_use(a, "weights") == ork_wstore_resident_bytes(ws));
    const ork_tensor_api *ta = ork_tensor_api_table();
    ork_tensor *w;
    CU_ASSERT_EQUAL(ta->weight(g, "blocks.1.fc1.weight", &w), ORK_OK); /* resident */
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ta->weight(g, "blocks.2.fc1.weight", &w), ORK_OK);
    ork_log_set_level(ORK_LOG_INFO);
    ork_block_hooks hk;
    ork_wstore_hooks(ws, &hk);
    CU_ASSERT(hk.streaming);
    int order[1] = {2};
    CU_ASSERT_EQUAL(hk.pass_begin(hk.ctx, order, 1), ORK_OK);
    CU_ASSERT_EQUAL(hk.enter(hk.ctx, 2), ORK_OK);
    CU_ASSERT_EQUAL(ta->weight(g, "blocks.2.fc1.weight", &w), ORK_OK);
    /* the values arrived: compare with a resident store of the same model */
    ork_wstore *ref;
    CU_ASSERT_EQUAL_FATAL(ork_wstore_create(a, ork_cpu_backend(), &g->k, &g_toy.info, ORK_F32, &ref), ORK_OK);
    CU_ASSERT_EQUAL(toy_load(&g_toy, ork_wstore_sink(ref)), ORK_OK);
    ork_tensor *rw = ork_wstore_find(ref, "blocks.2.fc1.weight");
    CU_ASSERT_EQUAL(memcmp(ork_tensor_data(w), ork_tensor_data(rw), ork_tensor_nbytes(rw)), 0);
    ork_wstore_destroy(ref);
    CU_ASSERT_EQUAL(hk.leave(hk.ctx, 2), ORK_OK);
    CU_ASSERT_EQUAL(hk.pass_end(hk.ctx), ORK_OK);
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_NOT_EQUAL(ta->weight(g, "blocks.2.fc1.weight", &w), ORK_OK);
    ork_log_set_level(ORK_LOG_INFO);
    ork_wstore_destroy(ws);
    ork_copy_engine_destroy(ce);
    ork_graph_destroy(g);
    CU_ASSERT_EQUAL(ork_alloc_in_use(a, NULL), 0);
    ork_alloc_destroy(a);
}

/* Streaming without checkpointing is refused with one line. */
static void test_needs_checkpointing(void) {
    toy_init(&g_toy, 4, 8, 4);
    ork_alloc *a;
    ork_graph *g;
    ork_copy_engine *ce;
    ork_wstore *ws;
    ork_runner *r;
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(ork_cpu_backend(), 0, &a), ORK_OK);
    ork_graph_opts go = {.act_dtype = ORK_F32, .nthreads = 1};
    CU_ASSERT_EQUAL_FATAL(ork_graph_create(ork_cpu_backend(), a, &go, &g), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create_cpu(ORK_CE_EAGER, 4, &ce), ORK_OK);
    uint8_t st[4] = {0, 1, 0, 0};
    ork_wstore_stream so = {.ce = ce, .streamed = st, .n_slots = 2};
    CU_ASSERT_EQUAL_FATAL(ork_wstore_create_ex(a, ork_cpu_backend(), &g->k, &g_toy.info, ORK_F32, &so, &ws), ORK_OK);
    ork_model_vtable vt = {.begin = toy_begin, .block = toy_block};
    CU_ASSERT_EQUAL_FATAL(ork_runner_create(g, a, &vt, &g_toy, &g_toy.info, &r), ORK_OK);
    ork_block_hooks hk;
    ork_wstore_hooks(ws, &hk);
    ork_runner_set_hooks(r, &hk);
    ork_model_inputs in = {0};
    float loss;
    ork_log_set_level(ORK_LOG_ERROR + 1);
    CU_ASSERT_EQUAL(ork_runner_step(r, &in, 0, toy_loss, NULL, &loss), ORK_E_CONFIG);
    ork_log_set_level(ORK_LOG_INFO);
    ork_runner_destroy(r);
    ork_wstore_destroy(ws);
    ork_copy_engine_destroy(ce);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
}

static const ork_test_case cases[] = {
    {"copy engine: eager and deferred", test_copy_engine_modes},
    {"records: data + scales contiguous, aligned", test_rec_layout},
    {"streamer: schedule, merged visit, order errors", test_streamer_schedule},
    {"streamed == resident, bit for bit", test_streamed_equals_resident},
    {"copy engine lane timing", test_copy_engine_timing},
    {"lane trace: the streamer's marks and loads", test_copy_engine_trace},
    {"coded in transit == resident, bit for bit", test_coded_equals_resident},
    {"FP8 E5M2 and uniform E4M3 blocks coded by the two-level byte codec", test_streamer_coding_fp8},
    {"a sample unlike its block: the other codec sizes it too", test_streamer_codec_fallback},
    {"streamer: coding, raw fallback, read back", test_streamer_coding},
    {"streamer: lent memory carries the forward's loads", test_streamer_lend},
    {"streamer: the dead checkpoints carry the next forward's first loads", test_streamer_ahead},
    {"loads per step", test_loads_per_step},
    {"lookup outside the block is refused", test_lookup_outside_block},
    {"streaming needs checkpointing", test_needs_checkpointing},
    {NULL, NULL},
};

ORK_TEST_MAIN("stream", NULL, NULL, cases)
