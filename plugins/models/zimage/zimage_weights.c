/* zimage_weights.c — Z-Image's weights: the declarations (diffusers names are
 * the canonical ones, so LoRA keys come out as diffusers and ComfyUI read
 * them), where a checkpoint comes from, the sizes read from its shapes, and
 * load. Two layouts:
 *  - diffusers (Tongyi-MAI/Z-Image-Turbo transformer/: sharded
 *    diffusion_pytorch_model-*.safetensors + index; the folder, its
 *    transformer/, or the repo id in the local Hugging Face cache): the
 *    canonical names;
 *  - the original / ComfyUI single file (z_image_turbo_bf16.safetensors),
 *    optionally under "model.diffusion_model." or "diffusion_model.":
 *    x_embedder. / final_layer. for all_x_embedder.2-1. / all_final_layer.2-1.,
 *    attention.qkv (q, k, v rows stacked) for to_q / to_k / to_v,
 *    attention.out for to_out.0, q_norm / k_norm for norm_q / norm_k, and a
 *    norm_final.weight nobody reads (diffusers'
 *    convert_z_image_transformer_checkpoint_to_diffusers, the same map).
 * Files and folders through the host service orakul.platform/1 (no OS header).
 * Owns the declaration arrays of a zi_model (freed in zimage_plugin.c). */
#include "zimage.h"

#include <orakul/platform.h>
#define ORK_HF_HUB_ONLY /* the repo-id resolution alone: no jansson */
#include <orakul/hf_checkpoint.h>

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY ORK_TRY

void zi_cfg_derive(zi_cfg *c) {
    c->head_dim = c->heads > 0 ? c->dim / c->heads : 0;
    c->ffn = (int)((double)c->dim / 3.0 * 8.0); /* int(dim / 3 * 8) */
    c->adaln = c->dim < ZI_ADALN_MAX ? c->dim : ZI_ADALN_MAX;
    /* Z-Image's axes_dims (32, 48, 48) for head_dim 128; the same split
     * (a quarter, then two equal even halves) for other sizes */
    c->axes[0] = (c->head_dim / 4) & ~1;
    c->axes[1] = c->axes[2] = ((c->head_dim - c->axes[0]) / 2) & ~1;
    c->theta = 256.0f;
    c->eps = 1e-5f;
}

/* ---- declarations ------------------------------------------------------------- */
static ork_status decl(zi_model *z, const char *name, int block, uint32_t flags, int ndim, ...) {
    if (z->n_weights == z->cap_weights) {
        int cap = z->cap_weights ? 2 * z->cap_weights : 512;
        ork_weight_decl *w = realloc(z->weights, (size_t)cap * sizeof *w);
        if (!w) return ORK_E_NOMEM;
        z->weights = w;
        z->cap_weights = cap;
    }
    char *s = strdup(name);
    if (!s) return ORK_E_NOMEM;
    ork_weight_decl *d = &z->weights[z->n_weights++];
    memset(d, 0, sizeof *d);
    d->name = s;
    d->block = block;
    d->flags = flags;
    d->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) d->shape[i] = va_arg(ap, int64_t);
    va_end(ap);
    return ORK_OK;
}

static ork_status linear(zi_model *z, int block, uint32_t tags, const char *mod, int bias, int64_t out, int64_t in) {
    char n[256];
    snprintf(n, sizeof n, "%s.weight", mod);
    TRY(decl(z, n, block, ORK_WEIGHT_LINEAR | tags, 2, out, in));
    if (!bias) return ORK_OK;
    snprintf(n, sizeof n, "%s.bias", mod);
    return decl(z, n, block, ORK_WEIGHT_BIAS | (tags & ORK_WEIGHT_TOKENS_MASK), 1, out);
}

static ork_status norm(zi_model *z, int block, uint32_t tags, const char *mod, int64_t n_) {
    char n[256];
    snprintf(n, sizeof n, "%s.weight", mod);
    return decl(z, n, block, ORK_WEIGHT_NORM | tags, 1, n_);
}

static ork_status add_block(zi_model *z, const char *name, int32_t kind, int32_t attn_tokens) {
    char **b = realloc(z->block_names, (size_t)(z->n_blocks + 1) * sizeof *b);
    if (!b) return ORK_E_NOMEM;
    z->block_names = b;
    ork_block_decl *d = realloc(z->block_decls, (size_t)(z->n_blocks + 1) * sizeof *d);
    if (!d) return ORK_E_NOMEM;
    z->block_decls = d;
    if (!(b[z->n_blocks] = strdup(name))) return ORK_E_NOMEM;
    d[z->n_blocks] = (ork_block_decl){kind, attn_tokens, 0};
    z->n_blocks++;
    return ORK_OK;
}

/* One ZImageTransformerBlock: tok is the tokens it runs over (image for the
 * noise refiner, text for the context refiner, joint for the layers). */
static ork_status decl_block(zi_model *z, int block, const char *p, ork_tokens tok, int modulated) {
    const zi_cfg *c = &z->cfg;
    const uint32_t T = ORK_WEIGHT_TOKENS(tok), A = T | ORK_WEIGHT_ATTN;
    char n[200];
    static const char *const qkv[3] = {"to_q", "to_k", "to_v"};
    for (int k = 0; k < 3; k++) {
        snprintf(n, sizeof n, "%s.attention.%s", p, qkv[k]);
        TRY(linear(z, block, A, n, 0, c->dim, c->dim));
    }
    snprintf(n, sizeof n, "%s.attention.to_out.0", p);
    TRY(linear(z, block, A, n, 0, c->dim, c->dim));
    snprintf(n, sizeof n, "%s.attention.norm_q", p);
    TRY(norm(z, block, A, n, c->head_dim));
    snprintf(n, sizeof n, "%s.attention.norm_k", p);
    TRY(norm(z, block, A, n, c->head_dim));
    static const char *const norms[4] = {"attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"};
    for (int k = 0; k < 4; k++) {
        snprintf(n, sizeof n, "%s.%s", p, norms[k]);
        TRY(norm(z, block, T, n, c->dim));
    }
    snprintf(n, sizeof n, "%s.feed_forward.w1", p);
    TRY(linear(z, block, T, n, 0, c->ffn, c->dim));
    snprintf(n, sizeof n, "%s.feed_forward.w2", p);
    TRY(linear(z, block, T, n, 0, c->dim, c->ffn));
    snprintf(n, sizeof n, "%s.feed_forward.w3", p);
    TRY(linear(z, block, T, n, 0, c->ffn, c->dim));
    if (!modulated) return ORK_OK;
    snprintf(n, sizeof n, "%s.adaLN_modulation.0", p);
    return linear(z, block, ORK_WEIGHT_TOKENS(ORK_TOKENS_ONE), n, 1, 4 * (int64_t)c->dim, c->adaln);
}

ork_status zi_declare(zi_model *z) {
    const zi_cfg *c = &z->cfg;
    const uint32_t ONE = ORK_WEIGHT_TOKENS(ORK_TOKENS_ONE), IMG = ORK_WEIGHT_TOKENS(ORK_TOKENS_IMG),
                   TXT = ORK_WEIGHT_TOKENS(ORK_TOKENS_TXT);
    char n[200];
    /* block 0: the embedders and the pad tokens */
    TRY(add_block(z, "embed", ORK_BLOCK_KIND_INPUT, ORK_TOKENS_JOINT));
    TRY(linear(z, 0, ONE, "t_embedder.mlp.0", 1, ZI_T_MID, ZI_FREQ_DIM));
    TRY(linear(z, 0, ONE, "t_embedder.mlp.2", 1, c->adaln, ZI_T_MID));
    TRY(linear(z, 0, IMG, "all_x_embedder.2-1", 1, c->dim, 4 * (int64_t)c->in_channels));
    TRY(norm(z, 0, TXT, "cap_embedder.0", c->cap_dim));
    TRY(linear(z, 0, TXT, "cap_embedder.1", 1, c->dim, c->cap_dim));
    TRY(decl(z, "x_pad_token", 0, IMG, 2, (int64_t)1, (int64_t)c->dim));
    TRY(decl(z, "cap_pad_token", 0, TXT, 2, (int64_t)1, (int64_t)c->dim));
    for (int i = 0; i < c->n_refiner; i++) {
        snprintf(n, sizeof n, "noise_refiner.%d", i);
        TRY(add_block(z, n, ORK_BLOCK_KIND_TRANSFORMER, ORK_TOKENS_IMG));
        TRY(decl_block(z, z->n_blocks - 1, n, ORK_TOKENS_IMG, 1));
    }
    for (int i = 0; i < c->n_refiner; i++) {
        snprintf(n, sizeof n, "context_refiner.%d", i);
        TRY(add_block(z, n, ORK_BLOCK_KIND_TRANSFORMER, ORK_TOKENS_TXT));
        TRY(decl_block(z, z->n_blocks - 1, n, ORK_TOKENS_TXT, 0));
    }
    for (int i = 0; i < c->n_layers; i++) {
        snprintf(n, sizeof n, "layers.%d", i);
        TRY(add_block(z, n, ORK_BLOCK_KIND_TRANSFORMER, ORK_TOKENS_JOINT));
        TRY(decl_block(z, z->n_blocks - 1, n, ORK_TOKENS_JOINT, 1));
    }
    int b = z->n_blocks;
    TRY(add_block(z, "final_layer", ORK_BLOCK_KIND_OUTPUT, ORK_TOKENS_JOINT));
    /* over the unified stream: the final layer runs on all Np + Cp tokens */
    TRY(linear(z, b, ORK_WEIGHT_TOKENS(ORK_TOKENS_JOINT), "all_final_layer.2-1.linear", 1,
               4 * (int64_t)c->in_channels, c->dim));
    return linear(z, b, ONE, "all_final_layer.2-1.adaLN_modulation.1", 1, c->dim, c->adaln);
}

/* ---- source -------------------------------------------------------------------- */
static int is_dir(const ork_platform_api *pl, const char *p) {
    ork_file_info fi;
    return pl->path_info(p, &fi) == ORK_OK && fi.kind == ORK_KIND_DIR;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* the one *.safetensors of dir (not ae* / vae*), into out; 0 when none or several */
static int single_file(const ork_platform_api *pl, const char *dir, char *out, size_t n) {
    ork_dir *d = NULL;
    if (pl->dir_open(dir, &d) != ORK_OK) return 0;
    int count = 0;
    const char *nm;
    while ((nm = pl->dir_next(d))) {
        if (!ends_with(nm, ".safetensors") || !strncmp(nm, "ae", 2) || !strncmp(nm, "vae", 3)) continue;
        if (count++ == 0) snprintf(out, n, "%s/%s", dir, nm);
    }
    pl->dir_close(d);
    return count == 1;
}

ork_status zi_open_source(zi_model *z, const char *name_or_path) {
    char path[2000], snap[1800];
    if (!name_or_path || !name_or_path[0]) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "model.name_or_path is empty (a .safetensors file, a diffusers folder or preset:<name>)");
        return ORK_E_CONFIG;
    }
    const ork_platform_api *pl =
        z->host->get_service ? (const ork_platform_api *)z->host->get_service(z->host, ORK_SERVICE_PLATFORM) : NULL;
    if (!pl) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "zimage: the host offers no %s service (a core older than the plugin)",
               ORK_SERVICE_PLATFORM);
        return ORK_E_ABI;
    }
    ork_file_info sb;
    if (pl->path_info(name_or_path, &sb) != ORK_OK) {
        if (!ork_hf_is_repo_id(name_or_path)) {
            ZI_LOG(z, ORK_LEVEL_ERROR, "%s: no such file or folder (model.name_or_path: a Z-Image .safetensors file "
                   "or index, a diffusers folder holding transformer/, a Hugging Face repo id already downloaded, or "
                   "preset:zimage-turbo|zimage|tiny; nothing is downloaded)", name_or_path);
            return ORK_E_IO;
        }
        /* a repo id in the local cache: the header logs the one line when absent */
        ork_status s = ork_hf_hub_snapshot(z->host, pl, "model.name_or_path", name_or_path, snap, sizeof snap);
        if (s != ORK_OK) return s;
        if (pl->path_info(snap, &sb) != ORK_OK) {
            ZI_LOG(z, ORK_LEVEL_ERROR, "%s (%s): cannot read the snapshot folder", name_or_path, snap);
            return ORK_E_IO;
        }
        name_or_path = snap;
    }
    snprintf(path, sizeof path, "%s", name_or_path);
    if (sb.kind == ORK_KIND_DIR) {
        char sub[1900];
        snprintf(sub, sizeof sub, "%s/transformer", name_or_path);
        if (is_dir(pl, sub)) {
            snprintf(path, sizeof path, "%s", sub);
            snprintf(z->src_dir, sizeof z->src_dir, "%s", name_or_path);
        } else if (single_file(pl, name_or_path, sub, sizeof sub)) {
            snprintf(path, sizeof path, "%s", sub);
        } /* else: a folder of shards (the safetensors service reads it) */
    }
    snprintf(z->src_path, sizeof z->src_path, "%s", path);
    return z->st->open(path, &z->src); /* the service logs a bad file's line */
}

/* ---- the checkpoint's names ------------------------------------------------------ */
static int replace(char *s, size_t n, const char *from, const char *to) {
    char *at = strstr(s, from);
    if (!at) return 0;
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    snprintf(s, n, "%s", tmp);
    return 1;
}

/* The source tensor of canonical weight name, and for a q/k/v slice of a
 * fused qkv its row index (0, 1, 2; -1 otherwise). */
static void source_name(const zi_model *z, const char *name, char *out, size_t n, int *part) {
    *part = -1;
    char s[400];
    snprintf(s, sizeof s, "%s", name);
    if (z->src_single) {
        replace(s, sizeof s, "all_x_embedder.2-1.", "x_embedder.");
        replace(s, sizeof s, "all_final_layer.2-1.", "final_layer.");
        replace(s, sizeof s, ".attention.to_out.0.", ".attention.out.");
        replace(s, sizeof s, ".attention.norm_q.", ".attention.q_norm.");
        replace(s, sizeof s, ".attention.norm_k.", ".attention.k_norm.");
        if (replace(s, sizeof s, ".attention.to_q.", ".attention.qkv.")) *part = 0;
        else if (replace(s, sizeof s, ".attention.to_k.", ".attention.qkv.")) *part = 1;
        else if (replace(s, sizeof s, ".attention.to_v.", ".attention.qkv.")) *part = 2;
    }
    snprintf(out, n, "%s%s", z->src_prefix, s);
}

static int has(const zi_model *z, const char *name, ork_st_info *t) {
    ork_st_info tmp;
    return z->st->find(z->src, name, t ? t : &tmp) == ORK_OK;
}

static int count_blocks(const zi_model *z, const char *fmt) {
    char n[200];
    int k = 0;
    for (;; k++) {
        snprintf(n, sizeof n, fmt, z->src_prefix, k);
        if (!has(z, n, NULL)) return k;
    }
}

ork_status zi_detect(zi_model *z) {
    static const char *const prefixes[] = {"", "model.diffusion_model.", "diffusion_model.", "model.", NULL};
    char n[200];
    ork_st_info t;
    int found = 0;
    for (int i = 0; prefixes[i] && !found; i++) {
        snprintf(z->src_prefix, sizeof z->src_prefix, "%s", prefixes[i]);
        snprintf(n, sizeof n, "%sall_x_embedder.2-1.weight", prefixes[i]);
        if (has(z, n, &t)) { z->src_single = 0; found = 1; break; }
        snprintf(n, sizeof n, "%sx_embedder.weight", prefixes[i]);
        if (has(z, n, &t)) { z->src_single = 1; found = 1; break; }
    }
    if (!found) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: not a Z-Image transformer: no all_x_embedder.2-1.weight (diffusers) nor "
               "x_embedder.weight (the original / ComfyUI file) under any known prefix", z->src_path);
        return ORK_E_FORMAT;
    }
    zi_cfg *c = &z->cfg;
    if (t.ndim != 2 || t.shape[1] % 4) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: %s has %d dims, want (dim, 4·in_channels)", z->src_path, t.name, t.ndim);
        return ORK_E_FORMAT;
    }
    c->dim = (int)t.shape[0];
    c->in_channels = (int)(t.shape[1] / 4);
    snprintf(n, sizeof n, "%scap_embedder.1.weight", z->src_prefix);
    if (!has(z, n, &t) || t.ndim != 2) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: missing tensor '%s' (2-D) of a Z-Image transformer", z->src_path, n);
        return ORK_E_FORMAT;
    }
    c->cap_dim = (int)t.shape[1];
    snprintf(n, sizeof n, "%slayers.0.attention.%s.weight", z->src_prefix, z->src_single ? "q_norm" : "norm_q");
    if (!has(z, n, &t) || t.ndim != 1 || t.shape[0] <= 0 || c->dim % t.shape[0]) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: missing tensor '%s' (head_dim dividing dim %d) of a Z-Image transformer",
               z->src_path, n, c->dim);
        return ORK_E_FORMAT;
    }
    c->heads = c->dim / (int)t.shape[0];
    c->n_layers = count_blocks(z, "%slayers.%d.attention_norm1.weight");
    c->n_refiner = count_blocks(z, "%snoise_refiner.%d.attention_norm1.weight");
    zi_cfg_derive(c);
    c->variant = c->dim == 3840 && c->n_layers == 30 && c->n_refiner == 2 && c->cap_dim == 2560
                     ? (z->default_turbo ? "zimage-turbo" : "zimage") : "custom";
    c->turbo = z->default_turbo;
    return ORK_OK;
}

/* A weight's source tensor (a row slice of a fused qkv included): its data,
 * dtype and shape checked against the declaration; one line names the file
 * and the field on failure. */
static ork_status source_of(zi_model *z, const ork_weight_decl *d, ork_dtype *dt, const void **data) {
    char n[480];
    int part;
    source_name(z, d->name, n, sizeof n, &part);
    ork_st_info t;
    if (z->st->find(z->src, n, &t) != ORK_OK) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: missing tensor '%s'%s%s%s of the detected Z-Image model (%s: dim %d, %d layers, "
               "%d refiner layers)", z->src_path, n, strcmp(n, d->name) ? " (for " : "", strcmp(n, d->name) ? d->name : "",
               strcmp(n, d->name) ? ")" : "", z->cfg.variant, z->cfg.dim, z->cfg.n_layers, z->cfg.n_refiner);
        return ORK_E_FORMAT;
    }
    if (t.dtype != ORK_F32 && t.dtype != ORK_BF16 && t.dtype != ORK_F16) {
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: tensor '%s' has dtype %d; Z-Image weights must be F32, BF16 or F16 (a scaled "
               "FP8 checkpoint is not read)", z->src_path, n, (int)t.dtype);
        return ORK_E_UNSUPPORTED;
    }
    int64_t want0 = part >= 0 ? 3 * d->shape[0] : d->shape[0];
    int ok = t.ndim == d->ndim && t.shape[0] == want0;
    for (int k = 1; ok && k < d->ndim; k++) ok = t.shape[k] == d->shape[k];
    if (!ok) {
        char got[96] = "", want[96] = "";
        for (int k = 0; k < t.ndim && k < 8; k++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)t.shape[k]);
        for (int k = 0; k < d->ndim; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? ", " : "",
                     (long long)(k ? d->shape[k] : want0));
        ZI_LOG(z, ORK_LEVEL_ERROR, "%s: tensor '%s' has shape (%s), want (%s) for the detected Z-Image model (%s: dim %d)",
               z->src_path, n, got, want, z->cfg.variant, z->cfg.dim);
        return ORK_E_FORMAT;
    }
    *dt = t.dtype;
    size_t rows = (size_t)d->shape[0], row_bytes = (size_t)(t.nbytes / (uint64_t)want0);
    *data = (const unsigned char *)t.data + (part > 0 ? (size_t)part * rows * row_bytes : 0);
    return ORK_OK;
}

ork_status zi_validate(zi_model *z) {
    if (!z->src) return ORK_OK;
    for (int i = 0; i < z->n_weights; i++) {
        ork_dtype dt;
        const void *data;
        TRY(source_of(z, &z->weights[i], &dt, &data));
    }
    return ORK_OK;
}

ork_status zi_load(zi_model *z, const ork_weight_sink *sink) {
    uint64_t seed = (uint64_t)z->p.seed;
    for (int i = 0; i < z->n_weights; i++) {
        const ork_weight_decl *d = &z->weights[i];
        if (z->src) {
            ork_dtype dt;
            const void *data;
            TRY(source_of(z, d, &dt, &data));
            TRY(sink->put(sink, d->name, dt, data));
            continue;
        }
        /* a preset: random weights of PyTorch's default init scale; norm scales 1 */
        if (d->flags & ORK_WEIGHT_NORM) {
            float *ones = malloc((size_t)d->shape[0] * sizeof *ones);
            if (!ones) return ORK_E_NOMEM;
            for (int64_t k = 0; k < d->shape[0]; k++) ones[k] = 1.0f;
            ork_status s = sink->put(sink, d->name, ORK_F32, ones);
            free(ones);
            TRY(s);
            continue;
        }
        int64_t fan_in = d->ndim == 2 && (d->flags & ORK_WEIGHT_LINEAR) ? d->shape[1] : z->cfg.dim;
        float std = 1.0f / sqrtf(3.0f * (float)fan_in);
        TRY(sink->put_random(sink, d->name, std, seed * 1000003u + (uint64_t)i));
    }
    return ORK_OK;
}
