/* train/plot.c — see plot.h. A tiny raster: filled rectangles, Bresenham
 * lines (optionally 2 px thick), and a 3x5 font for the characters the labels
 * use, drawn at 2x. */
#include "train/plot.h"

#include "io/png_writer.h"
#include "util/log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct canvas {
    int w, h;
    uint8_t *px;
} canvas;

static void put(canvas *c, int x, int y, uint32_t rgb) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    uint8_t *p = c->px + ((size_t)y * c->w + x) * 3;
    p[0] = (uint8_t)(rgb >> 16);
    p[1] = (uint8_t)(rgb >> 8);
    p[2] = (uint8_t)rgb;
}

static void rect(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb) {
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) put(c, x, y, rgb);
}

/* Bresenham; thick: also the pixel right and below. Clipped to [cx0, cx1) x [cy0, cy1). */
typedef struct clip { int x0, y0, x1, y1; } clip;
static void line(canvas *c, const clip *k, int x0, int y0, int x1, int y1, uint32_t rgb, int thick) {
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        for (int a = 0; a <= thick; a++)
            for (int b = 0; b <= thick; b++) {
                int x = x0 + a, y = y0 + b;
                if (x >= k->x0 && x < k->x1 && y >= k->y0 && y < k->y1) put(c, x, y, rgb);
            }
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

/* ---- the font: 5 rows of 3 bits (bit 2 = left column) ---- */
typedef struct glyph { char ch; uint8_t rows[5]; } glyph;
static const glyph font[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 2, 2, 2}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'-', {0, 0, 7, 0, 0}},
    {'+', {0, 2, 7, 2, 0}}, {'E', {7, 4, 6, 4, 7}}, {'L', {4, 4, 4, 4, 7}}, {'O', {7, 5, 5, 5, 7}},
    {'S', {3, 4, 7, 1, 6}}, {'T', {7, 2, 2, 2, 2}}, {'P', {7, 5, 7, 4, 4}}, {'R', {6, 5, 6, 5, 5}},
    {'A', {2, 5, 7, 5, 5}}, {'W', {5, 5, 5, 7, 5}}, {'M', {5, 7, 7, 5, 5}}, {'(', {1, 2, 2, 2, 1}},
    {')', {4, 2, 2, 2, 4}}, {' ', {0, 0, 0, 0, 0}},
};
enum { SCALE = 2, ADV = 4 * SCALE, TEXT_H = 5 * SCALE };

static const glyph *find_glyph(char ch) {
    if (ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
    for (size_t i = 0; i < sizeof font / sizeof font[0]; i++)
        if (font[i].ch == ch) return &font[i];
    return NULL;
}

static void text(canvas *c, int x, int y, const char *s, uint32_t rgb) {
    for (; *s; s++, x += ADV) {
        const glyph *g = find_glyph(*s);
        if (!g) continue;
        for (int r = 0; r < 5; r++)
            for (int b = 0; b < 3; b++)
                if (g->rows[r] & (4 >> b)) rect(c, x + b * SCALE, y + r * SCALE, x + (b + 1) * SCALE, y + (r + 1) * SCALE, rgb);
    }
}

static int text_w(const char *s) { return (int)strlen(s) * ADV - SCALE; }

/* ---- scales ---- */
static double nice_step(double range, int ticks) {
    double raw = range / ticks, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void fmt_num(double v, double step, char *buf, size_t n) {
    if (fabs(v) < step * 1e-6) v = 0;
    if (step >= 1 && fabs(v) < 1e7) snprintf(buf, n, "%.0f", v);
    else if (step >= 1e-4 && fabs(v) < 1e5) {
        int dec = (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, n, "%.*f", dec < 0 ? 0 : dec, v);
    } else {
        snprintf(buf, n, "%.2g", v);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { BG = 0xFFFFFF, FRAME = 0x3C3C3C, GRID = 0xE6E6E6, INK = 0x202020 };

ork_status ork_plot_loss(const ork_metrics_row *rows, size_t n, int w, int h, uint8_t *rgb, ork_plot_area *area) {
    if (w < 200 || h < 120 || !rgb) return ORK_FAIL(ORK_E_INVALID, "plot: a %dx%d canvas is too small", w, h);
    canvas c = {w, h, rgb};
    rect(&c, 0, 0, w, h, BG);
    ork_plot_area a = {.x0 = 76, .y0 = 34, .x1 = w - 16, .y1 = h - 42};
    /* the points: finite losses of steps that were not skipped, and their EMA */
    double *sx = malloc((n ? n : 1) * sizeof *sx), *raw = malloc((n ? n : 1) * sizeof *raw),
           *ema = malloc((n ? n : 1) * sizeof *ema), *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sx || !raw || !ema || !sorted) {
        free(sx); free(raw); free(ema); free(sorted);
        return ORK_FAIL(ORK_E_NOMEM, "plot: out of host memory");
    }
    ork_ema e;
    ork_ema_init(&e, ORK_LOSS_EMA_BETA);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].skipped || !isfinite(rows[i].loss)) continue;
        sx[m] = (double)rows[i].step;
        raw[m] = rows[i].loss;
        ema[m] = ork_ema_add(&e, rows[i].loss);
        sorted[m] = raw[m];
        m++;
    }
    a.step_lo = 0, a.step_hi = 1, a.loss_lo = 0, a.loss_hi = 1;
    if (m) {
        qsort(sorted, m, sizeof *sorted, cmp_d);
        double lo = sorted[(size_t)(0.01 * (double)(m - 1))], hi = sorted[(size_t)ceil(0.99 * (double)(m - 1))];
        double pad = hi > lo ? 0.05 * (hi - lo) : (fabs(hi) > 0 ? 0.1 * fabs(hi) : 1.0);
        a.loss_lo = lo - pad;
        a.loss_hi = hi + pad;
        if (lo >= 0 && a.loss_lo < 0) a.loss_lo = 0; /* losses are >= 0: keep the axis there */
        a.step_lo = sx[0];
        a.step_hi = sx[m - 1] > sx[0] ? sx[m - 1] : sx[0] + 1;
    }
    /* grid and tick labels */
    char lab[32];
    double ys = nice_step(a.loss_hi - a.loss_lo, 5);
    for (double v = ceil(a.loss_lo / ys) * ys; v <= a.loss_hi + 1e-12 * fabs(a.loss_hi); v += ys) {
        int y = a.y1 - 1 - (int)lround((v - a.loss_lo) / (a.loss_hi - a.loss_lo) * (a.y1 - a.y0 - 1));
        rect(&c, a.x0, y, a.x1, y + 1, GRID);
        rect(&c, a.x0 - 5, y, a.x0, y + 1, FRAME);
        fmt_num(v, ys, lab, sizeof lab);
        text(&c, a.x0 - 8 - text_w(lab), y - TEXT_H / 2, lab, INK);
    }
    double xs = nice_step(a.step_hi - a.step_lo, 6);
    if (xs < 1) xs = 1;
    for (double v = ceil(a.step_lo / xs) * xs; v <= a.step_hi + 1e-9; v += xs) {
        int x = a.x0 + (int)lround((v - a.step_lo) / (a.step_hi - a.step_lo) * (a.x1 - a.x0 - 1));
        rect(&c, x, a.y0, x + 1, a.y1, GRID);
        rect(&c, x, a.y1, x + 1, a.y1 + 5, FRAME);
        fmt_num(v, xs, lab, sizeof lab);
        text(&c, x - text_w(lab) / 2, a.y1 + 9, lab, INK);
    }
    /* frame, title, legend, axis name */
    rect(&c, a.x0 - 1, a.y0 - 1, a.x1 + 1, a.y0, FRAME);
    rect(&c, a.x0 - 1, a.y1, a.x1 + 1, a.y1 + 1, FRAME);
    rect(&c, a.x0 - 1, a.y0, a.x0, a.y1, FRAME);
    rect(&c, a.x1, a.y0, a.x1 + 1, a.y1, FRAME);
    text(&c, a.x0, 12, "LOSS", INK);
    int lx = a.x1 - 150;
    rect(&c, lx, 16, lx + 24, 18, ORK_PLOT_RAW_RGB);
    text(&c, lx + 30, 12, "RAW", INK);
    rect(&c, lx + 70, 15, lx + 94, 18, ORK_PLOT_EMA_RGB);
    text(&c, lx + 100, 12, "EMA", INK);
    text(&c, (a.x0 + a.x1) / 2 - text_w("STEP") / 2, h - 14, "STEP", INK);
    /* the curves: raw first, the smoothed one over it */
    clip k = {a.x0, a.y0, a.x1, a.y1};
    for (int pass = 0; pass < 2; pass++) {
        const double *v = pass ? ema : raw;
        int px = 0, py = 0;
        for (size_t i = 0; i < m; i++) {
            double fx = (sx[i] - a.step_lo) / (a.step_hi - a.step_lo), fy = (v[i] - a.loss_lo) / (a.loss_hi - a.loss_lo);
            fy = fmin(fmax(fy, -0.01), 1.01); /* outliers: on the frame */
            int x = a.x0 + (int)lround(fx * (a.x1 - a.x0 - 1)), y = a.y1 - 1 - (int)lround(fy * (a.y1 - a.y0 - 1));
            if (i == 0) line(&c, &k, x, y, x, y, pass ? ORK_PLOT_EMA_RGB : ORK_PLOT_RAW_RGB, pass);
            else line(&c, &k, px, py, x, y, pass ? ORK_PLOT_EMA_RGB : ORK_PLOT_RAW_RGB, pass);
            px = x, py = y;
        }
    }
    free(sx); free(raw); free(ema); free(sorted);
    if (area) *area = a;
    return ORK_OK;
}

ork_status ork_plot_loss_file(const char *metrics_path, const char *png_path) {
    char dir[4096];
    const char *slash = strrchr(png_path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - png_path) : 1, slash ? png_path : ".");
    ork_tmp_sweep(dir, slash ? slash + 1 : png_path); /* a killed run's half-written plot */
    ork_metrics_row *rows = NULL;
    size_t n = 0;
    ORK_TRY(ork_metrics_read(metrics_path, 0, &rows, &n));
    uint8_t *px = malloc((size_t)ORK_PLOT_W * ORK_PLOT_H * 3);
    ork_status s = px ? ork_plot_loss(rows, n, ORK_PLOT_W, ORK_PLOT_H, px, NULL) : ORK_FAIL(ORK_E_NOMEM, "plot: out of host memory");
    if (s == ORK_OK) s = ork_png_write_rgb(png_path, ORK_PLOT_W, ORK_PLOT_H, px);
    free(px);
    free(rows);
    return s;
}
