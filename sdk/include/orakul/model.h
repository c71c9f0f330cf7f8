/* orakul/model.h — the model-family component (kind ORK_KIND_MODEL).
 *
 * A model is a sequence of blocks (for FLUX: embedders, double blocks, single
 * blocks, final layer). The plugin declares every block's weights and writes
 * each block's forward as carry -> carry against the ops service; the core
 * drives the loop, checkpoints the carry at block boundaries, recomputes one
 * block at a time in backward, and knows exactly which weights each block
 * needs (the streaming runtime moves them). The plugin knows nothing about
 * LoRA, quantization or where weights live.
 *
 * The family also owns its image codecs (latents <-> pixels) and the token
 * packing, so the trainer works in token space: tokens (B, N, C).
 *
 * The core knows no family by name: what it needs beyond the weights (which
 * blocks are the transformer body, the tokens and attention of each weight for
 * the planner, the default LoRA targets and the saved keys, the prediction
 * target, noise schedule, time shift and sampler defaults) the model declares
 * in ork_model_info (ABI 1.3; docs/plugins.md "What a model declares"). */
#ifndef ORAKUL_MODEL_H
#define ORAKUL_MODEL_H

#include <orakul/abi.h>
#include <orakul/plugin.h>
#include <orakul/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_CARRY_MAX 16

/* The tensors that flow from block to block; slot meanings are the model's.
 * The core saves every non-NULL slot at block boundaries. */
typedef struct ork_carry {
    int n;
    ork_tensor *t[ORK_CARRY_MAX];
} ork_carry;

enum {
    ORK_WEIGHT_LINEAR = 1u << 0, /* a linear weight (out, in): LoRA and quantization candidate */
    ORK_WEIGHT_BIAS = 1u << 1,
    ORK_WEIGHT_NORM = 1u << 2,   /* norm scales: kept in F32 */
    ORK_WEIGHT_CODEC = 1u << 3,  /* belongs to an image codec, not the denoiser */
    ORK_WEIGHT_F32 = 1u << 4,    /* kept in F32 on every backend: the plugin computes with it in F32 */
    /* ABI 1.3, appended; read only from a model whose info has blocks
     * (ork_model_info_has_blocks): */
    ORK_WEIGHT_ATTN = 1u << 5,   /* part of an attention layer (q/k/v/out projections, q/k norms, a
                                  * fused projection holding q/k/v): its block computes attention */
    /* bits 6-7: the tokens a linear weight is applied to, ORK_WEIGHT_TOKENS(ork_tokens) */
};

/* ABI 1.3. Which tokens a weight (or a block's attention) works on, for the
 * planner's FLOPs and working set. N image tokens, T text tokens. */
typedef enum ork_tokens {
    ORK_TOKENS_JOINT = 0, /* image + text: N + T (the default: joint / single-stream layers) */
    ORK_TOKENS_ONE = 1,   /* one per sample: modulation, the timestep / pooled-vector embedders */
    ORK_TOKENS_IMG = 2,   /* the image stream: N */
    ORK_TOKENS_TXT = 3,   /* the text stream: T */
} ork_tokens;
#define ORK_WEIGHT_TOKENS_SHIFT 6
#define ORK_WEIGHT_TOKENS_MASK (3u << ORK_WEIGHT_TOKENS_SHIFT)
#define ORK_WEIGHT_TOKENS(tok) ((uint32_t)(tok) << ORK_WEIGHT_TOKENS_SHIFT)
#define ORK_WEIGHT_TOKENS_OF(flags) ((ork_tokens)(((flags) & ORK_WEIGHT_TOKENS_MASK) >> ORK_WEIGHT_TOKENS_SHIFT))

#define ORK_BLOCK_CODEC (-2) /* block index of codec weights: always resident */

typedef struct ork_weight_decl {
    const char *name;        /* canonical name, e.g. "double_blocks.0.img_attn.qkv.weight" */
    int ndim;
    int64_t shape[4];
    int block;               /* the block that uses it, or ORK_BLOCK_CODEC */
    uint32_t flags;          /* ORK_WEIGHT_* */
} ork_weight_decl;

typedef struct ork_model_info {
    ork_abi abi;
    const char *family;           /* "flux": for lines and file metadata, not for behaviour */
    const char *variant;          /* "flux1-dev", "flux2-klein-4b", "custom" ... */
    int n_blocks;
    const char *const *block_names;   /* n_blocks names, e.g. "double_blocks.3" */
    int n_weights;
    const ork_weight_decl *weights;   /* owned by the model instance */
    int token_channels;           /* C of a latent token: 64 (FLUX.1) or 128 (FLUX.2) */
    int pixels_per_token;         /* side of the square of pixels one token covers: 16; 0 when the
                                   * model has no image codec for its tokens (encode/decode
                                   * fail; a trainer refuses it before loading weights) */
    int context_dim;              /* text embedding width (4096 / 15360 / ...) */
    int context_len;              /* default text length (512) */
    int vec_dim;                  /* pooled text vector width (768), or 0 */
    int has_guidance;             /* guidance embedding present (FLUX.1-dev, FLUX.2-dev) */
    double shift_base, shift_max; /* flow-matching time shift (0.5 / 1.15) */
    /* LoRA export spelling: "kohya" (lora_unet_<name>, lora_down/lora_up/alpha)
     * or "peft-bfl" / "peft" (diffusion_model.<name>, lora_A/lora_B with
     * alpha/rank folded into both as sqrt(alpha/rank), no .alpha: diffusers'
     * reader of that format refuses one); the prefix is lora_prefix's when the
     * model gives one (ABI 1.3). */
    const char *lora_format;

    /* ABI 1.3, appended (ork_model_info_has_text): the text encoders the model
     * is conditioned on (the core's text conditioner, core/text/conditioner.h,
     * runs them). n_text_slots 0: none known (the core then uses zero
     * embeddings or <image>.te.safetensors files). */
    int n_text_slots;
    const struct ork_text_slot *text_slots; /* owned by the model instance */
    /* The folder the model was resolved from when it is a diffusers layout
     * (a folder or a Hugging Face snapshot holding transformer/), where the
     * slots' subfolders are looked for; NULL otherwise (a single file, a preset). */
    const char *source_dir;

    /* ABI 1.3, appended (ork_model_info_has_blocks): what the model declares so
     * that the core knows no family (docs/plugins.md "What a model declares").
     * A model from before them gets the core's defaults, which name no family:
     * blocks 0 and n-1 input and output, the ones between transformer blocks
     * with joint attention; every linear on N + T tokens; LoRA on the linears
     * of the transformer blocks; flow matching with the resolution-dependent
     * shift (shift_base / shift_max); the config's sampler settings. */
    const struct ork_block_decl *blocks;  /* n_blocks entries, or NULL: the defaults above.
                                           * Weight flags ORK_WEIGHT_ATTN / ORK_WEIGHT_TOKENS are
                                           * read only when this is set. Owned by the model instance */
    /* LoRA: the default target modules, NULL-terminated substrings of a module
     * name (the weight name without ".weight"; matched with '.' or '_' as
     * separator, like network_kwargs.only_if_contains, which replaces them),
     * among linear weights; NULL: the linears of the transformer blocks. */
    const char *const *lora_targets;
    /* The saved file's key prefix before the module name, in lora_format's
     * spelling: NULL gives lora_format's own ("lora_unet_" for "kohya",
     * "diffusion_model." for "peft-bfl"). lora_format also accepts "peft"
     * (lora_A / lora_B after this prefix, alpha folded). */
    const char *lora_prefix;
    /* Prediction target, noise schedule, timestep shift and sampler defaults;
     * NULL: flow-matching velocity, the resolution-dependent shift, the config's
     * sampler settings. Owned by the model instance. */
    const struct ork_model_schedule *schedule;

    /* ABI 1.3, appended (ork_model_info_has_codec): the codecs (orakul/codec.h,
     * components of kind ORK_KIND_CODEC) the model's tokens can come from, in
     * its order of preference; the core picks one (docs/plugins.md "Codecs"):
     * the slot codec_select names, else the first whose path is set, else the
     * first that takes no weights and fits the tokens; it opens it, loads its
     * weights beside the model's, and turns latents into tokens by
     * patch_order. n_codecs 0: the model's own encode/decode (the vtable; a
     * plugin from before codecs). */
    int n_codecs;
    const struct ork_codec_slot *codecs; /* owned by the model instance */
    const char *codec_select;  /* the user's choice: a slot's name or codec, or NULL / "auto" */
    int32_t patch_order;       /* ork_patch_order: a p×p latent patch's channels in a token */
} ork_model_info;

/* How a slot's p×p patch of latents (B, C, h·p, w·p) becomes tokens
 * (B, h·w, C·p²), tokens row-major over (h, w). */
typedef enum ork_patch_order {
    ORK_PATCH_CHANNEL_MAJOR = 0, /* token channel c·p² + ph·p + pw (FLUX.1, FLUX.2) */
    ORK_PATCH_CHANNEL_MINOR = 1, /* token channel (ph·p + pw)·C + c (diffusers' Z-Image, SD3) */
} ork_patch_order;

/* One codec a model takes (FLUX.1: flux1-vae via vae_path, taef1 via
 * taef1_path, pixel with none). */
typedef struct ork_codec_slot {
    const char *codec;    /* codec component id or alias: "flux1-vae", "taef1", "pixel" */
    const char *name;     /* the model's name for it in codec_select ("vae"), or NULL: codec's */
    const char *path_key; /* model_kwargs key of its weights path ("vae_path"), for lines and the
                           * automatic choice; NULL for a codec that takes no weights */
    const char *path;     /* that key's value, or NULL when unset */
    int32_t patch;        /* latent pixels per token side: 2 (FLUX's AEs, TAEF1), pixel_patch (pixel);
                           * the codec's latent_channels · patch² must be the token channels */
    uint32_t flags;       /* 0; room for ORK_CODEC_SLOT_* */
    const char *patch_key; /* model_kwargs key that sets patch ("pixel_patch"), for lines; NULL: fixed */
} ork_codec_slot;

/* Whether info carries the codec slots (a plugin from before them does not:
 * the vtable's encode/decode, if any, are the model's codec). */
static inline int ork_model_info_has_codec(const ork_model_info *info) {
    return info->abi.struct_size >= offsetof(ork_model_info, patch_order) + sizeof info->patch_order;
}

/* ABI 1.3: one block as the planner and the LoRA network see it. */
typedef enum ork_block_kind {
    ORK_BLOCK_KIND_OTHER = 0,       /* none of the below: resident, no default LoRA targets */
    ORK_BLOCK_KIND_INPUT = 1,       /* embedders (patches, text, timestep, pooled vector) */
    ORK_BLOCK_KIND_TRANSFORMER = 2, /* the repeated body: may stream, holds the default LoRA
                                     * targets, the planner's transformer working set */
    ORK_BLOCK_KIND_OUTPUT = 3,      /* the final norm and projection back to tokens */
} ork_block_kind;

typedef struct ork_block_decl {
    int32_t kind;        /* ork_block_kind */
    int32_t attn_tokens; /* ork_tokens its attention runs over (when a weight of the block has
                          * ORK_WEIGHT_ATTN): 0, image + text */
    int64_t attn_dim;    /* query/key width (heads x head_dim) in the planner's attention FLOPs
                          * 4·B·L²·attn_dim; 0: the model's hidden width (from the shapes) */
} ork_block_decl;

/* ABI 1.3: what the model predicts and how its timesteps are drawn and sampled. */
typedef enum ork_prediction {
    ORK_PREDICT_FLOW = 0,    /* flow matching: v = noise - x0 (the core trains this today) */
    ORK_PREDICT_EPSILON = 1, /* the noise e (DDPM; SD 1.x, SDXL) */
    ORK_PREDICT_V = 2,       /* v = sqrt(abar)·e - sqrt(1 - abar)·x0 (SD 2.x 768-v) */
} ork_prediction;

typedef enum ork_noise_kind {
    ORK_NOISE_FLOW = 0,     /* x_t = (1 - t)·x0 + t·e, t in [0, 1] (timesteps input: t) */
    ORK_NOISE_DISCRETE = 1, /* x_t = sqrt(abar_t)·x0 + sqrt(1 - abar_t)·e, t = 0 .. train_timesteps-1,
                             * abar the cumulative product of 1 - beta (timesteps input: t) */
} ork_noise_kind;

typedef enum ork_beta_schedule {
    ORK_BETAS_LINEAR = 0,        /* beta linear from beta_start to beta_end */
    ORK_BETAS_SCALED_LINEAR = 1, /* sqrt(beta) linear (SD, SDXL: 0.00085 .. 0.012) */
} ork_beta_schedule;

/* The time shift of a flow-matching schedule, shift(t) = e^mu / (e^mu + 1/t - 1):
 * the sampler's schedule, and the training timesteps of timestep_type shift /
 * flux_shift (ai-toolkit's names, which pick fixed / resolution). */
typedef enum ork_time_shift {
    ORK_TIME_SHIFT_RESOLUTION = 0, /* mu linear in the image tokens: info shift_base at
                                    * shift_base_seq .. shift_max at shift_max_seq (FLUX.1) */
    ORK_TIME_SHIFT_NONE = 1,       /* no shift (timestep-distilled models: FLUX.1-schnell) */
    ORK_TIME_SHIFT_FIXED = 2,      /* mu = ln(shift) */
    ORK_TIME_SHIFT_RESOLUTION_STEPS = 3, /* the empirical fit of image tokens and steps of
                                          * diffusers' compute_empirical_mu (FLUX.2) */
} ork_time_shift;

/* How training draws its timesteps (ai-toolkit's train.timestep_type; the
 * config's value, when given, wins). */
typedef enum ork_timestep_sampling {
    ORK_TIMESTEPS_CONFIG = 0,           /* the config's default (sigmoid) */
    ORK_TIMESTEPS_SIGMOID = 1,          /* logit-normal */
    ORK_TIMESTEPS_LINEAR = 2,           /* uniform over the 1000 scheduler steps */
    ORK_TIMESTEPS_SHIFT = 3,            /* uniform, then the model's shift (ai-toolkit: shift and
                                         * flux_shift are one branch; schedule.c) */
    ORK_TIMESTEPS_RESOLUTION_SHIFT = 4, /* uniform, then the resolution shift (flux_shift) */
} ork_timestep_sampling;

enum {
    /* The sampler runs no classifier-free guidance, whatever the cfg scale
     * (a timestep-distilled model); without it a model with no guidance input
     * (has_guidance 0) gets CFG when the scale is > 1 */
    ORK_SAMPLE_NO_CFG = 1u << 0,
};

typedef struct ork_model_schedule {
    ork_abi abi;                 /* ORK_ABI_INIT(ork_model_schedule): grows by appending */
    int32_t prediction;          /* ork_prediction */
    int32_t noise;               /* ork_noise_kind */
    int32_t train_timesteps;     /* DISCRETE: 1000 */
    int32_t beta_schedule;       /* DISCRETE: ork_beta_schedule */
    double beta_start, beta_end; /* DISCRETE */
    int32_t time_shift;          /* ork_time_shift: how the sampler shifts */
    uint32_t sample_flags;       /* ORK_SAMPLE_* */
    double shift;                /* FIXED's shift, and timestep_type shift's (0: 3.0) */
    int64_t shift_base_seq;      /* RESOLUTION: image tokens at mu = shift_base (0: 256) */
    int64_t shift_max_seq;       /* RESOLUTION: image tokens at mu = shift_max (0: 4096) */
    int32_t sample_steps;        /* the sampler's steps when sample.sample_steps is not given
                                  * (a distilled model: 4); 0: the config's */
    int32_t timestep_sampling;   /* ork_timestep_sampling: how training draws t when the config's
                                  * train.timestep_type is not given; 0: the config's default */
    double sample_guidance;      /* the guidance / cfg scale when sample.guidance_scale is not
                                  * given; 0: the config's */
} ork_model_schedule;

/* Whether info carries blocks, lora_targets, lora_prefix and schedule (a plugin
 * from before them does not: the core's defaults apply). */
static inline int ork_model_info_has_blocks(const ork_model_info *info) {
    return info->abi.struct_size >= offsetof(ork_model_info, schedule) + sizeof info->schedule;
}

/* Whether the schedule s (from a plugin of any 1.x minor) has `field`: fields
 * appended after ABI 1.3 are absent from an older plugin's (read as 0). */
#define ORK_MODEL_SCHEDULE_HAS(s, field) \
    ((s)->abi.struct_size >= offsetof(ork_model_schedule, field) + sizeof (s)->field)

/* What an encoder's output feeds. */
typedef enum ork_text_feed {
    ORK_TEXT_FEEDS_TXT = 1, /* outputs.hidden -> txt (B, T, context_dim), T = max_length */
    ORK_TEXT_FEEDS_VEC = 2, /* outputs.pooled -> vec (B, vec_dim) */
} ork_text_feed;

enum {
    /* model.quantize_te applies to this encoder (FLUX.1: T5-XXL; CLIP-L, 123M
     * parameters, stays in the store dtype, as in ai-toolkit) */
    ORK_TEXT_SLOT_QUANTIZE = 1u << 0,
    /* the model takes each caption's unmasked tokens only (Z-Image's pipeline:
     * prompt_embeds[i][prompt_masks[i]]): the padding mask travels with txt */
    ORK_TEXT_SLOT_UNMASKED = 1u << 1,
    /* with QUANTIZE: model.quantize quantizes this encoder with model.qtype,
     * not model.qtype_te (ai-toolkit does so for FLUX.1's T5) */
    ORK_TEXT_SLOT_MODEL_QTYPE = 1u << 2,
};

/* One text encoder a model needs (FLUX.1: T5 -> txt, CLIP -> vec). */
typedef struct ork_text_slot {
    const char *encoder;             /* text_encoder component id or alias: "t5", "clip" */
    uint32_t feeds;                  /* ORK_TEXT_FEEDS_* (one or both) */
    uint32_t flags;                  /* ORK_TEXT_SLOT_* */
    const char *subfolder;           /* diffusers: "text_encoder_2" (T5), "text_encoder" (CLIP) */
    const char *tokenizer_subfolder; /* "tokenizer_2", "tokenizer" */
    int max_length;                  /* tokens, truncated and padded to it: 512 (256 schnell), 77 */
    const char *path_key;            /* model_kwargs key of an explicit weights path ("t5_path"), for lines */
    const char *tokenizer_key;       /* model_kwargs key of an explicit tokenizer path ("t5_tokenizer_path") */
    const char *path;                /* the user's explicit weights path (that key's value), or NULL */
    const char *tokenizer_path;      /* the user's explicit tokenizer path, or NULL: beside path, else
                                      * <source_dir>/<tokenizer_subfolder> */
    /* ABI 1.3, appended: how the model's pipeline turns a caption into ids
     * (the core renders the generic template kinds, orakul/tokenizer.h;
     * max_length above is the template's length) and what it takes of the
     * encoder's output. All 0 / NULL: the tokenizer's plain encode, the
     * encoder's default hidden states, every position. */
    int32_t prompt_template;         /* ork_prompt_kind: ORK_TEMPLATE_PLAIN (0), _MISTRAL_CHAT, _QWEN_CHAT */
    uint32_t prompt_flags;           /* ORK_TEMPLATE_* (padding side, generation prompt, thinking, ...) */
    const char *system_message;      /* the template's system turn (FLUX.2-dev's), or NULL: none */
    int32_t n_hidden_states;         /* 0: the encoder's default outputs; else the encoder's
                                      * hidden_states indices in hidden_states[], stacked in order */
    int32_t hidden_states[4];        /* transformers' output_hidden_states indices: 0 the embeddings,
                                      * k layer k's output, negative from the end (Z-Image: -2) */
} ork_text_slot;

/* Whether info carries the text slots (a plugin from before ABI 1.3 does not). */
static inline int ork_model_info_has_text(const ork_model_info *info) {
    return info->abi.struct_size >= offsetof(ork_model_info, source_dir) + sizeof info->source_dir;
}

typedef struct ork_model_inputs {
    ork_abi abi;
    ork_tensor *tokens;     /* (B, N, C) noisy latent tokens x_t */
    ork_tensor *timesteps;  /* (B) F32, t in [0, 1] */
    ork_tensor *guidance;   /* (B) F32, or NULL */
    ork_tensor *txt;        /* (B, T, context_dim) */
    ork_tensor *vec;        /* (B, vec_dim), or NULL */
    int h_tokens, w_tokens; /* the image token grid: N = h_tokens * w_tokens */
    const float *timesteps_host; /* (B) the same timesteps on the host (embeddings are built there) */
    const float *guidance_host;  /* (B) or NULL */
} ork_model_inputs;

/* The weight sink: how a model hands weights to the core's weight store.
 * Data are copied (converted / quantized as the store decides) before put
 * returns. name must be a declared weight. [control-thread] */
typedef struct ork_weight_sink ork_weight_sink;
struct ork_weight_sink {
    ork_abi abi;
    void *store;
    /* data (shape as declared) of dtype dt; host memory, may be unaligned. */
    ork_status (*put)(const ork_weight_sink *s, const char *name, ork_dtype dt, const void *data);
    /* A weight stored already quantized: fp8 bytes (rows, cols) plus one F32
     * scale per row (or per row and 128-column block when block == 128). */
    ork_status (*put_quantized)(const ork_weight_sink *s, const char *name, ork_dtype qdt,
                                const void *q, const float *scales, int block);
    /* Fill the weight with seeded random values of the right scale. */
    ork_status (*put_random)(const ork_weight_sink *s, const char *name, float stddev, uint64_t seed);
};

typedef struct ork_model_vtable {
    ork_abi abi;
    /* Required. params: the component's params buffer (valid during the call). */
    ork_status (*create)(const ork_host *host, const void *params, void **self);
    void (*destroy)(void *self);
    /* Required. Resolve the source (a .safetensors file, a diffusers folder, a
     * Hugging Face repo id in the local cache, or a preset "preset:flux1-dev"),
     * detect the variant from keys and shapes, and declare blocks and weights.
     * info stays valid until destroy. */
    ork_status (*open)(void *self, const char *name_or_path, ork_model_info *info);
    /* Required. Put every declared weight into the sink. */
    ork_status (*load)(void *self, const ork_weight_sink *sink);
    /* Required. Build the initial carry from the inputs (no weights here). */
    ork_status (*begin)(void *self, ork_graph *g, const ork_model_inputs *in, ork_carry *carry);
    /* Required. Run block i (0 <= i < n_blocks). After the last block,
     * carry->t[0] holds the prediction (B, N, C). */
    ork_status (*block)(void *self, ork_graph *g, int i, ork_carry *carry);

    /* Optional image codec of a model that declares no codec slots (before
     * ABI 1.3's codec components; still honoured): pixels (B, 3, H, W) in
     * [0, 1] <-> tokens (B, N, C) with N = (H/ppt)·(W/ppt). decode is
     * differentiable (perceptual loss). A model with codec slots leaves them
     * NULL: the core runs the codec component and the patchify. */
    ork_status (*encode)(void *self, ork_graph *g, ork_tensor *img, ork_tensor **tokens);
    ork_status (*decode)(void *self, ork_graph *g, ork_tensor *tokens, int h_tokens, int w_tokens,
                         ork_tensor **img);
} ork_model_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_MODEL_H */
