/* orakul/tokenizer.h — the tokenizer service "orakul.tokenizer/1": turns a
 * caption (UTF-8 text) into token ids exactly as Hugging Face `tokenizers`
 * does, from the tokenizer files a model ships. Text-encoder plugins (CLIP, T5,
 * and later Qwen3 / Mistral) get it from the host instead of carrying their own.
 *
 * What load() reads (a file, or a folder holding one of them, in this order):
 *   tokenizer.json (or tokenizer.json.gz): any tokenizer built from the
 *     supported parts — normalizers Sequence, NFC/NFD/NFKC/NFKD, Lowercase,
 *     Replace, Strip, Prepend, Precompiled (SentencePiece charsmap);
 *     pre-tokenizers Sequence, Split, ByteLevel, Metaspace, WhitespaceSplit,
 *     Whitespace, Digits; models BPE and Unigram; post-processors
 *     TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence;
 *     added tokens (special or not, normalized or not, lstrip/rstrip).
 *     Anything else is refused with one line naming the part.
 *   tekken.json: Mistral's tekken (mistral-common's format), as transformers'
 *     MistralConverter turns it into a tokenizer.json (special tokens first,
 *     byte-level BPE in tiktoken's merge order, the file's split pattern).
 *   vocab.json + merges.txt: CLIP's BPE (as transformers' CLIPTokenizer builds it).
 *   bpe_simple_vocab_16e6.txt.gz: CLIP's BPE as open_clip ships it.
 *   spiece.model: T5's SentencePiece Unigram model, as transformers'
 *     T5Tokenizer reads it (charsmap, "▁" prefix, "</s>", 100 sentinels or
 *     tokenizer_config.json's extra_ids). Other SentencePiece models (BPE,
 *     byte fallback): use their tokenizer.json.
 * The pad id is the file's padding.pad_id, else tokenizer_config.json's (or
 * special_tokens_map.json's) pad_token beside it, else "<pad>", else
 * "<|endoftext|>", else 0.
 *
 * Invalid UTF-8 in the text: each maximal ill-formed subsequence becomes one
 * U+FFFD, as Python's bytes.decode("utf-8", "replace") does before
 * `tokenizers` sees the string; then it is tokenized like any other character.
 *
 * Unicode: regexes run on the system's Oniguruma and normalization on utf8proc
 * (Debian 12: Unicode 14 and 15); `tokenizers` bundles a newer Oniguruma, so a
 * letter or digit assigned after Unicode 14 (CJK Extension H, scripts of 2022+)
 * can split differently in a \p{L}/\p{N} pattern; and NFC/NFKC here know
 * characters with decompositions that `tokenizers`' older tables do not (e.g.
 * U+1FBF2 -> "2" under NFKC). Emoji are not affected.
 *
 * Threads: a loaded tokenizer is immutable; encode may run on any thread, and
 * on several at once. */
#ifndef ORAKUL_TOKENIZER_H
#define ORAKUL_TOKENIZER_H

#include <orakul/abi.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_SERVICE_TOKENIZER "orakul.tokenizer/1"

typedef struct ork_tokenizer ork_tokenizer; /* opaque */

/* Chat templates (ABI 1.3): how a pipeline wraps a caption before its
 * tokenizer runs, then truncates (on the right) and pads. A model declares
 * one per text slot (orakul/model.h ork_text_slot.prompt_template and the
 * fields after it); the core implements the kinds, generically: the text a
 * kind renders is what the model's published chat template renders for one
 * user message (transformers' apply_chat_template). */
typedef enum ork_prompt_kind {
    ORK_TEMPLATE_PLAIN = 0,        /* the caption as it is, encode with TRUNCATE | PAD (T5, CLIP) */
    ORK_TEMPLATE_MISTRAL_CHAT = 1, /* Mistral-Small-3.x: "<s>" ["[SYSTEM_PROMPT]" system
                                    * "[/SYSTEM_PROMPT]"] "[INST]" caption "[/INST]" */
    ORK_TEMPLATE_QWEN_CHAT = 2,    /* Qwen3: ["<|im_start|>system\n" system "<|im_end|>\n"]
                                    * "<|im_start|>user\n" caption "<|im_end|>\n", then with
                                    * GENERATION "<|im_start|>assistant\n" and, unless THINKING,
                                    * "<think>\n\n</think>\n\n" (enable_thinking=False) */
} ork_prompt_kind;

/* ork_prompt_template.flags */
#define ORK_TEMPLATE_PAD_LEFT   (1u << 0) /* pads before the tokens (mask 0 there); else after */
#define ORK_TEMPLATE_GENERATION (1u << 1) /* add_generation_prompt=True */
#define ORK_TEMPLATE_THINKING   (1u << 2) /* enable_thinking=True (Qwen3: no empty think block) */
#define ORK_TEMPLATE_NO_SPECIAL (1u << 3) /* tokenize with add_special_tokens=False (the template
                                           * holds them: Mistral's "<s>") */
#define ORK_TEMPLATE_STRIP_IMG  (1u << 4) /* "[IMG]" removed from the caption first (FLUX.2's
                                           * pipeline, after the UTF-8 repair) */

typedef struct ork_prompt_template {
    int32_t kind;               /* ork_prompt_kind */
    uint32_t flags;             /* ORK_TEMPLATE_* */
    const char *system_message; /* the system turn's text, or NULL: no system turn */
    int32_t max_length;         /* what the pipeline truncates and pads to (512); 0: the caller's */
} ork_prompt_template;

/* encode() flags. FLUX's pipelines use ORK_TOK_TRUNCATE | ORK_TOK_PAD with
 * max_length 77 (CLIP) and 512 (T5; 256 for schnell). */
#define ORK_TOK_TRUNCATE   1u /* cut the text's tokens so that, with the special tokens, n <= max_length */
#define ORK_TOK_PAD        2u /* pad with the pad id up to max_length (mask 0 there) */
#define ORK_TOK_NO_SPECIAL 4u /* leave out the post-processor's tokens (<|startoftext|>, </s>, ...) */

typedef struct ork_tokenizer_api {
    ork_abi abi;
    /* A tokenizer file or a folder holding one (see above). Every structural
     * check runs here; a bad or unsupported file gives one logged line. */
    ork_status (*load)(const char *path, ork_tokenizer **out);
    void (*free)(ork_tokenizer *t);
    /* text[0..len) -> ids[0..*n_out) and mask[0..*n_out) (1 = a token, 0 = padding;
     * mask may be NULL). max_length <= 0: no limit (TRUNCATE and PAD then do
     * nothing). Without TRUNCATE the result may be longer than max_length. When
     * it does not fit in cap, ORK_E_INVALID is returned with *n_out set to the
     * length needed, and nothing is logged. */
    ork_status (*encode)(const ork_tokenizer *t, const char *text, size_t len, int32_t max_length,
                         uint32_t flags, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out);
    int32_t (*vocab_size)(const ork_tokenizer *t);      /* model vocabulary and added tokens */
    int32_t (*token_to_id)(const ork_tokenizer *t, const char *token); /* -1 when absent */
    const char *(*id_to_token)(const ork_tokenizer *t, int32_t id);   /* NULL when absent */
    int32_t (*pad_id)(const ork_tokenizer *t);
    /* Appended (check ORK_TOKENIZER_HAS_PROMPT(api) before calling): the caption
     * as a pipeline formats it for its text encoder, by format name
     * (ORK_PROMPT_*): its chat template and system message, then tokenized,
     * truncated on the right and padded to max_length (<= 0: the format's own,
     * 512 for the chat formats) on the pipeline's side, so ids and mask
     * equal what the reference pipeline feeds the encoder. *n_out is that
     * length ("plain" without one: the encoding's own); cap and the
     * ORK_E_INVALID answer as for encode. An unknown
     * format: one line and ORK_E_INVALID. Left-padded rows still take position
     * ids 0..max_length-1 over the whole row, as transformers gives them. */
    ork_status (*encode_prompt)(const ork_tokenizer *t, const char *format, const char *text, size_t len,
                                int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out);
    /* Appended (ORK_TOKENIZER_HAS_TEMPLATE(api)): the same with the template
     * given as data (a model's text slot declares it; orakul/model.h), so that
     * a family's system message and settings live in its plugin, not in the
     * core. max_length <= 0: tpl->max_length; both 0 with a chat template:
     * ORK_E_INVALID. */
    ork_status (*encode_template)(const ork_tokenizer *t, const struct ork_prompt_template *tpl, const char *text,
                                  size_t len, int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap,
                                  int32_t *n_out);
} ork_tokenizer_api;

/* Prompt formats for encode_prompt: generic chat templates, no system message
 * (a model that has one declares its template as data: encode_template). */
#define ORK_PROMPT_PLAIN         "plain"          /* encode with TRUNCATE | PAD (T5, CLIP) */
#define ORK_PROMPT_MISTRAL_CHAT  "mistral-chat"   /* "<s>[INST]" caption "[/INST]", no specials added,
                                                   * "[IMG]" removed, left padding, 512 */
#define ORK_PROMPT_QWEN_CHAT     "qwen-chat"      /* Qwen3, add_generation_prompt, enable_thinking=False,
                                                   * right padding, 512 (FLUX.2 klein's) */
#define ORK_PROMPT_QWEN_THINKING "qwen-thinking"  /* Qwen3, add_generation_prompt, enable_thinking=True,
                                                   * right padding, 512 (Z-Image's) */
/* Older names: FLUX.2 klein's format is the generic Qwen one; FLUX.2-dev's
 * system message is no longer the core's (its text slot gives it), so this
 * name now renders the generic Mistral chat without it. */
#define ORK_PROMPT_QWEN3_KLEIN    ORK_PROMPT_QWEN_CHAT
#define ORK_PROMPT_MISTRAL3_FLUX2 ORK_PROMPT_MISTRAL_CHAT

/* Whether a service table is new enough to hold encode_template. */
#define ORK_TOKENIZER_HAS_TEMPLATE(api) \
    ((api)->abi.struct_size >= offsetof(ork_tokenizer_api, encode_template) + sizeof(void (*)(void)) && \
     (api)->encode_template != NULL)

/* Whether a service table is new enough to hold encode_prompt. */
#define ORK_TOKENIZER_HAS_PROMPT(api) \
    ((api)->abi.struct_size >= offsetof(ork_tokenizer_api, encode_prompt) + sizeof(void (*)(void)) && \
     (api)->encode_prompt != NULL)

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_TOKENIZER_H */
