/* text/prompt_format.c — see prompt_format.h: the generic chat templates
 * (rendered as the published Mistral and Qwen3 templates render them for one
 * user message), then the tokenizer, then truncation and padding on the
 * pipeline's side. No family is named here: a model's text slot gives the
 * kind, flags, system message and length. Owns nothing beyond the static
 * table of named formats. */
#include "text/prompt_format.h"

#include "text/tok_internal.h"
#include "text/tokenizer.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

#define CHAT_LENGTH 512 /* the named chat formats' length (both FLUX.2 pipelines' and Z-Image's) */
#define KNOWN_FLAGS \
    (ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_GENERATION | ORK_TEMPLATE_THINKING | ORK_TEMPLATE_NO_SPECIAL | \
     ORK_TEMPLATE_STRIP_IMG)

static const ork_prompt_format g_formats[] = {
    /* the processor's apply_chat_template tokenizes with add_special_tokens=False (the template holds <s>) */
    {"mistral-chat", CHAT_LENGTH, 1, ORK_TOK_NO_SPECIAL,
     {ORK_TEMPLATE_MISTRAL_CHAT, ORK_TEMPLATE_PAD_LEFT | ORK_TEMPLATE_NO_SPECIAL | ORK_TEMPLATE_STRIP_IMG, NULL,
      CHAT_LENGTH}},
    /* tokenizer(text, ...) with its defaults: Qwen's post-processor adds nothing */
    {"qwen-chat", CHAT_LENGTH, 0, 0, {ORK_TEMPLATE_QWEN_CHAT, ORK_TEMPLATE_GENERATION, NULL, CHAT_LENGTH}},
    {"qwen-thinking", CHAT_LENGTH, 0, 0,
     {ORK_TEMPLATE_QWEN_CHAT, ORK_TEMPLATE_GENERATION | ORK_TEMPLATE_THINKING, NULL, CHAT_LENGTH}},
    {"plain", 0, 0, 0, {ORK_TEMPLATE_PLAIN, 0, NULL, 0}},
};

const ork_prompt_format *ork_prompt_format_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof g_formats / sizeof g_formats[0]; i++)
        if (!strcmp(g_formats[i].name, name)) return &g_formats[i];
    return NULL;
}

static ork_status unknown(const char *name) {
    return ORK_FAIL(ORK_E_INVALID, "prompt format '%s' is unknown (known: mistral-chat, qwen-chat, qwen-thinking, "
                    "plain)", name ? name : "(null)");
}

ork_status ork_prompt_template_check(const ork_prompt_template *tpl, int32_t max_length, const char *what) {
    const char *w = what ? what : "prompt template";
    if (!tpl) return ORK_FAIL(ORK_E_INVALID, "%s: no template", w);
    if (tpl->kind != ORK_TEMPLATE_PLAIN && tpl->kind != ORK_TEMPLATE_MISTRAL_CHAT &&
        tpl->kind != ORK_TEMPLATE_QWEN_CHAT)
        return ORK_FAIL(ORK_E_INVALID, "%s: prompt template kind %d is unknown (0 plain, 1 Mistral chat, 2 Qwen chat)",
                        w, (int)tpl->kind);
    if (tpl->flags & ~(uint32_t)KNOWN_FLAGS)
        return ORK_FAIL(ORK_E_INVALID, "%s: prompt template flags 0x%x hold unknown bits (known 0x%x)", w,
                        (unsigned)tpl->flags, (unsigned)KNOWN_FLAGS);
    if (tpl->kind != ORK_TEMPLATE_PLAIN && max_length <= 0 && tpl->max_length <= 0)
        return ORK_FAIL(ORK_E_INVALID, "%s: a chat template needs a length to pad to (max_length 0)", w);
    return ORK_OK;
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

static ork_status put_s(tok_str *out, const char *s) { return tok_str_put(out, s, strlen(s)); }

static ork_status render(const ork_prompt_template *tpl, const char *text, size_t len, tok_str *out) {
    tok_str clean = {0};
    ORK_TRY(tok_utf8_sanitize(text ? text : "", text ? len : 0, &clean));
    const char *c = clean.p ? clean.p : "", *sys = tpl->system_message;
    ork_status st = ORK_OK;
#define PUT(x) \
    do { \
        if (st == ORK_OK) st = (x); \
    } while (0)
    switch (tpl->kind) {
    case ORK_TEMPLATE_MISTRAL_CHAT:
        /* Mistral-Small-3.1's chat template: bos_token, '[SYSTEM_PROMPT]' + the
         * system message's first text block + '[/SYSTEM_PROMPT]', then the user
         * message's text blocks between '[INST]' and '[/INST]'. */
        PUT(put_s(out, "<s>"));
        if (sys) {
            PUT(put_s(out, "[SYSTEM_PROMPT]"));
            PUT(put_s(out, sys));
            PUT(put_s(out, "[/SYSTEM_PROMPT]"));
        }
        PUT(put_s(out, "[INST]"));
        break;
    case ORK_TEMPLATE_QWEN_CHAT:
        /* Qwen3's chat template: '<|im_start|>' + role + '\n' + content + '<|im_end|>\n' */
        if (sys) {
            PUT(put_s(out, "<|im_start|>system\n"));
            PUT(put_s(out, sys));
            PUT(put_s(out, "<|im_end|>\n"));
        }
        PUT(put_s(out, "<|im_start|>user\n"));
        break;
    default:
        break;
    }
    if (tpl->flags & ORK_TEMPLATE_STRIP_IMG) PUT(put_without_img(out, c, clean.n));
    else PUT(tok_str_put(out, c, clean.n));
    if (tpl->kind == ORK_TEMPLATE_MISTRAL_CHAT) PUT(put_s(out, "[/INST]"));
    if (tpl->kind == ORK_TEMPLATE_QWEN_CHAT) {
        PUT(put_s(out, "<|im_end|>\n"));
        if (tpl->flags & ORK_TEMPLATE_GENERATION) {
            PUT(put_s(out, "<|im_start|>assistant\n"));
            /* enable_thinking=False: the template closes an empty think block */
            if (!(tpl->flags & ORK_TEMPLATE_THINKING)) PUT(put_s(out, "<think>\n\n</think>\n\n"));
        }
    }
#undef PUT
    tok_str_free(&clean);
    if (st == ORK_OK && !out->p) st = tok_str_put(out, "", 0);
    return st;
}

ork_status ork_prompt_template_render(const ork_prompt_template *tpl, const char *text, size_t len, char **out,
                                      size_t *out_n) {
    if (!out || !out_n) return ORK_FAIL(ORK_E_INVALID, "prompt template: NULL output");
    *out = NULL;
    *out_n = 0;
    ORK_TRY(ork_prompt_template_check(tpl, tpl && tpl->kind == ORK_TEMPLATE_PLAIN ? 0 : 1, NULL));
    tok_str s = {0};
    ork_status st = render(tpl, text, len, &s);
    if (st == ORK_OK) st = tok_str_put(&s, "", 1); /* the terminating NUL */
    if (st != ORK_OK) {
        tok_str_free(&s);
        return st;
    }
    *out = s.p;
    *out_n = s.n - 1;
    return ORK_OK;
}

ork_status ork_prompt_encode_template(const ork_tokenizer *t, const ork_prompt_template *tpl, const char *text,
                                      size_t len, int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap,
                                      int32_t *n_out) {
    if (!t || !n_out || cap < 0 || (cap > 0 && !ids))
        return ORK_FAIL(ORK_E_INVALID, "prompt encode: NULL tokenizer or output");
    *n_out = 0;
    ORK_TRY(ork_prompt_template_check(tpl, max_length, NULL));
    int32_t L = max_length > 0 ? max_length : tpl->max_length;
    if (tpl->kind == ORK_TEMPLATE_PLAIN && !(tpl->flags & ORK_TEMPLATE_STRIP_IMG))
        return ork_tokenizer_encode(t, text, len, L, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids, mask, cap, n_out);
    if (tpl->kind == ORK_TEMPLATE_PLAIN && L <= 0)
        return ORK_FAIL(ORK_E_INVALID, "prompt encode: a plain template that strips [IMG] needs a length");
    if (L > cap) {
        *n_out = L;
        return ORK_E_INVALID;
    }
    tok_str s = {0};
    ORK_TRY(render(tpl, text, len, &s));
    int32_t n = 0;
    uint32_t tf = (tpl->flags & ORK_TEMPLATE_NO_SPECIAL) ? ORK_TOK_NO_SPECIAL : 0;
    /* truncated on the right (the pipelines' truncation_side) to at most L tokens */
    ork_status st = ork_tokenizer_encode(t, s.p, s.n, L, tf | ORK_TOK_TRUNCATE, ids, NULL, L, &n);
    tok_str_free(&s);
    if (st == ORK_E_INVALID && n > L)
        return ORK_FAIL(ORK_E_INTERNAL, "prompt encode: %d tokens after truncation to %d", (int)n, (int)L);
    if (st != ORK_OK) return st;
    int32_t pad = ork_tokenizer_pad_id(t), np = L - n;
    int left = (tpl->flags & ORK_TEMPLATE_PAD_LEFT) != 0;
    if (left && np > 0) {
        memmove(ids + np, ids, (size_t)n * sizeof *ids);
        for (int32_t i = 0; i < np; i++) ids[i] = pad;
    } else {
        for (int32_t i = n; i < L; i++) ids[i] = pad;
    }
    if (mask)
        for (int32_t i = 0; i < L; i++) mask[i] = left ? i >= np : i < n;
    *n_out = L;
    return ORK_OK;
}

ork_status ork_prompt_format_render(const char *format, const char *text, size_t len, char **out, size_t *out_n) {
    if (!out || !out_n) return ORK_FAIL(ORK_E_INVALID, "prompt format: NULL output");
    const ork_prompt_format *f = ork_prompt_format_find(format);
    if (!f) {
        *out = NULL;
        *out_n = 0;
        return unknown(format);
    }
    return ork_prompt_template_render(&f->tpl, text, len, out, out_n);
}

ork_status ork_prompt_encode(const ork_tokenizer *t, const char *format, const char *text, size_t len,
                             int32_t max_length, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out) {
    if (!t || !n_out || cap < 0 || (cap > 0 && !ids))
        return ORK_FAIL(ORK_E_INVALID, "prompt encode: NULL tokenizer or output");
    *n_out = 0;
    const ork_prompt_format *f = ork_prompt_format_find(format);
    if (!f) return unknown(format);
    return ork_prompt_encode_template(t, &f->tpl, text, len, max_length, ids, mask, cap, n_out);
}
