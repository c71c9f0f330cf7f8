/* fuzz_tok_common.h — what the tokenizer fuzz targets (fuzz_tok_json,
 * fuzz_tok_tekken, fuzz_tok_spm, fuzz_tok_text) share: the fixed strings each
 * tokenizer that loads is asked to encode (invalid UTF-8 among them), and the
 * contract checks on one encode (core/text/tokenizer.h): ORK_OK with every id
 * in [0, vocab_size) and a mask of 1s then 0s, or ORK_E_INVALID with no line
 * logged when cap is too small. Header-only, included after fuzz_common.h by
 * one translation unit per target (after fuzz_train_common.h for
 * fz_tok_load_file). Owns nothing past a call. */
#ifndef ORK_FUZZ_TOK_COMMON_H
#define ORK_FUZZ_TOK_COMMON_H

#include "text/prompt_format.h"
#include "text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

typedef struct fz_text {
    const char *p;
    size_t n;
} fz_text;

#define FZ_T(s) {s, sizeof s - 1}
static const fz_text fz_texts[] = {
    FZ_T(""),
    FZ_T("a photo of ohwx man, 35mm, f/1.8"),
    FZ_T("  Hello\tWORLD!!  2024 caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 <s></s><pad>"),
    FZ_T("\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x98 truncated \xed\xa0\x80 surrogate \xc0\xaf overlong"),
    FZ_T("<|startoftext|>x<|endoftext|>[INST]y[/INST]<unk>\x00nul"),
    FZ_T("\xef\xbc\xa1\xef\xac\x81 \xe2\x85\xa0 \xc3\x85 A\xcc\x8a \xe2\x80\x8b\xe3\x80\x80 zero-width"),
};
#define FZ_NTEXTS (sizeof fz_texts / sizeof fz_texts[0])

/* One encode of text[0..n) with the given max_length and flags: first with
 * cap 0 (the length needed, nothing logged), then into a buffer of that size. */
static inline void fz_tok_encode(const ork_tokenizer *t, const char *text, size_t n, int32_t max_length,
                                 uint32_t flags) {
    int32_t need = -1;
    int errors = fz_errors;
    ork_status s = ork_tokenizer_encode(t, text, n, max_length, flags, NULL, NULL, 0, &need);
    if (s == ORK_E_INVALID && need == 0) {
        /* max_length below the special tokens: refused with one line */
        FZ_CHECK(fz_errors == errors + 1, "encode refused with %d lines", fz_errors - errors);
        fz_errors = errors;
        return;
    }
    FZ_CHECK(s == ORK_OK || s == ORK_E_INVALID, "encode (cap 0): status %d (%s)", (int)s, ork_status_str(s));
    FZ_CHECK(fz_errors == errors, "encode (cap 0) logged %d lines", fz_errors - errors);
    FZ_CHECK(need >= 0, "encode: n_out %d", need);
    if (s == ORK_OK) FZ_CHECK(need == 0, "encode into cap 0 gave %d ids", need);
    if (max_length > 0 && (flags & ORK_TOK_TRUNCATE))
        FZ_CHECK(need <= max_length, "truncated to %d gave %d ids", max_length, need);
    if (max_length > 0 && (flags & ORK_TOK_PAD)) FZ_CHECK(need >= max_length, "padded to %d gave %d", max_length, need);
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids), *mask = malloc(((size_t)need + 1) * sizeof *mask);
    FZ_CHECK(ids && mask, "out of memory");
    int32_t got = -1;
    s = ork_tokenizer_encode(t, text, n, max_length, flags, ids, mask, need, &got);
    FZ_CHECK(s == ORK_OK, "encode: status %d (%s) with cap %d", (int)s, ork_status_str(s), need);
    FZ_CHECK(got == need, "encode gave %d ids, %d announced", got, need);
    FZ_CHECK(fz_errors == errors, "encode logged %d lines", fz_errors - errors);
    int32_t vs = ork_tokenizer_vocab_size(t), pad = ork_tokenizer_pad_id(t);
    FZ_CHECK(pad >= 0 && pad < vs, "pad id %d, vocabulary %d", pad, vs);
    for (int32_t i = 0; i < got; i++) {
        FZ_CHECK(mask[i] == 0 || mask[i] == 1, "mask[%d] = %d", i, mask[i]);
        FZ_CHECK(i == 0 || mask[i] <= mask[i - 1], "mask[%d] = 1 after a 0", i);
        if (mask[i]) FZ_CHECK(ids[i] >= 0 && ids[i] < vs, "ids[%d] = %d, vocabulary %d", i, ids[i], vs);
        else FZ_CHECK(ids[i] == pad, "ids[%d] = %d in the padding, pad id %d", i, ids[i], pad);
    }
    free(ids);
    free(mask);
}

/* The text through prompt format `format` (ORK_PROMPT_*): 96 ids, each in range. */
static inline void fz_tok_prompt(const ork_tokenizer *t, const char *format, const char *text, size_t n) {
    int32_t ids[96], mask[96], got = -1;
    int errors = fz_errors;
    ork_status s = ork_prompt_encode(t, format, text, n, 96, ids, mask, 96, &got);
    FZ_CHECK(s == ORK_OK, "prompt %s: status %d (%s)", format, (int)s, ork_status_str(s));
    FZ_CHECK(fz_errors == errors, "prompt %s logged %d lines", format, fz_errors - errors);
    FZ_CHECK(got == 96, "prompt %s: %d ids for length 96", format, got);
    int32_t vs = ork_tokenizer_vocab_size(t);
    for (int32_t i = 0; i < got; i++)
        FZ_CHECK(!mask[i] || (ids[i] >= 0 && ids[i] < vs), "prompt %s: ids[%d] = %d, vocabulary %d", format, i, ids[i],
                 vs);
}

/* A tokenizer that loaded: the fixed strings, plain, truncated and padded. */
static inline void fz_tok_exercise(const ork_tokenizer *t) {
    int32_t vs = ork_tokenizer_vocab_size(t);
    FZ_CHECK(vs > 0, "loaded with a vocabulary of %d", vs);
    for (size_t i = 0; i < FZ_NTEXTS; i++) {
        fz_tok_encode(t, fz_texts[i].p, fz_texts[i].n, 0, 0);
        fz_tok_encode(t, fz_texts[i].p, fz_texts[i].n, 8, ORK_TOK_TRUNCATE | ORK_TOK_PAD);
        fz_tok_encode(t, fz_texts[i].p, fz_texts[i].n, 0, ORK_TOK_NO_SPECIAL);
    }
    for (int32_t id = 0; id < vs && id < 64; id++) {
        const char *s = ork_tokenizer_id_to_token(t, id);
        if (s) (void)ork_tokenizer_token_to_id(t, s);
    }
}

/* The contract of one load: ORK_OK and a tokenizer with no error line, or a
 * refusal with exactly one line and no tokenizer. */
static inline void fz_tok_check_load(ork_status s, const ork_tokenizer *t) {
    FZ_CHECK(s == ORK_OK || s == ORK_E_IO || s == ORK_E_FORMAT || s == ORK_E_UNSUPPORTED || s == ORK_E_NOMEM,
             "load: status %d (%s)", (int)s, ork_status_str(s));
    if (s == ORK_OK) {
        FZ_CHECK(t != NULL, "ORK_OK without a tokenizer");
        FZ_CHECK(fz_errors == 0, "loaded with %d error lines", fz_errors);
    } else {
        FZ_CHECK(t == NULL, "refused (%s) but handed a tokenizer", ork_status_str(s));
        FZ_CHECK(fz_errors == 1, "refused (%s) with %d error lines", ork_status_str(s), fz_errors);
    }
}

/* The input as the file <fz_dir>/name, loaded through ork_tokenizer_load (the
 * loader picks the reader by the file's name, as for a real folder), checked,
 * exercised when it loaded, freed. Needs fuzz_train_common.h's fz_dir. */
#ifdef ORK_FUZZ_TRAIN_COMMON_H
static inline void fz_tok_load_file(const char *name, const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fz_dir, name);
    if (!fz_write_file(path, data, size)) return;
    ork_tokenizer *t = NULL;
    ork_status s = ork_tokenizer_load(path, &t);
    fz_tok_check_load(s, t);
    if (s == ORK_OK) {
        fz_tok_exercise(t);
        ork_tokenizer_free(t);
    }
}
#endif

#endif
