/* train/schedule.h — the flow-matching schedule (FORMATS.md §5) and the
 * learning-rate schedulers, as ai-toolkit defines them:
 *  - timesteps: sigmoid (logit-normal), linear, weighted, shift (fixed: the
 *    model's shift, 3.0), flux_shift (ai-toolkit's name for the resolution-
 *    dependent mu, with the model's base/max shift and sequence lengths,
 *    plugin/model_decl.h); index chosen by content_or_style
 *    (balanced uniform, content u³, style 1−u³);
 *  - lr: constant, cosine (warmup, eta_min, cosine_decay_steps), linear
 *    (torch LinearLR: start_factor 1/3 -> end_factor 1 over total_iters),
 *    constant_with_warmup (num_warmup_steps, default 1000).
 * Pure functions of their inputs and the rng: no global state. */
#ifndef ORK_TRAIN_SCHEDULE_H
#define ORK_TRAIN_SCHEDULE_H

#include "train/rng.h"

#include <orakul/abi.h>

typedef enum {
    ORK_TS_SIGMOID, ORK_TS_LINEAR, ORK_TS_WEIGHTED, ORK_TS_SHIFT, ORK_TS_RESOLUTION_SHIFT,
} ork_ts_type;

typedef enum { ORK_CS_BALANCED, ORK_CS_CONTENT, ORK_CS_STYLE } ork_cs_type;

ork_status ork_ts_type_parse(const char *s, ork_ts_type *out);
ork_status ork_cs_type_parse(const char *s, ork_cs_type *out);

typedef struct ork_ts_params {
    ork_ts_type type;
    ork_cs_type cs;
    int64_t image_seq_len; /* tokens per image, for the resolution shift */
    double shift;          /* fixed shift for ORK_TS_SHIFT (3.0) */
    double base_shift, max_shift; /* 0.5 / 1.15 */
    int64_t base_seq, max_seq;    /* 256 / 4096 */
} ork_ts_params;

/* One training timestep t in (0, 1] and its loss weight (1 except 'weighted'). */
void ork_ts_sample(const ork_ts_params *p, ork_rng *r, float *t, float *weight);

typedef enum { ORK_LR_CONSTANT, ORK_LR_COSINE, ORK_LR_LINEAR, ORK_LR_CONSTANT_WARMUP } ork_lr_type;

typedef struct ork_lr_params {
    ork_lr_type type;
    double lr;
    int64_t total_steps;
    int64_t warmup_steps;     /* cosine, constant_with_warmup */
    double eta_min;           /* cosine */
    int64_t cosine_decay_steps; /* cosine; 0: total_steps */
    double start_factor, end_factor; /* linear */
} ork_lr_params;

ork_status ork_lr_type_parse(const char *s, ork_lr_type *out);
/* Learning rate at optimizer step `step` (0-based, like torch's scheduler.last_epoch). */
double ork_lr_at(const ork_lr_params *p, int64_t step);

#endif
