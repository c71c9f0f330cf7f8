/* test_dist_shard.c — dist/shard.h: the data position of global micro-batch
 * k is the single-process trainer's old rule for world 1; advancing composes;
 * the position a state records lets a resume with another number of GPUs
 * continue from the same sample (no sample skipped or repeated within the
 * epoch); rank slices of a global batch are disjoint and cover it; short
 * batches wrap. */
#include "ork_test.h"

#include "dist/shard.h"

/* The trainer's rule before core/dist: per_epoch = ceil(n / B); k -> (k / per_epoch, (k % per_epoch) · B). */
static ork_data_pos old_rule(int64_t n, int64_t B, int64_t k) {
    int64_t per = (n + B - 1) / B;
    return (ork_data_pos){k / per, (k % per) * B};
}

static void test_world1_is_the_old_rule(void) {
    for (int64_t n = 1; n <= 13; n++)
        for (int64_t B = 1; B <= 6; B++)
            for (int64_t k = 0; k < 60; k++) {
                ork_data_pos a = ork_shard_advance(n, B, (ork_data_pos){0, 0}, k), b = old_rule(n, B, k);
                if (a.epoch != b.epoch || a.offset != b.offset) {
                    printf("  n %lld B %lld k %lld: (%lld, %lld) vs (%lld, %lld)\n", (long long)n, (long long)B,
                           (long long)k, (long long)a.epoch, (long long)a.offset, (long long)b.epoch,
                           (long long)b.offset);
                    CU_FAIL("old rule");
                    return;
                }
            }
}

static void test_advance_composes(void) {
    for (int64_t n = 1; n <= 11; n++)
        for (int64_t g = 1; g <= 7; g++)
            for (int64_t m1 = 0; m1 < 20; m1++)
                for (int64_t m2 = 0; m2 < 20; m2 += 3) {
                    ork_data_pos z = {0, 0};
                    ork_data_pos a = ork_shard_advance(n, g, ork_shard_advance(n, g, z, m1), m2);
                    ork_data_pos b = ork_shard_advance(n, g, z, m1 + m2);
                    CU_ASSERT(a.epoch == b.epoch && a.offset == b.offset);
                    CU_ASSERT(b.offset >= 0 && b.offset < n);
                }
}

/* Positions visited in one epoch when the global batch changes from g1 to g2
 * after m1 batches: every batch starts where the previous one ended, until
 * the epoch ends; the next epoch starts at 0. */
static void test_resume_other_world(void) {
    const int64_t n = 20;
    for (int64_t g1 = 1; g1 <= 8; g1++)
        for (int64_t g2 = 1; g2 <= 8; g2++)
            for (int64_t m1 = 1; m1 * g1 < n; m1++) {
                ork_data_pos saved = ork_shard_advance(n, g1, (ork_data_pos){0, 0}, m1);
                CU_ASSERT_EQUAL(saved.epoch, 0);
                CU_ASSERT_EQUAL(ork_shard_samples(n, saved), m1 * g1); /* what the state records */
                /* the resumed run: anchor (saved, k0 = m1) with g2 */
                int64_t expect = saved.offset;
                for (int64_t m = 0;; m++) {
                    ork_data_pos p = ork_shard_advance(n, g2, saved, m);
                    if (p.epoch != 0) {
                        CU_ASSERT_EQUAL(p.epoch, 1);
                        CU_ASSERT_EQUAL(p.offset, 0);
                        CU_ASSERT(expect >= n); /* the epoch was used up */
                        break;
                    }
                    CU_ASSERT_EQUAL(p.offset, expect);
                    expect += g2;
                }
            }
    /* a position at the end of an epoch (or past a shrunken dataset) is the next epoch's start */
    ork_data_pos e = ork_shard_advance(10, 4, (ork_data_pos){3, 10}, 0);
    CU_ASSERT(e.epoch == 4 && e.offset == 0);
    e = ork_shard_advance(10, 4, (ork_data_pos){3, 15}, 1);
    CU_ASSERT(e.epoch == 4 && e.offset == 4);
}

static void test_slices_disjoint_cover(void) {
    int elem[64];
    for (int W = 1; W <= 8; W++)
        for (int B = 1; B <= 8; B++) {
            int G = W * B, seen[64] = {0};
            for (int r = 0; r < W; r++) {
                int n = ork_shard_slice(G, W, r, B, elem);
                CU_ASSERT_EQUAL(n, B);
                for (int i = 0; i < n; i++) {
                    CU_ASSERT(elem[i] >= 0 && elem[i] < G);
                    if (elem[i] >= 0 && elem[i] < G) seen[elem[i]]++;
                }
            }
            for (int e = 0; e < G; e++) CU_ASSERT_EQUAL(seen[e], 1);
        }
}

static void test_short_batches(void) {
    int elem[16];
    /* one process keeps the short batch it got */
    CU_ASSERT_EQUAL(ork_shard_slice(2, 1, 0, 4, elem), 2);
    CU_ASSERT(elem[0] == 0 && elem[1] == 1);
    /* world 2, batch 2, only 3 items: rank 1 takes elements 2 and 0 */
    CU_ASSERT_EQUAL(ork_shard_slice(3, 2, 1, 2, elem), 2);
    CU_ASSERT(elem[0] == 2 && elem[1] == 0);
    /* a single item: every rank trains on it */
    for (int r = 0; r < 4; r++) {
        CU_ASSERT_EQUAL(ork_shard_slice(1, 4, r, 1, elem), 1);
        CU_ASSERT_EQUAL(elem[0], 0);
    }
    CU_ASSERT_EQUAL(ork_shard_slice(0, 2, 0, 1, elem), 0);
    CU_ASSERT_EQUAL(ork_shard_slice(4, 2, 2, 1, elem), 0); /* no such rank */
}

static const ork_test_case cases[] = {
    {"world1_is_the_old_rule", test_world1_is_the_old_rule},
    {"advance_composes", test_advance_composes},
    {"resume_other_world", test_resume_other_world},
    {"slices_disjoint_cover", test_slices_disjoint_cover},
    {"short_batches", test_short_batches},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_shard", NULL, NULL, cases)
