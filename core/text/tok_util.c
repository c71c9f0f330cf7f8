/* text/tok_util.c — the tokenizer's plumbing: growable strings, UTF-8 decoding
 * with U+FFFD replacement, White_Space, two open-addressing hash maps, the GPT-2
 * byte table, and the Oniguruma regex wrapper with its find-all.
 * Owns: Oniguruma's one-time initialisation (ork_call_once). */
#include "text/tok_internal.h"

#include "platform/platform.h"
#include "util/log.h"

#include <oniguruma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------ */
static _Thread_local const char *t_source;

void tok_set_source(const char *path) { t_source = path; }
const char *tok_get_source(void) { return t_source; }

ork_status tok_fail(ork_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!t_source) return ORK_FAIL(s, "tokenizer: %s", msg);
    if (!strncmp(msg, t_source, strlen(t_source))) return ORK_FAIL(s, "tokenizer %s", msg);
    return ORK_FAIL(s, "tokenizer %s: %s", t_source, msg);
}

/* ---- strings ---------------------------------------------------------------- */
static ork_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return ORK_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return tok_fail(ORK_E_NOMEM, "out of memory (%zu bytes)", c * elem);
    *p = q;
    *cap = c;
    return ORK_OK;
}

ork_status tok_str_put(tok_str *s, const char *p, size_t n) {
    ORK_TRY(grow((void **)&s->p, &s->cap, s->n + n + 1, 1));
    if (n) memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
    return ORK_OK;
}

ork_status tok_str_putc(tok_str *s, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) { b[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (char)(0xC0 | (cp >> 6)); b[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12)); b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18)); b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    return tok_str_put(s, b, n);
}

void tok_str_free(tok_str *s) {
    free(s->p);
    memset(s, 0, sizeof *s);
}

ork_status tok_pieces_push(tok_pieces *p, const char *s, size_t n) {
    if (n == 0) return ORK_OK;
    ORK_TRY(grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v));
    memset(&p->v[p->n], 0, sizeof p->v[p->n]);
    ORK_TRY(tok_str_put(&p->v[p->n], s, n));
    p->n++;
    return ORK_OK;
}

void tok_pieces_free(tok_pieces *p) {
    for (size_t i = 0; i < p->n; i++) tok_str_free(&p->v[i]);
    free(p->v);
    memset(p, 0, sizeof *p);
}

ork_status tok_ids_push(tok_ids *ids, int32_t id) {
    ORK_TRY(grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v));
    ids->v[ids->n++] = id;
    return ORK_OK;
}

/* ---- UTF-8 ---------------------------------------------------------------- */
int tok_utf8_next(const char *s, size_t n, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80 || n < 2) { *cp = u[0]; return 1; }
    if (u[0] < 0xE0) { *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); return 2; }
    if (u[0] < 0xF0 || n < 4) {
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

/* Length of the well-formed sequence at u (Unicode Table 3-7), or 0 with *sub
 * set to the length of the maximal subpart to replace (>= 1). */
static size_t utf8_wellformed(const uint8_t *u, size_t n, size_t *sub) {
    uint8_t b = u[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) { len = 3; lo = 0xA0; }
    else if (b >= 0xE1 && b <= 0xEC) len = 3;
    else if (b == 0xED) { len = 3; hi = 0x9F; }
    else if (b >= 0xEE && b <= 0xEF) len = 3;
    else if (b == 0xF0) { len = 4; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) { len = 4; hi = 0x8F; }
    else { *sub = 1; return 0; }
    for (size_t i = 1; i < len; i++) {
        uint8_t c = i < n ? u[i] : 0;
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (i >= n || c < l || c > h) { *sub = i; return 0; }
    }
    return len;
}

ork_status tok_utf8_sanitize(const char *s, size_t n, tok_str *out) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, run = 0;
    out->n = 0;
    ORK_TRY(tok_str_put(out, "", 0));
    while (i < n) {
        size_t sub = 0, len = utf8_wellformed(u + i, n - i, &sub);
        if (len) { i += len; run += len; continue; }
        ORK_TRY(tok_str_put(out, s + i - run, run));
        run = 0;
        ORK_TRY(tok_str_putc(out, 0xFFFD));
        i += sub;
    }
    return tok_str_put(out, s + n - run, run);
}

int tok_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* ---- hash maps ------------------------------------------------------------- */
static uint64_t hash_bytes(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static ork_status smap_rehash(tok_smap *m, uint32_t nslots) {
    uint32_t *s = calloc(nslots, sizeof *s);
    if (!s) return tok_fail(ORK_E_NOMEM, "out of memory (vocabulary map)");
    for (uint32_t i = 0; i < m->n; i++) {
        uint64_t h = hash_bytes(m->keys[i], m->klen[i]) & (nslots - 1);
        while (s[h]) h = (h + 1) & (nslots - 1);
        s[h] = i + 1;
    }
    free(m->slots);
    m->slots = s;
    m->nslots = nslots;
    return ORK_OK;
}

static uint32_t *smap_find(const tok_smap *m, const char *k, size_t n) {
    if (!m->nslots) return NULL;
    uint64_t h = hash_bytes(k, n) & (m->nslots - 1);
    while (m->slots[h]) {
        uint32_t i = m->slots[h] - 1;
        if (m->klen[i] == n && memcmp(m->keys[i], k, n) == 0) return &m->slots[h];
        h = (h + 1) & (m->nslots - 1);
    }
    return &m->slots[h];
}

ork_status tok_smap_set(tok_smap *m, const char *k, size_t n, int32_t v) {
    if ((uint64_t)(m->n + 1) * 2 > m->nslots) ORK_TRY(smap_rehash(m, m->nslots ? m->nslots * 2 : 64));
    uint32_t *slot = smap_find(m, k, n);
    if (*slot) { m->vals[*slot - 1] = v; return ORK_OK; }
    if (m->n == m->cap) {
        uint32_t c = m->cap ? m->cap * 2 : 64;
        char **nk = realloc(m->keys, c * sizeof *nk);
        if (nk) m->keys = nk;
        uint32_t *nl = realloc(m->klen, c * sizeof *nl);
        if (nl) m->klen = nl;
        int32_t *nv = realloc(m->vals, c * sizeof *nv);
        if (nv) m->vals = nv;
        if (!nk || !nl || !nv) return tok_fail(ORK_E_NOMEM, "out of memory (vocabulary)");
        m->cap = c;
    }
    char *kc = malloc(n + 1);
    if (!kc) return tok_fail(ORK_E_NOMEM, "out of memory (vocabulary)");
    if (n) memcpy(kc, k, n);
    kc[n] = 0;
    m->keys[m->n] = kc;
    m->klen[m->n] = (uint32_t)n;
    m->vals[m->n] = v;
    *slot = ++m->n;
    return ORK_OK;
}

int tok_smap_get(const tok_smap *m, const char *k, size_t n, int32_t *v) {
    uint32_t *slot = smap_find(m, k, n);
    if (!slot || !*slot) return 0;
    *v = m->vals[*slot - 1];
    return 1;
}

void tok_smap_free(tok_smap *m) {
    for (uint32_t i = 0; i < m->n; i++) free(m->keys[i]);
    free(m->keys);
    free(m->klen);
    free(m->vals);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static ork_status imap_rehash(tok_imap *m, uint32_t nslots) {
    uint64_t *k = calloc(nslots, sizeof *k), *v = calloc(nslots, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return tok_fail(ORK_E_NOMEM, "out of memory (merge map)");
    }
    for (uint32_t i = 0; i < m->nslots; i++) {
        if (!m->keys[i]) continue;
        uint64_t h = hash_u64(m->keys[i]) & (nslots - 1);
        while (k[h]) h = (h + 1) & (nslots - 1);
        k[h] = m->keys[i];
        v[h] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k;
    m->vals = v;
    m->nslots = nslots;
    return ORK_OK;
}

ork_status tok_imap_set(tok_imap *m, uint64_t key, uint64_t val) {
    if ((uint64_t)(m->n + 1) * 2 > m->nslots) ORK_TRY(imap_rehash(m, m->nslots ? m->nslots * 2 : 64));
    uint64_t k = key + 1, h = hash_u64(k) & (m->nslots - 1);
    while (m->keys[h] && m->keys[h] != k) h = (h + 1) & (m->nslots - 1);
    if (!m->keys[h]) m->n++;
    m->keys[h] = k;
    m->vals[h] = val;
    return ORK_OK;
}

int tok_imap_get(const tok_imap *m, uint64_t key, uint64_t *val) {
    if (!m->nslots) return 0;
    uint64_t k = key + 1, h = hash_u64(k) & (m->nslots - 1);
    while (m->keys[h]) {
        if (m->keys[h] == k) { *val = m->vals[h]; return 1; }
        h = (h + 1) & (m->nslots - 1);
    }
    return 0;
}

void tok_imap_free(tok_imap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- GPT-2 bytes_to_unicode ----------------------------------------------------- */
uint32_t tok_byte_to_cp(uint8_t b) {
    /* Printable Latin-1 bytes map to themselves; the other 68 bytes to 256.. in order. */
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    uint32_t k = 0;
    for (uint32_t c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) k++;
    return 256 + k;
}

/* ---- regex ----------------------------------------------------------------------- */
struct tok_regex {
    regex_t *re;
};

static ork_once g_onig_once = ORK_ONCE_INIT;
static void onig_init_once(void) {
    OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
}

ork_status tok_regex_new(const char *pattern, size_t n, const char *what, tok_regex **out) {
    ork_call_once(&g_onig_once, onig_init_once);
    tok_regex *r = calloc(1, sizeof *r);
    if (!r) return tok_fail(ORK_E_NOMEM, "out of memory (regex)");
    OnigErrorInfo einfo;
    int rc = onig_new(&r->re, (const OnigUChar *)pattern, (const OnigUChar *)pattern + n,
                      ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo);
    if (rc != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &einfo);
        free(r);
        return tok_fail(ORK_E_FORMAT, "%s: bad regex '%.*s': %s", what, (int)(n > 200 ? 200 : n),
                        pattern, (const char *)msg);
    }
    *out = r;
    return ORK_OK;
}

void tok_regex_free(tok_regex *r) {
    if (!r) return;
    onig_free(r->re);
    free(r);
}

static ork_status spans_push(tok_spans *sp, size_t a, size_t b) {
    ORK_TRY(grow((void **)&sp->v, &sp->cap, 2 * sp->n + 2, sizeof *sp->v));
    sp->v[2 * sp->n] = a;
    sp->v[2 * sp->n + 1] = b;
    sp->n++;
    return ORK_OK;
}

void tok_spans_free(tok_spans *sp) {
    free(sp->v);
    memset(sp, 0, sizeof *sp);
}

ork_status tok_regex_find_all(const tok_regex *r, const char *s, size_t n, tok_spans *out) {
    out->n = 0;
    OnigRegion *reg = onig_region_new();
    if (!reg) return tok_fail(ORK_E_NOMEM, "out of memory (regex region)");
    const OnigUChar *str = (const OnigUChar *)s, *end = str + n;
    size_t last_end = 0;
    int have_last = 0;
    size_t last_match_end = 0;
    ork_status st = ORK_OK;
    while (last_end <= n) {
        onig_region_clear(reg);
        int rc = onig_search(r->re, str, end, str + last_end, end, reg, ONIG_OPTION_NONE);
        if (rc == ONIG_MISMATCH) break;
        if (rc < 0) { st = tok_fail(ORK_E_INTERNAL, "regex search failed (%d)", rc); break; }
        size_t a = (size_t)reg->beg[0], b = (size_t)reg->end[0];
        if (a == b && have_last && last_match_end == b) {
            /* the onig crate's find_iter: skip an empty match right after the last one */
            if (last_end >= n) break;
            uint32_t cp;
            last_end += (size_t)tok_utf8_next(s + last_end, n - last_end, &cp);
            continue;
        }
        last_end = b;
        have_last = 1;
        last_match_end = b;
        if ((st = spans_push(out, a, b)) != ORK_OK) break;
        if (a == b) { /* an empty match: the next search starts past it */
            if (last_end >= n) break;
        }
    }
    onig_region_free(reg, 1);
    return st;
}

ork_status tok_literal_find_all(const char *pat, size_t pn, const char *s, size_t n, tok_spans *out) {
    out->n = 0;
    if (pn == 0) return ORK_OK;
    size_t i = 0;
    while (i + pn <= n) { /* memmem is not C11: first byte by memchr, the rest by memcmp */
        const char *hit = memchr(s + i, (unsigned char)pat[0], n - i - pn + 1);
        if (!hit) break;
        size_t a = (size_t)(hit - s);
        if (memcmp(hit, pat, pn) != 0) {
            i = a + 1;
            continue;
        }
        ORK_TRY(spans_push(out, a, a + pn));
        i = a + pn;
    }
    return ORK_OK;
}

ork_status tok_pattern_parse(json_t *j, const char *what, tok_pattern *out) {
    memset(out, 0, sizeof *out);
    json_t *s = json_object_get(j, "String"), *r = json_object_get(j, "Regex");
    if (json_is_string(s)) {
        out->literal_n = json_string_length(s);
        out->literal = malloc(out->literal_n + 1);
        if (!out->literal) return tok_fail(ORK_E_NOMEM, "out of memory");
        memcpy(out->literal, json_string_value(s), out->literal_n + 1);
        return ORK_OK;
    }
    if (json_is_string(r)) return tok_regex_new(json_string_value(r), json_string_length(r), what, &out->re);
    return tok_fail(ORK_E_FORMAT, "%s: 'pattern' must be {\"String\": ...} or {\"Regex\": ...}", what);
}

ork_status tok_pattern_find(const tok_pattern *p, const char *s, size_t n, tok_spans *out) {
    if (p->re) return tok_regex_find_all(p->re, s, n, out);
    return tok_literal_find_all(p->literal, p->literal_n, s, n, out);
}

void tok_pattern_free(tok_pattern *p) {
    free(p->literal);
    tok_regex_free(p->re);
    memset(p, 0, sizeof *p);
}
