/* cuda/cuda_text.cu — the text encoders' attention with additive biases:
 * the biases' additions, the row softmax and the cast to the probabilities'
 * dtype in one kernel (tensor/ops_text.c's attention_bias on CUDA; before it,
 * four passes over the F32 scores: add bias, add key bias, softmax, cast).
 * One block per row, the thread count and block reductions of cuda_gn.cu's
 * softmax, so the values are those of the separate passes.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_text.h"

#include "cuda/cuda_ops.h"
#include "cuda/cuda_util.cuh"

namespace {

__device__ __forceinline__ float tx_warp_sum(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}
__device__ __forceinline__ float tx_warp_max(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
    return v;
}
/* Over the block (blockDim.x a multiple of 32); every thread gets the result
 * (cuda_gn.cu's gn_block_sum / gn_block_max). */
__device__ float tx_block_sum(float v) {
    __shared__ float sh[32];
    __syncthreads();
    v = tx_warp_sum(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) r += sh[i];
    return r;
}
__device__ float tx_block_max(float v) {
    __shared__ float sh[32];
    __syncthreads();
    v = tx_warp_max(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) r = fmaxf(r, sh[i]);
    return r;
}

struct BiasArgs {
    int64_t H, Lq, Lk;
    const float *S;
    const void *bias;
    int bdt;
    int64_t bs0, bs1, bs2, bs3;
    const void *kb;
    int kdt;
    int causal;
    void *P;
    int pdt;
};

/* Score (row r = (b, h, i), key j) with its biases, added as the separate passes did. */
__device__ __forceinline__ float tx_val(const BiasArgs &a, int64_t r, int64_t b, int64_t h, int64_t i, int64_t j) {
    float v = a.S[r * a.Lk + j];
    if (a.bias) v = v + ork_ld(a.bias, b * a.bs0 + h * a.bs1 + i * a.bs2 + j * a.bs3, a.bdt);
    if (a.kb) v = v + ork_ld(a.kb, b * a.Lk + j, a.kdt);
    if (a.causal) v = v + (j <= i + (a.Lk - a.Lq) ? 0.0f : -1e30f);
    return v;
}

__global__ void k_bias_softmax(BiasArgs a) {
    int64_t r = blockIdx.x, i = r % a.Lq, h = (r / a.Lq) % a.H, b = r / (a.Lq * a.H), o = r * a.Lk;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < a.Lk; c += blockDim.x) m = fmaxf(m, tx_val(a, r, b, h, i, c));
    m = tx_block_max(m);
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < a.Lk; c += blockDim.x) s += __expf(tx_val(a, r, b, h, i, c) - m);
    float inv = 1.f / tx_block_sum(s);
    /* F32 in place: each thread writes only what it alone reads in this pass */
    for (int64_t c = threadIdx.x; c < a.Lk; c += blockDim.x)
        ork_st(a.P, o + c, 1.0f * (__expf(tx_val(a, r, b, h, i, c) - m) * inv), a.pdt);
}

int tx_row_threads(int64_t n) { return n >= 4096 ? 512 : n >= 512 ? 256 : 128; } /* cuda_gn.cu's row_threads */

int tx_dt_ok(ork_dtype t) { return t == ORK_F32 || t == ORK_BF16 || t == ORK_F16; }

} // namespace

extern "C" ork_status ork_cuda_bias_softmax(const ork_kctx *k, int64_t nb, int64_t H, int64_t Lq, int64_t Lk,
                                            const float *S, const void *bias, ork_dtype bdt, const int64_t bs[4],
                                            const void *key_bias, ork_dtype kdt, int causal, void *P, ork_dtype pdt) {
    if ((bias && !tx_dt_ok(bdt)) || (key_bias && !tx_dt_ok(kdt)) || !tx_dt_ok(pdt))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda bias_softmax: dtypes %d, %d, %d (F32, BF16, F16 supported)", (int)bdt,
                        (int)kdt, (int)pdt);
    int64_t rows = nb * H * Lq;
    if (rows <= 0 || Lk <= 0) return ORK_OK;
    if (rows > 0x7fffffffLL) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda bias_softmax: %lld rows", (long long)rows);
    BiasArgs a = {H, Lq, Lk, S, bias, (int)bdt, bias ? bs[0] : 0, bias ? bs[1] : 0, bias ? bs[2] : 0,
                  bias ? bs[3] : 0, key_bias, (int)kdt, causal, P, (int)pdt};
    k_bias_softmax<<<(unsigned)rows, tx_row_threads(Lk), 0, ork_stream(ork_cuda_kstream(k))>>>(a);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}
