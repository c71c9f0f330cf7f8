/* tensor/ops_text.h — the ops the text encoders brought (ABI 1.3 fields of
 * <orakul/ops.h>: embedding, attention_bias, quick_gelu, layernorm_affine),
 * defined in tensor/ops_text.c; tensor/ops.c puts them in the ops table.
 * Signatures and semantics: <orakul/ops.h>. Owns nothing. [control-thread] */
#ifndef ORK_TENSOR_OPS_TEXT_H
#define ORK_TENSOR_OPS_TEXT_H

#include <orakul/ops.h>

/* attention_bias computes its F32 scores in slices of whole sequences of at
 * most this many bytes (one sequence at least); its probabilities (in q's
 * dtype when not F32) take a slice as well. The text conditioner's plan
 * counts them once per chunk, not per caption. */
#ifndef ORK_ATTN_BIAS_SLICE /* a build may set it smaller to test the slicing */
#define ORK_ATTN_BIAS_SLICE ((size_t)512 << 20)
#endif

ork_status ork_op_embedding(ork_graph *g, ork_tensor *w, ork_tensor *ids, ork_tensor **y);
ork_status ork_op_attention_bias(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, ork_tensor *bias,
                                 ork_tensor *key_bias, const ork_attn_opts *opts, ork_tensor **y);
ork_status ork_op_quick_gelu(ork_graph *g, ork_tensor *x, ork_tensor **y);
ork_status ork_op_layernorm_affine(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, float eps,
                                   ork_tensor **y);

#endif
