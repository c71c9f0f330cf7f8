/* text/tok_spm.c — T5's spiece.model (a SentencePiece ModelProto, protobuf) read
 * into the tokenizer.json transformers' T5Tokenizer makes of it, then loaded as
 * any other: the pieces and scores in order, then <extra_id_99> .. <extra_id_0>
 * (score 0); the precompiled charsmap as the Precompiled normalizer (none when
 * empty); WhitespaceSplit then Metaspace ("▁", prepend always); "$A </s>";
 * control and unknown pieces as special added tokens, user-defined pieces as
 * plain added tokens (both never normalized). Only Unigram models (T5's).
 * Owns nothing past the call. */
#include "text/tok_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- protobuf wire format ----------------------------------------------------------- */
typedef struct pb {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v) {
    uint64_t x = 0;
    for (int s = 0; s < 64; s += 7) {
        if (b->p >= b->end) return 0;
        uint8_t c = *b->p++;
        x |= (uint64_t)(c & 0x7F) << s;
        if (!(c & 0x80)) { *v = x; return 1; }
    }
    return 0;
}

/* The next field: its number, wire type, and (for length-delimited ones) its bytes;
 * 0 at the end, -1 when malformed. Varints land in *v, fixed32 in *f32. */
static int pb_next(pb *b, uint32_t *field, uint32_t *wire, uint64_t *v, pb *sub) {
    if (b->p >= b->end) return 0;
    uint64_t key;
    if (!pb_varint(b, &key) || key >> 32) return -1;
    *field = (uint32_t)(key >> 3);
    *wire = (uint32_t)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(b, v) ? 1 : -1;
    case 1: if (b->end - b->p < 8) return -1; b->p += 8; return 1;
    case 5: if (b->end - b->p < 4) return -1; memcpy(v, b->p, 4); b->p += 4; return 1; /* little-endian host */
    case 2: {
        uint64_t n;
        if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return -1;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return 1;
    }
    default: return -1;
    }
}

static ork_status bad(const char *what) { return tok_fail(ORK_E_FORMAT, "%s", what); }

static json_t *jpiece_str(const pb *s) { return json_stringn((const char *)s->p, (size_t)(s->end - s->p)); }

/* One SentencePiece {1: piece, 2: score (float), 3: type}. */
static ork_status piece(pb *m, json_t *vocab, json_t *added, int64_t id, int64_t *unk_id) {
    uint32_t f, w;
    uint64_t v = 0;
    pb s = {0}, str = {0};
    float score = 0;
    uint64_t type = 1; /* NORMAL */
    int have = 0, r;
    while ((r = pb_next(m, &f, &w, &v, &s)) > 0) {
        if (f == 1 && w == 2) { str = s; have = 1; }
        else if (f == 2 && w == 5) { uint32_t u = (uint32_t)v; memcpy(&score, &u, 4); }
        else if (f == 3 && w == 0) type = v;
        v = 0;
    }
    if (r < 0 || !have) return bad("a piece without its string");
    /* JSON holds no NaN or infinity: such a piece would drop out and shift every id after it */
    if (!isfinite(score)) return bad("a piece with a non-finite score");
    json_t *name = jpiece_str(&str);
    if (!name) return bad("a piece that is not UTF-8");
    if (json_array_append_new(vocab, json_pack("[O, f]", name, (double)score)) != 0) {
        json_decref(name);
        return tok_fail(ORK_E_NOMEM, "out of memory (pieces)");
    }
    if (type == 2 && *unk_id < 0) *unk_id = id;
    if (type == 2 || type == 3 || type == 4)
        json_array_append_new(added, json_pack("{s:I, s:O, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", name,
                                               "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                               "special", type != 4));
    json_decref(name);
    return ORK_OK;
}

ork_status tok_spm_to_json(const char *data, size_t n, int extra_ids, json_t **out) {
    *out = NULL;
    pb b = {(const uint8_t *)data, (const uint8_t *)data + n}, s;
    json_t *vocab = json_array(), *added = json_array();
    json_t *charsmap = NULL;
    ork_status st = ORK_OK;
    int64_t id = 0, unk_id = -1;
    uint32_t f, w;
    uint64_t v;
    int r;
    while (st == ORK_OK && (r = pb_next(&b, &f, &w, &v, &s)) > 0) {
        if (f == 1 && w == 2) st = piece(&s, vocab, added, id++, &unk_id);
        else if (f == 2 && w == 2) { /* trainer_spec: model_type (3), byte_fallback (35) */
            pb t = s, u;
            int q = 0;
            while (st == ORK_OK && (q = pb_next(&t, &f, &w, &v, &u)) > 0) { /* one line: the first refusal */
                if (f == 3 && w == 0 && v != 1)
                    st = tok_fail(ORK_E_UNSUPPORTED, "model type %llu (only Unigram, 1, is read; "
                                  "use the model's tokenizer.json)", (unsigned long long)v);
                else if (f == 35 && w == 0 && v)
                    st = tok_fail(ORK_E_UNSUPPORTED, "byte_fallback (use the model's tokenizer.json)");
            }
            if (q < 0 && st == ORK_OK) st = bad("a malformed trainer_spec");
        } else if (f == 3 && w == 2) { /* normalizer_spec: precompiled_charsmap (2) */
            pb t = s, u;
            int q;
            while ((q = pb_next(&t, &f, &w, &v, &u)) > 0)
                if (f == 2 && w == 2 && u.end > u.p) {
                    /* base64, as tokenizer.json holds it */
                    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                    size_t len = (size_t)(u.end - u.p), k = 0;
                    char *e = malloc(4 * (len / 3 + 1) + 1);
                    if (!e) { st = tok_fail(ORK_E_NOMEM, "out of memory (charsmap)"); break; }
                    for (size_t i = 0; i < len; i += 3) {
                        uint32_t x = (uint32_t)u.p[i] << 16 | (i + 1 < len ? (uint32_t)u.p[i + 1] << 8 : 0) |
                                     (i + 2 < len ? u.p[i + 2] : 0);
                        e[k++] = b64[(x >> 18) & 63];
                        e[k++] = b64[(x >> 12) & 63];
                        e[k++] = i + 1 < len ? b64[(x >> 6) & 63] : '=';
                        e[k++] = i + 2 < len ? b64[x & 63] : '=';
                    }
                    json_decref(charsmap);
                    charsmap = json_stringn(e, k);
                    free(e);
                }
            if (q < 0 && st == ORK_OK) st = bad("a malformed normalizer_spec");
        }
    }
    if (st == ORK_OK && r < 0) st = bad("not a SentencePiece model (malformed protobuf)");
    if (st == ORK_OK && id == 0) st = bad("no pieces");
    if (st == ORK_OK && unk_id < 0) st = bad("no unknown piece");
    int64_t eos = -1;
    for (size_t i = 0; st == ORK_OK && i < json_array_size(vocab); i++)
        if (!strcmp(json_string_value(json_array_get(json_array_get(vocab, i), 0)), "</s>")) { eos = (int64_t)i; break; }
    if (st == ORK_OK && eos < 0) st = bad("no </s> piece (T5's layout is the one read)");
    if (st != ORK_OK) {
        json_decref(vocab);
        json_decref(added);
        json_decref(charsmap);
        return st;
    }
    for (int i = extra_ids - 1; i >= 0; i--) {
        char name[32];
        snprintf(name, sizeof name, "<extra_id_%d>", i);
        json_array_append_new(vocab, json_pack("[s, f]", name, 0.0));
        json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id++, "content",
                                               name, "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                               "special", 1));
    }
    json_t *root = json_pack(
        "{s:o, s:o, s:{s:s, s:[{s:s}, {s:s, s:s, s:s, s:b}]},"
        " s:{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[I], s:[s]}}},"
        " s:{s:s, s:I, s:o, s:b}}",
        "added_tokens", added, "normalizer", charsmap ? json_pack("{s:s, s:o}", "type", "Precompiled",
                                                                  "precompiled_charsmap", charsmap) : json_null(),
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "WhitespaceSplit", "type", "Metaspace",
        "replacement", "\xe2\x96\x81", "prepend_scheme", "always", "split", 1,
        "post_processor", "type", "TemplateProcessing", "single", "Sequence", "id", "A", "type_id", 0,
        "SpecialToken", "id", "</s>", "type_id", 0, "special_tokens", "</s>", "id", "</s>", "ids", (json_int_t)eos,
        "tokens", "</s>",
        "model", "type", "Unigram", "unk_id", (json_int_t)unk_id, "vocab", vocab, "byte_fallback", 0);
    if (!root) return tok_fail(ORK_E_NOMEM, "out of memory");
    *out = root;
    return ORK_OK;
}
