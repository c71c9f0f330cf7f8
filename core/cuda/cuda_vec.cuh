/* cuda/cuda_vec.cuh — internal to core/cuda: device helpers the memory-bound
 * kernels share (cuda_ew.cu, cuda_fused.cu): warp and block sums in a fixed
 * order, and 8 BF16 elements as one 16-byte access converted to and from F32.
 * Defined in an unnamed namespace: each .cu gets its own copy. Not a public header. */
#ifndef ORK_CUDA_VEC_CUH
#define ORK_CUDA_VEC_CUH

#include <cuda_bf16.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it. */
__device__ float block_sum(float v) {
    __shared__ float sh[32];
    __syncthreads(); /* sh may be in use by a previous call */
    v = warp_sum(v);
    int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < nw; i++) r += sh[i];
    return r;
}

/* f[0..8) = the 8 BF16 at p + i (element index; 16-byte aligned). */
__device__ __forceinline__ void ld8(const void *p, int64_t i, float f[8]) {
    uint4 u = *(const uint4 *)((const __nv_bfloat16 *)p + i);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 t = __bfloat1622float2(h[k]);
        f[2 * k] = t.x;
        f[2 * k + 1] = t.y;
    }
}
/* The 8 BF16 at p + i = f[0..8), rounded to nearest even. */
__device__ __forceinline__ void st8(void *p, int64_t i, const float f[8]) {
    uint4 u;
    __nv_bfloat16 *h = (__nv_bfloat16 *)&u;
#pragma unroll
    for (int k = 0; k < 8; k++) h[k] = __float2bfloat16_rn(f[k]);
    *(uint4 *)((__nv_bfloat16 *)p + i) = u;
}

} // namespace

#endif
