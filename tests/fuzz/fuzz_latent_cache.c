/* fuzz_latent_cache.c — libFuzzer target for the latent-cache reader: each
 * input is a cache file (<dataset>/_latent_cache/<stem>_<key>.safetensors)
 * read by the trainer's own load_cached (core/train/dataset_cache.c, included
 * below so its static readers can be called; nothing else of that file runs).
 * The key, the channel count and the token grid the codec would give are
 * fixed (FZ_KEY, FZ_C, FZ_H x FZ_W); the seeds carry them.
 * A cache loads only with its checksums right (io/st_check.h), which no
 * mutation keeps, so every input that opens is also written again with fresh
 * checksums (fz_rechecksum) and loaded a second time: the checks behind the
 * checksum get fuzzed too.
 * Contract checked: a cache that loads gives a grid of at least one token per
 * side within the image limit, h x w x C readable, finite values; one that
 * does not load leaves the item empty (the caller re-encodes into it: anything
 * left would leak). Any status other than OK means "re-encode" to the caller. Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON. */
#include "fuzz_common.h"
#include "fuzz_train_common.h"

#include "train/dataset_cache.c" /* load_cached (static) */

#define FZ_KEY 0x0123456789abcdefull
#define FZ_C 16
#define FZ_H 4 /* the grid load_cached must find (the image's bucket in a run) */
#define FZ_W 3

static char g_cache[512], g_cache2[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_latent_cache");
    fz_make_dir("fuzz-latent");
    snprintf(g_cache, sizeof g_cache, "%s/img_%016llx.safetensors", fz_dir, (unsigned long long)FZ_KEY);
    snprintf(g_cache2, sizeof g_cache2, "%s/img2_%016llx.safetensors", fz_dir, (unsigned long long)FZ_KEY);
    return 0;
}

static void load_one(const char *path) {
    item it;
    memset(&it, 0, sizeof it);
    char why[4096];
    ork_status s = load_cached(path, FZ_KEY, &it, FZ_C, FZ_H, FZ_W, why, sizeof why);
    if (s != ORK_OK) {
        FZ_CHECK(!it.tokens && !it.txt && !it.vec, "a cache that did not load (%s) left data in the item",
                 ork_status_str(s));
        return;
    }
    FZ_CHECK(it.tokens != NULL, "loaded without tokens");
    FZ_CHECK(it.h_tok == FZ_H && it.w_tok == FZ_W, "loaded a %d x %d grid for a %d x %d image", it.h_tok, it.w_tok,
             FZ_H, FZ_W);
    FZ_CHECK(it.h_tok >= 1 && it.w_tok >= 1 && it.h_tok <= ORK_IMAGE_MAX_SIDE && it.w_tok <= ORK_IMAGE_MAX_SIDE,
             "loaded a %d x %d token grid", it.h_tok, it.w_tok);
    long bad = fz_first_nonfinite(it.tokens, (size_t)it.h_tok * it.w_tok * FZ_C);
    FZ_CHECK(bad < 0, "loaded a non-finite token value at %ld", bad);
    free(it.tokens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write_file(g_cache, data, size)) return 0;
    load_one(g_cache);
    if (fz_rechecksum(g_cache, g_cache2)) load_one(g_cache2);
    return 0;
}
