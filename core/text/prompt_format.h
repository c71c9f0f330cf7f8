/* text/prompt_format.h — prompt formats: how a pipeline wraps a caption in its
 * text encoder's chat template before tokenizing, and how it then truncates and
 * pads, so that the ids and mask equal what the reference pipeline feeds the
 * encoder. A model plugin or the conditioner names a format; the tokenizer
 * service exposes the same thing as ork_tokenizer_api.encode_prompt.
 *
 * Formats (each checked against diffusers' pipeline code by
 * tests/reference/tokenizer_flux2_ref.py):
 *   "mistral3-flux2"  FLUX.2-dev (diffusers Flux2Pipeline._get_mistral_3_small_prompt_embeds,
 *                     BFL flux2 text_encoder.py): "[IMG]" removed from the caption, then
 *                     "<s>[SYSTEM_PROMPT]" SYSTEM_MESSAGE "[/SYSTEM_PROMPT][INST]" caption "[/INST]"
 *                     (Mistral-Small-3.1's chat template, add_generation_prompt=False),
 *                     tokenized without the post-processor's tokens, truncated on the
 *                     right to max_length (512), padded on the LEFT with the pad id (<pad>).
 *   "qwen3-klein"     FLUX.2 klein (diffusers Flux2KleinPipeline._get_qwen3_prompt_embeds):
 *                     "<|im_start|>user\n" caption "<|im_end|>\n<|im_start|>assistant\n"
 *                     "<think>\n\n</think>\n\n" (Qwen3's template, add_generation_prompt=True,
 *                     enable_thinking=False), tokenized with the tokenizer's defaults
 *                     (Qwen's add no tokens), truncated on the right to max_length (512),
 *                     padded on the RIGHT with the pad id (<|endoftext|>).
 *   "plain"           the tokenizer's own encode with TRUNCATE | PAD (FLUX.1's T5/CLIP).
 *
 * Positions: a pipeline that pads on the left (mistral3-flux2) gives the
 * encoder position ids 0..L-1 over the whole row, pads included (transformers
 * builds them from the sequence length, not from the mask); the mask only
 * keeps the pads out of attention.
 *
 * Owns nothing: formats are static tables; everything here is reentrant. */
#ifndef ORK_TEXT_PROMPT_FORMAT_H
#define ORK_TEXT_PROMPT_FORMAT_H

#include <orakul/tokenizer.h>

#include <stddef.h>
#include <stdint.h>

typedef struct ork_prompt_format {
    const char *name;          /* "mistral3-flux2", "qwen3-klein", "plain" */
    int32_t default_length;    /* what the pipeline pads to: 512 (plain: 0, the caller's) */
    int pad_left;              /* 1: pads before the tokens (mask 0 there), 0: after */
    uint32_t tok_flags;        /* the encode flags the pipeline's tokenizer call amounts to */
} ork_prompt_format;

/* The format named name, or NULL (nothing logged) when there is none. */
const ork_prompt_format *ork_prompt_format_find(const char *name);

/* The text the format hands the tokenizer for caption text[0..len), as a
 * malloc'd NUL-terminated string (*out, *out_n bytes; free() it). The caption's
 * bytes go in as they are (invalid UTF-8 is the tokenizer's business). */
ork_status ork_prompt_format_render(const char *format, const char *text, size_t len, char **out, size_t *out_n);

/* The caption as the format's pipeline gives it to its encoder: rendered,
 * tokenized, truncated and padded to max_length (<= 0: the format's
 * default_length), ids[0..*n_out) and mask[0..*n_out) (1 = a token, 0 = pad;
 * mask may be NULL). *n_out is max_length whenever the format pads (all but
 * "plain" without a length). When it does not fit in cap: ORK_E_INVALID with
 * *n_out the length needed, nothing logged. An unknown format: one line and
 * ORK_E_INVALID. */
ork_status ork_prompt_encode(const ork_tokenizer *t, const char *format, const char *text, size_t len,
                             int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out);

#endif
