/* flux_plugin.c — the FLUX model-family plugin's entry: the component
 * "org.orakul.flux" (aliases flux, flux1, flux2, flex1), its model_kwargs key
 * table and the vtable glue. Owns nothing global: each create() makes an
 * independent flux_model. */
#include "flux.h"
#include "flux_decl.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <orakul/platform.h>

/* What path is (orakul.platform/1: no OS header here): ORK_OK and *kind. */
static ork_status path_kind(const flux_model *f, const char *path, ork_file_kind *kind) {
    const ork_platform_api *pl = f->host->get_service ? f->host->get_service(f->host, ORK_SERVICE_PLATFORM) : NULL;
    ork_file_info fi;
    if (!pl || pl->path_info(path, &fi) != ORK_OK) return ORK_E_IO;
    *kind = fi.kind;
    return ORK_OK;
}

#ifdef FLUX_ABI_MINOR_2
/* tests/plugin builds this file a second time as a plugin built against ABI
 * 1.2 would be (orakul-flux12.so, id org.orakul.test.flux12): its entry says
 * 1.2, its ork_model_info ends before the 1.3 fields (text slots, blocks,
 * LoRA targets, schedule), so the core's defaults (core/plugin/model_decl.h)
 * stand in for the declarations. */
#undef ORK_ABI_MINOR
#define ORK_ABI_MINOR 2
#endif

static const ork_host *g_host; /* set by init, valid until deinit */

#define P(field) offsetof(flux_params, field)
static const ork_param flux_keys[] = {
    {"seed", ORK_PARAM_INT, 1, 0, "0", 0, 9.2e18, NULL, P(seed), "seed of the random weights of presets"},
    {"hidden_size", ORK_PARAM_INT, 1, 0, "0", 0, 65536, NULL, P(hidden_size), "custom size: hidden width (0: the variant's)"},
    {"num_heads", ORK_PARAM_INT, 1, 0, "0", 0, 1024, NULL, P(num_heads), "custom size: attention heads"},
    {"depth", ORK_PARAM_INT, 1, 0, "-1", -1, 1024, NULL, P(depth), "custom size: double blocks (-1: the variant's)"},
    {"depth_single_blocks", ORK_PARAM_INT, 1, 0, "-1", -1, 1024, NULL, P(depth_single_blocks), "custom size: single blocks"},
    {"context_in_dim", ORK_PARAM_INT, 1, 0, "0", 0, 1 << 20, NULL, P(context_in_dim), "custom size: text embedding width"},
    {"vec_in_dim", ORK_PARAM_INT, 1, 0, "-1", -1, 1 << 20, NULL, P(vec_in_dim), "custom size: pooled text width (FLUX.1; 0 = none)"},
    {"in_channels", ORK_PARAM_INT, 1, 0, "0", 0, 1 << 16, NULL, P(in_channels), "custom size: token channels (0: from the codec)"},
    {"flux_version", ORK_PARAM_INT, 1, 0, "1", 1, 2, NULL, P(flux_version), "custom size: 1 = FLUX.1 blocks, 2 = FLUX.2 blocks"},
    {"guidance_embed", ORK_PARAM_BOOL, 1, 0, "false", 1, 0, NULL, P(guidance_embed), "custom size: guidance embedding"},
    {"codec", ORK_PARAM_STRING, 1, 0, "auto", 1, 0, "auto|taef1|pixel|vae", P(codec), "image codec: vae (needs vae_path), taef1 (needs taef1_path), pixel (space-to-depth), auto (the first of vae, taef1 with a path set, else pixel)"},
    {"taef1_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(taef1_path), "folder holding taef1_encoder.safetensors and taef1_decoder.safetensors"},
    {"pixel_patch", ORK_PARAM_INT, 1, 0, "4", 1, 64, NULL, P(pixel_patch), "pixel codec: pixels per token side"},
    {"vae_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(vae_path), "the autoencoder: BFL's ae.safetensors of FLUX.1 or FLUX.2, or FLUX.1's diffusers AutoencoderKL (its diffusion_pytorch_model.safetensors), or a folder holding either ([vae/]diffusion_pytorch_model.safetensors); geometry from its shapes"},
    {"context_len", ORK_PARAM_INT, 1, 0, "0", 0, 4096, NULL, P(context_len), "text tokens when no text embeddings are given (0: 512, or 8 for custom sizes)"},
    {"t5_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(t5_path), "FLUX.1's T5-XXL encoder: a .safetensors file, an index json or a folder (default: text_encoder_2/ of a diffusers model.name_or_path)"},
    {"clip_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(clip_path), "FLUX.1's CLIP-L text encoder: a .safetensors file or a folder (default: text_encoder/ of a diffusers model.name_or_path)"},
    {"t5_tokenizer_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(t5_tokenizer_path), "T5's tokenizer: tokenizer.json, spiece.model or a folder holding one (default: tokenizer_2/, else beside t5_path)"},
    {"clip_tokenizer_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(clip_tokenizer_path), "CLIP's tokenizer: tokenizer.json, vocab.json + merges.txt or a folder holding them (default: tokenizer/, else beside clip_path)"},
    {"text_encoder_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(text_encoder_path), "FLUX.2's text encoder (Mistral-Small-3.x for flux2-dev, Qwen3 for klein): a .safetensors file, an index json or a folder (default: text_encoder/ of a diffusers model.name_or_path)"},
    {"text_encoder_tokenizer_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(text_encoder_tokenizer_path), "FLUX.2's tokenizer: tokenizer.json or a folder holding one (default: tokenizer/, else beside text_encoder_path)"},
    {NULL},
};
#undef P

static ork_status flux_create(const ork_host *host, const void *params, void **self) {
    flux_model *f = calloc(1, sizeof *f);
    if (!f) return ORK_E_NOMEM;
    f->host = host ? host : g_host;
    f->ops = f->host->get_service(f->host, ORK_SERVICE_OPS);
    f->ta = f->host->get_service(f->host, ORK_SERVICE_TENSOR);
    f->st = f->host->get_service(f->host, ORK_SERVICE_SAFETENSORS);
    if (!f->ops || !f->ta || !f->st) {
        f->host->log(f->host, ORK_LEVEL_ERROR, "the core lacks %s, %s or %s", ORK_SERVICE_OPS, ORK_SERVICE_TENSOR,
                     ORK_SERVICE_SAFETENSORS);
        free(f);
        return ORK_E_ABI;
    }
    if (params) f->p = *(const flux_params *)params;
    else { f->p.depth = f->p.depth_single_blocks = f->p.vec_in_dim = -1; f->p.flux_version = 1; f->p.pixel_patch = 4; }
    /* strings are only valid during create: copy them */
    snprintf(f->codec_name, sizeof f->codec_name, "%s", f->p.codec ? f->p.codec : "auto");
    snprintf(f->taef1_path, sizeof f->taef1_path, "%s", f->p.taef1_path ? f->p.taef1_path : "");
    snprintf(f->vae_path, sizeof f->vae_path, "%s", f->p.vae_path ? f->p.vae_path : "");
    snprintf(f->t5_path, sizeof f->t5_path, "%s", f->p.t5_path ? f->p.t5_path : "");
    snprintf(f->clip_path, sizeof f->clip_path, "%s", f->p.clip_path ? f->p.clip_path : "");
    snprintf(f->t5_tok_path, sizeof f->t5_tok_path, "%s", f->p.t5_tokenizer_path ? f->p.t5_tokenizer_path : "");
    snprintf(f->clip_tok_path, sizeof f->clip_tok_path, "%s", f->p.clip_tokenizer_path ? f->p.clip_tokenizer_path : "");
    f->p.t5_path = f->t5_path;
    f->p.clip_path = f->clip_path;
    f->p.t5_tokenizer_path = f->t5_tok_path;
    f->p.clip_tokenizer_path = f->clip_tok_path;
    snprintf(f->te_path, sizeof f->te_path, "%s", f->p.text_encoder_path ? f->p.text_encoder_path : "");
    snprintf(f->te_tok_path, sizeof f->te_tok_path, "%s",
             f->p.text_encoder_tokenizer_path ? f->p.text_encoder_tokenizer_path : "");
    f->p.text_encoder_path = f->te_path;
    f->p.text_encoder_tokenizer_path = f->te_tok_path;
    f->p.codec = f->codec_name;
    f->p.taef1_path = f->taef1_path;
    f->p.vae_path = f->vae_path;
    *self = f;
    return ORK_OK;
}

static void flux_destroy(void *self) {
    flux_model *f = self;
    if (!f) return;
    if (f->src) f->st->close(f->src);
    if (f->pe) f->ta->release(f->pe);
    for (int i = 0; i < f->n_weights; i++) free(f->weight_names[i]);
    for (int i = 0; i < f->n_blocks; i++) free(f->block_names[i]);
    free(f->weight_names);
    free(f->weights);
    free(f->block_names);
    free(f->block_decls);
    free(f);
}

/* Custom-size overrides from model_kwargs on top of a preset. */
static void apply_overrides(flux_model *f) {
    flux_cfg *c = &f->cfg;
    const flux_params *p = &f->p;
    if (p->hidden_size > 0) c->hidden = (int)p->hidden_size;
    if (p->num_heads > 0) c->heads = (int)p->num_heads;
    if (p->depth >= 0) c->depth = (int)p->depth;
    if (p->depth_single_blocks >= 0) c->depth_single = (int)p->depth_single_blocks;
    if (p->context_in_dim > 0) c->context_dim = (int)p->context_in_dim;
    if (p->vec_in_dim >= 0) c->vec_dim = (int)p->vec_in_dim;
    if (p->in_channels > 0) c->in_channels = (int)p->in_channels;
    if (p->hidden_size > 0) c->mlp_hidden = (c->version == 2 ? 3 : 4) * c->hidden;
    flux_cfg_derive(c);
}

/* FLUX.1: T5 (text_encoder_2) -> txt, CLIP (text_encoder) -> vec, when the
 * model takes them; FLUX.2: its language model (text_encoder) -> txt
 * (flux_decl.h: flux2_text_slot). */
static void flux_text_slots(flux_model *f, ork_model_info *info) {
    f->n_text_slots = 0;
    if (f->cfg.version == 1) {
        ork_text_slot *t5 = &f->text_slots[f->n_text_slots++];
        /* quantized with model.qtype under model.quantize, as ai-toolkit does FLUX.1's T5 */
        *t5 = (ork_text_slot){.encoder = "t5", .feeds = ORK_TEXT_FEEDS_TXT,
                              .flags = ORK_TEXT_SLOT_QUANTIZE | ORK_TEXT_SLOT_MODEL_QTYPE,
                              .subfolder = "text_encoder_2", .tokenizer_subfolder = "tokenizer_2",
                              .max_length = info->context_len, .path_key = "t5_path",
                              .tokenizer_key = "t5_tokenizer_path", .path = f->t5_path[0] ? f->t5_path : NULL,
                              .tokenizer_path = f->t5_tok_path[0] ? f->t5_tok_path : NULL};
        if (f->cfg.vec_dim > 0) {
            ork_text_slot *cl = &f->text_slots[f->n_text_slots++];
            *cl = (ork_text_slot){.encoder = "clip", .feeds = ORK_TEXT_FEEDS_VEC, .subfolder = "text_encoder",
                                  .tokenizer_subfolder = "tokenizer", .max_length = 77, .path_key = "clip_path",
                                  .tokenizer_key = "clip_tokenizer_path",
                                  .path = f->clip_path[0] ? f->clip_path : NULL,
                                  .tokenizer_path = f->clip_tok_path[0] ? f->clip_tok_path : NULL};
        }
    } else if (flux2_text_slot(f->cfg.variant, f->cfg.context_dim, info->context_len, f->te_path[0] ? f->te_path : NULL,
                               f->te_tok_path[0] ? f->te_tok_path : NULL, &f->text_slots[0])) {
        f->n_text_slots = 1;
    }
    info->n_text_slots = f->n_text_slots;
    info->text_slots = f->n_text_slots ? f->text_slots : NULL;
    info->source_dir = f->src_dir[0] ? f->src_dir : NULL;
}

/* What the core used to guess from FLUX's names (flux_decl.h): block kinds,
 * the tokens and attention of each weight, the LoRA targets and key prefix,
 * the variant's schedule and sampler defaults. */
static ork_status flux_declarations(flux_model *f, ork_model_info *info) {
    flux_tag_weights(f->weights, f->n_weights);
    free(f->block_decls);
    f->block_decls = calloc((size_t)f->n_blocks + 1, sizeof *f->block_decls);
    if (!f->block_decls) return ORK_E_NOMEM;
    for (int b = 0; b < f->n_blocks; b++) f->block_decls[b] = flux_block_decl(f->block_names[b]);
    f->sched = flux_schedule(f->cfg.variant, f->cfg.in_channels);
    info->blocks = f->block_decls;
    info->lora_targets = flux_lora_targets();
    info->lora_prefix = f->cfg.version == 1 ? "lora_unet_" : "diffusion_model.";
    info->schedule = &f->sched;
    return ORK_OK;
}

/* Which FLUX autoencoder vae_path holds (a file; a folder with ae.safetensors
 * or [vae/]diffusion_pytorch_model.safetensors) and its latent channels, from two
 * shapes (decoder.conv_in's input is z; FLUX.2 has encoder.quant_conv), for
 * a custom size's token channels and the slot's codec id. 0 when it cannot
 * tell: the codec's open then says what is wrong with the file. */
static int vae_peek(flux_model *f, int *z) {
    char path[1100];
    ork_file_kind kind;
    if (path_kind(f, f->vae_path, &kind) != ORK_OK) return 0;
    snprintf(path, sizeof path, "%.1000s", f->vae_path);
    if (kind == ORK_KIND_DIR) { /* as the codec looks (flux_vae.c): BFL's, a diffusers vae/ folder, a pipeline's */
        static const char *const in_dir[] = {"ae.safetensors", "diffusion_pytorch_model.safetensors",
                                             "vae/diffusion_pytorch_model.safetensors"};
        size_t i = 0;
        for (; i < sizeof in_dir / sizeof in_dir[0]; i++) {
            snprintf(path, sizeof path, "%.1000s/%s", f->vae_path, in_dir[i]);
            if (path_kind(f, path, &kind) == ORK_OK && kind == ORK_KIND_FILE) break;
        }
        if (i == sizeof in_dir / sizeof in_dir[0]) return 0;
    }
    ork_st_set *s;
    if (f->st->open(path, &s) != ORK_OK) return 0;
    ork_st_info t;
    int version = 0;
    if (f->st->find(s, "decoder.conv_in.weight", &t) == ORK_OK && t.ndim == 4) {
        *z = (int)t.shape[1];
        version = f->st->find(s, "encoder.quant_conv.weight", &t) == ORK_OK ? 2 : 1;
    }
    f->st->close(s);
    return version;
}

/* The codecs FLUX's tokens come from, in the order codec: auto tries them
 * (the first with its path set, else pixel): the FLUX.1 or FLUX.2
 * autoencoder (vae_path), TAEF1 (taef1_path), pixels (pixel_patch² per
 * token). A custom size without in_channels takes the channels of the one
 * model_kwargs picks. */
static void flux_codec_slots(flux_model *f) {
    int z = 0, vae_version = f->vae_path[0] ? vae_peek(f, &z) : 0, p = (int)f->p.pixel_patch;
    if (!vae_version) vae_version = f->cfg.version, z = f->cfg.version == 2 ? 32 : 16;
    const char *codec = f->p.codec;
    if (!strcmp(codec, "auto")) codec = f->vae_path[0] ? "vae" : f->taef1_path[0] ? "taef1" : "pixel";
    if (f->cfg.in_channels == 0)
        f->cfg.in_channels = !strcmp(codec, "vae") ? 4 * z : !strcmp(codec, "taef1") ? 64 : 3 * p * p;
    ork_codec_slot *s = f->codec_slots;
    s[0] = (ork_codec_slot){vae_version == 2 ? "flux2-vae" : "flux1-vae", "vae", "vae_path",
                            f->vae_path[0] ? f->vae_path : NULL, 2, 0, NULL};
    s[1] = (ork_codec_slot){"taef1", "taef1", "taef1_path", f->taef1_path[0] ? f->taef1_path : NULL, 2, 0, NULL};
    s[2] = (ork_codec_slot){"pixel", "pixel", NULL, NULL, p, 0, "pixel_patch"};
    f->n_codec_slots = 3;
}

static ork_status flux_open(void *self, const char *name_or_path, ork_model_info *info) {
    flux_model *f = self;
    const char *preset = NULL;
    if (strncmp(name_or_path, "preset:", 7) == 0) preset = name_or_path + 7;
    if (preset) {
        if (!strcmp(preset, "custom")) {
            /* a small FLUX-architecture model: everything from model_kwargs */
            memset(&f->cfg, 0, sizeof f->cfg);
            f->cfg.variant = "custom";
            f->cfg.version = (int)f->p.flux_version;
            f->cfg.hidden = 64;
            f->cfg.heads = 2;
            f->cfg.depth = 1;
            f->cfg.depth_single = 1;
            f->cfg.context_dim = 32;
            f->cfg.vec_dim = f->cfg.version == 1 ? 16 : 0;
            f->cfg.guidance = f->p.guidance_embed;
            f->cfg.in_channels = 0;
            f->cfg.mlp_hidden = (f->cfg.version == 2 ? 3 : 4) * 64;
        } else if (!flux_preset(preset, &f->cfg)) {
            FLUX_LOG(f, ORK_LEVEL_ERROR, "unknown FLUX preset '%s' (known: flux1-dev, flux1-schnell, flux2-dev, "
                     "flux2-klein-4b, flux2-klein-9b, custom)", preset);
            return ORK_E_CONFIG;
        }
        apply_overrides(f);
    } else {
        char path[2048];
        ORK_TRY(flux_resolve_source(f, name_or_path, path, sizeof path));
        ORK_TRY(flux_detect(f, path));
        /* a diffusers layout (<dir>/transformer): <dir> holds the text encoders */
        ork_file_kind kind;
        size_t pl = strlen(path);
        if (pl > 12 && !strcmp(path + pl - 12, "/transformer") && path_kind(f, path, &kind) == ORK_OK &&
            kind == ORK_KIND_DIR)
            snprintf(f->src_dir, sizeof f->src_dir, "%.*s", (int)(pl - 12), path);
    }
    /* codec: the core picks and runs it (flux_codec_slots) */
    flux_codec_slots(f);
    if (f->cfg.hidden <= 0 || f->cfg.heads <= 0 || f->cfg.hidden % f->cfg.heads || f->cfg.head_dim % 2 ||
        f->cfg.in_channels <= 0 || f->cfg.context_dim <= 0) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "invalid FLUX size: hidden %d, heads %d, in %d, context %d", f->cfg.hidden,
                 f->cfg.heads, f->cfg.in_channels, f->cfg.context_dim);
        return ORK_E_CONFIG;
    }
    ORK_TRY(flux_declare(f));
    ORK_TRY(flux_validate(f)); /* a checkpoint: every weight there, shaped right (plan sees it) */
    memset(info, 0, sizeof *info);
    info->abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    info->family = "flux";
    info->variant = f->cfg.variant;
    info->n_blocks = f->n_blocks;
    info->block_names = (const char *const *)f->block_names;
    info->n_weights = f->n_weights;
    info->weights = f->weights;
    info->token_channels = f->cfg.in_channels;
    /* the core fills it from the codec it picks (ABI 1.2: the pixel codec of flux12_codec.c) */
    info->pixels_per_token = 0;
    info->context_dim = f->cfg.context_dim;
    /* T5 tokens: 512 (FLUX.1-dev, FLUX.2), 256 for schnell (as diffusers' pipeline) */
    info->context_len = f->p.context_len > 0 ? (int)f->p.context_len
                        : !strcmp(f->cfg.variant, "flux1-schnell") ? 256
                        : strcmp(f->cfg.variant, "custom") ? 512 : 8;
    info->vec_dim = f->cfg.vec_dim;
    info->has_guidance = f->cfg.guidance;
    info->shift_base = 0.5;
    info->shift_max = 1.15;
    info->lora_format = f->cfg.version == 1 ? "kohya" : "peft-bfl";
#if ORK_ABI_MINOR >= 3
    flux_text_slots(f, info);
    ORK_TRY(flux_declarations(f, info));
    info->n_codecs = f->n_codec_slots;
    info->codecs = f->codec_slots;
    info->codec_select = f->p.codec;
    info->patch_order = ORK_PATCH_CHANNEL_MAJOR;
#else
    info->abi.struct_size = (uint32_t)offsetof(ork_model_info, n_text_slots); /* the ABI 1.2 layout */
    (void)flux_text_slots;
    (void)flux_declarations;
    int p = (int)f->p.pixel_patch;
    info->pixels_per_token = f->cfg.in_channels == 3 * p * p ? p : 0; /* the pixel codec or none */
#endif
    FLUX_LOG(f, ORK_LEVEL_INFO, "FLUX variant %s: FLUX.%d, hidden %d, %d heads, %d double + %d single blocks, %d weights",
             f->cfg.variant, f->cfg.version, f->cfg.hidden, f->cfg.heads, f->cfg.depth, f->cfg.depth_single,
             f->n_weights);
    return ORK_OK;
}

static ork_status v_load(void *self, const ork_weight_sink *sink) { return flux_load(self, sink); }
static ork_status v_begin(void *self, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    return flux_begin(self, g, in, c);
}
static ork_status v_block(void *self, ork_graph *g, int i, ork_carry *c) { return flux_block(self, g, i, c); }
#ifdef FLUX_ABI_MINOR_2
/* tests/plugin/flux12_codec.c: the pixel codec as a 1.2 model's own encode/decode */
ork_status flux12_encode(void *self, ork_graph *g, ork_tensor *img, ork_tensor **tokens);
ork_status flux12_decode(void *self, ork_graph *g, ork_tensor *tokens, int h, int w, ork_tensor **img);
#endif

static const ork_model_vtable flux_vtable = {
    .abi = ORK_ABI_INIT(ork_model_vtable),
    .create = flux_create,
    .destroy = flux_destroy,
    .open = flux_open,
    .load = v_load,
    .begin = v_begin,
    .block = v_block,
#ifdef FLUX_ABI_MINOR_2
    .encode = flux12_encode,
    .decode = flux12_decode,
#endif
};

#ifdef FLUX_ABI_MINOR_2
static const char *const flux12_aliases[] = {"flux12", NULL};
#else
/* ai-toolkit's model.arch names (its UI: flux, flux2, flux2_klein_4b, flux2_klein_9b; flex1 is FLUX.1) */
static const char *const flux_aliases[] = {"flux", "flux1", "flux2", "flex1", "flux2_klein", "flux2_klein_4b",
                                           "flux2_klein_9b", NULL};
#endif

static const ork_component flux_component = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_MODEL,
#ifdef FLUX_ABI_MINOR_2
    .id = "org.orakul.test.flux12",
    .aliases = flux12_aliases,
#else
    .id = "org.orakul.flux",
    .aliases = flux_aliases,
#endif
    .description = "FLUX.1 (dev, schnell) and FLUX.2 (dev, klein 4B/9B) denoisers (codecs: flux1-vae / flux2-vae, taef1, pixel)",
    .params = flux_keys,
    .params_size = sizeof(flux_params),
    .vtable = &flux_vtable,
};

static ork_status flux_init(const ork_host *host) {
    g_host = host;
    return ORK_OK;
}
static void flux_deinit(void) { g_host = NULL; }

static const ork_component *const flux_components[] = {&flux_component, NULL};

static const ork_plugin_entry flux_entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
#ifdef FLUX_ABI_MINOR_2
    .name = "flux12",
#else
    .name = "flux",
#endif
    .version = "1.0.0",
    .description = "FLUX model family",
    .init = flux_init,
    .deinit = flux_deinit,
    .components = flux_components,
};

ORK_PLUGIN_ENTRY(flux_entry)
