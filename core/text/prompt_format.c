/* text/prompt_format.c — see prompt_format.h: the FLUX.2 pipelines' chat
 * templates (rendered here as the reference templates render them for one
 * caption), then the tokenizer, then truncation and padding on the pipeline's
 * side. Owns nothing beyond the static format table. */
#include "text/prompt_format.h"

#include "text/tok_internal.h"
#include "text/tokenizer.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* BFL flux2 src/flux2/system_messages.py SYSTEM_MESSAGE (diffusers'
 * pipelines/flux2/system_messages.py copies it): the newline after "object" is
 * part of it. */
static const char FLUX2_SYSTEM_MESSAGE[] =
    "You are an AI that reasons about image descriptions. You give structured responses focusing on object "
    "relationships, object\nattribution and actions without speculation.";

enum { FMT_PLAIN, FMT_MISTRAL3_FLUX2, FMT_QWEN3_KLEIN };

typedef struct fmt_entry {
    ork_prompt_format pub;
    int kind;
} fmt_entry;

static const fmt_entry g_formats[] = {
    /* the processor's apply_chat_template tokenizes with add_special_tokens=False (the template holds <s>) */
    {{"mistral3-flux2", 512, 1, ORK_TOK_NO_SPECIAL}, FMT_MISTRAL3_FLUX2},
    /* tokenizer(text, ...) with its defaults: Qwen's post-processor adds nothing */
    {{"qwen3-klein", 512, 0, 0}, FMT_QWEN3_KLEIN},
    {{"plain", 0, 0, 0}, FMT_PLAIN},
};

static const fmt_entry *find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof g_formats / sizeof g_formats[0]; i++)
        if (!strcmp(g_formats[i].pub.name, name)) return &g_formats[i];
    return NULL;
}

const ork_prompt_format *ork_prompt_format_find(const char *name) {
    const fmt_entry *f = find(name);
    return f ? &f->pub : NULL;
}

static ork_status unknown(const char *name) {
    return ORK_FAIL(ORK_E_INVALID, "prompt format '%s' is unknown (known: mistral3-flux2, qwen3-klein, plain)",
                    name ? name : "(null)");
}

/* s[0..n) with every "[IMG]" removed, as Python's str.replace does on the
 * decoded caption (so after the U+FFFD substitution, never across it). */
static ork_status put_without_img(tok_str *out, const char *s, size_t n) {
    static const char img[] = "[IMG]";
    size_t i = 0, from = 0;
    while (i + 5 <= n) {
        if (s[i] == '[' && !memcmp(s + i, img, 5)) {
            ORK_TRY(tok_str_put(out, s + from, i - from));
            i += 5;
            from = i;
        } else {
            i++;
        }
    }
    return tok_str_put(out, s + from, n - from);
}

static ork_status render(const fmt_entry *f, const char *text, size_t len, tok_str *out) {
    tok_str clean = {0};
    ork_status st = tok_utf8_sanitize(text ? text : "", text ? len : 0, &clean);
    if (st != ORK_OK) return st;
    const char *c = clean.p ? clean.p : "";
    switch (f->kind) {
    case FMT_MISTRAL3_FLUX2: {
        /* Mistral-Small-3.1's chat template: bos_token, '[SYSTEM_PROMPT]' + the
         * system message's first text block + '[/SYSTEM_PROMPT]', then the user
         * message's text blocks between '[INST]' and '[/INST]'. */
        static const char a[] = "<s>[SYSTEM_PROMPT]", b[] = "[/SYSTEM_PROMPT][INST]", e[] = "[/INST]";
        st = tok_str_put(out, a, sizeof a - 1);
        if (st == ORK_OK) st = tok_str_put(out, FLUX2_SYSTEM_MESSAGE, sizeof FLUX2_SYSTEM_MESSAGE - 1);
        if (st == ORK_OK) st = tok_str_put(out, b, sizeof b - 1);
        if (st == ORK_OK) st = put_without_img(out, c, clean.n);
        if (st == ORK_OK) st = tok_str_put(out, e, sizeof e - 1);
        break;
    }
    case FMT_QWEN3_KLEIN: {
        /* Qwen3's chat template: '<|im_start|>' + role + '\n' + content +
         * '<|im_end|>\n', then the generation prompt with an empty think block. */
        static const char a[] = "<|im_start|>user\n", e[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
        st = tok_str_put(out, a, sizeof a - 1);
        if (st == ORK_OK) st = tok_str_put(out, c, clean.n);
        if (st == ORK_OK) st = tok_str_put(out, e, sizeof e - 1);
        break;
    }
    default:
        st = tok_str_put(out, c, clean.n);
        break;
    }
    tok_str_free(&clean);
    if (st == ORK_OK && !out->p) st = tok_str_put(out, "", 0);
    return st;
}

ork_status ork_prompt_format_render(const char *format, const char *text, size_t len, char **out, size_t *out_n) {
    if (!out || !out_n) return ORK_FAIL(ORK_E_INVALID, "prompt format: NULL output");
    *out = NULL;
    *out_n = 0;
    const fmt_entry *f = find(format);
    if (!f) return unknown(format);
    tok_str s = {0};
    ork_status st = render(f, text, len, &s);
    if (st == ORK_OK) st = tok_str_put(&s, "", 1); /* the terminating NUL */
    if (st != ORK_OK) { tok_str_free(&s); return st; }
    *out = s.p;
    *out_n = s.n - 1;
    return ORK_OK;
}

ork_status ork_prompt_encode(const ork_tokenizer *t, const char *format, const char *text, size_t len,
                             int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out) {
    if (!t || !n_out || cap < 0 || (cap > 0 && !ids))
        return ORK_FAIL(ORK_E_INVALID, "prompt encode: NULL tokenizer or output");
    *n_out = 0;
    const fmt_entry *f = find(format);
    if (!f) return unknown(format);
    int32_t L = max_length > 0 ? max_length : f->pub.default_length;
    if (f->kind == FMT_PLAIN)
        return ork_tokenizer_encode(t, text, len, L, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids, mask, cap, n_out);
    if (L > cap) { *n_out = L; return ORK_E_INVALID; }
    tok_str s = {0};
    ORK_TRY(render(f, text, len, &s));
    int32_t n = 0;
    /* truncated on the right (the pipelines' truncation_side) to at most L tokens */
    ork_status st = ork_tokenizer_encode(t, s.p, s.n, L, f->pub.tok_flags | ORK_TOK_TRUNCATE, ids, NULL, L, &n);
    tok_str_free(&s);
    if (st == ORK_E_INVALID && n > L)
        return ORK_FAIL(ORK_E_INTERNAL, "prompt encode: %d tokens after truncation to %d", (int)n, (int)L);
    if (st != ORK_OK) return st;
    int32_t pad = ork_tokenizer_pad_id(t), np = L - n;
    if (f->pub.pad_left && np > 0) {
        memmove(ids + np, ids, (size_t)n * sizeof *ids);
        for (int32_t i = 0; i < np; i++) ids[i] = pad;
    } else {
        for (int32_t i = n; i < L; i++) ids[i] = pad;
    }
    if (mask)
        for (int32_t i = 0; i < L; i++) mask[i] = f->pub.pad_left ? i >= np : i < n;
    *n_out = L;
    return ORK_OK;
}
