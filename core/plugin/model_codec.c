/* plugin/model_codec.c — the model's image codec: picking a codec slot,
 * opening the codec component, merging its declarations into the model's,
 * and encode / decode with the model's patchify (plugin/model_codec.h).
 * Owns: the codec instance and the merged declarations of one model. */
#include "plugin/model_codec.h"

#include "tensor/ops.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_auto(const char *sel) { return !sel || !*sel || !strcmp(sel, "auto"); }

static int slot_is(const ork_codec_slot *s, const char *sel) {
    return (s->name && !strcmp(s->name, sel)) || (s->codec && !strcmp(s->codec, sel));
}

static const char *slot_name(const ork_codec_slot *s) { return s->name ? s->name : s->codec; }

/* "preset custom" / "the checkpoint flux1-dev" (model.h: "preset:<name>" is a preset) */
static void model_words(const ork_model_codec *mc, const ork_model_info *info, char *buf, size_t n) {
    int preset = mc->model_name && !strncmp(mc->model_name, "preset:", 7);
    snprintf(buf, n, "%s %s", preset ? "preset" : "the checkpoint", info->variant ? info->variant : "?");
}

/* "vae_path or taef1_path": the path keys of the slots other than skip */
static void path_keys(const ork_model_info *info, const ork_codec_slot *skip, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < info->n_codecs; i++) {
        const ork_codec_slot *s = &info->codecs[i];
        if (s == skip || !s->path_key) continue;
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? " or " : "", s->path_key);
    }
}

void ork_model_codec_hint(const ork_model_info *info, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "model.model_kwargs.");
    int k = 0;
    for (int i = 0; i < info->n_codecs; i++) {
        const ork_codec_slot *s = &info->codecs[i];
        if (!s->path_key) continue;
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s (%s)", k++ ? " or " : "", s->path_key, s->codec);
    }
    if (!k) len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "codec");
    for (int i = 0; i < info->n_codecs; i++) {
        const ork_codec_slot *s = &info->codecs[i];
        if (s->path_key) continue;
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "; %s takes no weights (its latents make %s·p² "
                                "channels per token with %s p)", s->codec, "C", s->patch_key ? s->patch_key : "patch");
    }
}

static void close_codec(ork_model_codec *mc) {
    if (mc->self) ((const ork_codec_vtable *)mc->pc->c->vtable)->destroy(mc->self);
    mc->self = NULL;
    mc->pc = NULL;
    mc->slot = NULL;
    memset(&mc->info, 0, sizeof mc->info);
}

/* Open slot s's codec; *fits: its latents make the model's tokens. */
static ork_status open_slot(ork_model_codec *mc, const ork_registry *reg, const ork_codec_slot *s,
                            const ork_model_info *info, int *fits) {
    const ork_plugin_component *pc = s->codec ? ork_registry_find(reg, ORK_KIND_CODEC, s->codec) : NULL;
    if (!pc) {
        char avail[1024];
        ork_registry_available(reg, ORK_KIND_CODEC, avail, sizeof avail);
        return ORK_FAIL(ORK_E_CONFIG, "model %s takes codec '%s', which no loaded plugin provides (codecs: %s)",
                        mc->model_name, s->codec ? s->codec : "(null)", avail);
    }
    if (s->patch < 1) return ORK_FAIL(ORK_E_CONFIG, "model %s: codec slot %s has patch %d", mc->model_name, slot_name(s), s->patch);
    const ork_codec_vtable *vt = pc->c->vtable;
    mc->pc = pc;
    mc->slot = s;
    ORK_TRY(vt->create(&pc->host, NULL, &mc->self));
    ORK_TRY(vt->open(mc->self, s->path, &mc->info));
    if (mc->info.latent_channels < 1 || mc->info.spatial_factor < 1 || mc->info.n_weights < 0 ||
        (mc->info.n_weights && !mc->info.weights))
        return ORK_FAIL(ORK_E_ABI, "codec %s declares %d latent channels, spatial factor %d, %d weights", pc->c->id,
                        mc->info.latent_channels, mc->info.spatial_factor, mc->info.n_weights);
    for (int i = 0; i < mc->info.n_weights; i++)
        if (mc->info.weights[i].block != ORK_BLOCK_CODEC || !mc->info.weights[i].name)
            return ORK_FAIL(ORK_E_ABI, "codec %s: weight #%d '%s' is not declared in ORK_BLOCK_CODEC", pc->c->id, i,
                            mc->info.weights[i].name ? mc->info.weights[i].name : "(null)");
    *fits = (int64_t)mc->info.latent_channels * s->patch * s->patch == info->token_channels;
    return ORK_OK;
}

/* The chosen slot's latents do not make the tokens: one line. */
static ork_status refuse_fit(ork_model_codec *mc, const ork_model_info *info, int by_name) {
    const ork_codec_slot *s = mc->slot;
    char who[256], keys[256], via[512];
    model_words(mc, info, who, sizeof who);
    path_keys(info, s, keys, sizeof keys);
    if (s->path_key) snprintf(via, sizeof via, "%s %s (%s)", s->path_key, s->path ? s->path : "", mc->info.variant ? mc->info.variant : s->codec);
    else snprintf(via, sizeof via, "model.model_kwargs.codec %s", slot_name(s));
    int per = mc->info.latent_channels * s->patch * s->patch;
    (void)by_name;
    return ORK_FAIL(ORK_E_CONFIG, "%s: the %s codec gives %d channels per token (%d x %s %d x %d); %s takes %d%s%s",
                    via, s->codec, per, mc->info.latent_channels, s->patch_key ? s->patch_key : "patch", s->patch,
                    s->patch, who, info->token_channels, keys[0] ? ": set " : "", keys);
}

static ork_status merge(ork_model_codec *mc, ork_model_info *info) {
    int n = info->n_weights + mc->info.n_weights;
    mc->merged = calloc((size_t)n + 1, sizeof *mc->merged);
    if (!mc->merged) return ORK_FAIL(ORK_E_NOMEM, "codec: %d weight declarations", n);
    if (info->n_weights) memcpy(mc->merged, info->weights, (size_t)info->n_weights * sizeof *mc->merged);
    if (mc->info.n_weights)
        memcpy(mc->merged + info->n_weights, mc->info.weights, (size_t)mc->info.n_weights * sizeof *mc->merged);
    info->weights = mc->merged;
    info->n_weights = n;
    return ORK_OK;
}

ork_status ork_model_codec_open(ork_model_codec *mc, const ork_registry *reg, const char *model_name,
                                const ork_model_vtable *mvt, void *model, ork_model_info *info) {
    memset(mc, 0, sizeof *mc);
    mc->mvt = mvt;
    mc->model = model;
    mc->model_name = model_name ? model_name : "?";
    if (!ork_model_info_has_codec(info) || info->n_codecs <= 0) {
        mc->legacy = 1;
        return ORK_OK;
    }
    if (!info->codecs) return ORK_FAIL(ORK_E_ABI, "model %s declares %d codecs and no slots", mc->model_name, info->n_codecs);
    mc->order = info->patch_order;
    if (mc->order != ORK_PATCH_CHANNEL_MAJOR && mc->order != ORK_PATCH_CHANNEL_MINOR)
        return ORK_FAIL(ORK_E_ABI, "model %s: patch_order %d is neither channel-major (0) nor channel-minor (1)",
                        mc->model_name, mc->order);
    const char *sel = info->codec_select;
    const ork_codec_slot *pick = NULL;
    int fits = 0;
    if (!is_auto(sel)) {
        for (int i = 0; i < info->n_codecs && !pick; i++)
            if (slot_is(&info->codecs[i], sel)) pick = &info->codecs[i];
        if (!pick) {
            char names[512];
            size_t len = 0;
            names[0] = 0;
            for (int i = 0; i < info->n_codecs; i++)
                len += (size_t)snprintf(names + len, len < sizeof names ? sizeof names - len : 0, "%s%s",
                                        len ? ", " : "", slot_name(&info->codecs[i]));
            return ORK_FAIL(ORK_E_CONFIG, "model.model_kwargs.codec '%s': model %s takes no codec of that name (%s)",
                            sel, mc->model_name, names);
        }
        if (pick->path_key && !pick->path)
            return ORK_FAIL(ORK_E_CONFIG, "codec %s needs model.model_kwargs.%s", sel, pick->path_key);
        ORK_TRY(open_slot(mc, reg, pick, info, &fits));
        if (!fits) return refuse_fit(mc, info, 1);
    } else {
        for (int i = 0; i < info->n_codecs && !pick; i++)
            if (info->codecs[i].path_key && info->codecs[i].path) pick = &info->codecs[i];
        if (pick) {
            ORK_TRY(open_slot(mc, reg, pick, info, &fits));
            if (!fits) return refuse_fit(mc, info, 0);
        } else {
            for (int i = 0; i < info->n_codecs && !pick; i++)
                if (!info->codecs[i].path_key) pick = &info->codecs[i];
            if (pick) {
                ORK_TRY(open_slot(mc, reg, pick, info, &fits));
                if (!fits) close_codec(mc); /* no codec gives these tokens: pixels_per_token 0 */
            }
        }
    }
    if (!mc->self) {
        info->pixels_per_token = 0;
        return ORK_OK;
    }
    mc->patch = mc->slot->patch;
    info->pixels_per_token = mc->info.spatial_factor * mc->patch;
    return merge(mc, info);
}

int ork_model_codec_present(const ork_model_codec *mc) {
    return mc->legacy ? mc->mvt && mc->mvt->encode != NULL : mc->self != NULL;
}

ork_status ork_model_codec_load(const ork_model_codec *mc, const ork_weight_sink *sink) {
    if (!mc->self) return ORK_OK;
    return ((const ork_codec_vtable *)mc->pc->c->vtable)->load(mc->self, sink);
}

ork_status ork_model_codec_load_all(void *self, const ork_weight_sink *sink) {
    const ork_model_codec *mc = self;
    ORK_TRY(mc->mvt->load(mc->model, sink));
    return ork_model_codec_load(mc, sink);
}

static ork_status no_codec(const ork_model_codec *mc) {
    return ORK_FAIL(ORK_E_UNSUPPORTED, "model %s has no image codec for its tokens", mc->model_name);
}

/* (B, C, h·p, w·p) -> (B, h·w, C·p²) in the model's channel order */
static ork_status patchify(const ork_model_codec *mc, ork_graph *g, ork_tensor *x, ork_tensor **y) {
    const ork_ops *ops = ork_ops_table();
    const ork_tensor_api *ta = ork_tensor_api_table();
    int64_t p = mc->patch, B = ta->dim(x, 0), C = ta->dim(x, 1), H = ta->dim(x, 2), W = ta->dim(x, 3);
    if (ta->ndim(x) != 4 || H % p || W % p)
        return ORK_FAIL(ORK_E_INVALID, "codec %s: latents (%lld, %lld, %lld, %lld) do not split into %lldx%lld patches",
                        mc->pc->c->id, (long long)B, (long long)C, (long long)H, (long long)W, (long long)p, (long long)p);
    int64_t s6[6] = {B, C, H / p, p, W / p, p}, s3[3] = {B, (H / p) * (W / p), C * p * p};
    static const int major[6] = {0, 2, 4, 1, 3, 5}, minor[6] = {0, 2, 4, 3, 5, 1};
    ORK_TRY(ops->reshape(g, x, 6, s6, &x));
    ORK_TRY(ops->permute(g, x, mc->order == ORK_PATCH_CHANNEL_MINOR ? minor : major, &x));
    return ops->reshape(g, x, 3, s3, y);
}

/* the inverse: (B, h·w, C·p²) -> (B, C, h·p, w·p) */
static ork_status unpatchify(const ork_model_codec *mc, ork_graph *g, ork_tensor *x, int h, int w, ork_tensor **y) {
    const ork_ops *ops = ork_ops_table();
    const ork_tensor_api *ta = ork_tensor_api_table();
    int64_t p = mc->patch, C = mc->info.latent_channels, B = ta->dim(x, 0);
    if (ta->ndim(x) != 3 || ta->dim(x, 1) != (int64_t)h * w || ta->dim(x, 2) != C * p * p)
        return ORK_FAIL(ORK_E_INVALID, "decode: tokens (%lld, %lld, %lld) must be (B, %d·%d, %lld) for codec %s",
                        (long long)B, (long long)ta->dim(x, 1), (long long)(ta->ndim(x) > 2 ? ta->dim(x, 2) : 0), h, w,
                        (long long)(C * p * p), mc->pc->c->id);
    int64_t s4[4] = {B, C, (int64_t)h * p, (int64_t)w * p};
    if (mc->order == ORK_PATCH_CHANNEL_MINOR) {
        int64_t s6[6] = {B, h, w, p, p, C};
        static const int perm[6] = {0, 5, 1, 3, 2, 4};
        ORK_TRY(ops->reshape(g, x, 6, s6, &x));
        ORK_TRY(ops->permute(g, x, perm, &x));
    } else {
        int64_t s6[6] = {B, h, w, C, p, p};
        static const int perm[6] = {0, 3, 1, 4, 2, 5};
        ORK_TRY(ops->reshape(g, x, 6, s6, &x));
        ORK_TRY(ops->permute(g, x, perm, &x));
    }
    return ops->reshape(g, x, 4, s4, y);
}

ork_status ork_model_codec_encode(const ork_model_codec *mc, ork_graph *g, ork_tensor *img, ork_tensor **tokens) {
    if (mc->legacy) return mc->mvt && mc->mvt->encode ? mc->mvt->encode(mc->model, g, img, tokens) : no_codec(mc);
    if (!mc->self) return no_codec(mc);
    const ork_tensor_api *ta = ork_tensor_api_table();
    int64_t ppt = (int64_t)mc->info.spatial_factor * mc->patch;
    if (ta->ndim(img) != 4 || ta->dim(img, 2) % ppt || ta->dim(img, 3) % ppt)
        return ORK_FAIL(ORK_E_INVALID, "image %lldx%lld is not a multiple of %lld (codec %s, %d pixels per latent, "
                        "patch %d)", (long long)(ta->ndim(img) == 4 ? ta->dim(img, 3) : 0),
                        (long long)(ta->ndim(img) == 4 ? ta->dim(img, 2) : 0), (long long)ppt, mc->pc->c->id,
                        mc->info.spatial_factor, mc->patch);
    ork_tensor *lat;
    ORK_TRY(((const ork_codec_vtable *)mc->pc->c->vtable)->encode(mc->self, g, img, &lat));
    return patchify(mc, g, lat, tokens);
}

ork_status ork_model_codec_decode(const ork_model_codec *mc, ork_graph *g, ork_tensor *tokens, int h, int w,
                                  ork_tensor **img) {
    if (mc->legacy)
        return mc->mvt && mc->mvt->decode ? mc->mvt->decode(mc->model, g, tokens, h, w, img) : no_codec(mc);
    if (!mc->self) return no_codec(mc);
    ork_tensor *lat;
    ORK_TRY(unpatchify(mc, g, tokens, h, w, &lat));
    return ((const ork_codec_vtable *)mc->pc->c->vtable)->decode(mc->self, g, lat, img);
}

void ork_model_codec_close(ork_model_codec *mc) {
    if (!mc) return;
    close_codec(mc);
    free(mc->merged);
    mc->merged = NULL;
}
