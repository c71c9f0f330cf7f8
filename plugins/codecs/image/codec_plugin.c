/* codec_plugin.c — the image codec plugin's entry (orakul-image_codecs.so):
 * the codec components (kind ORK_KIND_CODEC, orakul/codec.h)
 *   org.orakul.codec.flux1-vae  (flux1-vae, flux-vae)  FLUX.1's 16-channel AE
 *   org.orakul.codec.flux2-vae  (flux2-vae)            FLUX.2's 32-channel AE
 *   org.orakul.codec.taef1      (taef1)                TAEF1, FLUX.1's latents
 *   org.orakul.codec.pixel      (pixel)                pixels as latents
 * their vtables, the declaration helper and the pixel codec (lossless:
 * [0, 1] -> [-1, 1], 3 channels, factor 1; the model's p×p patchify makes it
 * FLUX's space-to-depth). Owns nothing global: each create() makes an
 * independent ic_codec. */
#include "image_codecs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY ORK_TRY

static const ork_host *g_host; /* set by init, valid until deinit */

/* ---- shared helpers ------------------------------------------------------------- */

ork_status ic_decl(ic_codec *f, const char *name, int block, uint32_t flags, int ndim, ...) {
    if (f->n_weights == f->cap_weights) {
        int cap = f->cap_weights ? 2 * f->cap_weights : 256;
        ork_weight_decl *w = realloc(f->weights, (size_t)cap * sizeof *w);
        if (w) f->weights = w;
        char **n = w ? realloc(f->weight_names, (size_t)cap * sizeof *n) : NULL;
        if (!w || !n) return ORK_E_NOMEM;
        f->weight_names = n;
        f->cap_weights = cap;
    }
    size_t len = strlen(name);
    char *s = malloc(len + 1);
    if (!s) return ORK_E_NOMEM;
    memcpy(s, name, len + 1);
    ork_weight_decl *d = &f->weights[f->n_weights];
    memset(d, 0, sizeof *d);
    d->name = s;
    d->block = block;
    d->flags = flags;
    d->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) d->shape[i] = va_arg(ap, int64_t);
    va_end(ap);
    f->weight_names[f->n_weights++] = s;
    return ORK_OK;
}

ork_status ic_w(ic_codec *f, ork_graph *g, ork_tensor **out, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return f->ta->weight(g, name, out);
}

void ic_done(ic_codec *f, ork_graph *g, ork_tensor *t) {
    if (t && ork_tensor_api_has_drop(f->ta) && !f->ta->grad_enabled(g)) f->ta->drop(g, t);
}

/* (B, C, h·p, w·p) -> (B, h·w, C·p·p), channel = c·p² + ph·p + pw */
ork_status ic_pack(ic_codec *f, ork_graph *g, ork_tensor *x, int p, ork_tensor **y) {
    const ork_tensor_api *ta = f->ta;
    int64_t B = ta->dim(x, 0), C = ta->dim(x, 1), H = ta->dim(x, 2), W = ta->dim(x, 3);
    int64_t s6[6] = {B, C, H / p, p, W / p, p}, s3[3] = {B, (H / p) * (W / p), C * p * p};
    static const int perm[6] = {0, 2, 4, 1, 3, 5};
    TRY(f->ops->reshape(g, x, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    return f->ops->reshape(g, x, 3, s3, y);
}

/* inverse of ic_pack */
ork_status ic_unpack(ic_codec *f, ork_graph *g, ork_tensor *x, int C, int p, int h, int w, ork_tensor **y) {
    int64_t B = f->ta->dim(x, 0);
    int64_t s6[6] = {B, h, w, C, p, p}, s4[4] = {B, C, (int64_t)h * p, (int64_t)w * p};
    static const int perm[6] = {0, 3, 1, 4, 2, 5};
    TRY(f->ops->reshape(g, x, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    return f->ops->reshape(g, x, 4, s4, y);
}

/* ---- the pixel codec -------------------------------------------------------------- */

/* y = a·x + b with a scalar b (a (1) tensor broadcast) */
static ork_status affine(ic_codec *f, ork_graph *g, ork_tensor *x, float a, float b, ork_tensor **y) {
    ork_tensor *bt;
    int64_t one = 1;
    TRY(f->ops->scale(g, x, a, &x));
    TRY(f->ta->from_host(g, ORK_F32, 1, &one, &b, &bt));
    if (f->ta->dtype(x) != ORK_F32) TRY(f->ops->cast(g, bt, f->ta->dtype(x), &bt));
    return f->ops->add(g, x, bt, y);
}

static ork_status pixel_check(ic_codec *f, ork_tensor *x, const char *what) {
    if (f->ta->ndim(x) == 4 && f->ta->dim(x, 1) == 3) return ORK_OK;
    IC_LOG(f, ORK_LEVEL_ERROR, "pixel %s: a tensor of %d dimensions with %lld channels; (B, 3, H, W) expected", what,
           f->ta->ndim(x), (long long)(f->ta->ndim(x) > 1 ? f->ta->dim(x, 1) : 0));
    return ORK_E_INVALID;
}

/* ---- the vtable ------------------------------------------------------------------- */

static ork_status ic_create(const ork_host *host, ic_kind kind, void **self) {
    ic_codec *f = calloc(1, sizeof *f);
    if (!f) return ORK_E_NOMEM;
    f->host = host ? host : g_host;
    f->kind = kind;
    f->ops = f->host->get_service(f->host, ORK_SERVICE_OPS);
    f->ta = f->host->get_service(f->host, ORK_SERVICE_TENSOR);
    f->st = f->host->get_service(f->host, ORK_SERVICE_SAFETENSORS);
    if (!f->ops || !f->ta || !f->st) {
        f->host->log(f->host, ORK_LEVEL_ERROR, "the core lacks %s, %s or %s", ORK_SERVICE_OPS, ORK_SERVICE_TENSOR,
                     ORK_SERVICE_SAFETENSORS);
        free(f);
        return ORK_E_ABI;
    }
    *self = f;
    return ORK_OK;
}
static ork_status c_vae1(const ork_host *h, const void *p, void **s) { (void)p; return ic_create(h, IC_VAE1, s); }
static ork_status c_vae2(const ork_host *h, const void *p, void **s) { (void)p; return ic_create(h, IC_VAE2, s); }
static ork_status c_taef1(const ork_host *h, const void *p, void **s) { (void)p; return ic_create(h, IC_TAEF1, s); }
static ork_status c_pixel(const ork_host *h, const void *p, void **s) { (void)p; return ic_create(h, IC_PIXEL, s); }

static void ic_destroy(void *self) {
    ic_codec *f = self;
    if (!f) return;
    flux_vae_free(f);
    for (int i = 0; i < f->n_weights; i++) free(f->weight_names[i]);
    free(f->weight_names);
    free(f->weights);
    free(f);
}

static ork_status ic_open(void *self, const char *path, ork_codec_info *info) {
    ic_codec *f = self;
    memset(info, 0, sizeof *info);
    info->abi = (ork_abi)ORK_ABI_INIT(ork_codec_info);
    info->image_channels = 3;
    info->temporal_factor = 1;
    info->max_frames = 1;
    info->scaling_factor = 1.0;
    snprintf(f->path, sizeof f->path, "%s", path ? path : "");
    switch (f->kind) {
    case IC_PIXEL:
        info->family = "pixel";
        info->variant = "pixel";
        info->latent_channels = 3;
        info->spatial_factor = 1;
        info->flags = ORK_CODEC_LOSSLESS | ORK_CODEC_NO_WEIGHTS;
        return ORK_OK;
    case IC_TAEF1:
        if (!f->path[0]) {
            IC_LOG(f, ORK_LEVEL_ERROR, "codec taef1 needs its folder (taef1_encoder.safetensors, taef1_decoder.safetensors)");
            return ORK_E_CONFIG;
        }
        TRY(ic_taef1_open(f));
        info->family = "taef1";
        info->variant = "taef1";
        info->latent_channels = 16;
        info->spatial_factor = 8;
        break;
    case IC_VAE1:
    case IC_VAE2: {
        int want = f->kind == IC_VAE1 ? 1 : 2;
        if (!f->path[0]) {
            IC_LOG(f, ORK_LEVEL_ERROR, "codec flux%d-vae needs the autoencoder (BFL ae.safetensors, or its folder)", want);
            return ORK_E_CONFIG;
        }
        if (f->ops->abi.struct_size < offsetof(ork_ops, softmax) + sizeof f->ops->softmax) {
            IC_LOG(f, ORK_LEVEL_ERROR, "codec flux%d-vae needs groupnorm, pad2d and softmax in %s (this core predates them)",
                   want, ORK_SERVICE_OPS);
            return ORK_E_ABI;
        }
        TRY(flux_vae_open(f));
        if (f->vae.version != want) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s is a FLUX.%d autoencoder (%d latent channels); codec flux%d-vae reads "
                   "FLUX.%d's", f->vae_file, f->vae.version, f->vae.z, want, want);
            return ORK_E_CONFIG;
        }
        TRY(flux_vae_declare(f));
        TRY(flux_vae_validate(f));
        info->family = want == 1 ? "flux1-vae" : "flux2-vae";
        snprintf(f->variant, sizeof f->variant, "FLUX.%d AE, ch %d, %d levels, z %d", want, f->vae.ch, f->vae.nlev,
                 f->vae.z);
        info->variant = f->variant;
        info->latent_channels = f->vae.z;
        info->spatial_factor = flux_vae_spatial_factor(f);
        if (want == 1) {
            info->scaling_factor = 0.3611;
            info->shift_factor = 0.1159;
        }
        break;
    }
    }
    info->n_weights = f->n_weights;
    info->weights = f->weights;
    return ORK_OK;
}

static ork_status ic_load(void *self, const ork_weight_sink *sink) {
    ic_codec *f = self;
    switch (f->kind) {
    case IC_TAEF1: return ic_taef1_load(f, sink);
    case IC_VAE1: case IC_VAE2: return flux_vae_load(f, sink);
    default: return ORK_OK;
    }
}

static ork_status ic_encode(void *self, ork_graph *g, ork_tensor *img, ork_tensor **latents) {
    ic_codec *f = self;
    switch (f->kind) {
    case IC_PIXEL: TRY(pixel_check(f, img, "encode")); return affine(f, g, img, 2.0f, -1.0f, latents);
    case IC_TAEF1: return ic_taef1_encode(f, g, img, latents);
    default: return flux_vae_encode(f, g, img, latents);
    }
}

static ork_status ic_decode(void *self, ork_graph *g, ork_tensor *latents, ork_tensor **img) {
    ic_codec *f = self;
    switch (f->kind) {
    case IC_PIXEL: TRY(pixel_check(f, latents, "decode")); return affine(f, g, latents, 0.5f, 0.5f, img);
    case IC_TAEF1: return ic_taef1_decode(f, g, latents, img);
    default: return flux_vae_decode(f, g, latents, img);
    }
}

#define VTABLE(name, createfn) \
    static const ork_codec_vtable name = {.abi = ORK_ABI_INIT(ork_codec_vtable), .create = createfn, \
                                          .destroy = ic_destroy, .open = ic_open, .load = ic_load, \
                                          .encode = ic_encode, .decode = ic_decode}
VTABLE(vt_vae1, c_vae1);
VTABLE(vt_vae2, c_vae2);
VTABLE(vt_taef1, c_taef1);
VTABLE(vt_pixel, c_pixel);

static const char *const a_vae1[] = {"flux1-vae", "flux-vae", NULL};
static const char *const a_vae2[] = {"flux2-vae", NULL};
static const char *const a_taef1[] = {"taef1", NULL};
static const char *const a_pixel[] = {"pixel", NULL};

#define COMPONENT(name, cid, al, desc, vt) \
    static const ork_component name = {.abi = ORK_ABI_INIT(ork_component), .kind = ORK_KIND_CODEC, .id = cid, \
                                       .aliases = al, .description = desc, .vtable = &vt}
COMPONENT(k_vae1, "org.orakul.codec.flux1-vae", a_vae1,
          "FLUX.1 autoencoder (BFL ae.safetensors): 16 latent channels at 1/8, scale 0.3611, shift 0.1159", vt_vae1);
COMPONENT(k_vae2, "org.orakul.codec.flux2-vae", a_vae2,
          "FLUX.2 autoencoder (BFL ae.safetensors): 32 latent channels at 1/8, BatchNorm over 2x2 patches", vt_vae2);
COMPONENT(k_taef1, "org.orakul.codec.taef1", a_taef1,
          "TAEF1, the tiny autoencoder for FLUX.1's latents (a folder with taef1_encoder/decoder.safetensors)", vt_taef1);
COMPONENT(k_pixel, "org.orakul.codec.pixel", a_pixel,
          "pixels as latents ([0, 1] -> [-1, 1], 3 channels, lossless; the model's patch makes it space-to-depth)",
          vt_pixel);

static ork_status ic_init(const ork_host *host) {
    g_host = host;
    return ORK_OK;
}
static void ic_deinit(void) { g_host = NULL; }

static const ork_component *const ic_components[] = {&k_vae1, &k_vae2, &k_taef1, &k_pixel, NULL};

static const ork_plugin_entry ic_entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "image_codecs",
    .version = "1.0.0",
    .description = "image codecs: FLUX.1 and FLUX.2 autoencoders, TAEF1, pixels",
    .init = ic_init,
    .deinit = ic_deinit,
    .components = ic_components,
};

ORK_PLUGIN_ENTRY(ic_entry)
