/* text/cond_plan.h — the text encode's plan as `orakul plan` prints it and
 * `orakul run` checks it before it encodes (issue #29 point 3): per encoder
 * resident or streamed (layer-major: each block's weights over the link
 * once per weight pass, every caption through it), the captions per chunk
 * chosen within the budget, the weight passes, the bytes over the link, the
 * host memory the encode takes, the device peak and the predicted time
 * (link bytes at the card's pinned host->device rate + FLOPs at the GEMM rate
 * the residency planner uses: core/stream/plan.h's device kinds). One
 * encoder runs at a time and all of it is given back before the denoiser's
 * plan is made, so the encode's host memory is checked on its own against
 * MemAvailable (the denoiser's pinned bytes are checked after it, by the
 * streaming plan: the larger of the two is what the machine needs).
 * Owns nothing beyond the plan it fills. [control-thread] */
#ifndef ORK_TEXT_COND_PLAN_H
#define ORK_TEXT_COND_PLAN_H

#include "text/conditioner.h"

#include <stddef.h>
#include <stdio.h>

#define ORK_TC_PLAN_SLOTS 4

typedef struct ork_tc_slot_plan {
    const char *encoder;   /* the slot's encoder name (borrowed from the conditioner) */
    int layer_major;       /* 1: streamed block by block */
    int streamer;          /* layer-major through the core's block streamer: every weight put once into
                            * pinned host memory, two device slots, block k+1 over the link while k computes */
    int on_device;         /* layer-major: the carries wait on the device between blocks */
    int chunk;             /* captions per chunk (the batch through a block) */
    int group;             /* captions per weight pass */
    int passes;            /* weight passes over the link */
    int blocks;
    size_t w_total;        /* stored weight bytes (after quantize_te) */
    size_t w_block_max;
    size_t device_peak;    /* weights (or the largest block), the chunk's activations and carries, the margin */
    size_t link_bytes;     /* host -> device and back: the weights per pass, host carries at every block */
    size_t host_cache;     /* layer-major: the later blocks' weights kept on the host (one checkpoint read) */
    size_t host_carries;   /* layer-major: carries waiting on the host (pinned) */
    double t_link, t_compute, t_pred;
} ork_tc_slot_plan;

typedef struct ork_tc_encode_plan {
    int captions;
    size_t budget;         /* the device bytes the encode works in */
    const char *budget_why;
    const char *device;    /* the planned card's kind ("h200", "rtx4090", "cpu") */
    ork_dtype act;         /* the weights' and activations' dtype (BF16 on CUDA, F32 on the CPU) */
    double link_gbs, gemm_tflops, mfu;
    int n;
    ork_tc_slot_plan s[ORK_TC_PLAN_SLOTS];
    size_t host_need;      /* what the encode must have on the host: host carries, tokens, chunk rows */
    size_t host_cache;     /* and what it takes when the host has it (the weight cache; shrinks to fit) */
    size_t device_peak;    /* the largest encoder's (one at a time) */
    size_t link_bytes;
    double t_pred;
} ork_tc_encode_plan;

/* The plan of encoding n captions on be within budget_bytes (0: as encode
 * takes it, ork_tc_budget). ORK_E_BUDGET with one line (the largest block and
 * one caption's activations against the budget) when an encoder cannot run. */
ork_status ork_tc_encode_plan_make(const ork_textcond *tc, const ork_backend *be, size_t budget_bytes, int n,
                                   ork_tc_encode_plan *out);
/* The plan's lines (two per encoder, one summary). */
void ork_tc_encode_plan_print(const ork_textcond *tc, const ork_tc_encode_plan *p, FILE *out);
/* The encode's host memory (+2 GiB for the process) against available bytes
 * (MemAvailable; 0: unknown, not refused): ORK_E_BUDGET with one line naming
 * the numbers when it cannot fit. `what` names the config file (may be NULL). */
ork_status ork_tc_encode_plan_check_host(const ork_tc_encode_plan *p, size_t available, const char *what);

/* The budget an encode works in: ork_tc_budget's, except that a
 * model.vram_budget_gb above a CUDA device's free memory less 1.5 GiB (a
 * 24 GB card with vram_budget_gb: 24; ORAKUL_PLAN_DEVICE: that card's
 * memory) is lowered to it, with one warning unless quiet (the denoiser's
 * plan lowers its own alike, train/plan_glue.c). why as ork_tc_budget's. */
size_t ork_tc_budget_fit(const ork_backend *be, size_t budget, int device_index, int quiet, const char **why);

/* The layer-major weight cache's limit in bytes (cond_run.c):
 * ORAKUL_TEXT_WCACHE_GIB, else 3/4 of the available host memory above 8 GiB. */
size_t ork_tc_wcache_limit(void);
/* Whether a layer-major encode of plan p (`struct tc_plan`, text/cond_internal.h)
 * within budget (0: none), its carries on the device or not for groups of
 * `group` captions, runs through the core's block streamer (cond_run.c): its
 * stored weights fit the host allowance (ork_tc_wcache_limit: the same bytes
 * the weight cache would keep, pinned instead) and the budget holds a second
 * block beside the plan's peak and the group's carries. ORAKUL_TEXT_STREAM=0:
 * never (the per-block store, the A/B). */
struct tc_plan;
int ork_tc_lm_streamer(const struct tc_plan *p, size_t budget, int on_device, int group);
/* The device bytes a second streamer slot takes beyond the plan's one block. */
size_t ork_tc_lm_slot_extra(const struct tc_plan *p);

/* An encoder's allocator that still held bytes once its weights, graph and
 * quantizer were freed: ORK_E_INTERNAL and one line; 0 held: ORK_OK. */
ork_status ork_tc_release_check(size_t held, const char *encoder);

#endif
