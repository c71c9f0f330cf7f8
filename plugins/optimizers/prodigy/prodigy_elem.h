/* prodigy_elem.h — the per-element float32 math of a Prodigy step, shared
 * verbatim by prodigy_math.c and prodigy_cuda.cu (same float ops in the same
 * order, no contraction: CPU and CUDA agree bit for bit element by element;
 * only the sums' order differs). Private to the plugin. */
#ifndef ORK_PRODIGY_ELEM_H
#define ORK_PRODIGY_ELEM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <orakul/dtype.h>

#ifdef __CUDACC__
#define PD_HD __host__ __device__ __forceinline__
#else
#define PD_HD static inline
#endif

#ifdef __CUDA_ARCH__
#define PD_MUL(a, b) __fmul_rn((a), (b))
#define PD_ADD(a, b) __fadd_rn((a), (b))
#define PD_DIV(a, b) __fdiv_rn((a), (b))
#define PD_SQRT(a) __fsqrt_rn(a)
#else
#define PD_MUL(a, b) ((a) * (b))
#define PD_ADD(a, b) ((a) + (b))
#define PD_DIV(a, b) ((a) / (b))
#define PD_SQRT(a) sqrtf(a)
#endif

/* This step's float32 scalars (each rounded once from double, as torch
 * rounds a Python scalar for a float32 tensor op). */
typedef struct pd_scalars {
    float b1, b2, b3, wd;
    float am, av, as; /* d(1-b1), d^2(1-b2), (d/d0)(dlr or d) */
    int coupled, has_m;
} pd_scalars;

/* The scalars of a step from the hyper-parameters, d (the step's: old) and
 * dlr = d·lr·bc. has_m: beta1 > 0; coupled: wd != 0 and not decoupled. */
PD_HD pd_scalars pd_scalars_make(double beta1, double beta2, double beta3, double wd, int decouple,
                                 int safeguard_warmup, double d0, double d, double dlr) {
    pd_scalars c;
    c.b1 = (float)beta1;
    c.b2 = (float)beta2;
    c.b3 = (float)(beta3 < 0 ? sqrt(beta2) : beta3);
    c.wd = (float)wd;
    c.am = (float)(d * (1 - beta1));
    c.av = (float)(d * d * (1 - beta2));
    c.as = (float)((d / d0) * (safeguard_warmup ? d : dlr));
    c.coupled = wd != 0 && !decouple;
    c.has_m = beta1 > 0;
    return c;
}

PD_HD float pd_load(const void *p, ork_dtype dt, int64_t i) {
    if (dt == ORK_BF16) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)p)[i];
}

PD_HD void pd_store(void *p, ork_dtype dt, int64_t i, float f) {
    if (dt == ORK_BF16) { /* round to nearest even; NaN stays NaN */
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0x7FFF0000u;
        else u += 0x7FFFu + ((u >> 16) & 1u);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    } else {
        ((float *)p)[i] = f;
    }
}

/* Phase 1 of element i: m, v, s updated; *dot = g·(p0 − p), returns |s|. */
PD_HD double pd_phase1(const pd_scalars *c, float p, float g, float p0, float *m, float *v, float *s, double *dot) {
    if (c->coupled) g = PD_ADD(g, PD_MUL(c->wd, p)); /* grad.add_(p, alpha=decay) */
    *dot = (double)g * (double)(p0 - p);
    if (c->has_m) *m = PD_ADD(PD_MUL(*m, c->b1), PD_MUL(c->am, g));
    *v = PD_ADD(PD_MUL(*v, c->b2), PD_MUL(PD_MUL(c->av, g), g)); /* addcmul_(g, g, value) */
    *s = PD_ADD(PD_MUL(*s, c->b3), PD_MUL(c->as, g));
    return fabs((double)*s);
}

/* Phase 2 of element i: the new parameter. deps = d·eps (new d), wdk =
 * −wd·dlr (decoupled decay, 0 otherwise), step = −dlr (or −dlr·d without m),
 * num = m (or the coupled-decayed gradient without m). */
PD_HD float pd_phase2(float p, float num, float v, float deps, float wdk, float step) {
    float den = PD_ADD(PD_SQRT(v), deps);
    if (wdk != 0.0f) p = PD_ADD(p, PD_MUL(wdk, p));
    return PD_ADD(p, PD_MUL(step, PD_DIV(num, den))); /* addcdiv_(num, den, value=step) */
}

#endif
