/* prodigy_math.h — Prodigy (Mishchenko & Defazio, prodigyopt 1.1.2
 * prodigy.py, read, not copied): Adam whose step size d is estimated from
 * global sums over all parameters. The math the "prodigy" plugin wraps, and
 * what tests/optimizers/test_prodigy.c compiles in. Private to the plugin.
 *
 * One optimizer step k (0-based, group['k']), d the estimate so far, lr the
 * scheduled lr, bc = use_bias_correction ? sqrt(1-b2^(k+1))/(1-b1^(k+1)) : 1,
 * dlr = d·lr·bc. Phase 1, per parameter (g += wd·p first when !decouple):
 *     num += (d/d0)·dlr·dot(g, p0 − p)         p0: the parameter at its first step
 *     m = m·b1 + d(1−b1)·g;  v = v·b2 + d²(1−b2)·g²
 *     s = s·b3 + (d/d0)·(safeguard_warmup ? d : dlr)·g;  den += Σ|s|
 * then globally (den > 0): d_num = b3·d_num + num; d_hat = d_coef·d_num/den;
 *     d = max(d, d_hat) while d == d0; d_max = max(d_max, d_hat);
 *     d = min(d_max, d·growth_rate); k += 1
 * Phase 2, per parameter, with the NEW d: p += −wd·dlr·p (decouple);
 *     p −= dlr · m / (sqrt(v) + d·eps)    (b1 = 0: dlr·d · g / (...))
 * den == 0 (no gradient, or lr 0): prodigyopt returns after phase 1: no
 * update, d and k unchanged.
 *
 * State of one parameter of n elements (zeroed before its first step):
 *   ork_prodigy_head (64 bytes: the global scalars as of this parameter's last
 *   step, so a resumed run finds them in any parameter's state), then float
 *   m[n], v[n], s[n], p0[n]. */
#ifndef ORK_PRODIGY_MATH_H
#define ORK_PRODIGY_MATH_H

#include <orakul/abi.h>
#include <orakul/dtype.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_prodigy_hparams {
    double beta1, beta2, beta3; /* beta3 < 0: sqrt(beta2) */
    double eps;                 /* ai-toolkit passes 1e-6 */
    double weight_decay;
    int decouple, use_bias_correction, safeguard_warmup;
    double d0, d_coef, growth_rate;
} ork_prodigy_hparams;

/* The global estimate (prodigyopt's param_groups[0] entries). */
typedef struct ork_prodigy_global {
    double d, d_max, d_num; /* d, d_max, d_numerator */
    int64_t k;              /* optimizer steps taken */
} ork_prodigy_global;

/* The head of each parameter's state (64 bytes). All 0 in a fresh state. */
typedef struct ork_prodigy_head {
    double d, d_max, d_num; /* the global estimate after this parameter's last step */
    int64_t k;              /* steps taken (the group's k) */
    int32_t inited;         /* p0 holds the parameter as of its first step */
    int32_t pad;
    double reserved[3];
} ork_prodigy_head;

#define ORK_PRODIGY_HEAD 64

size_t ork_prodigy_state_size(int64_t numel); /* 64 + 16·numel */

/* p0 = the parameter, once (the head's inited flag). */
void ork_prodigy_capture_p0(const void *param, ork_dtype pdt, void *state, int64_t numel);

/* Phase 1 on one parameter (CPU): updates m, v, s (and p0 at its first
 * step) with this step's d (the old one) and dlr; adds (d/d0)·dlr·dot(g, p0 − p)
 * to *num and Σ|s| to *den. */
ork_status ork_prodigy_phase1_cpu(const ork_prodigy_hparams *h, const void *param, ork_dtype pdt,
                                  const float *grad, void *state, int64_t numel, double d, double dlr, double *num,
                                  double *den);
/* Phase 2 (CPU) with the NEW d: p −= dlr·m/(sqrt(v) + d·eps), the decoupled decay first. */
ork_status ork_prodigy_phase2_cpu(const ork_prodigy_hparams *h, void *param, ork_dtype pdt, const float *grad,
                                  const void *state, int64_t numel, double d, double dlr);

/* The CUDA step (prodigy_cuda.cu): both phases and the global update on the
 * stream, no host sync; the global estimate lives in dev (ork_prodigy_dev_new),
 * loaded from the parameters' heads when load is 1. All pointers device memory. */
typedef struct ork_prodigy_dev ork_prodigy_dev;
typedef struct CUstream_st *ork_prodigy_stream;
ork_status ork_prodigy_dev_new(ork_prodigy_dev **out);
void ork_prodigy_dev_free(ork_prodigy_dev *dev);
ork_status ork_prodigy_step_cuda(const ork_prodigy_hparams *h, ork_prodigy_dev *dev, int load, double lr, int n,
                                 void *const *param, const ork_dtype *pdt, const float *const *grad,
                                 void *const *state, const int64_t *numel, ork_prodigy_stream stream);

#ifdef __cplusplus
}
#endif
#endif
