/* zimage_plugin.c — the Z-Image model-family plugin's entry: the components
 * "org.orakul.zimage-turbo" (aliases zimage:turbo, zimage-turbo, zimage_turbo:
 * the timestep-distilled Z-Image-Turbo, 8 steps, no CFG) and
 * "org.orakul.zimage" (aliases zimage, zimage-base, zimage:deturbo: the
 * undistilled model, the config's steps, CFG), one model_kwargs key table,
 * open (sizes, declarations: blocks, LoRA targets and keys, schedule) and the
 * vtable glue. Built against the SDK headers alone. Owns nothing global:
 * each create() makes an independent zi_model. */
#include "zimage.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ork_host *g_host; /* set by init, valid until deinit */

#define P(field) offsetof(zi_params, field)
static const ork_param zi_keys[] = {
    {"seed", ORK_PARAM_INT, 1, 0, "0", 0, 9.2e18, NULL, P(seed), "seed of the random weights of presets"},
    {"dim", ORK_PARAM_INT, 1, 0, "0", 0, 65536, NULL, P(dim), "preset:custom: hidden width (0: the preset's)"},
    {"num_heads", ORK_PARAM_INT, 1, 0, "0", 0, 1024, NULL, P(num_heads), "preset:custom: attention heads"},
    {"n_layers", ORK_PARAM_INT, 1, 0, "-1", -1, 1024, NULL, P(n_layers), "preset:custom: main layers (-1: the preset's)"},
    {"n_refiner_layers", ORK_PARAM_INT, 1, 0, "-1", -1, 64, NULL, P(n_refiner_layers), "preset:custom: noise and context refiner layers each"},
    {"cap_feat_dim", ORK_PARAM_INT, 1, 0, "0", 0, 1 << 20, NULL, P(cap_feat_dim), "preset:custom: caption feature width"},
    {"in_channels", ORK_PARAM_INT, 1, 0, "0", 0, 4096, NULL, P(in_channels), "preset:custom: latent channels (tokens carry 4x)"},
    {"context_len", ORK_PARAM_INT, 1, 0, "0", 0, 4096, NULL, P(context_len), "caption tokens when no text embeddings are given (0: 512, or 8 for presets tiny and custom)"},
    {"pixel_patch", ORK_PARAM_INT, 1, 0, "4", 1, 64, NULL, P(pixel_patch), "pixel codec: pixels per token side (used when 3 x pixel_patch² equals the token channels)"},
    {"distilled", ORK_PARAM_STRING, 1, 0, "auto", 1, 0, "auto|true|false", P(distilled), "timestep-distilled (Turbo: 8 steps, no CFG): auto takes the component's (model.arch zimage:turbo or zimage-turbo: yes; zimage, zimage:deturbo: no) or preset:zimage-turbo's"},
    {"codec", ORK_PARAM_STRING, 1, 0, "auto", 1, 0, "auto|vae|taef1|pixel", P(codec), "image codec: vae (FLUX.1's autoencoder, needs vae_path), taef1 (needs taef1_path), pixel (space-to-depth), auto (the first with a path set, else pixel when it fits)"},
    {"vae_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(vae_path), "FLUX.1's 16-channel autoencoder Z-Image uses, read by the flux1-vae codec: BFL's ae.safetensors (ComfyUI's vae/ae.safetensors), or diffusers' (the pipeline folder, its vae/ folder or vae/diffusion_pytorch_model.safetensors)"},
    {"taef1_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(taef1_path), "folder holding taef1_encoder.safetensors and taef1_decoder.safetensors"},
    {"text_encoder_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(text_encoder_path), "Qwen3-4B text encoder: a .safetensors file, an index json or a folder (default: text_encoder/ of a diffusers model.name_or_path)"},
    {"text_encoder_tokenizer_path", ORK_PARAM_STRING, 1, 0, "''", 1, 0, NULL, P(text_encoder_tokenizer_path), "Qwen3's tokenizer: tokenizer.json or a folder holding one (default: tokenizer/, else beside text_encoder_path)"},
    {0},
};
#undef P

static ork_status zi_create_common(const ork_host *host, const void *params, int turbo, void **self) {
    zi_model *z = calloc(1, sizeof *z);
    if (!z) return ORK_E_NOMEM;
    z->host = host ? host : g_host;
    z->ops = z->host->get_service(z->host, ORK_SERVICE_OPS);
    z->ta = z->host->get_service(z->host, ORK_SERVICE_TENSOR);
    z->st = z->host->get_service(z->host, ORK_SERVICE_SAFETENSORS);
    if (!z->ops || !z->ta || !z->st) {
        z->host->log(z->host, ORK_LEVEL_ERROR, "the core lacks %s, %s or %s", ORK_SERVICE_OPS, ORK_SERVICE_TENSOR,
                     ORK_SERVICE_SAFETENSORS);
        free(z);
        return ORK_E_ABI;
    }
    if (params) z->p = *(const zi_params *)params;
    else { z->p.n_layers = z->p.n_refiner_layers = -1; z->p.pixel_patch = 4; }
    /* strings are only valid during create: copy them */
    snprintf(z->distilled, sizeof z->distilled, "%s", z->p.distilled && z->p.distilled[0] ? z->p.distilled : "auto");
    snprintf(z->codec, sizeof z->codec, "%s", z->p.codec && z->p.codec[0] ? z->p.codec : "auto");
    snprintf(z->vae_path, sizeof z->vae_path, "%s", z->p.vae_path ? z->p.vae_path : "");
    snprintf(z->taef1_path, sizeof z->taef1_path, "%s", z->p.taef1_path ? z->p.taef1_path : "");
    snprintf(z->te_path, sizeof z->te_path, "%s", z->p.text_encoder_path ? z->p.text_encoder_path : "");
    snprintf(z->te_tok_path, sizeof z->te_tok_path, "%s",
             z->p.text_encoder_tokenizer_path ? z->p.text_encoder_tokenizer_path : "");
    z->p.distilled = z->p.codec = z->p.vae_path = z->p.taef1_path = NULL;
    z->p.text_encoder_path = z->p.text_encoder_tokenizer_path = NULL;
    z->default_turbo = turbo;
    *self = z;
    return ORK_OK;
}
static ork_status zi_create_turbo(const ork_host *h, const void *p, void **self) { return zi_create_common(h, p, 1, self); }
static ork_status zi_create_base(const ork_host *h, const void *p, void **self) { return zi_create_common(h, p, 0, self); }

static void zi_destroy(void *self) {
    zi_model *z = self;
    if (!z) return;
    if (z->src) z->st->close(z->src);
    for (int i = 0; i < z->n_weights; i++) free((char *)z->weights[i].name);
    for (int i = 0; i < z->n_blocks; i++) free(z->block_names[i]);
    free(z->weights);
    free(z->block_names);
    free(z->block_decls);
    free(z);
}

/* Presets: the real size (random weights: benchmarks, the planner) and a tiny
 * one for tests; custom takes model_kwargs on top of tiny. */
static int preset(zi_model *z, const char *name) {
    zi_cfg *c = &z->cfg;
    memset(c, 0, sizeof *c);
    c->turbo = z->default_turbo;
    if (!strcmp(name, "zimage-turbo") || !strcmp(name, "zimage")) {
        c->turbo = !strcmp(name, "zimage-turbo");
        c->variant = c->turbo ? "zimage-turbo" : "zimage";
        c->dim = 3840; c->heads = 30; c->n_layers = 30; c->n_refiner = 2; c->cap_dim = 2560; c->in_channels = 16;
    } else if (!strcmp(name, "tiny") || !strcmp(name, "custom")) {
        c->variant = name[0] == 't' ? "tiny" : "custom";
        c->dim = 32; c->heads = 2; c->n_layers = 2; c->n_refiner = 1; c->cap_dim = 32; c->in_channels = 12;
        if (name[0] == 'c') {
            const zi_params *p = &z->p;
            if (p->dim > 0) c->dim = (int)p->dim;
            if (p->num_heads > 0) c->heads = (int)p->num_heads;
            if (p->n_layers >= 0) c->n_layers = (int)p->n_layers;
            if (p->n_refiner_layers >= 0) c->n_refiner = (int)p->n_refiner_layers;
            if (p->cap_feat_dim > 0) c->cap_dim = (int)p->cap_feat_dim;
            if (p->in_channels > 0) c->in_channels = (int)p->in_channels;
        }
    } else {
        return 0;
    }
    zi_cfg_derive(c);
    return 1;
}

/* The schedule (orakul/model.h): flow matching (the plugin turns Z-Image's
 * t' = 1 - t and x0 - noise into the core's convention, zimage.h), the
 * pipelines' FlowMatchEulerDiscreteScheduler with a fixed shift 3 (its
 * scheduler_config: use_dynamic_shifting false, shift 3.0; sigmas
 * linspace(1, 1/n, n) then shifted); Turbo: 8 steps, no CFG. */
static void zi_schedule(zi_model *z) {
    ork_model_schedule *s = &z->sched;
    memset(s, 0, sizeof *s);
    s->abi = (ork_abi)ORK_ABI_INIT(ork_model_schedule);
    s->prediction = ORK_PREDICT_FLOW;
    s->noise = ORK_NOISE_FLOW;
    s->time_shift = ORK_TIME_SHIFT_FIXED;
    s->shift = 3.0;
    s->shift_base_seq = 256;
    s->shift_max_seq = 4096;
    if (z->cfg.turbo) {
        s->sample_flags = ORK_SAMPLE_NO_CFG;
        s->sample_steps = 8;
    }
}

/* LoRA on the attention (to_q, to_k, to_v, to_out.0) and feed-forward (w1,
 * w2, w3) linears of every transformer block (noise and context refiners and
 * the layers), as ai-toolkit and diffusers' PEFT target them. */
static const char *const zi_lora_targets[] = {"attention.to_", "feed_forward.", NULL};

/* Qwen3-4B's hidden_states[-2] (2560 wide) of the caption rendered with
 * Qwen3's chat template (one user turn, add_generation_prompt, enable_thinking
 * True), 512 tokens right-padded, only the unmasked ones taken
 * (pipeline_z_image.py _encode_prompt); weights in text_encoder/, the
 * tokenizer in tokenizer/ of a diffusers folder, or the explicit paths. Only
 * for the real caption width: the tiny presets train on zero embeddings. */
static void zi_text_slot(zi_model *z, ork_model_info *info) {
    info->n_text_slots = 0;
    info->text_slots = NULL;
    if (z->cfg.cap_dim != 2560) return;
    ork_text_slot *s = &z->text_slot;
    memset(s, 0, sizeof *s);
    s->encoder = "qwen3";
    s->feeds = ORK_TEXT_FEEDS_TXT;
    s->flags = ORK_TEXT_SLOT_QUANTIZE | ORK_TEXT_SLOT_UNMASKED;
    s->subfolder = "text_encoder";
    s->tokenizer_subfolder = "tokenizer";
    s->max_length = info->context_len;
    s->path_key = "text_encoder_path";
    s->tokenizer_key = "text_encoder_tokenizer_path";
    s->path = z->te_path[0] ? z->te_path : NULL;
    s->tokenizer_path = z->te_tok_path[0] ? z->te_tok_path : NULL;
    s->prompt_template = ORK_TEMPLATE_QWEN_CHAT;
    s->prompt_flags = ORK_TEMPLATE_GENERATION | ORK_TEMPLATE_THINKING;
    s->system_message = NULL;
    s->n_hidden_states = 1;
    s->hidden_states[0] = -2;
    info->n_text_slots = 1;
    info->text_slots = s;
}

/* The codecs Z-Image's tokens come from (orakul/codec.h): FLUX.1's 16-channel
 * autoencoder (the pipelines' vae/), TAEF1 (its tiny stand-in), both 2x2
 * patches of 16 channels = 64; the pixel codec when 3·pixel_patch² is the
 * token width (the tiny preset). Patches are channel-minor, as
 * ZImageTransformer2DModel._patchify_image orders them. */
static void zi_codec_slots(zi_model *z, ork_model_info *info) {
    ork_codec_slot *s = z->codec_slots;
    memset(z->codec_slots, 0, sizeof z->codec_slots);
    s[0] = (ork_codec_slot){"flux1-vae", "vae", "vae_path", z->vae_path[0] ? z->vae_path : NULL, 2, 0, NULL};
    s[1] = (ork_codec_slot){"taef1", "taef1", "taef1_path", z->taef1_path[0] ? z->taef1_path : NULL, 2, 0, NULL};
    s[2] = (ork_codec_slot){"pixel", "pixel", NULL, NULL, (int32_t)z->p.pixel_patch, 0, "pixel_patch"};
    info->n_codecs = 3;
    info->codecs = z->codec_slots;
    info->codec_select = z->codec;
    info->patch_order = ORK_PATCH_CHANNEL_MINOR;
}

/* Turbo or not: model_kwargs.distilled, else what open found: the preset's
 * (preset:zimage-turbo / zimage), else the component's (model.arch
 * zimage:turbo / zimage-turbo: Turbo; zimage, zimage:deturbo: not). The
 * weights' path is never read for it: the arch's variant says it. */
static int want_turbo(const zi_model *z) {
    if (!strcmp(z->distilled, "true")) return 1;
    if (!strcmp(z->distilled, "false")) return 0;
    return z->cfg.turbo;
}

static ork_status zi_open(void *self, const char *name_or_path, ork_model_info *info) {
    zi_model *z = self;
    if (!strncmp(name_or_path, "preset:", 7)) {
        if (!preset(z, name_or_path + 7)) {
            ZI_LOG(z, ORK_LEVEL_ERROR, "unknown Z-Image preset '%s' (known: zimage-turbo, zimage, tiny, custom)",
                   name_or_path + 7);
            return ORK_E_CONFIG;
        }
    } else {
        ORK_TRY(zi_open_source(z, name_or_path));
        ORK_TRY(zi_detect(z));
    }
    zi_cfg *c = &z->cfg;
    c->turbo = want_turbo(z);
    if (!strcmp(c->variant, "zimage") || !strcmp(c->variant, "zimage-turbo"))
        c->variant = c->turbo ? "zimage-turbo" : "zimage";
    int axes = c->axes[0] + c->axes[1] + c->axes[2];
    if (c->dim <= 0 || c->heads <= 0 || c->dim % c->heads || c->head_dim % 2 || axes != c->head_dim ||
        c->in_channels <= 0 || c->cap_dim <= 0 || c->n_refiner < 0 || c->n_layers < 1) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "invalid Z-Image size: dim %d, %d heads (head_dim %d, rope axes %d+%d+%d), "
               "in_channels %d, cap_feat_dim %d, %d layers, %d refiner layers", c->dim, c->heads, c->head_dim,
               c->axes[0], c->axes[1], c->axes[2], c->in_channels, c->cap_dim, c->n_layers, c->n_refiner);
        return ORK_E_CONFIG;
    }
    ORK_TRY(zi_declare(z));
    ORK_TRY(zi_validate(z)); /* a checkpoint: every weight there, shaped right (plan sees it) */
    zi_schedule(z);
    memset(info, 0, sizeof *info);
    info->abi = (ork_abi)ORK_ABI_INIT(ork_model_info);
    info->family = "zimage";
    info->variant = c->variant;
    info->n_blocks = z->n_blocks;
    info->block_names = (const char *const *)z->block_names;
    info->n_weights = z->n_weights;
    info->weights = z->weights;
    info->token_channels = 4 * c->in_channels;
    info->pixels_per_token = 0; /* the core's: the codec slot it picks (zi_codec_slots) */
    info->context_dim = c->cap_dim;
    info->context_len = z->p.context_len > 0 ? (int)z->p.context_len
                        : (!strcmp(c->variant, "tiny") || !strcmp(c->variant, "custom")) ? 8 : 512;
    info->vec_dim = 0;
    info->has_guidance = 0;
    info->shift_base = 0.5;
    info->shift_max = 1.15;
    /* diffusion_model.<diffusers module>.lora_A / lora_B, alpha/rank folded:
     * diffusers' ZImageLoraLoaderMixin strips the prefix; ComfyUI's Lumina2
     * key map (z_image_to_diffusers) takes diffusion_model.<diffusers name>
     * and slices to_q / to_k / to_v into its fused qkv */
    info->lora_format = "peft";
    info->lora_prefix = "diffusion_model.";
    info->lora_targets = zi_lora_targets;
    info->blocks = z->block_decls;
    info->schedule = &z->sched;
    zi_text_slot(z, info);
    info->source_dir = z->src_dir[0] ? z->src_dir : NULL;
    zi_codec_slots(z, info);
    ZI_LOG(z, ORK_LEVEL_INFO, "Z-Image %s: dim %d, %d heads, %d layers + 2x%d refiner layers, caption width %d, "
           "%d weights, codec %s", c->variant, c->dim, c->heads, c->n_layers, c->n_refiner, c->cap_dim, z->n_weights,
           z->codec);
    return ORK_OK;
}

static ork_status v_load(void *self, const ork_weight_sink *sink) { return zi_load(self, sink); }
static ork_status v_begin(void *self, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    return zi_begin(self, g, in, c);
}
static ork_status v_block(void *self, ork_graph *g, int i, ork_carry *c) { return zi_block(self, g, i, c); }

#define ZI_VTABLE(create_fn) { .abi = ORK_ABI_INIT(ork_model_vtable), .create = create_fn, .destroy = zi_destroy, \
    .open = zi_open, .load = v_load, .begin = v_begin, .block = v_block } /* encode/decode: the codec slots */
static const ork_model_vtable zi_vtable_turbo = ZI_VTABLE(zi_create_turbo);
static const ork_model_vtable zi_vtable_base = ZI_VTABLE(zi_create_base);

/* ai-toolkit's model.arch names (ui/src/app/jobs/new/options.tsx: zimage:turbo,
 * zimage, zimage:deturbo) */
static const char *const turbo_aliases[] = {"zimage:turbo", "zimage-turbo", "zimage_turbo", NULL};
static const char *const base_aliases[] = {"zimage", "zimage-base", "zimage:deturbo", NULL};

static const ork_component zi_turbo = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_MODEL,
    .id = "org.orakul.zimage-turbo",
    .aliases = turbo_aliases,
    .description = "Z-Image-Turbo (Tongyi-MAI, 6B single-stream DiT, 8-step distilled): diffusers folder or single file",
    .params = zi_keys,
    .params_size = sizeof(zi_params),
    .vtable = &zi_vtable_turbo,
};
static const ork_component zi_base = {
    .abi = ORK_ABI_INIT(ork_component),
    .kind = ORK_KIND_MODEL,
    .id = "org.orakul.zimage",
    .aliases = base_aliases,
    .description = "Z-Image (Tongyi-MAI, 6B single-stream DiT, undistilled: CFG): diffusers folder or single file",
    .params = zi_keys,
    .params_size = sizeof(zi_params),
    .vtable = &zi_vtable_base,
};

static ork_status zi_init(const ork_host *host) {
    g_host = host;
    return ORK_OK;
}
static void zi_deinit(void) { g_host = NULL; }

static const ork_component *const zi_components[] = {&zi_turbo, &zi_base, NULL};

static const ork_plugin_entry zi_entry = {
    .abi = ORK_ABI_INIT(ork_plugin_entry),
    .name = "zimage",
    .version = "1.0.0",
    .description = "Z-Image model family",
    .init = zi_init,
    .deinit = zi_deinit,
    .components = zi_components,
};

ORK_PLUGIN_ENTRY(zi_entry)
