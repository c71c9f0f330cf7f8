/* cuda/cuda_info.cu — what the planner asks of the device: its name and its
 * free and total memory (cudaMemGetInfo), and whether its driver is WDDM.
 *
 * WDDM (Windows' display driver model; every GeForce card on Windows, and any
 * card not switched to TCC) pages device memory out to system RAM when the
 * allocations exceed the VRAM, silently: a run that "fits" that way runs at
 * PCIe speed. The planner's budget is never above the free memory measured
 * here minus a reserve (core/train/plan_glue.c; docs/streaming.md), and the
 * allocator holds to the budget, so orakul never allocates into that shared
 * memory; under WDDM the first query says so in one line. Detected as
 * cudaDevAttrTccDriver == 0 on Windows (elsewhere no card is WDDM).
 * [control-thread], not in a step. */
#include <cuda_runtime.h>

#include <stdio.h>

#include "cuda/cuda_ctx.h"

extern "C" {
#include "util/log.h"
}

extern "C" int ork_cuda_wddm(int device) {
#ifdef _WIN32
    int tcc = 0;
    if (cudaDeviceGetAttribute(&tcc, cudaDevAttrTccDriver, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return tcc == 0;
#else
    (void)device;
    return 0;
#endif
}

extern "C" ork_status ork_cuda_mem_info(int device, size_t *free_b, size_t *total_b, char *name, size_t name_len) {
    cudaDeviceProp p;
    if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess ||
        cudaMemGetInfo(free_b, total_b) != cudaSuccess)
        return ORK_E_CUDA;
    if (name && name_len) snprintf(name, name_len, "%s", p.name);
    static int said = -1; /* the device the WDDM line was said for */
    if (said != device && ork_cuda_wddm(device)) {
        said = device;
        ORK_INFO("cuda: device %d (%s) runs under WDDM: past the free VRAM the driver would page into system RAM "
                 "(slow, silent); the plan stays under the %.2f GiB free now, less a reserve",
                 device, p.name, (double)*free_b / 1073741824.0);
    }
    return ORK_OK;
}
