/* train/samples.c — see samples.h. */
#include "train/samples.h"

#include "data/dataset.h" /* ork_caption_inject_trigger */
#include "io/safetensors.h"
#include "io/png_writer.h"
#include "platform/platform.h"
#include "plugin/model_decl.h"
#include "util/log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct cond {
    float *txt; /* (T, ctx) or NULL: zeros */
    int len;    /* txt's valid rows (an UNMASKED slot's prompt), 0: T */
    float *vec; /* (vec_dim) or NULL */
    const char *text; /* text to encode (ork_samples_text_*), NULL: a file or empty */
} cond;

typedef struct entry {
    char *text;          /* the prompt after [trigger] replacement */
    cond pos, neg;
    int h_tok, w_tok;
    uint64_t seed;
    float guidance;
    int steps;
} entry;

struct ork_samples {
    const ork_sample_config *sc;
    const ork_train_config *tc;
    const ork_model_info *info;
    int T;
    char dir[1100], name[192];
    entry *e;
    int n;
    ork_shift_rule shift;
    int cfg_on;          /* classifier-free guidance (no guidance input) */
    int off;             /* turned off after a failure */
    int swept;           /* stale temporary files removed */
};

/* ai-toolkit's sample prompt: with a trigger word, "[trigger]" and "[name]"
 * replaced by it (never prepended); without one, as written. */
static char *replace_trigger(const char *s, const char *trigger) {
    if (!trigger) return strdup(s);
    char *out = NULL;
    ork_log_demote(1);
    ork_status st = ork_caption_inject_trigger(s, trigger, 0, &out);
    ork_log_demote(-1);
    return st == ORK_OK ? out : NULL;
}

static int is_embedding_path(const char *s) {
    size_t n = strlen(s);
    return n > 12 && !strcmp(s + n - 12, ".safetensors");
}

/* A text-embedding file: txt (T, ctx), optional vec (vec_dim). */
static ork_status load_cond(const char *path, const ork_model_info *info, int T, const char *key, cond *c) {
    ork_st_file *f;
    ork_log_demote(1); /* the reader's line says why (a warning); the error line names the key */
    ork_status o = ork_st_open(path, &f);
    ork_log_demote(-1);
    if (o != ORK_OK) return ORK_FAIL(o, "%s: the text embedding '%s' cannot be read (the warning above says why)", key, path);
    ork_status s = ORK_OK;
    const ork_st_tensor *t = ork_st_find(f, "txt"), *v = ork_st_find(f, "vec");
    if (!t || t->ndim != 2 || t->shape[0] != T || t->shape[1] != info->context_dim) {
        s = ORK_FAIL(ORK_E_FORMAT, "%s: %s: tensor 'txt' must be (%d, %d) for this model", key, path, T, info->context_dim);
    } else if (!(c->txt = malloc((size_t)T * info->context_dim * sizeof *c->txt))) {
        s = ORK_E_NOMEM;
    } else {
        s = ork_st_read_f32(t, c->txt);
    }
    if (s == ORK_OK && info->vec_dim > 0 && v) {
        if (v->ndim != 1 || v->shape[0] != info->vec_dim)
            s = ORK_FAIL(ORK_E_FORMAT, "%s: %s: tensor 'vec' must be (%d)", key, path, info->vec_dim);
        else if (!(c->vec = malloc((size_t)info->vec_dim * sizeof *c->vec)))
            s = ORK_E_NOMEM;
        else
            s = ork_st_read_f32(v, c->vec);
    }
    ork_st_close(f);
    return s;
}

/* text: a path to an embedding, or text (zeros; counted in *n_text). */
static ork_status resolve_cond(const char *text, const ork_model_info *info, int T, const char *key, cond *c,
                               int *n_text) {
    memset(c, 0, sizeof *c);
    if (!text || !*text || !strcmp(text, "false")) return ORK_OK;
    if (is_embedding_path(text)) return load_cond(text, info, T, key, c);
    c->text = text;
    (*n_text)++;
    return ORK_OK;
}

static int to_tokens(int64_t px, int ppt) {
    int t = (int)((px + ppt / 2) / ppt);
    return t < 1 ? 1 : t;
}

static void free_cond(cond *c) {
    free(c->txt);
    free(c->vec);
}

void ork_samples_destroy(ork_samples *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->e[i].text);
        free_cond(&s->e[i].pos);
        free_cond(&s->e[i].neg);
    }
    free(s->e);
    free(s);
}

static int given(const ork_config *cfg, const char *path) {
    ork_loc at;
    return ork_config_where(cfg, path, &at) && at.line > 0;
}

ork_status ork_samples_create(const ork_config *cfg, const ork_model_info *info, int T, const char *out_dir,
                              const char *name, ork_samples **out) {
    *out = NULL;
    const ork_process_config *p = ork_config_process(cfg);
    const ork_sample_config *sc = &p->sample;
    size_t n = sc->prompts.n + sc->samples.n;
    if (p->train.disable_sampling) return ORK_OK;
    if (n == 0) {
        if (given(cfg, "sample.sample_every")) ORK_INFO("sample: no prompts given: no samples are written");
        return ORK_OK;
    }
    if (sc->sampler && strcmp(sc->sampler, "flowmatch") != 0)
        ORK_WARN("sample.sampler '%s': the model samples with the flow-matching Euler sampler (flowmatch)", sc->sampler);
    ork_samples *s = calloc(1, sizeof *s);
    if (!s) return ORK_E_NOMEM;
    s->sc = sc;
    s->tc = &p->train;
    s->info = info;
    s->T = T;
    s->shift = ork_shift_for(info);
    ork_model_schedule ms;
    double sb, sm;
    ork_model_schedule_get(info, &ms, &sb, &sm);
    /* CFG when the model takes no guidance input and is not timestep-distilled
     * (a model that declares nothing: not distilled) */
    s->cfg_on = !info->has_guidance && !(ms.sample_flags & ORK_SAMPLE_NO_CFG);
    snprintf(s->dir, sizeof s->dir, "%s/samples", out_dir);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->e = calloc(n, sizeof *s->e);
    if (!s->e) { free(s); return ORK_E_NOMEM; }
    const int ppt = info->pixels_per_token > 0 ? info->pixels_per_token : 16;
    int distilled = ork_distilled_steps(info), n_text = 0, n_neg_text = 0;
    ork_status st = ORK_OK;
    for (size_t i = 0; st == ORK_OK && i < n; i++) {
        entry *e = &s->e[i];
        s->n++;
        const ork_sample_item *it = i >= sc->prompts.n ? &sc->samples.v[i - sc->prompts.n] : NULL;
        const char *prompt = it ? it->prompt : sc->prompts.v[i];
        char key[96], kk[128];
        if (it) snprintf(key, sizeof key, "sample.samples[%zu]", i - sc->prompts.n);
        else snprintf(key, sizeof key, "sample.prompts[%zu]", i);
        e->text = replace_trigger(prompt, p->trigger_word);
        if (!e->text) { st = ORK_E_NOMEM; break; }
        st = resolve_cond(e->text, info, T, key, &e->pos, &n_text);
        const char *neg = it && it->neg ? it->neg : sc->neg;
        if (st == ORK_OK && s->cfg_on) st = resolve_cond(neg, info, T, key, &e->neg, &n_neg_text);
        int64_t w = it && it->width > 0 ? it->width : sc->width, h = it && it->height > 0 ? it->height : sc->height;
        e->w_tok = to_tokens(w, ppt);
        e->h_tok = to_tokens(h, ppt);
        if ((int64_t)e->w_tok * ppt != w || (int64_t)e->h_tok * ppt != h)
            ORK_WARN("%s: %lldx%lld is not a multiple of %d pixels: sampling %dx%d", key, (long long)w, (long long)h,
                     ppt, e->w_tok * ppt, e->h_tok * ppt);
        snprintf(kk, sizeof kk, "%s.seed", key);
        if (it && given(cfg, kk)) e->seed = (uint64_t)it->seed;
        else e->seed = (uint64_t)sc->seed + (sc->walk_seed ? (uint64_t)i : 0);
        snprintf(kk, sizeof kk, "%s.guidance_scale", key);
        e->guidance = (float)(it && given(cfg, kk) ? it->guidance_scale
                              : !given(cfg, "sample.guidance_scale") && ms.sample_guidance > 0 ? ms.sample_guidance
                                                                                               : sc->guidance_scale);
        e->steps = (int)(it && it->sample_steps > 0 ? it->sample_steps
                         : (!given(cfg, "sample.sample_steps") && distilled) ? distilled : sc->sample_steps);
    }
    if (st != ORK_OK) { ork_samples_destroy(s); return st; }
    static const char *const shift_name[] = {"resolution time shift", "no time shift", "fixed time shift",
                                             "resolution and steps time shift"};
    ORK_INFO("sample: %d prompts, %dx%d px, %d steps (%s), %s %g; every %lld steps from step %lld into %s",
             s->n, s->e[0].w_tok * ppt, s->e[0].h_tok * ppt, s->e[0].steps, shift_name[s->shift.kind],
             info->has_guidance ? "guidance" : s->cfg_on ? "classifier-free guidance scale" : "no guidance,",
             info->has_guidance || s->cfg_on ? (double)s->e[0].guidance : 0.0, (long long)sc->sample_every,
             (long long)sc->sample_start_step, s->dir);
    if (n_text + n_neg_text)
        ORK_INFO("sample: %d of %d prompts are text (and %d negative prompts): encoded with the captions at the start "
                 "of a run (empty, zero conditioning without the model's text encoders)", n_text, s->n, n_neg_text);
    *out = s;
    return ORK_OK;
}

/* The i-th text cond (positive before negative, in entry order), or NULL. */
static cond *text_cond(const ork_samples *s, int i) {
    for (int k = 0; s && k < s->n; k++) {
        cond *c[2] = {&s->e[k].pos, &s->e[k].neg};
        for (int q = 0; q < 2; q++)
            if (c[q]->text && i-- == 0) return c[q];
    }
    return NULL;
}

int ork_samples_text_count(const ork_samples *s) {
    int n = 0;
    for (int k = 0; s && k < s->n; k++) n += (s->e[k].pos.text != NULL) + (s->e[k].neg.text != NULL);
    return n;
}

const char *ork_samples_text_at(const ork_samples *s, int i) {
    const cond *c = text_cond(s, i);
    return c ? c->text : NULL;
}

ork_status ork_samples_text_set(ork_samples *s, int i, const float *txt, const float *vec) {
    return ork_samples_text_set_len(s, i, txt, vec, s ? s->T : 0);
}

ork_status ork_samples_text_set_len(ork_samples *s, int i, const float *txt, const float *vec, int len) {
    cond *c = text_cond(s, i);
    if (!c) return ORK_FAIL(ORK_E_INVALID, "sample: no text prompt %d", i);
    if (len < 1 || len > s->T) return ORK_FAIL(ORK_E_INVALID, "sample: prompt %d of %d text rows (1 .. %d)", i, len, s->T);
    c->len = len;
    size_t nt = (size_t)s->T * s->info->context_dim, nv = s->info->vec_dim > 0 && vec ? (size_t)s->info->vec_dim : 0;
    free(c->txt), free(c->vec);
    c->txt = malloc(nt * sizeof *c->txt);
    c->vec = nv ? malloc(nv * sizeof *c->vec) : NULL;
    if (!c->txt || (nv && !c->vec)) return ORK_FAIL(ORK_E_NOMEM, "sample: no memory for a prompt's embedding");
    memcpy(c->txt, txt, nt * sizeof *c->txt);
    if (nv) memcpy(c->vec, vec, nv * sizeof *c->vec);
    return ORK_OK;
}

int ork_samples_due(const ork_samples *s, int64_t step, int64_t start, int64_t total) {
    if (!s || s->off) return 0;
    if (step == start) return step < total && (start == 0 ? !s->tc->skip_first_sample : s->tc->force_first_sample);
    if (step == total) return 1;
    return step >= s->sc->sample_start_step && s->sc->sample_every > 0 && step % s->sc->sample_every == 0;
}

const char *ork_samples_dir(const ork_samples *s) { return s->dir; }

ork_status ork_samples_grid(const ork_image *imgs, int n, ork_image *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return ORK_FAIL(ORK_E_INVALID, "sample grid: no images");
    const int gap = 4;
    int cw = 0, ch = 0;
    for (int i = 0; i < n; i++) {
        if (imgs[i].w > cw) cw = imgs[i].w;
        if (imgs[i].h > ch) ch = imgs[i].h;
    }
    int cols = n <= 4 ? n : (int)ceil(sqrt((double)n)), rows = (n + cols - 1) / cols;
    out->w = cols * cw + (cols + 1) * gap;
    out->h = rows * ch + (rows + 1) * gap;
    out->rgb = malloc((size_t)out->w * out->h * 3);
    if (!out->rgb) return ORK_E_NOMEM;
    memset(out->rgb, 32, (size_t)out->w * out->h * 3);
    for (int i = 0; i < n; i++) {
        int x0 = gap + (i % cols) * (cw + gap) + (cw - imgs[i].w) / 2;
        int y0 = gap + (i / cols) * (ch + gap) + (ch - imgs[i].h) / 2;
        for (int y = 0; y < imgs[i].h; y++)
            memcpy(out->rgb + ((size_t)(y0 + y) * out->w + x0) * 3, imgs[i].rgb + (size_t)y * imgs[i].w * 3,
                   (size_t)imgs[i].w * 3);
    }
    return ORK_OK;
}

static double now_s(void) { return 1e-9 * (double)ork_time_ns(); }

static ork_status run_all(ork_samples *s, const ork_denoiser *d, int64_t step, ork_image *imgs, int *done) {
    if (ork_mkdir_p(s->dir) != ORK_OK) return ORK_FAIL(ORK_E_IO, "cannot create %s: %s", s->dir, strerror(errno));
    if (!s->swept) ork_tmp_sweep(s->dir, ".png"); /* images a killed run was writing */
    s->swept = 1;
    const size_t C = (size_t)s->info->token_channels;
    for (int i = 0; i < s->n; i++) {
        const entry *e = &s->e[i];
        /* CFG between two empty conditionings would only double the work */
        int same = !e->pos.txt && !e->pos.vec && !e->neg.txt && !e->neg.vec;
        ork_sample_params sp = {.h_tok = e->h_tok, .w_tok = e->w_tok, .steps = e->steps, .shift = s->shift,
                                .guidance = e->guidance, .cfg = s->cfg_on && !same ? e->guidance : 1.0f, .T = s->T,
                                .txt = e->pos.txt, .vec = e->pos.vec, .neg_txt = e->neg.txt, .neg_vec = e->neg.vec,
                                .txt_len = e->pos.len, .neg_len = e->neg.len,
                                .seed = e->seed};
        float *x = malloc((size_t)e->h_tok * e->w_tok * C * sizeof *x);
        if (!x) return ORK_E_NOMEM;
        ork_status st = ork_sample_latent(d, &sp, x);
        if (st == ORK_OK) st = ork_sample_decode(d, x, e->h_tok, e->w_tok, &imgs[i]);
        free(x);
        ORK_TRY(st);
        char path[1400];
        snprintf(path, sizeof path, "%s/%s_%09lld_%d.png", s->dir, s->name, (long long)step, i);
        ORK_TRY(ork_png_write_rgb(path, imgs[i].w, imgs[i].h, imgs[i].rgb));
        (*done)++;
    }
    ork_image grid;
    ORK_TRY(ork_samples_grid(imgs, s->n, &grid));
    char path[1400];
    snprintf(path, sizeof path, "%s/%s_%09lld_grid.png", s->dir, s->name, (long long)step);
    ork_status st = ork_png_write_rgb(path, grid.w, grid.h, grid.rgb);
    ork_image_free(&grid);
    return st;
}

/* A graph for one sampling session: the training graph's allocator, stream
 * (so streamed weights' copies stay ordered with the compute), weight lookup,
 * activation dtype and FP8 GEMM mode; its arena goes away with it. */
static ork_status session_graph(const ork_denoiser *d, ork_graph **out) {
    const ork_graph *tg = d->g;
    ork_graph_opts go = {0};
    go.act_dtype = tg->act_dt;
    go.nthreads = tg->k.nthreads;
    go.device_index = d->device_index;
    go.stream = tg->k.stream; /* always the real stream (graph.c) */
    ORK_TRY(ork_graph_create(tg->be, d->alloc, &go, out));
    ork_graph_set_weight_fn(*out, tg->weight_fn, tg->weight_ctx);
    (*out)->fp8_gemm = tg->fp8_gemm;
    return ORK_OK;
}

ork_status ork_samples_run(ork_samples *s, const ork_denoiser *d, int64_t step, int *wrote) {
    int done = 0;
    if (wrote) *wrote = 0;
    if (!s || s->off) return ORK_OK;
    ork_image *imgs = calloc((size_t)s->n, sizeof *imgs);
    if (!imgs) return ORK_E_NOMEM;
    double t0 = now_s();
    ork_denoiser sd = *d;
    ork_status st = ork_graph_sync(d->g); /* the training graph's work first */
    if (st == ORK_OK) st = session_graph(d, &sd.g);
    if (st == ORK_OK) st = run_all(s, &sd, step, imgs, &done);
    if (sd.g != d->g) {
        ork_status s2 = ork_graph_sync(sd.g);
        if (st == ORK_OK) st = s2;
        ork_graph_destroy(sd.g);
    }
    for (int i = 0; i < s->n; i++) ork_image_free(&imgs[i]);
    free(imgs);
    if (st != ORK_OK) {
        ORK_WARN("sampling at step %lld failed (%s): no more samples in this run; training goes on", (long long)step,
                 ork_status_str(st));
        s->off = 1;
    } else {
        ORK_INFO("samples at step %lld: %d images in %s (%.1f s)", (long long)step, done, s->dir, now_s() - t0);
    }
    if (wrote) *wrote = done;
    return ORK_OK;
}
