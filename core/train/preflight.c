/* train/preflight.c — the checks `orakul run` makes before it loads the
 * weights, made in one place so that `orakul plan` makes every one of them
 * too: what plan accepts, run accepts up to step 1, and what run refuses
 * there, plan refuses with the same line (exit 2 from both). The model's
 * codec against its token channels, what the residency plan needs from the
 * config (gradient checkpointing, no accumulation with the trainable state
 * streamed), the loss and optimizer parameters, the text embeddings beside
 * the images and those of the sample prompts. [control-thread] */
#include "train/job.h"

#include "io/st_check.h"
#include "numerics/finite.h"
#include "platform/platform.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

ork_status ork_train_preflight_status(ork_status s) { return s == ORK_E_BUDGET ? ORK_E_CONFIG : s; }

int ork_train_text_len(const job *j) { return j->info.context_len > 0 ? j->info.context_len : 512; }

/* "<dir>/<stem>.te.safetensors" of an image path. */
static void te_path(const char *img_path, char *te, size_t n) {
    const char *slash = strrchr(img_path, '/'), *base = slash ? slash + 1 : img_path;
    const char *dot = strrchr(base, '.');
    int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    int dlen = slash ? (int)(slash - img_path) : 1;
    snprintf(te, n, "%.*s/%.*s.te.safetensors", dlen, slash ? img_path : ".", stem, base);
}

/* A text embedding is floating point (fuzz_text_cache: a U8 or I32 'txt' was
 * accepted here and failed later as "cannot be converted", exit 1). */
static int float_dtype(const ork_st_tensor *t) {
    return t->dtype == ORK_F32 || t->dtype == ORK_F16 || t->dtype == ORK_BF16 || t->dtype == ORK_F64;
}

static const char *dims(const ork_st_tensor *t, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    return buf;
}

ork_status ork_train_open_text(const job *j, const char *img_path, char *te, size_t n, ork_st_file **out) {
    *out = NULL;
    te_path(img_path, te, n);
    if (!ork_path_access(te, 0)) return ORK_OK; /* none: zeros */
    ork_st_file *f;
    ORK_TRY(ork_st_open(te, &f));
    const ork_st_tensor *t = ork_st_find(f, "txt"), *v = ork_st_find(f, "vec");
    int T = ork_train_text_len(j);
    char buf[96];
    ork_status s = ORK_OK;
    if (!t)
        s = ORK_FAIL(ORK_E_FORMAT, "%s: no tensor 'txt' (the text embedding, (%d, %d) for this model)", te, T,
                     j->info.context_dim);
    else if (t->ndim != 2 || t->shape[1] != j->info.context_dim || t->shape[0] != T)
        s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor 'txt' is (%s); this model takes (%d, %d): %d text tokens of width %d",
                     te, dims(t, buf, sizeof buf), T, j->info.context_dim, T, j->info.context_dim);
    else if (j->info.vec_dim > 0 && v && (v->ndim != 1 || v->shape[0] != j->info.vec_dim))
        s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor 'vec' must be (%d) for this model", te, j->info.vec_dim);
    else if (!float_dtype(t) || (j->info.vec_dim > 0 && v && !float_dtype(v))) {
        const ork_st_tensor *bad = float_dtype(t) ? v : t;
        s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is %s; a text embedding is F32, F16, BF16 or F64", te, bad->name,
                     bad->dtype_name ? bad->dtype_name : "?");
    }
    /* its checksums when it carries them, and finite values: orakul cannot
     * make a text embedding again, so a damaged one is refused (issue #26) */
    int verified;
    if (s == ORK_OK) s = ork_st_verify(f, &verified);
    const ork_st_tensor *chk[2] = {t, j->info.vec_dim > 0 ? v : NULL};
    for (int q = 0; s == ORK_OK && q < 2; q++) {
        int64_t bad = chk[q] ? ork_first_nonfinite(chk[q]->dtype, chk[q]->data, ork_st_nelements(chk[q])) : -1;
        if (bad >= 0)
            s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' element %lld is %s: the text embedding is not finite; encode "
                         "the caption again (tests/reference/encode_text.py) or delete the file (orakul then encodes the caption)", te, chk[q]->name, (long long)bad,
                         ork_nonfinite_kind(chk[q]->dtype, chk[q]->data, (uint64_t)bad));
    }
    if (s != ORK_OK) {
        ork_st_close(f);
        return s;
    }
    *out = f;
    return ORK_OK;
}

ork_status ork_train_check_texts(const job *j, const ork_dataset *ds) {
    for (size_t i = 0; i < ds->n; i++) {
        char te[1200];
        ork_st_file *f;
        ORK_TRY(ork_train_open_text(j, ds->items[i].path, te, sizeof te, &f));
        ork_st_close(f);
    }
    return ORK_OK;
}

/* The model must turn images into its tokens (model.h: pixels_per_token 0 is
 * no codec); the hint comes from the codec slots it declares. */
static ork_status check_codec(job *j) {
    if (ork_model_codec_present(&j->codec) && j->info.pixels_per_token > 0) return ORK_OK;
    ork_loc at;
    char what[512], fix[768] = "set one in the model's model_kwargs";
    snprintf(what, sizeof what, "model %s (%s) takes %d-channel latent tokens and has no image codec that gives them",
             j->p->model.name_or_path, j->info.variant ? j->info.variant : "?", j->info.token_channels);
    if (ork_model_info_has_codec(&j->info) && j->info.n_codecs > 0) {
        char hint[640];
        ork_model_codec_hint(&j->info, hint, sizeof hint);
        snprintf(fix, sizeof fix, "set one in %s", hint);
    }
    if (ork_config_where(j->cfg, "model.name_or_path", &at) && at.line > 0)
        return ork_config_fail_at(&at, ORK_E_CONFIG, "%s: %s", what, fix);
    return ORK_FAIL(ORK_E_CONFIG, "%s: %s: %s", ork_config_file(j->cfg), what, fix);
}

/* What the residency plan asks of the config. */
static ork_status check_streaming(job *j) {
    const ork_train_config *t = &j->p->train;
    /* test-only: stream the trainable state even when everything fits (docs/streaming.md §4) */
    const char *force = getenv("ORAKUL_STREAM_TRAINABLES");
    if (force && atoi(force) > 0 && !j->plan->trainable_streamed) {
        j->plan->trainable_streamed = 1;
        ORK_INFO("ORAKUL_STREAM_TRAINABLES: streaming the trainable state per block although the plan does not need it");
    }
    if (j->plan->trainable_streamed) {
        if (j->dist)
            return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams the trainable state per block, which multi-GPU training "
                            "does not support yet: raise model.vram_budget_gb or lower the LoRA rank",
                            ork_config_file(j->cfg));
        if (t->gradient_accumulation_steps > 1)
            return ORK_FAIL(ORK_E_CONFIG, "%s: train.gradient_accumulation_steps %lld: the plan streams the trainable state "
                            "per block, which steps each block right after its backward and cannot accumulate; use 1 "
                            "(raise batch_size instead) or raise model.vram_budget_gb", ork_config_file(j->cfg),
                            (long long)t->gradient_accumulation_steps);
        if (!t->gradient_checkpointing)
            return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams the trainable state per block, which needs "
                            "train.gradient_checkpointing: true", ork_config_file(j->cfg));
    }
    if (j->plan->n_streamed > 0 && !t->gradient_checkpointing)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the plan streams %d blocks, which needs train.gradient_checkpointing: true",
                        ork_config_file(j->cfg), j->plan->n_streamed);
    return ORK_OK;
}

/* The loss and the optimizer take their parameters (each plugin logs its line). */
static ork_status check_components(job *j) {
    void *tmp = NULL;
    ORK_TRY(j->lvt->create(&j->c_loss->host, j->loss_params, &tmp));
    j->lvt->destroy(tmp);
    tmp = NULL;
    ORK_TRY(j->ovt->create(&j->c_opt->host, j->opt_params, &tmp));
    j->ovt->destroy(tmp);
    return ORK_OK;
}

ork_status ork_train_preflight(job *j) {
    ORK_TRY(check_codec(j));
    ORK_TRY(check_streaming(j));
    ORK_TRY(check_components(j));
    ORK_TRY(ork_train_dop_check(j)); /* DOP's refusals that need no weights (dop.c) */
    /* the sample prompts (text embeddings given as files are read and checked here) */
    j->T = ork_train_text_len(j);
    if (!j->samples) ORK_TRY(ork_samples_create(j->cfg, &j->info, j->T, j->out_dir, j->name, &j->samples));
    return ORK_OK;
}
