/* data/image.h — training images: decode (JPEG, PNG, WebP) to 8-bit RGB, resize
 * with antialiasing, ai-toolkit's resize-then-centre-crop and aspect buckets,
 * and the conversion to float CHW that the codecs consume.
 *
 * Owns: the pixel buffer of each ork_image (free with ork_image_free).
 *
 * What matches ai-toolkit ([O] toolkit/dataloader_mixins.py, which does
 * Image.open -> exif_transpose -> convert('RGB')):
 *  - the format comes from the magic bytes, never the extension;
 *  - alpha is DROPPED, not composited (PIL's RGBA->RGB / LA->RGB / P+tRNS->RGB);
 *  - grey is replicated to R=G=B; palette is expanded; 16-bit samples keep
 *    their high byte (PIL reads 16-bit RGB PNGs as "RGB;16B"; for 16-bit GREY
 *    PIL's I;16->RGB clips at 255 instead, a PIL quirk we do not copy);
 *  - JPEG EXIF orientation (tag 0x0112) is applied, like exif_transpose.
 *    PNG eXIf and WebP EXIF orientation are not read (rare; documented gap).
 *  - PNG gamma/iCCP and JPEG ICC profiles are ignored, as PIL's convert does.
 * Resampling differs on purpose: ai-toolkit resizes with PIL BICUBIC; we use a
 * triangle (PIL "BILINEAR") filter whose support grows with the downscale
 * factor — same antialiasing, no overshoot; within a few levels of PIL. */
#ifndef ORK_DATA_IMAGE_H
#define ORK_DATA_IMAGE_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>

#define ORK_IMAGE_MAX_SIDE 16384 /* larger images are refused (ORK_E_FORMAT) */

/* rgb: (h, w, 3) uint8, row-major, no padding. */
typedef struct ork_image {
    int w, h;
    uint8_t *rgb;
} ork_image;

typedef enum ork_image_format {
    ORK_IMG_UNKNOWN = 0,
    ORK_IMG_JPEG,
    ORK_IMG_PNG,
    ORK_IMG_WEBP,
} ork_image_format;

/* Format from the first bytes (needs 12 for WebP); UNKNOWN if none matches. */
ork_image_format ork_image_sniff(const uint8_t *data, size_t n);
const char *ork_image_format_name(ork_image_format f);

/* Decode a whole file held in memory. name is only used in messages.
 * ORK_E_FORMAT (one line naming `name`) for unknown, malformed, truncated,
 * animated (WebP) or oversized images. *out is zeroed on failure. */
ork_status ork_image_decode(const uint8_t *data, size_t n, const char *name, ork_image *out);
/* Read and decode a file: ORK_E_IO when it cannot be read. */
ork_status ork_image_load(const char *path, ork_image *out);
/* Width and height after EXIF orientation, from the headers only (no pixels). */
ork_status ork_image_probe(const char *path, int *w, int *h);
void ork_image_free(ork_image *img);

/* Resize src to (w, h) (aspect not kept). *out is a new image. */
ork_status ork_image_resize(const ork_image *src, int w, int h, ork_image *out);

/* ai-toolkit's bucket geometry ([O] dataloader_mixins.py setup_buckets): scale so
 * the image covers (tw, th) keeping aspect, sw = ceil(w*s), sh = ceil(h*s), then
 * a centre crop at (cx, cy) = (int((sw-tw)/2), int((sh-th)/2)). */
void ork_image_fit_geometry(int w, int h, int tw, int th, int *sw, int *sh, int *cx, int *cy);
/* Resize-then-centre-crop to exactly (tw, th); only the kept pixels are computed. */
ork_status ork_image_fit(const ork_image *src, int tw, int th, ork_image *out);

/* Aspect bucket for an image of w x h, as [O] toolkit/buckets.py
 * get_bucket_for_image_size: target area min(w*h, res^2) (small images are not
 * upscaled), aspect kept, each side floored or ceiled to a multiple of div, the
 * candidate with area <= res^2 nearest the target area wins. FLUX.1 and FLUX.2
 * use div = 16 (VAE /8, then 2x2 patches). */
void ork_image_bucket(int w, int h, int res, int div, int *bw, int *bh);

/* out: (3, h, w) float32 in [0, 1] (codecs map to [-1, 1] themselves). */
void ork_image_to_f32_chw(const ork_image *img, float *out);

#endif
