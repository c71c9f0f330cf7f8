/* flux_weights.c — FLUX weight declarations (canonical = BFL names, FLUX.md
 * §3.1/§3.3), variant detection from a checkpoint's keys and shapes, and
 * loading from BFL or diffusers key formats (split q/k/v fused back, the final
 * layer's shift/scale swap undone) or seeded random weights for presets. */
#include "flux.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ork_status flux_decl(flux_model *f, const char *name, int block, uint32_t flags, int ndim, ...) {
    if (f->n_weights == f->cap_weights) {
        int cap = f->cap_weights ? 2 * f->cap_weights : 256;
        ork_weight_decl *w = realloc(f->weights, (size_t)cap * sizeof *w);
        char **n = realloc(f->weight_names, (size_t)cap * sizeof *n);
        if (!w || !n) { free(w ? w : f->weights); free(n ? n : f->weight_names); f->weights = NULL; f->weight_names = NULL; return ORK_E_NOMEM; }
        f->weights = w;
        f->weight_names = n;
        f->cap_weights = cap;
    }
    char *s = strdup(name);
    if (!s) return ORK_E_NOMEM;
    ork_weight_decl *d = &f->weights[f->n_weights];
    memset(d, 0, sizeof *d);
    d->name = s;
    d->block = block;
    d->flags = flags;
    d->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) d->shape[i] = va_arg(ap, int64_t);
    va_end(ap);
    f->weight_names[f->n_weights++] = s;
    return ORK_OK;
}

/* A linear layer: weight (out, in) and, on FLUX.1, bias (out). */
static ork_status decl_linear(flux_model *f, int block, const char *mod, int64_t out, int64_t in) {
    char n[256];
    snprintf(n, sizeof n, "%s.weight", mod);
    ORK_TRY(flux_decl(f, n, block, ORK_WEIGHT_LINEAR, 2, out, in));
    if (f->cfg.bias) {
        snprintf(n, sizeof n, "%s.bias", mod);
        ORK_TRY(flux_decl(f, n, block, ORK_WEIGHT_BIAS, 1, out));
    }
    return ORK_OK;
}

static ork_status decl_norm(flux_model *f, int block, const char *mod) {
    char n[256];
    snprintf(n, sizeof n, "%s.query_norm.scale", mod);
    ORK_TRY(flux_decl(f, n, block, ORK_WEIGHT_NORM, 1, (int64_t)f->cfg.head_dim));
    snprintf(n, sizeof n, "%s.key_norm.scale", mod);
    return flux_decl(f, n, block, ORK_WEIGHT_NORM, 1, (int64_t)f->cfg.head_dim);
}

static ork_status add_block_name(flux_model *f, const char *name) {
    char **b = realloc(f->block_names, (size_t)(f->n_blocks + 1) * sizeof *b);
    if (!b) return ORK_E_NOMEM;
    f->block_names = b;
    if (!(b[f->n_blocks] = strdup(name))) return ORK_E_NOMEM;
    f->n_blocks++;
    return ORK_OK;
}

ork_status flux_declare(flux_model *f) {
    const flux_cfg *c = &f->cfg;
    int64_t d = c->hidden, m = c->mlp_hidden;
    int64_t mlp_in = c->version == 2 ? 2 * m : m; /* SwiGLU doubles the first layer */
    char n[256];
    /* block 0: embedders (and FLUX.2's shared modulation) */
    ORK_TRY(add_block_name(f, "embed"));
    ORK_TRY(decl_linear(f, 0, "img_in", d, c->in_channels));
    ORK_TRY(decl_linear(f, 0, "txt_in", d, c->context_dim));
    ORK_TRY(decl_linear(f, 0, "time_in.in_layer", d, 256));
    ORK_TRY(decl_linear(f, 0, "time_in.out_layer", d, d));
    if (c->guidance) {
        ORK_TRY(decl_linear(f, 0, "guidance_in.in_layer", d, 256));
        ORK_TRY(decl_linear(f, 0, "guidance_in.out_layer", d, d));
    }
    if (c->vec_dim > 0) {
        ORK_TRY(decl_linear(f, 0, "vector_in.in_layer", d, c->vec_dim));
        ORK_TRY(decl_linear(f, 0, "vector_in.out_layer", d, d));
    }
    if (c->version == 2) {
        ORK_TRY(decl_linear(f, 0, "double_stream_modulation_img.lin", 6 * d, d));
        ORK_TRY(decl_linear(f, 0, "double_stream_modulation_txt.lin", 6 * d, d));
        ORK_TRY(decl_linear(f, 0, "single_stream_modulation.lin", 3 * d, d));
    }
    for (int i = 0; i < c->depth; i++) {
        int b = f->n_blocks;
        snprintf(n, sizeof n, "double_blocks.%d", i);
        ORK_TRY(add_block_name(f, n));
        static const char *const streams[2] = {"img", "txt"};
        for (int s = 0; s < 2; s++) {
            char mod[128];
            if (c->version == 1) {
                snprintf(mod, sizeof mod, "double_blocks.%d.%s_mod.lin", i, streams[s]);
                ORK_TRY(decl_linear(f, b, mod, 6 * d, d));
            }
            snprintf(mod, sizeof mod, "double_blocks.%d.%s_attn.qkv", i, streams[s]);
            ORK_TRY(decl_linear(f, b, mod, 3 * d, d));
            snprintf(mod, sizeof mod, "double_blocks.%d.%s_attn.norm", i, streams[s]);
            ORK_TRY(decl_norm(f, b, mod));
            snprintf(mod, sizeof mod, "double_blocks.%d.%s_attn.proj", i, streams[s]);
            ORK_TRY(decl_linear(f, b, mod, d, d));
            snprintf(mod, sizeof mod, "double_blocks.%d.%s_mlp.0", i, streams[s]);
            ORK_TRY(decl_linear(f, b, mod, mlp_in, d));
            snprintf(mod, sizeof mod, "double_blocks.%d.%s_mlp.2", i, streams[s]);
            ORK_TRY(decl_linear(f, b, mod, d, m));
        }
    }
    for (int i = 0; i < c->depth_single; i++) {
        int b = f->n_blocks;
        char mod[128];
        snprintf(n, sizeof n, "single_blocks.%d", i);
        ORK_TRY(add_block_name(f, n));
        snprintf(mod, sizeof mod, "single_blocks.%d.linear1", i);
        ORK_TRY(decl_linear(f, b, mod, 3 * d + mlp_in, d));
        snprintf(mod, sizeof mod, "single_blocks.%d.linear2", i);
        ORK_TRY(decl_linear(f, b, mod, d, d + m));
        snprintf(mod, sizeof mod, "single_blocks.%d.norm", i);
        ORK_TRY(decl_norm(f, b, mod));
        if (c->version == 1) {
            snprintf(mod, sizeof mod, "single_blocks.%d.modulation.lin", i);
            ORK_TRY(decl_linear(f, b, mod, 3 * d, d));
        }
    }
    int b = f->n_blocks;
    ORK_TRY(add_block_name(f, "final_layer"));
    ORK_TRY(decl_linear(f, b, "final_layer.linear", c->in_channels, d));
    ORK_TRY(decl_linear(f, b, "final_layer.adaLN_modulation.1", 2 * d, d));
    return ORK_OK;
}

/* ---- checkpoint detection -------------------------------------------------- */

static int has(flux_model *f, const char *name, ork_st_info *out) {
    ork_st_info tmp;
    return f->st->find(f->src, name, out ? out : &tmp) == ORK_OK;
}

static int has_bfl(flux_model *f, const char *name, ork_st_info *out) {
    char n[512];
    snprintf(n, sizeof n, "%s%s", f->src_prefix, name);
    return has(f, n, out);
}

static int max_index(flux_model *f, const char *prefix) {
    int best = -1;
    size_t pl = strlen(prefix);
    for (int64_t i = 0, n = f->st->count(f->src); i < n; i++) {
        ork_st_info t;
        if (f->st->at(f->src, i, &t) != ORK_OK) continue;
        if (strncmp(t.name, prefix, pl) != 0) continue;
        int k = atoi(t.name + pl);
        if (k > best) best = k;
    }
    return best;
}

ork_status flux_detect(flux_model *f, const char *path) {
    snprintf(f->src_path, sizeof f->src_path, "%s", path);
    ORK_TRY(f->st->open(path, &f->src));
    static const char *const prefixes[] = {"", "model.diffusion_model.", "diffusion_model.", "transformer.", NULL};
    ork_st_info t;
    flux_cfg *c = &f->cfg;
    memset(c, 0, sizeof *c);
    for (int i = 0; prefixes[i]; i++) {
        snprintf(f->src_prefix, sizeof f->src_prefix, "%s", prefixes[i]);
        if (has_bfl(f, "double_blocks.0.img_attn.qkv.weight", NULL) || has_bfl(f, "img_in.weight", NULL)) {
            f->src_diffusers = 0;
            goto found;
        }
        if (has_bfl(f, "x_embedder.weight", NULL)) {
            f->src_diffusers = 1;
            goto found;
        }
    }
    FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: keys of no known FLUX variant (no img_in.weight / x_embedder.weight)", path);
    return ORK_E_FORMAT;
found:;
    const int dif = f->src_diffusers;
    char pre[160];
    if (!has_bfl(f, dif ? "context_embedder.weight" : "txt_in.weight", &t) || t.ndim != 2) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor %s%s", path, f->src_prefix, dif ? "context_embedder.weight" : "txt_in.weight");
        return ORK_E_FORMAT;
    }
    c->hidden = t.shape[0] > (1 << 20) ? -1 : (int)t.shape[0];
    c->context_dim = t.shape[1] > (1 << 20) ? -1 : (int)t.shape[1];
    c->version = (has_bfl(f, "double_stream_modulation_img.lin.weight", NULL) ||
                  has_bfl(f, "double_stream_modulation_img.linear.weight", NULL)) ? 2 : 1;
    if (!has_bfl(f, dif ? "x_embedder.weight" : "img_in.weight", &t) || t.ndim != 2) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: missing image embedder weight", path);
        return ORK_E_FORMAT;
    }
    c->in_channels = t.shape[1] > (1 << 20) ? -1 : (int)t.shape[1];
    snprintf(pre, sizeof pre, "%s%s", f->src_prefix, dif ? "transformer_blocks." : "double_blocks.");
    c->depth = max_index(f, pre) + 1;
    snprintf(pre, sizeof pre, "%s%s", f->src_prefix, dif ? "single_transformer_blocks." : "single_blocks.");
    c->depth_single = max_index(f, pre) + 1;
    if (c->depth > 1024 || c->depth_single > 1024 || c->hidden <= 0 || c->context_dim <= 0 || c->in_channels <= 0) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: implausible FLUX sizes from the keys: %d double blocks, %d single blocks, "
                 "hidden %d, context %d, in %d", path, c->depth, c->depth_single, c->hidden, c->context_dim, c->in_channels);
        return ORK_E_FORMAT;
    }
    const char *kn = dif ? "transformer_blocks.0.attn.norm_k.weight" : "double_blocks.0.img_attn.norm.key_norm.scale";
    if (c->depth <= 0 || !has_bfl(f, kn, &t) || t.ndim != 1 || t.shape[0] <= 0 || c->hidden % t.shape[0]) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: cannot find the double blocks' key norm (%s%s)", path, f->src_prefix, kn);
        return ORK_E_FORMAT;
    }
    c->heads = c->hidden / (int)t.shape[0];
    const char *mn = dif ? (c->version == 2 ? "transformer_blocks.0.ff.linear_out.weight" : "transformer_blocks.0.ff.net.2.weight")
                         : "double_blocks.0.img_mlp.2.weight";
    if (!has_bfl(f, mn, &t) || t.ndim != 2) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor %s%s", path, f->src_prefix, mn);
        return ORK_E_FORMAT;
    }
    c->mlp_hidden = (int)t.shape[1];
    c->guidance = has_bfl(f, dif ? (c->version == 2 ? "time_guidance_embed.guidance_embedder.linear_1.weight"
                                                     : "time_text_embed.guidance_embedder.linear_1.weight")
                                 : "guidance_in.in_layer.weight", NULL);
    if (c->version == 1 && has_bfl(f, dif ? "time_text_embed.text_embedder.linear_1.weight" : "vector_in.in_layer.weight", &t))
        c->vec_dim = (int)t.shape[1];
    flux_cfg_derive(c);
    c->variant = flux_cfg_match(c);
    return ORK_OK;
}

/* ---- loading ------------------------------------------------------------- */

/* diffusers name of a canonical (BFL) module for a non-fused mapping, or NULL. */
static int diffusers_name(const flux_cfg *c, const char *bfl, char *out, size_t n) {
    int i;
    char rest[128];
    const int v2 = c->version == 2;
    static const struct { const char *bfl, *v1, *v2; } top[] = {
        {"img_in", "x_embedder", "x_embedder"},
        {"txt_in", "context_embedder", "context_embedder"},
        {"time_in.in_layer", "time_text_embed.timestep_embedder.linear_1", "time_guidance_embed.timestep_embedder.linear_1"},
        {"time_in.out_layer", "time_text_embed.timestep_embedder.linear_2", "time_guidance_embed.timestep_embedder.linear_2"},
        {"guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1", "time_guidance_embed.guidance_embedder.linear_1"},
        {"guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2", "time_guidance_embed.guidance_embedder.linear_2"},
        {"vector_in.in_layer", "time_text_embed.text_embedder.linear_1", NULL},
        {"vector_in.out_layer", "time_text_embed.text_embedder.linear_2", NULL},
        {"double_stream_modulation_img.lin", NULL, "double_stream_modulation_img.linear"},
        {"double_stream_modulation_txt.lin", NULL, "double_stream_modulation_txt.linear"},
        {"single_stream_modulation.lin", NULL, "single_stream_modulation.linear"},
        {"final_layer.linear", "proj_out", "proj_out"},
        {"final_layer.adaLN_modulation.1", "norm_out.linear", "norm_out.linear"},
    };
    for (size_t k = 0; k < sizeof top / sizeof top[0]; k++) {
        size_t l = strlen(top[k].bfl);
        if (strncmp(bfl, top[k].bfl, l) == 0 && bfl[l] == '.') {
            const char *d = v2 ? top[k].v2 : top[k].v1;
            if (!d) return 0;
            snprintf(out, n, "%s%s", d, bfl + l);
            return 1;
        }
    }
    if (sscanf(bfl, "double_blocks.%d.%127s", &i, rest) == 2) {
        static const struct { const char *bfl, *v1, *v2; } dbl[] = {
            {"img_mod.lin", "norm1.linear", NULL},
            {"txt_mod.lin", "norm1_context.linear", NULL},
            {"img_attn.norm.query_norm.scale", "attn.norm_q.weight", "attn.norm_q.weight"},
            {"img_attn.norm.key_norm.scale", "attn.norm_k.weight", "attn.norm_k.weight"},
            {"txt_attn.norm.query_norm.scale", "attn.norm_added_q.weight", "attn.norm_added_q.weight"},
            {"txt_attn.norm.key_norm.scale", "attn.norm_added_k.weight", "attn.norm_added_k.weight"},
            {"img_attn.proj", "attn.to_out.0", "attn.to_out.0"},
            {"txt_attn.proj", "attn.to_add_out", "attn.to_add_out"},
            {"img_mlp.0", "ff.net.0.proj", "ff.linear_in"},
            {"img_mlp.2", "ff.net.2", "ff.linear_out"},
            {"txt_mlp.0", "ff_context.net.0.proj", "ff_context.linear_in"},
            {"txt_mlp.2", "ff_context.net.2", "ff_context.linear_out"},
        };
        for (size_t k = 0; k < sizeof dbl / sizeof dbl[0]; k++) {
            size_t l = strlen(dbl[k].bfl);
            if (strncmp(rest, dbl[k].bfl, l) == 0 && (rest[l] == '.' || rest[l] == 0)) {
                const char *d = v2 ? dbl[k].v2 : dbl[k].v1;
                if (!d) return 0;
                snprintf(out, n, "transformer_blocks.%d.%s%s", i, d, rest + l);
                return 1;
            }
        }
        return 0;
    }
    if (sscanf(bfl, "single_blocks.%d.%127s", &i, rest) == 2) {
        static const struct { const char *bfl, *v1, *v2; } sgl[] = {
            {"modulation.lin", "norm.linear", NULL},
            {"norm.query_norm.scale", "attn.norm_q.weight", "attn.norm_q.weight"},
            {"norm.key_norm.scale", "attn.norm_k.weight", "attn.norm_k.weight"},
            {"linear2", "proj_out", "attn.to_out"},
            {"linear1", NULL, "attn.to_qkv_mlp_proj"},
        };
        for (size_t k = 0; k < sizeof sgl / sizeof sgl[0]; k++) {
            size_t l = strlen(sgl[k].bfl);
            if (strncmp(rest, sgl[k].bfl, l) == 0 && (rest[l] == '.' || rest[l] == 0)) {
                const char *d = v2 ? sgl[k].v2 : sgl[k].v1;
                if (!d) return 0;
                snprintf(out, n, "single_transformer_blocks.%d.%s%s", i, d, rest + l);
                return 1;
            }
        }
    }
    return 0;
}

/* Fused diffusers sources: q/k/v (+ proj_mlp on FLUX.1 single blocks). */
static int diffusers_parts(const flux_cfg *c, const char *bfl, char parts[4][192], int *nparts) {
    int i;
    char rest[128];
    static const char *const qkv[3] = {"to_q", "to_k", "to_v"};
    static const char *const add[3] = {"add_q_proj", "add_k_proj", "add_v_proj"};
    if (sscanf(bfl, "double_blocks.%d.%127s", &i, rest) == 2) {
        int txt = strncmp(rest, "txt_attn.qkv.", 13) == 0;
        if (!txt && strncmp(rest, "img_attn.qkv.", 13) != 0) return 0;
        const char *suffix = rest + 13;
        for (int k = 0; k < 3; k++)
            snprintf(parts[k], 192, "transformer_blocks.%d.attn.%s.%s", i, txt ? add[k] : qkv[k], suffix);
        *nparts = 3;
        return 1;
    }
    if (c->version == 1 && sscanf(bfl, "single_blocks.%d.%127s", &i, rest) == 2 &&
        strncmp(rest, "linear1.", 8) == 0) {
        for (int k = 0; k < 3; k++)
            snprintf(parts[k], 192, "single_transformer_blocks.%d.attn.%s.%s", i, qkv[k], rest + 8);
        snprintf(parts[3], 192, "single_transformer_blocks.%d.proj_mlp.%s", i, rest + 8);
        *nparts = 4;
        return 1;
    }
    return 0;
}

static int float_dtype(ork_dtype dt) {
    return dt == ORK_F32 || dt == ORK_BF16 || dt == ORK_F16 || dt == ORK_F8_E4M3 || dt == ORK_F8_E5M2 || dt == ORK_F64;
}

static ork_status check_shape(flux_model *f, const ork_weight_decl *d, const ork_st_info *t, int64_t rows_expected) {
    if (!float_dtype(t->dtype)) {
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' is not of a float dtype (F32, BF16, F16, F8_E4M3, F8_E5M2, F64)",
                 f->src_path, t->name);
        return ORK_E_FORMAT;
    }
    int ok = t->ndim == d->ndim;
    for (int k = 0; ok && k < d->ndim; k++) {
        int64_t want = (k == 0 && rows_expected >= 0) ? rows_expected : d->shape[k];
        ok = t->shape[k] == want;
    }
    if (!ok) {
        char got[96] = "", want[96] = "";
        size_t p = 0, q = 0;
        for (int k = 0; k < t->ndim && p < sizeof got; k++)
            p += (size_t)snprintf(got + p, sizeof got - p, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        for (int k = 0; k < d->ndim && q < sizeof want; k++)
            q += (size_t)snprintf(want + q, sizeof want - q, "%s%lld", k ? "," : "",
                                  (long long)((k == 0 && rows_expected >= 0) ? rows_expected : d->shape[k]));
        FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has shape [%s], expected [%s] for the detected FLUX.%d model (%s, hidden %d)",
                 f->src_path, t->name, got, want, f->cfg.version, f->cfg.variant, f->cfg.hidden);
        return ORK_E_FORMAT;
    }
    return ORK_OK;
}

/* sink NULL: only check that the tensor(s) exist with the right shape and dtype. */
static ork_status load_one(flux_model *f, const ork_weight_sink *sink, const ork_weight_decl *d) {
    char name[1024];
    ork_st_info t;
    if (!f->src_diffusers) {
        snprintf(name, sizeof name, "%s%s", f->src_prefix, d->name);
        if (!has(f, name, &t)) goto missing;
        ORK_TRY(check_shape(f, d, &t, -1));
        if (!sink) return ORK_OK;
        if (t.dtype == ORK_F8_E4M3 || t.dtype == ORK_F8_E5M2) {
            /* fp8 checkpoint: a per-tensor scale under one of two spellings */
            char sn[1100];
            const char *base = name;
            size_t bl = strlen(base) - strlen(".weight");
            float scale = 1.0f;
            ork_st_info s;
            snprintf(sn, sizeof sn, "%.*s.weight_scale", (int)bl, base);
            if (!has(f, sn, &s)) snprintf(sn, sizeof sn, "%.*s.scale_weight", (int)bl, base);
            if (has(f, sn, &s)) {
                if (s.nbytes == 0 || f->st->read_f32(&s, &scale) != ORK_OK) return ORK_E_FORMAT;
            }
            int64_t rows = d->shape[0];
            float *sc = malloc((size_t)rows * sizeof *sc);
            if (!sc) return ORK_E_NOMEM;
            for (int64_t r = 0; r < rows; r++) sc[r] = scale;
            ork_status st = sink->put_quantized(sink, d->name, t.dtype, t.data, sc, 0);
            free(sc);
            return st;
        }
        return sink->put(sink, d->name, t.dtype, t.data);
    }
    /* diffusers */
    char parts[4][192];
    int np = 0;
    int64_t numel = 1;
    for (int k = 0; k < d->ndim; k++) numel *= d->shape[k];
    if (diffusers_parts(&f->cfg, d->name, parts, &np)) {
        float *buf = sink ? malloc((size_t)numel * sizeof(float)) : NULL;
        if (sink && !buf) return ORK_E_NOMEM;
        int64_t row_elems = d->ndim == 2 ? d->shape[1] : 1, row = 0;
        for (int k = 0; k < np; k++) {
            snprintf(name, sizeof name, "%s%s", f->src_prefix, parts[k]);
            if (!has(f, name, &t)) { free(buf); goto missing; }
            int64_t rows = t.shape[0];
            if (!float_dtype(t.dtype) || row + rows > d->shape[0] || t.ndim != d->ndim ||
                (d->ndim == 2 && t.shape[1] != d->shape[1])) {
                FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' (shape [%lld%s%lld], %s) does not fit into %s [%lld, %lld]",
                         f->src_path, t.name, (long long)t.shape[0], t.ndim > 1 ? "," : "",
                         t.ndim > 1 ? (long long)t.shape[1] : 0LL, float_dtype(t.dtype) ? "float" : "not a float dtype",
                         d->name, (long long)d->shape[0], d->ndim > 1 ? (long long)d->shape[1] : 1LL);
                free(buf);
                return ORK_E_FORMAT;
            }
            ork_status s = sink ? f->st->read_f32(&t, buf + row * row_elems) : ORK_OK;
            if (s != ORK_OK) { free(buf); return s; }
            row += rows;
        }
        if (row != d->shape[0]) {
            FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: the parts of %s have %lld rows, expected %lld", f->src_path, d->name,
                     (long long)row, (long long)d->shape[0]);
            free(buf);
            return ORK_E_FORMAT;
        }
        if (!sink) return ORK_OK;
        ork_status s = sink->put(sink, d->name, ORK_F32, buf);
        free(buf);
        return s;
    }
    char dn[256];
    if (!diffusers_name(&f->cfg, d->name, dn, sizeof dn)) {
        snprintf(name, sizeof name, "%s%s", f->src_prefix, d->name);
        goto missing;
    }
    snprintf(name, sizeof name, "%s%s", f->src_prefix, dn);
    if (!has(f, name, &t)) goto missing;
    ORK_TRY(check_shape(f, d, &t, -1));
    if (!sink) return ORK_OK;
    if (strncmp(d->name, "final_layer.adaLN_modulation.1.", 31) == 0) {
        /* diffusers stores (scale, shift); BFL (shift, scale): swap halves */
        float *buf = malloc((size_t)numel * sizeof(float)), *out = malloc((size_t)numel * sizeof(float));
        if (!buf || !out) { free(buf); free(out); return ORK_E_NOMEM; }
        ork_status s = f->st->read_f32(&t, buf);
        if (s == ORK_OK) {
            int64_t half = numel / 2;
            memcpy(out, buf + half, (size_t)half * sizeof(float));
            memcpy(out + half, buf, (size_t)half * sizeof(float));
            s = sink->put(sink, d->name, ORK_F32, out);
        }
        free(buf);
        free(out);
        return s;
    }
    return sink->put(sink, d->name, t.dtype, t.data);
missing:
    FLUX_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor '%s'%s%s%s of the detected FLUX.%d model (%s, hidden %d, %d+%d blocks)",
             f->src_path, name, strcmp(name, d->name) ? " (for " : "", strcmp(name, d->name) ? d->name : "",
             strcmp(name, d->name) ? ")" : "", f->cfg.version, f->cfg.variant, f->cfg.hidden, f->cfg.depth,
             f->cfg.depth_single);
    return ORK_E_FORMAT;
}

ork_status flux_validate(flux_model *f) {
    for (int i = 0; f->src && i < f->n_weights; i++)
        if (!(f->weights[i].flags & ORK_WEIGHT_CODEC)) ORK_TRY(load_one(f, NULL, &f->weights[i]));
    return ORK_OK;
}

ork_status flux_load(flux_model *f, const ork_weight_sink *sink) {
    uint64_t seed = (uint64_t)f->p.seed;
    for (int i = 0; i < f->n_weights; i++) {
        const ork_weight_decl *d = &f->weights[i];
        if (d->flags & ORK_WEIGHT_CODEC) continue;
        if (f->src) {
            ORK_TRY(load_one(f, sink, d));
            continue;
        }
        /* Presets: seeded random weights of PyTorch's default scale
         * (uniform ±1/sqrt(fan_in) has std 1/sqrt(3·fan_in)); norm scales 1. */
        if (d->flags & ORK_WEIGHT_NORM) {
            float *ones = malloc((size_t)d->shape[0] * sizeof *ones);
            if (!ones) return ORK_E_NOMEM;
            for (int64_t k = 0; k < d->shape[0]; k++) ones[k] = 1.0f;
            ork_status s = sink->put(sink, d->name, ORK_F32, ones);
            free(ones);
            ORK_TRY(s);
            continue;
        }
        int64_t fan_in = d->ndim == 2 ? d->shape[1] : f->cfg.hidden;
        float std = 1.0f / sqrtf(3.0f * (float)fan_in);
        ORK_TRY(sink->put_random(sink, d->name, std, seed * 1000003u + (uint64_t)i));
    }
    return ORK_OK; /* the codec's weights are the codec component's (the core loads them) */
}
