/* train/ema.h — the exponential moving average (EMA) of the trained LoRA
 * parameters (train.ema_config: use_ema, ema_decay), ai-toolkit's
 * toolkit/ema.py ExponentialMovingAverage as BaseSDTrainProcess and SDTrainer
 * use it (use_num_updates off: the decay is constant from the first update):
 *  - the shadow starts as a copy of the parameters once the optimizer exists;
 *  - after every optimizer step (not after a step skipped for non-finite
 *    values: no step, no update), in F32:
 *        tmp = shadow - param;  tmp *= (1 - decay);  shadow -= tmp
 *    three roundings, in that order (ema.py update()); ork_ema_update does the
 *    same three operations with the backend's axpby, bit-identical to torch on
 *    the CPU backend (tests/ema, tests/reference/ema_ref.py);
 *  - the LoRA files are written from the shadow ("always save params as ema":
 *    BaseSDTrainProcess.save calls ema.eval()) and the samples are drawn with
 *    the shadow in place of the parameters (sample() calls ema.eval() ...
 *    ema.train()); training goes on from the live parameters.
 * Where orakul departs: the shadow is F32 for BF16 parameters too (ema.py
 * keeps it in the parameter's dtype, stochastically rounded each update: the
 * same average with rounding noise), and it is part of the training state
 * (ema.<i> tensors), so a resume continues it bit for bit (ai-toolkit saves
 * none: a resumed run restarts its EMA from the saved, averaged, weights).
 *
 * With the trainable state streamed per block (state_stream.c), each
 * parameter's shadow lives in its block's record after the optimizer's state
 * (ork_train_ema_state_bytes), travels and is written back with it, and is
 * updated in the per-block step right after the optimizer's; a block whose
 * step is undone (non-finite gradients) gets its shadow back with the rest.
 *
 * Owns: the resident shadows (tag "ema", [n_params] F32 like each parameter)
 * and one F32 scratch of the largest parameter's size. [control-thread] */
#ifndef ORK_TRAIN_EMA_H
#define ORK_TRAIN_EMA_H

#include "tensor/backend.h"

#include <stdint.h>

/* shadow (n) F32 <- shadow - (1 - decay)·(shadow - param), param (n) of dtype pdt (F32 or BF16),
 * tmp (n) F32 scratch; all device memory of be, enqueued on k. */
ork_status ork_ema_update(const ork_backend *be, const ork_kctx *k, double decay, int64_t n, const void *param,
                          ork_dtype pdt, float *shadow, float *tmp);

#endif
