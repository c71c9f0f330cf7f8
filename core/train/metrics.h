/* train/metrics.h — <training_folder>/<name>/metrics.jsonl: one JSON object
 * per optimizer step, appended (and flushed) as training runs:
 *   {"step": 12, "loss": 0.1234, "lr": 0.002, "grad_norm": 0.52, "s_per_it": 0.31, "vram_gib": 0.02}
 * A step skipped for non-finite values adds "skipped": true (its loss is
 * null when it was not finite itself).
 * A run that resumes at step S keeps the lines of steps <= S and drops the
 * rest (the file is rewritten atomically), so the file always describes the
 * training that produced the saved state; a fresh run (S = 0) starts it empty.
 * Also the smoothed loss both the progress line and the plot show.
 * Owns: its FILE. [control-thread] */
#ifndef ORK_TRAIN_METRICS_H
#define ORK_TRAIN_METRICS_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ork_metrics_row {
    int64_t step;
    double loss;       /* NAN: not finite (null in the file) */
    double lr;
    double grad_norm;
    double s_per_it;   /* NAN when unknown */
    double vram_gib;   /* the allocator's bytes in use, GiB */
    int skipped;       /* the optimizer step was skipped (non-finite loss or gradient) */
    int has_preservation;     /* DOP on (train/dop.h): "loss_preservation" written */
    double loss_preservation; /* DOP's term, included in loss (ai-toolkit's loss/preservation) */
} ork_metrics_row;

typedef struct ork_metrics ork_metrics;

/* Open path for appending after truncating it to the steps <= start (see the
 * top comment). Malformed lines are dropped with one warning each
 * ("path:line: ..."). ORK_E_IO when it cannot be read or written. */
ork_status ork_metrics_open(const char *path, int64_t start, ork_metrics **out);
/* One line, flushed. */
ork_status ork_metrics_append(ork_metrics *m, const ork_metrics_row *r);
void ork_metrics_close(ork_metrics *m);
const char *ork_metrics_path(const ork_metrics *m);

/* Every row of a metrics file, in file order (malloc'd, *rows NULL when none).
 * strict: the first malformed line fails with "path:line: why" (ORK_E_FORMAT);
 * otherwise each malformed line is reported the same way as a warning and
 * skipped. ORK_E_IO when the file cannot be read. */
ork_status ork_metrics_read(const char *path, int strict, ork_metrics_row **rows, size_t *n);

/* Exponential moving average with bias correction (the first value is not
 * pulled towards 0): v_n = beta·v_{n-1} + (1 − beta)·x, shown v_n / (1 − beta^n).
 * Non-finite x are ignored. value is NAN before the first x. */
typedef struct ork_ema {
    double beta, acc, pw;
    int64_t n;
} ork_ema;
void ork_ema_init(ork_ema *e, double beta);
double ork_ema_add(ork_ema *e, double x);
double ork_ema_value(const ork_ema *e);

/* The smoothing both the progress line and loss.png use. */
#define ORK_LOSS_EMA_BETA 0.95

#endif
