/* io/st_writer.c — the safetensors writer: collects tensors (names copied,
 * data borrowed) and metadata, then commits atomically (tmp + fsync + rename +
 * directory fsync), with the checksums of st_check.h when asked. Owns the
 * entry table and the metadata object. */
#include "io/safetensors.h"
#include "io/st_check.h"
#include "io/st_internal.h"

#include "platform/platform.h"
#include "util/log.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *name;
    ork_dtype dtype;
    int ndim;
    int64_t shape[ORK_ST_MAX_NDIM];
    const void *data; /* borrowed */
    uint64_t nbytes;
} st_entry;

struct ork_st_writer {
    st_entry *e;
    size_t n, cap;
    json_t *names; /* set of added names (duplicate check) */
    json_t *meta;  /* __metadata__ */
    int checksum;  /* commit adds the checksum keys (st_check.h) */
};

static const char *dtype_str(ork_dtype t) {
    static const char *const s[ORK_DTYPE_COUNT] = {
        [ORK_F32] = "F32", [ORK_BF16] = "BF16", [ORK_F16] = "F16", [ORK_F8_E4M3] = "F8_E4M3",
        [ORK_F8_E5M2] = "F8_E5M2", [ORK_I32] = "I32", [ORK_U8] = "U8", [ORK_F64] = "F64",
        [ORK_I64] = "I64"};
    return (unsigned)t < ORK_DTYPE_COUNT ? s[t] : NULL;
}

ork_status ork_st_writer_new(ork_st_writer **out) {
    ork_st_writer *w = calloc(1, sizeof *w);
    if (w) { w->names = json_object(); w->meta = json_object(); }
    if (!w || !w->names || !w->meta) {
        ork_st_writer_free(w);
        *out = NULL;
        return ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
    }
    *out = w;
    return ORK_OK;
}

void ork_st_writer_free(ork_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) free(w->e[i].name);
    free(w->e);
    json_decref(w->names);
    json_decref(w->meta);
    free(w);
}

ork_status ork_st_writer_add(ork_st_writer *w, const char *name, ork_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, uint64_t nbytes) {
    if (!name || !*name || strcmp(name, "__metadata__") == 0)
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: invalid tensor name '%s'", name ? name : "(null)");
    if (!dtype_str(dtype))
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor '%s': invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > ORK_ST_MAX_NDIM || (ndim && !shape))
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor '%s': ndim %d not in 0..%d", name,
                        ndim, ORK_ST_MAX_NDIM);
    json_t *js = json_string(name);
    if (!js) return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor name is not valid UTF-8");
    json_decref(js);
    if (json_object_get(w->names, name))
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: duplicate tensor name '%s'", name);
    uint64_t nel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && nel > UINT64_MAX / 8 / (uint64_t)shape[i]))
            return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor '%s': bad shape[%d] = %lld", name,
                            i, (long long)shape[i]);
        nel *= (uint64_t)shape[i];
    }
    if (nbytes != nel * ork_dtype_size(dtype))
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor '%s': %llu bytes given, %s needs %llu",
                        name, (unsigned long long)nbytes, dtype_str(dtype),
                        (unsigned long long)(nel * ork_dtype_size(dtype)));
    if (nbytes && !data)
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: tensor '%s': NULL data", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        st_entry *e = realloc(w->e, cap * sizeof *e);
        if (!e) return ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
        w->e = e;
        w->cap = cap;
    }
    st_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name)) || json_object_set_new(w->names, name, json_true()) != 0) {
        free(e->name);
        return ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
    }
    e->dtype = dtype;
    e->ndim = ndim;
    if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->data = data;
    e->nbytes = nbytes;
    w->n++;
    return ORK_OK;
}

ork_status ork_st_writer_meta(ork_st_writer *w, const char *key, const char *value) {
    if (!key || !value)
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: NULL metadata key or value");
    if (json_object_set_new(w->meta, key, json_string(value)) != 0)
        return ORK_FAIL(ORK_E_INVALID, "safetensors writer: metadata '%s' is not valid UTF-8", key);
    return ORK_OK;
}

void ork_st_writer_checksum(ork_st_writer *w, int on) { w->checksum = on != 0; }

/* The checksum keys of st_check.h into the metadata, over the data as it is now. */
static ork_status add_checksums(ork_st_writer *w) {
    size_t n = w->n ? w->n : 1;
    const void **data = malloc(n * sizeof *data);
    uint64_t *len = malloc(n * sizeof *len);
    uint32_t *crc = malloc(n * sizeof *crc);
    ork_st__desc *d = malloc(n * sizeof *d);
    json_t *map = json_object();
    ork_status s = data && len && crc && d && map ? ORK_OK : ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
    for (size_t i = 0; s == ORK_OK && i < w->n; i++) {
        data[i] = w->e[i].data;
        len[i] = w->e[i].nbytes;
        d[i] = (ork_st__desc){w->e[i].name, dtype_str(w->e[i].dtype), w->e[i].ndim, w->e[i].shape};
    }
    if (s == ORK_OK) ork_crc32_many(w->n, data, len, crc);
    for (size_t i = 0; s == ORK_OK && i < w->n; i++) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", crc[i]);
        if (json_object_set_new(map, w->e[i].name, json_string(hex)) != 0)
            s = ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
    }
    char *txt = s == ORK_OK ? json_dumps(map, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (s == ORK_OK && !txt) s = ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory");
    if (s == ORK_OK) s = ork_st_writer_meta(w, ORK_ST_CRC_KEY, txt);
    if (s == ORK_OK) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", ork_st__header_crc(d, w->n, w->meta));
        s = ork_st_writer_meta(w, ORK_ST_HEADER_CRC_KEY, hex);
    }
    free(txt);
    json_decref(map);
    free(data);
    free(len);
    free(crc);
    free(d);
    return s;
}

/* Reference order: larger elements first, then by name: every tensor aligned. */
static int cmp_entry(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    size_t sx = ork_dtype_size(x->dtype), sy = ork_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The header text: compact JSON, keys sorted, space-padded so 8 + N % 8 == 0. */
static ork_status build_header(ork_st_writer *w, char **out, size_t *len) {
    json_t *h = json_object();
    int bad = !h;
    uint64_t at = 0;
    for (size_t i = 0; i < w->n && !bad; i++) {
        st_entry *e = &w->e[i];
        json_t *sh = json_array();
        for (int d = 0; sh && d < e->ndim; d++) bad |= json_array_append_new(sh, json_integer(e->shape[d]));
        json_t *o = json_pack("{s:s, s:o, s:[I,I]}", "dtype", dtype_str(e->dtype), "shape", sh,
                              "data_offsets", (json_int_t)at, (json_int_t)(at + e->nbytes));
        bad |= !o || json_object_set_new(h, e->name, o) != 0;
        at += e->nbytes;
    }
    if (!bad && json_object_size(w->meta))
        bad = json_object_set(h, "__metadata__", w->meta) != 0;
    char *txt = bad ? NULL : json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(h);
    if (!txt) return ORK_FAIL(ORK_E_NOMEM, "safetensors writer: cannot build the header");
    size_t n = strlen(txt), padded = (n + 7) & ~(size_t)7; /* 8 + padded is a multiple of 8 */
    char *p = realloc(txt, padded);
    if (!p) { free(txt); return ORK_FAIL(ORK_E_NOMEM, "safetensors writer: out of memory"); }
    memset(p + n, ' ', padded - n);
    *out = p;
    *len = padded;
    return ORK_OK;
}

ork_status ork_st_writer_commit(ork_st_writer *w, const char *path) {
    qsort(w->e, w->n, sizeof *w->e, cmp_entry);
    if (w->checksum) ORK_TRY(add_checksums(w));
    char *hdr = NULL;
    size_t hlen = 0;
    ORK_TRY(build_header(w, &hdr, &hlen));

    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, ork_pid()) >= sizeof tmp) {
        free(hdr);
        return ORK_FAIL(ORK_E_INVALID, "%s: path too long", path);
    }
    FILE *fp = ork_fopen(tmp, "wb");
    if (!fp) {
        int err = errno;
        free(hdr);
        return ORK_FAIL(ORK_E_IO, "%s: cannot create %s: %s", path, tmp, strerror(err));
    }
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(n8, 1, 8, fp) == 8 && fwrite(hdr, 1, hlen, fp) == hlen;
    for (size_t i = 0; ok && i < w->n; i++)
        ok = w->e[i].nbytes == 0 || fwrite(w->e[i].data, 1, (size_t)w->e[i].nbytes, fp) == w->e[i].nbytes;
    ok = ok && ork_fsync_file(fp) == ORK_OK;
    int err = errno;
    if (fclose(fp) != 0 && ok) { err = errno; ok = 0; }
    free(hdr);
    if (!ok) {
        ork_path_remove(tmp);
        return ORK_FAIL(ORK_E_IO, "%s: write failed: %s", path, strerror(err));
    }
    /* rename over path, then the folder synced (POSIX) / MoveFileExW write-through */
    if (ork_path_replace(tmp, path) != ORK_OK) {
        err = errno;
        ork_path_remove(tmp); /* gone already when only the folder's fsync failed */
        return ORK_FAIL(ORK_E_IO, "%s: write failed: %s", path, strerror(err));
    }
    return ORK_OK;
}
