/* dist/dist_unsupported.c — multi-GPU training where it does not run: the
 * Windows build compiles this in place of launcher.c and rendezvous.c (fork,
 * POSIX signals and sockets; and NCCL, the collectives library, is Linux
 * only). `orakul run --gpus N` says so in one line; a rank environment
 * (WORLD_SIZE > 1) gets ORK_E_UNSUPPORTED from the rendezvous. One-GPU
 * training does not touch any of it. Owns nothing. */
#include "dist/launcher.h"
#include "dist/rendezvous.h"

#include "util/log.h"

#include <stdio.h>

#define WHY "multi-GPU training runs on Linux only (NCCL and the launcher need it)"

int ork_launch(int n, const char *exe, char *const argv[]) {
    (void)exe, (void)argv;
    fprintf(stderr, "orakul run --gpus %d: %s\n", n, WHY);
    return 2;
}

ork_status ork_rdzv_listen(const char *addr, int port, ork_rdzv_listener **out) {
    *out = NULL;
    return ORK_FAIL(ORK_E_UNSUPPORTED, "distributed: rendezvous on %s:%d: %s", addr ? addr : "?", port, WHY);
}

int ork_rdzv_listener_port(const ork_rdzv_listener *l) {
    (void)l;
    return 0;
}

void ork_rdzv_listener_close(ork_rdzv_listener *l) { (void)l; }

ork_status ork_rdzv_serve(ork_rdzv_listener *l, const ork_rdzv_opts *o, const uint8_t id[ORK_RDZV_ID_BYTES]) {
    (void)l, (void)o, (void)id;
    return ORK_FAIL(ORK_E_UNSUPPORTED, "distributed: %s", WHY);
}

ork_status ork_rdzv_join(const char *addr, int port, const ork_rdzv_opts *o, uint8_t id[ORK_RDZV_ID_BYTES]) {
    (void)o, (void)id;
    return ORK_FAIL(ORK_E_UNSUPPORTED, "distributed: rendezvous with %s:%d: %s", addr ? addr : "?", port, WHY);
}
