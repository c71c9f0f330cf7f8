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
    char *identity;
    ork_textcond_stats last;
};

/* Of a plan's scratch: the margin for what the estimate misses (the arena
 * grows into it; cuBLAS's workspace). */
#define TC_MARGIN ((size_t)64 << 20)

/* The encode's plan for one slot on a backend within budget (0: none). */
typedef struct tc_plan {
    size_t w_total;        /* stored bytes of every weight */
    size_t w_block_max;    /* of the largest block */
    size_t act_per_caption;/* activations of one caption through the largest block (estimate), of which */
    size_t attn_seq;       /* its attention scores + probabilities, held for ... */
    int attn_slice;        /* ... at most this many captions at once (ORK_ATTN_BIAS_SLICE) */
    size_t scratch;        /* dequantize scratch, workspace margin, the position bias being made */
    int layer_major;
    int chunk;             /* captions per chunk */
    size_t peak;           /* predicted device peak */
    double flops_per_caption;
    size_t carry_per_caption; /* layer-major: one caption's carry between blocks (estimate) */
    size_t carry_shared;      /* ... and what every caption shares (T5's position bias) */
} tc_plan;

/* Activation bytes of a chunk of `chunk` captions under plan p (the arena's size). */
size_t ork_tc_chunk_bytes(const tc_plan *p, int chunk);
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
/* The activation/store dtype of a backend: BF16 on CUDA, F32 on the CPU. */
ork_dtype ork_tc_act_dtype(const ork_backend *be);

#endif
