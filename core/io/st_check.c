/* io/st_check.c — checksums (zlib's CRC-32) and finiteness checks of
 * safetensors files; see st_check.h. Owns the short-lived worker threads of
 * ork_crc32_many and nothing after a call returns. */
#include "io/st_check.h"
#include "io/st_internal.h"

#include "numerics/finite.h"
#include "platform/platform.h"
#include "util/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- CRC-32 of many buffers --------------------------------------------- */

enum { PIECE = 16u << 20, MAX_THREADS = 8 };
#define PAR_MIN ((uint64_t)64 << 20) /* below this many bytes in all: one thread */

typedef struct crc_piece {
    const unsigned char *p;
    uint64_t len;
    uint32_t crc;
} crc_piece;

typedef struct crc_work {
    crc_piece *pc;
    size_t n;
    atomic_size_t next;
} crc_work;

static uint32_t crc_of(const unsigned char *p, uint64_t len) {
    uLong c = crc32_z(0L, Z_NULL, 0);
    return len ? (uint32_t)crc32_z(c, p, (z_size_t)len) : (uint32_t)c;
}

static void crc_worker(void *arg) {
    crc_work *w = arg;
    for (size_t i; (i = atomic_fetch_add(&w->next, 1)) < w->n;) w->pc[i].crc = crc_of(w->pc[i].p, w->pc[i].len);
}

void ork_crc32_many(size_t n, const void *const *data, const uint64_t *len, uint32_t *out) {
    uint64_t total = 0;
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        total += len[i];
        np += len[i] ? (size_t)((len[i] + PIECE - 1) / PIECE) : 1;
    }
    int cpus = ork_cpu_count();
    int nt = cpus > MAX_THREADS ? MAX_THREADS : cpus;
    crc_piece *pc = total >= PAR_MIN && nt > 1 ? malloc(np * sizeof *pc) : NULL;
    if (!pc) { /* small (or no memory for the piece list): one pass on this thread */
        for (size_t i = 0; i < n; i++) out[i] = crc_of(data[i], len[i]);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = 0;
        do {
            uint64_t l = len[i] - at < PIECE ? len[i] - at : PIECE;
            pc[k++] = (crc_piece){(const unsigned char *)data[i] + at, l, 0};
            at += l;
        } while (at < len[i]);
    }
    crc_work w = {pc, np, 0};
    ork_thread *th[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < nt && (size_t)t < np; t++)
        if (ork_thread_start(crc_worker, &w, &th[started]) == ORK_OK) started++;
    crc_worker(&w); /* this thread works too: with no helper it does it all */
    for (int t = 0; t < started; t++) ork_thread_join(th[t]);
    k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = pc[k++].crc;
        for (uint64_t at = PIECE; at < len[i]; at += PIECE, k++)
            c = (uint32_t)crc32_combine(c, pc[k].crc, (z_off_t)pc[k].len);
        out[i] = c;
    }
    free(pc);
}

/* ---- the header checksum ------------------------------------------------ */

static int cmp_desc(const void *a, const void *b) {
    return strcmp(((const ork_st__desc *)a)->name, ((const ork_st__desc *)b)->name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static uLong crc_str(uLong c, const char *s) { return crc32_z(c, (const Bytef *)s, strlen(s) + 1); /* with its NUL */ }

uint32_t ork_st__header_crc(ork_st__desc *d, size_t n, const json_t *meta) {
    qsort(d, n, sizeof *d, cmp_desc);
    uLong c = crc32_z(0L, Z_NULL, 0);
    for (size_t i = 0; i < n; i++) {
        c = crc_str(c, d[i].name);
        c = crc_str(c, d[i].dtype);
        char dims[ORK_ST_MAX_NDIM * 21 + 1] = "";
        size_t o = 0;
        for (int k = 0; k < d[i].ndim && k < ORK_ST_MAX_NDIM; k++)
            o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%lld", k ? "," : "", (long long)d[i].shape[k]);
        c = crc_str(c, dims);
    }
    static const Bytef sep = 1;
    c = crc32_z(c, &sep, 1);
    size_t nk = meta ? json_object_size(meta) : 0, m = 0;
    const char **keys = nk ? malloc(nk * sizeof *keys) : NULL;
    if (nk && !keys) return 0; /* cannot happen in practice; a mismatch then says so */
    const char *k;
    json_t *v;
    if (meta)
        json_object_foreach((json_t *)meta, k, v)
            if (strcmp(k, ORK_ST_CRC_KEY) && strcmp(k, ORK_ST_HEADER_CRC_KEY)) keys[m++] = k;
    qsort(keys, m, sizeof *keys, cmp_str);
    for (size_t i = 0; i < m; i++) {
        const char *val = json_string_value(json_object_get(meta, keys[i]));
        c = crc_str(c, keys[i]);
        c = crc_str(c, val ? val : "");
    }
    free(keys);
    return (uint32_t)c;
}

size_t ork_st_meta_keys(const ork_st_file *f, const char **keys, size_t max) {
    const json_t *m = ork_st__meta_json(f);
    size_t n = 0;
    const char *k;
    json_t *v;
    if (m)
        json_object_foreach((json_t *)m, k, v) {
            if (n < max) keys[n] = k;
            n++;
        }
    qsort(keys, n < max ? n : max, sizeof *keys, cmp_str);
    return n;
}

/* ---- verification -------------------------------------------------------- */

/* "89abcdef": exactly 8 hex digits. */
static int parse_crc(const char *s, uint32_t *out) {
    if (!s || strlen(s) != 8 || strspn(s, "0123456789abcdefABCDEF") != 8) return 0;
    *out = (uint32_t)strtoul(s, NULL, 16);
    return 1;
}

ork_status ork_st_verify(const ork_st_file *f, int *verified) {
    *verified = 0;
    const char *path = ork_st_path(f), *map = ork_st_meta(f, ORK_ST_CRC_KEY),
               *hs = ork_st_meta(f, ORK_ST_HEADER_CRC_KEY);
    if (!map && !hs) return ORK_OK;
    if (!map || !hs)
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ has '%s' but not '%s': the checksums are incomplete (the file "
                        "was altered)", path, map ? ORK_ST_CRC_KEY : ORK_ST_HEADER_CRC_KEY,
                        map ? ORK_ST_HEADER_CRC_KEY : ORK_ST_CRC_KEY);
    uint32_t want_h;
    if (!parse_crc(hs, &want_h))
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__['%s'] = '%.40s' is not 8 hex digits", path,
                        ORK_ST_HEADER_CRC_KEY, hs);
    size_t n = ork_st_count(f);
    ork_st__desc *d = malloc((n ? n : 1) * sizeof *d);
    const void **data = malloc((n ? n : 1) * sizeof *data);
    uint64_t *len = malloc((n ? n : 1) * sizeof *len);
    uint32_t *got = malloc((n ? n : 1) * sizeof *got);
    json_error_t je;
    json_t *js = json_loads(map, JSON_REJECT_DUPLICATES, &je);
    ork_status s = ORK_OK;
    if (!d || !data || !len || !got) s = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory verifying %zu checksums", path, n);
    else if (!json_is_object(js))
        s = ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__['%s'] is not a JSON object of checksums", path, ORK_ST_CRC_KEY);
    else if (json_object_size(js) != n) {
        const char *extra = NULL, *k;
        json_t *v;
        json_object_foreach(js, k, v) if (!ork_st_find(f, k) && !extra) extra = k;
        s = extra ? ORK_FAIL(ORK_E_FORMAT, "%s: a checksum for tensor '%s', which the file does not hold (the file was "
                             "altered)", path, extra)
                  : ORK_FAIL(ORK_E_FORMAT, "%s: %zu checksums for %zu tensors (the file was altered)", path,
                             json_object_size(js), n);
    }
    for (size_t i = 0; s == ORK_OK && i < n; i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        d[i] = (ork_st__desc){t->name, t->dtype_name, t->ndim, t->shape};
        data[i] = t->data;
        len[i] = t->nbytes;
    }
    if (s == ORK_OK) ork_crc32_many(n, data, len, got);
    for (size_t i = 0; s == ORK_OK && i < n; i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        uint32_t want;
        const char *v = json_string_value(json_object_get(js, t->name));
        if (!v) s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' has no checksum (the file was altered)", path, t->name);
        else if (!parse_crc(v, &want))
            s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': checksum '%.40s' is not 8 hex digits", path, t->name, v);
        else if (want != got[i])
            s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': its data does not match its checksum (CRC-32 %08x, saved "
                         "%08x): the file is corrupt", path, t->name, got[i], want);
    }
    if (s == ORK_OK) {
        uint32_t h = ork_st__header_crc(d, n, ork_st__meta_json(f));
        if (h != want_h)
            s = ORK_FAIL(ORK_E_FORMAT, "%s: its header (tensor names, dtypes, shapes or metadata) does not match its "
                         "checksum (CRC-32 %08x, saved %08x): the file is corrupt or was edited", path, h, want_h);
    }
    json_decref(js);
    free(d);
    free(data);
    free(len);
    free(got);
    if (s == ORK_OK) *verified = 1;
    return s;
}

/* ---- finiteness ------------------------------------------------------------ */

ork_status ork_st_check_finite(const ork_st_tensor *t, const char *path) {
    if ((unsigned)t->dtype >= ORK_DTYPE_COUNT) return ORK_OK; /* no ork_dtype: nothing we read as numbers */
    uint64_t n = ork_st_nelements(t);
    int64_t i = ork_first_nonfinite(t->dtype, t->data, n);
    if (i < 0) return ORK_OK;
    return ORK_FAIL(ORK_E_NUMERIC, "%s: tensor '%s': element %lld of %llu is %s (only finite values are accepted)",
                    path, t->name, (long long)i, (unsigned long long)n, ork_nonfinite_kind(t->dtype, t->data, (uint64_t)i));
}
