/* cuda/cuda_qkv.cu — the attention side of a transformer block in one kernel
 * each way (backend entries qkv_rope, qkv_rope_bwd; the ops qkv_rope of
 * tensor/ops_qkv.c; issue #31).
 *
 * Forward: one warp per (batch, token, head) row of each stream reads the
 * row's q, k and v (D each) from the qkv linear output (B, L_i, 3·H·D) once,
 * RMS-normalises q and k over D (F32 sum of squares, weight w), rounds the
 * normed value to the activation dtype (as the composition's rmsnorm output
 * is), rotates each pair (2j, 2j+1) by pe and writes q, k, v (B, H, L, D) at
 * the stream's offset in L, plus rstd (2, B, H, L). The values are those of
 * split + permute + rmsnorm + concat + rope up to the order of the F32 sum of
 * squares (one ulp of rstd, now and then one BF16 ulp of an output).
 *
 * Backward, the same walk: the inverse rotation of dq/dk (rounded to the
 * activation dtype, as the composition's rope backward output is), the RMS
 * norm's input gradient from the saved rstd, dv moved, written as dqkv (B,
 * L_i, 3·H·D). The norm weights' gradients Σ_rows g·x·rstd are a column
 * reduction: when asked for, every warp keeps its columns' partial sums over
 * the rows it walked (a fixed partition) in the context's scratch and a second
 * kernel adds them in a fixed order, so the result is deterministic.
 * [stream-ordered]: nothing here syncs or allocates. */
#include "cuda/cuda_util.cuh"
#include "cuda/cuda_ops.h"

namespace {

constexpr int WARPS = 8;                     /* warps per block */
constexpr int MAXP = ORK_QKV_MAX_D / 64;     /* pairs per lane: D/2 pairs over 32 lanes */

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
__device__ __forceinline__ float wsum(float v) {
#pragma unroll
    for (int s = 16; s; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}

__global__ void __launch_bounds__(WARPS * 32) k_qkv_rope(QkvK p, const float *pe, void *q, void *k, void *v,
                                                         float *rstd, int dt) {
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t)blockIdx.x * WARPS + (threadIdx.x >> 5), nwarp = (int64_t)gridDim.x * WARPS;
    const int64_t H = p.H, D = p.D, P = D / 2, HD = H * D, BHL = p.B * H * p.L;
    for (int s = 0; s < p.n; s++) {
        const int64_t Ls = p.len[s], rows = p.B * Ls * H;
        const void *x = p.qkv[s];
        for (int64_t r = warp; r < rows; r += nwarp) {
            const int64_t h = r % H, t = r / H, l = t % Ls, b = t / Ls, lg = p.off[s] + l;
            const int64_t src = t * 3 * HD + h * D, orow = (b * H + h) * p.L + lg, dst = orow * D;
            for (int part = 0; part < 2; part++) {
                const int64_t xo = src + part * HD;
                float a[MAXP], c[MAXP], ss = 0.f;
#pragma unroll
                for (int j = 0; j < MAXP; j++) {
                    const int64_t pi = lane + 32 * j;
                    a[j] = c[j] = 0.f;
                    if (pi < P) {
                        a[j] = ork_ld(x, xo + 2 * pi, dt);
                        c[j] = ork_ld(x, xo + 2 * pi + 1, dt);
                        ss += a[j] * a[j] + c[j] * c[j];
                    }
                }
                const float rs = rsqrtf(wsum(ss) / (float)D + p.eps);
                if (lane == 0) rstd[part * BHL + orow] = rs;
                const void *w = p.w[part][s];
                const int wdt = p.wdt[part][s];
                void *y = part ? k : q;
#pragma unroll
                for (int j = 0; j < MAXP; j++) {
                    const int64_t pi = lane + 32 * j;
                    if (pi >= P) continue;
                    const float wa = w ? ork_ld(w, 2 * pi, wdt) : 1.f, wb = w ? ork_ld(w, 2 * pi + 1, wdt) : 1.f;
                    const float na = rnd_dt(a[j] * rs * wa, dt), nb = rnd_dt(c[j] * rs * wb, dt);
                    const float cs = pe[(lg * P + pi) * 2], sn = pe[(lg * P + pi) * 2 + 1];
                    ork_st(y, dst + 2 * pi, cs * na - sn * nb, dt);
                    ork_st(y, dst + 2 * pi + 1, sn * na + cs * nb, dt);
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
    for (int s = 0; s < p.n; s++) {
        const int64_t Ls = p.len[s], rows = p.B * Ls * H;
        const void *x = p.qkv[s];
        void *dx = o.dqkv[s];
        float acc[2][MAXP][2];
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int j = 0; j < MAXP; j++) acc[u][j][0] = acc[u][j][1] = 0.f;
        for (int64_t r = warp; r < rows; r += nwarp) {
            const int64_t h = r % H, t = r / H, l = t % Ls, b = t / Ls, lg = p.off[s] + l;
            const int64_t src = t * 3 * HD + h * D, orow = (b * H + h) * p.L + lg, dst = orow * D;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const void *dy = u ? dk : dq;
                const void *w = p.w[u][s];
                const int wdt = p.wdt[u][s];
                const int64_t xo = src + u * HD;
                const float rs = rstd[u * BHL + orow];
                float a[MAXP], c[MAXP], ga[MAXP], gc[MAXP], wa[MAXP], wb[MAXP], sm = 0.f;
#pragma unroll
                for (int j = 0; j < MAXP; j++) {
                    const int64_t pi = lane + 32 * j;
                    a[j] = c[j] = ga[j] = gc[j] = 0.f;
                    wa[j] = wb[j] = 1.f;
                    if (pi >= P) continue;
                    a[j] = ork_ld(x, xo + 2 * pi, dt);
                    c[j] = ork_ld(x, xo + 2 * pi + 1, dt);
                    if (w) { wa[j] = ork_ld(w, 2 * pi, wdt); wb[j] = ork_ld(w, 2 * pi + 1, wdt); }
                    if (dy) { /* Rᵀ: the rope kernel's inverse with s negated */
                        const float cs = pe[(lg * P + pi) * 2], sn = -pe[(lg * P + pi) * 2 + 1];
                        const float da = ork_ld(dy, dst + 2 * pi, dt), db = ork_ld(dy, dst + 2 * pi + 1, dt);
                        ga[j] = rnd_dt(cs * da - sn * db, dt);
                        gc[j] = rnd_dt(sn * da + cs * db, dt);
                    }
                    sm += ga[j] * wa[j] * a[j] + gc[j] * wb[j] * c[j];
                }
                sm = wsum(sm) / (float)D;
#pragma unroll
                for (int j = 0; j < MAXP; j++) {
                    const int64_t pi = lane + 32 * j;
                    if (pi >= P) continue;
                    if (dx) {
                        ork_st(dx, xo + 2 * pi, rs * (ga[j] * wa[j]) - a[j] * rs * rs * rs * sm, dt);
                        ork_st(dx, xo + 2 * pi + 1, rs * (gc[j] * wb[j]) - c[j] * rs * rs * rs * sm, dt);
                    }
                    acc[u][j][0] += ga[j] * a[j] * rs;
                    acc[u][j][1] += gc[j] * c[j] * rs;
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
                for (int j = 0; j < MAXP; j++) {
                    const int64_t pi = lane + 32 * j;
                    if (pi < P) { pp[2 * pi] = acc[u][j][0]; pp[2 * pi + 1] = acc[u][j][1]; }
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
