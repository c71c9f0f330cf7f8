/* orakul/codec.h — the codec component (kind ORK_KIND_CODEC, ABI 1.3):
 * pixels <-> latents, shared between model families (issue #30, design §8).
 *
 * A codec is found by id (or alias) like every component; a model names the
 * codecs its tokens can come from (orakul/model.h: ork_codec_slot) and the
 * core opens the one the config picks, loads its weights into the same weight
 * store as the model's, and runs it: the latent encode before training (its
 * own graph, the tape off) and the decode for samples and pixel-space losses
 * (differentiable: the perceptual loss backpropagates through it).
 *
 * The split with the model: the codec owns LATENTS, the model owns TOKENS.
 * A codec maps pixels (B, 3, T, H, W) in [0, 1] to latents
 * (B, C, T/temporal_factor, H/spatial_factor, W/spatial_factor) with any
 * scaling, shift or normalization of its latents applied inside encode and
 * undone inside decode. The model declares how latents become its tokens:
 * the p×p patch of each slot and the order of a patch's channels
 * (ork_model_info.patch_order); the core patchifies (reshape/permute only).
 *
 * The frame axis: tensors are described as (B, C, T, H, W). Image codecs
 * (max_frames 1, temporal_factor 1) take and give 4-D tensors (B, C, H, W),
 * which are the T = 1 case with the axis left out; a video codec (Wan) will
 * set max_frames > 1 and take 5-D tensors, and a core that drives one passes
 * them. The fields are here now so that it fits without an ABI break.
 *
 * Weights: declared like a model's (ork_weight_decl, block ORK_BLOCK_CODEC,
 * flags ORK_WEIGHT_CODEC plus the others that apply), with names of the
 * codec's own prefix ("vae.", "taef1.") so they never meet a model's in the
 * one store; read in encode/decode through tensor_api->weight. A codec
 * without weights (pixel) declares none.
 *
 * Everything here is [control-thread]; graph work is [stream-ordered]. */
#ifndef ORAKUL_CODEC_H
#define ORAKUL_CODEC_H

#include <orakul/abi.h>
#include <orakul/model.h> /* ork_weight_decl, ork_weight_sink, ORK_WEIGHT_*, ORK_BLOCK_CODEC */
#include <orakul/plugin.h>
#include <orakul/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    /* decode(encode(x)) == x up to rounding (the pixel codec) */
    ORK_CODEC_LOSSLESS = 1u << 0,
    /* open takes no weights path (NULL or ""): the codec has no weights */
    ORK_CODEC_NO_WEIGHTS = 1u << 1,
};

typedef struct ork_codec_info {
    ork_abi abi;
    const char *family;            /* "flux1-vae", "flux2-vae", "taef1", "pixel": for lines */
    const char *variant;           /* free-form detail for lines ("ch 128, 4 levels") */
    int n_weights;
    const ork_weight_decl *weights; /* owned by the codec instance; every block ORK_BLOCK_CODEC */
    int image_channels;            /* channels of the pixels: 3 */
    int latent_channels;           /* C of the latents: 16 (FLUX.1 AE, TAEF1), 32 (FLUX.2 AE), 3 (pixel) */
    int spatial_factor;            /* pixels per latent side: 8 (FLUX AEs at full size), 1 (pixel) */
    int temporal_factor;           /* frames per latent frame: 1 for image codecs */
    int max_frames;                /* frames (T) one call takes: 1 for image codecs (4-D tensors) */
    /* latent = scaling_factor·(z − shift_factor), applied by encode, undone by
     * decode; for lines and metadata (the core does not apply them). FLUX.1
     * AE: 0.3611 / 0.1159; FLUX.2 AE: 1 / 0 (it normalizes with its BatchNorm
     * statistics per channel of the 2×2 patch, inside encode); TAEF1, pixel: 1 / 0 */
    double scaling_factor, shift_factor;
    uint32_t flags;                /* ORK_CODEC_* */
} ork_codec_info;

typedef struct ork_codec_vtable {
    ork_abi abi;
    /* Required. params: the component's params buffer (its key table's
     * defaults; valid during the call). */
    ork_status (*create)(const ork_host *host, const void *params, void **self);
    void (*destroy)(void *self);
    /* Required. path: the weights (a .safetensors file or a folder holding the
     * codec's files), NULL or "" for a codec with ORK_CODEC_NO_WEIGHTS. Read
     * the geometry from the shapes, check every declared weight is there with
     * its shape and a float dtype (one line naming the file and tensor, and
     * ORK_E_FORMAT, otherwise; ORK_E_CONFIG for a path that is not there), and
     * declare. info stays valid until destroy. */
    ork_status (*open)(void *self, const char *path, ork_codec_info *info);
    /* Required. Put every declared weight into the sink. */
    ork_status (*load)(void *self, const ork_weight_sink *sink);
    /* Required. pixels (B, 3, H, W) in [0, 1] (or (B, 3, T, H, W) when
     * max_frames > 1) -> latents (B, C, H/s, W/s) (or (B, C, T/tf, H/s, W/s)),
     * s = spatial_factor. H or W not a multiple of s: one line, ORK_E_INVALID. */
    ork_status (*encode)(void *self, ork_graph *g, ork_tensor *pixels, ork_tensor **latents);
    /* Required. The inverse: latents -> pixels in [0, 1] (roughly; not
     * clamped). Differentiable through the ops' backwards. */
    ork_status (*decode)(void *self, ork_graph *g, ork_tensor *latents, ork_tensor **pixels);
} ork_codec_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_CODEC_H */
