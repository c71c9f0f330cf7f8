/* text/tokenizer.c — see tokenizer.h. The encode pipeline, in the order of
 * Hugging Face `tokenizers`' Tokenizer::encode:
 *   1. invalid UTF-8 -> U+FFFD (maximal subparts);
 *   2. added tokens with normalized=false are cut out of the raw text
 *      (leftmost-longest, as its aho-corasick matcher);
 *   3. each remaining segment is normalized, then added tokens with
 *      normalized=true are cut out of it;
 *   4. each remaining segment is pre-tokenized, and each piece goes through
 *      the model (BPE or Unigram);
 *   5. truncation to max_length minus the special tokens, the post-processor's
 *      special tokens, padding.
 * Also the loaders: tokenizer.json (plain or gzip), CLIP's vocab.json +
 * merges.txt and open_clip's bpe_simple_vocab_16e6.txt.gz (both turned into the
 * tokenizer.json transformers' CLIPTokenizer builds, then loaded as one), and
 * T5's spiece.model (tok_spm.c, the same way).
 * Owns each ork_tokenizer and everything in it. */
#include "text/tokenizer.h"

#include "platform/platform.h"
#include "text/prompt_format.h"
#include "text/tok_internal.h"
#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <zlib.h>

typedef struct added_tok {
    char *content;    /* as written */
    size_t content_n;
    char *match;      /* what is searched: content, normalized when normalized=true */
    size_t match_n;
    int32_t id;
    int normalized, lstrip, rstrip, single_word;
} added_tok;

struct ork_tokenizer {
    tok_norm *norm;
    tok_pre *pre;
    tok_model *model;
    added_tok *added;
    size_t n_added;
    tok_smap added_ids; /* content -> id */
    uint8_t added_first[2][256]; /* [normalized][byte]: some added token starts with it */
    tok_ids post_pre, post_post; /* the single-sequence template: ids before and after $A */
    int32_t pad_id;
    int32_t n_ids;
};

/* ---- file reading (plain or gzip: zlib reads both) ----------------------------------- */
static ork_status read_file(const char *path, char **out, size_t *out_n) {
    ork_file_info sb;
    if (ork_path_info(path, &sb) != ORK_OK) return tok_fail(ORK_E_IO, "%s: %s", path, strerror(errno));
    if (sb.kind != ORK_KIND_FILE) return tok_fail(ORK_E_IO, "%s: not a regular file", path);
    if (sb.size > ORK_TOK_MAX_FILE_BYTES)
        return tok_fail(ORK_E_FORMAT, "%s: %lld bytes, larger than any tokenizer file (limit %zu MiB)", path,
                        (long long)sb.size, ORK_TOK_MAX_FILE_BYTES >> 20);
    gzFile f = gzopen(path, "rb");
    if (!f) return tok_fail(ORK_E_IO, "%s: cannot open", path);
    tok_str s = {0};
    ork_status st = ORK_OK;
    char buf[1 << 16];
    for (;;) {
        int r = gzread(f, buf, sizeof buf);
        if (r < 0) {
            int e;
            const char *msg = gzerror(f, &e);
            st = tok_fail(ORK_E_FORMAT, "%s: read failed (%s)", path, msg);
            break;
        }
        if (r == 0) break;
        if (s.n + (size_t)r > ORK_TOK_MAX_FILE_BYTES) {
            st = tok_fail(ORK_E_FORMAT, "%s: more than %zu MiB once decompressed", path,
                          ORK_TOK_MAX_FILE_BYTES >> 20);
            break;
        }
        if ((st = tok_str_put(&s, buf, (size_t)r)) != ORK_OK) break;
    }
    gzclose(f);
    if (st == ORK_OK && !s.p) st = tok_str_put(&s, "", 0);
    if (st != ORK_OK) { tok_str_free(&s); return st; }
    *out = s.p;
    *out_n = s.n;
    return ORK_OK;
}

static ork_status read_json(const char *path, size_t flags, json_t **out) {
    char *b;
    size_t n;
    ORK_TRY(read_file(path, &b, &n));
    json_error_t err;
    *out = json_loadb(b, n, flags, &err);
    free(b);
    if (!*out)
        return tok_fail(ORK_E_FORMAT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return tok_fail(ORK_E_FORMAT, "%s: not a JSON object", path);
    }
    return ORK_OK;
}

static int file_exists(const char *path) {
    ork_file_info sb;
    return ork_path_info(path, &sb) == ORK_OK && sb.kind == ORK_KIND_FILE;
}

/* dst = a "/" b; 0 (and dst "") when it does not fit. */
static int pjoin(char *dst, size_t n, const char *a, const char *b) {
    int r = snprintf(dst, n, "%s/%s", a, b);
    if (r < 0 || (size_t)r >= n) { dst[0] = 0; return 0; }
    return 1;
}

/* ---- free / lookups ------------------------------------------------------------------------ */
void ork_tokenizer_free(ork_tokenizer *t) {
    if (!t) return;
    tok_norm_free(t->norm);
    tok_pre_free(t->pre);
    tok_model_free(t->model);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].match);
    }
    free(t->added);
    tok_smap_free(&t->added_ids);
    free(t->post_pre.v);
    free(t->post_post.v);
    free(t);
}

int32_t ork_tokenizer_token_to_id(const ork_tokenizer *t, const char *token) {
    int32_t id;
    if (!t || !token) return -1;
    if (tok_smap_get(&t->added_ids, token, strlen(token), &id)) return id;
    if (tok_model_token_to_id(t->model, token, strlen(token), &id)) return id;
    return -1;
}

const char *ork_tokenizer_id_to_token(const ork_tokenizer *t, int32_t id) {
    if (!t) return NULL;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) return t->added[i].content;
    return tok_model_id_to_token(t->model, id);
}

int32_t ork_tokenizer_vocab_size(const ork_tokenizer *t) { return t ? t->n_ids : 0; }
int32_t ork_tokenizer_pad_id(const ork_tokenizer *t) { return t ? t->pad_id : 0; }

/* ---- the post-processor ------------------------------------------------------------------ */
static ork_status push_all(tok_ids *dst, const tok_ids *src) {
    for (size_t i = 0; i < src->n; i++) ORK_TRY(tok_ids_push(dst, src->v[i]));
    return ORK_OK;
}

/* A special token's id from the post-processor: one the vocabulary holds (an id
 * past it would index past the text encoder's embedding table). */
static ork_status post_id(const ork_tokenizer *t, json_t *v, const char *type, tok_ids *dst) {
    json_int_t id = json_integer_value(v);
    if (id < 0 || id >= t->n_ids)
        return tok_fail(ORK_E_FORMAT, "post_processor %s: special token id %lld is outside the vocabulary (%d ids)",
                        type, (long long)id, (int)t->n_ids);
    return tok_ids_push(dst, (int32_t)id);
}

/* One processor: wraps what the earlier ones produced (pre' = mine + pre, post' = post + mine). */
static ork_status post_parse(ork_tokenizer *t, json_t *j) {
    if (!j || json_is_null(j)) return ORK_OK;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!json_is_object(j) || !type) return tok_fail(ORK_E_FORMAT, "post_processor without a 'type'");
    tok_ids pre = {0}, post = {0};
    ork_status st = ORK_OK;
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(j, "processors");
        if (!json_is_array(arr)) return tok_fail(ORK_E_FORMAT, "post_processor Sequence without 'processors'");
        for (size_t i = 0; i < json_array_size(arr); i++) ORK_TRY(post_parse(t, json_array_get(arr, i)));
        return ORK_OK;
    } else if (!strcmp(type, "ByteLevel")) {
        return ORK_OK; /* offsets only */
    } else if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        json_t *cls = json_object_get(j, "cls"), *sep = json_object_get(j, "sep");
        json_t *ci = json_array_get(cls, 1), *si = json_array_get(sep, 1);
        if (!json_is_integer(ci) || !json_is_integer(si))
            return tok_fail(ORK_E_FORMAT, "%s needs 'cls' and 'sep' as [token, id]", type);
        st = post_id(t, ci, type, &pre);
        if (st == ORK_OK) st = post_id(t, si, type, &post);
    } else if (!strcmp(type, "TemplateProcessing")) {
        json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
        if (!json_is_array(single)) return tok_fail(ORK_E_FORMAT, "TemplateProcessing without a 'single' template");
        int seen_a = 0;
        for (size_t i = 0; st == ORK_OK && i < json_array_size(single); i++) {
            json_t *it = json_array_get(single, i);
            json_t *sq = json_object_get(it, "Sequence"), *sp = json_object_get(it, "SpecialToken");
            if (sq) {
                const char *which = json_string_value(json_object_get(sq, "id"));
                if (!which || strcmp(which, "A") || seen_a) {
                    st = tok_fail(ORK_E_FORMAT, "TemplateProcessing 'single' must hold $A exactly once");
                    break;
                }
                seen_a = 1;
            } else if (sp) {
                const char *name = json_string_value(json_object_get(sp, "id"));
                json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
                if (!name || !json_is_array(ids)) {
                    st = tok_fail(ORK_E_FORMAT, "TemplateProcessing special token '%s' has no ids in 'special_tokens'",
                                  name ? name : "?");
                    break;
                }
                for (size_t k = 0; st == ORK_OK && k < json_array_size(ids); k++) {
                    json_t *v = json_array_get(ids, k);
                    if (!json_is_integer(v)) { st = tok_fail(ORK_E_FORMAT, "TemplateProcessing: '%s' ids must be integers", name); break; }
                    st = post_id(t, v, type, seen_a ? &post : &pre);
                }
            } else {
                st = tok_fail(ORK_E_FORMAT, "TemplateProcessing item %zu is neither Sequence nor SpecialToken", i);
            }
        }
        if (st == ORK_OK && !seen_a) st = tok_fail(ORK_E_FORMAT, "TemplateProcessing 'single' has no $A");
    } else {
        return tok_fail(ORK_E_UNSUPPORTED, "post_processor type '%s' is not supported", type);
    }
    if (st == ORK_OK) {
        tok_ids np = {0};
        st = push_all(&np, &pre);
        if (st == ORK_OK) st = push_all(&np, &t->post_pre);
        if (st == ORK_OK) st = push_all(&t->post_post, &post);
        if (st == ORK_OK) { free(t->post_pre.v); t->post_pre = np; }
        else free(np.v);
    }
    free(pre.v);
    free(post.v);
    return st;
}

/* ---- added tokens -------------------------------------------------------------------------- */
static ork_status added_parse(ork_tokenizer *t, json_t *arr) {
    if (!arr || json_is_null(arr)) return ORK_OK;
    if (!json_is_array(arr)) return tok_fail(ORK_E_FORMAT, "'added_tokens' is not an array");
    t->added = calloc(json_array_size(arr) + 1, sizeof *t->added);
    if (!t->added) return tok_fail(ORK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i), *c = json_object_get(e, "content"), *id = json_object_get(e, "id");
        if (!json_is_string(c) || !json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return tok_fail(ORK_E_FORMAT, "added_tokens[%zu] needs 'content' and a valid 'id'", i);
        added_tok *a = &t->added[t->n_added++];
        a->content_n = json_string_length(c);
        a->content = malloc(a->content_n + 1);
        if (!a->content) return tok_fail(ORK_E_NOMEM, "out of memory");
        memcpy(a->content, json_string_value(c), a->content_n + 1);
        a->id = (int32_t)json_integer_value(id);
        json_t *nz = json_object_get(e, "normalized");
        json_t *sp = json_object_get(e, "special");
        /* tokenizers' default: normalized = !special */
        a->normalized = json_is_boolean(nz) ? json_is_true(nz) : !json_is_true(sp);
        a->lstrip = json_is_true(json_object_get(e, "lstrip"));
        a->rstrip = json_is_true(json_object_get(e, "rstrip"));
        a->single_word = json_is_true(json_object_get(e, "single_word"));
        ORK_TRY(tok_smap_set(&t->added_ids, a->content, a->content_n, a->id));
        if (a->id + 1 > t->n_ids) t->n_ids = a->id + 1;
    }
    /* what each one matches: a normalized token is searched for in its normalized form */
    for (size_t i = 0; i < t->n_added; i++) {
        added_tok *a = &t->added[i];
        tok_str m = {0};
        if (a->normalized && t->norm) ORK_TRY(tok_norm_apply(t->norm, a->content, a->content_n, &m, NULL));
        else ORK_TRY(tok_str_put(&m, a->content, a->content_n));
        a->match = m.p;
        a->match_n = m.n;
        if (m.n) t->added_first[a->normalized ? 1 : 0][(uint8_t)m.p[0]] = 1;
    }
    return ORK_OK;
}

/* A segment of the text: [a, b) of its buffer, with the added token's id or -1. */
typedef struct seg {
    size_t a, b;
    int32_t id;
} seg;

typedef struct seglist {
    seg *v;
    size_t n, cap;
} seglist;

static ork_status seg_push(seglist *l, size_t a, size_t b, int32_t id) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        seg *nv = realloc(l->v, c * sizeof *nv);
        if (!nv) return tok_fail(ORK_E_NOMEM, "out of memory (segments)");
        l->v = nv;
        l->cap = c;
    }
    l->v[l->n++] = (seg){a, b, id};
    return ORK_OK;
}

static int cp_before(const char *s, size_t at, uint32_t *cp) { /* the code point ending at `at` */
    if (at == 0) return 0;
    size_t k = at - 1;
    while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
    tok_utf8_next(s + k, at - k, cp);
    return 1;
}

/* Rust regex's \w (tokenizers' single_word test): letters, marks, decimal digits,
 * letter numbers, connector punctuation ('_'), and the joiners. */
static int is_wordish(uint32_t cp) {
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
           c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC || cp == 0x200C || cp == 0x200D;
}

/* Cut the added tokens of one kind (normalized or not) out of s[0..n). */
static ork_status split_added(const ork_tokenizer *t, int normalized, const char *s, size_t n, seglist *out) {
    size_t start_offset = 0, i = 0;
    if (t->n_added)
        while (i < n) {
            if (!t->added_first[normalized ? 1 : 0][(uint8_t)s[i]]) { i++; continue; }
            const added_tok *best = NULL;
            for (size_t k = 0; k < t->n_added; k++) {
                const added_tok *a = &t->added[k];
                if (a->normalized != normalized || a->match_n == 0 || a->match_n > n - i) continue;
                if ((!best || a->match_n > best->match_n) && memcmp(s + i, a->match, a->match_n) == 0) best = a;
            }
            if (!best) { i++; continue; }
            size_t a0 = i, b0 = i + best->match_n;
            i = b0; /* the matcher resumes after the match whatever happens to it */
            uint32_t cp;
            if (best->single_word) {
                int start_ok = a0 == 0 || !(cp_before(s, a0, &cp) && is_wordish(cp));
                int stop_ok = b0 == n || !(tok_utf8_next(s + b0, n - b0, &cp), is_wordish(cp));
                if (!start_ok || !stop_ok) continue;
            }
            if (best->lstrip) {
                size_t ns = a0;
                while (cp_before(s, ns, &cp) && tok_is_whitespace(cp)) {
                    size_t k = ns - 1;
                    while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
                    ns = k;
                }
                a0 = ns > start_offset ? ns : start_offset;
            }
            if (best->rstrip)
                while (b0 < n) {
                    int l = tok_utf8_next(s + b0, n - b0, &cp);
                    if (!tok_is_whitespace(cp)) break;
                    b0 += (size_t)l;
                }
            if (start_offset < a0) ORK_TRY(seg_push(out, start_offset, a0, -1));
            ORK_TRY(seg_push(out, a0, b0, best->id));
            start_offset = b0;
            if (i < b0) i = b0;
        }
    if (start_offset < n) ORK_TRY(seg_push(out, start_offset, n, -1));
    return ORK_OK;
}

/* Steps 4: one normalized, token-free segment through the pre-tokenizer and model. */
static ork_status encode_segment(const ork_tokenizer *t, const char *s, size_t n, int at_start, tok_ids *ids) {
    if (n == 0) return ORK_OK;
    if (!t->pre) return tok_model_tokenize(t->model, s, n, ids);
    tok_pieces p = {0};
    ork_status st = tok_pre_apply(t->pre, s, n, at_start, &p);
    for (size_t i = 0; st == ORK_OK && i < p.n; i++) st = tok_model_tokenize(t->model, p.v[i].p, p.v[i].n, ids);
    tok_pieces_free(&p);
    return st;
}

static ork_status encode_ids(const ork_tokenizer *t, const char *text, size_t len, tok_ids *ids) {
    tok_str s = {0}, nrm = {0};
    seglist raw = {0}, sub = {0};
    ork_status st = tok_utf8_sanitize(text ? text : "", text ? len : 0, &s);
    if (st == ORK_OK) st = split_added(t, 0, s.p, s.n, &raw);
    for (size_t i = 0; st == ORK_OK && i < raw.n; i++) {
        seg g = raw.v[i];
        if (g.id >= 0) { st = tok_ids_push(ids, g.id); continue; }
        const char *p = s.p + g.a;
        size_t pn = g.b - g.a;
        size_t lead = 0; /* the bytes that come from the text's first character */
        if (pn) {
            uint32_t cp;
            lead = (size_t)tok_utf8_next(p, pn, &cp);
        }
        if (t->norm) {
            st = tok_norm_apply(t->norm, p, pn, &nrm, &lead);
            p = nrm.p;
            pn = nrm.n;
        }
        sub.n = 0;
        if (st == ORK_OK) st = split_added(t, 1, p, pn, &sub);
        for (size_t k = 0; st == ORK_OK && k < sub.n; k++) {
            if (sub.v[k].id >= 0) st = tok_ids_push(ids, sub.v[k].id);
            else st = encode_segment(t, p + sub.v[k].a, sub.v[k].b - sub.v[k].a,
                                     g.a == 0 && lead > 0 && sub.v[k].a == 0, ids);
        }
    }
    free(raw.v);
    free(sub.v);
    tok_str_free(&s);
    tok_str_free(&nrm);
    return st;
}

ork_status ork_tokenizer_encode(const ork_tokenizer *t, const char *text, size_t len, int32_t max_length,
                                uint32_t flags, int32_t *ids, int32_t *mask, int32_t cap, int32_t *n_out) {
    if (!t || !n_out || (cap > 0 && !ids) || cap < 0)
        return tok_fail(ORK_E_INVALID, "encode: NULL tokenizer or output");
    *n_out = 0;
    tok_ids body = {0};
    ork_status est = encode_ids(t, text, len, &body);
    if (est != ORK_OK) { free(body.v); return est; } /* the ids of the segments before the failure */
    int special = !(flags & ORK_TOK_NO_SPECIAL);
    size_t n_special = special ? t->post_pre.n + t->post_post.n : 0;
    size_t nb = body.n;
    if (max_length > 0 && (flags & ORK_TOK_TRUNCATE)) {
        if ((size_t)max_length < n_special) {
            free(body.v);
            return tok_fail(ORK_E_INVALID, "encode: max_length %d is below the %zu special tokens", max_length,
                            n_special);
        }
        if (nb > (size_t)max_length - n_special) nb = (size_t)max_length - n_special;
    }
    size_t total = nb + n_special;
    size_t padded = max_length > 0 && (flags & ORK_TOK_PAD) && total < (size_t)max_length ? (size_t)max_length : total;
    if (padded > INT32_MAX) { free(body.v); return tok_fail(ORK_E_INVALID, "encode: %zu tokens", padded); }
    *n_out = (int32_t)padded;
    if (padded > (size_t)cap) { free(body.v); return ORK_E_INVALID; }
    size_t k = 0;
    if (special)
        for (size_t i = 0; i < t->post_pre.n; i++) ids[k++] = t->post_pre.v[i];
    for (size_t i = 0; i < nb; i++) ids[k++] = body.v[i];
    if (special)
        for (size_t i = 0; i < t->post_post.n; i++) ids[k++] = t->post_post.v[i];
    for (size_t i = 0; i < padded; i++) {
        if (i >= total) ids[i] = t->pad_id;
        if (mask) mask[i] = i < total;
    }
    free(body.v);
    return ORK_OK;
}

/* ---- load ------------------------------------------------------------------------------------ */
static int32_t config_pad_id(const ork_tokenizer *t, const char *folder, json_t *root) {
    json_t *pad = json_object_get(json_object_get(root, "padding"), "pad_id");
    if (json_is_integer(pad)) {
        json_int_t v = json_integer_value(pad);
        return v < 0 || v > INT32_MAX ? -1 : (int32_t)v;
    }
    static const char *const files[] = {"tokenizer_config.json", "special_tokens_map.json"};
    for (int f = 0; folder && f < 2; f++) {
        char path[4096];
        if (!pjoin(path, sizeof path, folder, files[f])) continue;
        if (!file_exists(path)) continue;
        json_t *cfg = NULL;
        ork_log_demote(1); /* a broken side file only loses the pad token */
        ork_status st = read_json(path, JSON_DECODE_INT_AS_REAL, &cfg); /* model_max_length: 1e30 */
        ork_log_demote(-1);
        if (st != ORK_OK) continue;
        json_t *p = json_object_get(cfg, "pad_token");
        if (json_is_object(p)) p = json_object_get(p, "content");
        int32_t id = json_is_string(p) ? ork_tokenizer_token_to_id(t, json_string_value(p)) : -1;
        json_decref(cfg);
        if (id >= 0) return id;
    }
    int32_t id = ork_tokenizer_token_to_id(t, "<pad>");
    if (id < 0) id = ork_tokenizer_token_to_id(t, "<|endoftext|>");
    return id < 0 ? 0 : id;
}

static ork_status from_json(json_t *root, const char *folder, ork_tokenizer **out) {
    *out = NULL;
    if (!json_is_object(root)) return tok_fail(ORK_E_FORMAT, "not a JSON object");
    json_t *model = json_object_get(root, "model");
    if (!model && json_is_array(json_object_get(root, "vocab"))) {
        json_t *conv = NULL; /* Mistral's tekken.json (tok_tekken.c) */
        ORK_TRY(tok_tekken_to_json(root, &conv));
        ork_status st = from_json(conv, folder, out);
        json_decref(conv);
        return st;
    }
    if (!json_is_object(model)) return tok_fail(ORK_E_FORMAT, "no 'model' object");
    /* The file's "truncation" and "padding" are not applied: the caller's
     * max_length and flags decide, as transformers' call arguments do. */
    ork_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tok_fail(ORK_E_NOMEM, "out of memory");
    ork_status st = tok_model_parse(model, &t->model);
    if (st == ORK_OK) st = tok_norm_parse(json_object_get(root, "normalizer"), &t->norm);
    if (st == ORK_OK) st = tok_pre_parse(json_object_get(root, "pre_tokenizer"), &t->pre);
    if (st == ORK_OK) {
        t->n_ids = tok_model_vocab_size(t->model);
        st = added_parse(t, json_object_get(root, "added_tokens"));
    }
    if (st == ORK_OK) st = post_parse(t, json_object_get(root, "post_processor"));
    if (st != ORK_OK) { ork_tokenizer_free(t); return st; }
    t->pad_id = config_pad_id(t, folder, root);
    if (t->pad_id < 0 || t->pad_id >= t->n_ids) { /* the file's padding.pad_id: fills the encoder's input too */
        st = tok_fail(ORK_E_FORMAT, "padding.pad_id %lld is outside the vocabulary (%d ids)",
                      (long long)json_integer_value(json_object_get(json_object_get(root, "padding"), "pad_id")),
                      (int)t->n_ids);
        ork_tokenizer_free(t);
        return st;
    }
    *out = t;
    return ORK_OK;
}

ork_status ork_tokenizer_from_json(json_t *root, const char *folder, const char *what, ork_tokenizer **out) {
    if (!out) return tok_fail(ORK_E_INVALID, "from_json: NULL output");
    const char *outer = tok_get_source();
    if (!outer) tok_set_source(what); /* error lines name it */
    ork_status st = from_json(root, folder, out);
    if (!outer) tok_set_source(NULL);
    return st;
}

/* CLIP as transformers' CLIPTokenizer (tokenizers backend) builds it. */
static const char CLIP_JSON[] =
    "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"},"
    " {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"content\": \" \"}, {\"type\": \"Lowercase\"}]},"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\":"
    " \"<\\\\|startoftext\\\\|>|<\\\\|endoftext\\\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\\\p{L}]+|[\\\\p{N}]|[^\\\\s\\\\p{L}\\\\p{N}]+\"},"
    " \"behavior\": \"Removed\", \"invert\": true},"
    " {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}]},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<|endoftext|>\","
    " \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"</w>\", \"fuse_unk\": false,"
    " \"byte_fallback\": false, \"ignore_merges\": false}}";

static ork_status clip_from(json_t *vocab, json_t *merges, const char *folder, const char *what, ork_tokenizer **out) {
    json_error_t err;
    json_t *root = json_loads(CLIP_JSON, 0, &err);
    if (!root) {
        json_decref(vocab);
        json_decref(merges);
        return tok_fail(ORK_E_INTERNAL, "CLIP template: %s", err.text);
    }
    json_t *sot = json_object_get(vocab, "<|startoftext|>"), *eot = json_object_get(vocab, "<|endoftext|>");
    ork_status st = ORK_OK;
    if (!json_is_integer(sot) || !json_is_integer(eot)) {
        st = tok_fail(ORK_E_FORMAT, "%s: the vocabulary lacks <|startoftext|> or <|endoftext|>", what);
    } else {
        json_t *added = json_pack("[{s:I, s:s, s:b, s:b, s:b, s:b, s:b}, {s:I, s:s, s:b, s:b, s:b, s:b, s:b}]",
                                  "id", json_integer_value(sot), "content", "<|startoftext|>", "single_word", 0,
                                  "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1,
                                  "id", json_integer_value(eot), "content", "<|endoftext|>", "single_word", 0,
                                  "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
        json_t *post = json_pack("{s:s, s:[s, I], s:[s, I], s:b, s:b}", "type", "RobertaProcessing",
                                 "sep", "<|endoftext|>", json_integer_value(eot),
                                 "cls", "<|startoftext|>", json_integer_value(sot), "trim_offsets", 0, "add_prefix_space", 0);
        json_object_set_new(root, "added_tokens", added);
        json_object_set_new(root, "post_processor", post);
    }
    json_t *model = json_object_get(root, "model");
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    if (st == ORK_OK) st = ork_tokenizer_from_json(root, folder, what, out);
    json_decref(root);
    return st;
}

/* One merge per line, "a b"; header lines ("#version: ...") and empty lines skipped. */
static ork_status merges_from_text(char *text, size_t n, size_t first_line, size_t max_merges, const char *what,
                                   json_t *merges) {
    size_t line = 0;
    char *p = text, *end = text + n;
    while (p < end && json_array_size(merges) < max_merges) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        size_t ln = (size_t)(le - p);
        if (ln && p[ln - 1] == '\r') ln--;
        if (line >= first_line && ln && !(ln >= 8 && !memcmp(p, "#version", 8))) {
            const char *sp = memchr(p, ' ', ln);
            if (!sp || memchr(sp + 1, ' ', ln - (size_t)(sp + 1 - p)) || sp == p || sp + 1 == p + ln)
                return tok_fail(ORK_E_FORMAT, "%s:%zu: a merge must be two tokens separated by one space", what,
                                line + 1);
            json_t *s = json_stringn(p, ln);
            if (!s) return tok_fail(ORK_E_FORMAT, "%s:%zu: not UTF-8", what, line + 1);
            json_array_append_new(merges, s);
        }
        line++;
        if (!nl) break;
        p = nl + 1;
    }
    return ORK_OK;
}

#define CLIP_MERGES (49152 - 256 - 2)

/* open_clip's SimpleTokenizer: the merges are lines 1 .. 48894; the vocabulary is
 * the 256 byte characters, the same with "</w>", each merge joined, then the two
 * special tokens. */
static ork_status load_clip_bpe_gz(const char *path, const char *folder, ork_tokenizer **out) {
    char *text;
    size_t n;
    ORK_TRY(read_file(path, &text, &n));
    json_t *merges = json_array(), *vocab = json_object();
    ork_status st = merges ? merges_from_text(text, n, 1, CLIP_MERGES, path, merges) : ORK_E_NOMEM;
    free(text);
    if (st == ORK_OK && json_array_size(merges) != CLIP_MERGES)
        st = tok_fail(ORK_E_FORMAT, "%s: %zu merges; CLIP's vocabulary needs %d (a truncated file?)", path,
                      json_array_size(merges), CLIP_MERGES);
    int32_t id = 0;
    tok_str s = {0};
    for (int pass = 0; st == ORK_OK && pass < 2; pass++)
        for (int b = 0; st == ORK_OK && b < 256; b++) {
            /* bytes_to_unicode's order: the printable ranges first, then the rest */
            static int order[256], built;
            if (!built) {
                int k = 0;
                for (int c = 0; c < 256; c++)
                    if (tok_byte_to_cp((uint8_t)c) == (uint32_t)c) order[k++] = c;
                for (int c = 0; c < 256; c++)
                    if (tok_byte_to_cp((uint8_t)c) != (uint32_t)c) order[k++] = c;
                built = 1;
            }
            s.n = 0;
            st = tok_str_putc(&s, tok_byte_to_cp((uint8_t)order[b]));
            if (st == ORK_OK && pass) st = tok_str_put(&s, "</w>", 4);
            if (st == ORK_OK) json_object_set_new(vocab, s.p, json_integer(id++));
        }
    for (size_t i = 0; st == ORK_OK && i < json_array_size(merges); i++) {
        const char *m = json_string_value(json_array_get(merges, i)), *sp = strchr(m, ' ');
        s.n = 0;
        st = tok_str_put(&s, m, (size_t)(sp - m));
        if (st == ORK_OK) st = tok_str_put(&s, sp + 1, strlen(sp + 1));
        if (st == ORK_OK) json_object_set_new(vocab, s.p, json_integer(id++));
    }
    tok_str_free(&s);
    if (st == ORK_OK) {
        json_object_set_new(vocab, "<|startoftext|>", json_integer(id++));
        json_object_set_new(vocab, "<|endoftext|>", json_integer(id++));
        if (json_object_size(vocab) != (size_t)id)
            st = tok_fail(ORK_E_FORMAT, "%s: merges repeat a token (%zu distinct of %d)", path,
                          json_object_size(vocab), id);
    }
    if (st != ORK_OK) {
        json_decref(vocab);
        json_decref(merges);
        return st;
    }
    return clip_from(vocab, merges, folder, path, out);
}

static ork_status load_vocab_merges(const char *vocab_path, const char *merges_path, const char *folder,
                                    ork_tokenizer **out) {
    json_t *vocab;
    ORK_TRY(read_json(vocab_path, 0, &vocab));
    char *text;
    size_t n;
    ork_status st = read_file(merges_path, &text, &n);
    if (st != ORK_OK) { json_decref(vocab); return st; }
    json_t *merges = json_array();
    st = merges ? merges_from_text(text, n, 0, (size_t)-1, merges_path, merges) : ORK_E_NOMEM;
    free(text);
    if (st != ORK_OK) { json_decref(vocab); json_decref(merges); return st; }
    return clip_from(vocab, merges, folder, merges_path, out);
}

/* T5's spiece.model; tokenizer_config.json's extra_ids when there is one (else 100). */
static ork_status load_spm(const char *path, const char *folder, ork_tokenizer **out) {
    char *data;
    size_t n;
    ORK_TRY(read_file(path, &data, &n));
    int extra = 100;
    char cfgp[4096];
    json_t *cfg = NULL;
    if (pjoin(cfgp, sizeof cfgp, folder, "tokenizer_config.json") && file_exists(cfgp)) {
        ork_log_demote(1);
        ork_status cs = read_json(cfgp, JSON_DECODE_INT_AS_REAL, &cfg);
        ork_log_demote(-1);
        json_t *e = cs == ORK_OK ? json_object_get(cfg, "extra_ids") : NULL;
        if (json_is_number(e) && json_number_value(e) >= 0 && json_number_value(e) <= 100000)
            extra = (int)json_number_value(e);
        json_decref(cfg);
    }
    json_t *root = NULL;
    ork_status st = tok_spm_to_json(data, n, extra, &root);
    free(data);
    if (st == ORK_OK) st = ork_tokenizer_from_json(root, folder, path, out);
    json_decref(root);
    return st;
}

/* The files a folder's tokenizer is read from, in the order load_path tries them. */
static const char *const dir_jsons[] = {"tokenizer.json", "tokenizer.json.gz", "tekken.json"};

int ork_tokenizer_dir_has(const char *dir) {
    char a[4096], b[4096];
    for (int i = 0; i < 3; i++)
        if (pjoin(a, sizeof a, dir, dir_jsons[i]) && file_exists(a)) return 1;
    if (pjoin(a, sizeof a, dir, "vocab.json") && pjoin(b, sizeof b, dir, "merges.txt") && file_exists(a) &&
        file_exists(b))
        return 1;
    return (pjoin(a, sizeof a, dir, "bpe_simple_vocab_16e6.txt.gz") && file_exists(a)) ||
           (pjoin(a, sizeof a, dir, "spiece.model") && file_exists(a));
}

static ork_status load_path(const char *path, ork_tokenizer **out) {
    ork_file_info sb;
    if (strlen(path) > 3800) return tok_fail(ORK_E_INVALID, "path of %zu bytes", strlen(path));
    if (ork_path_info(path, &sb) != ORK_OK) return tok_fail(ORK_E_IO, "%s: %s", path, strerror(errno));
    char folder[4096], a[4096], b[4096];
    if (sb.kind == ORK_KIND_DIR) {
        snprintf(folder, sizeof folder, "%s", path);
        for (int i = 0; i < 3; i++) {
            if (!pjoin(a, sizeof a, folder, dir_jsons[i])) continue;
            if (file_exists(a)) {
                tok_set_source(a); /* name the file, not the folder */
                return load_path(a, out);
            }
        }
        pjoin(a, sizeof a, folder, "vocab.json");
        pjoin(b, sizeof b, folder, "merges.txt");
        if (file_exists(a) && file_exists(b)) return load_vocab_merges(a, b, folder, out);
        pjoin(a, sizeof a, folder, "bpe_simple_vocab_16e6.txt.gz");
        if (file_exists(a)) return load_clip_bpe_gz(a, folder, out);
        pjoin(a, sizeof a, folder, "spiece.model");
        if (file_exists(a)) {
            tok_set_source(a);
            return load_spm(a, folder, out);
        }
        return tok_fail(ORK_E_IO, "%s: no tokenizer.json, tekken.json, vocab.json + merges.txt, "
                        "bpe_simple_vocab_16e6.txt.gz or spiece.model", folder);
    }
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    else snprintf(folder, sizeof folder, ".");
    const char *base = slash ? strrchr(path, '/') + 1 : path;
    size_t bl = strlen(base);
    if (!strcmp(base, "vocab.json") || !strcmp(base, "merges.txt")) {
        pjoin(a, sizeof a, folder, "vocab.json");
        pjoin(b, sizeof b, folder, "merges.txt");
        return load_vocab_merges(a, b, folder, out);
    }
    if (bl >= 7 && !strcmp(base + bl - 7, ".txt.gz")) return load_clip_bpe_gz(path, folder, out);
    if (bl >= 6 && !strcmp(base + bl - 6, ".model")) return load_spm(path, folder, out);
    json_t *root;
    ORK_TRY(read_json(path, JSON_ALLOW_NUL, &root)); /* tekken.json spells byte 0 as an escaped NUL */
    ork_status st = ork_tokenizer_from_json(root, folder, path, out);
    json_decref(root);
    return st;
}

ork_status ork_tokenizer_load(const char *path, ork_tokenizer **out) {
    if (!path || !out) return tok_fail(ORK_E_INVALID, "load: NULL path or output");
    *out = NULL;
    tok_set_source(path); /* error lines deep in the file's parts name it */
    ork_status st = load_path(path, out);
    tok_set_source(NULL);
    return st;
}

/* ---- the service ------------------------------------------------------------------------------- */
static const ork_tokenizer_api g_api = {
    .abi = ORK_ABI_INIT(ork_tokenizer_api),
    .load = ork_tokenizer_load,
    .free = ork_tokenizer_free,
    .encode = ork_tokenizer_encode,
    .vocab_size = ork_tokenizer_vocab_size,
    .token_to_id = ork_tokenizer_token_to_id,
    .id_to_token = ork_tokenizer_id_to_token,
    .pad_id = ork_tokenizer_pad_id,
    .encode_prompt = ork_prompt_encode,
    .encode_template = ork_prompt_encode_template,
};

const ork_tokenizer_api *ork_tokenizer_api_table(void) { return &g_api; }
