/* text/cond_internal.h — private to core/text's conditioner (conditioner.c:
 * resolve, check, identity, plan; cond_run.c: the encode). One tc_slot per
 * text slot the model declares. Owns nothing by itself. [control-thread] */
#ifndef ORK_TEXT_COND_INTERNAL_H
#define ORK_TEXT_COND_INTERNAL_H

#include "text/conditioner.h"

#include <orakul/orakul.h>
#include <orakul/tokenizer.h>

#define TC_MAX_SLOTS 4
#define TC_PATH 1100

typedef struct tc_slot {
    ork_text_slot s;                      /* the model's slot (strings borrowed from the model) */
    const ork_plugin_component *pc;       /* the text_encoder component */
    const ork_text_encoder_vtable *vt;
    void *self;                           /* the opened encoder instance */
    ork_text_encoder_info info;
    ork_tokenizer *tok;
    char weights[TC_PATH];                /* what the encoder opened */
    char tokenizer[TC_PATH];              /* what the tokenizer loaded */
    int L;                                /* tokens per caption (truncate + pad) */
    int feeds;                            /* ORK_TEXT_FEEDS_* */
    const ork_plugin_component *qpc;      /* quantizer (quantize_te and the slot allows it), or NULL */
    ork_dtype qdt;                        /* the quantizer's storage dtype for a (D, D) weight, for the plan */
    int qblock;
    int use_mask;                         /* pass the padding mask */
} tc_slot;

struct ork_textcond {
    const ork_registry *reg;
    const ork_model_info *mi;
    ork_textcond_opts o;
    char qtype[64];
    int n;
    tc_slot sl[TC_MAX_SLOTS];
    int T, ctx_dim, vec_dim;
    int unmasked;                         /* the txt slot is ORK_TEXT_SLOT_UNMASKED */
    char *identity;
    ork_textcond_stats last;
};

/* Of a plan's scratch: the margin for what the estimate misses (the arena
 * grows into it; cuBLAS's workspace). */
#define TC_MARGIN ((size_t)64 << 20)

/* The encode's plan for one slot on a backend within budget (0: none).
 *
 * The activations of a chunk of c captions (ork_tc_chunk_bytes: what the
 * graph's arena holds at its peak, counted from what the t5clip blocks
 * allocate; the arena is reset at every block, so one block's). Per caption,
 * with e = L·D·s and f = L·F·s (s the activation dtype's size, F the widest
 * linear output, the feed-forward's):
 *   feed-forward: 5e + 3f (the block's input, q, k, v — pinned by the heads'
 *                 views until the block ends —, x1, gelu(wi_0·h), wi_1·h and
 *                 their product), plus one dequantized weight (N·K·s) per
 *                 chunk when the weights are quantized;
 *   attention:    8e (input, q, k, v, the three head copies, the output)
 *                 plus the scores (F32) and probabilities (s, when s < 4) of
 *                 H·L² each, for at most attn_slice captions at once;
 *   embeddings:   e, plus the position bias being made once per chunk
 *                 (bucket ids L²·4, the gathered table and its permuted copy
 *                 2·H·L²·s);
 * the largest of the three, plus the allocator's rounding and first-fit's
 * holes (1/16). That is T5's (its blocks drop each tensor once used); for
 * any other family (CLIP's blocks drop none) both phases count every tensor
 * the block makes: L·s·(Σ linear outputs + 12 D + F) per caption. Measured
 * on the CPU (F32) at T5 d_model 32 and 256, CLIP width 16 and 256, chunks
 * of 1-16, resident and layer-major: 1-15 % above the arena's peak. What
 * lives outside the arena: the weights, the carries between blocks
 * (carry_per_caption each, twice while a block's output is saved) and what
 * every caption of a chunk shares (T5's position bias). */
typedef struct tc_plan {
    size_t w_total;        /* stored bytes of every weight */
    size_t w_block_max;    /* of the largest block */
    size_t act_per_caption;/* ork_tc_chunk_bytes(p, 1): one caption's activations (describe, shares) */
    size_t act_ff;         /* per caption: the feed-forward phase */
    size_t act_attn;       /* per caption: the attention phase without its scores */
    size_t attn_seq;       /* per caption: its attention scores + probabilities, held for ... */
    int attn_slice;        /* ... at most this many captions at once (ORK_ATTN_BIAS_SLICE) */
    size_t act_deq;        /* per chunk: the largest dequantized weight (quantized weights), else 0 */
    size_t act_embed;      /* per chunk: the position bias being made (block 0) */
    double act_scale;      /* ORAKUL_TEXT_ACT_SCALE (tests: a wrong estimate), else 1 */
    int heads;             /* H of the scores: T5's position-bias table, else D/64 */
    size_t scratch;        /* outside the arena: the margin for what the estimate misses (cuBLAS's workspace) */
    int layer_major;
    int chunk;             /* captions per chunk */
    size_t peak;           /* predicted device peak: weights, the chunk's arena, its carries */
    double flops_per_caption;
    size_t carry_per_caption; /* one caption's carry between blocks */
    size_t carry_shared;      /* ... and what every caption shares (T5's position bias) */
} tc_plan;

/* Activation bytes of a chunk of `chunk` captions under plan p (the arena's size). */
size_t ork_tc_chunk_bytes(const tc_plan *p, int chunk);
/* What such a chunk needs beside the weights and the margin: its arena, its
 * carries and the shared ones. The plan's chunk is the largest whose need
 * fits what the budget leaves. */
size_t ork_tc_chunk_need(const tc_plan *p, int chunk);
/* Stored bytes of weight d under slot t's storage (act dtype of be, quantizer). */
size_t ork_tc_weight_bytes(const tc_slot *t, const ork_weight_decl *d, ork_dtype store_dt);
/* The plan (tc_plan) for n captions; ORK_E_BUDGET with one line when nothing fits. */
ork_status ork_tc_plan(const tc_slot *t, ork_dtype act_dt, size_t budget, int n, int quiet, tc_plan *out);
/* The budget an encode works in: budget when given (model.vram_budget_gb);
 * else on CUDA the device's free memory less 1.5 GiB (the context, cuBLAS's
 * workspace), or without a device (`plan` elsewhere) the planned card's
 * (ORAKUL_PLAN_DEVICE, else h200) less 2 GiB; on the CPU half the free host
 * memory. why (may be NULL) says which. */
size_t ork_tc_budget(const ork_backend *be, size_t budget, int device_index, const char **why);
/* Layer-major: whether the carries wait on the device between blocks, and
 * how many captions share one pass of the weights (cond_run.c). */
void ork_tc_lm_group(const tc_plan *p, size_t budget, int n, int *on_device, int *group);
/* The prompt template (text/prompt_format.h) the model's slot declares for
 * its captions, padded to the slot's length t->L, in *out; 1 when it is one
 * (a chat template, which always passes its padding mask to the encoder),
 * 0: the tokenizer's own encode (T5 / CLIP). */
int ork_tc_prompt_template(const tc_slot *t, ork_prompt_template *out);
/* The activation/store dtype of a backend: BF16 on CUDA, F32 on the CPU. */
ork_dtype ork_tc_act_dtype(const ork_backend *be);

#endif
