/* llm_source.c — where a decoder LM's weights come from and what it declares:
 * name_or_path as a .safetensors file, a *.safetensors.index.json, a folder
 * holding either (save_pretrained), or a diffusers FLUX.2 folder (its
 * text_encoder/); config.json beside the weights (a Mistral3 config keeps the
 * language model's keys in text_config; rope_theta at the top in transformers
 * 4's words, rope_parameters.rope_theta in 5's). The language model's tensors
 * are found under any of the prefixes transformers writes (Mistral3:
 * "language_model.model." in 4, "model.language_model." in 5; Qwen3 / Mistral
 * causal LMs: "model."); the vision tower, projector and lm_head are never
 * read. Loading joins q|k|v and gate|up and permutes q / k rows (llm.h) in
 * one buffer reused from weight to weight; every other weight, and gate|up
 * when the file holds gate_proj and up_proj back to back, is put straight
 * from the file's mapping (the core's store copies it where it lives: the
 * device, or a streamed block's pinned host region).
 * Owns nothing beyond the llm_model fields it fills. */
#include "llm.h"

#include <stdlib.h>
#include <string.h>

static const char *fam_name(const llm_model *m) { return m->fam == LLM_MISTRAL ? "mistral3" : "qwen3"; }

/* ---- config.json ------------------------------------------------------------------------------ */

static json_t *cfg_get(const llm_model *m, const char *key) {
    return m->ck.text_config ? json_object_get(m->ck.text_config, key) : NULL;
}
static double cfg_num(const llm_model *m, const char *key, double dflt) {
    return ork_hf_config_num(m->ck.text_config, key, dflt);
}
static int cfg_int(const llm_model *m, const char *key, int dflt) { return ork_hf_config_int(m->ck.text_config, key, dflt); }
static const char *cfg_str(const llm_model *m, const char *key) { return ork_hf_config_str(m->ck.text_config, key); }

/* config.json (read by ork_hf_checkpoint_open): a language model of the family? */
static ork_status check_config(llm_model *m) {
    if (!m->ck.config) return ORK_OK;
    const char *mt = cfg_str(m, "model_type");
    int ok = !*mt || (m->fam == LLM_MISTRAL ? !strcmp(mt, "mistral") || !strcmp(mt, "llama") : !strcmp(mt, "qwen3"));
    if (!ok) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s/config.json: model_type '%s' is not a %s language model (%s)", m->ck.dir, mt,
                fam_name(m),
                m->fam == LLM_MISTRAL ? "mistral, or mistral3 with a mistral text_config" : "qwen3");
        return ORK_E_FORMAT;
    }
    return ORK_OK;
}

/* rope_theta (transformers 4) or rope_parameters.rope_theta (5); only the
 * default rope type (no yarn / llama3 / linear scaling: it changes the
 * frequencies, and nothing here checks it against transformers). */
static ork_status read_rope(llm_model *m, double dflt) {
    json_t *rp = cfg_get(m, "rope_parameters"), *rs = cfg_get(m, "rope_scaling");
    m->c.theta = cfg_num(m, "rope_theta", dflt);
    if (json_is_object(rp) && json_is_number(json_object_get(rp, "rope_theta")))
        m->c.theta = json_number_value(json_object_get(rp, "rope_theta"));
    json_t *scal = json_is_object(rp) ? rp : rs;
    json_t *ty = json_is_object(scal) ? json_object_get(scal, "rope_type") : NULL;
    if (!ty && json_is_object(scal)) ty = json_object_get(scal, "type");
    if (json_is_string(ty) && strcmp(json_string_value(ty), "default")) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: rope type '%s': only the default RoPE (rope_theta, no scaling) is supported",
                m->ck.path, json_string_value(ty));
        return ORK_E_UNSUPPORTED;
    }
    if (!(m->c.theta > 1.0)) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: rope_theta %g is not > 1", m->ck.path, m->c.theta);
        return ORK_E_FORMAT;
    }
    return ORK_OK;
}

/* ---- the file ---------------------------------------------------------------------------------- */

static ork_status find_in_file(const llm_model *m, const char *canon, ork_st_info *t) {
    char full[400];
    snprintf(full, sizeof full, "%.63s%.300s", m->prefix, canon);
    return m->st->find(m->ck.src, full, t);
}

static int file_shape(const llm_model *m, const char *canon, int64_t sh[8]) {
    ork_st_info t;
    if (find_in_file(m, canon, &t) != ORK_OK) return 0;
    for (int i = 0; i < 8; i++) sh[i] = i < t.ndim ? t.shape[i] : 0;
    return t.ndim;
}

static ork_status detect_prefix(llm_model *m) {
    static const char *const pre[] = {"model.language_model.", "language_model.model.", "model.", "language_model.",
                                      ""};
    ork_st_info t;
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "%sembed_tokens.weight", pre[i]);
        if (m->st->find(m->ck.src, name, &t) == ORK_OK) {
            snprintf(m->prefix, sizeof m->prefix, "%s", pre[i]);
            return ORK_OK;
        }
    }
    LLM_LOG(m, ORK_LEVEL_ERROR, "%s: not a %s language model: no embed_tokens.weight under model.language_model., "
            "language_model.model., model. or the top level", m->ck.path, fam_name(m));
    return ORK_E_FORMAT;
}

static ork_status open_source(llm_model *m, const char *name_or_path) {
    /* a diffusers FLUX.2 folder keeps it in text_encoder/ */
    ORK_TRY(ork_hf_checkpoint_open(&m->sv, name_or_path, "text_encoder", &m->ck));
    ORK_TRY(check_config(m));
    return detect_prefix(m);
}

/* ---- declarations ------------------------------------------------------------------------------ */

/* Declarations go into arrays sized up front (declare() knows the count):
 * names of LLM_NAME bytes each in one buffer, blocks' after the weights'. */
#define LLM_NAME 64

static void decl_name(llm_model *m, int i, const char *fmt, int l) {
    snprintf(m->names + (size_t)i * LLM_NAME, LLM_NAME, fmt, l);
}

static void add_weight(llm_model *m, int block, uint32_t flags, int64_t d0, int64_t d1, const char *fmt, int l) {
    ork_weight_decl *d = &m->weights[m->n_weights];
    memset(d, 0, sizeof *d);
    decl_name(m, m->n_weights, fmt, l);
    d->name = m->names + (size_t)m->n_weights++ * LLM_NAME;
    d->ndim = d1 ? 2 : 1;
    d->shape[0] = d0;
    d->shape[1] = d1;
    d->block = block;
    d->flags = flags;
}

/* The hidden_states indices: the model's choice (select_hidden, negative from
 * the end), else the params', else the pipeline's. */
static ork_status choose_layers(llm_model *m) {
    const int64_t *h = m->p.hidden_layers;
    static const int mistral[3] = {10, 20, 30}, qwen[3] = {9, 18, 27};
    int dflt = !h[0] && !h[1] && !h[2];
    m->n_out = m->n_sel > 0 ? m->n_sel : 3;
    m->n_run = 0;
    m->final_norm = 0;
    for (int i = 0; i < m->n_out; i++) {
        int k = m->n_sel > 0 ? (m->sel[i] < 0 ? m->c.layers + 1 + m->sel[i] : m->sel[i])
              : dflt         ? (m->fam == LLM_MISTRAL ? mistral[i] : qwen[i])
                             : (int)h[i];
        if (k < 0 || k > m->c.layers) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "%s: hidden state %d: the model has hidden states 0 .. %d (%d layers; -1 .. "
                    "-%d from the end)", m->ck.path, m->n_sel > 0 ? m->sel[i] : k, m->c.layers, m->c.layers,
                    m->c.layers + 1);
            return ORK_E_CONFIG;
        }
        m->out[i] = k;
        if (k == m->c.layers) m->final_norm = 1;
        if (k > m->n_run) m->n_run = k;
    }
    return ORK_OK;
}

/* "10, 20, 30": the chosen indices, for lines. */
static const char *outs(const llm_model *m, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < m->n_out && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? ", " : "", m->out[i]);
    return buf;
}

static ork_status detect_shapes(llm_model *m) {
    llm_cfg *c = &m->c;
    int64_t sh[8];
    file_shape(m, "embed_tokens.weight", sh);
    c->vocab = (int)sh[0];
    c->d_model = (int)sh[1];
    int64_t qr, kr;
    if (file_shape(m, "layers.0.self_attn.q_proj.weight", sh) != 2 || sh[1] != c->d_model) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %slayers.0.self_attn.q_proj.weight missing or not (heads·head_dim, %d)",
                m->ck.path, m->prefix, c->d_model);
        return ORK_E_FORMAT;
    }
    qr = sh[0];
    if (file_shape(m, "layers.0.self_attn.k_proj.weight", sh) != 2 || sh[1] != c->d_model) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %slayers.0.self_attn.k_proj.weight missing or not (kv_heads·head_dim, %d)",
                m->ck.path, m->prefix, c->d_model);
        return ORK_E_FORMAT;
    }
    kr = sh[0];
    c->qk_norm = file_shape(m, "layers.0.self_attn.q_norm.weight", sh) == 1;
    if (m->fam == LLM_QWEN3 && !c->qk_norm) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: no %slayers.0.self_attn.q_norm.weight: not a Qwen3 model (Qwen2 has no q/k "
                "norm)", m->ck.path, m->prefix);
        return ORK_E_FORMAT;
    }
    if (m->fam == LLM_MISTRAL && c->qk_norm) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %slayers.0.self_attn.q_norm.weight: a Qwen3 model, not Mistral (use qwen3)",
                m->ck.path, m->prefix);
        return ORK_E_FORMAT;
    }
    /* head_dim: config.json, else Qwen3's q_norm width, else 128 (Mistral-Small's) */
    c->d_head = cfg_int(m, "head_dim", c->qk_norm ? (int)sh[0] : 128);
    if (c->d_head <= 0 || c->d_head % 2 || qr % c->d_head || kr % c->d_head) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: head_dim %d does not divide q_proj's %lld and k_proj's %lld rows (or is odd)",
                m->ck.path, c->d_head, (long long)qr, (long long)kr);
        return ORK_E_FORMAT;
    }
    c->heads = (int)(qr / c->d_head);
    c->kv_heads = (int)(kr / c->d_head);
    if (cfg_int(m, "num_attention_heads", c->heads) != c->heads ||
        cfg_int(m, "num_key_value_heads", c->kv_heads) != c->kv_heads || c->heads % c->kv_heads) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: config.json says %d heads and %d kv heads; the weights have %d and %d of %d "
                "(heads must be a multiple of kv heads)", m->ck.path, cfg_int(m, "num_attention_heads", c->heads),
                cfg_int(m, "num_key_value_heads", c->kv_heads), c->heads, c->kv_heads, c->d_head);
        return ORK_E_FORMAT;
    }
    if (file_shape(m, "layers.0.mlp.gate_proj.weight", sh) != 2 || sh[1] != c->d_model) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %slayers.0.mlp.gate_proj.weight missing or not (intermediate, %d)", m->ck.path,
                m->prefix, c->d_model);
        return ORK_E_FORMAT;
    }
    c->d_ff = (int)sh[0];
    int in_file = 0;
    for (;; in_file++) {
        char name[96];
        snprintf(name, sizeof name, "layers.%d.self_attn.q_proj.weight", in_file);
        if (!file_shape(m, name, sh)) break;
    }
    c->layers = cfg_int(m, "num_hidden_layers", in_file);
    c->eps = cfg_num(m, "rms_norm_eps", m->fam == LLM_MISTRAL ? 1e-5 : 1e-6);
    json_t *sw = cfg_get(m, "sliding_window");
    c->sliding_window = json_is_integer(sw) ? (int)json_integer_value(sw) : 0;
    if (m->fam == LLM_QWEN3 && !json_is_true(cfg_get(m, "use_sliding_window"))) c->sliding_window = 0;
    c->pad_id = cfg_int(m, "pad_token_id", m->fam == LLM_MISTRAL ? 11 : 151643);
    c->eos_id = cfg_int(m, "eos_token_id", m->fam == LLM_MISTRAL ? 2 : 151645);
    c->bos_id = m->fam == LLM_MISTRAL ? cfg_int(m, "bos_token_id", 1) : -1;
    ORK_TRY(read_rope(m, m->fam == LLM_MISTRAL ? 1e9 : 1e6));
    ORK_TRY(choose_layers(m));
    if (in_file < m->n_run) {
        char o[64];
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: the hidden states %s need %d layers; the file has %d", m->ck.path,
                outs(m, o, sizeof o), m->n_run, in_file);
        return ORK_E_FORMAT;
    }
    const char *v = "custom";
    if (m->fam == LLM_MISTRAL && c->d_model == 5120 && c->heads == 32 && c->kv_heads == 8 && c->d_ff == 32768)
        v = "mistral-small-3";
    else if (m->fam == LLM_QWEN3 && c->d_model == 2560 && c->d_ff == 9728) v = "qwen3-4b";
    else if (m->fam == LLM_QWEN3 && c->d_model == 4096 && c->d_ff == 12288) v = "qwen3-8b";
    snprintf(c->variant, sizeof c->variant, "%s", v);
    return ORK_OK;
}

static ork_status declare(llm_model *m) {
    const llm_cfg *c = &m->c;
    const int64_t D = c->d_model, Q = (int64_t)(c->heads + 2 * c->kv_heads) * c->d_head,
                  O = (int64_t)c->heads * c->d_head, F = c->d_ff;
    const uint32_t LA = ORK_WEIGHT_LINEAR | ORK_WEIGHT_ATTN, N = ORK_WEIGHT_NORM;
    const int per_layer = c->qk_norm ? 8 : 6, nw = 1 + m->n_run * per_layer + m->final_norm,
              nb = 1 + m->n_run + m->final_norm;
    m->weights = calloc((size_t)nw, sizeof *m->weights);
    m->block_names = calloc((size_t)nb, sizeof *m->block_names);
    m->names = calloc((size_t)(nw + nb), LLM_NAME);
    if (!m->weights || !m->block_names || !m->names) return ORK_E_NOMEM;
    add_weight(m, 0, 0, c->vocab, D, "embed_tokens.weight", 0);
    for (int l = 0; l < m->n_run; l++) {
        int b = l + 1;
        add_weight(m, b, N, D, 0, "layers.%d.input_layernorm.weight", l);
        add_weight(m, b, LA, Q, D, "layers.%d.self_attn.qkv_proj.weight", l);
        if (c->qk_norm) {
            add_weight(m, b, N | ORK_WEIGHT_ATTN, c->d_head, 0, "layers.%d.self_attn.q_norm.weight", l);
            add_weight(m, b, N | ORK_WEIGHT_ATTN, c->d_head, 0, "layers.%d.self_attn.k_norm.weight", l);
        }
        add_weight(m, b, LA, D, O, "layers.%d.self_attn.o_proj.weight", l);
        add_weight(m, b, N, D, 0, "layers.%d.post_attention_layernorm.weight", l);
        add_weight(m, b, ORK_WEIGHT_LINEAR, 2 * F, D, "layers.%d.mlp.gate_up_proj.weight", l);
        add_weight(m, b, ORK_WEIGHT_LINEAR, D, F, "layers.%d.mlp.down_proj.weight", l);
    }
    if (m->final_norm) add_weight(m, m->n_run + 1, N, D, 0, "norm.weight", 0);
    for (int i = 0; i < nb; i++) { /* "embed_tokens", "layers.N", "norm" */
        decl_name(m, nw + i, i == 0 ? "embed_tokens" : i <= m->n_run ? "layers.%d" : "norm", i - 1);
        m->block_names[i] = m->names + (size_t)(nw + i) * LLM_NAME;
    }
    m->n_blocks = nb;
    return ORK_OK;
}

ork_status llm_open(llm_model *m, const char *name_or_path, ork_text_encoder_info *info) {
    ORK_TRY(open_source(m, name_or_path));
    ORK_TRY(detect_shapes(m));
    ORK_TRY(declare(m));
    const llm_cfg *c = &m->c;
    info->family = fam_name(m);
    info->variant = c->variant;
    info->n_blocks = m->n_blocks;
    info->block_names = m->block_names;
    info->n_weights = m->n_weights;
    info->weights = m->weights;
    info->hidden_dim = m->n_out * c->d_model;
    info->pooled_dim = 0;
    info->max_length = c->sliding_window > 0 ? c->sliding_window : 0;
    info->default_length = 512; /* both FLUX.2 pipelines' max_sequence_length */
    info->vocab_size = c->vocab;
    info->pad_id = c->pad_id;
    info->eos_id = c->eos_id;
    info->bos_id = c->bos_id;
    char o[64];
    LLM_LOG(m, ORK_LEVEL_INFO, "%s %s (%s): %d of %d layers run, hidden %d, %d heads / %d kv of %d, intermediate %d, "
            "vocab %d, rope_theta %g; hidden states %s -> %d features", fam_name(m), c->variant, m->ck.path,
            m->n_run, c->layers, c->d_model, c->heads, c->kv_heads, c->d_head, c->d_ff, c->vocab, c->theta,
            outs(m, o, sizeof o), info->hidden_dim);
    return ORK_OK;
}

/* ---- loading ----------------------------------------------------------------------------------- */

/* One file tensor's part of a declared weight: its rows, permuted within
 * heads of hd rows (rotate-half pairs -> adjacent pairs) when hd > 0. */
typedef struct part {
    char name[160];
    int hd;
} part;

/* Source row of destination row r within a head of hd rows: (k, k + hd/2) -> (2k, 2k + 1). */
static int64_t src_row(int64_t r, int hd) {
    if (hd <= 0) return r;
    int64_t h = r / hd, i = r % hd;
    return h * hd + (i % 2 ? i / 2 + hd / 2 : i / 2);
}

/* A per-tensor fp8 scale (<base>.weight_scale or .scale_weight), 1 when absent. */
static ork_status fp8_scale(llm_model *m, const char *canon, float *scale) {
    size_t bl = strlen(canon) > 7 && !strcmp(canon + strlen(canon) - 7, ".weight") ? strlen(canon) - 7 : strlen(canon);
    static const char *const sfx[] = {".weight_scale", ".scale_weight"};
    *scale = 1.0f;
    for (int i = 0; i < 2; i++) {
        char sn[300];
        snprintf(sn, sizeof sn, "%.*s%s", (int)bl, canon, sfx[i]);
        ork_st_info sc;
        if (find_in_file(m, sn, &sc) != ORK_OK) continue;
        if (sc.nbytes == 0 || m->st->read_f32(&sc, scale) != ORK_OK) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %s%s is not a readable scale", m->ck.path, m->prefix, sn);
            return ORK_E_FORMAT;
        }
        return ORK_OK;
    }
    return ORK_OK;
}

static ork_status put_parts(llm_model *m, const ork_weight_sink *sink, const ork_weight_decl *d, const part *p,
                            int np) {
    ork_st_info t[3];
    int64_t rows = 0, cols = d->ndim == 2 ? d->shape[1] : 1, want_rows = d->shape[0];
    int same = 1, fp8 = 0;
    for (int i = 0; i < np; i++) {
        if (find_in_file(m, p[i].name, &t[i]) != ORK_OK) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "%s: lacks the weight %s%s", m->ck.path, m->prefix, p[i].name);
            return ORK_E_FORMAT;
        }
        int64_t tc = t[i].ndim == 2 ? t[i].shape[1] : 1;
        if (t[i].ndim != d->ndim || tc != cols || (p[i].hd && t[i].shape[0] % p[i].hd)) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "%s: weight %s%s has %d dims (%lld, %lld); expected %d dims of width %lld",
                    m->ck.path, m->prefix, p[i].name, t[i].ndim, (long long)t[i].shape[0],
                    (long long)(t[i].ndim > 1 ? t[i].shape[1] : 1), d->ndim, (long long)cols);
            return ORK_E_FORMAT;
        }
        rows += t[i].shape[0];
        if (t[i].dtype != t[0].dtype) same = 0;
        if (t[i].dtype == ORK_F8_E4M3 || t[i].dtype == ORK_F8_E5M2) fp8 = 1;
        else if (t[i].dtype != ORK_F32 && t[i].dtype != ORK_BF16 && t[i].dtype != ORK_F16) {
            LLM_LOG(m, ORK_LEVEL_ERROR, "%s: weight %s%s is stored as dtype %d; f32, bf16, f16 and fp8 are read",
                    m->ck.path, m->prefix, p[i].name, (int)t[i].dtype);
            return ORK_E_UNSUPPORTED;
        }
    }
    if (rows != want_rows) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %s: its parts have %lld rows, expected %lld", m->ck.path, d->name,
                (long long)rows, (long long)want_rows);
        return ORK_E_FORMAT;
    }
    /* one part, or parts the file keeps back to back in order, none permuted (gate|up: the
     * safetensors writers order tensors by name, gate_proj's bytes end where up_proj's begin):
     * put straight from the mapping, nothing assembled */
    int direct = same && !fp8;
    for (int i = 0; i < np && direct; i++)
        direct = !p[i].hd && (i == 0 || (const char *)t[i].data == (const char *)t[i - 1].data + t[i - 1].nbytes);
    if (direct) return sink->put(sink, d->name, t[0].dtype, t[0].data);
    if (fp8 && (!same || !(d->flags & ORK_WEIGHT_LINEAR))) {
        LLM_LOG(m, ORK_LEVEL_ERROR, "%s: %s: fp8 is read for linear weights stored all in one fp8 dtype", m->ck.path,
                d->name);
        return ORK_E_UNSUPPORTED;
    }
    /* same dtype (or fp8): rows copied as bytes; else every part as F32 */
    ork_dtype dt = same ? t[0].dtype : ORK_F32;
    size_t es = dt == ORK_F32 ? 4 : dt == ORK_F8_E4M3 || dt == ORK_F8_E5M2 ? 1 : 2, rb = (size_t)cols * es;
    size_t need = (size_t)rows * rb;
    if (need > m->join_size) {
        free(m->join);
        m->join_size = 0;
        if ((m->join = malloc(need))) m->join_size = need;
    }
    char *buf = m->join;
    float *scales = fp8 ? malloc((size_t)rows * sizeof *scales) : NULL, *tmp = NULL;
    ork_status s = buf && (!fp8 || scales) ? ORK_OK : ORK_E_NOMEM;
    int64_t r0 = 0;
    for (int i = 0; s == ORK_OK && i < np; i++) {
        int64_t n = t[i].shape[0];
        const char *src = t[i].data;
        if (!same) {
            free(tmp);
            tmp = malloc((size_t)(n * cols) * sizeof *tmp);
            if (!tmp || (s = m->st->read_f32(&t[i], tmp)) != ORK_OK) {
                s = tmp ? s : ORK_E_NOMEM;
                break;
            }
            src = (const char *)tmp;
        }
        for (int64_t r = 0; r < n; r++) memcpy(buf + (size_t)(r0 + r) * rb, src + (size_t)src_row(r, p[i].hd) * rb, rb);
        if (fp8) {
            float sc;
            s = fp8_scale(m, p[i].name, &sc);
            for (int64_t r = 0; r < n; r++) scales[r0 + r] = sc;
        }
        r0 += n;
    }
    if (s == ORK_OK) s = fp8 ? sink->put_quantized(sink, d->name, dt, buf, scales, 0) : sink->put(sink, d->name, dt, buf);
    free(tmp);
    free(scales);
    return s;
}

static ork_status load_all(llm_model *m, const ork_weight_sink *sink);
ork_status llm_load(llm_model *m, const ork_weight_sink *sink) {
    ork_status s = load_all(m, sink);
    free(m->join); /* the largest joined weight (Mistral-Small's gate|up: 671 MB in bf16) */
    m->join = NULL;
    m->join_size = 0;
    return s;
}

static ork_status load_all(llm_model *m, const ork_weight_sink *sink) {
    const int hd = m->c.d_head;
    for (int i = 0; i < m->n_weights; i++) {
        const ork_weight_decl *d = &m->weights[i];
        part p[3];
        int np = 1, l = -1;
        memset(p, 0, sizeof p);
        char what[96] = "";
        if (sscanf(d->name, "layers.%d.%95s", &l, what) != 2) l = -1;
        if (l >= 0 && !strcmp(what, "self_attn.qkv_proj.weight")) {
            np = 3;
            snprintf(p[0].name, sizeof p[0].name, "layers.%d.self_attn.q_proj.weight", l);
            snprintf(p[1].name, sizeof p[1].name, "layers.%d.self_attn.k_proj.weight", l);
            snprintf(p[2].name, sizeof p[2].name, "layers.%d.self_attn.v_proj.weight", l);
            p[0].hd = p[1].hd = hd;
        } else if (l >= 0 && !strcmp(what, "mlp.gate_up_proj.weight")) {
            np = 2;
            snprintf(p[0].name, sizeof p[0].name, "layers.%d.mlp.gate_proj.weight", l);
            snprintf(p[1].name, sizeof p[1].name, "layers.%d.mlp.up_proj.weight", l);
        } else {
            snprintf(p[0].name, sizeof p[0].name, "%s", d->name);
            if (l >= 0 && (!strcmp(what, "self_attn.q_norm.weight") || !strcmp(what, "self_attn.k_norm.weight")))
                p[0].hd = hd;
        }
        ORK_TRY(put_parts(m, sink, d, p, np));
    }
    return ORK_OK;
}
