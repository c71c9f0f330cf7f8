/* test_image.c — core/data/image: decoding of the committed photos against
 * Pillow's pixels (image_ref.h), the budgie JPEGs from ../shared, PNG variants
 * and WebP/JPEG written here with the libraries, malformed inputs (one line,
 * the right status), resampling, fit/crop geometry against PIL, buckets. */
#include "ork_test.h"

#include "data/dataset.h" /* ork_fnv1a64 */
#include "data/image.h"
#include "util/log.h"

#include <jpeglib.h>
#include <png.h>
#include <sys/stat.h>
#include <webp/encode.h>

#include "image_ref.h"

/* ------------------------------------------------------------ log capture */

static int g_lines;
static char g_last[1024];
static void sink(ork_log_level l, const char *line, void *u) {
    (void)u;
    if (l >= ORK_LOG_WARN) g_lines++;
    snprintf(g_last, sizeof g_last, "%s", line);
}
static void capture(void) { g_lines = 0, g_last[0] = 0; }

static char g_dir[256];
static const char *tmp(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    if (n) CU_ASSERT(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* rows: h rows of png_get_rowbytes bytes, packed as the color type says */
static void write_png(const char *path, int w, int h, int ctype, int depth, int interlace,
                      const uint8_t *data, const png_color *pal, int npal, const uint8_t *trns, int ntrns) {
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, w, h, depth, ctype, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(png, info, pal, npal);
    if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    size_t rb = png_get_rowbytes(png, info);
    png_bytep *rows = malloc(sizeof(png_bytep) * h);
    for (int y = 0; y < h; y++) rows[y] = (png_bytep)data + rb * y;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    fclose(f);
}

static void write_jpeg(const char *path, const uint8_t *rgb, int w, int h, int q,
                       const uint8_t *app1, unsigned app1_len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = w, c.image_height = h, c.input_components = 3, c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, q, TRUE);
    jpeg_start_compress(&c, TRUE);
    if (app1) jpeg_write_marker(&c, JPEG_APP0 + 1, app1, app1_len);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = (JSAMPROW)rgb + (size_t)c.next_scanline * w * 3;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

static const uint8_t *px(const ork_image *im, int x, int y) { return im->rgb + ((size_t)y * im->w + x) * 3; }

/* Load must fail with `want`, one error line naming the file. */
static void expect_fail(const char *path, ork_status want) {
    ork_image im = {1, 1, (uint8_t *)1};
    capture();
    ork_status st = ork_image_load(path, &im);
    CU_ASSERT_EQUAL(st, want);
    CU_ASSERT_EQUAL(g_lines, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, path));
    CU_ASSERT_PTR_NULL(im.rgb);
    if (st != want || g_lines != 1) printf("  %s: status %d, %d lines, last: %s\n", path, st, g_lines, g_last);
}

/* ----------------------------------------------------------------- tests */

static void t_photos_match_pillow(void) {
    for (size_t i = 0; i < sizeof ork_ref_photos / sizeof *ork_ref_photos; i++) {
        const ork_ref_photo *r = &ork_ref_photos[i];
        char path[512];
        snprintf(path, sizeof path, "%s/assets/photos/%s.png", ORK_SOURCE_DIR, r->name);
        ork_image im;
        CU_ASSERT_FATAL(ork_image_load(path, &im) == ORK_OK);
        CU_ASSERT_EQUAL(im.w, r->w);
        CU_ASSERT_EQUAL(im.h, r->h);
        for (int k = 0; k < 8; k++)
            CU_ASSERT(memcmp(px(&im, r->px[k].x, r->px[k].y), r->px[k].rgb, 3) == 0);
        int pw, ph;
        CU_ASSERT(ork_image_probe(path, &pw, &ph) == ORK_OK && pw == r->w && ph == r->h);
        ork_image_free(&im);
    }
}

static void t_fit_matches_pil(void) {
    for (size_t i = 0; i < sizeof ork_ref_fits / sizeof *ork_ref_fits; i++) {
        const ork_ref_fit *r = &ork_ref_fits[i];
        char path[512];
        snprintf(path, sizeof path, "%s/assets/photos/%s.png", ORK_SOURCE_DIR, r->name);
        ork_image im, out;
        CU_ASSERT_FATAL(ork_image_load(path, &im) == ORK_OK);
        int sw, sh, cx, cy;
        ork_image_fit_geometry(im.w, im.h, r->tw, r->th, &sw, &sh, &cx, &cy);
        CU_ASSERT(sw == r->sw && sh == r->sh && cx == r->cx && cy == r->cy);
        CU_ASSERT_FATAL(ork_image_fit(&im, r->tw, r->th, &out) == ORK_OK);
        CU_ASSERT(out.w == r->tw && out.h == r->th);
        double mean[3] = {0};
        for (int k = 0; k < out.w * out.h; k++)
            for (int c = 0; c < 3; c++) mean[c] += out.rgb[3 * k + c];
        for (int c = 0; c < 3; c++) CU_ASSERT(ork_close(mean[c] / (out.w * out.h), r->mean[c], 0.5, 0));
        int worst = 0;
        for (int k = 0; k < 8; k++)
            for (int c = 0; c < 3; c++) {
                int d = abs(px(&out, r->px[k].x, r->px[k].y)[c] - r->px[k].rgb[c]);
                worst = d > worst ? d : worst;
            }
        CU_ASSERT(worst <= 1); /* PIL keeps an 8-bit intermediate and fixed-point taps */
        if (worst > 1) printf("  %s %dx%d: max diff %d vs PIL\n", r->name, r->tw, r->th, worst);
        ork_image_free(&im);
        ork_image_free(&out);
    }
}

/* The budgie JPEGs (progressive, 4:2:0) must decode bit-exactly as Pillow does;
 * they live only in ../shared, so only hashes of Pillow's pixels are committed. */
static void t_budgie_jpegs(void) {
    int n = 0;
    for (size_t i = 0; i < sizeof ork_ref_jpegs / sizeof *ork_ref_jpegs; i++) {
        const ork_ref_jpeg *r = &ork_ref_jpegs[i];
        char rel[256], buf[512];
        snprintf(rel, sizeof rel, "assets/photos/%s", r->name);
        const char *path = ork_test_shared(rel, buf, sizeof buf);
        if (!path) continue;
        ork_image im;
        CU_ASSERT_FATAL(ork_image_load(path, &im) == ORK_OK);
        CU_ASSERT(im.w == r->w && im.h == r->h && im.w == 512 && im.h == 512);
        uint64_t h = ork_fnv1a64(im.rgb, (size_t)im.w * im.h * 3, ORK_FNV1A64_INIT);
        CU_ASSERT(h == r->fnv1a64);
        if (h != r->fnv1a64) printf("  %s: pixels differ from Pillow's\n", r->name);
        ork_image_free(&im);
        n++;
    }
    printf("  %d budgie JPEGs decoded\n", n);
}

static void t_png_variants(void) {
    ork_image im;
    /* palette 2-bit with a transparent entry: alpha dropped, colours kept */
    png_color pal[3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    uint8_t trns[1] = {0};
    const uint8_t p2[2] = {0x18, 0x60}; /* indices row0: 0,1,2,0  row1: 1,2,0,0 */
    write_png(tmp("pal.png"), 4, 2, PNG_COLOR_TYPE_PALETTE, 2, 0, p2, pal, 3, trns, 1);
    CU_ASSERT_FATAL(ork_image_load(tmp("pal.png"), &im) == ORK_OK);
    CU_ASSERT(im.w == 4 && im.h == 2);
    CU_ASSERT(memcmp(px(&im, 0, 0), "\xff\0\0", 3) == 0);
    CU_ASSERT(memcmp(px(&im, 1, 0), "\0\xff\0", 3) == 0);
    CU_ASSERT(memcmp(px(&im, 2, 0), "\0\0\xff", 3) == 0);
    CU_ASSERT(memcmp(px(&im, 1, 1), "\0\0\xff", 3) == 0);
    ork_image_free(&im);

    /* grey 8-bit, Adam7 interlaced */
    uint8_t g[5 * 3];
    for (int i = 0; i < 15; i++) g[i] = (uint8_t)(i * 17);
    write_png(tmp("grey.png"), 5, 3, PNG_COLOR_TYPE_GRAY, 8, 1, g, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("grey.png"), &im) == ORK_OK);
    int ok = 1;
    for (int i = 0; i < 15; i++) ok &= im.rgb[3 * i] == g[i] && im.rgb[3 * i + 1] == g[i] && im.rgb[3 * i + 2] == g[i];
    CU_ASSERT(ok);
    ork_image_free(&im);

    /* 1-bit grey: 0 -> 0, 1 -> 255 */
    uint8_t b1[1] = {0xA0}; /* 1,0,1 */
    write_png(tmp("bit.png"), 3, 1, PNG_COLOR_TYPE_GRAY, 1, 0, b1, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("bit.png"), &im) == ORK_OK);
    CU_ASSERT(im.rgb[0] == 255 && im.rgb[3] == 0 && im.rgb[6] == 255);
    ork_image_free(&im);

    /* 16-bit RGB (big-endian samples): the high byte is kept */
    uint8_t r16[2 * 6] = {0x12, 0x34, 0xAB, 0xCD, 0xFF, 0xFF, 0x00, 0x80, 0x7F, 0xFF, 0x01, 0x00};
    write_png(tmp("rgb16.png"), 2, 1, PNG_COLOR_TYPE_RGB, 16, 0, r16, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("rgb16.png"), &im) == ORK_OK);
    CU_ASSERT(memcmp(im.rgb, "\x12\xab\xff\x00\x7f\x01", 6) == 0);
    ork_image_free(&im);

    /* 16-bit grey */
    uint8_t g16[4] = {0xC0, 0x01, 0x02, 0xFF};
    write_png(tmp("grey16.png"), 2, 1, PNG_COLOR_TYPE_GRAY, 16, 0, g16, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("grey16.png"), &im) == ORK_OK);
    CU_ASSERT(memcmp(im.rgb, "\xc0\xc0\xc0\x02\x02\x02", 6) == 0);
    ork_image_free(&im);

    /* RGBA: alpha dropped without compositing (fully transparent pixel keeps its RGB) */
    uint8_t rgba[8] = {10, 20, 30, 0, 200, 150, 100, 128};
    write_png(tmp("rgba.png"), 2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, rgba, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("rgba.png"), &im) == ORK_OK);
    CU_ASSERT(memcmp(im.rgb, "\x0a\x14\x1e\xc8\x96\x64", 6) == 0);
    ork_image_free(&im);

    /* grey + alpha */
    uint8_t ga[4] = {77, 0, 99, 255};
    write_png(tmp("ga.png"), 2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, ga, NULL, 0, NULL, 0);
    CU_ASSERT_FATAL(ork_image_load(tmp("ga.png"), &im) == ORK_OK);
    CU_ASSERT(memcmp(im.rgb, "\x4d\x4d\x4d\x63\x63\x63", 6) == 0);
    ork_image_free(&im);
}

static void t_webp_lossless(void) {
    uint8_t rgb[7 * 5 * 3], *enc = NULL;
    for (int i = 0; i < (int)sizeof rgb; i++) rgb[i] = (uint8_t)(i * 37 + 11);
    size_t n = WebPEncodeLosslessRGB(rgb, 7, 5, 7 * 3, &enc);
    CU_ASSERT_FATAL(n > 0);
    write_bytes(tmp("x.webp"), enc, n);
    ork_image im;
    CU_ASSERT_FATAL(ork_image_load(tmp("x.webp"), &im) == ORK_OK);
    CU_ASSERT(im.w == 7 && im.h == 5 && memcmp(im.rgb, rgb, sizeof rgb) == 0);
    ork_image_free(&im);
    write_bytes(tmp("trunc.webp"), enc, n / 2);
    expect_fail(tmp("trunc.webp"), ORK_E_FORMAT);
    WebPFree(enc);
}

static void t_jpeg_and_exif(void) {
    /* 32x16: left half red, right half blue */
    enum { W = 32, H = 16 };
    uint8_t rgb[W * H * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = rgb + (y * W + x) * 3;
            p[0] = x < W / 2 ? 230 : 20, p[1] = 30, p[2] = x < W / 2 ? 20 : 220;
        }
    write_jpeg(tmp("plain.jpg"), rgb, W, H, 95, NULL, 0);
    ork_image im;
    CU_ASSERT_FATAL(ork_image_load(tmp("plain.jpg"), &im) == ORK_OK);
    CU_ASSERT(im.w == W && im.h == H);
    CU_ASSERT(abs(px(&im, 4, 8)[0] - 230) <= 6 && abs(px(&im, 28, 8)[2] - 220) <= 6);
    ork_image_free(&im);

    /* EXIF orientation 6 (rotate 90 clockwise to display): 16x32, red on top.
     * Big-endian TIFF, IFD0 with one SHORT entry 0x0112 = 6. */
    static const uint8_t exif[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
                                   0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0};
    write_jpeg(tmp("exif6.jpg"), rgb, W, H, 95, exif, sizeof exif);
    CU_ASSERT_FATAL(ork_image_load(tmp("exif6.jpg"), &im) == ORK_OK);
    CU_ASSERT(im.w == H && im.h == W);
    CU_ASSERT(px(&im, 8, 4)[0] > 200 && px(&im, 8, 4)[2] < 60);  /* top: red */
    CU_ASSERT(px(&im, 8, 28)[2] > 190 && px(&im, 8, 28)[0] < 60); /* bottom: blue */
    int pw, ph;
    CU_ASSERT(ork_image_probe(tmp("exif6.jpg"), &pw, &ph) == ORK_OK && pw == H && ph == W);
    ork_image_free(&im);
}

static void t_malformed(void) {
    size_t n = 0;
    char src[512];
    snprintf(src, sizeof src, "%s/assets/photos/coffee.png", ORK_SOURCE_DIR);
    uint8_t *png = (uint8_t *)ork_test_read_all(src, &n);
    CU_ASSERT_FATAL(png != NULL && n > 1000);

    write_bytes(tmp("trunc.png"), png, n / 2);
    expect_fail(tmp("trunc.png"), ORK_E_FORMAT);
    write_bytes(tmp("header_only.png"), png, 20);
    expect_fail(tmp("header_only.png"), ORK_E_FORMAT);
    png[40] ^= 0x55; /* inside the first chunks: a CRC error */
    write_bytes(tmp("crc.png"), png, n);
    expect_fail(tmp("crc.png"), ORK_E_FORMAT);
    png[40] ^= 0x55;

    /* PNG bytes named .jpg: the magic decides */
    write_bytes(tmp("really_png.jpg"), png, n);
    ork_image im;
    CU_ASSERT(ork_image_load(tmp("really_png.jpg"), &im) == ORK_OK && im.w == 600 && im.h == 400);
    ork_image_free(&im);
    free(png);

    uint8_t rgb[64 * 64 * 3];
    for (int i = 0; i < (int)sizeof rgb; i++) rgb[i] = (uint8_t)(i * 7);
    write_jpeg(tmp("full.jpg"), rgb, 64, 64, 90, NULL, 0);
    uint8_t *jpg = (uint8_t *)ork_test_read_all(tmp("full.jpg"), &n);
    write_bytes(tmp("trunc.jpg"), jpg, n / 2);
    expect_fail(tmp("trunc.jpg"), ORK_E_FORMAT);
    write_bytes(tmp("head.jpg"), jpg, 100);
    expect_fail(tmp("head.jpg"), ORK_E_FORMAT);
    free(jpg);

    const char garbage[] = "this is not an image at all, just some text in a file";
    write_bytes(tmp("garbage.png"), garbage, sizeof garbage);
    expect_fail(tmp("garbage.png"), ORK_E_FORMAT);
    write_bytes(tmp("fake.jpg"), "\xFF\xD8\xFF\x00garbage-after-soi", 21);
    expect_fail(tmp("fake.jpg"), ORK_E_FORMAT);
    write_bytes(tmp("empty.jpg"), "", 0);
    expect_fail(tmp("empty.jpg"), ORK_E_FORMAT);
    expect_fail(tmp("does_not_exist.png"), ORK_E_IO);

    /* over the size limit: refused from the header */
    uint8_t *row = calloc(20000, 1);
    write_png(tmp("huge.png"), 20000, 1, PNG_COLOR_TYPE_GRAY, 8, 0, row, NULL, 0, NULL, 0);
    free(row);
    expect_fail(tmp("huge.png"), ORK_E_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_last, "16384"));
}

static void fill(ork_image *im, int w, int h) {
    im->w = w, im->h = h, im->rgb = malloc((size_t)w * h * 3);
}

static void t_resize(void) {
    ork_image c, out;
    fill(&c, 37, 23);
    for (int i = 0; i < 37 * 23; i++) c.rgb[3 * i] = 10, c.rgb[3 * i + 1] = 200, c.rgb[3 * i + 2] = 77;
    int sizes[][2] = {{13, 50}, {100, 90}, {1, 1}, {37, 23}};
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_FATAL(ork_image_resize(&c, sizes[s][0], sizes[s][1], &out) == ORK_OK);
        int ok = out.w == sizes[s][0] && out.h == sizes[s][1];
        for (int i = 0; i < out.w * out.h; i++) ok &= memcmp(out.rgb + 3 * i, "\x0a\xc8\x4d", 3) == 0;
        CU_ASSERT(ok);
        ork_image_free(&out);
    }
    ork_image_free(&c);

    /* 1-px checkerboard downscaled 8x: flat grey */
    fill(&c, 64, 64);
    for (int y = 0; y < 64; y++)
        for (int x = 0; x < 64; x++) memset(c.rgb + (y * 64 + x) * 3, (x + y) & 1 ? 255 : 0, 3);
    CU_ASSERT_FATAL(ork_image_resize(&c, 8, 8, &out) == ORK_OK);
    int ok = 1;
    for (int i = 0; i < 64 * 3; i++) ok &= abs(out.rgb[i] - 128) <= 1;
    CU_ASSERT(ok);
    ork_image_free(&out);
    ork_image_free(&c);

    /* 2x2 upscaled to 16x16: rows and columns monotone, inside [min, max] */
    fill(&c, 2, 2);
    const uint8_t v[4] = {0, 100, 200, 255};
    for (int i = 0; i < 4; i++) memset(c.rgb + 3 * i, v[i], 3);
    CU_ASSERT_FATAL(ork_image_resize(&c, 16, 16, &out) == ORK_OK);
    ok = 1;
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) {
            int a = px(&out, x, y)[0];
            if (x) ok &= a >= px(&out, x - 1, y)[0];
            if (y) ok &= a >= px(&out, x, y - 1)[0];
        }
    CU_ASSERT(ok);
    CU_ASSERT(px(&out, 0, 0)[0] == 0 && px(&out, 15, 15)[0] == 255);
    CU_ASSERT(px(&out, 7, 0)[0] > 20 && px(&out, 7, 0)[0] < 80); /* smooth, not nearest */
    ork_image_free(&out);
    ork_image_free(&c);

    capture();
    CU_ASSERT(ork_image_resize(NULL, 4, 4, &out) == ORK_E_INVALID);
    CU_ASSERT(g_lines == 1);
}

static void t_fit_geometry(void) {
    int sw, sh, cx, cy;
    ork_image_fit_geometry(600, 400, 256, 256, &sw, &sh, &cx, &cy);
    CU_ASSERT(sw == 384 && sh == 256 && cx == 64 && cy == 0);
    ork_image_fit_geometry(400, 600, 320, 192, &sw, &sh, &cx, &cy);
    CU_ASSERT(sw == 320 && sh == 480 && cx == 0 && cy == 144);
    ork_image_fit_geometry(100, 100, 300, 200, &sw, &sh, &cx, &cy); /* upscale */
    CU_ASSERT(sw == 300 && sh == 300 && cx == 0 && cy == 50);

    /* the crop keeps the centre: a vertical stripe in the middle stays there */
    ork_image im, out;
    fill(&im, 300, 100);
    memset(im.rgb, 0, 300 * 100 * 3);
    for (int y = 0; y < 100; y++) memset(im.rgb + (y * 300 + 140) * 3, 255, 20 * 3);
    CU_ASSERT_FATAL(ork_image_fit(&im, 100, 100, &out) == ORK_OK);
    CU_ASSERT(out.w == 100 && out.h == 100);
    CU_ASSERT(px(&out, 50, 50)[0] == 255 && px(&out, 0, 50)[0] == 0 && px(&out, 99, 50)[0] == 0);
    ork_image_free(&out);
    ork_image_free(&im);
}

static void t_buckets(void) {
    static const int c[][6] = {
        /* w, h, res, div -> bw, bh (as ai-toolkit toolkit/buckets.py) */
        {512, 512, 512, 16, 512, 512},   {1024, 768, 512, 16, 576, 448},
        {300, 451, 512, 16, 304, 448},   {16384, 16, 512, 16, 16384, 16},
        {8, 8, 512, 16, 16, 16},         {4000, 3000, 1024, 16, 1168, 896},
        {1080, 1920, 768, 16, 576, 1024}, {600, 400, 512, 64, 640, 384},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        int bw, bh;
        ork_image_bucket(c[i][0], c[i][1], c[i][2], c[i][3], &bw, &bh);
        CU_ASSERT(bw == c[i][4] && bh == c[i][5]);
        CU_ASSERT(bw % c[i][3] == 0 && bh % c[i][3] == 0);
        if (bw != c[i][4] || bh != c[i][5]) printf("  bucket %dx%d: got %dx%d\n", c[i][0], c[i][1], bw, bh);
    }
}

static void t_to_f32(void) {
    ork_image im;
    fill(&im, 2, 1);
    memcpy(im.rgb, "\x00\x80\xff\xff\x00\x33", 6);
    float o[6];
    ork_image_to_f32_chw(&im, o);
    /* (3, 1, 2): R0 R1 G0 G1 B0 B1 */
    CU_ASSERT(o[0] == 0.0f && o[1] == 1.0f && ork_close(o[2], 128 / 255.0, 1e-7, 0) && o[3] == 0.0f);
    CU_ASSERT(o[4] == 1.0f && ork_close(o[5], 0.2, 1e-7, 0));
    ork_image_free(&im);
}

static void t_sniff(void) {
    CU_ASSERT(ork_image_sniff((const uint8_t *)"\xFF\xD8\xFF\xE0", 4) == ORK_IMG_JPEG);
    CU_ASSERT(ork_image_sniff((const uint8_t *)"\x89PNG\r\n\x1a\n", 8) == ORK_IMG_PNG);
    CU_ASSERT(ork_image_sniff((const uint8_t *)"RIFF\0\0\0\0WEBP", 12) == ORK_IMG_WEBP);
    CU_ASSERT(ork_image_sniff((const uint8_t *)"RIFF\0\0\0\0WAVE", 12) == ORK_IMG_UNKNOWN);
    CU_ASSERT(ork_image_sniff((const uint8_t *)"\x89PN", 3) == ORK_IMG_UNKNOWN);
}

static int init(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ork_test_image_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    ork_log_set_sink(sink, NULL);
    return 0;
}
static int clean(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : 1;
}

static const ork_test_case cases[] = {
    {"photos match Pillow", t_photos_match_pillow},
    {"fit matches PIL resize+crop", t_fit_matches_pil},
    {"budgie JPEGs from ../shared", t_budgie_jpegs},
    {"PNG palette/grey/16-bit/alpha/interlace", t_png_variants},
    {"WebP lossless round trip, truncated WebP", t_webp_lossless},
    {"JPEG and EXIF orientation", t_jpeg_and_exif},
    {"malformed files: status and one line", t_malformed},
    {"resize: constant, checkerboard, upscale", t_resize},
    {"fit geometry and centre crop", t_fit_geometry},
    {"aspect buckets", t_buckets},
    {"to f32 CHW", t_to_f32},
    {"format sniffing", t_sniff},
    {NULL, NULL},
};
ORK_TEST_MAIN("data_image", init, clean, cases)
