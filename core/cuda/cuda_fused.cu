/* cuda/cuda_fused.cu — the fused block epilogues of the CUDA backend (issue #31;
 * ops gated_add and layernorm_modulate, tensor/ops_fused.c): the gated residual
 * add y = x + gate·h and the modulated layer norm y = LN(x)·(1 + scale) + shift,
 * each one kernel forward and one kernel backward plus a short sum of partials.
 *
 * Layout: x (B, L, C) as B·L rows of C; the per-row operands (gate, shift,
 * scale) are (Bp, C) with Bp 1 (shared) or B (row b·L + l reads row b).
 * Every thread owns fixed column groups of a row (VEC = 8 BF16 columns, one
 * 16-byte access, where every operand is BF16, C % 8 == 0 and the pointers are
 * 16-byte aligned; VEC = 1 otherwise, any of F32/BF16/F16), so the column
 * reductions (dgate, dshift, dscale) accumulate in registers across the rows
 * of a chunk with no atomics and no per-element division; each chunk writes
 * its partial sums to the context's scratch and one small kernel adds them in
 * a fixed order: deterministic. All math in F32; the normalised x stays F32
 * (the composition layernorm + modulate rounds it to BF16 in between).
 * Kernel names keep bench/profile/kernel_classes.py's classes: k_bcast_* is
 * elementwise, k_modulate_* norm / modulation, k_sum_* reduction.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_fused.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_vec.cuh" /* block_sum, ld8, st8 */

namespace {

/* Column groups per thread in the chunked kernels: 4 of 8 or 16 of 1; with at
 * most CHUNK_T threads, C <= 16384 (BF16, 8 wide) or 8192 (scalar). */
template <int VEC> struct Groups { static constexpr int n = VEC == 8 ? 4 : 16; };
constexpr int CHUNK_T = 512;


/* VEC elements at element index i of p (dtype dt; VEC 8: BF16, 16-byte aligned). */
template <int VEC> __device__ __forceinline__ void ldv(const void *p, int64_t i, int dt, float *f);
template <> __device__ __forceinline__ void ldv<1>(const void *p, int64_t i, int dt, float *f) { f[0] = ork_ld(p, i, dt); }
template <> __device__ __forceinline__ void ldv<8>(const void *p, int64_t i, int, float *f) { ld8(p, i, f); }
template <int VEC> __device__ __forceinline__ void stv(void *p, int64_t i, int dt, const float *f);
template <> __device__ __forceinline__ void stv<1>(void *p, int64_t i, int dt, const float *f) { ork_st(p, i, f[0], dt); }
template <> __device__ __forceinline__ void stv<8>(void *p, int64_t i, int, const float *f) { st8(p, i, f); }

/* ---- gated add ---- */
/* y = x + gate·h; blocks stride over rows, threads over the column groups of a row. */
template <int VEC>
__global__ void k_bcast_gated_add(int64_t rows, int64_t L, int64_t C, int64_t gs, const void *x, const void *gate,
                            const void *h, void *y, int dt) {
    const int64_t nv = C / VEC;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t o = r * C, go = (r / L) * gs;
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
            float a[VEC], g[VEC], b[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
            ldv<VEC>(gate, go + v * VEC, dt, g);
            ldv<VEC>(h, o + v * VEC, dt, b);
#pragma unroll
            for (int k = 0; k < VEC; k++) a[k] += g[k] * b[k];
            stv<VEC>(y, o + v * VEC, dt, a);
        }
    }
}
/* Block (chunk c, batch b) takes rows r0..r1 of batch b: dh = dy·gate; part[(b·nchunk + c), :]
 * = Σ_rows dy·h (when part). Thread t owns column groups t + j·blockDim.x, j < MAXV. */
template <int VEC>
__global__ void __launch_bounds__(CHUNK_T)
k_bcast_gated_add_bwd(int64_t L, int64_t C, int nchunk, int64_t gs, const void *gate, const void *h, const void *dy,
                      void *dh, float *part, int dt) {
    constexpr int MAXV = Groups<VEC>::n;
    const int64_t nv = C / VEC, b = blockIdx.y, c = blockIdx.x;
    const int64_t r0 = L * c / nchunk, r1 = L * (c + 1) / nchunk;
    float acc[MAXV][VEC], g[MAXV][VEC];
#pragma unroll
    for (int j = 0; j < MAXV; j++) {
        const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
#pragma unroll
        for (int k = 0; k < VEC; k++) acc[j][k] = 0.f;
        if (dh && v < nv) ldv<VEC>(gate, b * gs + v * VEC, dt, g[j]);
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t o = (b * L + r) * C;
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
            if (v >= nv) break;
            float d[VEC], t[VEC];
            ldv<VEC>(dy, o + v * VEC, dt, d);
            if (dh) {
#pragma unroll
                for (int k = 0; k < VEC; k++) t[k] = d[k] * g[j][k];
                stv<VEC>(dh, o + v * VEC, dt, t);
            }
            if (part) {
                ldv<VEC>(h, o + v * VEC, dt, t);
#pragma unroll
                for (int k = 0; k < VEC; k++) acc[j][k] += d[k] * t[k];
            }
        }
    }
    if (!part) return;
    float *p = part + (b * nchunk + c) * C;
#pragma unroll
    for (int j = 0; j < MAXV; j++) {
        const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
        if (v >= nv) break;
#pragma unroll
        for (int k = 0; k < VEC; k++) p[v * VEC + k] = acc[j][k];
    }
}

/* out[o, j] (odt) = Σ_{q < nq} part[o·nq + q, j] for o < nout/C: the chunks' partial column sums
 * in a fixed order (nq = nchunk per batch row, or B·nchunk for a shared operand). */
__global__ void k_sum_chunks(int64_t nout, int64_t C, int64_t nq, const float *part, void *out, int odt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nout; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = i / C, j = i - o * C;
        const float *p = part + o * nq * C + j;
        float s = 0.f;
        for (int64_t q = 0; q < nq; q++) s += p[q * C];
        ork_st(out, i, s, odt);
    }
}

/* ---- modulated layer norm ---- */
/* One row per block iteration: mean, rstd (two-pass, as k_layernorm), y = x̂·(1 + scale) + shift. */
template <int VEC>
__global__ void k_modulate_layernorm(int64_t rows, int64_t L, int64_t C, float eps, int64_t shs, int64_t scs, const void *x,
                         const void *shift, const void *scale, void *y, float *mean, float *rstd, int dt) {
    const int64_t nv = C / VEC;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t o = r * C, b = r / L;
        float s = 0.f;
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
            float a[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
#pragma unroll
            for (int k = 0; k < VEC; k++) s += a[k];
        }
        const float mu = block_sum(s) / (float)C;
        float q = 0.f;
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
            float a[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
#pragma unroll
            for (int k = 0; k < VEC; k++) { float d = a[k] - mu; q += d * d; }
        }
        const float rs = rsqrtf(block_sum(q) / (float)C + eps);
        for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
            float a[VEC], sh[VEC], sc[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
            ldv<VEC>(shift, b * shs + v * VEC, dt, sh);
            ldv<VEC>(scale, b * scs + v * VEC, dt, sc);
#pragma unroll
            for (int k = 0; k < VEC; k++) a[k] = (a[k] - mu) * rs * (1.f + sc[k]) + sh[k];
            stv<VEC>(y, o + v * VEC, dt, a);
        }
        if (threadIdx.x == 0) { mean[r] = mu; rstd[r] = rs; }
    }
}
/* Block (chunk c, batch b), rows r0..r1 of batch b. Per row: dn = dy·(1 + scale),
 * dx = rstd·(dn − mean(dn) − x̂·mean(dn·x̂)); per column Σ dy (dshift) and Σ dy·x̂
 * (dscale) into part[(b·nchunk + c), :] and part[P + (b·nchunk + c), :], P = B·nchunk·C. */
template <int VEC>
__global__ void __launch_bounds__(CHUNK_T)
k_modulate_layernorm_bwd(int64_t L, int64_t C, int nchunk, int64_t scs, const void *x, const void *scale,
                         const float *mean, const float *rstd, const void *dy, void *dx, float *part_sh,
                         float *part_sc, int dt) {
    constexpr int MAXV = Groups<VEC>::n;
    const int64_t nv = C / VEC, b = blockIdx.y, c = blockIdx.x;
    const int64_t r0 = L * c / nchunk, r1 = L * (c + 1) / nchunk;
    float ash[MAXV][VEC], asc[MAXV][VEC], s1p[MAXV][VEC];
#pragma unroll
    for (int j = 0; j < MAXV; j++) {
        const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
#pragma unroll
        for (int k = 0; k < VEC; k++) { ash[j][k] = 0.f; asc[j][k] = 0.f; s1p[j][k] = 1.f; }
        if (v < nv) {
            ldv<VEC>(scale, b * scs + v * VEC, dt, s1p[j]);
#pragma unroll
            for (int k = 0; k < VEC; k++) s1p[j][k] += 1.f;
        }
    }
    for (int64_t r = r0; r < r1; r++) {
        const int64_t row = b * L + r, o = row * C;
        const float mu = mean[row], rs = rstd[row];
        float s1 = 0.f, s2 = 0.f;
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
            if (v >= nv) break;
            float a[VEC], d[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
            ldv<VEC>(dy, o + v * VEC, dt, d);
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                const float xh = (a[k] - mu) * rs, dn = d[k] * s1p[j][k];
                s1 += dn;
                s2 += dn * xh;
                ash[j][k] += d[k];
                asc[j][k] += d[k] * xh;
            }
        }
        if (!dx) continue; /* uniform over the block */
        s1 = block_sum(s1) / (float)C;
        s2 = block_sum(s2) / (float)C;
#pragma unroll
        for (int j = 0; j < MAXV; j++) {
            const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
            if (v >= nv) break;
            float a[VEC], d[VEC];
            ldv<VEC>(x, o + v * VEC, dt, a);
            ldv<VEC>(dy, o + v * VEC, dt, d);
#pragma unroll
            for (int k = 0; k < VEC; k++) a[k] = rs * (d[k] * s1p[j][k] - s1 - (a[k] - mu) * rs * s2);
            stv<VEC>(dx, o + v * VEC, dt, a);
        }
    }
    if (!part_sh && !part_sc) return;
    const int64_t po = (b * nchunk + c) * C;
#pragma unroll
    for (int j = 0; j < MAXV; j++) {
        const int64_t v = threadIdx.x + (int64_t)j * blockDim.x;
        if (v >= nv) break;
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            if (part_sh) part_sh[po + v * VEC + k] = ash[j][k];
            if (part_sc) part_sc[po + v * VEC + k] = asc[j][k];
        }
    }
}

bool fdt(ork_dtype t) { return t == ORK_F32 || t == ORK_BF16 || t == ORK_F16; }
bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

int groups(int vec) { return vec == 8 ? Groups<8>::n : Groups<1>::n; }
/* Threads for a row of C / vec column groups in the chunked kernels: every group,
 * at most groups(vec) per thread, a multiple of 32, at least 128 where the row has them. */
int chunk_threads(int64_t C, int vec) {
    const int64_t nv = C / vec;
    int64_t t = ork_cdiv(ork_cdiv(nv, groups(vec)), 32) * 32, want = ork_cdiv(nv < 128 ? nv : 128, 32) * 32;
    if (t < want) t = want;
    return (int)(t < 32 ? 32 : t);
}
/* Row kernels: 128 threads, 256 from 1024 groups (C 8192 BF16) on. */
int row_threads(int64_t nv) { return nv >= 1024 ? 256 : 128; }
unsigned row_grid(const ork_kctx *k, int64_t rows) {
    int64_t cap = (int64_t)ork_cuda_ctx_sm_count(ork_cuda_kctx(k)) * 32;
    return (unsigned)(rows < cap ? (rows < 1 ? 1 : rows) : cap);
}
/* Chunks per batch row: about 4 blocks per SM over all of B, at most L, and the
 * partials (nacc accumulators · B · nchunk · C floats) within the scratch. */
int nchunks(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int nacc) {
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    int64_t n = ork_cdiv((int64_t)cx->sm_count * 4, B);
    if (n > L) n = L;
    int64_t cap = (int64_t)cx->scratch_n / ((int64_t)nacc * B * C);
    if (n > cap) n = cap;
    if (n > 65535) n = 65535;
    return (int)(n < 1 ? 1 : n);
}
/* The fused backward's limits: groups(vec) per thread, CHUNK_T threads, the scratch. */
bool chunk_fits(const ork_kctx *k, int64_t B, int64_t C, int vec, int nacc) {
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    return C / vec <= (int64_t)groups(vec) * CHUNK_T && (int64_t)nacc * B * C <= (int64_t)cx->scratch_n && B <= 65535;
}

} // namespace

#define STREAM ork_stream(ork_cuda_kstream(k))
#define LAUNCHED() ORK_CUDA_LAUNCHED()

extern "C" {

ork_status ork_cuda_gated_add(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *x,
                              const void *gate, const void *h, void *y, ork_dtype dt) {
    if (!fdt(dt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gated_add: dtype %d (F32, BF16, F16)", (int)dt);
    const int64_t rows = B * L, gs = Bg == 1 ? 0 : C;
    if (rows <= 0 || C <= 0) return ORK_OK;
    if (!chunk_fits(k, B, C, 1, 1)) return ORK_E_UNSUPPORTED; /* the backward's limits; nothing logged: the op composes */
    if (dt == ORK_BF16 && C % 8 == 0 && al16(x) && al16(gate) && al16(h) && al16(y))
        k_bcast_gated_add<8><<<row_grid(k, rows), row_threads(C / 8), 0, STREAM>>>(rows, L, C, gs, x, gate, h, y, dt);
    else
        k_bcast_gated_add<1><<<row_grid(k, rows), row_threads(C), 0, STREAM>>>(rows, L, C, gs, x, gate, h, y, dt);
    LAUNCHED();
    return ORK_OK;
}

ork_status ork_cuda_gated_add_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bg, const void *gate,
                                  const void *h, const void *dy, void *dh, void *dgate, ork_dtype gdt, ork_dtype dt) {
    if (!fdt(dt) || (dgate && !fdt(gdt)))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gated_add_bwd: dtype %d / %d (F32, BF16, F16)", (int)dt, (int)gdt);
    if ((!dh && !dgate) || C <= 0) return ORK_OK;
    if (B * L <= 0) return dgate ? ork_cuda_fill(k, Bg * C, 0.f, dgate, gdt) : ORK_OK;
    const int vec = dt == ORK_BF16 && C % 8 == 0 && al16(gate) && al16(h) && al16(dy) && (!dh || al16(dh)) ? 8 : 1;
    if (!chunk_fits(k, B, C, vec, 1))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda gated_add_bwd: C %lld, B %lld past the fused kernel's limits",
                        (long long)C, (long long)B);
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    const int nc = nchunks(k, B, L, C, 1);
    const int64_t gs = Bg == 1 ? 0 : C;
    float *part = dgate ? cx->scratch : nullptr;
    dim3 grid((unsigned)nc, (unsigned)B);
    if (vec == 8)
        k_bcast_gated_add_bwd<8><<<grid, chunk_threads(C, 8), 0, STREAM>>>(L, C, nc, gs, gate, h, dy, dh, part, dt);
    else
        k_bcast_gated_add_bwd<1><<<grid, chunk_threads(C, 1), 0, STREAM>>>(L, C, nc, gs, gate, h, dy, dh, part, dt);
    LAUNCHED();
    if (dgate) {
        const int64_t nout = Bg * C, nq = Bg == 1 ? B * nc : nc;
        k_sum_chunks<<<(unsigned)ork_cdiv(nout, 256), 256, 0, STREAM>>>(nout, C, nq, part, dgate, gdt);
        LAUNCHED();
    }
    return ORK_OK;
}

ork_status ork_cuda_layernorm_modulate(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh, int64_t Bsc,
                                       float eps, const void *x, const void *shift, const void *scale, void *y,
                                       float *mean, float *rstd, ork_dtype dt) {
    if (!fdt(dt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda layernorm_modulate: dtype %d (F32, BF16, F16)", (int)dt);
    const int64_t rows = B * L;
    if (rows <= 0 || C <= 0) return ORK_OK;
    const int vec = dt == ORK_BF16 && C % 8 == 0 && al16(x) && al16(shift) && al16(scale) && al16(y) ? 8 : 1;
    /* the backward's limits decide here: the scalar width's, the stricter (the backward may meet
     * other alignments than this call) */
    if (!chunk_fits(k, B, C, 1, 2)) return ORK_E_UNSUPPORTED; /* nothing logged: the op composes */
    const int64_t shs = Bsh == 1 ? 0 : C, scs = Bsc == 1 ? 0 : C;
    const unsigned grid = row_grid(k, rows);
    if (vec == 8)
        k_modulate_layernorm<8><<<grid, row_threads(C / 8), 0, STREAM>>>(rows, L, C, eps, shs, scs, x, shift, scale, y,
                                                                          mean, rstd, dt);
    else
        k_modulate_layernorm<1><<<grid, row_threads(C), 0, STREAM>>>(rows, L, C, eps, shs, scs, x, shift, scale, y, mean,
                                                                      rstd, dt);
    LAUNCHED();
    return ORK_OK;
}

ork_status ork_cuda_layernorm_modulate_bwd(const ork_kctx *k, int64_t B, int64_t L, int64_t C, int64_t Bsh,
                                           int64_t Bsc, const void *x, const void *scale, const float *mean,
                                           const float *rstd, const void *dy, void *dx, void *dshift, ork_dtype shdt,
                                           void *dscale, ork_dtype scdt, ork_dtype dt) {
    if (!fdt(dt) || (dshift && !fdt(shdt)) || (dscale && !fdt(scdt)))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda layernorm_modulate_bwd: dtype %d (F32, BF16, F16)", (int)dt);
    if ((!dx && !dshift && !dscale) || C <= 0) return ORK_OK;
    if (B * L <= 0) {
        if (dshift) ORK_TRY(ork_cuda_fill(k, Bsh * C, 0.f, dshift, shdt));
        if (dscale) ORK_TRY(ork_cuda_fill(k, Bsc * C, 0.f, dscale, scdt));
        return ORK_OK;
    }
    const int vec = dt == ORK_BF16 && C % 8 == 0 && al16(x) && al16(scale) && al16(dy) && (!dx || al16(dx)) ? 8 : 1;
    if (!chunk_fits(k, B, C, vec, 2))
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda layernorm_modulate_bwd: C %lld, B %lld past the fused kernel's limits",
                        (long long)C, (long long)B);
    ork_cuda_ctx *cx = ork_cuda_kctx(k);
    const int nc = nchunks(k, B, L, C, 2);
    const int64_t P = B * nc * C, scs = Bsc == 1 ? 0 : C;
    float *psh = dshift ? cx->scratch : nullptr, *psc = dscale ? cx->scratch + P : nullptr;
    dim3 grid((unsigned)nc, (unsigned)B);
    if (vec == 8)
        k_modulate_layernorm_bwd<8><<<grid, chunk_threads(C, 8), 0, STREAM>>>(L, C, nc, scs, x, scale, mean, rstd, dy,
                                                                               dx, psh, psc, dt);
    else
        k_modulate_layernorm_bwd<1><<<grid, chunk_threads(C, 1), 0, STREAM>>>(L, C, nc, scs, x, scale, mean, rstd, dy,
                                                                               dx, psh, psc, dt);
    LAUNCHED();
    if (dshift) {
        const int64_t nout = Bsh * C, nq = Bsh == 1 ? B * nc : nc;
        k_sum_chunks<<<(unsigned)ork_cdiv(nout, 256), 256, 0, STREAM>>>(nout, C, nq, psh, dshift, shdt);
        LAUNCHED();
    }
    if (dscale) {
        const int64_t nout = Bsc * C, nq = Bsc == 1 ? B * nc : nc;
        k_sum_chunks<<<(unsigned)ork_cdiv(nout, 256), 256, 0, STREAM>>>(nout, C, nq, psc, dscale, scdt);
        LAUNCHED();
    }
    return ORK_OK;
}

} // extern "C"
