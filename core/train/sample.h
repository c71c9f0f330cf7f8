/* train/sample.h — the flow-matching Euler sampler (BFL's src/flux/sampling.py
 * get_schedule + denoise; diffusers' compute_empirical_mu):
 *
 *   t_i = shift(1 - i/steps), i = 0..steps;   shift(t) = e^mu / (e^mu + (1/t - 1))
 *   x_0 = noise;  v = model(x, t_i, guidance);  x <- x + (t_{i+1} - t_i)·v
 *
 * mu by the model's rule (orakul/model.h ork_time_shift, plugin/model_decl.h),
 * from the image sequence length (tokens):
 *   RESOLUTION        mu = base + (max - base)·(seq - base_seq)/(max_seq - base_seq)
 *                     (0.5 / 1.15 over 256 .. 4096 tokens unless the model says)
 *   RESOLUTION_STEPS  mu = the empirical fit of (seq, steps) (FLUX.2)
 *   FIXED             mu = ln(shift)
 *   NONE              no shift (timestep-distilled models)
 * Guidance-distilled models (FLUX.1-dev, FLUX.2-dev) take the guidance value
 * as an input; for the others a cfg scale > 1 runs classifier-free guidance,
 * v = v(neg) + cfg·(v(pos) − v(neg)), as two forwards of batch 1.
 *
 * The denoiser runs on the graph it is given (during training: a session
 * graph on the job's allocator and stream, samples.h) with grad off, batch 1:
 * each block in its own graph region (only two block-boundary carries are kept, in
 * tensors allocated for the call under the tag "samples" and freed after), so
 * the allocator's budget applies and the memory stays below a training step's.
 * Block hooks (weight streaming, streamed LoRA state) bracket every block as
 * in training. Frozen weights carry their LoRA (tensor.h): the adapters act at
 * their trained scale; LoRA dropout is off while sampling. The latent lives
 * on the host in F32 between steps. [control-thread] */
#ifndef ORK_TRAIN_SAMPLE_H
#define ORK_TRAIN_SAMPLE_H

#include "data/image.h"
#include "train/runner.h"

#include <orakul/model.h>

/* The time shift the sampler applies. */
typedef struct ork_shift_rule {
    ork_time_shift kind;
    double base, max;         /* RESOLUTION: mu at base_seq / max_seq tokens */
    int64_t base_seq, max_seq;
    double fixed;             /* FIXED: the shift (mu = ln fixed) */
} ork_shift_rule;

/* The model's rule (its declared schedule, or the core's default: RESOLUTION
 * with the info's shift_base / shift_max). */
ork_shift_rule ork_shift_for(const ork_model_info *info);
/* The rule of a kind with the defaults (0.5 / 1.15 over 256 .. 4096 tokens, fixed 3). */
ork_shift_rule ork_shift_default(ork_time_shift kind);
/* Sampling steps the model wants when the config does not say (a distilled
 * model: 4), else 0. */
int ork_distilled_steps(const ork_model_info *info);
/* mu of the shift (0 for NONE). */
double ork_shift_mu(const ork_shift_rule *r, int64_t seq_len, int steps);
/* ts[0 .. steps]: 1 = ts[0] > ... > ts[steps] = 0, computed in double. */
void ork_sample_schedule(const ork_shift_rule *r, int steps, int64_t seq_len, double *ts);

/* What the sampler runs: a model on a graph (the training job's). */
typedef struct ork_denoiser {
    ork_graph *g;
    ork_alloc *alloc;
    const ork_model_vtable *vt;
    void *model;
    const ork_model_info *info;
    const ork_block_hooks *hooks; /* NULL: none */
    int device_index;             /* CUDA device of g (ork_samples_run's own graph) */
    const struct ork_model_codec *codec; /* the image codec (plugin/model_codec.h); NULL: vt->decode */
} ork_denoiser;

typedef struct ork_sample_params {
    int h_tok, w_tok;        /* the token grid: N = h·w */
    int steps;               /* >= 1 */
    ork_shift_rule shift;
    float guidance;          /* the model's guidance input (used when info->has_guidance) */
    float cfg;               /* > 1: classifier-free guidance with neg_* */
    int T;                   /* text tokens */
    const float *txt;        /* (T, context_dim), or NULL: zeros (the empty-prompt stand-in) */
    const float *vec;        /* (vec_dim), or NULL: zeros */
    const float *neg_txt;    /* cfg only; NULL: zeros */
    int txt_len, neg_len;    /* txt's / neg_txt's valid rows (an UNMASKED slot's prompt: txt (1, len, ctx)); 0: T */
    const float *neg_vec;
    const float *noise;      /* (N, C) x at t = 1, or NULL: drawn from seed */
    uint64_t seed;
} ork_sample_params;

/* x: (N, C) F32 host, the final latent tokens. */
ork_status ork_sample_latent(const ork_denoiser *d, const ork_sample_params *sp, float *x);
/* Latent tokens (N, C) -> 8-bit RGB through the model's decoder (grad off);
 * values are clamped to [0, 1]. *out is a new image (ork_image_free). */
ork_status ork_sample_decode(const ork_denoiser *d, const float *x, int h_tok, int w_tok, ork_image *out);

#endif
