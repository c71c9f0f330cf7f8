/* cuda/cuda_dropout.cu — in-place dropout with the counter-hash mask shared
 * with the CPU (tensor/dropout_hash.h). [stream-ordered] */
#include "cuda/cuda_ops.h"
#include "cuda/cuda_util.cuh"
#include "tensor/dropout_hash.h"

namespace {
__global__ void k_dropout(int64_t n, uint64_t seed, uint64_t thr, float scale, void *x, int dt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = ork_drop_keep(seed, (uint64_t)i, thr) ? ork_ld(x, i, dt) * scale : 0.0f;
        ork_st(x, i, v, dt);
    }
}
} // namespace

extern "C" ork_status ork_cuda_dropout(const ork_kctx *k, int64_t n, uint64_t seed, uint64_t threshold, float scale,
                                       void *x, ork_dtype dt) {
    if (dt != ORK_F32 && dt != ORK_BF16 && dt != ORK_F16) return ORK_E_UNSUPPORTED;
    if (n <= 0) return ORK_OK;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    k_dropout<<<(unsigned)blocks, 256, 0, ork_stream(ork_cuda_kstream(k))>>>(n, seed, threshold, scale, x, (int)dt);
    return cudaGetLastError() == cudaSuccess ? ORK_OK : ORK_E_CUDA;
}
