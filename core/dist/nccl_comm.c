/* dist/nccl_comm.c — see nccl_comm.h. Declares NCCL's entry points itself
 * (function pointer types from the stable nccl.h 2.x signatures) and resolves
 * them by name (platform.h). Owns the library handle and the communicators. */
#include "dist/nccl_comm.h"

#include "platform/platform.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nccl.h: typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
 * typedef struct ncclComm *ncclComm_t; enums are int-sized. */
typedef struct { char internal[ORK_NCCL_ID_BYTES]; } nccl_unique_id;
typedef void *nccl_comm_t;
typedef int nccl_result_t;

typedef nccl_result_t (*fn_get_version)(int *version);
typedef nccl_result_t (*fn_get_unique_id)(nccl_unique_id *id);
typedef nccl_result_t (*fn_comm_init_rank)(nccl_comm_t *comm, int nranks, nccl_unique_id id, int rank);
typedef nccl_result_t (*fn_comm_destroy)(nccl_comm_t comm);
typedef nccl_result_t (*fn_comm_abort)(nccl_comm_t comm);
typedef const char *(*fn_get_error_string)(nccl_result_t r);
typedef const char *(*fn_get_last_error)(nccl_comm_t comm);
typedef nccl_result_t (*fn_comm_get_async_error)(nccl_comm_t comm, nccl_result_t *err);
typedef nccl_result_t (*fn_all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, nccl_comm_t comm,
                                       void *stream);
typedef nccl_result_t (*fn_broadcast)(const void *send, void *recv, size_t count, int dtype, int root,
                                      nccl_comm_t comm, void *stream);

struct ork_nccl {
    ork_lib *lib;
    char path[512];
    int version;
    int made_comm;  /* NCCL keeps threads after a communicator: never dlclose then */
    fn_get_version get_version;
    fn_get_unique_id get_unique_id;
    fn_comm_init_rank comm_init_rank;
    fn_comm_destroy comm_destroy;
    fn_comm_abort comm_abort;
    fn_get_error_string get_error_string;
    fn_get_last_error get_last_error;        /* optional (2.13+) */
    fn_comm_get_async_error get_async_error;
    fn_all_reduce all_reduce;
    fn_broadcast broadcast;
};

struct ork_nccl_comm {
    ork_nccl *n;
    nccl_comm_t comm;
};

static const char *errstr(ork_nccl *n, nccl_comm_t c, nccl_result_t r) {
    const char *last = c && n->get_last_error ? n->get_last_error(c) : NULL;
    if (last && *last) return last;
    return n->get_error_string ? n->get_error_string(r) : "unknown NCCL error";
}

ork_status ork_nccl_load(ork_nccl **out) {
    *out = NULL;
    /* before NCCL reads its environment (at its first call) */
    if (!ork_env_get("NCCL_NVLS_ENABLE")) ork_env_set("NCCL_NVLS_ENABLE", "0");
    const char *want = ork_env_get("ORAKUL_NCCL_LIB");
    const char *name = want && *want ? want : "libnccl.so.2";
    ork_lib *lib;
    char why[1024];
    if (ork_lib_open(name, why, sizeof why, &lib) != ORK_OK)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "NCCL: cannot load %s: a multi-GPU run needs NCCL 2.10 or newer "
                        "(Debian/Ubuntu: libnccl2; or set ORAKUL_NCCL_LIB to the library's path)", why);
    ork_nccl *n = calloc(1, sizeof *n);
    if (!n) { ork_lib_close(lib); return ORK_E_NOMEM; }
    n->lib = lib;
    snprintf(n->path, sizeof n->path, "%s", name);
    struct { const char *sym; void **slot; int required; } syms[] = {
        {"ncclGetVersion", (void **)&n->get_version, 1},
        {"ncclGetUniqueId", (void **)&n->get_unique_id, 1},
        {"ncclCommInitRank", (void **)&n->comm_init_rank, 1},
        {"ncclCommDestroy", (void **)&n->comm_destroy, 1},
        {"ncclCommAbort", (void **)&n->comm_abort, 1},
        {"ncclGetErrorString", (void **)&n->get_error_string, 1},
        {"ncclGetLastError", (void **)&n->get_last_error, 0},
        {"ncclCommGetAsyncError", (void **)&n->get_async_error, 1},
        {"ncclAllReduce", (void **)&n->all_reduce, 1},
        {"ncclBroadcast", (void **)&n->broadcast, 1},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = ork_lib_sym(lib, syms[i].sym);
        if (!p && syms[i].required) {
            ork_nccl_unload(n);
            return ORK_FAIL(ORK_E_UNSUPPORTED, "NCCL: %s has no %s: not an NCCL 2.x library", name, syms[i].sym);
        }
        memcpy(syms[i].slot, &p, sizeof p);
    }
    int v = 0;
    nccl_result_t r = n->get_version(&v);
    if (r != ORK_NCCL_SUCCESS || v < 21000) {
        ork_nccl_unload(n);
        return ORK_FAIL(ORK_E_UNSUPPORTED, "NCCL: %s is version %d.%d (code %d): orakul needs 2.10 or newer (ncclAvg)",
                        name, v >= 10000 ? v / 10000 : v / 1000, v >= 10000 ? v / 100 % 100 : v / 100 % 10, v);
    }
    n->version = v;
    *out = n;
    return ORK_OK;
}

void ork_nccl_unload(ork_nccl *n) {
    if (!n) return;
    if (n->lib && !n->made_comm) ork_lib_close(n->lib);
    free(n);
}

int ork_nccl_version(const ork_nccl *n) { return n ? n->version : 0; }
const char *ork_nccl_path(const ork_nccl *n) { return n ? n->path : ""; }

ork_status ork_nccl_unique_id(ork_nccl *n, unsigned char id[ORK_NCCL_ID_BYTES]) {
    nccl_unique_id u;
    memset(&u, 0, sizeof u);
    nccl_result_t r = n->get_unique_id(&u);
    if (r != ORK_NCCL_SUCCESS) return ORK_FAIL(ORK_E_CUDA, "NCCL: ncclGetUniqueId: %s", errstr(n, NULL, r));
    memcpy(id, u.internal, ORK_NCCL_ID_BYTES);
    return ORK_OK;
}

ork_status ork_nccl_comm_init(ork_nccl *n, int world, const unsigned char id[ORK_NCCL_ID_BYTES], int rank,
                              ork_nccl_comm **out) {
    *out = NULL;
    ork_nccl_comm *c = calloc(1, sizeof *c);
    if (!c) return ORK_E_NOMEM;
    nccl_unique_id u;
    memcpy(u.internal, id, ORK_NCCL_ID_BYTES);
    nccl_result_t r = n->comm_init_rank(&c->comm, world, u, rank);
    if (r != ORK_NCCL_SUCCESS) {
        free(c);
        return ORK_FAIL(ORK_E_CUDA, "NCCL: ncclCommInitRank (rank %d of %d): %s", rank, world, errstr(n, NULL, r));
    }
    c->n = n;
    n->made_comm = 1;
    *out = c;
    return ORK_OK;
}

void ork_nccl_comm_destroy(ork_nccl_comm *c) {
    if (!c) return;
    if (c->comm) c->n->comm_destroy(c->comm);
    free(c);
}

void ork_nccl_comm_abort(ork_nccl_comm *c) {
    if (!c) return;
    if (c->comm) c->n->comm_abort(c->comm);
    free(c);
}

ork_status ork_nccl_allreduce(ork_nccl_comm *c, const void *send, void *recv, size_t count, ork_nccl_dtype dt,
                              ork_nccl_op op, void *stream) {
    nccl_result_t r = c->n->all_reduce(send, recv, count, (int)dt, (int)op, c->comm, stream);
    if (r != ORK_NCCL_SUCCESS && r != ORK_NCCL_IN_PROGRESS)
        return ORK_FAIL(ORK_E_CUDA, "NCCL: ncclAllReduce of %zu values: %s", count, errstr(c->n, c->comm, r));
    return ORK_OK;
}

ork_status ork_nccl_broadcast(ork_nccl_comm *c, const void *send, void *recv, size_t count, ork_nccl_dtype dt,
                              int root, void *stream) {
    nccl_result_t r = c->n->broadcast(send, recv, count, (int)dt, root, c->comm, stream);
    if (r != ORK_NCCL_SUCCESS && r != ORK_NCCL_IN_PROGRESS)
        return ORK_FAIL(ORK_E_CUDA, "NCCL: ncclBroadcast of %zu values: %s", count, errstr(c->n, c->comm, r));
    return ORK_OK;
}

ork_status ork_nccl_async_error(ork_nccl_comm *c) {
    nccl_result_t e = ORK_NCCL_SUCCESS;
    nccl_result_t r = c->n->get_async_error(c->comm, &e);
    if (r != ORK_NCCL_SUCCESS) return ORK_FAIL(ORK_E_CUDA, "NCCL: ncclCommGetAsyncError: %s", errstr(c->n, c->comm, r));
    if (e != ORK_NCCL_SUCCESS && e != ORK_NCCL_IN_PROGRESS)
        return ORK_FAIL(ORK_E_CUDA, "NCCL: a collective failed: %s", errstr(c->n, c->comm, e));
    return ORK_OK;
}
