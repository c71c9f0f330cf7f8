/* llm_forward.c — the forward of a Mistral / Qwen3 decoder on the ops
 * service, as transformers' MistralModel / Qwen3Model compute it: the token
 * table; per layer a pre-norm (RMS) causal self-attention with grouped kv
 * heads (Qwen3: an RMS norm over each q / k head first), RoPE at positions
 * 0 .. L-1 whatever the padding (transformers' default position_ids), and a
 * pre-norm SwiGLU MLP; the chosen layers' outputs stacked on the feature axis
 * (diffusers' stack + permute + reshape). The mask is transformers' sdpa
 * mask: a query sees key j <= i that is not padding; a query that sees none
 * (left padding) gets 0 from the attention, as PyTorch's safe softmax gives.
 * Queries go grouped per kv head, (B, KV, G·L, Dh) against (B, KV, L, Dh),
 * so k and v are never repeated; the causal mask is tiled G times.
 * Owns nothing. */
#include "llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void drop(llm_model *m, ork_graph *g, ork_tensor *t) {
    if (t && ork_tensor_api_has_drop(m->ta)) m->ta->drop(g, t);
}

static ork_status wt(llm_model *m, ork_graph *g, ork_tensor **out, const char *fmt, int l) {
    char buf[128];
    snprintf(buf, sizeof buf, fmt, l);
    return m->ta->weight(g, buf, out);
}

void llm_rope_table(int L, int d_head, double theta, float *pe) {
    int half = d_head / 2;
    for (int k = 0; k < half; k++) {
        /* float32 as transformers: base ** (arange(0, dim, 2).float() / dim), then 1.0 / that */
        float e = (float)(2 * k) / (float)d_head;
        float inv = 1.0f / powf((float)theta, e);
        for (int l = 0; l < L; l++) {
            float a = (float)l * inv;
            pe[((size_t)l * half + k) * 2] = cosf(a);
            pe[((size_t)l * half + k) * 2 + 1] = sinf(a);
        }
    }
}

ork_status llm_begin(llm_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c) {
    memset(c, 0, sizeof *c);
    c->n = LLM_NSLOTS;
    if (!in || !in->ids || in->batch < 1 || in->length < 1) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "begin: no token ids (batch %d, length %d)", in ? in->batch : 0,
                in ? in->length : 0);
        return ORK_E_INVALID;
    }
    const int64_t B = in->batch, L = in->length, G = m->c.heads / m->c.kv_heads, half = m->c.d_head / 2;
    if (m->c.sliding_window > 0 && L > m->c.sliding_window) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "begin: %lld tokens, past the sliding window of %d (not supported)", (long long)L,
                m->c.sliding_window);
        return ORK_E_INVALID;
    }
    for (int64_t i = 0; i < B * L; i++)
        if (in->ids[i] < 0 || in->ids[i] >= m->c.vocab) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "begin: token id %d (sequence %lld, position %lld) is outside the vocabulary "
                    "of %d", (int)in->ids[i], (long long)(i / L), (long long)(i % L), m->c.vocab);
            return ORK_E_INVALID;
        }
    int64_t sh2[2] = {B, L};
    ORK_TRY(m->ta->from_host(g, ORK_I32, 2, sh2, in->ids, &c->t[LLM_IDS]));
    size_t nb = (size_t)(B * L), nc = (size_t)(G * L * L), np = (size_t)(L * half * 2);
    float *buf = malloc((nb > nc ? (nb > np ? nb : np) : (nc > np ? nc : np)) * sizeof *buf);
    if (!buf) return ORK_E_NOMEM;
    ork_status s = ORK_OK;
    if (in->mask) {
        int any_hidden = 0; /* a query row that sees no key: before the first real token */
        for (int64_t i = 0; i < B * L; i++) buf[i] = in->mask[i] ? 0.0f : -1e30f;
        s = m->ta->from_host(g, ORK_F32, 2, sh2, buf, &c->t[LLM_KBIAS]);
        for (int64_t b = 0; b < B; b++) {
            int seen = 0;
            for (int64_t i = 0; i < L; i++) {
                seen |= in->mask[b * L + i] != 0;
                buf[b * L + i] = seen ? 1.0f : 0.0f;
                any_hidden |= !seen;
            }
        }
        int64_t shz[4] = {B, 1, L, 1};
        if (s == ORK_OK && any_hidden) s = m->ta->from_host(g, ORK_F32, 4, shz, buf, &c->t[LLM_ROWZ]);
    }
    for (int64_t r = 0; s == ORK_OK && r < G; r++) /* query row r·L + i is position i of head-group member r */
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) buf[(r * L + i) * L + j] = j <= i ? 0.0f : -1e30f;
    int64_t shc[4] = {1, 1, G * L, L};
    if (s == ORK_OK) s = m->ta->from_host(g, ORK_F32, 4, shc, buf, &c->t[LLM_CBIAS]);
    if (s == ORK_OK) {
        llm_rope_table((int)L, m->c.d_head, m->c.theta, buf);
        int64_t shp[3] = {L, half, 2};
        s = m->ta->from_host(g, ORK_F32, 3, shp, buf, &c->t[LLM_PE]);
    }
    free(buf);
    return s;
}

/* hidden_states index k is carried into output slot j when out[j] == k. */
static void keep_outputs(llm_model *m, int k, ork_carry *c, ork_tensor *x) {
    for (int j = 0; j < m->n_out; j++)
        if (m->out[j] == k && !(k == m->c.layers && m->final_norm)) c->t[LLM_H0 + j] = x;
}

/* x (B, L, n·Dh) -> (B, n, L, Dh), after an RMS norm over each head (w: Qwen3's q_norm / k_norm) when w. */
static ork_status heads(llm_model *m, ork_graph *g, ork_tensor *x, int n, ork_tensor *w, ork_tensor **out) {
    const ork_ops *o = m->ops;
    int64_t B = m->ta->dim(x, 0), L = m->ta->dim(x, 1), sh[4] = {B, L, n, m->c.d_head};
    static const int perm[4] = {0, 2, 1, 3};
    ork_tensor *r, *nr = NULL;
    ORK_TRY(o->reshape(g, x, 4, sh, &r));
    if (w) ORK_TRY(o->rmsnorm(g, r, w, (float)m->c.eps, &nr));
    ork_status s = o->permute(g, nr ? nr : r, perm, out);
    drop(m, g, nr);
    return s;
}

static ork_status attention(llm_model *m, ork_graph *g, int l, ork_tensor *h, ork_carry *c, ork_tensor **y) {
    const ork_ops *o = m->ops;
    const llm_cfg *k = &m->c;
    const int64_t B = m->ta->dim(h, 0), L = m->ta->dim(h, 1), H = k->heads, KV = k->kv_heads, Dh = k->d_head;
    ork_tensor *w, *qkv, *parts[3], *qn = NULL, *kn = NULL;
    ORK_TRY(wt(m, g, &w, "layers.%d.self_attn.qkv_proj.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &qkv));
    int64_t sizes[3] = {H * Dh, KV * Dh, KV * Dh};
    ORK_TRY(o->split(g, qkv, 2, 3, sizes, parts));
    drop(m, g, qkv);
    if (k->qk_norm) {
        ORK_TRY(wt(m, g, &qn, "layers.%d.self_attn.q_norm.weight", l));
        ORK_TRY(wt(m, g, &kn, "layers.%d.self_attn.k_norm.weight", l));
    }
    ork_tensor *qh, *kh, *vh, *qr, *kr;
    ORK_TRY(heads(m, g, parts[0], (int)H, qn, &qh));
    ORK_TRY(heads(m, g, parts[1], (int)KV, kn, &kh));
    ORK_TRY(heads(m, g, parts[2], (int)KV, NULL, &vh));
    for (int i = 0; i < 3; i++) drop(m, g, parts[i]);
    ORK_TRY(o->rope(g, qh, c->t[LLM_PE], &qr));
    ORK_TRY(o->rope(g, kh, c->t[LLM_PE], &kr));
    drop(m, g, qh);
    drop(m, g, kh);
    /* (B, H, L, Dh) = (B, KV, G, L, Dh) -> (B, KV, G·L, Dh): head h uses kv head h / G (transformers' repeat_kv) */
    ork_tensor *qg, *a, *ah, *az = NULL, *am;
    int64_t shg[4] = {B, KV, (H / KV) * L, Dh}, shh[4] = {B, H, L, Dh};
    ORK_TRY(o->reshape(g, qr, 4, shg, &qg));
    ork_attn_opts ao = {ORK_ABI_INIT(ork_attn_opts), 0.0f, 0}; /* scale 1/sqrt(Dh) */
    ORK_TRY(o->attention_bias(g, qg, kr, vh, c->t[LLM_CBIAS], c->t[LLM_KBIAS], &ao, &a));
    drop(m, g, qr);
    drop(m, g, kr);
    drop(m, g, vh);
    ORK_TRY(o->reshape(g, a, 4, shh, &ah));
    if (c->t[LLM_ROWZ]) ORK_TRY(o->mul(g, ah, c->t[LLM_ROWZ], &az));
    static const int perm[4] = {0, 2, 1, 3};
    ork_tensor *p;
    ORK_TRY(o->permute(g, az ? az : ah, perm, &p));
    drop(m, g, a);
    drop(m, g, az);
    int64_t shm[3] = {B, L, H * Dh};
    ORK_TRY(o->reshape(g, p, 3, shm, &am));
    ORK_TRY(wt(m, g, &w, "layers.%d.self_attn.o_proj.weight", l));
    ork_status s = o->linear(g, am, w, NULL, y);
    drop(m, g, p);
    return s;
}

static ork_status layer(llm_model *m, ork_graph *g, int l, ork_carry *c) {
    const ork_ops *o = m->ops;
    const float eps = (float)m->c.eps;
    ork_tensor *x = c->t[LLM_X], *w, *h, *y, *x1;
    ORK_TRY(wt(m, g, &w, "layers.%d.input_layernorm.weight", l));
    ORK_TRY(o->rmsnorm(g, x, w, eps, &h));
    ORK_TRY(attention(m, g, l, h, c, &y));
    drop(m, g, h);
    ORK_TRY(o->add(g, x, y, &x1));
    drop(m, g, y);
    ork_tensor *gu, *sg, *f;
    ORK_TRY(wt(m, g, &w, "layers.%d.post_attention_layernorm.weight", l));
    ORK_TRY(o->rmsnorm(g, x1, w, eps, &h));
    ORK_TRY(wt(m, g, &w, "layers.%d.mlp.gate_up_proj.weight", l));
    ORK_TRY(o->linear(g, h, w, NULL, &gu));
    drop(m, g, h);
    ORK_TRY(o->swiglu(g, gu, &sg));
    drop(m, g, gu);
    ORK_TRY(wt(m, g, &w, "layers.%d.mlp.down_proj.weight", l));
    ORK_TRY(o->linear(g, sg, w, NULL, &f));
    drop(m, g, sg);
    ORK_TRY(o->add(g, x1, f, &c->t[LLM_X]));
    drop(m, g, f);
    drop(m, g, x1);
    /* x (the block's input) is dropped by no one here: it may be an output slot or the caller's carry */
    keep_outputs(m, l + 1, c, c->t[LLM_X]);
    if (l + 1 == m->n_run && !m->final_norm) c->t[LLM_X] = NULL; /* kept as an output: the carry is n·D wide */
    return ORK_OK;
}

ork_status llm_block(llm_model *m, ork_graph *g, int i, ork_carry *c) {
    if (i < 0 || i >= m->n_blocks) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "block %d of %d", i, m->n_blocks);
        return ORK_E_INVALID;
    }
    if (!c->t[LLM_IDS] || !c->t[LLM_PE]) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "block %d before begin", i);
        return ORK_E_INVALID;
    }
    if (i == 0) {
        ork_tensor *tab;
        ORK_TRY(m->ta->weight(g, "embed_tokens.weight", &tab));
        ORK_TRY(m->ops->embedding(g, tab, c->t[LLM_IDS], &c->t[LLM_X]));
        keep_outputs(m, 0, c, c->t[LLM_X]);
        return ORK_OK;
    }
    if (!c->t[LLM_X]) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "block %d before block 0 (the token table)", i);
        return ORK_E_INVALID;
    }
    if (i <= m->n_run) return layer(m, g, i - 1, c);
    /* the final norm: the last layer's hidden state as transformers gives it */
    ork_tensor *w, *y;
    ORK_TRY(m->ta->weight(g, "norm.weight", &w));
    ORK_TRY(m->ops->rmsnorm(g, c->t[LLM_X], w, (float)m->c.eps, &y));
    for (int j = 0; j < m->n_out; j++)
        if (m->out[j] == m->c.layers) c->t[LLM_H0 + j] = y;
    c->t[LLM_X] = NULL;
    return ORK_OK;
}

ork_status llm_end(llm_model *m, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out) {
    ork_tensor *xs[LLM_MAX_OUT];
    for (int j = 0; j < m->n_out; j++)
        if (!(xs[j] = c->t[LLM_H0 + j])) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "end before the blocks ran (hidden state %d missing)", m->out[j]);
            return ORK_E_INVALID;
        }
    return m->ops->concat(g, m->n_out, xs, 2, &out->hidden);
}
