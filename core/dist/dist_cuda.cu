/* dist/dist_cuda.cu — see dist_cuda.h. Owns nothing beyond the events it creates. */
#include "dist/dist_cuda.h"

extern "C" {
#include "tensor/backend.h"
#include "util/log.h"
}

#include <cuda_runtime.h>

#define DC_TRY(call, what) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return ORK_FAIL(ORK_E_CUDA, "dist: %s: %s", what, cudaGetErrorString(e_)); } while (0)

extern "C" ork_status ork_dcuda_event_create(void **ev) {
    cudaEvent_t e;
    DC_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    *ev = (void *)e;
    return ORK_OK;
}

extern "C" void ork_dcuda_event_destroy(void *ev) {
    if (ev) cudaEventDestroy((cudaEvent_t)ev);
}

extern "C" ork_status ork_dcuda_record(void *ev, void *stream) {
    DC_TRY(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream), "cudaEventRecord");
    return ORK_OK;
}

extern "C" ork_status ork_dcuda_wait(void *stream, void *ev) {
    DC_TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0), "cudaStreamWaitEvent");
    return ORK_OK;
}

extern "C" ork_status ork_dcuda_query(void *stream, int *done) {
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaSuccess) { *done = 1; return ORK_OK; }
    if (e == cudaErrorNotReady) { *done = 0; return ORK_OK; }
    return ORK_FAIL(ORK_E_CUDA, "dist: the communication stream failed: %s", cudaGetErrorString(e));
}

extern "C" ork_status ork_dcuda_current_device(int *dev) {
    DC_TRY(cudaGetDevice(dev), "cudaGetDevice");
    return ORK_OK;
}

