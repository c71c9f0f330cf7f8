/* train/checkpoint.c — what a run leaves to resume from and to use: the
 * training state (<name>_state.safetensors: LoRA tensors, optimizer state, the
 * step and the data position; written atomically with per-tensor checksums,
 * verified, validated and checked for finiteness when read back at start-up),
 * the LoRA file of a step (<name>_<step>.safetensors, the newest kept; never
 * one with a NaN or Inf), the refusal to overwrite LoRA files that no state
 * accounts for, and the temp files an interrupted save left. Issue #26;
 * docs/outputs.md, "What orakul refuses to load or save". [control-thread] */
#include "train/job.h"

#include "io/st_check.h"
#include "numerics/finite.h"
#include "platform/platform.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the user can do about a state that cannot be resumed. */
#define STATE_ADVICE "restore a good copy, or move it away and run with --overwrite to start over"

/* The data position after `step` (a global sample position: a resume with
 * another number of GPUs continues from it), into and out of the state file. */
static ork_status data_pos_save(job *j, ork_st_writer *w, int64_t step) {
    int64_t G = (int64_t)ork_dist_world(j->dist) * ork_train_batch_of(j);
    ork_data_pos at = ork_shard_advance(j->n_items, G, j->data_at, step * ork_train_accum_of(j) - j->data_k);
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)at.epoch);
    ORK_TRY(ork_st_writer_meta(w, "data_epoch", v));
    snprintf(v, sizeof v, "%lld", (long long)at.offset);
    ORK_TRY(ork_st_writer_meta(w, "data_offset", v));
    snprintf(v, sizeof v, "%lld", (long long)G);
    return ork_st_writer_meta(w, "global_batch", v);
}
static void data_pos_load(job *j, const ork_data_pos *at, int64_t step, int64_t global_batch) {
    if (!at) return; /* an older state: the position follows from the step */
    j->data_at = *at;
    j->data_k = step * ork_train_accum_of(j);
    int64_t G = (int64_t)ork_dist_world(j->dist) * ork_train_batch_of(j);
    if (global_batch > 0 && global_batch != G)
        ORK_INFO("resuming at sample %lld of epoch %lld with a global batch of %lld (the state was saved with %lld)",
                 (long long)j->data_at.offset, (long long)j->data_at.epoch, (long long)G, (long long)global_batch);
}

/* ---- the config a state was trained with ---------------------------------- */

/* The settings that change what training does, as "cfg.<yaml key>" metadata
 * of the state: a resumed run whose config differs says which in one warning
 * (rank and optimizer differences are refused by the tensors' shapes and the
 * "optimizer" entry). Values are text; doubles with 15 significant digits. */
typedef struct cfg_kv {
    char key[72];
    char val[400];
} cfg_kv;

enum { CFG_MAX = 24 + 6 * 8 };

static int cfg_add(cfg_kv *kv, int n, const char *key, const char *fmt, ...) ORK_PRINTF(4, 5);
static int cfg_add(cfg_kv *kv, int n, const char *key, const char *fmt, ...) {
    if (n >= CFG_MAX) return n;
    snprintf(kv[n].key, sizeof kv[n].key, "cfg.%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv[n].val, sizeof kv[n].val, fmt, ap);
    va_end(ap);
    return n + 1;
}

static int cfg_entries(const job *j, cfg_kv *kv) {
    const ork_process_config *p = j->p;
    const ork_train_config *t = &p->train;
    int n = 0;
#define S(x) ((x) ? (x) : "")
    n = cfg_add(kv, n, "model.name_or_path", "%s", S(p->model.name_or_path));
    n = cfg_add(kv, n, "model.qtype", "%s", S(p->model.qtype));
    n = cfg_add(kv, n, "network.linear", "%lld", (long long)p->network.linear);
    n = cfg_add(kv, n, "network.linear_alpha", "%.15g", p->network.linear_alpha);
    n = cfg_add(kv, n, "network.dropout", "%.15g", p->network.dropout);
    n = cfg_add(kv, n, "network.weight_dtype", "%s", S(p->network.weight_dtype));
    n = cfg_add(kv, n, "train.lr", "%.15g", t->lr);
    n = cfg_add(kv, n, "train.lr_scheduler", "%s", S(t->lr_scheduler));
    n = cfg_add(kv, n, "train.batch_size", "%lld", (long long)t->batch_size);
    n = cfg_add(kv, n, "train.gradient_accumulation_steps", "%lld", (long long)t->gradient_accumulation_steps);
    n = cfg_add(kv, n, "train.timestep_type", "%s", S(t->timestep_type));
    n = cfg_add(kv, n, "train.content_or_style", "%s", S(t->content_or_style));
    n = cfg_add(kv, n, "train.loss_type", "%s", S(t->loss_type));
    n = cfg_add(kv, n, "train.max_grad_norm", "%.15g", t->max_grad_norm);
    n = cfg_add(kv, n, "train.noise_offset", "%.15g", t->noise_offset);
    n = cfg_add(kv, n, "train.cfg_scale", "%.15g", t->cfg_scale);
    n = cfg_add(kv, n, "train.seed", "%lld", (long long)t->seed);
    n = cfg_add(kv, n, "train.ema_config.ema_decay", "%.15g", t->use_ema ? t->ema_decay : 0.0);
    n = cfg_add(kv, n, "trigger_word", "%s", S(p->trigger_word));
    n = cfg_add(kv, n, "datasets", "%zu", p->datasets.n);
    for (size_t d = 0; d < p->datasets.n && d < 8; d++) {
        const ork_dataset_config *dc = &p->datasets.v[d];
        char k[64], res[256] = "";
        size_t o = 0;
        for (size_t r = 0; r < dc->resolution.n && o < sizeof res; r++)
            o += (size_t)snprintf(res + o, sizeof res - o, "%s%lld", r ? "," : "", (long long)dc->resolution.v[r]);
        snprintf(k, sizeof k, "datasets[%zu].folder_path", d);
        n = cfg_add(kv, n, k, "%s", S(dc->folder_path));
        snprintf(k, sizeof k, "datasets[%zu].resolution", d);
        n = cfg_add(kv, n, k, "%s", res);
        snprintf(k, sizeof k, "datasets[%zu].num_repeats", d);
        n = cfg_add(kv, n, k, "%lld", (long long)dc->num_repeats);
        snprintf(k, sizeof k, "datasets[%zu].caption_ext", d);
        n = cfg_add(kv, n, k, "%s", S(dc->caption_ext));
        snprintf(k, sizeof k, "datasets[%zu].caption_dropout_rate", d);
        n = cfg_add(kv, n, k, "%.15g", dc->caption_dropout_rate);
        snprintf(k, sizeof k, "datasets[%zu].default_caption", d);
        n = cfg_add(kv, n, k, "%s", S(dc->default_caption));
    }
#undef S
    return n;
}

static ork_status cfg_save(const job *j, ork_st_writer *w) {
    cfg_kv *kv = malloc(CFG_MAX * sizeof *kv);
    if (!kv) return ORK_E_NOMEM;
    int n = cfg_entries(j, kv);
    /* a value the metadata cannot hold (a folder path that is not UTF-8) is left
     * out: it is only compared on resume, never needed to resume */
    ork_log_hold_begin();
    for (int i = 0; i < n; i++) (void)ork_st_writer_meta(w, kv[i].key, kv[i].val);
    ork_log_hold_end(NULL, 0);
    free(kv);
    return ORK_OK;
}

/* One warning listing what differs between the state's recorded config and
 * this one (entries the state does not record — an older state — are not
 * compared). */
static void cfg_compare(const job *j, ork_st_file *f, const char *path, int64_t step) {
    cfg_kv *kv = malloc(CFG_MAX * sizeof *kv);
    if (!kv) return;
    int n = cfg_entries(j, kv);
    char diff[1400] = "";
    size_t o = 0;
    int nd = 0;
    for (int i = 0; i < n; i++) {
        const char *was = ork_st_meta(f, kv[i].key);
        if (!was || !strcmp(was, kv[i].val)) continue;
        if (o < sizeof diff)
            o += (size_t)snprintf(diff + o, sizeof diff - o, "%s%s '%.80s' -> '%.80s'", nd ? ", " : "", kv[i].key + 4,
                                  was, kv[i].val);
        nd++;
    }
    const char *keys[256]; /* recorded entries this config no longer has (a dataset removed) */
    size_t nk = ork_st_meta_keys(f, keys, 256);
    for (size_t q = 0; q < nk && q < 256; q++) {
        if (strncmp(keys[q], "cfg.", 4)) continue;
        int have = 0;
        for (int i = 0; i < n && !have; i++) have = !strcmp(kv[i].key, keys[q]);
        if (have) continue;
        if (o < sizeof diff)
            o += (size_t)snprintf(diff + o, sizeof diff - o, "%s%s '%.80s' -> (none)", nd ? ", " : "", keys[q] + 4,
                                  ork_st_meta(f, keys[q]));
        nd++;
    }
    if (nd)
        ORK_WARN("%s: the config differs from the one this state was trained with (%s): resuming at step %lld with "
                 "the new values", path, diff, (long long)step);
    free(kv);
}

static ork_status dev_read(job *j, ork_tensor *t, void *host) {
    ORK_TRY(j->be->memcpy_d2h(&j->g->k, host, ork_tensor_data(t), ork_tensor_nbytes(t)));
    return j->be->sync(&j->g->k);
}
static ork_status dev_write(job *j, ork_tensor *t, const void *host) {
    ORK_TRY(j->be->memcpy_h2d(&j->g->k, ork_tensor_data(t), host, ork_tensor_nbytes(t)));
    return j->be->sync(&j->g->k);
}

static void state_path(job *j, char *buf, size_t n) { snprintf(buf, n, "%s/%s_state.safetensors", j->out_dir, j->name); }

/* The training state: LoRA tensors exactly (their own dtype), optimizer state
 * bytes and the step. Written atomically; everything else (data order, noise,
 * timesteps) is a function of the seed and the step. */
ork_status ork_train_save_state(job *j, int64_t step) {
    ork_st_writer *w;
    ORK_TRY(ork_st_writer_new(&w));
    ork_st_writer_checksum(w, 1); /* verified when resumed (st_check.h) */
    void **bufs = calloc((size_t)j->n_params * 3 + 1, sizeof *bufs); /* lora, opt, ema (ema.c) */
    ork_status s = bufs ? ORK_OK : ORK_E_NOMEM;
    if (s == ORK_OK && j->tstream) s = ork_train_streamed_save(j, w);
    for (int i = 0; s == ORK_OK && !j->tstream && i < j->n_params; i++) {
        ork_tensor *ts[2] = {j->pt[i], j->state[i]};
        for (int q = 0; s == ORK_OK && q < 2; q++) {
            size_t nb = ork_tensor_nbytes(ts[q]);
            void *h = malloc(nb ? nb : 1);
            if (!h) { s = ORK_E_NOMEM; break; }
            bufs[2 * i + q] = h;
            s = dev_read(j, ts[q], h);
            char key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            if (s == ORK_OK) s = ork_st_writer_add(w, key, ts[q]->dtype, ts[q]->ndim, ts[q]->shape, h, nb);
        }
    }
    if (s == ORK_OK) s = ork_train_ema_save(j, w, bufs + 2 * j->n_params);
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "step", v);
    snprintf(v, sizeof v, "%d", j->n_params);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "tensors", v);
    snprintf(v, sizeof v, "%lld", (long long)j->skipped);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "skipped", v);
    if (s == ORK_OK) s = data_pos_save(j, w, step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "optimizer", j->c_opt->c->id);
    if (s == ORK_OK) s = cfg_save(j, w);
    if (s == ORK_OK && j->tstream) { /* the previous step's norm: the clip factor of the next step */
        snprintf(v, sizeof v, "%.17g", ork_tstream_prev_norm(j->tstream));
        s = ork_st_writer_meta(w, "prev_norm", v);
    }
    char path[1200];
    state_path(j, path, sizeof path);
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    for (int i = 0; bufs && i < j->n_params * 3; i++) free(bufs[i]);
    free(bufs);
    return s;
}

/* ---- resuming: verified, validated, finite ------------------------------------ */

/* A strict decimal integer in [lo, hi]: digits with an optional '-', nothing
 * else (no spaces, no '+', no exponent). */
static int parse_i64(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || !*v) return 0;
    const char *d = v + (*v == '-');
    if (!*d || strspn(d, "0123456789") != strlen(d)) return 0;
    errno = 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

/* __metadata__[key] as an integer in [lo, hi] (what: the range in words).
 * Absent: ORK_OK with *present = 0 when optional, refused when required. */
static ork_status meta_i64(ork_st_file *f, const char *path, const char *key, int required, int64_t lo, int64_t hi,
                           const char *what, int64_t *out, int *present) {
    const char *v = ork_st_meta(f, key);
    if (present) *present = v != NULL;
    if (!v && !required) return ORK_OK;
    if (!v)
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ has no '%s': the state is incomplete; " STATE_ADVICE, path, key);
    if (!parse_i64(v, lo, hi, out))
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ '%s' is \"%.40s\", not %s: the state is damaged; " STATE_ADVICE,
                        path, key, v, what);
    return ORK_OK;
}

/* What a state's metadata says, every field checked. */
typedef struct state_meta {
    int64_t step, tensors, skipped, global_batch;
    ork_data_pos at;
    int has_at, has_norm;
    double prev_norm;
} state_meta;

static ork_status state_meta_read(job *j, ork_st_file *f, const char *path, state_meta *m) {
    memset(m, 0, sizeof *m);
    int has_e = 0, has_o = 0, has_s = 0, has_g = 0;
    ORK_TRY(meta_i64(f, path, "step", 1, 1, INT64_MAX, "a step number >= 1", &m->step, NULL));
    if (m->step > j->p->train.steps)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the state is at step %lld, past train.steps %lld: raise train.steps to train "
                        "on from it, or move it away and run with --overwrite to start over", path,
                        (long long)m->step, (long long)j->p->train.steps);
    ORK_TRY(meta_i64(f, path, "tensors", 1, 0, INT32_MAX, "a tensor count", &m->tensors, NULL));
    ORK_TRY(meta_i64(f, path, "skipped", 0, 0, m->step, "a count of skipped steps between 0 and the step", &m->skipped,
                     &has_s));
    /* step x accumulation micro-batches have gone by: at most that many epochs (fuzz_state) */
    int64_t samples = m->step * ork_train_accum_of(j);
    ORK_TRY(meta_i64(f, path, "data_epoch", 0, 0, samples + 1, "an epoch number from 0 to the micro-batches trained",
                     &m->at.epoch, &has_e));
    ORK_TRY(meta_i64(f, path, "data_offset", 0, 0, INT64_MAX / 2, "a sample offset >= 0", &m->at.offset, &has_o));
    if (has_e != has_o)
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ has '%s' without '%s': the state is damaged; " STATE_ADVICE, path,
                        has_e ? "data_epoch" : "data_offset", has_e ? "data_offset" : "data_epoch");
    m->has_at = has_e;
    ORK_TRY(meta_i64(f, path, "global_batch", 0, 1, INT32_MAX, "a batch size >= 1", &m->global_batch, &has_g));
    if (!has_g) m->global_batch = 0;
    const char *mo = ork_st_meta(f, "optimizer");
    if (!mo)
        return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ has no 'optimizer': the state is incomplete; " STATE_ADVICE, path);
    const char *pn = ork_st_meta(f, "prev_norm");
    if (pn) {
        char *end;
        errno = 0;
        double v = strtod(pn, &end);
        if (!*pn || *end || errno || !isfinite(v) || v < 0)
            return ORK_FAIL(ORK_E_FORMAT, "%s: __metadata__ 'prev_norm' is \"%.40s\", not a finite norm >= 0: the state "
                            "is damaged; " STATE_ADVICE, path, pn);
        m->prev_norm = v;
        m->has_norm = 1;
    }
    if (m->tensors != j->n_params || strcmp(mo, j->c_opt->c->id) != 0)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the saved training state (%lld tensors, optimizer %s) does not match this "
                        "config's LoRA network or optimizer (%d tensors, %s); move it away to start over", path,
                        (long long)m->tensors, mo, j->n_params, j->c_opt->c->id);
    (void)has_s;
    return ORK_OK;
}

/* Every tensor the state must hold, with this config's dtype and shape, and
 * finite: lora.<i> (the parameter) and opt.<i> (its optimizer state: U8, at
 * least one byte, its numbers checked by the optimizer's state_check). */
static ork_status state_tensors_check(job *j, ork_st_file *f, const char *path) {
    ORK_TRY(ork_train_ema_check(j, f, path)); /* ema.<i> there exactly when the EMA is on */
    int per = j->ema_on ? 3 : 2;
    if (ork_st_count(f) != (size_t)j->n_params * per)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the state holds %zu tensors, this config's LoRA network and optimizer %d; "
                        "move it away to start over", path, ork_st_count(f), j->n_params * per);
    for (int i = 0; i < j->n_params; i++) {
        const ork_tensor *p = j->pt[i];
        char key[64];
        snprintf(key, sizeof key, "lora.%d", i);
        const ork_st_tensor *t = ork_st_find(f, key);
        int same = t && t->dtype == p->dtype && t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or has another dtype or shape than this config's "
                            "LoRA tensor %d (rank %lld); move the state away to start over", path, key, i,
                            (long long)j->p->network.linear);
        int64_t bad = ork_first_nonfinite(t->dtype, t->data, ork_st_nelements(t));
        if (bad >= 0)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' (LoRA weights): element %lld is %s: the state holds non-finite "
                            "values and cannot be resumed; " STATE_ADVICE, path, key, (long long)bad,
                            ork_nonfinite_kind(t->dtype, t->data, (uint64_t)bad));
        size_t sb = 0; /* the optimizer's state bytes (a job without its plugin, fuzz_state: the tensor's) */
        if (j->ovt) ORK_TRY(j->ovt->state_bytes(j->opt, p->dtype, ork_tensor_numel(p), &sb));
        else if (j->state && j->state[i]) sb = ork_tensor_nbytes(j->state[i]);
        snprintf(key, sizeof key, "opt.%d", i);
        const ork_st_tensor *o = ork_st_find(f, key);
        if (!o || o->dtype != ORK_U8 || o->ndim != 1 || o->nbytes != (sb ? sb : 1))
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or is not the %zu-byte optimizer state of LoRA "
                            "tensor %d; move the state away to start over", path, key, sb ? sb : 1, i);
        size_t at = 0;
        if (sb && j->ovt && j->ovt->state_check && j->ovt->state_check(j->opt, p->dtype, ork_tensor_numel(p), o->data, &at) != ORK_OK)
            return ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' (optimizer state of LoRA tensor %d): the number at byte %zu is "
                            "NaN or Inf: the state holds non-finite values and cannot be resumed; " STATE_ADVICE,
                            path, key, i, at);
    }
    return ORK_OK;
}

ork_status ork_train_load_state(job *j, int64_t *step) {
    char path[1200];
    state_path(j, path, sizeof path);
    *step = 0;
    if (!ork_path_exists(path)) return ORK_OK;
    ork_st_file *f = NULL;
    int verified = 0;
    state_meta m;
    char why[2048];
    ork_log_hold_begin(); /* the reader's line again, with what to do */
    ork_status s = ork_st_open(path, &f);
    if (s == ORK_OK) s = ork_st_verify(f, &verified);
    ork_log_hold_end(why, sizeof why);
    if (s != ORK_OK) {
        ork_st_close(f);
        if (s == ORK_E_NOMEM) return ORK_FAIL(s, "%s", why);
        return ORK_FAIL(s, "%s; the training state cannot be resumed: " STATE_ADVICE, why);
    }
    if (!verified)
        ORK_WARN("%s: written without checksums (by an older orakul): resuming from it unverified", path);
    if (s == ORK_OK) s = state_meta_read(j, f, path, &m);
    if (s == ORK_OK) s = state_tensors_check(j, f, path);
    if (s == ORK_OK && j->tstream) s = ork_train_streamed_load(j, f, path);
    for (int i = 0; s == ORK_OK && !j->tstream && i < j->n_params; i++) {
        ork_tensor *ts[2] = {j->pt[i], j->state[i]};
        for (int q = 0; s == ORK_OK && q < 2; q++) {
            char key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            const ork_st_tensor *t = ork_st_find(f, key);
            if (!t || t->nbytes != ork_tensor_nbytes(ts[q])) { /* checked above: a bug if it happens */
                s = ORK_FAIL(ORK_E_INTERNAL, "%s: tensor '%s' has the wrong size", path, key);
                break;
            }
            void *h = malloc(t->nbytes ? t->nbytes : 1);
            if (!h) { s = ORK_E_NOMEM; break; }
            memcpy(h, t->data, t->nbytes);
            s = dev_write(j, ts[q], h);
            free(h);
        }
    }
    if (s == ORK_OK) s = ork_train_ema_load(j, f, path);
    if (s == ORK_OK) {
        *step = m.step;
        j->skipped = m.skipped;
        data_pos_load(j, m.has_at ? &m.at : NULL, *step, m.global_batch);
        cfg_compare(j, f, path, *step);
        ORK_INFO("resuming from %s at step %lld", path, (long long)*step);
    }
    ork_st_close(f);
    return s;
}

/* LoRA files of this job ("<name>_<9 digits>.safetensors") in its folder. */
static int lora_files(const job *j, char *first, size_t n) {
    ork_dir *d = NULL;
    if (ork_dir_open(j->out_dir, &d) != ORK_OK) return 0;
    size_t nl = strlen(j->name);
    int count = 0;
    for (const char *s; (s = ork_dir_next(d));) {
        if (strncmp(s, j->name, nl) || s[nl] != '_' || strspn(s + nl + 1, "0123456789") != 9 ||
            strcmp(s + nl + 10, ".safetensors"))
            continue;
        if (!count++ || strcmp(s, first) < 0) snprintf(first, n, "%s", s);
    }
    ork_dir_close(d);
    return count;
}

ork_status ork_train_check_outputs(job *j) {
    char path[1200], first[256] = "";
    state_path(j, path, sizeof path);
    if (ork_path_exists(path)) return ORK_OK; /* resumed (and checked) later */
    int n = lora_files(j, first, sizeof first);
    if (!n) return ORK_OK;
    if (j->overwrite) {
        ORK_WARN("%s holds %d LoRA file%s of this job and no training state: starting over (--overwrite), they are "
                 "overwritten as training saves", j->out_dir, n, n == 1 ? "" : "s");
        return ORK_OK;
    }
    return ORK_FAIL(ORK_E_CONFIG, "%s holds %d LoRA file%s of this job (%s%s) but no training state (%s_state."
                    "safetensors) to resume from: a fresh run would overwrite them. Move them away, change config.name, "
                    "or pass --overwrite", j->out_dir, n, n == 1 ? "" : "s", first, n > 1 ? ", ..." : "", j->name);
}

static ork_dtype save_dtype(const char *s) {
    if (!s) return ORK_F16;
    if (!strcmp(s, "float32") || !strcmp(s, "fp32") || !strcmp(s, "float")) return ORK_F32;
    if (!strcmp(s, "bfloat16") || !strcmp(s, "bf16")) return ORK_BF16;
    return ORK_F16;
}

ork_status ork_train_save_lora(job *j, int64_t step) {
    char path[1400], rank[32], alpha[32], st[32];
    snprintf(path, sizeof path, "%s/%s_%09lld.safetensors", j->out_dir, j->name, (long long)step);
    snprintf(rank, sizeof rank, "%lld", (long long)j->p->network.linear);
    snprintf(alpha, sizeof alpha, "%g", j->p->network.linear_alpha);
    snprintf(st, sizeof st, "%lld", (long long)step);
    char decay[40];
    snprintf(decay, sizeof decay, "%.17g", j->p->train.ema_decay);
    const char *meta[] = {"ss_network_dim", rank, "ss_network_alpha", alpha, "ss_network_module", "networks.lora",
                          "orakul_base_model", j->p->model.name_or_path, "orakul_variant", j->info.variant,
                          "training_info.step", st, "orakul_version", ORAKUL_VERSION,
                          j->ema_on ? "orakul_ema_decay" : NULL, decay, NULL, NULL}; /* the EMA's weights: ema.c */
    if (j->tstream) ORK_TRY(ork_tstream_sync(j->tstream)); /* the LoRA values are read from the host records */
    ORK_TRY(ork_train_ema_lora_begin(j)); /* with the EMA on, its weights are saved (ai-toolkit's save) */
    ork_status ls = ork_lora_save(j->lora, path, j->info.lora_format, save_dtype(j->p->save.dtype), meta);
    ork_train_ema_lora_end(j);
    ORK_TRY(ls);
    ORK_INFO("saved %s", path);
    /* keep the newest max_step_saves_to_keep step files */
    int64_t keep = j->p->save.max_step_saves_to_keep;
    int64_t every = j->p->save.save_every > 0 ? j->p->save.save_every : 1;
    if (keep > 0)
        for (int64_t old = step - keep * every; old > 0 && old > step - (keep + 64) * every; old -= every) {
            char op[1400];
            snprintf(op, sizeof op, "%s/%s_%09lld.safetensors", j->out_dir, j->name, (long long)old);
            (void)ork_path_remove(op); /* gone already: fine */
        }
    return ORK_OK;
}

/* "<name>_*.safetensors.tmp.<pid>" files of a process that is gone: a run
 * killed while saving leaves its temp file (the writer renames it into place
 * only when complete). Removed at start-up so they do not pile up. */
void ork_train_remove_stale_tmp(job *j) {
    ork_dir *d = NULL;
    if (ork_dir_open(j->out_dir, &d) != ORK_OK) return;
    size_t nl = strlen(j->name);
    static const char mark[] = ".safetensors.tmp.";
    for (const char *s; (s = ork_dir_next(d));) {
        const char *t = strstr(s, mark), *pid = t ? t + sizeof mark - 1 : NULL;
        if (strncmp(s, j->name, nl) || s[nl] != '_' || !pid || !*pid || strspn(pid, "0123456789") != strlen(pid))
            continue;
        long owner = atol(pid);
        if (owner == ork_pid() || ork_pid_alive(owner)) continue; /* a live writer's */
        char p[1400];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", j->out_dir, s) >= sizeof p) continue;
        if (ork_path_remove(p) == ORK_OK) ORK_INFO("removed %s, left by an interrupted save", p);
    }
    ork_dir_close(d);
}
