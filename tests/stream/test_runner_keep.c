/* tests/stream/test_runner_keep.c — keep instead of recompute (train/runner.h,
 * issue #31): a training run whose trailing blocks keep their recorded forward
 * (ORAKUL_KEEP_BLOCKS=N) gives bit-identical losses, LoRA weights and forward
 * outputs to the run that recomputes every block; the runner says how many it
 * kept; the first step (nothing measured yet) recomputes all; a malformed
 * ORAKUL_KEEP_BLOCKS is refused with one line. Uses the streaming tests' toy
 * block model (toy_model.h). */
#include "ork_test.h"

#include "toy_model.h"

#include "util/log.h"

#define NB 8

static toy g_toy;
static char g_kept_line[256];
static int g_kept_lines;

static void sink(ork_log_level lvl, const char *line, void *user) {
    (void)lvl;
    (void)user;
    if (strstr(line, "recompute:")) {
        snprintf(g_kept_line, sizeof g_kept_line, "%s", line);
        g_kept_lines++;
    }
}

static toy_run_opts opts(ork_dtype act) {
    toy_run_opts o = {.be = ork_cpu_backend(), .store_dt = ORK_F32, .act_dt = act, .steps = 4, .forward_only_check = 1};
    return o;
}

static int same(const toy_run_out *ref, const toy_run_out *got) {
    return memcmp(ref->loss, got->loss, sizeof ref->loss) == 0 && ref->n_params == got->n_params &&
           memcmp(ref->params, got->params, ref->n_params * sizeof(float)) == 0 && ref->n_fwd == got->n_fwd &&
           memcmp(ref->fwd, got->fwd, ref->n_fwd * sizeof(float)) == 0;
}

/* keep = NULL: the variable unset */
static ork_status run(const char *keep, ork_dtype act, toy_run_out *out) {
    if (keep) setenv("ORAKUL_KEEP_BLOCKS", keep, 1);
    else unsetenv("ORAKUL_KEEP_BLOCKS");
    g_kept_line[0] = 0;
    g_kept_lines = 0;
    toy_run_opts o = opts(act);
    ork_status s = toy_train(&g_toy, &o, out);
    unsetenv("ORAKUL_KEEP_BLOCKS");
    return s;
}

static void test_kept_equals_recomputed(void) {
    toy_init(&g_toy, NB, 16, 8);
    ork_log_set_sink(sink, NULL);
    const ork_dtype acts[1] = {ORK_F32}; /* the CPU backend's activations */
    for (int a = 0; a < 1; a++) {
        toy_run_out ref, got;
        CU_ASSERT_EQUAL_FATAL(run(NULL, acts[a], &ref), ORK_OK);
        CU_ASSERT_EQUAL(g_kept_lines, 0); /* nothing kept unless asked */
        CU_ASSERT(ref.loss[3] != ref.loss[0]); /* it trains */
        /* blocks 1..7 hold LoRA (first trainable 1): "100" keeps all 7 */
        const char *ks[] = {"0", "1", "3", "7", "100"};
        const int want[] = {0, 1, 3, 7, 7};
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
            CU_ASSERT_EQUAL_FATAL(run(ks[k], acts[a], &got), ORK_OK);
            int ok = same(&ref, &got);
            if (!ok) printf("\n  ORAKUL_KEEP_BLOCKS=%s (%s): differs from recomputing (loss %.9g vs %.9g)\n", ks[k],
                            "f32", got.loss[3], ref.loss[3]);
            CU_ASSERT(ok);
            /* decided once, after the first (measuring) step, and said in one line */
            CU_ASSERT_EQUAL(g_kept_lines, want[k] ? 1 : 0);
            if (want[k]) {
                char expect[64];
                snprintf(expect, sizeof expect, "recompute: %d of 7 trainable blocks", want[k]);
                CU_ASSERT_PTR_NOT_NULL(strstr(g_kept_line, expect));
            }
            toy_out_free(&got);
        }
        toy_out_free(&ref);
    }
    ork_log_set_sink(NULL, NULL);
}

static void test_keep_env_malformed(void) {
    toy_init(&g_toy, NB, 16, 8);
    const char *bad[] = {"abc", "-1", "3x", " 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        toy_run_out got;
        ork_status s = run(bad[i], ORK_F32, &got);
        CU_ASSERT_EQUAL(s, ORK_E_CONFIG);
        if (s == ORK_OK) toy_out_free(&got);
    }
}

static const ork_test_case cases[] = {
    {"kept blocks == recomputed, bitwise", test_kept_equals_recomputed},
    {"ORAKUL_KEEP_BLOCKS malformed", test_keep_env_malformed},
    {NULL, NULL},
};

ORK_TEST_MAIN("runner_keep", NULL, NULL, cases)
