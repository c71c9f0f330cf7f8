/* fuzz_train_common.h — what the fuzz targets of the trainer's own files
 * (the resumable state, the latent cache, the text caches) share: a private
 * folder on a tmpfs for the file the reader opens by name, a rewrite of an
 * input with fresh checksums, and a finiteness check of what a reader handed
 * back. Header-only, included after fuzz_common.h by one translation unit per
 * target. Owns: the folder fz_dir and its files (removed at exit). */
#ifndef ORK_FUZZ_TRAIN_COMMON_H
#define ORK_FUZZ_TRAIN_COMMON_H

#include "io/safetensors.h"
#include "io/st_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char fz_dir[256];
/* ORK_FUZZ_ALLOW_NONFINITE=1: non-finite values that load are not findings
 * (for hunting other findings while a reader still lacks its check). */
static int fz_allow_nonfinite;

/* A folder of this process's own (/dev/shm when there is one: no disk I/O
 * per input); removed with its files at exit. */
static inline void fz_rmdir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir);
    if (system(cmd) != 0) {}
}
static inline void fz_make_dir(const char *name) {
    const char *a = getenv("ORK_FUZZ_ALLOW_NONFINITE");
    fz_allow_nonfinite = a && *a && *a != '0';
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_dir, sizeof fz_dir, "%s/orakul-%s-XXXXXX", base, name);
    if (!mkdtemp(fz_dir)) { perror("mkdtemp"); exit(1); }
    atexit(fz_rmdir);
}

/* data[0 .. size) as the file at path (replaced). 0 on failure. */
static inline int fz_write_file(const char *path, const uint8_t *data, size_t size) {
    fz_errors = 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* The file at src written again at dst with fresh checksums (what orakul's
 * own writer adds: ork_st_writer_checksum), every tensor and metadata entry
 * kept but the old checksums. 1 when dst was written; 0 when src does not
 * open or holds a tensor the writer cannot write. Lines logged here are not
 * counted (fz_errors is restored). */
static inline int fz_rechecksum(const char *src, const char *dst) {
    int errors = fz_errors, ok = 0;
    ork_st_file *f = NULL;
    ork_st_writer *w = NULL;
    ork_log_level lvl = ork_log_get_level();
    ork_log_set_level((ork_log_level)(ORK_LOG_ERROR + 1));
    if (ork_st_open(src, &f) == ORK_OK && ork_st_writer_new(&w) == ORK_OK) {
        ok = 1;
        for (size_t i = 0; ok && i < ork_st_count(f); i++) {
            const ork_st_tensor *t = ork_st_at(f, i);
            ok = t->dtype != ORK_ST_DTYPE_UNSUPPORTED &&
                 ork_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, (size_t)t->nbytes) == ORK_OK;
        }
        const char *keys[64];
        size_t nk = ork_st_meta_keys(f, keys, 64);
        for (size_t i = 0; ok && i < nk && i < 64; i++)
            if (strcmp(keys[i], ORK_ST_CRC_KEY) && strcmp(keys[i], ORK_ST_HEADER_CRC_KEY))
                ok = ork_st_writer_meta(w, keys[i], ork_st_meta(f, keys[i])) == ORK_OK;
        ork_st_writer_checksum(w, 1);
        ok = ok && ork_st_writer_commit(w, dst) == ORK_OK;
    }
    ork_st_writer_free(w);
    ork_st_close(f);
    ork_log_set_level(lvl);
    fz_errors = errors;
    return ok;
}

/* Index of the first non-finite value of v[0 .. n), or -1 (always -1 with
 * ORK_FUZZ_ALLOW_NONFINITE). Every value is read, so a buffer shorter than n is an ASan finding here. */
static inline long fz_first_nonfinite(const float *v, size_t n) {
    long bad = -1;
    for (size_t i = 0; i < n; i++)
        if (bad < 0 && !isfinite(v[i])) bad = (long)i;
    return fz_allow_nonfinite ? -1 : bad;
}

#endif
