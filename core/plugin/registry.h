/* plugin/registry.h — every loaded plugin and the components they provide,
 * looked up per kind by reverse-DNS id or alias (what train.optimizer,
 * train.loss_type, model.arch and model.qtype name).
 *
 * Owns: the ork_plugin objects it loaded (closed by ork_registry_destroy).
 * Returned pointers are borrowed and valid until then. [control-thread] */
#ifndef ORK_PLUGIN_REGISTRY_H
#define ORK_PLUGIN_REGISTRY_H

#include "plugin/loader.h" /* ork_plugin, ork_plugin_component, ork_abi_profile */

typedef struct ork_registry ork_registry;

/* abi: NULL = ork_abi_current. Caller owns *out. */
ork_status ork_registry_create(const ork_abi_profile *abi, ork_registry **out);
void ork_registry_destroy(ork_registry *r); /* NULL is a no-op */

/* Open one plugin file, check its components against those already loaded,
 * then call its init (ork_plugin_init). A component id already
 * provided (by any plugin, or twice by this one), or an alias already used by
 * a component of the same kind, refuses the whole plugin with one line naming
 * both files: ORK_E_ABI. Other refusals: see ork_plugin_open. */
ork_status ork_registry_add_file(ork_registry *r, const char *path);

/* Scan dirs in order for files orakul-<name>.so (.dll on Windows; not recursive, sorted by
 * name). The first file of each name wins; later ones are shadowed (a debug
 * line). A missing directory is skipped. Every refused file logs its line and
 * the scan goes on; the status of the first refusal is returned. */
ork_status ork_registry_scan(ork_registry *r, char *const *dirs, int n);

int ork_registry_count(const ork_registry *r);
const ork_plugin *ork_registry_plugin(const ork_registry *r, int i);

/* The component of `kind` whose id or one of whose aliases is `name`, or NULL. */
const ork_plugin_component *ork_registry_find(const ork_registry *r, ork_component_kind kind,
                                              const char *name);

/* "<id> (<alias>, ...), ..." for every component of kind, or "none (...)",
 * truncated to fit buf[n]. For error lines. */
void ork_registry_available(const ork_registry *r, ork_component_kind kind, char *buf, size_t n);

/* ork_registry_find, but a miss is ORK_E_CONFIG with one line:
 * "<field>: no <kind> component '<name>'; available: <id> (<aliases>), ..." */
ork_status ork_registry_require(const ork_registry *r, ork_component_kind kind, const char *name,
                                const char *field, const ork_plugin_component **out);

#endif
