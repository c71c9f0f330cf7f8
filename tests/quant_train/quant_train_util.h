/* quant_train_util.h — what the quantized-training tests (tests/quant_train)
 * share: the tiny training config of tests/train (tests/train/configs/
 * tiny.yaml through tt_write_config) with model.quantize / model.qtype /
 * model.quantize_kwargs lines and an optional checkpoint path and device put
 * in, and a checkpoint writer that turns the linear weights of
 * tests/fixtures/flux1_small_bfl.safetensors into F8_E4M3 + weight_scale (or
 * plants a NaN in one weight). Header-only; owns nothing beyond its temp files. */
#ifndef ORK_QUANT_TRAIN_UTIL_H
#define ORK_QUANT_TRAIN_UTIL_H

#include "../train/train_test_util.h"

#include "io/safetensors.h"
#include "numerics/fp8.h"

#include <math.h>

#define QT_BFL ORK_SOURCE_DIR "/tests/fixtures/flux1_small_bfl.safetensors"

typedef struct qt_opts {
    const char *out, *data;
    int steps;
    const char *qtype;      /* NULL: model.quantize false */
    const char *kwargs;     /* quantize_kwargs flow map, e.g. "{block_size: 128}", or NULL */
    const char *ckpt;       /* name_or_path (NULL: preset:custom) */
    const char *device;     /* NULL: cpu */
    int stream;             /* layer_offloading: half the transformer blocks stream */
    const char *compression; /* model.stream_compression, or NULL */
    int hidden;             /* model_kwargs.hidden_size instead of the template's 96 (0: keep) */
} qt_opts;

/* Replace the first occurrence of `what` in *text by `with` (realloc'd). */
static inline int qt_subst(char **text, const char *what, const char *with) {
    char *at = strstr(*text, what);
    if (!at) return -1;
    size_t pre = (size_t)(at - *text), wl = strlen(what), nl = strlen(with), tl = strlen(*text);
    char *n = malloc(tl - wl + nl + 1);
    if (!n) return -1;
    memcpy(n, *text, pre);
    memcpy(n + pre, with, nl);
    memcpy(n + pre + nl, at + wl, tl - pre - wl + 1);
    free(*text);
    *text = n;
    return 0;
}

/* The tiny config with the quantizer keys, written to path. 0 on success. */
static inline int qt_write_config(const char *path, const qt_opts *o) {
    tt_cfg c = tt_cfg_default(o->out, o->data);
    c.steps = o->steps;
    c.save_every = 1000;
    c.keep = 1;
    if (o->ckpt) c.preset = o->ckpt;
    if (tt_write_config(path, &c) != 0) return -1;
    char *t = tt_read_all(path, NULL);
    if (!t) return -1;
    char lines[512] = "      model:\n";
    if (o->qtype)
        tt_fmt(lines, sizeof lines, "      model:\n        quantize: true\n        qtype: %s\n%s%s%s", o->qtype,
               o->kwargs ? "        quantize_kwargs: " : "", o->kwargs ? o->kwargs : "", o->kwargs ? "\n" : "");
    if (o->stream) {
        size_t l = strlen(lines);
        tt_fmt(lines + l, sizeof lines - l, "        layer_offloading: true\n"
                                            "        layer_offloading_transformer_percent: 0.5\n");
        if (o->compression) {
            l = strlen(lines);
            tt_fmt(lines + l, sizeof lines - l, "        stream_compression: %s\n", o->compression);
        }
    }
    int r = qt_subst(&t, "      model:\n", lines);
    if (r == 0 && o->hidden) {
        char h[64];
        tt_fmt(h, sizeof h, "hidden_size: %d\n", o->hidden);
        r = qt_subst(&t, "hidden_size: 96\n", h);
    }
    if (r == 0 && o->device) {
        char dev[64];
        tt_fmt(dev, sizeof dev, "device: %s\n", o->device);
        r = qt_subst(&t, "device: cpu\n", dev);
    }
    if (r == 0) r = tt_write_all(path, t);
    free(t);
    return r;
}

/* Is fixture tensor t a linear weight (2-D "*.weight" of a float dtype)? */
static inline int qt_is_linear(const ork_st_tensor *t) {
    size_t n = strlen(t->name);
    return t->ndim == 2 && n > 7 && !strcmp(t->name + n - 7, ".weight") &&
           (t->dtype == ORK_F32 || t->dtype == ORK_BF16 || t->dtype == ORK_F16);
}

/* The BFL fixture re-written to path: with fp8 != 0 every linear weight as
 * F8_E4M3 with one F32 "<base>.weight_scale" (absmax / 448, per tensor);
 * nan_in (a tensor name or NULL) gets a NaN at element nan_at (F32 data, or
 * the E4M3 NaN code 0x7F when fp8). Returns the number of fp8 tensors or -1. */
static inline int qt_write_ckpt(const char *path, int fp8, const char *nan_in, int64_t nan_at) {
    ork_st_file *in = NULL;
    ork_st_writer *w = NULL;
    if (ork_st_open(QT_BFL, &in) != ORK_OK || ork_st_writer_new(&w) != ORK_OK) {
        ork_st_close(in);
        return -1;
    }
    size_t n = ork_st_count(in);
    void **keep = calloc(2 * n + 1, sizeof *keep); /* the writer borrows the data until commit */
    int ok = keep != NULL, n8 = 0;
    size_t nk = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const ork_st_tensor *t = ork_st_at(in, i);
        int64_t ne = t->shape[0] * (t->ndim > 1 ? t->shape[1] : 1);
        for (int k = 2; k < t->ndim; k++) ne *= t->shape[k];
        int nan_here = nan_in && !strcmp(t->name, nan_in);
        if (fp8 && qt_is_linear(t)) {
            float *f = malloc((size_t)ne * sizeof *f), *sc = malloc(sizeof *sc);
            uint8_t *q = malloc((size_t)ne);
            keep[nk++] = q;
            keep[nk++] = sc;
            if (!f || !q || !sc || ork_st_read_f32(t, f) != ORK_OK) { free(f); ok = 0; break; }
            float amax = 0;
            for (int64_t k = 0; k < ne; k++) amax = fabsf(f[k]) > amax ? fabsf(f[k]) : amax;
            *sc = amax > 0 ? amax / 448.0f : 1.0f;
            for (int64_t k = 0; k < ne; k++) q[k] = ork_f32_to_fp8(f[k] / *sc, ORK_F8_E4M3, ORK_FP8_SATFINITE);
            free(f);
            if (nan_here) q[nan_at] = 0x7F;
            char sn[512];
            size_t bl = strlen(t->name) - 7;
            tt_fmt(sn, sizeof sn, "%.*s.weight_scale", (int)bl, t->name);
            int64_t one = 1;
            ok = ork_st_writer_add(w, t->name, ORK_F8_E4M3, t->ndim, t->shape, q, (uint64_t)ne) == ORK_OK &&
                 ork_st_writer_add(w, sn, ORK_F32, 0, &one, sc, 4) == ORK_OK;
            n8++;
        } else if (nan_here) {
            float *f = malloc((size_t)ne * sizeof *f);
            keep[nk++] = f;
            if (!f || ork_st_read_f32(t, f) != ORK_OK) { ok = 0; break; }
            f[nan_at] = NAN;
            ok = ork_st_writer_add(w, t->name, ORK_F32, t->ndim, t->shape, f, (uint64_t)ne * 4) == ORK_OK;
        } else {
            ok = ork_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes) == ORK_OK;
        }
    }
    ok = ok && ork_st_writer_commit(w, path) == ORK_OK;
    ork_st_writer_free(w);
    ork_st_close(in);
    for (size_t k = 0; k < nk; k++) free(keep[k]);
    free(keep);
    return ok ? n8 : -1;
}

/* The lines of text containing "error", counted; *line gets the first. */
static inline int qt_error_lines(const char *text, char *line, size_t n) { return tt_lines_with(text, "error", line, n); }

#endif
