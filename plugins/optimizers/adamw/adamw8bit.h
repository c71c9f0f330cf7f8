/* adamw8bit.h — AdamW with blockwise 8-bit state, bit-compatible in layout and
 * algorithm with bitsandbytes' AdamW8bit (>= 0.44: blocks of 256, dynamic code
 * books, tensors under 4096 elements keep fp32 state). NUMERICS.md §5.
 *
 * The math library the adamw8bit plugin wraps: no plugin entry, no logging (the
 * wrapper names the tensor in its error line), no allocation. One call steps ONE
 * tensor; the caller steps any subset of tensors (e.g. one transformer block's
 * LoRA tensors) in any order, because each tensor's state is its own plain byte
 * region, all zeros at step 0, position-independent, so it can be saved,
 * restored and copied host <-> device as raw bytes.
 *
 * State region of a tensor with n elements (ork_adamw8bit_state_size(n) bytes):
 *   n <  4096: float m[n], float v[n]
 *   n >= 4096: float absmax_m[nb], float absmax_v[nb], uint8 code_m[n], uint8 code_v[n]
 *              (nb = ceil(n / 256); m = map_signed[code_m] * absmax_m[i / 256],
 *               v = map_unsigned[code_v] * absmax_v[i / 256])
 *
 * Floating-point contract: adamw8bit_cpu.c must be compiled with -ffp-contract=off;
 * the CUDA kernel uses explicit _rn intrinsics. Then the CPU and CUDA steps give
 * bit-identical state and f32 parameters (tests/optimizers/test_adamw8bit_cuda).
 *
 * Deviations from bitsandbytes' kernels (documented, deliberate):
 *  - IEEE division and bias corrections computed once in double on the host
 *    (bnb: __fdividef, __powf; differences are ~1 ulp).
 *  - the small-tensor (fp32 state) path has the same NaN/Inf guard as the 8-bit
 *    path (bnb's 32-bit kernel lets NaN flow into m, v and p).
 *  - gradients may be f32 or bf16 independently of the parameter dtype. */
#ifndef ORK_ADAMW8BIT_H
#define ORK_ADAMW8BIT_H

#include "optim_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ORK_ADAMW8BIT_BLOCK 256    /* elements per absmax block */
#define ORK_ADAMW8BIT_MIN_8BIT 4096 /* bnb min_8bit_size: smaller tensors keep fp32 state */

/* The two dynamic code books, ascending. signed_map (m): index 0 = -0.99297,
 * 127 = 0, 255 = 1.0; unsigned_map (v): index 0 = 0, 255 = 1.0. */
typedef struct ork_adamw8bit_maps {
    float signed_map[256];
    float unsigned_map[256];
} ork_adamw8bit_maps;

/* Build the code books as bnb's create_dynamic_map does, in float32.
 * fused = 0: linspace as start + step*k (IEEE, no FMA; NUMERICS.md §5);
 * fused = 1: the same with a fused multiply-add, which is what a torch CPU build
 * compiled with -mfma and FP contraction produces (42 signed / 31 unsigned
 * entries differ by 1 ulp). Which one a given bnb install has: see
 * tests/reference/adamw8bit_vs_bnb.py. */
void ork_adamw8bit_maps_init(ork_adamw8bit_maps *maps, int fused);

/* Bytes of state for a tensor of numel elements (0 for numel <= 0). */
size_t ork_adamw8bit_state_size(int64_t numel);

/* Pointers into a state region (any of the out-pointers may be NULL). Small
 * tensors: m32/v32 set, the rest NULL; 8-bit: absmax/codes set, m32/v32 NULL. */
typedef struct ork_adamw8bit_view {
    float *m32, *v32;
    float *absmax_m, *absmax_v;
    uint8_t *code_m, *code_v;
    int64_t nblocks;
} ork_adamw8bit_view;
void ork_adamw8bit_view_of(void *state, int64_t numel, ork_adamw8bit_view *out);

/* Dequantize the state of a tensor into float m[numel], v[numel] (tests, exports). */
void ork_adamw8bit_dequant(const ork_adamw8bit_maps *maps, const void *state, int64_t numel,
                           float *m, float *v);

/* Write fp32 m[numel], v[numel] into the state region (quantizing, absmax = max|x|
 * per block; small tensors copy). For loading states from other formats. */
void ork_adamw8bit_quant(const ork_adamw8bit_maps *maps, const float *m, const float *v,
                         int64_t numel, void *state);

/* One optimizer step (t = step >= 1) of one tensor on the CPU.
 * param: [numel] f32 or bf16, updated in place; grad: [numel] f32 or bf16;
 * state: ork_adamw8bit_state_size(numel) bytes, updated in place.
 * ORK_E_INVALID for a bad dtype, step < 1, numel < 1 or NULL pointers. */
ork_status ork_adamw8bit_step_cpu(const ork_adamw8bit_maps *maps, const ork_adamw_hparams *hp,
                                  int64_t step, void *param, ork_dtype param_dtype,
                                  const void *grad, ork_dtype grad_dtype, void *state,
                                  int64_t numel);

/* The same step on the device: every pointer is device memory; d_maps is an
 * ork_adamw8bit_maps copied to the device once. Enqueued on stream; no sync.
 * ORK_E_INVALID as above, ORK_E_CUDA when the launch fails. */
ork_status ork_adamw8bit_step_cuda(const ork_adamw8bit_maps *d_maps, const ork_adamw_hparams *hp,
                                   int64_t step, void *param, ork_dtype param_dtype,
                                   const void *grad, ork_dtype grad_dtype, void *state,
                                   int64_t numel, ork_cuda_stream stream);

#ifdef __cplusplus
}
#endif
#endif
