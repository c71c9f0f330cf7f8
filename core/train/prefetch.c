/* train/prefetch.c — micro-batch inputs: built on the host from the latent
 * cache and the step's noise and timesteps (a pure function of the
 * micro-batch number), micro-batch k + 1's on a thread while the device runs
 * k's (in_next; micro_step joins it first), and uploaded in the activation
 * dtype. A caption's text embedding is read from its text cache file here,
 * when the batch is assembled (text_glue.c: not held in host memory). [control-thread; ork_train_inputs_build also on the builder thread] */
#include "train/job.h"

#include "platform/platform.h"
#include "train/rng.h"
#include "train/text_cache.h" /* ork_train_text_read */

#include <stdlib.h>
#include <string.h>

ork_status ork_train_upload_act(job *j, const float *host, int ndim, const int64_t *shape, ork_tensor **out) {
    ORK_TRY(j->ta->from_host(j->g, ORK_F32, ndim, shape, host, out));
    if (j->g->act_dt != ORK_F32) ORK_TRY(j->ops->cast(j->g, *out, j->g->act_dt, out));
    return ORK_OK;
}

/* Micro-batch k's inputs built on the host (from the latent cache and the
 * step's noise and timesteps): a pure function of k. */
void ork_train_inputs_free(step_inputs *si) {
    free(si->x0); free(si->xt); free(si->tg); free(si->txt); free(si->vec); free(si->dtxt); free(si->dvec);
    memset(si, 0, sizeof *si);
    si->k = -1;
}

ork_status ork_train_inputs_build(job *j, int64_t k, step_inputs *si) {
    const int C = j->info.token_channels, ctx = j->info.context_dim, T = j->T;
    int B = ork_train_batch_of(j), idx[256], slot[256], nb;
    ork_train_inputs_free(si);
    ORK_TRY(ork_train_shard_items(j, k, B, idx, slot, &nb));
    const item *first = &j->items[idx[0]];
    int N = first->h_tok * first->w_tok;
    size_t nt = (size_t)nb * N * C;
    si->nb = nb;
    si->N = N;
    si->h_tok = first->h_tok;
    si->w_tok = first->w_tok;
    si->x0 = malloc(nt * sizeof *si->x0);
    si->xt = malloc(nt * sizeof *si->xt);
    si->tg = malloc(nt * sizeof *si->tg);
    si->txt = calloc((size_t)nb * T * ctx, sizeof *si->txt);
    si->vec = j->info.vec_dim ? calloc((size_t)nb * j->info.vec_dim, sizeof *si->vec) : NULL;
    if (j->dop_on) { /* DOP's class prompts (train/dop.h) */
        si->dtxt = calloc((size_t)nb * T * ctx, sizeof *si->dtxt);
        si->dvec = j->info.vec_dim ? calloc((size_t)nb * j->info.vec_dim, sizeof *si->dvec) : NULL;
    }
    if (!si->x0 || !si->xt || !si->tg || !si->txt || (!si->vec && j->info.vec_dim) ||
        (j->dop_on && (!si->dtxt || (!si->dvec && j->info.vec_dim)))) {
        ork_train_inputs_free(si);
        return ORK_E_NOMEM;
    }
    ork_rng rn, rt;
    ork_rng_init(&rn, j->seed, ORK_RNG_NOISE);
    ork_rng_seek(&rn, (uint64_t)k << 32);
    ork_rng_init(&rt, j->seed, ORK_RNG_TIMESTEP);
    ork_rng_seek(&rt, (uint64_t)k << 16);
    /* flux_shift's mu from this micro-batch's own size (one bucket), as ai-toolkit
     * takes each batch's, not the first image's */
    ork_ts_params tp = j->ts;
    tp.image_seq_len = (int64_t)first->h_tok * first->w_tok;
    si->wsum = 0;
    for (int b = 0, drawn = 0; b < nb; b++) {
        const item *it = &j->items[idx[b]];
        float w;
        /* slot s of the global batch: the s-th timestep draw, noise from s·N·C normals on */
        for (; drawn < slot[b]; drawn++) ork_ts_sample(&tp, &rt, &si->ts[b], &w);
        ork_ts_sample(&tp, &rt, &si->ts[b], &w);
        drawn++;
        ork_rng_seek(&rn, ((uint64_t)k << 32) + (uint64_t)slot[b] * (uint64_t)N * (uint64_t)C);
        si->wsum += w;
        si->gd[b] = (float)j->p->train.cfg_scale;
        float t = si->ts[b];
        for (size_t q = 0; q < (size_t)N * C; q++) {
            float e = (float)ork_rng_normal(&rn), x = it->tokens[q];
            size_t o = (size_t)b * N * C + q;
            si->x0[o] = x;
            si->xt[o] = (1.0f - t) * x + t * e;
            si->tg[o] = e - x;
        }
        const float *txt = it->txt, *vec = it->vec;
        /* valid txt rows: the caption's own for an UNMASKED slot (its rows past them are zero), else T */
        int len = txt && it->txt_len > 0 ? it->txt_len : T, dlen = T;
        int dropped = ork_train_text_drop(j, k, slot[b], it, &txt, &vec, &len); /* caption dropout (text_glue.c): NULL is zeros */
        if (dropped && !txt) len = T;
        si->tlen[b] = len;
        const float *dt = NULL, *dv = NULL; /* DOP: the class prompt of the caption trained on (text_glue.c) */
        if (j->dop_on && ork_train_text_dop(j, it, dropped, &dt, &dv, &dlen)) {
            memcpy(si->dtxt + (size_t)b * T * ctx, dt, (size_t)T * ctx * sizeof *si->dtxt);
            if (si->dvec && dv) memcpy(si->dvec + (size_t)b * j->info.vec_dim, dv, (size_t)j->info.vec_dim * sizeof *si->dvec);
        }
        si->dlen[b] = dlen;
        if (!dropped && !txt) { /* the caption's embedding, read from its text cache file (text_glue.c) */
            int got = 0;
            ork_status s = ork_train_text_read(j, it, si->txt + (size_t)b * T * ctx,
                                               si->vec ? si->vec + (size_t)b * j->info.vec_dim : NULL, &got, &len);
            if (s != ORK_OK) {
                ork_train_inputs_free(si);
                return s;
            }
            if (got) {
                si->tlen[b] = len;
                continue;
            }
        }
        if (txt) memcpy(si->txt + (size_t)b * T * ctx, txt, (size_t)T * ctx * sizeof *si->txt);
        if (si->vec && vec) memcpy(si->vec + (size_t)b * j->info.vec_dim, vec, (size_t)j->info.vec_dim * sizeof *si->vec);
    }
    si->k = k;
    return ORK_OK;
}

/* The builder thread: micro-batch in_next.k's inputs (it alone touches the
 * data order cache while it runs; micro_step joins it before anything else). */
typedef struct inputs_job {
    job *j;
    int64_t k;
} inputs_job;

static void inputs_thread(void *arg) {
    inputs_job *ij = arg;
    ij->j->in_st = ork_train_inputs_build(ij->j, ij->k, &ij->j->in_next);
    free(ij);
}

void ork_train_inputs_join(job *j) {
    if (!j->in_running) return;
    ork_thread_join(j->in_thread);
    j->in_thread = NULL;
    j->in_running = 0;
}

void ork_train_inputs_ahead(job *j, int64_t k) {
    inputs_job *ij = malloc(sizeof *ij);
    if (!ij) return; /* built when needed instead */
    *ij = (inputs_job){j, k};
    j->in_next.k = -1;
    if (ork_thread_start(inputs_thread, ij, &j->in_thread) != ORK_OK) {
        free(ij);
        return;
    }
    j->in_running = 1;
}
