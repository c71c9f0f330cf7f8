/* plugin/host.c — see host.h. Owns the static service table. */
#include "plugin/host.h"

#include "numerics/quantize.h" /* ork_numerics_api_table */
#include "platform/platform.h" /* ork_platform_api_table */
#include "util/log.h"          /* ork_logv, ORK_FAIL */

#include <orakul/numerics.h>   /* ORK_SERVICE_NUMERICS */
#include <orakul/platform.h>   /* ORK_SERVICE_PLATFORM */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static struct {
    const char *id;
    const void *table;
} g_services[ORK_HOST_MAX_SERVICES];
static int g_n_services;

ork_status ork_host_register_service(const char *id, const void *table) {
    if (!id || !table) return ORK_FAIL(ORK_E_INVALID, "host service: NULL id or table");
    const void *have = ork_host_get_service(id);
    if (have == table) return ORK_OK; /* the same table again: start-up may run twice */
    if (have) return ORK_FAIL(ORK_E_INVALID, "host service %s: registered twice, with another table", id);
    if (g_n_services == ORK_HOST_MAX_SERVICES)
        return ORK_FAIL(ORK_E_NOMEM, "host service %s: table full (%d services)", id,
                        ORK_HOST_MAX_SERVICES);
    g_services[g_n_services].id = id;
    g_services[g_n_services].table = table;
    g_n_services++;
    return ORK_OK;
}

const void *ork_host_get_service(const char *id) {
    if (!id) return NULL;
    for (int i = 0; i < g_n_services; i++)
        if (strcmp(g_services[i].id, id) == 0) return g_services[i].table;
    if (strcmp(id, ORK_SERVICE_NUMERICS) == 0) return ork_numerics_api_table();
    if (strcmp(id, ORK_SERVICE_PLATFORM) == 0) return ork_platform_api_table();
    return NULL;
}

void ork_host_clear_services(void) {
    memset(g_services, 0, sizeof g_services);
    g_n_services = 0;
}

/* ---- the functions plugins call through ork_host ------------------------- */

static void host_log(const ork_host *h, ork_log_level_abi lvl, const char *fmt, ...) {
    if (!fmt) return;
    ork_log_level l = lvl <= ORK_LEVEL_DEBUG ? ORK_LOG_DEBUG
                    : lvl >= ORK_LEVEL_ERROR ? ORK_LOG_ERROR
                                             : (ork_log_level)lvl;
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *prefix = h && h->host_data ? (const char *)h->host_data : "plugin";
    ork_log(l, "%s: %s", prefix, msg);
}

static const void *host_get_service(const ork_host *h, const char *id) {
    (void)h;
    return ork_host_get_service(id);
}

void ork_host_init(ork_host *h, const char *prefix) {
    *h = (ork_host){
        .abi = ORK_ABI_INIT(ork_host),
        .core_version = ORAKUL_VERSION,
        .host_data = (void *)prefix,
        .log = host_log,
        .get_service = host_get_service,
    };
}
