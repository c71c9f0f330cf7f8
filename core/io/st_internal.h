/* io/st_internal.h — what the files of core/io share and nobody else uses:
 * the reader's metadata object and the canonical header checksum that the
 * writer (st_writer.c) and the verifier (st_check.c) must compute alike. */
#ifndef ORK_IO_ST_INTERNAL_H
#define ORK_IO_ST_INTERNAL_H

#include "io/safetensors.h"

#include <jansson.h>

/* f's __metadata__ object (owned by f), or NULL when it has none. */
const json_t *ork_st__meta_json(const ork_st_file *f);

/* One tensor as the header checksum sees it. */
typedef struct ork_st__desc {
    const char *name;
    const char *dtype; /* the safetensors dtype string, "F32" */
    int ndim;
    const int64_t *shape;
} ork_st__desc;

/* The header checksum (st_check.h) of n tensors d (sorted by name here, in
 * place) and the metadata meta (NULL: none), leaving out the checksum keys. */
uint32_t ork_st__header_crc(ork_st__desc *d, size_t n, const json_t *meta);

#endif
