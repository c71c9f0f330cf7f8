/* tok_fixtures.h — what the tokenizer tests share: the caption corpus
 * (tests/fixtures/text/captions.txt, its escaped lines decoded as
 * make_captions.py writes them), the expected ids the reference scripts write
 * (tokenizer_ref.py, tokenizer_flux2_ref.py: T, C and P lines), and the corpus
 * comparison of one tokenizer against its C lines.
 *
 * Owns the tokfx tables it fills (never freed: a test binary's lifetime). */
#ifndef ORK_TESTS_TOK_FIXTURES_H
#define ORK_TESTS_TOK_FIXTURES_H

#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tokfx_caption {
    char *p;
    size_t n;
} tokfx_caption;

/* "T <name> <n_pre> <n_post> <pad> <max_length>" and its "C" lines: every
 * caption's full encoding (special tokens, no truncation, no padding). */
typedef struct tokfx_expect {
    char name[32];
    int n_pre, n_post, pad, maxlen;
    int32_t **ids; /* per caption */
    int32_t *n;
} tokfx_expect;

/* "P <format> <name> <max_length> <pad_left> <caption> <n> <ids...>": the row a
 * pipeline feeds its encoder is these n ids and max_length - n pads on the pad
 * side (mask 0 there). */
typedef struct tokfx_prompt {
    char format[32], name[32];
    int maxlen, pad_left, idx, n;
    int32_t *ids;
} tokfx_prompt;

typedef struct tokfx {
    tokfx_caption *caps;
    size_t ncaps;
    tokfx_expect exp[16];
    int nexp;
    tokfx_prompt *prompts;
    size_t nprompts;
} tokfx;

/* A gzip'd (or plain) file, NUL-terminated; NULL when it cannot be read. */
char *tokfx_read_gz(const char *path, size_t *n);
/* 0 on success. */
int tokfx_load_captions(tokfx *fx, const char *path);
int tokfx_load_expected(tokfx *fx, const char *path);
tokfx_expect *tokfx_find(tokfx *fx, const char *name);
/* Every caption through t: the full encoding, FLUX.1's call (truncate + pad to
 * maxlen, mask; skipped when maxlen is 0), and without special tokens, against
 * e. Prints the first mismatches; returns how many there were. */
int tokfx_check_corpus(const tokfx *fx, const ork_tokenizer *t, const tokfx_expect *e);

#endif
