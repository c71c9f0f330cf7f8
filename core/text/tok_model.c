/* text/tok_model.c — the two tokenizer.json models FLUX's encoders need, with
 * Hugging Face `tokenizers`' exact semantics:
 *   BPE: per-character symbols (continuing_subword_prefix / end_of_word_suffix,
 *        unk fusing, byte_fallback, ignore_merges), merged by a priority queue on
 *        (rank, position) exactly as tokenizers' Word::merge_all does;
 *   Unigram: SentencePiece's Viterbi over a trie of the pieces (unknown code
 *        points scored min_score - 10, consecutive unknowns fused into one).
 * Owns the vocabularies, the merge map and the piece trie. */
#include "text/tok_internal.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>

typedef enum { M_BPE, M_UNIGRAM } model_kind;

struct tok_model {
    model_kind kind;
    tok_smap vocab;    /* token -> id */
    char **id_tok;     /* id -> token (borrowed from vocab's keys), NULL for holes */
    int32_t n_ids;     /* max id + 1 */
    int32_t unk_id;    /* -1: none */
    int byte_fallback;
    int32_t byte_ids[256]; /* "<0xXX>" ids, -1 when absent */
    /* BPE */
    tok_imap merges; /* (a << 32 | b) -> (rank << 32 | new id) */
    char *prefix, *suffix;
    size_t prefix_n, suffix_n;
    int fuse_unk, ignore_merges;
    /* Unigram */
    double *scores;
    double min_score;
    tok_imap trie;     /* (node << 8 | byte) -> child node */
    int32_t *term;     /* node -> piece id or -1 */
    uint32_t n_nodes, term_cap;
};

void tok_model_free(tok_model *m) {
    if (!m) return;
    tok_smap_free(&m->vocab);
    free(m->id_tok);
    tok_imap_free(&m->merges);
    free(m->prefix);
    free(m->suffix);
    free(m->scores);
    tok_imap_free(&m->trie);
    free(m->term);
    free(m);
}

int tok_model_token_to_id(const tok_model *m, const char *s, size_t n, int32_t *id) {
    return tok_smap_get(&m->vocab, s, n, id);
}
int32_t tok_model_vocab_size(const tok_model *m) { return m->n_ids; }
const char *tok_model_id_to_token(const tok_model *m, int32_t id) {
    return id >= 0 && id < m->n_ids ? m->id_tok[id] : NULL;
}

static ork_status index_ids(tok_model *m) {
    m->id_tok = calloc(m->n_ids ? (size_t)m->n_ids : 1, sizeof *m->id_tok);
    if (!m->id_tok) return tok_fail(ORK_E_NOMEM, "out of memory (vocabulary)");
    for (uint32_t i = 0; i < m->vocab.n; i++) {
        int32_t id = m->vocab.vals[i];
        if (id >= 0 && id < m->n_ids) m->id_tok[id] = m->vocab.keys[i];
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (!tok_smap_get(&m->vocab, name, 6, &m->byte_ids[b])) m->byte_ids[b] = -1;
    }
    return ORK_OK;
}

/* ---- BPE ---------------------------------------------------------------------------- */
typedef struct sym {
    int32_t c;
    int32_t prev, next;
    size_t len;
} sym;

typedef struct mrg {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} mrg;

static int mrg_less(const mrg *a, const mrg *b) { /* the heap's top: lowest rank, then lowest pos */
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct heap {
    mrg *v;
    size_t n, cap;
} heap;

static ork_status heap_push(heap *h, mrg x) {
    if (h->n == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 32;
        mrg *nv = realloc(h->v, c * sizeof *nv);
        if (!nv) return tok_fail(ORK_E_NOMEM, "out of memory (BPE queue)");
        h->v = nv;
        h->cap = c;
    }
    size_t i = h->n++;
    h->v[i] = x;
    while (i && mrg_less(&h->v[i], &h->v[(i - 1) / 2])) {
        mrg t = h->v[i]; h->v[i] = h->v[(i - 1) / 2]; h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return ORK_OK;
}

static mrg heap_pop(heap *h) {
    mrg top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < h->n && mrg_less(&h->v[l], &h->v[s])) s = l;
        if (r < h->n && mrg_less(&h->v[r], &h->v[s])) s = r;
        if (s == i) break;
        mrg t = h->v[i]; h->v[i] = h->v[s]; h->v[s] = t;
        i = s;
    }
    return top;
}

static int merge_lookup(const tok_model *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id) {
    uint64_t v;
    if (!tok_imap_get(&m->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return 0;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return 1;
}

static ork_status sym_push(sym **v, size_t *n, size_t *cap, int32_t c, size_t len) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        sym *nv = realloc(*v, nc * sizeof *nv);
        if (!nv) return tok_fail(ORK_E_NOMEM, "out of memory (BPE word)");
        *v = nv;
        *cap = nc;
    }
    (*v)[*n] = (sym){c, (int32_t)*n - 1, (int32_t)*n + 1, len};
    (*n)++;
    return ORK_OK;
}

static ork_status bpe_tokenize(const tok_model *m, const char *s, size_t n, tok_ids *out) {
    if (n == 0) return ORK_OK;
    int32_t id;
    if (m->ignore_merges && tok_smap_get(&m->vocab, s, n, &id)) return tok_ids_push(out, id);
    sym *w = NULL;
    size_t wn = 0, wcap = 0;
    tok_str key = {0};
    heap h = {0};
    ork_status st = ORK_OK;
    int have_unk = 0;
    int32_t unk_c = 0;
    size_t unk_len = 0;
    /* merge_word: one symbol per character */
    for (size_t i = 0; st == ORK_OK && i < n;) {
        uint32_t cp;
        size_t l = (size_t)tok_utf8_next(s + i, n - i, &cp);
        int is_first = i == 0, is_last = i + l >= n;
        key.n = 0;
        if (!is_first && m->prefix_n) st = tok_str_put(&key, m->prefix, m->prefix_n);
        if (st == ORK_OK) st = tok_str_put(&key, s + i, l);
        if (st == ORK_OK && is_last && m->suffix_n) st = tok_str_put(&key, m->suffix, m->suffix_n);
        if (st != ORK_OK) break;
        if (tok_smap_get(&m->vocab, key.p, key.n, &id)) {
            if (have_unk) { st = sym_push(&w, &wn, &wcap, unk_c, unk_len); have_unk = 0; }
            if (st == ORK_OK) st = sym_push(&w, &wn, &wcap, id, l);
        } else {
            int done = 0;
            if (m->byte_fallback) {
                int all = 1;
                for (size_t k = 0; k < key.n; k++) all &= m->byte_ids[(uint8_t)key.p[k]] >= 0;
                if (all) {
                    for (size_t k = 0; st == ORK_OK && k < key.n; k++)
                        st = sym_push(&w, &wn, &wcap, m->byte_ids[(uint8_t)key.p[k]], 1);
                    done = 1;
                }
            }
            if (!done && m->unk_id >= 0) {
                if (have_unk && m->fuse_unk) unk_len += l;
                else {
                    if (have_unk) st = sym_push(&w, &wn, &wcap, unk_c, unk_len);
                    unk_c = m->unk_id;
                    unk_len = l;
                    have_unk = 1;
                }
            }
            /* no unk token: the character is dropped, as tokenizers does */
        }
        i += l;
    }
    if (st == ORK_OK && have_unk) st = sym_push(&w, &wn, &wcap, unk_c, unk_len);
    if (st == ORK_OK && wn) w[wn - 1].next = -1;
    /* merge_all */
    for (size_t i = 0; st == ORK_OK && i + 1 < wn; i++) {
        uint32_t rank;
        int32_t nid;
        if (merge_lookup(m, w[i].c, w[i + 1].c, &rank, &nid)) st = heap_push(&h, (mrg){rank, (uint32_t)i, nid});
    }
    while (st == ORK_OK && h.n) {
        mrg top = heap_pop(&h);
        sym *cur = &w[top.pos];
        if (cur->len == 0 || cur->next == -1) continue;
        size_t next_pos = (size_t)cur->next;
        sym right = w[next_pos];
        uint32_t rank;
        int32_t nid;
        if (!merge_lookup(m, cur->c, right.c, &rank, &nid) || nid != top.new_id) continue;
        cur->c = top.new_id;
        cur->len += right.len;
        cur->next = right.next;
        w[next_pos].len = 0;
        if (right.next > -1 && (size_t)right.next < wn) w[right.next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && merge_lookup(m, w[cur->prev].c, cur->c, &rank, &nid))
            st = heap_push(&h, (mrg){rank, (uint32_t)cur->prev, nid});
        if (st == ORK_OK && cur->next >= 0 && (size_t)cur->next < wn &&
            merge_lookup(m, cur->c, w[cur->next].c, &rank, &nid))
            st = heap_push(&h, (mrg){rank, top.pos, nid});
    }
    for (size_t i = 0; st == ORK_OK && i < wn; i++)
        if (w[i].len) st = tok_ids_push(out, w[i].c);
    free(w);
    free(h.v);
    tok_str_free(&key);
    return st;
}

static ork_status opt_string(json_t *o, const char *k, char **out, size_t *n) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return ORK_OK;
    if (!json_is_string(v)) return tok_fail(ORK_E_FORMAT, "model.%s must be a string or null", k);
    *n = json_string_length(v);
    *out = malloc(*n + 1);
    if (!*out) return tok_fail(ORK_E_NOMEM, "out of memory");
    memcpy(*out, json_string_value(v), *n + 1);
    return ORK_OK;
}

static ork_status bpe_parse(json_t *j, tok_model *m) {
    json_t *vocab = json_object_get(j, "vocab"), *merges = json_object_get(j, "merges");
    if (!json_is_object(vocab)) return tok_fail(ORK_E_FORMAT, "BPE model without a 'vocab' object");
    if (!json_is_array(merges)) return tok_fail(ORK_E_FORMAT, "BPE model without a 'merges' array");
    json_t *drop = json_object_get(j, "dropout");
    if (json_is_number(drop) && json_number_value(drop) != 0.0)
        return tok_fail(ORK_E_UNSUPPORTED, "BPE dropout %g is not supported (encoding must be deterministic)",
                        json_number_value(drop));
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
            return tok_fail(ORK_E_FORMAT, "BPE vocab entry '%.40s' has no valid id", k);
        int32_t id = (int32_t)json_integer_value(v);
        ORK_TRY(tok_smap_set(&m->vocab, k, strlen(k), id));
        if (id + 1 > m->n_ids) m->n_ids = id + 1;
    }
    ORK_TRY(opt_string(j, "continuing_subword_prefix", &m->prefix, &m->prefix_n));
    ORK_TRY(opt_string(j, "end_of_word_suffix", &m->suffix, &m->suffix_n));
    m->fuse_unk = json_is_true(json_object_get(j, "fuse_unk"));
    m->byte_fallback = json_is_true(json_object_get(j, "byte_fallback"));
    m->ignore_merges = json_is_true(json_object_get(j, "ignore_merges"));
    m->unk_id = -1;
    json_t *unk = json_object_get(j, "unk_token");
    if (json_is_string(unk) && !tok_smap_get(&m->vocab, json_string_value(unk), json_string_length(unk), &m->unk_id))
        return tok_fail(ORK_E_FORMAT, "BPE unk_token '%s' is not in the vocabulary", json_string_value(unk));
    tok_str joined = {0};
    ork_status st = ORK_OK;
    for (size_t r = 0; st == ORK_OK && r < json_array_size(merges); r++) {
        json_t *e = json_array_get(merges, r);
        const char *a, *b;
        size_t an, bn;
        if (json_is_string(e)) { /* "a b" */
            const char *s = json_string_value(e), *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = tok_fail(ORK_E_FORMAT, "BPE merge %zu ('%.40s') is not two tokens", r, s);
                break;
            }
            a = s; an = (size_t)(sp - s); b = sp + 1; bn = strlen(b);
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0)); an = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1)); bn = json_string_length(json_array_get(e, 1));
        } else {
            st = tok_fail(ORK_E_FORMAT, "BPE merge %zu is neither \"a b\" nor [a, b]", r);
            break;
        }
        int32_t ia, ib, in;
        if (!tok_smap_get(&m->vocab, a, an, &ia) || !tok_smap_get(&m->vocab, b, bn, &ib)) {
            st = tok_fail(ORK_E_FORMAT, "BPE merge %zu ('%.*s' '%.*s') names a token not in the vocabulary", r,
                          (int)an, a, (int)bn, b);
            break;
        }
        size_t skip = m->prefix_n && bn >= m->prefix_n && !memcmp(b, m->prefix, m->prefix_n) ? m->prefix_n : 0;
        joined.n = 0;
        st = tok_str_put(&joined, a, an);
        if (st == ORK_OK) st = tok_str_put(&joined, b + skip, bn - skip);
        if (st != ORK_OK) break;
        if (!tok_smap_get(&m->vocab, joined.p, joined.n, &in)) {
            st = tok_fail(ORK_E_FORMAT, "BPE merge %zu: the merged token '%.*s' is not in the vocabulary", r,
                          (int)(joined.n > 60 ? 60 : joined.n), joined.p);
            break;
        }
        st = tok_imap_set(&m->merges, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib, ((uint64_t)r << 32) | (uint32_t)in);
    }
    tok_str_free(&joined);
    ORK_TRY(st);
    return index_ids(m);
}

/* ---- Unigram ---------------------------------------------------------------------- */
static ork_status trie_insert(tok_model *m, const char *s, size_t n, int32_t id) {
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = ((uint64_t)node << 8) | (uint8_t)s[i], child;
        if (!tok_imap_get(&m->trie, key, &child)) {
            if (m->n_nodes == m->term_cap) {
                uint32_t c = m->term_cap * 2;
                int32_t *t = realloc(m->term, c * sizeof *t);
                if (!t) return tok_fail(ORK_E_NOMEM, "out of memory (Unigram trie)");
                m->term = t;
                m->term_cap = c;
            }
            m->term[m->n_nodes] = -1;
            child = m->n_nodes++;
            ORK_TRY(tok_imap_set(&m->trie, key, child));
        }
        node = (uint32_t)child;
    }
    m->term[node] = id;
    return ORK_OK;
}

static ork_status unigram_parse(json_t *j, tok_model *m) {
    json_t *vocab = json_object_get(j, "vocab");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return tok_fail(ORK_E_FORMAT, "Unigram model without a non-empty 'vocab' array");
    size_t nv = json_array_size(vocab);
    if (nv >= INT32_MAX) return tok_fail(ORK_E_FORMAT, "Unigram vocab of %zu pieces", nv);
    m->n_ids = (int32_t)nv;
    m->scores = malloc(nv * sizeof *m->scores);
    m->term_cap = 1024;
    m->term = malloc(m->term_cap * sizeof *m->term);
    if (!m->scores || !m->term) return tok_fail(ORK_E_NOMEM, "out of memory (Unigram)");
    m->term[0] = -1;
    m->n_nodes = 1;
    m->min_score = 1e300;
    for (size_t i = 0; i < nv; i++) {
        json_t *e = json_array_get(vocab, i);
        json_t *p = json_array_get(e, 0), *sc = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(sc))
            return tok_fail(ORK_E_FORMAT, "Unigram vocab entry %zu is not [piece, score]", i);
        ORK_TRY(tok_smap_set(&m->vocab, json_string_value(p), json_string_length(p), (int32_t)i));
        m->scores[i] = json_number_value(sc);
        if (m->scores[i] < m->min_score) m->min_score = m->scores[i];
    }
    /* the trie maps each piece to the id tokens_to_ids gives it (the last of duplicates) */
    for (uint32_t i = 0; i < m->vocab.n; i++) ORK_TRY(trie_insert(m, m->vocab.keys[i], m->vocab.klen[i], m->vocab.vals[i]));
    m->unk_id = -1;
    json_t *unk = json_object_get(j, "unk_id");
    if (json_is_integer(unk)) {
        if (json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= nv)
            return tok_fail(ORK_E_FORMAT, "Unigram unk_id %lld is outside the %zu pieces",
                            (long long)json_integer_value(unk), nv);
        m->unk_id = (int32_t)json_integer_value(unk);
    } else if (unk && !json_is_null(unk)) {
        return tok_fail(ORK_E_FORMAT, "Unigram unk_id must be an integer or null");
    }
    m->byte_fallback = json_is_true(json_object_get(j, "byte_fallback"));
    return index_ids(m);
}

typedef struct best {
    double score;
    int32_t id;
    int64_t start; /* -1: unreached */
} best;

static ork_status unigram_tokenize(const tok_model *m, const char *s, size_t n, tok_ids *out) {
    if (n == 0) return ORK_OK;
    best *b = malloc((n + 1) * sizeof *b);
    if (!b) return tok_fail(ORK_E_NOMEM, "out of memory (Unigram lattice)");
    for (size_t i = 0; i <= n; i++) b[i] = (best){0.0, 0, -1};
    const double unk_score = m->min_score - 10.0;
    ork_status st = ORK_OK;
    for (size_t at = 0; at < n;) {
        double here = b[at].score;
        uint32_t cp;
        size_t mblen = (size_t)tok_utf8_next(s + at, n - at, &cp);
        int single = 0;
        uint32_t node = 0;
        for (size_t k = at; k < n; k++) {
            uint64_t child;
            if (!tok_imap_get(&m->trie, ((uint64_t)node << 8) | (uint8_t)s[k], &child)) break;
            node = (uint32_t)child;
            int32_t id = m->term[node];
            if (id < 0) continue;
            size_t end = k + 1;
            double cand = m->scores[id] + here;
            if (b[end].start < 0 || cand > b[end].score) b[end] = (best){cand, id, (int64_t)at};
            if (end - at == mblen) single = 1;
        }
        if (!single) {
            if (m->unk_id < 0) {
                st = tok_fail(ORK_E_INVALID, "Unigram: a character has no piece and the model has no unk_id");
                break;
            }
            double cand = unk_score + here;
            size_t end = at + mblen;
            if (b[end].start < 0 || cand > b[end].score) b[end] = (best){cand, m->unk_id, (int64_t)at};
        }
        at += mblen;
    }
    /* back-track: piece boundaries, fusing runs of unknowns */
    size_t *cut = NULL, nc = 0;
    if (st == ORK_OK) {
        cut = malloc((n + 2) * sizeof *cut);
        if (!cut) st = tok_fail(ORK_E_NOMEM, "out of memory (Unigram path)");
    }
    if (st == ORK_OK) {
        /* pieces from the end: (start, end, is_unk) collected back to front */
        size_t end = n, run_end = 0;
        int in_unk = 0;
        while (end > 0) {
            size_t start = (size_t)b[end].start;
            if (b[end].id == m->unk_id && m->unk_id >= 0) {
                if (!in_unk) { run_end = end; in_unk = 1; }
            } else {
                if (in_unk) { cut[nc++] = run_end; in_unk = 0; }
                cut[nc++] = end;
            }
            if (in_unk && start == 0) { cut[nc++] = run_end; in_unk = 0; }
            end = start;
        }
        if (in_unk) cut[nc++] = run_end;
        /* cut[] holds the end offsets of the pieces, last first; each piece starts where
         * the previous one (in text order) ends. */
        size_t prev_end = 0;
        for (size_t k = nc; st == ORK_OK && k-- > 0;) {
            size_t e = cut[k];
            const char *p = s + prev_end;
            size_t pn = e - prev_end;
            int32_t id;
            if (tok_smap_get(&m->vocab, p, pn, &id)) st = tok_ids_push(out, id);
            else if (m->byte_fallback && pn) {
                int all = 1;
                for (size_t q = 0; q < pn; q++) all &= m->byte_ids[(uint8_t)p[q]] >= 0;
                if (all)
                    for (size_t q = 0; st == ORK_OK && q < pn; q++) st = tok_ids_push(out, m->byte_ids[(uint8_t)p[q]]);
                else st = tok_ids_push(out, m->unk_id);
            } else st = tok_ids_push(out, m->unk_id);
            prev_end = e;
        }
    }
    free(cut);
    free(b);
    return st;
}

/* ---- dispatch ---------------------------------------------------------------------- */
ork_status tok_model_tokenize(const tok_model *m, const char *s, size_t n, tok_ids *out) {
    return m->kind == M_BPE ? bpe_tokenize(m, s, n, out) : unigram_tokenize(m, s, n, out);
}

ork_status tok_model_parse(json_t *j, tok_model **out) {
    *out = NULL;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!json_is_object(j)) return tok_fail(ORK_E_FORMAT, "no 'model' object");
    tok_model *m = calloc(1, sizeof *m);
    if (!m) return tok_fail(ORK_E_NOMEM, "out of memory");
    ork_status st;
    if (!type) { /* older files leave the type out: tell the two apart by the vocab's shape */
        json_t *v = json_object_get(j, "vocab");
        type = json_is_array(v) ? "Unigram" : json_object_get(j, "merges") ? "BPE" : "?";
    }
    if (!strcmp(type, "BPE")) { m->kind = M_BPE; st = bpe_parse(j, m); }
    else if (!strcmp(type, "Unigram")) { m->kind = M_UNIGRAM; st = unigram_parse(j, m); }
    else st = tok_fail(ORK_E_UNSUPPORTED, "model type '%s' is not supported (BPE and Unigram are)", type);
    if (st != ORK_OK) { tok_model_free(m); return st; }
    *out = m;
    return ORK_OK;
}
