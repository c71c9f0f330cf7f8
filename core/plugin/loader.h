/* plugin/loader.h — opening one plugin file: dlopen, the ABI checks of
 * ARCHITECTURE §3 / STYLE §7.3, and normalisation of the plugin's tables into
 * core-owned copies; plus the plugin search path.
 *
 * ABI rule (abi.h): plugin major == core major, plugin minor <= core minor,
 * struct_size >= the end of the struct's x.0 layout. Every checked struct (the
 * entry, each component, each vtable) is copied into a zero-filled struct of
 * the core's size, so fields a plugin's build does not know read as NULL.
 * Each refusal logs one line naming the file and the versions involved.
 *
 * Owns: an ork_plugin owns its dlopen handle, its path string, the normalised
 * copies and the host tables it hands out. Strings inside the copies (ids,
 * docs, key tables) still point into the plugin and are valid until
 * ork_plugin_close. [control-thread] */
#ifndef ORK_PLUGIN_LOADER_H
#define ORK_PLUGIN_LOADER_H

#include <orakul/plugin.h> /* ork_plugin_entry, ork_component, ork_host */

/* The layout the core expects: its version and the size of its own copy of
 * each struct. ork_abi_current is what this build was compiled with; tests use
 * a profile with a higher minor and larger sizes to play a future 1.y core. */
typedef struct ork_abi_profile {
    uint16_t major, minor;
    size_t entry_size;
    size_t component_size;
    size_t vtable_size[ORK_KIND_COUNT];
} ork_abi_profile;
extern const ork_abi_profile ork_abi_current;

/* The end of each struct's x.0 layout (for major 1: ABI 1.0): a plugin's
 * struct_size must reach at least this far. */
extern const size_t ork_abi_min_entry, ork_abi_min_component;
extern const size_t ork_abi_min_vtable[ORK_KIND_COUNT];

/* "model", "loss", "optimizer", "quant", "text_encoder" (or "?"). */
const char *ork_kind_name(ork_component_kind k);

/* A loaded component: the normalised component (its vtable pointer points at
 * the normalised vtable) and the host table to pass to its create(). */
typedef struct ork_plugin_component {
    const ork_component *c;
    ork_host host;                 /* pass &host to create(); log prefix "<plugin>/<id>" */
    char *prefix;
    const struct ork_plugin *plugin;
} ork_plugin_component;

typedef struct ork_plugin {
    char *path;                    /* as opened */
    const char *name;              /* entry->name */
    struct ork_lib *dl;            /* platform/platform.h */
    ork_abi built;                 /* the entry's header as the plugin declared it */
    const ork_plugin_entry *entry; /* normalised; entry->components is core-owned too */
    int n_components;
    ork_plugin_component *components;
    ork_host host;                 /* passed to entry->init, log prefix "<plugin>" */
    int initialized;               /* ork_plugin_init succeeded: deinit runs on close */
} ork_plugin;

/* dlopen(path, RTLD_NOW | RTLD_LOCAL), check, normalise. abi: NULL =
 * ork_abi_current. On failure logs one line and returns ORK_E_ABI (not a
 * plugin, version, layout or table error) or ORK_E_IO (dlopen failed); *out
 * stays NULL. Caller owns *out. */
ork_status ork_plugin_open(const char *path, const ork_abi_profile *abi, ork_plugin **out);

/* Call entry->init(&p->host) once (a no-op after the first success) and log
 * the chosen path. A failure logs one line and returns init's status. */
ork_status ork_plugin_init(ork_plugin *p);

/* deinit (when init ran), dlclose, free. NULL is a no-op. */
void ork_plugin_close(ork_plugin *p);

/* The plugin directories, in search order, first match wins:
 *   1. yaml_dirs (plugins.path from the config, already absolute or relative
 *      to where the caller wants), in order;
 *   2. $ORAKUL_PLUGIN_PATH, a ':'-separated list (';' on Windows; empty
 *      entries are dropped: they never mean the current directory);
 *   3. on Windows, <dir of exe> (plugins beside orakul.exe); then
 *      <dir of exe>/../lib/orakul/plugins (exe NULL: the running executable);
 *   4. ORAKUL_PLUGIN_INSTALL_DIR, compiled in.
 * Never the current directory. Directories that do not exist are kept (the
 * scan skips them); duplicates are dropped. Caller frees with
 * ork_plugin_dirs_free(*dirs, *n). */
ork_status ork_plugin_search_dirs(const char *const *yaml_dirs, int n_yaml, const char *exe,
                                  char ***dirs, int *n);
void ork_plugin_dirs_free(char **dirs, int n);

#endif
