/* numerics/quantize.h — CPU pre-quantization of frozen weights to FP8 with fp32
 * scales (NUMERICS.md §2), and dequantization for checks.
 *
 * Scheme: symmetric absmax. For each output row r of W[rows = out, cols = in]
 * (or each 1 x block slice of it along the input dimension):
 *   s = max |W| / fmt_max (fp32), q = fp8_satfinite(W / s), W ~= fp8_value(q) * s.
 * An all-zero row/block keeps s = 1 and q = 0. Scales are never below FLT_MIN
 * (a normal float), so a GPU that flushes subnormals reads the same scale.
 * The fp8 rounding is CUDA's (numerics/fp8.h): GPU and CPU quantize identically.
 *
 * Owns: nothing beyond each call. Threads: ork_numerics_set_threads() (default:
 * online CPUs); the result is bit-identical for any thread count. [any-thread] */
#ifndef ORK_NUMERICS_QUANTIZE_H
#define ORK_NUMERICS_QUANTIZE_H

#include <orakul/numerics.h> /* ork_quant_nblocks */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Worker threads for the numerics bulk calls; n <= 0 restores the default
 * (online CPUs). Process-wide. */
void ork_numerics_set_threads(int n);
int ork_numerics_threads(void);

/* Quantize one weight tensor.
 *   name:     tensor name for error lines (may be NULL)
 *   w:        [rows, cols] row-major, in_dtype ORK_F32, ORK_BF16 or ORK_F16
 *   fmt:      ORK_F8_E4M3 or ORK_F8_E5M2
 *   block:    0 = one scale per row; else scales per 1 x block columns (e.g. 128)
 *   q:        out [rows, cols] fp8 codes
 *   scales:   out [rows, ork_quant_nblocks(cols, block)] fp32
 *   rel_rms:  out (may be NULL): ||W - deq(q)|| / ||W|| (Frobenius; 0 for W = 0)
 * ORK_E_NUMERIC (and a line naming the tensor and the first bad element) when W
 * holds NaN or Inf; q and scales are then unspecified. ORK_E_INVALID for bad
 * arguments, ORK_E_NOMEM when scratch cannot be allocated. */
ork_status ork_quantize_fp8(const char *name, const void *w, ork_dtype in_dtype, size_t rows,
                            size_t cols, ork_dtype fmt, size_t block, uint8_t *q,
                            float *scales, double *rel_rms);

/* Inverse, for checks: out[r, c] = fp8_value(q[r, c]) * scales[r, c / block]
 * computed in fp32, stored as out_dtype ORK_F32, ORK_BF16 or ORK_F16 (RNE).
 *   q: [rows, cols]  scales: [rows, nblocks]  out: [rows, cols] */
ork_status ork_dequantize_fp8(const uint8_t *q, const float *scales, size_t rows, size_t cols,
                              ork_dtype fmt, size_t block, ork_dtype out_dtype, void *out);

/* The service "orakul.numerics/1" (<orakul/numerics.h>): the two calls above
 * on the calling thread, failure lines returned instead of logged. The host
 * offers it to every plugin (plugin/host.c). */
const ork_numerics_api *ork_numerics_api_table(void);

#ifdef __cplusplus
}
#endif
#endif
