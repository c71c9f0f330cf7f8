/* util/log.h — the core's one logger: one line per message, whole lines written
 * atomically (a single fwrite), so threads never interleave (libcyaml pitfall 7).
 * [any-thread] */
#ifndef ORK_UTIL_LOG_H
#define ORK_UTIL_LOG_H

#include <orakul/abi.h>      /* ork_status */
#include <orakul/platform.h> /* ORK_PRINTF */
#include <stdarg.h>
#include <stddef.h>

typedef enum ork_log_level {
    ORK_LOG_DEBUG = 0,
    ORK_LOG_INFO = 1,
    ORK_LOG_WARN = 2,
    ORK_LOG_ERROR = 3,
} ork_log_level;

/* Messages below this level are dropped. Default INFO; ORAKUL_LOG=debug lowers it. */
void ork_log_set_level(ork_log_level lvl);
ork_log_level ork_log_get_level(void);

/* Optional capture for tests: every emitted line is also passed to fn.
 * NULL restores plain stderr. */
typedef void (*ork_log_sink)(ork_log_level lvl, const char *line, void *user);
void ork_log_set_sink(ork_log_sink fn, void *user);

void ork_log(ork_log_level lvl, const char *fmt, ...) ORK_PRINTF(2, 3);
void ork_logv(ork_log_level lvl, const char *fmt, va_list ap);

#define ORK_DEBUG(...) ork_log(ORK_LOG_DEBUG, __VA_ARGS__)
#define ORK_INFO(...) ork_log(ORK_LOG_INFO, __VA_ARGS__)
#define ORK_WARN(...) ork_log(ORK_LOG_WARN, __VA_ARGS__)
#define ORK_ERROR(...) ork_log(ORK_LOG_ERROR, __VA_ARGS__)

/* [this thread] Holding: from ork_log_hold_begin to ork_log_hold_end, error
 * lines of this thread are not printed (nor passed to the sink); the last one
 * is kept. For a caller that recovers from what failed (a latent cache that
 * does not load is re-encoded) and says so in one warning carrying the reason
 * instead of an `error:` line on a run that succeeds. Not nested. */
void ork_log_hold_begin(void);
/* Ends the hold; last (may be NULL): the last held error line without the
 * "orakul: error: " prefix, "" when none. */
void ork_log_hold_end(char *last, size_t n);

/* Log an error and return the status: `return ORK_FAIL(ORK_E_IO, "x: %s", why);` */
ork_status ork_fail(ork_status s, const char *fmt, ...) ORK_PRINTF(2, 3);
#define ORK_FAIL(s, ...) ork_fail((s), __VA_ARGS__)

/* While a thread's count is above 0, its ORK_FAIL lines are logged as
 * warnings: around a fallible step whose failure the caller handles (a cache
 * that is rebuilt, or left unwritten), so that a run that succeeds prints no
 * error line. Calls nest: ork_log_demote(1) ... ork_log_demote(-1). */
void ork_log_demote(int delta);

const char *ork_status_str(ork_status s);

#endif
