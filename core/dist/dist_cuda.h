/* dist/dist_cuda.h — internal to core/dist: the few CUDA runtime calls the
 * collective side needs beside the backend table (which has one stream per
 * graph and no events): events between the compute stream and the
 * communication stream, a non-blocking stream query for waits with a
 * timeout, and the current device. C interface over dist_cuda.cu; built only
 * with ORAKUL_CUDA. Streams and events travel as void *. [control-thread] */
#ifndef ORK_DIST_DIST_CUDA_H
#define ORK_DIST_DIST_CUDA_H

#include <orakul/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

ork_status ork_dcuda_event_create(void **ev); /* timing disabled */
void ork_dcuda_event_destroy(void *ev);
ork_status ork_dcuda_record(void *ev, void *stream);
/* Later work on stream waits for ev's last record. */
ork_status ork_dcuda_wait(void *stream, void *ev);
/* *done = 1 when everything enqueued on stream has finished. */
ork_status ork_dcuda_query(void *stream, int *done);
ork_status ork_dcuda_current_device(int *dev);

#ifdef __cplusplus
}
#endif
#endif
