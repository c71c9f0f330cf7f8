/* io/safetensors.c — the safetensors reader: mmap (read-only) plus every check
 * of FLUX.md §5 before ork_st_open returns. Owns the mapping, the parsed
 * header (jansson; tensor names and metadata strings point into it) and the
 * tensor table of each ork_st_file. */
#include "io/safetensors.h"
#include "io/st_internal.h"

#include "util/log.h"
#include "platform/platform.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct ork_st_file {
    char *path;
    const uint8_t *map;   /* [len] */
    uint64_t len;
    json_t *header;       /* owns names, dtype strings and metadata */
    json_t *meta;         /* borrowed from header; NULL when absent */
    size_t n;
    ork_st_tensor *t;     /* [n] in offset order */
    ork_st_tensor **by_name; /* [n] sorted by strcmp(name) */
};

/* ---- dtypes ------------------------------------------------------------- */
static const struct {
    const char *name;
    unsigned bits;
    ork_dtype dtype; /* ORK_ST_DTYPE_UNSUPPORTED: valid in the spec, no ork_dtype */
} k_dtypes[] = {
    {"F32", 32, ORK_F32},         {"F16", 16, ORK_F16},
    {"BF16", 16, ORK_BF16},       {"F8_E4M3", 8, ORK_F8_E4M3},
    {"F8_E5M2", 8, ORK_F8_E5M2},  {"I32", 32, ORK_I32},
    {"U8", 8, ORK_U8},            {"F64", 64, ORK_F64},
    {"I64", 64, ORK_I64},
    {"BOOL", 8, ORK_ST_DTYPE_UNSUPPORTED},        {"I8", 8, ORK_ST_DTYPE_UNSUPPORTED},
    {"I16", 16, ORK_ST_DTYPE_UNSUPPORTED},        {"U16", 16, ORK_ST_DTYPE_UNSUPPORTED},
    {"U32", 32, ORK_ST_DTYPE_UNSUPPORTED},        {"U64", 64, ORK_ST_DTYPE_UNSUPPORTED},
    {"C64", 64, ORK_ST_DTYPE_UNSUPPORTED},        {"F4", 4, ORK_ST_DTYPE_UNSUPPORTED},
    {"F6_E2M3", 6, ORK_ST_DTYPE_UNSUPPORTED},     {"F6_E3M2", 6, ORK_ST_DTYPE_UNSUPPORTED},
    {"F8_E8M0", 8, ORK_ST_DTYPE_UNSUPPORTED},     {"F8_E4M3FNUZ", 8, ORK_ST_DTYPE_UNSUPPORTED},
    {"F8_E5M2FNUZ", 8, ORK_ST_DTYPE_UNSUPPORTED},
};

/* ---- small helpers ------------------------------------------------------ */
/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF): 1 when valid. */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

/* A JSON integer >= 0 (jansson refuses values past INT64_MAX as "too big"). */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static int cmp_offset(const void *a, const void *b) {
    const ork_st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp((*(ork_st_tensor *const *)a)->name, (*(ork_st_tensor *const *)b)->name);
}

static int cmp_key_ptr(const void *key, const void *b) {
    return strcmp((const char *)key, (*(ork_st_tensor *const *)b)->name);
}

/* ---- one header entry --------------------------------------------------- */
/* Fills t except data (set once the offsets are checked). */
static ork_status parse_entry(const char *path, const char *name, json_t *e, ork_st_tensor *t) {
    if (!json_is_object(e))
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': entry is not a JSON object", path, name);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': \"dtype\" missing or not a string", path, name);
    if (!json_is_array(sh))
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': \"shape\" missing or not an array", path, name);
    if (!json_is_array(off) || json_array_size(off) != 2)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': \"data_offsets\" must be an array [BEGIN, END]",
                        path, name);

    const char *ds = json_string_value(dt);
    unsigned bits = 0;
    t->name = name;
    t->dtype_name = ds;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(ds, k_dtypes[i].name) == 0) { bits = k_dtypes[i].bits; t->dtype = k_dtypes[i].dtype; }
    if (!bits)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': unknown dtype \"%s\"", path, name, ds);

    size_t nd = json_array_size(sh);
    if (nd > ORK_ST_MAX_NDIM)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': %zu dimensions, at most %d supported", path,
                        name, nd, ORK_ST_MAX_NDIM);
    t->ndim = (int)nd;
    uint64_t nel = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!json_u64(json_array_get(sh, i), &d))
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                            path, name, i);
        t->shape[i] = (int64_t)d;
        if (d && nel > UINT64_MAX / d)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': element count overflows 64 bits", path, name);
        nel *= d;
    }
    if (nel > UINT64_MAX / bits)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': bit count overflows 64 bits", path, name);
    uint64_t nbits = nel * bits;
    if (nbits % 8)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': %s[%llu] is %llu bits, not a whole number of bytes",
                        path, name, ds, (unsigned long long)nel, (unsigned long long)nbits);

    uint64_t b, e2;
    if (!json_u64(json_array_get(off, 0), &b) || !json_u64(json_array_get(off, 1), &e2))
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers",
                        path, name);
    if (e2 < b)
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu] end before they begin",
                        path, name, (unsigned long long)b, (unsigned long long)e2);
    if (e2 - b != nbits / 8) {
        char dims[8 * 21 + 1] = "";
        size_t p = 0;
        for (size_t i = 0; i < nd; i++)
            p += (size_t)snprintf(dims + p, sizeof dims - p, "%s%lld", i ? "," : "",
                                  (long long)t->shape[i]);
        return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data_offsets [%llu,%llu] but %s[%s] needs %llu bytes",
                        path, name, (unsigned long long)b, (unsigned long long)e2, ds, dims,
                        (unsigned long long)(nbits / 8));
    }
    t->offset = b;
    t->nbytes = e2 - b;
    return ORK_OK;
}

static ork_status check_meta(const char *path, json_t *m) {
    if (json_is_null(m)) return ORK_OK;
    if (!json_is_object(m))
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ is not a JSON object", path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__['%s'] is not a string (must be a flat "
                            "string-to-string map)", path, k);
    }
    return ORK_OK;
}

/* ---- the header --------------------------------------------------------- */
static ork_status parse_header(ork_st_file *f) {
    const char *path = f->path;
    if (f->len < 8)
        return ORK_FAIL(ORK_E_FORMAT, "%s: %llu bytes, shorter than the 8-byte header size", path,
                        (unsigned long long)f->len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->map[i];
    if (n > ORK_ST_MAX_HEADER)
        return ORK_FAIL(ORK_E_FORMAT, "%s: header size %llu is larger than the limit %u", path,
                        (unsigned long long)n, ORK_ST_MAX_HEADER);
    if (n > f->len - 8)
        return ORK_FAIL(ORK_E_FORMAT, "%s: header size %llu runs past the end of the %llu-byte file",
                        path, (unsigned long long)n, (unsigned long long)f->len);
    const uint8_t *h = f->map + 8;
    if (n == 0 || h[0] != '{')
        return ORK_FAIL(ORK_E_FORMAT, "%s: header does not start with '{'", path);
    if (!utf8_valid(h, n))
        return ORK_FAIL(ORK_E_FORMAT, "%s: header is not valid UTF-8", path);

    json_error_t err;
    f->header = json_loadb((const char *)h, n, JSON_REJECT_DUPLICATES, &err);
    if (!f->header)
        return ORK_FAIL(ORK_E_FORMAT, "%s: header is not valid JSON: %s (byte %d)", path, err.text,
                        err.position);
    if (!json_is_object(f->header))
        return ORK_FAIL(ORK_E_FORMAT, "%s: header is not a JSON object", path);

    size_t cap = json_object_size(f->header);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    f->by_name = calloc(cap ? cap : 1, sizeof *f->by_name);
    if (!f->t || !f->by_name) return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory for %zu tensors", path, cap);

    const char *k;
    json_t *v;
    json_object_foreach(f->header, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            ORK_TRY(check_meta(path, v));
            f->meta = json_is_object(v) ? v : NULL;
            continue;
        }
        ORK_TRY(parse_entry(path, k, v, &f->t[f->n]));
        f->n++;
    }

    /* offsets: sorted, from 0, contiguous, ending exactly at the end of the file */
    qsort(f->t, f->n, sizeof *f->t, cmp_offset);
    uint64_t at = 0, data_len = f->len - 8 - n;
    for (size_t i = 0; i < f->n; i++) {
        ork_st_tensor *t = &f->t[i];
        uint64_t b = t->offset;
        if (b != at) {
            if (i == 0)
                return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data starts at %llu, the first tensor "
                                "must start at 0", path, t->name, (unsigned long long)b);
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data starts at %llu but '%s' ends at %llu (%s)",
                            path, t->name, (unsigned long long)b, f->t[i - 1].name,
                            (unsigned long long)at, b > at ? "hole" : "overlap");
        }
        at = b + t->nbytes;
        if (at > data_len)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s': data ends at %llu, past the %llu data bytes "
                            "in the file (truncated?)", path, t->name, (unsigned long long)at,
                            (unsigned long long)data_len);
        t->data = f->map + 8 + n + b;
        f->by_name[i] = t;
    }
    if (at != data_len)
        return ORK_FAIL(ORK_E_FORMAT, "%s: %llu trailing bytes after the last tensor's data", path,
                        (unsigned long long)(data_len - at));
    qsort(f->by_name, f->n, sizeof *f->by_name, cmp_name_ptr);
    return ORK_OK;
}

ork_status ork_st_open(const char *path, ork_st_file **out) {
    *out = NULL;
    ork_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path);
    }
    /* O_NONBLOCK: a FIFO with no writer opens at once, and fstat refuses it below */
    int fd = -1;
    ork_file_info st;
    ork_status s = ORK_OK;
    if (ork_fd_open(path, ORK_F_READ | ORK_F_NONBLOCK, &fd) != ORK_OK) {
        s = ORK_FAIL(ORK_E_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (ork_fd_info(fd, &st) != ORK_OK) {
        s = ORK_FAIL(ORK_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (st.kind != ORK_KIND_FILE) {
        s = ORK_FAIL(ORK_E_IO, "%s: %s, not a regular file", path, ork_file_kind_str(st.kind));
    } else {
        f->len = st.size;
        if (f->len >= 8) {
            const void *m;
            if (ork_map_fd(fd, f->len, &m) != ORK_OK)
                s = ORK_FAIL(ORK_E_IO, "%s: cannot map %llu bytes: %s", path,
                             (unsigned long long)f->len, strerror(errno));
            else
                f->map = m;
        }
        if (s == ORK_OK) s = parse_header(f);
    }
    ork_fd_close(fd);
    if (s != ORK_OK) {
        ork_st_close(f);
        return s;
    }
    *out = f;
    return ORK_OK;
}

void ork_st_close(ork_st_file *f) {
    if (!f) return;
    ork_map_close(f->map, f->len);
    json_decref(f->header);
    free(f->t);
    free(f->by_name);
    free(f->path);
    free(f);
}

size_t ork_st_count(const ork_st_file *f) { return f->n; }
const ork_st_tensor *ork_st_at(const ork_st_file *f, size_t i) { return i < f->n ? &f->t[i] : NULL; }
const char *ork_st_path(const ork_st_file *f) { return f->path; }

const ork_st_tensor *ork_st_find(const ork_st_file *f, const char *name) {
    ork_st_tensor **p = bsearch(name, f->by_name, f->n, sizeof *f->by_name, cmp_key_ptr);
    return p ? *p : NULL;
}

const char *ork_st_meta(const ork_st_file *f, const char *key) {
    return f->meta ? json_string_value(json_object_get(f->meta, key)) : NULL;
}

uint64_t ork_st_nelements(const ork_st_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}

const json_t *ork_st__meta_json(const ork_st_file *f) { return f->meta; }
