/* quant_log.h — the "quant" plugin's stand-in for the core logger.
 *
 * The plugin compiles core/numerics/{fp8,half,quantize}.c into itself (a plugin
 * never links the core). Those files report failures through ORK_FAIL / ork_log
 * (core/util/log.h); quant_log.c defines those functions for the plugin, hidden:
 *   - ork_fail() does NOT print: it keeps the formatted line in a thread-local
 *     buffer and returns the status. The plugin then reports the failure itself
 *     with its full context (tensor name, the global element index rather than
 *     the row sub-range's) as exactly one line through host->log.
 *   - ork_log()/ork_logv() forward to the host table given to ork_quant_log_bind
 *     (dropped before that).
 * Owns: the bound host pointer and each thread's last-error buffer. [any-thread] */
#ifndef ORK_QUANT_LOG_H
#define ORK_QUANT_LOG_H

#include <orakul/plugin.h>

/* Host table for ork_log lines (the plugin's init host); NULL unbinds. */
void ork_quant_log_bind(const ork_host *host);

/* This thread's last ork_fail line ("" when none since the last clear). */
const char *ork_quant_last_error(void);
void ork_quant_clear_error(void);

#endif
