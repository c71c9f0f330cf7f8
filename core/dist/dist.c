/* dist/dist.c — see dist.h. Owns the communicator, its stream and events. */
#include "dist/dist.h"

#include "data/dataset.h" /* ork_fnv1a64 */
#include "dist/rendezvous.h"
#include "tensor/tensor.h"
#include "platform/platform.h"
#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_read */

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#include "dist/dist_cuda.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ork_dist {
    ork_dist_env env;
    const ork_backend *be;
    ork_kctx compute;      /* the graph's kctx (copied) */
    void *compute_stream;  /* the stream the backend runs the graph's work on */
    ork_kctx comm_k;       /* the same context on the communication stream */
    ork_nccl *nccl;
    ork_nccl_comm *comm;
    void *stream;
    void *ev_compute, *ev_comm;
    ork_tensor *scratch;   /* U8 (128): host values on their way through NCCL */
    int device;
};

ork_status ork_dist_device_index(const ork_dist_env *e, const char *device, int n_visible, int *out) {
    const char *dev = device && *device ? device : "cuda:0";
    int want = 0;
    if (strncmp(dev, "cuda", 4) != 0)
        return ORK_FAIL(ORK_E_CONFIG, "device '%s': not a CUDA device (cuda or cuda:N)", dev);
    if (dev[4] == ':') {
        char *end;
        errno = 0;
        long v = strtol(dev + 5, &end, 10);
        if (errno || end == dev + 5 || *end || v < 0 || v > 1023)
            return ORK_FAIL(ORK_E_CONFIG, "device '%s': N in cuda:N must be a device index, 0..1023", dev);
        want = (int)v;
    } else if (dev[4]) {
        return ORK_FAIL(ORK_E_CONFIG, "device '%s': not a CUDA device (cuda or cuda:N)", dev);
    }
    if (e && ork_dist_env_active(e)) {
        if (want != 0 && e->local_rank == 0)
            ORK_INFO("distributed run: device '%s' is ignored; each rank uses cuda:<LOCAL_RANK>", dev);
        want = e->local_rank;
        if (want >= n_visible) {
            const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
            return ORK_FAIL(ORK_E_CONFIG, "LOCAL_RANK=%d but this process sees %d CUDA device%s%s%s%s: one GPU per "
                            "rank (--gpus N needs N GPUs)", want, n_visible, n_visible == 1 ? "" : "s",
                            cvd ? " (CUDA_VISIBLE_DEVICES=" : "", cvd ? cvd : "", cvd ? ")" : "");
        }
    } else if (want >= n_visible) {
        return ORK_FAIL(ORK_E_CONFIG, "device '%s': this process sees %d CUDA device%s", dev, n_visible,
                        n_visible == 1 ? "" : "s");
    }
    *out = want;
    return ORK_OK;
}

ork_status ork_dist_config_hash(const char *config_path, uint64_t *out) {
    char *text; /* bounded like the config reader's own read (util/rfile.h) */
    size_t n;
    ORK_TRY(ork_rfile_read(config_path, "config", ORK_CONFIG_MAX_BYTES, 0, &text, &n));
    uint64_t h = ork_fnv1a64(text, n, ORK_FNV1A64_INIT);
    free(text);
    static const char ver[] = "orakul " ORAKUL_VERSION;
    *out = ork_fnv1a64(ver, sizeof ver - 1, h);
    return ORK_OK;
}

int ork_dist_rank(const ork_dist *d) { return d ? d->env.rank : 0; }
int ork_dist_world(const ork_dist *d) { return d ? d->env.world : 1; }
int ork_dist_local_rank(const ork_dist *d) { return d ? d->env.local_rank : 0; }
ork_nccl_comm *ork_dist_comm(ork_dist *d) { return d ? d->comm : NULL; }
void *ork_dist_stream(ork_dist *d) { return d ? d->stream : NULL; }

void ork_dist_quiet_other_ranks(const ork_dist *d) {
    if (!d || d->env.rank == 0) return;
    const char *all = getenv("ORAKUL_DIST_LOG_ALL");
    if (all && !strcmp(all, "1")) return;
    if (ork_log_get_level() < ORK_LOG_WARN) ork_log_set_level(ORK_LOG_WARN);
    fflush(stdout);
    if (!freopen("/dev/null", "w", stdout)) ORK_WARN("rank %d: cannot silence stdout: %s", d->env.rank, strerror(errno));
}

/* What every build refuses: a collective run on the CPU backend. */
static ork_status check_backend(const ork_dist_env *env, const ork_backend *be) {
    if (be->device != ORK_DEV_CUDA)
        return ORK_FAIL(ORK_E_CONFIG, "WORLD_SIZE=%d with device: cpu: data-parallel training runs one process per "
                        "CUDA GPU (set device: cuda, or run one process)", env->world);
    return ORK_OK;
}

#ifdef ORAKUL_HAVE_CUDA

void ork_dist_destroy(ork_dist *d, int failed) {
    if (!d) return;
    if (d->comm) {
        if (failed) ork_nccl_comm_abort(d->comm);
        else ork_nccl_comm_destroy(d->comm);
    }
    ork_tensor_free(d->scratch);
    ork_dcuda_event_destroy(d->ev_compute);
    ork_dcuda_event_destroy(d->ev_comm);
    ork_cuda_stream_destroy(d->stream);
    ork_nccl_unload(d->nccl);
    free(d);
}

ork_status ork_dist_start(const ork_dist_env *env, const ork_backend *be, const ork_kctx *k, ork_alloc *a,
                          uint64_t config_hash, ork_dist **out) {
    *out = NULL;
    if (!ork_dist_env_active(env)) return ORK_OK;
    ORK_TRY(check_backend(env, be));
    ork_dist *d = calloc(1, sizeof *d);
    if (!d) return ORK_E_NOMEM;
    d->env = *env;
    d->be = be;
    d->compute = *k;
    d->comm_k = *k;
    d->compute_stream = k->stream; /* a graph's k.stream is always its real stream */
    ork_status s = ork_dcuda_current_device(&d->device);
    if (s == ORK_OK) s = ork_nccl_load(&d->nccl);
    unsigned char id[ORK_NCCL_ID_BYTES] = {0};
    ork_rdzv_opts ro = {env->rank, env->world, config_hash, env->timeout_s * 1000};
    if (s == ORK_OK && env->rank == 0) {
        ork_rdzv_listener *l = NULL;
        s = ork_nccl_unique_id(d->nccl, id);
        if (s == ORK_OK && env->world > 1) s = ork_rdzv_listen(env->addr, env->port, &l);
        if (s == ORK_OK && env->world > 1) {
            ORK_INFO("distributed: rank 0 waits for %d rank%s on %s:%d", env->world - 1, env->world > 2 ? "s" : "",
                     env->addr, env->port);
            s = ork_rdzv_serve(l, &ro, id);
        }
        ork_rdzv_listener_close(l);
    } else if (s == ORK_OK) {
        s = ork_rdzv_join(env->addr, env->port, &ro, id);
    }
    if (s == ORK_OK) s = ork_nccl_comm_init(d->nccl, env->world, id, env->rank, &d->comm);
    if (s == ORK_OK) s = ork_cuda_stream_create(&d->stream);
    if (s == ORK_OK) s = ork_dcuda_event_create(&d->ev_compute);
    if (s == ORK_OK) s = ork_dcuda_event_create(&d->ev_comm);
    int64_t nb = 128;
    if (s == ORK_OK) s = ork_tensor_new(a, "workspace", ORK_U8, 1, &nb, 0, &d->scratch);
    if (s != ORK_OK) {
        ork_dist_destroy(d, 1);
        return s;
    }
    d->comm_k.stream = d->stream;
    int v = ork_nccl_version(d->nccl);
    ORK_INFO("distributed: rank %d of %d on cuda:%d (local rank %d), NCCL %d.%d.%d from %s", env->rank, env->world,
             d->device, env->local_rank, v / 10000, v / 100 % 100, v % 100, ork_nccl_path(d->nccl));
    *out = d;
    return ORK_OK;
}

ork_status ork_dist_comm_after_compute(ork_dist *d) {
    if (!d) return ORK_OK;
    ORK_TRY(ork_dcuda_record(d->ev_compute, d->compute_stream));
    return ork_dcuda_wait(d->stream, d->ev_compute);
}

ork_status ork_dist_compute_after_comm(ork_dist *d) {
    if (!d) return ORK_OK;
    ORK_TRY(ork_dcuda_record(d->ev_comm, d->stream));
    return ork_dcuda_wait(d->compute_stream, d->ev_comm);
}

static double now_s(void) {
    return 1e-9 * (double)ork_time_ns();
}

ork_status ork_dist_wait(ork_dist *d, const char *what) {
    if (!d) return ORK_OK;
    double limit = 6.0 * d->env.timeout_s, t0 = now_s();
    for (long spin = 0;; spin++) {
        int done = 0;
        ORK_TRY(ork_dcuda_query(d->stream, &done));
        if (done) return ORK_OK;
        if ((spin & 63) == 0) {
            ORK_TRY(ork_nccl_async_error(d->comm));
            if (now_s() - t0 > limit)
                return ORK_FAIL(ORK_E_CUDA, "distributed: rank %d waited %.0f s for %s; a peer rank died or hangs "
                                "(ORAKUL_DIST_TIMEOUT=%d: collectives wait 6x that)", d->env.rank, limit, what,
                                d->env.timeout_s);
        }
        ork_sleep_us(spin < 1000 ? 20 : 1000);
    }
}

ork_status ork_dist_allreduce_host(ork_dist *d, double *v, int n, ork_nccl_op op) {
    if (!d || n <= 0) return ORK_OK;
    if (n > 16) return ORK_FAIL(ORK_E_INVALID, "distributed: allreduce of %d host values (at most 16)", n);
    void *dev = ork_tensor_data(d->scratch);
    ORK_TRY(d->be->memcpy_h2d(&d->comm_k, dev, v, (size_t)n * sizeof *v));
    ORK_TRY(ork_nccl_allreduce(d->comm, dev, dev, (size_t)n, ORK_NCCL_FLOAT64, op, d->stream));
    ORK_TRY(ork_dist_wait(d, "a host-value all-reduce")); /* polled: a copy to pageable memory would block blind */
    ORK_TRY(d->be->memcpy_d2h(&d->comm_k, v, dev, (size_t)n * sizeof *v));
    return ork_dist_wait(d, "a host-value all-reduce");
}

ork_status ork_dist_barrier(ork_dist *d) {
    double one = 1;
    ORK_TRY(ork_dist_allreduce_host(d, &one, 1, ORK_NCCL_SUM));
    if (d && (int)one != d->env.world)
        return ORK_FAIL(ORK_E_INTERNAL, "distributed: barrier counted %g ranks of %d", one, d->env.world);
    return ORK_OK;
}

ork_status ork_dist_broadcast(ork_dist *d, void *dev, size_t bytes) {
    if (!d || bytes == 0) return ORK_OK;
    return ork_nccl_broadcast(d->comm, dev, dev, bytes, ORK_NCCL_UINT8, 0, d->stream);
}

#else /* no CUDA: only the single process exists */

void ork_dist_destroy(ork_dist *d, int failed) {
    (void)failed;
    free(d);
}

ork_status ork_dist_start(const ork_dist_env *env, const ork_backend *be, const ork_kctx *k, ork_alloc *a,
                          uint64_t config_hash, ork_dist **out) {
    (void)k; (void)a; (void)config_hash;
    *out = NULL;
    if (!ork_dist_env_active(env)) return ORK_OK;
    ORK_TRY(check_backend(env, be));
    return ORK_FAIL(ORK_E_CONFIG, "WORLD_SIZE=%d: this orakul was built without CUDA; data-parallel training "
                    "needs a CUDA build (-DORAKUL_CUDA=ON) and one GPU per rank", env->world);
}

ork_status ork_dist_comm_after_compute(ork_dist *d) { (void)d; return ORK_OK; }
ork_status ork_dist_compute_after_comm(ork_dist *d) { (void)d; return ORK_OK; }
ork_status ork_dist_wait(ork_dist *d, const char *what) { (void)d; (void)what; return ORK_OK; }
ork_status ork_dist_allreduce_host(ork_dist *d, double *v, int n, ork_nccl_op op) {
    (void)d; (void)v; (void)n; (void)op;
    return ORK_OK;
}
ork_status ork_dist_barrier(ork_dist *d) { (void)d; return ORK_OK; }
ork_status ork_dist_broadcast(ork_dist *d, void *dev, size_t bytes) { (void)d; (void)dev; (void)bytes; return ORK_OK; }

#endif
