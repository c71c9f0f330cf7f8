/* te_clip.c — CLIP's text transformer (transformers' CLIPTextModel, FLUX.1's
 * text_encoder: CLIP-L, 12 layers, width 768, 12 heads, MLP 3072): token and
 * learned position tables (77 positions); per layer a pre-LN causal
 * self-attention (affine layer norms, q/k/v/out with biases, scale 1/sqrt(d))
 * and a pre-LN MLP with quick_gelu; the final layer norm; outputs
 * last_hidden_state and pooler_output = the final state at the EOS position:
 * argmax of the ids when config.eos_token_id is 2 (the legacy configs, e.g.
 * openai/clip-vit-large-patch14 and FLUX.1's text_encoder: EOS is the highest
 * id), else the first position holding eos_token_id — as transformers does.
 * Heads: config.json's num_attention_heads, else the key table's num_heads,
 * else width / 64. Owns nothing. */
#include "te.h"

#include <stdlib.h>
#include <string.h>

#define EMB "text_model.embeddings"
#define LAY "text_model.encoder.layers.%d"

ork_status te_clip_open(te_model *m, ork_text_encoder_info *info) {
    te_cfg *c = &m->c;
    int64_t sh[8];
    if (te_file_shape(m, EMB ".token_embedding.weight", sh) != 2) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: not a CLIP text model: no " EMB ".token_embedding.weight", m->ck.path);
        return ORK_E_FORMAT;
    }
    c->vocab = (int)sh[0];
    c->d_model = (int)sh[1];
    if (te_file_shape(m, EMB ".position_embedding.weight", sh) != 2 || sh[1] != c->d_model) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: no " EMB ".position_embedding.weight of width %d", m->ck.path, c->d_model);
        return ORK_E_FORMAT;
    }
    c->max_pos = (int)sh[0];
    char name[128];
    for (c->layers = 0;; c->layers++) {
        snprintf(name, sizeof name, LAY ".self_attn.q_proj.weight", c->layers);
        if (!te_file_shape(m, name, sh)) break;
    }
    if (c->layers == 0 || te_file_shape(m, "text_model.encoder.layers.0.mlp.fc1.weight", sh) != 2) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: no text_model.encoder.layers.0 (self_attn, mlp.fc1)", m->ck.path);
        return ORK_E_FORMAT;
    }
    c->d_ff = (int)sh[0];
    int heads = m->p.num_heads > 0 ? (int)m->p.num_heads : c->d_model / 64;
    c->heads = te_cfg_int(m, "num_attention_heads", heads);
    if (c->heads <= 0 || c->d_model % c->heads) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: %d heads do not divide the width %d", m->ck.path, c->heads, c->d_model);
        return ORK_E_FORMAT;
    }
    c->d_head = c->d_model / c->heads;
    c->eps = te_cfg_num(m, "layer_norm_eps", 1e-5);
    char act[64];
    te_cfg_str(m, "hidden_act", act, sizeof act);
    if (act[0] && strcmp(act, "quick_gelu")) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: hidden_act '%s': only quick_gelu (CLIP-L, FLUX.1's CLIP) is supported", m->ck.path,
               act);
        return ORK_E_UNSUPPORTED;
    }
    c->eos_cfg = te_cfg_int(m, "eos_token_id", 2);
    /* the real special ids: with the legacy config (2) EOS is the last id (<|endoftext|>), which FLUX's tokenizer pads with */
    c->eos_id = c->eos_cfg == 2 ? c->vocab - 1 : c->eos_cfg;
    c->bos_id = te_cfg_int(m, "bos_token_id", 0) == 0 ? c->vocab - 2 : te_cfg_int(m, "bos_token_id", 0);
    c->pad_id = c->eos_cfg == 2 ? c->vocab - 1 : te_cfg_int(m, "pad_token_id", c->eos_id);
    snprintf(c->variant, sizeof c->variant, "%s",
             c->layers == 12 && c->d_model == 768 && c->heads == 12 && c->d_ff == 3072 && c->max_pos == 77
                 ? "clip-vit-large-patch14" : "custom");

    const int64_t D = c->d_model, F = c->d_ff;
    ORK_TRY(te_add_block(m, EMB));
    ORK_TRY(te_add_weight(m, 0, 0, 2, c->vocab, D, EMB ".token_embedding.weight"));
    ORK_TRY(te_add_weight(m, 0, 0, 2, c->max_pos, D, EMB ".position_embedding.weight"));
    static const char *const proj[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    for (int l = 0; l < c->layers; l++) {
        int b = l + 1;
        ORK_TRY(te_add_block(m, LAY, l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, LAY ".layer_norm1.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, LAY ".layer_norm1.bias", l));
        for (int p = 0; p < 4; p++) {
            ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, D, D, LAY ".self_attn.%s.weight", l, proj[p]));
            ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_BIAS, 1, D, 0, LAY ".self_attn.%s.bias", l, proj[p]));
        }
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, LAY ".layer_norm2.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, LAY ".layer_norm2.bias", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, F, D, LAY ".mlp.fc1.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_BIAS, 1, F, 0, LAY ".mlp.fc1.bias", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, D, F, LAY ".mlp.fc2.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_BIAS, 1, D, 0, LAY ".mlp.fc2.bias", l));
    }
    ORK_TRY(te_add_block(m, "text_model.final_layer_norm"));
    ORK_TRY(te_add_weight(m, c->layers + 1, ORK_WEIGHT_NORM, 1, D, 0, "text_model.final_layer_norm.weight"));
    ORK_TRY(te_add_weight(m, c->layers + 1, ORK_WEIGHT_NORM, 1, D, 0, "text_model.final_layer_norm.bias"));

    info->family = "clip";
    info->hidden_dim = c->d_model;
    info->pooled_dim = c->d_model;
    info->max_length = c->max_pos;
    info->default_length = c->max_pos;
    TE_LOG(m, ORK_LEVEL_INFO, "CLIP text model %s: %d layers, width %d, %d heads, MLP %d, %d positions, vocab %d, pooled "
           "at %s", c->variant, c->layers, c->d_model, c->heads, c->d_ff, c->max_pos, c->vocab,
           c->eos_cfg == 2 ? "argmax(ids)" : "the first eos_token_id");
    return ORK_OK;
}

ork_status te_clip_begin(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c) {
    ORK_TRY(te_begin_common(m, g, in, m->c.max_pos, c));
    int64_t B = in->batch, L = in->length;
    int32_t *rows = malloc((size_t)B * sizeof *rows);
    if (!rows) return ORK_E_NOMEM;
    for (int64_t b = 0; b < B; b++) {
        const int32_t *ids = in->ids + b * L;
        int64_t at = 0; /* torch argmax: the first maximum; no EOS at all: position 0 */
        for (int64_t j = 1; j < L; j++) {
            if (m->c.eos_cfg == 2 ? ids[j] > ids[at] : (ids[at] != m->c.eos_cfg && ids[j] == m->c.eos_cfg)) at = j;
        }
        rows[b] = (int32_t)(b * L + at);
    }
    int64_t sh[1] = {B};
    ork_status s = m->ta->from_host(g, ORK_I32, 1, sh, rows, &c->t[TE_POOL]);
    free(rows);
    return s;
}

/* (B, L, D) -> layer_norm(x) with weights <prefix>.weight / .bias */
static ork_status ln(te_model *m, ork_graph *g, ork_tensor *x, const char *prefix, int l, ork_tensor **y) {
    char name[160], fmt[160];
    ork_tensor *w, *b;
    snprintf(fmt, sizeof fmt, "%s.weight", prefix);
    snprintf(name, sizeof name, fmt, l);
    ORK_TRY(m->ta->weight(g, name, &w));
    snprintf(fmt, sizeof fmt, "%s.bias", prefix);
    snprintf(name, sizeof name, fmt, l);
    ORK_TRY(m->ta->weight(g, name, &b));
    return m->ops->layernorm_affine(g, x, w, b, (float)m->c.eps, y);
}

static ork_status lin(te_model *m, ork_graph *g, ork_tensor *x, int l, const char *what, ork_tensor **y) {
    ork_tensor *w, *b;
    ORK_TRY(te_w(m, g, &w, LAY ".%s.weight", l, what));
    ORK_TRY(te_w(m, g, &b, LAY ".%s.bias", l, what));
    return m->ops->linear(g, x, w, b, y);
}

static ork_status clip_embed(te_model *m, ork_graph *g, ork_carry *c) {
    const ork_ops *o = m->ops;
    int64_t L = m->ta->dim(c->t[TE_IDS], 1);
    int32_t *pos = malloc((size_t)L * sizeof *pos);
    if (!pos) return ORK_E_NOMEM;
    for (int64_t j = 0; j < L; j++) pos[j] = (int32_t)j;
    ork_tensor *pid, *tab, *tok, *pe;
    ork_status s = m->ta->from_host(g, ORK_I32, 1, &L, pos, &pid);
    free(pos);
    ORK_TRY(s);
    ORK_TRY(m->ta->weight(g, EMB ".token_embedding.weight", &tab));
    ORK_TRY(o->embedding(g, tab, c->t[TE_IDS], &tok));
    ORK_TRY(m->ta->weight(g, EMB ".position_embedding.weight", &tab));
    ORK_TRY(o->embedding(g, tab, pid, &pe)); /* (L, D) */
    ORK_TRY(o->add(g, tok, pe, &c->t[TE_X]));
    te_drop(m, g, tok);
    te_drop(m, g, pe);
    return ORK_OK;
}

static ork_status clip_layer(te_model *m, ork_graph *g, int l, ork_carry *c) {
    const ork_ops *o = m->ops;
    ork_tensor *x = c->t[TE_X], *h, *q, *k, *v, *qh, *kh, *vh, *a, *am, *y, *x1, *f1, *fa, *f2;
    ORK_TRY(ln(m, g, x, LAY ".layer_norm1", l, &h));
    ORK_TRY(lin(m, g, h, l, "self_attn.q_proj", &q));
    ORK_TRY(lin(m, g, h, l, "self_attn.k_proj", &k));
    ORK_TRY(lin(m, g, h, l, "self_attn.v_proj", &v));
    te_drop(m, g, h);
    ORK_TRY(te_heads(m, g, q, m->c.heads, &qh));
    ORK_TRY(te_heads(m, g, k, m->c.heads, &kh));
    ORK_TRY(te_heads(m, g, v, m->c.heads, &vh));
    ork_attn_opts ao = {ORK_ABI_INIT(ork_attn_opts), 0.0f, 1}; /* 1/sqrt(d), causal */
    ORK_TRY(o->attention_bias(g, qh, kh, vh, NULL, c->t[TE_KBIAS], &ao, &a));
    te_drop(m, g, qh);
    te_drop(m, g, kh);
    te_drop(m, g, vh);
    ORK_TRY(te_merge(m, g, a, &am));
    te_drop(m, g, a);
    ORK_TRY(lin(m, g, am, l, "self_attn.out_proj", &y));
    te_drop(m, g, am);
    ORK_TRY(o->add(g, x, y, &x1));
    te_drop(m, g, y);
    ORK_TRY(ln(m, g, x1, LAY ".layer_norm2", l, &h));
    ORK_TRY(lin(m, g, h, l, "mlp.fc1", &f1));
    te_drop(m, g, h);
    ORK_TRY(o->quick_gelu(g, f1, &fa));
    te_drop(m, g, f1);
    ORK_TRY(lin(m, g, fa, l, "mlp.fc2", &f2));
    te_drop(m, g, fa);
    ORK_TRY(o->add(g, x1, f2, &c->t[TE_X]));
    te_drop(m, g, f2);
    te_drop(m, g, x1);
    return ORK_OK;
}

ork_status te_clip_block(te_model *m, ork_graph *g, int i, ork_carry *c) {
    if (i == 0) return clip_embed(m, g, c);
    if (!c->t[TE_X]) {
        TE_LOG(m, ORK_LEVEL_ERROR, "block %d before block 0 (the embeddings)", i);
        return ORK_E_INVALID;
    }
    if (i <= m->c.layers) return clip_layer(m, g, i - 1, c);
    return ln(m, g, c->t[TE_X], "text_model.final_layer_norm", 0, &c->t[TE_X]);
}

ork_status te_clip_end(te_model *m, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out) {
    ork_tensor *x = c->t[TE_X], *flat;
    int64_t B = m->ta->dim(x, 0), L = m->ta->dim(x, 1), D = m->ta->dim(x, 2);
    int64_t sh[2] = {B * L, D};
    out->hidden = x;
    ORK_TRY(m->ops->reshape(g, x, 2, sh, &flat));
    return m->ops->embedding(g, flat, c->t[TE_POOL], &out->pooled); /* rows b·L + eos_b */
}
