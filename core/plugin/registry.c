/* plugin/registry.c — see registry.h. Owns the plugin list and the list of
 * file names already taken by the search order. */
#include "plugin/registry.h"

#include "platform/platform.h"
#include "util/log.h" /* ORK_FAIL, ORK_DEBUG */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ork_registry {
    const ork_abi_profile *abi;
    ork_plugin **plugins;
    int n;
    char **taken; /* plugin file names seen by a scan, loaded or refused */
    int n_taken;
};

ork_status ork_registry_create(const ork_abi_profile *abi, ork_registry **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return ORK_FAIL(ORK_E_NOMEM, "plugin registry: out of memory");
    (*out)->abi = abi;
    return ORK_OK;
}

void ork_registry_destroy(ork_registry *r) {
    if (!r) return;
    for (int i = r->n - 1; i >= 0; i--) ork_plugin_close(r->plugins[i]);
    for (int i = 0; i < r->n_taken; i++) free(r->taken[i]);
    free(r->plugins);
    free(r->taken);
    free(r);
}

int ork_registry_count(const ork_registry *r) { return r->n; }
const ork_plugin *ork_registry_plugin(const ork_registry *r, int i) {
    return i >= 0 && i < r->n ? r->plugins[i] : NULL;
}

static int has_name(const ork_component *c, const char *name) {
    if (strcmp(c->id, name) == 0) return 1;
    for (const char *const *a = c->aliases; a && *a; a++)
        if (strcmp(*a, name) == 0) return 1;
    return 0;
}

/* A component (of p, or of r) that clashes with c: same id in any kind, or
 * c's id/alias equal to an id/alias of the same kind. *what says which. */
static const ork_plugin_component *clash(const ork_registry *r, const ork_plugin *p, int upto,
                                         const ork_component *c, const char **what) {
    for (int i = 0; i <= r->n; i++) {
        const ork_plugin *q = i < r->n ? r->plugins[i] : p;
        int m = i < r->n ? q->n_components : upto;
        for (int j = 0; j < m; j++) {
            const ork_component *o = q->components[j].c;
            *what = c->id;
            if (strcmp(o->id, c->id) == 0 || (o->kind == c->kind && has_name(o, c->id)))
                return &q->components[j];
            if (o->kind != c->kind) continue;
            for (const char *const *a = c->aliases; a && *a; a++)
                if (has_name(o, *a)) {
                    *what = *a;
                    return &q->components[j];
                }
        }
    }
    return NULL;
}

ork_status ork_registry_add_file(ork_registry *r, const char *path) {
    ork_plugin *p;
    ORK_TRY(ork_plugin_open(path, r->abi, &p));
    for (int i = 0; i < p->n_components; i++) {
        const ork_component *c = p->components[i].c;
        const char *what;
        const ork_plugin_component *o = clash(r, p, i, c, &what);
        if (o) {
            ork_status s = ORK_FAIL(ORK_E_ABI, "plugin %s (ABI %u.%u): duplicate component %s "
                                    "'%s' (%s): already provided by %s (ABI %u.%u)",
                                    path, p->built.major, p->built.minor,
                                    what == c->id ? "id" : "alias", what,
                                    ork_kind_name(c->kind), o->plugin->path,
                                    o->plugin->built.major, o->plugin->built.minor);
            ork_plugin_close(p);
            return s;
        }
    }
    ork_plugin **v = realloc(r->plugins, (size_t)(r->n + 1) * sizeof *v);
    if (!v) {
        ork_plugin_close(p);
        return ORK_FAIL(ORK_E_NOMEM, "plugin registry: out of memory");
    }
    r->plugins = v;
    ork_status s = ork_plugin_init(p);
    if (s != ORK_OK) {
        ork_plugin_close(p);
        return s;
    }
    r->plugins[r->n++] = p;
    return ORK_OK;
}

/* orakul-<name>.so, orakul-<name>.dll on Windows */
static int is_plugin_file(const char *name) {
    const char *sfx = ork_lib_suffix();
    size_t n = strlen(name), k = strlen(sfx);
    return n > 7 + k && strncmp(name, "orakul-", 7) == 0 && strcmp(name + n - k, sfx) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Claim file name `name` for the first directory that has it: 1 if new. */
static int take(ork_registry *r, const char *name, ork_status *s) {
    for (int i = 0; i < r->n_taken; i++)
        if (strcmp(r->taken[i], name) == 0) return 0;
    char **v = realloc(r->taken, (size_t)(r->n_taken + 1) * sizeof *v);
    if (!v || !(v[r->n_taken] = strdup(name))) {
        if (v) r->taken = v;
        *s = ORK_FAIL(ORK_E_NOMEM, "plugin registry: out of memory");
        return 0;
    }
    r->taken = v;
    r->n_taken++;
    return 1;
}

static ork_status scan_dir(ork_registry *r, const char *dir) {
    ork_dir *d;
    if (ork_dir_open(dir, &d) != ORK_OK) {
        ORK_DEBUG("plugin dir %s: not readable, skipped", dir);
        return ORK_OK;
    }
    char **names = NULL;
    int n = 0;
    ork_status s = ORK_OK;
    for (const char *e; (e = ork_dir_next(d));) {
        if (!is_plugin_file(e)) continue;
        char **v = realloc(names, (size_t)(n + 1) * sizeof *v);
        if (!v || !(v[n] = strdup(e))) {
            if (v) names = v;
            s = ORK_FAIL(ORK_E_NOMEM, "plugin dir %s: out of memory", dir);
            break;
        }
        names = v;
        n++;
    }
    ork_dir_close(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && s != ORK_E_NOMEM; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        ork_status t = ORK_OK;
        if (!take(r, names[i], &t)) {
            if (t != ORK_OK) s = t;
            else ORK_DEBUG("plugin %s: shadowed by an earlier directory", path);
            continue;
        }
        t = ork_registry_add_file(r, path);
        if (s == ORK_OK) s = t;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return s;
}

ork_status ork_registry_scan(ork_registry *r, char *const *dirs, int n) {
    ork_status s = ORK_OK;
    for (int i = 0; i < n; i++) {
        ork_status t = scan_dir(r, dirs[i]);
        if (s == ORK_OK) s = t;
    }
    return s;
}

const ork_plugin_component *ork_registry_find(const ork_registry *r, ork_component_kind kind,
                                              const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->plugins[i]->n_components; j++) {
            const ork_plugin_component *pc = &r->plugins[i]->components[j];
            if (pc->c->kind == kind && has_name(pc->c, name)) return pc;
        }
    return NULL;
}

void ork_registry_available(const ork_registry *r, ork_component_kind kind, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
#define PUT(...) (len < n ? len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__) : 0)
    for (int i = 0; i < r->n; i++)
        for (int j = 0; j < r->plugins[i]->n_components; j++) {
            const ork_component *c = r->plugins[i]->components[j].c;
            if (c->kind != kind) continue;
            PUT("%s%s", len ? ", " : "", c->id);
            for (const char *const *a = c->aliases; a && *a; a++)
                PUT("%s%s", a == c->aliases ? " (" : ", ", *a);
            if (c->aliases && c->aliases[0]) PUT(")");
        }
#undef PUT
    if (!buf[0]) snprintf(buf, n, "none (no plugin provides a %s)", ork_kind_name(kind));
}

ork_status ork_registry_require(const ork_registry *r, ork_component_kind kind, const char *name,
                                const char *field, const ork_plugin_component **out) {
    *out = ork_registry_find(r, kind, name);
    if (*out) return ORK_OK;
    char avail[1024];
    ork_registry_available(r, kind, avail, sizeof avail);
    return ORK_FAIL(ORK_E_CONFIG, "%s: no %s component '%s'; available: %s", field ? field : "config",
                    ork_kind_name(kind), name ? name : "(none)", avail);
}
