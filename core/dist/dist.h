/* dist/dist.h — the collective side of one rank of a data-parallel run: the
 * environment (dist/env.h), the TCP rendezvous that hands out rank 0's NCCL id
 * (dist/rendezvous.h), the NCCL communicator (dist/nccl_comm.h), one
 * communication stream beside the graph's compute stream and the events that
 * order the two. Every collective goes through NCCL, on the communication
 * stream, in the same order on every rank.
 *
 * ork_dist_start is called once the CUDA device of this rank is current (the
 * graph's context made it so): it refuses with one line a CPU backend or a
 * build without CUDA, loads NCCL, runs the rendezvous (the config hash must
 * match rank 0's) and creates the communicator. A NULL ork_dist is the single
 * process: every query below answers rank 0 of 1.
 *
 * Waits: ork_dist_wait blocks the host until the communication stream is
 * done, polling NCCL's asynchronous error; after 6 × ORAKUL_DIST_TIMEOUT
 * (30 min by default) it aborts the communicator and fails with one line,
 * instead of hanging on a peer that died.
 *
 * Owns the communicator, the stream, the events, a small device scratch and
 * the NCCL library handle. [control-thread] */
#ifndef ORK_DIST_DIST_H
#define ORK_DIST_DIST_H

#include "dist/env.h"
#include "dist/nccl_comm.h"
#include "tensor/alloc.h"
#include "tensor/backend.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_dist ork_dist;

/* The CUDA device index of this process: single process, `device` is "cuda"
 * or "cuda:N" (N, default 0); distributed, LOCAL_RANK (the config's N is
 * ignored). n_visible: devices this process sees. One line when out of range. */
ork_status ork_dist_device_index(const ork_dist_env *e, const char *device, int n_visible, int *out);

/* FNV-1a 64 of the config file's bytes and the orakul version. */
ork_status ork_dist_config_hash(const char *config_path, uint64_t *out);

/* *out = NULL when env is not active (one process). k: the graph's kctx
 * (borrowed: its stream is the compute stream). */
ork_status ork_dist_start(const ork_dist_env *env, const ork_backend *be, const ork_kctx *k, ork_alloc *a,
                          uint64_t config_hash, ork_dist **out);
/* failed != 0: abort the communicator (a peer may be gone) instead of a clean destroy. */
void ork_dist_destroy(ork_dist *d, int failed);

int ork_dist_rank(const ork_dist *d);
int ork_dist_world(const ork_dist *d);
int ork_dist_local_rank(const ork_dist *d);
ork_nccl_comm *ork_dist_comm(ork_dist *d);
void *ork_dist_stream(ork_dist *d);

/* Ranks > 0 keep warnings and errors only, and their stdout (the step
 * lines, identical on every rank) goes to /dev/null, unless
 * ORAKUL_DIST_LOG_ALL=1. Rank 0 and NULL: nothing changes. */
void ork_dist_quiet_other_ranks(const ork_dist *d);

/* Later communication-stream work waits for the compute stream's work so far. */
ork_status ork_dist_comm_after_compute(ork_dist *d);
/* Later compute-stream work waits for the communication stream's work so far. */
ork_status ork_dist_compute_after_comm(ork_dist *d);
/* The host waits for the communication stream (what: for the timeout line). */
ork_status ork_dist_wait(ork_dist *d, const char *what);

/* Small host values (n <= 16), reduced over all ranks with op; blocks. */
ork_status ork_dist_allreduce_host(ork_dist *d, double *v, int n, ork_nccl_op op);
/* Every rank reaches this point before any leaves it. */
ork_status ork_dist_barrier(ork_dist *d);
/* [comm-stream] bytes at dev from rank 0 to every rank (bracket with the two ordering calls). */
ork_status ork_dist_broadcast(ork_dist *d, void *dev, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
