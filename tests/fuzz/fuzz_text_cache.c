/* fuzz_text_cache.c — libFuzzer target for the text-embedding reader: each
 * input is the <stem>.te.safetensors beside a training image, read by the
 * trainer's own load_text (core/train/dataset_cache.c, included below so its
 * static readers can be called; nothing else of that file runs) for a model
 * with FZ_T tokens of FZ_CTX channels and a pooled vector of FZ_VEC.
 * Contract checked: what loads is txt (T, ctx) and, when given, vec (vec_dim),
 * readable and finite; a refusal is ORK_E_FORMAT / ORK_E_NUMERIC / ORK_E_IO
 * with exactly one error line (the run stops on it with that line).
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"
#include "fuzz_train_common.h"

#include "train/dataset_cache.c" /* load_text (static) */

#define FZ_T 8
#define FZ_CTX 32
#define FZ_VEC 16

static char g_img[512], g_te[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_text_cache");
    fz_make_dir("fuzz-text");
    snprintf(g_img, sizeof g_img, "%s/img.png", fz_dir);
    snprintf(g_te, sizeof g_te, "%s/img.te.safetensors", fz_dir);
    return 0;
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
    return 0;
}
