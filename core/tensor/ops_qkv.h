/* tensor/ops_qkv.h — the attention side of a transformer block as two ops
 * (ABI 1.4 fields of <orakul/ops.h>: qkv_rope, attn_merge; issue #31),
 * defined in tensor/ops_qkv.c; tensor/ops.c puts them in the ops table.
 * Signatures and semantics: <orakul/ops.h>. Owns nothing. [control-thread] */
#ifndef ORK_TENSOR_OPS_QKV_H
#define ORK_TENSOR_OPS_QKV_H

#include <orakul/ops.h>

ork_status ork_op_qkv_rope(ork_graph *g, int n, ork_tensor *const *qkv, ork_tensor *const *qw, ork_tensor *const *kw,
                           ork_tensor *pe, float eps, int heads, ork_tensor **q, ork_tensor **k, ork_tensor **v);
ork_status ork_op_attn_merge(ork_graph *g, ork_tensor *a, int n, const int64_t *sizes, ork_tensor *extra,
                             ork_tensor **ys);

/* Where the backend has a fused qkv_rope kernel (CUDA), run the composition
 * of split, reshape, permute, rmsnorm, concat and rope instead when on != 0
 * (tests compare the two; ORAKUL_QKV_COMPOSITE=1 in the environment sets it
 * at the first call, for before/after measurements). */
void ork_qkv_force_composite(int on);

#endif
