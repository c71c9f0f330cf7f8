/* train/lora.h — the adapter network (LoRA, or LoKr: network.type): which
 * linear weights get an adapter, the adapters' trainable tensors, and the file
 * users load in ComfyUI, diffusers and stable-diffusion.cpp (FLUX.md §4).
 *
 * The adapter kind decides its two tensors, its init, its scale and its saved
 * keys; the linear op (tensor/ops_linear.c) applies either from ork_lora.kind.
 * LoRA: below. LoKr (ai-toolkit's toolkit/models/lokr.py, from LyCORIS): each
 * dimension is split by ork_lokr_factorization (out = a·b, in = c·d, a <= b,
 * c <= d), w1 (a, c) Kaiming-uniform like down, w2 (b, d) zero, ΔW = kron(w1, w2)
 * with scale 1 (LyCORIS: alpha = lora_dim when w1 and w2 are both full);
 * lokr_full_rank: false keeps w2 full only where linear >= max(b, d) / 2, else
 * w2 = w2_a (b, r) · w2_b (r, d) at alpha / r, r = linear (w2_a Kaiming, w2_b
 * zero; the module's up packs w2_a over w2_bᵀ: ORK_ADAPTER_LOKR_LR,
 * tensor/tensor.h). Saved as <key>.lokr_w1 / <key>.lokr_w2, no .alpha (ComfyUI's
 * weight_adapter/lokr.py applies full w1, w2 at alpha 1), or .lokr_w1 /
 * .lokr_w2_a / .lokr_w2_b / .alpha for a low-rank w2, in every format.
 *
 * Targets: weights flagged ORK_WEIGHT_LINEAR that the model names as its
 * default targets (ork_model_info.lora_targets; without them the linears of its
 * transformer blocks: not the embedders, not the final layer, ai-toolkit's
 * default), or network_kwargs.only_if_contains instead, less
 * ignore_if_contains (substring
 * match on the module name with '.' or with '_' as separator, so both BFL
 * and kohya spellings work). rank = min(network.linear, out, in); scale =
 * alpha / rank always. down (r, in) Kaiming-uniform (a = √5, PyTorch's Linear
 * init: U(±1/√in)), up (out, r) zero.
 *
 * Owns the adapters (tensors under tag "lora") and attaches them to the weight
 * store's tensors (ork_tensor.lora). [control-thread] */
#ifndef ORK_TRAIN_LORA_H
#define ORK_TRAIN_LORA_H

#include "train/wstore.h"

#include <stdio.h>

typedef struct ork_lora_opts {
    int64_t rank;
    double alpha;
    double dropout;
    const char *const *only_if_contains; int n_only;
    const char *const *ignore_if_contains; int n_ignore;
    ork_dtype param_dt;      /* F32 (default) */
    uint64_t seed;
    int deferred;            /* 1: tensors are headers without device memory and
                              * no values (the trainable state streams: the
                              * owner places them with ork_lora_init) */
    int kind;                /* ORK_ADAPTER_LORA (0) or ORK_ADAPTER_LOKR (network.type) */
    int64_t lokr_factor;     /* network.lokr_factor: -1 automatic */
    int lokr_full_rank;      /* network.lokr_full_rank */
} ork_lora_opts;

/* ai-toolkit's factorization(dimension, factor) (toolkit/models/lokr.py): dim =
 * m·n with m <= n, m the divisor closest to sqrt(dim) not above factor (-1: any),
 * or (factor, dim/factor) when factor > 0 divides dim (not reordered there, as
 * ai-toolkit; LyCORIS 4 puts the smaller first). */
void ork_lokr_factorization(int64_t dim, int64_t factor, int64_t *m, int64_t *n);

typedef struct ork_lora_net ork_lora_net;

ork_status ork_lora_create(ork_alloc *a, const ork_backend *be, ork_kctx *k, ork_wstore *ws,
                           const ork_model_info *info, const ork_lora_opts *o, ork_lora_net **out);
void ork_lora_destroy(ork_lora_net *n);

/* The initial values (down Kaiming-uniform, up zero; LoKr: w1 in down's place,
 * w2 in up's), generated in the same
 * order and from the same seed as ork_lora_create's, handed to fn one tensor
 * at a time: i = 2·module (down) or 2·module + 1 (up), host = numel F32.
 * ork_lora_create uses it to upload; a deferred network's owner uses it to
 * fill its host records, so both give bit-identical starting weights without
 * the whole LoRA ever sitting on the device. */
typedef ork_status (*ork_lora_init_fn)(void *ctx, int i, ork_tensor *t, const float *host);
ork_status ork_lora_init(ork_lora_net *n, ork_lora_init_fn fn, void *ctx);

int ork_lora_count(const ork_lora_net *n);          /* adapted modules */
const char *ork_lora_module(const ork_lora_net *n, int i); /* "double_blocks.0.img_attn.qkv" */
ork_lora *ork_lora_at(ork_lora_net *n, int i);   /* .kind says which; LoKr: down = w1, up = w2 */
int ork_lora_kind(const ork_lora_net *n);           /* ORK_ADAPTER_LORA / ORK_ADAPTER_LOKR */
int ork_lora_block(const ork_lora_net *n, int i);    /* model block index */
int64_t ork_lora_params(const ork_lora_net *n);      /* trainable parameter count */

/* Write the LoRA file (atomic). format "kohya" (lora_down / lora_up / alpha)
 * or "peft" / "peft-bfl" (lora_A / lora_B, the scale folded in: each times
 * sqrt(alpha/rank), no .alpha, because diffusers' reader of that format has no
 * place for one; metadata orakul_lora_scale says so and ss_network_alpha is the
 * file's effective alpha, the rank; docs/DECISIONS.md "LoRA file format"), keys
 * after the model's lora_prefix (ork_lora_key_prefixed); save_dt F32,
 * F16 or BF16. meta: NULL-terminated key, value pairs added to __metadata__.
 * The network's own values (the training state) are never scaled.
 * ORK_E_NUMERIC (one line naming the tensor and element), nothing written,
 * when a value is NaN or Inf, as trained or once converted to save_dt. */
ork_status ork_lora_save(ork_lora_net *n, const char *path, const char *format, ork_dtype save_dt,
                         const char *const *meta);
/* Where ork_lora_save reads the adapters' values: NULL (the default) reads the
 * device tensors; otherwise fn fills host (numel F32) for the down/up tensor t
 * (the trainer's host records when the trainable state streams). */
typedef ork_status (*ork_lora_reader)(void *ctx, const ork_tensor *t, float *host);
void ork_lora_set_reader(ork_lora_net *n, ork_lora_reader fn, void *ctx);

/* Read adapter values back from a file written by ork_lora_save (any dtype),
 * unfolding a folded file's scale (one without .alpha in a folding format);
 * used by tests. */
ork_status ork_lora_load(ork_lora_net *n, const char *path, const char *format);

/* The key prefix of module m in the given format ("lora_unet_double_blocks_0_img_attn_qkv"
 * or "diffusion_model.double_blocks.0.img_attn.qkv"). */
void ork_lora_key(const char *module, const char *format, char *buf, size_t n);
/* The same after the model's prefix (ork_model_info.lora_prefix; NULL or "":
 * the format's own, as ork_lora_key); kohya spells the module's dots '_'. */
void ork_lora_key_prefixed(const char *module, const char *format, const char *prefix, char *buf, size_t n);

#endif
