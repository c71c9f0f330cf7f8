/* adamw_math.h — plain AdamW with fp32 state, torch.optim.AdamW semantics
 * (_single_tensor_adamw): p *= 1 - lr*wd BEFORE the update; m = lerp(m, g, 1-b1);
 * v = v*b2 + (1-b2)*g*g; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 * No NaN guard (as torch). The math library the "adamw" plugin wraps.
 *
 * State of a tensor with n elements: float m[n], float v[n] (8n bytes, zeros at
 * step 0, raw bytes: save/restore/copy freely). Params f32 or bf16 (RNE, or one
 * stochastic rounding with hp->bf16_stochastic); grads f32 or bf16.
 * CPU and CUDA give bit-identical results (adamw_math.c with -ffp-contract=off,
 * the kernel with explicit _rn intrinsics). */
#ifndef ORK_ADAMW_MATH_H
#define ORK_ADAMW_MATH_H

#include "optim_common.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t ork_adamw_state_size(int64_t numel); /* 8 * numel */

/* One step (t = step >= 1) of one tensor. param: [numel] f32|bf16 in place;
 * grad: [numel] f32|bf16; state: ork_adamw_state_size(numel) bytes in place. */
ork_status ork_adamw_step_cpu(const ork_adamw_hparams *hp, int64_t step, void *param,
                              ork_dtype param_dtype, const void *grad, ork_dtype grad_dtype,
                              void *state, int64_t numel);

/* Same on the device (all pointers device memory), enqueued on stream, no sync. */
ork_status ork_adamw_step_cuda(const ork_adamw_hparams *hp, int64_t step, void *param,
                               ork_dtype param_dtype, const void *grad, ork_dtype grad_dtype,
                               void *state, int64_t numel, ork_cuda_stream stream);

#ifdef __cplusplus
}
#endif
#endif
