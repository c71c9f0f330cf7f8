/* adamw_elem.h — the per-element fp32 AdamW update shared verbatim by
 * adamw_math.c and adamw_cuda.cu (same float ops, same order). Private. */
#ifndef ORK_ADAMW_ELEM_H
#define ORK_ADAMW_ELEM_H

#include "adamw_math.h"

#ifdef __CUDA_ARCH__
#define ORK_AMUL(a, b) __fmul_rn((a), (b))
#define ORK_AADD(a, b) __fadd_rn((a), (b))
#define ORK_ASUB(a, b) __fsub_rn((a), (b))
#define ORK_ADIV(a, b) __fdiv_rn((a), (b))
#define ORK_ASQRT(a) __fsqrt_rn(a)
#else
#define ORK_AMUL(a, b) ((a) * (b))
#define ORK_AADD(a, b) ((a) + (b))
#define ORK_ASUB(a, b) ((a) - (b))
#define ORK_ADIV(a, b) ((a) / (b))
#define ORK_ASQRT(a) sqrtf(a)
#endif

/* bc2s = sqrt(1 - b2^t) as float; sc->torch_step = lr / (1 - b1^t); torch_decay = 1 - lr*wd. */
ORK_HD void ork_adamw_elem(void *param, ork_dtype pdt, float g, float *m, float *v, int64_t i,
                           const ork_adamw_scalars *sc, const ork_adamw_hparams *h, int64_t step) {
    float p = ork_load_f(param, pdt, i);
    p = ORK_AMUL(p, sc->torch_decay);                   /* param.mul_(1 - lr*wd) */
    float w = 1.0f - h->beta1;                          /* exp_avg.lerp_(g, 1-b1), w < 0.5 */
    *m = ORK_AADD(*m, ORK_AMUL(w, ORK_ASUB(g, *m)));
    *v = ORK_AADD(ORK_AMUL(*v, h->beta2), ORK_AMUL(ORK_AMUL(1.0f - h->beta2, g), g)); /* addcmul */
    float den = ORK_AADD(ORK_ADIV(ORK_ASQRT(*v), sc->c2), h->eps);
    p = ORK_AADD(p, ORK_AMUL(-sc->torch_step, ORK_ADIV(*m, den))); /* addcdiv_(m, den, -step) */
    if (pdt == ORK_F32) ((float *)param)[i] = p;
    else ((uint16_t *)param)[i] = h->bf16_stochastic
        ? ork_f32_to_bf16_sr(p, ork_sr_hash(h->seed, step, i)) : ork_f32_to_bf16_rne(p);
}

#endif
