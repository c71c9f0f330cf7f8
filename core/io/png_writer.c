/* io/png_writer.c — see png_writer.h. libpng reports errors by longjmp out of our
 * error callback; everything that must be released afterwards is volatile or
 * set before setjmp. */
#include "io/png_writer.h"

#include "platform/platform.h"
#include "util/log.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_error(png_structp png, png_const_charp m) {
    char *why = png_get_error_ptr(png);
    snprintf(why, 256, "%s", m);
    png_longjmp(png, 1);
}
static void on_warning(png_structp png, png_const_charp m) { (void)png, (void)m; }

ork_status ork_png_write_rgb(const char *path, int w, int h, const uint8_t *rgb) {
    if (w < 1 || h < 1 || w > 65535 || h > 65535 || !rgb)
        return ORK_FAIL(ORK_E_INVALID, "%s: cannot write a %dx%d image", path, w, h);
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, ork_pid()) >= sizeof tmp)
        return ORK_FAIL(ORK_E_IO, "%s: path too long", path);
    FILE *volatile f = ork_fopen(tmp, "wb");
    if (!f) return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, strerror(errno));
    char why[256] = "";
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, why, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        fclose(f);
        ork_path_remove(tmp);
        return ORK_FAIL(ORK_E_NOMEM, "%s: libpng: out of memory", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        ork_path_remove(tmp);
        return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, why[0] ? why : "libpng error");
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(rgb + (size_t)y * w * 3));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        ork_path_remove(tmp);
        return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (ork_path_replace(tmp, path) != ORK_OK) { /* atomic on both systems */
        int e = errno;
        ork_path_remove(tmp);
        return ORK_FAIL(ORK_E_IO, "cannot write %s: %s", path, strerror(e));
    }
    return ORK_OK;
}

int ork_tmp_sweep(const char *dir, const char *key) {
    char mark[256];
    if ((size_t)snprintf(mark, sizeof mark, "%s.tmp.", key) >= sizeof mark) return 0;
    ork_dir *d;
    if (ork_dir_open(dir, &d) != ORK_OK) return 0;
    int n = 0;
    for (const char *name; (name = ork_dir_next(d));) {
        const char *t = strstr(name, mark), *pid = t ? t + strlen(mark) : NULL;
        if (!pid || !*pid || strspn(pid, "0123456789") != strlen(pid)) continue;
        long owner = atol(pid);
        if (owner == ork_pid() || ork_pid_alive(owner)) continue; /* a live writer's */
        char p[4200];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) continue;
        if (ork_path_remove(p) == ORK_OK) n++;
    }
    ork_dir_close(d);
    return n;
}
