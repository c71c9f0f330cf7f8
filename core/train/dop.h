/* train/dop.h — differential output preservation (train.diff_output_preservation,
 * _multiplier, _class), ai-toolkit's SDTrainer method:
 *  - each caption has a class prompt: the caption with every occurrence of
 *    trigger_word replaced by the class (Python's str.replace, on the final
 *    caption, so the token order matches: dataloader_mixins caption_dop); a
 *    dropped caption's is the dropout caption's (get_dop_dropout_caption).
 *    They are encoded with the captions and held for the run (text_glue.c);
 *  - each micro-batch, on the same noisy latents, timesteps and guidance:
 *    1. the prior prediction: the model with the LoRA off (network.is_active
 *       False; here the adapters detached from their weights for one
 *       forward, no tape) on the class prompts, kept detached;
 *    2. the training prediction on the captions and its loss, as without DOP;
 *    3. the preservation prediction with the LoRA on, on the class prompts;
 *       preservation_loss = mse(pred, prior) (the mean over every element) ×
 *       multiplier, added to the loss (both backwarded: gradients add up).
 *    The preservation term is not timestep-weighted (SDTrainer adds it after
 *    calculate_loss); orakul scales it by 1/gradient_accumulation like the
 *    main term.
 * Memory: the prior forward runs block by block in graph regions
 * (ork_runner_forward), so beside a step it adds the carries, the prior and
 * the class prompts' uploads, no activations: the plan's DOP term
 * (stream/plan.h), printed in its VRAM line.
 * Refused with one line: without trigger_word (SDTrainer raises), without the
 * model's text encoders (nothing to encode the class prompts with), and with
 * the trainable state streamed per block (a second backward would step
 * each block twice).
 * Owns j->dop_w, j->dop_lo, j->dop_prior. [control-thread] */
#ifndef ORK_TRAIN_DOP_H
#define ORK_TRAIN_DOP_H

#include <orakul/abi.h>

/* *out (malloc'd) = caption with every non-overlapping occurrence of trigger,
 * left to right, replaced by cls (Python's str.replace; trigger "" inserts cls
 * before every character and at the end, as Python does); trigger NULL: a copy. */
ork_status ork_dop_caption(const char *caption, const char *trigger, const char *cls, char **out);

#endif
