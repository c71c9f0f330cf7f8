/* flux.h — internal header of the FLUX model-family plugin (FLUX.1 dev/schnell,
 * FLUX.2 dev / klein 4B / klein 9B, and custom sizes). Facts: FLUX.md §1-§3.
 * Owns: the variant description (flux_cfg), the plugin instance (flux_model),
 * and the carry slot layout shared by begin() and the blocks. */
#ifndef ORK_FLUX_H
#define ORK_FLUX_H

#include <orakul/orakul.h>
#include <orakul/platform.h> /* ORK_PRINTF */

/* Carry slots (ork_carry.t[]). */
enum {
    FC_IMG = 0,    /* (B, N, d) image stream; (B, T+N, d) joint stream in single blocks; output at the end */
    FC_TXT = 1,    /* (B, T, d) text stream (double blocks only) */
    FC_VEC = 2,    /* (B, d) conditioning vector */
    FC_PE = 3,     /* (T+N, 64, 2) F32 rope table, text first */
    FC_MOD_IMG = 4,    /* FLUX.2 shared modulation (B, 6d) */
    FC_MOD_TXT = 5,    /* FLUX.2 (B, 6d) */
    FC_MOD_SINGLE = 6, /* FLUX.2 (B, 3d) */
    FC_TEMB = 7,   /* (B, 256) timestep embedding, consumed by block 0 */
    FC_GEMB = 8,   /* (B, 256) guidance embedding, consumed by block 0 */
    FC_Y = 9,      /* (B, vec_dim) pooled text vector, consumed by block 0 */
    FC_COUNT = 10
};

typedef struct flux_cfg {
    const char *variant;   /* "flux1-dev", ..., "custom" */
    int version;           /* 1 or 2 */
    int in_channels;       /* token channels: 64 / 128, or 3·p² for the pixel codec */
    int hidden, heads, head_dim, mlp_hidden;
    int depth, depth_single;
    int context_dim, vec_dim;
    int guidance;          /* guidance_in present */
    int bias;              /* FLUX.1: biases everywhere; FLUX.2: none */
    int n_axes, axes[4];
    float theta;
} flux_cfg;

typedef struct flux_params { /* model.model_kwargs, see flux_plugin.c */
    int64_t seed;
    int64_t hidden_size, num_heads, depth, depth_single_blocks, context_in_dim, vec_in_dim, in_channels;
    int64_t flux_version;
    int32_t guidance_embed;
    const char *codec;       /* auto | taef1 | pixel | vae */
    const char *taef1_path;  /* folder holding taef1_encoder/decoder.safetensors */
    int64_t pixel_patch;     /* pixel codec: pixels per token side */
    int64_t context_len;
    const char *vae_path;    /* BFL ae.safetensors (FLUX.1 or FLUX.2 autoencoder), or a folder holding it */
    /* FLUX.1's text encoders (the core's text conditioner): explicit paths, else
     * the diffusers folder's text_encoder_2/ (T5), text_encoder/ (CLIP),
     * tokenizer_2/, tokenizer/ */
    const char *t5_path, *clip_path, *t5_tokenizer_path, *clip_tokenizer_path;
    /* FLUX.2's text encoder (Mistral-Small-3.x for flux2-dev, Qwen3 for klein):
     * explicit paths, else the diffusers folder's text_encoder/, tokenizer/ */
    const char *text_encoder_path, *text_encoder_tokenizer_path;
} flux_params;

typedef struct flux_model {
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    flux_params p;
    char codec_name[16];
    char taef1_path[1024];
    char vae_path[1024];
    flux_cfg cfg;
    /* The codecs FLUX's tokens come from (the image codec plugin's
     * components; the core picks one and packs its latents 2×2, or
     * pixel_patch² for the pixel codec): FLUX.1 / FLUX.2 AE via vae_path,
     * TAEF1 via taef1_path, pixels. */
    ork_codec_slot codec_slots[3];
    int n_codec_slots;
    /* The text slots (FLUX.1: T5 -> txt, CLIP -> vec) and their strings. */
    ork_text_slot text_slots[2];
    int n_text_slots;
    char src_dir[1024];      /* the diffusers folder the transformer came from, or "" */
    char t5_path[1024], clip_path[1024], t5_tok_path[1024], clip_tok_path[1024];
    char te_path[1024], te_tok_path[1024]; /* FLUX.2's text encoder and tokenizer */
    /* Source checkpoint; NULL for presets (random weights). */
    ork_st_set *src;
    char src_path[1024];     /* what src was opened from (a file, an index or a folder) */
    int src_diffusers;       /* 1: diffusers key names */
    char src_prefix[64];     /* BFL prefix found ("", "model.diffusion_model.", ...) */
    /* Declarations. */
    int n_blocks;
    char **block_names;
    int n_weights, cap_weights;
    ork_weight_decl *weights;
    char **weight_names;
    /* What the core used to guess (flux_decl.h): one ork_block_decl per block
     * and the variant's schedule, handed out in ork_model_info. */
    ork_block_decl *block_decls;
    ork_model_schedule sched;
    /* Per-forward state (one forward at a time). */
    int T, N, h_tok, w_tok;
    /* The RoPE table of the last token layout, kept on its device (tensor_api
     * persistent) for the passes that follow: building it on the host and
     * uploading it from pageable memory held every streamed forward's start
     * 16 ms at 1024² (the lane trace, H200). Released in flux_destroy. */
    ork_tensor *pe;
    int pe_T, pe_h, pe_w;
} flux_model;

#define FLUX_LOG(f, lvl, ...) (f)->host->log((f)->host, (lvl), __VA_ARGS__)

/* flux_variants.c */
int flux_preset(const char *name, flux_cfg *out); /* 1 when known */
void flux_cfg_derive(flux_cfg *c);                /* fill head_dim, axes, theta, bias ... */
const char *flux_cfg_match(const flux_cfg *c);    /* preset name or "custom" */

/* flux_source.c: model.name_or_path (a .safetensors file or index, a
 * diffusers folder or its transformer/ subfolder, a folder with one BFL file,
 * or a Hugging Face repo id in the local cache) -> the path to open. */
ork_status flux_resolve_source(flux_model *f, const char *name_or_path, char *out, size_t n);

/* flux_weights.c */
ork_status flux_declare(flux_model *f);
ork_status flux_detect(flux_model *f, const char *path);
/* Every declared denoiser weight present in the checkpoint with its shape and
 * a float dtype (what `orakul plan` checks before anything is loaded). */
ork_status flux_validate(flux_model *f);
ork_status flux_load(flux_model *f, const ork_weight_sink *sink);

/* flux_forward.c */
ork_status flux_begin(flux_model *f, ork_graph *g, const ork_model_inputs *in, ork_carry *c);
ork_status flux_block(flux_model *f, ork_graph *g, int i, ork_carry *c);
ork_status flux_w(flux_model *f, ork_graph *g, ork_tensor **out, const char *fmt, ...)
    ORK_PRINTF(4, 5);
/* Declaration helper (flux_weights.c). */
ork_status flux_decl(flux_model *f, const char *name, int block, uint32_t flags, int ndim, ...);

#endif
