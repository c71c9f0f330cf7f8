/* fuzz_image.c — libFuzzer target for the image decoders (PNG, JPEG, WebP
 * through core/data/image.c, with its 16384 px per side limit): each input is
 * a file read with ork_image_probe and ork_image_load (the dataset's calls),
 * then, when it decodes, bucketed and fitted to a small training size.
 * Contract checked: the status is OK, FORMAT or IO; a failure logs exactly one
 * error line and leaves the image empty; a decoded image is within the limit,
 * has the size the probe gave, and fits. The rss limit (-rss_limit_mb=2048)
 * is what bounds the decoders' memory: a 16384x16384 RGB image is 768 MiB.
 * Built by tests/fuzz/CMakeLists.txt with -DORAKUL_FUZZ=ON (clang). */
#include "fuzz_common.h"

#include "data/image.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_init("fuzz_image");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fz_write(data, size)) return 0;
    int pw = 0, ph = 0;
    ork_status ps = ork_image_probe(fz_path, &pw, &ph);
    FZ_CHECK(ps == ORK_OK || ps == ORK_E_FORMAT || ps == ORK_E_IO, "probe: status %d (%s)", (int)ps,
             ork_status_str(ps));
    FZ_CHECK(ps == ORK_OK ? fz_errors == 0 : fz_errors == 1, "probe: status %d with %d error lines", (int)ps,
             fz_errors);
    if (ps == ORK_OK)
        FZ_CHECK(pw > 0 && ph > 0 && pw <= ORK_IMAGE_MAX_SIDE && ph <= ORK_IMAGE_MAX_SIDE, "probe: %dx%d", pw, ph);

    fz_errors = 0;
    ork_image img = {0};
    ork_status s = ork_image_load(fz_path, &img);
    FZ_CHECK(s == ORK_OK || s == ORK_E_FORMAT || s == ORK_E_IO, "load: status %d (%s)", (int)s, ork_status_str(s));
    if (s != ORK_OK) {
        FZ_CHECK(fz_errors == 1, "load failed (%s) with %d error lines", ork_status_str(s), fz_errors);
        FZ_CHECK(!img.rgb && img.w == 0 && img.h == 0, "load failed but the image is not empty");
        return 0;
    }
    FZ_CHECK(fz_errors == 0, "load succeeded with %d error lines", fz_errors);
    FZ_CHECK(ps == ORK_OK, "load succeeded where probe failed");
    FZ_CHECK(img.rgb && img.w == pw && img.h == ph, "load gave %dx%d, probe %dx%d", img.w, img.h, pw, ph);
    volatile uint8_t sink = 0; /* every pixel was written (MSan-free check: ASan sees reads past the end) */
    sink ^= img.rgb[0];
    sink ^= img.rgb[(size_t)img.w * img.h * 3 - 1];
    (void)sink;

    if ((int64_t)img.w * img.h > (1 << 24)) { /* a valid file may decode this large (a 600-byte progressive
                                                 * JPEG at 16384 x 16384); fitting it under ASan takes longer than
                                                 * the -timeout, and the resampler is no different for it */
        ork_image_free(&img);
        return 0;
    }
    int bw, bh;
    ork_image_bucket(img.w, img.h, 64, 16, &bw, &bh);
    /* extreme aspects fall back to a bucket over res^2 (buckets.py does too) */
    FZ_CHECK(bw >= 16 && bh >= 16 && bw % 16 == 0 && bh % 16 == 0 && bw <= ORK_IMAGE_MAX_SIDE &&
                 bh <= ORK_IMAGE_MAX_SIDE,
             "bucket of %dx%d at 64: %dx%d", img.w, img.h, bw, bh);
    ork_image fit = {0};
    s = ork_image_fit(&img, bw, bh, &fit);
    FZ_CHECK(s == ORK_OK && fit.w == bw && fit.h == bh, "fit %dx%d -> %dx%d: status %d", img.w, img.h, bw, bh,
             (int)s);
    float chw[3 * 64 * 64];
    if ((size_t)bw * bh <= 64 * 64) ork_image_to_f32_chw(&fit, chw);
    ork_image_free(&fit);
    ork_image_free(&img);
    return 0;
}
