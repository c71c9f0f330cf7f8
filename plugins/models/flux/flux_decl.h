/* flux_decl.h — what FLUX declares to the core (orakul/model.h, ABI 1.3) from
 * its own names: the kind of each block, the tokens each linear works on and
 * which weights belong to attention, the default LoRA targets and the
 * schedule of each variant. These are the rules the core used to guess from
 * weight names (issue #30); the plugin owns them now. Header-only so the
 * planner tests' FLUX.1-dev shapes (tests/stream/flux_shapes.h) declare the
 * same. Owns nothing. */
#ifndef ORAKUL_FLUX_DECL_H
#define ORAKUL_FLUX_DECL_H

#include <orakul/model.h>
#include <orakul/tokenizer.h> /* ORK_TEMPLATE_*: the text slots' prompt templates */

#include <string.h>

/* ORK_WEIGHT_TOKENS and ORK_WEIGHT_ATTN bits of a FLUX weight name (BFL
 * names; the diffusers spellings of the same layers too): modulation and the
 * timestep / guidance / pooled-vector embedders once per sample, the txt
 * stream on T tokens, the img stream, the patch embedder and the final layer
 * on N, the single blocks on N + T; q/k/v projections and norms are attention. */
static inline uint32_t flux_weight_tags(const char *name) {
    uint32_t t;
    if (strstr(name, "mod") || strstr(name, "time_in") || strstr(name, "vector_in") || strstr(name, "guidance_in") ||
        strstr(name, "time_text_embed"))
        t = ORK_WEIGHT_TOKENS(ORK_TOKENS_ONE);
    else if (strstr(name, "txt"))
        t = ORK_WEIGHT_TOKENS(ORK_TOKENS_TXT);
    else if (strstr(name, "img") || strstr(name, "final_layer") || strstr(name, "x_embedder") || strstr(name, "proj_out"))
        t = ORK_WEIGHT_TOKENS(ORK_TOKENS_IMG);
    else
        t = ORK_WEIGHT_TOKENS(ORK_TOKENS_JOINT);
    if (strstr(name, "_attn.") || strstr(name, "qkv") || strstr(name, "query_norm") || strstr(name, "key_norm") ||
        strstr(name, "to_q") || strstr(name, "norm_q"))
        t |= ORK_WEIGHT_ATTN;
    return t;
}

/* Tag every non-codec weight of w[0..n) (flags keep their other bits). */
static inline void flux_tag_weights(ork_weight_decl *w, int n) {
    for (int i = 0; i < n; i++)
        if (w[i].block >= 0) w[i].flags = (w[i].flags & ~(ORK_WEIGHT_TOKENS_MASK | ORK_WEIGHT_ATTN)) | flux_weight_tags(w[i].name);
}

/* A block by its name: "double_blocks.i" / "single_blocks.i" transformer
 * blocks with joint attention over image + text, the embedders ("embed"),
 * the final layer. attn_dim 0: the hidden width. */
static inline ork_block_decl flux_block_decl(const char *block_name) {
    ork_block_decl d = {ORK_BLOCK_KIND_OTHER, ORK_TOKENS_JOINT, 0};
    if (strstr(block_name, "blocks.")) d.kind = ORK_BLOCK_KIND_TRANSFORMER;
    else if (strstr(block_name, "final_layer")) d.kind = ORK_BLOCK_KIND_OUTPUT;
    else d.kind = ORK_BLOCK_KIND_INPUT;
    return d;
}

/* LoRA on the linears of the double and single blocks (ai-toolkit's default
 * for FLUX: not the embedders, not the final layer). */
static inline const char *const *flux_lora_targets(void) {
    static const char *const t[] = {"double_blocks.", "single_blocks.", NULL};
    return t;
}

/* The schedule of a variant: flow-matching velocity; the sampler's shift is
 * none for flux1-schnell (timestep-distilled: no CFG), FLUX.2's empirical fit
 * for flux2-* and 128-channel tokens, FLUX.1's resolution rule otherwise
 * (0.5 .. 1.15 over 256 .. 4096 tokens, the info's shift_base / shift_max);
 * 4 sampling steps for schnell and klein; training's fixed shift 3. */
static inline ork_model_schedule flux_schedule(const char *variant, int token_channels) {
    ork_model_schedule s;
    memset(&s, 0, sizeof s);
    s.abi = (ork_abi)ORK_ABI_INIT(ork_model_schedule);
    s.prediction = ORK_PREDICT_FLOW;
    s.noise = ORK_NOISE_FLOW;
    const char *v = variant;
    int schnell = v && !strcmp(v, "flux1-schnell"), klein = v && !strncmp(v, "flux2-klein", 11);
    if (schnell) {
        s.time_shift = ORK_TIME_SHIFT_NONE;
        s.sample_flags = ORK_SAMPLE_NO_CFG;
    } else if ((v && !strncmp(v, "flux2", 5)) || token_channels == 128) {
        s.time_shift = ORK_TIME_SHIFT_RESOLUTION_STEPS;
    } else {
        s.time_shift = ORK_TIME_SHIFT_RESOLUTION;
    }
    s.shift = 3.0;
    s.shift_base_seq = 256;
    s.shift_max_seq = 4096;
    s.sample_steps = schnell || klein ? 4 : 0;
    return s;
}

/* BFL flux2 src/flux2/system_messages.py SYSTEM_MESSAGE (diffusers'
 * pipelines/flux2/system_messages.py copies it): the newline after "object" is
 * part of it. FLUX.2-dev's prompt template gives it as the system turn. */
#define FLUX2_SYSTEM_MESSAGE                                                                                     \
    "You are an AI that reasons about image descriptions. You give structured responses focusing on object "    \
    "relationships, object\nattribution and actions without speculation."

/* FLUX.2's text slot: its language model's stacked hidden states -> txt, as
 * diffusers' pipelines take them (the llm plugin: "mistral3", Mistral-Small-3.x's
 * layers 10, 20, 30 = 3 x 5120 for flux2-dev; "qwen3", Qwen3's 9, 18, 27 =
 * 3 x 2560 (4B) or 3 x 4096 (8B) for klein), weights in text_encoder/, the
 * tokenizer in tokenizer/ of a diffusers folder (or the explicit paths, NULL
 * when not given), max_length tokens (the pipelines' 512), quantized with
 * model.quantize_te. The prompt template is the pipeline's (the core renders
 * it; orakul/tokenizer.h): flux2-dev, Flux2Pipeline._get_mistral_3_small_prompt_embeds:
 * "[IMG]" removed, Mistral-Small-3.1's chat template with FLUX2_SYSTEM_MESSAGE,
 * tokenized without the post-processor's tokens, padded on the left; klein,
 * Flux2KleinPipeline._get_qwen3_prompt_embeds: Qwen3's chat template with
 * add_generation_prompt=True, enable_thinking=False, padded on the right.
 * A custom size with one of those context widths gets the same encoder; any
 * other: 0 (no slot). */
static inline int flux2_text_slot(const char *variant, int context_dim, int max_length, const char *path,
                                  const char *tokenizer_path, ork_text_slot *out) {
    const char *enc = NULL;
    if (variant && !strncmp(variant, "flux2-klein", 11)) enc = "qwen3";
    else if (variant && !strcmp(variant, "flux2-dev")) enc = "mistral3";
    else if (context_dim == 15360) enc = "mistral3";
    else if (context_dim == 7680 || context_dim == 12288) enc = "qwen3";
    if (!enc) return 0;
    int mistral = !strcmp(enc, "mistral3");
    *out = (ork_text_slot){.encoder = enc, .feeds = ORK_TEXT_FEEDS_TXT, .flags = ORK_TEXT_SLOT_QUANTIZE,
                           .subfolder = "text_encoder", .tokenizer_subfolder = "tokenizer",
                           .max_length = max_length > 0 ? max_length : 512, .path_key = "text_encoder_path",
                           .tokenizer_key = "text_encoder_tokenizer_path", .path = path,
                           .tokenizer_path = tokenizer_path,
                           .prompt_template = mistral ? ORK_TEMPLATE_MISTRAL_CHAT : ORK_TEMPLATE_QWEN_CHAT,
                           .prompt_flags = mistral ? ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_NO_SPECIAL |
                                                         ORK_TEMPLATE_STRIP_IMG
                                                   : ORK_TEMPLATE_GENERATION,
                           .system_message = mistral ? FLUX2_SYSTEM_MESSAGE : NULL};
    return 1;
}

#endif
