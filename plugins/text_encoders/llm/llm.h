/* llm.h — internal to the llm plugin: FLUX.2's text encoders, decoder-only
 * language models run forward only (Mistral-Small-3.x's language model for
 * FLUX.2-dev, Qwen3 4B / 8B for klein; Z-Image names Qwen3 too), giving the
 * hidden states of chosen layers stacked to (B, L, n·D) as diffusers' Flux2
 * pipelines take them. Only SDK headers (<orakul/...>).
 *
 * Blocks: 0 = the token table (embed_tokens), 1 .. n_run = decoder layers
 * 0 .. n_run-1 (n_run = the deepest layer read: layers past it are neither
 * declared nor loaded), and a last block "norm" only when a chosen index is
 * the model's last layer (transformers gives that one after the final norm).
 *
 * Weights (canonical names, mapped to the file's prefix at load): q, k, v
 * projections joined into layers.N.self_attn.qkv_proj.weight ((H + 2·KV)·Dh,
 * D), gate and up into layers.N.mlp.gate_up_proj.weight (2F, D, gate first as
 * the swiglu op takes it). The rows of q and k (and Qwen3's q_norm / k_norm)
 * are permuted within each head from transformers' rotate-half pairs (k,
 * k + Dh/2) to the adjacent pairs (2k, 2k + 1) the rope op rotates: q·k is
 * unchanged (llama.cpp's converter does the same).
 *
 * Carry slots: LLM_X hidden (B, L, D); LLM_IDS I32 (B, L); LLM_KBIAS the
 * padding mask as an additive F32 (B, L) (0 / -1e30) or NULL; LLM_CBIAS the
 * causal mask F32 (1, 1, G·L, L) for queries grouped G = H / KV to a kv head;
 * LLM_PE the rotary table F32 (L, Dh/2, 2); LLM_ROWZ (B, 1, L, 1) 0 for query
 * rows with no visible key (left padding: sdpa gives them 0), else 1, or NULL
 * when every row sees a key; LLM_H0 .. the chosen hidden states. After the
 * last block LLM_X is NULL: the carry is then the outputs' n·D wide (what
 * the conditioner counts a caption's carry as: hidden_dim).
 * Owns (per instance): the source set, config, names and declarations, and
 * during a load the join buffer. */
#ifndef ORK_LLM_H
#define ORK_LLM_H

#include <orakul/hf_checkpoint.h>
#include <orakul/orakul.h>

#include <stdio.h>

#define LLM_MAX_OUT 4
enum { LLM_X = 0, LLM_IDS, LLM_KBIAS, LLM_CBIAS, LLM_PE, LLM_ROWZ, LLM_H0, LLM_NSLOTS = LLM_H0 + LLM_MAX_OUT };

typedef enum llm_family { LLM_MISTRAL = 0, LLM_QWEN3 = 1 } llm_family;

typedef struct llm_params {
    int64_t hidden_layers[3]; /* hidden_states indices; all 0: the pipeline's (10, 20, 30) / (9, 18, 27) */
} llm_params;

typedef struct llm_cfg {
    int layers;          /* the model's layers (config.json, else the file's) */
    int d_model, heads, kv_heads, d_head, d_ff, vocab;
    int qk_norm;         /* Qwen3: RMS norm of q and k per head before RoPE */
    double eps, theta;
    int sliding_window;  /* 0: none */
    int32_t pad_id, eos_id, bos_id;
    char variant[64];
} llm_cfg;

typedef struct llm_model {
    llm_family fam;
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    ork_hf_services sv;          /* the services above, as orakul/hf_checkpoint.h takes them */
    llm_params p;
    llm_cfg c;
    int n_sel, sel[LLM_MAX_OUT]; /* the model's choice (select_hidden, negative from the end), or 0 */
    int n_out, out[LLM_MAX_OUT]; /* the hidden_states indices, in output order */
    int n_run;                   /* decoder layers run (the deepest index read, at most c.layers) */
    int final_norm;              /* 1: a chosen index is c.layers (normed, block n_run + 1) */
    ork_hf_checkpoint ck;        /* the opened weights (ck.src, ck.path) and config.json (ck.config;
                                  * ck.text_config: a Mistral3 config's text_config) */
    char prefix[64];             /* the file's prefix before "layers.N": "model.", "language_model.model.", ... */
    int n_blocks, n_weights;
    const char **block_names;    /* into names */
    ork_weight_decl *weights;    /* names into names */
    char *names;                 /* every weight's and block's name, fixed width */
    char *join;                  /* load: the buffer joined weights are assembled in, reused from weight to
                                  * weight (one allocation's pages faulted once, not one per weight) */
    size_t join_size;
} llm_model;

#define LLM_LOG(m, lvl, ...) (m)->host->log((m)->host, (lvl), __VA_ARGS__)

/* llm_source.c: resolve and open name_or_path (a .safetensors file, an index
 * json, a folder holding either, or a diffusers FLUX.2 folder with
 * text_encoder/), read config.json, detect the prefix and shapes, and declare
 * the blocks and weights. */
ork_status llm_open(llm_model *m, const char *name_or_path, ork_text_encoder_info *info);
/* Put every declared weight (joined and permuted as llm.h says). */
ork_status llm_load(llm_model *m, const ork_weight_sink *sink);

/* llm_forward.c */
ork_status llm_begin(llm_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c);
ork_status llm_block(llm_model *m, ork_graph *g, int i, ork_carry *c);
ork_status llm_end(llm_model *m, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out);
/* The rotary table (L, Dh/2, 2) F32 as transformers computes it (float32
 * inv_freq = 1 / theta^(2k/Dh), angle = position · inv_freq): pe[l][k] =
 * (cos, sin) of position l for pair k. */
void llm_rope_table(int L, int d_head, double theta, float *pe);

#endif
