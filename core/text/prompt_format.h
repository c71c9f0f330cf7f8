/* text/prompt_format.h — prompt templates: how a pipeline wraps a caption in
 * its text encoder's chat template before tokenizing, and how it then
 * truncates and pads, so that the ids and mask equal what the reference
 * pipeline feeds the encoder. The template is data a model declares in its
 * text slot (orakul/model.h: prompt_template, prompt_flags, system_message,
 * max_length; the kinds and flags in orakul/tokenizer.h); the core knows the
 * generic kinds only, no family. The tokenizer service exposes the same as
 * ork_tokenizer_api.encode_template (and by name as encode_prompt).
 *
 * Kinds (each checked against diffusers' pipeline code with the templates
 * the FLUX.2 and Z-Image pipelines use: tests/reference/tokenizer_flux2_ref.py,
 * tokenizer_zimage_ref.py):
 *   MISTRAL_CHAT  Mistral-Small-3.1's chat template, add_generation_prompt=False:
 *                 "<s>" ["[SYSTEM_PROMPT]" system "[/SYSTEM_PROMPT]"] "[INST]" caption
 *                 "[/INST]" (the template's own default system message, which holds
 *                 the date, is never used: a model gives its own or none).
 *   QWEN_CHAT     Qwen3's chat template: ["<|im_start|>system\n" system "<|im_end|>\n"]
 *                 "<|im_start|>user\n" caption "<|im_end|>\n", then with GENERATION
 *                 "<|im_start|>assistant\n" and, without THINKING (enable_thinking=False),
 *                 "<think>\n\n</think>\n\n".
 *   PLAIN         the tokenizer's own encode with TRUNCATE | PAD (T5, CLIP).
 * Flags: STRIP_IMG removes "[IMG]" from the caption first; NO_SPECIAL
 * tokenizes without the post-processor's tokens; PAD_LEFT pads before the
 * tokens. Chat kinds truncate on the right to max_length, then pad with the
 * tokenizer's pad id.
 *
 * Named formats (encode_prompt, tests, fuzzing): "plain", "mistral-chat"
 * (no system message, STRIP_IMG | NO_SPECIAL | PAD_LEFT, 512), "qwen-chat"
 * (GENERATION, 512), "qwen-thinking" (GENERATION | THINKING, 512).
 *
 * Positions: a pipeline that pads on the left gives the encoder position ids
 * 0..L-1 over the whole row, pads included (transformers builds them from the
 * sequence length, not from the mask); the mask only keeps the pads out of
 * attention.
 *
 * Owns nothing: the named formats are static tables; everything here is
 * reentrant. */
#ifndef ORK_TEXT_PROMPT_FORMAT_H
#define ORK_TEXT_PROMPT_FORMAT_H

#include <orakul/tokenizer.h>

#include <stddef.h>
#include <stdint.h>

typedef struct ork_prompt_format {
    const char *name;          /* "mistral-chat", "qwen-chat", "qwen-thinking", "plain" */
    int32_t default_length;    /* what the pipeline pads to: 512 (plain: 0, the caller's) */
    int pad_left;              /* 1: pads before the tokens (mask 0 there), 0: after */
    uint32_t tok_flags;        /* the encode flags the pipeline's tokenizer call amounts to */
    ork_prompt_template tpl;   /* the template the name stands for */
} ork_prompt_format;

/* The format named name, or NULL (nothing logged) when there is none. */
const ork_prompt_format *ork_prompt_format_find(const char *name);

/* Whether tpl is one the core renders: a known kind and flags, a chat kind
 * with a length (max_length or tpl->max_length > 0). One line and
 * ORK_E_INVALID otherwise (what names the declaring slot). */
ork_status ork_prompt_template_check(const ork_prompt_template *tpl, int32_t max_length, const char *what);

/* The text template tpl hands the tokenizer for caption text[0..len), as a
 * malloc'd NUL-terminated string (*out, *out_n bytes; free() it). The caption's
 * bytes are repaired as UTF-8 (U+FFFD, as Python decodes them) first. */
ork_status ork_prompt_template_render(const ork_prompt_template *tpl, const char *text, size_t len, char **out,
                                      size_t *out_n);

/* The caption as the template's pipeline gives it to its encoder: rendered,
 * tokenized, truncated and padded to max_length (<= 0: tpl->max_length),
 * ids[0..*n_out) and mask[0..*n_out) (1 = a token, 0 = pad; mask may be NULL).
 * *n_out is max_length whenever the template pads (all but PLAIN without a
 * length). When it does not fit in cap: ORK_E_INVALID with *n_out the length
 * needed, nothing logged. A bad template: one line and ORK_E_INVALID. */
ork_status ork_prompt_encode_template(const ork_tokenizer *t, const ork_prompt_template *tpl, const char *text,
                                      size_t len, int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap,
                                      int32_t *n_out);

/* The same by format name (ork_prompt_format_find); an unknown name: one
 * line and ORK_E_INVALID. */
ork_status ork_prompt_format_render(const char *format, const char *text, size_t len, char **out, size_t *out_n);
ork_status ork_prompt_encode(const ork_tokenizer *t, const char *format, const char *text, size_t len,
                             int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out);

#endif
