/* adamw_math.c — CPU step of the fp32-state AdamW (see adamw_math.h).
 * Build with -ffp-contract=off (bit-identity with adamw_cuda.cu). */
#include "adamw_elem.h"

size_t ork_adamw_state_size(int64_t numel) { return numel > 0 ? (size_t)numel * 8 : 0; }

ork_status ork_adamw_step_cpu(const ork_adamw_hparams *hp, int64_t step, void *param,
                              ork_dtype param_dtype, const void *grad, ork_dtype grad_dtype,
                              void *state, int64_t numel) {
    if (!hp || !param || !grad || !state || step < 1 || numel < 1 ||
        (param_dtype != ORK_F32 && param_dtype != ORK_BF16) ||
        (grad_dtype != ORK_F32 && grad_dtype != ORK_BF16))
        return ORK_E_INVALID;
    ork_adamw_scalars sc = ork_adamw_scalars_for(hp, step);
    float *m = (float *)state, *v = m + numel;
    for (int64_t i = 0; i < numel; i++)
        ork_adamw_elem(param, param_dtype, ork_load_f(grad, grad_dtype, i), &m[i], &v[i], i, &sc,
                       hp, step);
    return ORK_OK;
}
