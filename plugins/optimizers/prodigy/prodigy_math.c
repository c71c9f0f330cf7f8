/* prodigy_math.c — the CPU phases of one Prodigy step (see prodigy_math.h).
 * Element math in float32 in torch's order (each scalar rounded to float32
 * as torch does for a float32 tensor op), the sums in double (torch sums
 * each tensor in float32, then adds the .item()s in double). */
#include "prodigy_math.h"

#include <math.h>
#include <string.h>

size_t ork_prodigy_state_size(int64_t numel) {
    return ORK_PRODIGY_HEAD + (numel > 0 ? (size_t)numel * 16 : 0);
}

static float load(const void *p, ork_dtype dt, int64_t i) {
    if (dt == ORK_BF16) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)p)[i];
}

static void store(void *p, ork_dtype dt, int64_t i, float f) {
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

static int bad_args(const void *param, ork_dtype pdt, const float *grad, const void *state, int64_t numel) {
    return !param || !grad || !state || numel < 1 || (pdt != ORK_F32 && pdt != ORK_BF16);
}

void ork_prodigy_capture_p0(const void *param, ork_dtype pdt, void *state, int64_t numel) {
    ork_prodigy_head *hd = state;
    if (hd->inited) return;
    float *p0 = (float *)((char *)state + ORK_PRODIGY_HEAD) + 3 * numel;
    for (int64_t i = 0; i < numel; i++) p0[i] = load(param, pdt, i);
    hd->inited = 1;
}

ork_status ork_prodigy_phase1_cpu(const ork_prodigy_hparams *h, const void *param, ork_dtype pdt,
                                  const float *grad, void *state, int64_t numel, double alpha_num, double am,
                                  double av, double as, double *num, double *den) {
    if (!h || bad_args(param, pdt, grad, state, numel)) return ORK_E_INVALID;
    ork_prodigy_capture_p0(param, pdt, state, numel);
    float *m = (float *)((char *)state + ORK_PRODIGY_HEAD), *v = m + numel, *s = v + numel, *p0 = s + numel;
    const float wd = (float)h->weight_decay, b1 = (float)h->beta1, b2 = (float)h->beta2;
    const float b3 = (float)(h->beta3 < 0 ? sqrt(h->beta2) : h->beta3);
    const float fam = (float)am, fav = (float)av, fas = (float)as;
    const int coupled = h->weight_decay != 0 && !h->decouple;
    double dot = 0, sabs = 0;
    for (int64_t i = 0; i < numel; i++) {
        float p = load(param, pdt, i), g = grad[i];
        if (coupled) g = g + wd * p; /* grad.add_(p, alpha=decay) */
        dot += (double)g * (double)(p0[i] - p);
        if (h->beta1 > 0) m[i] = m[i] * b1 + fam * g;
        v[i] = v[i] * b2 + fav * g * g; /* addcmul_(g, g, value): value·g·g */
        s[i] = s[i] * b3 + fas * g;
        sabs += fabs((double)s[i]);
    }
    *num += alpha_num * dot;
    *den += sabs;
    return ORK_OK;
}

ork_status ork_prodigy_phase2_cpu(const ork_prodigy_hparams *h, void *param, ork_dtype pdt, const float *grad,
                                  const void *state, int64_t numel, double d, double dlr) {
    if (!h || bad_args(param, pdt, grad, state, numel)) return ORK_E_INVALID;
    const float *m = (const float *)((const char *)state + ORK_PRODIGY_HEAD), *v = m + numel;
    const float deps = (float)(d * h->eps), wdk = (float)(-h->weight_decay * dlr);
    const float step = (float)(h->beta1 > 0 ? -dlr : -dlr * d);
    const int coupled = h->weight_decay != 0 && !h->decouple;
    for (int64_t i = 0; i < numel; i++) {
        float p = load(param, pdt, i);
        float den = sqrtf(v[i]) + deps;
        if (h->weight_decay != 0 && h->decouple) p = p + wdk * p;
        float num = m[i];
        if (!(h->beta1 > 0)) {
            num = grad[i];
            if (coupled) num = num + (float)h->weight_decay * load(param, pdt, i);
        }
        p = p + step * (num / den); /* addcdiv_(num, den, value=step) */
        store(param, pdt, i, p);
    }
    return ORK_OK;
}
