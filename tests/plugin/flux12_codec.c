/* tests/plugin/flux12_codec.c — the image codec of orakul-flux12.so, the FLUX
 * plugin built as an ABI 1.2 plugin (test_abi12.c): a 1.2 model brings its
 * own vtable encode/decode, as the FLUX plugin did before codecs became
 * components (issue #30). This is the pixel codec exactly as it was there:
 * [0, 1] -> [-1, 1], then p×p space-to-depth (channel c·p² + ph·p + pw) —
 * the same ops in the same order as the pixel codec component plus the
 * core's channel-major patchify, so both runs give the same bits. */
#include "flux.h"

#include <string.h>

#define TRY ORK_TRY

static ork_status affine(flux_model *f, ork_graph *g, ork_tensor *x, float a, float b, ork_tensor **y) {
    ork_tensor *bt;
    int64_t one = 1;
    TRY(f->ops->scale(g, x, a, &x));
    TRY(f->ta->from_host(g, ORK_F32, 1, &one, &b, &bt));
    if (f->ta->dtype(x) != ORK_F32) TRY(f->ops->cast(g, bt, f->ta->dtype(x), &bt));
    return f->ops->add(g, x, bt, y);
}

static int patch_of(flux_model *f) {
    int p = (int)f->p.pixel_patch;
    return f->cfg.in_channels == 3 * p * p ? p : 0;
}

ork_status flux12_encode(void *self, ork_graph *g, ork_tensor *img, ork_tensor **tokens);
ork_status flux12_decode(void *self, ork_graph *g, ork_tensor *tokens, int h, int w, ork_tensor **img);

ork_status flux12_encode(void *self, ork_graph *g, ork_tensor *img, ork_tensor **tokens) {
    flux_model *f = self;
    int p = patch_of(f);
    const ork_tensor_api *ta = f->ta;
    int64_t B = ta->dim(img, 0), C = ta->dim(img, 1), H = ta->dim(img, 2), W = ta->dim(img, 3);
    if (!p || H % p || W % p) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "flux12: image %lldx%lld and %d-channel tokens: no pixel codec for them",
                 (long long)W, (long long)H, f->cfg.in_channels);
        return ORK_E_INVALID;
    }
    ork_tensor *x;
    TRY(affine(f, g, img, 2.0f, -1.0f, &x));
    int64_t s6[6] = {B, C, H / p, p, W / p, p}, s3[3] = {B, (H / p) * (W / p), C * p * p};
    static const int perm[6] = {0, 2, 4, 1, 3, 5};
    TRY(f->ops->reshape(g, x, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    return f->ops->reshape(g, x, 3, s3, tokens);
}

ork_status flux12_decode(void *self, ork_graph *g, ork_tensor *tokens, int h, int w, ork_tensor **img) {
    flux_model *f = self;
    int p = patch_of(f);
    if (!p) return ORK_E_INVALID;
    int64_t B = f->ta->dim(tokens, 0);
    int64_t s6[6] = {B, h, w, 3, p, p}, s4[4] = {B, 3, (int64_t)h * p, (int64_t)w * p};
    static const int perm[6] = {0, 3, 1, 4, 2, 5};
    ork_tensor *x;
    TRY(f->ops->reshape(g, tokens, 6, s6, &x));
    TRY(f->ops->permute(g, x, perm, &x));
    TRY(f->ops->reshape(g, x, 4, s4, &x));
    return affine(f, g, x, 0.5f, 0.5f, img);
}
