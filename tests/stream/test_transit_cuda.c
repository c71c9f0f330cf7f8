/* tests/stream/test_transit_cuda.c — the transit coding's device decoder
 * (ork_transit_decode_cuda) against the original bytes and the CPU decode,
 * bit for bit: coded on the CPU, decoded on a non-blocking stream, copied
 * back and compared, with guard bytes past the output checked untouched. The
 * exponent codes (16-bit words and E5M2 bytes): Gaussian BF16, E5M2 weights,
 * uniform words and bytes (L2 and L3 escapes everywhere), inputs of at most 3
 * classes (no escape), of 7 (L2 codes, no L3 byte) and with rare classes
 * every few tiles (tiles with and without escapes side by side), ragged and
 * odd sizes, empty and tail-only inputs, coded and output buffers off their
 * alignment. Prints the decoders' throughput (informative only). Exits 77
 * without a CUDA device. */
#include "ork_test.h"

#ifdef ORAKUL_HAVE_CUDA
#include "transit_test.h"

#include "stream/transit/exponent_code.h"
#include "train/rng.h"

#include <cuda_runtime_api.h>

int ork_cuda_device_count(void);

#define CK(x) CU_ASSERT_FATAL((x) == cudaSuccess)
#define GUARD 64

static cudaStream_t g_stream;

static int init(void) { return cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking) != cudaSuccess; }
static int clean(void) { return cudaStreamDestroy(g_stream) != cudaSuccess; }

/* Times the device decode of a coded buffer (20 runs after a warm-up) against
 * a device-to-device copy of its coded bytes (the bandwidth ceiling) and
 * prints both, labelled `what`; informative, only the decodes' status is
 * asserted. */
static void time_decode(const char *what, const uint8_t *coded, size_t cb) {
    ork_transit_hdr h;
    uint8_t *dc, *dout;
    CU_ASSERT_EQUAL_FATAL(ork_transit_header(coded, cb, &h), ORK_OK);
    size_t raw = (size_t)h.raw_bytes;
    CK(cudaMalloc((void **)&dc, cb));
    CK(cudaMalloc((void **)&dout, raw));
    CK(cudaMemcpyAsync(dc, coded, cb, cudaMemcpyHostToDevice, g_stream));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int reps = 20;
    CU_ASSERT_EQUAL(ork_transit_decode_cuda(dc, &h, dout, g_stream), ORK_OK); /* warm-up */
    CK(cudaEventRecord(e0, g_stream));
    for (int i = 0; i < reps; i++) CU_ASSERT_EQUAL(ork_transit_decode_cuda(dc, &h, dout, g_stream), ORK_OK);
    CK(cudaEventRecord(e1, g_stream));
    CK(cudaEventSynchronize(e1));
    float ms = 0, ms_copy = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventRecord(e0, g_stream));
    for (int i = 0; i < reps; i++) CK(cudaMemcpyAsync(dout, dc, cb, cudaMemcpyDeviceToDevice, g_stream));
    CK(cudaEventRecord(e1, g_stream));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms_copy, e0, e1));
    double s = ms * 1e-3 / reps, sc = ms_copy * 1e-3 / reps;
    printf("\n  %sdecode %zu MiB (coded/raw %.4f): %.3f ms, %.0f GB/s of output, %.0f GB/s read+written; a d2d copy "
           "of %zu MiB: %.0f GB/s read+written\n",
           what, raw >> 20, (double)cb / (double)raw, s * 1e3, raw / s * 1e-9, (raw + cb) / s * 1e-9, cb >> 20,
           2.0 * cb / sc * 1e-9);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(dc);
    cudaFree(dout);
}

/* Decode coded (cb bytes, the n bytes of raw, magic expected) on the CPU and
 * on the device (coded at coded_off, output at out_off bytes into their
 * allocations: 4 and 1 take the narrow loads and the byte stores), compare
 * both with raw and each other, and the guard bytes past the output. */
static void check_both(const char *what, const uint8_t *raw, size_t n, const uint8_t *coded, size_t cb,
                       uint32_t magic, size_t coded_off, size_t out_off) {
    ork_transit_hdr h;
    uint8_t *back = malloc(n + GUARD), *cpu = malloc(n ? n : 1);
    CU_ASSERT_FATAL(back && cpu);
    CU_ASSERT_EQUAL_FATAL(ork_transit_header(coded, cb, &h), ORK_OK);
    CU_ASSERT_EQUAL_FATAL(h.magic, magic);
    CU_ASSERT_EQUAL_FATAL(h.raw_bytes, n);
    CU_ASSERT_EQUAL_FATAL(ork_transit_decode(coded, cb, cpu, 4), ORK_OK);
    uint8_t *dc, *dout;
    CK(cudaMalloc((void **)&dc, cb + coded_off));
    CK(cudaMalloc((void **)&dout, n + out_off + GUARD));
    CK(cudaMemcpyAsync(dc + coded_off, coded, cb, cudaMemcpyHostToDevice, g_stream));
    CK(cudaMemsetAsync(dout, 0xEE, n + out_off + GUARD, g_stream));
    CU_ASSERT_EQUAL(ork_transit_decode_cuda(dc + coded_off, &h, dout + out_off, g_stream), ORK_OK);
    CK(cudaMemcpyAsync(back, dout + out_off, n + GUARD, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    size_t first = n;
    for (size_t i = 0; i < n && first == n; i++)
        if (back[i] != cpu[i]) first = i;
    int same = first == n, cpu_ok = n == 0 || memcmp(cpu, raw, n) == 0, guard = 1;
    for (size_t i = 0; i < GUARD; i++) guard &= back[n + i] == 0xEE;
    if (!same || !guard || !cpu_ok) {
        printf("\n  %s (%zu bytes, %llu exceptions, %llu L2 codes, offsets %zu/%zu): ", what, n,
               (unsigned long long)h.n_exc, (unsigned long long)h.l2_cap, coded_off, out_off);
        if (!same) printf("device differs from the CPU first at %zu (0x%02x, CPU 0x%02x) ", first, back[first], cpu[first]);
        if (!guard) printf("wrote past the output ");
        if (!cpu_ok) printf("CPU decode differs from the original");
        printf("\n");
    }
    CU_ASSERT(same && guard && cpu_ok);
    cudaFree(dc);
    cudaFree(dout);
    free(back);
    free(cpu);
}

/* ---- the two-level codecs (16-bit words and E5M2 bytes) -------------- */

/* Code the first bytes of raw with the two-level codec for word (1: E5M2
 * bytes, 2: 16-bit words) and check_both it. */
static void check2(const char *what, const void *raw, size_t bytes, int word, size_t coded_off, size_t out_off) {
    size_t cap = ork_expcode_coded_bytes(raw, bytes, word, NULL), cb = 0;
    uint8_t *coded = malloc(cap);
    CU_ASSERT_FATAL(coded != NULL);
    CU_ASSERT_EQUAL_FATAL(ork_expcode_encode(raw, bytes, word, coded, cap, &cb, 4), ORK_OK);
    check_both(what, raw, bytes, coded, cb, word == 1 ? ORK_TRANSIT_MAGIC_BYTES : ORK_TRANSIT_MAGIC_WORDS, coded_off, out_off);
    free(coded);
}

/* Values (not bytes): partial groups (32) and tiles (8192, one CUDA block). */
static const size_t k_sizes2[] = {1, 31, 32, 33, 8191, 8192, 8193, 3 * 8192 + 5, 262144 + 77};
#define POOL2 ((size_t)3 << 20) /* values in the inputs below: the big case */

/* raw holds POOL2 values (and, for words, a byte more): each size, with the
 * byte stores (output 1 past 16-alignment), for words also with an odd byte
 * count; then the whole pool, also with the coded buffer 4 past 16-alignment
 * (the narrow loads). */
static void sizes2(const char *what, const void *raw, int word) {
    for (size_t k = 0; k < sizeof k_sizes2 / sizeof k_sizes2[0]; k++) {
        size_t bytes = k_sizes2[k] * (size_t)word;
        check2(what, raw, bytes, word, 0, 0);
        check2(what, raw, bytes, word, 0, 1);
        if (word == 2) check2(what, raw, bytes + 1, word, 0, 0);
    }
    check2(what, raw, POOL2 * word, word, 0, 0);
    check2(what, raw, POOL2 * word - (word == 2), word, 4, 1);
    check2(what, raw, 100003 * (size_t)word, word, 4, 0);
}

/* POOL2 words (and a tail byte) whose class (bits 14..7) is one of k, cycling; sign and mantissa random. */
static uint16_t *words_k_classes(int k, uint64_t seed) {
    uint16_t *w = malloc(POOL2 * 2 + 2);
    CU_ASSERT_FATAL(w != NULL);
    ork_rng r;
    ork_rng_init(&r, seed, 1);
    for (size_t i = 0; i <= POOL2; i++) w[i] = (uint16_t)((ork_rng_u32(&r) & 0x807fu) | (120 + i % (size_t)k) << 7);
    return w;
}

/* POOL2 bytes whose class (bits 6..2) is one of k, cycling; sign and mantissa random. */
static uint8_t *bytes_k_classes(int k, uint64_t seed) {
    uint8_t *b = malloc(POOL2);
    CU_ASSERT_FATAL(b != NULL);
    ork_rng r;
    ork_rng_init(&r, seed, 1);
    for (size_t i = 0; i < POOL2; i++) b[i] = (uint8_t)((ork_rng_u32(&r) & 0x83u) | (12 + i % (size_t)k) << 2);
    return b;
}

static void test2_bf16(void) {
    uint16_t *w = gauss_bf16(POOL2 + 1, 0.02, 31);
    sizes2("two-level, gaussian bf16", w, 2);
    check2("two-level, gaussian bf16, output 2 past 16-alignment", w, 100001 * 2 + 1, 2, 0, 2);
    free(w);
    w = gauss_bf16(POOL2 + 1, 1.0, 32); /* wider: exponents spread over more classes */
    sizes2("two-level, gaussian bf16 (std 1)", w, 2);
    free(w);
}

static void test2_e5m2(void) {
    uint8_t *g = e5m2_weights(POOL2 / 4096, 4096, 1, 33), *u = e5m2_weights(POOL2 / 4096, 4096, 0, 34);
    sizes2("two-level, gaussian e5m2", g, 1);
    sizes2("two-level, uniform e5m2", u, 1);
    free(g);
    free(u);
}

static void test2_uniform(void) {
    ork_rng r;
    ork_rng_init(&r, 35, 1);
    uint8_t *b = malloc(POOL2 * 2 + 2);
    CU_ASSERT_FATAL(b != NULL);
    for (size_t i = 0; i < POOL2 * 2 + 2; i++) b[i] = (uint8_t)ork_rng_u32(&r);
    sizes2("two-level, uniform words (mostly L3 escapes)", b, 2);
    sizes2("two-level, uniform bytes (L2 and L3 escapes)", b, 1);
    free(b);
}

static void test2_few_classes(void) {
    uint16_t *w = words_k_classes(3, 36);
    uint8_t *b = bytes_k_classes(3, 37);
    sizes2("two-level, 3 classes words (no escape)", w, 2);
    sizes2("two-level, 3 classes bytes (no escape)", b, 1);
    free(w);
    free(b);
    w = words_k_classes(7, 38);
    b = bytes_k_classes(7, 39);
    sizes2("two-level, 7 classes words (L2, no L3)", w, 2);
    sizes2("two-level, 7 classes bytes (L2, no L3)", b, 1);
    free(w);
    free(b);
    /* 3 classes, and every 3 tiles (and a bit) one of 12 rare ones: 5 of
     * them miss the table, so some tiles have L1 escapes, some L3 bytes, most
     * neither (the blocks that skip the scans and those that do not) */
    w = words_k_classes(3, 40);
    b = bytes_k_classes(3, 41);
    for (size_t i = 0, j = 0; i < POOL2; i += 3 * 8192 + 17, j++) {
        w[i] = (uint16_t)((w[i] & 0x807fu) | (40 + j % 12) << 7);
        b[i] = (uint8_t)((b[i] & 0x83u) | (16 + j % 12) << 2);
    }
    sizes2("two-level, 3 classes words, rare ones every 3 tiles", w, 2);
    sizes2("two-level, 3 classes bytes, rare ones every 3 tiles", b, 1);
    free(w);
    free(b);
}

static void test2_empty(void) {
    const uint8_t x[2] = {0x5a, 0xa5};
    check2("two-level words, nothing", x, 0, 2, 0, 0);
    check2("two-level bytes, nothing", x, 0, 1, 0, 0);
    check2("two-level words, the tail byte alone", x, 1, 2, 0, 0);
    check2("two-level words, the tail byte alone, output 1 past alignment", x, 1, 2, 0, 1);
    check2("two-level bytes, one", x, 1, 1, 0, 0);
}

/* 512 MiB of raw, code it with the two-level codec for word, time_decode it. */
static void time2(const char *what, const uint8_t *raw, size_t bytes, int word) {
    size_t cap = ork_expcode_coded_bytes(raw, bytes, word, NULL), cb;
    uint8_t *coded = malloc(cap);
    CU_ASSERT_FATAL(coded != NULL);
    CU_ASSERT_EQUAL_FATAL(ork_expcode_encode(raw, bytes, word, coded, cap, &cb, 8), ORK_OK);
    time_decode(what, coded, cb);
    free(coded);
}

static void test2_throughput(void) {
    size_t n = (size_t)256 << 20; /* 512 MiB of bf16 */
    uint16_t *w = gauss_bf16(n, 0.02, 42);
    time2("two-level, bf16: ", (const uint8_t *)w, n * 2, 2);
    free(w);
}

static void test2_throughput8(void) {
    size_t n = (size_t)512 << 20, piece = (size_t)32 << 20; /* 512 MiB of e5m2: 16 copies of 32 MiB */
    uint8_t *b = malloc(n), *g = e5m2_weights(piece / 4096, 4096, 1, 42);
    CU_ASSERT_FATAL(b != NULL);
    for (size_t o = 0; o < n; o += piece) memcpy(b + o, g, piece);
    free(g);
    time2("two-level, e5m2: ", b, n, 1);
    free(b);
}

static const ork_test_case cases[] = {
    {"cuda two-level: gaussian bf16, ragged and odd sizes, = CPU decode", test2_bf16},
    {"cuda two-level: e5m2 weights, ragged sizes, = CPU decode", test2_e5m2},
    {"cuda two-level: uniform words and bytes (L2 and L3 escapes)", test2_uniform},
    {"cuda two-level: at most 3, 7 classes, rare classes every few tiles", test2_few_classes},
    {"cuda two-level: empty and tail-only inputs", test2_empty},
    {"cuda two-level: bf16 throughput (informative)", test2_throughput},
    {"cuda two-level: e5m2 throughput (informative)", test2_throughput8},
    {NULL, NULL},
};

int main(void) {
    if (ork_cuda_device_count() <= 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("stream_transit_cuda", init, clean, cases);
}
#else
int main(void) {
    printf("built without CUDA: skipped\n");
    return 77;
}
#endif
