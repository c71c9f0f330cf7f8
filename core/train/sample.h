/* train/sample.h — the flow-matching Euler sampler for FLUX (BFL's
 * src/flux/sampling.py get_schedule + denoise; FLUX.2's compute_empirical_mu):
 *
 *   t_i = shift(1 - i/steps), i = 0..steps;   shift(t) = e^mu / (e^mu + (1/t - 1))
 *   x_0 = noise;  v = model(x, t_i, guidance);  x <- x + (t_{i+1} - t_i)·v
 *
 * mu comes from the image sequence length (tokens):
 *   ORK_SHIFT_FLUX1  mu = base + (max - base)·(seq - 256)/(4096 - 256) (0.5 / 1.15, the model info's)
 *   ORK_SHIFT_FLUX2  mu = FLUX.2's empirical fit of (seq, steps)
 *   ORK_SHIFT_NONE   no shift (FLUX.1-schnell)
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

typedef enum { ORK_SHIFT_NONE, ORK_SHIFT_FLUX1, ORK_SHIFT_FLUX2 } ork_shift_kind;

/* The shift for a model: none for flux1-schnell; FLUX.2's for the flux2-*
 * variants and 128-channel tokens; FLUX.1's otherwise. */
ork_shift_kind ork_shift_for(const ork_model_info *info);
/* Sampling steps a distilled model wants when the config does not say
 * (flux1-schnell, flux2-klein-*: 4), else 0. */
int ork_distilled_steps(const ork_model_info *info);
/* mu of the shift (0 for ORK_SHIFT_NONE). */
double ork_shift_mu(ork_shift_kind kind, int64_t seq_len, int steps, double base_shift, double max_shift);
/* ts[0 .. steps]: 1 = ts[0] > ... > ts[steps] = 0, computed in double. */
void ork_sample_schedule(ork_shift_kind kind, int steps, int64_t seq_len, double base_shift, double max_shift,
                         double *ts);

/* What the sampler runs: a model on a graph (the training job's). */
typedef struct ork_denoiser {
    ork_graph *g;
    ork_alloc *alloc;
    const ork_model_vtable *vt;
    void *model;
    const ork_model_info *info;
    const ork_block_hooks *hooks; /* NULL: none */
    int device_index;             /* CUDA device of g (ork_samples_run's own graph) */
} ork_denoiser;

typedef struct ork_sample_params {
    int h_tok, w_tok;        /* the token grid: N = h·w */
    int steps;               /* >= 1 */
    ork_shift_kind shift;
    float guidance;          /* the model's guidance input (used when info->has_guidance) */
    float cfg;               /* > 1: classifier-free guidance with neg_* */
    int T;                   /* text tokens */
    const float *txt;        /* (T, context_dim), or NULL: zeros (the empty-prompt stand-in) */
    const float *vec;        /* (vec_dim), or NULL: zeros */
    const float *neg_txt;    /* cfg only; NULL: zeros */
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
