/* text/conditioner.h — the text-conditioning runtime (issue #28 points 3-4):
 * captions -> the embeddings a model is conditioned on, in process.
 *
 * The model says what it needs (ork_model_info's text slots, <orakul/model.h>:
 * for FLUX.1 "t5" hidden -> txt (T, context_dim) and "clip" pooled -> vec
 * (vec_dim)); the conditioner finds each encoder's weights and tokenizer
 * (an explicit model_kwargs path, else <the model's diffusers folder>/<subfolder>),
 * opens the text_encoder components through the registry (headers only: no
 * weight is read at open), checks their widths against the model's, and at
 * encode time tokenizes, loads the weights into a weight store of its own
 * (T5 quantized to FP8 with per-row scales when model.quantize_te), runs the
 * encoders, and frees all of it before returning.
 *
 * One object serves both `orakul plan` (open + describe) and `orakul run`
 * (open + identity + encode): the same resolution, the same refusals.
 *
 * Memory: encode works inside budget_bytes (model.vram_budget_gb). When an
 * encoder's weights plus one chunk's activations fit, it is RESIDENT (every
 * weight loaded once, captions in chunks); otherwise LAYER-MAJOR: block k's
 * weights are loaded once, every caption's carry (kept on the device when
 * the group fits beside the block, else on the host; moved through in chunks
 * that fit) is pushed through block k, the weights are freed, then block k+1 —
 * one pass of the weights over PCIe for all captions. Both give bit-identical
 * embeddings (the same ops on the same chunks). A chunk the budget refuses
 * after all (the activations are an estimate) is retried at half the size.
 *
 * Each encode call makes one pass of the weights: callers gather every caption
 * they need (the dataset's uncached ones, the empty caption for dropout, the
 * sample prompts) into one call; encode_each does the same for more captions
 * than host memory holds.
 *
 * Environment (tests, bench): ORAKUL_TEXT_LAYER_MAJOR=1 forces layer-major;
 * ORAKUL_TEXT_CHUNK=N caps the captions per chunk (64); ORAKUL_TEXT_CARRY=
 * host|device places layer-major's carries; ORAKUL_TEXT_HOST_GIB (8) bounds
 * host carries per weight pass; ORAKUL_TEXT_GROUP_GIB (4) encode_each's
 * groups; ORAKUL_TEXT_ACT_SCALE scales the activation estimate;
 * ORAKUL_TEXT_CHUNK_TOKENS (16384) caps a chunk's tokens (T5 at 512: 32
 * captions) where a larger one would only cost memory;
 * ORAKUL_TEXT_ATTN_UNFUSED=1 runs attention_bias's biases, softmax and cast as
 * separate passes on CUDA (the A/B of cuda_text.cu's kernel);
 * ORAKUL_TEXT_PREFETCH_THREADS (cores / 4, at most 4; 0 none) the t5clip
 * plugin's threads mapping the weights' pages ahead of the load.
 * [control-thread] */
#ifndef ORK_TEXT_CONDITIONER_H
#define ORK_TEXT_CONDITIONER_H

#include "plugin/registry.h"
#include "tensor/backend.h"

#include <orakul/model.h>

#include <stdio.h>

typedef struct ork_textcond ork_textcond; /* opaque */

/* The embeddings of n captions (ownership: the caller's; free with
 * ork_text_embed_free). Caption i's txt is txt + i·T·ctx_dim, its vec
 * vec + i·vec_dim. Rows are F32 whatever the activation dtype was.
 * A txt slot with ORK_TEXT_SLOT_UNMASKED (Z-Image: prompt_embeds[i][mask[i]])
 * keeps only the rows its padding mask marks: caption i's first len[i] rows
 * are those, in order (moved to the front when the padding is on the left),
 * the rest are zero; len is NULL for any other slot (every row counts). */
typedef struct ork_text_embed {
    int n;          /* captions */
    int T, ctx_dim; /* txt (n, T, ctx_dim): the hidden states of the txt slot's encoder */
    float *txt;
    int vec_dim;    /* vec (n, vec_dim): the pooled output of the vec slot, or 0 and NULL */
    float *vec;
    int *len;       /* (n): each caption's unmasked rows (UNMASKED), or NULL */
} ork_text_embed;

/* What open needs besides the model (from the config; all may be 0/NULL). */
typedef struct ork_textcond_opts {
    int quantize;          /* model.quantize_te: 1 quantizes the encoders' linear weights */
    const char *qtype;     /* model.qtype_te (a quant component name); NULL or "" with quantize: "qfloat8" */
    int attn_mask;         /* model.attn_masking: pass the padding mask to the txt encoder
                            * (0, as diffusers' FluxPipeline and ai-toolkit by default: no mask) */
    const char *what;      /* names the model source in lines ("model.name_or_path 'x'"), or NULL */
    int device_index;      /* CUDA device of the encode */
} ork_textcond_opts;

struct ork_model_config;
/* The options from the job's model section, with ai-toolkit's semantics:
 * quantize = model.quantize_te (not given: model.quantize); qtype =
 * model.qtype_te, except for a model whose slot has ORK_TEXT_SLOT_MODEL_QTYPE
 * (FLUX.1's T5, which ai-toolkit quantizes with model.qtype when
 * model.quantize is on; FORMATS.md); attn_mask = model.attn_masking. what =
 * model.name_or_path. */
void ork_textcond_opts_from_config(const struct ork_model_config *mc, const ork_model_info *mi,
                                   ork_textcond_opts *o);

/* Resolve and check the model's text slots; no weight is read.
 *  - ORK_OK, *out set: every slot's encoder, weights and tokenizer were found.
 *  - ORK_OK, *out NULL: the model has no text slots (an older plugin, FLUX.2
 *    today, a custom size) or none of its pieces was found and no path was
 *    given: one warning line is logged, and the caller keeps the previous
 *    behaviour (zero embeddings, or <image>.te.safetensors files).
 *  - ORK_E_CONFIG: some pieces were found or given and others not (or a width
 *    does not match the model's): one error line naming what is missing and
 *    where it looked (`plan` and `run` exit 2).
 * reg and mi are borrowed for the conditioner's life. */
ork_status ork_textcond_open(const ork_registry *reg, const ork_model_info *mi, const ork_textcond_opts *opts,
                             ork_textcond **out);
void ork_textcond_close(ork_textcond *tc); /* NULL: no-op */

/* A stable string for cache keys: each slot's encoder id, its weight files'
 * identities (size and mtime of each file read), its tokenizer file's, the
 * max length, what feeds the model, and the quantization. Owned by tc. */
const char *ork_textcond_identity(const ork_textcond *tc);

/* The shape of what encode gives: T, ctx_dim, vec_dim of one caption. */
void ork_textcond_shape(const ork_textcond *tc, int *T, int *ctx_dim, int *vec_dim);

/* What `orakul plan` prints for n_captions captions within budget_bytes on
 * be: per encoder its source, weight bytes (stored, after quantization),
 * resident or layer-major with the chunk size, peak bytes, and the predicted
 * time. budget_bytes 0 (as in encode): on CUDA the device's free memory less
 * 1.5 GiB (without a device: the card ORAKUL_PLAN_DEVICE names, else an
 * H200, less 2 GiB); on the CPU half the free host memory. */
ork_status ork_textcond_describe(const ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n_captions,
                                 FILE *out);

/* Encode n captions (UTF-8, NUL-terminated) on be within budget_bytes (0:
 * as describe says). Fills *out (its arrays malloc'd, the caller frees them with
 * ork_text_embed_free); on failure *out is empty and one line was logged
 * (ORK_E_BUDGET: not even one caption's activations plus the largest block fit). Every
 * device byte it took is given back before it returns. */
ork_status ork_textcond_encode(ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                               const char *const *captions, ork_text_embed *out);
void ork_text_embed_free(ork_text_embed *e); /* frees the arrays, zeroes *e; NULL: no-op */

/* encode's result holds n·T·ctx_dim floats (T5-XXL: 8 MiB a caption, 80 GiB
 * for 10,000 captions). encode_each hands each caption's embeddings to fn
 * instead (txt (T, ctx_dim), vec (vec_dim) or NULL; valid during the call;
 * i indexes captions) and keeps at most one group of captions in host memory:
 * ORAKUL_TEXT_GROUP_GIB (4 by default) of embeddings. When every encoder is
 * resident and all of them fit the budget together, their weights are loaded
 * once for all groups (each gets its weights plus a share of the activation
 * room); otherwise each group is one pass of the weights. Every device byte is
 * given back before it returns. fn returning non-OK stops the encode with
 * that status. */
typedef ork_status (*ork_text_embed_fn)(void *user, int i, const float *txt, const float *vec);
ork_status ork_textcond_encode_each(ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                                    const char *const *captions, ork_text_embed_fn fn, void *user);

/* Whether the txt slot keeps each caption's unmasked rows only
 * (ORK_TEXT_SLOT_UNMASKED); 0 for NULL. */
int ork_textcond_unmasked(const ork_textcond *tc);

/* Each caption's valid txt rows in len[n]: the count of its padding mask's
 * ones after the prompt template (what encode's len gives, without running
 * the encoder: tokenizing only); T for every caption when the txt slot is not
 * UNMASKED. encode_each's callback gets the compacted rows without it. */
ork_status ork_textcond_lengths(const ork_textcond *tc, int n, const char *const *captions, int *len);

/* What the last encode did (zeros before the first): for benches and logs. */
typedef struct ork_textcond_stats {
    int captions;
    double seconds;       /* wall time of the whole call (tokenize, load, quantize, run, copy back) */
    size_t peak_bytes;    /* the highest device bytes in use (weights + activations) of any encoder */
    int layer_major;      /* 1 when some encoder ran layer-major */
    int chunk;            /* captions per chunk of the txt encoder */
    size_t weight_bytes;  /* stored weight bytes of all encoders (after quantization) */
    double load_seconds;  /* of seconds: putting the weights on the device (file -> host -> device,
                           * quantize), every encoder, every layer-major block */
    double encode_seconds;/* of seconds: the forward passes and the copies of the outputs back */
    double tokenize_seconds;
    int retries;          /* chunks the budget refused after all, retried at half the size (the plan's
                           * activation figure was too low): 0 when the plan is right */
    size_t act_peak_bytes;   /* the highest activation bytes live at once in any encoder's arena */
    size_t act_planned_bytes;/* what the plan sized that arena to (the chunk's activations and scratch) */
    size_t act_arena_bytes;  /* that arena's size at the end: more than planned when it had to grow */
} ork_textcond_stats;
void ork_textcond_last_stats(const ork_textcond *tc, ork_textcond_stats *out);

#endif
