/* platform/platform_common.c — the parts of platform.h that are the same on
 * every system (names for file kinds). Owns nothing. */
#include "platform/platform.h"

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
