/* data/dataset.c — folder scan, caption loading and trigger injection, file
 * fingerprints. See dataset.h for the rules and where they come from.
 *
 * Owns: the strings and arrays of an ork_dataset. */
#include "data/dataset.h"

#include "platform/platform.h"
#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_read, ork_rfile_open */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *dupstr(const char *s) { return strdup(s ? s : ""); }

static int is_image_name(const char *name) {
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".webp"};
    if (name[0] == '.') return 0; /* hidden */
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (strcasecmp(dot, ext[i]) == 0) return 1;
    return 0;
}

static int cmp_items(const void *a, const void *b) {
    return strcmp(((const ork_dataset_item *)a)->name, ((const ork_dataset_item *)b)->name);
}

/* Trimmed text of a caption file, BOM dropped. *text NULL (and OK) when absent. */
static ork_status read_caption(const char *path, char **text) {
    *text = NULL;
    char *s;
    size_t n; /* a regular file of at most 1 MiB; a FIFO or device is refused before reading */
    ORK_TRY(ork_rfile_read(path, "caption", ORK_CAPTION_MAX_BYTES, ORK_RFILE_MISSING_OK, &s, &n));
    if (!s) return ORK_OK; /* no caption file */
    s[n] = '\0';
    char *b = s;
    if (n >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) b += 3;
    while (*b && isspace((unsigned char)*b)) b++;
    size_t len = strlen(b);
    while (len > 0 && isspace((unsigned char)b[len - 1])) len--;
    memmove(s, b, len);
    s[len] = '\0';
    *text = s;
    return ORK_OK;
}

/* Replace every occurrence of `pat` in *s by `rep` (reallocating *s). */
static int replace_all(char **s, const char *pat, const char *rep) {
    size_t pl = strlen(pat), rl = strlen(rep), count = 0;
    for (const char *p = *s; (p = strstr(p, pat)); p += pl) count++;
    if (!count) return 1;
    char *o = malloc(strlen(*s) + count * rl + 1 - count * pl), *w = o;
    if (!o) return 0;
    const char *p = *s, *q;
    while ((q = strstr(p, pat))) {
        memcpy(w, p, (size_t)(q - p)), w += q - p;
        memcpy(w, rep, rl), w += rl;
        p = q + pl;
    }
    strcpy(w, p);
    free(*s);
    *s = o;
    return 1;
}

ork_status ork_caption_inject_trigger(const char *caption, const char *trigger, int add_if_missing,
                                      char **out) {
    const char *t = trigger ? trigger : "";
    char *s = dupstr(caption);
    if (!s || !replace_all(&s, "[trigger]", t) || !replace_all(&s, "[name]", t)) goto nomem;
    int blank = 1;
    for (const char *p = t; *p; p++) blank &= isspace((unsigned char)*p) != 0;
    if (!blank && add_if_missing && !strstr(s, t)) {
        char *o = malloc(strlen(t) + 1 + strlen(s) + 1);
        if (!o) goto nomem;
        sprintf(o, "%s %s", t, s);
        free(s);
        s = o;
    }
    *out = s;
    return ORK_OK;
nomem:
    free(s);
    *out = NULL;
    return ORK_FAIL(ORK_E_NOMEM, "caption: no memory");
}

ork_status ork_dataset_dropout_caption(const ork_dataset *ds, char **out) {
    return ork_caption_inject_trigger("", ds->trigger_word, ds->trigger_word && !ds->is_reg, out);
}

void ork_dataset_free(ork_dataset *ds) {
    if (!ds) return;
    for (size_t i = 0; i < ds->n; i++) {
        ork_dataset_item *it = &ds->items[i];
        free(it->path), free(it->name), free(it->raw_caption), free(it->caption);
    }
    free(ds->items), free(ds->folder), free(ds->caption_ext), free(ds->trigger_word);
    memset(ds, 0, sizeof *ds);
}

static ork_status load_caption(ork_dataset *ds, const char *default_caption, ork_dataset_item *it) {
    const char *dot = strrchr(it->name, '.');
    size_t stem = (size_t)(dot - it->name), fl = strlen(ds->folder);
    char *cp = malloc(fl + 1 + stem + strlen(ds->caption_ext) + 1);
    if (!cp) return ORK_FAIL(ORK_E_NOMEM, "dataset: no memory");
    sprintf(cp, "%s/%.*s%s", ds->folder, (int)stem, it->name, ds->caption_ext);
    char *text;
    ork_status st = read_caption(cp, &text);
    free(cp);
    if (st != ORK_OK) return st;
    it->has_caption_file = text != NULL;
    if (!text || (!*text && default_caption)) {
        free(text);
        text = dupstr(default_caption);
    }
    if (!(it->raw_caption = text)) return ORK_FAIL(ORK_E_NOMEM, "dataset: no memory");
    return ork_caption_inject_trigger(text, ds->trigger_word, ds->trigger_word && !ds->is_reg,
                                      &it->caption);
}

ork_status ork_dataset_scan(const ork_dataset_opts *o, ork_dataset *ds) {
    memset(ds, 0, sizeof *ds);
    if (!o || !o->folder_path || !*o->folder_path)
        return ORK_FAIL(ORK_E_CONFIG, "datasets[].folder_path is not set");
    const char *fp = o->folder_path;
    ork_file_info sb;
    if (ork_path_info(fp, &sb) != ORK_OK)
        return ORK_FAIL(ORK_E_IO, "datasets[].folder_path %s: %s", fp, strerror(errno));
    if (sb.kind != ORK_KIND_DIR)
        return ORK_FAIL(ORK_E_CONFIG, "datasets[].folder_path %s: not a folder", fp);

    const char *ext = o->caption_ext && *o->caption_ext ? o->caption_ext : ".txt";
    size_t fl = strlen(fp);
    while (fl > 1 && fp[fl - 1] == '/') fl--;
    if ((ds->folder = malloc(fl + 1))) memcpy(ds->folder, fp, fl), ds->folder[fl] = '\0'; /* strndup: not in C11 */
    ds->caption_ext = malloc(strlen(ext) + 2);
    ds->trigger_word = o->trigger_word ? strdup(o->trigger_word) : NULL;
    ds->is_reg = o->is_reg;
    ds->caption_dropout_rate = o->caption_dropout_rate;
    if (!ds->folder || !ds->caption_ext || (o->trigger_word && !ds->trigger_word)) {
        ork_dataset_free(ds);
        return ORK_FAIL(ORK_E_NOMEM, "dataset: no memory");
    }
    sprintf(ds->caption_ext, "%s%s", ext[0] == '.' ? "" : ".", ext);

    ork_dir *d;
    if (ork_dir_open(ds->folder, &d) != ORK_OK) {
        ork_status e = ORK_FAIL(ORK_E_IO, "datasets[].folder_path %s: %s", fp, strerror(errno));
        ork_dataset_free(ds);
        return e;
    }
    ork_status st = ORK_OK;
    size_t cap = 0;
    for (const char *name; st == ORK_OK && (name = ork_dir_next(d));) {
        if (!is_image_name(name)) continue;
        char *path = malloc(fl + 1 + strlen(name) + 1);
        if (!path) { st = ORK_FAIL(ORK_E_NOMEM, "dataset: no memory"); break; }
        sprintf(path, "%s/%s", ds->folder, name);
        if (ork_path_info(path, &sb) != ORK_OK || sb.kind == ORK_KIND_DIR) { free(path); continue; }
        if (sb.kind != ORK_KIND_FILE) { /* a FIFO would block the read, a device never end */
            st = ORK_FAIL(ORK_E_IO, "datasets[].folder_path %s: %s is %s, not a regular file", fp, name,
                          ork_file_kind_str(sb.kind));
            free(path);
            break;
        }
        if (ds->n == cap) {
            cap = cap ? cap * 2 : 64;
            ork_dataset_item *t = realloc(ds->items, cap * sizeof *t);
            if (!t) { free(path); st = ORK_FAIL(ORK_E_NOMEM, "dataset: no memory"); break; }
            ds->items = t;
        }
        ork_dataset_item *it = &ds->items[ds->n++];
        memset(it, 0, sizeof *it);
        it->path = path;
        if (!(it->name = strdup(name))) st = ORK_FAIL(ORK_E_NOMEM, "dataset: no memory");
    }
    ork_dir_close(d);
    if (st == ORK_OK && ds->n == 0)
        st = ORK_FAIL(ORK_E_CONFIG, "datasets[].folder_path %s: no images (.jpg .jpeg .png .webp) in it", fp);
    if (st == ORK_OK) qsort(ds->items, ds->n, sizeof *ds->items, cmp_items);
    size_t missing = 0;
    for (size_t i = 0; st == ORK_OK && i < ds->n; i++) {
        st = load_caption(ds, o->default_caption, &ds->items[i]);
        missing += !ds->items[i].has_caption_file;
    }
    if (st != ORK_OK) {
        ork_dataset_free(ds);
        return st;
    }
    ORK_INFO("dataset %s: %zu images, %zu without a %s caption%s", ds->folder, ds->n, missing,
             ds->caption_ext, missing && o->default_caption ? " (default_caption used)" : "");
    return ORK_OK;
}

uint64_t ork_fnv1a64(const void *data, size_t n, uint64_t h) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

ork_status ork_file_fingerprint(const char *path, int with_hash, ork_file_fp *out) {
    memset(out, 0, sizeof *out);
    ork_file_info sb;
    if (ork_path_info(path, &sb) != ORK_OK) return ORK_FAIL(ORK_E_IO, "%s: %s", path, strerror(errno));
    out->size = sb.size;
    out->mtime_ns = sb.mtime_ns;
    if (!with_hash) return ORK_OK;
    int fd; /* a regular file of at most 1 GiB (an image), checked before reading */
    ORK_TRY(ork_rfile_open(path, "file", ORK_IMAGE_MAX_BYTES, 0, &fd, NULL));
    uint8_t *buf = malloc(1 << 16);
    if (!buf) {
        ork_fd_close(fd);
        return ORK_FAIL(ORK_E_NOMEM, "%s: no memory to hash", path);
    }
    uint64_t h = ORK_FNV1A64_INIT, total = 0;
    size_t got = 0;
    int bad = 0;
    while (total <= ORK_IMAGE_MAX_BYTES) {
        if (ork_fd_read(fd, buf, 1 << 16, &got) != ORK_OK) { bad = errno; break; }
        if (got == 0) break;
        h = ork_fnv1a64(buf, got, h), total += (uint64_t)got;
    }
    ork_fd_close(fd);
    free(buf);
    if (bad) return ORK_FAIL(ORK_E_IO, "%s: read error: %s", path, strerror(bad));
    if (total > ORK_IMAGE_MAX_BYTES) /* it grew while hashed */
        return ORK_FAIL(ORK_E_FORMAT, "%s: the file grew past the %zu-byte limit while read", path, ORK_IMAGE_MAX_BYTES);
    out->hash = h;
    return ORK_OK;
}
