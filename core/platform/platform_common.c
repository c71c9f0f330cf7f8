/* platform/platform_common.c — the parts of platform.h that are the same on
 * every system: names for file kinds, the service table "orakul.platform/1".
 * Owns the (static) service table. */
#include "platform/platform.h"

#include <errno.h>

static int last_errno(void) { return errno; }

static const ork_platform_api g_api = {
    .abi = ORK_ABI_INIT(ork_platform_api),
    .last_errno = last_errno,
    .cpu_count = ork_cpu_count,
    .page_size = ork_page_size,
    .time_ns = ork_time_ns,
    .thread_start = ork_thread_start,
    .thread_join = ork_thread_join,
    .fd_open = ork_fd_open,
    .fd_close = ork_fd_close,
    .fd_pread = ork_fd_pread,
    .fd_info = ork_fd_info,
    .path_info = ork_path_info,
    .dir_open = ork_dir_open,
    .dir_next = ork_dir_next,
    .dir_close = ork_dir_close,
    .map_fd = ork_map_fd,
    .map_close = ork_map_close,
    .map_prefetch = ork_map_prefetch,
    .mem_available = ork_mem_available,
};

const ork_platform_api *ork_platform_api_table(void) { return &g_api; }

const char *ork_file_kind_str(ork_file_kind kind) {
    switch (kind) {
    case ORK_KIND_FILE: return "a regular file";
    case ORK_KIND_DIR: return "a folder";
    case ORK_KIND_FIFO: return "a FIFO";
    case ORK_KIND_CHAR: return "a character device";
    case ORK_KIND_BLOCK: return "a block device";
    case ORK_KIND_SOCKET: return "a socket";
    case ORK_KIND_LINK: return "a symbolic link";
    default: return "not a file";
    }
}
