/* io/safetensors.h — the core's one safetensors reader and writer, shared by
 * model weights, LoRA outputs, checkpoints and caches (format: FLUX.md §5).
 *
 * Reader: ork_st_open maps the file read-only and validates every check of the
 * reference reader (header size, UTF-8, JSON, duplicate keys, field types,
 * dtype sizes, checked nelements, contiguous offsets from 0, exact file
 * length, flat string __metadata__) before it returns. Tensor data may be
 * unaligned: read it through `data` with memcpy, or ork_st_read_f32.
 * Sets: one file, a *.safetensors.index.json (weight_map) or a directory.
 * Writer: atomic (tmp file + fsync + rename + directory fsync).
 * Every failure logs one line naming the file and what is wrong.
 * [any-thread]: an open ork_st_file / ork_st_set is read-only and may be
 * shared between threads; a writer belongs to one thread. */
#ifndef ORK_IO_SAFETENSORS_H
#define ORK_IO_SAFETENSORS_H

#include <orakul/abi.h>
#include <orakul/dtype.h>
#include <stddef.h>
#include <stdint.h>

#define ORK_ST_MAX_NDIM 8
#define ORK_ST_MAX_HEADER 100000000u /* reference MAX_HEADER_SIZE */

/* The dtype of a tensor whose safetensors dtype is valid but has no ork_dtype
 * (BOOL, I8, I16, U16, U32, U64, C64, F4, F6_*, F8_E8M0, F8_*FNUZ): the file
 * opens, its size is validated, dtype_name says which it is, and
 * ork_st_read_f32 refuses it with ORK_E_UNSUPPORTED. */
#define ORK_ST_DTYPE_UNSUPPORTED ORK_DTYPE_COUNT

typedef struct {
    const char *name;       /* owned by the file; valid until ork_st_close */
    ork_dtype dtype;        /* ORK_ST_DTYPE_UNSUPPORTED: see dtype_name */
    int ndim;               /* 0 = scalar */
    int64_t shape[ORK_ST_MAX_NDIM];
    uint64_t offset;        /* BEGIN, relative to the data buffer (file offset 8 + N + BEGIN) */
    uint64_t nbytes;        /* END - BEGIN; 0 for empty tensors */
    const uint8_t *data;    /* [nbytes] little-endian, row-major, maybe unaligned */
    const char *dtype_name; /* the file's dtype string, e.g. "BF16" */
} ork_st_tensor;

typedef struct ork_st_file ork_st_file;

/* ---- one file ----------------------------------------------------------- */
/* ORK_E_IO: cannot open/stat/map; ORK_E_FORMAT: any check failed.
 * The file must not be truncated while open (a mapped read past it is SIGBUS). */
ork_status ork_st_open(const char *path, ork_st_file **out);
void ork_st_close(ork_st_file *f); /* NULL is fine */
/* Tensors in file (data offset) order; i in [0, count). */
size_t ork_st_count(const ork_st_file *f);
const ork_st_tensor *ork_st_at(const ork_st_file *f, size_t i);
/* O(log n); NULL when absent. */
const ork_st_tensor *ork_st_find(const ork_st_file *f, const char *name);
/* __metadata__[key], or NULL. */
const char *ork_st_meta(const ork_st_file *f, const char *key);
const char *ork_st_path(const ork_st_file *f);

/* Product of the shape (1 for a scalar). */
uint64_t ork_st_nelements(const ork_st_tensor *t);
/* dst: [nelements] float32. Converts F32/F16/BF16/F8_E4M3/F8_E5M2/F64/I32/
 * I64/U8 (unaligned-safe); ORK_E_UNSUPPORTED for the other dtypes. */
ork_status ork_st_read_f32(const ork_st_tensor *t, float *dst);
/* dst: [nelements] of dst_type. Same dtype: a copy; F32 / F64: converted from
 * any dtype ork_st_read_f32 takes; other narrowing conversions are refused
 * (ORK_E_UNSUPPORTED: they belong to core/numerics). */
ork_status ork_st_read_into(const ork_st_tensor *t, ork_dtype dst_type, void *dst);

/* ---- sharded sets ------------------------------------------------------- */
typedef struct ork_st_set ork_st_set;

/* path: a .safetensors file; a *.index.json ({"weight_map": {name: shard}},
 * shards relative to the index, every shard opened and validated, every
 * mapped name checked to be in its shard); or a directory holding exactly one
 * *.index.json, else all of its *.safetensors files (names must be unique). */
ork_status ork_st_set_open(const char *path, ork_st_set **out);
void ork_st_set_close(ork_st_set *s); /* NULL is fine */
/* All tensors of the set, sorted by name; i in [0, count). */
size_t ork_st_set_count(const ork_st_set *s);
const ork_st_tensor *ork_st_set_at(const ork_st_set *s, size_t i);
const ork_st_tensor *ork_st_set_find(const ork_st_set *s, const char *name);
/* The shard files (1 for a single file). */
size_t ork_st_set_nfiles(const ork_st_set *s);
const ork_st_file *ork_st_set_file(const ork_st_set *s, size_t i);

/* ---- writer ------------------------------------------------------------- */
typedef struct ork_st_writer ork_st_writer;

ork_status ork_st_writer_new(ork_st_writer **out);
void ork_st_writer_free(ork_st_writer *w); /* NULL is fine */
/* Adds one tensor. shape: [ndim], ndim 0..8, dims >= 0; nbytes must equal
 * nelements * ork_dtype_size(dtype). The name is copied; the DATA IS BORROWED:
 * it must stay valid and unchanged until the last ork_st_writer_commit.
 * ORK_E_INVALID for a bad argument or a duplicate name. */
ork_status ork_st_writer_add(ork_st_writer *w, const char *name, ork_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, uint64_t nbytes);
/* Sets __metadata__[key] = value (both copied; a later call replaces). */
ork_status ork_st_writer_meta(ork_st_writer *w, const char *key, const char *value);
/* Writes the file atomically: "<path>.tmp.<pid>", fflush + fsync, rename over
 * path, fsync of the directory. Header: compact JSON, keys sorted, padded with
 * spaces so the data starts 8-aligned; data ordered like the reference writer
 * (descending element size, then name), so every tensor is naturally aligned.
 * On failure the old file at path is untouched and no tmp file is left. */
ork_status ork_st_writer_commit(ork_st_writer *w, const char *path);

#endif
