/* train/schedule.h — the flow-matching schedule (FORMATS.md §5) and the
 * learning-rate schedulers, as ai-toolkit defines them (checked against
 * tests/reference/timestep_ref.py in tests/train/test_timesteps.c):
 *  - timesteps (train.timestep_type): ai-toolkit's set_train_timesteps
 *    (toolkit/samplers/custom_flowmatch_sampler.py) builds a table of n
 *    timesteps (n = 1000, descending, index 0 = most noise) and the train
 *    loop (jobs/process/BaseSDTrainProcess.py) picks an index per item:
 *      linear, weighted   linspace(1000, 1)/1000; weighted also weighs the
 *                         loss by ai-toolkit's measured table (the index's entry)
 *      sigmoid            1000 fresh sigmoid(randn) per draw, sorted
 *      lognorm_blend      750 fresh LogNormal(0, 0.333) draws mapped to
 *                         (1 - x/max)·1000 and 250 linear, sorted, truncated
 *      shift, flux_shift  the same for both (ai-toolkit picks by the model's
 *                         scheduler): the resolution shift mu (image tokens,
 *                         base/max shift over base/max seq) when the model
 *                         shifts by resolution (every FLUX), else the fixed
 *                         shift from linspace(sigma_max, sigma_min) of the
 *                         once-shifted init table
 *      one_step           index 0 (t = 1); two/four/eight_step: indices
 *                         {0, 499} / {0, 250, 500, 750} / {0, 125, .., 875}
 *      next_sample        8 shifted timesteps, index in [0, 5]; ai-toolkit's
 *                         target (a model step ahead) is not implemented: a
 *                         warning, and the plain flow-matching target
 *    and the index by content_or_style: balanced uniform over [0, 998]
 *    (torch.randint(0, 999)), content floor(u³·1000), style floor((1−u³)·1000);
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
    ORK_TS_LOGNORM_BLEND, ORK_TS_ONE_STEP, ORK_TS_TWO_STEP, ORK_TS_FOUR_STEP, ORK_TS_EIGHT_STEP,
    ORK_TS_NEXT_SAMPLE,
} ork_ts_type;

typedef enum { ORK_CS_BALANCED, ORK_CS_CONTENT, ORK_CS_STYLE } ork_cs_type;

/* ai-toolkit's name -> type; next_sample warns once per call (its target is
 * not implemented). ORK_E_CONFIG for a name it does not know. */
ork_status ork_ts_type_parse(const char *s, ork_ts_type *out);
ork_status ork_cs_type_parse(const char *s, ork_cs_type *out);

typedef struct ork_ts_params {
    ork_ts_type type;
    ork_cs_type cs;
    int64_t image_seq_len; /* tokens per image, for the resolution shift */
    double shift;          /* the fixed shift (3.0) */
    double base_shift, max_shift; /* 0.5 / 1.15 */
    int64_t base_seq, max_seq;    /* 256 / 4096 */
    int fixed_shift;       /* 1: the model's scheduler shifts by `shift` (diffusers'
                            * use_dynamic_shifting false); 0: by resolution (FLUX) */
} ork_ts_params;

/* Entries in the timestep table (1000; next_sample: 8). */
int ork_ts_table_size(const ork_ts_params *p);
/* mu of the resolution shift for p->image_seq_len (ai-toolkit calculate_shift). */
double ork_ts_mu(const ork_ts_params *p);
/* t of table entry idx for the types whose table is fixed (all but sigmoid and
 * lognorm_blend, which draw theirs per item: -1 there and out of range). */
double ork_ts_sigma_at(const ork_ts_params *p, int idx);
/* ai-toolkit's 'weighted' loss weight of table entry idx (0..999), else 1. */
double ork_ts_weight_at(int idx);
/* The table index of one draw (content_or_style, or the *_step choices). */
int ork_ts_index(const ork_ts_params *p, ork_rng *r);

/* One training timestep t in [0, 1] and its loss weight (1 except 'weighted'). */
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
