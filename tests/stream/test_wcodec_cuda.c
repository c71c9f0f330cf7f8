/* tests/stream/test_wcodec_cuda.c — the transit codec's device decoder
 * (ork_wcodec_decode_cuda) against the original bytes, bit for bit: coded on
 * the CPU, decoded on a non-blocking stream, copied back and compared, with
 * guard bytes past the output checked untouched. Gaussian BF16 (~10M words,
 * even and odd byte counts), ragged small sizes, empty and tail-only inputs,
 * all-exception inputs, and buffers not 16-aligned (the byte path). Prints the
 * decode throughput (informative only). Exits 77 without a CUDA device. */
#include "ork_test.h"

#ifdef ORAKUL_HAVE_CUDA
#include "wcodec_test.h"

#include "stream/wcodec.h"
#include "train/rng.h"

#include <cuda_runtime_api.h>

int ork_cuda_device_count(void);

#define CK(x) CU_ASSERT_FATAL((x) == cudaSuccess)
#define GUARD 64

static cudaStream_t g_stream;

static int init(void) { return cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess; }
static int clean(void) { return cudaStreamDestroy(g_stream) != cudaSuccess; }

/* Code raw on the CPU, decode it on the device (coded at coded_off, output at
 * out_off bytes into their allocations), compare with raw. */
static void check(const char *what, const void *raw, size_t bytes, size_t coded_off, size_t out_off) {
    ork_wcodec_hdr h;
    size_t cap = ork_wcodec_coded_bytes(raw, bytes, NULL), cb = 0;
    uint8_t *coded = malloc(cap), *back = malloc(bytes + GUARD);
    CU_ASSERT_FATAL(coded && back);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_encode(raw, bytes, coded, cap, &cb, 4), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_header(coded, cb, &h), ORK_OK);
    uint8_t *dc, *dout;
    CK(cudaMalloc((void **)&dc, cb + coded_off));
    CK(cudaMalloc((void **)&dout, bytes + out_off + GUARD));
    CK(cudaMemcpyAsync(dc + coded_off, coded, cb, cudaMemcpyHostToDevice, g_stream));
    CK(cudaMemsetAsync(dout, 0xEE, bytes + out_off + GUARD, g_stream));
    CU_ASSERT_EQUAL(ork_wcodec_decode_cuda(dc + coded_off, &h, dout + out_off, g_stream), ORK_OK);
    CK(cudaMemcpyAsync(back, dout + out_off, bytes + GUARD, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    int same = bytes == 0 || memcmp(back, raw, bytes) == 0, guard = 1;
    for (size_t i = 0; i < GUARD; i++) guard &= back[bytes + i] == 0xEE;
    if (!same || !guard)
        printf("\n  %s (%zu bytes, offsets %zu/%zu): %s\n", what, bytes, coded_off, out_off,
               same ? "wrote past the output" : "differs from the original");
    CU_ASSERT(same && guard);
    cudaFree(dc);
    cudaFree(dout);
    free(coded);
    free(back);
}

static void test_gaussian(void) {
    size_t n = 10 * 1000 * 1000 + 3;
    uint16_t *w = gauss_bf16(n, 0.02, 11);
    check("gaussian", w, n * 2, 0, 0);
    check("gaussian, odd bytes", w, n * 2 - 1, 0, 0);
    check("gaussian, unaligned output", w, 100001 * 2 + 1, 0, 2);
    check("gaussian, unaligned coded", w, 100001 * 2, 4, 0);
    check("gaussian, odd output address", w, 4099 * 2 + 1, 0, 1);
    free(w);
}

static void test_small_and_ragged(void) {
    uint16_t *w = gauss_bf16(5000, 0.3, 5);
    for (size_t bytes = 0; bytes < 80; bytes++) check("small", w, bytes, 0, 0);
    const size_t words[] = {255, 256, 257, 1023, 1024, 1025, 4095, 4097};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        check("ragged", w, words[k] * 2, 0, 0);
        check("ragged, odd bytes", w, words[k] * 2 + 1, 0, 0);
    }
    free(w);
}

static void test_exceptions(void) {
    size_t n = (size_t)3 << 20;
    uint16_t *w = malloc(n * 2 + 2); /* n words and a tail byte */
    CU_ASSERT_FATAL(w != NULL);
    ork_rng r;
    ork_rng_init(&r, 77, 1);
    for (size_t i = 0; i <= n; i++) w[i] = (uint16_t)ork_rng_u32(&r); /* everything: ~94% exceptions */
    check("uniform words", w, n * 2 + 1, 0, 0);
    for (size_t i = 0; i < n; i++) w[i] = (uint16_t)((w[i] & 0x807f) | ((100 + i % 40) << 7));
    check("40 exponents", w, n * 2, 0, 0);
    for (size_t i = 0; i < 64; i++) w[i] = (uint16_t)((i * 4) << 7); /* 64 distinct exponents */
    check("all distinct, tiny", w, 64 * 2, 0, 0);
    free(w);
}

static void test_throughput(void) {
    size_t n = (size_t)256 << 20; /* 512 MiB of bf16: far past the L2 */
    uint16_t *w = gauss_bf16(n, 0.02, 42);
    ork_wcodec_hdr h;
    size_t cap = ork_wcodec_coded_bytes(w, n * 2, NULL), cb;
    uint8_t *coded = malloc(cap), *dc, *dout;
    CU_ASSERT_FATAL(coded != NULL);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_encode(w, n * 2, coded, cap, &cb, 8), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(ork_wcodec_header(coded, cb, &h), ORK_OK);
    CK(cudaMalloc((void **)&dc, cb));
    CK(cudaMalloc((void **)&dout, n * 2));
    CK(cudaMemcpyAsync(dc, coded, cb, cudaMemcpyHostToDevice, g_stream));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int reps = 20;
    CU_ASSERT_EQUAL(ork_wcodec_decode_cuda(dc, &h, dout, g_stream), ORK_OK); /* warm-up */
    CK(cudaEventRecord(e0, g_stream));
    for (int i = 0; i < reps; i++) CU_ASSERT_EQUAL(ork_wcodec_decode_cuda(dc, &h, dout, g_stream), ORK_OK);
    CK(cudaEventRecord(e1, g_stream));
    CK(cudaEventSynchronize(e1));
    float ms = 0, ms_copy = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    /* the bandwidth ceiling: a device-to-device copy of the coded bytes */
    CK(cudaEventRecord(e0, g_stream));
    for (int i = 0; i < reps; i++) CK(cudaMemcpyAsync(dout, dc, cb, cudaMemcpyDeviceToDevice, g_stream));
    CK(cudaEventRecord(e1, g_stream));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms_copy, e0, e1));
    double s = ms * 1e-3 / reps, sc = ms_copy * 1e-3 / reps;
    printf("\n  decode %zu MiB: %.3f ms, %.0f GB/s of output, %.0f GB/s read+written; a d2d copy of %zu MiB: %.0f "
           "GB/s read+written\n",
           n * 2 >> 20, s * 1e3, n * 2 / s * 1e-9, (n * 2 + cb) / s * 1e-9, cb >> 20, 2.0 * cb / sc * 1e-9);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(dc);
    cudaFree(dout);
    free(coded);
    free(w);
}

static const ork_test_case cases[] = {
    {"cuda decode: gaussian bf16, bit for bit", test_gaussian},
    {"cuda decode: small and ragged sizes", test_small_and_ragged},
    {"cuda decode: all-exception inputs", test_exceptions},
    {"cuda decode: throughput (informative)", test_throughput},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("stream_wcodec_cuda", init, clean, cases);
}
#else
int main(void) {
    printf("built without CUDA: skipped\n");
    return 77;
}
#endif
