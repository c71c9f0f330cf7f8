/* fuzz_common.h — what the libFuzzer targets of tests/fuzz share: the input
 * as a file (a memfd opened by path through /proc, so the readers' own
 * open/stat/read path runs), and a log sink that counts error lines so a
 * target can check the "a failure is exactly one error line" rule.
 * Owns: one memfd per process and the counters below. Header-only: each
 * target is one translation unit. */
#ifndef ORK_FUZZ_COMMON_H
#define ORK_FUZZ_COMMON_H

#include "util/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int fz_fd = -1;
static char fz_path[64];
static int fz_errors; /* error lines since fz_write */

static inline void fz_sink(ork_log_level lvl, const char *line, void *user) {
    (void)line, (void)user;
    if (lvl >= ORK_LOG_ERROR) fz_errors++;
}

/* Once, from LLVMFuzzerInitialize: the memfd, warnings and errors counted
 * but not printed. The logger writes through the `stderr` FILE, which is
 * pointed at /dev/null here; libFuzzer and the sanitizers keep the real fd 2
 * (libFuzzer took its own copy of the FILE pointer at start-up; sanitizer
 * reports write to the fd). ORK_FUZZ_VERBOSE=1 keeps the lines, for triage. */
static inline void fz_init(const char *name) {
    fz_fd = memfd_create(name, 0);
    if (fz_fd < 0) { perror("memfd_create"); exit(1); }
    snprintf(fz_path, sizeof fz_path, "/proc/self/fd/%d", fz_fd);
    ork_log_set_level(ORK_LOG_WARN);
    ork_log_set_sink(fz_sink, NULL);
    const char *v = getenv("ORK_FUZZ_VERBOSE");
    if (!v || !*v || *v == '0') {
        FILE *null = fopen("/dev/null", "w");
        if (null) stderr = null;
    }
}

/* The input becomes the whole file at fz_path; 0 when it could not be written. */
static inline int fz_write(const uint8_t *data, size_t size) {
    fz_errors = 0;
    if (ftruncate(fz_fd, 0) != 0) return 0;
    if (size && pwrite(fz_fd, data, size, 0) != (ssize_t)size) return 0;
    return 1;
}

/* A broken contract: say which (on the real stderr) and crash, so libFuzzer
 * keeps the input. */
#define FZ_CHECK(cond, ...)                                                              \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            char fz_msg_[512];                                                           \
            int fz_n_ = snprintf(fz_msg_, sizeof fz_msg_, "fuzz contract: " __VA_ARGS__); \
            if (fz_n_ > 0) {                                                             \
                if ((size_t)fz_n_ >= sizeof fz_msg_) fz_n_ = sizeof fz_msg_ - 1;         \
                fz_msg_[fz_n_++] = '\n';                                                 \
                if (write(2, fz_msg_, (size_t)fz_n_) < 0) {}                             \
            }                                                                            \
            __builtin_trap();                                                            \
        }                                                                                \
    } while (0)

#endif
