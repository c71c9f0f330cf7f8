/* cuda/cuda_qkv.cu — the attention side of a transformer block in one kernel
 * each way (backend entries qkv_rope, qkv_rope_bwd; the ops qkv_rope of
 * tensor/ops_qkv.c; issue #31).
 *
 * Forward: one warp per (batch, token, head) row of each stream reads the
 * row's q, k and v (D each) from the qkv linear output (B, L_i, 3·H·D) once,
 * RMS-normalises q and k over D (F32 sum of squares, weight w), rounds the
 * normed value to the activation dtype (as the composition's rmsnorm output
 * is), rotates each pair (2j, 2j+1) by pe and writes q, k, v (B, H, L, D) at
 * the stream's offset in L, plus rstd (2, B, H, L). The arithmetic is the
 * composition's (split + permute + rmsnorm + concat + rope on this backend),
 * step for step and in the same order (see "The composition's arithmetic"
 * below), so the results are meant to be the same bits.
 *
 * Backward, the same walk: the inverse rotation of dq/dk (rounded to the
 * activation dtype, as the composition's rope backward output is), the RMS
 * norm's input gradient from the saved rstd, dv moved, written as dqkv (B,
 * L_i, 3·H·D), again the composition's arithmetic. The norm weights'
 * gradients Σ_rows g·x·rstd (the one result that is not the composition's
 * bits: another partition of the rows) are a column
 * reduction: when asked for, every warp keeps its columns' partial sums over
 * the rows it walked (a fixed partition) in the context's scratch and a second
 * kernel adds them in a fixed order, so the result is deterministic.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_ops.h"

namespace {

constexpr int WARPS = 8;                     /* warps per block */

struct QkvK { /* the descriptor by value, with each stream's offset in L */
    int n;
    float eps;
    int64_t B, H, D, L;
    int64_t len[ORK_QKV_MAX], off[ORK_QKV_MAX];
    const void *qkv[ORK_QKV_MAX];
    const void *w[2][ORK_QKV_MAX]; /* [0] q norm, [1] k norm */
    int wdt[2][ORK_QKV_MAX];
};
struct QkvG { /* backward outputs */
    void *dqkv[ORK_QKV_MAX];
    float *dw[2][ORK_QKV_MAX];
};

QkvK mk(const ork_qkv_desc *d) {
    QkvK p{};
    p.n = d->n;
    p.eps = d->eps;
    p.B = d->B; p.H = d->H; p.D = d->D; p.L = d->L;
    int64_t off = 0;
    for (int i = 0; i < d->n; i++) {
        p.len[i] = d->len[i];
        p.off[i] = off;
        off += d->len[i];
        p.qkv[i] = d->qkv[i];
        p.w[0][i] = d->qw[i]; p.wdt[0][i] = (int)d->qwdt[i];
        p.w[1][i] = d->kw[i]; p.wdt[1][i] = (int)d->kwdt[i];
    }
    return p;
}

__device__ __forceinline__ float rnd_dt(float v, int dt) {
    if (dt == ORK_BF16) return __bfloat162float(__float2bfloat16_rn(v));
    if (dt == ORK_F16) return __half2float(__float2half_rn(v));
    return v;
}

/* The composition's arithmetic, step for step (cuda_ew.cu: k_rmsnorm,
 * k_rmsnorm_bwd, k_rope as compiled: their SASS was read with nvdisasm), so
 * that the fused results equal it bit for bit:
 * - a row's sum over C runs in norm_threads(C) threads (128 below C = 256,
 *   256 from there to 1023), thread t adding fma(v, v, ·) over c = t, t + T,
 *   ...; each warp sums its threads with the xor butterfly (16 .. 1) and lane
 *   0's result goes to shared memory; the block adds those in warp order.
 *   Here lane j holds the elements c = j + 32k (k < KMAX), i.e. composition
 *   thread 32w + j owns k = w, w + NW, ...; the butterfly of each w runs in
 *   this one warp and every lane takes lane 0's value.
 * - rmsnorm: (x·rstd)·w; rope: y0 = fma(c, a, −(s·b)), y1 = fma(s, a, c·b)
 *   for the pair (a, b) (the backward with s negated).
 * - rmsnorm backward: Σ fma(x, dy·w, ·) as above, / C; dx = fma(rstd, dy·w,
 *   −(((x·rstd)·rstd)·rstd)·s).
 * The explicit __f*_rn intrinsics keep ptxas from contracting otherwise. */
constexpr int KMAX = ORK_QKV_MAX_D / 32; /* elements per lane */

__device__ __forceinline__ int comp_warps(int64_t D) { return D >= 256 ? 8 : 4; } /* norm_threads(D) / 32 */

__global__ void __launch_bounds__(WARPS * 32) k_qkv_rope(QkvK p, const float *pe, void *q, void *k, void *v,
                                                         float *rstd, int dt) {
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5), nwarp = (int64_t)gridDim.x * WARPS;
    const int64_t H = p.H, D = p.D, P = D / 2, HD = H * D, BHL = p.B * H * p.L;
    const int nw = comp_warps(D), odd = lane & 1;
    for (int s = 0; s < p.n; s++) {
        const int64_t Ls = p.len[s], rows = p.B * Ls * H;
        const void *x = p.qkv[s];
        for (int64_t r = warp; r < rows; r += nwarp) {
            const int64_t h = r % H, t = r / H, l = t % Ls, b = t / Ls, lg = p.off[s] + l;
            const int64_t src = t * 3 * HD + h * D, orow = (b * H + h) * p.L + lg, dst = orow * D;
            for (int part = 0; part < 2; part++) {
                const int64_t xo = src + part * HD;
                float xv[KMAX];
#pragma unroll
                for (int kk = 0; kk < KMAX; kk++) {
                    const int64_t c = lane + 32 * kk;
                    xv[kk] = c < D ? ork_ld(x, xo + c, dt) : 0.f;
                }
                float total = 0.f;
                for (int w = 0; w < nw; w++) { /* composition thread 32w + lane, then its warp's butterfly */
                    float acc = 0.f;
#pragma unroll
                    for (int kk = 0; kk < KMAX; kk++)
                        if (kk % nw == w && lane + 32 * kk < D) acc = __fmaf_rn(xv[kk], xv[kk], acc);
#pragma unroll
                    for (int o = 16; o; o >>= 1) acc = __fadd_rn(__shfl_xor_sync(0xffffffffu, acc, o), acc);
                    total = __fadd_rn(total, __shfl_sync(0xffffffffu, acc, 0));
                }
                const float rs = rsqrtf(total / (float)D + p.eps);
                if (lane == 0) rstd[part * BHL + orow] = rs;
                const void *wp = p.w[part][s];
                const int wdt = p.wdt[part][s];
                void *y = part ? k : q;
#pragma unroll
                for (int kk = 0; kk < KMAX; kk++) {
                    const int64_t c = lane + 32 * kk;
                    float nv = 0.f;
                    if (c < D) nv = rnd_dt(__fmul_rn(__fmul_rn(xv[kk], rs), wp ? ork_ld(wp, c, wdt) : 1.f), dt);
                    const float pv = __shfl_xor_sync(0xffffffffu, nv, 1); /* the pair's other element */
                    if (c >= D) continue;
                    const int64_t pi = c >> 1;
                    const float cs = pe[(lg * P + pi) * 2], sn = pe[(lg * P + pi) * 2 + 1];
                    const float out = odd ? __fmaf_rn(sn, pv, __fmul_rn(cs, nv)) : __fmaf_rn(cs, nv, -__fmul_rn(sn, pv));
                    ork_st(y, dst + c, out, dt);
                }
            }
            for (int64_t e = lane; e < D; e += 32) ork_st(v, dst + e, ork_ld(x, src + 2 * HD + e, dt), dt);
        }
    }
}

/* part (when not NULL): [s][q or k][warp][D] partial column sums of g·x·rstd. */
__global__ void __launch_bounds__(WARPS * 32) k_qkv_rope_bwd(QkvK p, const float *pe, const float *rstd,
                                                             const void *dq, const void *dk, const void *dv,
                                                             QkvG o, float *part, int dt) {
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5), nwarp = (int64_t)gridDim.x * WARPS;
    const int64_t H = p.H, D = p.D, P = D / 2, HD = H * D, BHL = p.B * H * p.L;
    const int nw = comp_warps(D), odd = lane & 1;
    for (int s = 0; s < p.n; s++) {
        const int64_t Ls = p.len[s], rows = p.B * Ls * H;
        const void *x = p.qkv[s];
        void *dx = o.dqkv[s];
        float acc[2][KMAX];
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int kk = 0; kk < KMAX; kk++) acc[u][kk] = 0.f;
        for (int64_t r = warp; r < rows; r += nwarp) {
            const int64_t h = r % H, t = r / H, l = t % Ls, b = t / Ls, lg = p.off[s] + l;
            const int64_t src = t * 3 * HD + h * D, orow = (b * H + h) * p.L + lg, dst = orow * D;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const void *dy = u ? dk : dq;
                const void *wp = p.w[u][s];
                const int wdt = p.wdt[u][s];
                const int64_t xo = src + u * HD;
                const float rs = rstd[u * BHL + orow];
                float xv[KMAX], gw[KMAX], gv[KMAX];
#pragma unroll
                for (int kk = 0; kk < KMAX; kk++) {
                    const int64_t c = lane + 32 * kk;
                    const float d0 = dy && c < D ? ork_ld(dy, dst + c, dt) : 0.f;
                    const float dp = __shfl_xor_sync(0xffffffffu, d0, 1);
                    xv[kk] = gv[kk] = gw[kk] = 0.f;
                    if (c >= D) continue;
                    xv[kk] = ork_ld(x, xo + c, dt);
                    if (dy) { /* Rᵀ: the rope kernel's inverse, s negated */
                        const int64_t pi = c >> 1;
                        const float cs = pe[(lg * P + pi) * 2], sn = -pe[(lg * P + pi) * 2 + 1];
                        gv[kk] = rnd_dt(odd ? __fmaf_rn(sn, dp, __fmul_rn(cs, d0)) : __fmaf_rn(cs, d0, -__fmul_rn(sn, dp)), dt);
                    }
                    gw[kk] = __fmul_rn(gv[kk], wp ? ork_ld(wp, c, wdt) : 1.f);
                }
                float total = 0.f;
                for (int w = 0; w < nw; w++) {
                    float a = 0.f;
#pragma unroll
                    for (int kk = 0; kk < KMAX; kk++)
                        if (kk % nw == w && lane + 32 * kk < D) a = __fmaf_rn(xv[kk], gw[kk], a);
#pragma unroll
                    for (int oo = 16; oo; oo >>= 1) a = __fadd_rn(__shfl_xor_sync(0xffffffffu, a, oo), a);
                    total = __fadd_rn(total, __shfl_sync(0xffffffffu, a, 0));
                }
                const float sm = total / (float)D;
#pragma unroll
                for (int kk = 0; kk < KMAX; kk++) {
                    const int64_t c = lane + 32 * kk;
                    if (c >= D) continue;
                    if (dx) {
                        const float t3 = __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(xv[kk], rs), rs), rs), sm);
                        ork_st(dx, xo + c, __fmaf_rn(rs, gw[kk], -t3), dt);
                    }
                    acc[u][kk] += gv[kk] * xv[kk] * rs;
                }
            }
            if (dx)
                for (int64_t e = lane; e < D; e += 32)
                    ork_st(dx, src + 2 * HD + e, dv ? ork_ld(dv, dst + e, dt) : 0.f, dt);
        }
        if (part) {
#pragma unroll
            for (int u = 0; u < 2; u++) {
                float *pp = part + (((int64_t)s * 2 + u) * nwarp + warp) * D;
#pragma unroll
                for (int kk = 0; kk < KMAX; kk++) {
                    const int64_t c = lane + 32 * kk;
                    if (c < D) pp[c] = acc[u][kk];
                }
            }
        }
    }
}

/* dw[u][s][c] = Σ_warp part[s][u][warp][c], warps in order. */
__global__ void k_qkv_dw_sum(int n, int64_t D, int64_t nwarp, const float *part, QkvG o) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)n * 2 * D) return;
    const int64_t c = i % D, su = i / D;
    const int s = (int)(su / 2), u = (int)(su % 2);
    float *dw = o.dw[u][s];
    if (!dw) return;
    const float *pp = part + su * nwarp * D + c;
    float acc = 0.f;
    for (int64_t w = 0; w < nwarp; w++) acc += pp[w * D];
    dw[c] = acc;
}

bool float_dt(int t) { return t == ORK_F32 || t == ORK_BF16 || t == ORK_F16; }

ork_status check(const ork_qkv_desc *d, ork_dtype dt, const char *what) {
    if (!float_dt(dt)) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda %s: dtype %d (F32, BF16, F16 supported)", what, (int)dt);
    if (d->n < 1 || d->n > ORK_QKV_MAX) return ORK_FAIL(ORK_E_INVALID, "cuda %s: %d streams (1..%d)", what, d->n, ORK_QKV_MAX);
    if (d->D < 2 || d->D % 2 || d->D > ORK_QKV_MAX_D)
        return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda %s: head dim %lld (even, at most %d)", what, (long long)d->D, ORK_QKV_MAX_D);
    for (int i = 0; i < d->n; i++)
        if ((d->qw[i] && !float_dt(d->qwdt[i])) || (d->kw[i] && !float_dt(d->kwdt[i])))
            return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda %s: stream %d's norm weight dtype (F32, BF16, F16 supported)", what, i);
    return ORK_OK;
}

int64_t max_rows(const ork_qkv_desc *d) {
    int64_t m = 0;
    for (int i = 0; i < d->n; i++) m = d->B * d->len[i] * d->H > m ? d->B * d->len[i] * d->H : m;
    return m;
}

} // namespace

extern "C" {

ork_status ork_cuda_qkv_rope(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, void *q, void *kk, void *v,
                             float *rstd, ork_dtype dt) {
    ORK_TRY(check(d, dt, "qkv_rope"));
    int64_t rows = max_rows(d);
    if (rows <= 0) return ORK_OK;
    int64_t blocks = ork_cdiv(rows, WARPS);
    if (blocks > (1 << 20)) blocks = 1 << 20; /* the kernel strides over the rest */
    k_qkv_rope<<<(unsigned)blocks, WARPS * 32, 0, ork_stream(ork_cuda_kstream(k))>>>(mk(d), pe, q, kk, v, rstd, (int)dt);
    ORK_CUDA_LAUNCHED();
    return ORK_OK;
}

ork_status ork_cuda_qkv_rope_bwd(const ork_kctx *k, const ork_qkv_desc *d, const float *pe, const float *rstd,
                                 const void *dq, const void *dk, const void *dv, void *const *dqkv,
                                 float *const *dqw, float *const *dkw, ork_dtype dt) {
    ORK_TRY(check(d, dt, "qkv_rope_bwd"));
    QkvG o{};
    int any_dw = 0;
    for (int i = 0; i < d->n; i++) {
        o.dqkv[i] = dqkv ? dqkv[i] : NULL;
        o.dw[0][i] = dqw ? dqw[i] : NULL;
        o.dw[1][i] = dkw ? dkw[i] : NULL;
        any_dw |= o.dw[0][i] || o.dw[1][i];
    }
    cudaStream_t st = ork_stream(ork_cuda_kstream(k));
    int64_t rows = max_rows(d);
    if (rows <= 0) { /* no rows: the weights' gradients are zero */
        for (int u = 0; u < 2; u++)
            for (int i = 0; i < d->n; i++)
                if (o.dw[u][i]) ORK_CUDA_TRY(cudaMemsetAsync(o.dw[u][i], 0, (size_t)d->D * sizeof(float), st));
        return ORK_OK;
    }
    int64_t blocks = ork_cdiv(rows, WARPS);
    float *part = NULL;
    if (any_dw) { /* a fixed partition whose partials fit the scratch */
        ork_cuda_ctx *cx = ork_cuda_kctx(k);
        int64_t cap = (int64_t)cx->scratch_n / ((int64_t)d->n * 2 * d->D * WARPS);
        if (blocks > (int64_t)cx->sm_count * 4) blocks = (int64_t)cx->sm_count * 4;
        if (blocks > cap) blocks = cap;
        if (blocks < 1) return ORK_FAIL(ORK_E_UNSUPPORTED, "cuda qkv_rope_bwd: scratch too small for the norm weights' gradient");
        part = cx->scratch;
    } else if (blocks > (1 << 20)) {
        blocks = 1 << 20;
    }
    k_qkv_rope_bwd<<<(unsigned)blocks, WARPS * 32, 0, st>>>(mk(d), pe, rstd, dq, dk, dv, o, part, (int)dt);
    ORK_CUDA_LAUNCHED();
    if (any_dw) {
        int64_t n = (int64_t)d->n * 2 * d->D;
        k_qkv_dw_sum<<<(unsigned)ork_cdiv(n, 256), 256, 0, st>>>(d->n, d->D, blocks * WARPS, part, o);
        ORK_CUDA_LAUNCHED();
    }
    return ORK_OK;
}

} // extern "C"
