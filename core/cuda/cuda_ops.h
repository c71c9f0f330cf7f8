/* cuda/cuda_ops.h — internal to core/cuda: the CUDA backend's kernel entry points,
 * one per ork_backend slot (signatures and semantics: tensor/backend.h), defined
 * in cuda_ew.cu (elementwise, norms, reductions, images) and backend_cuda.cu
 * (memory, GEMM, attention, convolution). k->priv is the ork_cuda_ctx; a NULL
 * k->stream means the context's own non-blocking stream. */
#ifndef ORK_CUDA_OPS_H
#define ORK_CUDA_OPS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "tensor/backend.h"
#include "cuda/cuda_ctx.h"

/* The stream and context of a kernel call. */
void *ork_cuda_kstream(const ork_kctx *k);
ork_cuda_ctx *ork_cuda_kctx(const ork_kctx *k);

ork_status ork_cuda_fill(const ork_kctx *k, int64_t n, float value, void *x, ork_dtype dt);
ork_status ork_cuda_fill_scalar(const ork_kctx *k, int64_t n, const float *s, float scale, void *x, ork_dtype dt);
ork_status ork_cuda_axpby(const ork_kctx *k, int64_t n, float alpha, const void *x, ork_dtype xdt, float beta,
                          void *y, ork_dtype ydt);
ork_status ork_cuda_copy(const ork_kctx *k, const ork_copy_desc *d, const void *src, void *dst);
ork_status ork_cuda_binary(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a, const void *b,
                           ork_dtype bdt, void *y, ork_dtype dt);
ork_status ork_cuda_binary_bwd(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a,
                               const void *b, ork_dtype bdt, const void *dy, ork_dtype dt, void *da, void *db,
                               ork_dtype gdt);
ork_status ork_cuda_modulate(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                             const void *x, const void *shift, const void *scale, void *y, ork_dtype dt);
ork_status ork_cuda_modulate_bwd(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                                 const void *x, const void *scale, const void *dy, void *dx, void *dshift,
                                 void *dscale, ork_dtype dt);
ork_status ork_cuda_layernorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, void *y,
                              float *mean, float *rstd, ork_dtype dt);
ork_status ork_cuda_layernorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const float *mean,
                                  const float *rstd, const void *dy, void *dx, ork_dtype dt);
ork_status ork_cuda_rmsnorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, const void *w,
                            ork_dtype wdt, void *y, float *rstd, ork_dtype dt);
ork_status ork_cuda_rmsnorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *w,
                                ork_dtype wdt, const float *rstd, const void *dy, void *dx, float *dw,
                                ork_dtype dt);
ork_status ork_cuda_unary(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x, void *y,
                          ork_dtype dt);
ork_status ork_cuda_unary_bwd(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x,
                              const void *dy, void *dx, ork_dtype dt);
ork_status ork_cuda_swiglu(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt);
ork_status ork_cuda_swiglu_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *dy,
                               void *dx, ork_dtype dt);
ork_status ork_cuda_rope(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split, const void *x,
                         const float *pe, void *y, ork_dtype dt);
ork_status ork_cuda_rope_bwd(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split, const void *dy,
                             const float *pe, void *dx, ork_dtype dt);
ork_status ork_cuda_maxpool2x2(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                               ork_dtype dt);
ork_status ork_cuda_maxpool2x2_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x,
                                   const void *dy, void *dx, ork_dtype dt);
ork_status ork_cuda_upsample2x(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                               ork_dtype dt);
ork_status ork_cuda_upsample2x_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *dy, void *dx,
                                   ork_dtype dt);
ork_status ork_cuda_reduce(const ork_kctx *k, ork_reduce_op op, int64_t n, const void *x, ork_dtype dt,
                           float *out);
ork_status ork_cuda_mse(const ork_kctx *k, int64_t n, const void *a, const void *b, ork_dtype dt, float *out);
ork_status ork_cuda_restore_if_nonfinite(const ork_kctx *k, const float *sums, int64_t n, const void *src, void *dst,
                                         size_t bytes, int32_t *flag);
ork_status ork_cuda_mse_bwd(const ork_kctx *k, int64_t n, const void *a, const void *b, const float *g, void *da,
                            void *db, ork_dtype dt);

/* Convolution helpers (cuda_ew.cu), NCHW, one image: col (Cin·kh·kw, Ho·Wo). */
/* col (Cin·kh·kw, pc) of the output positions p0 .. p0 + pc - 1 (of Ho·Wo) */
ork_status ork_cuda_im2col(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, void *col, ork_dtype dt,
                           int64_t p0, int64_t pc);
ork_status ork_cuda_col2im(const ork_kctx *k, const ork_conv2d_desc *d, const void *col, void *dx, ork_dtype dt);
/* y (N, C, P) += b (C) of bdt; db (C) F32 += Σ_{n,p} dy (N, C, P). */
ork_status ork_cuda_chan_bias(const ork_kctx *k, int64_t N, int64_t C, int64_t P, const void *b, ork_dtype bdt,
                              void *y, ork_dtype dt);
ork_status ork_cuda_chan_sum(const ork_kctx *k, int64_t N, int64_t C, int64_t P, const void *dy, ork_dtype dt,
                             float *db);

/* Group norm and row softmax (cuda_gn.cu). */
ork_status ork_cuda_groupnorm(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, float eps, const void *x,
                              const void *w, const void *b, ork_dtype wdt, void *y, float *mean, float *rstd,
                              ork_dtype dt);
ork_status ork_cuda_groupnorm_bwd(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, const void *x,
                                  const void *w, ork_dtype wdt, const float *mean, const float *rstd, const void *dy,
                                  void *dx, float *dw, float *db, ork_dtype dt);
ork_status ork_cuda_softmax(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt);
ork_status ork_cuda_softmax_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *y, const void *dy, void *dx,
                                ork_dtype dt);
/* Row gather (cuda_embed.cu). */
ork_status ork_cuda_embedding(const ork_kctx *k, int64_t n, int64_t V, int64_t D, const int32_t *ids, const void *w,
                              ork_dtype wdt, void *y, ork_dtype dt);
ork_status ork_cuda_dropout(const ork_kctx *k, int64_t n, uint64_t seed, uint64_t threshold, float scale, void *x,
                            ork_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
