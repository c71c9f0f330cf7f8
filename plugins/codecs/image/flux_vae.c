/* flux_vae.c — the FLUX autoencoders as the codecs "flux1-vae" and
 * "flux2-vae": BFL's FLUX.1 AE (src/flux/modules/autoencoder.py) and FLUX.2
 * AE (src/flux2/autoencoder.py), FLUX.md §7, read from an ae.safetensors in
 * BFL's key layout (encoder.down.{i}.block.{j}.norm1 ..., decoder.up.{i}...)
 * or, for FLUX.1, from a diffusers AutoencoderKL (a vae/ folder, the pipeline
 * folder holding it, or its diffusion_pytorch_model.safetensors): its names
 * are looked up through the mapping of diffusers' own converter
 * (loaders/single_file_utils.py convert_ldm_vae_checkpoint, read backwards:
 * down_blocks.{i}.resnets.{j} = down.{i}.block.{j}, up_blocks.{i} = up.{n-1-i},
 * mid_block.resnets.{0,1} = mid.block_{1,2}, mid_block.attentions.0.to_q ... =
 * mid.attn_1.q ... stored as (C, C) linears where BFL has (C, C, 1, 1) convs,
 * conv_norm_out = norm_out, conv_shortcut = nin_shortcut); the declared names
 * stay BFL's.
 * Pixels (B, 3, H, W) in [0, 1] <-> latents (B, z, H/s, W/s), s = 2^(levels-1):
 *  - FLUX.1 (z 16): mean of the encoder's moments (no sampling),
 *    0.3611·(mean − 0.1159); the model packs 2×2 to 64 channels;
 *  - FLUX.2 (z 32): quant_conv after conv_out, mean, then BatchNorm with the
 *    stored running stats (eps 1e-4, no affine) over the 128 channels of the
 *    2×2 patch (c·4 + ph·2 + pw) — applied packed and unpacked back, so the
 *    latents stay (B, 32, H/8, W/8) and the model's 2×2 packing gives
 *    exactly FLUX.2's normalized tokens; decode inverts it and runs
 *    post_quant_conv first.
 * Moved here from the FLUX plugin (issue #30): the ops and their order are
 * unchanged, with an exact unpack/pack (permute) pair around FLUX.2's
 * BatchNorm.
 * The geometry (ch, ch_mult, res blocks per level, z) is read from the
 * checkpoint's shapes, so reduced test autoencoders load too; GroupNorm has
 * 32 groups (BFL hard-codes it). The mid-block attention (one head, D = C)
 * runs as matmul → softmax → matmul with q, k, v kept (B, C, L), because the
 * fused attention on CUDA supports head dims 64/128 only (docs/DECISIONS.md).
 * Owns: the BatchNorm statistics (host arrays in ic_codec.vae). */
#include "image_codecs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <orakul/platform.h>

#define TRY ORK_TRY
#define VAE_GROUPS 32
#define VAE_EPS 1e-6f
#define VAE_BN_EPS 1e-4
#define VAE1_SCALE 0.3611f
#define VAE1_SHIFT 0.1159f

/* ---- the checkpoint: geometry, BatchNorm statistics ------------------------------ */

/* s with the first `from` replaced by `to`, in place (n bytes); 0 when absent */
static int subst(char *s, size_t n, const char *from, const char *to) {
    char *at = strstr(s, from), tmp[192];
    if (!at) return 0;
    snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    snprintf(s, n, "%s", tmp);
    return 1;
}

/* The file's name of BFL's tensor `bfl` (encoder.down.0.block.1.conv1.weight):
 * itself, or in a diffusers AutoencoderKL the converter's name for it. */
static void vae_key(const ic_codec *f, const char *bfl, char *out, size_t n) {
    snprintf(out, n, "%.150s", bfl);
    if (!f->vae.diffusers) return;
    int i, j, k = 0;
    char rest[160];
    if (sscanf(bfl, "encoder.down.%d.block.%d.%159s", &i, &j, rest) == 3)
        snprintf(out, n, "encoder.down_blocks.%d.resnets.%d.%.100s", i, j, rest);
    else if (sscanf(bfl, "encoder.down.%d.downsample.%159s", &i, rest) == 2)
        snprintf(out, n, "encoder.down_blocks.%d.downsamplers.0.%.100s", i, rest);
    else if (sscanf(bfl, "decoder.up.%d.block.%d.%159s", &i, &j, rest) == 3)
        snprintf(out, n, "decoder.up_blocks.%d.resnets.%d.%.100s", f->vae.nlev - 1 - i, j, rest);
    else if (sscanf(bfl, "decoder.up.%d.upsample.%159s", &i, rest) == 2)
        snprintf(out, n, "decoder.up_blocks.%d.upsamplers.0.%.100s", f->vae.nlev - 1 - i, rest);
    else k = 1;
    if (k) {
        if (!subst(out, n, ".mid.block_1.", ".mid_block.resnets.0.")) subst(out, n, ".mid.block_2.", ".mid_block.resnets.1.");
        if (subst(out, n, ".mid.attn_1.", ".mid_block.attentions.0.")) {
            static const char *const m[][2] = {{".norm.", ".group_norm."}, {".q.", ".to_q."}, {".k.", ".to_k."},
                                               {".v.", ".to_v."}, {".proj_out.", ".to_out.0."}};
            for (size_t q = 0; q < sizeof m / sizeof m[0]; q++)
                if (subst(out, n, m[q][0], m[q][1])) break;
        }
        subst(out, n, ".norm_out.", ".conv_norm_out.");
        if (!strncmp(bfl, "encoder.quant_conv.", 19)) snprintf(out, n, "%s", bfl + 8);
        if (!strncmp(bfl, "decoder.post_quant_conv.", 24)) snprintf(out, n, "%s", bfl + 8);
    }
    subst(out, n, ".nin_shortcut.", ".conv_shortcut.");
}

static int st_shape(ic_codec *f, ork_st_set *s, const char *name, ork_st_info *t) {
    char k[192];
    vae_key(f, name, k, sizeof k);
    return f->st->find(s, k, t) == ORK_OK;
}

/* vae_path: a .safetensors file, or a folder holding ae.safetensors (what a
 * path is: orakul.platform/1, no OS header). */
static ork_status vae_file(ic_codec *f, char *out, size_t n) {
    const ork_platform_api *pl = f->host->get_service ? f->host->get_service(f->host, ORK_SERVICE_PLATFORM) : NULL;
    if (!pl) {
        IC_LOG(f, ORK_LEVEL_ERROR, "this core offers no %s service (files): upgrade orakul", ORK_SERVICE_PLATFORM);
        return ORK_E_UNSUPPORTED;
    }
    ork_file_info sb;
    if (pl->path_info(f->path, &sb) != ORK_OK) {
        IC_LOG(f, ORK_LEVEL_ERROR, "vae_path '%s' does not exist", f->path);
        return ORK_E_CONFIG;
    }
    if (sb.kind == ORK_KIND_DIR) {
        /* BFL's ae.safetensors; a diffusers vae/ folder; a pipeline folder holding vae/ */
        static const char *const in_dir[] = {"ae.safetensors", "diffusion_pytorch_model.safetensors",
                                             "vae/diffusion_pytorch_model.safetensors"};
        for (size_t i = 0; i < sizeof in_dir / sizeof in_dir[0]; i++) {
            snprintf(out, n, "%s/%s", f->path, in_dir[i]);
            if (pl->path_info(out, &sb) == ORK_OK && sb.kind == ORK_KIND_FILE) return ORK_OK;
        }
        IC_LOG(f, ORK_LEVEL_ERROR, "vae_path '%s' is a folder without ae.safetensors (BFL) or "
               "[vae/]diffusion_pytorch_model.safetensors (diffusers)", f->path);
        return ORK_E_CONFIG;
    }
    snprintf(out, n, "%s", f->path);
    return ORK_OK;
}

ork_status flux_vae_open(ic_codec *f) {
    flux_vae *v = &f->vae;
    char path[1100];
    TRY(vae_file(f, path, sizeof path));
    ork_st_set *s;
    TRY(f->st->open(path, &s));
    ork_status st = ORK_E_FORMAT;
    ork_st_info t;
    char n[160];
    memset(v, 0, sizeof *v);
    v->diffusers = f->st->find(s, "encoder.down_blocks.0.resnets.0.conv1.weight", &t) == ORK_OK;
    if (!st_shape(f, s, "encoder.conv_in.weight", &t) || t.ndim != 4) {
        IC_LOG(f, ORK_LEVEL_ERROR, "%s: no encoder.conv_in.weight (B, C, 3, 3): not an autoencoder (BFL's "
                 "ae.safetensors or a diffusers AutoencoderKL)", path);
        goto done;
    }
    v->ch = (int)t.shape[0];
    v->in_ch = (int)t.shape[1];
    for (v->nlev = 0; v->nlev < FLUX_VAE_MAX_LEVELS; v->nlev++) {
        snprintf(n, sizeof n, "encoder.down.%d.block.0.conv2.weight", v->nlev);
        if (!st_shape(f, s, n, &t)) break;
        if (t.shape[0] % v->ch) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s: %s has %lld channels, not a multiple of ch %d", path, n,
                     (long long)t.shape[0], v->ch);
            goto done;
        }
        v->ch_mult[v->nlev] = (int)(t.shape[0] / v->ch);
    }
    for (v->nres_enc = 0; v->nres_enc < 16; v->nres_enc++) {
        snprintf(n, sizeof n, "encoder.down.0.block.%d.conv1.weight", v->nres_enc);
        if (!st_shape(f, s, n, &t)) break;
    }
    for (v->nres_dec = 0; v->nres_dec < 16; v->nres_dec++) {
        snprintf(n, sizeof n, "decoder.up.0.block.%d.conv1.weight", v->nres_dec);
        if (!st_shape(f, s, n, &t)) break;
    }
    if (!st_shape(f, s, "encoder.conv_out.weight", &t) || t.ndim != 4 || t.shape[0] % 2) {
        IC_LOG(f, ORK_LEVEL_ERROR, "%s: encoder.conv_out.weight absent or not (2·z, C, 3, 3)", path);
        goto done;
    }
    v->z = (int)(t.shape[0] / 2);
    if (!st_shape(f, s, "decoder.conv_out.weight", &t) || t.ndim != 4) {
        IC_LOG(f, ORK_LEVEL_ERROR, "%s: decoder.conv_out.weight absent", path);
        goto done;
    }
    v->out_ch = (int)t.shape[0];
    if (v->nlev < 1 || v->nres_enc < 1 || v->nres_dec < 1 || v->in_ch != 3 || v->out_ch != 3) {
        IC_LOG(f, ORK_LEVEL_ERROR, "%s: unusable autoencoder geometry (%d levels, %d/%d res blocks, %d->%d channels)",
                 path, v->nlev, v->nres_enc, v->nres_dec, v->in_ch, v->out_ch);
        goto done;
    }
    for (int i = 0; i < v->nlev; i++)
        if ((v->ch * v->ch_mult[i]) % VAE_GROUPS || v->ch_mult[i] < 1) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s: level %d has %d channels, not a multiple of GroupNorm's 32 groups", path,
                     i, v->ch * v->ch_mult[i]);
            goto done;
        }
    v->version = st_shape(f, s, "encoder.quant_conv.weight", &t) ? 2 : 1;
    if (v->version == 2 && v->diffusers) {
        IC_LOG(f, ORK_LEVEL_ERROR, "%s: a diffusers AutoencoderKL with quant_conv (use_quant_conv): not FLUX.1's "
                 "autoencoder (FLUX.2's is read from BFL's ae.safetensors)", path);
        goto done;
    }
    if (v->version == 2) {
        ork_st_info tm, tv;
        int64_t nc = 4 * (int64_t)v->z;
        if (!st_shape(f, s, "bn.running_mean", &tm) || !st_shape(f, s, "bn.running_var", &tv) ||
            tm.ndim != 1 || tv.ndim != 1 || tm.shape[0] != nc || tv.shape[0] != nc) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s: FLUX.2 autoencoder (quant_conv present) without bn.running_mean / "
                     "bn.running_var of %lld elements", path, (long long)nc);
            goto done;
        }
        v->bn_mean = malloc((size_t)nc * sizeof *v->bn_mean);
        v->bn_std = malloc((size_t)nc * sizeof *v->bn_std);
        v->bn_rstd = malloc((size_t)nc * sizeof *v->bn_rstd);
        if (!v->bn_mean || !v->bn_std || !v->bn_rstd) { st = ORK_E_NOMEM; goto done; }
        if (f->st->read_f32(&tm, v->bn_mean) != ORK_OK || f->st->read_f32(&tv, v->bn_std) != ORK_OK) goto done;
        for (int64_t c = 0; c < nc; c++) {
            if (!(v->bn_std[c] >= 0.0f) || !isfinite(v->bn_mean[c])) {
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: bn statistics of channel %lld are invalid (mean %g, var %g)", path,
                         (long long)c, (double)v->bn_mean[c], (double)v->bn_std[c]);
                goto done;
            }
            double sd = sqrt((double)v->bn_std[c] + VAE_BN_EPS);
            v->bn_std[c] = (float)sd;
            v->bn_rstd[c] = (float)(1.0 / sd);
        }
    }
    snprintf(f->vae_file, sizeof f->vae_file, "%s", path);
    st = ORK_OK;
done:
    f->st->close(s);
    return st;
}

void flux_vae_free(ic_codec *f) {
    free(f->vae.bn_mean);
    free(f->vae.bn_std);
    free(f->vae.bn_rstd);
    f->vae.bn_mean = f->vae.bn_std = f->vae.bn_rstd = NULL;
}

int flux_vae_spatial_factor(const ic_codec *f) { return 1 << (f->vae.nlev - 1); }

/* ---- declarations (names "vae." + the checkpoint's key) ------------------------------ */

static ork_status d_conv(ic_codec *f, const char *name, int64_t cout, int64_t cin, int64_t k) {
    char n[192];
    snprintf(n, sizeof n, "vae.%s.weight", name);
    TRY(ic_decl(f, n, ORK_BLOCK_CODEC, ORK_WEIGHT_CODEC, 4, cout, cin, k, k));
    snprintf(n, sizeof n, "vae.%s.bias", name);
    return ic_decl(f, n, ORK_BLOCK_CODEC, ORK_WEIGHT_CODEC | ORK_WEIGHT_BIAS, 1, cout);
}
static ork_status d_norm(ic_codec *f, const char *name, int64_t c) {
    char n[192];
    snprintf(n, sizeof n, "vae.%s.weight", name);
    TRY(ic_decl(f, n, ORK_BLOCK_CODEC, ORK_WEIGHT_CODEC | ORK_WEIGHT_NORM, 1, c));
    snprintf(n, sizeof n, "vae.%s.bias", name);
    return ic_decl(f, n, ORK_BLOCK_CODEC, ORK_WEIGHT_CODEC | ORK_WEIGHT_NORM, 1, c);
}
static ork_status d_resnet(ic_codec *f, const char *p, int64_t cin, int64_t cout) {
    char n[160];
    snprintf(n, sizeof n, "%s.norm1", p); TRY(d_norm(f, n, cin));
    snprintf(n, sizeof n, "%s.conv1", p); TRY(d_conv(f, n, cout, cin, 3));
    snprintf(n, sizeof n, "%s.norm2", p); TRY(d_norm(f, n, cout));
    snprintf(n, sizeof n, "%s.conv2", p); TRY(d_conv(f, n, cout, cout, 3));
    if (cin == cout) return ORK_OK;
    snprintf(n, sizeof n, "%s.nin_shortcut", p);
    return d_conv(f, n, cout, cin, 1);
}
static ork_status d_attn(ic_codec *f, const char *p, int64_t c) {
    static const char *const m[4] = {"q", "k", "v", "proj_out"};
    char n[160];
    snprintf(n, sizeof n, "%s.norm", p);
    TRY(d_norm(f, n, c));
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "%s.%s", p, m[i]);
        TRY(d_conv(f, n, c, c, 1));
    }
    return ORK_OK;
}
static ork_status d_mid(ic_codec *f, const char *part, int64_t c) {
    char n[96];
    snprintf(n, sizeof n, "%s.mid.block_1", part); TRY(d_resnet(f, n, c, c));
    snprintf(n, sizeof n, "%s.mid.attn_1", part); TRY(d_attn(f, n, c));
    snprintf(n, sizeof n, "%s.mid.block_2", part);
    return d_resnet(f, n, c, c);
}

ork_status flux_vae_declare(ic_codec *f) {
    const flux_vae *v = &f->vae;
    char n[160];
    int64_t ch = v->ch, top = ch * v->ch_mult[v->nlev - 1], z = v->z;
    /* encoder */
    TRY(d_conv(f, "encoder.conv_in", ch, v->in_ch, 3));
    int64_t cin = ch;
    for (int i = 0; i < v->nlev; i++) {
        int64_t cout = ch * v->ch_mult[i];
        for (int j = 0; j < v->nres_enc; j++) {
            snprintf(n, sizeof n, "encoder.down.%d.block.%d", i, j);
            TRY(d_resnet(f, n, cin, cout));
            cin = cout;
        }
        if (i != v->nlev - 1) {
            snprintf(n, sizeof n, "encoder.down.%d.downsample.conv", i);
            TRY(d_conv(f, n, cin, cin, 3));
        }
    }
    TRY(d_mid(f, "encoder", top));
    TRY(d_norm(f, "encoder.norm_out", top));
    TRY(d_conv(f, "encoder.conv_out", 2 * z, top, 3));
    if (v->version == 2) TRY(d_conv(f, "encoder.quant_conv", 2 * z, 2 * z, 1));
    /* decoder */
    if (v->version == 2) TRY(d_conv(f, "decoder.post_quant_conv", z, z, 1));
    TRY(d_conv(f, "decoder.conv_in", top, z, 3));
    TRY(d_mid(f, "decoder", top));
    cin = top;
    for (int i = v->nlev - 1; i >= 0; i--) {
        int64_t cout = ch * v->ch_mult[i];
        for (int j = 0; j < v->nres_dec; j++) {
            snprintf(n, sizeof n, "decoder.up.%d.block.%d", i, j);
            TRY(d_resnet(f, n, cin, cout));
            cin = cout;
        }
        if (i != 0) {
            snprintf(n, sizeof n, "decoder.up.%d.upsample.conv", i);
            TRY(d_conv(f, n, cin, cin, 3));
        }
    }
    TRY(d_norm(f, "decoder.norm_out", cin));
    return d_conv(f, "decoder.conv_out", v->out_ch, cin, 3);
}

/* Every declared vae.* weight in the file with its shape and a float dtype;
 * sink != NULL also hands each one to the weight store. */
static ork_status vae_walk(ic_codec *f, const ork_weight_sink *sink) {
    ork_st_set *s;
    TRY(f->st->open(f->vae_file, &s));
    ork_status st = ORK_OK;
    for (int i = 0; st == ORK_OK && i < f->n_weights; i++) {
        const ork_weight_decl *d = &f->weights[i];
        if (!(d->flags & ORK_WEIGHT_CODEC) || strncmp(d->name, "vae.", 4) != 0) continue;
        ork_st_info t;
        char key[192];
        vae_key(f, d->name + 4, key, sizeof key);
        if (f->st->find(s, key, &t) != ORK_OK) {
            if (f->vae.diffusers)
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor '%s' (BFL's %s)", f->vae_file, key, d->name + 4);
            else
                IC_LOG(f, ORK_LEVEL_ERROR, "%s: missing tensor '%s'", f->vae_file, key);
            st = ORK_E_FORMAT;
            break;
        }
        /* diffusers keeps the attention's 1x1 convs as (C, C) linears: the same bytes */
        int lin = f->vae.diffusers && t.ndim == 2 && d->ndim == 4 && d->shape[2] == 1 && d->shape[3] == 1;
        int ok = t.ndim == d->ndim || lin;
        for (int k = 0; ok && k < t.ndim; k++) ok = t.shape[k] == d->shape[k];
        if (!ok) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has the wrong shape for a %s autoencoder with ch %d", f->vae_file,
                     t.name, f->vae.version == 2 ? "FLUX.2" : "FLUX.1", f->vae.ch);
            st = ORK_E_FORMAT;
            break;
        }
        if (t.dtype != ORK_F32 && t.dtype != ORK_BF16 && t.dtype != ORK_F16) {
            IC_LOG(f, ORK_LEVEL_ERROR, "%s: tensor '%s' has dtype %d (f32, bf16 or f16 expected)", f->vae_file,
                     t.name, (int)t.dtype);
            st = ORK_E_FORMAT;
            break;
        }
        if (sink) st = sink->put(sink, d->name, t.dtype, t.data);
    }
    f->st->close(s);
    return st;
}

ork_status flux_vae_validate(ic_codec *f) { return vae_walk(f, NULL); }
ork_status flux_vae_load(ic_codec *f, const ork_weight_sink *sink) { return vae_walk(f, sink); }

/* ---- forward --------------------------------------------------------------------------- */

static ork_status conv(ic_codec *f, ork_graph *g, ork_tensor *x, const char *name, int stride, int pad,
                       ork_tensor **y) {
    ork_tensor *w, *b;
    TRY(ic_w(f, g, &w, "vae.%s.weight", name));
    TRY(ic_w(f, g, &b, "vae.%s.bias", name));
    return f->ops->conv2d(g, x, w, b, stride, pad, y);
}

static ork_status gnorm(ic_codec *f, ork_graph *g, ork_tensor *x, const char *name, int act, ork_tensor **y) {
    ork_tensor *w, *b;
    TRY(ic_w(f, g, &w, "vae.%s.weight", name));
    TRY(ic_w(f, g, &b, "vae.%s.bias", name));
    TRY(f->ops->groupnorm(g, x, VAE_GROUPS, w, b, VAE_EPS, y));
    if (act) IC_STEP(f->ops->silu(g, *y, y), *y, *y, x);
    return ORK_OK;
}

/* x + conv2(swish(norm2(conv1(swish(norm1(x)))))), x through nin_shortcut when C changes */
static ork_status resnet(ic_codec *f, ork_graph *g, ork_tensor *x, const char *p, int64_t cout, ork_tensor **y) {
    char n[160];
    ork_tensor *h, *x0 = x; /* x0: the caller's */
    snprintf(n, sizeof n, "%s.norm1", p); TRY(gnorm(f, g, x, n, 1, &h));
    snprintf(n, sizeof n, "%s.conv1", p); IC_STEP(conv(f, g, h, n, 1, 1, &h), h, h, x0);
    snprintf(n, sizeof n, "%s.norm2", p); IC_STEP(gnorm(f, g, h, n, 1, &h), h, h, x0);
    snprintf(n, sizeof n, "%s.conv2", p); IC_STEP(conv(f, g, h, n, 1, 1, &h), h, h, x0);
    if (f->ta->dim(x, 1) != cout) {
        snprintf(n, sizeof n, "%s.nin_shortcut", p);
        TRY(conv(f, g, x, n, 1, 0, &x));
    }
    TRY(f->ops->add(g, x, h, y));
    ic_done(f, g, h);
    if (x != x0) ic_done(f, g, x);
    return ORK_OK;
}

/* Query rows per block of the mid attention: all L where the tape records (its
 * backward wants the whole scores) or the (B, L, L) F32 scores are under 256 MiB;
 * else blocks of scores under that (a 1536² encode's whole scores: 5 GiB, twice).
 * ORK_VAE_ATTN_KIB lowers the cap (tests: blocks on a small image). */
static int64_t attn_rows(ic_codec *f, ork_graph *g, int64_t B, int64_t L) {
    size_t cap = (size_t)256 << 20;
    const char *env = getenv("ORK_VAE_ATTN_KIB");
    if (env && atol(env) > 0) cap = (size_t)atol(env) << 10;
    if (f->ta->grad_enabled(g) || !ork_tensor_api_has_drop(f->ta) || (size_t)(B * L) * (size_t)L * 4 <= cap) return L;
    int64_t r = (int64_t)(cap / ((size_t)(B * L) * 4));
    return r < 1 ? 1 : r;
}

/* o (B, C, L) = v · softmax(qᵀ·k)ᵀ with no tape, the queries in blocks of
 * `rows`: each block's (B, rows, L) scores freed before the next (softmax is
 * per row, so nothing else changes); q is freed once split. */
static ork_status attn_blocks(ic_codec *f, ork_graph *g, ork_tensor *q, ork_tensor *k, ork_tensor *v, int64_t L,
                              int64_t rows, ork_tensor **o) {
    int nb = (int)((L + rows - 1) / rows);
    int64_t *sizes = malloc((size_t)nb * sizeof *sizes);
    ork_tensor **qs = calloc((size_t)nb, sizeof *qs), **os = calloc((size_t)nb, sizeof *os);
    ork_status st = sizes && qs && os ? ORK_OK : ORK_E_NOMEM;
    for (int i = 0; i < nb && st == ORK_OK; i++) sizes[i] = L - i * rows < rows ? L - i * rows : rows;
    if (st == ORK_OK) st = f->ops->split(g, q, 2, nb, sizes, qs);
    if (st == ORK_OK) ic_done(f, g, q);
    for (int i = 0; i < nb && st == ORK_OK; i++) {
        ork_tensor *s = NULL, *pr = NULL;
        st = f->ops->matmul(g, qs[i], k, 1, 0, &s); /* (B, rows, L) */
        ic_done(f, g, qs[i]);
        if (st == ORK_OK) st = f->ops->softmax(g, s, &pr);
        ic_done(f, g, s);
        if (st == ORK_OK) st = f->ops->matmul(g, v, pr, 0, 1, &os[i]); /* (B, C, rows) */
        ic_done(f, g, pr);
    }
    if (st == ORK_OK) st = f->ops->concat(g, nb, os, 2, o);
    for (int i = 0; i < nb && st == ORK_OK; i++) ic_done(f, g, os[i]);
    free(sizes);
    free(qs);
    free(os);
    return st;
}

/* x + proj_out(attention(norm(x))): one head, D = C, L = H·W. q, k, v stay
 * (B, C, L): scores (B, L, L) = qᵀ·k (matmul with ta), out (B, C, L) = v·Pᵀ. */
static ork_status attn(ic_codec *f, ork_graph *g, ork_tensor *x, const char *p, ork_tensor **y) {
    char n[160];
    const ork_tensor_api *ta = f->ta;
    int64_t B = ta->dim(x, 0), C = ta->dim(x, 1), H = ta->dim(x, 2), W = ta->dim(x, 3), L = H * W;
    int64_t s3[3] = {B, C, L}, s4[4] = {B, C, H, W};
    ork_tensor *h, *q, *k, *v, *s, *o;
    snprintf(n, sizeof n, "%s.norm", p); TRY(gnorm(f, g, x, n, 0, &h));
    snprintf(n, sizeof n, "%s.q", p); TRY(conv(f, g, h, n, 1, 0, &q));
    snprintf(n, sizeof n, "%s.k", p); TRY(conv(f, g, h, n, 1, 0, &k));
    snprintf(n, sizeof n, "%s.v", p); TRY(conv(f, g, h, n, 1, 0, &v));
    ic_done(f, g, h);
    TRY(f->ops->reshape(g, q, 3, s3, &q));
    TRY(f->ops->reshape(g, k, 3, s3, &k));
    TRY(f->ops->reshape(g, v, 3, s3, &v));
    ork_tensor *keep = x; /* the caller's; the (B, L, L) scores are the big ones */
    TRY(f->ops->scale(g, q, (float)(1.0 / sqrt((double)C)), &q));
    int64_t rows = attn_rows(f, g, B, L);
    if (rows >= L) {
        IC_STEP(f->ops->matmul(g, q, k, 1, 0, &s), q, s, keep); /* (B, L, L) */
        IC_STEP(f->ops->softmax(g, s, &s), s, s, keep);
        IC_STEP(f->ops->matmul(g, v, s, 0, 1, &o), s, o, keep); /* (B, C, L) */
    } else {
        TRY(attn_blocks(f, g, q, k, v, L, rows, &o));
    }
    TRY(f->ops->reshape(g, o, 4, s4, &o));
    snprintf(n, sizeof n, "%s.proj_out", p); TRY(conv(f, g, o, n, 1, 0, &o));
    IC_STEP(f->ops->add(g, x, o, y), o, *y, keep);
    return ORK_OK;
}

static ork_status mid(ic_codec *f, ork_graph *g, const char *part, ork_tensor *x, ork_tensor **y) {
    char n[96];
    int64_t c = f->ta->dim(x, 1);
    ork_tensor *keep = x; /* the caller's */
    snprintf(n, sizeof n, "%s.mid.block_1", part); TRY(resnet(f, g, x, n, c, &x));
    snprintf(n, sizeof n, "%s.mid.attn_1", part); IC_STEP(attn(f, g, x, n, &x), x, x, keep);
    snprintf(n, sizeof n, "%s.mid.block_2", part);
    IC_STEP(resnet(f, g, x, n, c, y), x, *y, keep);
    return ORK_OK;
}

/* A host F32 vector (n) as a graph tensor of x's dtype. */
static ork_status vec(ic_codec *f, ork_graph *g, const float *v, int64_t n, ork_dtype dt, ork_tensor **out) {
    TRY(f->ta->from_host(g, ORK_F32, 1, &n, v, out));
    return dt == ORK_F32 ? ORK_OK : f->ops->cast(g, *out, dt, out);
}

/* y = a·x + b (scalars) */
static ork_status affine(ic_codec *f, ork_graph *g, ork_tensor *x, float a, float b, ork_tensor **y) {
    ork_tensor *bt;
    TRY(f->ops->scale(g, x, a, &x));
    TRY(vec(f, g, &b, 1, f->ta->dtype(x), &bt));
    return f->ops->add(g, x, bt, y);
}

ork_status flux_vae_encode(ic_codec *f, ork_graph *g, ork_tensor *img, ork_tensor **latents) {
    const flux_vae *v = &f->vae;
    const ork_tensor_api *ta = f->ta;
    int sf = flux_vae_spatial_factor(f), mult = v->version == 2 ? 2 * sf : sf; /* FLUX.2 normalizes 2×2 patches */
    if (ta->ndim(img) != 4 || ta->dim(img, 1) != v->in_ch || ta->dim(img, 2) % mult || ta->dim(img, 3) % mult) {
        IC_LOG(f, ORK_LEVEL_ERROR, "vae encode: image (%lld, %lld, %lld, %lld) must be (B, 3, H, W) with H and W "
               "multiples of %d", (long long)ta->dim(img, 0), (long long)ta->dim(img, 1), (long long)ta->dim(img, 2),
               (long long)ta->dim(img, 3), mult);
        return ORK_E_INVALID;
    }
    char n[96];
    ork_tensor *x, *w0;
    /* the image comes in F32; the VAE computes in its weights' dtype */
    TRY(ic_w(f, g, &w0, "vae.encoder.conv_in.weight"));
    if (ta->dtype(img) != ta->dtype(w0)) TRY(f->ops->cast(g, img, ta->dtype(w0), &img));
    ork_tensor *keep = img; /* the caller's; every later x is freed once used (ic_done) */
    IC_STEP(affine(f, g, img, 2.0f, -1.0f, &x), img, x, keep); /* [0, 1] -> [-1, 1] */
    IC_STEP(conv(f, g, x, "encoder.conv_in", 1, 1, &x), x, x, keep);
    for (int i = 0; i < v->nlev; i++) {
        for (int j = 0; j < v->nres_enc; j++) {
            snprintf(n, sizeof n, "encoder.down.%d.block.%d", i, j);
            IC_STEP(resnet(f, g, x, n, (int64_t)v->ch * v->ch_mult[i], &x), x, x, keep);
        }
        if (i != v->nlev - 1) {
            IC_STEP(f->ops->pad2d(g, x, 0, 1, 0, 1, &x), x, x, keep);
            snprintf(n, sizeof n, "encoder.down.%d.downsample.conv", i);
            IC_STEP(conv(f, g, x, n, 2, 0, &x), x, x, keep);
        }
    }
    IC_STEP(mid(f, g, "encoder", x, &x), x, x, keep);
    IC_STEP(gnorm(f, g, x, "encoder.norm_out", 1, &x), x, x, keep);
    IC_STEP(conv(f, g, x, "encoder.conv_out", 1, 1, &x), x, x, keep);
    if (v->version == 2) IC_STEP(conv(f, g, x, "encoder.quant_conv", 1, 0, &x), x, x, keep);
    ork_tensor *parts[2];
    int64_t sizes[2] = {v->z, v->z};
    TRY(f->ops->split(g, x, 1, 2, sizes, parts)); /* mean, logvar */
    if (v->version == 1) return affine(f, g, parts[0], VAE1_SCALE, -VAE1_SCALE * VAE1_SHIFT, latents);
    ork_tensor *m, *r;
    int64_t nc = 4 * (int64_t)v->z;
    int h = (int)(ta->dim(parts[0], 2) / 2), w = (int)(ta->dim(parts[0], 3) / 2);
    TRY(ic_pack(f, g, parts[0], 2, &x));
    TRY(vec(f, g, v->bn_mean, nc, ta->dtype(x), &m));
    TRY(vec(f, g, v->bn_rstd, nc, ta->dtype(x), &r));
    TRY(f->ops->scale(g, m, -1.0f, &m));
    TRY(f->ops->add(g, x, m, &x));
    TRY(f->ops->mul(g, x, r, &x));
    return ic_unpack(f, g, x, v->z, 2, h, w, latents);
}

ork_status flux_vae_decode(ic_codec *f, ork_graph *g, ork_tensor *latents, ork_tensor **img) {
    const flux_vae *v = &f->vae;
    const ork_tensor_api *ta = f->ta;
    int64_t nc = 4 * (int64_t)v->z;
    int mult = v->version == 2 ? 2 : 1;
    if (ta->ndim(latents) != 4 || ta->dim(latents, 1) != v->z || ta->dim(latents, 2) % mult ||
        ta->dim(latents, 3) % mult) {
        IC_LOG(f, ORK_LEVEL_ERROR, "vae decode: latents of %d dimensions with %lld channels; (B, %d, h, w)%s expected",
               ta->ndim(latents), (long long)(ta->ndim(latents) > 1 ? ta->dim(latents, 1) : 0), v->z,
               mult == 2 ? " with h and w even" : "");
        return ORK_E_INVALID;
    }
    char n[96];
    ork_tensor *x = latents;
    if (v->version == 1) {
        TRY(affine(f, g, x, 1.0f / VAE1_SCALE, VAE1_SHIFT, &x));
    } else {
        ork_tensor *m, *s;
        int h = (int)(ta->dim(x, 2) / 2), w = (int)(ta->dim(x, 3) / 2);
        TRY(ic_pack(f, g, x, 2, &x));
        TRY(vec(f, g, v->bn_std, nc, ta->dtype(x), &s));
        TRY(vec(f, g, v->bn_mean, nc, ta->dtype(x), &m));
        TRY(f->ops->mul(g, x, s, &x));
        TRY(f->ops->add(g, x, m, &x));
        TRY(ic_unpack(f, g, x, v->z, 2, h, w, &x));
    }
    if (v->version == 2) TRY(conv(f, g, x, "decoder.post_quant_conv", 1, 0, &x));
    TRY(conv(f, g, x, "decoder.conv_in", 1, 1, &x));
    TRY(mid(f, g, "decoder", x, &x));
    for (int i = v->nlev - 1; i >= 0; i--) {
        for (int j = 0; j < v->nres_dec; j++) {
            snprintf(n, sizeof n, "decoder.up.%d.block.%d", i, j);
            TRY(resnet(f, g, x, n, (int64_t)v->ch * v->ch_mult[i], &x));
        }
        if (i != 0) {
            TRY(f->ops->upsample2x(g, x, &x));
            snprintf(n, sizeof n, "decoder.up.%d.upsample.conv", i);
            TRY(conv(f, g, x, n, 1, 1, &x));
        }
    }
    TRY(gnorm(f, g, x, "decoder.norm_out", 1, &x));
    TRY(conv(f, g, x, "decoder.conv_out", 1, 1, &x));
    return affine(f, g, x, 0.5f, 0.5f, img); /* [-1, 1] -> [0, 1], unclamped (differentiable) */
}
