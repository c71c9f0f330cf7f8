/* quant_cuda.h — the C interface of quant_cuda.cu: stream-ordered dequantize
 * kernels of the "quant" plugin (fp8 + fp32 scales -> bf16/f32, bf16 <-> f32,
 * same-dtype copies). Compiled into the plugin only when ORAKUL_CUDA is on
 * (ORK_QUANT_HAVE_CUDA); without it the plugin's CUDA path answers
 * ORK_E_UNSUPPORTED. Owns nothing. [stream-ordered] */
#ifndef ORK_QUANT_CUDA_H
#define ORK_QUANT_CUDA_H

#include <orakul/abi.h>
#include <orakul/dtype.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One dequantize on the GPU. Every pointer is device memory.
 *   q:      [rows, cols] of q_dt (F8_E4M3, F8_E5M2, BF16 or F32)
 *   scales: [rows, nblk] F32, nblk = block ? ceil(cols / block) : 1; fp8 only, else NULL
 *   lut:    the 256 fp8 code values (host memory, copied into the launch), fp8 only
 *   dst:    [rows, cols] of dst_dt (BF16 or F32)
 * dst = RNE(lut[q] * scale) computed in fp32 (fp8), a widen/RNE narrow (bf16 <-> f32)
 * or a copy (same dtype): bit for bit what the plugin's CPU path gives.
 * ORK_E_UNSUPPORTED for another dtype pair; ORK_E_CUDA when the launch fails
 * (*err: CUDA's error string). */
typedef struct ork_quant_cuda_args {
    ork_dtype q_dt, dst_dt;
    const void *q;
    const float *scales;
    const float *lut;
    int64_t rows, cols, block;
    void *dst;
} ork_quant_cuda_args;

ork_status ork_quant_cuda_dequantize(const ork_quant_cuda_args *a, void *stream, const char **err);

#ifdef __cplusplus
}
#endif
#endif
