/* flux_codec.c — the FLUX family's image codecs: pixels (B, 3, H, W) in [0, 1]
 * <-> tokens (B, N, C).
 *  - taef1: madebyollin's Tiny AutoEncoder for FLUX.1 (FORMATS.md, TAEF1):
 *    16-channel latents at 1/8, then FLUX.1's 2×2 packing to 64-channel tokens
 *    (channel = c·4 + ph·2 + pw, FLUX.md §7).
 *  - pixel: lossless space-to-depth of p×p pixel patches into 3·p² channels,
 *    mapped to [-1, 1]; lets small models train on real images with no weights.
 *  - vae: BFL's FLUX.1 / FLUX.2 autoencoders (flux_vae.c; dispatched here).
 * Both are differentiable (the perceptual loss decodes predictions). */
#include "flux.h"

#include <stdio.h>
#include <string.h>

#define TRY ORK_TRY

/* TAEF1 nn.Sequential layouts: 'c' conv with bias, 'n' conv without bias
 * (stride 2 in the encoder), 'r' residual block, 'u' upsample, 'R' relu,
 * 'C' clamp. One character per index. */
static const char taef1_enc[] = "crnrrrnrrrnrrrc";
static const char taef1_dec[] = "CcRrrrunrrrunrrrunrc";

/* TAEF1 runs in F32 on every backend (2.4M weights, 10 MB): in BF16 its
 * 20-conv decoder's gradient was 36% (L2) off torch's on the H200, as
 * torch's own bf16 VGG19 is 30% off its F32; the perceptual loss
 * differentiates through it, and latents are encoded once. */
#define TAEF1_FLAGS (ORK_WEIGHT_CODEC | ORK_WEIGHT_F32)

static ork_status decl_conv(flux_model *f, const char *name, int bias, int64_t cout, int64_t cin) {
    char n[200];
    snprintf(n, sizeof n, "%.180s.weight", name);
    TRY(flux_decl(f, n, ORK_BLOCK_CODEC, TAEF1_FLAGS, 4, cout, cin, (int64_t)3, (int64_t)3));
    if (!bias) return ORK_OK;
    snprintf(n, sizeof n, "%.180s.bias", name);
    return flux_decl(f, n, ORK_BLOCK_CODEC, TAEF1_FLAGS | ORK_WEIGHT_BIAS, 1, cout);
}

static ork_status decl_taef1(flux_model *f, const char *part, const char *layout) {
    char n[200];
    for (int i = 0; layout[i]; i++) {
        int64_t cin = 64, cout = 64;
        if (!strcmp(part, "encoder")) {
            if (i == 0) cin = 3;
            if (layout[i + 1] == 0) cout = 16;
        } else {
            if (i == 1) cin = 16;
            if (layout[i + 1] == 0) cout = 3;
        }
        switch (layout[i]) {
        case 'c': case 'n':
            snprintf(n, sizeof n, "taef1.%s.%d", part, i);
            TRY(decl_conv(f, n, layout[i] == 'c', cout, cin));
            break;
        case 'r':
            for (int k = 0; k <= 4; k += 2) {
                snprintf(n, sizeof n, "taef1.%s.%d.conv.%d", part, i, k);
                TRY(decl_conv(f, n, 1, 64, 64));
            }
            break;
        default: break;
        }
    }
    return ORK_OK;
}

ork_status flux_codec_declare(flux_model *f) {
    if (f->codec == FLUX_CODEC_VAE) {
        TRY(flux_vae_declare(f));
        return flux_vae_validate(f);
    }
    if (f->codec != FLUX_CODEC_TAEF1) return ORK_OK;
    TRY(decl_taef1(f, "encoder", taef1_enc));
    return decl_taef1(f, "decoder", taef1_dec);
}

ork_status flux_codec_load(flux_model *f, const ork_weight_sink *sink) {
    if (f->codec == FLUX_CODEC_VAE) return flux_vae_load(f, sink);
    if (f->codec != FLUX_CODEC_TAEF1) return ORK_OK;
    static const char *const parts[2] = {"encoder", "decoder"};
    for (int p = 0; p < 2; p++) {
        char path[1200];
        ork_st_set *s;
        snprintf(path, sizeof path, "%s/taef1_%s.safetensors", f->taef1_path, parts[p]);
        TRY(f->st->open(path, &s));
        ork_status st = ORK_OK;
        size_t pl = strlen("taef1.") + strlen(parts[p]) + 1;
        for (int i = 0; st == ORK_OK && i < f->n_weights; i++) {
            const ork_weight_decl *d = &f->weights[i];
            if (!(d->flags & ORK_WEIGHT_CODEC) || strncmp(d->name + 6, parts[p], strlen(parts[p])) != 0) continue;
            ork_st_info t;
            if (f->st->find(s, d->name + pl, &t) != ORK_OK) {
                FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor '%s'", path, d->name + pl);
                st = ORK_E_FORMAT;
                break;
            }
            int ok = t.ndim == d->ndim;
            for (int k = 0; ok && k < d->ndim; k++) ok = t.shape[k] == d->shape[k];
            if (!ok) {
                FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has the wrong shape", path, t.name);
                st = ORK_E_FORMAT;
                break;
            }
            st = sink->put(sink, d->name, t.dtype, t.data);
        }
        f->st->close(s);
        TRY(st);
    }
    return ORK_OK;
}

static ork_status conv(flux_model *f, ork_graph *g, ork_tensor *x, const char *name, int bias, int stride,
                       ork_tensor **y) {
    ork_tensor *w, *b = NULL;
    TRY(flux_w(f, g, &w, "%s.weight", name));
    if (bias) TRY(flux_w(f, g, &b, "%s.bias", name));
    return f->ops->conv2d(g, x, w, b, stride, 1, y);
}

#define STEP(call, in, out) FLUX_STEP(call, in, out, keep)

/* relu(conv4(relu(conv2(relu(conv0(x))))) + x); x stays (the caller's) */
static ork_status resblock(flux_model *f, ork_graph *g, ork_tensor *x, const char *name, ork_tensor **y) {
    char n[192];
    ork_tensor *h = x, *keep = x;
    for (int k = 0; k <= 4; k += 2) {
        snprintf(n, sizeof n, "%.160s.conv.%d", name, k);
        STEP(conv(f, g, h, n, 1, 1, &h), h, h);
        if (k < 4) STEP(f->ops->relu(g, h, &h), h, h);
    }
    STEP(f->ops->add(g, h, x, &h), h, h);
    keep = NULL;
    STEP(f->ops->relu(g, h, y), h, *y);
    return ORK_OK;
}

static ork_status run_taef1(flux_model *f, ork_graph *g, const char *part, const char *layout, ork_tensor *x,
                            ork_tensor **y) {
    char n[200];
    int enc = !strcmp(part, "encoder");
    if (f->ta->dtype(x) != ORK_F32) TRY(f->ops->cast(g, x, ORK_F32, &x)); /* TAEF1_FLAGS: F32 weights */
    ork_tensor *keep = x; /* the caller's input stays */
    for (int i = 0; layout[i]; i++) {
        snprintf(n, sizeof n, "taef1.%s.%d", part, i);
        switch (layout[i]) {
        case 'c': STEP(conv(f, g, x, n, 1, 1, &x), x, x); break;
        case 'n': STEP(conv(f, g, x, n, 0, enc ? 2 : 1, &x), x, x); break;
        case 'r': STEP(resblock(f, g, x, n, &x), x, x); break;
        case 'u': STEP(f->ops->upsample2x(g, x, &x), x, x); break;
        case 'R': STEP(f->ops->relu(g, x, &x), x, x); break;
        case 'C': STEP(f->ops->tanh_clamp(g, x, 3.0f, &x), x, x); break;
        default: return ORK_E_INTERNAL;
        }
    }
    *y = x;
    return ORK_OK;
}

/* (B, C, h·p, w·p) -> (B, h·w, C·p·p), channel = c·p² + ph·p + pw */
static ork_status pack(flux_model *f, ork_graph *g, ork_tensor *x, int p, ork_tensor **y) {
    const ork_tensor_api *ta = f->ta;
    int64_t B = ta->dim(x, 0), C = ta->dim(x, 1), H = ta->dim(x, 2), W = ta->dim(x, 3);
    if (H % p || W % p) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "image %lldx%lld is not a multiple of %d", (long long)W, (long long)H, p);
        return ORK_E_INVALID;
    }
    int64_t s6[6] = {B, C, H / p, p, W / p, p}, s3[3] = {B, (H / p) * (W / p), C * p * p};
    static const int perm[6] = {0, 2, 4, 1, 3, 5};
    TRY(f->ops->reshape(g, x, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    return f->ops->reshape(g, x, 3, s3, y);
}

/* inverse of pack */
static ork_status unpack(flux_model *f, ork_graph *g, ork_tensor *x, int C, int p, int h, int w, ork_tensor **y) {
    int64_t B = f->ta->dim(x, 0);
    int64_t s6[6] = {B, h, w, C, p, p}, s4[4] = {B, C, (int64_t)h * p, (int64_t)w * p};
    static const int perm[6] = {0, 3, 1, 4, 2, 5};
    TRY(f->ops->reshape(g, x, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    return f->ops->reshape(g, x, 4, s4, y);
}

/* y = a·x + b with a scalar b (a (1) tensor broadcast) */
static ork_status affine(flux_model *f, ork_graph *g, ork_tensor *x, float a, float b, ork_tensor **y) {
    ork_tensor *bt;
    int64_t one = 1;
    TRY(f->ops->scale(g, x, a, &x));
    TRY(f->ta->from_host(g, ORK_F32, 1, &one, &b, &bt));
    if (f->ta->dtype(x) != ORK_F32) TRY(f->ops->cast(g, bt, f->ta->dtype(x), &bt));
    return f->ops->add(g, x, bt, y);
}

ork_status flux_encode(flux_model *f, ork_graph *g, ork_tensor *img, ork_tensor **tokens) {
    switch (f->codec) {
    case FLUX_CODEC_PIXEL:
        TRY(affine(f, g, img, 2.0f, -1.0f, &img));
        return pack(f, g, img, f->pixel_patch, tokens);
    case FLUX_CODEC_TAEF1: {
        ork_tensor *z;
        TRY(run_taef1(f, g, "encoder", taef1_enc, img, &z));
        return pack(f, g, z, 2, tokens);
    }
    case FLUX_CODEC_VAE: return flux_vae_encode(f, g, img, tokens);
    default:
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s takes %d-channel tokens and has no image codec for them: set "
                 "model.model_kwargs.vae_path or taef1_path (the pixel codec gives 3 x pixel_patch² channels, %d)",
                 f->cfg.variant, f->cfg.in_channels, 3 * (int)f->p.pixel_patch * (int)f->p.pixel_patch);
        return ORK_E_UNSUPPORTED;
    }
}

ork_status flux_decode(flux_model *f, ork_graph *g, ork_tensor *tokens, int h, int w, ork_tensor **img) {
    switch (f->codec) {
    case FLUX_CODEC_PIXEL: {
        ork_tensor *x;
        TRY(unpack(f, g, tokens, 3, f->pixel_patch, h, w, &x));
        return affine(f, g, x, 0.5f, 0.5f, img);
    }
    case FLUX_CODEC_TAEF1: {
        ork_tensor *z;
        TRY(unpack(f, g, tokens, 16, 2, h, w, &z));
        return run_taef1(f, g, "decoder", taef1_dec, z, img);
    }
    case FLUX_CODEC_VAE: return flux_vae_decode(f, g, tokens, h, w, img);
    default:
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s takes %d-channel tokens and has no image codec for them: set "
                 "model.model_kwargs.vae_path or taef1_path (the pixel codec gives 3 x pixel_patch² channels, %d)",
                 f->cfg.variant, f->cfg.in_channels, 3 * (int)f->p.pixel_patch * (int)f->p.pixel_patch);
        return ORK_E_UNSUPPORTED;
    }
}
