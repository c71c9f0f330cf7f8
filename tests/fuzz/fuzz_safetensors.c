/* fuzz_safetensors.c — libFuzzer target for the safetensors reader: each
 * input becomes the whole file (a memfd opened by path through /proc) and goes
 * through ork_st_open; an accepted file is walked, every tensor converted and
 * finiteness-checked, and its checksums (io/st_check.h: the orakul_crc32 JSON
 * in the metadata) verified. Crashes, sanitizer reports and any status other
 * than ORK_OK / ORK_E_FORMAT (ORK_E_NUMERIC for a non-finite tensor) are
 * findings. Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "io/safetensors.h"
#include "io/st_check.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int g_fd = -1;
static char g_path[64];
static float g_out[1 << 16];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    ork_log_set_level((ork_log_level)(ORK_LOG_ERROR + 1)); /* silence expected errors */
    g_fd = memfd_create("fuzz_safetensors", 0);
    if (g_fd < 0) { perror("memfd_create"); exit(1); }
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ftruncate(g_fd, 0) != 0 || (size && pwrite(g_fd, data, size, 0) != (ssize_t)size)) return 0;
    ork_st_file *f = NULL;
    ork_status s = ork_st_open(g_path, &f);
    if (s != ORK_OK && s != ORK_E_FORMAT) __builtin_trap();
    if (s != ORK_OK) return 0;
    uint64_t total = 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < ork_st_count(f); i++) {
        const ork_st_tensor *t = ork_st_at(f, i);
        if (t->offset != total || ork_st_find(f, t->name) != t) __builtin_trap();
        total += t->nbytes;
        for (uint64_t j = 0; j < t->nbytes; j++) sink ^= t->data[j];
        if (t->dtype != ORK_ST_DTYPE_UNSUPPORTED && ork_st_nelements(t) <= sizeof g_out / sizeof g_out[0]
            && ork_st_read_f32(t, g_out) != ORK_OK)
            __builtin_trap();
        ork_status fs = ork_st_check_finite(t, g_path);
        if (fs != ORK_OK && fs != ORK_E_NUMERIC) __builtin_trap();
    }
    int verified = -1;
    s = ork_st_verify(f, &verified);
    if ((s != ORK_OK && s != ORK_E_FORMAT) || (s == ORK_OK && verified != 0 && verified != 1)) __builtin_trap();
    (void)sink;
    ork_st_meta(f, "format");
    ork_st_close(f);
    return 0;
}
