// adamw8bit_cuda.cu — the AdamW-8bit step on the device (see adamw8bit.h).
// 64 threads own one 256-element absmax block at a time (4 elements each,
// strided by 64 so loads coalesce) and walk the tensor's blocks grid-stride,
// so the code books are copied into shared memory once per thread block.
// All float math goes through adamw8bit_math.h's _rn intrinsics: bit-identical
// to adamw8bit_cpu.c. No device-wide sync; everything is on the caller's stream.
#include <cfloat>
#include <cuda_runtime.h>

#include "adamw8bit_math.h"

namespace {

constexpr int kThreads = 64;
constexpr int kPer = ORK_ADAMW8BIT_BLOCK / kThreads; // elements per thread
constexpr int kMaxGrid = 8192;

__device__ __forceinline__ float warp_max(float x) {
    for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}

// absmax_*: [nblocks] f32; code_*: [numel] u8; param/grad: [numel] f32|bf16.
__global__ void __launch_bounds__(kThreads)
k_adamw8bit(const ork_adamw8bit_maps *__restrict__ maps, ork_adamw_hparams h, ork_adamw_scalars sc,
            int64_t step, void *param, ork_dtype pdt, const void *grad, ork_dtype gdt,
            float *absmax_m, float *absmax_v, uint8_t *code_m, uint8_t *code_v, int64_t numel,
            int64_t nblocks) {
    __shared__ float smap[256], umap[256];
    __shared__ float red_m[kThreads / 32], red_v[kThreads / 32];
    for (int k = threadIdx.x; k < 256; k += kThreads) {
        smap[k] = maps->signed_map[k];
        umap[k] = maps->unsigned_map[k];
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    for (int64_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const int64_t i0 = b * ORK_ADAMW8BIT_BLOCK;
        const float am_old = absmax_m[b], av_old = absmax_v[b];
        float m[kPer], v[kPer];
        bool ok[kPer];
        float am = -FLT_MAX, av = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < kPer; k++) {
            const int64_t i = i0 + threadIdx.x + k * kThreads;
            ok[k] = false;
            if (i < numel) {
                float g = ork_load_f(grad, gdt, i);
                ok[k] = ork_q8_finite(g);
                m[k] = v[k] = 0.0f;
                if (ok[k]) {
                    v[k] = ORK_FMUL(umap[code_v[i]], av_old);
                    m[k] = ORK_FMUL(smap[code_m[i]], am_old);
                    ork_q8_moments8(g, h.beta1, h.beta2, &m[k], &v[k]);
                }
            } else { // bnb's padding of a partial last block
                m[k] = ork_q8_pad_m(smap, am_old, h.beta1);
                v[k] = 0.0f;
            }
            am = fmaxf(am, fabsf(m[k]));
            av = fmaxf(av, fabsf(v[k]));
        }
        am = warp_max(am);
        av = warp_max(av);
        if (lane == 0) { red_m[warp] = am; red_v[warp] = av; }
        __syncthreads();
        am = red_m[0];
        av = red_v[0];
#pragma unroll
        for (int w = 1; w < kThreads / 32; w++) { am = fmaxf(am, red_m[w]); av = fmaxf(av, red_v[w]); }
        if (threadIdx.x == 0) { absmax_m[b] = am; absmax_v[b] = av; }
#pragma unroll
        for (int k = 0; k < kPer; k++) {
            const int64_t i = i0 + threadIdx.x + k * kThreads;
            if (i >= numel) continue;
            if (ok[k]) ork_q8_apply(param, pdt, i, m[k], v[k], &sc, &h, step);
            code_m[i] = ork_q8_quantize_m(smap, m[k], am);
            code_v[i] = ork_q8_quantize_v(umap, v[k], av);
        }
        __syncthreads(); // red_* is rewritten by the next block
    }
}

// Small tensors (< 4096 elements): fp32 m[numel], v[numel], bnb's 32-bit formula.
__global__ void k_adamw8bit_small(ork_adamw_hparams h, ork_adamw_scalars sc, int64_t step,
                                  void *param, ork_dtype pdt, const void *grad, ork_dtype gdt,
                                  float *m, float *v, int64_t numel) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= numel) return;
    float g = ork_load_f(grad, gdt, i);
    if (!ork_q8_finite(g)) { m[i] = v[i] = 0.0f; return; }
    float mi = m[i], vi = v[i];
    ork_q8_moments32(g, h.beta1, h.beta2, &mi, &vi);
    m[i] = mi;
    v[i] = vi;
    ork_q8_apply(param, pdt, i, mi, vi, &sc, &h, step);
}

} // namespace

extern "C" ork_status ork_adamw8bit_step_cuda(const ork_adamw8bit_maps *d_maps,
                                              const ork_adamw_hparams *hp, int64_t step,
                                              void *param, ork_dtype param_dtype, const void *grad,
                                              ork_dtype grad_dtype, void *state, int64_t numel,
                                              ork_cuda_stream stream) {
    if (!d_maps || !hp || !param || !grad || !state || step < 1 || numel < 1 ||
        (param_dtype != ORK_F32 && param_dtype != ORK_BF16) ||
        (grad_dtype != ORK_F32 && grad_dtype != ORK_BF16))
        return ORK_E_INVALID;
    const ork_adamw_scalars sc = ork_adamw_scalars_for(hp, step);
    ork_adamw8bit_view s;
    ork_adamw8bit_view_of(state, numel, &s); // pointer arithmetic only: fine on device memory
    if (s.m32) {
        const int threads = 256;
        k_adamw8bit_small<<<(unsigned)((numel + threads - 1) / threads), threads, 0, stream>>>(
            *hp, sc, step, param, param_dtype, grad, grad_dtype, s.m32, s.v32, numel);
    } else {
        const unsigned grid = (unsigned)(s.nblocks < kMaxGrid ? s.nblocks : kMaxGrid);
        k_adamw8bit<<<grid, kThreads, 0, stream>>>(d_maps, *hp, sc, step, param, param_dtype, grad,
                                                   grad_dtype, s.absmax_m, s.absmax_v, s.code_m,
                                                   s.code_v, numel, s.nblocks);
    }
    return cudaGetLastError() == cudaSuccess ? ORK_OK : ORK_E_CUDA;
}
