/* util/rfile.c — see rfile.h. Owns nothing beyond each call (the buffer of
 * ork_rfile_read passes to the caller). */
#include "util/rfile.h"

#include "platform/platform.h"
#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "4 MiB", "1 GiB", or bytes. */
static const char *size_text(uint64_t n, char *buf, size_t cap) {
    if (n >= ((uint64_t)1 << 30) && n % ((uint64_t)1 << 30) == 0) snprintf(buf, cap, "%llu GiB", (unsigned long long)(n >> 30));
    else if (n >= ((uint64_t)1 << 20) && n % ((uint64_t)1 << 20) == 0) snprintf(buf, cap, "%llu MiB", (unsigned long long)(n >> 20));
    else if (n >= 1024 && n % 1024 == 0) snprintf(buf, cap, "%llu KiB", (unsigned long long)(n >> 10));
    else snprintf(buf, cap, "%llu bytes", (unsigned long long)n);
    return buf;
}

#define FAIL(s, ...) ((flags & ORK_RFILE_QUIET) ? (s) : ORK_FAIL((s), __VA_ARGS__))

static ork_status too_large(const char *path, const char *what, uint64_t have, int more, uint64_t max, int flags) {
    char lim[32];
    return FAIL(ORK_E_FORMAT, "%s: the %s is %s%llu bytes, over the %s limit", path, what, more ? "over " : "",
                (unsigned long long)have, size_text(max, lim, sizeof lim));
}

ork_status ork_rfile_open(const char *path, const char *what, uint64_t max_bytes, int flags, int *fd,
                          uint64_t *size) {
    *fd = -1;
    if (size) *size = 0;
    /* O_NONBLOCK: opening a FIFO with no writer returns at once (fstat then refuses it) */
    int d;
    if (ork_fd_open(path, ORK_F_READ | ORK_F_NONBLOCK, &d) != ORK_OK) {
        if (errno == ENOENT && (flags & ORK_RFILE_MISSING_OK)) return ORK_OK;
        return FAIL(ORK_E_IO, "%s: cannot open the %s: %s", path, what, strerror(errno));
    }
    ork_file_info st;
    ork_status s = ORK_OK;
    if (ork_fd_info(d, &st) != ORK_OK) s = FAIL(ORK_E_IO, "%s: cannot stat the %s: %s", path, what, strerror(errno));
    else if (st.kind != ORK_KIND_FILE)
        s = FAIL(ORK_E_IO, "%s: the %s is %s, not a regular file", path, what, ork_file_kind_str(st.kind));
    else if (max_bytes && st.size > max_bytes)
        s = too_large(path, what, st.size, 0, max_bytes, flags);
    else if (ork_fd_set_blocking(d) != ORK_OK)
        s = FAIL(ORK_E_IO, "%s: cannot read the %s: %s", path, what, strerror(errno));
    if (s != ORK_OK) {
        ork_fd_close(d);
        return s;
    }
    *fd = d;
    if (size) *size = st.size;
    return ORK_OK;
}

ork_status ork_rfile_read(const char *path, const char *what, size_t max_bytes, int flags, char **buf,
                          size_t *len) {
    *buf = NULL;
    if (len) *len = 0;
    int fd;
    uint64_t size;
    ORK_TRY(ork_rfile_open(path, what, max_bytes, flags, &fd, &size));
    if (fd < 0) return ORK_OK; /* missing, and that is allowed */
    /* room for the size fstat gave plus one byte: a file that grew is read on up to the limit */
    size_t cap = (size_t)size + 2, n = 0;
    char *b = malloc(cap);
    ork_status s = b ? ORK_OK : FAIL(ORK_E_NOMEM, "%s: no memory for the %s (%llu bytes)", path, what,
                                     (unsigned long long)size);
    while (s == ORK_OK) {
        if (n + 1 == cap) {
            size_t nc = cap * 2;
            if (max_bytes && nc > max_bytes + 2) nc = max_bytes + 2;
            char *t = nc > cap ? realloc(b, nc) : NULL;
            if (!t) {
                s = nc > cap ? FAIL(ORK_E_NOMEM, "%s: no memory for the %s", path, what)
                             : too_large(path, what, (uint64_t)max_bytes, 1, max_bytes, flags);
                break;
            }
            b = t, cap = nc;
        }
        size_t r;
        if (ork_fd_read(fd, b + n, cap - n - 1, &r) != ORK_OK)
            s = FAIL(ORK_E_IO, "%s: cannot read the %s: %s", path, what, strerror(errno));
        else if (r == 0) break;
        else n += r;
        if (s == ORK_OK && max_bytes && n > max_bytes) s = too_large(path, what, (uint64_t)max_bytes, 1, max_bytes, flags);
    }
    ork_fd_close(fd);
    if (s != ORK_OK) {
        free(b);
        return s;
    }
    b[n] = '\0';
    *buf = b;
    if (len) *len = n;
    return ORK_OK;
}
