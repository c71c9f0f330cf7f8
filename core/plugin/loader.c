/* plugin/loader.c — see loader.h. Owns each ork_plugin: its library handle and
 * the normalised copies of the plugin's entry, components and vtables. */
#include "plugin/loader.h"

#include "platform/platform.h"
#include "plugin/host.h" /* ork_host_init */
#include "util/log.h"    /* ORK_FAIL, ORK_INFO */
#include "util/rfile.h"  /* ork_rfile_open */

#include <orakul/loss.h>
#include <orakul/model.h>
#include <orakul/optimizer.h>
#include <orakul/quant.h>
#include <orakul/text_encoder.h>
#include <orakul/codec.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The end of field f: how far a struct must reach to contain it. */
#define END_OF(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

/* The x.0 layouts end at these fields. Frozen: fields appended in 1.y must
 * NOT be added here (they are what struct_size tells apart). */
const size_t ork_abi_min_entry = END_OF(ork_plugin_entry, components);
const size_t ork_abi_min_component = END_OF(ork_component, vtable);
const size_t ork_abi_min_vtable[ORK_KIND_COUNT] = {
    [ORK_KIND_MODEL] = END_OF(ork_model_vtable, decode),
    [ORK_KIND_LOSS] = END_OF(ork_loss_vtable, compute),
    [ORK_KIND_OPTIMIZER] = END_OF(ork_optimizer_vtable, step),
    [ORK_KIND_QUANT] = END_OF(ork_quant_vtable, dequantize),
    /* new in 1.3: its first layout is the whole 1.3 vtable */
    [ORK_KIND_TEXT_ENCODER] = END_OF(ork_text_encoder_vtable, end),
    [ORK_KIND_CODEC] = END_OF(ork_codec_vtable, decode),
};

const ork_abi_profile ork_abi_current = {
    .major = ORK_ABI_MAJOR,
    .minor = ORK_ABI_MINOR,
    .entry_size = sizeof(ork_plugin_entry),
    .component_size = sizeof(ork_component),
    .vtable_size = {
        [ORK_KIND_MODEL] = sizeof(ork_model_vtable),
        [ORK_KIND_LOSS] = sizeof(ork_loss_vtable),
        [ORK_KIND_OPTIMIZER] = sizeof(ork_optimizer_vtable),
        [ORK_KIND_QUANT] = sizeof(ork_quant_vtable),
        [ORK_KIND_TEXT_ENCODER] = sizeof(ork_text_encoder_vtable),
        [ORK_KIND_CODEC] = sizeof(ork_codec_vtable),
    },
};

const char *ork_kind_name(ork_component_kind k) {
    static const char *const names[ORK_KIND_COUNT] = {"model", "loss", "optimizer", "quant", "text_encoder",
                                                               "codec"};
    return (unsigned)k < ORK_KIND_COUNT ? names[k] : "?";
}

/* major ==, minor <=, struct_size >= min. `what` names the struct. */
static ork_status check_abi(const char *path, const char *what, const ork_abi *a, size_t min,
                            const ork_abi_profile *p) {
    if (a->major != p->major)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: %s built for ABI %u.%u, core provides %u.%u: "
                        "major versions differ, rebuild it against the orakul %u.x SDK",
                        path, what, a->major, a->minor, p->major, p->minor, p->major);
    if (a->minor > p->minor)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: %s built against SDK %u.%u, core provides %u.%u: "
                        "upgrade orakul", path, what, a->major, a->minor, p->major, p->minor);
    if (a->struct_size < min)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: %s (ABI %u.%u, core %u.%u) is truncated: "
                        "struct_size %u is less than the %zu bytes of the %u.0 layout",
                        path, what, a->major, a->minor, p->major, p->minor,
                        (unsigned)a->struct_size, min, p->major);
    return ORK_OK;
}

/* A zero-filled copy of core_size bytes holding the plugin's struct_size. */
static void *normalize(const void *src, size_t core_size) {
    size_t have = ((const ork_abi *)src)->struct_size;
    void *dst = calloc(1, core_size);
    if (dst) memcpy(dst, src, have < core_size ? have : core_size);
    return dst;
}

/* The first required vtable entry that is NULL, or NULL when complete. */
static const char *missing_entry(ork_component_kind k, const void *vt) {
#define REQ(T, f) if (!((const T *)vt)->f) return #f
    switch (k) {
    case ORK_KIND_MODEL:
        REQ(ork_model_vtable, create); REQ(ork_model_vtable, destroy);
        REQ(ork_model_vtable, open); REQ(ork_model_vtable, load);
        REQ(ork_model_vtable, begin); REQ(ork_model_vtable, block);
        break;
    case ORK_KIND_LOSS:
        REQ(ork_loss_vtable, create); REQ(ork_loss_vtable, destroy);
        REQ(ork_loss_vtable, compute);
        break;
    case ORK_KIND_OPTIMIZER:
        REQ(ork_optimizer_vtable, create); REQ(ork_optimizer_vtable, destroy);
        REQ(ork_optimizer_vtable, state_bytes); REQ(ork_optimizer_vtable, step);
        break;
    case ORK_KIND_QUANT:
        REQ(ork_quant_vtable, create); REQ(ork_quant_vtable, destroy);
        REQ(ork_quant_vtable, layout); REQ(ork_quant_vtable, quantize);
        REQ(ork_quant_vtable, dequantize);
        break;
    case ORK_KIND_TEXT_ENCODER:
        REQ(ork_text_encoder_vtable, create); REQ(ork_text_encoder_vtable, destroy);
        REQ(ork_text_encoder_vtable, open); REQ(ork_text_encoder_vtable, load);
        REQ(ork_text_encoder_vtable, begin); REQ(ork_text_encoder_vtable, block);
        REQ(ork_text_encoder_vtable, end);
        break;
    case ORK_KIND_CODEC:
        REQ(ork_codec_vtable, create); REQ(ork_codec_vtable, destroy);
        REQ(ork_codec_vtable, open); REQ(ork_codec_vtable, load);
        REQ(ork_codec_vtable, encode); REQ(ork_codec_vtable, decode);
        break;
    default: break;
    }
#undef REQ
    return NULL;
}

/* Bytes one value of a key takes in the params buffer. */
static size_t param_elem_size(ork_param_type t) {
    switch (t) {
    case ORK_PARAM_BOOL: return sizeof(int32_t);
    case ORK_PARAM_INT: return sizeof(int64_t);
    case ORK_PARAM_FLOAT: return sizeof(double);
    case ORK_PARAM_STRING: return sizeof(const char *);
    }
    return 0;
}

/* Every key is named once, has a known type and fits, aligned, in params_size. */
static ork_status check_params(const char *path, const ork_component *c) {
    if (!c->params) return ORK_OK;
    for (const ork_param *k = c->params; k->key; k++) {
        size_t es = param_elem_size(k->type);
        if (!es)
            return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s: key '%s' has unknown type %d",
                            path, c->id, k->key, (int)k->type);
        size_t bytes = es * (k->count > 1 ? k->count : 1);
        if (k->offset % es || k->offset > c->params_size || bytes > c->params_size - k->offset)
            return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s: key '%s' at offset %zu (%zu bytes) "
                            "is misaligned or outside params_size %zu",
                            path, c->id, k->key, k->offset, bytes, c->params_size);
        for (const ork_param *j = c->params; j < k; j++)
            if (strcmp(j->key, k->key) == 0)
                return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s: key '%s' declared twice",
                                path, c->id, k->key);
    }
    return ORK_OK;
}

/* Check, normalise and attach component i. */
static ork_status open_component(ork_plugin *p, const ork_abi_profile *abi, int i,
                                 const ork_component *raw, ork_component **out) {
    char what[64];
    snprintf(what, sizeof what, "component #%d", i);
    ORK_TRY(check_abi(p->path, what, &raw->abi, ork_abi_min_component, abi));
    ork_component *c = normalize(raw, abi->component_size);
    if (!c) return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", p->path);
    *out = c;
    const void *raw_vt = c->vtable;
    c->vtable = NULL; /* until it points at our own copy (close frees it; a refusal below must not free theirs) */
    if (!c->id || !c->id[0])
        return ORK_FAIL(ORK_E_ABI, "plugin %s: %s has no id", p->path, what);
    if ((unsigned)c->kind >= ORK_KIND_COUNT)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s has unknown kind %d (core ABI %u.%u "
                        "knows %d kinds)", p->path, c->id, (int)c->kind, abi->major, abi->minor,
                        (int)ORK_KIND_COUNT);
    if ((c->kind == ORK_KIND_TEXT_ENCODER || c->kind == ORK_KIND_CODEC) && (raw->abi.major == 1 && raw->abi.minor < 3))
        return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s is a %s, a kind of ABI 1.3, but declares "
                        "ABI %u.%u", p->path, c->id, ork_kind_name(c->kind), raw->abi.major, raw->abi.minor);
    const char *kind = ork_kind_name(c->kind);
    if (!raw_vt)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s (%s) has no vtable", p->path, c->id, kind);
    snprintf(what, sizeof what, "%s vtable of %s", kind, c->id);
    ORK_TRY(check_abi(p->path, what, raw_vt, ork_abi_min_vtable[c->kind], abi));
    void *vt = normalize(raw_vt, abi->vtable_size[c->kind]);
    if (!vt) return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", p->path);
    c->vtable = vt;
    const char *miss = missing_entry(c->kind, vt);
    if (miss)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: component %s (%s, ABI %u.%u): required vtable "
                        "entry '%s' is NULL", p->path, c->id, kind,
                        ((const ork_abi *)vt)->major, ((const ork_abi *)vt)->minor, miss);
    ORK_TRY(check_params(p->path, c));

    ork_plugin_component *pc = &p->components[i];
    size_t n = strlen(p->name) + strlen(c->id) + 2;
    pc->prefix = malloc(n);
    if (!pc->prefix) return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", p->path);
    snprintf(pc->prefix, n, "%s/%s", p->name, c->id);
    ork_host_init(&pc->host, pc->prefix);
    pc->c = c;
    pc->plugin = p;
    return ORK_OK;
}

static ork_status open_checked(ork_plugin *p, const ork_abi_profile *abi) {
    int fd; /* the loader reads the file: a FIFO would block it, a device never end; refused first */
    ork_file_info sb;
    if (ork_rfile_open(p->path, "plugin", 0, ORK_RFILE_QUIET, &fd, NULL) == ORK_OK) ork_fd_close(fd);
    else if (ork_path_info(p->path, &sb) == ORK_OK && sb.kind != ORK_KIND_FILE) /* else the loader says why */
        return ORK_FAIL(ORK_E_IO, "plugin %s: cannot load (core ABI %u.%u): %s, not a regular file", p->path,
                        abi->major, abi->minor, ork_file_kind_str(sb.kind));
    char why[1024];
    if (ork_lib_open(p->path, why, sizeof why, &p->dl) != ORK_OK) {
        /* why starts with the path; the line names it once */
        size_t pl = strlen(p->path);
        const char *r = strncmp(why, p->path, pl) == 0 && why[pl] == ':' ? why + pl + 1 : why;
        while (*r == ' ') r++;
        return ORK_FAIL(ORK_E_IO, "plugin %s: cannot load (core ABI %u.%u): %s", p->path,
                        abi->major, abi->minor, r);
    }
    ork_plugin_entry_fn fn;
    void *sym = ork_lib_sym(p->dl, ORK_ENTRY_SYMBOL);
    if (!sym)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: no symbol %s: not an orakul plugin (core ABI %u.%u)",
                        p->path, ORK_ENTRY_SYMBOL, abi->major, abi->minor);
    memcpy(&fn, &sym, sizeof fn); /* object pointer -> function pointer */
    const ork_plugin_entry *raw = fn();
    if (!raw)
        return ORK_FAIL(ORK_E_ABI, "plugin %s: %s() returned NULL (core ABI %u.%u)", p->path,
                        ORK_ENTRY_SYMBOL, abi->major, abi->minor);
    p->built = raw->abi;
    ORK_TRY(check_abi(p->path, "entry", &raw->abi, ork_abi_min_entry, abi));
    ork_plugin_entry *e = normalize(raw, abi->entry_size);
    if (!e) return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", p->path);
    p->entry = e;
    const ork_component *const *raw_list = e->components;
    e->components = NULL; /* until it points at our own list (close frees it) */
    if (!e->name || !e->name[0] || !raw_list)
        return ORK_FAIL(ORK_E_ABI, "plugin %s (ABI %u.%u): entry lacks %s", p->path,
                        p->built.major, p->built.minor, raw_list ? "a name" : "components");
    p->name = e->name;

    int n = 0;
    while (raw_list[n]) n++;
    ork_component **list = calloc((size_t)n + 1, sizeof *list);
    p->components = calloc((size_t)n + 1, sizeof *p->components);
    e->components = (const ork_component *const *)list;
    if (!list || !p->components) return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", p->path);
    p->n_components = n;
    for (int i = 0; i < n; i++) ORK_TRY(open_component(p, abi, i, raw_list[i], &list[i]));

    ork_host_init(&p->host, p->name);
    return ORK_OK;
}

ork_status ork_plugin_init(ork_plugin *p) {
    if (p->initialized) return ORK_OK;
    if (p->entry->init) {
        ork_status s = p->entry->init(&p->host);
        if (s != ORK_OK)
            return ORK_FAIL(s, "plugin %s (ABI %u.%u): init failed: %s", p->path, p->built.major,
                            p->built.minor, ork_status_str(s));
    }
    p->initialized = 1;
    ORK_INFO("plugin %s %s (ABI %u.%u) loaded from %s", p->name,
             p->entry->version ? p->entry->version : "", p->built.major, p->built.minor, p->path);
    return ORK_OK;
}

ork_status ork_plugin_open(const char *path, const ork_abi_profile *abi, ork_plugin **out) {
    *out = NULL;
    if (!path) return ORK_FAIL(ORK_E_INVALID, "plugin: NULL path");
    ork_plugin *p = calloc(1, sizeof *p);
    if (!p || !(p->path = strdup(path))) {
        free(p);
        return ORK_FAIL(ORK_E_NOMEM, "plugin %s: out of memory", path);
    }
    ork_status s = open_checked(p, abi ? abi : &ork_abi_current);
    if (s != ORK_OK) {
        ork_plugin_close(p);
        return s;
    }
    *out = p;
    return ORK_OK;
}

void ork_plugin_close(ork_plugin *p) {
    if (!p) return;
    if (p->initialized && p->entry->init && p->entry->deinit) p->entry->deinit();
    /* Every pointer freed here is core-owned: open sets them only to our copies. */
    ork_component **list = p->entry ? (ork_component **)p->entry->components : NULL;
    for (int i = 0; list && i < p->n_components; i++) {
        if (list[i]) free((void *)list[i]->vtable);
        free(list[i]);
    }
    free(list);
    for (int i = 0; p->components && i < p->n_components; i++) free(p->components[i].prefix);
    free(p->components);
    free((void *)p->entry);
    ork_lib_close(p->dl);
    free(p->path);
    free(p);
}

/* ---- search path -------------------------------------------------------- */

static ork_status push_dir(char ***v, int *n, const char *dir) {
    if (!dir || !dir[0]) return ORK_OK;
    char real[4096];
    const char *d = ork_path_real(dir, real, sizeof real) == ORK_OK ? real : dir;
    for (int i = 0; i < *n; i++)
        if (strcmp((*v)[i], d) == 0) return ORK_OK;
    char **nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return ORK_FAIL(ORK_E_NOMEM, "plugin search path: out of memory");
    *v = nv;
    if (!(nv[*n] = strdup(d))) return ORK_FAIL(ORK_E_NOMEM, "plugin search path: out of memory");
    (*n)++;
    return ORK_OK;
}

static ork_status push_all(char ***v, int *n, const char *const *yaml_dirs, int n_yaml,
                           const char *exe) {
    for (int i = 0; i < n_yaml; i++) ORK_TRY(push_dir(v, n, yaml_dirs[i]));

    const char *env = ork_env_get("ORAKUL_PLUGIN_PATH");
    if (env) {
        char *copy = strdup(env);
        if (!copy) return ORK_FAIL(ORK_E_NOMEM, "plugin search path: out of memory");
        ork_status s = ORK_OK;
        /* empty fields are skipped: "a::b" and a trailing ':' never mean "." */
        char sep = ork_path_list_sep();
        for (char *tok = copy, *end; tok && s == ORK_OK; tok = end ? end + 1 : NULL) {
            if ((end = strchr(tok, sep))) *end = '\0';
            if (*tok) s = push_dir(v, n, tok);
        }
        free(copy);
        ORK_TRY(s);
    }

    char self[4096];
    if (!exe && ork_exe_path(self, sizeof self) == ORK_OK) exe = self;
    const char *slash = NULL;
    for (const char *c = exe; c && *c; c++)
        if (ork_path_is_sep(*c)) slash = c;
    if (slash) {
        char rel[4096];
        int len;
        /* Windows: plugins live beside orakul.exe (DLLs are found there) */
        if (ork_os_windows()) {
            len = snprintf(rel, sizeof rel, "%.*s", (int)(slash - exe), exe);
            if (len > 0 && (size_t)len < sizeof rel) ORK_TRY(push_dir(v, n, rel));
        }
        len = snprintf(rel, sizeof rel, "%.*s/../lib/orakul/plugins", (int)(slash - exe), exe);
        if (len > 0 && (size_t)len < sizeof rel) ORK_TRY(push_dir(v, n, rel));
    }
    return push_dir(v, n, ORAKUL_PLUGIN_INSTALL_DIR);
}

ork_status ork_plugin_search_dirs(const char *const *yaml_dirs, int n_yaml, const char *exe,
                                  char ***dirs, int *n) {
    *dirs = NULL;
    *n = 0;
    ork_status s = push_all(dirs, n, yaml_dirs, n_yaml, exe);
    if (s != ORK_OK) {
        ork_plugin_dirs_free(*dirs, *n);
        *dirs = NULL;
        *n = 0;
    }
    return s;
}

void ork_plugin_dirs_free(char **dirs, int n) {
    for (int i = 0; i < n; i++) free(dirs[i]);
    free(dirs);
}
