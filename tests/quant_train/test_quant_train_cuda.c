/* test_quant_train_cuda.c — model.quantize on CUDA (gpu label; exits 77
 * without a device): the tiny FLUX of tests/train trains 3 steps through
 * `orakul run` with device cuda:0, unquantized (bf16 weights) and with
 * qfloat8 (fp8 E4M3 bytes + per-row scales resident on the GPU, dequantized
 * into a bf16 scratch before each GEMM), and once more with qfloat8 and half
 * the transformer blocks streamed (the fp8 records cross PCIe). Asserts: all
 * runs finish, losses are finite, the quantized step-1 loss is within a few
 * percent of the bf16 run's and the streamed run's losses equal the resident
 * quantized run's (same bytes, same kernels). */
#include "quant_train_util.h"

int ork_cuda_device_count(void);

static char g_root[1024], g_data[1100];

static int setup(void) {
    if (tt_setup("qtrain_cuda", g_root, sizeof g_root) != 0) return 1;
    tt_fmt(g_data, sizeof g_data, "%s/data", g_root);
    return 0;
}
static int teardown(void) { tt_rm_rf(g_root); return 0; }

static int run(const char *tag, const char *qtype, int stream, tt_losses *L) {
    char cfg[1200], log[1200], out[1200], e[1300];
    tt_fmt(cfg, sizeof cfg, "%s/%s.yaml", g_root, tag);
    tt_fmt(log, sizeof log, "%s/%s", g_root, tag);
    tt_fmt(out, sizeof out, "%s/out_%s", g_root, tag);
    tt_fmt(e, sizeof e, "%s.err", log);
    qt_opts o = {.out = out, .data = g_data, .steps = 3, .qtype = qtype, .device = "cuda:0", .stream = stream};
    if (qt_write_config(cfg, &o) != 0) return -1;
    int rc = tt_run(cfg, log, 300);
    tt_losses lo;
    tt_parse_losses(e, L);
    if (L->n == 0) {
        char o2[1300];
        tt_fmt(o2, sizeof o2, "%s.out", log);
        tt_parse_losses(o2, &lo);
        *L = lo;
    }
    return rc;
}

static void test_cuda_qfloat8(void) {
    static tt_losses B, Q, S;
    CU_ASSERT_FATAL(run("bf16", NULL, 0, &B) == 0);
    CU_ASSERT_FATAL(run("qfloat8", "qfloat8", 0, &Q) == 0);
    CU_ASSERT(run("qfloat8_streamed", "qfloat8", 1, &S) == 0);
    CU_ASSERT_FATAL(B.n == 3 && Q.n == 3);
    for (int s = 0; s < 3; s++) CU_ASSERT(isfinite(B.loss[s]) && isfinite(Q.loss[s]));
    double d = fabs(Q.loss[0] - B.loss[0]) / B.loss[0];
    printf("  step-1 loss: bf16 %s, qfloat8 %s (%.3f%%), streamed %s\n", B.text[0], Q.text[0], 100 * d,
           S.n ? S.text[0] : "-");
    CU_ASSERT(d < 0.026);
    CU_ASSERT(S.n == 3);
    for (int s = 0; s < S.n && s < 3; s++) CU_ASSERT(!strcmp(S.text[s], Q.text[s]));
}

static const ork_test_case cases[] = {{"train_qfloat8_cuda", test_cuda_qfloat8}, {NULL, NULL}};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("quant_train_cuda", setup, teardown, cases);
}
