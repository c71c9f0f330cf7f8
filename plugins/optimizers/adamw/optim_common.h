/* optim_common.h — what the adamw and adamw8bit optimizers share: hyper-parameters,
 * the per-step scalars (computed once on the host, so CPU and CUDA steps see the
 * same bits), bf16 conversions (RNE and stochastic rounding with a counter-based
 * hash) usable from C and from CUDA device code.
 * Owns nothing; header-only so plugins need not link the core. */
#ifndef ORK_OPTIM_COMMON_H
#define ORK_OPTIM_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <orakul/abi.h>
#include <orakul/dtype.h>

#ifdef __CUDACC__
#define ORK_HD __host__ __device__ __forceinline__
#else
#define ORK_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including the CUDA headers in C code. */
typedef struct CUstream_st *ork_cuda_stream;

typedef struct ork_adamw_hparams {
    float lr;            /* bnb default 1e-3 */
    float beta1, beta2;  /* 0.9, 0.999 */
    float eps;           /* bnb 1e-8; ai-toolkit passes 1e-6 */
    float weight_decay;  /* bnb AdamW8bit 1e-2 */
    int bf16_stochastic; /* bf16 params: 0 = round to nearest even (bnb), 1 = stochastic */
    uint64_t seed;       /* stochastic rounding: mix a per-tensor id in here */
} ork_adamw_hparams;

/* Defaults of bnb.optim.AdamW8bit (eps 1e-8, wd 1e-2). */
static inline ork_adamw_hparams ork_adamw_hparams_default(void) {
    ork_adamw_hparams h = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 0, 0};
    return h;
}

/* Per-step scalars, t = step >= 1. Bias corrections in double, rounded once to
 * float (bnb uses __powf on the device; we want host == device bits). */
typedef struct ork_adamw_scalars {
    float c1;        /* 1 - beta1^t */
    float c2;        /* sqrt(1 - beta2^t) */
    float step_size; /* bnb 8-bit: -lr * c2 / c1 (float ops, as bnb) */
    float decay;     /* 1 - lr * wd (float ops, as bnb) */
    float torch_step;   /* torch AdamW: lr / (1 - beta1^t), double -> float */
    float torch_decay;  /* torch AdamW: 1 - lr * wd, double -> float */
} ork_adamw_scalars;

static inline ork_adamw_scalars ork_adamw_scalars_for(const ork_adamw_hparams *h, int64_t t) {
    ork_adamw_scalars s;
    double b1t = pow((double)h->beta1, (double)t), b2t = pow((double)h->beta2, (double)t);
    s.c1 = (float)(1.0 - b1t);
    s.c2 = (float)sqrt(1.0 - b2t);
    float neg_lr_c2 = -h->lr * s.c2;
    s.step_size = neg_lr_c2 / s.c1;
    float lr_wd = h->lr * h->weight_decay;
    s.decay = 1.0f - lr_wd;
    s.torch_step = (float)((double)h->lr / (1.0 - b1t));
    s.torch_decay = (float)(1.0 - (double)h->lr * (double)h->weight_decay);
    return s;
}

/* --- bf16 ------------------------------------------------------------------ */
ORK_HD uint32_t ork_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
ORK_HD float ork_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

ORK_HD float ork_bf16_to_f32(uint16_t b) { return ork_bits_f32((uint32_t)b << 16); }

/* Round to nearest even; NaN -> 0x7FFF (bit-exact with CUDA's __float2bfloat16). */
ORK_HD uint16_t ork_f32_to_bf16_rne(float f) {
    uint32_t u = ork_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Counter-based hash of (seed, step, element index): splitmix64's finaliser. */
ORK_HD uint32_t ork_sr_hash(uint64_t seed, int64_t step, int64_t idx) {
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(step + 1);
    x ^= (uint64_t)idx * 0xD1B54A32D192ED03ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(x ^ (x >> 31));
}

/* Stochastic rounding: add 16 random bits below the kept half, truncate. Unbiased. */
ORK_HD uint16_t ork_f32_to_bf16_sr(float f, uint32_t rnd) {
    uint32_t u = ork_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    if ((u & 0x7F800000u) == 0x7F800000u) return (uint16_t)(u >> 16); /* +-Inf */
    u += rnd & 0xFFFFu;
    return (uint16_t)(u >> 16);
}

/* Element i of a f32 or bf16 array as float. */
ORK_HD float ork_load_f(const void *p, ork_dtype dt, int64_t i) {
    return dt == ORK_BF16 ? ork_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

#ifdef __cplusplus
}
#endif
#endif
