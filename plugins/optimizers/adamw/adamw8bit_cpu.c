/* adamw8bit_cpu.c — code books, state layout and the CPU step of AdamW-8bit
 * (see adamw8bit.h). Build with -ffp-contract=off: the CUDA kernel matches
 * these results bit for bit only if no multiply-add is fused here. */
#include "adamw8bit_math.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a*b + c rounded once to float, on every C library: MinGW-w64's fmaf is not
 * correctly rounded (under Wine it gave 35 of the linspace points below one ulp
 * off glibc's, entries 8 and 34 of both code books). The product is exact in
 * double (24 + 24 bits); the double sum's rounding error (TwoSum) decides a
 * round-to-odd of the sum, after which one rounding to float is the correctly
 * rounded result (53 >= 24 + 2 bits; Boldo & Melquiond, "Emulation of FMA and
 * correctly rounded sums: proved algorithms using rounding to odd", 2008). */
static float fmaf_exact(float a, float b, float c) {
    double p = (double)a * (double)b;
    double s = p + (double)c;
    double bv = s - p;
    double err = (p - (s - bv)) + ((double)c - bv);
    if (err != 0.0) {
        uint64_t u;
        memcpy(&u, &s, sizeof u);
        if ((u & 1u) == 0) { /* even: step toward the exact sum, onto an odd one */
            u = ((err > 0.0) == (s > 0.0)) ? u + 1 : u - 1;
            memcpy(&s, &u, sizeof s);
        }
    }
    return (float)s;
}

/* torch.linspace(0.1, 1, n) in float32 (ATen RangeFactoriesKernel, scalar path):
 * step = (end - start) / (n - 1); k < n/2: start + step*k, else end - step*(n-1-k). */
static float linspace_at(int n, int k, int fused) {
    const float start = 0.1f, end = 1.0f;
    float step = (end - start) / (float)(n - 1);
    if (k < n / 2) return fused ? fmaf_exact(step, (float)k, start) : start + step * (float)k;
    return fused ? fmaf_exact(-step, (float)(n - 1 - k), end) : end - step * (float)(n - 1 - k);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* bnb create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): for decade
 * i = 0..6, the midpoints of linspace(0.1, 1, F) times float(10^(i-6)), F = 2^i+1
 * (signed, both signs) or 2^(i+1)+1 (unsigned); plus 0 and 1; sorted. */
static void dynamic_map(float *out, int is_signed, int fused) {
    static const double scale[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    int k = 0;
    for (int i = 0; i < 7; i++) {
        int n = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
        float sc = (float)scale[i];
        for (int j = 0; j + 1 < n; j++) {
            float mean = (linspace_at(n, j, fused) + linspace_at(n, j + 1, fused)) / 2.0f;
            out[k++] = sc * mean;
            if (is_signed) out[k++] = -sc * mean;
        }
    }
    out[k++] = 0.0f;
    out[k++] = 1.0f;
    qsort(out, 256, sizeof(float), cmp_float); /* k == 256 for both maps */
}

void ork_adamw8bit_maps_init(ork_adamw8bit_maps *maps, int fused) {
    dynamic_map(maps->signed_map, 1, fused);
    dynamic_map(maps->unsigned_map, 0, fused);
}

static int64_t nblocks_of(int64_t n) { return (n + ORK_ADAMW8BIT_BLOCK - 1) / ORK_ADAMW8BIT_BLOCK; }

size_t ork_adamw8bit_state_size(int64_t numel) {
    if (numel <= 0) return 0;
    if (numel < ORK_ADAMW8BIT_MIN_8BIT) return (size_t)numel * 8;
    return (size_t)nblocks_of(numel) * 8 + (size_t)numel * 2;
}

void ork_adamw8bit_view_of(void *state, int64_t numel, ork_adamw8bit_view *o) {
    memset(o, 0, sizeof *o);
    if (numel < ORK_ADAMW8BIT_MIN_8BIT) {
        o->m32 = (float *)state;
        o->v32 = o->m32 + numel;
        return;
    }
    o->nblocks = nblocks_of(numel);
    o->absmax_m = (float *)state;
    o->absmax_v = o->absmax_m + o->nblocks;
    o->code_m = (uint8_t *)(o->absmax_v + o->nblocks);
    o->code_v = o->code_m + numel;
}

void ork_adamw8bit_dequant(const ork_adamw8bit_maps *maps, const void *state, int64_t numel,
                           float *m, float *v) {
    ork_adamw8bit_view s;
    ork_adamw8bit_view_of((void *)state, numel, &s);
    if (s.m32) {
        memcpy(m, s.m32, (size_t)numel * 4);
        memcpy(v, s.v32, (size_t)numel * 4);
        return;
    }
    for (int64_t i = 0; i < numel; i++) {
        int64_t b = i / ORK_ADAMW8BIT_BLOCK;
        m[i] = maps->signed_map[s.code_m[i]] * s.absmax_m[b];
        v[i] = maps->unsigned_map[s.code_v[i]] * s.absmax_v[b];
    }
}

void ork_adamw8bit_quant(const ork_adamw8bit_maps *maps, const float *m, const float *v,
                         int64_t numel, void *state) {
    ork_adamw8bit_view s;
    ork_adamw8bit_view_of(state, numel, &s);
    if (s.m32) {
        memcpy(s.m32, m, (size_t)numel * 4);
        memcpy(s.v32, v, (size_t)numel * 4);
        return;
    }
    for (int64_t b = 0; b < s.nblocks; b++) {
        int64_t i0 = b * ORK_ADAMW8BIT_BLOCK, i1 = i0 + ORK_ADAMW8BIT_BLOCK;
        if (i1 > numel) i1 = numel;
        float am = 0.0f, av = 0.0f;
        for (int64_t i = i0; i < i1; i++) {
            am = fmaxf(am, fabsf(m[i]));
            av = fmaxf(av, fabsf(v[i]));
        }
        s.absmax_m[b] = am;
        s.absmax_v[b] = av;
        for (int64_t i = i0; i < i1; i++) {
            s.code_m[i] = ork_q8_quantize_m(maps->signed_map, m[i], am);
            s.code_v[i] = ork_q8_quantize_v(maps->unsigned_map, v[i], av);
        }
    }
}

static int dtype_ok(ork_dtype d) { return d == ORK_F32 || d == ORK_BF16; }

/* fp32-state path for small tensors: bnb's 32-bit Adam formula plus the guard. */
static void step_small(const ork_adamw_hparams *h, const ork_adamw_scalars *sc, int64_t step,
                       void *param, ork_dtype pdt, const void *grad, ork_dtype gdt,
                       float *m, float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = ork_load_f(grad, gdt, i);
        if (!ork_q8_finite(g)) { m[i] = v[i] = 0.0f; continue; }
        ork_q8_moments32(g, h->beta1, h->beta2, &m[i], &v[i]);
        ork_q8_apply(param, pdt, i, m[i], v[i], sc, h, step);
    }
}

/* One 256-element block [i0, i0 + cnt): the order of kOptimizerStatic8bit2StateBlockwise. */
static void step_block(const ork_adamw8bit_maps *maps, const ork_adamw_hparams *h,
                       const ork_adamw_scalars *sc, int64_t step, void *param, ork_dtype pdt,
                       const void *grad, ork_dtype gdt, const ork_adamw8bit_view *s,
                       int64_t b, int64_t i0, int cnt) {
    float m[ORK_ADAMW8BIT_BLOCK], v[ORK_ADAMW8BIT_BLOCK];
    uint8_t ok[ORK_ADAMW8BIT_BLOCK];
    float am_old = s->absmax_m[b], av_old = s->absmax_v[b];
    float am = -FLT_MAX, av = -FLT_MAX;
    for (int j = 0; j < cnt; j++) {
        float g = ork_load_f(grad, gdt, i0 + j);
        ok[j] = (uint8_t)ork_q8_finite(g);
        if (ok[j]) {
            v[j] = maps->unsigned_map[s->code_v[i0 + j]] * av_old;
            m[j] = maps->signed_map[s->code_m[i0 + j]] * am_old;
            ork_q8_moments8(g, h->beta1, h->beta2, &m[j], &v[j]);
        } else {
            m[j] = v[j] = 0.0f;
        }
        am = fmaxf(am, fabsf(m[j]));
        av = fmaxf(av, fabsf(v[j]));
    }
    if (cnt < ORK_ADAMW8BIT_BLOCK) {
        am = fmaxf(am, fabsf(ork_q8_pad_m(maps->signed_map, am_old, h->beta1)));
        av = fmaxf(av, 0.0f);
    }
    s->absmax_m[b] = am;
    s->absmax_v[b] = av;
    for (int j = 0; j < cnt; j++) {
        if (ok[j]) ork_q8_apply(param, pdt, i0 + j, m[j], v[j], sc, h, step);
        s->code_m[i0 + j] = ork_q8_quantize_m(maps->signed_map, m[j], am);
        s->code_v[i0 + j] = ork_q8_quantize_v(maps->unsigned_map, v[j], av);
    }
}

ork_status ork_adamw8bit_step_cpu(const ork_adamw8bit_maps *maps, const ork_adamw_hparams *hp,
                                  int64_t step, void *param, ork_dtype param_dtype,
                                  const void *grad, ork_dtype grad_dtype, void *state,
                                  int64_t numel) {
    if (!maps || !hp || !param || !grad || !state || step < 1 || numel < 1 ||
        !dtype_ok(param_dtype) || !dtype_ok(grad_dtype))
        return ORK_E_INVALID;
    ork_adamw_scalars sc = ork_adamw_scalars_for(hp, step);
    ork_adamw8bit_view s;
    ork_adamw8bit_view_of(state, numel, &s);
    if (s.m32) {
        step_small(hp, &sc, step, param, param_dtype, grad, grad_dtype, s.m32, s.v32, numel);
        return ORK_OK;
    }
    for (int64_t b = 0; b < s.nblocks; b++) {
        int64_t i0 = b * ORK_ADAMW8BIT_BLOCK;
        int cnt = numel - i0 < ORK_ADAMW8BIT_BLOCK ? (int)(numel - i0) : ORK_ADAMW8BIT_BLOCK;
        step_block(maps, hp, &sc, step, param, param_dtype, grad, grad_dtype, &s, b, i0, cnt);
    }
    return ORK_OK;
}
