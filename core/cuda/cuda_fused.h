/* cuda/cuda_fused.h — internal to core/cuda: the fused block epilogues' kernel
 * entry points (cuda_fused.cu), one per ork_backend slot gated_add(_bwd) and
 * layernorm_modulate(_bwd); signatures and semantics: tensor/backend.h. */
#ifndef ORK_CUDA_FUSED_H
#define ORK_CUDA_FUSED_H

#ifdef __cplusplus
extern "C" {
#endif
#include "tensor/backend.h"

ork_status ork_cuda_gated_add(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *x,
                              const void *gate, const void *h, void *y, ork_dtype dt);
ork_status ork_cuda_gated_add_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *gate,
                                  const void *h, const void *dy, void *dh, void *dgate, ork_dtype gdt, ork_dtype dt);
ork_status ork_cuda_layernorm_modulate(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc,
                                       float eps, const void *x, const void *shift, const void *scale, void *y,
                                       float *mean, float *rstd, ork_dtype dt);
ork_status ork_cuda_layernorm_modulate_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh,
                                           int64_t Bsc, const void *x, const void *scale, const float *mean,
                                           const float *rstd, const void *dy, void *dx, void *dshift, ork_dtype shdt,
                                           void *dscale, ork_dtype scdt, ork_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
