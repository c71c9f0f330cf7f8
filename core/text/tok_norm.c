/* text/tok_norm.c — tokenizer.json normalizers, as Hugging Face `tokenizers`
 * applies them: Sequence, NFC/NFD/NFKC/NFKD (utf8proc), Lowercase (per code
 * point, as Rust's char::to_lowercase), Replace (literal or regex), Strip,
 * Prepend, and Precompiled (SentencePiece's precompiled charsmap: a Darts
 * double-array trie of rewrite rules applied per extended grapheme cluster,
 * exactly as tokenizers' precompiled.rs / the spm_precompiled crate do).
 * Owns each parsed normalizer (a tree for Sequence). */
#include "text/tok_internal.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef enum {
    N_SEQ, N_NFC, N_NFD, N_NFKC, N_NFKD, N_LOWER, N_REPLACE, N_STRIP, N_PREPEND, N_PRECOMPILED,
} norm_kind;

struct tok_norm {
    norm_kind kind;
    tok_norm **kids; /* N_SEQ */
    size_t nkids;
    tok_pattern pat; /* N_REPLACE */
    char *content;   /* N_REPLACE, N_PREPEND */
    size_t content_n;
    int left, right; /* N_STRIP */
    uint32_t *trie;  /* N_PRECOMPILED: the double array */
    size_t trie_n;
    char *normalized; /* N_PRECOMPILED: the replacement strings, NUL-separated */
    size_t normalized_n;
};

void tok_norm_free(tok_norm *nm) {
    if (!nm) return;
    for (size_t i = 0; i < nm->nkids; i++) tok_norm_free(nm->kids[i]);
    free(nm->kids);
    tok_pattern_free(&nm->pat);
    free(nm->content);
    free(nm->trie);
    free(nm->normalized);
    free(nm);
}

/* ---- base64 (the charsmap's encoding in tokenizer.json) ------------------------- */
static int b64v(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static ork_status b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_n) {
    while (n && s[n - 1] == '=') n--;
    uint8_t *o = malloc(n * 3 / 4 + 3);
    if (!o) return tok_fail(ORK_E_NOMEM, "out of memory (charsmap)");
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64v((unsigned char)s[i]);
        if (v < 0) {
            free(o);
            return tok_fail(ORK_E_FORMAT, "Precompiled: precompiled_charsmap is not base64 (byte %zu)", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; o[k++] = (uint8_t)(acc >> bits); }
    }
    *out = o;
    *out_n = k;
    return ORK_OK;
}

/* ---- the double array --------------------------------------------------------------- */
static int da_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t da_value(uint32_t u) { return u & ((1u << 31) - 1); }
static uint32_t da_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static size_t da_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

/* The first (shortest) prefix of key[0..n) that is a rule: its replacement, or NULL. */
static const char *precompiled_transform(const tok_norm *nm, const char *key, size_t n, size_t *out_n) {
    if (!nm->trie_n) return NULL;
    size_t pos = 0;
    uint32_t unit = nm->trie[pos];
    pos ^= da_offset(unit);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)key[i];
        if (c == 0) break;
        pos ^= c;
        if (pos >= nm->trie_n) return NULL;
        unit = nm->trie[pos];
        if (da_label(unit) != c) return NULL;
        pos ^= da_offset(unit);
        if (pos >= nm->trie_n) return NULL;
        if (da_has_leaf(unit)) {
            size_t v = da_value(nm->trie[pos]);
            if (v >= nm->normalized_n) return NULL;
            size_t e = v;
            while (e < nm->normalized_n && nm->normalized[e]) e++;
            *out_n = e - v;
            return nm->normalized + v;
        }
    }
    return NULL;
}

static ork_status precompiled_parse(json_t *j, tok_norm *nm) {
    json_t *cm = json_object_get(j, "precompiled_charsmap");
    if (json_is_null(cm) || (json_is_string(cm) && json_string_length(cm) == 0)) return ORK_OK; /* no rules */
    if (!json_is_string(cm))
        return tok_fail(ORK_E_FORMAT, "Precompiled normalizer without a 'precompiled_charsmap' string");
    uint8_t *b = NULL;
    size_t n = 0;
    ORK_TRY(b64_decode(json_string_value(cm), json_string_length(cm), &b, &n));
    ork_status st = ORK_OK;
    if (n < 4) {
        st = tok_fail(ORK_E_FORMAT, "Precompiled: charsmap of %zu bytes (needs a 4-byte trie size)", n);
        goto done;
    }
    size_t trie_bytes = (size_t)b[0] | ((size_t)b[1] << 8) | ((size_t)b[2] << 16) | ((size_t)b[3] << 24);
    if (trie_bytes % 4 || trie_bytes > n - 4) {
        st = tok_fail(ORK_E_FORMAT, "Precompiled: trie of %zu bytes in a charsmap of %zu", trie_bytes, n);
        goto done;
    }
    nm->trie_n = trie_bytes / 4;
    nm->trie = malloc((nm->trie_n ? nm->trie_n : 1) * sizeof *nm->trie);
    nm->normalized_n = n - 4 - trie_bytes;
    nm->normalized = malloc(nm->normalized_n + 1);
    if (!nm->trie || !nm->normalized) { st = tok_fail(ORK_E_NOMEM, "out of memory (charsmap)"); goto done; }
    for (size_t i = 0; i < nm->trie_n; i++) {
        const uint8_t *p = b + 4 + 4 * i;
        nm->trie[i] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    }
    memcpy(nm->normalized, b + 4 + trie_bytes, nm->normalized_n);
    nm->normalized[nm->normalized_n] = 0;
    {
        tok_str chk = {0};
        st = tok_utf8_sanitize(nm->normalized, nm->normalized_n, &chk);
        if (st == ORK_OK && chk.n != nm->normalized_n)
            st = tok_fail(ORK_E_FORMAT, "Precompiled: the charsmap's strings are not valid UTF-8");
        tok_str_free(&chk);
    }
done:
    free(b);
    return st;
}

/* One extended grapheme cluster at a time (utf8proc's UAX #29 rules). The lead
 * becomes the output of the clusters it touched; when that is nothing, the
 * next character takes its place: tokenizers aligns the charsmap's output char
 * by char from the start (precompiled.rs signals no removal). */
static ork_status precompiled_apply(const tok_norm *nm, const char *s, size_t n, tok_str *out, size_t *lead) {
    size_t i = 0, lead_in = lead ? *lead : 0;
    int lead_open = lead_in > 0;
    while (i < n) {
        if (lead_open && i >= lead_in) {
            *lead = out->n;
            lead_open = 0;
        }
        /* the cluster [i, e) */
        uint32_t cp, prev;
        size_t e = i + (size_t)tok_utf8_next(s + i, n - i, &prev);
        utf8proc_int32_t state = 0;
        while (e < n) {
            int l = tok_utf8_next(s + e, n - e, &cp);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)cp, &state)) break;
            prev = cp;
            e += (size_t)l;
        }
        size_t rn;
        const char *r;
        if (e - i < 6 && (r = precompiled_transform(nm, s + i, e - i, &rn))) {
            ORK_TRY(tok_str_put(out, r, rn));
        } else {
            for (size_t k = i; k < e;) {
                if (lead_open && k >= lead_in) { /* char by char here, as tokenizers aligns it */
                    *lead = out->n;
                    lead_open = 0;
                }
                int l = tok_utf8_next(s + k, e - k, &cp);
                if ((r = precompiled_transform(nm, s + k, (size_t)l, &rn))) ORK_TRY(tok_str_put(out, r, rn));
                else ORK_TRY(tok_str_put(out, s + k, (size_t)l));
                k += (size_t)l;
            }
        }
        i = e;
    }
    if (lead_open) *lead = out->n;
    if (lead && lead_in && *lead == 0 && out->n) { /* mapped to nothing: the next char is aligned to the start */
        uint32_t cp;
        *lead = (size_t)tok_utf8_next(out->p, out->n, &cp);
    }
    return ORK_OK;
}

/* ---- the others ------------------------------------------------------------------------ */
static ork_status unicode_form(norm_kind k, const char *s, size_t n, tok_str *out, size_t *lead) {
    int opt = UTF8PROC_STABLE;
    if (k == N_NFC) opt |= UTF8PROC_COMPOSE;
    else if (k == N_NFD) opt |= UTF8PROC_DECOMPOSE;
    else if (k == N_NFKC) opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    if (n == 0) return ORK_OK;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, (utf8proc_option_t)opt);
    if (m < 0) return tok_fail(ORK_E_INTERNAL, "unicode normalization: %s", utf8proc_errmsg(m));
    ork_status st = tok_str_put(out, (const char *)r, (size_t)m);
    free(r);
    if (st == ORK_OK && lead && *lead && out->n) {
        /* the lead: its own normalized form, and at least the first output character
         * (composition may pull later input into it) */
        utf8proc_uint8_t *q = NULL;
        utf8proc_ssize_t mq = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)(*lead < n ? *lead : n), &q,
                                           (utf8proc_option_t)opt);
        free(q);
        uint32_t cp;
        size_t first = (size_t)tok_utf8_next(out->p, out->n, &cp);
        size_t l = mq > 0 ? (size_t)mq : 0;
        if (l < first) l = first;
        *lead = l < out->n ? l : out->n;
    }
    return st;
}

static ork_status lowercase(const char *s, size_t n, tok_str *out, size_t *lead) {
    size_t lead_in = lead ? *lead : 0;
    for (size_t i = 0; i < n;) {
        if (lead_in && i == lead_in) *lead = out->n;
        uint32_t cp;
        i += (size_t)tok_utf8_next(s + i, n - i, &cp);
        if (cp == 0x130) { /* the one code point whose lowercase is two (SpecialCasing) */
            ORK_TRY(tok_str_put(out, "i\xcc\x87", 3));
            continue;
        }
        ORK_TRY(tok_str_putc(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp)));
    }
    if (lead_in && lead_in >= n) *lead = out->n;
    return ORK_OK;
}

/* The lead's end maps through: past a match it moves by the length change, inside
 * one it lands after the content; a start replaced by nothing is lost (0). */
static ork_status replace(const tok_norm *nm, const char *s, size_t n, tok_str *out, size_t *lead) {
    tok_spans sp = {0};
    ork_status st = tok_pattern_find(&nm->pat, s, n, &sp);
    size_t last = 0, p = lead ? *lead : 0, mapped = 0;
    int done = p == 0;
    for (size_t k = 0; st == ORK_OK && k < sp.n; k++) {
        size_t a = sp.v[2 * k], b = sp.v[2 * k + 1];
        if (!done && p <= a) { mapped = out->n + (p - last); done = 1; }
        st = tok_str_put(out, s + last, a - last);
        if (st == ORK_OK) st = tok_str_put(out, nm->content, nm->content_n);
        if (!done && p <= b) { mapped = out->n; done = 1; }
        last = b;
    }
    if (!done) mapped = out->n + (p - last);
    if (st == ORK_OK) st = tok_str_put(out, s + last, n - last);
    if (lead && *lead) *lead = mapped;
    tok_spans_free(&sp);
    return st;
}

static ork_status strip(const tok_norm *nm, const char *s, size_t n, tok_str *out, size_t *lead) {
    size_t a = 0, b = n;
    uint32_t cp;
    if (nm->left)
        while (a < b) {
            int l = tok_utf8_next(s + a, b - a, &cp);
            if (!tok_is_whitespace(cp)) break;
            a += (size_t)l;
        }
    if (nm->right)
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
            tok_utf8_next(s + k, b - k, &cp);
            if (!tok_is_whitespace(cp)) break;
            b = k;
        }
    if (lead && *lead) *lead = (*lead < b ? *lead : b) > a ? (*lead < b ? *lead : b) - a : 0;
    return tok_str_put(out, s + a, b - a);
}

ork_status tok_norm_apply(const tok_norm *nm, const char *s, size_t n, tok_str *out, size_t *lead) {
    out->n = 0;
    ORK_TRY(tok_str_put(out, "", 0));
    switch (nm->kind) {
    case N_SEQ: {
        tok_str a = {0}, b = {0};
        ork_status st = tok_str_put(&a, s, n);
        for (size_t i = 0; st == ORK_OK && i < nm->nkids; i++) {
            st = tok_norm_apply(nm->kids[i], a.p, a.n, &b, lead);
            tok_str t = a; a = b; b = t;
        }
        if (st == ORK_OK) st = tok_str_put(out, a.p, a.n);
        tok_str_free(&a);
        tok_str_free(&b);
        return st;
    }
    case N_NFC: case N_NFD: case N_NFKC: case N_NFKD: return unicode_form(nm->kind, s, n, out, lead);
    case N_LOWER: return lowercase(s, n, out, lead);
    case N_REPLACE: return replace(nm, s, n, out, lead);
    case N_STRIP: return strip(nm, s, n, out, lead);
    case N_PREPEND: /* the prepended text is aligned to the first character */
        if (n) ORK_TRY(tok_str_put(out, nm->content, nm->content_n));
        if (n && lead && *lead) *lead += nm->content_n;
        return tok_str_put(out, s, n);
    case N_PRECOMPILED: return precompiled_apply(nm, s, n, out, lead);
    }
    return tok_fail(ORK_E_INTERNAL, "unknown normalizer kind %d", (int)nm->kind);
}

static ork_status dup_string(json_t *j, const char *what, char **out, size_t *n) {
    if (!json_is_string(j)) return tok_fail(ORK_E_FORMAT, "%s: missing string", what);
    *n = json_string_length(j);
    *out = malloc(*n + 1);
    if (!*out) return tok_fail(ORK_E_NOMEM, "out of memory");
    memcpy(*out, json_string_value(j), *n + 1);
    return ORK_OK;
}

ork_status tok_norm_parse(json_t *j, tok_norm **out) {
    *out = NULL;
    if (!j || json_is_null(j)) return ORK_OK;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!json_is_object(j) || !type) return tok_fail(ORK_E_FORMAT, "normalizer without a 'type'");
    tok_norm *nm = calloc(1, sizeof *nm);
    if (!nm) return tok_fail(ORK_E_NOMEM, "out of memory");
    ork_status st = ORK_OK;
    if (!strcmp(type, "Sequence")) {
        nm->kind = N_SEQ;
        json_t *arr = json_object_get(j, "normalizers");
        if (!json_is_array(arr)) {
            st = tok_fail(ORK_E_FORMAT, "normalizer Sequence without a 'normalizers' array");
        } else {
            nm->kids = calloc(json_array_size(arr) + 1, sizeof *nm->kids);
            if (!nm->kids) st = tok_fail(ORK_E_NOMEM, "out of memory");
            for (size_t i = 0; st == ORK_OK && i < json_array_size(arr); i++) {
                tok_norm *k = NULL;
                st = tok_norm_parse(json_array_get(arr, i), &k);
                if (k) nm->kids[nm->nkids++] = k;
            }
        }
    } else if (!strcmp(type, "NFC")) nm->kind = N_NFC;
    else if (!strcmp(type, "NFD")) nm->kind = N_NFD;
    else if (!strcmp(type, "NFKC")) nm->kind = N_NFKC;
    else if (!strcmp(type, "NFKD")) nm->kind = N_NFKD;
    else if (!strcmp(type, "Lowercase")) nm->kind = N_LOWER;
    else if (!strcmp(type, "Replace")) {
        nm->kind = N_REPLACE;
        st = tok_pattern_parse(json_object_get(j, "pattern"), "Replace normalizer", &nm->pat);
        if (st == ORK_OK) st = dup_string(json_object_get(j, "content"), "Replace normalizer 'content'", &nm->content, &nm->content_n);
    } else if (!strcmp(type, "Strip")) {
        nm->kind = N_STRIP;
        nm->left = json_is_true(json_object_get(j, "strip_left"));
        nm->right = json_is_true(json_object_get(j, "strip_right"));
    } else if (!strcmp(type, "Prepend")) {
        nm->kind = N_PREPEND;
        st = dup_string(json_object_get(j, "prepend"), "Prepend normalizer 'prepend'", &nm->content, &nm->content_n);
    } else if (!strcmp(type, "Precompiled")) {
        nm->kind = N_PRECOMPILED;
        st = precompiled_parse(j, nm);
    } else {
        st = tok_fail(ORK_E_UNSUPPORTED, "normalizer type '%s' is not supported", type);
    }
    if (st != ORK_OK) { tok_norm_free(nm); return st; }
    *out = nm;
    return ORK_OK;
}
