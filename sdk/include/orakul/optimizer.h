/* orakul/optimizer.h — the optimizer component (kind ORK_KIND_OPTIMIZER),
 * chosen by train.optimizer with train.optimizer_params as its params.
 *
 * The core owns parameters, gradients and state memory; the optimizer says how
 * many state bytes a parameter needs and updates any SUBSET of parameters per
 * call, so the streaming runtime can step one block's parameters as soon as
 * their gradients are complete. State is plain bytes (zeroed before the first
 * step), so the core can save, restore and move it between host and device. */
#ifndef ORAKUL_OPTIMIZER_H
#define ORAKUL_OPTIMIZER_H

#include <orakul/abi.h>
#include <orakul/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_opt_param {
    const char *name;
    ork_dtype dtype;    /* of data: F32 or BF16 */
    int64_t numel;
    void *data;         /* (numel) on the step's device */
    const float *grad;  /* (numel) F32 on the step's device */
    void *state;        /* state_bytes() bytes on the step's device, zeroed before step 1 */
} ork_opt_param;

typedef struct ork_opt_step {
    ork_abi abi;
    int64_t step;       /* 1-based, counts optimizer steps */
    double lr;          /* this step's learning rate (after the schedule) */
    float grad_scale;   /* multiply gradients by this first (clipping); 1 = none */
    ork_device device;
    void *stream;       /* cudaStream_t on ORK_DEV_CUDA, else NULL */
    uint64_t seed;      /* for stochastic rounding of BF16 parameters */
    /* ABI 1.1: [n] each parameter's index among all trainable tensors (stable
     * for the run), so randomness keyed per parameter is the same whether the
     * core steps every parameter in one call or one streamed block's at a time
     * (stream/trainable_stream.h); NULL: 0..n-1. */
    const int32_t *param_ids;
    /* Tail fields, 1.x-compatible: read them only when abi.struct_size covers
     * them (ork_opt_step_has_whole); an older core's struct ends above. */
    int32_t whole;  /* 1: this call steps every parameter of this optimizer step
                     * (the resident state: an optimizer with global sums, e.g.
                     * prodigy, may finish them inside the call); 0: a part (one
                     * streamed block, more calls of the same step follow) or unknown */
    double base_lr; /* train.lr before the schedule (lr = base_lr · schedule); 0: unknown */
} ork_opt_step;

/* Whether s (from a core of any 1.x minor) carries whole and base_lr. */
#define ork_opt_step_has_whole(s) \
    ((s)->abi.struct_size >= offsetof(ork_opt_step, base_lr) + sizeof((s)->base_lr))

typedef struct ork_optimizer_vtable {
    ork_abi abi;
    ork_status (*create)(const ork_host *host, const void *params, void **self); /* required */
    void (*destroy)(void *self);                                                /* required */
    /* Required: bytes of state for one parameter tensor. */
    ork_status (*state_bytes)(void *self, ork_dtype dt, int64_t numel, size_t *bytes);
    /* Required: update n parameters. [stream-ordered] on CUDA. */
    ork_status (*step)(void *self, const ork_opt_step *s, ork_opt_param *params, int n);
    /* Optional (ABI 1.3): is one parameter's state sound? state: a HOST copy of
     * state_bytes(dt, numel) bytes (as saved in a resumable state). ORK_OK when
     * every number in it is finite; ORK_E_NUMERIC otherwise, *at = the byte
     * offset of the first bad value. No logging: the core names the file and
     * the tensor. The core checks every state it resumes from with it; NULL:
     * the optimizer's state is not checked (its bytes are still checksummed). */
    ork_status (*state_check)(void *self, ork_dtype dt, int64_t numel, const void *state, size_t *at);
} ork_optimizer_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_OPTIMIZER_H */
