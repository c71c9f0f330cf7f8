/* tok_fixtures.c — see tok_fixtures.h. */
#include "tok_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

char *tokfx_read_gz(const char *path, size_t *n) {
    gzFile f = gzopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 20, len = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (len + 65536 > cap) b = realloc(b, (cap *= 2) + 1);
        int r = gzread(f, b + len, 65536);
        if (r <= 0) break;
        len += (size_t)r;
    }
    gzclose(f);
    b[len] = 0;
    *n = len;
    return b;
}

int tokfx_load_captions(tokfx *fx, const char *path) {
    size_t n;
    char *all = tokfx_read_gz(path, &n);
    if (!all) return 1;
    fx->caps = calloc(4096, sizeof *fx->caps);
    char *p = all, *end = all + n;
    while (p < end && fx->ncaps < 4096) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        size_t ln = (size_t)(nl - p);
        tokfx_caption c = {malloc(ln + 1), 0};
        if (ln >= 4 && !memcmp(p, "@@x ", 4)) { /* escaped line: see make_captions.py */
            for (size_t i = 4; i < ln; i++) {
                if (p[i] == '\\' && i + 1 < ln) {
                    char e = p[i + 1];
                    if (e == 'n') { c.p[c.n++] = '\n'; i++; continue; }
                    if (e == 'r') { c.p[c.n++] = '\r'; i++; continue; }
                    if (e == 't') { c.p[c.n++] = '\t'; i++; continue; }
                    if (e == '\\') { c.p[c.n++] = '\\'; i++; continue; }
                    if (e == 'x' && i + 3 < ln) {
                        char h[3] = {p[i + 2], p[i + 3], 0};
                        c.p[c.n++] = (char)strtol(h, NULL, 16);
                        i += 3;
                        continue;
                    }
                }
                c.p[c.n++] = p[i];
            }
        } else {
            memcpy(c.p, p, ln);
            c.n = ln;
        }
        fx->caps[fx->ncaps++] = c;
        p = nl + 1;
    }
    free(all);
    return 0;
}

tokfx_expect *tokfx_find(tokfx *fx, const char *name) {
    for (int i = 0; i < fx->nexp; i++)
        if (!strcmp(fx->exp[i].name, name)) return &fx->exp[i];
    return NULL;
}

static int32_t *read_ids(char *q, int cnt) {
    int32_t *v = malloc(((size_t)cnt + 1) * sizeof *v);
    for (int k = 0; k < cnt; k++) v[k] = (int32_t)strtol(q, &q, 10);
    return v;
}

int tokfx_load_expected(tokfx *fx, const char *path) {
    size_t n;
    char *all = tokfx_read_gz(path, &n);
    if (!all || !fx->ncaps) { free(all); return 1; }
    char *save = NULL;
    size_t pcap = 0;
    int rc = 0;
    for (char *line = strtok_r(all, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == 'T') {
            if (fx->nexp == 16) { rc = 1; break; }
            tokfx_expect *e = &fx->exp[fx->nexp++];
            if (sscanf(line, "T %31s %d %d %d %d", e->name, &e->n_pre, &e->n_post, &e->pad, &e->maxlen) != 5) rc = 1;
            e->ids = calloc(fx->ncaps, sizeof *e->ids);
            e->n = calloc(fx->ncaps, sizeof *e->n);
        } else if (line[0] == 'C') {
            char name[32];
            int idx, cnt, off;
            tokfx_expect *e = NULL;
            if (sscanf(line, "C %31s %d %d%n", name, &idx, &cnt, &off) != 3 || !(e = tokfx_find(fx, name)) || idx < 0 ||
                (size_t)idx >= fx->ncaps || cnt < 0) {
                rc = 1;
                break;
            }
            e->n[idx] = cnt;
            e->ids[idx] = read_ids(line + off, cnt);
        } else if (line[0] == 'P') {
            if (fx->nprompts == pcap) {
                pcap = pcap ? pcap * 2 : 1024;
                fx->prompts = realloc(fx->prompts, pcap * sizeof *fx->prompts);
            }
            tokfx_prompt *r = &fx->prompts[fx->nprompts];
            int off;
            if (sscanf(line, "P %31s %31s %d %d %d %d%n", r->format, r->name, &r->maxlen, &r->pad_left, &r->idx, &r->n,
                       &off) != 6 || r->idx < 0 || (size_t)r->idx >= fx->ncaps || r->n < 0 || r->n > r->maxlen) {
                rc = 1;
                break;
            }
            r->ids = read_ids(line + off, r->n);
            fx->nprompts++;
        }
    }
    free(all);
    return rc;
}

static int print_mismatch(const tokfx *fx, const tokfx_expect *e, size_t i, const char *what, const int32_t *got,
                          int32_t ng, const int32_t *want, int32_t nw) {
    printf("\n  %s caption %zu (%s): got %d ids, want %d\n    got: ", e->name, i, what, ng, nw);
    for (int k = 0; k < ng && k < 40; k++) printf("%d ", got[k]);
    printf("\n    want:");
    for (int k = 0; k < nw && k < 40; k++) printf(" %d", want[k]);
    printf("\n    text: %.*s\n", (int)(fx->caps[i].n > 200 ? 200 : fx->caps[i].n), fx->caps[i].p);
    return 1;
}

int tokfx_check_corpus(const tokfx *fx, const ork_tokenizer *t, const tokfx_expect *e) {
    if (!e) { printf("  no expected ids for this tokenizer\n"); return 1; }
    int bad = 0, shown = 0;
    int32_t *ids = malloc(4096 * sizeof *ids), *mask = malloc(4096 * sizeof *mask), *want = malloc(4096 * sizeof *want);
    for (size_t i = 0; i < fx->ncaps; i++) {
        const int32_t *full = e->ids[i];
        int32_t nf = e->n[i], n = -1;
        if (!full) { bad++; continue; }
        ork_status st = ork_tokenizer_encode(t, fx->caps[i].p, fx->caps[i].n, 0, 0, ids, NULL, 4096, &n);
        int ok = st == ORK_OK && n == nf && !memcmp(ids, full, (size_t)nf * sizeof *ids);
        if (!ok && shown++ < 5) print_mismatch(fx, e, i, "full", ids, n, full, nf);
        bad += !ok;
        if (!ok) continue;
        int32_t body = nf - e->n_pre - e->n_post;
        if (e->maxlen > 0) { /* FLUX.1: padding="max_length", truncation=True */
            int32_t keep = e->maxlen - e->n_pre - e->n_post;
            if (keep > body) keep = body;
            int32_t k = 0;
            for (int q = 0; q < e->n_pre; q++) want[k++] = full[q];
            for (int q = 0; q < keep; q++) want[k++] = full[e->n_pre + q];
            for (int q = 0; q < e->n_post; q++) want[k++] = full[nf - e->n_post + q];
            int32_t real = k;
            while (k < e->maxlen) want[k++] = e->pad;
            st = ork_tokenizer_encode(t, fx->caps[i].p, fx->caps[i].n, e->maxlen, ORK_TOK_TRUNCATE | ORK_TOK_PAD, ids,
                                      mask, 4096, &n);
            ok = st == ORK_OK && n == e->maxlen && !memcmp(ids, want, (size_t)n * sizeof *ids);
            for (int32_t q = 0; ok && q < n; q++) ok = mask[q] == (q < real);
            if (!ok && shown++ < 5) print_mismatch(fx, e, i, "truncated+padded", ids, n, want, e->maxlen);
            bad += !ok;
        }
        st = ork_tokenizer_encode(t, fx->caps[i].p, fx->caps[i].n, 0, ORK_TOK_NO_SPECIAL, ids, NULL, 4096, &n);
        ok = st == ORK_OK && n == body && !memcmp(ids, full + e->n_pre, (size_t)body * sizeof *ids);
        if (!ok && shown++ < 5) print_mismatch(fx, e, i, "no special tokens", ids, n, full + e->n_pre, body);
        bad += !ok;
    }
    free(ids);
    free(mask);
    free(want);
    if (bad) printf("  %s: %d mismatches over %zu captions\n", e->name, bad, fx->ncaps);
    return bad;
}
