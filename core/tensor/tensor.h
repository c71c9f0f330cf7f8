/* tensor/tensor.h — the core's tensor: what sdk <orakul/tensor.h> keeps opaque.
 *
 * A tensor is always contiguous, row-major: data = (char *)base + offset.
 * Where the bytes come from is in `owner`:
 *   ORK_OWN_GRAPH  the graph's arena (activations; valid until the graph is
 *                  reset or the region it was made in is released),
 *   ORK_OWN_ALLOC  a persistent device allocation of the tensor itself
 *                  (parameters, their gradients; freed by ork_tensor_free),
 *   ORK_OWN_EXTERN someone else's memory (the weight store's slots).
 * Gradients: a parameter (ORK_TF_PARAM, requires_grad) gets an F32 grad of its
 * own shape, allocated once under the tag "grads" and ACCUMULATED into by
 * every backward until ork_tensor_zero_grad; a graph tensor's grad has its own
 * dtype and lives in the arena.
 *
 * LoRA: a frozen linear weight W (N, K) may carry `lora` (filled by the
 * trainer); ops->linear then computes y = x·Wᵀ + b + scale·(x·downᵀ)·upᵀ and
 * backward sends gradients to down and up (and to W only if W->requires_grad).
 *
 * Quantized weights (model.quantize): a frozen linear weight W (N, K) stored by
 * the weight store in a quantizer's layout has the STORED dtype (F8_E4M3,
 * F8_E5M2, or BF16/F32 for the bf16/none quantizers), its data is the stored
 * bytes (N x K, row-major) and `q` says how to get values back: F32 scales on
 * the same device and the quant plugin's dequantize. ops->linear never reads
 * the bytes itself: it dequantizes W into an arena scratch of the activation
 * dtype (stream-ordered on the graph's stream), runs its GEMMs on the scratch
 * and releases it right after (forward; backward dequantizes again for dx).
 * With the graph's fp8_gemm native (graph.h) the forward and dx instead hand
 * the fp8 bytes and the per-row scales to the backend's FP8 GEMMs (linear_fp8,
 * linear_fp8_dgrad).
 * Quantized weights are always frozen (requires_grad is refused).
 *
 * Owns: struct ork_tensor, ork_lora and ork_qinfo's definition (the weight
 * store owns the ork_qinfo instances), leaf creation/free. [control-thread] */
#ifndef ORK_TENSOR_TENSOR_H
#define ORK_TENSOR_TENSOR_H

#include <orakul/tensor.h>
#include <stdint.h>

struct ork_alloc;
struct ork_tape_node;

typedef enum ork_tensor_owner {
    ORK_OWN_GRAPH = 0,
    ORK_OWN_ALLOC = 1,
    ORK_OWN_EXTERN = 2,
} ork_tensor_owner;

enum {
    ORK_TF_WEIGHT = 1u << 0, /* a model weight from the store (name set) */
    ORK_TF_PARAM = 1u << 1,  /* a trainable leaf: F32 persistent grad */
    ORK_TF_KEEP = 1u << 2,   /* never freed early by the tape (carry outputs, user-held) */
    ORK_TF_FREED = 1u << 3,  /* data released by the tape after its last backward use */
    ORK_TF_VIEWED = 1u << 4, /* a view (reshape) shares its storage: never freed early */
};

/* The adapter kinds ork_lora carries (train/lora.h). */
enum { ORK_ADAPTER_LORA = 0, ORK_ADAPTER_LOKR = 1, ORK_ADAPTER_LOKR_LR = 2 };

/* An adapter attached to a frozen linear weight W (N, K): trainable parameters
 * (F32 or BF16 storage, F32 grads). kind ORK_ADAPTER_LORA (0, the default):
 * down (r, K), up (N, r), ΔW = scale · up · down. ORK_ADAPTER_LOKR: down = w1
 * (a, c), up = w2 (b, d) with N = a·b, K = c·d, ΔW = scale · kron(w1, w2)
 * (LyCORIS lokr_w1 / lokr_w2). ORK_ADAPTER_LOKR_LR (w2 low-rank): up (b + d, r)
 * packs w2_a (b, r) over w2_bᵀ (d, r), ΔW = kron(w1, scale · w2_a · w2_b)
 * (LyCORIS lokr_w2_a / lokr_w2_b, scale = alpha / r). dropout: LoRA only. */
typedef struct ork_lora {
    ork_tensor *down;
    ork_tensor *up;
    float scale; /* alpha / rank (LoKr with full w1 and w2: 1) */
    float dropout;
    int kind;    /* ORK_ADAPTER_* */
} ork_lora;

/* Same signature as ork_quant_vtable.dequantize (sdk <orakul/quant.h>):
 * src (rows, cols) in the stored dtype + scales -> dst (rows, cols) of dst_dt
 * (BF16 or F32) on dev; stream: the graph's (cudaStream_t on CUDA). */
typedef ork_status (*ork_dequant_fn)(void *ctx, ork_device dev, void *stream, const void *src, const float *scales,
                                     int64_t rows, int64_t cols, ork_dtype dst_dt, void *dst);

/* How a quantized weight's bytes become values (see the top comment). */
typedef struct ork_qinfo {
    const float *scales;       /* F32 [n_scales] next to the data (device), NULL when none */
    int64_t n_scales;          /* rows x ceil(cols / block), rows when block == 0, or 0 */
    int block;                 /* 0: one scale per row; 128: per row and 128 columns */
    ork_dequant_fn dequantize; /* the quant plugin's vtable->dequantize */
    void *ctx;                 /* its instance (self) */
} ork_qinfo;

struct ork_tensor {
    ork_dtype dtype;
    ork_device device;
    int ndim;
    int64_t shape[ORK_MAX_DIMS];
    void *base;      /* storage start (device pointer) */
    size_t offset;   /* bytes from base to element 0 */
    ork_tensor_owner owner;
    struct ork_alloc *alloc; /* ORK_OWN_ALLOC: where base came from */
    const char *name;        /* weight name or "" (not owned) */
    uint32_t flags;          /* ORK_TF_* */
    int requires_grad;
    ork_tensor *grad;        /* NULL until a backward produced one */
    struct ork_tape_node *node; /* producer on the tape, NULL for leaves */
    int saves;               /* tape nodes that still need the data in backward */
    ork_lora *lora;          /* optional, frozen linear weights only */
    ork_qinfo *q;            /* optional: quantized storage (frozen linear weights only) */
};

static inline void *ork_tensor_data(const ork_tensor *t) { return (char *)t->base + t->offset; }
int64_t ork_tensor_numel(const ork_tensor *t);
size_t ork_tensor_nbytes(const ork_tensor *t);
/* "(2, 3, 4) f32" into buf, for error lines. */
const char *ork_tensor_str(const ork_tensor *t, char *buf, size_t n);
const char *ork_dtype_name(ork_dtype dt);
int ork_shape_equal(const ork_tensor *a, const ork_tensor *b);

/* A persistent tensor of its own allocation (tag: "weights", "lora", "grads",
 * ...), uninitialised. param != 0 makes it a trainable leaf (requires_grad,
 * ORK_TF_PARAM). Free with ork_tensor_free. */
ork_status ork_tensor_new(struct ork_alloc *a, const char *tag, ork_dtype dt, int ndim,
                          const int64_t *shape, int param, ork_tensor **out);
/* A tensor header over memory someone else owns (the weight store). Host-side
 * struct from malloc; ork_tensor_free frees only the struct. */
ork_status ork_tensor_wrap(ork_device dev, ork_dtype dt, int ndim, const int64_t *shape,
                           void *data, const char *name, ork_tensor **out);
/* Frees the tensor, its own allocation and its grad (if persistent). */
void ork_tensor_free(ork_tensor *t);
/* Zero a parameter's gradient (no-op when it has none yet). */
ork_status ork_tensor_zero_grad(ork_graph *g, ork_tensor *t);

#endif
