/* tensor/ops.c — the ops service ("orakul.ops/1"): its table, every op of
 * <orakul/ops.h> pointing at its definition (tensor/ops_impl.h says which file
 * holds which). Owns the static table. [control-thread] */
#include "tensor/ops.h"

#include "tensor/ops_fused.h" /* gated_add, layernorm_modulate (ABI 1.4) */
#include "tensor/ops_impl.h"
#include "tensor/ops_qkv.h"  /* qkv_rope, attn_merge (ABI 1.4) */
#include "tensor/ops_text.h" /* embedding, attention_bias, quick_gelu, layernorm_affine (ABI 1.3) */

static const ork_ops g_ops = {
    .abi = ORK_ABI_INIT(ork_ops),
    .linear = ork_op_linear,
    .add = ork_op_add,
    .mul = ork_op_mul,
    .scale = ork_op_scale,
    .modulate = ork_op_modulate,
    .layernorm = ork_op_layernorm,
    .rmsnorm = ork_op_rmsnorm,
    .gelu_tanh = ork_op_gelu,
    .silu = ork_op_silu,
    .relu = ork_op_relu,
    .swiglu = ork_op_swiglu,
    .tanh_clamp = ork_op_tanh_clamp,
    .rope = ork_op_rope,
    .attention = ork_op_attention,
    .reshape = ork_op_reshape,
    .permute = ork_op_permute,
    .concat = ork_op_concat,
    .split = ork_op_split,
    .conv2d = ork_op_conv2d,
    .maxpool2x2 = ork_op_maxpool,
    .upsample2x = ork_op_upsample,
    .matmul = ork_op_matmul,
    .mse = ork_op_mse,
    .mean = ork_op_mean,
    .sum = ork_op_sum,
    .cast = ork_op_cast,
    .groupnorm = ork_op_groupnorm,
    .pad2d = ork_op_pad2d,
    .softmax = ork_op_softmax,
    .embedding = ork_op_embedding,
    .attention_bias = ork_op_attention_bias,
    .quick_gelu = ork_op_quick_gelu,
    .layernorm_affine = ork_op_layernorm_affine,
    .qkv_rope = ork_op_qkv_rope,
    .attn_merge = ork_op_attn_merge,
    .gated_add = ork_op_gated_add,
    .layernorm_modulate = ork_op_layernorm_modulate,
};

const ork_ops *ork_ops_table(void) { return &g_ops; }
