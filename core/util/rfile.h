/* util/rfile.h — bounded reads of input files: every file the core reads
 * whole, or reads metadata from (the config, captions, images, the index.json
 * of a sharded checkpoint), is opened here. What is not a regular file (a FIFO,
 * which with no writer would block forever; /dev/zero, which never ends; a
 * device, a socket, a folder) is refused before a byte is read: the file is
 * opened without blocking and checked (platform/platform.h: ork_fd_info). A regular file over the
 * caller's size limit is refused too (checked on fstat's size and again while
 * reading, for a file that grows). Each refusal is one ORK_FAIL line naming the
 * file and the limit. Owns nothing beyond each call. [any-thread] */
#ifndef ORK_UTIL_RFILE_H
#define ORK_UTIL_RFILE_H

#include <orakul/abi.h> /* ork_status */

#include <stddef.h>
#include <stdint.h>

/* The limits of what the core reads whole (a real file of each kind is far
 * below its limit; the limit only stops a runaway or hostile input). */
#define ORK_CONFIG_MAX_BYTES ((size_t)4 << 20)   /* a job config (YAML) */
#define ORK_INDEX_MAX_BYTES ((size_t)64 << 20)   /* a *.safetensors.index.json */
#define ORK_CAPTION_MAX_BYTES ((size_t)1 << 20)  /* a caption .txt */
#define ORK_IMAGE_MAX_BYTES ((size_t)1 << 30)    /* an image file (PNG/JPEG/WebP) */
#define ORK_LOG_MAX_BYTES ((size_t)1 << 30)      /* a log a run wrote and reads back (metrics.jsonl) */

/* Flags of ork_rfile_open / ork_rfile_read. */
#define ORK_RFILE_MISSING_OK 1 /* a missing file (ENOENT) is not an error: ORK_OK, *fd -1 / *buf NULL, no line */
#define ORK_RFILE_QUIET 2      /* no line on failure (the caller says what it does instead) */

/* Open path read-only (ork_fd_open: not inherited by children) when it is a regular file of at most
 * max_bytes (0: any size). what names the file in the line ("config",
 * "caption"). *fd (blocking again; close it with ork_fd_close) and *size on
 * success; *fd -1 on failure.
 * Statuses: ORK_E_IO (missing, unreadable, not a regular file), ORK_E_FORMAT
 * (over max_bytes). */
ork_status ork_rfile_open(const char *path, const char *what, uint64_t max_bytes, int flags, int *fd,
                          uint64_t *size);

/* The whole of a regular file of at most max_bytes, NUL-terminated (the NUL is
 * not counted in *len); the caller frees *buf. Same checks and statuses as
 * ork_rfile_open, plus ORK_E_NOMEM and read errors (ORK_E_IO). */
ork_status ork_rfile_read(const char *path, const char *what, size_t max_bytes, int flags, char **buf,
                          size_t *len);

#endif
