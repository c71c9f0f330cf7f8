/* text/tok_internal.h — the tokenizer's private pieces shared by the files of core/text/:
 * a growable byte string, a hash map, the UTF-8 helpers, the regex wrapper
 * (Oniguruma, the engine Hugging Face `tokenizers` itself uses), and the
 * pipeline stages (normalizers, pre-tokenizers, models, post-processor) that
 * tokenizer.c assembles from a tokenizer.json.
 *
 * Owns nothing global except Oniguruma's one-time initialisation (tok_regex.c).
 * Every stage is immutable after load, so encode is reentrant. */
#ifndef ORK_TEXT_TOK_INTERNAL_H
#define ORK_TEXT_TOK_INTERNAL_H

#include <orakul/abi.h>
#include <orakul/platform.h> /* ORK_PRINTF */

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------------ */
/* Log one error line "tokenizer <source>: <message>" and return s. The source is
 * the path being loaded on this thread (tok_set_source), left out when unset or
 * when the message already starts with it. */
ork_status tok_fail(ork_status s, const char *fmt, ...) ORK_PRINTF(2, 3);
void tok_set_source(const char *path); /* NULL: none */
const char *tok_get_source(void);

/* ---- growable byte string ------------------------------------------------ */
typedef struct tok_str {
    char *p;
    size_t n, cap;
} tok_str;

ork_status tok_str_put(tok_str *s, const char *p, size_t n);
ork_status tok_str_putc(tok_str *s, uint32_t cp); /* one code point as UTF-8 */
void tok_str_free(tok_str *s);

/* ---- UTF-8 --------------------------------------------------------------- */
/* Decode the code point at s[0..n) (n >= 1) that is known to be valid UTF-8;
 * returns its byte length and sets *cp. */
int tok_utf8_next(const char *s, size_t n, uint32_t *cp);
/* Copy raw bytes to valid UTF-8: every maximal ill-formed subsequence (Unicode
 * §3.9, "U+FFFD substitution of maximal subparts": what Python's
 * bytes.decode('utf-8', 'replace') and Rust's String::from_utf8_lossy do) becomes
 * one U+FFFD. */
ork_status tok_utf8_sanitize(const char *s, size_t n, tok_str *out);
int tok_is_whitespace(uint32_t cp); /* Unicode White_Space (Rust char::is_whitespace) */

/* ---- hash map: byte string -> int32 and uint64 -> uint64 ------------------ */
typedef struct tok_smap {
    uint32_t *slots; /* index+1 into keys, 0 = empty */
    uint32_t nslots;
    char **keys;
    uint32_t *klen;
    int32_t *vals;
    uint32_t n, cap;
} tok_smap;

ork_status tok_smap_set(tok_smap *m, const char *k, size_t n, int32_t v); /* overwrite */
int tok_smap_get(const tok_smap *m, const char *k, size_t n, int32_t *v); /* 1 found */
void tok_smap_free(tok_smap *m);

typedef struct tok_imap {
    uint64_t *keys; /* key+1, 0 = empty */
    uint64_t *vals;
    uint32_t nslots, n;
} tok_imap;

ork_status tok_imap_set(tok_imap *m, uint64_t k, uint64_t v); /* overwrite */
int tok_imap_get(const tok_imap *m, uint64_t k, uint64_t *v);
void tok_imap_free(tok_imap *m);

/* ---- regex (Oniguruma, UTF-8, its default syntax as the onig crate uses) --- */
typedef struct tok_regex tok_regex;
ork_status tok_regex_new(const char *pattern, size_t n, const char *what, tok_regex **out);
void tok_regex_free(tok_regex *re);

/* A match list in [0, n): (start, end) pairs, as the onig crate's find_iter
 * yields them (an empty match right after the previous match is skipped). */
typedef struct tok_spans {
    size_t *v; /* 2 per match */
    size_t n, cap;
} tok_spans;
ork_status tok_regex_find_all(const tok_regex *re, const char *s, size_t n, tok_spans *out);
/* Literal (non-overlapping, leftmost) matches of pat in s. */
ork_status tok_literal_find_all(const char *pat, size_t pn, const char *s, size_t n, tok_spans *out);
void tok_spans_free(tok_spans *sp);

/* A pattern from tokenizer.json: {"String": "..."} or {"Regex": "..."}. */
typedef struct tok_pattern {
    char *literal;     /* when a String */
    size_t literal_n;
    tok_regex *re;     /* when a Regex */
} tok_pattern;
ork_status tok_pattern_parse(json_t *j, const char *what, tok_pattern *out);
ork_status tok_pattern_find(const tok_pattern *p, const char *s, size_t n, tok_spans *out);
void tok_pattern_free(tok_pattern *p);

/* ---- normalizers ----------------------------------------------------------- */
typedef struct tok_norm tok_norm;
ork_status tok_norm_parse(json_t *j, tok_norm **out); /* j may be JSON null: *out NULL */
/* in -> out (out is reset first). lead (may be NULL): in, the bytes at the
 * input's start that come from the original text's first character; out, the
 * same for the output, 0 once the normalizer deleted them (stripped, replaced
 * by nothing): tokenizers' offsets, which Metaspace's "first" scheme reads
 * (a piece begins the text when its original offset is 0). */
ork_status tok_norm_apply(const tok_norm *nm, const char *s, size_t n, tok_str *out, size_t *lead);
void tok_norm_free(tok_norm *nm);

/* ---- pre-tokenizers --------------------------------------------------------- */
/* A list of pieces, each an owned byte string. */
typedef struct tok_pieces {
    tok_str *v;
    size_t n, cap;
} tok_pieces;
ork_status tok_pieces_push(tok_pieces *p, const char *s, size_t n);
void tok_pieces_free(tok_pieces *p);

typedef struct tok_pre tok_pre;
ork_status tok_pre_parse(json_t *j, tok_pre **out); /* JSON null: *out NULL */
/* Split the normalized segment s into pieces appended to out (empty pieces are
 * dropped). at_start: the segment begins the input (Metaspace "first"). */
ork_status tok_pre_apply(const tok_pre *pt, const char *s, size_t n, int at_start, tok_pieces *out);
void tok_pre_free(tok_pre *pt);

/* ---- models ------------------------------------------------------------------ */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
ork_status tok_ids_push(tok_ids *ids, int32_t id);

typedef struct tok_model tok_model;
ork_status tok_model_parse(json_t *j, tok_model **out);
ork_status tok_model_tokenize(const tok_model *m, const char *s, size_t n, tok_ids *out);
/* Vocabulary lookups (the model's own vocabulary; added tokens are in tokenizer.c). */
int tok_model_token_to_id(const tok_model *m, const char *s, size_t n, int32_t *id);
int32_t tok_model_vocab_size(const tok_model *m);
const char *tok_model_id_to_token(const tok_model *m, int32_t id);
void tok_model_free(tok_model *m);

/* ---- SentencePiece ------------------------------------------------------------------- */
/* A spiece.model's bytes -> the tokenizer.json transformers' T5Tokenizer builds
 * from it (tok_spm.c), with extra_ids sentinels. */
ork_status tok_spm_to_json(const char *data, size_t n, int extra_ids, json_t **out);

/* ---- tekken --------------------------------------------------------------------------- */
/* A parsed tekken.json (Mistral's, mistral-common's format; borrowed) -> the
 * tokenizer.json transformers' MistralConverter builds from it (tok_tekken.c). */
ork_status tok_tekken_to_json(json_t *root, json_t **out);

/* ---- the GPT-2 byte <-> code point table (ByteLevel) ------------------------- */
uint32_t tok_byte_to_cp(uint8_t b);

#endif
