/* orakul/safetensors.h — the checkpoint-reading service
 * "orakul.safetensors/1": the core's validated, mmap'd safetensors reader
 * (single files, sharded *.index.json sets, diffusers folders), for model and
 * loss plugins that read their own weight files. */
#ifndef ORAKUL_SAFETENSORS_H
#define ORAKUL_SAFETENSORS_H

#include <orakul/abi.h>
#include <orakul/dtype.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_SERVICE_SAFETENSORS "orakul.safetensors/1"

typedef struct ork_st_set ork_st_set; /* opaque */

typedef struct ork_st_info {
    const char *name;
    ork_dtype dtype;
    int ndim;
    int64_t shape[8];
    uint64_t nbytes;
    const void *data;   /* mmap'd, read-only, possibly unaligned */
} ork_st_info;

typedef struct ork_safetensors_api {
    ork_abi abi;
    /* A file, a *.safetensors.index.json, or a folder holding either. Every
     * structural check runs here; a bad file gives one logged line. */
    ork_status (*open)(const char *path, ork_st_set **out);
    void (*close)(ork_st_set *s);
    int64_t (*count)(const ork_st_set *s);
    ork_status (*at)(const ork_st_set *s, int64_t i, ork_st_info *out);
    /* ORK_E_INVALID (nothing logged) when absent. */
    ork_status (*find)(const ork_st_set *s, const char *name, ork_st_info *out);
    /* __metadata__ value, or NULL. */
    const char *(*meta)(const ork_st_set *s, const char *key);
    /* Convert any numeric dtype to F32 (n = numel floats). */
    ork_status (*read_f32)(const ork_st_info *t, float *dst);
} ork_safetensors_api;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_SAFETENSORS_H */
