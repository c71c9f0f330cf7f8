/* fuzz_text_cache.c — libFuzzer target for the two readers of text
 * embeddings, for a model with FZ_T tokens of FZ_CTX channels and a pooled
 * vector of FZ_VEC. Each input is read
 *  1. as the <stem>.te.safetensors beside a training image, by the trainer's
 *     own load_text (core/train/dataset_cache.c, included below so its static
 *     readers can be called; nothing else of that file runs);
 *  2. as an entry of the text cache (<dataset>/_text_cache/<key>.safetensors,
 *     ork_text_cache_load, train/text_cache.h) for caption FZ_CAPTION under
 *     encoder FZ_IDENTITY: as it is, and written again with fresh checksums
 *     (an entry without them is refused, and no mutation keeps them).
 * Contract checked: what loads is txt (T, ctx) and, when given, vec (vec_dim),
 * readable and finite; a refusal is one error line (the run stops on it for
 * a .te file; a cache entry is encoded again, the line demoted to a warning).
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"
#include "fuzz_train_common.h"

#include "train/dataset_cache.c" /* load_text (static) */
#include "train/text_cache.h"

#define FZ_T 8
#define FZ_CTX 32
#define FZ_VEC 16
#define FZ_IDENTITY "fz-encoder"
#define FZ_CAPTION "a photo of a cat"

static char g_img[512], g_te[512], g_entry[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_text_cache");
    fz_make_dir("fuzz-text");
    snprintf(g_img, sizeof g_img, "%s/img.png", fz_dir);
    snprintf(g_te, sizeof g_te, "%s/img.te.safetensors", fz_dir);
    snprintf(g_entry, sizeof g_entry, "%s/entry.safetensors", fz_dir);
    return 0;
}

static void cache_entry(const char *path) {
    static float txt[FZ_T * FZ_CTX], vec[FZ_VEC];
    fz_errors = 0;
    ork_status s = ork_text_cache_load(path, FZ_IDENTITY, FZ_T, FZ_CTX, FZ_VEC, FZ_CAPTION, txt, vec);
    FZ_CHECK(s != ORK_E_IO || fz_errors == 1, "text cache: status IO (\"no file\") for a file that exists");
    if (s != ORK_OK) {
        FZ_CHECK(fz_errors == 1, "text cache: refused (%s) with %d error lines", ork_status_str(s), fz_errors);
        return;
    }
    FZ_CHECK(fz_errors == 0, "text cache: loaded with %d error lines", fz_errors);
    long bad = fz_first_nonfinite(txt, (size_t)FZ_T * FZ_CTX);
    FZ_CHECK(bad < 0, "text cache: loaded a non-finite txt value at %ld", bad);
    bad = fz_first_nonfinite(vec, FZ_VEC);
    FZ_CHECK(bad < 0, "text cache: loaded a non-finite vec value at %ld", bad);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write_file(g_te, data, size)) return 0;
    static job j;
    memset(&j, 0, sizeof j);
    j.T = FZ_T;
    j.info.context_len = FZ_T;
    j.info.context_dim = FZ_CTX;
    j.info.vec_dim = FZ_VEC;
    item it;
    memset(&it, 0, sizeof it);
    ork_status s = load_text(&j, g_img, &it);
    FZ_CHECK(s == ORK_OK || s == ORK_E_FORMAT || s == ORK_E_NUMERIC || s == ORK_E_IO || s == ORK_E_NOMEM,
             "status %d (%s)", (int)s, ork_status_str(s));
    if (s == ORK_OK) {
        FZ_CHECK(fz_errors == 0, "loaded with %d error lines", fz_errors);
        FZ_CHECK(it.txt != NULL && j.have_te == 1, "loaded without txt (have_te %d)", j.have_te);
        long bad = fz_first_nonfinite(it.txt, (size_t)FZ_T * FZ_CTX);
        FZ_CHECK(bad < 0, "loaded a non-finite txt value at %ld", bad);
        if (it.vec) {
            bad = fz_first_nonfinite(it.vec, FZ_VEC);
            FZ_CHECK(bad < 0, "loaded a non-finite vec value at %ld", bad);
        }
    } else {
        FZ_CHECK(fz_errors == 1, "refused (%s) with %d error lines", ork_status_str(s), fz_errors);
        FZ_CHECK(j.have_te == 0, "refused but counted");
    }
    free(it.txt);
    free(it.vec);
    free(it.tokens);

    cache_entry(g_te);
    if (fz_rechecksum(g_te, g_entry)) cache_entry(g_entry);
    return 0;
}
