/* cuda/cuda_info.cu — what the planner asks of the device: its name and its
 * free and total memory (cudaMemGetInfo). [control-thread], not in a step. */
#include <cuda_runtime.h>

#include <stdio.h>

#include "cuda/cuda_ctx.h"

extern "C" ork_status ork_cuda_mem_info(int device, size_t *free_b, size_t *total_b, char *name, size_t name_len) {
    cudaDeviceProp p;
    if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess ||
        cudaMemGetInfo(free_b, total_b) != cudaSuccess)
        return ORK_E_CUDA;
    if (name && name_len) snprintf(name, name_len, "%s", p.name);
    return ORK_OK;
}
