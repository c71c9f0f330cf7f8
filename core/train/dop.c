/* train/dop.c — differential output preservation (train/dop.h: what
 * ai-toolkit does): the class prompt of a caption, the checks, the prior
 * prediction with the LoRA off and the preservation step of a micro-batch.
 * Owns j->dop_w, j->dop_lo, j->dop_prior. [control-thread] */
#include "train/dop.h"
#include "train/job.h"

#include "platform/platform.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ork_status ork_dop_caption(const char *caption, const char *trigger, const char *cls, char **out) {
    *out = NULL;
    if (!caption) caption = "";
    if (!cls) cls = "";
    size_t lc = strlen(caption), lt = trigger ? strlen(trigger) : 0, lk = strlen(cls), n = 0;
    if (!trigger) return (*out = strdup(caption)) ? ORK_OK : ORK_E_NOMEM;
    if (lt == 0) { /* Python: cls before every code point and at the end */
        for (size_t i = 0; i < lc; i++) n += ((unsigned char)caption[i] & 0xC0) != 0x80;
        char *o = malloc(lc + (n + 1) * lk + 1), *w = o;
        if (!o) return ORK_E_NOMEM;
        for (size_t i = 0; i < lc; i++) {
            if (((unsigned char)caption[i] & 0xC0) != 0x80) { memcpy(w, cls, lk); w += lk; }
            *w++ = caption[i];
        }
        memcpy(w, cls, lk);
        w[lk] = 0;
        *out = o;
        return ORK_OK;
    }
    for (const char *p = caption; (p = strstr(p, trigger)); p += lt) n++;
    char *o = malloc(lc + n * lk + 1), *w = o; /* lk ≥ lt or not: the length is lc - n·lt + n·lk ≤ lc + n·lk */
    if (!o) return ORK_E_NOMEM;
    for (const char *p = caption;;) {
        const char *q = strstr(p, trigger);
        size_t k = q ? (size_t)(q - p) : strlen(p);
        memcpy(w, p, k);
        w += k;
        if (!q) break;
        memcpy(w, cls, lk);
        w += lk;
        p = q + lt;
    }
    *w = 0;
    *out = o;
    return ORK_OK;
}

/* ---- the job -------------------------------------------------------------------- */

ork_status ork_train_dop_check(job *j) {
    if (!j->p->train.diff_output_preservation) return ORK_OK;
    const char *f = ork_config_file(j->cfg);
    if (!j->p->trigger_word)
        return ORK_FAIL(ORK_E_CONFIG, "%s: train.diff_output_preservation needs trigger_word (the word each caption's "
                        "class prompt replaces with diff_output_preservation_class)", f);
    if (j->plan && j->plan->trainable_streamed)
        return ORK_FAIL(ORK_E_CONFIG, "%s: train.diff_output_preservation is not implemented with the trainable state "
                        "streamed per block (its second backward would step each block twice): set "
                        "model.stream_trainable_state: never, or a larger model.vram_budget_gb", f);
    return ORK_OK;
}

ork_status ork_train_dop_setup(job *j) {
    const ork_train_config *t = &j->p->train;
    if (!t->diff_output_preservation) return ORK_OK;
    ORK_TRY(ork_train_dop_check(j)); /* preflight's, again: the trainable state as set up */
    if (j->tstream)
        return ORK_FAIL(ORK_E_CONFIG, "%s: train.diff_output_preservation is not implemented with the trainable state "
                        "streamed per block", ork_config_file(j->cfg));
    if (!j->text)
        return ORK_FAIL(ORK_E_CONFIG, "%s: train.diff_output_preservation needs the model's text encoders to encode the "
                        "class prompts (this model has none)", ork_config_file(j->cfg));
    int nm = ork_lora_count(j->lora);
    j->dop_w = calloc((size_t)nm + 1, sizeof *j->dop_w);
    j->dop_lo = calloc((size_t)nm + 1, sizeof *j->dop_lo);
    if (!j->dop_w || !j->dop_lo) return ORK_E_NOMEM;
    for (int i = 0; i < nm; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s.weight", ork_lora_module(j->lora, i));
        j->dop_w[i] = ork_wstore_find(j->ws, name);
        if (!j->dop_w[i] || !j->dop_w[i]->lora)
            return ORK_FAIL(ORK_E_INTERNAL, "DOP: the adapted weight '%s' is not in the weight store", name);
        j->dop_lo[i] = j->dop_w[i]->lora;
    }
    j->dop_on = 1;
    /* the streamer's loans and copies ahead assume one forward per micro-batch before its backward:
     * DOP runs three, so the gradients are not lent and nothing is copied ahead (plan_glue.c) */
    j->lend_off = j->ahead_off = 1;
    ORK_INFO("differential output preservation: class '%s' for trigger '%s', multiplier %g: each step adds a "
             "forward with the LoRA off and a forward and backward on the class prompts",
             t->diff_output_preservation_class ? t->diff_output_preservation_class : "", j->p->trigger_word,
             t->diff_output_preservation_multiplier);
    return ORK_OK;
}

void ork_train_dop_free(job *j) {
    free(j->dop_w);
    free(j->dop_lo);
    free(j->dop_prior);
    j->dop_w = NULL;
    j->dop_lo = NULL;
    j->dop_prior = NULL;
}

/* The LoRA off (0) or on again (1) on every adapted weight. */
static void lora_active(job *j, int on) {
    for (int i = 0; i < ork_lora_count(j->lora); i++) j->dop_w[i]->lora = on ? j->dop_lo[i] : NULL;
}

ork_status ork_train_dop_prior(job *j, ork_model_inputs *in, const step_inputs *si) {
    if (!j->dop_on) return ORK_OK;
    const int ctx = j->info.context_dim, T = j->T, C = j->info.token_channels;
    /* a micro-batch of one: the class prompt's own rows (an UNMASKED slot, prefetch.c) */
    int64_t sht[3] = {si->nb, si->nb == 1 ? si->dlen[0] : T, ctx}, shv[2] = {si->nb, j->info.vec_dim};
    /* the class prompts, up for the prior and for the preservation step (the graph keeps them to its reset) */
    ORK_TRY(ork_train_upload_act(j, si->dtxt, 3, sht, &j->dop_txt));
    j->dop_vec = NULL;
    if (si->dvec) ORK_TRY(ork_train_upload_act(j, si->dvec, 2, shv, &j->dop_vec));
    ork_model_inputs pin = *in;
    pin.txt = j->dop_txt;
    pin.vec = j->dop_vec ? j->dop_vec : in->vec;
    size_t n = (size_t)si->nb * si->N * C;
    if (n > j->dop_prior_n) {
        free(j->dop_prior);
        if (!(j->dop_prior = malloc(n * sizeof *j->dop_prior))) return ORK_E_NOMEM;
        j->dop_prior_n = n;
    }
    ork_tensor *pred = NULL;
    lora_active(j, 0); /* SDTrainer.get_prior_prediction: network.is_active = False, torch.no_grad() */
    ork_status s = ork_runner_forward(j->runner, &pin, &pred);
    lora_active(j, 1);
    ORK_TRY(s);
    if ((size_t)ork_tensor_numel(pred) != n)
        return ORK_FAIL(ORK_E_INTERNAL, "DOP: the prior prediction has %lld elements, the micro-batch %zu",
                        (long long)ork_tensor_numel(pred), n);
    ORK_TRY(j->ta->to_host(j->g, pred, ORK_F32, j->dop_prior)); /* detached: a target on the host */
    /* ORAKUL_DOP_DUMP=dir (tests/dop): each prior as dir/prior_<micro-batch>.f32 (raw F32) */
    const char *dump = getenv("ORAKUL_DOP_DUMP");
    if (dump && *dump) {
        char path[1100];
        snprintf(path, sizeof path, "%s/prior_%lld.f32", dump, (long long)si->k);
        FILE *f = ork_fopen(path, "wb");
        int ok = f && fwrite(j->dop_prior, sizeof *j->dop_prior, n, f) == n;
        if (f && fclose(f) != 0) ok = 0;
        if (!ok) ORK_WARN("ORAKUL_DOP_DUMP: cannot write %s", path);
    }
    return ORK_OK;
}

typedef struct pres_ctx {
    job *j;
    ork_tensor *prior;
    float scale;
} pres_ctx;

/* preservation_loss = mse_loss(pred, prior) × multiplier (× 1/accumulation) */
static ork_status pres_loss(void *ctx, ork_graph *g, ork_tensor *pred, ork_tensor **loss) {
    pres_ctx *pc = ctx;
    ORK_TRY(pc->j->ops->mse(g, pred, pc->prior, loss));
    if (pc->scale != 1.0f) ORK_TRY(pc->j->ops->scale(g, *loss, pc->scale, loss));
    return ORK_OK;
}

ork_status ork_train_dop_step(job *j, const ork_model_inputs *in, const step_inputs *si, float inv_accum,
                              float *loss_out) {
    *loss_out = 0;
    if (!j->dop_on) return ORK_OK;
    const int C = j->info.token_channels;
    int64_t sh3[3] = {si->nb, si->N, C};
    pres_ctx pc = {.j = j, .scale = (float)j->p->train.diff_output_preservation_multiplier * inv_accum};
    ORK_TRY(ork_train_upload_act(j, j->dop_prior, 3, sh3, &pc.prior));
    ork_model_inputs pin = *in;
    pin.txt = j->dop_txt;
    pin.vec = j->dop_vec ? j->dop_vec : in->vec;
    /* the LoRA dropout masks of this forward: its own draw, a function of (seed, k) as the main one */
    uint64_t ds = j->g->dropout_seed;
    if (ds) j->g->dropout_seed = ds ^ 0xD0D0D0D0D0D0D0D0ull ? ds ^ 0xD0D0D0D0D0D0D0D0ull : 1;
    ork_status s = ork_runner_step(j->runner, &pin, j->p->train.gradient_checkpointing, pres_loss, &pc, loss_out);
    j->g->dropout_seed = ds;
    return s;
}
