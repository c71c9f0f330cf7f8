/* train/text_cache.c — the text cache's files: key, path, checked load,
 * atomic write (see text_cache.h for the format and the checks). Owns
 * nothing beyond a call. */
#include "train/text_cache.h"

#include "data/dataset.h" /* ork_fnv1a64 */
#include "io/safetensors.h"
#include "io/st_check.h"
#include "numerics/finite.h"
#include "platform/platform.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>

uint64_t ork_text_cache_key(const char *identity, int T, const char *caption) {
    char t[16];
    snprintf(t, sizeof t, "%d", T);
    uint64_t h = ork_fnv1a64(ORK_TEXT_CACHE_FORMAT, sizeof ORK_TEXT_CACHE_FORMAT, ORK_FNV1A64_INIT); /* with its NUL */
    h = ork_fnv1a64(identity ? identity : "", strlen(identity ? identity : "") + 1, h);
    h = ork_fnv1a64(t, strlen(t) + 1, h);
    return ork_fnv1a64(caption ? caption : "", strlen(caption ? caption : ""), h);
}

void ork_text_cache_path(const char *dir, uint64_t key, char *out, size_t n) {
    snprintf(out, n, "%s/%016llx.safetensors", dir, (unsigned long long)key);
}

/* An F32 tensor of exactly the shape (d0[, d1]), all finite. */
static ork_status check_tensor(const char *path, const ork_st_file *f, const char *name, int ndim, int64_t d0,
                               int64_t d1, const ork_st_tensor **out) {
    const ork_st_tensor *t = ork_st_find(f, name);
    *out = t;
    if (!t) return ORK_FAIL(ORK_E_FORMAT, "%s: no tensor '%s'", path, name);
    if (t->dtype != ORK_F32 || t->ndim != ndim || t->shape[0] != d0 || (ndim == 2 && t->shape[1] != d1))
    {
        char want[48];
        if (ndim == 2) snprintf(want, sizeof want, "(%lld, %lld)", (long long)d0, (long long)d1);
        else snprintf(want, sizeof want, "(%lld)", (long long)d0);
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is not F32 %s, what this encoder gives", path, name, want);
    }
    int64_t bad = ork_first_nonfinite(ORK_F32, t->data, ork_st_nelements(t));
    if (bad >= 0)
        return ORK_FAIL(ORK_E_NUMERIC, "%s: tensor '%s' element %lld is %s", path, name, (long long)bad,
                        ork_nonfinite_kind(ORK_F32, t->data, (uint64_t)bad));
    return ORK_OK;
}

static ork_status meta_is(const char *path, const ork_st_file *f, const char *key, const char *want) {
    const char *v = ork_st_meta(f, key);
    if (v && !strcmp(v, want)) return ORK_OK;
    return ORK_FAIL(ORK_E_FORMAT, "%s: its %s is not this entry's (another caption or encoder)", path, key);
}

/* load with short 1: txt may hold 1 .. T rows (an UNMASKED slot's), *len says how many */
static ork_status load_impl(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                            const char *caption, int short_ok, float *txt, float *vec, int *len) {
    if (!ork_path_exists(path)) return ORK_E_IO;
    ork_st_file *f = NULL;
    ORK_TRY(ork_st_open(path, &f));
    int verified = 0;
    char t[16];
    snprintf(t, sizeof t, "%d", T);
    ork_status s = ork_st_verify(f, &verified);
    if (s == ORK_OK && !verified) s = ORK_FAIL(ORK_E_FORMAT, "%s: no checksums (orakul writes them)", path);
    if (s == ORK_OK) s = meta_is(path, f, "format", ORK_TEXT_CACHE_FORMAT);
    if (s == ORK_OK) s = meta_is(path, f, "encoder", identity ? identity : "");
    if (s == ORK_OK) s = meta_is(path, f, "max_length", t);
    if (s == ORK_OK) s = meta_is(path, f, "caption", caption ? caption : "");
    const ork_st_tensor *tt = NULL, *tv = NULL;
    int64_t rows = T;
    const ork_st_tensor *t0 = s == ORK_OK ? ork_st_find(f, "txt") : NULL;
    if (short_ok && t0 && t0->ndim == 2 && t0->shape[0] >= 1 && t0->shape[0] <= T) rows = t0->shape[0];
    if (s == ORK_OK) { /* the rows kept: the tensor's and the metadata's length agree */
        const char *lm = ork_st_meta(f, "length");
        char want[24];
        snprintf(want, sizeof want, "%lld", (long long)rows);
        if (rows < T && !(lm && !strcmp(lm, want)))
            s = ORK_FAIL(ORK_E_FORMAT, "%s: txt has %lld of %d rows but its length says %s", path, (long long)rows, T,
                         lm ? lm : "nothing");
    }
    if (s == ORK_OK) s = check_tensor(path, f, "txt", 2, rows, ctx_dim, &tt);
    if (s == ORK_OK && vec_dim > 0 && vec) s = check_tensor(path, f, "vec", 1, vec_dim, 0, &tv);
    if (s == ORK_OK) s = ork_st_read_f32(tt, txt);
    if (s == ORK_OK && rows < T) memset(txt + (size_t)rows * ctx_dim, 0, (size_t)(T - rows) * ctx_dim * sizeof *txt);
    if (s == ORK_OK && len) *len = (int)rows;
    if (s == ORK_OK && tv) s = ork_st_read_f32(tv, vec);
    ork_st_close(f);
    return s;
}

ork_status ork_text_cache_load(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                               const char *caption, float *txt, float *vec) {
    return load_impl(path, identity, T, ctx_dim, vec_dim, caption, 0, txt, vec, NULL);
}

ork_status ork_text_cache_load_len(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                   const char *caption, float *txt, float *vec, int *len) {
    return load_impl(path, identity, T, ctx_dim, vec_dim, caption, 1, txt, vec, len);
}

ork_status ork_text_cache_write(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                const char *caption, const float *txt, const float *vec) {
    return ork_text_cache_write_len(path, identity, T, ctx_dim, vec_dim, caption, T, txt, vec);
}

ork_status ork_text_cache_write_len(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                    const char *caption, int len, const float *txt, const float *vec) {
    if (len < 1 || len > T)
        return ORK_FAIL(ORK_E_INVALID, "%s: a text cache entry of %d rows (1 .. %d)", path, len, T);
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    ork_st_writer_checksum(w, 1);
    int64_t st[2] = {len, ctx_dim}, sv[1] = {vec_dim};
    char t[16], l[16];
    snprintf(t, sizeof t, "%d", T);
    snprintf(l, sizeof l, "%d", len);
    ork_status s = ork_st_writer_add(w, "txt", ORK_F32, 2, st, txt, (uint64_t)len * ctx_dim * sizeof(float));
    if (s == ORK_OK && vec_dim > 0 && vec)
        s = ork_st_writer_add(w, "vec", ORK_F32, 1, sv, vec, (uint64_t)vec_dim * sizeof(float));
    if (s == ORK_OK) s = ork_st_writer_meta(w, "format", ORK_TEXT_CACHE_FORMAT);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "encoder", identity ? identity : "");
    if (s == ORK_OK) s = ork_st_writer_meta(w, "max_length", t);
    if (s == ORK_OK && len < T) s = ork_st_writer_meta(w, "length", l);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "caption", caption ? caption : "");
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    return s;
}
