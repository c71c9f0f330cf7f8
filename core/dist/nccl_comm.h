/* dist/nccl_comm.h — NCCL, loaded at run time: dlopen("libnccl.so.2") (or
 * ORAKUL_NCCL_LIB, a path) only when a run is distributed, so single-GPU and
 * CPU builds and runs never need NCCL (docs/DECISIONS.md, 2026-11-30). The
 * handful of entry points orakul calls are declared here from NCCL's stable C
 * API (types and enum values as nccl.h 2.x defines them; tests/dist checks
 * them against nccl.h when the build finds it). NCCL >= 2.10 is required
 * (ncclAvg).
 *
 * Before the first NCCL call of the process ork_nccl_load sets
 * NCCL_NVLS_ENABLE=0 unless the user set it (NVLink SHARP multicast needs a
 * fabric setup these machines do not guarantee).
 *
 * Owns the library handle (one per ork_nccl) and the communicators it makes.
 * Streams are cudaStream_t passed as void *. [control-thread] */
#ifndef ORK_DIST_NCCL_COMM_H
#define ORK_DIST_NCCL_COMM_H

#include <orakul/abi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_NCCL_ID_BYTES 128

/* NCCL's values (nccl.h: ncclResult_t, ncclDataType_t, ncclRedOp_t). */
enum {
    ORK_NCCL_SUCCESS = 0,
    ORK_NCCL_IN_PROGRESS = 7,
};
typedef enum ork_nccl_dtype {
    ORK_NCCL_UINT8 = 1,
    ORK_NCCL_INT32 = 2,
    ORK_NCCL_INT64 = 4,
    ORK_NCCL_FLOAT32 = 7,
    ORK_NCCL_FLOAT64 = 8,
} ork_nccl_dtype;
typedef enum ork_nccl_op {
    ORK_NCCL_SUM = 0,
    ORK_NCCL_MAX = 2,
    ORK_NCCL_MIN = 3,
    ORK_NCCL_AVG = 4,
} ork_nccl_op;

typedef struct ork_nccl ork_nccl;          /* the loaded library */
typedef struct ork_nccl_comm ork_nccl_comm; /* one communicator */

/* Load NCCL. Fails with one line naming the library and dlerror() when it is
 * missing, or the version when it is older than 2.10. */
ork_status ork_nccl_load(ork_nccl **out);
void ork_nccl_unload(ork_nccl *n);
int ork_nccl_version(const ork_nccl *n); /* e.g. 22809 for 2.28.9 */
const char *ork_nccl_path(const ork_nccl *n);

ork_status ork_nccl_unique_id(ork_nccl *n, unsigned char id[ORK_NCCL_ID_BYTES]);
/* On the current CUDA device (the caller set it). Blocks until every rank has joined. */
ork_status ork_nccl_comm_init(ork_nccl *n, int world, const unsigned char id[ORK_NCCL_ID_BYTES], int rank,
                              ork_nccl_comm **out);
/* Destroy (flushes pending work) or, after an error, abort (does not wait). */
void ork_nccl_comm_destroy(ork_nccl_comm *c);
void ork_nccl_comm_abort(ork_nccl_comm *c);

/* [stream-ordered] on stream; in place when send == recv. */
ork_status ork_nccl_allreduce(ork_nccl_comm *c, const void *send, void *recv, size_t count, ork_nccl_dtype dt,
                              ork_nccl_op op, void *stream);
ork_status ork_nccl_broadcast(ork_nccl_comm *c, const void *send, void *recv, size_t count, ork_nccl_dtype dt,
                              int root, void *stream);
/* An error NCCL met asynchronously (a peer died, a network failure): ORK_OK
 * or one line with NCCL's text. */
ork_status ork_nccl_async_error(ork_nccl_comm *c);

#ifdef __cplusplus
}
#endif
#endif
