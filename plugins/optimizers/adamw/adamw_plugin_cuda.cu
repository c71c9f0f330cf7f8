/* adamw_plugin_cuda.cu — the one piece of device memory the optimizer plugin
 * owns: the 8-bit code books (2 KiB), copied once on first use. */
#include <cuda_runtime.h>

#include "adamw8bit.h"

extern "C" ork_status ork_opt_upload_maps(const ork_adamw8bit_maps *maps, ork_adamw8bit_maps **d_maps) {
    void *p = nullptr;
    if (cudaMalloc(&p, sizeof *maps) != cudaSuccess) return ORK_E_CUDA;
    if (cudaMemcpy(p, maps, sizeof *maps, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(p);
        return ORK_E_CUDA;
    }
    *d_maps = static_cast<ork_adamw8bit_maps *>(p);
    return ORK_OK;
}

extern "C" void ork_opt_free_maps(ork_adamw8bit_maps *d_maps) { cudaFree(d_maps); }
