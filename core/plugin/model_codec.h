/* plugin/model_codec.h — the model's image codec: the codec component
 * (ORK_KIND_CODEC, orakul/codec.h) picked from the codec slots the model
 * declares (orakul/model.h: ork_codec_slot), or the model's own vtable
 * encode/decode when it declares none (a plugin from before codecs).
 *
 * The choice, generic (docs/plugins.md "Codecs"): the slot the model's
 * codec_select names (its name or codec id); else ("auto" or NULL) the first
 * slot whose weights path is set; else the first slot that takes no weights,
 * if its latents make the model's tokens — otherwise no codec (pixels_per_token
 * 0: forward-only users need none, a trainer refuses it in preflight).
 * A chosen slot whose latents do not make the tokens (latent_channels ·
 * patch² != token_channels) is refused with one line.
 *
 * Opening fills, in the model's info: pixels_per_token (spatial_factor ·
 * patch) and the weights (the model's declarations followed by the codec's,
 * one array the weight store, planner and counts read as before). Tokens are
 * the latents patchified by the model's patch_order (reshape/permute only).
 * Owns: the codec instance and the merged declarations. [control-thread] */
#ifndef ORK_PLUGIN_MODEL_CODEC_H
#define ORK_PLUGIN_MODEL_CODEC_H

#include "plugin/registry.h"

#include <orakul/codec.h>
#include <orakul/model.h>

#include <stddef.h>

typedef struct ork_model_codec {
    const ork_model_vtable *mvt;     /* the model (its load; its own encode/decode when legacy) */
    void *model;
    const ork_plugin_component *pc;  /* the codec component, or NULL */
    void *self;
    ork_codec_info info;
    const ork_codec_slot *slot;      /* the chosen slot, or NULL */
    int patch, order;                /* the slot's patch, the model's patch_order */
    int legacy;                      /* the model declares no slots: its vtable's encode/decode */
    ork_weight_decl *merged;         /* the model's declarations then the codec's (info->weights) */
    const char *model_name;          /* for lines (the caller's, outlives this) */
} ork_model_codec;

/* After the model's open: pick and open the codec, update info (see above).
 * model_name: model.name_or_path, for lines. On failure mc holds what was
 * opened (ork_model_codec_close frees it). */
ork_status ork_model_codec_open(ork_model_codec *mc, const ork_registry *reg, const char *model_name,
                                const ork_model_vtable *mvt, void *model, ork_model_info *info);
/* Whether images can be encoded and decoded (a codec component, or the
 * model's own encode). */
int ork_model_codec_present(const ork_model_codec *mc);
/* The codec component's weights into sink (nothing for a model's own codec). */
ork_status ork_model_codec_load(const ork_model_codec *mc, const ork_weight_sink *sink);
/* The model's weights, then the codec's: a load function for a weight store
 * of info's (merged) declarations; self is the ork_model_codec. */
ork_status ork_model_codec_load_all(void *self, const ork_weight_sink *sink);
/* pixels (B, 3, H, W) in [0, 1] -> tokens (B, (H/ppt)·(W/ppt), token_channels). */
ork_status ork_model_codec_encode(const ork_model_codec *mc, ork_graph *g, ork_tensor *img, ork_tensor **tokens);
/* tokens (B, h·w, C) -> pixels (B, 3, h·ppt, w·ppt); differentiable. */
ork_status ork_model_codec_decode(const ork_model_codec *mc, ork_graph *g, ork_tensor *tokens, int h, int w,
                                  ork_tensor **img);
/* What a user sets to give the model a codec, from its slots:
 * "model.model_kwargs.vae_path (flux1-vae) or taef1_path (taef1); pixel gives
 * 3·p² channels per token with pixel_patch p". */
void ork_model_codec_hint(const ork_model_info *info, char *buf, size_t n);
void ork_model_codec_close(ork_model_codec *mc); /* a zeroed mc is a no-op */

#endif
