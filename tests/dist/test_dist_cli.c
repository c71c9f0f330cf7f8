/* test_dist_cli.c — what `orakul run` does with the distributed environment
 * on a machine without GPUs (the tiny CPU config of tests/train):
 *  - --gpus N with a CPU config, --gpus 0, --gpus without a number: exit 2, one line;
 *  - WORLD_SIZE=2 on the CPU backend, WORLD_SIZE=abc, RANK without WORLD_SIZE:
 *    exit 2 with the line naming the variable;
 *  - the world-size-1 path: WORLD_SIZE=1 RANK=0 trains exactly like no
 *    variables at all (same printed losses, same LoRA bytes) and the state
 *    records the data position (data_epoch, data_offset, global_batch). */
#include "../train/train_test_util.h"

static char root[1024], data[1100], cfg[1100];

static int stderr_has(const char *log, const char *needle) {
    char e[1200];
    tt_fmt(e, sizeof e, "%s.err", log);
    if (tt_file_has(e, needle)) return 1;
    char *t = tt_read_all(e, NULL);
    printf("  expected '%s' in:\n%s\n", needle, t ? t : "(no stderr)");
    free(t);
    return 0;
}

/* `orakul run <args...> cfg` with stdout/stderr into log.out/.err; the exit code. */
static int run_args(const char *log, const char *a1, const char *a2) {
    const char *args[5];
    int n = 0;
    args[n++] = "run";
    if (a1) args[n++] = a1;
    if (a2) args[n++] = a2;
    args[n++] = cfg;
    args[n] = NULL;
    return tt_orakul(args, log, 120);
}

/* Does the safetensors header (JSON after the 8-byte length) of path contain needle? */
static int header_has(const char *path, const char *needle) {
    size_t n = 0;
    char *t = tt_read_all(path, &n);
    int r = 0;
    if (t && n > 8) {
        uint64_t hl = 0;
        memcpy(&hl, t, 8);
        if (hl < n - 8) {
            char *h = malloc(hl + 1);
            if (h) {
                memcpy(h, t + 8, hl);
                h[hl] = 0;
                r = strstr(h, needle) != NULL;
                if (!r) printf("  '%s' not in %s\n", needle, h);
                free(h);
            }
        }
    }
    free(t);
    return r;
}

static void clear_env(void) {
    const char *vars[] = {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_RANK", "ORAKUL_DIST_NCCL", NULL};
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
}

static void test_gpus_refused(void) {
    char log[1200];
    tt_fmt(log, sizeof log, "%s/gpus_cpu", root);
    CU_ASSERT_EQUAL(run_args(log, "--gpus", "2"), 2);
#ifdef ORAKUL_HAVE_CUDA
    CU_ASSERT(stderr_has(log, "trains on device: cpu; multi-GPU training needs device: cuda"));
#else
    CU_ASSERT(stderr_has(log, "built without CUDA"));
#endif
    tt_fmt(log, sizeof log, "%s/gpus_zero", root);
    CU_ASSERT_EQUAL(run_args(log, "--gpus=0", NULL), 2);
    CU_ASSERT(stderr_has(log, "--gpus '0': must be a number of GPUs"));
    tt_fmt(log, sizeof log, "%s/gpus_none", root);
    CU_ASSERT_EQUAL(run_args(log, cfg, "--gpus"), 2); /* "run CFG --gpus CFG": no number after --gpus */
}

static void test_env_refused(void) {
    char log[1200];
    clear_env();
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "0", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "1", 1);
    tt_fmt(log, sizeof log, "%s/world2_cpu", root);
    CU_ASSERT_EQUAL(run_args(log, NULL, NULL), 2);
    CU_ASSERT(stderr_has(log, "WORLD_SIZE=2 with device: cpu"));
    setenv("WORLD_SIZE", "abc", 1);
    tt_fmt(log, sizeof log, "%s/world_abc", root);
    CU_ASSERT_EQUAL(run_args(log, NULL, NULL), 2);
    CU_ASSERT(stderr_has(log, "WORLD_SIZE='abc'"));
    clear_env();
    setenv("RANK", "3", 1);
    tt_fmt(log, sizeof log, "%s/rank_only", root);
    CU_ASSERT_EQUAL(run_args(log, NULL, NULL), 2);
    CU_ASSERT(stderr_has(log, "RANK=3 but WORLD_SIZE is not set"));
    clear_env();
}

static void test_world_one(void) {
    char out_a[1100], out_b[1100], log_a[1200], log_b[1200];
    tt_fmt(out_a, sizeof out_a, "%s/plain", root);
    tt_fmt(out_b, sizeof out_b, "%s/world1", root);
    tt_cfg c = tt_cfg_default(out_a, data);
    c.steps = 3;
    c.save_every = 3;
    CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);
    clear_env();
    tt_fmt(log_a, sizeof log_a, "%s/plain", root);
    CU_ASSERT_EQUAL_FATAL(run_args(log_a, NULL, NULL), 0);
    c.out = out_b;
    CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);
    setenv("WORLD_SIZE", "1", 1);
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    tt_fmt(log_b, sizeof log_b, "%s/world1", root);
    CU_ASSERT_EQUAL_FATAL(run_args(log_b, NULL, NULL), 0);
    clear_env();
    static tt_losses A, B;
    char p[1300];
    tt_fmt(p, sizeof p, "%s.out", log_a);
    CU_ASSERT_EQUAL(tt_parse_losses(p, &A), 3);
    tt_fmt(p, sizeof p, "%s.out", log_b);
    CU_ASSERT_EQUAL(tt_parse_losses(p, &B), 3);
    for (int i = 0; i < 3; i++) CU_ASSERT_STRING_EQUAL(A.text[i], B.text[i]);
    char fa[1300], fb[1300];
    tt_fmt(fa, sizeof fa, "%s/quickstart/quickstart_000000003.safetensors", out_a);
    tt_fmt(fb, sizeof fb, "%s/quickstart/quickstart_000000003.safetensors", out_b);
    CU_ASSERT(tt_same_bytes(fa, fb));
    /* the state carries the data position: 3 items, batch 1 -> after 3 steps, epoch 1 offset 0 */
    tt_fmt(fb, sizeof fb, "%s/quickstart/quickstart_state.safetensors", out_b);
    CU_ASSERT(header_has(fb, "\"data_epoch\":\"1\""));
    CU_ASSERT(header_has(fb, "\"data_offset\":\"0\""));
    CU_ASSERT(header_has(fb, "\"global_batch\":\"1\""));
}

static int init(void) {
    if (tt_setup("dist_cli", root, sizeof root) != 0) return 1;
    tt_fmt(data, sizeof data, "%s/data", root);
    tt_fmt(cfg, sizeof cfg, "%s/tiny.yaml", root);
    char out[1100];
    tt_fmt(out, sizeof out, "%s/out", root);
    tt_cfg c = tt_cfg_default(out, data);
    return tt_write_config(cfg, &c);
}

static int clean(void) {
    tt_rm_rf(root);
    return 0;
}

static const ork_test_case cases[] = {
    {"gpus_refused", test_gpus_refused},
    {"env_refused", test_env_refused},
    {"world_one", test_world_one},
    {NULL, NULL},
};
ORK_TEST_MAIN("dist_cli", init, clean, cases)
