/* util/log.c — see log.h. Owns the process-wide level and sink (set once at
 * start-up by main() or a test; read from any thread) and each thread's
 * demotion count (ork_log_demote). */
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ork_log_level g_level = ORK_LOG_INFO;
static ork_log_sink g_sink;
static void *g_sink_user;
static _Thread_local int t_hold;        /* ork_log_hold_begin: errors kept, not printed */
static _Thread_local char t_held[1024]; /* the last held error line, without its prefix */

void ork_log_set_level(ork_log_level lvl) { g_level = lvl; }
ork_log_level ork_log_get_level(void) { return g_level; }
void ork_log_set_sink(ork_log_sink fn, void *user) { g_sink = fn; g_sink_user = user; }

static const char *prefix(ork_log_level l) {
    switch (l) {
    case ORK_LOG_DEBUG: return "orakul: debug: ";
    case ORK_LOG_INFO: return "orakul: ";
    case ORK_LOG_WARN: return "orakul: warning: ";
    default: return "orakul: error: ";
    }
}

void ork_log_hold_begin(void) {
    t_hold = 1;
    t_held[0] = 0;
}

void ork_log_hold_end(char *last, size_t n) {
    t_hold = 0;
    if (last && n) snprintf(last, n, "%s", t_held);
    t_held[0] = 0;
}

void ork_logv(ork_log_level lvl, const char *fmt, va_list ap) {
    if (t_hold && lvl >= ORK_LOG_ERROR) {
        vsnprintf(t_held, sizeof t_held, fmt, ap);
        size_t l = strlen(t_held);
        while (l > 0 && t_held[l - 1] == '\n') t_held[--l] = 0;
        return;
    }
    if (lvl < g_level) return;
    char line[2048];
    size_t p = (size_t)snprintf(line, sizeof line, "%s", prefix(lvl));
    int n = vsnprintf(line + p, sizeof line - p, fmt, ap);
    size_t len = n < 0 ? p : p + (size_t)n;
    if (len > sizeof line - 2) len = sizeof line - 2;
    while (len > 0 && line[len - 1] == '\n') len--;
    line[len] = '\0';
    if (g_sink) g_sink(lvl, line, g_sink_user);
    line[len] = '\n';
    fwrite(line, 1, len + 1, stderr);
}

void ork_log(ork_log_level lvl, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ork_logv(lvl, fmt, ap);
    va_end(ap);
}

static _Thread_local int g_demote; /* per thread: see ork_log_demote */
void ork_log_demote(int delta) { g_demote += delta; }

ork_status ork_fail(ork_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ork_logv(g_demote > 0 ? ORK_LOG_WARN : ORK_LOG_ERROR, fmt, ap);
    va_end(ap);
    return s;
}

const char *ork_status_str(ork_status s) {
    switch (s) {
    case ORK_OK: return "ok";
    case ORK_E_INVALID: return "invalid argument";
    case ORK_E_NOMEM: return "out of host memory";
    case ORK_E_BUDGET: return "over the device memory budget";
    case ORK_E_IO: return "I/O error";
    case ORK_E_FORMAT: return "malformed file";
    case ORK_E_UNSUPPORTED: return "unsupported";
    case ORK_E_CUDA: return "CUDA error";
    case ORK_E_ABI: return "plugin ABI mismatch";
    case ORK_E_CONFIG: return "configuration error";
    case ORK_E_NUMERIC: return "non-finite value";
    case ORK_E_INTERNAL: return "internal error";
    }
    return "unknown status";
}
