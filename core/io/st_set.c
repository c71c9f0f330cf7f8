/* io/st_set.c — sharded safetensors sets: one file, a *.safetensors.index.json
 * (weight_map: tensor name -> shard file) or a directory. Owns the opened
 * shard files and a name-sorted table of (tensor, shard) pointers into them. */
#include "io/safetensors.h"

#include "platform/platform.h"
#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_read */

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ork_st_tensor *t;
    size_t file;
} set_entry;

struct ork_st_set {
    ork_st_file **f;
    size_t nf;
    set_entry *e; /* [n] sorted by name */
    size_t n;
};

static const char k_index_suffix[] = ".safetensors.index.json";

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const set_entry *)a)->t->name, ((const set_entry *)b)->t->name);
}

static int cmp_key_entry(const void *key, const void *b) {
    return strcmp((const char *)key, ((const set_entry *)b)->t->name);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Opens every file of names[n] (relative to dir) into s->f. */
static ork_status open_files(ork_st_set *s, const char *dir, char **names, size_t n) {
    s->f = calloc(n ? n : 1, sizeof *s->f);
    if (!s->f) return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", dir);
    for (size_t i = 0; i < n; i++) {
        char *p = join(dir, names[i]);
        if (!p) return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", dir);
        ork_status st = ork_st_open(p, &s->f[i]);
        free(p);
        if (st != ORK_OK) return st;
        s->nf++;
    }
    return ORK_OK;
}

static ork_status sort_entries(ork_st_set *s) {
    qsort(s->e, s->n, sizeof *s->e, cmp_entry);
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(s->e[i - 1].t->name, s->e[i].t->name) == 0)
            return ORK_FAIL(ORK_E_FORMAT, "tensor '%s' is in both %s and %s", s->e[i].t->name,
                            ork_st_path(s->f[s->e[i - 1].file]), ork_st_path(s->f[s->e[i].file]));
    return ORK_OK;
}

/* Every tensor of every file. */
static ork_status take_all(ork_st_set *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->nf; i++) n += ork_st_count(s->f[i]);
    s->e = calloc(n ? n : 1, sizeof *s->e);
    if (!s->e) return ORK_FAIL(ORK_E_NOMEM, "safetensors set: out of memory");
    for (size_t i = 0; i < s->nf; i++)
        for (size_t j = 0; j < ork_st_count(s->f[i]); j++)
            s->e[s->n++] = (set_entry){ork_st_at(s->f[i], j), i};
    return sort_entries(s);
}

static ork_status open_index(ork_st_set *s, const char *path) {
    json_error_t err;
    char *text; /* a regular file of at most 64 MiB (a FIFO, /dev/zero: refused before reading) */
    size_t len;
    ORK_TRY(ork_rfile_read(path, "checkpoint index", ORK_INDEX_MAX_BYTES, 0, &text, &len));
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!root)
        return ORK_FAIL(ORK_E_FORMAT, "%s: not valid JSON: %s (line %d)", path, err.text, err.line);
    ork_status st = ORK_OK;
    json_t *wm = json_object_get(root, "weight_map");
    size_t nmap = json_object_size(wm), nshard = 0;
    char **shards = calloc(nmap ? nmap : 1, sizeof *shards);
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!shards || !dir) { st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path); goto done; }
    if (slash) *slash = '\0'; else strcpy(dir, ".");
    if (!json_is_object(wm)) {
        st = ORK_FAIL(ORK_E_FORMAT, "%s: \"weight_map\" missing or not an object", path);
        goto done;
    }
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v) { /* the distinct shard names */
        const char *sh = json_string_value(v);
        if (!sh || !*sh || sh[0] == '/' || strstr(sh, "..")) {
            st = ORK_FAIL(ORK_E_FORMAT, "%s: weight_map['%s'] is not a relative shard file name", path, name);
            goto done;
        }
        shards[nshard++] = (char *)sh;
    }
    qsort(shards, nshard, sizeof *shards, cmp_str_ptr);
    size_t u = 0;
    for (size_t i = 0; i < nshard; i++)
        if (!u || strcmp(shards[u - 1], shards[i]) != 0) shards[u++] = shards[i];
    if ((st = open_files(s, dir, shards, u)) != ORK_OK) goto done;

    s->e = calloc(nmap ? nmap : 1, sizeof *s->e);
    if (!s->e) { st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path); goto done; }
    json_object_foreach(wm, name, v) {
        const char *sh = json_string_value(v);
        char **k = bsearch(&sh, shards, u, sizeof *shards, cmp_str_ptr);
        size_t fi = (size_t)(k - shards);
        const ork_st_tensor *t = ork_st_find(s->f[fi], name);
        if (!t) {
            st = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is mapped to %s but that shard does not hold it",
                          path, name, sh);
            goto done;
        }
        s->e[s->n++] = (set_entry){t, fi};
    }
    for (size_t i = 0; i < s->nf; i++) { /* tensors the map does not name are not part of the set */
        size_t extra = 0;
        for (size_t j = 0; j < ork_st_count(s->f[i]); j++) {
            const char *tn = ork_st_at(s->f[i], j)->name;
            const char *m = json_string_value(json_object_get(wm, tn));
            extra += !m || strcmp(m, shards[i]) != 0;
        }
        if (extra)
            ORK_WARN("%s: %zu tensors of %s are not in its weight_map (ignored)", path, extra, shards[i]);
    }
    st = sort_entries(s);
done:
    free(shards);
    free(dir);
    json_decref(root);
    return st;
}

static ork_status open_dir(ork_st_set *s, const char *path) {
    ork_dir *d;
    if (ork_dir_open(path, &d) != ORK_OK) return ORK_FAIL(ORK_E_IO, "%s: cannot open directory: %s", path, strerror(errno));
    char **names = NULL, *index = NULL;
    size_t n = 0, cap = 0, nindex = 0;
    ork_status st = ORK_OK;
    const char *name;
    while (st == ORK_OK && (name = ork_dir_next(d))) {
        if (ends_with(name, k_index_suffix)) {
            nindex++;
            if (!index && !(index = join(path, name))) st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path);
        } else if (ends_with(name, ".safetensors")) {
            if (n == cap) {
                char **p = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
                if (!p) { st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path); break; }
                names = p;
            }
            if (!(names[n] = strdup(name))) st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path);
            else n++;
        }
    }
    ork_dir_close(d);
    if (st == ORK_OK) {
        if (nindex > 1)
            st = ORK_FAIL(ORK_E_FORMAT, "%s: %zu *%s files, expected at most one", path, nindex, k_index_suffix);
        else if (nindex == 1)
            st = open_index(s, index);
        else if (n == 0)
            st = ORK_FAIL(ORK_E_IO, "%s: no *.safetensors or *%s files", path, k_index_suffix);
        else {
            qsort(names, n, sizeof *names, cmp_str_ptr);
            st = open_files(s, path, names, n);
            if (st == ORK_OK) st = take_all(s);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(index);
    return st;
}

ork_status ork_st_set_open(const char *path, ork_st_set **out) {
    *out = NULL;
    ork_st_set *s = calloc(1, sizeof *s);
    if (!s) return ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path);
    ork_file_info sb;
    ork_status st;
    if (ork_path_info(path, &sb) != ORK_OK)
        st = ORK_FAIL(ORK_E_IO, "%s: %s", path, strerror(errno));
    else if (sb.kind == ORK_KIND_DIR)
        st = open_dir(s, path);
    else if (ends_with(path, ".json"))
        st = open_index(s, path);
    else if (!(s->f = calloc(1, sizeof *s->f)))
        st = ORK_FAIL(ORK_E_NOMEM, "%s: out of memory", path);
    else if ((st = ork_st_open(path, &s->f[0])) == ORK_OK) {
        s->nf = 1;
        st = take_all(s);
    }
    if (st != ORK_OK) {
        ork_st_set_close(s);
        return st;
    }
    *out = s;
    return ORK_OK;
}

void ork_st_set_close(ork_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nf; i++) ork_st_close(s->f[i]);
    free(s->f);
    free(s->e);
    free(s);
}

size_t ork_st_set_count(const ork_st_set *s) { return s->n; }
const ork_st_tensor *ork_st_set_at(const ork_st_set *s, size_t i) { return i < s->n ? s->e[i].t : NULL; }
size_t ork_st_set_nfiles(const ork_st_set *s) { return s->nf; }
const ork_st_file *ork_st_set_file(const ork_st_set *s, size_t i) { return i < s->nf ? s->f[i] : NULL; }

const ork_st_tensor *ork_st_set_find(const ork_st_set *s, const char *name) {
    set_entry *e = bsearch(name, s->e, s->n, sizeof *s->e, cmp_key_entry);
    return e ? e->t : NULL;
}
