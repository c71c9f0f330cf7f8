/* image_codecs.h — internal header of the image codec plugin
 * (orakul-image_codecs.so): the components flux1-vae, flux2-vae (BFL's
 * FLUX.1 / FLUX.2 autoencoders, flux_vae.c), taef1 (madebyollin's Tiny
 * AutoEncoder for FLUX.1, taef1.c) and pixel (pixels as latents, [0, 1] ->
 * [-1, 1], codec_plugin.c). Pixels (B, 3, H, W) in [0, 1] <-> latents
 * (B, C, H/s, W/s); the model's patchify is the core's (orakul/codec.h).
 * Owns: the codec instance (ic_codec) and its declarations. */
#ifndef ORK_IMAGE_CODECS_H
#define ORK_IMAGE_CODECS_H

#include <orakul/orakul.h>
#include <orakul/platform.h> /* ORK_PRINTF */

typedef enum { IC_PIXEL, IC_TAEF1, IC_VAE1, IC_VAE2 } ic_kind;

#define FLUX_VAE_MAX_LEVELS 8

/* The autoencoder's geometry, read from the checkpoint's shapes (flux_vae.c). */
typedef struct flux_vae {
    int version;             /* 1: FLUX.1 AE (scale/shift), 2: FLUX.2 AE (quant convs, BatchNorm) */
    int ch, nlev, ch_mult[FLUX_VAE_MAX_LEVELS], nres_enc, nres_dec, z, in_ch, out_ch;
    float *bn_mean, *bn_std, *bn_rstd; /* FLUX.2: (4·z); std = sqrt(running_var + 1e-4) */
    int diffusers;           /* 1: the file is a diffusers AutoencoderKL's (down_blocks.*, to_q ...):
                              * BFL's names are translated on lookup (flux_vae.c vae_key) */
} flux_vae;

typedef struct ic_codec {
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    ic_kind kind;
    char path[1024];         /* what open was given: the ae.safetensors (or its folder, or a diffusers
                              * vae/ folder or pipeline folder), TAEF1's folder */
    char vae_file[1100];     /* the weights file resolved to (ae.safetensors, diffusion_pytorch_model.safetensors) */
    char variant[96];
    flux_vae vae;
    int n_weights, cap_weights;
    ork_weight_decl *weights;
    char **weight_names;
} ic_codec;

#define IC_LOG(f, lvl, ...) (f)->host->log((f)->host, (lvl), __VA_ARGS__)

/* codec_plugin.c */
ork_status ic_decl(ic_codec *f, const char *name, int block, uint32_t flags, int ndim, ...);
ork_status ic_w(ic_codec *f, ork_graph *g, ork_tensor **out, const char *fmt, ...)
    ORK_PRINTF(4, 5);
/* The codec is done with t: with the tape off its graph memory goes back now
 * (ta->drop; a no-op on a core without it, with the tape on, or for tensors
 * drop leaves alone). A 1024² encode otherwise holds every intermediate. */
void ic_done(ic_codec *f, ork_graph *g, ork_tensor *t);
/* call makes out from in; in, now dead, is freed (ic_done, with f and g in
 * scope) unless it is keep (the caller's tensor, or a residual still to add)
 * or the op handed it back as out */
#define IC_STEP(call, in, out, keep) \
    do { \
        ork_tensor *in_ = (in); \
        TRY(call); \
        if (in_ != (keep) && in_ != (out)) ic_done(f, g, in_); \
    } while (0)
/* (B, C, h·p, w·p) <-> (B, h·w, C·p²), channel c·p² + ph·p + pw */
ork_status ic_pack(ic_codec *f, ork_graph *g, ork_tensor *x, int p, ork_tensor **y);
ork_status ic_unpack(ic_codec *f, ork_graph *g, ork_tensor *x, int C, int p, int h, int w, ork_tensor **y);

/* taef1.c: path is the folder holding taef1_encoder / taef1_decoder.safetensors */
ork_status ic_taef1_open(ic_codec *f);   /* declare, and check both files against the declarations */
ork_status ic_taef1_load(ic_codec *f, const ork_weight_sink *sink);
ork_status ic_taef1_encode(ic_codec *f, ork_graph *g, ork_tensor *img, ork_tensor **latents);
ork_status ic_taef1_decode(ic_codec *f, ork_graph *g, ork_tensor *latents, ork_tensor **img);

/* flux_vae.c: the FLUX.1 / FLUX.2 autoencoders */
ork_status flux_vae_open(ic_codec *f);      /* geometry and BatchNorm stats from f->path */
void flux_vae_free(ic_codec *f);
int flux_vae_spatial_factor(const ic_codec *f);
ork_status flux_vae_declare(ic_codec *f);
ork_status flux_vae_validate(ic_codec *f);  /* every vae.* weight present, shaped, float */
ork_status flux_vae_load(ic_codec *f, const ork_weight_sink *sink);
ork_status flux_vae_encode(ic_codec *f, ork_graph *g, ork_tensor *img, ork_tensor **latents);
ork_status flux_vae_decode(ic_codec *f, ork_graph *g, ork_tensor *latents, ork_tensor **img);

#endif
