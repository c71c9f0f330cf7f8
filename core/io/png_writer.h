/* io/png_writer.h — writes 8-bit RGB images as PNG files (libpng) for the
 * samples and plots a training run leaves in its output folder. The file is
 * written next to its destination under a temporary name ("<path>.tmp.<pid>")
 * and renamed into place, so a reader never sees half an image; the temporary
 * files a killed writer left behind are swept by ork_tmp_sweep.
 * Owns nothing beyond the call. [control-thread] */
#ifndef ORK_IO_PNG_WRITER_H
#define ORK_IO_PNG_WRITER_H

#include <orakul/abi.h>
#include <stdint.h>

/* rgb: (h, w, 3) uint8 row-major. ORK_E_IO (one line naming path) when the
 * file cannot be written; ORK_E_INVALID for w or h outside 1..65535. */
ork_status ork_png_write_rgb(const char *path, int w, int h, const uint8_t *rgb);

/* Remove the files "<...><key>.tmp.<pid>" in dir whose writer process is gone
 * (key e.g. ".png", "loss.png", "metrics.jsonl"); returns how many. */
int ork_tmp_sweep(const char *dir, const char *key);

#endif
