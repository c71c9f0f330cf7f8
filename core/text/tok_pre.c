/* text/tok_pre.c — tokenizer.json pre-tokenizers, as Hugging Face `tokenizers`
 * applies them: Sequence, Split (literal or regex pattern, the five delimiter
 * behaviours, invert), ByteLevel (GPT-2 regex, prefix space, bytes to the
 * printable code points), Metaspace (replacement, prepend scheme, split),
 * WhitespaceSplit, Whitespace and Digits. Each turns a list of pieces into a
 * finer one; empty pieces are dropped, as tokenizers' PreTokenizedString does.
 * Owns each parsed pre-tokenizer (a tree for Sequence). */
#include "text/tok_internal.h"

#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef enum { P_SEQ, P_SPLIT, P_BYTELEVEL, P_METASPACE, P_WSSPLIT, P_WHITESPACE, P_DIGITS } pre_kind;
typedef enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIG } behavior;
typedef enum { PS_ALWAYS, PS_FIRST, PS_NEVER } prepend_scheme;

struct tok_pre {
    pre_kind kind;
    tok_pre **kids;
    size_t nkids;
    tok_pattern pat; /* Split; ByteLevel/Whitespace: their fixed regex */
    behavior beh;
    int invert;
    int add_prefix_space, use_regex; /* ByteLevel */
    char rep[8];                     /* Metaspace: the replacement char, UTF-8 */
    size_t rep_n;
    prepend_scheme scheme;
    int split;
    int individual; /* Digits */
};

/* The GPT-2 pattern ByteLevel splits with (tokenizers' byte_level.rs). */
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char WHITESPACE_RE[] = "\\w+|[^\\w\\s]+";

void tok_pre_free(tok_pre *pt) {
    if (!pt) return;
    for (size_t i = 0; i < pt->nkids; i++) tok_pre_free(pt->kids[i]);
    free(pt->kids);
    tok_pattern_free(&pt->pat);
    free(pt);
}

/* ---- a piece list with the 'begins the input' flag -------------------------------- */
typedef struct plist {
    tok_str *s;
    uint8_t *first;
    size_t n, cap;
} plist;

static ork_status pl_push(plist *l, const char *p, size_t n, int first) {
    if (n == 0) return ORK_OK;
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        tok_str *ns = realloc(l->s, c * sizeof *ns);
        if (ns) l->s = ns;
        uint8_t *nf = realloc(l->first, c);
        if (nf) l->first = nf;
        if (!ns || !nf) return tok_fail(ORK_E_NOMEM, "out of memory (pieces)");
        l->cap = c;
    }
    memset(&l->s[l->n], 0, sizeof l->s[l->n]);
    l->first[l->n] = (uint8_t)first;
    l->n++;
    return tok_str_put(&l->s[l->n - 1], p, n);
}

static void pl_free(plist *l) {
    for (size_t i = 0; i < l->n; i++) tok_str_free(&l->s[i]);
    free(l->s);
    free(l->first);
    memset(l, 0, sizeof *l);
}

/* (start, end, is_match) segments covering [0, n), as tokenizers' find_matches. */
typedef struct segs {
    size_t *a, *b;
    uint8_t *m;
    size_t n, cap;
} segs;

static ork_status sg_push(segs *g, size_t a, size_t b, int m) {
    if (g->n == g->cap) {
        size_t c = g->cap ? g->cap * 2 : 16;
        size_t *na = realloc(g->a, c * sizeof *na);
        if (na) g->a = na;
        size_t *nb = realloc(g->b, c * sizeof *nb);
        if (nb) g->b = nb;
        uint8_t *nm = realloc(g->m, c);
        if (nm) g->m = nm;
        if (!na || !nb || !nm) return tok_fail(ORK_E_NOMEM, "out of memory (splits)");
        g->cap = c;
    }
    g->a[g->n] = a;
    g->b[g->n] = b;
    g->m[g->n] = (uint8_t)m;
    g->n++;
    return ORK_OK;
}

static void sg_free(segs *g) {
    free(g->a);
    free(g->b);
    free(g->m);
    memset(g, 0, sizeof *g);
}

static ork_status segs_from_spans(const tok_spans *sp, size_t n, int invert, segs *g) {
    g->n = 0;
    if (n == 0) return sg_push(g, 0, 0, invert);
    size_t prev = 0;
    for (size_t k = 0; k < sp->n; k++) {
        size_t a = sp->v[2 * k], b = sp->v[2 * k + 1];
        if (prev != a) ORK_TRY(sg_push(g, prev, a, invert));
        ORK_TRY(sg_push(g, a, b, !invert));
        prev = b;
    }
    if (prev != n) ORK_TRY(sg_push(g, prev, n, invert));
    return ORK_OK;
}

/* Every code point c with pred(c) is a one-code-point match. */
static ork_status segs_from_pred(const char *s, size_t n, int (*pred)(uint32_t), segs *g) {
    g->n = 0;
    if (n == 0) return sg_push(g, 0, 0, 0);
    size_t prev = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_next(s + i, n - i, &cp);
        if (pred(cp)) {
            if (prev != i) ORK_TRY(sg_push(g, prev, i, 0));
            ORK_TRY(sg_push(g, i, i + (size_t)l, 1));
            prev = i + (size_t)l;
        }
        i += (size_t)l;
    }
    if (prev != n) ORK_TRY(sg_push(g, prev, n, 0));
    return ORK_OK;
}

/* Apply a delimiter behaviour to g and append the kept pieces of s to out. */
static ork_status split_emit(const char *s, const segs *g, behavior beh, int first, plist *out) {
    segs r = {0};
    ork_status st = ORK_OK;
    int prev = 0;
    switch (beh) {
    case B_REMOVED:
        for (size_t k = 0; st == ORK_OK && k < g->n; k++) st = sg_push(&r, g->a[k], g->b[k], g->m[k]);
        break;
    case B_ISOLATED:
        for (size_t k = 0; st == ORK_OK && k < g->n; k++) st = sg_push(&r, g->a[k], g->b[k], 0);
        break;
    case B_CONTIG:
        for (size_t k = 0; st == ORK_OK && k < g->n; k++) {
            if (g->m[k] == prev && r.n) r.b[r.n - 1] = g->b[k];
            else st = sg_push(&r, g->a[k], g->b[k], 0);
            prev = g->m[k];
        }
        break;
    case B_PREV:
        for (size_t k = 0; st == ORK_OK && k < g->n; k++) {
            if (g->m[k] && !prev && r.n) r.b[r.n - 1] = g->b[k];
            else st = sg_push(&r, g->a[k], g->b[k], 0);
            prev = g->m[k];
        }
        break;
    case B_NEXT: /* built back to front, then emitted reversed */
        for (size_t k = g->n; st == ORK_OK && k-- > 0;) {
            if (g->m[k] && !prev && r.n) r.a[r.n - 1] = g->a[k];
            else st = sg_push(&r, g->a[k], g->b[k], 0);
            prev = g->m[k];
        }
        for (size_t k = 0; st == ORK_OK && k < r.n / 2; k++) {
            size_t t;
            uint8_t tm;
            t = r.a[k]; r.a[k] = r.a[r.n - 1 - k]; r.a[r.n - 1 - k] = t;
            t = r.b[k]; r.b[k] = r.b[r.n - 1 - k]; r.b[r.n - 1 - k] = t;
            tm = r.m[k]; r.m[k] = r.m[r.n - 1 - k]; r.m[r.n - 1 - k] = tm;
        }
        break;
    }
    for (size_t k = 0; st == ORK_OK && k < r.n; k++)
        if (!r.m[k]) st = pl_push(out, s + r.a[k], r.b[k] - r.a[k], first && r.a[k] == 0);
    sg_free(&r);
    return st;
}

static int is_ws(uint32_t c) { return tok_is_whitespace(c); }
static int is_numeric(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* One pre-tokenizer over one piece, appending to out. */
static ork_status pre_one(const tok_pre *pt, const char *s, size_t n, int first, plist *out);

static ork_status pre_list(const tok_pre *pt, plist *in, plist *out) {
    for (size_t i = 0; i < in->n; i++) ORK_TRY(pre_one(pt, in->s[i].p, in->s[i].n, in->first[i], out));
    return ORK_OK;
}

static ork_status pre_one(const tok_pre *pt, const char *s, size_t n, int first, plist *out) {
    segs g = {0};
    tok_spans sp = {0};
    tok_str t = {0};
    ork_status st = ORK_OK;
    switch (pt->kind) {
    case P_SEQ: {
        plist a = {0}, b = {0};
        st = pl_push(&a, s, n, first);
        for (size_t i = 0; st == ORK_OK && i < pt->nkids; i++) {
            st = pre_list(pt->kids[i], &a, &b);
            pl_free(&a);
            a = b;
            memset(&b, 0, sizeof b);
        }
        for (size_t i = 0; st == ORK_OK && i < a.n; i++) st = pl_push(out, a.s[i].p, a.s[i].n, a.first[i]);
        pl_free(&a);
        pl_free(&b);
        return st;
    }
    case P_SPLIT:
    case P_WHITESPACE:
        st = tok_pattern_find(&pt->pat, s, n, &sp);
        if (st == ORK_OK) st = segs_from_spans(&sp, n, pt->invert, &g);
        if (st == ORK_OK) st = split_emit(s, &g, pt->beh, first, out);
        break;
    case P_WSSPLIT:
        st = segs_from_pred(s, n, is_ws, &g);
        if (st == ORK_OK) st = split_emit(s, &g, B_REMOVED, first, out);
        break;
    case P_DIGITS:
        st = segs_from_pred(s, n, is_numeric, &g);
        if (st == ORK_OK) st = split_emit(s, &g, pt->individual ? B_ISOLATED : B_CONTIG, first, out);
        break;
    case P_BYTELEVEL: {
        if (pt->add_prefix_space && n && s[0] != ' ') {
            st = tok_str_put(&t, " ", 1);
            if (st == ORK_OK) st = tok_str_put(&t, s, n);
        } else {
            st = tok_str_put(&t, s, n);
        }
        plist mid = {0};
        if (st == ORK_OK && pt->use_regex) {
            st = tok_pattern_find(&pt->pat, t.p, t.n, &sp);
            if (st == ORK_OK) st = segs_from_spans(&sp, t.n, 0, &g);
            if (st == ORK_OK) st = split_emit(t.p, &g, B_ISOLATED, first, &mid);
        } else if (st == ORK_OK) {
            st = pl_push(&mid, t.p, t.n, first);
        }
        for (size_t i = 0; st == ORK_OK && i < mid.n; i++) {
            tok_str m = {0};
            for (size_t k = 0; st == ORK_OK && k < mid.s[i].n; k++)
                st = tok_str_putc(&m, tok_byte_to_cp((uint8_t)mid.s[i].p[k]));
            if (st == ORK_OK) st = pl_push(out, m.p, m.n, mid.first[i]);
            tok_str_free(&m);
        }
        pl_free(&mid);
        break;
    }
    case P_METASPACE: {
        /* ' ' -> replacement; prepend it per the scheme; split before each one. */
        tok_str r = {0};
        for (size_t i = 0; st == ORK_OK && i < n; i++)
            st = s[i] == ' ' ? tok_str_put(&r, pt->rep, pt->rep_n) : tok_str_put(&r, s + i, 1);
        int starts = r.n >= pt->rep_n && memcmp(r.p, pt->rep, pt->rep_n) == 0;
        int prepend = r.n && !starts && (pt->scheme == PS_ALWAYS || (pt->scheme == PS_FIRST && first));
        if (st == ORK_OK && prepend) st = tok_str_put(&t, pt->rep, pt->rep_n);
        if (st == ORK_OK) st = tok_str_put(&t, r.p ? r.p : "", r.n);
        tok_str_free(&r);
        if (st == ORK_OK && pt->split) {
            st = tok_literal_find_all(pt->rep, pt->rep_n, t.p, t.n, &sp);
            if (st == ORK_OK) st = segs_from_spans(&sp, t.n, 0, &g);
            if (st == ORK_OK) st = split_emit(t.p, &g, B_NEXT, first, out);
        } else if (st == ORK_OK) {
            st = pl_push(out, t.p, t.n, first);
        }
        break;
    }
    }
    sg_free(&g);
    tok_spans_free(&sp);
    tok_str_free(&t);
    return st;
}

ork_status tok_pre_apply(const tok_pre *pt, const char *s, size_t n, int at_start, tok_pieces *out) {
    plist l = {0};
    ork_status st = pre_one(pt, s, n, at_start, &l);
    for (size_t i = 0; st == ORK_OK && i < l.n; i++) st = tok_pieces_push(out, l.s[i].p, l.s[i].n);
    pl_free(&l);
    return st;
}

static ork_status parse_behavior(json_t *j, behavior *out) {
    const char *b = json_string_value(j);
    if (!b) return tok_fail(ORK_E_FORMAT, "Split pre-tokenizer without a 'behavior'");
    if (!strcmp(b, "Removed")) *out = B_REMOVED;
    else if (!strcmp(b, "Isolated")) *out = B_ISOLATED;
    else if (!strcmp(b, "MergedWithPrevious")) *out = B_PREV;
    else if (!strcmp(b, "MergedWithNext")) *out = B_NEXT;
    else if (!strcmp(b, "Contiguous")) *out = B_CONTIG;
    else return tok_fail(ORK_E_FORMAT, "Split pre-tokenizer: unknown behavior '%s'", b);
    return ORK_OK;
}

static int jbool(json_t *o, const char *k, int dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

ork_status tok_pre_parse(json_t *j, tok_pre **out) {
    *out = NULL;
    if (!j || json_is_null(j)) return ORK_OK;
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!json_is_object(j) || !type) return tok_fail(ORK_E_FORMAT, "pre_tokenizer without a 'type'");
    tok_pre *pt = calloc(1, sizeof *pt);
    if (!pt) return tok_fail(ORK_E_NOMEM, "out of memory");
    ork_status st = ORK_OK;
    if (!strcmp(type, "Sequence")) {
        pt->kind = P_SEQ;
        json_t *arr = json_object_get(j, "pretokenizers");
        if (!json_is_array(arr)) {
            st = tok_fail(ORK_E_FORMAT, "pre_tokenizer Sequence without a 'pretokenizers' array");
        } else {
            pt->kids = calloc(json_array_size(arr) + 1, sizeof *pt->kids);
            if (!pt->kids) st = tok_fail(ORK_E_NOMEM, "out of memory");
            for (size_t i = 0; st == ORK_OK && i < json_array_size(arr); i++) {
                tok_pre *k = NULL;
                st = tok_pre_parse(json_array_get(arr, i), &k);
                if (k) pt->kids[pt->nkids++] = k;
            }
        }
    } else if (!strcmp(type, "Split")) {
        pt->kind = P_SPLIT;
        st = tok_pattern_parse(json_object_get(j, "pattern"), "Split pre-tokenizer", &pt->pat);
        if (st == ORK_OK) st = parse_behavior(json_object_get(j, "behavior"), &pt->beh);
        pt->invert = jbool(j, "invert", 0);
    } else if (!strcmp(type, "ByteLevel")) {
        pt->kind = P_BYTELEVEL;
        pt->add_prefix_space = jbool(j, "add_prefix_space", 1);
        pt->use_regex = jbool(j, "use_regex", 1);
        if (pt->use_regex) st = tok_regex_new(GPT2_RE, sizeof GPT2_RE - 1, "ByteLevel", &pt->pat.re);
    } else if (!strcmp(type, "Metaspace")) {
        pt->kind = P_METASPACE;
        json_t *r = json_object_get(j, "replacement");
        const char *rs = json_string_value(r);
        if (!rs || json_string_length(r) == 0 || json_string_length(r) > 4) {
            st = tok_fail(ORK_E_FORMAT, "Metaspace pre-tokenizer: 'replacement' must be one character");
        } else {
            pt->rep_n = json_string_length(r);
            memcpy(pt->rep, rs, pt->rep_n);
            uint32_t cp;
            if ((size_t)tok_utf8_next(rs, pt->rep_n, &cp) != pt->rep_n)
                st = tok_fail(ORK_E_FORMAT, "Metaspace pre-tokenizer: 'replacement' must be one character");
        }
        const char *ps = json_string_value(json_object_get(j, "prepend_scheme"));
        if (!ps) pt->scheme = jbool(j, "add_prefix_space", 1) ? PS_ALWAYS : PS_NEVER; /* the legacy key */
        else if (!strcmp(ps, "always")) pt->scheme = PS_ALWAYS;
        else if (!strcmp(ps, "first")) pt->scheme = PS_FIRST;
        else if (!strcmp(ps, "never")) pt->scheme = PS_NEVER;
        else if (st == ORK_OK) st = tok_fail(ORK_E_FORMAT, "Metaspace: unknown prepend_scheme '%s'", ps);
        pt->split = jbool(j, "split", 1);
    } else if (!strcmp(type, "WhitespaceSplit")) {
        pt->kind = P_WSSPLIT;
    } else if (!strcmp(type, "Whitespace")) {
        pt->kind = P_WHITESPACE;
        pt->beh = B_REMOVED;
        pt->invert = 1;
        st = tok_regex_new(WHITESPACE_RE, sizeof WHITESPACE_RE - 1, "Whitespace", &pt->pat.re);
    } else if (!strcmp(type, "Digits")) {
        pt->kind = P_DIGITS;
        pt->individual = jbool(j, "individual_digits", 0);
    } else {
        st = tok_fail(ORK_E_UNSUPPORTED, "pre_tokenizer type '%s' is not supported", type);
    }
    if (st != ORK_OK) { tok_pre_free(pt); return st; }
    *out = pt;
    return ORK_OK;
}
