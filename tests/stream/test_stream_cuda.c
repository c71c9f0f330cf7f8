/* tests/stream/test_stream_cuda.c — the streamed-vs-resident comparison on
 * CUDA (BF16 weights and activations, the CUDA copy engine: its own
 * non-blocking H2D stream, events, pinned arenas): losses, LoRA weights and
 * forward outputs bit for bit, for several residency patterns and ring
 * sizes. Exits 77 without a CUDA device. */
#include "ork_test.h"

#define NB 8

#ifdef ORAKUL_HAVE_CUDA
#include "toy_model.h"

#include <time.h>

int ork_cuda_device_count(void);

static toy g_toy;

static void same(const toy_run_out *ref, const toy_run_out *got, const char *what) {
    int ok = memcmp(ref->loss, got->loss, sizeof ref->loss) == 0 && ref->n_params == got->n_params &&
             memcmp(ref->params, got->params, ref->n_params * sizeof(float)) == 0 && ref->n_fwd == got->n_fwd &&
             memcmp(ref->fwd, got->fwd, ref->n_fwd * sizeof(float)) == 0;
    if (!ok) printf("\n  %s: differs from the resident run (loss %.9g vs %.9g)\n", what, got->loss[3], ref->loss[3]);
    CU_ASSERT(ok);
}

static void test_cuda_streamed_equals_resident(void) {
    toy_init(&g_toy, NB, 64, 16);
    toy_run_opts o = {.be = ork_cuda_backend(), .store_dt = ORK_BF16, .act_dt = ORK_BF16, .steps = 4,
                      .forward_only_check = 1};
    toy_run_out ref, got;
    CU_ASSERT_EQUAL_FATAL(toy_train(&g_toy, &o, &ref), ORK_OK);
    struct { const char *name; uint8_t st[NB]; int slots, compress; } cases[] = {
        {"all blocks, 2 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 2, 0},
        {"all blocks, 3 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 3, 0},
        {"every other block", {0, 1, 0, 1, 0, 1, 0, 1}, 2, 0},
        {"last block only", {0, 0, 0, 0, 0, 0, 0, 1}, 2, 0},
        /* coded in transit: decoded on the device by the H2D lane's kernels */
        {"all blocks coded, 2 slots", {1, 1, 1, 1, 1, 1, 1, 1}, 2, 1},
        {"every other block coded, 3 slots", {0, 1, 0, 1, 0, 1, 0, 1}, 3, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        toy_run_opts s = o;
        s.streamed = cases[c].st;
        s.n_slots = cases[c].slots;
        s.compress = cases[c].compress;
        CU_ASSERT_EQUAL_FATAL(toy_train(&g_toy, &s, &got), ORK_OK);
        same(&ref, &got, cases[c].name);
        CU_ASSERT(got.loads > 0);
        if (cases[c].compress) CU_ASSERT(got.n_coded > 0 && got.h2d_bytes < got.raw_bytes * 0.8);
        toy_out_free(&got);
    }
    toy_out_free(&ref);
}

/* Lane timing on the CUDA engine (event pairs on the lane's stream): 8 copies
 * of 256 MiB each way count on their lanes, no more than the wall time around
 * them; the rate is printed (the link's, per direction alone), never asserted. */
static void test_cuda_lane_timing(void) {
    const ork_backend *be = ork_cuda_backend();
    ork_alloc *a = NULL;
    ork_graph *g = NULL;
    ork_copy_engine *ce = NULL;
    ork_graph_opts go = {.act_dtype = ORK_BF16, .nthreads = 1};
    CU_ASSERT_EQUAL_FATAL(ork_alloc_create(be, 0, &a), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_graph_create(be, a, &go, &g), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_copy_engine_create(be, &g->k, 2, &ce), ORK_OK);
    const size_t n = (size_t)256 << 20;
    void *host = NULL, *dev = NULL;
    CU_ASSERT_EQUAL_FATAL(ork_ce_host_alloc(ce, n, &host), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_alloc_get(a, n, "timing", &dev), ORK_OK);
    memset(host, 1, n);
    CU_ASSERT_EQUAL(ork_ce_set_timing(ce, 1), ORK_OK);
    double c[2] = {0, 0}, d = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 8; k++) {
        CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_H2D, dev, host, n), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_record(ce, ORK_LANE_H2D, 0), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_wait(ce, ORK_LANE_D2H, 0), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_copy(ce, ORK_LANE_D2H, host, dev, n), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_record(ce, ORK_LANE_D2H, 1), ORK_OK);
        CU_ASSERT_EQUAL(ork_ce_wait(ce, ORK_LANE_H2D, 1), ORK_OK);
    }
    CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_H2D, &c[0], &d), ORK_OK);
    CU_ASSERT_EQUAL(ork_ce_busy(ce, ORK_LANE_D2H, &c[1], NULL), ORK_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CU_ASSERT(c[0] > 0 && c[1] > 0 && c[0] + c[1] <= wall * 1.01);
    CU_ASSERT(d == 0);
    printf("\n  lane timing: H2D %.1f GB/s, D2H %.1f GB/s busy (alternating, %.3f s wall)\n", 8 * (double)n / c[0] / 1e9,
           8 * (double)n / c[1] / 1e9, wall);
    CU_ASSERT_EQUAL(ork_ce_sync(ce), ORK_OK);
    ork_alloc_put(a, dev);
    ork_ce_host_free(ce, host);
    ork_copy_engine_destroy(ce);
    ork_graph_destroy(g);
    ork_alloc_destroy(a);
}

static const ork_test_case cases[] = {
    {"cuda: streamed == resident, bit for bit", test_cuda_streamed_equals_resident},
    {"cuda: copy lane timing", test_cuda_lane_timing},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("stream_cuda", NULL, NULL, cases);
}
#else
int main(void) {
    printf("built without CUDA: skipped\n");
    return 77;
}
#endif
