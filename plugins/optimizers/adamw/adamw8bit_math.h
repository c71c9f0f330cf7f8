/* adamw8bit_math.h — the per-element pieces of the AdamW-8bit step, shared
 * verbatim by adamw8bit_cpu.c and adamw8bit_cuda.cu so both evaluate the same
 * float operations in the same order (bit-identical results). Private to the
 * adamw8bit plugin. Operation order follows bitsandbytes' kernels.cu
 * (kOptimizerStatic8bit2StateBlockwise, kOptimizer32bit2State, quantize_2D). */
#ifndef ORK_ADAMW8BIT_MATH_H
#define ORK_ADAMW8BIT_MATH_H

#include "adamw8bit.h"

/* Rounded float ops that the compiler may not contract into FMAs. On the host
 * the file must be built with -ffp-contract=off (x86-64 SSE has no excess precision). */
#ifdef __CUDA_ARCH__
#define ORK_FMUL(a, b) __fmul_rn((a), (b))
#define ORK_FADD(a, b) __fadd_rn((a), (b))
#define ORK_FDIV(a, b) __fdiv_rn((a), (b))
#define ORK_FSQRT(a) __fsqrt_rn(a)
#else
#define ORK_FMUL(a, b) ((a) * (b))
#define ORK_FADD(a, b) ((a) + (b))
#define ORK_FDIV(a, b) ((a) / (b))
#define ORK_FSQRT(a) sqrtf(a)
#endif

ORK_HD int ork_q8_finite(float g) { return (ork_f32_bits(g) & 0x7F800000u) != 0x7F800000u; }

/* Moments with bnb's 8-bit kernel order: v = v*b2 + ((1-b2)*g)*g; m = m*b1 + (1-b1)*g. */
ORK_HD void ork_q8_moments8(float g, float b1, float b2, float *m, float *v) {
    *v = ORK_FADD(ORK_FMUL(*v, b2), ORK_FMUL(ORK_FMUL(1.0f - b2, g), g));
    *m = ORK_FADD(ORK_FMUL(*m, b1), ORK_FMUL(1.0f - b1, g));
}

/* Moments with bnb's 32-bit kernel order: v = v*b2 + (1-b2)*(g*g). */
ORK_HD void ork_q8_moments32(float g, float b1, float b2, float *m, float *v) {
    *m = ORK_FADD(ORK_FMUL(*m, b1), ORK_FMUL(1.0f - b1, g));
    *v = ORK_FADD(ORK_FMUL(*v, b2), ORK_FMUL(1.0f - b2, ORK_FMUL(g, g)));
}

/* p += step_size * m / (sqrt(v) + c2*eps), then decoupled weight decay
 * p *= 1 - lr*wd AFTER the update, only when wd > 0 — the order bnb's kernels use
 * (torch applies decay before; the difference is O(lr^2 wd)). bf16 parameters:
 * RNE after the update and again after the decay, exactly as bnb's T-typed
 * p_vals do; or (bf16_stochastic) one stochastic rounding of the fp32 result. */
ORK_HD void ork_q8_apply(void *param, ork_dtype pdt, int64_t i, float m, float v,
                         const ork_adamw_scalars *s, const ork_adamw_hparams *h, int64_t step) {
    float p = ork_load_f(param, pdt, i);
    float den = ORK_FADD(ORK_FSQRT(v), ORK_FMUL(s->c2, h->eps));
    p = ORK_FADD(p, ORK_FMUL(s->step_size, ORK_FDIV(m, den)));
    int wd = h->weight_decay > 0.0f;
    if (pdt == ORK_F32) {
        ((float *)param)[i] = wd ? ORK_FMUL(p, s->decay) : p;
    } else if (!h->bf16_stochastic) {
        uint16_t b = ork_f32_to_bf16_rne(p);
        if (wd) b = ork_f32_to_bf16_rne(ORK_FMUL(ork_bf16_to_f32(b), s->decay));
        ((uint16_t *)param)[i] = b;
    } else {
        if (wd) p = ORK_FMUL(p, s->decay);
        ((uint16_t *)param)[i] = ork_f32_to_bf16_sr(p, ork_sr_hash(h->seed, step, i));
    }
}

/* Nearest code by binary search plus midpoint test (bnb quantize_2D, not
 * stochastic). code is ascending; is_signed picks the lower bound -1 or 0. NaN
 * (0/0 for an all-zero block) lands on code 0, as in bnb. */
ORK_HD uint8_t ork_q8_quantize(const float *code, float x, int is_signed) {
    int pivot = 127, upper_pivot = 255, lower_pivot = 0;
    float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f, val = code[127];
    for (int i = 64; i > 0; i >>= 1) {
        if (x > val) { lower_pivot = pivot; lower = val; pivot += i; }
        else { upper_pivot = pivot; upper = val; pivot -= i; }
        val = code[pivot];
    }
    if (x > val) {
        float mid = ORK_FMUL(ORK_FADD(upper, val), 0.5f);
        return (uint8_t)(x > mid ? upper_pivot : pivot);
    }
    float mid = ORK_FMUL(ORK_FADD(lower, val), 0.5f);
    return (uint8_t)(x < mid ? lower_pivot : pivot);
}

/* Quantize m (signed map) with bnb's sign fix: if the code's sign differs from
 * m's (a tiny negative m landing on +0), step one code toward m's sign (uint8
 * wrap-around included, as bnb's unsigned char arithmetic). */
ORK_HD uint8_t ork_q8_quantize_m(const float *smap, float m, float absmax) {
    uint8_t c = ork_q8_quantize(smap, ORK_FDIV(m, absmax), 1);
    if ((ork_f32_bits(smap[c]) >> 31) != (ork_f32_bits(m) >> 31))
        c = (uint8_t)(m > 0.0f ? c + 1 : c - 1);
    return c;
}

ORK_HD uint8_t ork_q8_quantize_v(const float *umap, float v, float absmax) {
    return ork_q8_quantize(umap, ORK_FDIV(v, absmax), 0);
}

/* bnb loads a partial last block padded with g = 0, code_m = 128, code_v = 0;
 * the padding's m = (map_signed[128] * absmax_m) * b1 enters the new absmax. */
ORK_HD float ork_q8_pad_m(const float *smap, float absmax_m_old, float b1) {
    return ORK_FMUL(ORK_FMUL(smap[128], absmax_m_old), b1); /* + (1-b1)*0 */
}

#endif
