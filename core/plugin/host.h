/* plugin/host.h — the host side of the plugin ABI: the process-wide table of
 * host services plugins look up by string id ("orakul.ops/1"), and the
 * ork_host tables handed to plugins (one per plugin and one per component, so
 * the log can prefix who is speaking).
 *
 * Owns: the service table (the built-in services, and registered ones as borrowed pointers: ids and tables must outlive every
 * loaded plugin; in practice they are static). Services are registered at
 * start-up on the control thread, before any plugin is loaded; lookups are
 * read-only afterwards and safe from any thread. */
#ifndef ORK_PLUGIN_HOST_H
#define ORK_PLUGIN_HOST_H

#include <orakul/plugin.h> /* ork_host, ork_status */

#define ORK_HOST_MAX_SERVICES 32

/* Make `table` available to plugins under the exact id string `id` (with its
 * revision, e.g. ORK_SERVICE_TENSOR). Both pointers are borrowed. Registering
 * the same table under the same id again is a no-op. ORK_E_INVALID on a NULL
 * argument or an id already registered with another table. [control-thread] */
ork_status ork_host_register_service(const char *id, const void *table);

/* The table registered under exactly `id`, else the built-in one (services
 * that need no start-up: "orakul.numerics/1", "orakul.platform/1"), else NULL. [any-thread] */
const void *ork_host_get_service(const char *id);

/* Forget every registered service (tests); the built-in ones stay. [control-thread] */
void ork_host_clear_services(void);

/* Fill *h as a host table whose log lines are prefixed with "<prefix>: ".
 * prefix is borrowed and must outlive h. */
void ork_host_init(ork_host *h, const char *prefix);

#endif
