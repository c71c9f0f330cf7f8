/* data/image.c — image decoding (libjpeg-turbo, libpng, libwebp), EXIF
 * orientation, separable triangle-filter resampling, bucket geometry.
 * See image.h for what matches ai-toolkit and what does not.
 *
 * Owns: pixel buffers handed out in ork_image; everything else is freed before
 * returning. libjpeg and libpng report errors by longjmp out of our own error
 * handlers (their defaults call exit() or print to stderr). */
#include "data/image.h"

#include "util/log.h"
#include "util/rfile.h" /* ork_rfile_read */

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <jerror.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>

/* ------------------------------------------------------------------ util */

ork_image_format ork_image_sniff(const uint8_t *p, size_t n) {
    if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return ORK_IMG_JPEG;
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) return ORK_IMG_PNG;
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0) return ORK_IMG_WEBP;
    return ORK_IMG_UNKNOWN;
}

const char *ork_image_format_name(ork_image_format f) {
    switch (f) {
    case ORK_IMG_JPEG: return "JPEG";
    case ORK_IMG_PNG: return "PNG";
    case ORK_IMG_WEBP: return "WebP";
    default: return "unknown";
    }
}

void ork_image_free(ork_image *img) {
    if (!img) return;
    free(img->rgb);
    img->rgb = NULL;
    img->w = img->h = 0;
}

static ork_status check_size(const char *name, const char *fmt, long w, long h) {
    if (w <= 0 || h <= 0)
        return ORK_FAIL(ORK_E_FORMAT, "%s: %s has an empty size %ldx%ld", name, fmt, w, h);
    if (w > ORK_IMAGE_MAX_SIDE || h > ORK_IMAGE_MAX_SIDE)
        return ORK_FAIL(ORK_E_FORMAT, "%s: %s is %ldx%ld, over the %d px per side limit", name,
                        fmt, w, h, ORK_IMAGE_MAX_SIDE);
    return ORK_OK;
}

static ork_status alloc_image(const char *name, int w, int h, ork_image *out) {
    out->rgb = malloc((size_t)w * h * 3);
    if (!out->rgb) return ORK_FAIL(ORK_E_NOMEM, "%s: no memory for %dx%d RGB", name, w, h);
    out->w = w;
    out->h = h;
    return ORK_OK;
}

/* ------------------------------------------------------ EXIF orientation */

static unsigned rd16(const uint8_t *p, int be) { return be ? (p[0] << 8 | p[1]) : (p[1] << 8 | p[0]); }
static uint32_t rd32(const uint8_t *p, int be) {
    return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
              : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}

/* Orientation 1..8 from an APP1 "Exif\0\0" payload; 1 when absent or malformed
 * (a bad EXIF block never makes a good image fail, as in PIL). */
static int exif_orientation(const uint8_t *p, size_t n) {
    if (n < 14 || memcmp(p, "Exif\0\0", 6) != 0) return 1;
    p += 6, n -= 6; /* TIFF header */
    int be;
    if (p[0] == 'M' && p[1] == 'M') be = 1;
    else if (p[0] == 'I' && p[1] == 'I') be = 0;
    else return 1;
    uint32_t ifd = rd32(p + 4, be);
    if (ifd > n - 2) return 1;
    unsigned count = rd16(p + ifd, be);
    for (unsigned i = 0; i < count; i++) {
        size_t e = ifd + 2 + (size_t)i * 12;
        if (e + 12 > n) return 1;
        if (rd16(p + e, be) == 0x0112 && rd16(p + e + 2, be) == 3 /* SHORT */) {
            unsigned v = rd16(p + e + 8, be);
            return v >= 1 && v <= 8 ? (int)v : 1;
        }
    }
    return 1;
}

/* Apply an EXIF orientation in place (PIL exif_transpose: 2 FLIP_LEFT_RIGHT,
 * 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE,
 * 8 ROTATE_90). Output pixel (x, y) reads source pixel (sx, sy). */
static ork_status apply_orientation(const char *name, int o, ork_image *img) {
    if (o <= 1) return ORK_OK;
    int w = img->w, h = img->h, swap = o >= 5;
    ork_image t = {0};
    ORK_TRY(alloc_image(name, swap ? h : w, swap ? w : h, &t));
    for (int y = 0; y < t.h; y++)
        for (int x = 0; x < t.w; x++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            default: sx = w - 1 - y, sy = x; break; /* 8 */
            }
            memcpy(t.rgb + ((size_t)y * t.w + x) * 3, img->rgb + ((size_t)sy * w + sx) * 3, 3);
        }
    ork_image_free(img);
    *img = t;
    return ORK_OK;
}

/* ------------------------------------------------------------------ JPEG */

#define ORK_JPEG_MAX_WORK (1024L << 20) /* bytes of libjpeg work memory (see decode_jpeg) */

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jmp;
    int truncated; /* saw JWRN_JPEG_EOF: libjpeg would pad with grey */
} jpeg_err;

static void jpeg_on_error(j_common_ptr c) { longjmp(((jpeg_err *)c->err)->jmp, 1); }
static void jpeg_on_message(j_common_ptr c, int level) {
    jpeg_err *e = (jpeg_err *)c->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF) e->truncated = 1;
    /* other warnings (e.g. extraneous bytes) are tolerated, as PIL does */
}

static ork_status decode_jpeg(const uint8_t *data, size_t n, const char *name, int probe,
                              ork_image *out) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    char msg[JMSG_LENGTH_MAX];
    ork_status st = ORK_OK;
    uint8_t *volatile cmyk = NULL; /* survives the longjmp */

    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_on_error;
    err.mgr.emit_message = jpeg_on_message;
    if (setjmp(err.jmp)) {
        err.mgr.format_message((j_common_ptr)&cinfo, msg);
        int too_big = err.mgr.msg_code == JERR_NO_BACKING_STORE; /* over ORK_JPEG_MAX_WORK */
        jpeg_destroy_decompress(&cinfo);
        free(cmyk);
        ork_image_free(out);
        if (too_big)
            return ORK_FAIL(ORK_E_FORMAT, "%s: JPEG needs over %ld MiB of decoder memory (a progressive image of "
                            "over about 179 Mpx, which Pillow refuses too)", name, ORK_JPEG_MAX_WORK >> 20);
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad JPEG: %s%s", name, err.truncated ? "file is truncated: " : "", msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)n);
    jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&cinfo, TRUE);

    int orient = 1;
    for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1) {
            orient = exif_orientation(m->data, m->data_length);
            if (orient != 1) break;
        }
    st = check_size(name, "JPEG", (long)cinfo.image_width, (long)cinfo.image_height);
    if (st != ORK_OK || probe) {
        if (st == ORK_OK) {
            out->w = orient >= 5 ? (int)cinfo.image_height : (int)cinfo.image_width;
            out->h = orient >= 5 ? (int)cinfo.image_width : (int)cinfo.image_height;
        }
        jpeg_destroy_decompress(&cinfo);
        return st;
    }

    int is_cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    int adobe_inverted = cinfo.saw_Adobe_marker;
    cinfo.out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
    /* libjpeg's own work memory (a progressive file keeps every coefficient:
     * 2 bytes a sample) is capped; past it the decode fails ("backing store
     * not supported") instead of allocating and zeroing gigabytes for a
     * few-hundred-byte file that declares 16384x16384 (fuzz_image). The cap
     * admits a 16384x16384 progressive 4:2:0 image and a 4:4:4 one up to
     * about 179 Mpx, Pillow's own decompression-bomb limit. */
    cinfo.mem->max_memory_to_use = ORK_JPEG_MAX_WORK;
    jpeg_start_decompress(&cinfo);
    /* a progressive file's scans are all read by now, a baseline file's as
     * rows are: stop at the first sign of truncation instead of making up to
     * 16384 rows of grey first (fuzz_image: seconds for a 600-byte file) */
    if (!err.truncated && (st = alloc_image(name, (int)cinfo.output_width, (int)cinfo.output_height, out)) != ORK_OK) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    if (is_cmyk && !(cmyk = malloc((size_t)out->w * 4))) {
        jpeg_destroy_decompress(&cinfo);
        ork_image_free(out);
        return ORK_FAIL(ORK_E_NOMEM, "%s: no memory for a CMYK row", name);
    }
    while (!err.truncated && cinfo.output_scanline < cinfo.output_height) {
        uint8_t *row = out->rgb + (size_t)cinfo.output_scanline * out->w * 3;
        JSAMPROW rp = is_cmyk ? cmyk : row;
        jpeg_read_scanlines(&cinfo, &rp, 1);
        /* CMYK -> RGB as PIL: Adobe files store inverted ink, R = C*K/255 */
        for (int x = 0; is_cmyk && x < out->w; x++)
            for (int c = 0; c < 3; c++) {
                unsigned v = cmyk[4 * x + c], k = cmyk[4 * x + 3];
                if (!adobe_inverted) v = 255 - v, k = 255 - k;
                row[3 * x + c] = (uint8_t)((v * k + 127) / 255);
            }
    }
    if (err.truncated) { /* destroy, not finish: finish would want the rows not read */
        jpeg_destroy_decompress(&cinfo);
        free(cmyk);
        ork_image_free(out);
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad JPEG: file is truncated", name);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    free(cmyk);
    if (err.truncated) {
        ork_image_free(out);
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad JPEG: file is truncated", name);
    }
    return apply_orientation(name, orient, out);
}

/* ------------------------------------------------------------------- PNG */

typedef struct png_src {
    const uint8_t *p;
    size_t n, off;
    jmp_buf jmp;
    char msg[160];
} png_src;

static void png_on_error(png_structp png, png_const_charp m) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", m);
    longjmp(s->jmp, 1);
}
static void png_on_warning(png_structp png, png_const_charp m) { (void)png, (void)m; }
static void png_on_read(png_structp png, png_bytep dst, png_size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->off) png_error(png, "file is truncated");
    memcpy(dst, s->p + s->off, len);
    s->off += len;
}

static ork_status decode_png(const uint8_t *data, size_t n, const char *name, int probe,
                             ork_image *out) {
    png_src src = {.p = data, .n = n};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return ORK_FAIL(ORK_E_NOMEM, "%s: cannot create a PNG reader", name);
    }
    if (setjmp(src.jmp)) {
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        ork_image_free(out);
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad PNG: %s", name, src.msg);
    }
    png_set_read_fn(png, &src, png_on_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, NULL, NULL, NULL);
    ork_status st = check_size(name, "PNG", (long)w, (long)h);
    if (st != ORK_OK || probe) {
        out->w = (int)w, out->h = (int)h;
        png_destroy_read_struct(&png, &info, NULL);
        if (st != ORK_OK) out->w = out->h = 0;
        return st;
    }
    png_set_expand(png);      /* palette -> RGB, grey < 8 bit -> 8, tRNS -> alpha */
    png_set_strip_16(png);    /* keep the high byte, like PIL's RGB;16B */
    png_set_strip_alpha(png); /* dropped, not composited: PIL convert('RGB') */
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3)
        png_error(png, "unexpected row layout after conversion to RGB");
    if ((st = alloc_image(name, (int)w, (int)h, out)) != ORK_OK ||
        !(rows = malloc(sizeof(png_bytep) * h))) {
        png_destroy_read_struct(&png, &info, NULL);
        ork_image_free(out);
        return st != ORK_OK ? st : ORK_FAIL(ORK_E_NOMEM, "%s: no memory for PNG rows", name);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = out->rgb + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL); /* checks the trailing chunks' CRCs and IEND */
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    return ORK_OK;
}

/* ------------------------------------------------------------------ WebP */

static ork_status decode_webp(const uint8_t *data, size_t n, const char *name, int probe,
                              ork_image *out) {
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(data, n, &f) != VP8_STATUS_OK)
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad WebP: unreadable header", name);
    if (f.has_animation)
        return ORK_FAIL(ORK_E_FORMAT, "%s: animated WebP is not a training image", name);
    ORK_TRY(check_size(name, "WebP", f.width, f.height));
    if (probe) {
        out->w = f.width, out->h = f.height;
        return ORK_OK;
    }
    ORK_TRY(alloc_image(name, f.width, f.height, out));
    size_t sz = (size_t)f.width * f.height * 3;
    if (!WebPDecodeRGBInto(data, n, out->rgb, sz, f.width * 3)) {
        ork_image_free(out);
        return ORK_FAIL(ORK_E_FORMAT, "%s: bad WebP: corrupt or truncated data", name);
    }
    return ORK_OK;
}

/* ----------------------------------------------------------- entry points */

static ork_status decode_any(const uint8_t *data, size_t n, const char *name, int probe,
                             ork_image *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return ORK_FAIL(ORK_E_FORMAT, "%s: empty file, not an image", name);
    switch (ork_image_sniff(data, n)) {
    case ORK_IMG_JPEG: return decode_jpeg(data, n, name, probe, out);
    case ORK_IMG_PNG: return decode_png(data, n, name, probe, out);
    case ORK_IMG_WEBP: return decode_webp(data, n, name, probe, out);
    default:
        return ORK_FAIL(ORK_E_FORMAT, "%s: not a JPEG, PNG or WebP image (unknown magic bytes)", name);
    }
}

ork_status ork_image_decode(const uint8_t *data, size_t n, const char *name, ork_image *out) {
    return decode_any(data, n, name ? name : "(memory)", 0, out);
}

static ork_status read_file(const char *path, uint8_t **buf, size_t *n) {
    /* a regular file of at most 1 GiB: a FIFO or a device is refused before reading */
    return ork_rfile_read(path, "image", ORK_IMAGE_MAX_BYTES, 0, (char **)buf, n);
}

static ork_status load(const char *path, int probe, ork_image *out) {
    uint8_t *buf;
    size_t n;
    memset(out, 0, sizeof *out);
    ORK_TRY(read_file(path, &buf, &n));
    ork_status st = decode_any(buf, n, path, probe, out);
    free(buf);
    return st;
}

ork_status ork_image_load(const char *path, ork_image *out) { return load(path, 0, out); }

ork_status ork_image_probe(const char *path, int *w, int *h) {
    ork_image im;
    *w = *h = 0;
    ORK_TRY(load(path, 1, &im));
    *w = im.w, *h = im.h;
    return ORK_OK;
}

/* ------------------------------------------------------------ resampling */

/* Triangle-filter taps for n_out output samples of a virtual axis of size
 * `virt` (the whole resized axis) starting at `off`, over `in` input samples.
 * Same centre/support convention as PIL's ImagingResample: centre
 * (i + 0.5) * scale, support scale (when downscaling) or 1, weights normalised. */
typedef struct taps {
    int k;      /* max taps per output sample */
    int *lo;    /* [n_out] first input index */
    int *cnt;   /* [n_out] taps used */
    float *w;   /* [n_out * k] */
} taps;

static void taps_free(taps *t) { free(t->lo), free(t->cnt), free(t->w); }

static int make_taps(int in, int virt, int off, int n_out, taps *t) {
    double scale = (double)in / virt, fs = scale > 1.0 ? scale : 1.0, support = fs;
    t->k = (int)ceil(support) * 2 + 1;
    t->lo = malloc(sizeof(int) * n_out);
    t->cnt = malloc(sizeof(int) * n_out);
    t->w = malloc(sizeof(float) * n_out * t->k);
    if (!t->lo || !t->cnt || !t->w) return 0;
    for (int i = 0; i < n_out; i++) {
        double c = (i + off + 0.5) * scale;
        int lo = (int)(c - support + 0.5), hi = (int)(c + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > t->k) hi = lo + t->k;
        float *w = t->w + (size_t)i * t->k;
        double sum = 0;
        for (int j = lo; j < hi; j++) {
            double d = fabs((j - c + 0.5) / fs);
            w[j - lo] = (float)(d < 1.0 ? 1.0 - d : 0.0);
            sum += w[j - lo];
        }
        for (int j = 0; j < hi - lo; j++) w[j] = sum > 0 ? (float)(w[j] / sum) : 0.0f;
        t->lo[i] = lo;
        t->cnt[i] = hi - lo;
    }
    return 1;
}

/* out (th, tw) = window at (cx, cy) of src resized to (sw, sh). */
static ork_status resample(const ork_image *src, int sw, int sh, int cx, int cy, int tw, int th,
                           ork_image *out) {
    memset(out, 0, sizeof *out);
    if (!src || !src->rgb || src->w <= 0 || src->h <= 0 || tw <= 0 || th <= 0 ||
        tw > ORK_IMAGE_MAX_SIDE || th > ORK_IMAGE_MAX_SIDE || cx < 0 || cy < 0 ||
        cx + tw > sw || cy + th > sh)
        return ORK_FAIL(ORK_E_INVALID, "image resize: bad geometry %dx%d -> %dx%d at (%d,%d) of %dx%d",
                        src ? src->w : 0, src ? src->h : 0, tw, th, cx, cy, sw, sh);
    taps tx = {0}, ty = {0};
    float *mid = NULL;
    ork_status st = ORK_OK;
    if (!make_taps(src->w, sw, cx, tw, &tx) || !make_taps(src->h, sh, cy, th, &ty)) {
        st = ORK_FAIL(ORK_E_NOMEM, "image resize: no memory for filter taps");
        goto done;
    }
    /* horizontal pass over the source rows the vertical taps touch */
    int r0 = ty.lo[0], r1 = ty.lo[th - 1] + ty.cnt[th - 1];
    if (!(mid = malloc(sizeof(float) * (size_t)(r1 - r0) * tw * 3))) {
        st = ORK_FAIL(ORK_E_NOMEM, "image resize: no memory for %dx%d floats", tw, r1 - r0);
        goto done;
    }
    for (int y = r0; y < r1; y++) {
        const uint8_t *s = src->rgb + (size_t)y * src->w * 3;
        float *m = mid + (size_t)(y - r0) * tw * 3;
        for (int x = 0; x < tw; x++) {
            const float *w = tx.w + (size_t)x * tx.k;
            const uint8_t *p = s + (size_t)tx.lo[x] * 3;
            float a = 0, b = 0, c = 0;
            for (int j = 0; j < tx.cnt[x]; j++, p += 3) a += w[j] * p[0], b += w[j] * p[1], c += w[j] * p[2];
            m[3 * x] = a, m[3 * x + 1] = b, m[3 * x + 2] = c;
        }
    }
    if ((st = alloc_image("image resize", tw, th, out)) != ORK_OK) goto done;
    for (int y = 0; y < th; y++) {
        const float *w = ty.w + (size_t)y * ty.k;
        uint8_t *o = out->rgb + (size_t)y * tw * 3;
        for (int x = 0; x < tw * 3; x++) {
            const float *m = mid + (size_t)(ty.lo[y] - r0) * tw * 3 + x;
            float v = 0;
            for (int j = 0; j < ty.cnt[y]; j++) v += w[j] * m[(size_t)j * tw * 3];
            v = v + 0.5f;
            o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
done:
    taps_free(&tx);
    taps_free(&ty);
    free(mid);
    return st;
}

ork_status ork_image_resize(const ork_image *src, int w, int h, ork_image *out) {
    return resample(src, w, h, 0, 0, w, h, out);
}

void ork_image_fit_geometry(int w, int h, int tw, int th, int *sw, int *sh, int *cx, int *cy) {
    /* doubles and truncations exactly as the Python: max of the two ratios,
     * int(math.ceil(width * s)), int((scaled - target) / 2) */
    double sx = (double)tw / w, sy = (double)th / h, s = sx > sy ? sx : sy;
    *sw = (int)ceil(w * s);
    *sh = (int)ceil(h * s);
    *cx = (int)((*sw - tw) / 2.0);
    *cy = (int)((*sh - th) / 2.0);
}

ork_status ork_image_fit(const ork_image *src, int tw, int th, ork_image *out) {
    if (!src || src->w <= 0 || src->h <= 0 || tw <= 0 || th <= 0) {
        memset(out, 0, sizeof *out);
        return ORK_FAIL(ORK_E_INVALID, "image fit: bad size %dx%d -> %dx%d", src ? src->w : 0,
                        src ? src->h : 0, tw, th);
    }
    int sw, sh, cx, cy;
    ork_image_fit_geometry(src->w, src->h, tw, th, &sw, &sh, &cx, &cy);
    return resample(src, sw, sh, cx, cy, tw, th, out);
}

void ork_image_bucket(int w, int h, int res, int div, int *bw, int *bh) {
    double total = (double)w * h, maxp = (double)res * res;
    double target = total < maxp ? total : maxp;
    double s = sqrt(target / total);
    double wr = w * s / div, hr = h * s / div;
    int fw = (int)floor(wr) * div, cw = (int)ceil(wr) * div;
    int fh = (int)floor(hr) * div, ch = (int)ceil(hr) * div;
    int cand[4][2] = {{fw, fh}, {fw, ch}, {cw, fh}, {cw, ch}};
    int best = -1;
    double bestd = 0;
    for (int i = 0; i < 4; i++) { /* first minimum wins, as Python's min() */
        double a = (double)cand[i][0] * cand[i][1];
        if (cand[i][0] <= 0 || cand[i][1] <= 0 || a > maxp) continue;
        double d = fabs(a - target);
        if (best < 0 || d < bestd) best = i, bestd = d;
    }
    if (best < 0) {
        *bw = fw > div ? fw : div;
        *bh = fh > div ? fh : div;
    } else {
        *bw = cand[best][0];
        *bh = cand[best][1];
    }
}

void ork_image_to_f32_chw(const ork_image *img, float *out) {
    size_t hw = (size_t)img->w * img->h;
    for (size_t i = 0; i < hw; i++)
        for (int c = 0; c < 3; c++) out[c * hw + i] = img->rgb[3 * i + c] * (1.0f / 255.0f);
}
