/* tensor/graph.h — ork_graph: one execution context. It holds the backend and
 * its per-graph state, the stream, the device allocator, the activation arena,
 * the host pool for per-step structs, the autograd tape, the grad mode, the
 * activation dtype, and the weight-lookup hook the weight store installs.
 *
 * Lifetime of what a graph makes: every tensor from an op, empty or from_host
 * lives in the arena until ork_graph_reset (or until the region it was made
 * in is released, see ork_graph_region_*). A step is:
 *   ork_graph_reset(g); forward...; backward...; (optimizer); repeat.
 * Owns: the arena, the host pool, the tape and the backend context. */
#ifndef ORK_TENSOR_GRAPH_H
#define ORK_TENSOR_GRAPH_H

#include "tensor/alloc.h"
#include "tensor/backend.h"
#include "tensor/tensor.h"

struct ork_tape;

/* Looks up a weight by canonical name and returns a tensor on g's device
 * (valid for the current block). Installed by the weight store. */
typedef ork_status (*ork_weight_fn)(void *ctx, ork_graph *g, const char *name, ork_tensor **out);

typedef struct ork_graph_opts {
    int device_index;     /* CUDA device ordinal; ignored on CPU */
    void *stream;         /* cudaStream_t to use, or NULL: the backend's default for the graph */
    ork_dtype act_dtype;  /* activation dtype (used as given); opts == NULL: F32 on CPU, BF16 on CUDA */
    size_t arena_initial; /* first arena chunk in bytes (0: grow on demand) */
    int nthreads;         /* CPU kernel threads (0: all online cores) */
    const char *arena_tag; /* the allocator's tag for the arena's memory (NULL: "activations") */
} ork_graph_opts;

struct ork_graph {
    const ork_backend *be;
    ork_kctx k;
    ork_alloc *alloc;
    ork_arena *arena;
    ork_hpool *pool;
    struct ork_tape *tape;
    int grad_enabled;
    ork_dtype act_dt;
    ork_weight_fn weight_fn;
    void *weight_ctx;
    uint64_t dropout_seed; /* LoRA dropout of this micro-step; 0: none (inference) */
    int fp8_gemm;          /* ORK_FP8_GEMM_*: the forward GEMM of fp8-quantized linear weights */
    int fp8_warned;        /* the one line saying the native path fell back was logged */
    uint8_t *grad_pool;    /* ork_graph_set_grad_pool: parameter gradients are made here first */
    size_t grad_pool_bytes, grad_pool_used;
};

/* The GEMMs of an fp8-quantized linear weight (ops->linear, forward and the
 * input gradient dx = dy·w): DEQUANT = path (a), the weight dequantized into a
 * bf16 scratch and bf16 GEMMs, any device; NATIVE = path (b), the FP8 GEMMs of
 * sm_89+ (cuda_gemm_fp8.h: the weight's per-row scales, per-token E4M3
 * activations; for dx the weight's bytes transposed per call and its scales
 * folded into dy) — the default for an fp8 base where the device has them
 * (quant plugin's fp8_gemm: auto). A layer it cannot take (shape, block scales,
 * f32 activations) falls back to (a) with one WARN line per graph. */
enum { ORK_FP8_GEMM_DEQUANT = 0, ORK_FP8_GEMM_NATIVE = 1 };

/* Set g's fp8 GEMM mode. The environment variable ORK_FP8_GEMM=native|dequant
 * overrides `mode` (benches). NATIVE on a backend or device without it (CPU,
 * below sm_90): ORK_E_CONFIG and one line naming `what` (the config key). */
ork_status ork_graph_set_fp8_gemm(ork_graph *g, int mode, const char *what);

/* alloc is borrowed (shared with the weight store and the trainer). */
ork_status ork_graph_create(const ork_backend *be, ork_alloc *alloc, const ork_graph_opts *opts,
                            ork_graph **out);
void ork_graph_destroy(ork_graph *g);
/* Drop every tensor, tape node and arena block of the step. */
ork_status ork_graph_reset(ork_graph *g);
/* Returns the previous mode. With grad off nothing is recorded. */
int ork_graph_set_grad(ork_graph *g, int enabled);
void ork_graph_set_weight_fn(ork_graph *g, ork_weight_fn fn, void *ctx);
/* Device memory (the caller's, bytes long) where a parameter's gradient is
 * placed when the backward first makes it (ORK_GRAD_ALIGN-aligned, in the
 * order they come; the rest get their own allocation): one contiguous region
 * the trainer can lend while the gradients are dead (stream/streamer.h). */
void ork_graph_set_grad_pool(ork_graph *g, void *base, size_t bytes);
#define ORK_GRAD_ALIGN 256
/* A parameter's gradient's bytes in the pool (F32, ORK_GRAD_ALIGN-rounded). */
static inline size_t ork_grad_pool_bytes(int64_t numel) {
    return ((size_t)numel * sizeof(float) + ORK_GRAD_ALIGN - 1) / ORK_GRAD_ALIGN * ORK_GRAD_ALIGN;
}
ork_status ork_graph_sync(ork_graph *g);

/* Regions: everything made after begin (tensors, arena blocks, tape nodes) is
 * dropped by end. The trainer's no-grad forward of a block runs inside a
 * region, after copying the carry it must keep out with ork_graph_keep. */
typedef struct ork_region {
    uint64_t arena_mark;
    ork_hpool_mark pool_mark;
    size_t tape_len;
} ork_region;
ork_region ork_graph_region_begin(ork_graph *g);
void ork_graph_region_end(ork_graph *g, ork_region r);

/* An arena tensor of dt/shape made by the graph (no tape). */
ork_status ork_graph_new_tensor(ork_graph *g, ork_dtype dt, int ndim, const int64_t *shape,
                                ork_tensor **out);
/* dst (any shape of the same numel, any float dtype) = src, stream-ordered,
 * never recorded. The trainer keeps block-boundary carries this way in
 * tensors it allocated once (ork_tensor_new under "checkpoints"). */
ork_status ork_graph_copy_to(ork_graph *g, const ork_tensor *src, ork_tensor *dst);
/* A graph header over t's memory (no copy), a leaf: requires_grad as given,
 * so a backward leaves its gradient in (*out)->grad (an arena tensor of t's
 * dtype). Used to re-enter a block from its saved carry. */
ork_status ork_graph_leaf(ork_graph *g, ork_tensor *t, int requires_grad, ork_tensor **out);

#endif
