/* orakul/quant.h — the quantizer component (kind ORK_KIND_QUANT), chosen by
 * model.quantize + model.qtype. Frozen linear weights W (rows = out, cols = in)
 * are pre-quantized on the CPU at load time and dequantized on the device,
 * into a bf16 scratch, just before their GEMM. */
#ifndef ORAKUL_QUANT_H
#define ORAKUL_QUANT_H

#include <orakul/abi.h>
#include <orakul/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ork_quant_layout {
    ork_dtype qdtype;   /* storage dtype: F8_E4M3, F8_E5M2, BF16, F32 */
    int block;          /* 0: one scale per row; 128: per row and 128-column block */
    int64_t n_scales;   /* F32 scales for a (rows, cols) weight; 0 when none */
} ork_quant_layout;

typedef struct ork_quant_vtable {
    ork_abi abi;
    ork_status (*create)(const ork_host *host, const void *params, void **self); /* required */
    void (*destroy)(void *self);                                                /* required */
    /* Required: the stored layout of a (rows, cols) weight. */
    ork_status (*layout)(void *self, int64_t rows, int64_t cols, ork_quant_layout *out);
    /* Required: quantize host src (rows, cols) of src_dt into q and scales,
     * on nthreads CPU threads. name is for error lines (NaN/Inf found). */
    ork_status (*quantize)(void *self, const char *name, ork_dtype src_dt, const void *src,
                           int64_t rows, int64_t cols, int nthreads, void *q, float *scales);
    /* Required: dequantize into dst (rows, cols) of dst_dt (BF16 or F32) on
     * device; stream is a cudaStream_t on CUDA. [stream-ordered] */
    ork_status (*dequantize)(void *self, ork_device dev, void *stream, const void *q, const float *scales,
                             int64_t rows, int64_t cols, ork_dtype dst_dt, void *dst);
} ork_quant_vtable;

#ifdef __cplusplus
}
#endif
#endif /* ORAKUL_QUANT_H */
