/* fuzz_text_entry.c — libFuzzer target for the text cache's reader
 * (core/train/text_cache.c, ork_text_cache_load): each input is an entry of
 * <folder>/_text_cache/, read for a caption "a photo of ohwx", identity
 * "fz-encoder", T FZ_T, ctx FZ_CTX, vec FZ_VEC — as it is, and again with fresh
 * checksums (fz_rechecksum) so the fuzzer reaches the checks behind them.
 * Contract checked: ORK_OK gives finite txt and vec with no error line; a
 * refusal is ORK_E_IO / ORK_E_FORMAT / ORK_E_NUMERIC / ORK_E_UNSUPPORTED /
 * ORK_E_NOMEM with exactly one error line (the trainer holds it and warns
 * that it encodes the caption again).
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"
#include "fuzz_train_common.h"

#include "train/text_cache.h"

#define FZ_T 8
#define FZ_CTX 32
#define FZ_VEC 16

static char g_in[512], g_re[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_text_entry");
    fz_make_dir("fuzz-text-entry");
    snprintf(g_in, sizeof g_in, "%s/in.safetensors", fz_dir);
    snprintf(g_re, sizeof g_re, "%s/re.safetensors", fz_dir);
    return 0;
}

static void one(const char *path) {
    static float txt[FZ_T * FZ_CTX], vec[FZ_VEC];
    fz_errors = 0;
    ork_status s = ork_text_cache_load(path, "fz-encoder", FZ_T, FZ_CTX, FZ_VEC, "a photo of ohwx", txt, vec);
    FZ_CHECK(s == ORK_OK || s == ORK_E_IO || s == ORK_E_FORMAT || s == ORK_E_NUMERIC || s == ORK_E_UNSUPPORTED ||
                 s == ORK_E_NOMEM,
             "status %d (%s)", (int)s, ork_status_str(s));
    if (s == ORK_OK) {
        FZ_CHECK(fz_errors == 0, "loaded with %d error lines", fz_errors);
        FZ_CHECK(fz_first_nonfinite(txt, (size_t)FZ_T * FZ_CTX) < 0, "loaded a non-finite txt value");
        FZ_CHECK(fz_first_nonfinite(vec, FZ_VEC) < 0, "loaded a non-finite vec value");
    } else {
        FZ_CHECK(fz_errors == 1, "refused (%s) with %d error lines", ork_status_str(s), fz_errors);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write_file(g_in, data, size)) return 0;
    one(g_in);
    if (fz_rechecksum(g_in, g_re)) one(g_re);
    return 0;
}
