/* text/tokenizer.h — the core's tokenizer (the service "orakul.tokenizer/1" of
 * <orakul/tokenizer.h>): load a tokenizer.json, Mistral's tekken.json, CLIP's vocab.json + merges.txt,
 * open_clip's bpe_simple_vocab_16e6.txt.gz or T5's spiece.model, and encode
 * captions into ids identical to Hugging Face `tokenizers`. See <orakul/tokenizer.h> for what is
 * supported and what happens to invalid UTF-8.
 *
 * Owns: each ork_tokenizer (its normalizer, pre-tokenizer, model, added tokens
 * and post-processor); immutable after load, so encode is reentrant. */
#ifndef ORK_TEXT_TOKENIZER_H
#define ORK_TEXT_TOKENIZER_H

#include <orakul/tokenizer.h>

#include <jansson.h>

/* Files larger than this (uncompressed) are refused: real ones are < 40 MB. */
#define ORK_TOK_MAX_FILE_BYTES ((size_t)512 << 20)

ork_status ork_tokenizer_load(const char *path, ork_tokenizer **out);
/* 1 when the folder dir holds a file ork_tokenizer_load reads (tokenizer.json, tekken.json,
 * vocab.json + merges.txt, CLIP's bpe_simple_vocab_16e6.txt.gz, spiece.model), else 0. */
int ork_tokenizer_dir_has(const char *dir);
/* From a parsed tokenizer.json (borrowed). folder (may be NULL) is where
 * tokenizer_config.json / special_tokens_map.json are looked for (pad token);
 * what names the source in error lines. */
ork_status ork_tokenizer_from_json(json_t *root, const char *folder, const char *what, ork_tokenizer **out);
void ork_tokenizer_free(ork_tokenizer *t);
ork_status ork_tokenizer_encode(const ork_tokenizer *t, const char *text, size_t len, int32_t max_length,
                                uint32_t flags, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out);
int32_t ork_tokenizer_vocab_size(const ork_tokenizer *t);
int32_t ork_tokenizer_token_to_id(const ork_tokenizer *t, const char *token);
const char *ork_tokenizer_id_to_token(const ork_tokenizer *t, int32_t id);
int32_t ork_tokenizer_pad_id(const ork_tokenizer *t);

/* The service table registered under ORK_SERVICE_TOKENIZER. */
const ork_tokenizer_api *ork_tokenizer_api_table(void);

#endif
