/* quant_log.c — see quant_log.h: ork_fail / ork_log / ork_logv / ork_status_str
 * for the core numerics files compiled into the "quant" plugin. Hidden like
 * everything in the plugin, so they never meet the core's definitions. */
#include "quant_log.h"

#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic(const ork_host *) g_host;
static _Thread_local char t_last[512];

void ork_quant_log_bind(const ork_host *host) { atomic_store(&g_host, host); }
const char *ork_quant_last_error(void) { return t_last; }
void ork_quant_clear_error(void) { t_last[0] = '\0'; }

ork_status ork_fail(ork_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last, sizeof t_last, fmt, ap);
    va_end(ap);
    return s;
}

void ork_logv(ork_log_level lvl, const char *fmt, va_list ap) {
    const ork_host *h = atomic_load(&g_host);
    if (!h || !h->log) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    h->log(h, (ork_log_level_abi)lvl, "%s", line);
}

void ork_log(ork_log_level lvl, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ork_logv(lvl, fmt, ap);
    va_end(ap);
}

const char *ork_status_str(ork_status s) {
    static const char *const names[] = {"ok", "invalid argument", "out of memory", "over budget",
                                        "i/o error", "format error", "unsupported", "cuda error",
                                        "abi mismatch", "config error", "numeric error", "internal error"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown status";
}
