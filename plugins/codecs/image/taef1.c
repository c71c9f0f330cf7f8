/* taef1.c — the codec "taef1": madebyollin's Tiny AutoEncoder for FLUX.1
 * (FORMATS.md, TAEF1), pixels (B, 3, H, W) in [0, 1] <-> 16-channel latents
 * at 1/8 (B, 16, H/8, W/8), FLUX.1's latent space (the model's 2×2 packing to
 * 64-channel tokens is the core's, FLUX.md §7). Differentiable (the
 * perceptual loss decodes predictions). Moved here from the FLUX plugin's
 * flux_codec.c (issue #30): the ops and their order are unchanged. */
#include "image_codecs.h"

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

static ork_status decl_conv(ic_codec *f, const char *name, int bias, int64_t cout, int64_t cin) {
    char n[200];
    snprintf(n, sizeof n, "%.180s.weight", name);
    TRY(ic_decl(f, n, ORK_BLOCK_CODEC, TAEF1_FLAGS, 4, cout, cin, (int64_t)3, (int64_t)3));
    if (!bias) return ORK_OK;
    snprintf(n, sizeof n, "%.180s.bias", name);
    return ic_decl(f, n, ORK_BLOCK_CODEC, TAEF1_FLAGS | ORK_WEIGHT_BIAS, 1, cout);
}

static ork_status decl_taef1(ic_codec *f, const char *part, const char *layout) {
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

/* Every declared taef1.<part>.* weight in <path>/taef1_<part>.safetensors with
 * its shape and a float dtype; sink != NULL also hands each one over. */
static ork_status taef1_walk(ic_codec *f, const ork_weight_sink *sink) {
    static const char *const parts[2] = {"encoder", "decoder"};
    for (int p = 0; p < 2; p++) {
        char path[1200];
        ork_st_set *s;
        snprintf(path, sizeof path, "%s/taef1_%s.safetensors", f->path, parts[p]);
        ork_status st = f->st->open(path, &s);
        if (st != ORK_OK) {
            IC_LOG(f, ORK_LEVEL_ERROR, "taef1: cannot read %s (taef1_path must be the folder holding "
                   "taef1_encoder.safetensors and taef1_decoder.safetensors)", path);
            return st == ORK_E_IO ? ORK_E_CONFIG : st;
        }
        size_t pl = strlen("taef1.") + strlen(parts[p]) + 1;
        for (int i = 0; st == ORK_OK && i < f->n_weights; i++) {
            const ork_weight_decl *d = &f->weights[i];
            if (strncmp(d->name + 6, parts[p], strlen(parts[p])) != 0) continue;
            ork_st_info t;
            if (f->st->find(s, d->name + pl, &t) != ORK_OK) {
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor '%s'", path, d->name + pl);
                st = ORK_E_FORMAT;
                break;
            }
            int ok = t.ndim == d->ndim;
            for (int k = 0; ok && k < d->ndim; k++) ok = t.shape[k] == d->shape[k];
            if (!ok) {
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has the wrong shape", path, t.name);
                st = ORK_E_FORMAT;
                break;
            }
            if (t.dtype != ORK_F32 && t.dtype != ORK_BF16 && t.dtype != ORK_F16) {
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has dtype %d (f32, bf16 or f16 expected)", path, t.name,
                       (int)t.dtype);
                st = ORK_E_FORMAT;
                break;
            }
            if (sink) st = sink->put(sink, d->name, t.dtype, t.data);
        }
        f->st->close(s);
        TRY(st);
    }
    return ORK_OK;
}

ork_status ic_taef1_open(ic_codec *f) {
    TRY(decl_taef1(f, "encoder", taef1_enc));
    TRY(decl_taef1(f, "decoder", taef1_dec));
    return taef1_walk(f, NULL);
}

ork_status ic_taef1_load(ic_codec *f, const ork_weight_sink *sink) { return taef1_walk(f, sink); }

static ork_status conv(ic_codec *f, ork_graph *g, ork_tensor *x, const char *name, int bias, int stride,
                       ork_tensor **y) {
    ork_tensor *w, *b = NULL;
    TRY(ic_w(f, g, &w, "%s.weight", name));
    if (bias) TRY(ic_w(f, g, &b, "%s.bias", name));
    return f->ops->conv2d(g, x, w, b, stride, 1, y);
}

#define STEP(call, in, out) IC_STEP(call, in, out, keep)

/* relu(conv4(relu(conv2(relu(conv0(x))))) + x); x stays (the caller's) */
static ork_status resblock(ic_codec *f, ork_graph *g, ork_tensor *x, const char *name, ork_tensor **y) {
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

static ork_status run_taef1(ic_codec *f, ork_graph *g, const char *part, const char *layout, ork_tensor *x,
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

/* pixels (B, 3, H, W) -> latents (B, 16, H/8, W/8) */
ork_status ic_taef1_encode(ic_codec *f, ork_graph *g, ork_tensor *img, ork_tensor **latents) {
    const ork_tensor_api *ta = f->ta;
    if (ta->ndim(img) != 4 || ta->dim(img, 1) != 3 || ta->dim(img, 2) % 8 || ta->dim(img, 3) % 8) {
        IC_LOG(f, ORK_LEVEL_ERROR, "taef1 encode: image (%lld, %lld, %lld, %lld) must be (B, 3, H, W) with H and W "
               "multiples of 8", (long long)ta->dim(img, 0), (long long)ta->dim(img, 1), (long long)ta->dim(img, 2),
               (long long)ta->dim(img, 3));
        return ORK_E_INVALID;
    }
    return run_taef1(f, g, "encoder", taef1_enc, img, latents);
}

/* latents (B, 16, h, w) -> pixels (B, 3, 8h, 8w) */
ork_status ic_taef1_decode(ic_codec *f, ork_graph *g, ork_tensor *latents, ork_tensor **img) {
    const ork_tensor_api *ta = f->ta;
    if (ta->ndim(latents) != 4 || ta->dim(latents, 1) != 16) {
        IC_LOG(f, ORK_LEVEL_ERROR, "taef1 decode: latents of %d dimensions with %lld channels; (B, 16, h, w) expected",
               ta->ndim(latents), (long long)(ta->ndim(latents) > 1 ? ta->dim(latents, 1) : 0));
        return ORK_E_INVALID;
    }
    return run_taef1(f, g, "decoder", taef1_dec, latents, img);
}
