/* train/optimizer.c — the job's optimizer with the LoRA tensors resident:
 * its state tensors, the global gradient norm, the step over every parameter
 * and the gradients zeroed. (Streamed per block instead: state_stream.c.)
 * [control-thread] */
#include "train/job.h"

#include "util/log.h"

#include <math.h>
#include <stdlib.h>

ork_status ork_train_setup_optimizer(job *j) {
    ORK_TRY(j->ovt->create(&j->c_opt->host, j->opt_params, &j->opt));
    int nm = ork_lora_count(j->lora);
    j->n_params = 2 * nm;
    j->pt = calloc((size_t)j->n_params, sizeof *j->pt);
    j->state = calloc((size_t)j->n_params, sizeof *j->state);
    if (!j->pt || !j->state) return ORK_E_NOMEM;
    for (int i = 0; i < nm; i++) {
        j->pt[2 * i] = ork_lora_at(j->lora, i)->down;
        j->pt[2 * i + 1] = ork_lora_at(j->lora, i)->up;
    }
    size_t total = 0;
    for (int i = 0; i < j->n_params; i++) {
        size_t bytes = 0;
        ORK_TRY(j->ovt->state_bytes(j->opt, j->pt[i]->dtype, ork_tensor_numel(j->pt[i]), &bytes));
        int64_t n = (int64_t)(bytes ? bytes : 1);
        total += (size_t)n;
        if (j->plan->trainable_streamed) continue; /* in the block's host record (ork_train_streamed_setup) */
        ORK_TRY(ork_tensor_new(j->alloc, "optimizer", ORK_U8, 1, &n, 0, &j->state[i]));
        void *z = calloc(1, (size_t)n);
        if (!z) return ORK_E_NOMEM;
        ork_kctx *k = &j->g->k;
        ork_status s = j->be->memcpy_h2d(k, ork_tensor_data(j->state[i]), z, (size_t)n);
        if (s == ORK_OK) s = j->be->sync(k);
        free(z);
        ORK_TRY(s);
    }
    int64_t np = j->n_params;
    ORK_TRY(ork_tensor_new(j->alloc, "workspace", ORK_F32, 1, &np, 0, &j->norms));
    ORK_INFO("optimizer %s: %d tensors, %.1f MiB of state", j->c_opt->c->id, j->n_params, (double)total / 1048576.0);
    return ORK_OK;
}

/* Global L2 norm of the LoRA gradients (missing grads count as zero). */
ork_status ork_train_grad_norm(job *j, double *out) {
    ork_kctx *k = &j->g->k;
    float *dn = ork_tensor_data(j->norms);
    ORK_TRY(j->be->fill(k, j->n_params, 0.0f, dn, ORK_F32));
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *gr = j->pt[i]->grad;
        if (!gr) continue;
        ORK_TRY(j->be->reduce(k, ORK_REDUCE_SUMSQ, ork_tensor_numel(gr), ork_tensor_data(gr), gr->dtype, dn + i));
    }
    float *h = malloc((size_t)j->n_params * sizeof *h);
    if (!h) return ORK_E_NOMEM;
    ork_status s = j->be->memcpy_d2h(k, h, dn, (size_t)j->n_params * sizeof *h);
    if (s == ORK_OK) s = j->be->sync(k);
    double sum = 0;
    for (int i = 0; s == ORK_OK && i < j->n_params; i++) sum += h[i];
    free(h);
    *out = sqrt(sum);
    return s;
}

ork_status ork_train_optimizer_step(job *j, int64_t step, double lr, float grad_scale) {
    if (grad_scale != 1.0f) /* clipping: scale the gradients in place */
        for (int i = 0; i < j->n_params; i++) {
            ork_tensor *gr = j->pt[i]->grad;
            if (gr) ORK_TRY(j->be->axpby(&j->g->k, ork_tensor_numel(gr), grad_scale, ork_tensor_data(gr), gr->dtype,
                                         0.0f, ork_tensor_data(gr), gr->dtype));
        }
    size_t cap = j->n_params > 0 ? (size_t)j->n_params : 1;
    ork_opt_param *ps = calloc(cap, sizeof *ps);
    int32_t *ids = calloc(cap, sizeof *ids); /* keys per-parameter randomness, as a streamed block's step does */
    if (!ps || !ids) {
        free(ps);
        free(ids);
        return ORK_E_NOMEM;
    }
    int n = 0;
    for (int i = 0; i < j->n_params; i++) {
        ork_tensor *t = j->pt[i];
        if (!t->grad) continue; /* no gradient reached it this step */
        ids[n] = (int32_t)i;
        ps[n].name = "";
        ps[n].dtype = t->dtype;
        ps[n].numel = ork_tensor_numel(t);
        ps[n].data = ork_tensor_data(t);
        ps[n].grad = ork_tensor_data(t->grad);
        ps[n].state = ork_tensor_data(j->state[i]);
        n++;
    }
    ork_opt_step st = {.abi = ORK_ABI_INIT(ork_opt_step), .step = step, .lr = lr, .grad_scale = 1.0f,
                       .device = j->be->device, .stream = j->g->k.stream, .seed = j->seed, .param_ids = ids,
                       .whole = 1, .base_lr = j->p->train.lr};
    ork_status s = n ? j->ovt->step(j->opt, &st, ps, n) : ORK_OK;
    free(ps);
    free(ids);
    return s;
}

ork_status ork_train_zero_grads(job *j) {
    for (int i = 0; i < j->n_params; i++) ORK_TRY(ork_tensor_zero_grad(j->g, j->pt[i]));
    return ORK_OK;
}
