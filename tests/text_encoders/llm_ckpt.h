/* tests/text_encoders/llm_ckpt.h — a random Mistral3 or Qwen3 checkpoint for
 * the llm plugin's tests, in the layout a diffusers FLUX.2 folder has:
 * <dir>/text_encoder/ (model.safetensors of BF16 weights, every layer's
 * tensors from one table, under the prefix transformers writes:
 * "model.language_model." for Mistral3, "model." for Qwen3; config.json) and
 * <dir>/tokenizer/ (symlinks to a tokenizer folder's files). Uniform values
 * of scale 1/sqrt(fan-in), norm scales 1 ± 0.5, from a seeded LCG.
 * Owns nothing once written. */
#ifndef ORK_TE_LLM_CKPT_H
#define ORK_TE_LLM_CKPT_H

#include "io/safetensors.h"
#include "numerics/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct llm_ckpt {
    int qwen;                      /* 1: Qwen3 (q / k norms), 0: Mistral3 */
    int width, layers, cfg_layers; /* hidden size; layers in the file; num_hidden_layers in config.json */
    int heads, kv_heads, head_dim, ff;
    int64_t vocab;
    const char *tokdir;            /* the tokenizer folder whose files are linked into tokenizer/ */
    const char *const *tokfiles;   /* NULL-terminated */
    uint64_t seed;
} llm_ckpt;

static inline int llm_ckpt_add(ork_st_writer *w, uint16_t **keep, int *nk, const char *name, int64_t rows,
                               int64_t cols, uint64_t *seed) {
    int64_t n = rows * (cols ? cols : 1), sh[2] = {rows, cols};
    float *v = malloc((size_t)n * sizeof *v);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!v || !h) {
        free(v);
        free(h);
        return 1;
    }
    float s = cols ? 1.0f / sqrtf((float)cols) : 0.5f;
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        float u = (float)((*seed >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
        v[i] = cols ? s * u : 1.0f + s * u;
    }
    ork_bf16_from_f32(v, (size_t)n, h);
    free(v);
    keep[(*nk)++] = h;
    return ork_st_writer_add(w, name, ORK_BF16, cols ? 2 : 1, sh, h, (uint64_t)n * 2) != ORK_OK;
}

/* dir (made here) with text_encoder/ and tokenizer/ as above; 0 on success. */
static inline int llm_ckpt_write(const char *dir, const llm_ckpt *c) {
    const int H = c->heads, KV = c->kv_heads, DH = c->head_dim, W = c->width, F = c->ff;
    const struct {
        const char *name; /* after "<prefix>layers.N." */
        int rows, cols;   /* cols 0: a norm scale */
    } layer[] = {{"self_attn.q_proj.weight", H * DH, W},  {"self_attn.k_proj.weight", KV * DH, W},
                 {"self_attn.v_proj.weight", KV * DH, W}, {"self_attn.o_proj.weight", W, H * DH},
                 {"mlp.gate_proj.weight", F, W},          {"mlp.up_proj.weight", F, W},
                 {"mlp.down_proj.weight", W, F},          {"input_layernorm.weight", W, 0},
                 {"post_attention_layernorm.weight", W, 0}, {"self_attn.q_norm.weight", DH, 0},
                 {"self_attn.k_norm.weight", DH, 0}};
    const int per = c->qwen ? 11 : 9;
    const char *pre = c->qwen ? "model." : "model.language_model.";
    char p[900], name[300];
    snprintf(p, sizeof p, "%s/text_encoder", dir);
    if (mkdir(dir, 0755) || mkdir(p, 0755)) return 1;
    ork_st_writer *w = NULL;
    if (ork_st_writer_new(&w) != ORK_OK) return 1;
    uint16_t **keep = calloc((size_t)c->layers * 11 + 2, sizeof *keep);
    int nk = 0, e = !keep;
    uint64_t seed = c->seed;
    snprintf(name, sizeof name, "%sembed_tokens.weight", pre);
    if (!e) e |= llm_ckpt_add(w, keep, &nk, name, c->vocab, W, &seed);
    for (int l = 0; l < c->layers && !e; l++)
        for (int j = 0; j < per; j++) {
            snprintf(name, sizeof name, "%slayers.%d.%s", pre, l, layer[j].name);
            e |= llm_ckpt_add(w, keep, &nk, name, layer[j].rows, layer[j].cols, &seed);
        }
    snprintf(name, sizeof name, "%snorm.weight", pre);
    if (!e) e |= llm_ckpt_add(w, keep, &nk, name, W, 0, &seed);
    snprintf(p, sizeof p, "%s/text_encoder/model.safetensors", dir);
    if (!e) e |= ork_st_writer_commit(w, p) != ORK_OK;
    ork_st_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    free(keep);
    snprintf(p, sizeof p, "%s/text_encoder/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    if (c->qwen)
        fprintf(f, "{\"model_type\": \"qwen3\", \"num_hidden_layers\": %d, \"head_dim\": %d, \"num_attention_heads\": "
                "%d, \"num_key_value_heads\": %d, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0}\n",
                c->cfg_layers, DH, H, KV);
    else
        fprintf(f, "{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"mistral\", \"num_hidden_layers\": "
                "%d, \"head_dim\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"rms_norm_eps\": "
                "1e-5, \"rope_theta\": 1000000000.0, \"sliding_window\": null}}\n", c->cfg_layers, DH, H, KV);
    if (fclose(f) != 0) return 1;
    snprintf(p, sizeof p, "%s/tokenizer", dir);
    if (mkdir(p, 0755)) return 1;
    for (int i = 0; c->tokfiles[i] && !e; i++) {
        char t[900];
        snprintf(t, sizeof t, "%s/%s", c->tokdir, c->tokfiles[i]);
        snprintf(p, sizeof p, "%s/tokenizer/%s", dir, c->tokfiles[i]);
        e |= symlink(t, p) != 0;
    }
    return e;
}

#endif
