/* cpu/cpu.h — internals shared by the CPU backend's files: the parallel-for
 * and the kernels each file defines (element access with conversion is
 * numerics/elem.h). Owns nothing. */
#ifndef ORK_CPU_CPU_H
#define ORK_CPU_CPU_H

#include "numerics/elem.h" /* ork_elem_load/store: element access with conversion */
#include "tensor/backend.h"
#include "util/log.h"

#include <stdint.h>

#define ORK_CPU_ALIGN 64

static inline int ork_cpu_weight_dt(ork_dtype dt) { return dt == ORK_F32 || dt == ORK_BF16; }

/* Run fn(ctx, lo, hi) over [0, n) split into at most nthreads contiguous
 * ranges of at least min_chunk items; inline when that makes one range. */
typedef void (*ork_par_fn)(void *ctx, int64_t lo, int64_t hi);
void ork_par_for(int nthreads, int64_t n, int64_t min_chunk, ork_par_fn fn, void *ctx);

/* cpu_gemm.c */
ork_status ork_cpu_gemm(const ork_kctx *k, const ork_gemm_desc *d);

/* cpu_nn.c: attention and convolution */
size_t ork_cpu_attention_ws(const ork_attn_desc *d, int backward);
ork_status ork_cpu_attention(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                             const void *v, void *y, float *lse, void *ws, ork_dtype dt);
ork_status ork_cpu_attention_bwd(const ork_kctx *k, const ork_attn_desc *d, const void *q, const void *kk,
                                 const void *v, const void *y, const float *lse, const void *dy, void *dq,
                                 void *dk, void *dv, void *ws, ork_dtype dt);
size_t ork_cpu_conv2d_ws(const ork_conv2d_desc *d, int backward);
ork_status ork_cpu_conv2d(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *w,
                          const void *b, ork_dtype wdt, void *y, void *ws, ork_dtype dt);
ork_status ork_cpu_conv2d_dgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *dy, const void *w,
                                ork_dtype wdt, void *dx, void *ws, ork_dtype dt);
ork_status ork_cpu_conv2d_wgrad(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, const void *dy,
                                float *dw, float *db, void *ws, ork_dtype dt);

/* cpu_gn.c: group norm and row softmax (tensor/backend.h) */
ork_status ork_cpu_groupnorm(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, float eps, const void *x,
                             const void *w, const void *b, ork_dtype wdt, void *y, float *mean, float *rstd,
                             ork_dtype dt);
ork_status ork_cpu_groupnorm_bwd(const ork_kctx *k, int64_t B, int64_t C, int64_t P, int64_t G, const void *x,
                                 const void *w, ork_dtype wdt, const float *mean, const float *rstd, const void *dy,
                                 void *dx, float *dw, float *db, ork_dtype dt);
ork_status ork_cpu_softmax(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt);
ork_status ork_cpu_softmax_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *y, const void *dy, void *dx,
                               ork_dtype dt);
ork_status ork_cpu_dropout(const ork_kctx *k, int64_t n, uint64_t seed, uint64_t threshold, float scale, void *x,
                           ork_dtype dt);

/* cpu_embed.c: row gather (tensor/backend.h slot embedding) */
ork_status ork_cpu_embedding(const ork_kctx *k, int64_t n, int64_t V, int64_t D, const int32_t *ids, const void *w,
                             ork_dtype wdt, void *y, ork_dtype dt);

#define ORK_CPU_NEED_F32(dt, what) \
    do { if ((dt) != ORK_F32) return ORK_FAIL(ORK_E_UNSUPPORTED, "cpu: %s needs f32 activations", (what)); } while (0)

#endif
