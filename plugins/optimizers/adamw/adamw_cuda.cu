// adamw_cuda.cu — the fp32-state AdamW step on the device (see adamw_math.h).
// Elementwise, grid-stride; float math via adamw_elem.h's _rn intrinsics, so it
// is bit-identical to adamw_math.c. Caller's stream, no sync.
#include <cuda_runtime.h>

#include "adamw_elem.h"

namespace {

// param/grad: [numel] f32|bf16; m, v: [numel] f32.
__global__ void k_adamw(ork_adamw_hparams h, ork_adamw_scalars sc, int64_t step, void *param,
                        ork_dtype pdt, const void *grad, ork_dtype gdt, float *m, float *v,
                        int64_t numel) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        ork_adamw_elem(param, pdt, ork_load_f(grad, gdt, i), &mi, &vi, i, &sc, &h, step);
        m[i] = mi;
        v[i] = vi;
    }
}

} // namespace

extern "C" ork_status ork_adamw_step_cuda(const ork_adamw_hparams *hp, int64_t step, void *param,
                                          ork_dtype param_dtype, const void *grad,
                                          ork_dtype grad_dtype, void *state, int64_t numel,
                                          ork_cuda_stream stream) {
    if (!hp || !param || !grad || !state || step < 1 || numel < 1 ||
        (param_dtype != ORK_F32 && param_dtype != ORK_BF16) ||
        (grad_dtype != ORK_F32 && grad_dtype != ORK_BF16))
        return ORK_E_INVALID;
    const ork_adamw_scalars sc = ork_adamw_scalars_for(hp, step);
    const int threads = 256;
    int64_t blocks = (numel + threads - 1) / threads;
    if (blocks > 16384) blocks = 16384;
    float *m = (float *)state;
    k_adamw<<<(unsigned)blocks, threads, 0, stream>>>(*hp, sc, step, param, param_dtype, grad,
                                                      grad_dtype, m, m + numel, numel);
    return cudaGetLastError() == cudaSuccess ? ORK_OK : ORK_E_CUDA;
}
