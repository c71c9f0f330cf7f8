/* test_fp8_cuda_exhaustive.cu — proves the CPU conversions in numerics/fp8.h and
 * numerics/half.h equal CUDA's on every one of the 2^32 float32 bit patterns:
 *   __nv_cvt_float_to_fp8(x, {__NV_SATFINITE, __NV_NOSAT}, {__NV_E4M3, __NV_E5M2})
 *   (SATFINITE is the cvt.rn.satfinite instruction on sm_89+), __float2bfloat16,
 *   __float2half_rn; plus the fp8 -> half decode of all 256 codes.
 * The GPU converts a chunk of consecutive bit patterns into one byte per fp8 mode
 * and two per half format; the CPU recomputes the chunk with the library's
 * compiled bulk functions on all cores and compares. Prints the mismatch count
 * per mode and the first few. Exits 77 (skipped) without a CUDA device. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "numerics/fp8.h"
#include "numerics/half.h"
#include "ork_test.h"

enum { MODES = 6 }; /* e4m3 sat, e4m3 nosat, e5m2 sat, e5m2 nosat, bf16, f16 */
static const char *const kModeName[MODES] = {"e4m3 satfinite", "e4m3 nosat", "e5m2 satfinite",
                                             "e5m2 nosat", "bf16 rn", "f16 rn"};
static const uint64_t kChunk = 1ull << 27; /* inputs per chunk: 1 GiB of results */

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("\n  %s: %s", #call, cudaGetErrorString(e_)); CU_FAIL_FATAL("CUDA call failed"); } } while (0)

/* f8: [4][n] codes, h: [2][n] (bf16, f16) for inputs base .. base + n - 1 */
__global__ void cvt_all(uint32_t base, uint32_t n, uint8_t *f8, uint16_t *h) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float x = __uint_as_float(base + i);
        f8[0 * (size_t)n + i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
        f8[1 * (size_t)n + i] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
        f8[2 * (size_t)n + i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
        f8[3 * (size_t)n + i] = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
        h[0 * (size_t)n + i] = __bfloat16_as_ushort(__float2bfloat16(x));
        h[1 * (size_t)n + i] = __half_as_ushort(__float2half_rn(x));
    }
}

/* out: [2][256] float values of every E4M3 / E5M2 code, through CUDA's fp8 -> half */
__global__ void decode_all(float *out) {
    int c = threadIdx.x;
    __half_raw r4 = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    __half_raw r5 = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E5M2);
    out[c] = __half2float(__half(r4));
    out[256 + c] = __half2float(__half(r5));
}

struct tally {
    std::atomic<uint64_t> bad[MODES];
    std::mutex mu;
};

static void note(tally *t, int m, uint32_t u, unsigned gpu, unsigned cpu) {
    if (t->bad[m]++ >= 5) return;
    std::lock_guard<std::mutex> g(t->mu);
    printf("\n  %-15s x=0x%08X: cuda 0x%02X cpu 0x%02X", kModeName[m], u, gpu, cpu);
}

/* Compare inputs [lo, hi) of the chunk starting at base. */
static void compare_part(tally *t, uint64_t base, uint64_t n, uint64_t lo, uint64_t hi,
                         const uint8_t *f8, const uint16_t *h) {
    enum { B = 1 << 14 };
    std::vector<float> x(B);
    std::vector<uint8_t> c(B);
    std::vector<uint16_t> c16(B);
    for (uint64_t i0 = lo; i0 < hi; i0 += B) {
        size_t k = (size_t)std::min<uint64_t>(B, hi - i0);
        for (size_t j = 0; j < k; j++) x[j] = ork_bits_f32((uint32_t)(base + i0 + j));
        for (int m = 0; m < 4; m++) {
            ork_fp8_encode(x.data(), k, m < 2 ? ORK_F8_E4M3 : ORK_F8_E5M2,
                           m & 1 ? ORK_FP8_NOSAT : ORK_FP8_SATFINITE, c.data());
            const uint8_t *g = f8 + m * n + i0;
            if (memcmp(g, c.data(), k) != 0)
                for (size_t j = 0; j < k; j++)
                    if (g[j] != c[j]) note(t, m, (uint32_t)(base + i0 + j), g[j], c[j]);
        }
        for (int m = 4; m < 6; m++) {
            if (m == 4) ork_bf16_from_f32(x.data(), k, c16.data());
            else ork_f16_from_f32(x.data(), k, c16.data());
            const uint16_t *g = h + (m - 4) * n + i0;
            if (memcmp(g, c16.data(), k * 2) != 0)
                for (size_t j = 0; j < k; j++)
                    if (g[j] != c16[j]) note(t, m, (uint32_t)(base + i0 + j), g[j], c16[j]);
        }
    }
}

static void test_all_floats(void) {
    int dev = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf(" [%s, sm_%d%d] ", prop.name, prop.major, prop.minor);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint8_t *d8, *h8;
    uint16_t *d16, *h16;
    CK(cudaMalloc(&d8, 4 * kChunk));
    CK(cudaMalloc(&d16, 2 * kChunk * 2));
    CK(cudaMallocHost(&h8, 4 * kChunk));
    CK(cudaMallocHost(&h16, 2 * kChunk * 2));
    tally t;
    for (int m = 0; m < MODES; m++) t.bad[m] = 0;
    unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    for (uint64_t base = 0; base < (1ull << 32); base += kChunk) {
        cvt_all<<<4096, 256, 0, st>>>((uint32_t)base, (uint32_t)kChunk, d8, d16);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(h8, d8, 4 * kChunk, cudaMemcpyDeviceToHost, st));
        CK(cudaMemcpyAsync(h16, d16, 2 * kChunk * 2, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        std::vector<std::thread> th;
        for (unsigned k = 0; k < nt; k++)
            th.emplace_back(compare_part, &t, base, kChunk, kChunk * k / nt, kChunk * (k + 1) / nt,
                            h8, h16);
        for (auto &x : th) x.join();
    }
    uint64_t total = 0;
    for (int m = 0; m < MODES; m++) {
        printf("\n  %-15s %llu mismatches of 2^32", kModeName[m], (unsigned long long)t.bad[m].load());
        total += t.bad[m];
    }
    printf("\n");
    CU_ASSERT_EQUAL(total, 0);

    float *dd, hd[512];
    CK(cudaMalloc(&dd, sizeof hd));
    decode_all<<<1, 256, 0, st>>>(dd);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(hd, dd, sizeof hd, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    int bad = 0;
    for (int c = 0; c < 512; c++) {
        float want = hd[c], got = ork_fp8_to_f32((uint8_t)c, c < 256 ? ORK_F8_E4M3 : ORK_F8_E5M2);
        if (isnan(want) ? !isnan(got) : memcmp(&want, &got, 4) != 0) {
            bad++;
            printf("\n  decode %s 0x%02X: cuda %a cpu %a", c < 256 ? "e4m3" : "e5m2", c & 255,
                   (double)want, (double)got);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    cudaFree(dd); cudaFree(d8); cudaFree(d16); cudaFreeHost(h8); cudaFreeHost(h16);
    cudaStreamDestroy(st);
}

static const ork_test_case cases[] = {
    {"all 2^32 floats: fp8 x4, bf16, f16 vs CUDA", test_all_floats},
    {NULL, NULL},
};

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    return ork_test_run("numerics_fp8_cuda_exhaustive", NULL, NULL, cases);
}
