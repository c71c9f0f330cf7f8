/* orakul/ops.h — the ops service "orakul.ops/1": every differentiable op a
 * model, loss or codec plugin may call. Plugins write the forward pass only;
 * when the graph records (grad enabled and an input needs a gradient) the core
 * puts each op on its autograd tape, and each op owns a hand-written backward.
 *
 * Conventions
 * - Every op returns ork_status; results come back through the last argument,
 *   owned by the graph (valid until the core resets it; never freed by you).
 * - Inputs are borrowed for the duration of the call.
 * - Activations use the graph's activation dtype (F32 on the CPU backend,
 *   BF16 on CUDA); reductions and norms accumulate in F32.
 * - Broadcasting (add, mul, modulate): b's shape is right-aligned against a's
 *   and each of its dims equals a's or is 1 (numpy rules, b never larger).
 *   The result has a's shape.
 * - On CUDA every op is [stream-ordered] on the graph's stream.
 * - Axis arguments may be negative (from the end). */
#ifndef ORAKUL_OPS_H
#define ORAKUL_OPS_H

#include <orakul/abi.h>
#include <orakul/tensor.h> /* ork_tensor, ork_graph */

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_SERVICE_OPS "orakul.ops/1"

typedef struct ork_attn_opts {
    ork_abi abi;
    float scale;   /* 0: 1/sqrt(D) */
    int causal;    /* 0: full attention (FLUX), 1: causal mask (text encoders) */
} ork_attn_opts;

typedef struct ork_ops {
    ork_abi abi;

    /* y (..., N) = x (..., K) · w (N, K)ᵀ + b (N). w is a weight from the store
     * (any stored dtype: F32, BF16, or quantized FP8 with scales, which the core
     * dequantizes) or a graph tensor. b may be NULL. If w is a LoRA target the
     * core adds scale·up(down(x)); the model never knows. */
    ork_status (*linear)(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, ork_tensor **y);

    /* Elementwise, b broadcast to a (see above). */
    ork_status (*add)(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
    ork_status (*mul)(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
    ork_status (*scale)(ork_graph *g, ork_tensor *x, float s, ork_tensor **y);
    /* y = (1 + scale)·x + shift; shift, scale broadcast to x, e.g. (B, 1, C) onto (B, L, C). */
    ork_status (*modulate)(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, ork_tensor **y);

    /* Over the last dim. layernorm has no affine parameters; rmsnorm multiplies
     * by w (C) when w is not NULL: y = x·rsqrt(mean(x²)+eps)·w. */
    ork_status (*layernorm)(ork_graph *g, ork_tensor *x, float eps, ork_tensor **y);
    ork_status (*rmsnorm)(ork_graph *g, ork_tensor *x, ork_tensor *w, float eps, ork_tensor **y);

    /* Activations. swiglu: x (..., 2C) -> silu(x[..., :C]) · x[..., C:] (gate first). */
    ork_status (*gelu_tanh)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    ork_status (*silu)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    ork_status (*relu)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    ork_status (*swiglu)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    /* y = c·tanh(x / c) (TAEF1's clamp uses c = 3). */
    ork_status (*tanh_clamp)(ork_graph *g, ork_tensor *x, float c, ork_tensor **y);

    /* Rotary embedding on adjacent pairs (FLUX): x (B, H, L, D), pe (L, D/2, 2)
     * F32 holding (cos, sin) per pair; out[2k] = c·x[2k] − s·x[2k+1],
     * out[2k+1] = s·x[2k] + c·x[2k+1]. */
    ork_status (*rope)(ork_graph *g, ork_tensor *x, ork_tensor *pe, ork_tensor **y);

    /* softmax(q·kᵀ·scale)·v for q, k, v (B, H, L, D) -> y (B, H, L, D).
     * opts may be NULL. On CUDA: fused, never materialises L×L. */
    ork_status (*attention)(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v,
                            const ork_attn_opts *opts, ork_tensor **y);

    /* Shape ops. reshape keeps the element count (one dim may be -1); permute
     * reorders dims (materialising a contiguous copy); concat joins n tensors
     * along axis; split cuts x along axis into n parts of the given sizes. */
    ork_status (*reshape)(ork_graph *g, ork_tensor *x, int ndim, const int64_t *shape, ork_tensor **y);
    ork_status (*permute)(ork_graph *g, ork_tensor *x, const int *perm, ork_tensor **y);
    ork_status (*concat)(ork_graph *g, int n, ork_tensor *const *xs, int axis, ork_tensor **y);
    ork_status (*split)(ork_graph *g, ork_tensor *x, int axis, int n, const int64_t *sizes, ork_tensor **ys);

    /* Images, NCHW. conv2d: w (Cout, Cin, kh, kw), b (Cout) or NULL. */
    ork_status (*conv2d)(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, int stride, int pad,
                         ork_tensor **y);
    ork_status (*maxpool2x2)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    ork_status (*upsample2x)(ork_graph *g, ork_tensor *x, ork_tensor **y); /* nearest */

    /* Batched matmul: a (..., M, K) or (..., K, M) if ta; b (..., K, N) or
     * (..., N, K) if tb; leading dims equal. Gram matrices: matmul(F, F, 0, 1). */
    ork_status (*matmul)(ork_graph *g, ork_tensor *a, ork_tensor *b, int ta, int tb, ork_tensor **y);

    /* Reductions to a scalar (shape (1)), F32. mse = mean((a − b)²). */
    ork_status (*mse)(ork_graph *g, ork_tensor *a, ork_tensor *b, ork_tensor **y);
    ork_status (*mean)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    ork_status (*sum)(ork_graph *g, ork_tensor *x, ork_tensor **y);

    /* Convert x to dtype dt (differentiable; the gradient is cast back). */
    ork_status (*cast)(ork_graph *g, ork_tensor *x, ork_dtype dt, ork_tensor **y);

    /* ---- appended after 1.0 (docs/DECISIONS.md): a plugin built against an
     * older header never sees them; one that calls them checks
     * abi.struct_size >= offsetof(ork_ops, softmax) + sizeof(void *) first. */

    /* GroupNorm: x (B, C, ...) NCHW-style, channels on dim 1, num_groups divides
     * C; per (batch, group) mean and biased variance over C/num_groups channels
     * and every trailing element: y = (x − mean)·rsqrt(var + eps)·w[c] + b[c].
     * w, b (C) are F32 or BF16 of one dtype, or NULL (no affine). */
    ork_status (*groupnorm)(ork_graph *g, ork_tensor *x, int num_groups, ork_tensor *w, ork_tensor *b, float eps,
                            ork_tensor **y);
    /* Zero padding of the last two dims: x (..., H, W) ->
     * y (..., top + H + bottom, left + W + right); every amount >= 0. */
    ork_status (*pad2d)(ork_graph *g, ork_tensor *x, int left, int right, int top, int bottom, ork_tensor **y);
    /* softmax over the last dim (F32 math). Materialises its input: for L×L
     * scores where the fused attention does not apply (head dim > 128 on CUDA). */
    ork_status (*softmax)(ork_graph *g, ork_tensor *x, ork_tensor **y);

    /* ---- ABI 1.3: the text encoders (T5, CLIP). Check with ork_ops_has_text()
     * before calling: a 1.2 core does not have them. */

    /* Rows of a table: y (..., D) = w[ids[...], :] for w (V, D) F32 or BF16 (a
     * weight or a graph tensor; not a quantized weight) and ids (...) I32 on
     * the graph's device; y in the graph's activation dtype. An id outside
     * [0, V): the CPU fails with one line; CUDA writes a row of NaN (it cannot
     * report without a sync): check ids on the host first. No backward: fails
     * when recorded (w requires grad). */
    ork_status (*embedding)(ork_graph *g, ork_tensor *w, ork_tensor *ids, ork_tensor **y);
    /* y (B, H, Lq, D) = softmax(scale·q·kᵀ + bias + key_bias + causal)·v for
     * q (B, H, Lq, D), k, v (B, H, Lk, D). bias: additive, broadcast (numpy
     * rules) to (B, H, Lq, Lk), e.g. T5's position bias (1, H, Lq, Lk), or NULL;
     * key_bias: additive per key (B, Lk) (0 = attend, a large negative number =
     * masked: HF's extended attention mask), or NULL; opts: scale (0: 1/sqrt(D);
     * T5 passes 1) and causal. Scores and softmax in F32 (they are materialised:
     * for text lengths). Any float dtypes for the biases. No backward: fails
     * when recorded. */
    ork_status (*attention_bias)(ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, ork_tensor *bias,
                                 ork_tensor *key_bias, const ork_attn_opts *opts, ork_tensor **y);
    /* y = x·σ(1.702·x) (CLIP's quick_gelu); differentiable. */
    ork_status (*quick_gelu)(ork_graph *g, ork_tensor *x, ork_tensor **y);
    /* Layer norm over the last dim with affine parameters: y = (x − mean)·rstd·w + b;
     * w, b (C) any float dtype, either may be NULL; differentiable. */
    ork_status (*layernorm_affine)(ork_graph *g, ork_tensor *x, ork_tensor *w, ork_tensor *b, float eps,
                                   ork_tensor **y);

    /* ---- ABI 1.4: fused block epilogues (issue #31). Check with
     * ork_ops_has_fused() before calling: a 1.3 core does not have them. */

    /* The gated residual add y = x + gate·h (FLUX's x + gate·attn(...) and
     * x + gate·mlp(...)): x, h of one shape and dtype; gate broadcast to x (see
     * above; e.g. (B, 1, C) onto (B, L, C)) in x's dtype. Differentiable in all
     * three. The values of add(x, mul(h, gate)); on CUDA one kernel each way
     * when gate is per (leading dims, channel) and shared by the tokens. */
    ork_status (*gated_add)(ork_graph *g, ork_tensor *x, ork_tensor *gate, ork_tensor *h, ork_tensor **y);
    /* y = layernorm(x)·(1 + scale) + shift over the last dim, no affine (FLUX's
     * pre-attention and pre-MLP norms): x (..., C); shift, scale broadcast to x
     * as for modulate, x's dtype. Differentiable in all three. The values of
     * modulate(layernorm(x, eps), shift, scale); on CUDA, where shift and scale
     * are shared by the tokens, one kernel each way that keeps the normalised
     * x in F32 (the composition rounds it to BF16 once more). */
    ork_status (*layernorm_modulate)(ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale, float eps,
                                     ork_tensor **y);

    /* ---- ABI 1.4: the attention side of a block, one pass each way (issue
     * #31). Check with ork_ops_has_qkv() before calling. */

    /* Joint attention's q, k, v from n qkv linear outputs (FLUX: n = 2, text
     * then image, in the double blocks; n = 1 in the single blocks), 1 <= n <= 4:
     * qkv[i] (B, L_i, 3·heads·D) holds q | k | v, each `heads` heads of D, D
     * even (FLUX's "B L (K H D)"). Returns q, k, v (B, heads, L, D), L = Σ L_i,
     * stream i at rows L_0 + ... + L_(i-1); q and k RMS-normed over D (eps;
     * weights qw[i], kw[i] of D elements, F32/BF16/F16; a NULL array or entry:
     * no weight) and then rotated by pe (L, D/2, 2) F32 as rope does; v moved
     * only. The values of split + reshape + permute + rmsnorm + concat + rope
     * (the CPU runs exactly that); on CUDA one kernel each way. Differentiable
     * in qkv[i], qw[i], kw[i]. */
    ork_status (*qkv_rope)(ork_graph *g, int n, ork_tensor *const *qkv, ork_tensor *const *qw,
                           ork_tensor *const *kw, ork_tensor *pe, float eps, int heads, ork_tensor **q,
                           ork_tensor **k, ork_tensor **v);
    /* Attention's output back to token rows: a (B, H, L, D) -> ys[i] (B, L_i,
     * H·D + C2) for i < n, the tokens cut along L into n parts of sizes[i]
     * (Σ = L; sizes may be NULL when n = 1), each row followed by the matching
     * row of extra (B, L, C2) in a's dtype when extra is not NULL (FLUX's single
     * blocks: [attention | MLP activation] before linear2). The values of
     * permute + reshape + split / concat, one copy of each element.
     * Differentiable in a and extra. */
    ork_status (*attn_merge)(ork_graph *g, ork_tensor *a, int n, const int64_t *sizes, ork_tensor *extra,
                             ork_tensor **ys);
} ork_ops;

/* Whether ops has the ABI 1.3 text-encoder ops (a 1.2 core does not). */
static inline int ork_ops_has_text(const ork_ops *ops) {
    return ops->abi.struct_size >= offsetof(ork_ops, layernorm_affine) + sizeof ops->layernorm_affine &&
           ops->embedding && ops->attention_bias && ops->quick_gelu && ops->layernorm_affine;
}

/* Whether ops has the ABI 1.4 fused ops (gated_add, layernorm_modulate). */
static inline int ork_ops_has_fused(const ork_ops *ops) {
    return ops->abi.struct_size >= offsetof(ork_ops, layernorm_modulate) + sizeof ops->layernorm_modulate &&
           ops->gated_add && ops->layernorm_modulate;
}

/* Whether ops has the ABI 1.4 attention-side ops (qkv_rope, attn_merge). */
static inline int ork_ops_has_qkv(const ork_ops *ops) {
    return ops->abi.struct_size >= offsetof(ork_ops, attn_merge) + sizeof ops->attn_merge && ops->qkv_rope &&
           ops->attn_merge;
}

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_OPS_H */
