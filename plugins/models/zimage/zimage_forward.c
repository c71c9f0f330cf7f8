/* zimage_forward.c — the Z-Image forward pass block by block, written against
 * the ops service only (gradients come from the core's tape; LoRA is added by
 * the core inside ops->linear). The model and its conventions: zimage.h.
 * No image codec here: the core runs the codec component a codec slot names
 * (zimage_plugin.c) and patchifies its latents. Owns nothing beyond the call. */
#include "zimage.h"

#include <orakul/platform.h> /* ORK_PRINTF */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY ORK_TRY

static ork_status w(zi_model *z, ork_graph *g, ork_tensor **out, const char *fmt, ...)
    ORK_PRINTF(4, 5);
static ork_status w(zi_model *z, ork_graph *g, ork_tensor **out, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return z->ta->weight(g, name, out);
}

/* y = <mod>.weight·x (+ <mod>.bias) */
static ork_status lin(zi_model *z, ork_graph *g, ork_tensor *x, const char *mod, int bias, ork_tensor **y) {
    ork_tensor *wt, *b = NULL;
    TRY(w(z, g, &wt, "%s.weight", mod));
    if (bias) TRY(w(z, g, &b, "%s.bias", mod));
    return z->ops->linear(g, x, wt, b, y);
}

static ork_status rms(zi_model *z, ork_graph *g, ork_tensor *x, const char *mod, ork_tensor **y) {
    ork_tensor *wt;
    TRY(w(z, g, &wt, "%s.weight", mod));
    return z->ops->rmsnorm(g, x, wt, z->cfg.eps, y);
}

static int64_t round_up(int64_t n) { return (n + ZI_SEQ_MULTI - 1) / ZI_SEQ_MULTI * ZI_SEQ_MULTI; }

/* ---- begin: inputs, timestep sinusoid, rope tables ------------------------------ */

/* TimestepEmbedder.timestep_embedding of 1000·(1 - t), in F32 as torch
 * computes it (the sinusoid is F32 there whatever the model's dtype). */
static void t_freq(const float *t, int B, float *out /* (B, 256) */) {
    const int half = ZI_FREQ_DIM / 2;
    for (int b = 0; b < B; b++) {
        float tt = (1.0f - t[b]) * 1000.0f;
        for (int j = 0; j < half; j++) {
            float fr = expf(-(float)log(10000.0) * (float)j / (float)half);
            float arg = tt * fr;
            out[b * ZI_FREQ_DIM + j] = (float)cos((double)arg);
            out[b * ZI_FREQ_DIM + half + j] = (float)sin((double)arg);
        }
    }
}

/* One rope table (L, hd/2, 2) of (cos, sin) for positions pos (L, 3), the
 * angle pos·theta^(-2i/axis) rounded to F32 as RopeEmbedder does. */
static ork_status rope_table(zi_model *z, ork_graph *g, int64_t L, const int32_t *pos, ork_tensor **out) {
    const zi_cfg *c = &z->cfg;
    int half = c->head_dim / 2;
    float *pe = malloc((size_t)L * half * 2 * sizeof *pe);
    double *om = malloc((size_t)half * sizeof *om);
    int *ax = malloc((size_t)half * sizeof *ax);
    if (!pe || !om || !ax) {
        free(pe); free(om); free(ax);
        return ORK_E_NOMEM;
    }
    for (int a = 0, j = 0; a < 3; a++)
        for (int i = 0; i < c->axes[a] / 2 && j < half; i++, j++) {
            om[j] = 1.0 / pow((double)c->theta, (double)(2 * i) / (double)c->axes[a]);
            ax[j] = a;
        }
    for (int64_t l = 0; l < L; l++)
        for (int j = 0; j < half; j++) {
            float ang = (float)((double)pos[l * 3 + ax[j]] * om[j]);
            pe[(l * half + j) * 2 + 0] = (float)cos((double)ang);
            pe[(l * half + j) * 2 + 1] = (float)sin((double)ang);
        }
    int64_t shape[3] = {L, half, 2};
    ork_status s = z->ta->from_host(g, ORK_F32, 3, shape, pe, out);
    free(pe); free(om); free(ax);
    return s;
}

/* Positions: caption token i (1 + i, 0, 0) for i < Cp (its pads included);
 * image token k < N (Cp + 1, k / w, k % w), image pads (0, 0, 0). */
static ork_status rope_tables(zi_model *z, ork_graph *g, ork_carry *c) {
    int64_t Np = z->Np, Cp = z->Cp;
    int32_t *pos = calloc((size_t)(Np + Cp) * 3, sizeof *pos);
    if (!pos) return ORK_E_NOMEM;
    for (int64_t k = 0; k < z->N; k++) {
        pos[k * 3 + 0] = (int32_t)Cp + 1;
        pos[k * 3 + 1] = (int32_t)(k / z->w_tok);
        pos[k * 3 + 2] = (int32_t)(k % z->w_tok);
    }
    for (int64_t i = 0; i < Cp; i++) pos[(Np + i) * 3] = (int32_t)(1 + i);
    ork_status s = rope_table(z, g, Np, pos, &c->t[ZC_PE_IMG]);
    if (s == ORK_OK) s = rope_table(z, g, Cp, pos + Np * 3, &c->t[ZC_PE_CAP]);
    if (s == ORK_OK) s = rope_table(z, g, Np + Cp, pos, &c->t[ZC_PE_ALL]);
    free(pos);
    return s;
}

/* (B, n) F32 host values as a tensor of dtype dt */
static ork_status host_tensor(zi_model *z, ork_graph *g, int ndim, const int64_t *shape, const float *data,
                              ork_dtype dt, ork_tensor **out) {
    ork_tensor *t;
    TRY(z->ta->from_host(g, ORK_F32, ndim, shape, data, &t));
    if (dt == ORK_F32) { *out = t; return ORK_OK; }
    return z->ops->cast(g, t, dt, out);
}

ork_status zi_begin(zi_model *z, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    const ork_tensor_api *ta = z->ta;
    const zi_cfg *cf = &z->cfg;
    if (!in->tokens || !in->txt || !in->timesteps_host) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "model inputs lack %s", !in->tokens ? "tokens" : !in->txt ? "txt" : "timesteps_host");
        return ORK_E_INVALID;
    }
    if (ta->ndim(in->tokens) != 3 || ta->ndim(in->txt) != 3 || ta->dim(in->txt, 0) != ta->dim(in->tokens, 0) ||
        ta->dim(in->tokens, 2) != 4 * cf->in_channels || ta->dim(in->txt, 2) != cf->cap_dim ||
        ta->dim(in->tokens, 1) != (int64_t)in->h_tokens * in->w_tokens || ta->dim(in->txt, 1) < 1) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "model inputs do not match %s: tokens must be (B, %d·%d, %d), txt (B, T >= 1, %d) "
               "with one batch size; got tokens (%lld, %lld, %lld), txt of width %lld",
               cf->variant, in->h_tokens, in->w_tokens, 4 * cf->in_channels, cf->cap_dim,
               (long long)ta->dim(in->tokens, 0), (long long)ta->dim(in->tokens, 1), (long long)ta->dim(in->tokens, 2),
               (long long)ta->dim(in->txt, ta->ndim(in->txt) - 1));
        return ORK_E_INVALID;
    }
    const ork_dtype adt = ta->dtype(in->tokens);
    z->B = (int)ta->dim(in->tokens, 0);
    z->N = (int)ta->dim(in->tokens, 1);
    z->T = (int)ta->dim(in->txt, 1);
    z->Np = (int)round_up(z->N);
    z->Cp = (int)round_up(z->T);
    z->h_tok = in->h_tokens;
    z->w_tok = in->w_tokens;
    memset(c, 0, sizeof *c);
    c->n = ZC_COUNT;
    c->t[ZC_X] = in->tokens;
    c->t[ZC_TXT] = in->txt;
    float *f = malloc((size_t)z->B * ZI_FREQ_DIM * sizeof *f);
    if (!f) return ORK_E_NOMEM;
    t_freq(in->timesteps_host, z->B, f);
    int64_t fs[2] = {z->B, ZI_FREQ_DIM}, one = 1;
    ork_status s = host_tensor(z, g, 2, fs, f, adt, &c->t[ZC_TFREQ]);
    free(f);
    TRY(s);
    float zero = 0.0f;
    TRY(host_tensor(z, g, 1, &one, &zero, adt, &c->t[ZC_ZERO]));
    return rope_tables(z, g, c);
}

/* ---- blocks ------------------------------------------------------------------------ */

/* x (B, n, d) padded to (B, n_to, d) with the learned pad token <name> */
static ork_status pad_with(zi_model *z, ork_graph *g, ork_tensor *x, int64_t n_to, const char *name, ork_tensor **y) {
    const ork_tensor_api *ta = z->ta;
    int64_t B = ta->dim(x, 0), n = ta->dim(x, 1), d = ta->dim(x, 2);
    if (n_to == n) { *y = x; return ORK_OK; }
    ork_tensor *pad, *zeros;
    TRY(ta->weight(g, name, &pad));
    if (ta->dtype(pad) != ta->dtype(x)) TRY(z->ops->cast(g, pad, ta->dtype(x), &pad));
    int64_t shape[3] = {B, n_to - n, d};
    void *zb = calloc((size_t)(B * (n_to - n) * d), 4); /* zero bits are 0 in every float dtype */
    if (!zb) return ORK_E_NOMEM;
    ork_status s = ta->from_host(g, ta->dtype(x), 3, shape, zb, &zeros);
    free(zb);
    TRY(s);
    TRY(z->ops->add(g, zeros, pad, &pad));
    ork_tensor *parts[2] = {x, pad};
    return z->ops->concat(g, 2, parts, 1, y);
}

static ork_status block_embed(zi_model *z, ork_graph *g, ork_carry *c) {
    const ork_ops *o = z->ops;
    ork_tensor *h;
    TRY(lin(z, g, c->t[ZC_TFREQ], "t_embedder.mlp.0", 1, &h));
    TRY(o->silu(g, h, &h));
    TRY(lin(z, g, h, "t_embedder.mlp.2", 1, &c->t[ZC_ADALN]));
    TRY(lin(z, g, c->t[ZC_X], "all_x_embedder.2-1", 1, &h));
    TRY(pad_with(z, g, h, z->Np, "x_pad_token", &c->t[ZC_X]));
    TRY(rms(z, g, c->t[ZC_TXT], "cap_embedder.0", &h));
    TRY(lin(z, g, h, "cap_embedder.1", 1, &h));
    TRY(pad_with(z, g, h, z->Cp, "cap_pad_token", &c->t[ZC_CAP]));
    c->t[ZC_TFREQ] = c->t[ZC_TXT] = NULL;
    return ORK_OK;
}

/* (B, L, d) -> (B, H, L, hd), q/k RMS-normed per head and rotated */
static ork_status heads(zi_model *z, ork_graph *g, ork_tensor *x, const char *p, const char *proj, const char *nrm,
                        ork_tensor *pe, ork_tensor **y) {
    const zi_cfg *cf = &z->cfg;
    int64_t B = z->ta->dim(x, 0), L = z->ta->dim(x, 1), s4[4] = {B, L, cf->heads, cf->head_dim};
    static const int perm[4] = {0, 2, 1, 3};
    char n[200];
    snprintf(n, sizeof n, "%s.attention.%s", p, proj);
    TRY(lin(z, g, x, n, 0, &x));
    TRY(z->ops->reshape(g, x, 4, s4, &x));
    if (nrm) {
        snprintf(n, sizeof n, "%s.attention.%s", p, nrm);
        TRY(rms(z, g, x, n, &x));
    }
    TRY(z->ops->permute(g, x, perm, &x));
    if (nrm) TRY(z->ops->rope(g, x, pe, &x));
    *y = x;
    return ORK_OK;
}

static ork_status attention(zi_model *z, ork_graph *g, ork_tensor *x, const char *p, ork_tensor *pe, ork_tensor **y) {
    ork_tensor *q, *k, *v, *a;
    TRY(heads(z, g, x, p, "to_q", "norm_q", pe, &q));
    TRY(heads(z, g, x, p, "to_k", "norm_k", pe, &k));
    TRY(heads(z, g, x, p, "to_v", NULL, pe, &v));
    TRY(z->ops->attention(g, q, k, v, NULL, &a));
    int64_t B = z->ta->dim(x, 0), L = z->ta->dim(x, 1), s3[3] = {B, L, z->cfg.dim};
    static const int perm[4] = {0, 2, 1, 3};
    TRY(z->ops->permute(g, a, perm, &a));
    TRY(z->ops->reshape(g, a, 3, s3, &a));
    char n[200];
    snprintf(n, sizeof n, "%s.attention.to_out.0", p);
    return lin(z, g, a, n, 0, y);
}

static ork_status ffn(zi_model *z, ork_graph *g, ork_tensor *x, const char *p, ork_tensor **y) {
    char n[200];
    ork_tensor *a, *b;
    snprintf(n, sizeof n, "%s.feed_forward.w1", p);
    TRY(lin(z, g, x, n, 0, &a));
    snprintf(n, sizeof n, "%s.feed_forward.w3", p);
    TRY(lin(z, g, x, n, 0, &b));
    TRY(z->ops->silu(g, a, &a));
    TRY(z->ops->mul(g, a, b, &a));
    snprintf(n, sizeof n, "%s.feed_forward.w2", p);
    return lin(z, g, a, n, 0, y);
}

/* *x += gate·r (gate NULL: *x += r): the fused gated_add where the core has it
 * (ABI 1.4; one kernel each way on CUDA), else mul + add (the same values). */
static ork_status residual(zi_model *z, ork_graph *g, ork_tensor **x, ork_tensor *gate, ork_tensor *r) {
    if (!gate) return z->ops->add(g, *x, r, x);
    if (ork_ops_has_fused(z->ops)) return z->ops->gated_add(g, *x, gate, r, x);
    TRY(z->ops->mul(g, r, gate, &r));
    return z->ops->add(g, *x, r, x);
}

/* One ZImageTransformerBlock on *x (zimage.h); modulated ones read the
 * timestep conditioning adaln. */
static ork_status transformer(zi_model *z, ork_graph *g, const char *p, ork_tensor **x, ork_tensor *pe,
                              ork_tensor *adaln, ork_tensor *zero) {
    const ork_ops *o = z->ops;
    int64_t B = z->ta->dim(*x, 0), d = z->cfg.dim, s3[3] = {B, 1, d};
    ork_tensor *mod[4] = {NULL, NULL, NULL, NULL}, *h, *r;
    char n[200];
    if (adaln) {
        ork_tensor *m;
        snprintf(n, sizeof n, "%s.adaLN_modulation.0", p);
        TRY(lin(z, g, adaln, n, 1, &m));
        int64_t sizes[4] = {d, d, d, d};
        TRY(o->split(g, m, 1, 4, sizes, mod)); /* scale_msa, gate_msa, scale_mlp, gate_mlp */
        for (int k = 0; k < 4; k++) {
            TRY(o->reshape(g, mod[k], 3, s3, &mod[k]));
            if (k % 2) TRY(o->tanh_clamp(g, mod[k], 1.0f, &mod[k]));
        }
    }
    snprintf(n, sizeof n, "%s.attention_norm1", p);
    TRY(rms(z, g, *x, n, &h));
    if (adaln) TRY(o->modulate(g, h, zero, mod[0], &h));
    TRY(attention(z, g, h, p, pe, &r));
    snprintf(n, sizeof n, "%s.attention_norm2", p);
    TRY(rms(z, g, r, n, &r));
    TRY(residual(z, g, x, mod[1], r));
    snprintf(n, sizeof n, "%s.ffn_norm1", p);
    TRY(rms(z, g, *x, n, &h));
    if (adaln) TRY(o->modulate(g, h, zero, mod[2], &h));
    TRY(ffn(z, g, h, p, &r));
    snprintf(n, sizeof n, "%s.ffn_norm2", p);
    TRY(rms(z, g, r, n, &r));
    return residual(z, g, x, mod[3], r);
}

static ork_status block_final(zi_model *z, ork_graph *g, ork_carry *c) {
    const ork_ops *o = z->ops;
    int64_t B = z->ta->dim(c->t[ZC_X], 0), L = z->ta->dim(c->t[ZC_X], 1), s3[3] = {B, 1, z->cfg.dim};
    ork_tensor *sc, *h, *parts[2];
    TRY(o->silu(g, c->t[ZC_ADALN], &sc));
    TRY(lin(z, g, sc, "all_final_layer.2-1.adaLN_modulation.1", 1, &sc));
    TRY(o->reshape(g, sc, 3, s3, &sc));
    TRY(o->layernorm(g, c->t[ZC_X], 1e-6f, &h));
    TRY(o->modulate(g, h, c->t[ZC_ZERO], sc, &h));
    TRY(lin(z, g, h, "all_final_layer.2-1.linear", 1, &h));
    int64_t sizes[2] = {z->N, L - z->N};
    TRY(o->split(g, h, 1, 2, sizes, parts));
    /* Z-Image predicts x0 - noise at t' = 1 - t: the core's target is noise - x0 */
    TRY(o->scale(g, parts[0], -1.0f, &h));
    memset(c->t, 0, sizeof c->t);
    c->t[ZC_X] = h;
    return ORK_OK;
}

ork_status zi_block(zi_model *z, ork_graph *g, int i, ork_carry *c) {
    if (i < 0 || i >= z->n_blocks) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "block %d out of range (%d blocks)", i, z->n_blocks);
        return ORK_E_INVALID;
    }
    if (i == 0) return block_embed(z, g, c);
    if (i == zi_final(z)) return block_final(z, g, c);
    const char *p = z->block_names[i];
    if (i < zi_first_ctx(z)) return transformer(z, g, p, &c->t[ZC_X], c->t[ZC_PE_IMG], c->t[ZC_ADALN], c->t[ZC_ZERO]);
    if (i < zi_first_layer(z)) return transformer(z, g, p, &c->t[ZC_CAP], c->t[ZC_PE_CAP], NULL, NULL);
    if (i == zi_first_layer(z)) { /* the unified stream: [image, caption] */
        ork_tensor *parts[2] = {c->t[ZC_X], c->t[ZC_CAP]};
        TRY(z->ops->concat(g, 2, parts, 1, &c->t[ZC_X]));
        c->t[ZC_CAP] = c->t[ZC_PE_IMG] = c->t[ZC_PE_CAP] = NULL;
    }
    return transformer(z, g, p, &c->t[ZC_X], c->t[ZC_PE_ALL], c->t[ZC_ADALN], c->t[ZC_ZERO]);
}
