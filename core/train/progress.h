/* train/progress.h — the training progress a person watches:
 *   step 120/300  loss 0.123456  ema 0.1300  lr 0.002  grad_norm 0.52  0.31 s/it  VRAM 3.21 GiB (peak 4.00)  ETA 55s
 * loss is the mean over the steps since the previous line (skipped steps left
 * out), ema the smoothed loss (metrics.h, ORK_LOSS_EMA_BETA), s/it a moving
 * average of the training step time alone, and the ETA adds the average time
 * spent between steps (saving, sampling) to the remaining steps.
 * On a terminal it is one line redrawn with \r (at most 5 times a second, and
 * every log line clears it first so the two never share a row); otherwise a
 * plain line every log_every steps, on the first step and on the last, so CI
 * logs stay readable. Tests read the lines as "step N/M  loss X".
 * Owns: its state; while drawing on a terminal it holds the log sink
 * (util/log.h) and gives it back in ork_progress_destroy. [control-thread] */
#ifndef ORK_TRAIN_PROGRESS_H
#define ORK_TRAIN_PROGRESS_H

#include <orakul/abi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ork_progress_opts {
    FILE *out;             /* NULL: stdout */
    int tty;               /* -1: isatty(out); 0: plain lines; 1: one redrawn line */
    int64_t start, total;  /* the first step run is start + 1 */
    int64_t log_every;     /* plain lines: every log_every steps (<= 0: 10) */
    const char *mem_label; /* "VRAM" on a GPU, "mem" on the CPU */
} ork_progress_opts;

typedef struct ork_progress_step {
    int64_t step;
    double loss;           /* this step's loss */
    int skipped;           /* the optimizer step was skipped */
    double lr, grad_norm;
    size_t mem_in_use, mem_peak; /* the allocator's bytes (tensor/alloc.h) */
} ork_progress_step;

typedef struct ork_progress ork_progress;

ork_status ork_progress_create(const ork_progress_opts *o, ork_progress **out);
/* Ends a redrawn line with a newline and gives the log sink back. */
void ork_progress_destroy(ork_progress *p);
/* Marks the start of a training step (its time is the step's s/it). */
void ork_progress_begin(ork_progress *p);
/* After the optimizer step: updates the averages, prints when due. */
void ork_progress_end(ork_progress *p, const ork_progress_step *s);
/* Moving average of the step time in seconds (NAN before the first step). */
double ork_progress_s_per_it(const ork_progress *p);
/* The last step's own wall time in seconds (metrics.jsonl's s_per_it). */
double ork_progress_last_s(const ork_progress *p);
/* The smoothed loss (NAN before the first finite loss). */
double ork_progress_loss_ema(const ork_progress *p);
/* "1h02m", "3m41s", "12s" into buf. */
const char *ork_progress_eta_str(double seconds, char *buf, size_t n);

#endif
