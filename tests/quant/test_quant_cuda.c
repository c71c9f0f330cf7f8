/* test_quant_cuda.c — the quant plugin's CUDA dequantize against its CPU
 * dequantize, bit for bit: E4M3 and E5M2, bf16 and f32 outputs, per-row and
 * 1x128 scales, on an aligned FLUX-like shape (vectorised kernel) and ragged
 * shapes / offsets (scalar kernel); and the bf16 / none components' device
 * conversions. Work is enqueued on a non-blocking stream. Exits 77 without a
 * CUDA device. */
#include "quant_test_util.h"

#include "numerics/half.h"

#include <cuda_runtime_api.h>

#define CK(x) CU_ASSERT_FATAL((x) == cudaSuccess)

static cudaStream_t g_stream;

static int init(void) {
    if (qt_init()) return 1;
    return cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess;
}
static int clean(void) {
    cudaStreamDestroy(g_stream);
    return qt_clean();
}

/* Quantize on the CPU, dequantize on both devices, compare bytes. off: elements
 * offset of q and dst on the device (breaks the vector kernel's alignment). */
static void check(const char *name, int64_t block, int64_t rows, int64_t cols, size_t off, uint64_t seed) {
    size_t n = (size_t)(rows * cols);
    qt_inst qi = {0};
    ork_quant_layout l;
    CU_ASSERT_EQUAL_FATAL(qt_make(name, block, 0, &qi), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(qi.vt->layout(qi.self, rows, cols, &l), ORK_OK);
    size_t qe = ork_dtype_size(l.qdtype), ns = (size_t)l.n_scales;
    float *w = malloc(n * 4), *s = malloc((ns ? ns : 1) * 4);
    void *q = malloc(n * qe), *cpu = malloc(n * 4), *gpu = malloc(n * 4);
    CU_ASSERT_FATAL(w && s && q && cpu && gpu);
    qt_fill_gauss(w, n, 0.03f, seed);
    for (size_t i = 0; i < n; i += 997) w[i] *= 40.0f;                    /* outliers */
    for (int64_t r = 3; r < rows; r += 11)                                /* quiet rows */
        for (int64_t c = 0; c < cols; c++) w[r * cols + c] *= 1e-6f;
    CU_ASSERT_EQUAL_FATAL(qi.vt->quantize(qi.self, "g", ORK_F32, w, rows, cols, 0, q, s), ORK_OK);
    char *dq, *dd;
    float *ds = NULL;
    CK(cudaMalloc((void **)&dq, n * qe + 64));
    CK(cudaMalloc((void **)&dd, n * 4 + 64));
    if (ns) CK(cudaMalloc((void **)&ds, ns * 4));
    CK(cudaMemcpyAsync(dq + off * qe, q, n * qe, cudaMemcpyHostToDevice, g_stream));
    if (ns) CK(cudaMemcpyAsync(ds, s, ns * 4, cudaMemcpyHostToDevice, g_stream));
    for (int o = 0; o < 2; o++) {
        ork_dtype odt = o ? ORK_BF16 : ORK_F32;
        size_t ob = n * ork_dtype_size(odt);
        CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CPU, NULL, q, s, rows, cols, odt, cpu), ORK_OK);
        CK(cudaMemsetAsync(dd, 0xFF, n * 4 + 64, g_stream));
        CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CUDA, g_stream, dq + off * qe, ds, rows, cols, odt, dd + off * 4),
                        ORK_OK);
        CK(cudaMemcpyAsync(gpu, dd + off * 4, ob, cudaMemcpyDeviceToHost, g_stream));
        CK(cudaStreamSynchronize(g_stream));
        int same = memcmp(cpu, gpu, ob) == 0;
        CU_ASSERT(same);
        if (!same) printf("\n    %s block %lld %lldx%lld off %zu -> %s differs ", name, (long long)block,
                          (long long)rows, (long long)cols, off, o ? "bf16" : "f32");
    }
    cudaFree(dq);
    cudaFree(dd);
    cudaFree(ds);
    qt_free(&qi);
    free(w); free(s); free(q); free(cpu); free(gpu);
}

static void test_fp8(void) {
    static const char *const fmts[] = {"fp8_e4m3", "fp8_e5m2"};
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 2; b++) {
            int64_t blk = b ? 128 : 0;
            check(fmts[f], blk, 384, 3072, 0, 10 + f);   /* aligned: the vector kernel */
            check(fmts[f], blk, 37, 1000, 0, 20 + f);    /* cols % 8 == 0, a short last block */
            check(fmts[f], blk, 29, 130, 0, 30 + f);     /* cols % 8 != 0: the scalar kernel */
            check(fmts[f], blk, 16, 256, 3, 40 + f);     /* misaligned pointers: scalar */
        }
}

static void test_bf16_none(void) {
    check("bf16", 0, 64, 3072, 0, 50);
    check("bf16", 0, 7, 33, 1, 51);
    check("none", 0, 64, 3072, 0, 52);
    check("none", 0, 7, 33, 0, 53);
}

static void test_cuda_errors(void) {
    qt_inst qi = {0};
    CU_ASSERT_EQUAL_FATAL(qt_make("fp8_e4m3", 0, 0, &qi), ORK_OK);
    qt_clear_log();
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CUDA, g_stream, (void *)16, (float *)16, 4, 8, ORK_F16,
                                      (void *)16), ORK_E_UNSUPPORTED);
    CU_ASSERT_EQUAL(qt_nerrors, 1);
    CU_ASSERT_EQUAL(qi.vt->dequantize(qi.self, ORK_DEV_CUDA, g_stream, NULL, NULL, 0, 8, ORK_BF16, NULL), ORK_OK);
    qt_free(&qi);
}

static const ork_test_case cases[] = {
    {"fp8 CUDA dequantize == CPU (formats, outputs, blocks, shapes)", test_fp8},
    {"bf16 / none CUDA conversions == CPU", test_bf16_none},
    {"CUDA argument errors", test_cuda_errors},
    {NULL, NULL},
};

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("quant_cuda", init, clean, cases);
}
