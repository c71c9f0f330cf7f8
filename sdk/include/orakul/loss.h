/* orakul/loss.h — the loss component (kind ORK_KIND_LOSS), chosen by
 * train.loss_type. A loss builds a scalar from the model's prediction on the
 * graph with the ops service; the core runs backward from it. */
#ifndef ORAKUL_LOSS_H
#define ORAKUL_LOSS_H

#include <orakul/abi.h>
#include <orakul/plugin.h>
#include <orakul/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_loss_inputs {
    ork_abi abi;
    ork_tensor *pred;      /* (B, N, C) predicted velocity v = ε − x0 */
    ork_tensor *target;    /* (B, N, C) ε − x0 */
    ork_tensor *x_t;       /* (B, N, C) noisy tokens */
    ork_tensor *x0;        /* (B, N, C) clean tokens */
    ork_tensor *t;         /* (B) F32 */
    const float *t_host;   /* (B) the same timesteps on the host */
    int h_tokens, w_tokens;
    /* Decode tokens to pixels (B, 3, H, W) in [0, 1] with the model family's
     * codec, differentiably. NULL when the family has no codec. */
    ork_status (*decode)(void *ctx, ork_graph *g, ork_tensor *tokens, ork_tensor **img);
    void *decode_ctx;
} ork_loss_inputs;

typedef struct ork_loss_vtable {
    ork_abi abi;
    ork_status (*create)(const ork_host *host, const void *params, void **self); /* required */
    void (*destroy)(void *self);                                                /* required */
    /* Optional: load frozen weights onto g's device; g is long-lived. */
    ork_status (*prepare)(void *self, ork_graph *g);
    /* Required: loss (1) F32 scalar on g. */
    ork_status (*compute)(void *self, ork_graph *g, const ork_loss_inputs *in, ork_tensor **loss);
} ork_loss_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_LOSS_H */
