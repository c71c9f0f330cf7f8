/* io/st_check.h — integrity of safetensors files orakul writes for itself
 * (the resumable state, the latent cache): per-tensor CRC-32 checksums in the
 * __metadata__, verified on load, and the finiteness check of a tensor's data.
 * Format and rationale: docs/DECISIONS.md, "Checksums in the state and the
 * latent cache".
 *
 *   __metadata__["orakul_crc32"]        = '{"lora.0":"89abcdef",...}' — CRC-32
 *       (zlib's crc32, the gzip/PNG polynomial) of every tensor's data bytes,
 *       a compact JSON object with its keys sorted, one entry per tensor;
 *   __metadata__["orakul_header_crc32"] = "01234567" — CRC-32 of the header's
 *       content in a canonical form: every tensor by name order as
 *       "name\0DTYPE\0d0,d1,...\0", then "\1", then every other metadata
 *       entry by key order as "key\0value\0" (the two checksum keys left out).
 * Together they cover every byte of the file that carries meaning: the data,
 * the names, dtypes and shapes, and the metadata (the offsets are checked by
 * the reader's contiguity rule; the padding carries nothing).
 *
 * Large tensors are split into 16 MiB pieces checksummed on up to 8 threads
 * and joined with crc32_combine (a multi-GiB state costs about a second).
 * [any-thread] for a file; a writer belongs to one thread. */
#ifndef ORK_IO_ST_CHECK_H
#define ORK_IO_ST_CHECK_H

#include "io/safetensors.h"

#define ORK_ST_CRC_KEY "orakul_crc32"
#define ORK_ST_HEADER_CRC_KEY "orakul_header_crc32"

/* on = 1: ork_st_writer_commit adds both checksum keys (computed over the
 * data it writes). Off by default: the LoRA files users share carry none. */
void ork_st_writer_checksum(ork_st_writer *w, int on);

/* Every checksum of f against its contents. *verified = 1 when f carries
 * checksums and all match, 0 when it carries none (nothing to verify: a file
 * written without them). ORK_E_FORMAT, with one line naming the file and the
 * tensor (or "its header"), when a checksum does not match or the checksum
 * entries are malformed, incomplete or name a tensor the file lacks. */
ork_status ork_st_verify(const ork_st_file *f, int *verified);

/* ORK_E_NUMERIC, with one line "<path>: tensor '<name>': element <i> of <n> is
 * NaN (...)", when t's data holds a NaN or Inf; ORK_OK otherwise (integer
 * dtypes always). path: the file, for the line. */
ork_status ork_st_check_finite(const ork_st_tensor *t, const char *path);

/* The __metadata__ keys of f, sorted (pointers owned by f): up to max of them
 * into keys; returns how many there are. For tools and tests that copy a file
 * (ork_st_meta gives each value). */
size_t ork_st_meta_keys(const ork_st_file *f, const char **keys, size_t max);

/* out[i] = crc32 of data[i][0 .. len[i]) for i < n (zlib's crc32_z, pieces on
 * threads joined with crc32_combine). */
void ork_crc32_many(size_t n, const void *const *data, const uint64_t *len, uint32_t *out);

#endif
