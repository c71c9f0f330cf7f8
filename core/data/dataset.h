/* data/dataset.h — one datasets[] entry of an ai-toolkit job: the image files of
 * folder_path, their captions (with trigger-word injection), and a content
 * fingerprint per image for the latent cache.
 *
 * Owns: every string and array inside an ork_dataset (free with ork_dataset_free).
 *
 * Scan rules: folder_path only, NOT recursive (ai-toolkit's newest data_loader.py
 * walks sub-folders; orakul does not, so _latent_cache/, _t_e_cache/ and
 * _controls/ can never be picked up); extensions .jpg .jpeg .png .webp in any
 * case; names starting with '.' skipped; regular files only (symlinks followed);
 * sorted by byte-wise name so runs are deterministic.
 * Captions ([O] toolkit/dataloader_mixins.py CaptionProcessingDTOMixin.load_caption
 * and get_caption, toolkit/prompt_utils.py inject_trigger_into_prompt):
 *  - <folder>/<stem><caption_ext>, read as UTF-8 bytes (a BOM is dropped), trimmed;
 *  - missing, or empty after trimming, -> default_caption (NULL -> "");
 *  - "[trigger]" and "[name]" are replaced by trigger_word (by "" when unset);
 *  - if trigger_word is set, the dataset is not is_reg, and the caption does not
 *    contain it (case-sensitive substring), it is prepended: trigger + " " + caption.
 *  Divergences: ai-toolkit neither trims nor strips a BOM, and its get_caption
 *  re-joins ','-split tokens with ", " (doubling the space after each comma);
 *  orakul keeps the caption text as written. */
#ifndef ORK_DATA_DATASET_H
#define ORK_DATA_DATASET_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>

/* The datasets[] keys this module reads (the config reader fills it). */
typedef struct ork_dataset_opts {
    const char *folder_path;     /* required */
    const char *caption_ext;     /* NULL -> ".txt"; "txt" and ".txt" both work */
    const char *default_caption; /* NULL -> "" */
    const char *trigger_word;    /* NULL: none ("[trigger]" becomes "") */
    int is_reg;                  /* regularisation set: trigger not prepended */
    float caption_dropout_rate;  /* carried for the trainer; not applied here */
} ork_dataset_opts;

/* Change detection for cached latents. Fast check: size and mtime equal means
 * unchanged. When they differ (a copy, a touch), compare hash: 64-bit FNV-1a of
 * the whole file, so a byte-identical copy keeps its cache and any edit loses it. */
typedef struct ork_file_fp {
    uint64_t size;
    int64_t mtime_ns;
    uint64_t hash; /* FNV-1a 64 of all bytes; 0 until ork_file_fingerprint(.., 1, ..) */
} ork_file_fp;

typedef struct ork_dataset_item {
    char *path;        /* folder_path/name */
    char *name;        /* file name */
    char *raw_caption; /* file text or default_caption, before trigger injection */
    char *caption;     /* final caption (what the text encoder sees) */
    int has_caption_file;
} ork_dataset_item;

typedef struct ork_dataset {
    char *folder;
    char *caption_ext; /* normalised, with the dot */
    char *trigger_word;
    int is_reg;
    float caption_dropout_rate;
    size_t n;
    ork_dataset_item *items; /* [n], sorted by name */
} ork_dataset;

/* ORK_E_IO: folder missing or unreadable (or a caption unreadable);
 * ORK_E_CONFIG: folder_path unset, not a folder, or holding no images. */
ork_status ork_dataset_scan(const ork_dataset_opts *opts, ork_dataset *out);
void ork_dataset_free(ork_dataset *ds);

/* The caption for a dropped-out step, as ai-toolkit: "" for reg sets or
 * without a trigger, else the trigger injected into "" ("<trigger> "). */
ork_status ork_dataset_dropout_caption(const ork_dataset *ds, char **out);

/* inject_trigger_into_prompt: replace "[trigger]"/"[name]" by trigger ("" when
 * NULL); then, if add_if_missing and trigger is not blank and absent, prepend
 * trigger + " ". *out is malloc'd. */
ork_status ork_caption_inject_trigger(const char *caption, const char *trigger, int add_if_missing,
                                      char **out);

/* with_hash = 0: size and mtime only (stat); 1: also the FNV-1a hash. */
ork_status ork_file_fingerprint(const char *path, int with_hash, ork_file_fp *out);
uint64_t ork_fnv1a64(const void *data, size_t n, uint64_t h /* ORK_FNV1A64_INIT to start */);
#define ORK_FNV1A64_INIT 0xcbf29ce484222325ULL

#endif
