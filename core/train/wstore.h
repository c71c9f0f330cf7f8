/* train/wstore.h — the weight store: every declared model weight, on the
 * training device, looked up by canonical name.
 *
 * Owns the weights' device memory (tag "weights") and their tensor headers.
 * Storage dtypes: linear weights and biases in the store dtype (BF16 on CUDA,
 * F32 on the CPU unless asked otherwise), norm scales in F32.
 *
 * With a quantizer (model.quantize, ork_wstore_create_quant): every 2-D
 * ORK_WEIGHT_LINEAR weight outside the codec is stored in the quantizer's
 * layout (layout(): qdtype bytes, then its F32 scales), quantized on the host
 * at put time by the plugin's quantize() on all cores; a NaN/Inf is refused
 * with one line naming the tensor (ORK_E_FORMAT: bad input). Weights that
 * arrive already fp8 (put_quantized) in the quantizer's format are stored as
 * they are (bytes untouched; per-row scales widened to 1x128 blocks exactly
 * when the layout has blocks); another fp8 format is re-quantized from its
 * values with one warning. The tensor the graph sees has the stored dtype and
 * t->q (tensor/tensor.h: scales + the plugin's dequantize) unless the layout
 * equals the store dtype with no scales (bf16 on CUDA: a plain tensor).
 * Resident quantized weights: one device allocation (tag "weights") holding
 * the bytes and, 16-byte aligned after them, the scales; streamed ones: the
 * same record in their block's region (stream/streamer.h), so they cross PCIe
 * as their fp8 bytes plus scales. Biases and norms are stored as without one.
 * Without a quantizer, fp8 weights from a checkpoint are dequantized on the
 * host into the store dtype.
 * [control-thread] */
#ifndef ORK_TRAIN_WSTORE_H
#define ORK_TRAIN_WSTORE_H

#include "stream/streamer.h"
#include "tensor/graph.h"
#include "train/runner.h"

#include <orakul/model.h>
#include <orakul/quant.h>

typedef struct ork_wstore ork_wstore;

/* info: the model's declarations (borrowed until destroy). */
ork_status ork_wstore_create(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                             ork_dtype store_dt, ork_wstore **out);
/* Streaming spec: which blocks stream and how (NULL streamed or no block
 * streamed: all resident, as ork_wstore_create). */
typedef struct ork_wstore_stream {
    ork_copy_engine *ce;      /* borrowed; needs 2 * n_slots events */
    const uint8_t *streamed;  /* [n_blocks] 1: the block streams */
    int n_slots;              /* >= 2 */
    size_t arena_bytes;       /* pinned arena chunk, 0: 1 GiB */
    int compress;             /* streamed blocks travel coded (stream/streamer.h, wcodec.h) */
} ork_wstore_stream;

ork_status ork_wstore_create_ex(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                                ork_dtype store_dt, const ork_wstore_stream *stream, ork_wstore **out);
/* The quantizer for the frozen linear weights (borrowed until destroy). */
typedef struct ork_wstore_quant {
    const ork_quant_vtable *vt;
    void *self;
    const char *name; /* for log lines, e.g. the component id */
} ork_wstore_quant;

/* quant NULL: as ork_wstore_create_ex. */
ork_status ork_wstore_create_quant(ork_alloc *a, const ork_backend *be, ork_kctx *k, const ork_model_info *info,
                                   ork_dtype store_dt, const ork_wstore_stream *stream, const ork_wstore_quant *quant,
                                   ork_wstore **out);
void ork_wstore_destroy(ork_wstore *w);

/* The sink to pass to model->load. Every declared weight must be put once;
 * ork_wstore_check_complete names the first one that was not. */
const ork_weight_sink *ork_wstore_sink(ork_wstore *w);
ork_status ork_wstore_check_complete(const ork_wstore *w);

/* Install the lookup hook on a graph (tensor_api->weight). */
void ork_wstore_attach(ork_wstore *w, ork_graph *g);

int ork_wstore_count(const ork_wstore *w);
ork_tensor *ork_wstore_at(ork_wstore *w, int i);        /* in declaration order */
const ork_weight_decl *ork_wstore_decl(const ork_wstore *w, int i);
ork_tensor *ork_wstore_find(ork_wstore *w, const char *name);
size_t ork_wstore_bytes(const ork_wstore *w);          /* all weights, wherever they live */
size_t ork_wstore_resident_bytes(const ork_wstore *w); /* those with their own device memory */
/* Bytes of the quantized weights (data + scales) and how many there are. */
size_t ork_wstore_quant_bytes(const ork_wstore *w, int *count);

/* The hooks to give the runner (ork_runner_set_hooks): they drive the
 * streamer and point streamed weights at their slot. Valid with no streaming
 * too (then they do nothing but are harmless). */
void ork_wstore_hooks(ork_wstore *w, ork_block_hooks *out);
/* NULL when nothing streams. */
ork_streamer *ork_wstore_streamer(ork_wstore *w);

#endif
