/* zimage.h — internal header of the Z-Image model-family plugin (Tongyi-MAI
 * Z-Image / Z-Image-Turbo, diffusers' ZImageTransformer2DModel). Owns: the
 * size description (zi_cfg), the plugin instance (zi_model) and the carry
 * slot layout shared by begin() and the blocks.
 *
 * The model, as diffusers 0.42 writes it (transformer_z_image.py):
 *   latents (16, H, W) -> 2x2 patches (ph, pw, c) -> x_embedder -> image
 *   tokens, padded to a multiple of 32 with a learned x_pad_token, refined by
 *   n_refiner modulated blocks (noise_refiner) over the image alone;
 *   caption features (Qwen3 hidden_states[-2]) -> RMSNorm + linear, padded
 *   with cap_pad_token, refined by n_refiner unmodulated blocks
 *   (context_refiner) over the caption alone; then [image, caption] as one
 *   stream through n_layers modulated blocks; the final layer (LayerNorm,
 *   1 + scale, linear) and the first N tokens back to patches.
 *   Block: x += tanh(g1)·norm2(attn(norm1(x)·(1 + s1)));
 *          x += tanh(g2)·norm4(ffn(norm3(x)·(1 + s2))), (s1, g1, s2, g2) =
 *   adaLN(t_emb) with no SiLU before it; attention with RMS q/k norms and a
 *   3-axis RoPE on adjacent pairs (caption (1 + i, 0, 0), image
 *   (Cp + 1, h, w), image pads (0, 0, 0)); FFN w2(silu(w1 x)·w3 x).
 * Conventions: the transformer takes t' = 1 - t (t = the core's noise level)
 * times 1000 and predicts x0 - noise: begin() feeds 1 - t and the final
 * block negates, so the core's flow target noise - x0 holds. Tokens are
 * Z-Image's own patches, channel (ph·2 + pw)·C + c (ORK_PATCH_CHANNEL_MINOR:
 * the core patchifies the codec's latents so). */
#ifndef ORK_ZIMAGE_H
#define ORK_ZIMAGE_H

#include <orakul/orakul.h>

#define ZI_SEQ_MULTI 32  /* SEQ_MULTI_OF: every sequence is padded to a multiple */
#define ZI_FREQ_DIM 256  /* the timestep embedder's sinusoid width */
#define ZI_T_MID 1024    /* its hidden width */
#define ZI_ADALN_MAX 256 /* ADALN_EMBED_DIM: the conditioning width is min(dim, 256) */

/* Carry slots (ork_carry.t[]). */
enum {
    ZC_X = 0,      /* (B, Np, d) image stream; (B, Np + Cp, d) unified from layers.0; output (B, N, C) */
    ZC_CAP = 1,    /* (B, Cp, d) caption stream (until layers.0) */
    ZC_ADALN = 2,  /* (B, a) timestep conditioning, a = min(d, 256) */
    ZC_PE_IMG = 3, /* (Np, hd/2, 2) F32 rope table of the image stream */
    ZC_PE_CAP = 4, /* (Cp, hd/2, 2) of the caption */
    ZC_PE_ALL = 5, /* (Np + Cp, hd/2, 2) of the unified stream */
    ZC_TFREQ = 6,  /* (B, 256) sinusoid of 1000·(1 - t), consumed by block 0 */
    ZC_TXT = 7,    /* (B, T, cap_dim) caption features, consumed by block 0 */
    ZC_ZERO = 8,   /* (1) zero of the activation dtype: modulate's shift */
    ZC_COUNT = 9
};

typedef struct zi_cfg {
    const char *variant;    /* "zimage-turbo", "zimage", "tiny", "custom" */
    int turbo;              /* timestep-distilled: 8 steps, no CFG */
    int in_channels;        /* latent channels (16); tokens carry 4·in_channels */
    int dim, heads, head_dim, ffn;
    int n_layers, n_refiner;
    int cap_dim;            /* caption feature width (2560: Qwen3-4B) */
    int adaln;              /* min(dim, 256) */
    int axes[3];            /* rope axes (32, 48, 48), summing to head_dim */
    float theta;            /* 256 */
    float eps;              /* norm_eps 1e-5 */
} zi_cfg;

typedef struct zi_params { /* model.model_kwargs, see zimage_plugin.c */
    int64_t seed;
    int64_t dim, num_heads, n_layers, n_refiner_layers, cap_feat_dim, in_channels;
    int64_t context_len;
    int64_t pixel_patch;
    const char *distilled;  /* auto | true | false */
    const char *codec;      /* auto | vae | taef1 | pixel */
    const char *vae_path, *taef1_path;
    const char *text_encoder_path, *text_encoder_tokenizer_path;
} zi_params;

typedef struct zi_model {
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    zi_params p;
    zi_cfg cfg;
    int default_turbo;      /* the component: zimage-turbo (1) or zimage (0) */
    /* model_kwargs strings (valid only during create: copied) */
    char distilled[8], codec[16], vae_path[1024], taef1_path[1024], te_path[1024], te_tok_path[1024];
    ork_codec_slot codec_slots[3];
    ork_text_slot text_slot;
    /* Source checkpoint; NULL for presets (random weights). */
    ork_st_set *src;
    char src_path[2000];
    char src_prefix[64];    /* "", "model.diffusion_model.", "diffusion_model." */
    int src_single;         /* 1: the original / ComfyUI layout (fused qkv, attention.out, q_norm) */
    char src_dir[2000];     /* the diffusers folder the transformer came from, or "" */
    /* Declarations. */
    int n_blocks;
    char **block_names;
    ork_block_decl *block_decls;
    int n_weights, cap_weights;
    ork_weight_decl *weights;
    ork_model_schedule sched;
    /* Per-forward state (one forward at a time). */
    int B, N, Np, T, Cp, h_tok, w_tok;
} zi_model;

#define ZI_LOG(z, lvl, ...) (z)->host->log((z)->host, (lvl), __VA_ARGS__)

/* Block layout: 0 embed, then noise_refiner.*, context_refiner.*, layers.*, final_layer. */
static inline int zi_first_ctx(const zi_model *z) { return 1 + z->cfg.n_refiner; }
static inline int zi_first_layer(const zi_model *z) { return 1 + 2 * z->cfg.n_refiner; }
static inline int zi_final(const zi_model *z) { return 1 + 2 * z->cfg.n_refiner + z->cfg.n_layers; }

/* zimage_weights.c */
void zi_cfg_derive(zi_cfg *c);
ork_status zi_declare(zi_model *z);
/* model.name_or_path -> z->src (a file, an index, a diffusers folder or its transformer/). */
ork_status zi_open_source(zi_model *z, const char *name_or_path);
/* Sizes from the checkpoint's shapes; every declared weight present and shaped. */
ork_status zi_detect(zi_model *z);
ork_status zi_validate(zi_model *z);
ork_status zi_load(zi_model *z, const ork_weight_sink *sink);

/* zimage_forward.c */
ork_status zi_begin(zi_model *z, ork_graph *g, const ork_model_inputs *in, ork_carry *c);
ork_status zi_block(zi_model *z, ork_graph *g, int i, ork_carry *c);

#endif
