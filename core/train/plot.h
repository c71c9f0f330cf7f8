/* train/plot.h — the loss curve of a run, drawn in C: axes, a light grid
 * with numeric tick labels (a built-in 3x5 bitmap font, scaled), the raw loss
 * of every step in a light colour and its smoothed value (metrics.h,
 * ORK_LOSS_EMA_BETA) dark and thicker, into an 8-bit RGB buffer, written as
 * <training_folder>/<name>/loss.png (redrawn at every save from metrics.jsonl).
 * The y range covers the raw values between their 1st and 99th percentiles
 * (outliers, and the smoothed curve where a spike lifts it, are clipped to
 * the frame), so one spike does not flatten the curve. Owns nothing beyond a call. [control-thread] */
#ifndef ORK_TRAIN_PLOT_H
#define ORK_TRAIN_PLOT_H

#include "train/metrics.h"

#include <orakul/abi.h>
#include <stdint.h>

#define ORK_PLOT_W 800
#define ORK_PLOT_H 450

/* Colours, for tests and docs. */
#define ORK_PLOT_RAW_RGB 0xA8C8F0u   /* raw loss: light blue */
#define ORK_PLOT_EMA_RGB 0x163C96u   /* smoothed loss: dark blue */

/* The data rectangle in pixels (x0 <= x < x1, y0 <= y < y1; y grows down) and
 * the value ranges mapped onto it. */
typedef struct ork_plot_area {
    int x0, y0, x1, y1;
    double step_lo, step_hi, loss_lo, loss_hi;
} ork_plot_area;

/* Draw rows (skipped steps and non-finite losses are left out) into rgb
 * (h, w, 3); w >= 200, h >= 120. area (may be NULL) receives the geometry.
 * ORK_E_INVALID for a too small canvas. */
ork_status ork_plot_loss(const ork_metrics_row *rows, size_t n, int w, int h, uint8_t *rgb, ork_plot_area *area);

/* Read metrics_path (malformed lines are reported as "path:line: why"
 * warnings and skipped) and write the ORK_PLOT_W x ORK_PLOT_H plot to png_path. */
ork_status ork_plot_loss_file(const char *metrics_path, const char *png_path);

#endif
