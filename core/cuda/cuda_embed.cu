/* cuda/cuda_embed.cu — the CUDA backend's row gather (tensor/backend.h slot
 * embedding: token ids -> rows of an embedding table, for the text encoders).
 * An id outside the table gives a row of NaN: a kernel cannot report it without
 * a sync, and NaN is loud downstream (the op's callers check ids on the host).
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_ops.h"
#include "cuda/cuda_util.cuh"

namespace {
__global__ void k_embedding(int64_t n, int64_t V, int64_t D, const int32_t *ids, const void *w, int wdt, void *y,
                            int dt) {
    for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
        int64_t r = ids[row];
        int ok = r >= 0 && r < V;
        for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
            ork_st(y, row * D + c, ok ? ork_ld(w, r * D + c, wdt) : __int_as_float(0x7fc00000), dt);
    }
}
} // namespace

extern "C" ork_status ork_cuda_embedding(const ork_kctx *k, int64_t n, int64_t V, int64_t D, const int32_t *ids,
                                         const void *w, ork_dtype wdt, void *y, ork_dtype dt) {
    if (wdt != ORK_F32 && wdt != ORK_BF16)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda embedding: table dtype %d (F32 or BF16)", (int)wdt);
    if (dt != ORK_F32 && dt != ORK_BF16 && dt != ORK_F16)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda embedding: output dtype %d", (int)dt);
    if (n <= 0 || D <= 0) return ORK_OK;
    int64_t blocks = n < 65535 ? n : 65535;
    int threads = D >= 1024 ? 256 : D >= 128 ? 128 : 32;
    k_embedding<<<(unsigned)blocks, threads, 0, ork_stream(ork_cuda_kstream(k))>>>(n, V, D, ids, w, (int)wdt, y, (int)dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}
