/* train/schedule.c — see schedule.h. Sources: ai-toolkit toolkit/scheduler.py,
 * toolkit/samplers/custom_flowmatch_sampler.py (read, not copied). */
#include "train/schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ork_status ork_ts_type_parse(const char *s, ork_ts_type *out) {
    static const struct { const char *n; ork_ts_type t; } m[] = {
        {"sigmoid", ORK_TS_SIGMOID}, {"linear", ORK_TS_LINEAR}, {"weighted", ORK_TS_WEIGHTED},
        {"shift", ORK_TS_SHIFT}, {"flux_shift", ORK_TS_RESOLUTION_SHIFT}, /* ai-toolkit's names */
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(s, m[i].n)) { *out = m[i].t; return ORK_OK; }
    return ORK_E_CONFIG;
}

ork_status ork_cs_type_parse(const char *s, ork_cs_type *out) {
    if (!strcmp(s, "balanced")) *out = ORK_CS_BALANCED;
    else if (!strcmp(s, "content")) *out = ORK_CS_CONTENT;
    else if (!strcmp(s, "style")) *out = ORK_CS_STYLE;
    else return ORK_E_CONFIG;
    return ORK_OK;
}

/* Index into the 1000 scheduler timesteps (descending, index 0 = most noise). */
static int pick_index(ork_cs_type cs, ork_rng *r) {
    double u = ork_rng_uniform(r);
    double x;
    switch (cs) {
    case ORK_CS_CONTENT: x = u * u * u * 1000.0; break;          /* favours high noise */
    case ORK_CS_STYLE: x = (1.0 - u * u * u) * 1000.0; break;    /* favours low noise */
    default: x = u * 1000.0; break;
    }
    int i = (int)x;
    return i < 0 ? 0 : i > 999 ? 999 : i;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Loss weight of the 'weighted' scheme, a smooth function of t ∈ (0, 1]:
 * ai-toolkit uses a measured 1000-entry table (flex.1-alpha, ~0.75-1.52,
 * peaking near t ≈ 0.87). We do not copy that table; this bell of the same
 * range and peak is documented in docs/DECISIONS.md. */
static double weighted_weight(double t) {
    double d = (t - 0.87) / 0.42;
    return 0.70 + 0.82 * exp(-0.5 * d * d);
}

void ork_ts_sample(const ork_ts_params *p, ork_rng *r, float *t, float *weight) {
    int idx = pick_index(p->cs, r);
    double sigma;
    *weight = 1.0f;
    switch (p->type) {
    case ORK_TS_SIGMOID: {
        /* ai-toolkit draws 1000 fresh sigmoid(randn) values every batch and
         * sorts them; with a uniform index this is logit-normal sampling, and
         * with content/style the index biases it the same way. */
        double v[1000];
        for (int i = 0; i < 1000; i++) v[i] = 1.0 / (1.0 + exp(-ork_rng_normal(r)));
        qsort(v, 1000, sizeof v[0], cmp_desc);
        sigma = v[idx];
        break;
    }
    case ORK_TS_SHIFT:
    case ORK_TS_RESOLUTION_SHIFT: {
        double s = 1.0 - (double)idx / 1000.0; /* linspace of sigmas 1 .. 0.001 */
        if (s < 1e-3) s = 1e-3;
        double mu;
        if (p->type == ORK_TS_SHIFT) {
            mu = log(p->shift > 0 ? p->shift : 3.0);
        } else {
            double m = (p->max_shift - p->base_shift) / (double)(p->max_seq - p->base_seq);
            double b = p->base_shift - m * (double)p->base_seq;
            mu = (double)p->image_seq_len * m + b;
        }
        sigma = exp(mu) / (exp(mu) + (1.0 / s - 1.0)); /* time_shift(mu, 1, s) */
        break;
    }
    case ORK_TS_WEIGHTED:
    case ORK_TS_LINEAR:
    default:
        sigma = (1000.0 - 999.0 * idx / 999.0) / 1000.0; /* linspace(1000, 1, 1000) / 1000 */
        if (p->type == ORK_TS_WEIGHTED) *weight = (float)weighted_weight(sigma);
        break;
    }
    *t = (float)sigma;
}

ork_status ork_lr_type_parse(const char *s, ork_lr_type *out) {
    if (!strcmp(s, "constant")) *out = ORK_LR_CONSTANT;
    else if (!strcmp(s, "cosine")) *out = ORK_LR_COSINE;
    else if (!strcmp(s, "linear")) *out = ORK_LR_LINEAR;
    else if (!strcmp(s, "constant_with_warmup")) *out = ORK_LR_CONSTANT_WARMUP;
    else return ORK_E_CONFIG;
    return ORK_OK;
}

double ork_lr_at(const ork_lr_params *p, int64_t step) {
    double lr = p->lr;
    switch (p->type) {
    case ORK_LR_COSINE: {
        int64_t w = p->warmup_steps, decay = p->cosine_decay_steps > 0 ? p->cosine_decay_steps : p->total_steps;
        if (decay > p->total_steps) decay = p->total_steps;
        double min_ratio = p->eta_min / (lr > 1e-8 ? lr : 1e-8);
        if (step < w) return lr * (double)step / (double)(w > 1 ? w : 1);
        if (step >= w + decay) return lr * min_ratio;
        double prog = (double)(step - w) / (double)(decay > 1 ? decay : 1);
        return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + cos(M_PI * prog)));
    }
    case ORK_LR_LINEAR: {
        double s = p->start_factor, e = p->end_factor;
        int64_t n = p->total_steps > 0 ? p->total_steps : 1;
        if (step >= n) return lr * e;
        return lr * (s + (e - s) * (double)step / (double)n);
    }
    case ORK_LR_CONSTANT_WARMUP: {
        int64_t w = p->warmup_steps;
        if (step < w) return lr * (double)step / (double)(w > 1 ? w : 1);
        return lr;
    }
    default:
        return lr;
    }
}
