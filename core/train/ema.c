/* train/ema.c — the EMA of the trained LoRA parameters (train/ema.h: what
 * ai-toolkit does and where orakul departs): the update, the resident shadows
 * and their place in the streamed records, the shadows in the training state,
 * the LoRA file written from them, and the samples drawn with them.
 * Owns j->ema, j->ema_tmp, j->ema_off, j->opt_bytes, j->ema_saved. [control-thread] */
#include "train/ema.h"
#include "train/job.h"

#include "numerics/finite.h"
#include "numerics/half.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

ork_status ork_ema_update(const ork_backend *be, const ork_kctx *k, double decay, int64_t n, const void *param,
                          ork_dtype pdt, float *shadow, float *tmp) {
    /* ema.py: one_minus_decay = 1.0 - decay (Python floats), then F32 tensor ops with it */
    float omd = (float)(1.0 - decay);
    ORK_TRY(be->axpby(k, n, 1.0f, shadow, ORK_F32, 0.0f, tmp, ORK_F32));  /* tmp = s_param_float (a copy) */
    ORK_TRY(be->axpby(k, n, -1.0f, param, pdt, 1.0f, tmp, ORK_F32));      /* tmp = s - p */
    return be->axpby(k, n, -omd, tmp, ORK_F32, 1.0f, shadow, ORK_F32);    /* tmp.mul_(1 - d); s.sub_(tmp) */
}

/* ---- setup ------------------------------------------------------------------ */

ork_status ork_train_ema_setup(job *j) {
    const ork_train_config *t = &j->p->train;
    if (!t->use_ema) return ORK_OK;
    j->ema_on = 1;
    int np = j->n_params;
    int64_t mx = 1;
    for (int i = 0; i < np; i++)
        if (ork_tensor_numel(j->pt[i]) > mx) mx = ork_tensor_numel(j->pt[i]);
    ORK_TRY(ork_tensor_new(j->alloc, "ema", ORK_F32, 1, &mx, 0, &j->ema_tmp));
    j->ema_off = calloc((size_t)np + 1, sizeof *j->ema_off);
    j->opt_bytes = calloc((size_t)np + 1, sizeof *j->opt_bytes);
    j->ema_saved = calloc((size_t)np + 1, sizeof *j->ema_saved);
    if (!j->ema_off || !j->opt_bytes || !j->ema_saved) return ORK_E_NOMEM;
    if (!j->plan->trainable_streamed) {
        j->ema = calloc((size_t)np + 1, sizeof *j->ema);
        if (!j->ema) return ORK_E_NOMEM;
        for (int i = 0; i < np; i++) { /* the shadow starts as the parameter (ema.py: p.clone()) */
            ork_tensor *p = j->pt[i];
            ORK_TRY(ork_tensor_new(j->alloc, "ema", ORK_F32, p->ndim, p->shape, 0, &j->ema[i]));
            ORK_TRY(j->be->axpby(&j->g->k, ork_tensor_numel(p), 1.0f, ork_tensor_data(p), p->dtype, 0.0f,
                                 ork_tensor_data(j->ema[i]), ORK_F32));
        }
        ORK_TRY(j->be->sync(&j->g->k));
    }
    double mib = 0;
    for (int i = 0; i < np; i++) mib += 4.0 * (double)ork_tensor_numel(j->pt[i]) / 1048576.0;
    ORK_INFO("EMA of the LoRA weights: decay %g, %.1f MiB of F32 shadows%s; the LoRA files and samples use them",
             t->ema_decay, mib, j->plan->trainable_streamed ? " in the streamed records" : "");
    return ORK_OK;
}

size_t ork_train_ema_state_bytes(job *j, int i, size_t opt_bytes) {
    if (!j->ema_on) return opt_bytes;
    j->opt_bytes[i] = opt_bytes;
    j->ema_off[i] = (opt_bytes + 15) & ~(size_t)15;
    return j->ema_off[i] + 4 * (size_t)ork_tensor_numel(j->pt[i]);
}

void ork_train_ema_init_record(job *j, int i, char *state, ork_dtype dt, const void *data) {
    if (!j->ema_on) return;
    float *s = (float *)(state + j->ema_off[i]);
    size_t n = (size_t)ork_tensor_numel(j->pt[i]);
    if (dt == ORK_F32) memcpy(s, data, n * sizeof *s);
    else ork_bf16_to_f32_n(data, n, s);
}

void ork_train_ema_free(job *j) {
    for (int i = 0; j->ema && i < j->n_params; i++) ork_tensor_free(j->ema[i]);
    for (int i = 0; j->ema_saved && i < j->n_params; i++) free(j->ema_saved[i]);
    free(j->ema);
    free(j->ema_saved);
    free(j->ema_off);
    free(j->opt_bytes);
    ork_tensor_free(j->ema_tmp);
    j->ema = NULL;
    j->ema_saved = NULL;
    j->ema_off = j->opt_bytes = NULL;
    j->ema_tmp = NULL;
}

/* ---- the update --------------------------------------------------------------- */

ork_status ork_train_ema_step(job *j) {
    if (!j->ema_on || !j->ema) return ORK_OK;
    float *tmp = ork_tensor_data(j->ema_tmp);
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *p = j->pt[i];
        ORK_TRY(ork_ema_update(j->be, &j->g->k, j->p->train.ema_decay, ork_tensor_numel(p), ork_tensor_data(p), p->dtype,
                               ork_tensor_data(j->ema[i]), tmp));
    }
    return ORK_OK;
}

ork_status ork_train_ema_block(job *j, const ork_opt_param *ps, const int32_t *ids, int n) {
    if (!j->ema_on) return ORK_OK;
    float *tmp = ork_tensor_data(j->ema_tmp);
    for (int q = 0; q < n; q++)
        ORK_TRY(ork_ema_update(j->be, &j->g->k, j->p->train.ema_decay, ps[q].numel, ps[q].data, ps[q].dtype,
                               (float *)((char *)ps[q].state + j->ema_off[ids[q]]), tmp));
    return ORK_OK;
}

/* ---- the training state ------------------------------------------------------- */

/* Streamed: parameter i's shadow in its block's host record (between passes). */
static float *record_shadow(job *j, int i) {
    const ork_tstream_param *p = &ork_tstream_get_layout(j->tstream)->params[i];
    return (float *)((char *)ork_tstream_host(j->tstream, p->block) + p->state_offset + j->ema_off[i]);
}

ork_status ork_train_ema_save(job *j, ork_st_writer *w, void **bufs) {
    if (!j->ema_on) return ORK_OK;
    if (j->tstream) ORK_TRY(ork_tstream_sync(j->tstream));
    for (int i = 0; i < j->n_params; i++) {
        const ork_tensor *p = j->pt[i];
        size_t nb = 4 * (size_t)ork_tensor_numel(p);
        const void *h;
        if (j->tstream) h = record_shadow(j, i);
        else {
            if (!(bufs[i] = malloc(nb ? nb : 1))) return ORK_E_NOMEM;
            ORK_TRY(j->be->memcpy_d2h(&j->g->k, bufs[i], ork_tensor_data(j->ema[i]), nb));
            ORK_TRY(j->be->sync(&j->g->k));
            h = bufs[i];
        }
        char key[64];
        snprintf(key, sizeof key, "ema.%d", i);
        ORK_TRY(ork_st_writer_add(w, key, ORK_F32, p->ndim, p->shape, h, nb));
    }
    char v[64];
    snprintf(v, sizeof v, "%.17g", j->p->train.ema_decay);
    return ork_st_writer_meta(w, "ema_decay", v);
}

ork_status ork_train_ema_check(job *j, ork_st_file *f, const char *path) {
    const ork_st_tensor *e0 = ork_st_find(f, "ema.0");
    if (!j->ema_on) {
        if (e0) return ORK_FAIL(ORK_E_CONFIG, "%s: the state holds the EMA of its LoRA weights (train.ema_config.use_ema was "
                                "on) and this config has it off: turn it on to resume, or move the state away to start "
                                "over", path);
        return ORK_OK;
    }
    if (!e0 && j->n_params > 0)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the state holds no EMA of its LoRA weights (saved with train.ema_config."
                        "use_ema off) and this config has it on: turn it off to resume, or move the state away to start "
                        "over", path);
    for (int i = 0; i < j->n_params; i++) {
        const ork_tensor *p = j->pt[i];
        char key[64];
        snprintf(key, sizeof key, "ema.%d", i);
        const ork_st_tensor *t = ork_st_find(f, key);
        int same = t && t->dtype == ORK_F32 && t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or is not the F32 EMA of LoRA tensor %d; move the "
                            "state away to start over", path, key, i);
        int64_t bad = ork_first_nonfinite(t->dtype, t->data, ork_st_nelements(t));
        if (bad >= 0)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' (EMA of the LoRA weights): element %lld is %s: the state "
                            "cannot be resumed; restore a good copy, or move it away and run with --overwrite to start "
                            "over", path, key, (long long)bad, ork_nonfinite_kind(t->dtype, t->data, (uint64_t)bad));
    }
    return ORK_OK;
}

ork_status ork_train_ema_load(job *j, ork_st_file *f, const char *path) {
    if (!j->ema_on) return ORK_OK;
    if (j->tstream) ORK_TRY(ork_tstream_sync(j->tstream));
    for (int i = 0; i < j->n_params; i++) {
        char key[64];
        snprintf(key, sizeof key, "ema.%d", i);
        const ork_st_tensor *t = ork_st_find(f, key);
        size_t nb = 4 * (size_t)ork_tensor_numel(j->pt[i]);
        if (!t || t->nbytes != nb) return ORK_FAIL(ORK_E_INTERNAL, "%s: tensor '%s' has the wrong size", path, key);
        if (j->tstream) {
            memcpy(record_shadow(j, i), t->data, nb);
            continue;
        }
        void *h = malloc(nb ? nb : 1); /* the file's data may be unaligned */
        if (!h) return ORK_E_NOMEM;
        memcpy(h, t->data, nb);
        ork_status s = j->be->memcpy_h2d(&j->g->k, ork_tensor_data(j->ema[i]), h, nb);
        if (s == ORK_OK) s = j->be->sync(&j->g->k);
        free(h);
        ORK_TRY(s);
    }
    return ORK_OK;
}

/* ---- the LoRA file and the samples: the shadows in the parameters' place ----- */

/* ork_lora_save's reader: the shadow of the down/up tensor t. */
static ork_status ema_reader(void *ctx, const ork_tensor *t, float *host) {
    job *j = ctx;
    for (int i = 0; i < j->n_params; i++) {
        if (j->pt[i] != t) continue;
        size_t nb = 4 * (size_t)ork_tensor_numel(t);
        if (j->tstream) {
            memcpy(host, record_shadow(j, i), nb);
            return ORK_OK;
        }
        ORK_TRY(j->be->memcpy_d2h(&j->g->k, host, ork_tensor_data(j->ema[i]), nb));
        return j->be->sync(&j->g->k);
    }
    return ORK_FAIL(ORK_E_INTERNAL, "LoRA save: a tensor that is not a trained parameter");
}

ork_status ork_train_ema_lora_begin(job *j) {
    if (!j->ema_on) return ORK_OK;
    if (j->tstream) ORK_TRY(ork_tstream_sync(j->tstream));
    ork_lora_set_reader(j->lora, ema_reader, j);
    return ORK_OK;
}

void ork_train_ema_lora_end(job *j) {
    if (!j->ema_on) return;
    if (j->tstream) ork_train_streamed_reader(j);
    else ork_lora_set_reader(j->lora, NULL, NULL);
}

/* in: the live values saved aside (host) and the shadows written into the
 * parameters in their dtype (ema.py copy_to: param.data.copy_(shadow)); out:
 * the live values back. Between steps only. */
ork_status ork_train_ema_swap(job *j, int in) {
    if (!j->ema_on) return ORK_OK;
    ork_kctx *k = &j->g->k;
    if (j->tstream) ORK_TRY(ork_tstream_sync(j->tstream));
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *p = j->pt[i];
        size_t n = (size_t)ork_tensor_numel(p), nb = n * (p->dtype == ORK_F32 ? 4 : 2);
        char *live;
        if (j->tstream) {
            const ork_tstream_param *tp = &ork_tstream_get_layout(j->tstream)->params[i];
            live = (char *)ork_tstream_host(j->tstream, tp->block) + tp->data_offset;
            nb = tp->data_bytes;
        } else {
            live = NULL;
        }
        if (in) {
            if (!j->ema_saved[i] && !(j->ema_saved[i] = malloc(nb ? nb : 1))) return ORK_E_NOMEM;
            if (j->tstream) {
                memcpy(j->ema_saved[i], live, nb);
                const float *s = record_shadow(j, i);
                if (p->dtype == ORK_F32) memcpy(live, s, nb);
                else ork_bf16_from_f32(s, n, (uint16_t *)live);
            } else {
                ORK_TRY(j->be->memcpy_d2h(k, j->ema_saved[i], ork_tensor_data(p), nb));
                ORK_TRY(j->be->axpby(k, (int64_t)n, 1.0f, ork_tensor_data(j->ema[i]), ORK_F32, 0.0f, ork_tensor_data(p),
                                     p->dtype));
            }
        } else if (j->ema_saved[i]) {
            if (j->tstream) memcpy(live, j->ema_saved[i], nb);
            else ORK_TRY(j->be->memcpy_h2d(k, ork_tensor_data(p), j->ema_saved[i], nb));
        }
    }
    if (j->tstream) ork_tstream_refresh_shadows(j->tstream);
    return j->be->sync(k);
}
