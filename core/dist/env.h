/* dist/env.h — the environment of one rank of a data-parallel run, as
 * `orakul run --gpus N` (dist/launcher.h), torchrun or mpirun set it:
 * WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (OpenMPI's
 * OMPI_COMM_WORLD_SIZE / _RANK / _LOCAL_RANK stand in for the first three
 * when those are unset), plus orakul's own ORAKUL_DIST_TIMEOUT (rendezvous
 * and collective timeout, seconds, default 300), ORAKUL_DIST_NCCL=1 (go
 * through NCCL even when the world is one process: the GPU tests use it) and
 * ORAKUL_DIST_PORT (the rendezvous port when it is not MASTER_PORT).
 *
 * The rendezvous port: ORAKUL_DIST_PORT if set; else MASTER_PORT + 1 under
 * torchrun (TORCHELASTIC_USE_AGENT_STORE=True: its agent already serves a
 * store on MASTER_PORT); else MASTER_PORT.
 *
 * Rules: no WORLD_SIZE (and no OMPI size) is a single process; WORLD_SIZE
 * 1..4096; RANK required when WORLD_SIZE > 1, 0..WORLD_SIZE-1; LOCAL_RANK
 * 0..1023, defaults to RANK (one host); MASTER_ADDR (at most 255 bytes) and
 * MASTER_PORT (1..65535) required when WORLD_SIZE > 1. Integers are strict
 * (decimal, no sign, no trailing text). Every violation is one line naming
 * the variable, its value and what it must be.
 *
 * Owns nothing. [control-thread] */
#ifndef ORK_DIST_ENV_H
#define ORK_DIST_ENV_H

#include <orakul/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_DIST_MAX_WORLD 4096
#define ORK_DIST_DEFAULT_TIMEOUT_S 300

typedef struct ork_dist_env {
    int world;          /* processes in the job (1: not distributed) */
    int rank;           /* 0 .. world-1 */
    int local_rank;     /* rank on this host: the CUDA device index */
    char addr[256];     /* MASTER_ADDR ("" when world == 1) */
    int port;           /* the rendezvous port (0 when world == 1) */
    int timeout_s;      /* ORAKUL_DIST_TIMEOUT */
    int force_nccl;     /* ORAKUL_DIST_NCCL=1 */
} ork_dist_env;

/* Where variables come from: NULL for unset. getenv for real runs; tests pass a table. */
typedef const char *(*ork_dist_getenv_fn)(void *ctx, const char *name);

ork_status ork_dist_env_parse(ork_dist_getenv_fn get, void *ctx, ork_dist_env *out);
/* ork_dist_env_parse over the process environment. */
ork_status ork_dist_env_read(ork_dist_env *out);
/* Does this process take part in a collective run (world > 1 or forced)? */
int ork_dist_env_active(const ork_dist_env *e);

#ifdef __cplusplus
}
#endif
#endif
