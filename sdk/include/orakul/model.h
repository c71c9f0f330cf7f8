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
 * packing, so the trainer works in token space: tokens (B, N, C). */
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
};

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
    const char *family;           /* "flux" */
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
     * or "peft-bfl" (diffusion_model.<name>, lora_A/lora_B/alpha). */
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
} ork_model_info;

/* What an encoder's output feeds. */
typedef enum ork_text_feed {
    ORK_TEXT_FEEDS_TXT = 1, /* outputs.hidden -> txt (B, T, context_dim), T = max_length */
    ORK_TEXT_FEEDS_VEC = 2, /* outputs.pooled -> vec (B, vec_dim) */
} ork_text_feed;

enum {
    /* model.quantize_te applies to this encoder (FLUX.1: T5-XXL; CLIP-L, 123M
     * parameters, stays in the store dtype, as in ai-toolkit) */
    ORK_TEXT_SLOT_QUANTIZE = 1u << 0,
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

    /* Optional image codec: pixels (B, 3, H, W) in [0, 1] <-> tokens (B, N, C)
     * with N = (H/ppt)·(W/ppt). decode is differentiable (perceptual loss). */
    ork_status (*encode)(void *self, ork_graph *g, ork_tensor *img, ork_tensor **tokens);
    ork_status (*decode)(void *self, ork_graph *g, ork_tensor *tokens, int h_tokens, int w_tokens,
                         ork_tensor **img);
} ork_model_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_MODEL_H */
