/* tensor/ops_fused.h — the fused ops (ABI 1.4 fields of <orakul/ops.h>:
 * gated_add, layernorm_modulate), defined in tensor/ops_fused.c; tensor/ops.c
 * puts them in the ops table. Signatures and semantics: <orakul/ops.h>.
 * Owns nothing. [control-thread] */
#ifndef ORK_TENSOR_OPS_FUSED_H
#define ORK_TENSOR_OPS_FUSED_H

#include <orakul/ops.h>

ork_status ork_op_gated_add(ork_graph *g, ork_tensor *x, ork_tensor *gate, ork_tensor *h, ork_tensor **y);
ork_status ork_op_layernorm_modulate(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, float eps,
                                     ork_tensor **y);

#endif
