/* st_test_util.h — helpers shared by the safetensors tests: a scratch
 * directory, hand-built files (any header size field, header bytes, data),
 * and a log sink that captures the lines the core emits. */
#ifndef ST_TEST_UTIL_H
#define ST_TEST_UTIL_H

#include "io/safetensors.h"
#include "util/log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[256];
static char g_log[8192];
static int g_nlines;

static inline void st_sink(ork_log_level lvl, const char *line, void *user) {
    (void)user;
    if (lvl < ORK_LOG_WARN) return;
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", line);
    g_nlines++;
}

static inline void log_reset(void) { g_log[0] = '\0'; g_nlines = 0; }

/* Creates the scratch directory and installs the sink (suite init). */
static inline int st_init(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ork_st_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    ork_log_set_sink(st_sink, NULL);
    return 0;
}

static inline int st_clean(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ork_log_set_sink(NULL, NULL);
    return system(cmd) == 0 ? 0 : 1;
}

static inline const char *st_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* Writes u64le(n) + hdr[hlen] + data[dlen] (data NULL: zero bytes). */
static inline const char *st_raw(const char *name, uint64_t n, const void *hdr, size_t hlen,
                          const void *data, size_t dlen) {
    const char *p = st_path(name);
    FILE *fp = fopen(p, "wb");
    if (!fp) return p;
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)(n >> (8 * i));
    fwrite(n8, 1, 8, fp);
    if (hlen) fwrite(hdr, 1, hlen, fp);
    for (size_t i = 0; i < dlen; i++) fputc(data ? ((const uint8_t *)data)[i] : 0, fp);
    fclose(fp);
    return p;
}

/* A file whose size field is honest: header string + ndata zero bytes. */
static inline const char *st_mk(const char *name, const char *hdr, size_t ndata) {
    return st_raw(name, strlen(hdr), hdr, strlen(hdr), NULL, ndata);
}

static inline int write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int ok = fwrite(p, 1, n, fp) == n;
    return (fclose(fp) == 0 && ok) ? 0 : -1;
}

#endif
