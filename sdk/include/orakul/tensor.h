/* orakul/tensor.h — tensors as plugins see them: opaque handles owned by the
 * core, and the tensor service "orakul.tensor/1".
 *
 * A tensor is row-major with up to ORK_MAX_DIMS dims, on the CPU or a CUDA
 * device, of any ork_dtype. Tensors made during a forward pass belong to the
 * graph (ork_graph) that made them and live until the core resets that graph;
 * plugins never free them. Weights belong to the core's weight store.
 *
 * Shapes in comments are written (B, L, C) etc.; the last dim is contiguous. */
#ifndef ORAKUL_TENSOR_H
#define ORAKUL_TENSOR_H

#include <stddef.h>       /* offsetof */
#include <orakul/abi.h>   /* ork_abi, ork_status */
#include <orakul/dtype.h> /* ork_dtype, ork_device */

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_MAX_DIMS 8

typedef struct ork_tensor ork_tensor; /* opaque; owned by the core */
typedef struct ork_graph ork_graph;   /* opaque: one execution context (backend,
                                         stream, autograd tape, arena) */

#define ORK_SERVICE_TENSOR "orakul.tensor/1"

typedef struct ork_tensor_api {
    ork_abi abi;
    /* Introspection. [any-thread] */
    int (*ndim)(const ork_tensor *t);
    int64_t (*dim)(const ork_tensor *t, int axis); /* axis < 0 counts from the end */
    int64_t (*numel)(const ork_tensor *t);
    ork_dtype (*dtype)(const ork_tensor *t);
    ork_device (*device)(const ork_tensor *t);
    const char *(*name)(const ork_tensor *t); /* weight name, or "" */

    /* A new tensor of the graph's backend and device, uninitialised. */
    ork_status (*empty)(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, ork_tensor **out);
    /* A new tensor filled from host memory of the same dtype (copied; the
     * caller keeps ownership of host). Never records on the tape. */
    ork_status (*from_host)(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape,
                            const void *host, ork_tensor **out);
    /* Copy a tensor's values to host memory, converted to dst_dt (F32, BF16,
     * F16 or the tensor's own dtype). Synchronises the graph's stream: not for
     * use inside a training step. */
    ork_status (*to_host)(ork_graph *g, const ork_tensor *t, ork_dtype dst_dt, void *host);

    /* The graph's backend device and whether the tape records. */
    ork_device (*graph_device)(const ork_graph *g);
    int (*grad_enabled)(const ork_graph *g);

    /* A weight by its canonical name, from the core's weight store, resident
     * on the graph's device for the duration of the current block.
     * ORK_E_INVALID with one logged line when the name is unknown. */
    ork_status (*weight)(ork_graph *g, const char *name, ork_tensor **out);

    /* Appended. A tensor that outlives graph resets (a loss's frozen weights,
     * a codec's tables), on g's device, filled from host (of dtype dt),
     * accounted under the tag "frozen"; never requires grad. The caller owns
     * it and frees it with release. NULL entries: an older core. */
    ork_status (*persistent)(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape, const void *host,
                             ork_tensor **out);
    void (*release)(ork_tensor *t); /* NULL is a no-op */

    /* ABI 1.2. The caller will not read t again: its graph memory is freed now,
     * for the next tensors of the same graph (a codec's no-grad encode at 1024²
     * otherwise holds every intermediate, GiBs, until the graph resets). A no-op
     * for weights, persistent tensors, views and their sources, and tensors on
     * the tape (the backward frees those itself). Reading t afterwards is an
     * error (one line). NULL entry: an older core. */
    void (*drop)(ork_graph *g, ork_tensor *t);
} ork_tensor_api;

/* Whether ta has persistent and release (a 1.x core from before they were appended does not). */
static inline int ork_tensor_api_has_persistent(const ork_tensor_api *ta) {
    return ta->abi.struct_size >= offsetof(ork_tensor_api, release) + sizeof ta->release && ta->persistent &&
           ta->release;
}

/* Whether ta has drop (a core from before ABI 1.2 does not). */
static inline int ork_tensor_api_has_drop(const ork_tensor_api *ta) {
    return ta->abi.struct_size >= offsetof(ork_tensor_api, drop) + sizeof ta->drop && ta->drop;
}

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_TENSOR_H */
