/* test_dist_bucket.c — dist/bucket.h: the flat gradient layout (aligned,
 * disjoint, inside the buffer, backward block order), buckets cut at block
 * boundaries within the cap, and the launch rule: in bucket order only, a
 * bucket once all its blocks are done, the tail at flush, duplicates ignored. */
#include "ork_test.h"

#include "dist/bucket.h"

/* 6 blocks; params of block b: 2 each (down, up) of sizes 10·(b+1) and 7; block 2 has none; one param out of range. */
static void make(int64_t cap, ork_bucket_plan *p, int *np_out, int64_t *numel, int *block) {
    int np = 0;
    for (int b = 0; b < 6; b++) {
        if (b == 2) continue;
        numel[np] = 10 * (b + 1); block[np++] = b;
        numel[np] = 7; block[np++] = b;
    }
    numel[np] = 5; block[np++] = -1;
    *np_out = np;
    CU_ASSERT_EQUAL_FATAL(ork_bucket_plan_make(np, numel, block, 6, cap, 4, p), ORK_OK);
}

static void test_layout(void) {
    ork_bucket_plan p;
    int64_t numel[16];
    int block[16], np;
    make(40, &p, &np, numel, block);
    for (int i = 0; i < np; i++) {
        CU_ASSERT_EQUAL(p.offset[i] % 4, 0);
        CU_ASSERT(p.offset[i] + numel[i] <= p.total);
        for (int q = 0; q < np; q++)
            if (q != i) CU_ASSERT(p.offset[i] + numel[i] <= p.offset[q] || p.offset[q] + numel[q] <= p.offset[i]);
        /* backward order: a later block's params come first; the out-of-range one last */
        for (int q = 0; q < np; q++)
            if (block[i] >= 0 && block[q] >= 0 && block[i] > block[q]) CU_ASSERT(p.offset[i] < p.offset[q]);
        if (block[i] < 0)
            for (int q = 0; q < np; q++)
                if (q != i) CU_ASSERT(p.offset[q] < p.offset[i]);
    }
    /* buckets: contiguous, within the cap unless one block alone exceeds it */
    CU_ASSERT(p.n_buckets >= 3);
    for (int k = 0; k < p.n_buckets; k++) {
        CU_ASSERT(p.end[k] > p.begin[k]);
        if (k > 0) CU_ASSERT_EQUAL(p.begin[k], p.end[k - 1]);
        if (p.n_blocks_in[k] > 1) CU_ASSERT(p.end[k] - p.begin[k] <= 40);
    }
    CU_ASSERT_EQUAL(p.begin[0], 0);
    CU_ASSERT_EQUAL(p.end[p.n_buckets - 1], p.total);
    CU_ASSERT_EQUAL(p.n_blocks_in[p.n_buckets - 1], 0); /* the tail */
    CU_ASSERT_EQUAL(p.bucket_of_block[2], -1);
    /* every param lies inside its block's bucket */
    for (int i = 0; i < np; i++) {
        if (block[i] < 0) continue;
        int k = p.bucket_of_block[block[i]];
        CU_ASSERT(p.offset[i] >= p.begin[k] && p.offset[i] + numel[i] <= p.end[k]);
    }
    ork_bucket_plan_free(&p);
}

static void test_launch_order(void) {
    ork_bucket_plan p;
    int64_t numel[16];
    int block[16], np, first, launched = 0;
    make(40, &p, &np, numel, block);
    /* the backward order: 5, 4, 3, 2, 1, 0 */
    for (int b = 5; b >= 0; b--) {
        int n = ork_bucket_block_done(&p, b, &first);
        if (n) {
            CU_ASSERT_EQUAL(first, launched); /* in order, no gaps */
            for (int k = first; k < first + n; k++) CU_ASSERT(p.bucket_of_block[b] >= k);
            launched += n;
        }
        CU_ASSERT_EQUAL(ork_bucket_block_done(&p, b, &first), 0); /* twice: nothing */
    }
    CU_ASSERT_EQUAL(launched, p.n_buckets - 1); /* all but the tail */
    CU_ASSERT_EQUAL(ork_bucket_flush(&p, &first), 1);
    CU_ASSERT_EQUAL(first, p.n_buckets - 1);
    /* out of order: a bucket waits for the ones before it */
    ork_bucket_reset(&p);
    CU_ASSERT_EQUAL(ork_bucket_block_done(&p, 0, &first), 0);
    CU_ASSERT_EQUAL(ork_bucket_block_done(&p, 1, &first), 0);
    int n = ork_bucket_block_done(&p, 5, &first);
    CU_ASSERT(n >= 1);
    CU_ASSERT_EQUAL(first, 0);
    /* flush: the rest, once */
    int rest = ork_bucket_flush(&p, &first);
    CU_ASSERT_EQUAL(first + rest, p.n_buckets);
    CU_ASSERT_EQUAL(ork_bucket_flush(&p, &first), 0);
    ork_bucket_plan_free(&p);
}

static void test_one_bucket_and_bad_args(void) {
    ork_bucket_plan p;
    int64_t numel[16];
    int block[16], np, first;
    make(1 << 30, &p, &np, numel, block);
    CU_ASSERT_EQUAL(p.n_buckets, 2); /* every block + the tail */
    for (int b = 5; b >= 1; b--) CU_ASSERT_EQUAL(ork_bucket_block_done(&p, b, &first), 0);
    CU_ASSERT_EQUAL(ork_bucket_block_done(&p, 0, &first), 1);
    ork_bucket_plan_free(&p);
    int64_t bad[1] = {-1};
    int blk[1] = {0};
    CU_ASSERT_EQUAL(ork_bucket_plan_make(1, bad, blk, 1, 10, 1, &p), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_bucket_plan_make(1, numel, blk, 1, 0, 1, &p), ORK_E_INVALID);
    CU_ASSERT_EQUAL(ork_bucket_plan_make(0, NULL, NULL, 3, 10, 1, &p), ORK_OK);
    CU_ASSERT_EQUAL(p.n_buckets, 0);
    CU_ASSERT_EQUAL(ork_bucket_flush(&p, &first), 0);
    ork_bucket_plan_free(&p);
}

static const ork_test_case cases[] = {
    {"layout", test_layout},
    {"launch_order", test_launch_order},
    {"one_bucket_and_bad_args", test_one_bucket_and_bad_args},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_bucket", NULL, NULL, cases)
