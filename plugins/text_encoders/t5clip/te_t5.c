/* te_t5.c — the T5 v1.1 encoder (transformers' T5EncoderModel, FLUX.1's
 * text_encoder_2: T5-XXL, 24 layers, d_model 4096, 64 heads of 64, d_ff 10240):
 * token table `shared.weight`; per layer a pre-norm self-attention (T5 RMS norm:
 * no mean, no bias; q, k, v, o without biases; scores NOT scaled by 1/sqrt(d);
 * the relative position bias of 32 bidirectional buckets up to distance 128,
 * computed once from layer 0's table and added in every layer) and a pre-norm
 * gated-GELU feed-forward (gelu_new(wi_0·x) ⊙ wi_1·x, then wo); the final RMS
 * norm; output last_hidden_state. Shapes come from the file (heads from the
 * bias table), eps and buckets from config.json when present. Owns nothing. */
#include "te.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATT "encoder.block.%d.layer.0.SelfAttention"
#define FF "encoder.block.%d.layer.1.DenseReluDense"
#define RELB "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"

/* transformers' T5Attention._relative_position_bucket, bidirectional, with its
 * float32 arithmetic (the log-spaced buckets' edges at 16, 32, 64 depend on it:
 * checked against torch for |rel| <= 600). rel = key − query. */
int te_t5_bucket(int rel, int num_buckets, int max_distance) {
    int nb = num_buckets / 2, ret = rel > 0 ? nb : 0, n = rel < 0 ? -rel : rel, max_exact = nb / 2;
    if (n < max_exact) return ret + n;
    float a = (float)n / (float)max_exact;
    float l = logf(a) / (float)log((double)max_distance / (double)max_exact);
    int large = max_exact + (int)(l * (float)(nb - max_exact));
    return ret + (large < nb - 1 ? large : nb - 1);
}

ork_status te_t5_open(te_model *m, ork_text_encoder_info *info) {
    te_cfg *c = &m->c;
    int64_t sh[8];
    if (te_file_shape(m, "shared.weight", sh) == 2) m->alias_shared = NULL;
    else if (te_file_shape(m, "encoder.embed_tokens.weight", sh) == 2) m->alias_shared = "encoder.embed_tokens.weight";
    else {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: not a T5 encoder: no shared.weight (or encoder.embed_tokens.weight)", m->ck.path);
        return ORK_E_FORMAT;
    }
    c->vocab = (int)sh[0];
    c->d_model = (int)sh[1];
    if (te_file_shape(m, RELB, sh) != 2) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: not a T5 encoder: no %s", m->ck.path, RELB);
        return ORK_E_FORMAT;
    }
    c->buckets = (int)sh[0];
    c->heads = (int)sh[1];
    if (te_file_shape(m, "encoder.block.0.layer.0.SelfAttention.q.weight", sh) != 2 || sh[1] != c->d_model ||
        sh[0] % c->heads) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: encoder.block.0 ... q.weight missing or not (heads·d_kv, %d)", m->ck.path, c->d_model);
        return ORK_E_FORMAT;
    }
    c->d_head = (int)(sh[0] / c->heads);
    if (te_file_shape(m, "encoder.block.0.layer.1.DenseReluDense.wi_0.weight", sh) != 2) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: no encoder.block.0.layer.1.DenseReluDense.wi_0.weight: only T5 v1.1's gated "
               "feed-forward is supported (not T5 v1.0's relu wi)", m->ck.path);
        return ORK_E_UNSUPPORTED;
    }
    c->d_ff = (int)sh[0];
    char name[128];
    for (c->layers = 0;; c->layers++) {
        snprintf(name, sizeof name, ATT ".q.weight", c->layers);
        if (!te_file_shape(m, name, sh)) break;
    }
    c->max_dist = te_cfg_int(m, "relative_attention_max_distance", 128);
    c->eps = te_cfg_num(m, "layer_norm_epsilon", 1e-6);
    char proj[64];
    te_cfg_str(m, "feed_forward_proj", proj, sizeof proj);
    if (proj[0] && strcmp(proj, "gated-gelu")) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: feed_forward_proj '%s': only gated-gelu (T5 v1.1, gelu_new) is supported", m->ck.path,
               proj);
        return ORK_E_UNSUPPORTED;
    }
    if (te_cfg_int(m, "num_heads", c->heads) != c->heads) {
        TE_LOG(m, ORK_LEVEL_ERROR, "%s: config.json says %d heads, the position bias table has %d", m->ck.path,
               te_cfg_int(m, "num_heads", 0), c->heads);
        return ORK_E_FORMAT;
    }
    c->pad_id = te_cfg_int(m, "pad_token_id", 0);
    c->eos_id = te_cfg_int(m, "eos_token_id", 1);
    c->bos_id = -1;
    snprintf(c->variant, sizeof c->variant, "%s",
             c->layers == 24 && c->d_model == 4096 && c->heads == 64 && c->d_ff == 10240 ? "t5-v1_1-xxl" : "custom");

    const int64_t D = c->d_model, I = (int64_t)c->heads * c->d_head, F = c->d_ff;
    ORK_TRY(te_add_block(m, "embed"));
    ORK_TRY(te_add_weight(m, 0, 0, 2, c->vocab, D, "shared.weight"));
    ORK_TRY(te_add_weight(m, 0, 0, 2, c->buckets, c->heads, RELB));
    for (int l = 0; l < c->layers; l++) {
        int b = l + 1;
        ORK_TRY(te_add_block(m, "encoder.block.%d", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, "encoder.block.%d.layer.0.layer_norm.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, I, D, ATT ".q.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, I, D, ATT ".k.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, I, D, ATT ".v.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, D, I, ATT ".o.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_NORM, 1, D, 0, "encoder.block.%d.layer.1.layer_norm.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, F, D, FF ".wi_0.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, F, D, FF ".wi_1.weight", l));
        ORK_TRY(te_add_weight(m, b, ORK_WEIGHT_LINEAR, 2, D, F, FF ".wo.weight", l));
    }
    ORK_TRY(te_add_block(m, "encoder.final_layer_norm"));
    ORK_TRY(te_add_weight(m, c->layers + 1, ORK_WEIGHT_NORM, 1, D, 0, "encoder.final_layer_norm.weight"));

    info->family = "t5";
    info->hidden_dim = c->d_model;
    info->pooled_dim = 0;
    info->max_length = 0;        /* relative positions: any length */
    info->default_length = 512;  /* FLUX.1-dev (schnell: 256) */
    TE_LOG(m, ORK_LEVEL_INFO, "T5 encoder %s: %d layers, d_model %d, %d heads of %d, d_ff %d, vocab %d, %d buckets to "
           "distance %d", c->variant, c->layers, c->d_model, c->heads, c->d_head, c->d_ff, c->vocab, c->buckets,
           c->max_dist);
    return ORK_OK;
}

ork_status te_t5_begin(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c) {
    return te_begin_common(m, g, in, 0, c);
}

/* Block 0: x = shared[ids]; the position bias (1, H, L, L) from the bucket table. */
static ork_status t5_embed(te_model *m, ork_graph *g, ork_carry *c) {
    const ork_ops *o = m->ops;
    ork_tensor *tab, *rb, *x;
    ORK_TRY(m->ta->weight(g, "shared.weight", &tab));
    ORK_TRY(o->embedding(g, tab, c->t[TE_IDS], &x));
    int64_t L = m->ta->dim(c->t[TE_IDS], 1);
    int32_t *bk = malloc((size_t)(L * L) * sizeof *bk);
    if (!bk) return ORK_E_NOMEM;
    for (int64_t i = 0; i < L; i++) /* query i, key j: relative position j − i */
        for (int64_t j = 0; j < L; j++) bk[i * L + j] = te_t5_bucket((int)(j - i), m->c.buckets, m->c.max_dist);
    ork_tensor *ids;
    int64_t sh[2] = {L, L};
    ork_status s = m->ta->from_host(g, ORK_I32, 2, sh, bk, &ids);
    free(bk);
    ORK_TRY(s);
    ORK_TRY(m->ta->weight(g, RELB, &rb));
    ork_tensor *v, *p;
    ORK_TRY(o->embedding(g, rb, ids, &v)); /* (L, L, H) */
    static const int perm[3] = {2, 0, 1};
    ORK_TRY(o->permute(g, v, perm, &p)); /* (H, L, L) */
    int64_t sh4[4] = {1, m->c.heads, L, L};
    ORK_TRY(o->reshape(g, p, 4, sh4, &c->t[TE_PBIAS]));
    te_drop(m, g, v);
    c->t[TE_X] = x;
    return ORK_OK;
}

static ork_status t5_layer(te_model *m, ork_graph *g, int l, ork_carry *c) {
    const ork_ops *o = m->ops;
    const float eps = (float)m->c.eps;
    ork_tensor *x = c->t[TE_X], *w, *h, *q, *k, *v, *qh, *kh, *vh, *a, *am, *y;
    ORK_TRY(te_w(m, g, &w, "encoder.block.%d.layer.0.layer_norm.weight", l));
    ORK_TRY(o->rmsnorm(g, x, w, eps, &h));
    ORK_TRY(te_w(m, g, &w, ATT ".q.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &q));
    ORK_TRY(te_w(m, g, &w, ATT ".k.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &k));
    ORK_TRY(te_w(m, g, &w, ATT ".v.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &v));
    te_drop(m, g, h);
    ORK_TRY(te_heads(m, g, q, m->c.heads, &qh));
    ORK_TRY(te_heads(m, g, k, m->c.heads, &kh));
    ORK_TRY(te_heads(m, g, v, m->c.heads, &vh));
    te_drop(m, g, q);
    te_drop(m, g, k);
    te_drop(m, g, v);
    ork_attn_opts ao = {ORK_ABI_INIT(ork_attn_opts), 1.0f, 0}; /* T5: no 1/sqrt(d) */
    ORK_TRY(o->attention_bias(g, qh, kh, vh, c->t[TE_PBIAS], c->t[TE_KBIAS], &ao, &a));
    te_drop(m, g, qh);
    te_drop(m, g, kh);
    te_drop(m, g, vh);
    ORK_TRY(te_merge(m, g, a, &am));
    te_drop(m, g, a);
    ORK_TRY(te_w(m, g, &w, ATT ".o.weight", l));
    ORK_TRY(o->linear(g, am, w, NULL, &y));
    te_drop(m, g, am);
    ork_tensor *x1;
    ORK_TRY(o->add(g, x, y, &x1));
    te_drop(m, g, y); /* x is the caller's carry: kept */
    /* gated-GELU feed-forward */
    ork_tensor *gt, *ga, *u, *gu, *f;
    ORK_TRY(te_w(m, g, &w, "encoder.block.%d.layer.1.layer_norm.weight", l));
    ORK_TRY(o->rmsnorm(g, x1, w, eps, &h));
    ORK_TRY(te_w(m, g, &w, FF ".wi_0.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &gt));
    ORK_TRY(o->gelu_tanh(g, gt, &ga));
    te_drop(m, g, gt);
    ORK_TRY(te_w(m, g, &w, FF ".wi_1.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &u));
    te_drop(m, g, h);
    ORK_TRY(o->mul(g, ga, u, &gu));
    te_drop(m, g, ga);
    te_drop(m, g, u);
    ORK_TRY(te_w(m, g, &w, FF ".wo.weight", l));
    ORK_TRY(o->linear(g, gu, w, NULL, &f));
    te_drop(m, g, gu);
    ORK_TRY(o->add(g, x1, f, &c->t[TE_X]));
    te_drop(m, g, f);
    te_drop(m, g, x1);
    return ORK_OK;
}

ork_status te_t5_block(te_model *m, ork_graph *g, int i, ork_carry *c) {
    if (i == 0) return t5_embed(m, g, c);
    if (!c->t[TE_X]) {
        TE_LOG(m, ORK_LEVEL_ERROR, "block %d before block 0 (the embeddings)", i);
        return ORK_E_INVALID;
    }
    if (i <= m->c.layers) return t5_layer(m, g, i - 1, c);
    ork_tensor *w, *x = c->t[TE_X];
    ORK_TRY(m->ta->weight(g, "encoder.final_layer_norm.weight", &w));
    return m->ops->rmsnorm(g, x, w, (float)m->c.eps, &c->t[TE_X]);
}
