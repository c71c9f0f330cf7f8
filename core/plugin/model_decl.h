/* plugin/model_decl.h — what a model declares (orakul/model.h, ABI 1.3:
 * blocks, weight tokens and attention, LoRA targets and key prefix, prediction,
 * noise schedule, time shift, sampler defaults), read with the core's
 * defaults where a model declares nothing (a plugin built against ABI <= 1.2).
 *
 * The defaults name no family (docs/DECISIONS.md "Model declarations"):
 *   blocks     0 input, n-1 output, the ones between transformer blocks (all
 *              transformer blocks when n < 3), attention over image + text in
 *              every transformer block, of the hidden width;
 *   weights    every linear on image + text tokens (N + T);
 *   LoRA       the linears of the transformer blocks, lora_format's prefix;
 *   schedule   flow-matching velocity; the resolution-dependent shift from the
 *              info's shift_base / shift_max (0.5 / 1.15 when 0) between 256
 *              and 4096 image tokens; fixed shift 3.0; the config's sampler
 *              steps and guidance.
 * Owns nothing; pure functions of the info. [any-thread] */
#ifndef ORK_PLUGIN_MODEL_DECL_H
#define ORK_PLUGIN_MODEL_DECL_H

#include <orakul/model.h>

/* The kind of block b (0 <= b < n_blocks). */
ork_block_kind ork_model_block_kind(const ork_model_info *info, int b);
/* Whether b is a transformer block (streams, holds the default LoRA targets). */
int ork_model_block_is_transformer(const ork_model_info *info, int b);
/* The tokens the weight d is applied to (declared: its ORK_WEIGHT_TOKENS bits). */
ork_tokens ork_model_weight_tokens(const ork_model_info *info, const ork_weight_decl *d);
/* Whether d tells that its block computes attention (declared: ORK_WEIGHT_ATTN;
 * the default: any weight of a transformer block). */
int ork_model_weight_marks_attention(const ork_model_info *info, const ork_weight_decl *d);
/* The tokens and width of block b's attention (width 0: the hidden width). */
ork_tokens ork_model_block_attn_tokens(const ork_model_info *info, int b);
int64_t ork_model_block_attn_dim(const ork_model_info *info, int b);
/* The default LoRA target patterns (NULL-terminated), or NULL: the linears of
 * the transformer blocks. */
const char *const *ork_model_lora_targets(const ork_model_info *info);
/* The LoRA file's key prefix, or NULL: the format's own. */
const char *ork_model_lora_prefix(const ork_model_info *info);
/* Whether module (a weight name without ".weight") contains pat, read with
 * '.' or with '_' as separator (BFL and kohya spellings). */
int ork_module_contains(const char *module, const char *pat);
/* Whether the 2-D linear weight d (module: its name without ".weight") is a
 * default LoRA target: it contains one of the declared lora_targets, or,
 * without them, it lies in a transformer block. */
int ork_model_lora_default_target(const ork_model_info *info, const ork_weight_decl *d, const char *module);

/* The model's schedule with every default filled in: shift > 0, the two
 * sequence lengths > 0, train_timesteps > 0 for DISCRETE; out->abi is this
 * core's. shift_base / shift_max (the info's, 0.5 / 1.15 when 0) too. */
void ork_model_schedule_get(const ork_model_info *info, ork_model_schedule *out, double *shift_base,
                            double *shift_max);

/* The config's train.timestep_type name of the model's training timesteps
 * ("sigmoid", "linear", "shift", "flux_shift"), or NULL: the config's. */
const char *ork_model_timestep_type(const ork_model_info *info);

/* Checks the declarations right after the model's open: block kinds, token
 * codes, prediction, noise and shift values in range, attn_dim >= 0, a
 * non-empty target list. ORK_E_ABI with one line naming the model (`what`)
 * and the field otherwise. */
ork_status ork_model_decl_check(const ork_model_info *info, const char *what);

/* Whether this core trains the declared prediction / noise: ORK_OK, or
 * ORK_E_UNSUPPORTED with one line naming what the model declares. */
ork_status ork_model_decl_trainable(const ork_model_info *info, const char *what);

#endif
