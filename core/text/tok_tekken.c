/* text/tok_tekken.c — Mistral's tekken.json (mistral-common's Tekkenizer file:
 * "config" {pattern, default_vocab_size, default_num_special_tokens},
 * "vocab" [{rank, token_bytes (base64)}...] in rank order, and, from tekken v7
 * on, "special_tokens" [{rank, token_str}...]) read into the tokenizer.json
 * transformers' MistralConverter makes of it, then loaded as any other:
 *   - the special tokens first, ids 0 .. n_special-1 (the file's, else
 *     mistral-common's 20 defaults <unk> <s> </s> [INST] ... [TOOL_CONTENT]),
 *     padded with "<SPECIAL_i>" to default_num_special_tokens; each an added
 *     token (special, not normalized) and in the model's vocabulary;
 *   - the first default_vocab_size - n_special ranks, each at id rank +
 *     n_special, its bytes as ByteLevel characters;
 *   - a merge (l, r) for every split of a token whose two halves are tokens,
 *     ordered by the token's rank, then by the halves' ranks (so BPE merges in
 *     tiktoken's order); ignore_merges (a piece that is a token is that token);
 *   - pre-tokenizer: Split(pattern, isolated) then ByteLevel without its regex.
 * The ids equal mistral-common's on every text without a special token's
 * spelling (mistral-common encodes those as text, `tokenizers` as the token).
 * Owns nothing past the call. */
#include "text/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS: files before v7 carry none. */
static const char *const DEFAULT_SPECIALS[] = {
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"};
#define N_DEFAULT_SPECIALS ((int)(sizeof DEFAULT_SPECIALS / sizeof DEFAULT_SPECIALS[0]))

/* Standard base64 with '=' padding; 0 when malformed. */
static int b64_decode(const char *s, size_t n, tok_str *out) {
    out->n = 0;
    if (n % 4) return 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            int d;
            if (c >= 'A' && c <= 'Z') d = c - 'A';
            else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
            else if (c >= '0' && c <= '9') d = c - '0' + 52;
            else if (c == '+') d = 62;
            else if (c == '/') d = 63;
            else if (c == '=' && i + 4 == n && k >= 2) { d = 0; pad++; }
            else return 0;
            if (pad && c != '=') return 0;
            v = v << 6 | (uint32_t)d;
        }
        char b[3] = {(char)(v >> 16), (char)(v >> 8), (char)v};
        if (tok_str_put(out, b, (size_t)(3 - pad)) != ORK_OK) return 0;
    }
    return 1;
}

static int cfg_int(json_t *cfg, const char *key, json_int_t dflt, json_int_t *v) {
    json_t *j = json_object_get(cfg, key);
    if (!j || json_is_null(j)) { *v = dflt; return 1; }
    if (!json_is_integer(j)) return 0;
    *v = json_integer_value(j);
    return 1;
}

typedef struct tek_tok {
    tok_str bytes; /* raw */
    tok_str chars; /* ByteLevel */
} tek_tok;

/* After the vocabulary: a special token's spelling takes its id over a vocabulary
 * token with the same bytes, as MistralConverter's dict update does. */
static ork_status specials_list(json_t *root, int64_t n_special, json_t *added, json_t *vocab) {
    json_t *st = json_object_get(root, "special_tokens");
    int64_t n_given;
    if (st && !json_is_null(st)) {
        if (!json_is_array(st)) return tok_fail(ORK_E_FORMAT, "tekken 'special_tokens' is not an array");
        n_given = (int64_t)json_array_size(st);
    } else {
        n_given = N_DEFAULT_SPECIALS;
        st = NULL;
    }
    if (n_given > n_special)
        return tok_fail(ORK_E_FORMAT, "tekken: %lld special tokens, more than default_num_special_tokens %lld",
                        (long long)n_given, (long long)n_special);
    tok_smap seen = {0}; /* the spellings so far (a linear search is quadratic in up to 10^6 of them) */
    for (int64_t i = 0; i < n_special; i++) {
        char fill[32];
        const char *s;
        if (i < n_given && st) {
            /* ranks must be 0 .. n-1 in the listed order's set; the id is the rank */
            json_t *e = json_array_get(st, (size_t)i);
            s = json_string_value(json_object_get(e, "token_str"));
            json_t *rk = json_object_get(e, "rank");
            if (!s || !json_is_integer(rk) || json_integer_value(rk) != i) {
                tok_smap_free(&seen);
                return tok_fail(ORK_E_FORMAT, "tekken special_tokens[%lld] needs 'token_str' and 'rank' %lld",
                                (long long)i, (long long)i);
            }
        } else if (i < n_given) {
            s = DEFAULT_SPECIALS[i];
        } else {
            snprintf(fill, sizeof fill, "<SPECIAL_%lld>", (long long)i);
            s = fill;
        }
        int32_t dup;
        if (tok_smap_get(&seen, s, strlen(s), &dup)) {
            tok_smap_free(&seen);
            return tok_fail(ORK_E_FORMAT, "tekken special token '%.40s' appears twice", s);
        }
        ork_status ss = tok_smap_set(&seen, s, strlen(s), (int32_t)i);
        if (ss != ORK_OK) { tok_smap_free(&seen); return ss; }
        json_object_set_new(vocab, s, json_integer(i));
        json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i, "content", s,
                                               "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special",
                                               1));
    }
    tok_smap_free(&seen);
    return ORK_OK;
}

/* Merges of token k (rank), all its splits into two tokens, by the halves' ranks. */
typedef struct split {
    int32_t l, r;
    size_t at;
} split;

static int split_cmp(const void *a, const void *b) {
    const split *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

ork_status tok_tekken_to_json(json_t *root, json_t **out) {
    *out = NULL;
    json_t *cfg = json_object_get(root, "config"), *list = json_object_get(root, "vocab");
    if (!json_is_object(cfg)) return tok_fail(ORK_E_FORMAT, "tekken file without a 'config' object");
    if (!json_is_array(list) || !json_array_size(list)) return tok_fail(ORK_E_FORMAT, "tekken file without a 'vocab' array");
    const char *pattern = json_string_value(json_object_get(cfg, "pattern"));
    if (!pattern) return tok_fail(ORK_E_FORMAT, "tekken config without a 'pattern' string");
    json_int_t n_special = 0, vocab_size = 0, n_list = (json_int_t)json_array_size(list);
    json_t *st = json_object_get(root, "special_tokens");
    json_int_t n_listed = json_is_array(st) ? (json_int_t)json_array_size(st) : N_DEFAULT_SPECIALS;
    /* mistral-common's files say 1000; each one costs an added token, so a few bytes asking for 10^6
     * would take a minute to load */
    if (!cfg_int(cfg, "default_num_special_tokens", n_listed, &n_special) || n_special < 0 || n_special > 65536)
        return tok_fail(ORK_E_FORMAT, "tekken config 'default_num_special_tokens' is not a valid count");
    if (!cfg_int(cfg, "default_vocab_size", n_list + n_special, &vocab_size) || vocab_size <= n_special ||
        vocab_size - n_special > n_list)
        return tok_fail(ORK_E_FORMAT, "tekken config 'default_vocab_size' %lld does not fit %lld special tokens and a "
                        "vocabulary of %lld", (long long)vocab_size, (long long)n_special, (long long)n_list);
    size_t n = (size_t)(vocab_size - n_special);

    tek_tok *toks = calloc(n, sizeof *toks);
    tok_smap ranks = {0};
    json_t *vocab = json_object(), *added = json_array(), *merges = json_array();
    ork_status s = toks && vocab && added && merges ? ORK_OK : tok_fail(ORK_E_NOMEM, "out of memory (tekken)");
    for (size_t i = 0; s == ORK_OK && i < n; i++) {
        json_t *e = json_array_get(list, i), *rk = json_object_get(e, "rank");
        const char *b64 = json_string_value(json_object_get(e, "token_bytes"));
        if (!b64 || (rk && (!json_is_integer(rk) || json_integer_value(rk) != (json_int_t)i))) {
            s = tok_fail(ORK_E_FORMAT, "tekken vocab[%zu] needs 'token_bytes' and rank %zu", i, i);
            break;
        }
        if (!b64_decode(b64, strlen(b64), &toks[i].bytes) || toks[i].bytes.n == 0) {
            s = tok_fail(ORK_E_FORMAT, "tekken vocab[%zu]: 'token_bytes' is not base64 of at least one byte", i);
            break;
        }
        int32_t dup;
        if (tok_smap_get(&ranks, toks[i].bytes.p, toks[i].bytes.n, &dup)) {
            s = tok_fail(ORK_E_FORMAT, "tekken vocab[%zu] repeats the bytes of vocab[%d]", i, (int)dup);
            break;
        }
        s = tok_smap_set(&ranks, toks[i].bytes.p, toks[i].bytes.n, (int32_t)i);
        for (size_t k = 0; s == ORK_OK && k < toks[i].bytes.n; k++)
            s = tok_str_putc(&toks[i].chars, tok_byte_to_cp((uint8_t)toks[i].bytes.p[k]));
        if (s == ORK_OK) s = tok_str_put(&toks[i].chars, "", 1); /* NUL-terminated, not counted */
        if (s == ORK_OK) {
            toks[i].chars.n--;
            json_object_set_new(vocab, toks[i].chars.p, json_integer((json_int_t)i + n_special));
        }
    }
    if (s == ORK_OK) s = specials_list(root, n_special, added, vocab);
    split *sp = NULL;
    size_t sp_cap = 0;
    tok_str m = {0};
    for (size_t i = 0; s == ORK_OK && i < n; i++) {
        size_t len = toks[i].bytes.n, ns = 0;
        if (len < 2) continue;
        if (sp_cap < len) {
            split *t = realloc(sp, len * sizeof *t);
            if (!t) { s = tok_fail(ORK_E_NOMEM, "out of memory (tekken merges)"); break; }
            sp = t;
            sp_cap = len;
        }
        for (size_t at = 1; at < len; at++) {
            int32_t l, r;
            if (tok_smap_get(&ranks, toks[i].bytes.p, at, &l) && tok_smap_get(&ranks, toks[i].bytes.p + at, len - at, &r))
                sp[ns++] = (split){l, r, at};
        }
        qsort(sp, ns, sizeof *sp, split_cmp);
        for (size_t k = 0; s == ORK_OK && k < ns; k++) {
            m.n = 0;
            s = tok_str_put(&m, toks[sp[k].l].chars.p, toks[sp[k].l].chars.n);
            if (s == ORK_OK) s = tok_str_put(&m, " ", 1);
            if (s == ORK_OK) s = tok_str_put(&m, toks[sp[k].r].chars.p, toks[sp[k].r].chars.n);
            if (s == ORK_OK) json_array_append_new(merges, json_stringn(m.p, m.n));
        }
    }
    tok_str_free(&m);
    free(sp);
    for (size_t i = 0; toks && i < n; i++) {
        tok_str_free(&toks[i].bytes);
        tok_str_free(&toks[i].chars);
    }
    free(toks);
    tok_smap_free(&ranks);
    if (s != ORK_OK) {
        json_decref(vocab);
        json_decref(added);
        json_decref(merges);
        return s;
    }
    *out = json_pack("{s:o, s:n, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]},"
                     " s:{s:s, s:b, s:b, s:b},"
                     " s:{s:s, s:o, s:o, s:n, s:n, s:n, s:n, s:b, s:b, s:b}}",
                     "added_tokens", added, "normalizer",
                     "pre_tokenizer", "type", "Sequence", "pretokenizers",
                     "type", "Split", "pattern", "Regex", pattern, "behavior", "Isolated", "invert", 0,
                     "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0,
                     "post_processor", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 0, "use_regex", 1,
                     "model", "type", "BPE", "vocab", vocab, "merges", merges, "dropout", "unk_token",
                     "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                     "ignore_merges", 1);
    if (!*out) return tok_fail(ORK_E_NOMEM, "tekken: building the tokenizer failed");
    return ORK_OK;
}
