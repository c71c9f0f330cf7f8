/* tests/stream/test_stream_cuda.c — the streamed-vs-resident comparison on
 * CUDA (BF16 weights and activations, the CUDA copy engine: its own
 * non-blocking H2D stream, events, pinned arenas): losses, LoRA weights and
 * forward outputs bit for bit, for several residency patterns and ring
 * sizes. Exits 77 without a CUDA device. */
#include "ork_test.h"

#define NB 8

#ifdef ORAKUL_HAVE_CUDA
#include "toy_model.h"

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

static const ork_test_case cases[] = {
    {"cuda: streamed == resident, bit for bit", test_cuda_streamed_equals_resident},
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
