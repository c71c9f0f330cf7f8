/* orakul/platform.h — the core's platform layer for plugins: the service
 * "orakul.platform/1" (threads, CPU count, page size, monotonic time, files by
 * UTF-8 path, folder listing, read-only maps, available memory), so that a
 * plugin includes no POSIX-only or Windows-only header and runs wherever the
 * core does. Also the types the core's own platform layer
 * (core/platform/platform.h) shares with it.
 *
 * Rules. A plugin gets the table at init: host->get_service(host,
 * ORK_SERVICE_PLATFORM); NULL from a core before it (orakul 1.x without
 * Windows support): fall back (one thread, say, or the C library's fopen).
 * Descriptors, threads, folders and maps the service hands out are used and
 * released only through it (on Windows the plugin and the core may use two C
 * runtimes, whose descriptors and errno differ). A failure returns ORK_E_IO
 * (or ORK_E_NOMEM / ORK_E_INVALID) and logs nothing; last_errno() gives the
 * reason as an errno value on the same thread, for strerror.
 * Owns nothing. [any-thread] */
#ifndef ORAKUL_PLATFORM_H
#define ORAKUL_PLATFORM_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* MinGW: __MINGW_PRINTF_FORMAT */

#ifdef __cplusplus
extern "C" {
#endif

/* printf-style format checking of a function's (format, first vararg)
 * arguments, on every compiler that has it: MinGW checks against its own C99
 * printf (the Windows build defines __USE_MINGW_ANSI_STDIO=1, so %zu and %lld
 * work there as on Linux); MSVC has no such attribute. */
#if defined(__MINGW32__)
#define ORK_PRINTF(fmt, args) __attribute__((format(__MINGW_PRINTF_FORMAT, fmt, args)))
#elif defined(__GNUC__)
#define ORK_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ORK_PRINTF(fmt, args)
#endif

typedef struct ork_thread ork_thread; /* a started thread, until joined */
typedef struct ork_dir ork_dir;       /* an open folder listing */

/* Flags of fd_open (and of the core's ork_fd_open). Every descriptor is opened
 * binary and not inherited by child processes. */
#define ORK_F_READ 0x01     /* read */
#define ORK_F_WRITE 0x02    /* write (with ORK_F_READ: both) */
#define ORK_F_CREATE 0x04   /* create when missing (mode 0644) */
#define ORK_F_TRUNC 0x08    /* truncate to 0 */
#define ORK_F_EXCL 0x10     /* with ORK_F_CREATE: fail (EEXIST) when it exists */
#define ORK_F_APPEND 0x20   /* every write at the end */
#define ORK_F_NONBLOCK 0x40 /* POSIX: open without blocking (a FIFO with no writer); ignored on Windows */

/* What a path names. */
typedef enum ork_file_kind {
    ORK_KIND_FILE = 0, /* a regular file */
    ORK_KIND_DIR = 1,
    ORK_KIND_FIFO = 2,
    ORK_KIND_CHAR = 3,  /* a character device */
    ORK_KIND_BLOCK = 4, /* a block device */
    ORK_KIND_SOCKET = 5,
    ORK_KIND_LINK = 6,  /* only from the core's ork_path_lstat */
    ORK_KIND_OTHER = 7,
} ork_file_kind;

typedef struct ork_file_info {
    ork_file_kind kind;
    uint64_t size;    /* bytes (regular files) */
    int64_t mtime_ns; /* last modification, ns since 1970 (UTC) */
} ork_file_info;

#define ORK_SERVICE_PLATFORM "orakul.platform/1"

typedef struct ork_platform_api {
    ork_abi abi;
    /* The reason of this thread's last failed call, as an errno value. */
    int (*last_errno)(void);
    /* Online CPUs (at least 1); the page size; nanoseconds of a monotonic clock. */
    int (*cpu_count)(void);
    size_t (*page_size)(void);
    uint64_t (*time_ns)(void);
    /* Start fn(arg) on a new thread / wait for it and free it (NULL: nothing). */
    ork_status (*thread_start)(void (*fn)(void *arg), void *arg, ork_thread **out);
    void (*thread_join)(ork_thread *t);
    /* Files by UTF-8 path: open (*fd -1 on failure), close (fd < 0: nothing),
     * read up to n bytes at off (fewer only at the end; *got says how many),
     * what an open file or a path is. */
    ork_status (*fd_open)(const char *path, int flags, int *fd);
    void (*fd_close)(int fd);
    ork_status (*fd_pread)(int fd, void *buf, size_t n, uint64_t off, size_t *got);
    ork_status (*fd_info)(int fd, ork_file_info *out);
    ork_status (*path_info)(const char *path, ork_file_info *out);
    /* A folder's names ("." and ".." left out); next gives NULL at the end,
     * each name valid until the next call. */
    ork_status (*dir_open)(const char *path, ork_dir **out);
    const char *(*dir_next)(ork_dir *d);
    void (*dir_close)(ork_dir *d);
    /* A read-only map of the first size bytes of fd (size > 0), outliving fd. */
    ork_status (*map_fd)(int fd, uint64_t size, const void **p);
    void (*map_close)(const void *p, uint64_t size);
    /* Have the pages of [p, p + n) of a map read in now: ORK_OK, or
     * ORK_E_UNSUPPORTED when the caller must touch them itself. */
    ork_status (*map_prefetch)(const void *p, size_t n);
    /* Memory the system can give without swapping, in bytes. */
    ork_status (*mem_available)(uint64_t *bytes);
} ork_platform_api;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_PLATFORM_H */
