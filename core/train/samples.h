/* train/samples.h — the sample images a training run writes (the config's
 * `sample:` section, FORMATS.md §1; sampler in sample.h):
 *   <training_folder>/<name>/samples/<name>_<step:09d>_<i>.png   one per prompt
 *   <training_folder>/<name>/samples/<name>_<step:09d>_grid.png  all of that step
 *
 * When: before the first step (unless train.skip_first_sample; a resumed run
 * only with train.force_first_sample), every sample.sample_every steps from
 * sample.sample_start_step on, and after the last step. Off with
 * train.disable_sampling, or when the section has no prompts.
 * What: each entry of sample.prompts / sample.samples at its width x height
 * (rounded to whole tokens), seed (seed + index with walk_seed),
 * guidance_scale, sample_steps (not given: the model's sampler defaults,
 * ork_model_schedule: 4 for a distilled model, else 20). A prompt is text, encoded at the run's start with the captions
 * (train/text_glue.c: ork_samples_text_* below); with a trigger_word its
 * "[trigger]" and "[name]" are replaced by it, never prepended (ai-toolkit's
 * inject_trigger_into_prompt(prompt, trigger_word, add_if_not_present=False);
 * without one the prompt is left as written). A prompt that names a
 * .safetensors file is its text embedding (the <image>.te.safetensors format
 * of the training data: txt (T, context_dim), optional vec), still accepted.
 * Text that is not encoded (the model's text encoders were not found) samples
 * with empty (zero) conditioning, like training images without embeddings.
 * neg: the same (no trigger replacement), used only for classifier-free
 * guidance (models without a guidance input and guidance_scale > 1; not
 * a model that declares ORK_SAMPLE_NO_CFG, timestep-distilled).
 * Each ork_samples_run works in a graph of its own on the job's allocator
 * (the budget applies) and the training graph's stream, with its weight
 * lookup, destroyed afterwards: a large sample's activations never stay
 * reserved in the training graph's arena.
 * A sampling failure (over the memory budget, an unwritable file) is one
 * warning and turns sampling off for the rest of the run; training goes on.
 * Owns: the prompts' embeddings and its paths. [control-thread] */
#ifndef ORK_TRAIN_SAMPLES_H
#define ORK_TRAIN_SAMPLES_H

#include "config/config.h"
#include "train/sample.h"

typedef struct ork_samples ork_samples;

/* *out is NULL when sampling is off. T: the text length the model takes.
 * Checks the section against the model (embedding files: readable, shapes)
 * and logs one line describing the plan. */
ork_status ork_samples_create(const ork_config *cfg, const ork_model_info *info, int T, const char *out_dir,
                              const char *name, ork_samples **out);
void ork_samples_destroy(ork_samples *s);

/* The prompts (and, with classifier-free guidance, negative prompts) that are
 * text, in entry order, positive before negative: how many, the i-th's text
 * (after the trigger replacement), and its embedding set (copied): txt
 * (T, context_dim), vec (vec_dim) or NULL. s NULL: 0. */
int ork_samples_text_count(const ork_samples *s);
const char *ork_samples_text_at(const ork_samples *s, int i);
ork_status ork_samples_text_set(ork_samples *s, int i, const float *txt, const float *vec);
/* The same for an UNMASKED slot's prompt: txt's first len rows (1 .. T) are
 * its own (the rest zero), sampled as txt (1, len, context_dim). */
ork_status ork_samples_text_set_len(ork_samples *s, int i, const float *txt, const float *vec, int len);

/* Is a sample due after `step` (step == start: before the first step of a run
 * that starts at start)? */
int ork_samples_due(const ork_samples *s, int64_t step, int64_t start, int64_t total);

/* Sample every prompt, write the PNGs and the grid. Failures are a warning
 * (sampling then stays off) and return ORK_OK; *wrote (may be NULL) is the
 * number of images written. */
ork_status ork_samples_run(ork_samples *s, const ork_denoiser *d, int64_t step, int *wrote);

/* The folder the images go to. */
const char *ork_samples_dir(const ork_samples *s);

/* Paste images side by side into one grid (columns: n up to 4, else
 * ceil(sqrt(n))), cells of the largest size, 4 px gaps on a dark background. */
ork_status ork_samples_grid(const ork_image *imgs, int n, ork_image *out);

#endif
