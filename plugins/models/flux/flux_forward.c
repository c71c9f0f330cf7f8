/* flux_forward.c — the FLUX forward pass, block by block (FLUX.md §1.3-§1.5,
 * §2.2), written against the ops service only. Gradients come from the core's
 * tape; LoRA is added by the core inside ops->linear. */
#include "flux.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY ORK_TRY

ork_status flux_w(flux_model *f, ork_graph *g, ork_tensor **out, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return f->ta->weight(g, name, out);
}

/* y = mod.weight·x (+ mod.bias on FLUX.1) */
static ork_status lin(flux_model *f, ork_graph *g, ork_tensor *x, const char *mod, ork_tensor **y) {
    ork_tensor *w, *b = NULL;
    TRY(flux_w(f, g, &w, "%s.weight", mod));
    if (f->cfg.bias) TRY(flux_w(f, g, &b, "%s.bias", mod));
    return f->ops->linear(g, x, w, b, y);
}

/* Timestep embedding (FLUX.md §1.5): t·1000, cos first, 256 dims. */
static void timestep_embedding(const float *t, int B, float *out /* (B, 256) */) {
    for (int b = 0; b < B; b++) {
        double tt = 1000.0 * (double)t[b];
        for (int j = 0; j < 128; j++) {
            double fr = exp(-log(10000.0) * (double)j / 128.0);
            out[b * 256 + j] = (float)cos(tt * fr);
            out[b * 256 + 128 + j] = (float)sin(tt * fr);
        }
    }
}

/* Rope table (L, D/2, 2) of (cos, sin), text first. FLUX.1 ids: text 0,
 * image (0, row, col); FLUX.2 ids: text (0, 0, 0, l), image (0, h, w, 0).
 * It depends only on the token layout: in training (a recording graph) it
 * is kept on the device across passes (f->pe) where the core offers
 * persistent tensors; sampling's graphs come and go and leave nothing. */
static ork_status rope_table(flux_model *f, ork_graph *g, int T, int h, int w, ork_tensor **out) {
    const flux_cfg *c = &f->cfg;
    const ork_tensor_api *ta = f->ta;
    if (f->pe && f->pe_T == T && f->pe_h == h && f->pe_w == w && ta->device(f->pe) == ta->graph_device(g)) {
        *out = f->pe;
        return ORK_OK;
    }
    int L = T + h * w, half = c->head_dim / 2;
    float *pe = malloc((size_t)L * half * 2 * sizeof *pe);
    double *omega = calloc((size_t)half, sizeof *omega); /* axes that do not sum to head_dim: angle 0 */
    int *axis = calloc((size_t)half, sizeof *axis);
    if (!pe || !omega || !axis) {
        free(pe);
        free(omega);
        free(axis);
        return ORK_E_NOMEM;
    }
    for (int a = 0, j = 0; a < c->n_axes; a++)
        for (int i = 0; i < c->axes[a] / 2; i++, j++) {
            omega[j] = pow((double)c->theta, -2.0 * i / c->axes[a]);
            axis[j] = a;
        }
    for (int l = 0; l < L; l++) {
        double pos[4] = {0, 0, 0, 0};
        if (l >= T) {
            int k = l - T;
            pos[1] = k / w;
            pos[2] = k % w;
        } else if (c->version == 2) {
            pos[3] = l;
        }
        for (int j = 0; j < half; j++) {
            double ang = pos[axis[j]] * omega[j];
            pe[((size_t)l * half + j) * 2 + 0] = (float)cos(ang);
            pe[((size_t)l * half + j) * 2 + 1] = (float)sin(ang);
        }
    }
    int64_t shape[3] = {L, half, 2};
    ork_status s;
    if (ta->grad_enabled(g) && ork_tensor_api_has_persistent(ta)) {
        ork_tensor *t = NULL;
        s = ta->persistent(g, ORK_F32, 3, shape, pe, &t);
        if (s == ORK_OK) {
            if (f->pe) ta->release(f->pe);
            f->pe = *out = t;
            f->pe_T = T;
            f->pe_h = h;
            f->pe_w = w;
        }
    } else {
        s = ta->from_host(g, ORK_F32, 3, shape, pe, out);
    }
    free(pe);
    free(omega);
    free(axis);
    return s;
}

/* (B, n) F32 host values as a tensor of the activation dtype dt */
static ork_status host_tensor(flux_model *f, ork_graph *g, int B, int n, const float *data, ork_dtype dt,
                              ork_tensor **out) {
    ork_tensor *t;
    int64_t shape[2] = {B, n};
    TRY(f->ta->from_host(g, ORK_F32, 2, shape, data, &t));
    if (dt == ORK_F32) { *out = t; return ORK_OK; }
    return f->ops->cast(g, t, dt, out);
}

ork_status flux_begin(flux_model *f, ork_graph *g, const ork_model_inputs *in, ork_carry *c) {
    const ork_tensor_api *ta = f->ta;
    if (!in->tokens || !in->txt || !in->timesteps_host) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model inputs lack %s", !in->tokens ? "tokens" : !in->txt ? "txt" : "timesteps_host");
        return ORK_E_INVALID;
    }
    if (ta->ndim(in->tokens) != 3 || ta->ndim(in->txt) != 3 || ta->dim(in->txt, 0) != ta->dim(in->tokens, 0) ||
        (in->vec && f->cfg.vec_dim > 0 && (ta->ndim(in->vec) != 2 || ta->dim(in->vec, 0) != ta->dim(in->tokens, 0) ||
                                           ta->dim(in->vec, 1) != f->cfg.vec_dim))) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "model inputs: tokens must be (B, N, %d), txt (B, T, %d)%s with one batch size",
                 f->cfg.in_channels, f->cfg.context_dim, f->cfg.vec_dim > 0 ? ", vec (B, vec_dim)" : "");
        return ORK_E_INVALID;
    }
    const ork_dtype adt = ta->dtype(in->tokens);
    int B = (int)ta->dim(in->tokens, 0);
    f->N = (int)ta->dim(in->tokens, 1);
    f->T = (int)ta->dim(in->txt, 1);
    f->h_tok = in->h_tokens;
    f->w_tok = in->w_tokens;
    if (f->N != in->h_tokens * in->w_tokens || ta->dim(in->tokens, 2) != f->cfg.in_channels ||
        ta->dim(in->txt, 2) != f->cfg.context_dim) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "inputs do not match %s: tokens (%lld, %lld, %lld) for a %dx%d grid of %d channels, txt width %lld (want %d)",
                 f->cfg.variant, (long long)ta->dim(in->tokens, 0), (long long)ta->dim(in->tokens, 1),
                 (long long)ta->dim(in->tokens, 2), in->h_tokens, in->w_tokens, f->cfg.in_channels,
                 (long long)ta->dim(in->txt, 2), f->cfg.context_dim);
        return ORK_E_INVALID;
    }
    memset(c, 0, sizeof *c);
    c->n = FC_COUNT;
    c->t[FC_IMG] = in->tokens;
    c->t[FC_TXT] = in->txt;
    float *emb = malloc((size_t)B * 256 * sizeof *emb);
    if (!emb) return ORK_E_NOMEM;
    timestep_embedding(in->timesteps_host, B, emb);
    ork_status s = host_tensor(f, g, B, 256, emb, adt, &c->t[FC_TEMB]);
    if (s == ORK_OK && f->cfg.guidance) {
        float *gv = malloc((size_t)B * sizeof *gv);
        if (!gv) s = ORK_E_NOMEM;
        for (int b = 0; s == ORK_OK && b < B; b++) gv[b] = in->guidance_host ? in->guidance_host[b] : 1.0f;
        if (s == ORK_OK) {
            timestep_embedding(gv, B, emb);
            s = host_tensor(f, g, B, 256, emb, adt, &c->t[FC_GEMB]);
        }
        free(gv);
    }
    free(emb);
    TRY(s);
    if (f->cfg.vec_dim > 0) {
        if (in->vec) {
            c->t[FC_Y] = in->vec;
        } else { /* no pooled vector given: zeros (an empty-prompt stand-in) */
            float *z = calloc((size_t)B * f->cfg.vec_dim, sizeof *z);
            if (!z) return ORK_E_NOMEM;
            s = host_tensor(f, g, B, f->cfg.vec_dim, z, adt, &c->t[FC_Y]);
            free(z);
            TRY(s);
        }
    }
    return rope_table(f, g, f->T, in->h_tokens, in->w_tokens, &c->t[FC_PE]);
}

/* MLPEmbedder: out_layer(silu(in_layer(x))) */
static ork_status mlp_embed(flux_model *f, ork_graph *g, ork_tensor *x, const char *mod, ork_tensor **y) {
    char n[96];
    ork_tensor *h;
    snprintf(n, sizeof n, "%s.in_layer", mod);
    TRY(lin(f, g, x, n, &h));
    TRY(f->ops->silu(g, h, &h));
    snprintf(n, sizeof n, "%s.out_layer", mod);
    return lin(f, g, h, n, y);
}

static ork_status block_embed(flux_model *f, ork_graph *g, ork_carry *c) {
    const ork_ops *o = f->ops;
    ork_tensor *vec, *e;
    TRY(lin(f, g, c->t[FC_IMG], "img_in", &c->t[FC_IMG]));
    TRY(lin(f, g, c->t[FC_TXT], "txt_in", &c->t[FC_TXT]));
    TRY(mlp_embed(f, g, c->t[FC_TEMB], "time_in", &vec));
    if (f->cfg.guidance) {
        TRY(mlp_embed(f, g, c->t[FC_GEMB], "guidance_in", &e));
        TRY(o->add(g, vec, e, &vec));
    }
    if (f->cfg.vec_dim > 0) {
        TRY(mlp_embed(f, g, c->t[FC_Y], "vector_in", &e));
        TRY(o->add(g, vec, e, &vec));
    }
    c->t[FC_VEC] = vec;
    c->t[FC_TEMB] = c->t[FC_GEMB] = c->t[FC_Y] = NULL;
    if (f->cfg.version == 2) {
        ork_tensor *sv;
        TRY(o->silu(g, vec, &sv));
        TRY(lin(f, g, sv, "double_stream_modulation_img.lin", &c->t[FC_MOD_IMG]));
        TRY(lin(f, g, sv, "double_stream_modulation_txt.lin", &c->t[FC_MOD_TXT]));
        TRY(lin(f, g, sv, "single_stream_modulation.lin", &c->t[FC_MOD_SINGLE]));
    }
    return ORK_OK;
}

/* Split a (B, k·d) modulation into k pieces of shape (B, 1, d). */
static ork_status mod_chunks(flux_model *f, ork_graph *g, ork_tensor *m, int k, ork_tensor **out) {
    int64_t d = f->cfg.hidden, sizes[6];
    int64_t B = f->ta->dim(m, 0);
    for (int i = 0; i < k; i++) sizes[i] = d;
    TRY(f->ops->split(g, m, -1, k, sizes, out));
    int64_t shape[3] = {B, 1, d};
    for (int i = 0; i < k; i++) TRY(f->ops->reshape(g, out[i], 3, shape, &out[i]));
    return ORK_OK;
}

/* Modulation vector of a FLUX.1 block module: lin(silu(vec)). */
static ork_status block_mod(flux_model *f, ork_graph *g, ork_carry *c, const char *mod, int k, ork_tensor **out) {
    ork_tensor *sv, *m;
    TRY(f->ops->silu(g, c->t[FC_VEC], &sv));
    TRY(lin(f, g, sv, mod, &m));
    return mod_chunks(f, g, m, k, out);
}

/* (B, L, d) -> (B, H, L, hd) */
static ork_status to_heads(flux_model *f, ork_graph *g, ork_tensor *x, ork_tensor **y) {
    int64_t B = f->ta->dim(x, 0), L = f->ta->dim(x, 1);
    int64_t shape[4] = {B, L, f->cfg.heads, f->cfg.head_dim};
    static const int perm[4] = {0, 2, 1, 3};
    TRY(f->ops->reshape(g, x, 4, shape, &x));
    return f->ops->permute(g, x, perm, y);
}

/* (B, H, L, hd) -> (B, L, d) */
static ork_status from_heads(flux_model *f, ork_graph *g, ork_tensor *x, ork_tensor **y) {
    static const int perm[4] = {0, 2, 1, 3};
    int64_t B = f->ta->dim(x, 0), L = f->ta->dim(x, 2);
    TRY(f->ops->permute(g, x, perm, &x));
    int64_t shape[3] = {B, L, f->cfg.hidden};
    return f->ops->reshape(g, x, 3, shape, y);
}

/* qkv (B, L, 3d) -> q, k normed (B, H, L, hd), v (B, H, L, hd) */
static ork_status qkv_heads(flux_model *f, ork_graph *g, ork_tensor *qkv, const char *norm, ork_tensor **q,
                            ork_tensor **k, ork_tensor **v) {
    int64_t d = f->cfg.hidden, sizes[3] = {d, d, d};
    ork_tensor *p[3], *qs, *ks;
    TRY(f->ops->split(g, qkv, -1, 3, sizes, p));
    TRY(to_heads(f, g, p[0], q));
    TRY(to_heads(f, g, p[1], k));
    TRY(to_heads(f, g, p[2], v));
    TRY(flux_w(f, g, &qs, "%s.query_norm.scale", norm));
    TRY(flux_w(f, g, &ks, "%s.key_norm.scale", norm));
    TRY(f->ops->rmsnorm(g, *q, qs, 1e-6f, q));
    return f->ops->rmsnorm(g, *k, ks, 1e-6f, k);
}

/* rope on q, k then attention; (B, H, L, hd) -> (B, L, d) */
static ork_status attend(flux_model *f, ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, ork_tensor *pe,
                         ork_tensor **y) {
    ork_tensor *a;
    TRY(f->ops->rope(g, q, pe, &q));
    TRY(f->ops->rope(g, k, pe, &k));
    TRY(f->ops->attention(g, q, k, v, NULL, &a));
    return from_heads(f, g, a, y);
}

/* Joint attention over n streams' qkv linear outputs qkv[i] (B, L_i, 3d), text
 * first, with the norm modules norm[i]: ys[i] (B, L_i, d), or with extra
 * (B, L, C2) and n = 1 one ys[0] (B, L, d + C2) = [attention | extra] (the
 * single blocks' linear2 input). ABI 1.4 cores: qkv_rope + attention +
 * attn_merge, one pass each way around the attention on CUDA (issue #31); an
 * older core: split, permute, rmsnorm, concat, rope, permute, split/concat. */
static ork_status joint_attention(flux_model *f, ork_graph *g, int n, ork_tensor *const *qkv, const char *const *norm,
                                  ork_tensor *pe, ork_tensor *extra, ork_tensor **ys) {
    const ork_ops *o = f->ops;
    int64_t sizes[2];
    for (int i = 0; i < n; i++) sizes[i] = f->ta->dim(qkv[i], 1);
    if (ork_ops_has_qkv(o)) {
        ork_tensor *qw[2], *kw[2], *q, *k, *v, *a;
        for (int i = 0; i < n; i++) {
            TRY(flux_w(f, g, &qw[i], "%s.query_norm.scale", norm[i]));
            TRY(flux_w(f, g, &kw[i], "%s.key_norm.scale", norm[i]));
        }
        TRY(o->qkv_rope(g, n, qkv, qw, kw, pe, 1e-6f, f->cfg.heads, &q, &k, &v));
        TRY(o->attention(g, q, k, v, NULL, &a));
        return o->attn_merge(g, a, n, sizes, extra, ys);
    }
    ork_tensor *qs[2], *ks[2], *vs[2], *q, *k, *v, *a;
    for (int i = 0; i < n; i++) TRY(qkv_heads(f, g, qkv[i], norm[i], &qs[i], &ks[i], &vs[i]));
    q = qs[0], k = ks[0], v = vs[0];
    if (n > 1) {
        TRY(o->concat(g, n, qs, 2, &q));
        TRY(o->concat(g, n, ks, 2, &k));
        TRY(o->concat(g, n, vs, 2, &v));
    }
    TRY(attend(f, g, q, k, v, pe, &a));
    if (extra) {
        ork_tensor *cat[2] = {a, extra};
        return o->concat(g, 2, cat, -1, &ys[0]);
    }
    if (n == 1) { ys[0] = a; return ORK_OK; }
    return o->split(g, a, 1, n, sizes, ys);
}

/* x + gate·y: one fused op where the core has it (ABI 1.4), else mul + add (the same values) */
static ork_status gated_add(flux_model *f, ork_graph *g, ork_tensor *x, ork_tensor *gate, ork_tensor *y, ork_tensor **out) {
    if (ork_ops_has_fused(f->ops)) return f->ops->gated_add(g, x, gate, y, out);
    TRY(f->ops->mul(g, y, gate, &y));
    return f->ops->add(g, x, y, out);
}

/* (1 + scale)·LN(x) + shift: one fused op where the core has it (ABI 1.4), else layernorm + modulate */
static ork_status ln_mod(flux_model *f, ork_graph *g, ork_tensor *x, ork_tensor *shift, ork_tensor *scale,
                         ork_tensor **out) {
    if (ork_ops_has_fused(f->ops)) return f->ops->layernorm_modulate(g, x, shift, scale, 1e-6f, out);
    TRY(f->ops->layernorm(g, x, 1e-6f, out));
    return f->ops->modulate(g, *out, shift, scale, out);
}

static ork_status mlp(flux_model *f, ork_graph *g, ork_tensor *x, const char *pre, ork_tensor **y) {
    char n[128];
    ork_tensor *h;
    snprintf(n, sizeof n, "%s.0", pre);
    TRY(lin(f, g, x, n, &h));
    if (f->cfg.version == 2) TRY(f->ops->swiglu(g, h, &h));
    else TRY(f->ops->gelu_tanh(g, h, &h));
    snprintf(n, sizeof n, "%s.2", pre);
    return lin(f, g, h, n, y);
}

static ork_status block_double(flux_model *f, ork_graph *g, int i, ork_carry *c) {
    ork_tensor *mi[6], *mt[6];
    char n[128], n2[128];
    if (f->cfg.version == 1) {
        snprintf(n, sizeof n, "double_blocks.%d.img_mod.lin", i);
        TRY(block_mod(f, g, c, n, 6, mi));
        snprintf(n, sizeof n, "double_blocks.%d.txt_mod.lin", i);
        TRY(block_mod(f, g, c, n, 6, mt));
    } else {
        TRY(mod_chunks(f, g, c->t[FC_MOD_IMG], 6, mi));
        TRY(mod_chunks(f, g, c->t[FC_MOD_TXT], 6, mt));
    }
    ork_tensor *img = c->t[FC_IMG], *txt = c->t[FC_TXT];
    ork_tensor *x, *qkv[2], *parts[2]; /* qkv: text, image */
    /* image stream: (1 + scale1)·LN(img) + shift1 -> qkv */
    TRY(ln_mod(f, g, img, mi[0], mi[1], &x));
    snprintf(n, sizeof n, "double_blocks.%d.img_attn.qkv", i);
    TRY(lin(f, g, x, n, &qkv[1]));
    /* text stream */
    TRY(ln_mod(f, g, txt, mt[0], mt[1], &x));
    snprintf(n, sizeof n, "double_blocks.%d.txt_attn.qkv", i);
    TRY(lin(f, g, x, n, &qkv[0]));
    /* joint attention, text first */
    char nt[128], ni[128];
    snprintf(nt, sizeof nt, "double_blocks.%d.txt_attn.norm", i);
    snprintf(ni, sizeof ni, "double_blocks.%d.img_attn.norm", i);
    const char *norms[2] = {nt, ni};
    TRY(joint_attention(f, g, 2, qkv, norms, c->t[FC_PE], NULL, parts));
    /* image: attention projection and MLP */
    snprintf(n, sizeof n, "double_blocks.%d.img_attn.proj", i);
    TRY(lin(f, g, parts[1], n, &x));
    TRY(gated_add(f, g, img, mi[2], x, &img));
    TRY(ln_mod(f, g, img, mi[3], mi[4], &x));
    snprintf(n2, sizeof n2, "double_blocks.%d.img_mlp", i);
    TRY(mlp(f, g, x, n2, &x));
    TRY(gated_add(f, g, img, mi[5], x, &img));
    /* text */
    snprintf(n, sizeof n, "double_blocks.%d.txt_attn.proj", i);
    TRY(lin(f, g, parts[0], n, &x));
    TRY(gated_add(f, g, txt, mt[2], x, &txt));
    TRY(ln_mod(f, g, txt, mt[3], mt[4], &x));
    snprintf(n2, sizeof n2, "double_blocks.%d.txt_mlp", i);
    TRY(mlp(f, g, x, n2, &x));
    TRY(gated_add(f, g, txt, mt[5], x, &txt));
    c->t[FC_IMG] = img;
    c->t[FC_TXT] = txt;
    return ORK_OK;
}

static ork_status block_single(flux_model *f, ork_graph *g, int i, ork_carry *c) {
    const ork_ops *o = f->ops;
    const flux_cfg *cf = &f->cfg;
    ork_tensor *m[3], *x = c->t[FC_IMG], *h, *l1, *parts[2], *act;
    char n[128];
    if (c->t[FC_TXT]) { /* first single block: join the streams, text first */
        ork_tensor *xs[2] = {c->t[FC_TXT], c->t[FC_IMG]};
        TRY(o->concat(g, 2, xs, 1, &x));
        c->t[FC_TXT] = NULL;
    }
    if (cf->version == 1) {
        snprintf(n, sizeof n, "single_blocks.%d.modulation.lin", i);
        TRY(block_mod(f, g, c, n, 3, m));
    } else {
        TRY(mod_chunks(f, g, c->t[FC_MOD_SINGLE], 3, m));
    }
    TRY(ln_mod(f, g, x, m[0], m[1], &h));
    snprintf(n, sizeof n, "single_blocks.%d.linear1", i);
    TRY(lin(f, g, h, n, &l1));
    int64_t d = cf->hidden, sizes[2] = {3 * d, cf->version == 2 ? 2 * (int64_t)cf->mlp_hidden : cf->mlp_hidden};
    TRY(o->split(g, l1, -1, 2, sizes, parts));
    if (cf->version == 2) TRY(o->swiglu(g, parts[1], &act));
    else TRY(o->gelu_tanh(g, parts[1], &act));
    snprintf(n, sizeof n, "single_blocks.%d.norm", i);
    const char *norm = n;
    TRY(joint_attention(f, g, 1, &parts[0], &norm, c->t[FC_PE], act, &h)); /* [attention | act] */
    snprintf(n, sizeof n, "single_blocks.%d.linear2", i);
    TRY(lin(f, g, h, n, &h));
    TRY(gated_add(f, g, x, m[2], h, &x));
    c->t[FC_IMG] = x;
    return ORK_OK;
}

static ork_status block_final(flux_model *f, ork_graph *g, ork_carry *c) {
    const ork_ops *o = f->ops;
    ork_tensor *x = c->t[FC_IMG], *sv, *mod, *m[2], *parts[2], *h;
    if (c->t[FC_TXT]) { /* no single blocks: the image stream is the output */
        c->t[FC_TXT] = NULL;
    } else {
        int64_t sizes[2] = {f->T, f->N};
        TRY(o->split(g, x, 1, 2, sizes, parts));
        x = parts[1];
    }
    TRY(o->silu(g, c->t[FC_VEC], &sv));
    TRY(lin(f, g, sv, "final_layer.adaLN_modulation.1", &mod));
    TRY(mod_chunks(f, g, mod, 2, m)); /* (shift, scale) */
    TRY(ln_mod(f, g, x, m[0], m[1], &h));
    TRY(lin(f, g, h, "final_layer.linear", &h));
    memset(c->t, 0, sizeof c->t);
    c->t[FC_IMG] = h;
    return ORK_OK;
}

ork_status flux_block(flux_model *f, ork_graph *g, int i, ork_carry *c) {
    const flux_cfg *cf = &f->cfg;
    if (i == 0) return block_embed(f, g, c);
    if (i <= cf->depth) return block_double(f, g, i - 1, c);
    if (i <= cf->depth + cf->depth_single) return block_single(f, g, i - 1 - cf->depth, c);
    if (i == cf->depth + cf->depth_single + 1) return block_final(f, g, c);
    return ORK_E_INVALID;
}
