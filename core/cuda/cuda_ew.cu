/* cuda/cuda_ew.cu — the CUDA backend's memory-bound kernels: fill/axpby/strided
 * copy, broadcast binary ops and modulate with their reductions, layernorm and
 * rmsnorm, activations, swiglu, rope, pooling/upsampling, im2col/col2im and
 * scalar reductions. Elements are F32, BF16 or F16 (dtype passed at run time,
 * a uniform branch); all math in F32. Every reduction is deterministic: fixed
 * partition, fixed order, partial sums in the context's scratch, then one pass.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_vec.cuh"

#include <stdlib.h>

namespace {

constexpr int TPB = 256;

struct Bc { /* a broadcast map passed by value */
    int ndim;
    int small; /* every index fits 31 bits: 32-bit division (64-bit division is ~4x the work) */
    int64_t shape[ORK_MAX_DIMS], bstride[ORK_MAX_DIMS];
};
Bc mkbc(const ork_bcast *b) {
    Bc r{};
    r.ndim = b->ndim;
    r.small = b->n < ((int64_t)1 << 31);
    for (int d = 0; d < b->ndim; d++) { r.shape[d] = b->shape[d]; r.bstride[d] = b->bstride[d]; }
    return r;
}
__device__ __forceinline__ int64_t bidx(const Bc &b, int64_t i) {
    if (b.small) {
        uint32_t u = (uint32_t)i;
        int64_t off = 0;
        for (int d = b.ndim - 1; d >= 0 && u; d--) {
            uint32_t n = (uint32_t)b.shape[d], q = u / n;
            off += (int64_t)(u - q * n) * b.bstride[d];
            u = q;
        }
        return off;
    }
    int64_t off = 0;
    for (int d = b.ndim - 1; d >= 0 && i; d--) {
        int64_t n = b.shape[d];
        off += (i % n) * b.bstride[d];
        i /= n;
    }
    return off;
}

unsigned grid_for(const ork_kctx *k, int64_t n) {
    int64_t g = ork_cdiv(n, TPB), cap = (int64_t)ork_cuda_ctx_sm_count(ork_cuda_kctx(k)) * 16;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}
#define GRID_STRIDE(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)

bool float_dt(ork_dtype t) { return t == ORK_F32 || t == ORK_BF16 || t == ORK_F16; }
#define CHECK_DT(t, what) do { if (!float_dt(t)) return ORK_FAIL(ORK_E_UNSUPPORTED, \
    "cuda %s: dtype %d (F32, BF16, F16 supported)", what, (int)(t)); } while (0)

/* warp_sum, block_sum, ld8, st8: cuda/cuda_vec.cuh */

/* ---- fill, axpby, copy ---- */
__global__ void k_fill(int64_t n, float v, const float *s, float scale, void *x, int dt) {
    float val = s ? s[0] * scale : v;
    GRID_STRIDE(i, n) ork_st(x, i, val, dt);
}
__global__ void k_axpby(int64_t n, float alpha, const void *x, int xdt, float beta, void *y, int ydt) {
    GRID_STRIDE(i, n) {
        float r = alpha * ork_ld(x, i, xdt);
        if (beta != 0.f) r += beta * ork_ld(y, i, ydt);
        ork_st(y, i, r, ydt);
    }
}
struct CopyD {
    int ndim;
    int small; /* n < 2^31: 32-bit index arithmetic */
    int64_t shape[ORK_MAX_DIMS], ss[ORK_MAX_DIMS], ds[ORK_MAX_DIMS];
};
/* Element offsets (source, destination) of linear index i. */
__device__ __forceinline__ void copy_offsets(const CopyD &c, int64_t i, int64_t *so, int64_t *dof) {
    int64_t a = 0, b = 0;
    if (c.small) {
        uint32_t r = (uint32_t)i;
        for (int d = c.ndim - 1; d >= 0; d--) {
            uint32_t n = (uint32_t)c.shape[d], q = r / n, x = r - q * n;
            a += (int64_t)x * c.ss[d];
            b += (int64_t)x * c.ds[d];
            r = q;
        }
    } else {
        int64_t r = i;
        for (int d = c.ndim - 1; d >= 0; d--) { int64_t x = r % c.shape[d]; r /= c.shape[d]; a += x * c.ss[d]; b += x * c.ds[d]; }
    }
    *so = a;
    *dof = b;
}
template <typename T> __global__ void k_copy_raw(int64_t n, CopyD c, const T *src, T *dst) {
    GRID_STRIDE(i, n) {
        int64_t so, dof;
        copy_offsets(c, i, &so, &dof);
        dst[dof] = src[so];
    }
}
/* Rows whose inner dim is contiguous on both sides, 16 bytes per thread:
 * c describes the rows in units of uint4 (inner extent = vectors per row). */
__global__ void k_copy_vec16(int64_t n, CopyD c, const uint4 *src, uint4 *dst) {
    GRID_STRIDE(i, n) {
        int64_t so, dof;
        copy_offsets(c, i, &so, &dof);
        dst[dof] = src[so];
    }
}
__global__ void k_copy_cvt(int64_t n, CopyD c, const void *src, int sdt, void *dst, int ddt, int acc) {
    GRID_STRIDE(i, n) {
        int64_t so, dof;
        copy_offsets(c, i, &so, &dof);
        float v = ork_ld(src, so, sdt);
        if (acc) v += ork_ld(dst, dof, ddt);
        ork_st(dst, dof, v, ddt);
    }
}

/* ---- broadcast binary, modulate ---- */
__global__ void k_binary(int64_t n, int op, Bc bc, const void *a, const void *b, int bdt, void *y, int dt) {
    GRID_STRIDE(i, n) {
        float x = ork_ld(a, i, dt), z = ork_ld(b, bidx(bc, i), bdt);
        ork_st(y, i, op == ORK_BINARY_ADD ? x + z : x * z, dt);
    }
}
/* da = dy (b NULL) or dy·b[bidx]; also modulate's dx = dy·(1 + scale) when plus1. */
__global__ void k_bcast_scale(int64_t n, Bc bc, const void *dy, const void *b, int bdt, int plus1, void *da, int dt) {
    GRID_STRIDE(i, n) {
        float v = ork_ld(dy, i, dt);
        if (b) v *= ork_ld(b, bidx(bc, i), bdt) + (plus1 ? 1.f : 0.f);
        ork_st(da, i, v, dt);
    }
}
__global__ void k_modulate(int64_t n, Bc bh, Bc bs, const void *x, const void *shift, const void *scale, void *y, int dt) {
    GRID_STRIDE(i, n) {
        float v = (1.f + ork_ld(scale, bidx(bs, i), dt)) * ork_ld(x, i, dt) + ork_ld(shift, bidx(bh, i), dt);
        ork_st(y, i, v, dt);
    }
}
/* ---- the same three, 8 BF16 elements per thread (issue #31: FLUX's gates,
 * residual adds and modulations ran at a fraction of the memory's rate, one
 * 2-byte access and one broadcast index per element). Taken when every
 * operand is BF16, the element count and the last dim a multiple of 8, each
 * broadcast operand's last dim contiguous (stride 1) or broadcast (stride 0),
 * its other strides multiples of 8, and the pointers 16-byte aligned: one
 * 16-byte load/store per 8 elements, one broadcast index per 8. The F32 math
 * per element is the scalar kernels', written the same way, so the results
 * are bit-identical (tests/cuda/test_cuda_ew8.c). On by default since its
 * step-level before/after (PERF.md: 0.88 of the 1024² step); ORK_CUDA_EW8=0
 * turns it off (ew8_on below). */
/* b's 8 values for elements i..i+7 (i a multiple of 8): contiguous or one broadcast */
__device__ __forceinline__ void ldb8(const Bc &bc, int inner, const void *b, int64_t i, float f[8]) {
    int64_t o = bidx(bc, i);
    if (inner) { ld8(b, o, f); return; }
    float v = __bfloat162float(((const __nv_bfloat16 *)b)[o]);
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = v;
}
__global__ void k_binary8(int64_t n8, int op, Bc bc, int binner, const void *a, const void *b, void *y) {
    GRID_STRIDE(g, n8) {
        float x[8], z[8];
        ld8(a, g * 8, x);
        ldb8(bc, binner, b, g * 8, z);
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = op == ORK_BINARY_ADD ? x[k] + z[k] : x[k] * z[k];
        st8(y, g * 8, x);
    }
}
__global__ void k_bcast_scale8(int64_t n8, Bc bc, int binner, const void *dy, const void *b, int plus1, void *da) {
    GRID_STRIDE(g, n8) {
        float v[8], z[8];
        ld8(dy, g * 8, v);
        if (b) {
            ldb8(bc, binner, b, g * 8, z);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] *= z[k] + (plus1 ? 1.f : 0.f);
        }
        st8(da, g * 8, v);
    }
}
__global__ void k_modulate8(int64_t n8, Bc bh, int hinner, Bc bs, int sinner, const void *x, const void *shift,
                            const void *scale, void *y) {
    GRID_STRIDE(g, n8) {
        float xv[8], h[8], sc[8], v[8];
        ld8(x, g * 8, xv);
        ldb8(bh, hinner, shift, g * 8, h);
        ldb8(bs, sinner, scale, g * 8, sc);
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = (1.f + sc[k]) * xv[k] + h[k];
        st8(y, g * 8, v);
    }
}

/* Reduction onto the broadcast operand: part[c][j] = Σ_{r in chunk c} u·v at the
 * a-index of (kept coords of j, reduced coords r). kept[d]: b's stride of dim d
 * (0 = reduced dim). */
struct RedMap {
    int ndim;
    int64_t shape[ORK_MAX_DIMS], bstride[ORK_MAX_DIMS], astride[ORK_MAX_DIMS];
    int64_t nb, R;
};
__global__ void k_bcast_reduce(RedMap m, int nchunk, const void *u, int udt, const void *v, int vdt, float *part) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m.nb) return;
    int64_t base = 0;
    for (int d = 0; d < m.ndim; d++)
        if (m.bstride[d]) base += (j / m.bstride[d]) % m.shape[d] * m.astride[d];
    int c = blockIdx.y;
    int64_t r0 = m.R * c / nchunk, r1 = m.R * (c + 1) / nchunk;
    float acc = 0.f;
    for (int64_t r = r0; r < r1; r++) {
        int64_t rr = r, off = base;
        for (int d = m.ndim - 1; d >= 0; d--)
            if (!m.bstride[d]) { off += (rr % m.shape[d]) * m.astride[d]; rr /= m.shape[d]; }
        float x = ork_ld(u, off, udt);
        if (v) x *= ork_ld(v, off, vdt);
        acc += x;
    }
    part[(int64_t)c * m.nb + j] = acc;
}
/* out[j] (odt) = Σ_c part[c][j] (+ out[j] when acc). */
__global__ void k_sum_parts(int64_t nb, int nchunk, const float *part, void *out, int odt, int acc) {
    GRID_STRIDE(j, nb) {
        float s = 0.f;
        for (int c = 0; c < nchunk; c++) s += part[(int64_t)c * nb + j];
        if (acc) s += ork_ld(out, j, odt);
        ork_st(out, j, s, odt);
    }
}

/* ---- norms: one block per row ---- */
__global__ void k_layernorm(int64_t C, float eps, const void *x, void *y, float *mean, float *rstd, int dt) {
    int64_t r = blockIdx.x;
    const int64_t o = r * C;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += ork_ld(x, o + c, dt);
    float mu = block_sum(s) / (float)C, q = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) { float d = ork_ld(x, o + c, dt) - mu; q += d * d; }
    float rs = rsqrtf(block_sum(q) / (float)C + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ork_st(y, o + c, (ork_ld(x, o + c, dt) - mu) * rs, dt);
    if (threadIdx.x == 0) { if (mean) mean[r] = mu; if (rstd) rstd[r] = rs; }
}
__global__ void k_layernorm_bwd(int64_t C, const void *x, const float *mean, const float *rstd, const void *dy,
                                void *dx, int dt) {
    int64_t r = blockIdx.x;
    const int64_t o = r * C;
    float mu = mean[r], rs = rstd[r], s1 = 0.f, s2 = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float g = ork_ld(dy, o + c, dt), xh = (ork_ld(x, o + c, dt) - mu) * rs;
        s1 += g; s2 += g * xh;
    }
    s1 = block_sum(s1) / (float)C;
    s2 = block_sum(s2) / (float)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float g = ork_ld(dy, o + c, dt), xh = (ork_ld(x, o + c, dt) - mu) * rs;
        ork_st(dx, o + c, rs * (g - s1 - xh * s2), dt);
    }
}
__global__ void k_rmsnorm(int64_t C, float eps, const void *x, const void *w, int wdt, void *y, float *rstd, int dt) {
    int64_t r = blockIdx.x;
    const int64_t o = r * C;
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) { float v = ork_ld(x, o + c, dt); q += v * v; }
    float rs = rsqrtf(block_sum(q) / (float)C + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        ork_st(y, o + c, ork_ld(x, o + c, dt) * rs * (w ? ork_ld(w, c, wdt) : 1.f), dt);
    if (threadIdx.x == 0 && rstd) rstd[r] = rs;
}
__global__ void k_rmsnorm_bwd(int64_t C, const void *x, const void *w, int wdt, const float *rstd, const void *dy,
                              void *dx, int dt) {
    int64_t r = blockIdx.x;
    const int64_t o = r * C;
    float rs = rstd[r], s = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        s += ork_ld(dy, o + c, dt) * (w ? ork_ld(w, c, wdt) : 1.f) * ork_ld(x, o + c, dt);
    s = block_sum(s) / (float)C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float g = ork_ld(dy, o + c, dt) * (w ? ork_ld(w, c, wdt) : 1.f);
        ork_st(dx, o + c, rs * g - ork_ld(x, o + c, dt) * rs * rs * rs * s, dt);
    }
}
/* part[c][j] = Σ_{rows in chunk c} dy·x·rstd for column j. */
__global__ void k_rms_dw(int64_t rows, int64_t C, int nchunk, const void *x, const float *rstd, const void *dy,
                         int dt, float *part) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= C) return;
    int c = blockIdx.y;
    int64_t r0 = rows * c / nchunk, r1 = rows * (c + 1) / nchunk;
    float acc = 0.f;
    for (int64_t r = r0; r < r1; r++) acc += ork_ld(dy, r * C + j, dt) * ork_ld(x, r * C + j, dt) * rstd[r];
    part[(int64_t)c * C + j] = acc;
}

/* ---- activations ---- */
__device__ __forceinline__ float act_f(int op, float x, float c) {
    switch (op) {
    case ORK_UNARY_GELU_TANH: { float u = 0.7978845608028654f * (x + 0.044715f * x * x * x); return 0.5f * x * (1.f + tanhf(u)); }
    case ORK_UNARY_SILU: return x / (1.f + expf(-x));
    case ORK_UNARY_RELU: return x > 0.f ? x : 0.f;
    default: return c * tanhf(x / c);
    }
}
__device__ __forceinline__ float act_df(int op, float x, float c) {
    switch (op) {
    case ORK_UNARY_GELU_TANH: {
        float k0 = 0.7978845608028654f, u = k0 * (x + 0.044715f * x * x * x), t = tanhf(u);
        return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k0 * (1.f + 3.f * 0.044715f * x * x);
    }
    case ORK_UNARY_SILU: { float s = 1.f / (1.f + expf(-x)); return s * (1.f + x * (1.f - s)); }
    case ORK_UNARY_RELU: return x > 0.f ? 1.f : 0.f;
    default: { float t = tanhf(x / c); return 1.f - t * t; }
    }
}
__global__ void k_unary(int op, int64_t n, float c, const void *x, void *y, int dt) {
    GRID_STRIDE(i, n) ork_st(y, i, act_f(op, ork_ld(x, i, dt), c), dt);
}
__global__ void k_unary_bwd(int op, int64_t n, float c, const void *x, const void *dy, void *dx, int dt) {
    GRID_STRIDE(i, n) ork_st(dx, i, ork_ld(dy, i, dt) * act_df(op, ork_ld(x, i, dt), c), dt);
}
__global__ void k_swiglu(int64_t rows, int64_t C, const void *x, void *y, int dt) {
    GRID_STRIDE(i, rows * C) {
        int64_t r = i / C, c = i % C;
        float a = ork_ld(x, r * 2 * C + c, dt), b = ork_ld(x, r * 2 * C + C + c, dt);
        ork_st(y, i, a / (1.f + expf(-a)) * b, dt);
    }
}
__global__ void k_swiglu_bwd(int64_t rows, int64_t C, const void *x, const void *dy, void *dx, int dt) {
    GRID_STRIDE(i, rows * C) {
        int64_t r = i / C, c = i % C;
        float a = ork_ld(x, r * 2 * C + c, dt), b = ork_ld(x, r * 2 * C + C + c, dt), g = ork_ld(dy, i, dt);
        float s = 1.f / (1.f + expf(-a));
        ork_st(dx, r * 2 * C + c, g * b * s * (1.f + a * (1.f - s)), dt);
        ork_st(dx, r * 2 * C + C + c, g * a * s, dt);
    }
}

/* ---- rope: one thread per rotated pair; inv applies Rᵀ ---- */
__global__ void k_rope(int64_t BH, int64_t L, int64_t D, int half, const void *x, const float *pe, void *y, int dt,
                       int inv) {
    const int64_t P = D / 2;
    GRID_STRIDE(i, BH * L * P) {
        int64_t kp = i % P, row = i / P, l = row % L;
        int64_t i0 = row * D + (half ? kp : 2 * kp), i1 = i0 + (half ? P : 1);
        float c = pe[(l * P + kp) * 2], s = pe[(l * P + kp) * 2 + 1];
        if (inv) s = -s;
        float a = ork_ld(x, i0, dt), b = ork_ld(x, i1, dt);
        ork_st(y, i0, c * a - s * b, dt);
        ork_st(y, i1, s * a + c * b, dt);
    }
}

/* ---- images ---- */
__global__ void k_maxpool(int64_t NC, int64_t H, int64_t W, const void *x, void *y, int dt) {
    int64_t Ho = H / 2, Wo = W / 2;
    GRID_STRIDE(i, NC * Ho * Wo) {
        int64_t ox = i % Wo, oy = (i / Wo) % Ho, nc = i / (Wo * Ho), b = nc * H * W + 2 * oy * W + 2 * ox;
        float m = fmaxf(fmaxf(ork_ld(x, b, dt), ork_ld(x, b + 1, dt)), fmaxf(ork_ld(x, b + W, dt), ork_ld(x, b + W + 1, dt)));
        ork_st(y, i, m, dt);
    }
}
__global__ void k_maxpool_bwd(int64_t NC, int64_t H, int64_t W, const void *x, const void *dy, void *dx, int dt) {
    int64_t Ho = H / 2, Wo = W / 2;
    GRID_STRIDE(i, NC * H * W) {
        int64_t xx = i % W, yy = (i / W) % H, nc = i / (W * H), ox = xx / 2, oy = yy / 2;
        float g = 0.f;
        if (ox < Wo && oy < Ho) {
            int64_t b = nc * H * W + 2 * oy * W + 2 * ox;
            int64_t cand[4] = {b, b + 1, b + W, b + W + 1};
            int64_t best = cand[0];
            float m = ork_ld(x, cand[0], dt);
            for (int q = 1; q < 4; q++) { float v = ork_ld(x, cand[q], dt); if (v > m) { m = v; best = cand[q]; } }
            if (best == i) g = ork_ld(dy, (nc * Ho + oy) * Wo + ox, dt);
        }
        ork_st(dx, i, g, dt);
    }
}
__global__ void k_upsample(int64_t NC, int64_t H, int64_t W, const void *x, void *y, int dt) {
    GRID_STRIDE(i, NC * 4 * H * W) {
        int64_t ox = i % (2 * W), oy = (i / (2 * W)) % (2 * H), nc = i / (4 * H * W);
        ork_st(y, i, ork_ld(x, (nc * H + oy / 2) * W + ox / 2, dt), dt);
    }
}
__global__ void k_upsample_bwd(int64_t NC, int64_t H, int64_t W, const void *dy, void *dx, int dt) {
    GRID_STRIDE(i, NC * H * W) {
        int64_t xx = i % W, yy = (i / W) % H, nc = i / (W * H), b = (nc * 2 * H + 2 * yy) * 2 * W + 2 * xx;
        ork_st(dx, i, ork_ld(dy, b, dt) + ork_ld(dy, b + 1, dt) + ork_ld(dy, b + 2 * W, dt) + ork_ld(dy, b + 2 * W + 1, dt), dt);
    }
}
struct ConvD { int64_t Cin, H, W, kh, kw, Ho, Wo; int stride, pad; };
/* col (Kc, pc): output positions p0 .. p0 + pc - 1 of the Ho·Wo */
__global__ void k_im2col(ConvD c, const void *x, void *col, int dt, int64_t p0, int64_t pc) {
    GRID_STRIDE(i, c.Cin * c.kh * c.kw * pc) {
        int64_t p = p0 + i % pc, kk = i / pc, kx = kk % c.kw, ky = (kk / c.kw) % c.kh, ci = kk / (c.kw * c.kh);
        int64_t iy = (p / c.Wo) * c.stride - c.pad + ky, ix = (p % c.Wo) * c.stride - c.pad + kx;
        float v = (iy >= 0 && iy < c.H && ix >= 0 && ix < c.W) ? ork_ld(x, (ci * c.H + iy) * c.W + ix, dt) : 0.f;
        ork_st(col, i, v, dt);
    }
}
__global__ void k_col2im(ConvD c, const void *col, void *dx, int dt) {
    const int64_t P = c.Ho * c.Wo;
    GRID_STRIDE(i, c.Cin * c.H * c.W) {
        int64_t ix = i % c.W, iy = (i / c.W) % c.H, ci = i / (c.W * c.H);
        float acc = 0.f;
        for (int64_t ky = 0; ky < c.kh; ky++) {
            int64_t ty = iy + c.pad - ky;
            if (ty < 0 || ty % c.stride) continue;
            int64_t oy = ty / c.stride;
            if (oy >= c.Ho) continue;
            for (int64_t kx = 0; kx < c.kw; kx++) {
                int64_t tx = ix + c.pad - kx;
                if (tx < 0 || tx % c.stride) continue;
                int64_t ox = tx / c.stride;
                if (ox >= c.Wo) continue;
                acc += ork_ld(col, ((ci * c.kh + ky) * c.kw + kx) * P + oy * c.Wo + ox, dt);
            }
        }
        ork_st(dx, i, acc, dt);
    }
}
__global__ void k_chan_bias(int64_t N, int64_t C, int64_t P, const void *b, int bdt, void *y, int dt) {
    GRID_STRIDE(i, N * C * P) ork_st(y, i, ork_ld(y, i, dt) + ork_ld(b, (i / P) % C, bdt), dt);
}
/* one block per channel */
__global__ void k_chan_sum(int64_t N, int64_t C, int64_t P, const void *dy, int dt, float *db) {
    int64_t ch = blockIdx.x;
    float s = 0.f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = threadIdx.x; p < P; p += blockDim.x) s += ork_ld(dy, (n * C + ch) * P + p, dt);
    s = block_sum(s);
    if (threadIdx.x == 0) db[ch] += s;
}

/* ---- scalar reductions: part[block] then one block ---- */
/* mode 0: Σ a; 1: Σ a²; 2: Σ (a − b)² */
__global__ void k_reduce_part(int64_t n, int mode, const void *a, const void *b, int dt, float *part) {
    float s = 0.f;
    GRID_STRIDE(i, n) {
        float v = ork_ld(a, i, dt);
        if (mode == 2) v -= ork_ld(b, i, dt);
        s += mode == 0 ? v : v * v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void k_reduce_final(int np, const float *part, float scale, float *out) {
    float s = 0.f;
    for (int i = threadIdx.x; i < np; i += blockDim.x) s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0) out[0] = s * scale;
}
__global__ void k_mse_bwd(int64_t n, const void *a, const void *b, const float *g, void *da, void *db, int dt) {
    float f = 2.f * g[0] / (float)n;
    GRID_STRIDE(i, n) {
        float d = f * (ork_ld(a, i, dt) - ork_ld(b, i, dt));
        if (da) ork_st(da, i, d, dt);
        if (db) ork_st(db, i, -d, dt);
    }
}

/* out (n) = u·v (v may be NULL), elementwise with conversion: the "reduction"
 * when nothing is broadcast. */
__global__ void k_mul_cvt(int64_t n, const void *u, int udt, const void *v, int vdt, void *out, int odt) {
    GRID_STRIDE(i, n) {
        float x = ork_ld(u, i, udt);
        if (v) x *= ork_ld(v, i, vdt);
        ork_st(out, i, x, odt);
    }
}

/* Deterministic Σ onto the broadcast operand: out (nb, odt) = Σ_bcast u·v (v may be NULL). */
ork_status bcast_reduce(const ork_kctx *k, const ork_bcast *bc, const void *u, ork_dtype udt, const void *v,
                        ork_dtype vdt, void *out, ork_dtype odt) {
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    cudaStream_t st = ork_stream(ork_cuda_kstream(k));
    RedMap m{};
    m.ndim = bc->ndim;
    m.nb = bc->nb;
    int64_t s = 1;
    m.R = 1;
    for (int d = bc->ndim - 1; d >= 0; d--) {
        m.shape[d] = bc->shape[d];
        m.bstride[d] = bc->bstride[d];
        m.astride[d] = s;
        s *= bc->shape[d];
        if (!bc->bstride[d]) m.R *= bc->shape[d];
    }
    if (m.nb <= 0) return ORK_OK;
    if (m.R == 1) { /* same shape: no reduction, any size */
        k_mul_cvt<<<grid_for(k, m.nb), TPB, 0, st>>>(m.nb, u, udt, v, vdt, out, odt);
        ORK_CUDA_LAUNCHED();
        return ORK_OK;
    }
    int64_t want = ork_cdiv((int64_t)cx->sm_count * 2048, m.nb);
    int64_t nchunk = want < 1 ? 1 : want;
    if (nchunk > m.R) nchunk = m.R > 0 ? m.R : 1;
    if (nchunk > 65535) nchunk = 65535;
    if (nchunk * m.nb > (int64_t)cx->scratch_n) nchunk = (int64_t)cx->scratch_n / m.nb;
    if (nchunk < 1) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda broadcast reduction: %lld outputs exceed the scratch",
                                    (long long)m.nb);
    dim3 grid((unsigned)ork_cdiv(m.nb, TPB), (unsigned)nchunk);
    k_bcast_reduce<<<grid, TPB, 0, st>>>(m, (int)nchunk, u, udt, v, vdt, cx->scratch);
    ORK_CUDA_LAUNCHED();
    k_sum_parts<<<grid_for(k, m.nb), TPB, 0, st>>>(m.nb, (int)nchunk, cx->scratch, out, odt, 0);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

ork_status reduce_scalar(const ork_kctx *k, int mode, int64_t n, const void *a, const void *b, ork_dtype dt,
                         float scale, float *out) {
    cudaStream_t st = ork_stream(ork_cuda_kstream(k));
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    unsigned g = grid_for(k, n);
    k_reduce_part<<<g, TPB, 0, st>>>(n, mode, a, b, dt, cx->scratch);
    ORK_CUDA_LAUNCHED();
    k_reduce_final<<<1, 1024, 0, st>>>((int)g, cx->scratch, scale, out);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

} // namespace

#define STREAM ork_stream(ork_cuda_kstream(k))
/* The 8-wide path's test (see k_binary8): 1 = b's last dim contiguous, 0 =
 * broadcast, -1 = not taken. b NULL: no broadcast operand. */
static int al16(const void *p) { return ((uintptr_t)p & 15) == 0; }
static int v8_map(const ork_bcast *bc, const void *b) {
    int L = bc->ndim - 1;
    if (L < 0 || bc->n % 8 || bc->shape[L] % 8) return -1;
    if (!b) return 1;
    for (int d = 0; d < L; d++)
        if (bc->bstride[d] % 8) return -1;
    if (bc->bstride[L] == 1) return al16(b) ? 1 : -1;
    return bc->bstride[L] == 0 ? 0 : -1;
}
/* The 8-wide path is the default: measured on the H200 (issue #31, PERF.md, f137c24)
 * it took the 1024² step from 756.6 to 667.5 ms recomputing, 525.6 to 474.6 ms
 * keeping every block. ORK_CUDA_EW8=0 turns it off (A/B runs); read once. */
static int ew8_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("ORK_CUDA_EW8");
        on = !(e && e[0] == '0');
    }
    return on;
}

#define LAUNCH(kern, n, ...) do { if ((n) > 0) { kern<<<grid_for(k, (n)), TPB, 0, STREAM>>>(__VA_ARGS__); \
    ORK_CUDA_LAUNCHED(); } } while (0)

extern "C" {

ork_status ork_cuda_fill(const ork_kctx *k, int64_t n, float value, void *x, ork_dtype dt) {
    CHECK_DT(dt, "fill");
    LAUNCH(k_fill, n, n, value, nullptr, 0.f, x, dt);
    return ORK_OK;
}
ork_status ork_cuda_fill_scalar(const ork_kctx *k, int64_t n, const float *s, float scale, void *x, ork_dtype dt) {
    CHECK_DT(dt, "fill_scalar");
    LAUNCH(k_fill, n, n, 0.f, s, scale, x, dt);
    return ORK_OK;
}
ork_status ork_cuda_axpby(const ork_kctx *k, int64_t n, float alpha, const void *x, ork_dtype xdt, float beta,
                          void *y, ork_dtype ydt) {
    CHECK_DT(xdt, "axpby");
    CHECK_DT(ydt, "axpby");
    LAUNCH(k_axpby, n, n, alpha, x, xdt, beta, y, ydt);
    return ORK_OK;
}
ork_status ork_cuda_copy(const ork_kctx *k, const ork_copy_desc *d, const void *src, void *dst) {
    CopyD c{};
    int64_t n = 1;
    c.ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        c.shape[i] = d->shape[i]; c.ss[i] = d->src_stride[i]; c.ds[i] = d->dst_stride[i];
        n *= d->shape[i];
    }
    if (n <= 0) return ORK_OK;
    c.small = n < ((int64_t)1 << 31);
    if (d->sdt == d->ddt && !d->accumulate && d->ndim >= 1) {
        /* fast path: inner dim contiguous on both sides, rows and bases 16-byte aligned */
        int64_t es = (int64_t)ork_dtype_size(d->sdt), last = d->ndim - 1;
        int ok = d->src_stride[last] == 1 && d->dst_stride[last] == 1 && (d->shape[last] * es) % 16 == 0 &&
                 ((uintptr_t)src % 16) == 0 && ((uintptr_t)dst % 16) == 0;
        for (int i = 0; ok && i < last; i++) ok = (d->src_stride[i] * es) % 16 == 0 && (d->dst_stride[i] * es) % 16 == 0;
        if (ok) {
            CopyD v = c;
            int64_t per = 16 / es;
            for (int i = 0; i < last; i++) { v.ss[i] = d->src_stride[i] / per; v.ds[i] = d->dst_stride[i] / per; }
            v.shape[last] = d->shape[last] / per;
            v.ss[last] = v.ds[last] = 1;
            int64_t nv = n / per;
            LAUNCH(k_copy_vec16, nv, nv, v, (const uint4 *)src, (uint4 *)dst);
            return ORK_OK;
        }
        switch (ork_dtype_size(d->sdt)) {
        case 1: LAUNCH(k_copy_raw<uint8_t>, n, n, c, (const uint8_t *)src, (uint8_t *)dst); return ORK_OK;
        case 2: LAUNCH(k_copy_raw<uint16_t>, n, n, c, (const uint16_t *)src, (uint16_t *)dst); return ORK_OK;
        case 4: LAUNCH(k_copy_raw<uint32_t>, n, n, c, (const uint32_t *)src, (uint32_t *)dst); return ORK_OK;
        case 8: LAUNCH(k_copy_raw<uint64_t>, n, n, c, (const uint64_t *)src, (uint64_t *)dst); return ORK_OK;
        default: break;
        }
    }
    CHECK_DT(d->sdt, "copy");
    CHECK_DT(d->ddt, "copy");
    LAUNCH(k_copy_cvt, n, n, c, src, d->sdt, dst, d->ddt, d->accumulate);
    return ORK_OK;
}
ork_status ork_cuda_binary(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a, const void *b,
                           ork_dtype bdt, void *y, ork_dtype dt) {
    CHECK_DT(dt, "binary");
    CHECK_DT(bdt, "binary");
    int m = dt == ORK_BF16 && bdt == ORK_BF16 && al16(a) && al16(y) && ew8_on() ? v8_map(bc, b) : -1;
    if (m >= 0) LAUNCH(k_binary8, bc->n / 8, bc->n / 8, (int)op, mkbc(bc), m, a, b, y);
    else LAUNCH(k_binary, bc->n, bc->n, (int)op, mkbc(bc), a, b, bdt, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_binary_bwd(const ork_kctx *k, ork_binary_op op, const ork_bcast *bc, const void *a,
                               const void *b, ork_dtype bdt, const void *dy, ork_dtype dt, void *da, void *db,
                               ork_dtype gdt) {
    CHECK_DT(dt, "binary_bwd");
    int mul = op == ORK_BINARY_MUL;
    if (da) {
        const void *bb = mul ? b : nullptr;
        int m = dt == ORK_BF16 && (!bb || bdt == ORK_BF16) && al16(dy) && al16(da) && ew8_on() ? v8_map(bc, bb) : -1;
        if (m >= 0) LAUNCH(k_bcast_scale8, bc->n / 8, bc->n / 8, mkbc(bc), m, dy, bb, 0, da);
        else LAUNCH(k_bcast_scale, bc->n, bc->n, mkbc(bc), dy, bb, bdt, 0, da, dt);
    }
    if (db) {
        CHECK_DT(gdt, "binary_bwd");
        ORK_TRY(bcast_reduce(k, bc, dy, dt, mul ? a : nullptr, dt, db, gdt));
    }
    return ORK_OK;
}
ork_status ork_cuda_modulate(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                             const void *x, const void *shift, const void *scale, void *y, ork_dtype dt) {
    CHECK_DT(dt, "modulate");
    int mh = dt == ORK_BF16 && al16(x) && al16(y) && ew8_on() ? v8_map(bc_shift, shift) : -1;
    int ms = mh >= 0 && bc_scale->n == bc_shift->n ? v8_map(bc_scale, scale) : -1;
    if (ms >= 0)
        LAUNCH(k_modulate8, bc_shift->n / 8, bc_shift->n / 8, mkbc(bc_shift), mh, mkbc(bc_scale), ms, x, shift, scale, y);
    else LAUNCH(k_modulate, bc_shift->n, bc_shift->n, mkbc(bc_shift), mkbc(bc_scale), x, shift, scale, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_modulate_bwd(const ork_kctx *k, const ork_bcast *bc_shift, const ork_bcast *bc_scale,
                                 const void *x, const void *scale, const void *dy, void *dx, void *dshift,
                                 void *dscale, ork_dtype dt) {
    CHECK_DT(dt, "modulate_bwd");
    if (dx) {
        int m = dt == ORK_BF16 && al16(dy) && al16(dx) && ew8_on() ? v8_map(bc_scale, scale) : -1;
        if (m >= 0) LAUNCH(k_bcast_scale8, bc_scale->n / 8, bc_scale->n / 8, mkbc(bc_scale), m, dy, scale, 1, dx);
        else LAUNCH(k_bcast_scale, bc_scale->n, bc_scale->n, mkbc(bc_scale), dy, scale, dt, 1, dx, dt);
    }
    if (dshift) ORK_TRY(bcast_reduce(k, bc_shift, dy, dt, nullptr, dt, dshift, dt));
    if (dscale) ORK_TRY(bcast_reduce(k, bc_scale, dy, dt, x, dt, dscale, dt));
    return ORK_OK;
}

static int norm_threads(int64_t C) { return C >= 1024 ? 512 : C >= 256 ? 256 : 128; }

ork_status ork_cuda_layernorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, void *y,
                              float *mean, float *rstd, ork_dtype dt) {
    CHECK_DT(dt, "layernorm");
    if (rows <= 0) return ORK_OK;
    k_layernorm<<<(unsigned)rows, norm_threads(C), 0, STREAM>>>(C, eps, x, y, mean, rstd, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}
ork_status ork_cuda_layernorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const float *mean,
                                  const float *rstd, const void *dy, void *dx, ork_dtype dt) {
    CHECK_DT(dt, "layernorm_bwd");
    if (rows <= 0 || !dx) return ORK_OK;
    k_layernorm_bwd<<<(unsigned)rows, norm_threads(C), 0, STREAM>>>(C, x, mean, rstd, dy, dx, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}
ork_status ork_cuda_rmsnorm(const ork_kctx *k, int64_t rows, int64_t C, float eps, const void *x, const void *w,
                            ork_dtype wdt, void *y, float *rstd, ork_dtype dt) {
    CHECK_DT(dt, "rmsnorm");
    if (w) CHECK_DT(wdt, "rmsnorm weight");
    if (rows <= 0) return ORK_OK;
    k_rmsnorm<<<(unsigned)rows, norm_threads(C), 0, STREAM>>>(C, eps, x, w, wdt, y, rstd, dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}
ork_status ork_cuda_rmsnorm_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *w,
                                ork_dtype wdt, const float *rstd, const void *dy, void *dx, float *dw,
                                ork_dtype dt) {
    CHECK_DT(dt, "rmsnorm_bwd");
    if (rows <= 0) return ORK_OK;
    if (dx) {
        k_rmsnorm_bwd<<<(unsigned)rows, norm_threads(C), 0, STREAM>>>(C, x, w, wdt, rstd, dy, dx, dt);
        ORK_CUDA_LAUNCHED();
    }
    if (dw) {
        ork_cuda_ctx *cx = ork_cuda_kctx(k);
        int64_t nchunk = ork_cdiv((int64_t)cx->sm_count * 2048, C);
        if (nchunk > rows) nchunk = rows;
        if (nchunk * C > (int64_t)cx->scratch_n) nchunk = (int64_t)cx->scratch_n / C;
        if (nchunk < 1) nchunk = 1;
        if (nchunk * C > (int64_t)cx->scratch_n) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda rmsnorm_bwd: C too large");
        dim3 grid((unsigned)ork_cdiv(C, TPB), (unsigned)nchunk);
        k_rms_dw<<<grid, TPB, 0, STREAM>>>(rows, C, (int)nchunk, x, rstd, dy, dt, cx->scratch);
        ORK_CUDA_LAUNCHED();
        LAUNCH(k_sum_parts, C, C, (int)nchunk, cx->scratch, dw, ORK_F32, 0);
    }
    return ORK_OK;
}
ork_status ork_cuda_unary(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x, void *y,
                          ork_dtype dt) {
    CHECK_DT(dt, "unary");
    LAUNCH(k_unary, n, (int)op, n, param, x, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_unary_bwd(const ork_kctx *k, ork_unary_op op, int64_t n, float param, const void *x,
                              const void *dy, void *dx, ork_dtype dt) {
    CHECK_DT(dt, "unary_bwd");
    LAUNCH(k_unary_bwd, n, (int)op, n, param, x, dy, dx, dt);
    return ORK_OK;
}
ork_status ork_cuda_swiglu(const ork_kctx *k, int64_t rows, int64_t C, const void *x, void *y, ork_dtype dt) {
    CHECK_DT(dt, "swiglu");
    LAUNCH(k_swiglu, rows * C, rows, C, x, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_swiglu_bwd(const ork_kctx *k, int64_t rows, int64_t C, const void *x, const void *dy,
                               void *dx, ork_dtype dt) {
    CHECK_DT(dt, "swiglu_bwd");
    LAUNCH(k_swiglu_bwd, rows * C, rows, C, x, dy, dx, dt);
    return ORK_OK;
}
ork_status ork_cuda_rope(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split, const void *x,
                         const float *pe, void *y, ork_dtype dt) {
    CHECK_DT(dt, "rope");
    if (D % 2) return ORK_FAIL(ORK_E_INVALID, "cuda rope: odd head dim %lld", (long long)D);
    LAUNCH(k_rope, BH * L * (D / 2), BH, L, D, half_split, x, pe, y, dt, 0);
    return ORK_OK;
}
ork_status ork_cuda_rope_bwd(const ork_kctx *k, int64_t BH, int64_t L, int64_t D, int half_split, const void *dy,
                             const float *pe, void *dx, ork_dtype dt) {
    CHECK_DT(dt, "rope_bwd");
    if (D % 2) return ORK_FAIL(ORK_E_INVALID, "cuda rope: odd head dim %lld", (long long)D);
    LAUNCH(k_rope, BH * L * (D / 2), BH, L, D, half_split, dy, pe, dx, dt, 1);
    return ORK_OK;
}
ork_status ork_cuda_maxpool2x2(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                               ork_dtype dt) {
    CHECK_DT(dt, "maxpool2x2");
    LAUNCH(k_maxpool, NC * (H / 2) * (W / 2), NC, H, W, x, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_maxpool2x2_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x,
                                   const void *dy, void *dx, ork_dtype dt) {
    CHECK_DT(dt, "maxpool2x2_bwd");
    LAUNCH(k_maxpool_bwd, NC * H * W, NC, H, W, x, dy, dx, dt);
    return ORK_OK;
}
ork_status ork_cuda_upsample2x(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *x, void *y,
                               ork_dtype dt) {
    CHECK_DT(dt, "upsample2x");
    LAUNCH(k_upsample, NC * 4 * H * W, NC, H, W, x, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_upsample2x_bwd(const ork_kctx *k, int64_t NC, int64_t H, int64_t W, const void *dy, void *dx,
                                   ork_dtype dt) {
    CHECK_DT(dt, "upsample2x_bwd");
    LAUNCH(k_upsample_bwd, NC * H * W, NC, H, W, dy, dx, dt);
    return ORK_OK;
}
ork_status ork_cuda_reduce(const ork_kctx *k, ork_reduce_op op, int64_t n, const void *x, ork_dtype dt,
                           float *out) {
    CHECK_DT(dt, "reduce");
    return reduce_scalar(k, op == ORK_REDUCE_SUMSQ ? 1 : 0, n, x, nullptr, dt, 1.f, out);
}
/* Every thread sums the few sums itself (n: a block's parameters, tens), so a
 * finite block, the usual case, costs one short launch; a non-finite one is
 * copied over by the whole grid. */
__global__ void k_restore_if_nonfinite(const float *sums, int64_t n, const uint8_t *src, uint8_t *dst, size_t bytes,
                                       int32_t *flag) {
    float t = 0.0f;
    for (int64_t i = 0; i < n; i++) t += sums[i];
    if (isfinite(t)) return;
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    if (g == 0) *flag = 1;
    if (((uintptr_t)src | (uintptr_t)dst | bytes) % 16 == 0) {
        const uint4 *s4 = (const uint4 *)src;
        uint4 *d4 = (uint4 *)dst;
        for (size_t i = g; i < bytes / 16; i += step) d4[i] = s4[i];
    } else {
        for (size_t i = g; i < bytes; i += step) dst[i] = src[i];
    }
}
ork_status ork_cuda_restore_if_nonfinite(const ork_kctx *k, const float *sums, int64_t n, const void *src, void *dst,
                                         size_t bytes, int32_t *flag) {
    k_restore_if_nonfinite<<<128, TPB, 0, STREAM>>>(sums, n, (const uint8_t *)src, (uint8_t *)dst, bytes, flag);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return ork_fail(ORK_E_CUDA, "restore_if_nonfinite: %s", cudaGetErrorString(e));
    return ORK_OK;
}
ork_status ork_cuda_mse(const ork_kctx *k, int64_t n, const void *a, const void *b, ork_dtype dt, float *out) {
    CHECK_DT(dt, "mse");
    return reduce_scalar(k, 2, n, a, b, dt, n > 0 ? 1.f / (float)n : 0.f, out);
}
ork_status ork_cuda_mse_bwd(const ork_kctx *k, int64_t n, const void *a, const void *b, const float *g, void *da,
                            void *db, ork_dtype dt) {
    CHECK_DT(dt, "mse_bwd");
    LAUNCH(k_mse_bwd, n, n, a, b, g, da, db, dt);
    return ORK_OK;
}

static ConvD mkconv(const ork_conv2d_desc *d) {
    ConvD c{d->Cin, d->H, d->W, d->kh, d->kw, d->Ho, d->Wo, d->stride, d->pad};
    return c;
}
ork_status ork_cuda_im2col(const ork_kctx *k, const ork_conv2d_desc *d, const void *x, void *col, ork_dtype dt,
                           int64_t p0, int64_t pc) {
    LAUNCH(k_im2col, d->Cin * d->kh * d->kw * pc, mkconv(d), x, col, dt, p0, pc);
    return ORK_OK;
}
ork_status ork_cuda_col2im(const ork_kctx *k, const ork_conv2d_desc *d, const void *col, void *dx, ork_dtype dt) {
    LAUNCH(k_col2im, d->Cin * d->H * d->W, mkconv(d), col, dx, dt);
    return ORK_OK;
}
ork_status ork_cuda_chan_bias(const ork_kctx *k, int64_t N, int64_t C, int64_t P, const void *b, ork_dtype bdt,
                              void *y, ork_dtype dt) {
    LAUNCH(k_chan_bias, N * C * P, N, C, P, b, bdt, y, dt);
    return ORK_OK;
}
ork_status ork_cuda_chan_sum(const ork_kctx *k, int64_t N, int64_t C, int64_t P, const void *dy, ork_dtype dt,
                             float *db) {
    if (C <= 0) return ORK_OK;
    k_chan_sum<<<(unsigned)C, TPB, 0, STREAM>>>(N, C, P, dy, dt, db);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

} // extern "C"
