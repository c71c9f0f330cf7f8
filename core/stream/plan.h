/* stream/plan.h — the residency planner: from a VRAM budget and the sizes of
 * everything a LoRA step keeps on the device, decide which transformer
 * blocks stream (and, when even that is not enough, whether the trainable
 * state streams too), and predict the step time split into compute and PCIe.
 *
 * The model of memory (bytes on the device):
 *   frozen weights of resident blocks + codec weights
 *   + n_slots x the largest streamed block            (the ring)
 *   + ORK_STREAM_CODEC_RATIO x the largest streamed block   (staging, when blocks travel coded)
 *   + LoRA params + F32 grads + optimizer state       (all, or 2 blocks' worth when streamed)
 *   + saved block inputs: (n_blocks + 1) x B x L x hidden x act_bytes   (L = image + text tokens)
 *   + carry gradients: 2 x B x L x hidden x act_bytes
 *   + one block's working set: B x L x hidden x act_bytes x factor (80 for transformer blocks, measured;
 *     4 for embedders / final layer; docs/streaming.md derives the 24 for FLUX blocks)
 *   + workspace (cuBLASLt, attention; 512 MiB default)
 *   + with train.ema_config.use_ema, the EMA's F32 shadows (4 bytes a trainable
 *     parameter: all of them resident, or in the streamed state records and the two
 *     stepping blocks' device slots) and its scratch of the largest trainable tensor
 *     (train/ema.c)
 *   + an adapter's transient per linear (LoKr: W + kron(w1, w2) built as the GEMM
 *     operand and its chunked F32 products, tensor/ops_linear.c), the largest layer's
 *   + with train.diff_output_preservation, what its prior pass (train/dop.c) holds
 *     beside a step: 6 carries (the prior's and the main step's begin outputs,
 *     kept to the graph's reset, and ork_runner_forward's two carry buffers), the prior
 *     prediction (its arena copy, then uploaded again for the preservation step)
 *     and the class prompts' uploads (text, vec), each upload F32 plus its cast
 * The budget is model.vram_budget_gb, or the device's free memory minus a
 * margin (1 GiB) when that is 0.
 *
 * Choice. Only transformer blocks (the model's ORK_BLOCK_KIND_TRANSFORMER,
 * plugin/model_decl.h) stream; the
 * streamed set is spread evenly: block k of m sits at index
 * floor((2k + 1) n / 2m) among the n transformer blocks. NONE streams
 * nothing; PERCENT streams round(percent x n) (ai-toolkit's
 * layer_offloading_transformer_percent); AUTO the fewest that fit. Where
 * blocks differ in frozen bytes per FLOP (FLUX's double blocks: twice a single
 * block's), AUTO also plans the densest class first (spread evenly within
 * each class) and keeps it when it predicts a step shorter by more than
 * ORK_SELECT_MARGIN. A plan
 * that does not fit fails with ONE line naming what to change.
 *
 * Time. Per block, forward FLOPs from shapes (2 x tokens x numel per linear,
 * tokens by the weight's stream as the model declares it: img / txt / joint /
 * one per sample; 4 x L^2 x width for a block's attention over its L tokens),
 * a step = no-grad forward + recompute + dX-only
 * backward (linear x3, attention x4.5 for blocks >= first_trainable); the
 * schedule is simulated over the ring (copy lane FIFO, a load waits for its
 * slot, a block waits for its load) with TFLOP/s x efficiency and PCIe GB/s
 * of the device kind. [control-thread] */
#ifndef ORK_STREAM_PLAN_H
#define ORK_STREAM_PLAN_H

#include <orakul/model.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ork_device_kind {
    const char *name;
    double tflops;   /* dense bf16 GEMM, measured peak */
    double mfu;      /* fraction of it a training step achieves (0.5 default) */
    double h2d_gbs;  /* pinned host->device GB/s (1e9) */
    double d2h_gbs;
    double duplex;   /* fraction of each rate left when both directions run at once */
    double mem_gib;  /* device memory */
    double decode_gbs; /* the streamer's transit decode (stream/transit/transit.h), decoded GB/s beside compute */
} ork_device_kind;

/* "h200" (803 TFLOP/s, 55/55 GB/s, duplex 0.915, 141 GiB), "rtx4090" (165, 25/25, 24),
 * "cpu" (0.1, memcpy 10 GB/s); 0 when unknown. */
int ork_device_kind_find(const char *name, ork_device_kind *out);

/* The coded share the planner expects of streamed BF16 blocks under the
 * two-level codec (stream/transit/transit.h): the bench's uniform random weights 0.664,
 * Gaussian 0.680, the trained TAEF1 decoder 0.694; the streamer logs the
 * measured one */
#define ORK_PLAN_BF16_CODEC_RATIO 0.69
/* ... and of FP8 E5M2 blocks, where the weights matter more: uniform random
 * 0.679, Gaussian 0.723, the trained TAEF1 decoder 0.767. E4M3 blocks are
 * planned raw: trained ones code to ~0.98 (uniform random ones to ~0.78, and
 * the streamer codes those when they pay) */
#define ORK_PLAN_E5M2_CODEC_RATIO 0.74
#define ORK_PLAN_CODEC_PREDICT 2 /* ork_plan_inputs.stream_codec */

typedef enum ork_offload_mode {
    ORK_OFFLOAD_NONE = 0,
    ORK_OFFLOAD_PERCENT = 1,
    ORK_OFFLOAD_AUTO = 2,
} ork_offload_mode;

/* AUTO leaves the even spread for densest first only when that predicts a step
 * shorter by more than this fraction */
#define ORK_SELECT_MARGIN 0.02

typedef enum ork_stream_select {
    ORK_SELECT_PREDICT = 0, /* both below: densest first when predicted faster by > ORK_SELECT_MARGIN */
    ORK_SELECT_EVEN = 1,    /* spread evenly over all transformer blocks */
    ORK_SELECT_DENSE = 2,   /* the most FLOPs per frozen byte first, spread evenly within each class */
} ork_stream_select;

typedef struct ork_plan_inputs {
    const ork_model_info *info;
    ork_device_kind dev;
    double budget_gb;            /* model.vram_budget_gb; 0: device_free - margin */
    size_t device_free;          /* bytes free on the device (used when budget_gb == 0) */
    size_t margin;               /* 0: 1 GiB */
    ork_offload_mode mode;
    double percent;              /* PERCENT: fraction of the transformer blocks, 0..1 */
    int n_slots;                 /* 0: 2 */
    int allow_trainable_streaming; /* AUTO may stream LoRA params + optimizer state (ZeRO-Offload per block)
                                    * when nothing else fits: 1; from the start (model.stream_trainable_state:
                                    * always): 2; never: 0 */
    int suggest_trainable_streaming; /* AUTO with 1 above: also predict the plan that streams the trainable
                                      * state from the start and keep its step time (t_step_trainable) */
    ork_stream_select select;      /* AUTO's streamed set: by predicted step (default), even, or densest first */
    int stream_codec;            /* streamed frozen blocks travel coded (stream/transit/transit.h): a staging buffer of
                                  * ORK_STREAM_CODEC_RATIO x a slot, loads of codec_ratio x their bytes + a decode:
                                  * 1; raw: 0; ORK_PLAN_CODEC_PREDICT: coded unless the raw plan is predicted faster */
    double codec_ratio;          /* expected coded / raw bytes (0: 1, nothing saved) */
    int lend_grads;              /* 1: the trainer lends the LoRA gradients to the streamer between backward
                                  * passes (stream/streamer.h ork_streamer_lend) when the trainable state is
                                  * resident: the forward's loads then wait for no slot, only for room in
                                  * the gradients' bytes, and decode on the compute lane */
    int quiet;                   /* 1: a refusal returns ORK_E_BUDGET without its line (a plan tried on the side) */
    /* storage of frozen weights */
    int weight_bytes;            /* linear weights: 4 F32, 2 BF16, 1 FP8 */
    int bias_bytes;              /* 0: max(weight_bytes, 2) */
    int scale_bytes_per_row;     /* FP8 with one F32 scale per output row: 4; else 0 */
    /* trainable state */
    int64_t lora_rank;           /* 0: no LoRA */
    const int64_t *lora_params;  /* [n_blocks] or NULL: rank x (in + out) per default LoRA target */
    int param_bytes;             /* 0: 4 (F32) */
    double opt_bytes_per_param;  /* adamw 8, adamw8bit ~2.03; 0: 8 */
    int ema;                     /* 1: train.ema_config.use_ema (F32 shadows, train/ema.c) */
    int64_t lora_max_tensor;     /* the largest trainable tensor's elements (the EMA's scratch); 0: from the
                                  * shapes (LoRA's down / up), or with lora_params the largest block's */
    size_t adapter_transient;    /* bytes one adapted linear holds beside the block working set while it
                                  * runs (LoKr: ork_plan_lokr_transient), the largest layer's; 0: none */
    int dop;                     /* 1: train.diff_output_preservation (its prior pass, train/dop.c) */
    /* activations */
    int batch;                   /* 0: 1 */
    int64_t img_tokens, txt_tokens;
    int64_t hidden;              /* 0: from the shapes */
    int act_bytes;               /* 0: 2 */
    double factor_transformer;   /* 0: 80 (measured, plan.c) */
    double factor_other;         /* 0: 4 */
    size_t workspace;            /* 0: 512 MiB */
    int first_trainable;         /* -1: the first block with LoRA parameters */
} ork_plan_inputs;

typedef struct ork_stream_plan {
    const ork_model_info *info;
    ork_device_kind dev;
    ork_offload_mode mode;
    double percent;
    int n_blocks, n_transformer, n_streamed, n_slots, first_trainable;
    int trainable_streamed;      /* LoRA params + optimizer state stream per block */
    int dense_first;             /* AUTO: blocks with the most FLOPs per byte stream first (predicted faster) */
    int param_bytes;             /* the inputs' (0: 4), for the step prediction */
    int weight_bytes;            /* the inputs' (0: 2): the host refusal says whether quantizing helps */
    double opt_bytes_per_param;  /* the inputs' (0: 8), for the step prediction */
    int64_t lora_params;         /* all blocks' trainable parameters */
    int lora_shadow;             /* streamed F32 LoRA params keep BF16 shadows for the forward (BF16 activations) */
    size_t lora_shadow_dev;      /* of `lora`: the shadows' bytes in trainable_stream.c's device slots */
    uint8_t *streamed;           /* [n_blocks] */
    uint8_t *transformer;        /* [n_blocks] */
    size_t *block_bytes;         /* [n_blocks] frozen bytes (packed) */
    int64_t *block_lora;         /* [n_blocks] trainable parameters */
    double *block_lin_flops;     /* [n_blocks] forward FLOPs of linears */
    double *block_attn_flops;    /* [n_blocks] forward FLOPs of attention */
    int64_t hidden;
    /* device bytes */
    size_t budget;
    size_t frozen_resident, codec, slot_bytes, slots, staging;
    int stream_codec;            /* the inputs' */
    double codec_ratio;          /* the inputs' (1 when not coded) */
    int lend_grads;              /* the inputs', where it applies: the trainable state resident, its
                                  * gradients' bytes at least the largest streamed block's load */
    int lend_applies;            /* the last prediction lent (set by it) */
    size_t lora, grads, opt, saved, carry_grads, work, workspace, total;
    size_t ema;                  /* the EMA's device bytes (inputs' ema; 0 without) */
    size_t adapter_transient;    /* the inputs' */
    size_t dop;                  /* DOP's prior pass beside a step (inputs' dop; 0 without) */
    int64_t lora_max_tensor;     /* the largest trainable tensor's elements */
    /* host and PCIe */
    size_t host_pinned;
    double h2d_bytes, d2h_bytes; /* per optimizer step (one micro-batch) */
    /* time (s) */
    double t_compute, t_h2d, t_d2h, t_step;
    /* the same per pass ([0] forward, [1] backward; D2H only in the backward) and
     * each pass's simulated wall time: which term bounds the step, where */
    double pass_compute[2], pass_h2d[2], pass_d2h[2], pass_wall[2];
    /* the DEC lane's decodes that ran while the compute lane computed: their
     * kernels take the SMs they run on, so the compute is charged that long
     * (an upper bound: a memory-bound decode beside a GEMM slows it less); in
     * t_step and pass_wall, not in t_compute / pass_compute (the FLOPs' time) */
    double t_decode_sm, pass_decode_sm[2];
    /* suggest_trainable_streaming: the predicted step of the same AUTO plan
     * with the trainable state streamed from the start; 0 when not predicted */
    double t_step_trainable;
    /* ORK_PLAN_CODEC_PREDICT: the predicted step of the plan not chosen (coded or raw); 0 when none */
    double t_step_other_codec;
    double step_flops;
    /* keep instead of recompute (train/runner.h, issue #31): where nothing
     * streams on a GPU, the trailing trainable blocks whose recorded forward the
     * plan expects to fit beside its total (the runner measures and decides
     * after step 1), their bytes, and the step predicted without their recompute
     * (FLOPs and time); 0 when none */
    int keep_blocks;
    size_t keep_bytes;
    double keep_step_flops, t_step_kept;
} ork_stream_plan;

/* The bytes the linear op's LoKr path (tensor/ops_linear.c) holds at once for one
 * layer of weight (N, K) with w1 (a, c), w2 (b, d) (N = a·b, K = c·d) and activations
 * of act_bytes: the operand W + ΔW (N·K·act_bytes) with its F32 chunk of
 * vec(w1)·vec(w2)ᵀ (forward, and again for dx), or the gradient's two F32 chunks of
 * dyᵀ·x and its permutation; chunks of whole rows of w1 within 64 MiB (at least one
 * row). Largest of the phases. */
size_t ork_plan_lokr_transient(int64_t N, int64_t K, int64_t a, int64_t c, int act_bytes);

/* *out on success; on failure ONE error line (what to change) is logged and
 * ORK_E_BUDGET returned. */
ork_status ork_stream_plan_make(const ork_plan_inputs *in, ork_stream_plan **out);
void ork_stream_plan_free(ork_stream_plan *p);

/* Host memory: the plan's pinned bytes plus a 2 GiB reserve (the process, the
 * loader's buffers) against `available` bytes (MemAvailable). ORK_OK when they
 * fit; otherwise ONE error line saying what to change and ORK_E_BUDGET. `what`
 * names the config file for the line (may be NULL). A plan whose streamed
 * trainable state keeps BF16 shadows (lora_shadow) that would not fit drops
 * them first (one warning line; host_pinned and the prediction updated). */
ork_status ork_stream_plan_check_host(ork_stream_plan *p, size_t available, const char *what);
/* Only the first part of check_host: drop the shadows when that makes the plan
 * fit (a warning line), never refuse — for printing the plan before the refusal. */
void ork_stream_plan_fit_host(ork_stream_plan *p, size_t available, const char *what);
/* This machine's available memory in bytes (ork_mem_available: MemAvailable
 * of /proc/meminfo, or GlobalMemoryStatusEx; 0: unknown). */
size_t ork_host_mem_available(void);

/* The printable plan: summary, VRAM split, host memory, PCIe bytes per step
 * each way, predicted step time, then one line per block. */
void ork_stream_plan_print(const ork_stream_plan *p, FILE *f);

/* The hint asks for more: the plan's streamed-trainable-state predictions run
 * ~10% more optimistic than its resident-trainable ones on the H200 (FLUX.1-dev
 * r128 at 16 GiB: 0.699 s predicted against 0.832-0.862 measured, the lent plan
 * 0.769 against 0.825), and it changes the clipping rule: a hint must beat that. */
#define ORK_TRAINABLE_HINT_MARGIN 0.10
/* When t_step_trainable beats the plan's step by more than ORK_TRAINABLE_HINT_MARGIN:
 * 1, and buf holds one sentence saying so and what to set; else 0. */
int ork_stream_plan_trainable_hint(const ork_stream_plan *p, char *buf, size_t n);

/* Block indices streamed for m of the n transformer blocks, evenly spread
 * (exposed for tests): idx[k] = floor((2k + 1) n / 2m), k < m. */
void ork_stream_spread(int n, int m, int *idx);

#endif
