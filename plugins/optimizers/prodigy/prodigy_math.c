/* prodigy_math.c — the CPU phases of one Prodigy step (see prodigy_math.h).
 * The element math is prodigy_elem.h (shared with prodigy_cuda.cu; build
 * with -ffp-contract=off); the sums in double in element order (torch sums
 * each tensor in float32, then adds the .item()s in double). */
#include "prodigy_math.h"

#include "prodigy_elem.h"

size_t ork_prodigy_state_size(int64_t numel) {
    return ORK_PRODIGY_HEAD + (numel > 0 ? (size_t)numel * 16 : 0);
}

static int bad_args(const void *param, ork_dtype pdt, const float *grad, const void *state, int64_t numel) {
    return !param || !grad || !state || numel < 1 || (pdt != ORK_F32 && pdt != ORK_BF16);
}

void ork_prodigy_capture_p0(const void *param, ork_dtype pdt, void *state, int64_t numel) {
    ork_prodigy_head *hd = state;
    if (hd->inited) return;
    float *p0 = (float *)((char *)state + ORK_PRODIGY_HEAD) + 3 * numel;
    for (int64_t i = 0; i < numel; i++) p0[i] = pd_load(param, pdt, i);
    hd->inited = 1;
}

ork_status ork_prodigy_phase1_cpu(const ork_prodigy_hparams *h, const void *param, ork_dtype pdt,
                                  const float *grad, void *state, int64_t numel, double d, double dlr, double *num,
                                  double *den) {
    if (!h || bad_args(param, pdt, grad, state, numel)) return ORK_E_INVALID;
    ork_prodigy_capture_p0(param, pdt, state, numel);
    float *m = (float *)((char *)state + ORK_PRODIGY_HEAD), *v = m + numel, *s = v + numel, *p0 = s + numel;
    const pd_scalars c = pd_scalars_make(h->beta1, h->beta2, h->beta3, h->weight_decay, h->decouple,
                                         h->safeguard_warmup, h->d0, d, dlr);
    double dot = 0, sabs = 0;
    for (int64_t i = 0; i < numel; i++) {
        double di;
        sabs += pd_phase1(&c, pd_load(param, pdt, i), grad[i], p0[i], &m[i], &v[i], &s[i], &di);
        dot += di;
    }
    *num += (d / h->d0) * dlr * dot;
    *den += sabs;
    return ORK_OK;
}

ork_status ork_prodigy_phase2_cpu(const ork_prodigy_hparams *h, void *param, ork_dtype pdt, const float *grad,
                                  const void *state, int64_t numel, double d, double dlr) {
    if (!h || bad_args(param, pdt, grad, state, numel)) return ORK_E_INVALID;
    const float *m = (const float *)((const char *)state + ORK_PRODIGY_HEAD), *v = m + numel;
    const pd_scalars c = pd_scalars_make(h->beta1, h->beta2, h->beta3, h->weight_decay, h->decouple,
                                         h->safeguard_warmup, h->d0, d, dlr);
    const float deps = (float)(d * h->eps), wdk = (float)(h->decouple ? -h->weight_decay * dlr : 0.0);
    const float step = (float)(c.has_m ? -dlr : -dlr * d);
    for (int64_t i = 0; i < numel; i++) {
        float p = pd_load(param, pdt, i), num = c.has_m ? m[i] : grad[i];
        if (!c.has_m && c.coupled) num = PD_ADD(num, PD_MUL(c.wd, p));
        pd_store(param, pdt, i, pd_phase2(p, num, v[i], deps, wdk, step));
    }
    return ORK_OK;
}
