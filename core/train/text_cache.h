/* train/text_cache.h — the text cache (issue #28 point 5): each caption's
 * embeddings written once and read back by later runs, so an unchanged
 * caption is never encoded twice and a changed caption or encoder is.
 *
 * Where: <dataset folder>/_text_cache/<key>.safetensors for the dataset's
 * captions (and its dropout caption), <training_folder>/<name>/_text_cache/
 * for the sample prompts; key = 16 hex digits of FNV-1a 64 over
 * "orakul-te/1\0<identity>\0<T>\0<caption>" (identity: ork_textcond_identity,
 * T: the txt encoder's max length). Keyed by the caption text, not by the
 * image, so two images with one caption share a file.
 *
 * Format: the orakul-te/1 tensors of <image>.te.safetensors (txt F32 (T,
 * ctx_dim), vec F32 (vec_dim) when the model takes one) with __metadata__
 * format "orakul-te/1", encoder = the identity, max_length = T, caption = the
 * text, and the per-tensor CRC-32 checksums of io/st_check.h. An UNMASKED
 * slot's entry (conditioner.h) keeps only the caption's len rows: txt F32
 * (len, ctx_dim) and __metadata__ length = len (when len < T). Written
 * atomically (temp + fsync + rename, ork_st_writer_commit).
 *
 * Load checks, in order: readable safetensors; checksums present and
 * matching; format, encoder, max_length and caption equal to what was asked
 * (a 64-bit key collision reads as a miss); txt (T, ctx_dim) and vec
 * (vec_dim) F32; every value finite. Any failure is a miss: the caller
 * re-encodes and rewrites (one warning when the file existed).
 * [any-thread] */
#ifndef ORK_TRAIN_TEXT_CACHE_H
#define ORK_TRAIN_TEXT_CACHE_H

#include <orakul/abi.h>

#include <stddef.h>
#include <stdint.h>

#define ORK_TEXT_CACHE_DIR "_text_cache"
#define ORK_TEXT_CACHE_FORMAT "orakul-te/1"

/* The cache key of caption under an encoder identity and max length T. */
uint64_t ork_text_cache_key(const char *identity, int T, const char *caption);

/* "<dir>/<key as 16 hex digits>.safetensors" into out (n bytes). */
void ork_text_cache_path(const char *dir, uint64_t key, char *out, size_t n);

/* Read the entry at path into txt (T·ctx_dim floats) and vec (vec_dim floats;
 * NULL or vec_dim 0: none). ORK_OK: a valid entry for exactly this caption,
 * identity and shape. ORK_E_IO: no file (nothing logged). Anything else: the
 * file exists but cannot be used, with one line naming it and why (logged at
 * the caller's level: callers demote it to a warning). txt and vec are
 * unspecified after a failure. */
ork_status ork_text_cache_load(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                               const char *caption, float *txt /* (T, ctx_dim) */, float *vec /* (vec_dim) */);

/* Write one entry (atomically, with checksums). txt (T, ctx_dim), vec
 * (vec_dim) or NULL. Failure: one line (the writer's) and its status. */
ork_status ork_text_cache_write(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                const char *caption, const float *txt, const float *vec);

/* The same for a caption of len valid rows (1 .. T; an UNMASKED slot): only
 * txt's first len rows are written, with metadata length. load_len reads an
 * entry of 1 .. T rows (a trimmed one's length metadata must match its rows)
 * into txt (T, ctx_dim), the rows past *len zeroed; the plain load refuses a
 * trimmed entry (a miss). */
ork_status ork_text_cache_write_len(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                    const char *caption, int len, const float *txt /* (len.., ctx_dim) */,
                                    const float *vec);
ork_status ork_text_cache_load_len(const char *path, const char *identity, int T, int ctx_dim, int vec_dim,
                                   const char *caption, float *txt /* (T, ctx_dim) */, float *vec, int *len);

/* ---- the run's side (train/text_glue.c) --------------------------------- */

struct job;
struct item;
/* Micro-batch assembly (prefetch.c, on the builder thread): the embedding of
 * item it's caption when it lives in its text cache file (not held in host
 * memory, see text_glue.c): read into txt (T, ctx_dim) and vec (vec_dim;
 * NULL: not wanted), checked as at the start; *got 1. *got 0 (nothing
 * written): the item's embedding is its own (it->txt, zeros when NULL).
 * *len: the caption's valid rows (an UNMASKED slot's own length, the rows
 * past it zero; T otherwise; with *got 1 only). A file that no longer reads
 * back: one line naming it, ORK_E_IO. */
ork_status ork_train_text_read(const struct job *j, const struct item *it, float *txt, float *vec, int *got,
                               int *len);

#endif
