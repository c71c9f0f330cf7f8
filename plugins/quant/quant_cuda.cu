/* quant_cuda.cu — the "quant" plugin's GPU dequantize (see quant_cuda.h).
 * Owns nothing: every call only enqueues kernels / copies on the stream it is
 * given, never synchronises and never touches the legacy default stream.
 *
 * Bit-exactness with the CPU path (numerics/quantize.c, numerics/half.h):
 * the fp8 code values come from the host's own decode table (passed by value
 * and staged in shared memory), the product is one fp32 multiply (__fmul_rn:
 * never contracted), bf16 outputs use __float2bfloat16_rn, which rounds like
 * ork_f32_to_bf16 for every input. Built without fast-math, so subnormal
 * products are kept as on the CPU. */
#include "quant_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

struct Lut { float v[256]; };

constexpr int kThreads = 256;

__device__ __forceinline__ uint16_t bf16_bits(float x) {
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *reinterpret_cast<uint16_t *>(&h);
}

/* Rows are walked by blockIdx.y (grid-stride), 8-column groups by x. Needs
 * cols % 8 == 0, q 8-byte aligned and dst 16-byte aligned; a group then never
 * straddles a row or a scale block (block is a multiple of 8 or 0). */
template <bool kBf16Out>
__global__ void deq_fp8_vec8(const uint8_t *__restrict__ q, const float *__restrict__ scales, Lut lut,
                             int64_t rows, int64_t cols, uint32_t block, int64_t nblk, void *__restrict__ dst) {
    __shared__ float s_lut[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) s_lut[i] = lut.v[i];
    __syncthreads();
    const int64_t groups = cols / 8;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const uint2 *qr = reinterpret_cast<const uint2 *>(q + r * cols);
        const float *sr = scales + r * nblk;
        for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
             g += (int64_t)gridDim.x * blockDim.x) {
            const float s = block ? sr[(uint32_t)(g * 8) / block] : sr[0];
            const uint2 raw = qr[g];
            float v[8];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                v[k] = __fmul_rn(s_lut[(raw.x >> (8 * k)) & 0xFF], s);
                v[k + 4] = __fmul_rn(s_lut[(raw.y >> (8 * k)) & 0xFF], s);
            }
            if (kBf16Out) {
                uint4 o;
                o.x = bf16_bits(v[0]) | ((uint32_t)bf16_bits(v[1]) << 16);
                o.y = bf16_bits(v[2]) | ((uint32_t)bf16_bits(v[3]) << 16);
                o.z = bf16_bits(v[4]) | ((uint32_t)bf16_bits(v[5]) << 16);
                o.w = bf16_bits(v[6]) | ((uint32_t)bf16_bits(v[7]) << 16);
                reinterpret_cast<uint4 *>(static_cast<uint16_t *>(dst) + r * cols)[g] = o;
            } else {
                float4 *d = reinterpret_cast<float4 *>(static_cast<float *>(dst) + r * cols) + 2 * g;
                d[0] = make_float4(v[0], v[1], v[2], v[3]);
                d[1] = make_float4(v[4], v[5], v[6], v[7]);
            }
        }
    }
}

/* Any shape and alignment: one element per thread. */
template <bool kBf16Out>
__global__ void deq_fp8_scalar(const uint8_t *__restrict__ q, const float *__restrict__ scales, Lut lut,
                               int64_t rows, int64_t cols, uint32_t block, int64_t nblk, void *__restrict__ dst) {
    __shared__ float s_lut[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) s_lut[i] = lut.v[i];
    __syncthreads();
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
             c += (int64_t)gridDim.x * blockDim.x) {
            const float s = scales[r * nblk + (block ? (int64_t)(c / block) : 0)];
            const float v = __fmul_rn(s_lut[q[r * cols + c]], s);
            if (kBf16Out) static_cast<uint16_t *>(dst)[r * cols + c] = bf16_bits(v);
            else static_cast<float *>(dst)[r * cols + c] = v;
        }
}

__global__ void bf16_to_f32(const uint16_t *__restrict__ src, int64_t n, float *__restrict__ dst) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

__global__ void f32_to_bf16(const float *__restrict__ src, int64_t n, uint16_t *__restrict__ dst) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = bf16_bits(src[i]);
}

/* 2-D grid: x covers `units` per row (capped), y walks rows; about 4096 blocks. */
dim3 grid2d(int64_t rows, int64_t units) {
    int64_t gx = (units + kThreads - 1) / kThreads;
    if (gx < 1) gx = 1;
    if (gx > 4096) gx = 4096;
    int64_t gy = 4096 / gx;
    if (gy < 1) gy = 1;
    if (gy > rows) gy = rows;
    if (gy > 65535) gy = 65535;
    return dim3((unsigned)gx, (unsigned)gy, 1);
}

unsigned grid1d(int64_t n) {
    int64_t g = (n + kThreads - 1) / kThreads;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

} // namespace

extern "C" ork_status ork_quant_cuda_dequantize(const ork_quant_cuda_args *a, void *stream, const char **err) {
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const int64_t n = a->rows * a->cols;
    if (err) *err = NULL;
    if (n == 0) return ORK_OK;
    const bool bf = a->dst_dt == ORK_BF16;
    if (a->dst_dt != ORK_BF16 && a->dst_dt != ORK_F32) return ORK_E_UNSUPPORTED;
    if (a->q_dt == ORK_F8_E4M3 || a->q_dt == ORK_F8_E5M2) {
        if (!a->lut || a->block < 0 || a->block > 0xFFFFFFFFll) return ORK_E_UNSUPPORTED;
        Lut lut;
        for (int i = 0; i < 256; i++) lut.v[i] = a->lut[i];
        const int64_t nblk = a->block ? (a->cols + a->block - 1) / a->block : 1;
        const uint32_t blk = (uint32_t)a->block;
        const bool vec = a->cols % 8 == 0 && (a->block % 8 == 0) &&
                         (reinterpret_cast<uintptr_t>(a->q) & 7) == 0 &&
                         (reinterpret_cast<uintptr_t>(a->dst) & 15) == 0;
        if (vec) {
            dim3 g = grid2d(a->rows, a->cols / 8);
            if (bf) deq_fp8_vec8<true><<<g, kThreads, 0, st>>>((const uint8_t *)a->q, a->scales, lut, a->rows, a->cols, blk, nblk, a->dst);
            else deq_fp8_vec8<false><<<g, kThreads, 0, st>>>((const uint8_t *)a->q, a->scales, lut, a->rows, a->cols, blk, nblk, a->dst);
        } else {
            dim3 g = grid2d(a->rows, a->cols);
            if (bf) deq_fp8_scalar<true><<<g, kThreads, 0, st>>>((const uint8_t *)a->q, a->scales, lut, a->rows, a->cols, blk, nblk, a->dst);
            else deq_fp8_scalar<false><<<g, kThreads, 0, st>>>((const uint8_t *)a->q, a->scales, lut, a->rows, a->cols, blk, nblk, a->dst);
        }
    } else if (a->q_dt == a->dst_dt) {
        cudaError_t e = cudaMemcpyAsync(a->dst, a->q, (size_t)n * (bf ? 2 : 4), cudaMemcpyDeviceToDevice, st);
        if (e != cudaSuccess) { if (err) *err = cudaGetErrorString(e); return ORK_E_CUDA; }
        return ORK_OK;
    } else if (a->q_dt == ORK_BF16) {          /* -> F32: exact widening */
        bf16_to_f32<<<grid1d(n), kThreads, 0, st>>>((const uint16_t *)a->q, n, (float *)a->dst);
    } else if (a->q_dt == ORK_F32) {           /* -> BF16: RNE */
        f32_to_bf16<<<grid1d(n), kThreads, 0, st>>>((const float *)a->q, n, (uint16_t *)a->dst);
    } else {
        return ORK_E_UNSUPPORTED;
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) { if (err) *err = cudaGetErrorString(e); return ORK_E_CUDA; }
    return ORK_OK;
}
