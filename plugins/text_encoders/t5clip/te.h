/* te.h — internal to the t5clip plugin: one encoder instance (T5 v1.1 encoder
 * or CLIP text transformer), its configuration, declarations, and the
 * per-family functions. Only SDK headers (<orakul/...>).
 *
 * Blocks (both families): 0 = embeddings (T5: token table and the relative
 * position bias, computed once and shared by every layer; CLIP: token and
 * position tables), 1 .. n_layers = the layers, n_layers + 1 = the final norm.
 * Carry slots: TE_X hidden (B, L, D) in the activation dtype; TE_IDS the token
 * ids I32 (B, L); TE_KBIAS the padding mask as an additive F32 (B, L) (0 or
 * -1e30), NULL without a mask; TE_PBIAS T5's position bias (1, H, L, L);
 * TE_POOL CLIP's pooled rows I32 (B): b·L + the EOS position.
 * Owns (per instance): the source set, the names and declarations. */
#ifndef ORK_TE_H
#define ORK_TE_H

#include <orakul/hf_checkpoint.h>
#include <orakul/orakul.h>

#include <stdio.h>

enum { TE_X = 0, TE_IDS = 1, TE_KBIAS = 2, TE_PBIAS = 3, TE_POOL = 4, TE_NSLOTS = 5 };

typedef enum te_family { TE_T5 = 0, TE_CLIP = 1 } te_family;

typedef struct te_params {
    int64_t num_heads; /* 0: from config.json, else derived */
} te_params;

typedef struct te_cfg {
    int layers, d_model, heads, d_head, d_ff, vocab;
    int max_pos;            /* CLIP: position table rows; T5: 0 */
    int buckets, max_dist;  /* T5 relative attention */
    double eps;
    int eos_cfg;            /* CLIP config.eos_token_id (2: legacy, pooled at argmax(ids)) */
    int32_t pad_id, eos_id, bos_id;
    char variant[64];
} te_cfg;

typedef struct te_model {
    te_family fam;
    const ork_host *host;
    const ork_ops *ops;
    const ork_tensor_api *ta;
    const ork_safetensors_api *st;
    ork_hf_services sv;     /* the services above, as orakul/hf_checkpoint.h takes them */
    te_params p;
    te_cfg c;
    ork_hf_checkpoint ck;   /* the opened weights (ck.src, ck.path) and config.json */
    int n_blocks, n_weights, cap_weights;
    char **block_names;
    ork_weight_decl *weights;
    char **weight_names;
    const char *alias_shared; /* T5: the name the token table has in the file */
} te_model;

#define TE_LOG(m, lvl, ...) (m)->host->log((m)->host, (lvl), __VA_ARGS__)

/* te_source.c: resolve name_or_path (file, index, folder, or a diffusers
 * FLUX.1 folder: text_encoder/ = CLIP, text_encoder_2/ = T5) and open it;
 * read config.json beside the weights when there is one. */
ork_status te_open_source(te_model *m, const char *name_or_path);
/* An integer of config.json (the folder of the weights), or dflt. */
int te_cfg_int(te_model *m, const char *key, int dflt);
double te_cfg_num(te_model *m, const char *key, double dflt);
/* A string of config.json into buf (empty when absent). */
void te_cfg_str(te_model *m, const char *key, char *buf, size_t n);
/* Declarations. */
ork_status te_add_block(te_model *m, const char *fmt, ...);
ork_status te_add_weight(te_model *m, int block, uint32_t flags, int ndim, int64_t d0, int64_t d1, const char *fmt, ...);
/* Shape of a tensor in the file (0 when absent); CLIP names are canonical
 * ("text_model." ...) and found with or without that prefix. */
int te_file_shape(te_model *m, const char *name, int64_t shape[8]);
/* Put every declared weight (by its declared name, or m->alias_shared for "shared.weight"). */
ork_status te_load(te_model *m, const ork_weight_sink *sink);
/* A weight of the file by its canonical name (CLIP: with or without
 * "text_model."); ORK_OK when found. */
ork_status te_find(te_model *m, const char *name, ork_st_info *t);
/* te_prefetch.c: threads mapping the weights' pages in load order while
 * te_load copies them; NULL when none could start (the load goes on). */
typedef struct te_prefetch te_prefetch;
te_prefetch *te_prefetch_start(te_model *m);
void te_prefetch_stop(te_prefetch *pf);
/* ta->drop when the core has it. */
void te_drop(te_model *m, ork_graph *g, ork_tensor *t);
/* A weight by printf-style name. */
ork_status te_w(te_model *m, ork_graph *g, ork_tensor **out, const char *fmt, ...);
/* (B, L, H·dh) -> (B, H, L, dh) and back. */
ork_status te_heads(te_model *m, ork_graph *g, ork_tensor *x, int H, ork_tensor **out);
ork_status te_merge(te_model *m, ork_graph *g, ork_tensor *x, ork_tensor **out);
/* begin's common part: check and upload ids and the mask (slots TE_IDS, TE_KBIAS). */
ork_status te_begin_common(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, int max_len, ork_carry *c);

/* te_t5.c / te_clip.c */
ork_status te_t5_open(te_model *m, ork_text_encoder_info *info);
ork_status te_t5_begin(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c);
ork_status te_t5_block(te_model *m, ork_graph *g, int i, ork_carry *c);
int te_t5_bucket(int rel, int num_buckets, int max_distance);
ork_status te_clip_open(te_model *m, ork_text_encoder_info *info);
ork_status te_clip_begin(te_model *m, ork_graph *g, const ork_text_encoder_inputs *in, ork_carry *c);
ork_status te_clip_block(te_model *m, ork_graph *g, int i, ork_carry *c);
ork_status te_clip_end(te_model *m, ork_graph *g, ork_carry *c, ork_text_encoder_outputs *out);

#endif
