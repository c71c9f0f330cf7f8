/* tensor/alloc.c — see alloc.h. Owns the allocation records (pointer, size,
 * tag) of one device, the arena chunks and their free lists, and the host
 * pool chunks. */
#include "tensor/alloc.h"

#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORK_ALLOC_MAX_TAGS 32

typedef struct alloc_rec {
    void *ptr;
    size_t bytes;
    int tag;
} alloc_rec;

struct ork_alloc {
    const ork_backend *be;
    size_t budget, in_use, peak;
    uint64_t count;
    char tags[ORK_ALLOC_MAX_TAGS][32];
    size_t tag_bytes[ORK_ALLOC_MAX_TAGS];
    size_t tag_peak[ORK_ALLOC_MAX_TAGS];
    int ntags;
    alloc_rec *recs;
    size_t nrecs, caprecs;
};

static void fmt_bytes(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / (double)(1u << 30));
    else if (b >= ((size_t)1 << 20)) snprintf(buf, n, "%.2f MiB", (double)b / (double)(1u << 20));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%zu B", b);
}

ork_status ork_alloc_create(const ork_backend *be, size_t budget, ork_alloc **out) {
    ork_alloc *a = calloc(1, sizeof *a);
    if (!a) return ORK_FAIL(ORK_E_NOMEM, "alloc: out of host memory");
    a->be = be;
    a->budget = budget;
    *out = a;
    return ORK_OK;
}

void ork_alloc_destroy(ork_alloc *a) {
    if (!a) return;
    if (a->nrecs) {
        char what[512] = "", sz[32];
        size_t p = 0;
        for (int t = 0; t < a->ntags && p < sizeof what; t++)
            if (a->tag_bytes[t]) {
                fmt_bytes(a->tag_bytes[t], sz, sizeof sz);
                p += (size_t)snprintf(what + p, sizeof what - p, "%s%s %s", p ? ", " : "", a->tags[t], sz);
            }
        ORK_WARN("alloc: %zu device allocations still live at shutdown (%s); freeing them", a->nrecs, what);
        for (size_t i = 0; i < a->nrecs; i++) a->be->free(a->recs[i].ptr);
    }
    free(a->recs);
    free(a);
}

static int tag_index(ork_alloc *a, const char *tag) {
    if (!tag || !*tag) tag = "untagged";
    for (int i = 0; i < a->ntags; i++)
        if (strcmp(a->tags[i], tag) == 0) return i;
    if (a->ntags == ORK_ALLOC_MAX_TAGS) return ORK_ALLOC_MAX_TAGS - 1;
    snprintf(a->tags[a->ntags], sizeof a->tags[0], "%s", tag);
    return a->ntags++;
}

ork_status ork_alloc_get(ork_alloc *a, size_t bytes, const char *tag, void **ptr) {
    *ptr = NULL;
    if (bytes == 0) bytes = 1;
    int t = tag_index(a, tag);
    if (a->budget && (bytes > a->budget || a->in_use > a->budget - bytes)) {
        char ask[32], use[32], bud[32], by[640] = "", sz[32];
        size_t p = 0;
        fmt_bytes(bytes, ask, sizeof ask);
        fmt_bytes(a->in_use, use, sizeof use);
        fmt_bytes(a->budget, bud, sizeof bud);
        for (int i = 0; i < a->ntags && p < sizeof by; i++)
            if (a->tag_bytes[i]) {
                fmt_bytes(a->tag_bytes[i], sz, sizeof sz);
                p += (size_t)snprintf(by + p, sizeof by - p, "%s%s %s", p ? ", " : "", a->tags[i], sz);
            }
        return ORK_FAIL(ORK_E_BUDGET,
                        "device memory budget exceeded: asked %s for \"%s\", in use %s of the %s budget "
                        "(%s); raise model.vram_budget_gb or stream/quantize more weights",
                        ask, a->tags[t], use, bud, p ? by : "nothing");
    }
    if (a->nrecs == a->caprecs) {
        size_t cap = a->caprecs ? 2 * a->caprecs : 64;
        alloc_rec *r = realloc(a->recs, cap * sizeof *r);
        if (!r) return ORK_FAIL(ORK_E_NOMEM, "alloc: out of host memory for records");
        a->recs = r;
        a->caprecs = cap;
    }
    void *p = NULL;
    ORK_TRY(a->be->alloc(bytes, &p));
    a->recs[a->nrecs++] = (alloc_rec){p, bytes, t};
    a->in_use += bytes;
    if (a->in_use > a->peak) a->peak = a->in_use;
    a->tag_bytes[t] += bytes;
    if (a->tag_bytes[t] > a->tag_peak[t]) a->tag_peak[t] = a->tag_bytes[t];
    a->count++;
    *ptr = p;
    return ORK_OK;
}

void ork_alloc_put(ork_alloc *a, void *ptr) {
    if (!ptr) return;
    for (size_t i = a->nrecs; i-- > 0;)
        if (a->recs[i].ptr == ptr) {
            a->in_use -= a->recs[i].bytes;
            a->tag_bytes[a->recs[i].tag] -= a->recs[i].bytes;
            a->be->free(ptr);
            a->recs[i] = a->recs[--a->nrecs];
            return;
        }
    ORK_ERROR("alloc: free of a pointer this allocator does not own (%p)", ptr);
}

size_t ork_alloc_peak(const ork_alloc *a) { return a->peak; }

/* The index of an existing tag, or -1 (tag_index adds missing ones). */
static int find_tag(const ork_alloc *a, const char *tag) {
    for (int i = 0; i < a->ntags; i++)
        if (strcmp(a->tags[i], tag) == 0) return i;
    return -1;
}

size_t ork_alloc_peak_tag(const ork_alloc *a, const char *tag) {
    int i = find_tag(a, tag);
    return i < 0 ? 0 : a->tag_peak[i];
}

size_t ork_alloc_in_use(const ork_alloc *a, const char *tag) {
    if (!tag) return a->in_use;
    int i = find_tag(a, tag);
    return i < 0 ? 0 : a->tag_bytes[i];
}
size_t ork_alloc_budget(const ork_alloc *a) { return a->budget; }
void ork_alloc_set_budget(ork_alloc *a, size_t budget) { a->budget = budget; }
uint64_t ork_alloc_count(const ork_alloc *a) { return a->count; }
const ork_backend *ork_alloc_backend(const ork_alloc *a) { return a->be; }

/* ---- arena ---------------------------------------------------------------- */

/* One segment of a chunk: [off, off + size), free or live (seq = allocation
 * order, for mark/release). Segments of a chunk are kept sorted by off and
 * tile the chunk exactly. */
typedef struct seg {
    size_t off, size;
    uint64_t seq;
    int live;
} seg;

typedef struct chunk {
    char *base;
    size_t size;
    seg *segs;
    size_t nsegs, capsegs;
} chunk;

struct ork_arena {
    ork_alloc *a;
    char tag[32];
    chunk *chunks;
    size_t nchunks;
    uint64_t seq, grows;
    size_t live, peak, total_since_reset;
};

static ork_status chunk_add(ork_arena *ar, size_t bytes) {
    chunk *c = realloc(ar->chunks, (ar->nchunks + 1) * sizeof *c);
    if (!c) return ORK_FAIL(ORK_E_NOMEM, "arena: out of host memory");
    ar->chunks = c;
    chunk *n = &c[ar->nchunks];
    memset(n, 0, sizeof *n);
    n->segs = malloc(16 * sizeof(seg));
    if (!n->segs) return ORK_FAIL(ORK_E_NOMEM, "arena: out of host memory");
    n->capsegs = 16;
    void *p;
    ork_status s = ork_alloc_get(ar->a, bytes, ar->tag, &p);
    if (s != ORK_OK) { free(n->segs); return s; }
    n->base = p;
    n->size = bytes;
    n->segs[0] = (seg){0, bytes, 0, 0};
    n->nsegs = 1;
    ar->nchunks++;
    ar->grows++;
    return ORK_OK;
}

ork_status ork_arena_create(ork_alloc *a, const char *tag, size_t initial_bytes, ork_arena **out) {
    ork_arena *ar = calloc(1, sizeof *ar);
    if (!ar) return ORK_FAIL(ORK_E_NOMEM, "arena: out of host memory");
    ar->a = a;
    snprintf(ar->tag, sizeof ar->tag, "%s", tag ? tag : "activations");
    if (initial_bytes) {
        ork_status s = chunk_add(ar, ork_alloc_round(initial_bytes));
        if (s != ORK_OK) { free(ar); return s; }
    }
    *out = ar;
    return ORK_OK;
}

static void chunks_free(ork_arena *ar) {
    for (size_t i = 0; i < ar->nchunks; i++) {
        ork_alloc_put(ar->a, ar->chunks[i].base);
        free(ar->chunks[i].segs);
    }
    free(ar->chunks);
    ar->chunks = NULL;
    ar->nchunks = 0;
}

void ork_arena_destroy(ork_arena *ar) {
    if (!ar) return;
    chunks_free(ar);
    free(ar);
}

static int seg_insert(chunk *c, size_t at, seg s) {
    if (c->nsegs == c->capsegs) {
        seg *n = realloc(c->segs, 2 * c->capsegs * sizeof *n);
        if (!n) return 0;
        c->segs = n;
        c->capsegs *= 2;
    }
    memmove(&c->segs[at + 1], &c->segs[at], (c->nsegs - at) * sizeof(seg));
    c->segs[at] = s;
    c->nsegs++;
    return 1;
}

static void *chunk_take(ork_arena *ar, chunk *c, size_t bytes) {
    for (size_t i = 0; i < c->nsegs; i++) {
        seg *s = &c->segs[i];
        if (s->live || s->size < bytes) continue;
        if (s->size > bytes) {
            seg rest = {s->off + bytes, s->size - bytes, 0, 0};
            if (!seg_insert(c, i + 1, rest)) return NULL;
            s = &c->segs[i];
            s->size = bytes;
        }
        s->live = 1;
        s->seq = ar->seq++;
        return c->base + s->off;
    }
    return NULL;
}

ork_status ork_arena_get(ork_arena *ar, size_t bytes, void **ptr) {
    bytes = ork_alloc_round(bytes);
    if (bytes == 0) bytes = ORK_ALLOC_ALIGN;
    void *p = NULL;
    for (size_t i = 0; i < ar->nchunks && !p; i++) p = chunk_take(ar, &ar->chunks[i], bytes);
    if (!p) {
        /* Grow: at least double the current capacity, so growth is geometric. */
        size_t cap = ork_arena_capacity(ar), want = bytes > cap ? bytes : cap;
        if (want < ((size_t)1 << 20)) want = (size_t)1 << 20;
        if (want < bytes) want = bytes;
        /* Under a budget, grow by just what is needed rather than be refused for slack. */
        size_t budget = ork_alloc_budget(ar->a), used = ork_alloc_in_use(ar->a, NULL);
        if (budget && want > bytes && (used >= budget || want > budget - used)) want = bytes;
        ORK_TRY(chunk_add(ar, want));
        p = chunk_take(ar, &ar->chunks[ar->nchunks - 1], bytes);
        if (!p) return ORK_FAIL(ORK_E_NOMEM, "arena: out of host memory");
    }
    ar->live += bytes;
    if (ar->live > ar->peak) ar->peak = ar->live;
    *ptr = p;
    return ORK_OK;
}

static void seg_free(ork_arena *ar, chunk *c, size_t i) {
    ar->live -= c->segs[i].size;
    c->segs[i].live = 0;
    if (i + 1 < c->nsegs && !c->segs[i + 1].live) {
        c->segs[i].size += c->segs[i + 1].size;
        memmove(&c->segs[i + 1], &c->segs[i + 2], (c->nsegs - i - 2) * sizeof(seg));
        c->nsegs--;
    }
    if (i > 0 && !c->segs[i - 1].live) {
        c->segs[i - 1].size += c->segs[i].size;
        memmove(&c->segs[i], &c->segs[i + 1], (c->nsegs - i - 1) * sizeof(seg));
        c->nsegs--;
    }
}

int ork_arena_put_if_live(ork_arena *ar, void *ptr) {
    for (size_t k = 0; ptr && k < ar->nchunks; k++) {
        chunk *c = &ar->chunks[k];
        char *p = ptr;
        if (p < c->base || p >= c->base + c->size) continue;
        size_t off = (size_t)(p - c->base), lo = 0, hi = c->nsegs;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (c->segs[mid].off <= off) lo = mid; else hi = mid;
        }
        if (c->segs[lo].off != off || !c->segs[lo].live) return 0;
        seg_free(ar, c, lo);
        return 1;
    }
    return 0;
}

void ork_arena_put(ork_arena *ar, void *ptr) {
    if (ptr && !ork_arena_put_if_live(ar, ptr))
        ORK_ERROR("arena: free of a pointer that is not a live arena block (%p)", ptr);
}

uint64_t ork_arena_mark(const ork_arena *ar) { return ar->seq; }

void ork_arena_release(ork_arena *ar, uint64_t mark) {
    for (size_t k = 0; k < ar->nchunks; k++) {
        chunk *c = &ar->chunks[k];
        for (size_t i = c->nsegs; i-- > 0;)
            if (i < c->nsegs && c->segs[i].live && c->segs[i].seq >= mark) seg_free(ar, c, i);
    }
}

ork_status ork_arena_reset(ork_arena *ar) {
    if (ar->nchunks > 1) {
        size_t total = ork_arena_capacity(ar);
        chunks_free(ar);
        ar->live = 0;
        return chunk_add(ar, total);
    }
    for (size_t k = 0; k < ar->nchunks; k++) {
        chunk *c = &ar->chunks[k];
        c->segs[0] = (seg){0, c->size, 0, 0};
        c->nsegs = 1;
    }
    ar->live = 0;
    return ORK_OK;
}

uint64_t ork_arena_grow_count(const ork_arena *ar) { return ar->grows; }
size_t ork_arena_live(const ork_arena *ar) { return ar->live; }
size_t ork_arena_peak(const ork_arena *ar) { return ar->peak; }
size_t ork_arena_capacity(const ork_arena *ar) {
    size_t t = 0;
    for (size_t i = 0; i < ar->nchunks; i++) t += ar->chunks[i].size;
    return t;
}

ork_status ork_arena_reserve(ork_arena *ar, size_t bytes) {
    size_t cap = ork_arena_capacity(ar);
    if (bytes <= cap) return ORK_OK;
    return chunk_add(ar, ork_alloc_round(bytes - cap));
}

/* ---- host pool -------------------------------------------------------------- */

struct ork_hpool {
    size_t chunk_bytes;
    char **chunks;
    size_t *sizes;
    size_t nchunks, cur, used;
};

ork_status ork_hpool_create(size_t chunk_bytes, ork_hpool **out) {
    ork_hpool *p = calloc(1, sizeof *p);
    if (!p) return ORK_FAIL(ORK_E_NOMEM, "hpool: out of host memory");
    p->chunk_bytes = chunk_bytes ? chunk_bytes : ((size_t)1 << 20);
    *out = p;
    return ORK_OK;
}

void ork_hpool_destroy(ork_hpool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nchunks; i++) free(p->chunks[i]);
    free(p->chunks);
    free(p->sizes);
    free(p);
}

void *ork_hpool_get(ork_hpool *p, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    while (p->cur < p->nchunks && p->used + bytes > p->sizes[p->cur]) { p->cur++; p->used = 0; }
    if (p->cur == p->nchunks) {
        size_t sz = bytes > p->chunk_bytes ? bytes : p->chunk_bytes;
        char **c = realloc(p->chunks, (p->nchunks + 1) * sizeof *c);
        if (!c) return NULL;
        p->chunks = c;
        size_t *s = realloc(p->sizes, (p->nchunks + 1) * sizeof *s);
        if (!s) return NULL;
        p->sizes = s;
        if (!(c[p->nchunks] = malloc(sz))) return NULL;
        s[p->nchunks++] = sz;
        p->used = 0;
    }
    void *r = p->chunks[p->cur] + p->used;
    p->used += bytes;
    memset(r, 0, bytes);
    return r;
}

ork_hpool_mark ork_hpool_mark_get(const ork_hpool *p) { return (ork_hpool_mark){p->cur, p->used}; }
void ork_hpool_release(ork_hpool *p, ork_hpool_mark m) { p->cur = m.chunk; p->used = m.used; }
void ork_hpool_reset(ork_hpool *p) { p->cur = 0; p->used = 0; }
