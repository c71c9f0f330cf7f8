/* train/checkpoint.c — what a run leaves to resume from and to use: the
 * training state (<name>_state.safetensors: LoRA tensors, optimizer state, the
 * step and the data position; written atomically, read back at start-up), the
 * LoRA file of a step (<name>_<step>.safetensors, the newest kept), and the
 * temp files an interrupted save left. [control-thread] */
#include "train/job.h"

#include "util/log.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
static void data_pos_load(job *j, ork_st_file *f, int64_t step) {
    const char *e = ork_st_meta(f, "data_epoch"), *o = ork_st_meta(f, "data_offset"), *g = ork_st_meta(f, "global_batch");
    if (!e || !o) return; /* an older state: the position follows from the step */
    j->data_at = (ork_data_pos){atoll(e), atoll(o)};
    j->data_k = step * ork_train_accum_of(j);
    int64_t G = (int64_t)ork_dist_world(j->dist) * ork_train_batch_of(j);
    if (g && atoll(g) != G)
        ORK_INFO("resuming at sample %lld of epoch %lld with a global batch of %lld (the state was saved with %s)",
                 (long long)j->data_at.offset, (long long)j->data_at.epoch, (long long)G, g);
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
    void **bufs = calloc((size_t)j->n_params * 2, sizeof *bufs);
    ork_status s = bufs ? ORK_OK : ORK_E_NOMEM;
    if (s == ORK_OK && j->zero) s = ork_train_streamed_save(j, w);
    for (int i = 0; s == ORK_OK && !j->zero && i < j->n_params; i++) {
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
    char v[64];
    snprintf(v, sizeof v, "%lld", (long long)step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "step", v);
    snprintf(v, sizeof v, "%d", j->n_params);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "tensors", v);
    snprintf(v, sizeof v, "%lld", (long long)j->skipped);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "skipped", v);
    if (s == ORK_OK) s = data_pos_save(j, w, step);
    if (s == ORK_OK) s = ork_st_writer_meta(w, "optimizer", j->c_opt->c->id);
    if (s == ORK_OK && j->zero) { /* the previous step's norm: the clip factor of the next step */
        snprintf(v, sizeof v, "%.17g", ork_zero_prev_norm(j->zero));
        s = ork_st_writer_meta(w, "prev_norm", v);
    }
    char path[1200];
    state_path(j, path, sizeof path);
    if (s == ORK_OK) s = ork_st_writer_commit(w, path);
    ork_st_writer_free(w);
    for (int i = 0; bufs && i < j->n_params * 2; i++) free(bufs[i]);
    free(bufs);
    return s;
}

/* A metadata integer of the state, strictly decimal and within [lo, hi]:
 * 0 when absent, 1 when valid (*v set), -1 (one line) when not. */
static int meta_int(ork_st_file *f, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *v) {
    const char *m = ork_st_meta(f, key);
    if (!m) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(m, &end, 10);
    if (end == m || *end || errno == ERANGE || x < lo || x > hi) {
        ORK_FAIL(ORK_E_FORMAT, "%s: metadata '%s' is \"%.40s\", not an integer from %lld to %lld: the state is "
                 "damaged; move it away to start over", path, key, m, (long long)lo, (long long)hi);
        return -1;
    }
    *v = x;
    return 1;
}

/* The state's step, skipped steps and data position, before anything is
 * loaded (fuzz_state: "ten" resumed at step 0, -5 failed in the optimizer, a
 * step near INT64_MAX overflowed step x accumulation). */
static ork_status check_meta(job *j, ork_st_file *f, const char *path) {
    int64_t step = 0, v;
    if (meta_int(f, path, "step", 0, INT64_MAX, &step) < 0) return ORK_E_FORMAT;
    if (step > j->p->train.steps)
        return ORK_FAIL(ORK_E_CONFIG, "%s: the state is at step %lld, past train.steps (%lld): raise train.steps to "
                        "train on, or move the state away to start over", path, (long long)step,
                        (long long)j->p->train.steps);
    int64_t samples = step * ork_train_accum_of(j); /* an upper bound of the epochs gone by */
    if (meta_int(f, path, "skipped", 0, step, &v) < 0 || meta_int(f, path, "data_epoch", 0, samples + 1, &v) < 0 ||
        meta_int(f, path, "data_offset", 0, INT64_MAX / 2, &v) < 0 ||
        meta_int(f, path, "global_batch", 1, INT32_MAX, &v) < 0)
        return ORK_E_FORMAT;
    return ORK_OK;
}

ork_status ork_train_load_state(job *j, int64_t *step) {
    char path[1200];
    state_path(j, path, sizeof path);
    *step = 0;
    if (access(path, F_OK) != 0) return ORK_OK;
    ork_st_file *f;
    ORK_TRY(ork_st_open(path, &f));
    ork_status s = ORK_OK;
    const char *ms = ork_st_meta(f, "step"), *mt = ork_st_meta(f, "tensors"), *mo = ork_st_meta(f, "optimizer");
    if (!ms || !mt || atoi(mt) != j->n_params || !mo || strcmp(mo, j->c_opt->c->id) != 0)
        s = ORK_FAIL(ORK_E_CONFIG, "%s: the saved training state does not match this config's LoRA network or optimizer; "
                     "move it away to start over", path);
    if (s == ORK_OK) s = check_meta(j, f, path);
    if (s == ORK_OK && j->zero) s = ork_train_streamed_load(j, f, path);
    for (int i = 0; s == ORK_OK && !j->zero && i < j->n_params; i++) {
        ork_tensor *ts[2] = {j->pt[i], j->state[i]};
        for (int q = 0; s == ORK_OK && q < 2; q++) {
            char key[64];
            snprintf(key, sizeof key, "%s.%d", q ? "opt" : "lora", i);
            const ork_st_tensor *t = ork_st_find(f, key);
            if (!t || t->dtype != ts[q]->dtype || t->nbytes != ork_tensor_nbytes(ts[q])) {
                s = ORK_FAIL(ORK_E_FORMAT, "%s: tensor '%s' is missing or has the wrong size", path, key);
                break;
            }
            void *h = malloc(t->nbytes ? t->nbytes : 1);
            if (!h) { s = ORK_E_NOMEM; break; }
            memcpy(h, t->data, t->nbytes);
            s = dev_write(j, ts[q], h);
            free(h);
        }
    }
    if (s == ORK_OK) {
        *step = atoll(ms);
        const char *sk = ork_st_meta(f, "skipped");
        j->skipped = sk ? atoll(sk) : 0;
        data_pos_load(j, f, *step);
        ORK_INFO("resuming from %s at step %lld", path, (long long)*step);
    }
    ork_st_close(f);
    return s;
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
    const char *meta[] = {"ss_network_dim", rank, "ss_network_alpha", alpha, "ss_network_module", "networks.lora",
                          "orakul_base_model", j->p->model.name_or_path, "orakul_variant", j->info.variant,
                          "training_info.step", st, "orakul_version", ORAKUL_VERSION, NULL, NULL};
    if (j->zero) ORK_TRY(ork_zero_sync(j->zero)); /* the LoRA values are read from the host records */
    ORK_TRY(ork_lora_save(j->lora, path, j->info.lora_format, save_dtype(j->p->save.dtype), meta));
    ORK_INFO("saved %s", path);
    /* keep the newest max_step_saves_to_keep step files */
    int64_t keep = j->p->save.max_step_saves_to_keep;
    int64_t every = j->p->save.save_every > 0 ? j->p->save.save_every : 1;
    if (keep > 0)
        for (int64_t old = step - keep * every; old > 0 && old > step - (keep + 64) * every; old -= every) {
            char op[1400];
            snprintf(op, sizeof op, "%s/%s_%09lld.safetensors", j->out_dir, j->name, (long long)old);
            unlink(op);
        }
    return ORK_OK;
}

/* "<name>_*.safetensors.tmp.<pid>" files of a process that is gone: a run
 * killed while saving leaves its temp file (the writer renames it into place
 * only when complete). Removed at start-up so they do not pile up. */
void ork_train_remove_stale_tmp(job *j) {
    DIR *d = opendir(j->out_dir);
    if (!d) return;
    size_t nl = strlen(j->name);
    static const char mark[] = ".safetensors.tmp.";
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name, *t = strstr(s, mark), *pid = t ? t + sizeof mark - 1 : NULL;
        if (strncmp(s, j->name, nl) || s[nl] != '_' || !pid || !*pid || strspn(pid, "0123456789") != strlen(pid))
            continue;
        pid_t owner = (pid_t)atol(pid);
        if (owner == getpid() || kill(owner, 0) == 0 || errno != ESRCH) continue; /* a live writer's */
        char p[1400];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", j->out_dir, s) >= sizeof p) continue;
        if (unlink(p) == 0) ORK_INFO("removed %s, left by an interrupted save", p);
    }
    closedir(d);
}
