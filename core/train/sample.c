/* train/sample.c — see sample.h. Sources read (not copied): BFL
 * src/flux/sampling.py (get_schedule, time_shift, denoise), diffusers'
 * compute_empirical_mu. */
#include "train/sample.h"

#include "plugin/model_codec.h"
#include "plugin/model_decl.h"
#include "tensor/ops.h"
#include "train/rng.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ork_shift_rule ork_shift_default(ork_time_shift kind) {
    return (ork_shift_rule){kind, 0.5, 1.15, 256, 4096, 3.0};
}

ork_shift_rule ork_shift_for(const ork_model_info *info) {
    ork_model_schedule s;
    double base, mx;
    ork_model_schedule_get(info, &s, &base, &mx);
    return (ork_shift_rule){(ork_time_shift)s.time_shift, base, mx, s.shift_base_seq, s.shift_max_seq, s.shift};
}

int ork_distilled_steps(const ork_model_info *info) {
    ork_model_schedule s;
    double base, mx;
    ork_model_schedule_get(info, &s, &base, &mx);
    return s.sample_steps;
}

double ork_shift_mu(const ork_shift_rule *r, int64_t seq, int steps) {
    switch (r->kind) {
    case ORK_TIME_SHIFT_RESOLUTION: {
        double m = (r->max - r->base) / ((double)r->max_seq - (double)r->base_seq);
        return r->base + m * ((double)seq - (double)r->base_seq);
    }
    case ORK_TIME_SHIFT_RESOLUTION_STEPS: {
        const double a1 = 8.73809524e-05, b1 = 1.89833333, a2 = 0.00016927, b2 = 0.45666666;
        if (seq > 4300) return a2 * (double)seq + b2;
        double m200 = a2 * (double)seq + b2, m10 = a1 * (double)seq + b1;
        double a = (m200 - m10) / 190.0;
        return a * steps + (m200 - 200.0 * a);
    }
    case ORK_TIME_SHIFT_FIXED:
        return log(r->fixed > 0 ? r->fixed : 3.0);
    default:
        return 0.0;
    }
}

void ork_sample_schedule(const ork_shift_rule *r, int steps, int64_t seq, double *ts) {
    double mu = ork_shift_mu(r, seq, steps), em = exp(mu);
    for (int i = 0; i <= steps; i++) {
        double t = 1.0 - (double)i / (double)steps;
        if (r->kind != ORK_TIME_SHIFT_NONE && t > 0) t = em / (em + (1.0 / t - 1.0));
        ts[i] = i == steps ? 0.0 : t;
    }
}

/* ---- the forward: one graph region per block, two kept carries ---------------- */

typedef struct buf {
    ork_tensor *store; /* 1-D U8 allocation, cap bytes */
    size_t cap;
    ork_tensor *view;  /* header with the kept tensor's shape and dtype */
} buf;

typedef struct fwd {
    const ork_denoiser *d;
    buf keep[2][ORK_CARRY_MAX];
    int kept_n[2];
    int *order;
} fwd;

static void buf_free(buf *b) {
    ork_tensor_free(b->view);
    ork_tensor_free(b->store);
    memset(b, 0, sizeof *b);
}

static ork_status keep_carry(fwd *f, int k, const ork_carry *c) {
    ork_graph *g = f->d->g;
    f->kept_n[k] = c->n;
    for (int j = 0; j < ORK_CARRY_MAX; j++) {
        buf *b = &f->keep[k][j];
        ork_tensor_free(b->view);
        b->view = NULL;
        if (j >= c->n || !c->t[j]) continue;
        const ork_tensor *t = c->t[j];
        size_t need = (size_t)ork_tensor_numel(t) * ork_dtype_size(t->dtype);
        if (need > b->cap) {
            ork_tensor_free(b->store);
            b->store = NULL;
            b->cap = 0;
            int64_t nb = (int64_t)(need ? need : 1);
            ORK_TRY(ork_tensor_new(f->d->alloc, "samples", ORK_U8, 1, &nb, 0, &b->store));
            b->cap = need;
        }
        ORK_TRY(ork_tensor_wrap(b->store->device, t->dtype, t->ndim, t->shape, ork_tensor_data(b->store), "", &b->view));
        ORK_TRY(ork_graph_copy_to(g, t, b->view));
    }
    return ORK_OK;
}

static ork_status leaves(fwd *f, int k, ork_carry *c) {
    memset(c, 0, sizeof *c);
    c->n = f->kept_n[k];
    for (int j = 0; j < c->n; j++)
        if (f->keep[k][j].view) ORK_TRY(ork_graph_leaf(f->d->g, f->keep[k][j].view, 0, &c->t[j]));
    return ORK_OK;
}

static ork_status hook_call(const ork_block_hooks *h, int what, int block) {
    if (!h) return ORK_OK;
    switch (what) {
    case 0: return h->enter ? h->enter(h->ctx, block) : ORK_OK;
    case 1: return h->leave ? h->leave(h->ctx, block) : ORK_OK;
    default: return h->pass_end ? h->pass_end(h->ctx) : ORK_OK;
    }
}

static ork_status upload(ork_graph *g, const float *host, int ndim, const int64_t *shape, ork_tensor **out) {
    ORK_TRY(ork_tensor_api_table()->from_host(g, ORK_F32, ndim, shape, host, out));
    if (g->act_dt != ORK_F32) ORK_TRY(ork_ops_table()->cast(g, *out, g->act_dt, out));
    return ORK_OK;
}

/* One prediction v (N, C) of x at t, conditioned on (txt (len, ctx), vec), into v. */
static ork_status predict(fwd *f, const ork_sample_params *sp, const float *x, float t, const float *txt, int len,
                          const float *vec, float *v, float *zeros) {
    const ork_denoiser *d = f->d;
    const ork_model_info *info = d->info;
    ork_graph *g = d->g;
    const int64_t N = (int64_t)sp->h_tok * sp->w_tok;
    ORK_TRY(ork_graph_reset(g));
    ork_model_inputs in = {.abi = ORK_ABI_INIT(ork_model_inputs), .h_tokens = sp->h_tok, .w_tokens = sp->w_tok};
    float th = t, gh = sp->guidance;
    in.timesteps_host = &th;
    in.guidance_host = info->has_guidance ? &gh : NULL;
    if (!txt || len < 1 || len > sp->T) len = sp->T; /* an UNMASKED slot's prompt: its own rows, else T */
    int64_t sx[3] = {1, N, info->token_channels}, st[3] = {1, len, info->context_dim}, sv[2] = {1, info->vec_dim},
            one = 1;
    ORK_TRY(upload(g, x, 3, sx, &in.tokens));
    ORK_TRY(upload(g, txt ? txt : zeros, 3, st, &in.txt));
    if (info->vec_dim > 0) ORK_TRY(upload(g, vec ? vec : zeros, 2, sv, &in.vec));
    const ork_tensor_api *ta = ork_tensor_api_table();
    ORK_TRY(ta->from_host(g, ORK_F32, 1, &one, &th, &in.timesteps));
    if (in.guidance_host) ORK_TRY(ta->from_host(g, ORK_F32, 1, &one, &gh, &in.guidance));
    const int n = info->n_blocks;
    const ork_block_hooks *h = d->hooks;
    for (int i = 0; i < n; i++) f->order[i] = i;
    if (h && h->pass_begin) ORK_TRY(h->pass_begin(h->ctx, f->order, n));
    ork_carry c;
    ork_status s = d->vt->begin(d->model, g, &in, &c);
    if (s == ORK_OK) s = keep_carry(f, 0, &c);
    int cur = 0;
    for (int i = 0; s == ORK_OK && i < n; i++) {
        ork_region reg = ork_graph_region_begin(g);
        s = hook_call(h, 0, i);
        if (s == ORK_OK) s = leaves(f, cur, &c);
        if (s == ORK_OK) s = d->vt->block(d->model, g, i, &c);
        if (s == ORK_OK) s = keep_carry(f, !cur, &c);
        ork_graph_region_end(g, reg);
        ork_status s2 = hook_call(h, 1, i);
        if (s == ORK_OK) s = s2;
        cur = !cur;
    }
    if (s == ORK_OK) s = hook_call(h, 2, 0);
    ORK_TRY(s);
    const ork_tensor *pred = f->keep[cur][0].view;
    if (!pred || ork_tensor_numel(pred) != N * info->token_channels)
        return ORK_FAIL(ORK_E_INTERNAL, "sampler: the model's prediction is not (1, %lld, %d)", (long long)N,
                        info->token_channels);
    return ta->to_host(g, pred, ORK_F32, v);
}

ork_status ork_sample_latent(const ork_denoiser *d, const ork_sample_params *sp, float *x) {
    const ork_model_info *info = d->info;
    if (sp->steps < 1 || sp->h_tok < 1 || sp->w_tok < 1 || sp->T < 1)
        return ORK_FAIL(ORK_E_INVALID, "sampler: %d steps on a %dx%d token grid with %d text tokens", sp->steps,
                        sp->w_tok, sp->h_tok, sp->T);
    const size_t N = (size_t)sp->h_tok * sp->w_tok, C = (size_t)info->token_channels;
    size_t nz = (size_t)sp->T * info->context_dim;
    if ((size_t)info->vec_dim > nz) nz = (size_t)info->vec_dim;
    fwd f = {.d = d};
    double *ts = malloc((size_t)(sp->steps + 1) * sizeof *ts);
    float *v = malloc(N * C * sizeof *v), *vn = sp->cfg > 1.0f ? malloc(N * C * sizeof *vn) : NULL;
    float *zeros = calloc(nz, sizeof *zeros);
    f.order = malloc((size_t)(info->n_blocks + 1) * sizeof *f.order);
    ork_status s = ts && v && zeros && f.order && (vn || sp->cfg <= 1.0f) ? ORK_OK : ORK_E_NOMEM;
    if (s == ORK_OK) {
        if (sp->noise) {
            memcpy(x, sp->noise, N * C * sizeof *x);
        } else {
            ork_rng r;
            ork_rng_init(&r, sp->seed, ORK_RNG_NOISE);
            ork_rng_normal_f32(&r, x, (int64_t)(N * C));
        }
        ork_sample_schedule(&sp->shift, sp->steps, (int64_t)N, ts);
    }
    int prev_grad = ork_graph_set_grad(d->g, 0);
    uint64_t prev_drop = d->g->dropout_seed;
    d->g->dropout_seed = 0; /* inference: no LoRA dropout */
    for (int i = 0; s == ORK_OK && i < sp->steps; i++) {
        float tc = (float)ts[i], tp = (float)ts[i + 1];
        s = predict(&f, sp, x, tc, sp->txt, sp->txt_len, sp->vec, v, zeros);
        if (s == ORK_OK && vn) {
            s = predict(&f, sp, x, tc, sp->neg_txt, sp->neg_len, sp->neg_vec, vn, zeros);
            for (size_t q = 0; s == ORK_OK && q < N * C; q++) v[q] = vn[q] + sp->cfg * (v[q] - vn[q]);
        }
        double dt = (double)tp - (double)tc;
        for (size_t q = 0; s == ORK_OK && q < N * C; q++) x[q] = (float)((double)x[q] + dt * (double)v[q]);
    }
    ork_graph_reset(d->g); /* nothing of the sampler stays in the arena */
    d->g->dropout_seed = prev_drop;
    ork_graph_set_grad(d->g, prev_grad);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < ORK_CARRY_MAX; j++) buf_free(&f.keep[k][j]);
    free(ts);
    free(v);
    free(vn);
    free(zeros);
    free(f.order);
    return s;
}

ork_status ork_sample_decode(const ork_denoiser *d, const float *x, int h_tok, int w_tok, ork_image *out) {
    memset(out, 0, sizeof *out);
    if (d->codec ? !ork_model_codec_present(d->codec) : !d->vt->decode)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "sampler: the model has no image decoder");
    ork_graph *g = d->g;
    const ork_tensor_api *ta = ork_tensor_api_table();
    int prev = ork_graph_set_grad(g, 0);
    ork_tensor *tok, *img = NULL;
    int64_t sh[3] = {1, (int64_t)h_tok * w_tok, d->info->token_channels};
    ork_status s = ork_graph_reset(g);
    if (s == ORK_OK) s = upload(g, x, 3, sh, &tok);
    if (s == ORK_OK)
        s = d->codec ? ork_model_codec_decode(d->codec, g, tok, h_tok, w_tok, &img)
                     : d->vt->decode(d->model, g, tok, h_tok, w_tok, &img);
    ork_graph_set_grad(g, prev);
    float *chw = NULL;
    int H = 0, W = 0;
    if (s == ORK_OK) {
        if (ta->ndim(img) != 4 || ta->dim(img, 0) != 1 || ta->dim(img, 1) != 3)
            s = ORK_FAIL(ORK_E_INTERNAL, "sampler: the decoder did not return a (1, 3, H, W) image");
        else {
            H = (int)ta->dim(img, 2);
            W = (int)ta->dim(img, 3);
            chw = malloc((size_t)3 * H * W * sizeof *chw);
            out->rgb = malloc((size_t)3 * H * W);
            s = chw && out->rgb ? ta->to_host(g, img, ORK_F32, chw) : ORK_E_NOMEM;
        }
    }
    if (s == ORK_OK) {
        out->w = W;
        out->h = H;
        size_t plane = (size_t)H * W;
        for (size_t p = 0; p < plane; p++)
            for (int ch = 0; ch < 3; ch++) {
                float v = chw[ch * plane + p];
                v = v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
                out->rgb[p * 3 + ch] = (uint8_t)lrintf(v * 255.0f);
            }
    } else {
        free(out->rgb);
        memset(out, 0, sizeof *out);
    }
    free(chw);
    ork_graph_reset(g);
    return s;
}
