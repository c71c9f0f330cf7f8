/* test_quant_fp8_train.c — model.quantize_kwargs.fp8_gemm through `orakul run`
 * on the tiny FLUX of tests/train (tests/quant_train/quant_train_util.h).
 * Built twice:
 *   test_quant_fp8_cfg (cpu label, ORK_FP8_TRAIN_CPU): `fp8_gemm: native` on
 *     device cpu exits 2 with one error line naming the key (the CPU has no
 *     native FP8 GEMM); `fp8_gemm: fast` exits 2 naming the allowed values;
 *   test_quant_fp8_train (gpu label, 77 without a device): qfloat8 trains 3
 *     steps with fp8_gemm dequant and native on cuda:0; both finish with finite
 *     losses and the native step-1 loss is within 3% of the dequant one (the
 *     activations' E4M3 rounding moves the prediction by ~2.6% of its size, the
 *     loss, dominated by the target, by less). Layers the native path cannot
 *     take (tiny shapes cuBLASLt FP8 refuses) fall back with one WARN line. */
#include "../quant_train/quant_train_util.h"

int ork_cuda_device_count(void);

static char g_root[1024], g_data[1100];

static int setup(void) {
    if (tt_setup("qfp8", g_root, sizeof g_root) != 0) return 1;
    tt_fmt(g_data, sizeof g_data, "%s/data", g_root);
    return 0;
}
static int teardown(void) { tt_rm_rf(g_root); return 0; }

static int run(const char *tag, const char *kwargs, const char *device, char **err, tt_losses *L) {
    char cfg[1200], log[1200], out[1200], e[1300], lo[1300];
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", g_root, tag);
    tt_fmt(log, sizeof log, "%s/%s", g_root, tag);
    tt_fmt(out, sizeof out, "%s/out_%s", g_root, tag);
    tt_fmt(e, sizeof e, "%s.err", log);
    tt_fmt(lo, sizeof lo, "%s.out", log);
    qt_opts o = {.out = out, .data = g_data, .steps = 3, .qtype = "qfloat8", .kwargs = kwargs, .device = device};
    if (qt_write_config(cfg, &o) != 0) return -1;
    int rc = tt_run_q(cfg, log, 300, err != NULL);
    if (err) *err = tt_read_all(e, NULL);
    if (L) {
        tt_parse_losses(e, L);
        if (L->n == 0) tt_parse_losses(lo, L);
    }
    return rc;
}

#ifdef ORK_FP8_TRAIN_CPU
static void test_native_refused_on_cpu(void) {
    char line[2048];
    char *err = NULL;
    int rc = run("native_cpu", "{fp8_gemm: native}", NULL, &err, NULL);
    CU_ASSERT(rc == 2);
    CU_ASSERT(qt_error_lines(err, line, sizeof line) == 1);
    printf("  %s\n", line);
    CU_ASSERT(strstr(line, "model.quantize_kwargs.fp8_gemm: native") != NULL);
    CU_ASSERT(err && !strstr(err, "step 1/"));
    free(err);
    err = NULL;
    rc = run("fast_cpu", "{fp8_gemm: fast}", NULL, &err, NULL);
    CU_ASSERT(rc == 2);
    CU_ASSERT(qt_error_lines(err, line, sizeof line) == 1);
    printf("  %s\n", line);
    CU_ASSERT(strstr(line, "fp8_gemm") && strstr(line, "native"));
    free(err);
}

static const ork_test_case cases[] = {{"fp8_gemm native refused on cpu", test_native_refused_on_cpu}, {NULL, NULL}};

int main(void) { return ork_test_run("quant_fp8_cfg", setup, teardown, cases); }
#else
static void test_native_trains(void) {
    static tt_losses D, N;
    char *err = NULL;
    CU_ASSERT_FATAL(run("dequant", NULL, "cuda:0", NULL, &D) == 0);
    int rc = run("native", "{fp8_gemm: native}", "cuda:0", &err, &N);
    if (rc != 0) printf("  native run: exit %d\n%s\n", rc, err ? err : "");
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT_FATAL(D.n == 3 && N.n == 3);
    for (int s = 0; s < 3; s++) CU_ASSERT(isfinite(D.loss[s]) && isfinite(N.loss[s]));
    double d = fabs(N.loss[0] - D.loss[0]) / D.loss[0];
    printf("  step-1 loss: qfloat8 dequant %s, native %s (%.3f%%); steps 2, 3: %s %s / %s %s\n", D.text[0], N.text[0],
           100 * d, D.text[1], D.text[2], N.text[1], N.text[2]);
    CU_ASSERT(d < 0.03);
    const char *fb = err ? strstr(err, "native fp8 GEMM not used") : NULL;
    if (fb) {
        const char *eol = strchr(fb, '\n');
        printf("  fallback: %.*s\n", eol ? (int)(eol - fb) : (int)strlen(fb), fb);
        CU_ASSERT(strstr(fb + 1, "native fp8 GEMM not used") == NULL); /* logged once */
    }
    free(err);
}

static const ork_test_case cases[] = {{"train qfloat8, fp8_gemm native on cuda", test_native_trains}, {NULL, NULL}};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("quant_fp8_train", setup, teardown, cases);
}
#endif
