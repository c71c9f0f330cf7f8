/* cuda/cuda_text.h — CUDA kernels of the text encoders' attention with
 * additive biases (tensor/ops_text.c), C interface. Owns nothing. */
#ifndef ORK_CUDA_TEXT_H
#define ORK_CUDA_TEXT_H

#include "tensor/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* P (nb, H, Lq, Lk) of pdt = softmax over the last dim of
 *   S + bias + key_bias + causal
 * in F32, where S (nb, H, Lq, Lk) F32 (the scaled scores); bias (may be NULL)
 * of bdt read at b·bs[0] + h·bs[1] + i·bs[2] + j·bs[3] (element strides, 0
 * where broadcast); key_bias (may be NULL) (nb, Lk) of kdt; causal: key j of
 * query i gets −1e30 when j > i + (Lk − Lq). The additions, in that order,
 * then the row softmax of backend.h's softmax (same partition and
 * reductions), then one rounding to pdt: the values of binary add, softmax
 * and axpby done one after the other, in one pass. P may be S (pdt F32).
 * [stream-ordered] */
ork_status ork_cuda_bias_softmax(const ork_kctx *k, int64_t nb, int64_t H, int64_t Lq, int64_t Lk, const float *S,
                                 const void *bias, ork_dtype bdt, const int64_t bs[4], const void *key_bias,
                                 ork_dtype kdt, int causal, void *P, ork_dtype pdt);

#ifdef __cplusplus
}
#endif
#endif
